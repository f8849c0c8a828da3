// RUN: cleave-opt %s --cleave-autodiff -split-input-file -verify-diagnostics | FileCheck %s

// One linear layer: the loss and the gradients of both parameters; the
// weight is read twice (tied), so its two contributions are summed.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: tensor<4x3xf32>, %[[Y:.*]]: tensor<4xi64> {onnx.name = "labels"})
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<3x5xf32> {onnx.name = "grad.w"}, tensor<5xf32> {onnx.name = "grad.b"})
// CHECK: %[[W:.*]] = graph.read_param @w
// CHECK: %[[LOGITS:.*]] = graph.add %{{.*}}, %{{.*}} : tensor<4x5xf32>, tensor<5xf32>
// The loss is the sum over the 4 positions divided by their count, so that
// sharding the batch leaves sums that add up.
// CHECK: %[[SUM:.*]] = graph.cross_entropy %[[LOGITS]], %[[Y]] reduction sum
// CHECK: %[[COUNT:.*]] = graph.constant {{.*}}dense<4.000000e+00>{{.*}} : tensor<f32>
// CHECK: %[[LOSS:.*]] = graph.div %[[SUM]], %[[COUNT]]
// The logits' gradient is the fused rule of the sum, seeded with 1 / 4.
// CHECK: %[[ONE:.*]] = graph.constant {{.*}}dense<1.000000e+00>{{.*}} : tensor<f32>
// CHECK: %[[SEED:.*]] = graph.div %[[ONE]], %[[COUNT]]
// CHECK: %[[DL:.*]] = graph.cross_entropy_grad %[[LOGITS]], %[[Y]], %[[SEED]] reduction sum
// The bias gradient sums over the batch.
// CHECK: %[[DB:.*]] = graph.reduce sum %[[DL]] dims [0] keepdim{{.*}} : tensor<4x5xf32>
// CHECK: %[[DBR:.*]] = graph.reshape %[[DB]]{{.*}} : tensor<1x5xf32> -> tensor<5xf32>
// The two reads of @w each get x^T g, then add.
// CHECK: %[[G1:.*]] = graph.matmul {{.*}}, %[[DL]]{{.*}} : tensor<3x4xf32>, tensor<4x5xf32>
// CHECK: %[[G2:.*]] = graph.matmul {{.*}}, %[[DL]]{{.*}} : tensor<3x4xf32>, tensor<4x5xf32>
// CHECK: %[[GW:.*]] = graph.add %[[G2]], %[[G1]]
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

