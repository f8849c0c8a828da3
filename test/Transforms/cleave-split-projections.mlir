// RUN: cleave-opt %s --cleave-split-projections -split-input-file | FileCheck %s --enable-var-scope
// RUN: cleave-opt %s --cleave-split-projections -split-input-file --cleave-print-sharding-rules -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=RULES

// A fused QKV projection with its bias: the weight [3 * 4, 8] becomes
// [3, 4, 8] with the same elements, and each part is the projection of its
// block.
// CHECK: graph.param @qkv.weight : tensor<3x4x8xf32> = dense<{{\[\[\[}}0.000000e+00, 1.000000e+00
// CHECK: graph.param @qkv.bias : tensor<3x4xf32> = dense<{{\[\[}}0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00
// CHECK-LABEL: func.func @forward
// CHECK: %[[W:.*]] = graph.read_param @qkv.weight : tensor<3x4x8xf32>
// CHECK: %[[B:.*]] = graph.read_param @qkv.bias : tensor<3x4xf32>
// CHECK: %[[W0:.*]] = graph.slice %[[W]] start [0, 0, 0] limit [1, 4, 8]
// CHECK: %[[W0R:.*]] = graph.reshape %[[W0]] : tensor<1x4x8xf32> -> tensor<4x8xf32>
// CHECK: %[[W0T:.*]] = graph.transpose %[[W0R]] perm [1, 0]
// CHECK: %[[Q:.*]] = graph.matmul %[[X:.*]], %[[W0T]] : tensor<2x8xf32>, tensor<8x4xf32>
// CHECK: %[[B0:.*]] = graph.slice %[[B]] start [0, 0] limit [1, 4]
// CHECK: %[[B0R:.*]] = graph.reshape %[[B0]] : tensor<1x4xf32> -> tensor<4xf32>
// CHECK: %[[QB:.*]] = graph.add %[[B0R]], %[[Q]] : tensor<4xf32>, tensor<2x4xf32>
// CHECK: graph.slice %[[W]] start [1, 0, 0] limit [2, 4, 8]
// CHECK: graph.slice %[[W]] start [2, 0, 0] limit [3, 4, 8]
// CHECK: %[[VB:.*]] = graph.add
// CHECK-NOT: graph.split
// CHECK: return %[[QB]], %{{.*}}, %[[VB]]
//
// The block's rows (b, the heads) are a parallel factor of every op from
// the parameter to the part: the slice, the reshape, the transpose, the
// matmul and the bias add; a tensor-parallel layout can shard them.
// RULES: sharding rule () -> ([a, b, c]) {a=3, b=4, c=8}
// RULES: sharding rule ([c, a, b]) -> ([1, a, b]) {a=4, b=8, c=3 need_replication} linear in (0)
// RULES: sharding rule ([1, a, b]) -> ([a, b]) {a=4, b=8} linear in (0)
// RULES: sharding rule ([b, a]) -> ([a, b]) {a=8, b=4} linear in (0)
// RULES: sharding rule ([a, b], [b, c]) -> ([a, c]) {a=2, b=8 reduction(sum), c=4} linear in (0), (1)
// RULES: sharding rule ([b], [a, b]) -> ([a, b]) {a=2, b=4} linear in (0, 1)
graph.param @qkv.weight : tensor<12x8xf32> = dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0], [16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0], [24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0], [32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0], [40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0], [48.0, 49.0, 50.0, 51.0, 52.0, 53.0, 54.0, 55.0], [56.0, 57.0, 58.0, 59.0, 60.0, 61.0, 62.0, 63.0], [64.0, 65.0, 66.0, 67.0, 68.0, 69.0, 70.0, 71.0], [72.0, 73.0, 74.0, 75.0, 76.0, 77.0, 78.0, 79.0], [80.0, 81.0, 82.0, 83.0, 84.0, 85.0, 86.0, 87.0], [88.0, 89.0, 90.0, 91.0, 92.0, 93.0, 94.0, 95.0]]> : tensor<12x8xf32>
graph.param @qkv.bias : tensor<12xf32> = dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]> : tensor<12xf32>
func.func @forward(%x: tensor<2x8xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %w = graph.read_param @qkv.weight : tensor<12x8xf32>
  %wt = graph.transpose %w perm [1, 0] : tensor<12x8xf32>
  %y = graph.matmul %x, %wt : tensor<2x8xf32>, tensor<8x12xf32>
  %b = graph.read_param @qkv.bias : tensor<12xf32>
  %z = graph.add %b, %y : tensor<12xf32>, tensor<2x12xf32>
  %q, %k, %v = graph.split %z dim 1 sizes [4, 4, 4] : tensor<2x12xf32>
  return %q, %k, %v : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Left alone: unequal parts (grouped-query attention's q, k, v), a
// parameter read twice (a reshape would change it for the other reader),
// a split along another dimension.
// CHECK-LABEL: func.func @not_fused
// CHECK-COUNT-3: graph.split
graph.param @gqa : tensor<16x8xf32>
graph.param @tied : tensor<12x8xf32>
func.func @not_fused(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x4xf32>, tensor<12x1xf32>) {
  %w = graph.read_param @gqa : tensor<16x8xf32>
  %wt = graph.transpose %w perm [1, 0] : tensor<16x8xf32>
  %y = graph.matmul %x, %wt : tensor<2x8xf32>, tensor<8x16xf32>
  %q, %k, %v = graph.split %y dim 1 sizes [8, 4, 4] : tensor<2x16xf32>
  %t = graph.read_param @tied : tensor<12x8xf32>
  %tt = graph.transpose %t perm [1, 0] : tensor<12x8xf32>
  %u = graph.matmul %x, %tt : tensor<2x8xf32>, tensor<8x12xf32>
  %u0, %u1, %u2 = graph.split %u dim 1 sizes [4, 4, 4] : tensor<2x12xf32>
  %t2 = graph.read_param @tied : tensor<12x8xf32>
  %c0, %c1 = graph.split %t2 dim 1 sizes [1, 7] : tensor<12x8xf32>
  return %q, %u0, %c0 : tensor<2x8xf32>, tensor<2x4xf32>, tensor<12x1xf32>
}
