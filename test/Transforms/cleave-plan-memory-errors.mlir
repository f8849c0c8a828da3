// RUN: cleave-opt %s --cleave-plan-memory -split-input-file -verify-diagnostics -allow-unregistered-dialect

// expected-error @+1 {{no entry function 'forward' (and not exactly one function) to plan}}
module {
  func.func @a() { return }
  func.func @b() { return }
}

// -----

func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{result is not a tensor; cannot plan it}}
  %c = "test.scalar"() : () -> f32
  return %x : tensor<4xf32>
}

// -----

// A parameter's value may not be used after the parameter is overwritten.
graph.param @p : tensor<4xf32>
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{value of @p is used after an op overwrites the parameter}}
  %p = graph.read_param @p : tensor<4xf32>
  graph.assign @p, %x : tensor<4xf32>
  %y = graph.add %p, %x : tensor<4xf32>, tensor<4xf32>
  return %y : tensor<4xf32>
}
