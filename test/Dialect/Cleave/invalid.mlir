// RUN: cleave-opt %s -split-input-file -verify-diagnostics

// One case per check of the cleave dialect's attribute verifier (and of
// graph.param's checks of its role). Each module holds a graph op: loading
// the graph dialect loads the cleave dialect, whose verifier runs on the
// cleave.* attributes.

// expected-error @+1 {{expects 'cleave.offset' to be an i64 >= 0 and a multiple of 64, got -64 : i64}}
graph.param @w : tensor<4xf32> {cleave.offset = -64 : i64}

// -----

// expected-error @+1 {{expects 'cleave.offset' to be an i64 >= 0 and a multiple of 64, got 32 : i64}}
graph.param @w : tensor<4xf32> {cleave.offset = 32 : i64}

// -----

// expected-error @+1 {{expects 'cleave.offset' to be an i64 >= 0 and a multiple of 64, got 0 : i32}}
graph.param @w : tensor<4xf32> {cleave.offset = 0 : i32}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'cleave.offset' only on a parameter or a function argument}}
  %0 = graph.exp %x {cleave.offset = 0 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.offset' of argument #0 to be an i64 >= 0 and a multiple of 64, got 65 : i64}}
func.func @f(%x: tensor<4xf32> {cleave.offset = 65 : i64}) -> tensor<4xf32> {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects no 'cleave.offsets' on argument #0}}
func.func @f(%x: tensor<4xf32> {cleave.offsets = array<i64: 0>}) -> tensor<4xf32> {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'cleave.offsets' to be an array<i64> of 1 offsets (one per result), got array<i64: 0, 64>}}
  %0 = graph.exp %x {cleave.offsets = array<i64: 0, 64>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'cleave.offsets' to be an array<i64> of 1 offsets (one per result), got 0 : i64}}
  %0 = graph.exp %x {cleave.offsets = 0 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects the offset of result #0 to be >= 0 and a multiple of 64, got 100}}
  %0 = graph.exp %x {cleave.offsets = array<i64: 100>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'cleave.arena_bytes' only on a function}}
  %0 = graph.exp %x {cleave.arena_bytes = 64 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.peak_bytes' to be an i64 >= 0, got -1 : i64}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.peak_bytes = -1 : i64} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.param_bytes' (256) to be at most 'cleave.persistent_bytes' (128)}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32>
    attributes {cleave.param_bytes = 256 : i64, cleave.persistent_bytes = 128 : i64} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.persistent_bytes' (128) to be at most 'cleave.peak_bytes' (64)}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32>
    attributes {cleave.persistent_bytes = 128 : i64, cleave.peak_bytes = 64 : i64} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.peak_bytes' (512) to be at most 'cleave.arena_bytes' (256)}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32>
    attributes {cleave.peak_bytes = 512 : i64, cleave.arena_bytes = 256 : i64} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.role' only on a parameter}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.role = #cleave.role<model>} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.role' to be a #cleave.role, got "step_counter"}}
graph.param @step frozen : tensor<i64> {cleave.role = "step_counter"}

// -----

