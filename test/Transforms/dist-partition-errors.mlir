// Errors of -dist-partition, each a diagnostic naming the op or the
// argument, and a failed pass.
// RUN: cleave-opt %s -split-input-file -allow-unregistered-dialect -dist-partition -verify-diagnostics -o /dev/null

// The input is already per-device code: it contains a collective.
dist.mesh @mesh ["tp" = 4]
func.func @collective(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.all_reduce' op is already per-device code; -dist-partition takes the global program}}
  %r = dist.all_reduce %x on @mesh ["tp"] sum : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// An argument cannot be partial: a device receives its block of a global
// value, not a summand of it.
dist.mesh @mesh ["tp" = 4]
// expected-error @+1 {{'func.func' op argument #0 cannot be partial}}
func.func @partial_argument(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}], partial sum {"tp"}>}) -> tensor<8x16xf32> {
  %r = graph.relu %x : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// Nor can a result.
dist.mesh @mesh ["tp" = 4]
// expected-error @+1 {{'func.func' op result #0 cannot be returned partial; a device returns its block of the global value}}
func.func @partial_result(%x: tensor<8x16xf32>) -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}], partial sum {"tp"}>}) {
  %r = graph.relu %x : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// A sub-axis ("tp" = 4 split in two halves): the partitioner splits values
// along whole mesh axes only, on an argument ...
dist.mesh @mesh ["tp" = 4]
// expected-error @+1 {{'func.func' op uses the sub-axes of #dist.sharding<@mesh, [{"tp":(1)2}, {}]>; the partitioner splits values along whole mesh axes}}
func.func @sub_axis_argument(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp":(1)2}, {}]>}) -> tensor<8x16xf32> {
  %r = graph.relu %x : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// ... or in a constraint.
dist.mesh @mesh ["tp" = 4]
func.func @sub_axis_constraint(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'dist.shard' op uses the sub-axes of #dist.sharding<@mesh, [{"tp":(2)2}, {}]>; the partitioner splits values along whole mesh axes}}
  %s = dist.shard %x to <@mesh, [{"tp":(2)2}, {}]> : tensor<8x16xf32>
  %r = graph.relu %s : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// No collective turns a replicated value into a partial one.
dist.mesh @mesh ["dp" = 2]
func.func @to_partial(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{cannot convert [{}, {}] to [{}, {}] partial sum {"dp"} for dist.shard}}
  %s = dist.shard %x to <@mesh, [{}, {}], partial sum {"dp"}> : tensor<8x16xf32>
  %r = graph.relu %s : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// An op without a sharding rule cannot be run on blocks.
dist.mesh @mesh ["tp" = 4]
func.func @no_rule(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  // expected-error @+1 {{'test.op' op has no sharding rule, so -dist-partition cannot run it on blocks}}
  %r = "test.op"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// Nor an op with regions.
dist.mesh @mesh ["tp" = 4]
func.func @region(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'test.region' op has regions, which -dist-partition does not partition}}
  %r = "test.region"(%x) ({
    "test.yield"() : () -> ()
  }) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// No mesh.
// expected-error @below {{-dist-partition needs a dist.mesh in the module (cleave-compile --mesh, or -dist-add-mesh, adds one)}}
module {
  func.func @no_mesh(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
    return %x : tensor<8x16xf32>
  }
}

// -----

// A zigzag axis splits a dimension only as its major axis: device r holds
// chunks r and 2n - 1 - r of the whole dimension.
dist.mesh @mesh ["tp" = 2, "cp" = 2] {zigzag_axes = ["cp"]}
func.func @zigzag_minor(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{cannot convert [{}, {}] to [{"tp", "cp"}, {}] for dist.shard: a zigzag axis splits dimension 0 only as its major axis, from or to the whole dimension}}
  %s = dist.shard %x to <@mesh, [{"tp", "cp"}, {}]> : tensor<8x16xf32>
  %r = graph.relu %s : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// A ring marked with another layout than the mesh gives its axis.
dist.mesh @mesh ["cp" = 2] {zigzag_axes = ["cp"]}
func.func @ring_layout(%x: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %q = dist.shard %x to <@mesh, [{}, {}, {"cp"}, {}]> : tensor<1x2x8x4xf32>
  // expected-error @+1 {{'graph.attention' op is marked dist.ring = "contiguous" but its sequence axis is one of the mesh's zigzag axes}}
  %o = graph.attention %q, %q, %q causal {dist.ring = "contiguous"} : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}