// Fused rules: layer norm, gelu, attention and the embedding's scatter-add.
// Frozen parameters and constants get no gradient.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<10x8xf32> {onnx.name = "grad.emb"}, tensor<8xf32> {onnx.name = "grad.g"})
// CHECK: graph.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale 5.000000e-01{{.*}} : tensor<2x2x4x4xf32>
// CHECK: graph.gelu_grad %{{.*}}, %{{.*}} approximate tanh
// CHECK: %{{.*}}, %[[DG:.*]], %{{.*}} = graph.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} dim 2 eps 1.000000e-05
// The table is also the (transposed) output projection: both gradients add.
// CHECK: %[[DE:.*]] = graph.gather_grad %{{.*}}[%{{.*}}] dim 0{{.*}} : tensor<2x4x8xf32>, tensor<2x4xi64> -> tensor<10x8xf32>
// CHECK: %[[SUM:.*]] = graph.add %{{.*}}, %[[DE]]{{.*}} : tensor<10x8xf32>
// CHECK: return %{{.*}}, %[[SUM]], %[[DG]]
graph.param @emb : tensor<10x8xf32>
graph.param @g : tensor<8xf32>
graph.param @frozen_b frozen : tensor<8xf32>
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x10xf32> {
  %e = graph.read_param @emb : tensor<10x8xf32>
  %x = graph.gather %e[%ids] dim 0 : tensor<10x8xf32>, tensor<2x4xi64>
  %g = graph.read_param @g : tensor<8xf32>
  %b = graph.read_param @frozen_b : tensor<8xf32>
  %n = graph.layer_norm %x, %g, %b dim 2 eps 1.0e-05 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %a = graph.gelu %n approximate tanh : tensor<2x4x8xf32>
  %h = graph.reshape %a : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %q = graph.transpose %h perm [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %o = graph.attention %q, %q, %q causal : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  %t = graph.transpose %o perm [0, 2, 1, 3] : tensor<2x2x4x4xf32>
  %r = graph.reshape %t : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %et = graph.transpose %e perm [1, 0] : tensor<10x8xf32>
  %logits = graph.matmul %r, %et : tensor<2x4x8xf32>, tensor<8x10xf32>
  return %logits : tensor<2x4x10xf32>
}

// -----

// MoE routing: the gates' gradient goes back through the softmax of the
// chosen experts, the dispatch's through a combine with unit gates, the
// combine's through a dispatch of the gate-weighted rows.
// CHECK-LABEL: func.func @train_step
// CHECK: graph.moe_dispatch %{{.*}}, %{{.*}} experts 8 capacity 8{{.*}} : tensor<32x8xf32>, tensor<32x1xi64>
// CHECK: graph.moe_combine %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x8x8xf32>, tensor<16x2xf32>, tensor<16x2xi64>
// CHECK: graph.softmax %{{.*}} dim 1{{.*}} : tensor<16x8xf32>
graph.param @w : tensor<8x8xf32>
func.func @forward(%x: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %w = graph.read_param @w : tensor<8x8xf32>
  %y = graph.matmul %x, %w : tensor<16x8xf32>, tensor<8x8xf32>
  %g, %e = graph.router_topk %y k 2 normalize : tensor<16x8xf32>
  %d = graph.moe_dispatch %y, %e experts 8 capacity 8 : tensor<16x8xf32>, tensor<16x2xi64>
  %o = graph.moe_combine %d, %g, %e : tensor<8x8x8xf32>, tensor<16x2xf32>, tensor<16x2xi64>
  return %o : tensor<16x8xf32>
}

// -----

// A rule that gives no gradient to an operand that needs one is an error,
// never a parameter silently left untrained (a learned additive mask).
graph.param @m : tensor<2x2xf32>
func.func @forward(%q: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %m = graph.read_param @m : tensor<2x2xf32>
  // expected-error @+1 {{'graph.attention' op has no gradient for operand #3, which depends on a trainable parameter}}
  %o = graph.attention %q, %q, %q mask %m : tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<2x2xf32>
  return %o : tensor<1x1x2x2xf32>
}

// -----

// top-k values send their gradient back to the positions they came from.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[POS:.*]] = graph.iota dim 2{{.*}} : tensor<4x2x5xi64>
// CHECK: %[[IDX:.*]] = graph.reshape %{{.*}} : tensor<4x2xi64> -> tensor<4x2x1xi64>
// CHECK: graph.compare eq %[[POS]], %[[IDX]]
// CHECK: graph.reduce sum %{{.*}} dims [1]{{.*}} : tensor<4x2x5xf32>
graph.param @w : tensor<3x5xf32>
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  %v, %i = graph.topk %y k 2 dim 1 : tensor<4x5xf32>
  return %v : tensor<4x2xf32>
}

// -----

// Ops off the gradient path need no rule: the top-k of an input.
// CHECK-LABEL: func.func @train_step
// CHECK: graph.topk
// CHECK: graph.cross_entropy_grad
graph.param @w : tensor<4x5xf32>
func.func @forward(%x: tensor<4x4xf32>) -> tensor<4x5xf32> {
  %v, %i = graph.topk %x k 4 dim 1 : tensor<4x4xf32>
  %w = graph.read_param @w : tensor<4x5xf32>
  %y = graph.matmul %v, %w : tensor<4x4xf32>, tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// -----

// expected-error @+1 {{-cleave-autodiff needs a single-block @forward}}
module {
  func.func @main() { return }
}
