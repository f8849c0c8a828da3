// Errors of -cleave-add-optimizer, each a diagnostic naming what is missing
// or wrong, and a failed pass; an optimizer outside the set is an error of
// the option parser (none is -cleave-autodiff's: no optimizer to add).
// RUN: not cleave-opt %s --split-input-file --cleave-add-optimizer="optimizer=none" 2>&1 | FileCheck %s --check-prefix=OPT
// OPT: for the --optimizer option: unknown value 'none' (available: sgd, adamw)
// RUN: not cleave-opt %s --split-input-file --cleave-add-optimizer="lr=-1" 2>&1 | FileCheck %s --check-prefix=LR
// LR: error: lr and grad-clip must be >= 0
// RUN: not cleave-opt %s --split-input-file --cleave-add-optimizer="grad-clip=-1" 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not cleave-opt %s --split-input-file --cleave-add-optimizer="loss-scale-growth-interval=0" 2>&1 | FileCheck %s --check-prefix=GROWTH
// GROWTH: error: loss-scale-growth-interval must be >= 1, got 0
// After -cleave-add-loss alone: a loss without gradients.
// RUN: not cleave-opt %s --split-input-file --cleave-add-loss=loss=mse --cleave-add-optimizer 2>&1 | FileCheck %s --check-prefix=UNDIFF
// UNDIFF: error: 'func.func' op has no gradients: its loss is not differentiated (run -cleave-differentiate before -cleave-add-optimizer)
// RUN: not cleave-opt %s --split-input-file --cleave-add-loss=loss=mse --cleave-differentiate --cleave-add-optimizer 2>&1 | FileCheck %s --check-prefix=BF16
// BF16: error: 'graph.param' op is 'tensor<4xbf16>'; optimizer updates need f32 parameters
// RUN: cleave-opt %s --split-input-file --cleave-add-optimizer="optimizer=sgd momentum=0.9" -verify-diagnostics -o /dev/null

// Not a training step: no loss, no gradients.
// expected-error @below {{-cleave-add-optimizer needs gradients: no function carries 'cleave.loss' (run -cleave-add-loss and -cleave-differentiate first)}}
module {
  graph.param @h : tensor<4xbf16>
  func.func @forward(%x: tensor<4xbf16>) -> tensor<bf16> {
    %h = graph.read_param @h : tensor<4xbf16>
    %y = graph.mul %h, %x : tensor<4xbf16>, tensor<4xbf16>
    %s = graph.reduce sum %y dims [0] : tensor<4xbf16>
    return %s : tensor<bf16>
  }
}

// -----

graph.param @w frozen : tensor<4xf32>
// expected-error @+1 {{'func.func' op result #1 is the gradient of frozen parameter @w}}
func.func @train_step(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32> {cleave.gradient = @w})
    attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %l = graph.mse %x, %x : tensor<4xf32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// -----

graph.param @w : tensor<4xf32>
// expected-error @+1 {{'func.func' op result #1 is the gradient of @w of type 'tensor<4xf32>', got 'tensor<2xf32>'}}
func.func @train_step(%x: tensor<2xf32>) -> (tensor<f32>, tensor<2xf32> {cleave.gradient = @w})
    attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %l = graph.mse %x, %x : tensor<2xf32>
  return %l, %x : tensor<f32>, tensor<2xf32>
}

// -----

graph.param @w : tensor<4xf32>
// expected-error @+1 {{'func.func' op result #2 is a second gradient of @w}}
func.func @train_step(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32> {cleave.gradient = @w}, tensor<4xf32> {cleave.gradient = @w})
    attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %l = graph.mse %x, %x : tensor<4xf32>
  return %l, %x, %x : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A symbol without regions that is no graph.param.
dist.mesh @mesh ["dp" = 2]
// expected-error @+1 {{'func.func' op result #1 is the gradient of @mesh, not a graph.param}}
func.func @train_step(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32> {cleave.gradient = @mesh})
    attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %l = graph.mse %x, %x : tensor<4xf32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// -----

// The gradients are of a scaled loss, but the scale is nowhere.
graph.param @w : tensor<4xf32>
// expected-error @+1 {{'func.func' op has a scaled loss ('loss_scale' in 'cleave.loss') but no parameter has the role loss_scale}}
func.func @train_step(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32> {cleave.gradient = @w})
    attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64, loss_scale = 8.0 : f64}} {
  %l = graph.mse %x, %x : tensor<4xf32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @below {{the model has no parameters to train}}
module {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<f32>
      attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
    %l = graph.mse %x, %x : tensor<4xf32>
    return %l : tensor<f32>
  }
}

// -----

graph.param @w : tensor<4xf32>
// expected-error @+1 {{'graph.param' op is named 'w.momentum', which the optimizer state needs}}
graph.param @w.momentum : tensor<4xf32>
func.func @train_step(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32> {cleave.gradient = @w})
    attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %l = graph.mse %x, %x : tensor<4xf32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op expects a single block (the step that -cleave-add-loss builds), got 2}}
func.func @train_step(%x: tensor<4xf32>) -> tensor<f32> attributes {cleave.loss = {loss = "mse", accumulate = 1 : i64}} {
  %y = graph.mse %x, %x : tensor<4xf32>
  return %y : tensor<f32>
^bb1:
  return %y : tensor<f32>
}
