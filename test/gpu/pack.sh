#!/usr/bin/env bash
# test/gpu/pack.sh - everything the GPU checks run, built on a machine
# without a GPU into one archive, for a GPU machine that has nothing else:
#
#   bash test/gpu/pack.sh [OUT]        (from the repository root; OUT
#                                       defaults to .gpu-pack)
#
# then, on the GPU machine, with the repository beside it:
#
#   bash test/gpu/run-packed.sh OUT/pack.tar.xz
#
# The GPU machines lent to this project have a driver, CUDA 13's libraries,
# and python3 with numpy, but neither MLIR nor the Debian packages of
# scripts/setup.sh, and no network: so cleave-compile runs here, and the
# archive holds compiled programs, not models. Needs the build of
# scripts/setup.sh with the CUDA backend ($CLEAVE_BUILD_DIR, default build;
# CUDA is on by default where /usr/local/cuda has nvcc and NCCL). OUT gets:
#
#   pack.tar.xz   (about 35 MB) with
#     bin/CleaveCudaRuntimeTests     every kernel against the CPU backend
#     mlp/                           the mlp example for --target cuda
#     train/<case>/                  a training program for cuda: the gpt
#                                    and moe examples with the flags and data
#                                    of test/Integration/training/<case>
#                                    (fp32, bf16, fp16), the llama example on
#                                    random tokens (fp32, bf16); cpu.jsonl:
#                                    the losses of the same program for the
#                                    CPU, run here
#     gpt2s/                         a GPT-2-small-sized model (12 layers,
#                                    hidden 768, sequence 1024, batch 8) for
#                                    cuda in bf16 and fp32; its weights are
#                                    not packed (500 MB): manifest.json says
#                                    where the programs read them and how
#                                    run-packed.sh fills them
#     nccl/CleaveCommNcclTests       the NCCL engine's tests, when the build
#                                    has them (CUDA, NCCL and MPI found)
#     mpi/                           Open MPI's components (mca/), help
#                                    texts (share/) and settings (etc/), so
#                                    that those tests start as a one-rank
#                                    MPI singleton without Open MPI installed
#     lib/                           the shared libraries these programs
#                                    and components need beyond glibc,
#                                    libstdc++, zlib and CUDA's (OpenBLAS,
#                                    protobuf, Open MPI, ...)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${CLEAVE_BUILD_DIR:-build}
OUT=${1:-.gpu-pack}
PY=/usr/bin/python3
# The GPT-2-small programs read their weights from this absolute path (the
# import records external data by absolute path); run-packed.sh writes them
# there.
GPT2S_DIR=/tmp/cleave-gpt2s
STAGE=$(mktemp -d /tmp/cleave-pack.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
PACK=$STAGE/pack

die() { echo "error: $*" >&2; exit 2; }
step() { printf '=== [%3ds] %s\n' "$SECONDS" "$*"; }

[ -f "$BUILD/CMakeCache.txt" ] || die "no build in $BUILD (run scripts/setup.sh)"
grep -q "^CLEAVE_ENABLE_CUDA:BOOL=ON" "$BUILD/CMakeCache.txt" ||
  die "$BUILD is configured without the CUDA backend (-DCLEAVE_ENABLE_CUDA=ON)"
step "build cleave-compile and CleaveCudaRuntimeTests in $BUILD"
cmake --build "$BUILD" --target cleave-compile CleaveCudaRuntimeTests >/dev/null
COMPILE=$ROOT/$BUILD/bin/cleave-compile
mkdir -p "$PACK"/{bin,lib,mlp,train,gpt2s}
cp "$BUILD/test/unittests/CudaRuntime/CleaveCudaRuntimeTests" "$PACK/bin/"
grep "^CLEAVE_CUDA_ARCHITECTURES" "$BUILD/CMakeCache.txt" |
  sed 's/.*=/cuda architectures: /' >"$PACK/build.txt"
git rev-parse HEAD >>"$PACK/build.txt" 2>/dev/null || true

step "mlp example (inference) for cuda"
"$COMPILE" examples/mlp/model.onnx --target cuda -o "$PACK/mlp/mlp"

# One folder per training case: the cuda program, its data, the CPU twin's
# losses (cpu.jsonl), the bound on their relative difference (bound: 1e-4
# in fp32, check_training.py's 16-bit bounds otherwise) and, where
# test/Integration/training records them, PyTorch's losses (expected.json).
pack_training() { # NAME MODEL DATA-DIR BOUND FLAGS...
  local name=$1 model=$2 data=$3 bound=$4
  shift 4
  local dir=$PACK/train/$name
  mkdir -p "$dir"
  cp "$data/idx.npy" "$data/targets.npy" "$dir/"
  if [ -f "$data/expected.json" ]; then cp "$data/expected.json" "$dir/"; fi
  echo "$bound" >"$dir/bound"
  "$COMPILE" "examples/$model/model.onnx" "$@" --target cuda -o "$dir/train"
  "$COMPILE" "examples/$model/model.onnx" "$@" --target cpu -o "$STAGE/cpu"
  "$STAGE/cpu" --inputs "$dir/idx.npy" --targets "$dir/targets.npy" \
    --steps 10 --log-json "$dir/cpu.jsonl" --quiet
}
bound_of() { # PRECISION
  case $1 in bf16) echo 1.5e-2 ;; fp16) echo 2e-3 ;; *) echo 1e-4 ;; esac
}
config_field() { # CONFIG.JSON FIELD DEFAULT
  "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], sys.argv[3]))' "$@"
}
for config in gpt_adamw gpt_adamw_bf16 gpt_adamw_fp16 moe_adamw moe_adamw_bf16; do
  step "training case $config: cuda program, cpu losses"
  data=test/Integration/training/$config
  readarray -t flags < <("$PY" -c '
import json, sys
for f in json.load(open(sys.argv[1]))["flags"]:
    print(f)' "$data/config.json")
  pack_training "$config" "$(config_field "$data/config.json" model gpt)" "$data" \
    "$(bound_of "$(config_field "$data/config.json" precision fp32)")" "${flags[@]}"
done
# The llama example (RMS norm, SwiGLU, rotary embeddings, grouped-query
# attention) has no PyTorch training reference: the CPU twin is the
# reference, on random tokens.
"$PY" - "$STAGE/llama-data" <<'EOF'
import os, sys
import numpy as np
os.makedirs(sys.argv[1], exist_ok=True)
stream = np.random.default_rng(4).integers(0, 64, size=(6, 9)).astype(np.int64)
np.save(os.path.join(sys.argv[1], "idx.npy"), stream[:, :-1])
np.save(os.path.join(sys.argv[1], "targets.npy"), stream[:, 1:])
EOF
for precision in fp32 bf16; do
  step "training case llama_adamw_$precision: cuda program, cpu losses"
  pack_training "llama_adamw_$precision" llama "$STAGE/llama-data" \
    "$(bound_of "$precision")" --train --loss cross-entropy --optimizer adamw \
    --lr 0.01 --weight-decay 0.01 --precision "$precision"
done

step "GPT-2 small: export (weights in $GPT2S_DIR) and compile, bf16 and fp32"
rm -rf "$GPT2S_DIR"
mkdir -p "$GPT2S_DIR"
"$PY" - "$GPT2S_DIR" "$PACK/gpt2s" <<'EOF'
import json, os, sys, time
import numpy as np
import onnx
import torch

src, out = sys.argv[1:3]
sys.path.insert(0, os.path.join(os.getcwd(), "test", "bench"))
from bench_forward import build_model, load_gpt_module  # noqa: E402
from bench_train import train_flops  # noqa: E402

VOCAB, LAYERS, HIDDEN, HEADS, SEQ, BATCH = 50304, 12, 768, 12, 1024, 8
t0 = time.time()
model = build_model(load_gpt_module(), VOCAB, LAYERS, HIDDEN, HEADS, SEQ)
onnx_path = os.path.join(src, "gpt2s.onnx")
idx = torch.randint(0, VOCAB, (1, SEQ), dtype=torch.long)
with torch.no_grad():
    torch.onnx.export(model, (idx,), onnx_path, input_names=["idx"],
                      output_names=["logits"], opset_version=17,
                      do_constant_folding=False,
                      dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}})
