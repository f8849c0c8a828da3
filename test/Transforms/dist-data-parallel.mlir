// -dist-data-parallel annotates: every tensor argument is split on the axis
// along its batch dimension (priority strategy), and with ZeRO the stored
// state is split too; zero=3 also gathers each trainable parameter before
// each use outside the optimizer. Every mesh is 2 x 2 ("dp" major, "tp"
// minor); the axis is "dp" unless the RUN line names another.
// RUN: cleave-opt %s -split-input-file -dist-data-parallel | FileCheck %s
// RUN: cleave-opt %s -split-input-file -dist-data-parallel="zero=1" | FileCheck %s --check-prefix=ZERO1
// RUN: cleave-opt %s -split-input-file -dist-data-parallel="zero=3" | FileCheck %s --check-prefix=ZERO3
// RUN: cleave-opt %s -split-input-file -dist-data-parallel="axis=tp" | FileCheck %s --check-prefix=TP

// The batch is dimension 0 of every tensor argument, integer labels
// included; a scalar has no batch and an external function no body, so
// both stay as they are.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], priority strategy, origin "-dist-data-parallel">}
// CHECK-SAME: %arg1: tensor<8xi64> {dist.sharding = #dist.sharding<@mesh, [{"dp"}], priority strategy, origin "-dist-data-parallel">}
// CHECK-SAME: %arg2: tensor<f32>)
// CHECK: func.func private @external(tensor<8x16xf32>)
dist.mesh @mesh ["dp" = 2, "tp" = 2]
func.func @forward(%x: tensor<8x16xf32>, %labels: tensor<8xi64>, %scale: tensor<f32>) -> tensor<8x16xf32> {
  %y = graph.mul %x, %scale : tensor<8x16xf32>, tensor<f32>
  return %y : tensor<8x16xf32>
}
func.func private @external(tensor<8x16xf32>)

// -----

// A training step accumulating 2 microbatches takes its inputs stacked
// [K, B, ...]: the batch is dimension 1.
// CHECK-LABEL: func.func @accumulating
// CHECK-SAME: %arg0: tensor<2x8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"dp"}, {}], priority strategy, origin "-dist-data-parallel">}
// CHECK-SAME: %arg1: tensor<2x8xi64> {dist.sharding = #dist.sharding<@mesh, [{}, {"dp"}], priority strategy, origin "-dist-data-parallel">}
dist.mesh @mesh ["dp" = 2, "tp" = 2]
func.func @accumulating(%x: tensor<2x8x16xf32>, %labels: tensor<2x8xi64>) -> tensor<2x8x16xf32> attributes {cleave.training_config = {accumulate = 2 : i64, dampening = 0.0 : f64, grad_clip = 0.0 : f64, loss = "mse", lr = 0.5 : f64, momentum = 0.0 : f64, nesterov = false, optimizer = "sgd", weight_decay = 0.0 : f64}} {
  return %x : tensor<2x8x16xf32>
}

// -----

// Arguments already annotated on a 2 x 2 mesh by a strategy: a batch
// already split on "tp" is split on "dp" too (4 rows, divisible by 2 x 2),
// the axes in the mesh's order, "dp" major as the ranks are numbered; one
// already using "dp" is left alone. With
// axis=tp, the first already uses "tp" and the second gets "tp" on its
// batch. A layout the user wrote (priority user, the default) is kept.
// CHECK-LABEL: func.func @annotated
// CHECK-SAME: %arg0: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp", "tp"}, {}], priority strategy, origin "-dist-data-parallel">}
// CHECK-SAME: %arg1: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"dp"}], priority strategy>}
// CHECK-SAME: %arg2: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}]>}
// TP-LABEL: func.func @annotated
// TP-SAME: %arg0: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}], priority strategy>}
// TP-SAME: %arg1: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {"dp"}], priority strategy, origin "-dist-data-parallel">}
// TP-SAME: %arg2: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}]>}
dist.mesh @mesh ["dp" = 2, "tp" = 2]
func.func @annotated(%x: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}], priority strategy>},
                     %y: tensor<8x4xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"dp"}], priority strategy>},
                     %z: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}]>}) {
  return
}

