// -cleave-link-eval's checks: the nested evaluation program must be lowered
// with its prefix, and the outer program lowered.
// RUN: cleave-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(cleave-plan-memory{entry=train_step},cleave-lower-to-runtime{entry=train_step},cleave-link-eval)'

func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
// expected-error @+1 {{'builtin.module' op is not lowered with symbol-prefix=cleave_eval_; run -cleave-lower-to-runtime on it first}}
module attributes {cleave.eval_program} {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = graph.exp %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
module attributes {cleave.eval_program} {
}
// expected-error @+1 {{'builtin.module' op is a second evaluation program}}
module attributes {cleave.eval_program} {
}