m = onnx.load(onnx_path)
onnx.save_model(m, onnx_path, save_as_external_data=True,
                all_tensors_to_one_file=True, location="gpt2s.weights",
                size_threshold=0)
# Where each float initializer lies in the weights file, and how the GPU
# machine fills it: layer-norm scales 1, biases 0, the rest N(0, 0.02).
tensors = []
for t in onnx.load(onnx_path, load_external_data=False).graph.initializer:
    if t.data_location != onnx.TensorProto.EXTERNAL:
        continue
    info = {e.key: e.value for e in t.external_data}
    name = t.name
    fill = ("one" if ("ln" in name or "norm" in name) and name.endswith("weight")
            else "zero" if name.endswith("bias") else "normal")
    tensors.append({"name": name, "offset": int(info.get("offset", 0)),
                    "length": int(info["length"]), "dtype": t.data_type,
                    "fill": fill})
params = sum(p.numel() for p in model.parameters())
weights = os.path.join(src, "gpt2s.weights")
manifest = {
    "weights": weights, "bytes": os.path.getsize(weights), "tensors": tensors,
    "vocab": VOCAB, "layers": LAYERS, "hidden": HIDDEN, "heads": HEADS,
    "seq": SEQ, "batch": BATCH, "params": params,
    "flops": train_flops(VOCAB, LAYERS, HIDDEN, SEQ, BATCH),
}
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
rng = np.random.default_rng(0)
stream = rng.integers(0, VOCAB, (2 * BATCH, SEQ + 1), dtype=np.int64)
np.save(os.path.join(out, "idx.npy"), stream[:, :-1])
np.save(os.path.join(out, "labels.npy"), stream[:, 1:])
print(f"exported {params / 1e6:.1f}M parameters, {len(tensors)} tensors, "
      f"in {time.time() - t0:.0f} s")
