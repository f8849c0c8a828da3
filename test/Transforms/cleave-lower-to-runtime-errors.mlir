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

// A planned function whose argument or parameter has no offset (it once
// crashed the lowering).
// expected-error @+1 {{'func.func' op argument #1 has no planned offset ('cleave.offset'); run -cleave-plan-memory first}}
func.func @forward(%x: tensor<4xf32> {cleave.offset = 0 : i64}, %z: tensor<4xf32>) -> tensor<4xf32>
    attributes {cleave.arena_bytes = 128 : i64} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'graph.param' op has no planned offset ('cleave.offset'); run -cleave-plan-memory first}}
graph.param @w : tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {cleave.offset = 64 : i64}) -> tensor<4xf32>
    attributes {cleave.arena_bytes = 128 : i64} {
  return %x : tensor<4xf32>
}

// -----

// The runtime finds the step counter by role: a program has one at most.
graph.param @step frozen : tensor<i64> {cleave.offset = 0 : i64, cleave.role = #cleave.role<step_counter>}
// expected-error @+1 {{has role step_counter, as @step has; a program has one at most}}
graph.param @step2 frozen : tensor<i64> {cleave.offset = 64 : i64, cleave.role = #cleave.role<step_counter>}
func.func @forward(%x: tensor<4xf32> {cleave.offset = 128 : i64}) -> tensor<4xf32>
    attributes {cleave.arena_bytes = 192 : i64} {
  return %x : tensor<4xf32>
}

// -----

// The engine moves blocks along dimension 0: others are normalized first.
dist.mesh @m ["dp" = 2]
func.func @forward(%x: tensor<4x2xf32> {cleave.offset = 0 : i64}) -> tensor<4x4xf32>
    attributes {cleave.arena_bytes = 192 : i64} {
  // expected-error @+1 {{'dist.all_gather' op works along dimension 1; run -cleave-normalize-collectives first (the engine moves blocks along dimension 0)}}
  %0 = dist.all_gather %x on @m ["dp"] dim 1 {cleave.offsets = array<i64: 64>} : tensor<4x2xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// A program runs on one mesh.
dist.mesh @m ["dp" = 2]
// expected-error @+1 {{'dist.mesh' op is a second mesh; a program runs on one dist.mesh (@m)}}
dist.mesh @n ["tp" = 2]
func.func @forward(%x: tensor<4xf32> {cleave.offset = 0 : i64}) -> tensor<4xf32>
    attributes {cleave.arena_bytes = 64 : i64} {
  return %x : tensor<4xf32>
}

// -----

// Argument shardings describe blocks only in one device's program.
dist.mesh @m ["dp" = 2]
// expected-error @+1 {{'func.func' op has a sharding on argument #0 but is not one device's program (dist.partitioned): partition it before lowering}}
func.func @forward(%x: tensor<4xf32> {cleave.offset = 0 : i64, dist.sharding = #dist.sharding<@m, [{"dp"}]>}) -> tensor<4xf32>
    attributes {cleave.arena_bytes = 64 : i64} {
  return %x : tensor<4xf32>
}

// -----

// The lowering is a full conversion: an op that no pattern lowers fails it
// by name.
func.func private @helper(tensor<4xf32>) -> tensor<4xf32>
func.func @forward(%x: tensor<4xf32> {cleave.offset = 0 : i64}) -> tensor<4xf32>
    attributes {cleave.arena_bytes = 128 : i64} {
  // expected-error @+1 {{failed to legalize operation 'func.call'}}
  %0 = func.call @helper(%x) {cleave.offsets = array<i64: 64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Sharding annotations and manual regions belong to the program before
// partitioning. A pattern's error does not stop the conversion: each op
// reports its own.
dist.mesh @m ["dp" = 2]
func.func @forward(%x: tensor<4x2xf32> {cleave.offset = 0 : i64}) -> tensor<4x4xf32>
    attributes {cleave.arena_bytes = 256 : i64} {
  // expected-error @+1 {{'dist.shard' op is not part of a partitioned program (run the partitioner before lowering)}}
  %0 = dist.shard %x to <@m, [{"dp"}, {}]> {cleave.offsets = array<i64: 64>} : tensor<4x2xf32>
  // expected-error @+1 {{'dist.manual_computation' op is not part of a partitioned program (run the partitioner before lowering)}}
  %1 = dist.manual_computation(%0) on @m ["dp"] in [#dist.sharding<@m, [{"dp"}, {}]>] out [#dist.sharding<@m, [{"dp"}, {}]>] {cleave.offsets = array<i64: 128>} : (tensor<4x2xf32>) -> tensor<4x2xf32> {
  ^bb0(%l: tensor<2x2xf32>):
    %s = dist.all_reduce %l on @m ["dp"] sum : tensor<2x2xf32>
    dist.yield %s : tensor<2x2xf32>
  }
  // expected-error @+1 {{'dist.all_gather' op works along dimension 1; run -cleave-normalize-collectives first (the engine moves blocks along dimension 0)}}
  %2 = dist.all_gather %1 on @m ["dp"] dim 1 {cleave.offsets = array<i64: 192>} : tensor<4x2xf32> -> tensor<4x4xf32>
  %3 = graph.exp %2 {cleave.offsets = array<i64: 192>} : tensor<4x4xf32>
  return %3 : tensor<4x4xf32>
}
