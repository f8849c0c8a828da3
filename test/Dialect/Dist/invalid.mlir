// Every verifier check of the dist dialect fires with a clear message.
// RUN: cleave-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{expects at least one axis}}
dist.mesh @m []

// -----

// expected-error @+1 {{axis "dp" is declared twice}}
dist.mesh @m ["dp" = 2, "dp" = 4]

// -----

// expected-error @+1 {{zigzag axis "cp" is not an axis of the mesh}}
dist.mesh @m ["dp" = 2] {zigzag_axes = ["cp"]}

// -----

// expected-error @+1 {{zigzag axis "cp" is named twice}}
dist.mesh @m ["cp" = 2] {zigzag_axes = ["cp", "cp"]}

// -----

// expected-error @+1 {{axis "tp" must have size >= 1, got 0}}
dist.mesh @m ["tp" = 0]

// -----

// expected-error @+1 {{axis names must not be empty}}
dist.mesh @m ["" = 2]

// -----

// expected-error @+1 {{has 2 axis names but 1 sizes}}
"dist.mesh"() <{sym_name = "m", axis_names = ["a", "b"], axis_sizes = array<i64: 2>}> : () -> ()

// -----

func.func @mesh_not_at_module_level() {
  // expected-error @+1 {{expects parent op 'builtin.module'}}
  "dist.mesh"() <{sym_name = "m", axis_names = ["a"], axis_sizes = array<i64: 2>}> : () -> ()
  return
}

// -----

dist.mesh @m ["dp" = 2, "tp" = 4]
func.func @axis_used_twice(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{sharding uses mesh axis "tp" more than once}}
  %0 = dist.shard %x to <@m, [{"tp"}, {"tp"}]> : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2, "tp" = 4]
func.func @axis_split_and_partial(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{sharding uses mesh axis "dp" more than once}}
  %0 = dist.shard %x to <@m, [{"dp"}, {}], partial sum {"dp"}> : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2]
func.func @unknown_reduction(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{unknown reduction kind 'prod', expected sum, mean, max or min}}
  %0 = dist.shard %x to <@m, [{}, {}], partial prod {"dp"}> : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2, "tp" = 4]
func.func @shard_indivisible(%x: tensor<8x6xf32>) {
  // expected-error @+1 {{cannot shard dimension 1 of the result (size 6) over mesh axis "tp" (4): the size is not divisible by 4}}
  %0 = dist.shard %x to <@m, [{"dp"}, {"tp"}]> : tensor<8x6xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2, "tp" = 4]
func.func @shard_indivisible_two_axes(%x: tensor<12x8xf32>) {
  // expected-error @+1 {{cannot shard dimension 0 of the result (size 12) over mesh axis "dp" (2) x "tp" (4): the size is not divisible by 8}}
  %0 = dist.shard %x to <@m, [{"dp", "tp"}, {}]> : tensor<12x8xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2]
func.func @shard_unknown_axis(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{sharding of the result uses axis "tp" that mesh @m does not have}}
  %0 = dist.shard %x to <@m, [{"tp"}, {}]> : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2]
func.func @shard_unknown_partial_axis(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{sharding of the result uses axis "sp" that mesh @m does not have}}
  %0 = dist.shard %x to <@m, [{}, {}], partial sum {"sp"}> : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2]
func.func @shard_rank_mismatch(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{sharding of the result lists 1 dimension but 'tensor<8x8xf32>' has rank 2}}
  %0 = dist.shard %x to <@m, [{"dp"}]> : tensor<8x8xf32>
  return
}

// -----

func.func @shard_unknown_mesh(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{sharding names @nowhere, which is not a dist.mesh}}
  %0 = dist.shard %x to <@nowhere, [{}, {}]> : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2]