EOF
for precision in bf16 fp32; do
  "$COMPILE" "$GPT2S_DIR/gpt2s.onnx" --input-shape idx=8x1024 --train \
    --loss cross-entropy --optimizer adamw --lr 6e-4 --precision "$precision" \
    --target cuda -o "$PACK/gpt2s/train-$precision"
done
rm -rf "$GPT2S_DIR"

step "NCCL engine tests and Open MPI's components"
if cmake --build "$BUILD" --target CleaveCommNcclTests >/dev/null 2>&1; then
  mkdir -p "$PACK/nccl" "$PACK/mpi"/{mca,share,etc}
  cp "$BUILD/test/unittests/Comm/CleaveCommNcclTests" "$PACK/nccl/"
  # Where this machine's Open MPI keeps its components and texts (Debian:
  # /usr/lib/<triple>/openmpi/lib/openmpi3, /usr/share/openmpi,
  # /etc/openmpi); run-packed.sh points OPAL_PKGLIBDIR and friends at the
  # copies.
  mpi_lib=$(ldd "$PACK/nccl/CleaveCommNcclTests" | awk '$1 == "libmpi.so.40" {print $3}')
  [ -n "$mpi_lib" ] || die "CleaveCommNcclTests does not link libmpi.so.40"
  components=$(dirname "$(readlink -f "$mpi_lib")")/openmpi/lib/openmpi3
  cp -L "$components"/mca_*.so "$PACK/mpi/mca/" ||
    die "no Open MPI components in $components"
  cp -r /usr/share/openmpi/. "$PACK/mpi/share/"
  cp /etc/openmpi/openmpi-mca-params.conf "$PACK/mpi/etc/"
else
  echo "note: the build has no CleaveCommNcclTests (NCCL or MPI not found): not packed"
fi

step "shared libraries"
# What the programs load beyond the base system and CUDA's own libraries.
base='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libz)\.so'
for exe in "$PACK"/bin/* "$PACK"/mlp/mlp "$PACK"/train/*/train "$PACK"/gpt2s/train-* \
  "$PACK"/nccl/* "$PACK"/mpi/mca/*.so; do
  [ -e "$exe" ] || continue
  ldd "$exe" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  [[ "$soname" =~ $base ]] && continue
  [[ "$path" == *cuda* ]] && continue
  cp -L "$path" "$PACK/lib/$soname"
done
ls "$PACK/lib"

step "archive"
mkdir -p "$OUT"
tar -C "$STAGE" -cf - pack | xz -T0 -6 >"$OUT/pack.tar.xz"
ls -la "$OUT/pack.tar.xz"
echo "run on a GPU machine: bash test/gpu/run-packed.sh $OUT/pack.tar.xz"
