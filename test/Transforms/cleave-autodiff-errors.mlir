// Option and model errors of -cleave-autodiff, each a diagnostic and a
// failed pass; a loss or optimizer outside the set, an error of the option
// parser.
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="loss=hinge" 2>&1 | FileCheck %s --check-prefix=LOSS
// LOSS: for the --loss option: unknown value 'hinge' (available: cross-entropy, mse)
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="optimizer=lion" 2>&1 | FileCheck %s --check-prefix=OPT
// OPT: for the --optimizer option: unknown value 'lion' (available: none, sgd, adamw)
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="optimizer=sgd accumulate=0" 2>&1 | FileCheck %s --check-prefix=ACC
// ACC: error: accumulate must be >= 1, got 0
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="grad-clip=1.0" 2>&1 | FileCheck %s --check-prefix=CLIP
// CLIP: error: grad-clip needs an optimizer
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="optimizer=sgd accumulate=2 loss=mse" 2>&1 | FileCheck %s --check-prefix=RANK0
// RANK0: error: 'func.func' op accumulate=2 needs a batch dimension on every input and on the loss's target, got 'tensor<f32>'
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="optimizer=adamw loss=mse" 2>&1 | FileCheck %s --check-prefix=BF16
// BF16: error: 'graph.param' op is 'tensor<4xbf16>'; optimizer updates need f32 parameters
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="optimizer=sgd momentum=0.9 loss=mse" 2>&1 | FileCheck %s --check-prefix=CLASH
// CLASH: error: 'graph.param' op is named 'w.momentum', which the optimizer state needs
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="ignore-index=x" 2>&1 | FileCheck %s --check-prefix=IGNORE
// IGNORE: error: ignore-index must be an integer, got 'x'
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="loss=mse ignore-index=-100" 2>&1 | FileCheck %s --check-prefix=IGNORE-MSE
// IGNORE-MSE: error: ignore-index applies to the cross-entropy loss
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="loss-scale=1024" 2>&1 | FileCheck %s --check-prefix=SCALE-OPT
// SCALE-OPT: error: loss-scale needs an optimizer (the updates divide the scale out)
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="optimizer=sgd loss-scale=-1" 2>&1 | FileCheck %s --check-prefix=SCALE-NEG
// SCALE-NEG: error: loss-scale must be finite and >= 0, got -1
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="optimizer=sgd loss-scale=8 loss-scale-growth-interval=0" 2>&1 | FileCheck %s --check-prefix=SCALE-GROWTH
// SCALE-GROWTH: error: loss-scale-growth-interval must be >= 1, got 0

graph.param @h : tensor<4xbf16>
func.func @forward(%s: tensor<f32>) -> tensor<f32> {
  %h = graph.read_param @h : tensor<4xbf16>
  %f = graph.cast %h : tensor<4xbf16> -> tensor<4xf32>
  %m = graph.reduce sum %f dims [0] : tensor<4xf32>
  %y = graph.mul %m, %s : tensor<f32>, tensor<f32>
  return %y : tensor<f32>
}

// -----

graph.param @w : tensor<4xf32>
graph.param @w.momentum : tensor<4xf32>
func.func @forward(%s: tensor<4xf32>) -> tensor<4xf32> {
  %w = graph.read_param @w : tensor<4xf32>
  %y = graph.mul %w, %s : tensor<4xf32>, tensor<4xf32>
  return %y : tensor<4xf32>
}
