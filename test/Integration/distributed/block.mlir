// A tiny pre-norm transformer block with a classifier head, the model of
// block-tp2.mlir: [batch 2, sequence 4, hidden 16], 4 causal attention
// heads of 4, an MLP 16 -> 32 -> 16 (tanh GELU), and a head giving 8
// classes per position:
//
//   x = x + out(attention(q(ln1(x)), k(ln1(x)), v(ln1(x))))
//   x = x + fc2(gelu(fc1(ln2(x))))
//   logits = head(x)
//
// The query, key and value projections are separate, each [16, 4 heads x
// 4] with the heads major in its columns, so that a split of the columns
// hands each device whole heads. The key projection has no bias: a
// bias added to every key adds the same q . b to all of a query's scores,
// which the softmax cancels, so its gradient is zero up to rounding, and
// AdamW (which divides by the gradient's size) would turn rounding that
// differs between the one-device and the partitioned step into updates
// of size lr in either direction. For the same reason the key weight's
// gradient row f, sum_j h_j[f] dk_j = sum_j (ln1.weight[f] xhat_j[f] +
// ln1.bias[f]) dk_j, in which the bias's terms cancel (sum_j dk_j = 0),
// is ill-conditioned when ln1.weight[f] is near 0: the driver draws the
// layer norm scales around 1 (check_distributed.py's `scales`).
graph.param @ln1.weight : tensor<16xf32> = #graph.external<"weights.bin", offset = 0, size = 64>
graph.param @ln1.bias : tensor<16xf32> = #graph.external<"weights.bin", offset = 64, size = 64>
graph.param @attn.q.weight : tensor<16x16xf32> = #graph.external<"weights.bin", offset = 128, size = 1024>
graph.param @attn.q.bias : tensor<16xf32> = #graph.external<"weights.bin", offset = 1152, size = 64>
graph.param @attn.k.weight : tensor<16x16xf32> = #graph.external<"weights.bin", offset = 1216, size = 1024>
graph.param @attn.v.weight : tensor<16x16xf32> = #graph.external<"weights.bin", offset = 2240, size = 1024>
graph.param @attn.v.bias : tensor<16xf32> = #graph.external<"weights.bin", offset = 3264, size = 64>
graph.param @attn.out.weight : tensor<16x16xf32> = #graph.external<"weights.bin", offset = 3328, size = 1024>
graph.param @attn.out.bias : tensor<16xf32> = #graph.external<"weights.bin", offset = 4352, size = 64>
graph.param @ln2.weight : tensor<16xf32> = #graph.external<"weights.bin", offset = 4416, size = 64>
graph.param @ln2.bias : tensor<16xf32> = #graph.external<"weights.bin", offset = 4480, size = 64>
graph.param @mlp.fc1.weight : tensor<16x32xf32> = #graph.external<"weights.bin", offset = 4544, size = 2048>
graph.param @mlp.fc1.bias : tensor<32xf32> = #graph.external<"weights.bin", offset = 6592, size = 128>
graph.param @mlp.fc2.weight : tensor<32x16xf32> = #graph.external<"weights.bin", offset = 6720, size = 2048>
graph.param @mlp.fc2.bias : tensor<16xf32> = #graph.external<"weights.bin", offset = 8768, size = 64>
graph.param @head.weight : tensor<16x8xf32> = #graph.external<"weights.bin", offset = 8832, size = 512>
graph.param @head.bias : tensor<8xf32> = #graph.external<"weights.bin", offset = 9344, size = 32>
func.func @forward(%x: tensor<2x4x16xf32>) -> tensor<2x4x8xf32> {
  %ln1_w = graph.read_param @ln1.weight : tensor<16xf32>
  %ln1_b = graph.read_param @ln1.bias : tensor<16xf32>
  %h = graph.layer_norm %x, %ln1_w, %ln1_b dim 2 eps 1.0e-05 : tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>
  %wq = graph.read_param @attn.q.weight : tensor<16x16xf32>
  %bq = graph.read_param @attn.q.bias : tensor<16xf32>
  %wk = graph.read_param @attn.k.weight : tensor<16x16xf32>
  %wv = graph.read_param @attn.v.weight : tensor<16x16xf32>
  %bv = graph.read_param @attn.v.bias : tensor<16xf32>
  %q0 = graph.matmul %h, %wq : tensor<2x4x16xf32>, tensor<16x16xf32>
  %q1 = graph.add %q0, %bq : tensor<2x4x16xf32>, tensor<16xf32>
  %k0 = graph.matmul %h, %wk : tensor<2x4x16xf32>, tensor<16x16xf32>
  %v0 = graph.matmul %h, %wv : tensor<2x4x16xf32>, tensor<16x16xf32>
  %v1 = graph.add %v0, %bv : tensor<2x4x16xf32>, tensor<16xf32>
  // [2, 4, 16] -> [2, 4, 4 heads, 4] -> [2, 4 heads, 4, 4].
  %q2 = graph.reshape %q1 : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
  %q = graph.transpose %q2 perm [0, 2, 1, 3] : tensor<2x4x4x4xf32>
  %k2 = graph.reshape %k0 : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
  %k = graph.transpose %k2 perm [0, 2, 1, 3] : tensor<2x4x4x4xf32>
  %v2 = graph.reshape %v1 : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
  %v = graph.transpose %v2 perm [0, 2, 1, 3] : tensor<2x4x4x4xf32>
  %o0 = graph.attention %q, %k, %v causal : tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>
  %o1 = graph.transpose %o0 perm [0, 2, 1, 3] : tensor<2x4x4x4xf32>
  %o = graph.reshape %o1 : tensor<2x4x4x4xf32> -> tensor<2x4x16xf32>
  %wo = graph.read_param @attn.out.weight : tensor<16x16xf32>
  %bo = graph.read_param @attn.out.bias : tensor<16xf32>
  %a0 = graph.matmul %o, %wo : tensor<2x4x16xf32>, tensor<16x16xf32>
  %a = graph.add %a0, %bo : tensor<2x4x16xf32>, tensor<16xf32>
  %x1 = graph.add %x, %a : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  %ln2_w = graph.read_param @ln2.weight : tensor<16xf32>
  %ln2_b = graph.read_param @ln2.bias : tensor<16xf32>
  %m = graph.layer_norm %x1, %ln2_w, %ln2_b dim 2 eps 1.0e-05 : tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>
  %w1 = graph.read_param @mlp.fc1.weight : tensor<16x32xf32>
  %b1 = graph.read_param @mlp.fc1.bias : tensor<32xf32>
  %f0 = graph.matmul %m, %w1 : tensor<2x4x16xf32>, tensor<16x32xf32>
  %f1 = graph.add %f0, %b1 : tensor<2x4x32xf32>, tensor<32xf32>
  %f = graph.gelu %f1 approximate tanh : tensor<2x4x32xf32>
  %w2 = graph.read_param @mlp.fc2.weight : tensor<32x16xf32>
  %b2 = graph.read_param @mlp.fc2.bias : tensor<16xf32>
  %g0 = graph.matmul %f, %w2 : tensor<2x4x32xf32>, tensor<32x16xf32>
  %g = graph.add %g0, %b2 : tensor<2x4x16xf32>, tensor<16xf32>
  %x2 = graph.add %x1, %g : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  %wh = graph.read_param @head.weight : tensor<16x8xf32>
  %bh = graph.read_param @head.bias : tensor<8xf32>
  %l0 = graph.matmul %x2, %wh : tensor<2x4x16xf32>, tensor<16x8xf32>
  %logits = graph.add %l0, %bh : tensor<2x4x8xf32>, tensor<8xf32>
  return %logits : tensor<2x4x8xf32>
}
