// RUN: cleave-opt %s | cleave-opt | FileCheck %s

// Every cleave.* attribute in a valid form, through a round trip: the memory
// plan, the parameter roles, the training configuration, the source model,
// the precision, keep_f32, the nested evaluation program, and the hand-over of a training step between the
// passes that build it (the loss, the microbatch losses, the gradients).

// CHECK: module attributes {cleave.precision = "bf16", cleave.source_model = "/models/mlp.onnx"}
module attributes {cleave.precision = "bf16", cleave.source_model = "/models/mlp.onnx"} {
  // CHECK: graph.param @w : tensor<4xf32> {cleave.offset = 0 : i64}
  graph.param @w : tensor<4xf32> {cleave.offset = 0 : i64}
  // CHECK: graph.param @w.m frozen : tensor<4xf32> {cleave.offset = 64 : i64, cleave.role = #cleave.role<optimizer_state>}
  graph.param @w.m frozen : tensor<4xf32> {cleave.offset = 64 : i64, cleave.role = #cleave.role<optimizer_state>}
  // CHECK: graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
  graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
  // CHECK: graph.param @amp.loss_scale frozen : tensor<f32> {cleave.role = #cleave.role<loss_scale>}
  graph.param @amp.loss_scale frozen : tensor<f32> {cleave.role = #cleave.role<loss_scale>}
  // CHECK: graph.param @amp.growth_tracker frozen : tensor<i64> {cleave.role = #cleave.role<growth_tracker>}
  graph.param @amp.growth_tracker frozen : tensor<i64> {cleave.role = #cleave.role<growth_tracker>}
  // A model parameter may say so.
  // CHECK: graph.param @b : tensor<4xf32> {cleave.role = #cleave.role<model>}
  graph.param @b : tensor<4xf32> {cleave.role = #cleave.role<model>}

  // CHECK-LABEL: func.func @train_step
  // CHECK-SAME: cleave.offset = 128 : i64
  // CHECK-SAME: cleave.arena_bytes = 512 : i64, cleave.param_bytes = 128 : i64, cleave.peak_bytes = 448 : i64, cleave.persistent_bytes = 192 : i64
  // CHECK-SAME: cleave.training_config = {accumulate = 2 : i64, beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, grad_clip = 1.000000e+00 : f64, ignore_index = -100 : i64, loss = "cross-entropy", loss_scale = 6.553600e+04 : f64, loss_scale_growth_interval = 2000 : i64, lr = 1.000000e-03 : f64, optimizer = "adamw", precision = "f16", weight_decay = 0.000000e+00 : f64}
  func.func @train_step(%x: tensor<4xf32> {cleave.offset = 128 : i64}) -> tensor<4xf32>
      attributes {cleave.param_bytes = 128 : i64, cleave.persistent_bytes = 192 : i64,
                  cleave.peak_bytes = 448 : i64, cleave.arena_bytes = 512 : i64,
                  cleave.training_config = {loss = "cross-entropy", optimizer = "adamw",
                    lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64,
                    ignore_index = -100 : i64, weight_decay = 0.0 : f64, grad_clip = 1.0 : f64,
                    accumulate = 2 : i64, precision = "f16", loss_scale = 65536.0 : f64,
                    loss_scale_growth_interval = 2000 : i64}} {
    // CHECK: graph.exp %{{.*}} {cleave.keep_f32, cleave.offsets = array<i64: 192>}
    %0 = graph.exp %x {cleave.offsets = array<i64: 192>, cleave.keep_f32} : tensor<4xf32>
    return %0 : tensor<4xf32>
  }

  // CHECK-LABEL: func.func @sgd_step
  // CHECK-SAME: cleave.training_config = {accumulate = 1 : i64, dampening = 0.000000e+00 : f64, grad_clip = 0.000000e+00 : f64, loss = "mse", lr = 1.000000e-01 : f64, momentum = 0.000000e+00 : f64, nesterov = false, optimizer = "sgd", weight_decay = 0.000000e+00 : f64}
  func.func @sgd_step() attributes {cleave.training_config = {loss = "mse",
      optimizer = "sgd", lr = 0.1 : f64, momentum = 0.0 : f64, dampening = 0.0 : f64,
      nesterov = false, weight_decay = 0.0 : f64, grad_clip = 0.0 : f64,
      accumulate = 1 : i64}} {
    return
  }

  // CHECK-LABEL: func.func @gradient_step
  // CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<4xf32> {cleave.gradient = @w, onnx.name = "grad.w"})
  // CHECK-SAME: attributes {cleave.loss = {accumulate = 2 : i64, ignore_index = -100 : i64, loss = "cross-entropy", loss_scale = 1.024000e+03 : f64}}
  func.func @gradient_step(%x: tensor<4xf32>) -> (tensor<f32> {onnx.name = "loss"}, tensor<4xf32> {cleave.gradient = @w, onnx.name = "grad.w"})
      attributes {cleave.loss = {loss = "cross-entropy", accumulate = 2 : i64,
                                 ignore_index = -100 : i64, loss_scale = 1024.0 : f64}} {
    // CHECK: graph.reduce sum %{{.*}} dims [0] {cleave.microbatch_loss}
    %0 = graph.reduce sum %x dims [0] {cleave.microbatch_loss} : tensor<4xf32>
    return %0, %x : tensor<f32>, tensor<4xf32>
  }

  // The evaluation program, nested for -cleave-link-eval.
  // CHECK: module attributes {cleave.eval_program}
  module attributes {cleave.eval_program} {
  }
}
