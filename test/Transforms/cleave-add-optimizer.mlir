// -cleave-add-optimizer consumes the gradients that -cleave-differentiate
// returns (the results marked cleave.gradient) and updates their
// parameters. The three passes in sequence are -cleave-autodiff: the same
// output, option for option.
// RUN: split-file %s %t
// RUN: cleave-opt %t/forward.mlir --cleave-add-loss="loss=mse accumulate=2" --cleave-differentiate --cleave-add-optimizer="optimizer=sgd momentum=0.9 lr=0.5" > %t.split-sgd.mlir
// RUN: cleave-opt %t/forward.mlir --cleave-autodiff="optimizer=sgd momentum=0.9 lr=0.5 loss=mse accumulate=2" > %t.autodiff-sgd.mlir
// RUN: diff %t.split-sgd.mlir %t.autodiff-sgd.mlir
// RUN: cleave-opt %t/forward.mlir --cleave-add-loss=ignore-index=-100 --cleave-differentiate=loss-scale=1024 --cleave-add-optimizer="optimizer=adamw grad-clip=1.0 loss-scale-growth-interval=10" > %t.split-adamw.mlir
// RUN: cleave-opt %t/forward.mlir --cleave-autodiff="optimizer=adamw grad-clip=1.0 ignore-index=-100 loss-scale=1024 loss-scale-growth-interval=10" > %t.autodiff-adamw.mlir
// RUN: diff %t.split-adamw.mlir %t.autodiff-adamw.mlir
// RUN: FileCheck %s --input-file=%t.split-adamw.mlir
// The examples: gpt in f16 with loss scaling and two microbatches, moe.
// RUN: cleave-translate --import-onnx %examples/gpt/model.onnx \
// RUN:   | cleave-opt --cleave-raise --cleave-mixed-precision=precision=f16 > %t.gpt.mlir
// RUN: cleave-opt %t.gpt.mlir --cleave-add-loss=accumulate=2 --cleave-differentiate=loss-scale=65536 --cleave-add-optimizer="optimizer=adamw grad-clip=1.0" > %t.gpt-split.mlir
// RUN: cleave-opt %t.gpt.mlir --cleave-autodiff="optimizer=adamw grad-clip=1.0 accumulate=2 loss-scale=65536" > %t.gpt-autodiff.mlir
// RUN: diff %t.gpt-split.mlir %t.gpt-autodiff.mlir
// RUN: cleave-translate --import-onnx %examples/moe/model.onnx | cleave-opt --cleave-raise > %t.moe.mlir
// RUN: cleave-opt %t.moe.mlir --cleave-add-loss --cleave-differentiate --cleave-add-optimizer="optimizer=sgd momentum=0.9 nesterov=true" > %t.moe-split.mlir
// RUN: cleave-opt %t.moe.mlir --cleave-autodiff="optimizer=sgd momentum=0.9 nesterov=true" > %t.moe-autodiff.mlir
// RUN: diff %t.moe-split.mlir %t.moe-autodiff.mlir

// A step written by hand (as a pass between -cleave-differentiate and the
// optimizer might leave it): only the marked result is a gradient.
// RUN: cleave-opt %t/hand.mlir --cleave-add-optimizer=optimizer=sgd | FileCheck %s --check-prefix=HAND

// The state parameters follow the model's, the loss scale's after them.
// CHECK: graph.param @b : tensor<5xf32>
// CHECK-NEXT: graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
// CHECK-NEXT: graph.param @w.m frozen
// CHECK-NEXT: graph.param @w.v frozen
// CHECK-NEXT: graph.param @b.m frozen
// CHECK-NEXT: graph.param @b.v frozen
// CHECK-NEXT: graph.param @amp.loss_scale frozen {{.*}}{cleave.role = #cleave.role<loss_scale>}
// CHECK-NEXT: graph.param @amp.growth_tracker frozen : tensor<i64> {cleave.role = #cleave.role<growth_tracker>}
// The gradients are consumed, cleave.loss became the training configuration;
// the step returns the global norm that clipping took.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<f32> {onnx.name = "grad_norm"})
// CHECK-SAME: cleave.training_config = {accumulate = 1 : i64, beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, grad_clip = 1.000000e+00 : f64, ignore_index = -100 : i64, loss = "cross-entropy", loss_scale = 1.024000e+03 : f64, loss_scale_growth_interval = 10 : i64, lr = 1.000000e-03 : f64, optimizer = "adamw", run_time_hyperparameters = true, weight_decay = 1.000000e-02 : f64}
// CHECK-NOT: cleave.loss
// The seed's scale is divided out of the updates.
// CHECK: %[[S:.*]] = graph.read_param @amp.loss_scale
// CHECK: %[[INV:.*]] = graph.div %{{.*}}, %[[S]] {graph.phase = #graph<phase optimizer>}
// The norm of the unscaled gradients: sqrt of the sum of squares, times
// 1/scale.
// CHECK: %[[ROOT:.*]] = graph.sqrt
// CHECK: %[[NORM:.*]] = graph.mul %[[ROOT]], %[[INV]]
// CHECK: graph.adamw
// CHECK: graph.assign @w,
// CHECK: graph.assign @amp.loss_scale
// CHECK: return %{{.*}}, %[[NORM]] : tensor<f32>, tensor<f32>

//--- forward.mlir
graph.param @w : tensor<3x5xf32>
graph.param @b : tensor<5xf32>
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  %b = graph.read_param @b : tensor<5xf32>
  %z = graph.add %y, %b : tensor<4x5xf32>, tensor<5xf32>
  return %z : tensor<4x5xf32>
}

//--- hand.mlir
// HAND-LABEL: func.func @train_step
// HAND-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<4xf32> {onnx.name = "extra"})
// HAND-SAME: cleave.training_config = {accumulate = 1 : i64, {{.*}}loss = "mse", lr = 1.000000e-03 : f64, {{.*}}optimizer = "sgd"
// HAND: %[[G:.*]] = graph.mul
// HAND: %[[NEW:.*]] = graph.sgd %{{.*}}, %[[G]], %{{.*}} {graph.phase = #graph<phase optimizer>
// HAND: graph.assign @w, %[[NEW]]
// HAND: return %{{.*}}, %{{.*}} : tensor<f32>, tensor<4xf32>
graph.param @w : tensor<4xf32>
func.func @train_step(%x: tensor<4xf32>) -> (tensor<f32> {onnx.name = "loss"}, tensor<4xf32> {onnx.name = "extra"}, tensor<4xf32> {cleave.gradient = @w})
    attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %w = graph.read_param @w : tensor<4xf32>
  %l = graph.mse %w, %x : tensor<4xf32>
  %d = graph.sub %w, %x : tensor<4xf32>, tensor<4xf32>
  %two = graph.constant dense<2.0> : tensor<f32>
  %g = graph.mul %d, %two : tensor<4xf32>, tensor<f32>
  return %l, %x, %g : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}
