#!/usr/bin/env bash
# test/gpu/run-packed.sh - the GPU checks, from the archive of
# test/gpu/pack.sh, on a machine with an NVIDIA GPU:
#
#   bash test/gpu/run-packed.sh PACK.tar.xz    (from the repository root)
#
# Needs nvidia-smi, CUDA 13's runtime and cuBLAS libraries (under
# /usr/local/cuda, $CLEAVE_CUDA_LIB, or python3's nvidia-* packages) and
# python3 with numpy ($CLEAVE_PYTHON); builds and downloads nothing. In
# order:
#
#   1. CleaveCudaRuntimeTests: every kernel of the runtime ABI on the GPU
#      against the CPU backend (none may be skipped);
#   2. CleaveCommNcclTests: the NCCL engine's tests on one rank, started as
#      an MPI singleton with the archive's Open MPI (none may be skipped;
#      needs libnccl.so.2: CUDA's, $CLEAVE_NCCL_LIB, or python3's
#      nvidia-nccl package);
#   3. the mlp example on the GPU against its PyTorch logits (1e-4);
#   4. 10 training steps on the GPU of the gpt example (gpt_adamw in fp32,
#      gpt_adamw_bf16, gpt_adamw_fp16 with dynamic loss scaling and skipped
#      steps), the moe example (moe_adamw, moe_adamw_bf16 with the f32
#      router), on the data of test/Integration/training/<case>, and the
#      llama example in fp32 and bf16 on random tokens: every step's loss
#      within 1e-4 relative of the CPU program's in fp32, 1.5e-2 in bf16 and
#      2e-3 in fp16 (check_training.py's bounds; cuBLAS sums in another
#      order), PyTorch's losses printed beside where recorded;
#   5. a GPT-2-small-sized model's training step timed in bf16 (also with
#      CLEAVE_CUDA_LINEAR=unfused: the cuBLASLt epilogues against GEMM +
#      epilogue kernel, with CLEAVE_CUDA_ATTENTION=fused-simt: the
#      attention forward on CUDA cores instead of tensor cores, and with
#      CLEAVE_CUDA_ATTENTION=materialized: the fused attention kernels
#      against TF32 cuBLAS) and fp32: tokens/s and
#      the model FLOP utilization against the card's peaks;
#   6. CleaveCudaRuntimeTests again under compute-sanitizer's memcheck
#      (out-of-bounds and misaligned device accesses, CUDA API errors), in
#      the time left before $CLEAVE_GPU_DEADLINE_S (default 540 s from the
#      start, under the device tool's 600 s per command): a report of the
#      tests it finished when time runs out, a failure on any error found.
#
# Exits 1 when a check fails, 2 when the machine lacks what it needs.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
START=$SECONDS
ARCHIVE=${1:-}
# python3 with numpy: $CLEAVE_PYTHON, else python3, else /usr/bin/python3.
PY=${CLEAVE_PYTHON:-}
if [ -z "$PY" ]; then
  for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c "import numpy" 2>/dev/null; then
      PY=$candidate
      break
    fi
  done
fi
WORK=$(mktemp -d /tmp/cleave-gpu.XXXXXX)
trap 'rm -rf "$WORK" /tmp/cleave-gpt2s' EXIT

source test/gpu/checks.sh

[ -n "$ARCHIVE" ] || die "usage: run-packed.sh PACK.tar.xz (made by test/gpu/pack.sh)"
[ -f "$ARCHIVE" ] || die "$ARCHIVE: no such file"

#===--- The machine ------------------------------------------------------===#
phase "GPU"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver"
nvidia-smi || die "nvidia-smi failed: no usable GPU"
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
[ -n "$PY" ] && "$PY" -c "import numpy" 2>/dev/null ||
  die "no python3 with numpy (set CLEAVE_PYTHON)"
tar -C "$WORK" -xJf "$ARCHIVE" || die "cannot unpack $ARCHIVE"
PACK=$WORK/pack
cat "$PACK/build.txt"

# CUDA's libraries: the toolkit's, or those of python3's nvidia-* wheels.
cuda_dirs=()
for d in ${CLEAVE_CUDA_LIB:-} /usr/local/cuda/lib64 /usr/local/cuda/lib \
  /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -n "$d" ] && [ -e "$d/libcublasLt.so.13" ] && cuda_dirs+=("$d")
