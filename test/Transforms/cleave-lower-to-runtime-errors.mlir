// RUN: cleave-opt %s --cleave-lower-to-runtime -split-input-file -verify-diagnostics

// expected-error @+1 {{has no memory plan; run -cleave-plan-memory first}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

func.func @forward(%x: tensor<4xf32> {cleave.offset = 0 : i64}) -> tensor<4xf32>
    attributes {cleave.arena_bytes = 64 : i64} {
  // expected-error @+1 {{has no planned offset; run -cleave-plan-memory first}}
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A module-level mesh is no obstacle; a collective waits for the
// rank-aware runtime and says so.
dist.mesh @m ["dp" = 2]
func.func @forward(%x: tensor<4xf32> {cleave.offset = 0 : i64}) -> tensor<4xf32>
    attributes {cleave.arena_bytes = 128 : i64} {
  // expected-error @+1 {{'dist.all_reduce' op is lowered by the rank-aware runtime, which this build does not have yet}}
  %0 = dist.all_reduce %x on @m ["dp"] sum {cleave.offsets = array<i64: 64>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}
