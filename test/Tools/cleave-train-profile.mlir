// The training binary's --profile: every op of the chosen steps timed from
// its mark to the next and written as a Chrome trace, with the summary of
// the ops that took the most time. check_profile.py checks the trace's
// shape (events inside their steps, in order, the same ops every step) and
// the FLOPs against the analytical figures of this model: the forward
// matmuls 2 x 8 x (16 x 32 + 32 x 4) = 10240, and the step with the
// backward's products (both weight gradients, 10240, and fc2's input
// gradient, 2 x 8 x 4 x 32 = 2048; x needs none) 22528.
// RUN: rm -rf %t && mkdir -p %t && cd %t
// RUN: %python -c "import numpy as n; r = n.random.default_rng(0); n.save('x.npy', r.standard_normal((32, 16), dtype=n.float32)); n.save('t.npy', r.standard_normal((32, 4), dtype=n.float32))"
// RUN: cleave-compile %s --train --loss mse --optimizer adamw --lr 1e-3 -o train
// RUN: ./train --inputs x.npy --targets t.npy --steps 5 --profile out/p.json --profile-steps 2 | FileCheck %s
// CHECK: profile: wrote out/p.json: steps 2..3 on 1 rank (cpu); rank 0's step {{[0-9.]+}} ms, {{[0-9.]+}}% of it in its {{[0-9]+}} ops
// CHECK-NEXT: ms/step  share calls  GFLOP/s  op, types (first at)
// CHECK-DAG: graph.matmul f32[8,16] f32[16,32] -> f32[8,32] (fc1)
// CHECK-DAG: graph.gelu f32[8,32] -> f32[8,32] (act)
// CHECK: trained steps 1..5
// RUN: %python %S/Inputs/check_profile.py out/p.json 2,3 1 graph.matmul=10240 total=22528
// A run of one step profiles it; --profile-start picks the steps.
// RUN: ./train --inputs x.npy --targets t.npy --steps 1 --profile one.json --quiet
// RUN: %python %S/Inputs/check_profile.py one.json 1 1 total=22528
// RUN: ./train --inputs x.npy --targets t.npy --steps 5 --profile last.json --profile-start 5 --quiet
// RUN: %python %S/Inputs/check_profile.py last.json 5 1 total=22528
// Without --profile no file is written.
// RUN: rm -f *.json && ./train --inputs x.npy --targets t.npy --steps 2 --quiet
// RUN: ls | FileCheck %s --check-prefix=FILES
// FILES-NOT: .json
// Bad flags fail before any work, leaving no file.
// RUN: not ./train --inputs x.npy --targets t.npy --steps 5 --profile bad.json --profile-start 9 2>&1 | FileCheck %s --check-prefix=START
// START: error: --profile-start 9 is not a step of this run (1..5)
// RUN: not ./train --inputs x.npy --targets t.npy --steps 5 --profile bad.json --profile-steps 0 2>&1 | FileCheck %s --check-prefix=STEPS
// STEPS: error: --profile-steps expects an integer >= 1, got '0'
// RUN: not ./train --inputs x.npy --targets t.npy --steps 5 --profile x.npy/bad.json 2>&1 | FileCheck %s --check-prefix=WRITE
// WRITE: error: --profile: cannot write x.npy/bad.json
// RUN: not ls bad.json

graph.param @w1 : tensor<16x32xf32> = dense<0.05> : tensor<16x32xf32>
graph.param @w2 : tensor<32x4xf32> = dense<0.1> : tensor<32x4xf32>
func.func @forward(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %w1 = graph.read_param @w1 : tensor<16x32xf32>
  %h = graph.matmul %x, %w1 : tensor<8x16xf32>, tensor<16x32xf32> loc("fc1")
  %a = graph.gelu %h : tensor<8x32xf32> loc("act")
  %w2 = graph.read_param @w2 : tensor<32x4xf32>
  %y = graph.matmul %a, %w2 : tensor<8x32xf32>, tensor<32x4xf32> loc("fc2")
  return %y : tensor<8x4xf32>
}
