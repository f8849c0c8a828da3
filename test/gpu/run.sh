#!/usr/bin/env bash
# test/gpu/run.sh - every check that needs a GPU, in one run:
#
#   bash test/gpu/run.sh            (from the repository root)
#
# For a machine with an NVIDIA GPU, CUDA 13 and NCCL under /usr/local/cuda
# (or $CLEAVE_CUDA_ROOT), and the Debian packages of scripts/setup.sh already
# installed: it installs and downloads nothing. In order:
#
#   1. nvidia-smi; configure with setup.sh's flags and the CUDA backend
#      forced on, for this GPU's architecture only, and build cleave-compile
#      and the CUDA tests in build-gpu ($CLEAVE_GPU_BUILD_DIR);
#   2. CleaveCudaRuntimeTests: every kernel of the runtime ABI on the GPU
#      against the CPU backend (none may be skipped), and the lit tests of
#      --target cuda (which run the compiled mlp on the GPU);
#   3. the gpt example compiled with --train for the cuda and the cpu
#      target and trained 10 steps each on the data of
#      test/Integration/training/<config> (as check_training.py runs it),
#      for gpt_adamw (fp32), gpt_adamw_bf16 and gpt_adamw_fp16 (dynamic loss
#      scaling, with skipped steps): every step's loss within 1e-4 relative
#      of the other's in fp32, 1.5e-2 in bf16 and 2e-3 in fp16 (the bounds
#      of check_training.py; cuBLAS sums in another order, so 16-bit
#      outputs may round one unit apart), PyTorch's losses printed beside;
#   4. one training step of a GPT-2-small-sized model (12 layers, hidden
#      768, 12 heads, sequence 1024, batch 8, vocabulary 50304; exported
#      with test/bench/bench_forward.py's build_model) timed on the GPU in
#      bf16 (--precision bf16: bf16 GEMMs on the tensor cores, f32 master
#      weights) and in fp32: tokens/s and the model FLOP utilization
#      against the card's peaks; the bf16 program runs a second time with
#      CLEAVE_CUDA_LINEAR=unfused, to time the cuBLASLt bias/GELU epilogues
#      against GEMM + epilogue kernel.
#   5. CleaveCommNcclTests: every collective of the NCCL communication
#      engine (cleave_comm.h) under mpirun, one rank per GPU, against
#      float64 references (none may be skipped).
#
# Each phase has a time limit; the whole run takes a few minutes (most of it
# the build when build-gpu is fresh). Exits 1 when any check fails, 2 when
# the machine lacks what it needs.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
START=$SECONDS
BUILD=${CLEAVE_GPU_BUILD_DIR:-build-gpu}
PY=/usr/bin/python3
LIT=/usr/lib/llvm-22/bin/lit
CUDA_ROOT=${CLEAVE_CUDA_ROOT:-/usr/local/cuda}
WORK=$(mktemp -d /tmp/cleave-gpu.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

failures=()
phase() { printf '\n=== [%3ds] %s\n' $((SECONDS - START)) "$*"; }
fail() { echo "FAIL: $*"; failures+=("$*"); }
die() { echo "error: $*" >&2; exit 2; }

#===--- 1. The machine and the build --------------------------------------===#
phase "GPU"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver"
nvidia-smi || die "nvidia-smi failed: no usable GPU"
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
  head -1 | tr -d ' .')
missing=()
for tool in cmake ninja "$PY" "$LIT" "$CUDA_ROOT/bin/nvcc"; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] || die "missing ${missing[*]} (see scripts/setup.sh)"

phase "configure and build in $BUILD (CUDA architecture ${CAP:-default})"
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
arch_flag=()
[[ "$CAP" =~ ^[0-9]+$ ]] && arch_flag=(-DCLEAVE_CUDA_ARCHITECTURES="$CAP")
timeout 120 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCLEAVE_ENABLE_CUDA=ON -DCLEAVE_CUDA_ROOT="$CUDA_ROOT" "${arch_flag[@]}" \
  >"$WORK/configure.log" 2>&1 ||
  { tail -30 "$WORK/configure.log"; die "configuring $BUILD failed"; }