// expected-error @+1 {{unknown parameter role 'step' (available: model, optimizer_state, step_counter, loss_scale, growth_tracker)}}
graph.param @step frozen : tensor<i64> {cleave.role = #cleave.role<step>}

// -----

// expected-error @+1 {{has role step_counter, which needs 'tensor<i64>', got 'tensor<f32>'}}
graph.param @step frozen : tensor<f32> {cleave.role = #cleave.role<step_counter>}

// -----

// expected-error @+1 {{has role loss_scale, which needs 'tensor<f32>', got 'tensor<1xf32>'}}
graph.param @scale frozen : tensor<1xf32> {cleave.role = #cleave.role<loss_scale>}

// -----

// expected-error @+1 {{has role growth_tracker, which needs 'tensor<i64>', got 'tensor<i32>'}}
graph.param @tracker frozen : tensor<i32> {cleave.role = #cleave.role<growth_tracker>}

// -----

// expected-error @+1 {{has role optimizer_state and must be frozen (the optimizer updates it, not training)}}
graph.param @w.m : tensor<4xf32> {cleave.role = #cleave.role<optimizer_state>}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'cleave.training_config' only on a function}}
  %0 = graph.exp %x {cleave.training_config = {}} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.training_config' to be a dictionary, got "{\22loss\22:\22mse\22}"}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = "{\"loss\":\"mse\"}"} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': unknown key 'learning_rate'}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "sgd", learning_rate = 0.1 : f64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'lr' to be an f64 float, got 1 : i64}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "sgd", lr = 1 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'accumulate' to be an i64 integer, got 1.000000e+00 : f64}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "sgd", accumulate = 1.0 : f64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'nesterov' to be a bool, got 1 : i64}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "sgd", nesterov = 1 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'loss' to be a string, got 1 : i64}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = 1 : i64, optimizer = "sgd"}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'lr' to be finite (JSON has no inf or NaN), got 0x7FF0000000000000 : f64}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "sgd", lr = 0x7FF0000000000000 : f64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': misses the key 'optimizer'}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse"}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'loss' to be "cross-entropy" or "mse", got "l1"}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "l1", optimizer = "sgd"}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'optimizer' to be "sgd" or "adamw", got "adam"}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "adam"}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': misses the key 'beta1'}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "adamw", lr = 0.1 : f64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': 'momentum' applies to the sgd optimizer, not to adamw}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "adamw", lr = 0.1 : f64, beta1 = 0.9 : f64,
    beta2 = 0.999 : f64, eps = 1.0e-8 : f64, momentum = 0.9 : f64,
    weight_decay = 0.0 : f64, grad_clip = 0.0 : f64, accumulate = 1 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': 'ignore_index' applies to the cross-entropy loss}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "sgd", lr = 0.1 : f64, momentum = 0.0 : f64,
    dampening = 0.0 : f64, nesterov = false, ignore_index = -100 : i64,
    weight_decay = 0.0 : f64, grad_clip = 0.0 : f64, accumulate = 1 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'grad_clip' to be >= 0, got -1}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "sgd", lr = 0.1 : f64, momentum = 0.0 : f64,
    dampening = 0.0 : f64, nesterov = false,
    weight_decay = 0.0 : f64, grad_clip = -1.0 : f64, accumulate = 1 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'accumulate' to be >= 1, got 0}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "sgd", lr = 0.1 : f64, momentum = 0.0 : f64,
    dampening = 0.0 : f64, nesterov = false,
    weight_decay = 0.0 : f64, grad_clip = 0.0 : f64, accumulate = 0 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'precision' to be "bf16" or "f16", got "fp8"}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "sgd", lr = 0.1 : f64, momentum = 0.0 : f64,
    dampening = 0.0 : f64, nesterov = false, precision = "fp8",
    weight_decay = 0.0 : f64, grad_clip = 0.0 : f64, accumulate = 1 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'loss_scale' and 'loss_scale_growth_interval' together}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "sgd", lr = 0.1 : f64, momentum = 0.0 : f64,
    dampening = 0.0 : f64, nesterov = false, loss_scale = 128.0 : f64,
    weight_decay = 0.0 : f64, grad_clip = 0.0 : f64, accumulate = 1 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'loss_scale' to be > 0, got 0}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "sgd", lr = 0.1 : f64, momentum = 0.0 : f64,
    dampening = 0.0 : f64, nesterov = false, loss_scale = 0.0 : f64,
    loss_scale_growth_interval = 10 : i64,
    weight_decay = 0.0 : f64, grad_clip = 0.0 : f64, accumulate = 1 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.training_config': expects 'loss_scale_growth_interval' to be >= 1, got 0}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.training_config = {
    loss = "mse", optimizer = "sgd", lr = 0.1 : f64, momentum = 0.0 : f64,
    dampening = 0.0 : f64, nesterov = false, loss_scale = 128.0 : f64,
    loss_scale_growth_interval = 0 : i64,
    weight_decay = 0.0 : f64, grad_clip = 0.0 : f64, accumulate = 1 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.source_model' to be an absolute path, got "model.onnx"}}