// -----

// The stored state of an AdamW step. zero=0 shards none of it.
// CHECK-LABEL: graph.param @w : tensor<3x8xf32>{{$}}
// CHECK-NOT: sharding
// CHECK: func.func @train_step
// CHECK-NOT: = dist.shard
// CHECK: return
//
// zero=1: the optimizer state only, split on its first dimension the axis
// divides: dimension 1 of the 3x8 moments; the 3-element moment stays
// replicated. The parameters, the frozen table and the step counter are
// not touched and the function body is not changed.
// ZERO1-LABEL: graph.param @w : tensor<3x8xf32>{{$}}
// ZERO1: graph.param @b : tensor<3xf32>{{$}}
// ZERO1: graph.param @table frozen : tensor<4x8xf32>{{$}}
// ZERO1: graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
// ZERO1: graph.param @w.m frozen : tensor<3x8xf32> sharding <@mesh, [{}, {"dp"}], priority strategy, origin "-dist-data-parallel zero=1"> {cleave.role = #cleave.role<optimizer_state>}
// ZERO1: graph.param @w.v frozen : tensor<3x8xf32> sharding <@mesh, [{}, {"dp"}], priority strategy, origin "-dist-data-parallel zero=1"> {cleave.role = #cleave.role<optimizer_state>}
// ZERO1: graph.param @b.m frozen : tensor<3xf32> {cleave.role = #cleave.role<optimizer_state>}
// ZERO1-LABEL: func.func @train_step
// ZERO1-NOT: = dist.shard
// ZERO1: return
//
// zero=3: the trainable parameter @w is stored split too (@b, which "dp"
// divides along no dimension, stays replicated, and so is never
// gathered). Each use of @w in the forward and the backward (the matmul,
// the transpose) reads it anew and gathers it right before the use; the
// update, graph.adamw, keeps reading the stored block. In @predict the
// read has no other use and is replaced.
// ZERO3-LABEL: graph.param @w : tensor<3x8xf32> sharding <@mesh, [{}, {"dp"}], priority strategy, origin "-dist-data-parallel zero=3">
// ZERO3: graph.param @b : tensor<3xf32>{{$}}
// ZERO3: graph.param @table frozen : tensor<4x8xf32>{{$}}
// ZERO3: graph.param @w.m frozen : tensor<3x8xf32> sharding <@mesh, [{}, {"dp"}], priority strategy, origin "-dist-data-parallel zero=3">
// ZERO3: graph.param @b.m frozen : tensor<3xf32> {cleave.role = #cleave.role<optimizer_state>}
// ZERO3-LABEL: func.func @train_step
// ZERO3: %[[STORED:.*]] = graph.read_param @w : tensor<3x8xf32>
// ZERO3-NEXT: %[[R1:.*]] = graph.read_param @w : tensor<3x8xf32>
// ZERO3-NEXT: %[[G1:.*]] = dist.shard %[[R1]] to <@mesh, [{}, {}], origin "-dist-data-parallel zero=3"> : tensor<3x8xf32>
// ZERO3-NEXT: graph.matmul %arg0, %[[G1]]
// ZERO3-NEXT: %[[R2:.*]] = graph.read_param @w : tensor<3x8xf32>
// ZERO3-NEXT: %[[G2:.*]] = dist.shard %[[R2]] to <@mesh, [{}, {}], origin "-dist-data-parallel zero=3"> : tensor<3x8xf32>
// ZERO3-NEXT: graph.transpose %[[G2]] perm [1, 0]
// ZERO3-NOT: = dist.shard
// ZERO3: graph.adamw %[[STORED]],
// ZERO3-LABEL: func.func @predict
// ZERO3-NEXT: %[[R:.*]] = graph.read_param @w : tensor<3x8xf32>
// ZERO3-NEXT: %[[G:.*]] = dist.shard %[[R]] to <@mesh, [{}, {}], origin "-dist-data-parallel zero=3"> : tensor<3x8xf32>
// ZERO3-NEXT: %[[Y:.*]] = graph.matmul %arg0, %[[G]]
// ZERO3-NEXT: return %[[Y]]
dist.mesh @mesh ["dp" = 2, "tp" = 2]
graph.param @w : tensor<3x8xf32>
graph.param @b : tensor<3xf32>
graph.param @table frozen : tensor<4x8xf32>
graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
graph.param @w.m frozen : tensor<3x8xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @w.v frozen : tensor<3x8xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @b.m frozen : tensor<3xf32> {cleave.role = #cleave.role<optimizer_state>}
func.func @train_step(%x: tensor<4x3xf32>, %dy: tensor<4x8xf32>) -> tensor<4x3xf32> {
  %w = graph.read_param @w : tensor<3x8xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x8xf32>
  %wt = graph.transpose %w perm [1, 0] : tensor<3x8xf32>
  %dx = graph.matmul %dy, %wt : tensor<4x8xf32>, tensor<8x3xf32>
  %xt = graph.transpose %x perm [1, 0] : tensor<4x3xf32>
  %g = graph.matmul %xt, %dy : tensor<3x4xf32>, tensor<4x8xf32>
  %m = graph.read_param @w.m : tensor<3x8xf32>
  %v = graph.read_param @w.v : tensor<3x8xf32>
  %s = graph.read_param @optimizer.step : tensor<i64>
  %w1, %m1, %v1 = graph.adamw %w, %g, %m, %v, %s {lr = 1.0e-3 : f64} : (tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>, tensor<i64>) -> (tensor<3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>)
  graph.assign @w, %w1 : tensor<3x8xf32>
  graph.assign @w.m, %m1 : tensor<3x8xf32>
  graph.assign @w.v, %v1 : tensor<3x8xf32>
  return %dx : tensor<4x3xf32>
}
func.func @predict(%x: tensor<4x3xf32>) -> tensor<4x8xf32> {
  %w = graph.read_param @w : tensor<3x8xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// zero=3 with SGD: the forward's mul gets a gathered copy; graph.sgd and
// graph.assign (a copy of the stored value into another parameter) keep
// reading the stored block.
// ZERO3-LABEL: func.func @sgd_step
// ZERO3-NEXT: %[[STORED:.*]] = graph.read_param @u : tensor<8xf32>
// ZERO3-NEXT: %[[R:.*]] = graph.read_param @u : tensor<8xf32>
// ZERO3-NEXT: %[[G:.*]] = dist.shard %[[R]] to <@mesh, [{}], origin "-dist-data-parallel zero=3"> : tensor<8xf32>
// ZERO3-NEXT: graph.mul %arg0, %[[G]]
// ZERO3-NOT: = dist.shard
// ZERO3: graph.assign @u.copy, %[[STORED]]
// ZERO3: graph.sgd %[[STORED]],
// ZERO3-NOT: = dist.shard
// ZERO3: return
dist.mesh @mesh ["dp" = 2, "tp" = 2]
graph.param @u : tensor<8xf32>
graph.param @u.copy frozen : tensor<8xf32>
graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
func.func @sgd_step(%x: tensor<8xf32>, %dy: tensor<8xf32>) -> tensor<8xf32> {
  %u = graph.read_param @u : tensor<8xf32>
  %y = graph.mul %x, %u : tensor<8xf32>, tensor<8xf32>
  %g = graph.mul %dy, %x : tensor<8xf32>, tensor<8xf32>
  graph.assign @u.copy, %u : tensor<8xf32>
  %s = graph.read_param @optimizer.step : tensor<i64>
  %u1 = graph.sgd %u, %g, %s {lr = 0.1 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>) -> tensor<8xf32>
  graph.assign @u, %u1 : tensor<8xf32>
  return %y : tensor<8xf32>
}
