// RUN: cleave-opt %s --cleave-autodiff='loss=mse optimizer=sgd lr=0.1' --cleave-recompute | FileCheck %s
// The memory plan of the step without and with the recomputation: layer
// 0's matmul and GELU outputs no longer live from the forward to the
// backward.
// RUN: cleave-opt %s --cleave-autodiff='loss=mse optimizer=sgd lr=0.1' --cleave-plan-memory='entry=train_step report' -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAN-KEPT
// RUN: cleave-opt %s --cleave-autodiff='loss=mse optimizer=sgd lr=0.1' --cleave-recompute --cleave-plan-memory='entry=train_step report' -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAN-RECOMPUTED
// PLAN-KEPT: remark: memory plan: arena 8064 bytes ({{.*}}temporaries 5056), peak 6912 bytes
// PLAN-RECOMPUTED: remark: memory plan: arena 7552 bytes ({{.*}}temporaries 4544), peak 6400 bytes

// The forward of layer 0.
// CHECK: %[[W1:.*]] = graph.read_param @w1 {graph.layer = 0 : i64, {{.*}}phase forward
// CHECK: %[[H:.*]] = graph.matmul %arg0, %[[W1]] {graph.layer = 0 : i64, {{.*}}phase forward
// CHECK: %[[A:.*]] = graph.gelu %[[H]] {graph.layer = 0 : i64, {{.*}}phase forward
// CHECK: %[[R:.*]] = graph.add %[[A]], %arg0 {graph.layer = 0 : i64, {{.*}}phase forward
// Layer 1 reads the output %[[R]], which is held for the backward.
// CHECK: graph.matmul %[[R]], %{{.*}} {graph.layer = 1 : i64, {{.*}}phase forward
// Layer 1 is recomputed where the backward starts, from %[[R]].
// CHECK: graph.matmul %[[R]], %{{.*}} {graph.layer = 1 : i64, {{.*}}phase backward
// Layer 0 before its backward: only what the backward reads, the matmul
// (GELU's gradient reads its input), from the layer's input and weight;
// neither the GELU nor the output (the residual add) runs again.
// CHECK: %[[W1B:.*]] = graph.read_param @w1 {graph.layer = 0 : i64, {{.*}}phase backward
// CHECK-NEXT: %[[HB:.*]] = graph.matmul %arg0, %[[W1B]] {graph.layer = 0 : i64, {{.*}}phase backward
// The backward reads the recomputed pre-activation, not the forward's.
// CHECK-NEXT: graph.gelu_grad %[[HB]],
// CHECK-NOT: graph.gelu %[[HB]]
// CHECK-NOT: graph.gelu_grad %[[H]],
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

