// The compiled loss scaler at the top of f32's range: a doubling that would
// overflow is refused (torch.cuda.amp.GradScaler keeps the scale when
// scale * 2 is not finite), so a run of finite steps keeps 2^127 instead of
// reaching an infinite scale, after which every step would be skipped.
// The weights and targets are zero, so every gradient is finite (zero)
// whatever the scale. bf16 has f32's range.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as n; n.save('%t/x.npy', n.arange(24, dtype=n.float32).reshape(8, 3) / 7); n.save('%t/t.npy', n.zeros((8, 5), n.float32))"
// RUN: cleave-compile %s --train --precision bf16 --loss mse --optimizer sgd --lr 0.1 --loss-scale 8.507059173023462e37 --loss-scale-growth-interval 1 -o %t/train
// RUN: %t/train --inputs %t/x.npy --targets %t/t.npy --steps 3 --log-json %t/log.jsonl --quiet
// RUN: FileCheck %s < %t/log.jsonl
// CHECK: "step": 1, {{.*}}"loss_scale": 1.70141183e+38, "skipped": false}
// CHECK: "step": 2, {{.*}}"loss_scale": 1.70141183e+38, "skipped": false}
// CHECK: "step": 3, {{.*}}"loss_scale": 1.70141183e+38, "skipped": false}

graph.param @w : tensor<3x5xf32> = dense<0.0> : tensor<3x5xf32>
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  return %y : tensor<4x5xf32>
}
