// -dist-propagate gives every op result a `dist.sharding` (priority
// propagated, origin the op whose rule decided it) from the annotated
// arguments, parameters and dist.shard constraints, forward and backward.
// RUN: cleave-opt %s -split-input-file -dist-propagate | FileCheck %s

// Forward through matmul, add (with a broadcast bias) and relu: the batch
// split of the input follows the rows. The reads of replicated parameters
// are replicated, with the priority of an annotation (user).
// CHECK-LABEL: func.func @forward
// CHECK: %[[W:.*]] = graph.read_param @w {dist.sharding = #dist.sharding<@mesh, [{}, {}]>} : tensor<16x32xf32>
// CHECK: %[[B:.*]] = graph.read_param @b {dist.sharding = #dist.sharding<@mesh, [{}]>} : tensor<32xf32>
// CHECK: %[[H:.*]] = graph.matmul %arg0, %[[W]] {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], priority propagated>}
// CHECK: %[[A:.*]] = graph.add %[[H]], %[[B]] {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], priority propagated>}
// CHECK: %[[R:.*]] = graph.relu %[[A]] {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], priority propagated>}
// CHECK: return %[[R]]
dist.mesh @mesh ["dp" = 2]
graph.param @w : tensor<16x32xf32>
graph.param @b : tensor<32xf32>
func.func @forward(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x32xf32> {
  %w = graph.read_param @w : tensor<16x32xf32>
  %b = graph.read_param @b : tensor<32xf32>
  %h = graph.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32>
  %a = graph.add %h, %b : tensor<8x32xf32>, tensor<32xf32>
  %r = graph.relu %a : tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// A matmul over a contracting dimension split on "dp" leaves each device a
// partial sum. An add of two values partial over the same axes is linear
// in them and stays partial (one reduction later serves both); relu is
// not linear and reads the sum: its result is not partial.
// CHECK-LABEL: func.func @partial
// CHECK: %[[P:.*]] = graph.matmul %arg0, %arg1 {dist.sharding = #dist.sharding<@mesh, [{}, {}], partial sum {"dp"}, priority propagated>}
// CHECK: %[[Q:.*]] = graph.matmul %arg0, %arg2 {dist.sharding = #dist.sharding<@mesh, [{}, {}], partial sum {"dp"}, priority propagated>}
// CHECK: %[[S:.*]] = graph.add %[[P]], %[[Q]] {dist.sharding = #dist.sharding<@mesh, [{}, {}], partial sum {"dp"}, priority propagated>}
// CHECK: graph.relu %[[S]] {dist.sharding = #dist.sharding<@mesh, [{}, {}], priority propagated>}
dist.mesh @mesh ["dp" = 2]
func.func @partial(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"dp"}]>},
                   %w: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                   %v: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x4xf32> {
  %p = graph.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %q = graph.matmul %x, %v : tensor<8x16xf32>, tensor<16x4xf32>
  %s = graph.add %p, %q : tensor<8x4xf32>, tensor<8x4xf32>
  %r = graph.relu %s : tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

// Adding a replicated bias to a partial value is not linear in the
// partial operand alone (the bias would be summed once per device): the
// add reads the sum. Scaling by a replicated value and dividing by a
// constant are: the result stays partial, until a sub with a replicated
// value.
// CHECK-LABEL: func.func @linearity
// CHECK: %[[P:.*]] = graph.matmul {{.*}}partial sum {"dp"}
// CHECK: graph.add %[[P]], %arg2 {dist.sharding = #dist.sharding<@mesh, [{}, {}], priority propagated>}
// CHECK: %[[M:.*]] = graph.mul %[[P]], %arg3 {dist.sharding = #dist.sharding<@mesh, [{}, {}], partial sum {"dp"}, priority propagated>}
// CHECK: %[[D:.*]] = graph.div %[[M]], %{{.*}} {dist.sharding = #dist.sharding<@mesh, [{}, {}], partial sum {"dp"}, priority propagated>}
// CHECK: graph.sub %[[D]], %arg3 {dist.sharding = #dist.sharding<@mesh, [{}, {}], priority propagated>}
dist.mesh @mesh ["dp" = 2]
func.func @linearity(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"dp"}]>},
                     %w: tensor<16x4xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                     %b: tensor<4xf32>, %y: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %p = graph.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32>
  %a = graph.add %p, %b : tensor<8x4xf32>, tensor<4xf32>
  %m = graph.mul %p, %y : tensor<8x4xf32>, tensor<8x4xf32>
  %c = graph.constant dense<2.0> : tensor<f32>
  %d = graph.div %m, %c : tensor<8x4xf32>, tensor<f32>
  %e = graph.sub %d, %y : tensor<8x4xf32>, tensor<8x4xf32>
  return %a, %e : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Reductions over split dimensions are partial with the reduction's kind:
