// RUN: cleave-opt %s -split-input-file -dist-data-parallel="zero=2" | FileCheck %s
// RUN: cleave-opt %s -split-input-file -dist-data-parallel="zero=1" | FileCheck %s --check-prefix=ZERO1

// ZeRO-2 with two microbatches: each term of the sum of the microbatches'
// gradients is constrained to the block layout of the state the update
// reads, so that each is reduce-scattered before the sum. ZeRO-1 leaves
// the sum whole (one reduction of the total).
// CHECK-LABEL: func.func @step
// CHECK: %[[S0:.*]] = dist.shard %arg1 to <@mesh, [{"dp"}, {}], priority strategy, origin "-dist-data-parallel zero=2">
// CHECK: %[[S1:.*]] = dist.shard %arg2 to <@mesh, [{"dp"}, {}], priority strategy, origin "-dist-data-parallel zero=2">
// CHECK: %[[G:.*]] = graph.add %[[S0]], %[[S1]]
// CHECK: graph.adamw %{{.*}}, %[[G]]
// ZERO1-LABEL: func.func @step
// ZERO1-NOT: dist.shard %
// ZERO1: graph.add %arg1, %arg2
dist.mesh @mesh ["dp" = 2]
graph.param @w : tensor<8x4xf32>
graph.param @w.m frozen : tensor<8x4xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @w.v frozen : tensor<8x4xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
func.func @step(%x: tensor<2x4x8xf32>, %g0: tensor<8x4xf32>, %g1: tensor<8x4xf32>) attributes {cleave.training_config = {accumulate = 2 : i64, beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, grad_clip = 0.0 : f64, loss = "mse", lr = 1.0e-03 : f64, optimizer = "adamw", weight_decay = 1.000000e-02 : f64}} {
  %g = graph.add %g0, %g1 {graph.phase = #graph<phase backward>} : tensor<8x4xf32>, tensor<8x4xf32>
  %w = graph.read_param @w : tensor<8x4xf32>
  %m = graph.read_param @w.m : tensor<8x4xf32>
  %v = graph.read_param @w.v : tensor<8x4xf32>
  %s = graph.read_param @optimizer.step : tensor<i64>
  %w1, %m1, %v1 = graph.adamw %w, %g, %m, %v, %s {lr = 1.0e-3 : f64} : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<i64>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>)
  graph.assign @w, %w1 : tensor<8x4xf32>
  graph.assign @w.m, %m1 : tensor<8x4xf32>
  graph.assign @w.v, %v1 : tensor<8x4xf32>
  return
}
