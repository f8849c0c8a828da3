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
#   2-4. test/gpu/pack.sh builds the programs of the GPU checks into one
#      archive, which test/gpu/run-packed.sh runs: every kernel of the
#      runtime ABI against the CPU backend (none may be skipped), the mlp
#      example against PyTorch, the gpt example trained 10 steps on the GPU
#      against the CPU program in fp32, bf16 and fp16, and a GPT-2-small
#      training step timed in bf16 (also with CLEAVE_CUDA_LINEAR=unfused)
#      and fp32 (see run-packed.sh). On a GPU machine without MLIR and the
#      Debian packages, run pack.sh elsewhere and run-packed.sh there;
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
CUDA_ROOT=${CLEAVE_CUDA_ROOT:-/usr/local/cuda}
WORK=$(mktemp -d /tmp/cleave-gpu.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

source test/gpu/checks.sh

#===--- 1. The machine and the build --------------------------------------===#
phase "GPU"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver"
nvidia-smi || die "nvidia-smi failed: no usable GPU"
CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
  head -1 | tr -d ' .')
missing=()
for tool in cmake ninja "$PY" "$CUDA_ROOT/bin/nvcc"; do
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

#===--- 2-4. Kernels, the examples, GPT-2 small: pack and run -------------===#
# The same archive and runner as on a GPU machine without the toolchain
# (test/gpu/pack.sh here, test/gpu/run-packed.sh there).
phase "pack (test/gpu/pack.sh)"
if CLEAVE_BUILD_DIR=$BUILD timeout 600 bash test/gpu/pack.sh "$WORK/pack" \
  >"$WORK/pack.log" 2>&1; then
  grep "^===\|pack.tar.xz" "$WORK/pack.log"
  timeout 900 bash test/gpu/run-packed.sh "$WORK/pack/pack.tar.xz" ||
    fail "test/gpu/run-packed.sh (its FAILED lines above)"
else
  tail -30 "$WORK/pack.log"
  fail "test/gpu/pack.sh"
fi

#===--- 5. The NCCL communication engine ----------------------------------===#
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$NGPU" -ge 1 ] || NGPU=1
phase "CleaveCommNcclTests on $NGPU rank(s), one per GPU"
COMM_TESTS=$BUILD/test/unittests/Comm/CleaveCommNcclTests
if ! command -v mpirun >/dev/null; then
  fail "CleaveCommNcclTests: mpirun not found (openmpi-bin, see scripts/setup.sh)"
else
  nccl_tests "$WORK/comm.log" mpirun --allow-run-as-root --oversubscribe \
    -np "$NGPU" "$COMM_TESTS"
fi

finish
