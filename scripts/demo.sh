#!/usr/bin/env bash
# The main job: builds Cleave, compiles the gpt example (a 2-layer GPT-2
# style decoder imported from ONNX) into a native training binary for a
# 2 x 2 mesh of CPU ranks (data parallel with ZeRO-3 x Megatron tensor and
# sequence parallel),
# and trains it under mpirun on a small text corpus (this repository's
# README.md and docs/*.md, tokenized by characters), with the loss falling
# and equal to the one-device run's; then saves a sharded checkpoint and
# exports the trained weights back into the ONNX model. Finally it checks
# the examples' forward pass against PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bin="$(cd "${CLEAVE_BUILD_DIR:-build}" && pwd)/bin"
work="${CLEAVE_DEMO_DIR:-build/demo}"
mkdir -p "$work"
root="$(pwd)"

echo "== tokenizing README.md and docs/*.md into $work/corpus.bin, and the"
echo "   examples' READMEs (text it does not train on) into $work/val.bin"
/usr/bin/python3 examples/gpt/make_corpus.py README.md docs/*.md "$work/corpus.bin"
/usr/bin/python3 examples/gpt/make_corpus.py examples/*/README.md "$work/val.bin"

flags=(--train --optimizer adamw --lr 3e-3 --grad-clip 1.0)
echo "== compiling examples/gpt/model.onnx into a training binary for a"
echo "   2 x 2 mesh: data parallel (ZeRO-3) x Megatron tensor and sequence parallel"
"$bin/cleave-compile" examples/gpt/model.onnx "${flags[@]}" \
  --mesh dp=2,tp=2 --zero 3 --sp -o "$work/train-mesh"
echo "== and into one for one device, the reference"
"$bin/cleave-compile" examples/gpt/model.onnx "${flags[@]}" -o "$work/train"

echo "== training 4000 steps of batch 2 x 8 tokens on 4 CPU ranks (mpirun)"
cd "$work"
rm -rf checkpoint log.jsonl one.jsonl
data=(--tokens corpus.bin --steps 4000 --shuffle --seed 1)
mpirun --allow-run-as-root --oversubscribe -np 4 ./train-mesh "${data[@]}" \
  --eval-tokens val.bin --eval-every 500 --eval-steps 20 \
  --log-every 500 --log-json log.jsonl --save checkpoint \
  --export-onnx trained.onnx
echo "== the same training on one device"
./train "${data[@]}" --quiet --log-json one.jsonl
/usr/bin/python3 - <<'PY'
import json
import onnx
load = lambda f: [r["loss"] for r in map(json.loads, open(f)) if "loss" in r]
evals = [r["eval_loss"] for r in map(json.loads, open("log.jsonl"))
         if "eval_loss" in r]
print(f"validation loss (text not trained on) {evals[0]:.3f} before training, "
      f"{min(evals):.3f} at best, {evals[-1]:.3f} at the end")
mesh, one = load("log.jsonl"), load("one.jsonl")
first, last = sum(mesh[:200]) / 200, sum(mesh[-200:]) / 200
print(f"mean loss of the first 200 steps {first:.3f}, of the last 200 {last:.3f}")
# The mesh sums in another order than one device: the losses agree to fp32
# rounding, whose differences AdamW amplifies only after thousands of steps.
worst = max(abs(a - b) / abs(b) for a, b in zip(mesh[:1000], one[:1000]))
one_last = sum(one[-200:]) / 200
print(f"the mesh's losses of steps 1..1000 are within {worst:.1e} (relative) "
      f"of one device's; its last 200 steps' mean within "
      f"{abs(last - one_last) / one_last:.1e}")
onnx.checker.check_model("trained.onnx")
print("trained.onnx (the model with the trained weights) passes onnx.checker")
if not last < first - 1.0:
    raise SystemExit("error: the loss did not fall")
if not evals[-1] < evals[0] - 0.5:
    raise SystemExit("error: the validation loss did not fall")
if worst > 1e-5 or abs(last - one_last) > 1e-2 * one_last:
    raise SystemExit("error: the mesh did not train as one device")
PY
cd "$root"
/usr/bin/python3 scripts/plot_loss.py "mesh=$work/log.jsonl" \
  "one device=$work/one.jsonl" -o "$work/loss.svg" --log-y

echo "== examples compiled to native programs, run, and compared with PyTorch"
/usr/bin/python3 test/Integration/run_examples.py --compile "$bin/cleave-compile"
echo "== done: the gpt example trained natively from ONNX on a 2 x 2 mesh, as on one device;"
echo "   its training and validation loss: $work/loss.svg (open it in a browser)"
