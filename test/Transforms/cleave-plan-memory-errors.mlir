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

// -----

// A bucket reduces its inputs in place: one used after it cannot be.
dist.mesh @mesh ["dp" = 2]
func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a = graph.neg %x : tensor<4xf32>
  %b = graph.exp %x : tensor<4xf32>
  // expected-error @+1 {{'dist.all_reduce_bucket' op input #1 is stored elsewhere or used after the bucket; a bucket reduces its inputs in place}}
  %r:2 = dist.all_reduce_bucket %a, %b on @mesh ["dp"] sum : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  return %r#0, %r#1, %b : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Byte counts that overflow int64 (the sum of such an input once returned
// 0, and a wrapped count planned a buffer too small) are errors.
// expected-error @+1 {{'func.func' op argument #0 'tensor<4611686018427387904x4x4xf32>' has more than 2^62 bytes: it cannot be planned}}
func.func @forward(%x: tensor<4611686018427387904x4x4xf32>) -> tensor<f32> {
  %s = graph.reduce sum %x dims [0, 1, 2] : tensor<4611686018427387904x4x4xf32>
  return %s : tensor<f32>
}

// -----

func.func @forward(%x: tensor<4xf32>) -> tensor<4x1152921504606846976xf32> {
  // expected-error @+1 {{'graph.broadcast_in_dim' op result 'tensor<4x1152921504606846976xf32>' has more than 2^62 bytes: it cannot be planned}}
  %y = graph.broadcast_in_dim %x dims [0] : tensor<4xf32> -> tensor<4x1152921504606846976xf32>
  return %y : tensor<4x1152921504606846976xf32>
}