grep "CUDA backend" "$WORK/configure.log"
timeout 300 cmake --build "$BUILD" --target cleave-compile \
  CleaveCudaRuntimeTests CleaveCommNcclTests cleave_rt_cuda -- -j"$(nproc)" \
  >"$WORK/build.log" 2>&1 ||
  { grep -E "error|FAILED" "$WORK/build.log" | head -40; tail -5 "$WORK/build.log"
    die "building in $BUILD failed (log above)"; }
echo "built in $((SECONDS - START)) s"
COMPILE=$ROOT/$BUILD/bin/cleave-compile

#===--- 2. Kernels: CUDA against the CPU backend --------------------------===#
phase "CleaveCudaRuntimeTests"
TESTS=$BUILD/test/unittests/CudaRuntime/CleaveCudaRuntimeTests
if timeout 240 "$TESTS" --gtest_color=no >"$WORK/gtest.log" 2>&1; then
  grep -E "^\[(==========|  PASSED  |  SKIPPED |  FAILED  )\] [0-9]" "$WORK/gtest.log"
  if grep -q "^\[  SKIPPED \]" "$WORK/gtest.log"; then
    grep "^\[  SKIPPED \]\|no CUDA device" "$WORK/gtest.log" | head -5
    fail "CleaveCudaRuntimeTests skipped tests on a machine with a GPU"
  fi
else
  rc=$?
  grep -E "Failure|error|^\[  FAILED|Expected|Which is|element" "$WORK/gtest.log" |
    head -60
  tail -5 "$WORK/gtest.log"
  fail "CleaveCudaRuntimeTests (exit $rc)"
fi

phase "lit: cleave-compile --target cuda"
if ! timeout 120 "$LIT" -v "$BUILD/test/Tools/cleave-compile-cuda.test" \
  "$BUILD/test/Tools/cleave-compile-target.mlir"; then
  fail "lit tests of --target cuda"
fi

#===--- 3. The gpt example: cuda and cpu train alike ----------------------===#
for config in gpt_adamw:1e-4 gpt_adamw_bf16:1.5e-2 gpt_adamw_fp16:2e-3; do
CASE=${config%%:*}
BOUND=${config#*:}
phase "gpt example ($CASE), 10 AdamW steps on cuda and on cpu"
DATA=$ROOT/test/Integration/training/$CASE
readarray -t FLAGS < <("$PY" -c '
import json, sys
for f in json.load(open(sys.argv[1]))["flags"]:
    print(f)' "$DATA/config.json")
for target in cuda cpu; do
  rm -f "$WORK/gpt-$target.jsonl"
  if ! timeout 120 "$COMPILE" examples/gpt/model.onnx "${FLAGS[@]}" \
    --target "$target" -o "$WORK/gpt-$target"; then
    fail "compiling the gpt example ($CASE) for $target"
    continue
  fi
  if ! timeout 120 "$WORK/gpt-$target" --inputs "$DATA/idx.npy" \
    --targets "$DATA/targets.npy" --steps 10 --log-json "$WORK/gpt-$target.jsonl" \
    --quiet; then
    fail "training the gpt example ($CASE) on $target"
  fi
done
if [ -s "$WORK/gpt-cuda.jsonl" ] && [ -s "$WORK/gpt-cpu.jsonl" ]; then
  "$PY" - "$WORK/gpt-cuda.jsonl" "$WORK/gpt-cpu.jsonl" "$DATA/expected.json" \
    "$BOUND" <<'EOF' ||
import json, sys
def losses(path):
    with open(path) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, filter(str.strip, f))
                if "step" in r}
cuda, cpu = losses(sys.argv[1]), losses(sys.argv[2])
torch = json.load(open(sys.argv[3]))["loss"]
bound = float(sys.argv[4])
print("step        cuda loss        cpu loss  |cuda-cpu|/|cpu|   pytorch loss")
worst = 0.0
for k in range(1, 11):
    if k not in cuda or k not in cpu:
        print(f"step {k}: missing from a log"); sys.exit(1)
    err = abs(cuda[k] - cpu[k]) / abs(cpu[k])
    worst = max(worst, err) if err == err else float("inf")
    print(f"{k:4d} {cuda[k]:15.9g} {cpu[k]:15.9g} {err:17.2e} {torch[k - 1]:14.9g}")