// sum over the rows split on "dp", max over the columns split on "tp";
// the dimension kept stays split.
// CHECK-LABEL: func.func @reductions
// CHECK: %[[S:.*]] = graph.reduce sum %arg0 dims [0] {dist.sharding = #dist.sharding<@mesh, [{"tp"}], partial sum {"dp"}, priority propagated>}
// CHECK: graph.reduce max %arg0 dims [1] {dist.sharding = #dist.sharding<@mesh, [{"dp"}], partial max {"tp"}, priority propagated>}
// CHECK: graph.exp %[[S]] {dist.sharding = #dist.sharding<@mesh, [{"tp"}], priority propagated>}
dist.mesh @mesh ["dp" = 2, "tp" = 2]
func.func @reductions(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> (tensor<16xf32>, tensor<8xf32>) {
  %s = graph.reduce sum %x dims [0] : tensor<8x16xf32>
  %m = graph.reduce max %x dims [1] : tensor<8x16xf32>
  %e = graph.exp %s : tensor<16xf32>
  return %e, %m : tensor<16xf32>, tensor<8xf32>
}

// -----

// A dist.shard constraint says how its input is best produced: the chain
// computed from a constant (which nothing annotated reaches forward) takes
// the constraint's layout backward, through exp to neg. The constant
// itself is not annotated backward: it is left replicated (the
// partitioner slices or rebuilds it).
// CHECK-LABEL: func.func @backward
// CHECK: %[[C:.*]] = graph.constant {dist.sharding = #dist.sharding<@mesh, [{}, {}], priority propagated>} dense<1.000000e+00> : tensor<8x16xf32>
// CHECK: %[[N:.*]] = graph.neg %[[C]] {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}], priority propagated>}
// CHECK: %[[E:.*]] = graph.exp %[[N]] {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}], priority propagated
// CHECK: dist.shard %[[E]] to <@mesh, [{"tp"}, {}]> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>}
dist.mesh @mesh ["dp" = 2, "tp" = 2]
func.func @backward() -> tensor<8x16xf32> {
  %c = graph.constant dense<1.0> : tensor<8x16xf32>
  %n = graph.neg %c : tensor<8x16xf32>
  %e = graph.exp %n : tensor<8x16xf32>
  %s = dist.shard %e to <@mesh, [{"tp"}, {}]> : tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

// A constant operand of a split op stays replicated; only the op's result
// is split.
// CHECK-LABEL: func.func @constant_operand
// CHECK: %[[C:.*]] = graph.constant {dist.sharding = #dist.sharding<@mesh, [{}, {}], priority propagated>} dense<2.000000e+00> : tensor<8x16xf32>
// CHECK: graph.mul %arg0, %[[C]] {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], priority propagated>}
dist.mesh @mesh ["dp" = 2]
func.func @constant_operand(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x16xf32> {
  %c = graph.constant dense<2.0> : tensor<8x16xf32>
  %y = graph.mul %x, %c : tensor<8x16xf32>, tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Priority decides between two proposals for the rows of an add: the
// parameter's strategy sharding on "dp" beats the relu result's propagated
// sharding on "tp"; the argument's user sharding on "tp" beats the
// parameter's strategy one.
// CHECK-LABEL: func.func @strategy_over_propagated
// CHECK: %[[H:.*]] = graph.relu %arg0 {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}], priority propagated>}
// CHECK: %[[P:.*]] = graph.read_param @p {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], priority strategy, origin "-dist-data-parallel zero=3">}
// CHECK: graph.add %[[H]], %[[P]] {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], priority propagated, origin "-dist-data-parallel zero=3">}
// CHECK-LABEL: func.func @user_over_strategy
// CHECK: %[[P:.*]] = graph.read_param @p
// CHECK: graph.add %arg0, %[[P]] {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}], priority propagated>}
dist.mesh @mesh ["dp" = 2, "tp" = 2]
graph.param @p : tensor<8x16xf32> sharding <@mesh, [{"dp"}, {}], priority strategy, origin "-dist-data-parallel zero=3">
func.func @strategy_over_propagated(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %h = graph.relu %x : tensor<8x16xf32>
  %p = graph.read_param @p : tensor<8x16xf32>
  %r = graph.add %h, %p : tensor<8x16xf32>, tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}
func.func @user_over_strategy(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %p = graph.read_param @p : tensor<8x16xf32>
  %r = graph.add %x, %p : tensor<8x16xf32>, tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}
