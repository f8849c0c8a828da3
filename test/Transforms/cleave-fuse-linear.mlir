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

// -----

// The backward: the GEMM that brings the gradient to a GELU, the gelu_grad
// and the sum over the rows (the bias gradient) become one op; the weight's
// transpose is read in place.
// CHECK-LABEL: func.func @gelu_grad_and_bias_grad
// CHECK-SAME: (%[[DY:.*]]: tensor<2x8x32xf32>, %[[W:.*]]: tensor<128x32xf32>, %[[PRE:.*]]: tensor<2x8x128xf32>)
// CHECK-NEXT: %[[DZ:.*]], %[[DB:.*]] = graph.matmul_gelu_grad %[[DY]], %[[W]], %[[PRE]] transpose_weight approximate tanh : tensor<2x8x32xf32>, tensor<128x32xf32>, tensor<2x8x128xf32> -> tensor<2x8x128xf32>, tensor<1x1x128xf32>
// CHECK-NEXT: %[[R:.*]] = graph.reshape %[[DZ]]
// CHECK-NEXT: return %[[DZ]], %[[DB]], %[[R]]
func.func @gelu_grad_and_bias_grad(%dy: tensor<2x8x32xf32>, %w: tensor<128x32xf32>, %pre: tensor<2x8x128xf32>) -> (tensor<2x8x128xf32>, tensor<1x1x128xf32>, tensor<16x128xf32>) {
  %wt = graph.transpose %w perm [1, 0] : tensor<128x32xf32>
  %0 = graph.matmul %dy, %wt : tensor<2x8x32xf32>, tensor<32x128xf32>
  %1 = graph.gelu_grad %pre, %0 approximate tanh : tensor<2x8x128xf32>
  %2 = graph.reduce sum %1 dims [0, 1] keepdim : tensor<2x8x128xf32>
  %3 = graph.reshape %1 : tensor<2x8x128xf32> -> tensor<16x128xf32>
  return %1, %2, %3 : tensor<2x8x128xf32>, tensor<1x1x128xf32>, tensor<16x128xf32>
}

// -----

// No bias gradient: a sum over part of the rows, or a mean, is not one.
// CHECK-LABEL: func.func @gelu_grad_without_bias_grad
// CHECK-NEXT: %[[DZ:.*]] = graph.matmul_gelu_grad %arg0, %arg1, %arg2 : tensor<4x6x16xbf16>, tensor<16x8xbf16>, tensor<4x6x8xbf16> -> tensor<4x6x8xbf16>
// CHECK-NEXT: graph.reduce sum %[[DZ]] dims [1]
// CHECK-NEXT: graph.reduce mean %[[DZ]] dims [0, 1]
func.func @gelu_grad_without_bias_grad(%dy: tensor<4x6x16xbf16>, %w: tensor<16x8xbf16>, %pre: tensor<4x6x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>) {
  %0 = graph.matmul %dy, %w : tensor<4x6x16xbf16>, tensor<16x8xbf16>
  %1 = graph.gelu_grad %pre, %0 : tensor<4x6x8xbf16>
  %2 = graph.reduce sum %1 dims [1] : tensor<4x6x8xbf16>
  %3 = graph.reduce mean %1 dims [0, 1] : tensor<4x6x8xbf16>
  return %2, %3 : tensor<4x8xbf16>, tensor<8xbf16>
}

// -----

