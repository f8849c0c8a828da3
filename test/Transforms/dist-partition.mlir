// -dist-partition (after -dist-propagate) turns each function into the
// program of one device (`dist.partitioned`): values take the local type
// of their sharding and the collectives that convert a value to the layout
// its reader wants are inserted before the reader.
// RUN: cleave-opt %s -split-input-file -dist-propagate -dist-partition | FileCheck %s

// Local types: the batch-split argument holds 4 of the 8 rows, a read of a
// parameter stored split on "dp" returns this device's 16 of its 32 rows,
// a read of a replicated one the whole parameter. Results with a sharding
// are returned as this device's blocks, without a collective.
// CHECK-LABEL: func.func @local_types
// CHECK-SAME: (%arg0: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>})
// CHECK-SAME: -> (tensor<4x32xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}, tensor<16x32xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>})
// CHECK-SAME: attributes {dist.partitioned}
// CHECK-NEXT: %[[W:.*]] = graph.read_param @w : tensor<16x32xf32>
// CHECK-NEXT: %[[E:.*]] = graph.read_param @e : tensor<16x32xf32>
// CHECK-NEXT: %[[H:.*]] = graph.matmul %arg0, %[[W]] : tensor<4x16xf32>, tensor<16x32xf32>
// CHECK-NEXT: %[[R:.*]] = graph.relu %[[H]] : tensor<4x32xf32>
// CHECK-NEXT: %[[N:.*]] = graph.neg %[[E]] : tensor<16x32xf32>
// CHECK-NEXT: return %[[R]], %[[N]] : tensor<4x32xf32>, tensor<16x32xf32>
dist.mesh @mesh ["dp" = 2]
graph.param @w : tensor<16x32xf32>
graph.param @e : tensor<32x32xf32> sharding <@mesh, [{"dp"}, {}]>
func.func @local_types(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>})
    -> (tensor<8x32xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
        tensor<32x32xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) {
  %w = graph.read_param @w : tensor<16x32xf32>
  %e = graph.read_param @e : tensor<32x32xf32>
  %h = graph.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32>
  %r = graph.relu %h : tensor<8x32xf32>
  %n = graph.neg %e : tensor<32x32xf32>
  return %r, %n : tensor<8x32xf32>, tensor<32x32xf32>
}

// -----

