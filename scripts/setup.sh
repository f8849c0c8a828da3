#!/usr/bin/env bash
# Installs the Debian packages Cleave needs (only those missing), then
# configures and builds in ./build (or $CLEAVE_BUILD_DIR) with Ninja and ccache.
# Safe to run again: nothing is reinstalled and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  cmake ninja-build ccache g++ python3
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools  # MLIR 22, lit, FileCheck
  libgtest-dev                                             # unit tests
  libonnx-dev libprotobuf-dev protobuf-compiler            # ONNX import
  libonnx-testdata python3-onnx python3-numpy              # ONNX conformance suite
  libopenblas-dev                                          # CPU runtime GEMM
  libopenmpi-dev openmpi-bin                               # MPI engine, mpirun
  clang-22 libclang-rt-22-dev                              # libFuzzer target
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "cleave: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ccache hits across checkouts in other folders (CI builds a fresh clone).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1

build_dir=${CLEAVE_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir"