// Left alone: the product is read elsewhere, or is the gelu_grad's first
// operand rather than its gradient.
// CHECK-LABEL: func.func @gelu_grad_not_fused
// CHECK-NOT: graph.matmul_gelu_grad
// CHECK: return
func.func @gelu_grad_not_fused(%dy: tensor<4x16xf32>, %w: tensor<16x8xf32>, %pre: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = graph.matmul %dy, %w : tensor<4x16xf32>, tensor<16x8xf32>
  %1 = graph.gelu_grad %pre, %0 : tensor<4x8xf32>
  %2 = graph.matmul %dy, %w : tensor<4x16xf32>, tensor<16x8xf32>
  %3 = graph.gelu_grad %2, %pre : tensor<4x8xf32>
  return %0, %1, %3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A weight gradient as -cleave-autodiff writes it, transpose(x^T dy): one
// gemm reading dy transposed, dy^T x, whichever transpose folds first.
// CHECK-LABEL: func.func @gemm_weight_gradient
// CHECK-SAME: (%[[X:.*]]: tensor<16x32xf32>, %[[DY:.*]]: tensor<16x64xf32>)
// CHECK-NEXT: %[[DW:.*]] = graph.gemm %[[DY]], %[[X]] transpose_lhs : tensor<16x64xf32>, tensor<16x32xf32> -> tensor<64x32xf32>
// CHECK-NEXT: return %[[DW]]
func.func @gemm_weight_gradient(%x: tensor<16x32xf32>, %dy: tensor<16x64xf32>) -> tensor<64x32xf32> {
  %xt = graph.transpose %x perm [1, 0] : tensor<16x32xf32>
  %0 = graph.matmul %xt, %dy : tensor<32x16xf32>, tensor<16x64xf32>
  %1 = graph.transpose %0 perm [1, 0] : tensor<32x64xf32>
  return %1 : tensor<64x32xf32>
}

// -----

// A tied LM head, x W^T without a bias, over [batch, seq] rows; the
// transpose stays for its other use.
// CHECK-LABEL: func.func @gemm_transposed_rhs
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x32xbf16>, %[[W:.*]]: tensor<64x32xbf16>)
// CHECK-NEXT: %[[WT:.*]] = graph.transpose %[[W]] perm [1, 0]
// CHECK-NEXT: %[[Y:.*]] = graph.gemm %[[X]], %[[W]] transpose_rhs : tensor<2x8x32xbf16>, tensor<64x32xbf16> -> tensor<2x8x64xbf16>
// CHECK-NEXT: return %[[Y]], %[[WT]]
func.func @gemm_transposed_rhs(%x: tensor<2x8x32xbf16>, %w: tensor<64x32xbf16>) -> (tensor<2x8x64xbf16>, tensor<32x64xbf16>) {
  %wt = graph.transpose %w perm [1, 0] : tensor<64x32xbf16>
  %0 = graph.matmul %x, %wt : tensor<2x8x32xbf16>, tensor<32x64xbf16>
  return %0, %wt : tensor<2x8x64xbf16>, tensor<32x64xbf16>
}

// -----

// The transpose of a plain rank-2 product: (a b)^T = b^T a^T.
// CHECK-LABEL: func.func @gemm_transposed_product
// CHECK-SAME: (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8x6xf32>)
// CHECK-NEXT: %[[Y:.*]] = graph.gemm %[[B]], %[[A]] transpose_lhs transpose_rhs : tensor<8x6xf32>, tensor<4x8xf32> -> tensor<6x4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gemm_transposed_product(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>) -> tensor<6x4xf32> {
  %0 = graph.matmul %a, %b : tensor<4x8xf32>, tensor<8x6xf32>
  %1 = graph.transpose %0 perm [1, 0] : tensor<4x6xf32>
  return %1 : tensor<6x4xf32>
}

// -----

// Left alone: a transpose of a rank-3 operand (with a batched right
// operand), an integer matmul, and a product that is also read untransposed.
// CHECK-LABEL: func.func @gemm_not_fused
// CHECK-NOT: graph.gemm
// CHECK: return
func.func @gemm_not_fused(%a: tensor<2x4x8xf32>, %c: tensor<2x4x6xf32>, %i: tensor<8x4xi64>, %j: tensor<8x6xi64>, %x: tensor<4x8xf32>, %b: tensor<8x6xf32>) -> (tensor<2x8x6xf32>, tensor<4x6xi64>, tensor<4x6xf32>, tensor<6x4xf32>) {
  %at = graph.transpose %a perm [0, 2, 1] : tensor<2x4x8xf32>
  %0 = graph.matmul %at, %c : tensor<2x8x4xf32>, tensor<2x4x6xf32>
  %it = graph.transpose %i perm [1, 0] : tensor<8x4xi64>
  %1 = graph.matmul %it, %j : tensor<4x8xi64>, tensor<8x6xi64>
  %2 = graph.matmul %x, %b : tensor<4x8xf32>, tensor<8x6xf32>
  %3 = graph.transpose %2 perm [1, 0] : tensor<4x6xf32>
  return %0, %1, %2, %3 : tensor<2x8x6xf32>, tensor<4x6xi64>, tensor<4x6xf32>, tensor<6x4xf32>
}

// -----