// Two partial products added stay partial (add is linear in both); relu
// is not linear, so the sum is all_reduced once, before it.
// CHECK-LABEL: func.func @all_reduce
// CHECK-SAME: (%arg0: tensor<8x8xf32> {{.*}}, %arg1: tensor<8x4xf32> {{.*}}, %arg2: tensor<8x4xf32> {{.*}})
// CHECK-NEXT: %[[P:.*]] = graph.matmul %arg0, %arg1 : tensor<8x8xf32>, tensor<8x4xf32>
// CHECK-NEXT: %[[Q:.*]] = graph.matmul %arg0, %arg2 : tensor<8x8xf32>, tensor<8x4xf32>
// CHECK-NEXT: %[[S:.*]] = graph.add %[[P]], %[[Q]] : tensor<8x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: %[[T:.*]] = dist.all_reduce %[[S]] on @mesh ["dp"] sum : tensor<8x4xf32>
// CHECK-NEXT: %[[R:.*]] = graph.relu %[[T]] : tensor<8x4xf32>
// CHECK-NEXT: return %[[R]]
dist.mesh @mesh ["dp" = 2]
func.func @all_reduce(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"dp"}]>},
                      %w: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                      %v: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x4xf32> {
  %p = graph.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %q = graph.matmul %x, %v : tensor<8x16xf32>, tensor<16x4xf32>
  %s = graph.add %p, %q : tensor<8x4xf32>, tensor<8x4xf32>
  %r = graph.relu %s : tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

// Megatron's MLP on a 2 x 2 mesh: fc1 column-parallel, fc2 row-parallel.
// The fc2 product is partial over "tp" and the add of the replicated bias
// reads its sum (all_reduce over "tp" only); the result, returned
// replicated, is all_gathered over "dp".
// CHECK-LABEL: func.func @megatron
// CHECK-SAME: (%arg0: tensor<4x16xf32> {{.*}}) -> tensor<8x16xf32>
// CHECK-NEXT: %[[W1:.*]] = graph.read_param @w1 : tensor<16x16xf32>
// CHECK-NEXT: %[[W2:.*]] = graph.read_param @w2 : tensor<16x16xf32>
// CHECK-NEXT: %[[B2:.*]] = graph.read_param @b2 : tensor<16xf32>
// CHECK-NEXT: %[[H:.*]] = graph.matmul %arg0, %[[W1]] : tensor<4x16xf32>, tensor<16x16xf32>
// CHECK-NEXT: %[[A:.*]] = graph.relu %[[H]] : tensor<4x16xf32>
// CHECK-NEXT: %[[Y:.*]] = graph.matmul %[[A]], %[[W2]] : tensor<4x16xf32>, tensor<16x16xf32>
// CHECK-NEXT: %[[YR:.*]] = dist.all_reduce %[[Y]] on @mesh ["tp"] sum : tensor<4x16xf32>
// CHECK-NEXT: %[[Z:.*]] = graph.add %[[YR]], %[[B2]] : tensor<4x16xf32>, tensor<16xf32>
// CHECK-NEXT: %[[G:.*]] = dist.all_gather %[[Z]] on @mesh ["dp"] dim 0 : tensor<4x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: return %[[G]] : tensor<8x16xf32>
dist.mesh @mesh ["dp" = 2, "tp" = 2]
graph.param @w1 : tensor<16x32xf32> sharding <@mesh, [{}, {"tp"}]>
graph.param @w2 : tensor<32x16xf32> sharding <@mesh, [{"tp"}, {}]>
graph.param @b2 : tensor<16xf32>
func.func @megatron(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x16xf32> {
  %w1 = graph.read_param @w1 : tensor<16x32xf32>
  %w2 = graph.read_param @w2 : tensor<32x16xf32>
  %b2 = graph.read_param @b2 : tensor<16xf32>
  %h = graph.matmul %x, %w1 : tensor<8x16xf32>, tensor<16x32xf32>
  %a = graph.relu %h : tensor<8x32xf32>
  %y = graph.matmul %a, %w2 : tensor<8x32xf32>, tensor<32x16xf32>
  %z = graph.add %y, %b2 : tensor<8x16xf32>, tensor<16xf32>
  return %z : tensor<8x16xf32>
}

// -----

// A ZeRO-1 AdamW update: the moments are stored split on "dp" along
// dimension 0, so the update runs on this device's 8 of the 16 rows. The
// weight gradient, a sum over this device's samples (partial over "dp"),
// is reduce_scattered into those rows; the replicated parameter is sliced
// locally at this device's index on "dp"; the new parameter is
// all_gathered for the replicated @w, the new moments are stored as they
// are.
// CHECK-LABEL: func.func @zero_update
// CHECK-SAME: (%arg0: tensor<4x16xf32> {{.*}}, %arg1: tensor<4x4xf32> {{.*}})
// CHECK: %[[XT:.*]] = graph.transpose %arg0 perm [1, 0] : tensor<4x16xf32>
// CHECK-NEXT: %[[G:.*]] = graph.matmul %[[XT]], %arg1 : tensor<16x4xf32>, tensor<4x4xf32>
// CHECK-NEXT: %[[W:.*]] = graph.read_param @w : tensor<16x4xf32>
// CHECK-NEXT: %[[M:.*]] = graph.read_param @w.m : tensor<8x4xf32>
// CHECK-NEXT: %[[V:.*]] = graph.read_param @w.v : tensor<8x4xf32>
// CHECK-NEXT: %[[S:.*]] = graph.read_param @optimizer.step : tensor<i64>
// CHECK-NEXT: %[[I:.*]] = dist.axis_index on @mesh ["dp"] : tensor<i64>
// CHECK-NEXT: %[[WB:.*]] = dist.local_slice %[[W]][%[[I]]] dim 0 : tensor<16x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[GB:.*]] = dist.reduce_scatter %[[G]] on @mesh ["dp"] sum dim 0 : tensor<16x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[W1:.*]], %[[M1:.*]], %[[V1:.*]] = graph.adamw %[[WB]], %[[GB]], %[[M]], %[[V]], %[[S]] {{.*}} -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>)
// CHECK-NEXT: %[[WN:.*]] = dist.all_gather %[[W1]] on @mesh ["dp"] dim 0 : tensor<8x4xf32> -> tensor<16x4xf32>
// CHECK-NEXT: graph.assign @w, %[[WN]] : tensor<16x4xf32>
// CHECK-NEXT: graph.assign @w.m, %[[M1]] : tensor<8x4xf32>
// CHECK-NEXT: graph.assign @w.v, %[[V1]] : tensor<8x4xf32>
// CHECK-NEXT: return
dist.mesh @mesh ["dp" = 2]
graph.param @w : tensor<16x4xf32>
graph.param @w.m frozen : tensor<16x4xf32> sharding <@mesh, [{"dp"}, {}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @w.v frozen : tensor<16x4xf32> sharding <@mesh, [{"dp"}, {}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
func.func @zero_update(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                       %dy: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) {
  %xt = graph.transpose %x perm [1, 0] : tensor<8x16xf32>
  %g = graph.matmul %xt, %dy : tensor<16x8xf32>, tensor<8x4xf32>
  %w = graph.read_param @w : tensor<16x4xf32>
  %m = graph.read_param @w.m : tensor<16x4xf32>
  %v = graph.read_param @w.v : tensor<16x4xf32>
  %s = graph.read_param @optimizer.step : tensor<i64>
  %w1, %m1, %v1 = graph.adamw %w, %g, %m, %v, %s {lr = 1.0e-3 : f64} : (tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<i64>) -> (tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>)
  graph.assign @w, %w1 : tensor<16x4xf32>
  graph.assign @w.m, %m1 : tensor<16x4xf32>
  graph.assign @w.v, %v1 : tensor<16x4xf32>
  return
}

// -----

// Replicated -> split on both axes of a 2 x 2 mesh: no communication, a
// local_slice per dimension at this device's index on its axis. Split ->
// replicated (a ZeRO-3 gather of a stored block): one all_gather, which
// serves both readers of the gathered value. The relu result, returned
// replicated, is gathered back, one axis at a time.
// CHECK-LABEL: func.func @layouts
// CHECK-SAME: (%arg0: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>)
// CHECK-NEXT: %[[I:.*]] = dist.axis_index on @mesh ["dp"] : tensor<i64>
// CHECK-NEXT: %[[S0:.*]] = dist.local_slice %arg0[%[[I]]] dim 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[J:.*]] = dist.axis_index on @mesh ["tp"] : tensor<i64>
// CHECK-NEXT: %[[S1:.*]] = dist.local_slice %[[S0]][%[[J]]] dim 1 : tensor<4x16xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[R:.*]] = graph.relu %[[S1]] : tensor<4x8xf32>
// CHECK-NEXT: %[[P:.*]] = graph.read_param @p : tensor<4x16xf32>
// CHECK-NEXT: %[[PG:.*]] = dist.all_gather %[[P]] on @mesh ["dp"] dim 0 : tensor<4x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[A:.*]] = graph.exp %[[PG]] : tensor<8x16xf32>
// CHECK-NEXT: %[[B:.*]] = graph.neg %[[PG]] : tensor<8x16xf32>
// CHECK-NEXT: %[[C:.*]] = graph.add %[[A]], %[[B]] : tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT: %[[RG0:.*]] = dist.all_gather %[[R]] on @mesh ["dp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[RG1:.*]] = dist.all_gather %[[RG0]] on @mesh ["tp"] dim 1 : tensor<8x8xf32> -> tensor<8x16xf32>
// CHECK-NEXT: return %[[RG1]], %[[C]] : tensor<8x16xf32>, tensor<8x16xf32>
dist.mesh @mesh ["dp" = 2, "tp" = 2]
graph.param @p : tensor<8x16xf32> sharding <@mesh, [{"dp"}, {}]>
func.func @layouts(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %s = dist.shard %x to <@mesh, [{"dp"}, {"tp"}]> : tensor<8x16xf32>
  %r = graph.relu %s : tensor<8x16xf32>
  %p = graph.read_param @p : tensor<8x16xf32>
  %g = dist.shard %p to <@mesh, [{}, {}]> : tensor<8x16xf32>
  %a = graph.exp %g : tensor<8x16xf32>
  %b = graph.neg %g : tensor<8x16xf32>
  %c = graph.add %a, %b : tensor<8x16xf32>, tensor<8x16xf32>
  return %r, %c : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// Constants read split: a splat is rebuilt at the size of the block (4x2
// here), without a collective; any other constant is sliced locally.
// CHECK-LABEL: func.func @constants
// CHECK-SAME: (%arg0: tensor<4x2xf32> {{.*}}) -> (tensor<4x2xf32> {{.*}})
// CHECK: %[[ONE:.*]] = graph.constant dense<1.000000e+00> : tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = graph.add %arg0, %[[ONE]] : tensor<4x2xf32>, tensor<4x2xf32>
// CHECK-NEXT: %[[K:.*]] = graph.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-NEXT: %[[I:.*]] = dist.axis_index on @mesh ["tp"] : tensor<i64>
// CHECK-NEXT: %[[KB:.*]] = dist.local_slice %[[K]][%[[I]]] dim 0 : tensor<4xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[B:.*]] = graph.mul %[[A]], %[[KB]] : tensor<4x2xf32>, tensor<2xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x2xf32>
// CHECK-NOT: dist.all_
dist.mesh @mesh ["dp" = 2, "tp" = 2]
func.func @constants(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>})
    -> (tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>}) {
  %one = graph.constant dense<1.0> : tensor<8x4xf32>
  %a = graph.add %x, %one : tensor<8x4xf32>, tensor<8x4xf32>
  %k = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %b = graph.mul %a, %k : tensor<8x4xf32>, tensor<4xf32>
  return %b : tensor<8x4xf32>
}

// -----

// A loss: the sum over this device's samples is partial over "dp", and so
// is its division by the constant batch size (linear). It is returned
// replicated: all_reduced right before the return.
// CHECK-LABEL: func.func @partial_result
// CHECK-SAME: (%arg0: tensor<4x4xf32> {{.*}}, %arg1: tensor<4xi64> {{.*}}) -> tensor<f32> attributes {dist.partitioned}
// CHECK-NEXT: %[[SUM:.*]] = graph.cross_entropy %arg0, %arg1 reduction sum : tensor<4x4xf32>, tensor<4xi64>
// CHECK-NEXT: %[[N:.*]] = graph.constant dense<8.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = graph.div %[[SUM]], %[[N]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[LOSS:.*]] = dist.all_reduce %[[MEAN]] on @mesh ["dp"] sum : tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
dist.mesh @mesh ["dp" = 2]
func.func @partial_result(%logits: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                          %labels: tensor<8xi64> {dist.sharding = #dist.sharding<@mesh, [{"dp"}]>}) -> tensor<f32> {
  %sum = graph.cross_entropy %logits, %labels reduction sum : tensor<8x4xf32>, tensor<8xi64>
  %n = graph.constant dense<8.0> : tensor<f32>
  %mean = graph.div %sum, %n : tensor<f32>, tensor<f32>
  return %mean : tensor<f32>
}

// -----

// A partial max does not pass through a linear op (the max of a sum is not
// the sum of the maxima): each is reduced before the add. A partial mean
// does, and the sum is reduced once.
// CHECK-LABEL: func.func @max_not_linear
// (Each all-reduce right after its producer.)
// CHECK: %[[A:.*]] = graph.reduce max %arg0 dims [1] : tensor<8x4xf32>
// CHECK-NEXT: %[[RA:.*]] = dist.all_reduce %[[A]] on @mesh ["tp"] max : tensor<8xf32>
// CHECK-NEXT: %[[B:.*]] = graph.reduce max %arg1 dims [1] : tensor<8x4xf32>
// CHECK-NEXT: %[[RB:.*]] = dist.all_reduce %[[B]] on @mesh ["tp"] max : tensor<8xf32>
// CHECK: graph.add %[[RA]], %[[RB]]
// CHECK-LABEL: func.func @mean_linear
// CHECK: %[[S:.*]] = graph.add
// CHECK: dist.all_reduce %[[S]] on @mesh ["tp"] mean : tensor<8xf32>
dist.mesh @mesh ["tp" = 2]
func.func @max_not_linear(%x: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>},
                          %y: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8xf32> {
  %a = graph.reduce max %x dims [1] : tensor<8x8xf32>
  %b = graph.reduce max %y dims [1] : tensor<8x8xf32>
  %c = graph.add %a, %b : tensor<8xf32>, tensor<8xf32>
  return %c : tensor<8xf32>
}
func.func @mean_linear(%x: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>},
                       %y: tensor<8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8xf32> {
  %a = graph.reduce mean %x dims [1] : tensor<8x8xf32>
  %b = graph.reduce mean %y dims [1] : tensor<8x8xf32>
  %c = graph.add %a, %b : tensor<8xf32>, tensor<8xf32>
  return %c : tensor<8xf32>
}

// -----

// ZeRO on a parameter split on "tp": its moments, [{"tp", "dp"}, {}],
// refine the parameter's [{"tp"}, {}], so the update runs on the finer
// block. The dp-partial gradient, whole on "tp", is sliced locally on "tp"
// and reduce-scattered on "dp"; the new block is gathered on "dp" into the
// stored "tp" block.
// CHECK-LABEL: func.func @zero_on_tp
// CHECK: %[[G:.*]] = graph.matmul
// CHECK: %[[W:.*]] = graph.read_param @w : tensor<8x8xf32>
// CHECK: %[[M:.*]] = graph.read_param @w.m : tensor<4x8xf32>
// CHECK: %[[DP:.*]] = dist.axis_index on @mesh ["dp"] : tensor<i64>
// CHECK: %[[WB:.*]] = dist.local_slice %[[W]][%[[DP]]] dim 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK: %[[TP:.*]] = dist.axis_index on @mesh ["tp"] : tensor<i64>
// CHECK: %[[GT:.*]] = dist.local_slice %[[G]][%[[TP]]] dim 0 : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK: %[[GB:.*]] = dist.reduce_scatter %[[GT]] on @mesh ["dp"] sum dim 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK: %[[NEW:.*]], %{{.*}}, %{{.*}} = graph.adamw %[[WB]], %[[GB]], %[[M]]
// CHECK: %[[NW:.*]] = dist.all_gather %[[NEW]] on @mesh ["dp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK: graph.assign @w, %[[NW]] : tensor<8x8xf32>
dist.mesh @mesh ["dp" = 2, "tp" = 2]
graph.param @w : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}]>
graph.param @w.m frozen : tensor<16x8xf32> sharding <@mesh, [{"tp", "dp"}, {}], priority strategy>
graph.param @w.v frozen : tensor<16x8xf32> sharding <@mesh, [{"tp", "dp"}, {}], priority strategy>
graph.param @step frozen : tensor<i64>
func.func @zero_on_tp(%x: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                      %dy: tensor<4x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) {
  %xt = graph.transpose %x perm [1, 0] : tensor<4x16xf32>
  %g = graph.matmul %xt, %dy : tensor<16x4xf32>, tensor<4x8xf32>
  %w = graph.read_param @w : tensor<16x8xf32>
  %m = graph.read_param @w.m : tensor<16x8xf32>
  %v = graph.read_param @w.v : tensor<16x8xf32>
  %s = graph.read_param @step : tensor<i64>
  %w1, %m1, %v1 = graph.adamw %w, %g, %m, %v, %s {lr = 1.0e-3 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<i64>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
  graph.assign @w, %w1 : tensor<16x8xf32>
  graph.assign @w.m, %m1 : tensor<16x8xf32>
  graph.assign @w.v, %v1 : tensor<16x8xf32>
  return
}

// -----

// A constraint with open dimensions ({?}) keeps the axes its input splits
// them on: only the closed token dimension is gathered, the batch stays
// split on "dp".
// CHECK-LABEL: func.func @open_constraint
// CHECK-SAME: %arg0: tensor<1x4x8xf32>
// CHECK: %[[G:.*]] = dist.all_gather %arg0 on @mesh ["tp"] dim 1 : tensor<1x4x8xf32> -> tensor<1x8x8xf32>
// CHECK-NOT: dist.all_gather
// CHECK: graph.relu %[[G]] : tensor<1x8x8xf32>
dist.mesh @mesh ["dp" = 2, "tp" = 2]
func.func @open_constraint(%x: tensor<2x8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}, {}]>})
    -> (tensor<2x8x8xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}, {}]>}) {
  %s = dist.shard %x to <@mesh, [{?}, {}, {?}]> : tensor<2x8x8xf32>
  %y = graph.relu %s : tensor<2x8x8xf32>
  return %y : tensor<2x8x8xf32>
}
