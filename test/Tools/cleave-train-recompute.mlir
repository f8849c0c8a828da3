// cleave-compile --recompute full trains exactly as without: the layers'
// forward ops computed again in the backward are the same kernels on the
// same inputs, so every loss and the final checkpoint (parameters and
// AdamW state) are bit for bit those of the step that holds its
// activations (cleave-recompute.mlir shows the IR and the smaller plan).
// RUN: rm -rf %t && mkdir -p %t && cd %t
// RUN: %python -c "import numpy as n; r = n.random.default_rng(0); n.save('x.npy', r.standard_normal((32, 16), dtype=n.float32)); n.save('t.npy', r.standard_normal((32, 4), dtype=n.float32))"
// RUN: cleave-compile %s --train --loss mse --optimizer adamw --lr 0.01 -o kept
// RUN: cleave-compile %s --train --loss mse --optimizer adamw --lr 0.01 --recompute full -o recomputed
// RUN: ./kept --inputs x.npy --targets t.npy --steps 6 --save kept-ck --log-json kept.jsonl --quiet
// RUN: ./recomputed --inputs x.npy --targets t.npy --steps 6 --save recomputed-ck --log-json recomputed.jsonl --quiet
// RUN: cmp kept-ck/model.safetensors recomputed-ck/model.safetensors
// RUN: %python -c "import json; l = lambda f: [json.loads(s)['loss'] for s in open(f)]; a, b = l('kept.jsonl'), l('recomputed.jsonl'); assert a == b and len(a) == 6, (a, b)"
// RUN: not cleave-compile %s --train --recompute some -o bad 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: --recompute must be none or full, not 'some'
// RUN: not cleave-compile %s --recompute full -o bad 2>&1 | FileCheck %s --check-prefix=NO-TRAIN
// NO-TRAIN: --recompute full needs --train

graph.param @w1 : tensor<16x16xf32> = dense<0.05> : tensor<16x16xf32>
graph.param @w2 : tensor<16x16xf32> = dense<0.04> : tensor<16x16xf32>
graph.param @w3 : tensor<16x4xf32> = dense<0.1> : tensor<16x4xf32>
func.func @forward(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %w1 = graph.read_param @w1 : tensor<16x16xf32> loc("/blocks.0/fc")
  %h = graph.matmul %x, %w1 : tensor<8x16xf32>, tensor<16x16xf32> loc("/blocks.0/fc/MatMul")
  %a = graph.gelu %h : tensor<8x16xf32> loc("/blocks.0/act")
  %r = graph.add %a, %x : tensor<8x16xf32>, tensor<8x16xf32> loc("/blocks.0/add")
  %w2 = graph.read_param @w2 : tensor<16x16xf32> loc("/blocks.1/fc")
  %h2 = graph.matmul %r, %w2 : tensor<8x16xf32>, tensor<16x16xf32> loc("/blocks.1/fc/MatMul")
  %a2 = graph.gelu %h2 : tensor<8x16xf32> loc("/blocks.1/act")
  %r2 = graph.add %a2, %r : tensor<8x16xf32>, tensor<8x16xf32> loc("/blocks.1/add")
  %w3 = graph.read_param @w3 : tensor<16x4xf32>
  %y = graph.matmul %r2, %w3 : tensor<8x16xf32>, tensor<16x4xf32> loc("head")
  return %y : tensor<8x4xf32>
}
