#!/usr/bin/env bash
# Builds the ONNX importer fuzzer with clang-22 (libFuzzer + UBSan) in
# its own build folder and runs it briefly on a seed corpus of real models.
# Usage: run.sh SOURCE_DIR BUILD_DIR [RUNS]. Exits 77 (skipped) without clang.
set -euo pipefail
src=$1
build=$2
runs=${3:-3000}
clangxx=$(command -v clang++-22 || true)
if [ -z "$clangxx" ] || [ ! -e /usr/lib/llvm-22/lib/clang/22/lib/linux/libclang_rt.fuzzer-x86_64.a ]; then
  echo "skipped: clang++-22 with libFuzzer (clang-22, libclang-rt-22-dev) is not installed"
  exit 77
fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER="$clangxx" "${launcher[@]}" \
  -DCLEAVE_ENABLE_FUZZER=ON -DCLEAVE_USE_GOLD=OFF > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
cmake --build "$build" --target onnx-import-fuzzer
corpus="$build/fuzz-corpus"
rm -rf "$corpus" && mkdir -p "$corpus"
cp "$src"/examples/*/model.onnx "$corpus"/ 2>/dev/null || true
i=0
for f in "$src"/examples/*/model.onnx "$src"/test/Import/Inputs/*.onnx; do
  [ -e "$f" ] && cp "$f" "$corpus/seed$((i++)).onnx"
done
# -rss_limit and -timeout turn a leak-like blowup or a hang into a failure.
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
"$build/test/fuzz/onnx-import-fuzzer" -runs="$runs" -max_len=262144 -timeout=20 \
  -rss_limit_mb=4096 -seed=1 -print_final_stats=1 -artifact_prefix="$build/" "$corpus"
echo "fuzzer: $runs runs without a crash"
