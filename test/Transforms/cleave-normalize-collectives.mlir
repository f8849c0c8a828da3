// RUN: cleave-opt %s --cleave-normalize-collectives -split-input-file | FileCheck %s

// Along dimension 1: transpose, gather along 0, transpose back.
// CHECK-LABEL: func.func @gather
// CHECK: %[[T:.*]] = graph.transpose %arg0 perm [1, 0] : tensor<4x2xf32>
// CHECK: %[[G:.*]] = dist.all_gather %[[T]] on @mesh ["tp"] dim 0 : tensor<2x4xf32> -> tensor<8x4xf32>
// CHECK: %[[Y:.*]] = graph.transpose %[[G]] perm [1, 0] : tensor<8x4xf32>
// CHECK: return %[[Y]]
dist.mesh @mesh ["tp" = 4]
func.func @gather(%x: tensor<4x2xf32>) -> tensor<4x8xf32> {
  %y = dist.all_gather %x on @mesh ["tp"] dim 1 : tensor<4x2xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A rank-3 scatter along the middle dimension; dimension 0 is left alone.
// CHECK-LABEL: func.func @scatter
// CHECK: graph.transpose %arg0 perm [1, 0, 2] : tensor<2x8x3xf32>
// CHECK: dist.reduce_scatter %{{.*}} on @mesh ["tp"] sum dim 0 : tensor<8x2x3xf32> -> tensor<2x2x3xf32>
// CHECK: graph.transpose %{{.*}} perm [1, 0, 2] : tensor<2x2x3xf32>
// CHECK-NOT: graph.transpose
// CHECK: dist.reduce_scatter %arg1 on @mesh ["tp"] sum dim 0 : tensor<8x3xf32> -> tensor<2x3xf32>
dist.mesh @mesh ["tp" = 4]
func.func @scatter(%x: tensor<2x8x3xf32>, %v: tensor<8x3xf32>) -> (tensor<2x2x3xf32>, tensor<2x3xf32>) {
  %y = dist.reduce_scatter %x on @mesh ["tp"] sum dim 1 : tensor<2x8x3xf32> -> tensor<2x2x3xf32>
  %w = dist.reduce_scatter %v on @mesh ["tp"] sum dim 0 : tensor<8x3xf32> -> tensor<2x3xf32>
  return %y, %w : tensor<2x2x3xf32>, tensor<2x3xf32>
}

// -----

// all_to_all split 1 concat 0 over 2: the split dimension to the front,
// the exchange along 0, then the member index moved before the concat
// dimension and merged with it.
// CHECK-LABEL: func.func @exchange
// CHECK: %[[T:.*]] = graph.transpose %arg0 perm [1, 0] : tensor<4x6xf32>
// CHECK: %[[A:.*]] = dist.all_to_all %[[T]] on @mesh ["x"] split 0 concat 0 : tensor<6x4xf32> -> tensor<6x4xf32>
// CHECK: %[[R:.*]] = graph.reshape %[[A]] : tensor<6x4xf32> -> tensor<2x3x4xf32>
// CHECK: %[[Q:.*]] = graph.transpose %[[R]] perm [0, 2, 1] : tensor<2x3x4xf32>
// CHECK: graph.reshape %[[Q]] : tensor<2x4x3xf32> -> tensor<8x3xf32>
dist.mesh @mesh ["x" = 2]
func.func @exchange(%x: tensor<4x6xf32>) -> tensor<8x3xf32> {
  %y = dist.all_to_all %x on @mesh ["x"] split 1 concat 0 : tensor<4x6xf32> -> tensor<8x3xf32>
  return %y : tensor<8x3xf32>
}
