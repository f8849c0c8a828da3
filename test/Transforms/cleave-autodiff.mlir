// RUN: cleave-opt %s --cleave-autodiff -split-input-file -verify-diagnostics | FileCheck %s

// One linear layer: the loss and the gradients of both parameters; the
// weight is read twice (tied), so its two contributions are summed.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: tensor<4x3xf32>, %[[Y:.*]]: tensor<4xi64> {onnx.name = "labels"})
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<3x5xf32> {onnx.name = "grad.w"}, tensor<5xf32> {onnx.name = "grad.b"})
// CHECK: %[[W:.*]] = graph.read_param @w
// CHECK: %[[LOGITS:.*]] = graph.add %{{.*}}, %{{.*}} : tensor<4x5xf32>, tensor<5xf32>
// CHECK: %[[LOSS:.*]] = graph.cross_entropy %[[LOGITS]], %[[Y]]
// The logits' gradient: (softmax - onehot) * 1 / 4.
// CHECK: graph.softmax %[[LOGITS]] dim 1
// CHECK: graph.iota dim 1 : tensor<4x5xi64>
// CHECK: graph.compare eq
// CHECK: graph.cast {{.*}} : tensor<4x5xi1> -> tensor<4x5xf32>
// The bias gradient sums over the batch.
// CHECK: %[[DB:.*]] = graph.reduce sum %{{.*}} dims [0] keepdim : tensor<4x5xf32>
// CHECK: %[[DBR:.*]] = graph.reshape %[[DB]] : tensor<1x5xf32> -> tensor<5xf32>
// The two reads of @w each get x^T g, then add.
// CHECK: %[[G1:.*]] = graph.matmul {{.*}} : tensor<3x4xf32>, tensor<4x5xf32>
// CHECK: %[[G2:.*]] = graph.matmul {{.*}} : tensor<3x4xf32>, tensor<4x5xf32>
// CHECK: %[[GW:.*]] = graph.add
// CHECK: return %[[LOSS]], %[[GW]], %[[DBR]]
// CHECK-NOT: func.func @forward
graph.param @w : tensor<3x5xf32>
graph.param @b : tensor<5xf32>
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y1 = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  %w2 = graph.read_param @w : tensor<3x5xf32>
  %y2 = graph.matmul %x, %w2 : tensor<4x3xf32>, tensor<3x5xf32>
  %y = graph.add %y1, %y2 : tensor<4x5xf32>, tensor<4x5xf32>
  %b = graph.read_param @b : tensor<5xf32>
  %z = graph.add %y, %b : tensor<4x5xf32>, tensor<5xf32>
  return %z : tensor<4x5xf32>
}

// -----

// An op on the gradient path without a rule is named.
graph.param @w : tensor<3x5xf32>
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  // expected-error @+1 {{'graph.cos' op has no gradient rule yet}}
  %z = graph.cos %y : tensor<4x5xf32>
  return %z : tensor<4x5xf32>
}

// -----

// expected-error @+1 {{-cleave-autodiff needs a single-block @forward}}
module {
  func.func @main() { return }
}