// A 16-bit weight gradient cast to f32 for the optimizer: the gemm stores
// its f32 accumulators. A cast to another type, or of a product with other
// uses, stays.
// CHECK-LABEL: func.func @gemm_f32_result
// CHECK-SAME: (%[[X:.*]]: tensor<16x32xbf16>, %[[DY:.*]]: tensor<16x64xbf16>)
// CHECK-NEXT: %[[DW:.*]] = graph.gemm %[[DY]], %[[X]] transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xf32>
// CHECK-NEXT: %[[P:.*]] = graph.gemm %[[DY]], %[[X]] transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xbf16>
// CHECK-NEXT: %[[PF:.*]] = graph.cast %[[P]] : tensor<64x32xbf16> -> tensor<64x32xf16>
// CHECK-NEXT: return %[[DW]], %[[PF]]
func.func @gemm_f32_result(%x: tensor<16x32xbf16>, %dy: tensor<16x64xbf16>) -> (tensor<64x32xf32>, tensor<64x32xf16>) {
  %0 = graph.gemm %dy, %x transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xbf16>
  %1 = graph.cast %0 : tensor<64x32xbf16> -> tensor<64x32xf32>
  %2 = graph.gemm %dy, %x transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xbf16>
  %3 = graph.cast %2 : tensor<64x32xbf16> -> tensor<64x32xf16>
  return %1, %3 : tensor<64x32xf32>, tensor<64x32xf16>
}

// -----

// The bias gradient of a linear without GELU, the sum of its dy over the
// rows, joins the weight gradient's gemm that reads dy as [rows, n]: one
// pass over dy instead of two. The sum comes first in the step and its
// user before the gemm's operands: the fused gemm takes the gemm's place
// and that user moves after it.
// CHECK-LABEL: func.func @gemm_bias_grad
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x32xf32>, %[[DY:.*]]: tensor<2x8x64xf32>)
// CHECK-NEXT: %[[X2:.*]] = graph.reshape %[[X]] : tensor<2x8x32xf32> -> tensor<16x32xf32>
// CHECK-NEXT: %[[DY2:.*]] = graph.reshape %[[DY]] : tensor<2x8x64xf32> -> tensor<16x64xf32>
// CHECK-NEXT: %[[DW:.*]], %[[DB:.*]] = graph.gemm %[[DY2]], %[[X2]] transpose_lhs : tensor<16x64xf32>, tensor<16x32xf32> -> tensor<64x32xf32>, tensor<1x1x64xf32>
// CHECK-NEXT: %[[B:.*]] = graph.reshape %[[DB]] : tensor<1x1x64xf32> -> tensor<64xf32>
// CHECK-NEXT: %[[B2:.*]] = graph.mul %[[B]], %[[B]]
// CHECK-NEXT: return %[[DW]], %[[B2]]
func.func @gemm_bias_grad(%x: tensor<2x8x32xf32>, %dy: tensor<2x8x64xf32>) -> (tensor<64x32xf32>, tensor<64xf32>) {
  %0 = graph.reduce sum %dy dims [0, 1] keepdim : tensor<2x8x64xf32>
  %1 = graph.reshape %0 : tensor<1x1x64xf32> -> tensor<64xf32>
  %2 = graph.reshape %x : tensor<2x8x32xf32> -> tensor<16x32xf32>
  %5 = graph.mul %1, %1 : tensor<64xf32>, tensor<64xf32>
  %3 = graph.reshape %dy : tensor<2x8x64xf32> -> tensor<16x64xf32>
  %4 = graph.gemm %3, %2 transpose_lhs : tensor<16x64xf32>, tensor<16x32xf32> -> tensor<64x32xf32>
  return %4, %5 : tensor<64x32xf32>, tensor<64xf32>
}

// -----

// The gemm first, and a user of its product before the sum: the fused gemm
// takes the sum's place and that user moves after it.
// CHECK-LABEL: func.func @gemm_bias_grad_gemm_first
// CHECK-SAME: (%[[X:.*]]: tensor<16x32xf32>, %[[DY:.*]]: tensor<16x64xf32>)
// CHECK-NEXT: %[[E:.*]] = graph.exp %[[DY]]
// CHECK-NEXT: %[[DW:.*]], %[[DB:.*]] = graph.gemm %[[DY]], %[[X]] transpose_lhs : tensor<16x64xf32>, tensor<16x32xf32> -> tensor<64x32xf32>, tensor<64xf32>
// CHECK-NEXT: %[[N:.*]] = graph.neg %[[DW]]
// CHECK-NEXT: return %[[N]], %[[DB]], %[[E]]
func.func @gemm_bias_grad_gemm_first(%x: tensor<16x32xf32>, %dy: tensor<16x64xf32>) -> (tensor<64x32xf32>, tensor<64xf32>, tensor<16x64xf32>) {
  %0 = graph.gemm %dy, %x transpose_lhs : tensor<16x64xf32>, tensor<16x32xf32> -> tensor<64x32xf32>
  %1 = graph.neg %0 : tensor<64x32xf32>
  %2 = graph.exp %dy : tensor<16x64xf32>
  %3 = graph.reduce sum %dy dims [0] : tensor<16x64xf32>
  return %1, %3, %2 : tensor<64x32xf32>, tensor<64xf32>, tensor<16x64xf32>
}

// -----

