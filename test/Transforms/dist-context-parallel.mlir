// -dist-context-parallel splits the sequence, the dimension after the
// batch, of every input of the attentions' length on the axis.
// Partitioned, each device's queries attend to the keys and values
// gathered whole, under a causal mask at its offset: key position <= its
// query positions axis_index * 4 + [0, 4).
// RUN: cleave-opt %s -split-input-file -dist-context-parallel | FileCheck %s
// RUN: cleave-opt %s -split-input-file -dist-context-parallel -dist-propagate -dist-partition -canonicalize -cse | FileCheck %s --check-prefix=PART

// Only the inputs of the sequence's length along dimension 1 are split.
// CHECK-LABEL: func.func @attend
// CHECK-SAME: %arg0: tensor<2x8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"cp"}, {}], priority strategy, origin "-dist-context-parallel">}
// CHECK-SAME: %arg1: tensor<2x16xf32>)

// PART-LABEL: func.func @attend
// PART-SAME: %arg0: tensor<2x4x16xf32>
// PART: %[[Q:.*]] = graph.transpose %{{.*}} perm [0, 2, 1, 3] : tensor<2x4x4x4xf32>
// PART: %[[K:.*]] = dist.all_gather %[[Q]] on @mesh ["cp"] dim 2 : tensor<2x4x4x4xf32> -> tensor<2x4x8x4xf32>
// PART: %[[I:.*]] = dist.axis_index on @mesh ["cp"]
// PART: %[[QPOS:.*]] = graph.iota dim 0 : tensor<4xi64>
// PART: %[[OFF:.*]] = graph.mul %[[I]], %{{.*}} : tensor<i64>, tensor<i64>
// PART: %[[QP:.*]] = graph.add %[[QPOS]], %[[OFF]]
// PART: %[[KPOS:.*]] = graph.iota dim 0 : tensor<8xi64>
// PART: %[[QR:.*]] = graph.reshape %[[QP]] : tensor<4xi64> -> tensor<4x1xi64>
// PART: %[[KR:.*]] = graph.reshape %[[KPOS]] : tensor<8xi64> -> tensor<1x8xi64>
// PART: %[[M:.*]] = graph.compare le %[[KR]], %[[QR]] : tensor<1x8xi64>, tensor<4x1xi64>
// PART: graph.attention %[[Q]], %[[K]], %[[K]] mask %[[M]] : tensor<2x4x4x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<4x8xi1>
// PART-NOT: causal
dist.mesh @mesh ["cp" = 2]
func.func @attend(%x: tensor<2x8x16xf32>, %w: tensor<2x16xf32>) -> tensor<2x8x16xf32> {
  %h = graph.reshape %x : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %q = graph.transpose %h perm [0, 2, 1, 3] : tensor<2x8x4x4xf32>
  %o = graph.attention %q, %q, %q causal : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>
  %t = graph.transpose %o perm [0, 2, 1, 3] : tensor<2x4x8x4xf32>
  %r = graph.reshape %t : tensor<2x8x4x4xf32> -> tensor<2x8x16xf32>
  return %r : tensor<2x8x16xf32>
}
