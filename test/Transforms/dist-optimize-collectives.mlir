// RUN: cleave-opt %s -split-input-file -dist-optimize-collectives | FileCheck %s

// An all-reduce read only by local slices of its group's blocks becomes a
// reduce-scatter into the block.
// CHECK-LABEL: func.func @reduce_then_slice
// CHECK: %[[S:.*]] = dist.reduce_scatter %arg0 on @mesh ["dp"] sum dim 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NOT: dist.all_reduce
// CHECK-NOT: dist.local_slice
// CHECK: graph.relu %[[S]]
dist.mesh @mesh ["dp" = 2]
func.func @reduce_then_slice(%g: tensor<8x4xf32>) -> tensor<4x4xf32> attributes {dist.partitioned} {
  %r = dist.all_reduce %g on @mesh ["dp"] sum : tensor<8x4xf32>
  %i = dist.axis_index on @mesh ["dp"] : tensor<i64>
  %s = dist.local_slice %r[%i] dim 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %y = graph.relu %s : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// Not when the whole reduction is read too, or the slice is along other
// axes than the reduction's.
// CHECK-LABEL: func.func @kept
// CHECK: dist.all_reduce
// CHECK: dist.local_slice
// CHECK-LABEL: func.func @other_axes
// CHECK: dist.all_reduce
// CHECK: dist.local_slice
dist.mesh @mesh ["dp" = 2, "tp" = 2]
func.func @kept(%g: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<4x4xf32>) attributes {dist.partitioned} {
  %r = dist.all_reduce %g on @mesh ["dp"] sum : tensor<8x4xf32>
  %i = dist.axis_index on @mesh ["dp"] : tensor<i64>
  %s = dist.local_slice %r[%i] dim 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  return %r, %s : tensor<8x4xf32>, tensor<4x4xf32>
}
func.func @other_axes(%g: tensor<8x4xf32>) -> tensor<4x4xf32> attributes {dist.partitioned} {
  %r = dist.all_reduce %g on @mesh ["dp"] sum : tensor<8x4xf32>
  %i = dist.axis_index on @mesh ["tp"] : tensor<i64>
  %s = dist.local_slice %r[%i] dim 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  return %s : tensor<4x4xf32>
}

// -----

// ZeRO-3: the gather of layer 1's weight block (and its read) moves to the
// start of layer 0, to run during layer 0's compute once started early.
// CHECK-LABEL: func.func @prefetch
// CHECK: %[[W1:.*]] = graph.read_param @w1
// CHECK-NEXT: %[[G1:.*]] = dist.all_gather %[[W1]]
// CHECK-NEXT: graph.read_param @w0
// CHECK: graph.matmul %arg0
// CHECK: graph.matmul %{{.*}}, %[[G1]]
dist.mesh @mesh ["dp" = 2]
graph.param @w0 : tensor<8x8xf32> sharding <@mesh, [{"dp"}, {}]>
graph.param @w1 : tensor<8x8xf32> sharding <@mesh, [{"dp"}, {}]>
func.func @prefetch(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {dist.partitioned} {
  %r0 = graph.read_param @w0 {graph.phase = #graph<phase forward>, graph.layer = 0 : i64} : tensor<4x8xf32>
  %g0 = dist.all_gather %r0 on @mesh ["dp"] dim 0 {graph.phase = #graph<phase forward>, graph.layer = 0 : i64} : tensor<4x8xf32> -> tensor<8x8xf32>
  %h = graph.matmul %x, %g0 {graph.phase = #graph<phase forward>, graph.layer = 0 : i64} : tensor<4x8xf32>, tensor<8x8xf32>
  %r1 = graph.read_param @w1 {graph.phase = #graph<phase forward>, graph.layer = 1 : i64} : tensor<4x8xf32>
  %g1 = dist.all_gather %r1 on @mesh ["dp"] dim 0 {graph.phase = #graph<phase forward>, graph.layer = 1 : i64} : tensor<4x8xf32> -> tensor<8x8xf32>
  %y = graph.matmul %h, %g1 {graph.phase = #graph<phase forward>, graph.layer = 1 : i64} : tensor<4x8xf32>, tensor<8x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// In the backward, which runs the layers in reverse, the gather of layer
// 0's weight moves to the start of layer 1's backward.
// CHECK-LABEL: func.func @prefetch_backward
// CHECK: %[[W0:.*]] = graph.read_param @w0
// CHECK-NEXT: %[[G0:.*]] = dist.all_gather %[[W0]]
// CHECK-NEXT: graph.relu %arg1 {graph.layer = 1 : i64
// CHECK: graph.matmul %{{.*}}, %[[G0]]
dist.mesh @mesh ["dp" = 2]
graph.param @w0 : tensor<8x8xf32> sharding <@mesh, [{"dp"}, {}]>
func.func @prefetch_backward(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {dist.partitioned} {
  %d1 = graph.relu %dy {graph.layer = 1 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32>
  %r0 = graph.read_param @w0 {graph.layer = 0 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32>
  %g0 = dist.all_gather %r0 on @mesh ["dp"] dim 0 {graph.layer = 0 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32> -> tensor<8x8xf32>
  %d0 = graph.matmul %d1, %g0 {graph.layer = 0 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32>, tensor<8x8xf32>
  return %d0 : tensor<4x8xf32>
}