print(f"max relative difference {worst:.2e} (bound {bound:g})")
sys.exit(0 if worst <= bound else 1)
EOF
  fail "gpt losses ($CASE): cuda and cpu differ by more than $BOUND relative"
fi
done

#===--- 4. GPT-2 small: one training step timed ---------------------------===#
phase "GPT-2 small training step on the GPU (bf16 and fp32)"
# Peaks from NVIDIA's H200 datasheet (the H100 SXM's are the same): FP32
# 67 TFLOP/s; BF16 Tensor Core 989 TFLOP/s dense (1,979 with sparsity).
PEAK_FP32=${CLEAVE_PEAK_FP32_TFLOPS:-67}
PEAK_BF16=${CLEAVE_PEAK_BF16_TFLOPS:-989}
if ! timeout 480 "$PY" - "$COMPILE" "$WORK" "$GPU_NAME" "$PEAK_FP32" "$PEAK_BF16" <<'EOF'; then
import json, os, subprocess, sys, time
import numpy as np
import onnx
import torch

compiler, work, gpu, peak_fp32, peak_bf16 = sys.argv[1:6]
peak_fp32, peak_bf16 = float(peak_fp32), float(peak_bf16)
sys.path.insert(0, os.path.join(os.getcwd(), "test", "bench"))
from bench_forward import build_model, load_gpt_module  # noqa: E402
from bench_train import train_flops  # noqa: E402

VOCAB, LAYERS, HIDDEN, HEADS, SEQ, BATCH = 50304, 12, 768, 12, 1024, 8
WARMUP, STEPS = 2, 3
PRECISIONS = ("bf16", "fp32")
t0 = time.time()
model = build_model(load_gpt_module(), VOCAB, LAYERS, HIDDEN, HEADS, SEQ)
params = sum(p.numel() for p in model.parameters())
onnx_path = os.path.join(work, "gpt2s.onnx")
# Traced on one sequence (the trace runs the model on the CPU) with a
# symbolic batch, which cleave-compile fixes with --input-shape.
idx = torch.randint(0, VOCAB, (1, SEQ), dtype=torch.long)
with torch.no_grad():
    torch.onnx.export(model, (idx,), onnx_path, input_names=["idx"],
                      output_names=["logits"], opset_version=17,
                      do_constant_folding=False,
                      dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}})
# The weights in a file beside the model: the program reads them from there
# instead of carrying 500 MB of constants in its object.
onnx.save_model(onnx.load(onnx_path), onnx_path, save_as_external_data=True,
                all_tensors_to_one_file=True, location="gpt2s.weights")
print(f"exported {params / 1e6:.1f}M parameters in {time.time() - t0:.0f} s")
rng = np.random.default_rng(0)
stream = rng.integers(0, VOCAB, (2 * BATCH, SEQ + 1), dtype=np.int64)
np.save(os.path.join(work, "idx.npy"), stream[:, :-1])
np.save(os.path.join(work, "labels.npy"), stream[:, 1:])
tokens = BATCH * SEQ
flops = train_flops(VOCAB, LAYERS, HIDDEN, SEQ, BATCH)
print(f"GPU: {gpu}")
print(f"model: {LAYERS} layers, hidden {HIDDEN}, {HEADS} heads, seq {SEQ}, "
      f"batch {BATCH}, vocab {VOCAB} ({params / 1e6:.1f}M parameters), AdamW")
print(f"model FLOPs per step: {flops / 1e12:.2f} TFLOP (6 P T + 12 L B S^2 H, "
      f"matmuls only, as test/bench/bench_train.py counts them)")


def run_steps(prog, label, env):
    """Losses and the median step time (ms) of WARMUP + STEPS steps, or
    (None, None) when a loss is not finite."""
    log = prog + ".jsonl"
    if os.path.exists(log):
        os.remove(log)
    t0 = time.time()
    subprocess.run([prog, "--inputs", os.path.join(work, "idx.npy"), "--targets",
                    os.path.join(work, "labels.npy"), "--steps",
                    str(WARMUP + STEPS), "--log-json", log, "--quiet"], check=True,
                   env=dict(os.environ, **env))
    print(f"[{label}] ran {WARMUP + STEPS} steps in {time.time() - t0:.0f} s "
          "(with start-up)")
    with open(log) as f:
        records = [json.loads(line) for line in f if line.strip()]
    records = [r for r in records if "step" in r]
    losses = [r["loss"] for r in records]
    print(f"[{label}] losses: {', '.join(f'{x:.4f}' for x in losses)}")
    if not all(np.isfinite(losses)):
        print(f"[{label}] non-finite loss")
        return None, None
    return losses, float(np.median([r["ms"] for r in records[WARMUP:]]))


