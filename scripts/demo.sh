#!/usr/bin/env bash
# The main job: builds Cleave, compiles the gpt example (a 2-layer GPT-2
# style decoder imported from ONNX) into a native training binary, and
# trains it on the CPU on a small text corpus (this repository's README.md
# and docs/*.md, tokenized by characters), with the loss falling; then
# saves a checkpoint and exports the trained weights back into the ONNX
# model. Finally it checks the examples' forward pass against PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bin="$(cd "${CLEAVE_BUILD_DIR:-build}" && pwd)/bin"
work="${CLEAVE_DEMO_DIR:-build/demo}"
mkdir -p "$work"
root="$(pwd)"

echo "== tokenizing README.md and docs/*.md into $work/corpus.bin"
/usr/bin/python3 examples/gpt/make_corpus.py README.md docs/*.md "$work/corpus.bin"

echo "== compiling examples/gpt/model.onnx into a training binary (AdamW)"
"$bin/cleave-compile" examples/gpt/model.onnx --train --optimizer adamw \
  --lr 3e-3 --grad-clip 1.0 -o "$work/train"

echo "== training 4000 steps of batch 2 x 8 tokens on the CPU"
cd "$work"
rm -rf checkpoint log.jsonl
./train --tokens corpus.bin --steps 4000 --shuffle --seed 1 --log-every 500 \
  --log-json log.jsonl --save checkpoint --export-onnx trained.onnx
/usr/bin/python3 - <<'PY'
import json
import onnx
losses = [json.loads(line)["loss"] for line in open("log.jsonl")]
first, last = sum(losses[:200]) / 200, sum(losses[-200:]) / 200
print(f"mean loss of the first 200 steps {first:.3f}, of the last 200 {last:.3f}")
onnx.checker.check_model("trained.onnx")
print("trained.onnx (the model with the trained weights) passes onnx.checker")
if not last < first - 1.0:
    raise SystemExit("error: the loss did not fall")
PY
cd "$root"

echo "== examples compiled to native programs, run, and compared with PyTorch"
/usr/bin/python3 test/Integration/run_examples.py --compile "$bin/cleave-compile"
echo "== done: the gpt example trained natively from ONNX, loss falling"
