// RUN: cleave-opt %s --cleave-fuse-linear -split-input-file | FileCheck %s

// A PyTorch Linear as exported: the transposed [n, k] weight, the matmul and
// the bias add become one linear that reads the weight transposed.
// CHECK-LABEL: func.func @linear_transposed_weight
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x32xf32>, %[[W:.*]]: tensor<96x32xf32>, %[[B:.*]]: tensor<96xf32>)
// CHECK-NEXT: %[[Y:.*]] = graph.linear %[[X]], %[[W]], %[[B]] transpose_weight : tensor<2x8x32xf32>, tensor<96x32xf32>, tensor<96xf32> -> tensor<2x8x96xf32>
// CHECK-NEXT: return %[[Y]]
func.func @linear_transposed_weight(%x: tensor<2x8x32xf32>, %w: tensor<96x32xf32>, %b: tensor<96xf32>) -> tensor<2x8x96xf32> {
  %wt = graph.transpose %w perm [1, 0] : tensor<96x32xf32>
  %0 = graph.matmul %x, %wt : tensor<2x8x32xf32>, tensor<32x96xf32>
  %1 = graph.add %b, %0 : tensor<96xf32>, tensor<2x8x96xf32>
  return %1 : tensor<2x8x96xf32>
}

// -----

// Bias second, a [k, n] weight; the transpose stays for its other use.
// CHECK-LABEL: func.func @linear_bias_second
// CHECK-NEXT: %[[T:.*]] = graph.transpose
// CHECK-NEXT: %[[Y:.*]] = graph.linear %arg0, %arg1, %arg2 : tensor<4x16xbf16>, tensor<16x8xbf16>, tensor<8xbf16> -> tensor<4x8xbf16>
// CHECK-NEXT: return %[[Y]], %[[T]]
func.func @linear_bias_second(%x: tensor<4x16xbf16>, %w: tensor<16x8xbf16>, %b: tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<8x16xbf16>) {
  %t = graph.transpose %w perm [1, 0] : tensor<16x8xbf16>
  %0 = graph.matmul %x, %w : tensor<4x16xbf16>, tensor<16x8xbf16>
  %1 = graph.add %0, %b : tensor<4x8xbf16>, tensor<8xbf16>
  return %1, %t : tensor<4x8xbf16>, tensor<8x16xbf16>
}

// -----

// Inference: the GELU joins the linear and nothing needs its input.
// CHECK-LABEL: func.func @gelu_inference
// CHECK-NEXT: %[[Y:.*]] = graph.linear %arg0, %arg1, %arg2 transpose_weight activation gelu_tanh : tensor<4x16xf32>, tensor<64x16xf32>, tensor<64xf32> -> tensor<4x64xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_inference(%x: tensor<4x16xf32>, %w: tensor<64x16xf32>, %b: tensor<64xf32>) -> tensor<4x64xf32> {
  %wt = graph.transpose %w perm [1, 0] : tensor<64x16xf32>
  %0 = graph.matmul %x, %wt : tensor<4x16xf32>, tensor<16x64xf32>
  %1 = graph.add %b, %0 : tensor<64xf32>, tensor<4x64xf32>
  %2 = graph.gelu %1 approximate tanh : tensor<4x64xf32>
  return %2 : tensor<4x64xf32>
}

// -----

// Training: gelu_grad reads the pre-activation, which the linear returns
// as its second result. The exact GELU is activation gelu.
// CHECK-LABEL: func.func @gelu_training
// CHECK-NEXT: %[[Y:.*]], %[[PRE:.*]] = graph.linear %arg0, %arg1, %arg2 activation gelu : tensor<4x16xf32>, tensor<16x64xf32>, tensor<64xf32> -> tensor<4x64xf32>, tensor<4x64xf32>
// CHECK-NEXT: %[[DX:.*]] = graph.gelu_grad %[[PRE]], %arg3 : tensor<4x64xf32>
// CHECK-NEXT: return %[[Y]], %[[DX]]
func.func @gelu_training(%x: tensor<4x16xf32>, %w: tensor<16x64xf32>, %b: tensor<64xf32>, %dy: tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  %0 = graph.matmul %x, %w : tensor<4x16xf32>, tensor<16x64xf32>
  %1 = graph.add %0, %b : tensor<4x64xf32>, tensor<64xf32>
  %2 = graph.gelu %1 : tensor<4x64xf32>
  %3 = graph.gelu_grad %1, %dy : tensor<4x64xf32>
  return %2, %3 : tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

// Left alone: a matmul whose product is read twice, a bias that is not a
// vector along the columns, a batched weight, an add that broadcasts the
// product, and a second GELU of a fused linear's pre-activation.
// CHECK-LABEL: func.func @not_fused
// CHECK-COUNT-4: graph.matmul
// CHECK-NOT: graph.linear
// CHECK: return
func.func @not_fused(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %b: tensor<8xf32>, %b2: tensor<1x8xf32>, %wb: tensor<2x16x8xf32>, %s: tensor<3x4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>, tensor<3x4x8xf32>) {
  %0 = graph.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32>
  %1 = graph.add %0, %b : tensor<4x8xf32>, tensor<8xf32>
  %2 = graph.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32>
  %3 = graph.add %2, %b2 : tensor<4x8xf32>, tensor<1x8xf32>
  %4 = graph.matmul %x, %wb : tensor<4x16xf32>, tensor<2x16x8xf32>
  %5 = graph.add %4, %b : tensor<2x4x8xf32>, tensor<8xf32>
  %6 = graph.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32>
  %7 = graph.add %6, %s : tensor<4x8xf32>, tensor<3x4x8xf32>
  return %1, %0, %3, %5, %7 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>, tensor<3x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @second_gelu
// CHECK-NEXT: %[[Y:.*]], %[[PRE:.*]] = graph.linear {{.*}} activation gelu_tanh
// CHECK-NEXT: %[[G:.*]] = graph.gelu %[[PRE]] :
// CHECK-NEXT: return %[[Y]], %[[G]]
func.func @second_gelu(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = graph.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32>
  %1 = graph.add %0, %b : tensor<4x8xf32>, tensor<8xf32>
  %2 = graph.gelu %1 approximate tanh : tensor<4x8xf32>
  %3 = graph.gelu %1 : tensor<4x8xf32>
  return %2, %3 : tensor<4x8xf32>, tensor<4x8xf32>
}
