// Option and model errors of -cleave-add-loss, each a diagnostic and a
// failed pass; a loss outside the set is an error of the option parser.
// RUN: not cleave-opt %s --split-input-file --cleave-add-loss="loss=hinge" 2>&1 | FileCheck %s --check-prefix=LOSS
// LOSS: for the --loss option: unknown value 'hinge' (available: cross-entropy, mse)
// RUN: not cleave-opt %s --split-input-file --cleave-add-loss="accumulate=0" 2>&1 | FileCheck %s --check-prefix=ACC
// ACC: error: accumulate must be >= 1, got 0
// RUN: not cleave-opt %s --split-input-file --cleave-add-loss="ignore-index=x" 2>&1 | FileCheck %s --check-prefix=IGNORE
// IGNORE: error: ignore-index must be an integer, got 'x'
// RUN: not cleave-opt %s --split-input-file --cleave-add-loss="loss=mse ignore-index=-100" 2>&1 | FileCheck %s --check-prefix=IGNORE-MSE
// IGNORE-MSE: error: ignore-index applies to the cross-entropy loss
// RUN: not cleave-opt %s --split-input-file --cleave-add-loss="loss=mse accumulate=2" 2>&1 | FileCheck %s --check-prefix=RANK0
// RANK0: error: 'func.func' op accumulate=2 needs a batch dimension on every input and on the loss's target, got 'tensor<f32>'
// RUN: not cleave-opt %s --split-input-file --cleave-add-loss="moe-aux-loss=-1" 2>&1 | FileCheck %s --check-prefix=AUX
// AUX: error: moe-aux-loss must be a finite number >= 0, got -1
// RUN: cleave-opt %s --split-input-file --cleave-add-loss -verify-diagnostics -o /dev/null

// A scalar output has no classes for a cross-entropy (and, with
// accumulate=2, no batch dimension).
// expected-error @+1 {{'func.func' op first result must be a float tensor of logits [..., classes] for the cross-entropy loss}}
func.func @forward(%s: tensor<f32>) -> tensor<f32> {
  %y = graph.exp %s : tensor<f32>
  return %y : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op first result must be a float tensor of logits [..., classes] for the cross-entropy loss}}
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x3xi64> {
  %y = graph.cast %x : tensor<4x3xf32> -> tensor<4x3xi64>
  return %y : tensor<4x3xi64>
}

// -----

// A @forward without results (it once crashed the pass).
// expected-error @+1 {{'func.func' op has no results: the cross-entropy loss is computed from its first result}}
func.func @forward(%x: tensor<4xf32>) {
  %y = graph.exp %x : tensor<4xf32>
  return
}

// -----

// Nothing to build the step from (running the pass twice is this too).
// expected-error @+1 {{-cleave-add-loss needs a single-block @forward}}
module {
  func.func @main() { return }
}
