// One GPT-style pre-norm transformer block on a [batch 2, seq 8, hidden 64]
// input with 4 attention heads of 16:
//
//   x = x + out_proj(attention(layer_norm_1(x)))     causal self-attention
//   x = x + fc2(gelu_tanh(fc1(layer_norm_2(x))))      MLP 64 -> 256 -> 64
//
// Sharding: the 8 devices form a 2 x 4 mesh. The batch is split over "dp"
// (data parallelism); within each "dp" group the weights follow Megatron
// tensor parallelism over "tp": the first matmul of each pair (QKV, fc1) is
// column-parallel (its output features and bias are split on "tp"), the
// second (attention output, fc2) is row-parallel (its input features are
// split on "tp", so its product is partial until one all_reduce).
//
//   cleave-opt examples/transformer/block.mlir --cleave-print-sharding-rules

dist.mesh @mesh ["dp" = 2, "tp" = 4]

graph.param @ln1.weight : tensor<64xf32> = dense<1.0> : tensor<64xf32>
graph.param @ln1.bias : tensor<64xf32> = dense<0.0> : tensor<64xf32>
graph.param @attn.qkv.weight : tensor<64x192xf32> = dense<0.015625> : tensor<64x192xf32>
graph.param @attn.qkv.bias : tensor<192xf32> = dense<0.0> : tensor<192xf32>
graph.param @attn.out.weight : tensor<64x64xf32> = dense<0.015625> : tensor<64x64xf32>
graph.param @attn.out.bias : tensor<64xf32> = dense<0.0> : tensor<64xf32>
graph.param @ln2.weight : tensor<64xf32> = dense<1.0> : tensor<64xf32>
graph.param @ln2.bias : tensor<64xf32> = dense<0.0> : tensor<64xf32>
graph.param @mlp.fc1.weight : tensor<64x256xf32> = dense<0.015625> : tensor<64x256xf32>
graph.param @mlp.fc1.bias : tensor<256xf32> = dense<0.0> : tensor<256xf32>
graph.param @mlp.fc2.weight : tensor<256x64xf32> = dense<0.0078125> : tensor<256x64xf32>
graph.param @mlp.fc2.bias : tensor<64xf32> = dense<0.0> : tensor<64xf32>

func.func @forward(%x: tensor<2x8x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}, {}]>}) -> tensor<2x8x64xf32> {
  // Attention: layer norm, then one fused QKV projection (column-parallel).
  %ln1_w = graph.read_param @ln1.weight : tensor<64xf32>
  %ln1_b = graph.read_param @ln1.bias : tensor<64xf32>
  %h = graph.layer_norm %x, %ln1_w, %ln1_b dim 2 eps 1.0e-05 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  %wqkv_p = graph.read_param @attn.qkv.weight : tensor<64x192xf32>
  %wqkv = dist.shard %wqkv_p to <@mesh, [{}, {"tp"}]> : tensor<64x192xf32>
  %bqkv_p = graph.read_param @attn.qkv.bias : tensor<192xf32>
  %bqkv = dist.shard %bqkv_p to <@mesh, [{"tp"}]> : tensor<192xf32>
  %qkv0 = graph.matmul %h, %wqkv : tensor<2x8x64xf32>, tensor<64x192xf32>
  %qkv = graph.add %qkv0, %bqkv : tensor<2x8x192xf32>, tensor<192xf32>

  // The QKV columns are laid out per head, [head][q | k | v][16] (Megatron's
  // layout), so that splitting the 192 columns on "tp" hands each device
  // whole heads: [2, 8, 192] -> [2, 8, 4, 48], split the last dimension into
  // q, k, v of [2, 8, 4, 16], then move the heads in front of the sequence.
  // (GPT-2's [q | k | v] layout would split 192 into three before the heads,
  // and a column-parallel split of 192 would cut across q, k and v.)
  %qkv_h = graph.reshape %qkv : tensor<2x8x192xf32> -> tensor<2x8x4x48xf32>
  %q0, %k0, %v0 = graph.split %qkv_h dim 3 sizes [16, 16, 16] : tensor<2x8x4x48xf32>
  %q = graph.transpose %q0 perm [0, 2, 1, 3] : tensor<2x8x4x16xf32>
  %k = graph.transpose %k0 perm [0, 2, 1, 3] : tensor<2x8x4x16xf32>
  %v = graph.transpose %v0 perm [0, 2, 1, 3] : tensor<2x8x4x16xf32>

  // Causal attention with the default scale 1/sqrt(16), then the heads go
  // back behind the sequence and merge: [2, 4, 8, 16] -> [2, 8, 64].
  %o0 = graph.attention %q, %k, %v causal : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
  %o1 = graph.transpose %o0 perm [0, 2, 1, 3] : tensor<2x4x8x16xf32>
  %o = graph.reshape %o1 : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>

  // Output projection (row-parallel) and the first residual.
  %wo_p = graph.read_param @attn.out.weight : tensor<64x64xf32>
  %wo = dist.shard %wo_p to <@mesh, [{"tp"}, {}]> : tensor<64x64xf32>
  %bo = graph.read_param @attn.out.bias : tensor<64xf32>
  %a0 = graph.matmul %o, %wo : tensor<2x8x64xf32>, tensor<64x64xf32>
  %a = graph.add %a0, %bo : tensor<2x8x64xf32>, tensor<64xf32>
  %x1 = graph.add %x, %a : tensor<2x8x64xf32>, tensor<2x8x64xf32>

  // MLP: layer norm, fc1 (column-parallel), gelu, fc2 (row-parallel).
  %ln2_w = graph.read_param @ln2.weight : tensor<64xf32>
  %ln2_b = graph.read_param @ln2.bias : tensor<64xf32>
  %m = graph.layer_norm %x1, %ln2_w, %ln2_b dim 2 eps 1.0e-05 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  %w1_p = graph.read_param @mlp.fc1.weight : tensor<64x256xf32>
  %w1 = dist.shard %w1_p to <@mesh, [{}, {"tp"}]> : tensor<64x256xf32>
  %b1_p = graph.read_param @mlp.fc1.bias : tensor<256xf32>
  %b1 = dist.shard %b1_p to <@mesh, [{"tp"}]> : tensor<256xf32>
  %f0 = graph.matmul %m, %w1 : tensor<2x8x64xf32>, tensor<64x256xf32>
  %f1 = graph.add %f0, %b1 : tensor<2x8x256xf32>, tensor<256xf32>
  %f = graph.gelu %f1 approximate tanh : tensor<2x8x256xf32>
  %w2_p = graph.read_param @mlp.fc2.weight : tensor<256x64xf32>
  %w2 = dist.shard %w2_p to <@mesh, [{"tp"}, {}]> : tensor<256x64xf32>
  %b2 = graph.read_param @mlp.fc2.bias : tensor<64xf32>
  %g0 = graph.matmul %f, %w2 : tensor<2x8x256xf32>, tensor<256x64xf32>
  %g = graph.add %g0, %b2 : tensor<2x8x64xf32>, tensor<64xf32>

  // Second residual.
  %y = graph.add %x1, %g : tensor<2x8x64xf32>, tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}