// expected-error @+1 {{cannot shard dimension 0 of argument #0 (size 7) over mesh axis "dp" (2): the size is not divisible by 2}}
func.func @arg_indivisible(%x: tensor<7xf32> {dist.sharding = #dist.sharding<@m, [{"dp"}]>}) {
  return
}

// -----

dist.mesh @m ["dp" = 2]
// expected-error @+1 {{sharding of result #0 lists 2 dimensions but 'tensor<8xf32>' has rank 1}}
func.func @result_rank(%x: tensor<8xf32>) -> (tensor<8xf32> {dist.sharding = #dist.sharding<@m, [{}, {}]>}) {
  return %x : tensor<8xf32>
}

// -----

// expected-error @+1 {{sharding of argument #0 names @missing, which is not a dist.mesh}}
func.func @arg_unknown_mesh(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@missing, [{}]>}) {
  return
}

// -----

dist.mesh @m ["dp" = 2]
// expected-error @+1 {{'dist.sharding' of argument #0 must be a #dist.sharding, got "dp"}}
func.func @arg_not_a_sharding(%x: tensor<8xf32> {dist.sharding = "dp"}) {
  return
}

// -----

dist.mesh @m ["dp" = 2]
// expected-error @+1 {{unknown dist attribute 'dist.shardings' on argument #0}}
func.func @arg_misspelled(%x: tensor<8xf32> {dist.shardings = #dist.sharding<@m, [{}]>}) {
  return
}

// -----

dist.mesh @m ["dp" = 2]
// expected-error @+1 {{sharding of argument #0 needs a ranked tensor, got 'f32'}}
func.func @arg_scalar(%x: f32 {dist.sharding = #dist.sharding<@m, []>}) {
  return
}

// -----

func.func @collective_unknown_mesh(%x: tensor<8xf32>) {
  // expected-error @+1 {{'@nowhere' does not name a dist.mesh}}
  %0 = dist.all_reduce %x on @nowhere ["dp"] sum : tensor<8xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2]
func.func @collective_no_axes(%x: tensor<8xf32>) {
  // expected-error @+1 {{expects at least one mesh axis}}
  %0 = dist.all_reduce %x on @m [] sum : tensor<8xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2]
func.func @collective_unknown_axis(%x: tensor<8xf32>) {
  // expected-error @+1 {{mesh @m has no axis "tp"}}
  %0 = dist.broadcast %x on @m ["tp"] root 0 : tensor<8xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2]
func.func @collective_axis_twice(%x: tensor<8xf32>) {
  // expected-error @+1 {{axis "dp" is listed twice}}
  %0 = dist.all_reduce %x on @m ["dp", "dp"] sum : tensor<8xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2]
func.func @all_reduce_type_changes(%x: tensor<8xf32>) {
  // expected-error @+1 {{all of {input, result} have same type}}
  %0 = "dist.all_reduce"(%x) <{mesh = @m, axes = ["dp"], kind = 0 : i32}> : (tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

dist.mesh @m ["tp" = 4]
func.func @all_gather_wrong_result(%x: tensor<8x2xf32>) {
  // expected-error @+1 {{expects result type 'tensor<8x8xf32>', got 'tensor<8x4xf32>'}}
  %0 = dist.all_gather %x on @m ["tp"] dim 1 : tensor<8x2xf32> -> tensor<8x4xf32>
  return
}

// -----

dist.mesh @m ["tp" = 4]
func.func @all_gather_dim(%x: tensor<8x2xf32>) {
  // expected-error @+1 {{dim 2 is out of range for 'tensor<8x2xf32>'}}
  %0 = dist.all_gather %x on @m ["tp"] dim 2 : tensor<8x2xf32> -> tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["tp" = 4]
func.func @all_gather_element_type(%x: tensor<8x2xf32>) {
  // expected-error @+1 {{expects result type 'tensor<8x8xf32>', got 'tensor<8x8xf16>'}}
  %0 = dist.all_gather %x on @m ["tp"] dim 1 : tensor<8x2xf32> -> tensor<8x8xf16>
  return
}

// -----

dist.mesh @m ["tp" = 4]
func.func @reduce_scatter_indivisible(%x: tensor<6x2xf32>) {
  // expected-error @+1 {{dimension 0 of 'tensor<6x2xf32>' (size 6) is not divisible by the group size 4}}
  %0 = dist.reduce_scatter %x on @m ["tp"] sum dim 0 : tensor<6x2xf32> -> tensor<1x2xf32>
  return
}

// -----

dist.mesh @m ["tp" = 4]
func.func @reduce_scatter_wrong_result(%x: tensor<8x2xf32>) {
  // expected-error @+1 {{expects result type 'tensor<2x2xf32>', got 'tensor<4x2xf32>'}}
  %0 = dist.reduce_scatter %x on @m ["tp"] sum dim 0 : tensor<8x2xf32> -> tensor<4x2xf32>
  return
}

// -----

dist.mesh @m ["tp" = 4]
func.func @reduce_scatter_dim(%x: tensor<8x2xf32>) {
  // expected-error @+1 {{dim -1 is out of range for 'tensor<8x2xf32>'}}
  %0 = dist.reduce_scatter %x on @m ["tp"] sum dim -1 : tensor<8x2xf32> -> tensor<2x2xf32>
  return
}

// -----

dist.mesh @m ["ep" = 4]
func.func @all_to_all_indivisible(%x: tensor<6x4xf32>) {
  // expected-error @+1 {{dimension 0 of 'tensor<6x4xf32>' (size 6) is not divisible by the group size 4}}
  %0 = dist.all_to_all %x on @m ["ep"] split 0 concat 1 : tensor<6x4xf32> -> tensor<1x16xf32>
  return
}

// -----

dist.mesh @m ["ep" = 4]
func.func @all_to_all_wrong_result(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{expects result type 'tensor<2x16xf32>', got 'tensor<8x4xf32>'}}
  %0 = dist.all_to_all %x on @m ["ep"] split 0 concat 1 : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

dist.mesh @m ["ep" = 4]
func.func @all_to_all_split_dim(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{split dim 3 is out of range for 'tensor<8x4xf32>'}}
  %0 = dist.all_to_all %x on @m ["ep"] split 3 concat 1 : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

dist.mesh @m ["ep" = 4]
func.func @all_to_all_concat_dim(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{concat dim 2 is out of range for 'tensor<8x4xf32>'}}
  %0 = dist.all_to_all %x on @m ["ep"] split 0 concat 2 : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

dist.mesh @m ["cp" = 4]
func.func @permute_source_twice(%x: tensor<8xf32>) {
  // expected-error @+1 {{group index 0 is a source twice}}
  %0 = dist.collective_permute %x on @m ["cp"] pairs [[0, 1], [0, 2]] : tensor<8xf32>
  return
}

// -----

dist.mesh @m ["cp" = 4]
func.func @permute_target_twice(%x: tensor<8xf32>) {
  // expected-error @+1 {{group index 2 is a target twice}}
  %0 = dist.collective_permute %x on @m ["cp"] pairs [[0, 2], [1, 2]] : tensor<8xf32>
  return
}

// -----

dist.mesh @m ["cp" = 4]
func.func @permute_outside_group(%x: tensor<8xf32>) {
  // expected-error @+1 {{target 4 is outside the group of 4}}
  %0 = dist.collective_permute %x on @m ["cp"] pairs [[3, 4]] : tensor<8xf32>
  return
}

// -----

dist.mesh @m ["cp" = 4]
func.func @permute_odd_pairs(%x: tensor<8xf32>) {
  // expected-error @+1 {{expects source-target pairs, got 3 indices}}
  %0 = "dist.collective_permute"(%x) <{mesh = @m, axes = ["cp"], flat_pairs = [0, 1, 2]}> : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

dist.mesh @m ["dp" = 2]
func.func @broadcast_root(%x: tensor<8xf32>) {
  // expected-error @+1 {{root 2 is outside the group of 2}}
  %0 = dist.broadcast %x on @m ["dp"] root 2 : tensor<8xf32>
  return
}

// -----

dist.mesh @m ["pp" = 2]
func.func @send_target(%x: tensor<8xf32>) {
  // expected-error @+1 {{target 5 is outside the group of 2}}
  dist.send %x on @m ["pp"] to 5 : tensor<8xf32>
  return
}

// -----

dist.mesh @m ["pp" = 2]
func.func @recv_source() {
  // expected-error @+1 {{source -1 is outside the group of 2}}
  %0 = dist.recv on @m ["pp"] from -1 : tensor<8xf32>
  return
}

// -----

dist.mesh @m ["pp" = 2]
func.func @send_recv_source(%x: tensor<8xf32>) {
  // expected-error @+1 {{source 2 is outside the group of 2}}
  %0 = dist.send_recv %x on @m ["pp"] to 1 from 2 : tensor<8xf32> -> tensor<8xf32>
  return
}

// -----

dist.mesh @m ["pp" = 2]
func.func @send_recv_target(%x: tensor<8xf32>) {
  // expected-error @+1 {{target 3 is outside the group of 2}}
  %0 = dist.send_recv %x on @m ["pp"] to 3 from 0 : tensor<8xf32> -> tensor<8xf32>
  return
}

// -----

// The stage attributes belong on a module.
// expected-error @+1 {{'dist.stage' is an index >= 0 on a pipeline stage's module}}
func.func @stage_on_function() attributes {dist.stage = 0 : i64} {
  return
}

// -----

// expected-error @+1 {{'dist.groups' is a list of mesh axis name lists on a module}}
module attributes {dist.groups = [[]]} {
}

// -----

dist.mesh @m ["dp" = 2]
func.func @mean_of_integers(%x: tensor<8xi64>) {
  // expected-error @+1 {{a mean needs a float element type, got 'i64'}}
  %0 = dist.all_reduce %x on @m ["dp"] mean : tensor<8xi64>
  return
}

// -----

dist.mesh @m ["dp" = 2]
func.func @sum_of_booleans(%x: tensor<8xi1>) {
  // expected-error @+1 {{a sum of i1 values is not defined (use max or min for or and and)}}
  %0 = dist.reduce_scatter %x on @m ["dp"] sum dim 0 : tensor<8xi1> -> tensor<4xi1>
  return
}

// -----

dist.mesh @m ["dp" = 2]
// expected-error @+1 {{partial sharding of argument #0: a mean needs a float element type, got 'i32'}}
func.func @partial_mean_of_integers(%x: tensor<8xi32> {dist.sharding = #dist.sharding<@m, [{}], partial mean {"dp"}>}) {
  return
}

// -----

dist.mesh @m ["tp" = 4]
// expected-error @+1 {{sharding of argument #0 uses sub-axis "tp":(2)4, but 2 x 4 does not divide the size 4 of mesh axis "tp"}}
func.func @sub_axis_too_big(%x: tensor<8xf32> {dist.sharding = #dist.sharding<@m, [{"tp":(2)4}]>}) {
  return
}

// -----

dist.mesh @m ["tp" = 8]
func.func @overlapping_sub_axes(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{sharding uses overlapping parts "tp":(1)4 and "tp":(2)2 of mesh axis "tp"}}
  %0 = dist.shard %x to <@m, [{"tp":(1)4}, {"tp":(2)2}]> : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["tp" = 8]
func.func @sub_axis_and_whole(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{sharding uses mesh axis "tp" more than once}}
  %0 = dist.shard %x to <@m, [{"tp":(1)2}, {"tp"}]> : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["tp" = 8]
func.func @sub_axis_of_one(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{sub-axis "tp" needs pre-size >= 1 and size >= 2, got (1)1}}
  %0 = dist.shard %x to <@m, [{"tp":(1)1}, {}]> : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["tp" = 8]
func.func @open_not_last(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'?' must end a dimension's axes}}
  %0 = dist.shard %x to <@m, [{?, "tp"}, {}]> : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["tp" = 8]
func.func @unknown_priority(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{unknown sharding priority 'high', expected user, strategy or propagated}}
  %0 = dist.shard %x to <@m, [{}, {}], priority high> : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["tp" = 8]
func.func @unknown_clause(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{expected 'partial', 'priority' or 'origin', got 'replicated'}}
  %0 = dist.shard %x to <@m, [{}, {}], replicated> : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["tp" = 4]
func.func @result_sharding_count(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{has 1 result but 'dist.sharding' lists 2 shardings}}
  %0 = graph.neg %x {dist.sharding = [#dist.sharding<@m, [{}, {}]>, #dist.sharding<@m, [{}, {}]>]} : tensor<8x8xf32>
  return
}

// -----

dist.mesh @m ["tp" = 4]
func.func @result_sharding_indivisible(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{cannot shard dimension 0 of result #0 (size 6) over mesh axis "tp" (4): the size is not divisible by 4}}
  %0 = graph.neg %x {dist.sharding = #dist.sharding<@m, [{"tp"}, {}]>} : tensor<6x8xf32>
  return
}

// -----

func.func @result_sharding_not_a_sharding(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{'dist.sharding' must be a #dist.sharding or an array of them, got "tp"}}
  %0 = graph.neg %x {dist.sharding = "tp"} : tensor<6x8xf32>
  return
}

// -----

dist.mesh @m ["tp" = 4]
// expected-error @+1 {{'dist.sharding' belongs on a function's arguments and results, not on the function}}
func.func @sharding_on_function() attributes {dist.sharding = #dist.sharding<@m, []>} {
  return
}

// -----

func.func @unknown_dist_attribute(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{unknown dist attribute 'dist.layout'}}
  %0 = graph.neg %x {dist.layout = 1} : tensor<6x8xf32>
  return
}

// -----

dist.mesh @m ["tp" = 4]
func.func @axis_index_axis() {
  // expected-error @+1 {{mesh @m has no axis "dp"}}
  %0 = dist.axis_index on @m ["dp"] : tensor<i64>
  return
}

// -----

func.func @local_slice_other_dim(%x: tensor<8x4xf32>, %i: tensor<i64>) {
  // expected-error @+1 {{expects the input's size 4 in dimension 1, got 2}}
  %0 = dist.local_slice %x[%i] dim 0 : tensor<8x4xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @local_slice_indivisible(%x: tensor<8x4xf32>, %i: tensor<i64>) {
  // expected-error @+1 {{result size 3 in dimension 0 does not divide the input's 8}}
  %0 = dist.local_slice %x[%i] dim 0 : tensor<8x4xf32> -> tensor<3x4xf32>
  return
}

// -----

dist.mesh @m ["cp" = 4]
func.func @manual_local_type(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{expects the local type 'tensor<2x4xf32>' of input #0 in the body, got 'tensor<8x4xf32>'}}
  %0 = dist.manual_computation(%x) on @m ["cp"] in [#dist.sharding<@m, [{"cp"}, {}]>] out [#dist.sharding<@m, [{}, {}]>] : (tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%l: tensor<8x4xf32>):
    dist.yield %l : tensor<8x4xf32>
  }
  return %0 : tensor<8x4xf32>
}

// -----

dist.mesh @m ["cp" = 4]
func.func @manual_counts(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{has 1 inputs but 0 in_shardings}}
  %0 = dist.manual_computation(%x) on @m ["cp"] in [] out [#dist.sharding<@m, [{}, {}]>] : (tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%l: tensor<8x4xf32>):
    dist.yield %l : tensor<8x4xf32>
  }
  return %0 : tensor<8x4xf32>
}

// -----

dist.mesh @m ["dp" = 2]
func.func @async_read_directly(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{is async: its result must have one use, a dist.wait}}
  %0 = dist.all_reduce async %x on @m ["dp"] sum : tensor<4xf32>
  %1 = graph.neg %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

dist.mesh @m ["dp" = 2]
func.func @async_permute_read_directly(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{is async: its result must have one use, a dist.wait}}
  %0 = dist.collective_permute async %x on @m ["dp"] pairs [[0, 1], [1, 0]] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @m ["dp" = 2]
func.func @async_bucket_read_directly(%x: tensor<4xf32>, %y: tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>) {
  // expected-error @+1 {{is async: each result must have one use, a dist.wait}}
  %0:2 = dist.all_reduce_bucket async %x, %y on @m ["dp"] sum : tensor<4xf32>, tensor<2xf32> -> tensor<4xf32>, tensor<2xf32>
  %1 = dist.wait %0#0 : tensor<4xf32>
  return %1, %0#1 : tensor<4xf32>, tensor<2xf32>
}

// -----

dist.mesh @m ["dp" = 2]
func.func @async_waited_twice(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{is async: its result must have one use, a dist.wait}}
  %0 = dist.all_gather async %x on @m ["dp"] dim 0 : tensor<4xf32> -> tensor<8xf32>
  %1 = dist.wait %0 : tensor<8xf32>
  %2 = dist.wait %0 : tensor<8xf32>
  return %x, %x : tensor<4xf32>, tensor<4xf32>
}

// -----

dist.mesh @m ["dp" = 2]
func.func @wait_for_nothing(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = dist.all_reduce %x on @m ["dp"] sum : tensor<4xf32>
  // expected-error @+1 {{waits for a value that no async collective started}}
  %1 = dist.wait %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

dist.mesh @m ["dp" = 2]
func.func @bucket_types(%x: tensor<4xf32>, %y: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xi64>) {
  // expected-error @+1 {{inputs must share one element type, got 'f32' and 'i64'}}
  %0:2 = dist.all_reduce_bucket %x, %y on @m ["dp"] sum : tensor<4xf32>, tensor<4xi64> -> tensor<4xf32>, tensor<4xi64>
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xi64>
}

// -----

dist.mesh @m ["dp" = 2]
func.func @bucket_results(%x: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{results must have the inputs' types}}
  %0 = dist.all_reduce_bucket %x on @m ["dp"] sum : tensor<4xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @pipeline_step_phase() {
  // expected-error @+1 {{expects phase forward, backward or optimizer, got 'warmup'}}
  dist.pipeline_step "warmup"
  return
}

// -----

func.func @pipeline_step_negative() {
  // expected-error @+1 {{expects a microbatch and a chunk >= 0, got -1 and 0}}
  dist.pipeline_step "forward" microbatch -1
  return
}

// -----

func.func @pipeline_step_optimizer() {
  // expected-error @+1 {{marks the optimizer step, which has no microbatch or chunk}}
  dist.pipeline_step "optimizer" microbatch 2
  return
}

// -----

func.func @ring_elsewhere(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.ring' belongs on a graph.attention or graph.attention_grad}}
  %y = graph.neg %x {dist.ring = "contiguous"} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @ring_layout(%q: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  // expected-error @+1 {{'dist.ring' is the sequence's layout over the ring, "contiguous" (device r holds chunk r) or "zigzag" (chunks r and 2n - 1 - r of 2n), got unit}}
  %o = graph.attention %q, %q, %q causal {dist.ring} : tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>
  return %o : tensor<1x1x4x4xf32>
}
