// A cross-entropy whose batch has every label ignored (--ignore-index) is
// 0 / 0 as in PyTorch: the loss is NaN (null in the JSON log, with
// "loss_nonfinite": "nan") and the gradient zero, so SGD leaves the
// weights as they were. Step 1's two samples are both -100; step 2's loss,
// on the next two, is then the cross-entropy of the initial weights, which
// NumPy computes in float64 here.
// RUN: rm -rf %t && mkdir -p %t && cd %t
// RUN: %python -c "import numpy as n; r = n.random.default_rng(0); n.save('x.npy', r.standard_normal((4, 3), dtype=n.float32)); n.save('t.npy', n.array([-100, -100, 1, 3], dtype=n.int64))"
// RUN: cleave-compile %s --train --loss cross-entropy --ignore-index -100 --optimizer sgd --lr 0.5 -o train
// RUN: ./train --inputs x.npy --targets t.npy --steps 2 --log-json log.jsonl --quiet
// RUN: %python %S/Inputs/check_ignore_all.py log.jsonl x.npy t.npy

graph.param @w : tensor<3x4xf32> = dense<[[0.5, -0.25, 0.125, 1.0], [-0.75, 0.25, 0.5, -0.5], [0.25, 1.5, -1.0, 0.75]]> : tensor<3x4xf32>
func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x4xf32> {
  %w = graph.read_param @w : tensor<3x4xf32>
  %y = graph.matmul %x, %w : tensor<2x3xf32>, tensor<3x4xf32>
  return %y : tensor<2x4xf32>
}