done
if [ ${#cuda_dirs[@]} -eq 0 ]; then
  while read -r d; do cuda_dirs+=("$d"); done < <("$PY" - <<'EOF' 2>/dev/null
import glob, os, site
for base in site.getsitepackages():
    for lib in ("libcublasLt.so.13", "libcudart.so.13"):
        for path in glob.glob(os.path.join(base, "nvidia", "**", lib), recursive=True):
            print(os.path.dirname(path))
EOF
  )
fi
[ ${#cuda_dirs[@]} -gt 0 ] || die "no libcublasLt.so.13 found (set CLEAVE_CUDA_LIB)"
LIBS="$PACK/lib$(printf ':%s' "${cuda_dirs[@]}")"
echo "libraries: $LIBS"
# Only the packed programs see these libraries (python3 keeps its own).
packed() { LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
for exe in "$PACK"/bin/* "$PACK"/mlp/mlp "$PACK"/train/*/train "$PACK"/gpt2s/train-*; do
  missing=$(packed ldd "$exe" | grep "not found")
  [ -z "$missing" ] || die "$exe: $missing"
done

#===--- 1. Kernels: CUDA against the CPU backend --------------------------===#
phase "CleaveCudaRuntimeTests"
if packed timeout 300 "$PACK/bin/CleaveCudaRuntimeTests" \
  --gtest_color=no >"$WORK/gtest.log" 2>&1; then
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

#===--- 2. The NCCL engine on one rank -----------------------------------===#
phase "CleaveCommNcclTests: the NCCL engine on one rank (an MPI singleton)"
if [ ! -x "$PACK/nccl/CleaveCommNcclTests" ]; then
  echo "note: not in the archive (its build had no NCCL or no MPI)"
else
  nccl_dir=
  for d in ${CLEAVE_NCCL_LIB:-} "${cuda_dirs[@]}" /usr/local/cuda/lib64 \
    /usr/local/cuda/lib; do
    [ -z "$nccl_dir" ] && [ -e "$d/libnccl.so.2" ] && nccl_dir=$d
  done
  [ -n "$nccl_dir" ] || nccl_dir=$("$PY" - <<'EOF' 2>/dev/null
import glob, os, site
for base in site.getsitepackages():
    for path in glob.glob(os.path.join(base, "nvidia", "**", "libnccl.so.2"), recursive=True):
        print(os.path.dirname(path))
        raise SystemExit
EOF
  )
  MPI=$PACK/mpi
  # Open MPI finds its components, texts and settings in the archive, and
  # a singleton starts without forking its runtime daemon.
  nccl_env=(env "LD_LIBRARY_PATH=$LIBS:$nccl_dir" "OPAL_PREFIX=$MPI"
    "OPAL_PKGLIBDIR=$MPI/mca" "OPAL_PKGDATADIR=$MPI/share"
    "OPAL_SYSCONFDIR=$MPI/etc" OMPI_MCA_ess_singleton_isolated=1
    OMPI_MCA_mca_base_component_show_load_errors=0)
  if [ -z "$nccl_dir" ]; then
    fail "CleaveCommNcclTests: no libnccl.so.2 found (set CLEAVE_NCCL_LIB)"
  elif missing=$("${nccl_env[@]}" ldd "$PACK/nccl/CleaveCommNcclTests" |
    grep "not found"); then
    fail "CleaveCommNcclTests: $missing"
  else
    echo "libnccl.so.2 from $nccl_dir"
    nccl_tests "$WORK/comm.log" "${nccl_env[@]}" "$PACK/nccl/CleaveCommNcclTests"
  fi
fi

#===--- 3. The mlp example's inference -----------------------------------===#
phase "mlp example on the GPU against PyTorch's logits"
if packed timeout 60 "$PACK/mlp/mlp" \
  --input examples/mlp/input_x.npy --output-dir "$WORK/mlp-out"; then
  "$PY" - "$WORK/mlp-out/logits.npy" examples/mlp/expected_logits.npy <<'EOF' ||
import sys
import numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))
print(f"logits {got.shape}: max |cuda - pytorch| / max |pytorch| = {err:.2e} (bound 1e-4)")
sys.exit(0 if got.shape == want.shape and err <= 1e-4 else 1)
EOF
  fail "mlp logits on the GPU differ from PyTorch's"
else
  fail "running the mlp example on the GPU"
fi

#===--- 4. Training: cuda against cpu -----------------------------------===#
for DIR in "$PACK"/train/*/; do
  CASE=$(basename "$DIR")
  BOUND=$(cat "$DIR/bound")
  phase "$CASE: 10 training steps on the GPU against the CPU program"
  if ! packed timeout 120 "$DIR/train" --inputs "$DIR/idx.npy" \
    --targets "$DIR/targets.npy" --steps 10 --log-json "$WORK/$CASE.jsonl" --quiet; then
    fail "training $CASE on the GPU"
    continue
  fi
  "$PY" - "$WORK/$CASE.jsonl" "$DIR/cpu.jsonl" "$DIR/expected.json" "$BOUND" <<'EOF' ||
import json, os, sys
def losses(path):
    with open(path) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, filter(str.strip, f))
                if "step" in r}
cuda, cpu = losses(sys.argv[1]), losses(sys.argv[2])
torch = (json.load(open(sys.argv[3]))["loss"] if os.path.exists(sys.argv[3])
         else [float("nan")] * 10)
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
  fail "$CASE losses: cuda and cpu differ by more than $BOUND relative"
done

#===--- 5. GPT-2 small: one training step timed ---------------------------===#
phase "GPT-2 small training step on the GPU (bf16 and fp32)"
# Peaks from NVIDIA's H200 datasheet (the H100 SXM's are the same): FP32
# 67 TFLOP/s; BF16 Tensor Core 989 TFLOP/s dense (1,979 with sparsity).
PEAK_FP32=${CLEAVE_PEAK_FP32_TFLOPS:-67}
PEAK_BF16=${CLEAVE_PEAK_BF16_TFLOPS:-989}
if ! timeout 420 "$PY" - "$PACK/gpt2s" "$LIBS" "$GPU_NAME" "$PEAK_FP32" \
  "$PEAK_BF16" <<'EOF'; then
import json, os, subprocess, sys, time
import numpy as np

pack, libs, gpu, peak_fp32, peak_bf16 = sys.argv[1:6]
peak_fp32, peak_bf16 = float(peak_fp32), float(peak_bf16)
WARMUP, STEPS = 2, 3
m = json.load(open(os.path.join(pack, "manifest.json")))
# The weights the programs read (pack.sh's export, not packed): layer-norm
# scales 1, biases 0, the rest N(0, 0.02), as GPT-2 initializes them.
t0 = time.time()
os.makedirs(os.path.dirname(m["weights"]), exist_ok=True)
rng = np.random.default_rng(0)
with open(m["weights"], "wb") as f:
    f.truncate(m["bytes"])
    for t in m["tensors"]:
        if t["dtype"] != 1:  # float32
            sys.exit(f"error: {t['name']}: ONNX dtype {t['dtype']}, expected float")
        n = t["length"] // 4
        value = (np.ones(n, np.float32) if t["fill"] == "one" else
                 np.zeros(n, np.float32) if t["fill"] == "zero" else
                 (rng.standard_normal(n, dtype=np.float32) * 0.02))
        f.seek(t["offset"])
        f.write(value.tobytes())
print(f"wrote {m['bytes'] / 1e6:.0f} MB of weights in {time.time() - t0:.0f} s")
tokens = m["batch"] * m["seq"]
print(f"GPU: {gpu}")
print(f"model: {m['layers']} layers, hidden {m['hidden']}, {m['heads']} heads, "
      f"seq {m['seq']}, batch {m['batch']}, vocab {m['vocab']} "
      f"({m['params'] / 1e6:.1f}M parameters), AdamW")
print(f"model FLOPs per step: {m['flops'] / 1e12:.2f} TFLOP (6 P T + 12 L B S^2 H, "
      f"matmuls only, as test/bench/bench_train.py counts them)")
env = dict(os.environ, LD_LIBRARY_PATH=libs)


def run_steps(prog, label, extra, args=()):
    """Losses and the median step time (ms), or (None, None) when a loss is
    not finite."""
    log = os.path.join(os.path.dirname(m["weights"]), label.replace(" ", "_") + ".jsonl")
    t0 = time.time()
    subprocess.run([prog, "--inputs", os.path.join(pack, "idx.npy"), "--targets",
                    os.path.join(pack, "labels.npy"), "--steps",
                    str(WARMUP + STEPS), "--log-json", log, "--quiet", *args],
                   check=True, env=dict(env, **extra))
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
for precision in ("bf16", "fp32"):
    prog = os.path.join(pack, "train-" + precision)
    losses, ms = run_steps(prog, precision, {})
    if losses is None:
        failed = True
        continue
    if precision == "bf16":
        # The same program with each fused linear as GEMM + epilogue kernel,
        # with the materialized (TF32 cuBLAS) attention instead of the fused
        # kernels, and with the host waiting for each step before it
        # prepares the next (no overlap of launches with the GPU's work).
        for label, env_var, value, args in (
                ("unfused linear", "CLEAVE_CUDA_LINEAR", "unfused", ()),
                ("CUDA-core attention forward", "CLEAVE_CUDA_ATTENTION", "fused-simt", ()),
                ("materialized attention", "CLEAVE_CUDA_ATTENTION", "materialized", ()),
                ("steps not overlapped", None, None, ("--no-overlap",))):
            other_losses, other_ms = run_steps(
                prog, f"{precision} {label}",
                {env_var: value} if env_var else {}, args)
            how = f"{env_var}={value}" if env_var else " ".join(args)
            if other_losses is None:
                failed = True
            else:
                print(f"[{precision}] default: {ms:.1f} ms per step; {label} "
                      f"({how}): {other_ms:.1f} ms "
                      f"({other_ms / ms:.3f}x)")
    achieved = m["flops"] / (ms / 1000) / 1e12
    peak = peak_bf16 if precision == "bf16" else peak_fp32
    kind = "dense BF16 Tensor Core" if precision == "bf16" else "FP32"
    print(f"[{precision}] step: {ms:.1f} ms (median of steps {WARMUP + 1}.."
          f"{WARMUP + STEPS}), {tokens / (ms / 1000):,.0f} tokens/s, "
          f"{achieved:.1f} TFLOP/s: MFU {100 * achieved / peak:.1f}% of the "
          f"{kind} peak ({peak:g} TFLOP/s)")
sys.exit(1 if failed else 0)
EOF
  fail "the GPT-2-small training step"
fi

#===--- 6. The kernels under compute-sanitizer (memcheck) ----------------===#
phase "CleaveCudaRuntimeTests under compute-sanitizer memcheck"
SANITIZER=$(command -v compute-sanitizer || true)
for candidate in /usr/local/cuda*/bin/compute-sanitizer \
  /usr/local/cuda*/compute-sanitizer/compute-sanitizer \
  /opt/nvidia/*/compute-sanitizer; do
  [ -z "$SANITIZER" ] && [ -x "$candidate" ] && SANITIZER=$candidate
done
LEFT=$((${CLEAVE_GPU_DEADLINE_S:-540} - (SECONDS - START)))
if [ -z "$SANITIZER" ]; then
  echo "note: compute-sanitizer not found; memcheck not run"
elif [ "$LEFT" -lt 30 ]; then
  echo "note: ${LEFT} s left before the deadline; memcheck not run"
else
  echo "memcheck for at most $LEFT s ($SANITIZER)"
  packed timeout "$LEFT" "$SANITIZER" --tool memcheck --error-exitcode 3 \
    "$PACK/bin/CleaveCudaRuntimeTests" --gtest_color=no >"$WORK/memcheck.log" 2>&1
  rc=$?
  done_tests=$(grep -c "^\[       OK \]" "$WORK/memcheck.log")
  grep -E "^========= (ERROR SUMMARY|Invalid|Misaligned|Program hit|  at |    by )" \
    "$WORK/memcheck.log" | head -40
  if grep -qE "^========= (Invalid|Misaligned|Program hit|Out-of-range)" "$WORK/memcheck.log" ||
    [ "$rc" -eq 3 ]; then
    fail "compute-sanitizer memcheck found errors ($done_tests tests finished)"
  elif [ "$rc" -eq 124 ]; then
    echo "memcheck stopped after $LEFT s: $done_tests tests finished without an error"
  elif [ "$rc" -ne 0 ]; then
    tail -5 "$WORK/memcheck.log"
    fail "CleaveCudaRuntimeTests under memcheck (exit $rc)"
  else
    echo "memcheck: all $done_tests tests finished without an error"
  fi
fi

finish
