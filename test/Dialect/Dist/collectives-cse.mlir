// Collectives have communication effects: -cse does not merge two equal
// collectives (ZeRO-3 gathers a parameter again for the backward instead of
// keeping the forward's copy alive), and -canonicalize does not drop an
// unused one (every rank must still take part) or move them past each other.
// RUN: cleave-opt %s -cse -canonicalize | FileCheck %s --enable-var-scope

dist.mesh @mesh ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @gather_twice
// CHECK: %[[G1:.*]] = dist.all_gather %[[W:.*]] on @mesh ["dp"] dim 0
// CHECK: %[[Y:.*]] = graph.matmul %{{.*}}, %[[G1]]
// CHECK: %[[G2:.*]] = dist.all_gather %[[W]] on @mesh ["dp"] dim 0
// CHECK: %[[Z:.*]] = graph.matmul %[[Y]], %[[G2]]
// CHECK: dist.all_reduce %{{.*}} on @mesh ["tp"] sum
// CHECK: return %[[Z]]
func.func @gather_twice(%x: tensor<4x8xf32>, %w: tensor<4x8xf32>, %u: tensor<4xf32>) -> tensor<4x8xf32> {
  %g1 = dist.all_gather %w on @mesh ["dp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %y = graph.matmul %x, %g1 : tensor<4x8xf32>, tensor<8x8xf32>
  %g2 = dist.all_gather %w on @mesh ["dp"] dim 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %z = graph.matmul %y, %g2 : tensor<4x8xf32>, tensor<8x8xf32>
  %unused = dist.all_reduce %u on @mesh ["tp"] sum : tensor<4xf32>
  return %z : tensor<4x8xf32>
}

// Pure rank-aware ops may be merged: they read nothing.
// CHECK-LABEL: func.func @index_once
// CHECK: dist.axis_index
// CHECK-NOT: dist.axis_index
func.func @index_once(%x: tensor<8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %i = dist.axis_index on @mesh ["tp"] : tensor<i64>
  %a = dist.local_slice %x[%i] dim 0 : tensor<8xf32> -> tensor<4xf32>
  %j = dist.axis_index on @mesh ["tp"] : tensor<i64>
  %b = dist.local_slice %x[%j] dim 0 : tensor<8xf32> -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}
