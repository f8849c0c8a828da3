// The graph folds that are always right: identities, compositions of
// reshapes and transposes, and shape ops on constants.
// RUN: cleave-opt %s -canonicalize -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @identity_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identity_reshape(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.reshape %x : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[R:.*]] = graph.reshape %[[X]] : tensor<4x8xf32> -> tensor<2x16xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_of_reshape(%x: tensor<4x8xf32>) -> tensor<2x16xf32> {
  %0 = graph.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %1 = graph.reshape %0 : tensor<32xf32> -> tensor<2x16xf32>
  return %1 : tensor<2x16xf32>
}

// -----

// A reshape back to the original type disappears entirely.
// CHECK-LABEL: func.func @reshape_round_trip
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @reshape_round_trip(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %1 = graph.reshape %0 : tensor<32xf32> -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_of_constant
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT: return %[[C]]
func.func @reshape_of_constant() -> tensor<2x2xf32> {
  %c = graph.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = graph.reshape %c : tensor<4xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// CHECK-LABEL: func.func @identity_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identity_transpose(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.transpose %x perm [0, 1] : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @inverse_transposes
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @inverse_transposes(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = graph.transpose %x perm [1, 2, 0] : tensor<2x3x4xf32>
  %1 = graph.transpose %0 perm [2, 0, 1] : tensor<3x4x2xf32>
  return %1 : tensor<2x3x4xf32>
}

// -----

// Result dim i of the pair is x's dim p[q[i]]: [1, 2, 0] then [1, 0, 2]
// gives [2, 1, 0].
// CHECK-LABEL: func.func @composed_transposes
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.*]] = graph.transpose %[[X]] perm [2, 1, 0] : tensor<2x3x4xf32>
// CHECK-NEXT: return %[[T]] : tensor<4x3x2xf32>
func.func @composed_transposes(%x: tensor<2x3x4xf32>) -> tensor<4x3x2xf32> {
  %0 = graph.transpose %x perm [1, 2, 0] : tensor<2x3x4xf32>
  %1 = graph.transpose %0 perm [1, 0, 2] : tensor<3x4x2xf32>
  return %1 : tensor<4x3x2xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_of_splat
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<2.000000e+00> : tensor<3x2xf32>
// CHECK-NEXT: return %[[C]]
func.func @transpose_of_splat() -> tensor<3x2xf32> {
  %c = graph.constant dense<2.0> : tensor<2x3xf32>
  %0 = graph.transpose %c perm [1, 0] : tensor<2x3xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// CHECK-LABEL: func.func @identity_cast
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identity_cast(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.cast %x : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Rounding through bf16 changes values: the casts must stay.
// CHECK-LABEL: func.func @lossy_cast_pair_kept
// CHECK: graph.cast %{{.*}} : tensor<4xf32> -> tensor<4xbf16>
// CHECK: graph.cast %{{.*}} : tensor<4xbf16> -> tensor<4xf32>
func.func @lossy_cast_pair_kept(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.cast %x : tensor<4xf32> -> tensor<4xbf16>
  %1 = graph.cast %0 : tensor<4xbf16> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @identity_broadcast
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identity_broadcast(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.broadcast_in_dim %x dims [0, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Same type but a permutation of dims is a transpose, not an identity.
// CHECK-LABEL: func.func @permuting_broadcast_kept
// CHECK: graph.broadcast_in_dim %{{.*}} dims [1, 0]
func.func @permuting_broadcast_kept(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = graph.broadcast_in_dim %x dims [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast_of_splat
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<-1.000000e+00> : tensor<4x8xf32>
// CHECK-NEXT: return %[[C]]
func.func @broadcast_of_splat() -> tensor<4x8xf32> {
  %c = graph.constant dense<-1.0> : tensor<8xf32>
  %0 = graph.broadcast_in_dim %c dims [1] : tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @full_slice
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @full_slice(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.slice %x start [0, 0] limit [4, 8] : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Unused pure ops are removed; parameter reads only read, so they go too.
// CHECK-LABEL: func.func @dead_ops
// CHECK-NEXT: return
graph.param @w : tensor<4xf32>
func.func @dead_ops(%x: tensor<4xf32>) {
  %w = graph.read_param @w : tensor<4xf32>
  %0 = graph.add %x, %w : tensor<4xf32>, tensor<4xf32>
  %1 = graph.exp %0 : tensor<4xf32>
  return
}
