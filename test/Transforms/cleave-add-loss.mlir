// -cleave-add-loss: @train_step computes the forward and the loss on its
// first output, and hands it to -cleave-differentiate through cleave.loss
// (on the function) and cleave.microbatch_loss (on each microbatch's loss).
// RUN: cleave-opt %s -split-input-file --cleave-add-loss | FileCheck %s --check-prefix=CE
// RUN: cleave-opt %s -split-input-file --cleave-add-loss="loss=mse accumulate=2" | FileCheck %s --check-prefix=MSE
// RUN: cleave-opt %s -split-input-file --cleave-add-loss="ignore-index=-100" | FileCheck %s --check-prefix=IGNORE

// The cross-entropy against labels: a sum over positions, divided by their
// count, marked as the loss of microbatch 0; the second output of
// @forward, off the loss's path, is gone.
// CE-LABEL: func.func @train_step
// CE-SAME: (%[[X:.*]]: tensor<4x3xf32> {onnx.name = "x"}, %[[Y:.*]]: tensor<4xi64> {onnx.name = "labels"})
// CE-SAME: -> (tensor<f32> {onnx.name = "loss"})
// CE-SAME: attributes {cleave.loss = {accumulate = 1 : i64, loss = "cross-entropy"}}
// CE: graph.read_param @w {graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>}
// CE: %[[LOGITS:.*]] = graph.add
// CE: %[[SUM:.*]] = graph.cross_entropy %[[LOGITS]], %[[Y]] reduction sum
// CE: %[[COUNT:.*]] = graph.constant {{.*}}dense<4.000000e+00> : tensor<f32>
// CE: %[[LOSS:.*]] = graph.div %[[SUM]], %[[COUNT]] {cleave.microbatch_loss, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>}
// CE-NOT: graph.exp
// CE: return %[[LOSS]] : tensor<f32>
// CE-NOT: func.func @forward

// Two microbatches: rows of [2, 4, ...] inputs and targets, a marked mse
// each, and their mean.
// MSE-LABEL: func.func @train_step
// MSE-SAME: (%[[X:.*]]: tensor<2x4x3xf32> {onnx.name = "x"}, %[[T:.*]]: tensor<2x4x5xf32> {onnx.name = "targets"})
// MSE-SAME: attributes {cleave.loss = {accumulate = 2 : i64, loss = "mse"}}
// MSE: graph.slice %[[X]] start [0, 0, 0] limit [1, 4, 3] {graph.microbatch = 0 : i64
// MSE: %[[L0:.*]] = graph.mse %{{.*}}, %{{.*}} {cleave.microbatch_loss, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>}
// MSE: graph.slice %[[X]] start [1, 0, 0] limit [2, 4, 3] {graph.microbatch = 1 : i64
// MSE: %[[L1:.*]] = graph.mse %{{.*}}, %{{.*}} {cleave.microbatch_loss, graph.microbatch = 1 : i64, graph.phase = #graph<phase forward>}
// MSE: %[[SUM:.*]] = graph.add %[[L0]], %[[L1]]
// MSE: %[[HALF:.*]] = graph.constant {graph.phase = #graph<phase forward>} dense<5.000000e-01>
// MSE: %[[MEAN:.*]] = graph.mul %[[SUM]], %[[HALF]]
// MSE: return %[[MEAN]]

// Labels equal to ignore-index are not counted, and cleave.loss says so.
// IGNORE: cleave.loss = {accumulate = 1 : i64, ignore_index = -100 : i64, loss = "cross-entropy"}
// IGNORE: graph.cross_entropy %{{.*}}, %{{.*}} ignore_index -100 reduction sum
// IGNORE: graph.compare ne
// IGNORE: graph.div {{.*}}cleave.microbatch_loss

graph.param @w : tensor<3x5xf32>
graph.param @b : tensor<5xf32>
func.func @forward(%x: tensor<4x3xf32> {onnx.name = "x"}) -> (tensor<4x5xf32>, tensor<4x3xf32>) {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  %b = graph.read_param @b : tensor<5xf32>
  %z = graph.add %y, %b : tensor<4x5xf32>, tensor<5xf32>
  %e = graph.exp %x : tensor<4x3xf32>
  return %z, %e : tensor<4x5xf32>, tensor<4x3xf32>
}

// -----

// Logits computed in 16 bits and widened for @forward's signature go to the
// cross-entropy as they are; the loss is f32.
// CE-LABEL: func.func @train_step
// CE: %[[H:.*]] = graph.matmul {{.*}} : tensor<4x3xbf16>, tensor<3x5xbf16>
// CE: graph.cross_entropy %[[H]], %{{.*}} reduction sum {{.*}} : tensor<4x5xbf16>, tensor<4xi64>
// CE: return %{{.*}} : tensor<f32>
graph.param @w : tensor<3x5xbf16>
func.func @forward(%x: tensor<4x3xbf16>) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xbf16>
  %y = graph.matmul %x, %w : tensor<4x3xbf16>, tensor<3x5xbf16>
  %f = graph.cast %y : tensor<4x5xbf16> -> tensor<4x5xf32>
  return %f : tensor<4x5xf32>
}