failed = False
for precision in PRECISIONS:
    t0 = time.time()
    prog = os.path.join(work, "gpt2s-" + precision)
    subprocess.run([compiler, onnx_path, "--input-shape", f"idx={BATCH}x{SEQ}",
                    "--train", "--loss", "cross-entropy", "--optimizer", "adamw",
                    "--lr", "6e-4", "--precision", precision, "--target", "cuda",
                    "-o", prog], check=True)
    print(f"[{precision}] compiled in {time.time() - t0:.0f} s")
    losses, ms = run_steps(prog, precision, {})
    if losses is None:
        failed = True
        continue
    if precision == "bf16":
        # The same program with each fused linear as GEMM + epilogue kernel
        # instead of one cuBLASLt call with the bias/GELU epilogue.
        unfused_losses, unfused_ms = run_steps(prog, precision + ", unfused linear",
                                               {"CLEAVE_CUDA_LINEAR": "unfused"})
        if unfused_losses is None:
            failed = True
        else:
            print(f"[{precision}] cuBLASLt epilogues: {ms:.1f} ms per step, "
                  f"unfused: {unfused_ms:.1f} ms ({unfused_ms / ms:.3f}x)")
    achieved = flops / (ms / 1000) / 1e12
    peak = peak_bf16 if precision == "bf16" else peak_fp32
    kind = "dense BF16 Tensor Core" if precision == "bf16" else "FP32"
    print(f"[{precision}] step: {ms:.1f} ms (median of steps {WARMUP + 1}.."
          f"{WARMUP + STEPS}), {tokens / (ms / 1000):,.0f} tokens/s, "
          f"{achieved:.1f} TFLOP/s: MFU {100 * achieved / peak:.1f}% of the "
          f"{kind} peak ({peak:g} TFLOP/s)")
if failed:
    sys.exit(1)
print("peaks: NVIDIA H200 datasheet (H100 SXM: the same figures); "
      "override with CLEAVE_PEAK_FP32_TFLOPS / CLEAVE_PEAK_BF16_TFLOPS")
EOF
  fail "GPT-2 small training step"
fi

#===--- 5. The NCCL communication engine ----------------------------------===#
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$NGPU" -ge 1 ] || NGPU=1
phase "CleaveCommNcclTests on $NGPU rank(s), one per GPU"
COMM_TESTS=$BUILD/test/unittests/Comm/CleaveCommNcclTests
if ! command -v mpirun >/dev/null; then
  fail "CleaveCommNcclTests: mpirun not found (openmpi-bin, see scripts/setup.sh)"
elif timeout 240 mpirun --allow-run-as-root --oversubscribe -np "$NGPU" \
  "$COMM_TESTS" --gtest_color=no >"$WORK/comm.log" 2>&1; then
  grep -E "^\[(==========|  PASSED  |  SKIPPED |  FAILED  )\] [0-9]|on all" \
    "$WORK/comm.log"
  if grep -q "^\[  SKIPPED \]" "$WORK/comm.log"; then
    grep "no CUDA device" "$WORK/comm.log" | head -5
    fail "CleaveCommNcclTests skipped tests on a machine with a GPU"
  fi
else
  rc=$?
  grep -E "Failure|error|^\[  FAILED|Expected|elements wrong|^\[rank" \
    "$WORK/comm.log" | head -60
  tail -5 "$WORK/comm.log"
  fail "CleaveCommNcclTests (exit $rc)"
fi

#===--- Summary ------------------------------------------------------------===#
phase "done"
if [ ${#failures[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failures[@]}"
  exit 1
fi
echo "all GPU checks passed in $((SECONDS - START)) s"