module attributes {cleave.source_model = "model.onnx"} {
  graph.param @w : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.source_model = "/m.onnx"} {
  // expected-error @-1 {{expects 'cleave.source_model' only on a module}}
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.precision' to be "bf16" or "f16", got "fp16"}}
module attributes {cleave.precision = "fp16"} {
  graph.param @w : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.precision' only on a module}}
graph.param @w : tensor<4xf32> {cleave.precision = "bf16"}

// -----

module {
  // expected-error @+1 {{expects 'cleave.eval_program' to be a unit attribute, got true}}
  module attributes {cleave.eval_program = true} {
    graph.param @w : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{expects 'cleave.eval_program' only on a module nested in another}}
graph.param @w : tensor<4xf32> {cleave.eval_program}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'cleave.keep_f32' to be a unit attribute, got true}}
  %0 = graph.exp %x {cleave.keep_f32 = true} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has unknown attribute 'cleave.optimizer_state'}}
graph.param @w.m frozen : tensor<4xf32> {cleave.optimizer_state}

// -----

// The loss of a training step being built (cleave.loss), from
// -cleave-add-loss to -cleave-add-optimizer.

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'cleave.loss' only on a function}}
  %0 = graph.exp %x {cleave.loss = {}} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.loss' to be a dictionary, got "mse"}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.loss = "mse"} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// The optimizer's keys come with -cleave-add-optimizer, in the training
// configuration.
// expected-error @+1 {{has an invalid 'cleave.loss': unknown key 'lr'}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.loss = {
    loss = "mse", accumulate = 1 : i64, lr = 0.1 : f64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.loss': expects 'accumulate' to be an i64 integer, got 2 : i32}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.loss = {
    loss = "mse", accumulate = 2 : i32}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.loss': expects 'loss_scale' to be finite (JSON has no inf or NaN), got 0x7FF0000000000000 : f64}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.loss = {
    loss = "mse", accumulate = 1 : i64, loss_scale = 0x7FF0000000000000 : f64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.loss': misses the key 'accumulate'}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.loss = {loss = "mse"}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.loss': misses the key 'loss'}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.loss = {accumulate = 1 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.loss': expects 'loss' to be "cross-entropy" or "mse", got "hinge"}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.loss = {
    loss = "hinge", accumulate = 1 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.loss': 'ignore_index' applies to the cross-entropy loss}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.loss = {
    loss = "mse", accumulate = 1 : i64, ignore_index = -100 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.loss': expects 'accumulate' to be >= 1, got 0}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.loss = {
    loss = "mse", accumulate = 0 : i64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{has an invalid 'cleave.loss': expects 'loss_scale' to be > 0, got -2}}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {cleave.loss = {
    loss = "mse", accumulate = 1 : i64, loss_scale = -2.0 : f64}} {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Where a microbatch's backward pass starts (cleave.microbatch_loss), until
// -cleave-differentiate.

func.func @f(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{expects 'cleave.microbatch_loss' to be a unit attribute, got 0 : i64}}
  %0 = graph.exp %x {cleave.microbatch_loss = 0 : i64} : tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects 'cleave.microbatch_loss' on an op whose result #0 is a float scalar, got 'tensor<4xf32>'}}
  %0 = graph.exp %x {cleave.microbatch_loss} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{expects 'cleave.microbatch_loss' on an op whose result #0 is a float scalar, got no result}}
  graph.assign @w, %x {cleave.microbatch_loss} : tensor<f32>
  return
}
graph.param @w : tensor<f32>

// -----

// The gradients a training step returns (cleave.gradient), from
// -cleave-differentiate to -cleave-add-optimizer.

graph.param @w : tensor<4xf32>
// expected-error @+1 {{expects 'cleave.gradient' of result #1 to be a parameter's symbol, got "w"}}
func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32> {cleave.gradient = "w"}) {
  %0 = graph.exp %x : tensor<4xf32>
  return %0, %0 : tensor<4xf32>, tensor<4xf32>
}

// -----

graph.param @w : tensor<4xf32>
// expected-error @+1 {{expects 'cleave.gradient' of result #0 to name a parameter, got @g}}
func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32> {cleave.gradient = @g}) {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects 'cleave.gradient' of result #0 to name a parameter, got @f}}
func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32> {cleave.gradient = @f}) {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{expects no 'cleave.offset' on result #0}}
func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32> {cleave.offset = 0 : i64}) {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A result attribute as an op's.
// expected-error @+1 {{has unknown attribute 'cleave.gradient'}}
graph.param @w : tensor<4xf32> {cleave.gradient = @w}
