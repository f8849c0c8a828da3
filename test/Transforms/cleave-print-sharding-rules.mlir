// RUN: cleave-opt %s --cleave-print-sharding-rules -mlir-print-op-on-diagnostic=false -split-input-file -verify-diagnostics

// The pass reports one remark per op with a rule; ops without rules (func,
// return, dist ops) are skipped.
func.func @mlp_layer(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  // expected-remark @+1 {{sharding rule ([a, b], [b, c]) -> ([a, c]) {a=8, b=16 reduction(sum), c=32}}}
  %0 = graph.matmul %x, %w : tensor<8x16xf32>, tensor<16x32xf32>
  // expected-remark @+1 {{sharding rule ([a, b], [b]) -> ([a, b]) {a=8, b=32}}}
  %1 = graph.add %0, %b : tensor<8x32xf32>, tensor<32xf32>
  // expected-remark @+1 {{sharding rule ([a, b]) -> ([a, b]) {a=8, b=32}}}
  %2 = graph.gelu %1 : tensor<8x32xf32>
  return %2 : tensor<8x32xf32>
}

// -----

dist.mesh @m ["tp" = 2]
func.func @heads(%x: tensor<2x8x64xf32>) -> tensor<2x4x8x16xf32> {
  // expected-remark @+1 {{sharding rule ([a, b, (c d)]) -> ([a, b, c, d]) {a=2, b=8, c=4, d=16}}}
  %0 = graph.reshape %x : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %1 = dist.shard %0 to <@m, [{}, {}, {"tp"}, {}]> : tensor<2x8x4x16xf32>
  // expected-remark @+1 {{sharding rule ([a, c, b, d]) -> ([a, b, c, d]) {a=2, b=4, c=8, d=16}}}
  %2 = graph.transpose %1 perm [0, 2, 1, 3] : tensor<2x8x4x16xf32>
  return %2 : tensor<2x4x8x16xf32>
}

// -----

graph.param @emb : tensor<100x16xf32>
func.func @embedding(%ids: tensor<4x8xi64>) -> tensor<4x8x16xf32> {
  // expected-remark @+1 {{sharding rule () -> ([a, b]) {a=100, b=16}}}
  %t = graph.read_param @emb : tensor<100x16xf32>
  // expected-remark @+1 {{sharding rule ([d, c], [a, b]) -> ([a, b, c]) {a=4, b=8, c=16, d=100 reduction(sum) hook}}}
  %0 = graph.gather %t[%ids] dim 0 : tensor<100x16xf32>, tensor<4x8xi64>
  return %0 : tensor<4x8x16xf32>
}

// -----

// The fused linear: the matmul's factors, the bias along the columns, and
// the pre-activation sharded as the result. The contraction stays whole:
// each partial product would get the bias, and GELU is not linear.
func.func @linear(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>) {
  // expected-remark @+1 {{sharding rule ([a, b, c], [d, c], [d]) -> ([a, b, d], [a, b, d]) {a=2, b=8, c=16 need_replication, d=32}}}
  %0:2 = graph.linear %x, %w, %b transpose_weight activation gelu : tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32> -> tensor<2x8x32xf32>, tensor<2x8x32xf32>
  return %0#0, %0#1 : tensor<2x8x32xf32>, tensor<2x8x32xf32>
}

// -----

// Its backward: the rows are reduced into the bias gradient, the
// contraction is a sum (gelu_grad is linear in its gradient).
func.func @matmul_gelu_grad(%dy: tensor<2x8x16xf32>, %w: tensor<16x32xf32>, %pre: tensor<2x8x32xf32>) -> (tensor<2x8x32xf32>, tensor<1x1x32xf32>) {
  // expected-remark @+1 {{sharding rule ([a, b, c], [c, d], [a, b, d]) -> ([a, b, d], [1, 1, d]) {a=2 reduction(sum), b=8 reduction(sum), c=16 reduction(sum), d=32}}}
  %0:2 = graph.matmul_gelu_grad %dy, %w, %pre approximate tanh : tensor<2x8x16xf32>, tensor<16x32xf32>, tensor<2x8x32xf32> -> tensor<2x8x32xf32>, tensor<1x1x32xf32>
  return %0#0, %0#1 : tensor<2x8x32xf32>, tensor<1x1x32xf32>
}

// -----

// gemm: the rows (op(lhs)'s first dim, lhs's columns when transposed) and
// op(rhs)'s columns are parallel, the contraction a sum; the bias gradient
// shares the rows and sums over the contraction too.
func.func @gemm(%dy: tensor<16x64xf32>, %x: tensor<16x32xf32>, %h: tensor<2x8x32xf32>, %w: tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<2x8x64xf32>, tensor<1x1x64xf32>) {
  // expected-remark @+1 {{sharding rule ([b, a], [b, c]) -> ([a, c]) {a=64, b=16 reduction(sum), c=32}}}
  %0 = graph.gemm %dy, %x transpose_lhs : tensor<16x64xf32>, tensor<16x32xf32> -> tensor<64x32xf32>
  // expected-remark @+1 {{sharding rule ([a, b, c], [d, c]) -> ([a, b, d]) {a=2, b=8, c=32 reduction(sum), d=64}}}
  %1 = graph.gemm %h, %w transpose_rhs : tensor<2x8x32xf32>, tensor<64x32xf32> -> tensor<2x8x64xf32>
  // expected-remark @+1 {{sharding rule ([b, a], [b, c]) -> ([a, c], [1, 1, a]) {a=64, b=16 reduction(sum), c=32}}}
  %2:2 = graph.gemm %dy, %x transpose_lhs : tensor<16x64xf32>, tensor<16x32xf32> -> tensor<64x32xf32>, tensor<1x1x64xf32>
  return %0, %1, %2#1 : tensor<64x32xf32>, tensor<2x8x64xf32>, tensor<1x1x64xf32>
}
