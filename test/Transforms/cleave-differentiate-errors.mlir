// Errors of -cleave-differentiate, each a diagnostic naming what is missing
// or wrong, and a failed pass.
// RUN: not cleave-opt %s --split-input-file --cleave-differentiate=loss-scale=-1 2>&1 | FileCheck %s --check-prefix=SCALE-NEG
// SCALE-NEG: error: loss-scale must be finite and >= 0, got -1
// RUN: not cleave-opt %s --split-input-file --cleave-add-loss --cleave-differentiate --cleave-differentiate 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: 'func.func' op is differentiated already: result #1 is a gradient
// RUN: not cleave-opt %s --split-input-file --cleave-add-loss=loss=mse --cleave-differentiate=loss-scale=8 2>&1 | FileCheck %s --check-prefix=SCALE-BF16
// SCALE-BF16: error: 'func.func' op loss-scale needs an f32 loss, got 'tensor<bf16>'
// RUN: not cleave-opt %s --split-input-file --cleave-differentiate=loss-scale=8 2>&1 | FileCheck %s --check-prefix=CLASH
// CLASH: error: 'graph.param' op is named 'amp.loss_scale', which the optimizer state needs
// RUN: cleave-opt %s --split-input-file --cleave-differentiate -verify-diagnostics -o /dev/null

// Not a training step yet: no loss.
// expected-error @below {{-cleave-differentiate needs a loss: no function carries 'cleave.loss' (run -cleave-add-loss first)}}
module {
  graph.param @w : tensor<4xbf16>
  func.func @forward(%x: tensor<4xbf16>) -> tensor<4xbf16> {
    %w = graph.read_param @w : tensor<4xbf16>
    %y = graph.mul %w, %x : tensor<4xbf16>, tensor<4xbf16>
    return %y : tensor<4xbf16>
  }
}

// -----

// A loss, but no microbatch loss where a backward pass could start.
graph.param @w : tensor<4xf32>
// expected-error @+1 {{'func.func' op has no loss to differentiate: no op carries 'cleave.microbatch_loss'}}
func.func @train_step(%x: tensor<4xf32>) -> tensor<f32> attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %w = graph.read_param @w {graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  %y = graph.mse %w, %x {graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  return %y : tensor<f32>
}

// -----

// Two microbatches said, one found.
graph.param @w : tensor<4xf32>
// expected-error @+1 {{'func.func' op expects 2 microbatch losses ('accumulate' of 'cleave.loss'), got 1}}
func.func @train_step(%x: tensor<4xf32>) -> tensor<f32> attributes {cleave.loss = {loss = "mse", accumulate = 2 : i64}} {
  %w = graph.read_param @w {graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  %y = graph.mse %w, %x {cleave.microbatch_loss, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  return %y : tensor<f32>
}

// -----

graph.param @w : tensor<4xf32>
func.func @train_step(%x: tensor<4xf32>) -> tensor<f32> attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %w = graph.read_param @w {graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  // expected-error @+1 {{'graph.mse' op marks a microbatch loss, so expects 'graph.phase' forward and a 'graph.microbatch' below 1}}
  %y = graph.mse %w, %x {cleave.microbatch_loss, graph.phase = #graph<phase forward>} : tensor<4xf32>
  return %y : tensor<f32>
}

// -----

graph.param @w : tensor<4xf32>
func.func @train_step(%x: tensor<4xf32>) -> tensor<f32> attributes {cleave.loss = {loss = "mse", accumulate = 2 : i64}} {
  %w = graph.read_param @w {graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  %y = graph.mse %w, %x {cleave.microbatch_loss, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  // expected-error @+1 {{'graph.mse' op is a second loss of microbatch 0}}
  %z = graph.mse %x, %w {cleave.microbatch_loss, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  return %z : tensor<f32>
}

// -----

// Two training steps.
graph.param @w : tensor<4xf32>
func.func @a(%x: tensor<4xf32>) -> tensor<f32> attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %y = graph.mse %x, %x : tensor<4xf32>
  return %y : tensor<f32>
}
// expected-error @+1 {{'func.func' op carries 'cleave.loss' as @a does: -cleave-differentiate expects one training step}}
func.func @b(%x: tensor<4xf32>) -> tensor<f32> attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %y = graph.mse %x, %x : tensor<4xf32>
  return %y : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op expects a single block (the step that -cleave-add-loss builds), got 2}}
func.func @train_step(%x: tensor<4xf32>) -> tensor<f32> attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %y = graph.mse %x, %x : tensor<4xf32>
  return %y : tensor<f32>
^bb1:
  return %y : tensor<f32>
}

// -----

// An op on the gradient path without a rule.
dist.mesh @mesh ["tp" = 2]
graph.param @w : tensor<4xf32>
func.func @train_step(%x: tensor<4xf32>) -> tensor<f32> attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %w = graph.read_param @w {graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  // expected-error @+1 {{'dist.shard' op has no gradient rule}}
  %s = dist.shard %w to <@mesh, [{"tp"}]> {graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  %y = graph.mse %s, %x {cleave.microbatch_loss, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  return %y : tensor<f32>
}

// -----

// The loss scale's state parameter exists already (an error only with
// loss-scale: the CLASH run).
graph.param @w : tensor<4xf32>
graph.param @amp.loss_scale : tensor<f32>
func.func @train_step(%x: tensor<4xf32>) -> tensor<f32> attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %w = graph.read_param @w {graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  %y = graph.mse %w, %x {cleave.microbatch_loss, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32>
  return %y : tensor<f32>
}
