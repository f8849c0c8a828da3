#!/usr/bin/env bash
# The main job, until training binaries exist: builds Cleave and runs
# cleave-opt over the example models written in the graph/dist dialects —
# verifying them, folding them, and printing how each op may be sharded.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
opt="${CLEAVE_BUILD_DIR:-build}/bin/cleave-opt"

echo "== examples/mlp/mlp.mlir: verified and canonicalized"
"$opt" examples/mlp/mlp.mlir -canonicalize

echo "== examples/transformer/block.mlir: sharding rule of every op"
"$opt" examples/transformer/block.mlir --cleave-print-sharding-rules \
  -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | grep 'remark:' |
  sed -E 's/^[^:]*:([0-9]+):[0-9]+: remark: sharding rule /  line \1: /'
translate="${CLEAVE_BUILD_DIR:-build}/bin/cleave-translate"
for m in gpt llama moe; do
  echo "== examples/$m/model.onnx: imported from ONNX and raised; ops in @forward"
  "$translate" --import-onnx "examples/$m/model.onnx" | "$opt" --cleave-raise -canonicalize |
    grep -oE 'graph\.[a-z_]+' | grep -v 'graph.param' | sort | uniq -c | sort -rn | head -12
done
echo "== examples compiled to native programs, run, and compared with PyTorch"
/usr/bin/python3 test/Integration/run_examples.py --compile "${CLEAVE_BUILD_DIR:-build}/bin/cleave-compile"
echo "== done: the examples parse, verify, have sharding rules, import from ONNX, and run"