// Under mixed precision the weight gradient is stored in f32 and the
// 16-bit sum is cast to f32 for the optimizer: the gemm stores the sum in
// f32 too, and the cast goes. A rank-2 dy is the gemm's lhs itself.
// CHECK-LABEL: func.func @gemm_bias_grad_f32
// CHECK-SAME: (%[[X:.*]]: tensor<16x32xbf16>, %[[DY:.*]]: tensor<16x64xbf16>)
// CHECK-NEXT: %[[DW:.*]], %[[DB:.*]] = graph.gemm %[[DY]], %[[X]] transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xf32>, tensor<64xf32>
// CHECK-NEXT: return %[[DW]], %[[DB]]
func.func @gemm_bias_grad_f32(%x: tensor<16x32xbf16>, %dy: tensor<16x64xbf16>) -> (tensor<64x32xf32>, tensor<64xf32>) {
  %0 = graph.reduce sum %dy dims [0] : tensor<16x64xbf16>
  %1 = graph.cast %0 : tensor<64xbf16> -> tensor<64xf32>
  %2 = graph.gemm %dy, %x transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xf32>
  return %2, %1 : tensor<64x32xf32>, tensor<64xf32>
}

// -----

// Left alone: a sum over other dimensions, a max, a gemm that does not read
// the summed value transposed, and a sum whose 16-bit value has another
// use beside its cast (it stays a sum; the gemm's bf16 sum is cast).
// CHECK-LABEL: func.func @gemm_bias_grad_not_fused
// CHECK: graph.reduce sum %{{.*}} dims [0] keepdim : tensor<2x8x64xf32>
// CHECK: graph.reduce max
// CHECK: graph.gemm %{{.*}}, %{{.*}} transpose_rhs : tensor<16x64xf32>, tensor<32x64xf32> -> tensor<16x32xf32>
// CHECK: %[[DW:.*]], %[[DB:.*]] = graph.gemm %{{.*}}, %{{.*}} transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xf32>, tensor<64xbf16>
// CHECK: graph.cast %[[DB]] : tensor<64xbf16> -> tensor<64xf32>
func.func @gemm_bias_grad_not_fused(%dy: tensor<2x8x64xf32>, %a: tensor<16x64xf32>, %w: tensor<32x64xf32>, %x16: tensor<16x32xbf16>, %dy16: tensor<16x64xbf16>) -> (tensor<1x8x64xf32>, tensor<1x1x64xf32>, tensor<16x32xf32>, tensor<64xf32>, tensor<64x32xf32>, tensor<64xf32>, tensor<64xbf16>) {
  %0 = graph.reduce sum %dy dims [0] keepdim : tensor<2x8x64xf32>
  %1 = graph.reduce max %dy dims [0, 1] keepdim : tensor<2x8x64xf32>
  %2 = graph.reshape %dy : tensor<2x8x64xf32> -> tensor<16x64xf32>
  %3 = graph.gemm %2, %w transpose_rhs : tensor<16x64xf32>, tensor<32x64xf32> -> tensor<16x32xf32>
  %4 = graph.reduce sum %a dims [0] : tensor<16x64xf32>
  %5 = graph.reduce sum %dy16 dims [0] : tensor<16x64xbf16>
  %6 = graph.cast %5 : tensor<64xbf16> -> tensor<64xf32>
  %7 = graph.gemm %dy16, %x16 transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xf32>
  return %0, %1, %3, %4, %7, %6, %5 : tensor<1x8x64xf32>, tensor<1x1x64xf32>, tensor<16x32xf32>, tensor<64xf32>, tensor<64x32xf32>, tensor<64xf32>, tensor<64xbf16>
}

// -----

// A partial product (a row-parallel matmul before its all_reduce, as a
// partitioned program marks it) keeps its bias add: fused, every device
// would add the bias. The same layer without the mark fuses.
dist.mesh @mesh ["tp" = 2]
// CHECK-LABEL: func.func @partial_product
// CHECK: graph.matmul
// CHECK: graph.add
// CHECK-NOT: graph.linear
// CHECK-LABEL: func.func @replicated_product
// CHECK: graph.linear
func.func @partial_product(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = graph.matmul %x, %w {dist.sharding = #dist.sharding<@mesh, [{}, {}], partial sum {"tp"}>} : tensor<4x8xf32>, tensor<8x16xf32>
  %1 = graph.add %0, %b : tensor<4x16xf32>, tensor<16xf32>
  return %1 : tensor<4x16xf32>
}
func.func @replicated_product(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = graph.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32>
  %1 = graph.add %0, %b : tensor<4x16xf32>, tensor<16xf32>
  return %1 : tensor<4x16xf32>
}
