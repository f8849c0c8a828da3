// -cleave-add-loss with moe-aux-loss: each routed mixture's load-balancing
// loss, E * sum_e f_e * P_e (f_e the share of the T * k assignments routed
// to expert e, P_e its mean router probability), weighted by the
// coefficient and added to the task's loss, which carries the microbatch's
// mark. Here T = 8 tokens, E = 4 experts, k = 2: the scale is
// E / (k * T * T) = 4 / 128.
// RUN: cleave-opt %s -split-input-file --cleave-add-loss="moe-aux-loss=0.01" -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: attributes {cleave.loss = {accumulate = 1 : i64, loss = "cross-entropy", moe_aux_loss = 1.000000e-02 : f64}}
// CHECK: %[[G:.*]], %[[E:.*]] = graph.router_topk %[[L:.*]] k 2 normalize
// CHECK: %[[CE:.*]] = graph.div
// CHECK-NOT: cleave.microbatch_loss
// CHECK: %[[P:.*]] = graph.softmax %[[L]] dim 1 {graph.layer = 0 : i64, {{.*}}} : tensor<8x4xf32>
// CHECK: %[[PS:.*]] = graph.reduce sum %[[P]] dims [0] {{.*}}: tensor<8x4xf32>
// CHECK: %[[R:.*]] = graph.reshape %[[E]] {{.*}}: tensor<8x2xi64> -> tensor<8x2x1xi64>
// CHECK: %[[IDS:.*]] = graph.constant {{.*}}dense<[0, 1, 2, 3]> : tensor<4xi64>
// CHECK: %[[HOT:.*]] = graph.compare eq %[[R]], %[[IDS]]
// CHECK: %[[F:.*]] = graph.cast %[[HOT]] {{.*}}: tensor<8x2x4xi1> -> tensor<8x2x4xf32>
// CHECK: %[[C:.*]] = graph.reduce sum %[[F]] dims [0, 1]
// CHECK: %[[M:.*]] = graph.mul %[[PS]], %[[C]]
// CHECK: %[[D:.*]] = graph.reduce sum %[[M]] dims [0]
// CHECK: %[[S:.*]] = graph.constant {{.*}}dense<3.125000e-02> : tensor<f32>
// CHECK: %[[AUX:.*]] = graph.mul %[[D]], %[[S]]
// CHECK: %[[W:.*]] = graph.constant {{.*}}dense<0.0099999997{{.*}}> : tensor<f32>
// CHECK: %[[WAUX:.*]] = graph.mul %[[AUX]], %[[W]]
// CHECK: %[[LOSS:.*]] = graph.add %[[CE]], %[[WAUX]] {cleave.microbatch_loss
// CHECK: return %[[LOSS]]
graph.param @router : tensor<16x4xf32>
func.func @forward(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %r = graph.read_param @router : tensor<16x4xf32> loc("blocks.0.moe.router")
  %l = graph.matmul %x, %r : tensor<8x16xf32>, tensor<16x4xf32>
  %g, %e = graph.router_topk %l k 2 normalize : tensor<8x4xf32>
  %d = graph.moe_dispatch %x, %e experts 4 capacity 8 : tensor<8x16xf32>, tensor<8x2xi64>
  %o = graph.moe_combine %d, %g, %e : tensor<4x8x16xf32>, tensor<8x2xf32>, tensor<8x2xi64>
  %y = graph.matmul %o, %r : tensor<8x16xf32>, tensor<16x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// No routed mixture: nothing to balance (a mixture kept dense has none).
// expected-error @+1 {{'func.func' op has no routed mixture of experts (graph.router_topk) for the load-balancing loss (moe-aux-loss); a mixture kept dense (--moe-dense) has none}}
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  return %x : tensor<4x3xf32>
}
