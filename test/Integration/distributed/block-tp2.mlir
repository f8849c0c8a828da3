// Megatron tensor parallelism of block.mlir's transformer block on 2
// devices, over the attention heads and the MLP's hidden features. Each
// device holds 2 of the 4 heads: the columns of the query, key and value
// projections (and their biases) that make those heads, and the rows of
// the output projection that read them; and 16 of the MLP's 32 hidden
// features: fc1's columns and bias, fc2's rows. The layer norms, the
// output projection's and fc2's biases, and the head are replicated, the
// batch too. AdamW state is sharded like its parameter.
//
// Forward: each of the two row-parallel products (attention output, fc2)
// is partial over "tp" and all_reduced before its bias.
//
// Backward: the logits' and the residual stream's gradients are
// replicated, so the head's, fc2.bias's and attn.out.bias's gradients are
// complete; every gradient of a sharded parameter is this device's block,
// complete (its rows or columns see only this device's heads or
// features). The partial values are the gradients of the inputs of the
// two column-parallel halves, ln2's and ln1's outputs: sums over the
// features or the heads. ln2's is all_reduced before ln2's backward (its
// weight and bias gradients, and its input gradient, which flows on into
// the attention). ln1's input gradient is not needed (x is the program's
// input), and its weight and bias gradients are linear in its output
// gradient (sums over positions of dh * xhat and of dh), so those two
// [16] gradients are all_reduced instead of the [2, 4, 16] dh.
dist.mesh @mesh ["tp" = 2]
graph.param @ln1.weight : tensor<16xf32> = #graph.external<"weights.bin", offset = 0, size = 64>
graph.param @ln1.bias : tensor<16xf32> = #graph.external<"weights.bin", offset = 64, size = 64>
graph.param @attn.q.weight : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}]> = #graph.external<"weights.bin", offset = 128, size = 1024>
graph.param @attn.q.bias : tensor<16xf32> sharding <@mesh, [{"tp"}]> = #graph.external<"weights.bin", offset = 1152, size = 64>
graph.param @attn.k.weight : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}]> = #graph.external<"weights.bin", offset = 1216, size = 1024>
graph.param @attn.v.weight : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}]> = #graph.external<"weights.bin", offset = 2240, size = 1024>
graph.param @attn.v.bias : tensor<16xf32> sharding <@mesh, [{"tp"}]> = #graph.external<"weights.bin", offset = 3264, size = 64>
graph.param @attn.out.weight : tensor<16x16xf32> sharding <@mesh, [{"tp"}, {}]> = #graph.external<"weights.bin", offset = 3328, size = 1024>
graph.param @attn.out.bias : tensor<16xf32> = #graph.external<"weights.bin", offset = 4352, size = 64>
graph.param @ln2.weight : tensor<16xf32> = #graph.external<"weights.bin", offset = 4416, size = 64>
graph.param @ln2.bias : tensor<16xf32> = #graph.external<"weights.bin", offset = 4480, size = 64>
graph.param @mlp.fc1.weight : tensor<16x32xf32> sharding <@mesh, [{}, {"tp"}]> = #graph.external<"weights.bin", offset = 4544, size = 2048>
graph.param @mlp.fc1.bias : tensor<32xf32> sharding <@mesh, [{"tp"}]> = #graph.external<"weights.bin", offset = 6592, size = 128>
graph.param @mlp.fc2.weight : tensor<32x16xf32> sharding <@mesh, [{"tp"}, {}]> = #graph.external<"weights.bin", offset = 6720, size = 2048>
graph.param @mlp.fc2.bias : tensor<16xf32> = #graph.external<"weights.bin", offset = 8768, size = 64>
graph.param @head.weight : tensor<16x8xf32> = #graph.external<"weights.bin", offset = 8832, size = 512>
graph.param @head.bias : tensor<8xf32> = #graph.external<"weights.bin", offset = 9344, size = 32>
graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
graph.param @ln1.weight.m frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @ln1.weight.v frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @ln1.bias.m frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @ln1.bias.v frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.q.weight.m frozen : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.q.weight.v frozen : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.q.bias.m frozen : tensor<16xf32> sharding <@mesh, [{"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.q.bias.v frozen : tensor<16xf32> sharding <@mesh, [{"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.k.weight.m frozen : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.k.weight.v frozen : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.v.weight.m frozen : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.v.weight.v frozen : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.v.bias.m frozen : tensor<16xf32> sharding <@mesh, [{"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.v.bias.v frozen : tensor<16xf32> sharding <@mesh, [{"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.out.weight.m frozen : tensor<16x16xf32> sharding <@mesh, [{"tp"}, {}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.out.weight.v frozen : tensor<16x16xf32> sharding <@mesh, [{"tp"}, {}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.out.bias.m frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @attn.out.bias.v frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @ln2.weight.m frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @ln2.weight.v frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @ln2.bias.m frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @ln2.bias.v frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @mlp.fc1.weight.m frozen : tensor<16x32xf32> sharding <@mesh, [{}, {"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @mlp.fc1.weight.v frozen : tensor<16x32xf32> sharding <@mesh, [{}, {"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @mlp.fc1.bias.m frozen : tensor<32xf32> sharding <@mesh, [{"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @mlp.fc1.bias.v frozen : tensor<32xf32> sharding <@mesh, [{"tp"}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @mlp.fc2.weight.m frozen : tensor<32x16xf32> sharding <@mesh, [{"tp"}, {}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @mlp.fc2.weight.v frozen : tensor<32x16xf32> sharding <@mesh, [{"tp"}, {}]> {cleave.role = #cleave.role<optimizer_state>}
graph.param @mlp.fc2.bias.m frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @mlp.fc2.bias.v frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @head.weight.m frozen : tensor<16x8xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @head.weight.v frozen : tensor<16x8xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @head.bias.m frozen : tensor<8xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @head.bias.v frozen : tensor<8xf32> {cleave.role = #cleave.role<optimizer_state>}
func.func @train_step(%x: tensor<2x4x16xf32>, %labels: tensor<2x4xi64> {onnx.name = "labels"}) -> (tensor<f32> {onnx.name = "loss"}) attributes {dist.partitioned, cleave.training_config = {accumulate = 1 : i64, beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, grad_clip = 0.000000e+00 : f64, loss = "cross-entropy", lr = 1.000000e-02 : f64, optimizer = "adamw", weight_decay = 1.000000e-02 : f64}} {
  %c1 = graph.constant dense<1> : tensor<i64>
  %one = graph.constant dense<1.000000e+00> : tensor<f32>
  %count = graph.constant dense<8.000000e+00> : tensor<f32>
  // Forward. Attention: ln1 replicated, then this device's 2 heads.
  %ln1_w = graph.read_param @ln1.weight : tensor<16xf32>
  %ln1_b = graph.read_param @ln1.bias : tensor<16xf32>
  %h = graph.layer_norm %x, %ln1_w, %ln1_b dim 2 eps 1.000000e-05 : tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>
  %wq = graph.read_param @attn.q.weight : tensor<16x8xf32>
  %bq = graph.read_param @attn.q.bias : tensor<8xf32>
  %wk = graph.read_param @attn.k.weight : tensor<16x8xf32>
  %wv = graph.read_param @attn.v.weight : tensor<16x8xf32>
  %bv = graph.read_param @attn.v.bias : tensor<8xf32>
  %q_mm = graph.matmul %h, %wq : tensor<2x4x16xf32>, tensor<16x8xf32>
  %q_b = graph.add %q_mm, %bq : tensor<2x4x8xf32>, tensor<8xf32>
  %k_mm = graph.matmul %h, %wk : tensor<2x4x16xf32>, tensor<16x8xf32>
  %v_mm = graph.matmul %h, %wv : tensor<2x4x16xf32>, tensor<16x8xf32>
  %v_b = graph.add %v_mm, %bv : tensor<2x4x8xf32>, tensor<8xf32>
  %q_s = graph.reshape %q_b : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %q = graph.transpose %q_s perm [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %k_s = graph.reshape %k_mm : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %k = graph.transpose %k_s perm [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %v_s = graph.reshape %v_b : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %v = graph.transpose %v_s perm [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %att = graph.attention %q, %k, %v causal : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  %att_t = graph.transpose %att perm [0, 2, 1, 3] : tensor<2x2x4x4xf32>
  %o = graph.reshape %att_t : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  // Row-parallel output projection: partial until the all_reduce.
  %wo = graph.read_param @attn.out.weight : tensor<8x16xf32>
  %bo = graph.read_param @attn.out.bias : tensor<16xf32>
  %a_part = graph.matmul %o, %wo : tensor<2x4x8xf32>, tensor<8x16xf32>
  %a_mm = dist.all_reduce %a_part on @mesh ["tp"] sum : tensor<2x4x16xf32>
  %a = graph.add %a_mm, %bo : tensor<2x4x16xf32>, tensor<16xf32>
  %x1 = graph.add %x, %a : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  // MLP: ln2 replicated, this device's 16 of the 32 hidden features.
  %ln2_w = graph.read_param @ln2.weight : tensor<16xf32>
  %ln2_b = graph.read_param @ln2.bias : tensor<16xf32>
  %mn = graph.layer_norm %x1, %ln2_w, %ln2_b dim 2 eps 1.000000e-05 : tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>
  %w1 = graph.read_param @mlp.fc1.weight : tensor<16x16xf32>
  %b1 = graph.read_param @mlp.fc1.bias : tensor<16xf32>
  %f_mm = graph.matmul %mn, %w1 : tensor<2x4x16xf32>, tensor<16x16xf32>
  %f_b = graph.add %f_mm, %b1 : tensor<2x4x16xf32>, tensor<16xf32>
  %f = graph.gelu %f_b approximate tanh : tensor<2x4x16xf32>
  %w2 = graph.read_param @mlp.fc2.weight : tensor<16x16xf32>
  %b2 = graph.read_param @mlp.fc2.bias : tensor<16xf32>
  %g_part = graph.matmul %f, %w2 : tensor<2x4x16xf32>, tensor<16x16xf32>
  %g_mm = dist.all_reduce %g_part on @mesh ["tp"] sum : tensor<2x4x16xf32>
  %g = graph.add %g_mm, %b2 : tensor<2x4x16xf32>, tensor<16xf32>
  %x2 = graph.add %x1, %g : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  // Head and loss, replicated.
  %wh = graph.read_param @head.weight : tensor<16x8xf32>
  %bh = graph.read_param @head.bias : tensor<8xf32>
  %l_mm = graph.matmul %x2, %wh : tensor<2x4x16xf32>, tensor<16x8xf32>
  %logits = graph.add %l_mm, %bh : tensor<2x4x8xf32>, tensor<8xf32>
  %ce = graph.cross_entropy %logits, %labels reduction sum : tensor<2x4x8xf32>, tensor<2x4xi64>
  %loss = graph.div %ce, %count : tensor<f32>, tensor<f32>

  // Backward. Head: replicated, complete.
  %dce = graph.div %one, %count : tensor<f32>, tensor<f32>
  %dlogits = graph.cross_entropy_grad %logits, %labels, %dce reduction sum : tensor<2x4x8xf32>, tensor<2x4xi64>, tensor<f32>
  %dbh_k = graph.reduce sum %dlogits dims [0, 1] keepdim : tensor<2x4x8xf32>
  %dbh = graph.reshape %dbh_k : tensor<1x1x8xf32> -> tensor<8xf32>
  %x2_r = graph.reshape %x2 : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %dlogits_r = graph.reshape %dlogits : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %x2_t = graph.transpose %x2_r perm [1, 0] : tensor<8x16xf32>
  %dwh = graph.matmul %x2_t, %dlogits_r : tensor<16x8xf32>, tensor<8x8xf32>
  %wh_t = graph.transpose %wh perm [1, 0] : tensor<16x8xf32>
  %dx2 = graph.matmul %dlogits, %wh_t : tensor<2x4x8xf32>, tensor<8x16xf32>
  // MLP: fc2.bias replicated; fc2's rows, fc1's columns and the hidden
  // gradient are this device's blocks, complete; ln2's output gradient
  // is a sum over the hidden split, partial until the all_reduce.
  %db2_k = graph.reduce sum %dx2 dims [0, 1] keepdim : tensor<2x4x16xf32>
  %db2 = graph.reshape %db2_k : tensor<1x1x16xf32> -> tensor<16xf32>
  %f_r = graph.reshape %f : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %dx2_r = graph.reshape %dx2 : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %f_t = graph.transpose %f_r perm [1, 0] : tensor<8x16xf32>
  %dw2 = graph.matmul %f_t, %dx2_r : tensor<16x8xf32>, tensor<8x16xf32>
  %w2_t = graph.transpose %w2 perm [1, 0] : tensor<16x16xf32>
  %df = graph.matmul %dx2, %w2_t : tensor<2x4x16xf32>, tensor<16x16xf32>
  %df_b = graph.gelu_grad %f_b, %df approximate tanh : tensor<2x4x16xf32>
  %db1_k = graph.reduce sum %df_b dims [0, 1] keepdim : tensor<2x4x16xf32>
  %db1 = graph.reshape %db1_k : tensor<1x1x16xf32> -> tensor<16xf32>
  %mn_r = graph.reshape %mn : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %df_b_r = graph.reshape %df_b : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %mn_t = graph.transpose %mn_r perm [1, 0] : tensor<8x16xf32>
  %dw1 = graph.matmul %mn_t, %df_b_r : tensor<16x8xf32>, tensor<8x16xf32>
  %w1_t = graph.transpose %w1 perm [1, 0] : tensor<16x16xf32>
  %dmn_part = graph.matmul %df_b, %w1_t : tensor<2x4x16xf32>, tensor<16x16xf32>
  %dmn = dist.all_reduce %dmn_part on @mesh ["tp"] sum : tensor<2x4x16xf32>
  %dx1_ln, %ln2_dw, %ln2_db = graph.layer_norm_grad %x1, %ln2_w, %dmn dim 2 eps 1.000000e-05 : tensor<2x4x16xf32>, tensor<16xf32>
  %dx1 = graph.add %dx2, %dx1_ln : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  // Attention: out.bias replicated; out's rows and every q, k, v
  // gradient are this device's heads, complete; ln1's output gradient
  // is a sum over the heads, partial.
  %dbo_k = graph.reduce sum %dx1 dims [0, 1] keepdim : tensor<2x4x16xf32>
  %dbo = graph.reshape %dbo_k : tensor<1x1x16xf32> -> tensor<16xf32>
  %o_r = graph.reshape %att_t : tensor<2x4x2x4xf32> -> tensor<8x8xf32>
  %dx1_r = graph.reshape %dx1 : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %o_t = graph.transpose %o_r perm [1, 0] : tensor<8x8xf32>
  %dwo = graph.matmul %o_t, %dx1_r : tensor<8x8xf32>, tensor<8x16xf32>
  %wo_t = graph.transpose %wo perm [1, 0] : tensor<8x16xf32>
  %do = graph.matmul %dx1, %wo_t : tensor<2x4x16xf32>, tensor<16x8xf32>
  %do_s = graph.reshape %do : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %datt = graph.transpose %do_s perm [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %dq, %dk, %dv = graph.attention_grad %q, %k, %v, %datt causal scale 5.000000e-01 : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  %dv_t = graph.transpose %dv perm [0, 2, 1, 3] : tensor<2x2x4x4xf32>
  %dv_b = graph.reshape %dv_t : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %dk_t = graph.transpose %dk perm [0, 2, 1, 3] : tensor<2x2x4x4xf32>
  %dk_b = graph.reshape %dk_t : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %dq_t = graph.transpose %dq perm [0, 2, 1, 3] : tensor<2x2x4x4xf32>
  %dq_b = graph.reshape %dq_t : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %h_r = graph.reshape %h : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %h_t = graph.transpose %h_r perm [1, 0] : tensor<8x16xf32>
  %dbv_k = graph.reduce sum %dv_b dims [0, 1] keepdim : tensor<2x4x8xf32>
  %dbv = graph.reshape %dbv_k : tensor<1x1x8xf32> -> tensor<8xf32>
  %dv_r = graph.reshape %dv_t : tensor<2x4x2x4xf32> -> tensor<8x8xf32>
  %dwv = graph.matmul %h_t, %dv_r : tensor<16x8xf32>, tensor<8x8xf32>
  %wv_t = graph.transpose %wv perm [1, 0] : tensor<16x8xf32>
  %dh_v = graph.matmul %dv_b, %wv_t : tensor<2x4x8xf32>, tensor<8x16xf32>
  %dk_r = graph.reshape %dk_t : tensor<2x4x2x4xf32> -> tensor<8x8xf32>
  %dwk = graph.matmul %h_t, %dk_r : tensor<16x8xf32>, tensor<8x8xf32>
  %wk_t = graph.transpose %wk perm [1, 0] : tensor<16x8xf32>
  %dh_k = graph.matmul %dk_b, %wk_t : tensor<2x4x8xf32>, tensor<8x16xf32>
  %dh_vk = graph.add %dh_v, %dh_k : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  %dbq_k = graph.reduce sum %dq_b dims [0, 1] keepdim : tensor<2x4x8xf32>
  %dbq = graph.reshape %dbq_k : tensor<1x1x8xf32> -> tensor<8xf32>
  %dq_r = graph.reshape %dq_t : tensor<2x4x2x4xf32> -> tensor<8x8xf32>
  %dwq = graph.matmul %h_t, %dq_r : tensor<16x8xf32>, tensor<8x8xf32>
  %wq_t = graph.transpose %wq perm [1, 0] : tensor<16x8xf32>
  %dh_q = graph.matmul %dq_b, %wq_t : tensor<2x4x8xf32>, tensor<8x16xf32>
  %dh_part = graph.add %dh_vk, %dh_q : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  // ln1's weight and bias gradients are linear in its output gradient
  // (sums over positions of dh * xhat and of dh), and its input gradient
  // is not needed: reduce the two [16] gradients, not the [2, 4, 16]
  // output gradient. (The partial input gradient is left unused.)
  %dx_part, %ln1_dw_part, %ln1_db_part = graph.layer_norm_grad %x, %ln1_w, %dh_part dim 2 eps 1.000000e-05 : tensor<2x4x16xf32>, tensor<16xf32>
  %ln1_dw = dist.all_reduce %ln1_dw_part on @mesh ["tp"] sum : tensor<16xf32>
  %ln1_db = dist.all_reduce %ln1_db_part on @mesh ["tp"] sum : tensor<16xf32>

  // AdamW on the blocks (the replicated parameters identically on both).
  %step0 = graph.read_param @optimizer.step : tensor<i64>
  %step = graph.add %step0, %c1 : tensor<i64>, tensor<i64>
  graph.assign @optimizer.step, %step : tensor<i64>
  %p0 = graph.read_param @ln1.weight : tensor<16xf32>
  %m0 = graph.read_param @ln1.weight.m : tensor<16xf32>
  %v0 = graph.read_param @ln1.weight.v : tensor<16xf32>
  %np0, %nm0, %nv0 = graph.adamw %p0, %ln1_dw, %m0, %v0, %step {lr = 1.000000e-02 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  graph.assign @ln1.weight, %np0 : tensor<16xf32>
  graph.assign @ln1.weight.m, %nm0 : tensor<16xf32>
  graph.assign @ln1.weight.v, %nv0 : tensor<16xf32>
  %p1 = graph.read_param @ln1.bias : tensor<16xf32>
  %m1 = graph.read_param @ln1.bias.m : tensor<16xf32>
  %v1 = graph.read_param @ln1.bias.v : tensor<16xf32>
  %np1, %nm1, %nv1 = graph.adamw %p1, %ln1_db, %m1, %v1, %step {lr = 1.000000e-02 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  graph.assign @ln1.bias, %np1 : tensor<16xf32>
  graph.assign @ln1.bias.m, %nm1 : tensor<16xf32>
  graph.assign @ln1.bias.v, %nv1 : tensor<16xf32>
  %p2 = graph.read_param @attn.q.weight : tensor<16x8xf32>
  %m2 = graph.read_param @attn.q.weight.m : tensor<16x8xf32>
  %v2 = graph.read_param @attn.q.weight.v : tensor<16x8xf32>
  %np2, %nm2, %nv2 = graph.adamw %p2, %dwq, %m2, %v2, %step {lr = 1.000000e-02 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<i64>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
  graph.assign @attn.q.weight, %np2 : tensor<16x8xf32>
  graph.assign @attn.q.weight.m, %nm2 : tensor<16x8xf32>
  graph.assign @attn.q.weight.v, %nv2 : tensor<16x8xf32>
  %p3 = graph.read_param @attn.q.bias : tensor<8xf32>
  %m3 = graph.read_param @attn.q.bias.m : tensor<8xf32>
  %v3 = graph.read_param @attn.q.bias.v : tensor<8xf32>
  %np3, %nm3, %nv3 = graph.adamw %p3, %dbq, %m3, %v3, %step {lr = 1.000000e-02 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  graph.assign @attn.q.bias, %np3 : tensor<8xf32>
  graph.assign @attn.q.bias.m, %nm3 : tensor<8xf32>
  graph.assign @attn.q.bias.v, %nv3 : tensor<8xf32>
  %p4 = graph.read_param @attn.k.weight : tensor<16x8xf32>
  %m4 = graph.read_param @attn.k.weight.m : tensor<16x8xf32>
  %v4 = graph.read_param @attn.k.weight.v : tensor<16x8xf32>
  %np4, %nm4, %nv4 = graph.adamw %p4, %dwk, %m4, %v4, %step {lr = 1.000000e-02 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<i64>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
  graph.assign @attn.k.weight, %np4 : tensor<16x8xf32>
  graph.assign @attn.k.weight.m, %nm4 : tensor<16x8xf32>
  graph.assign @attn.k.weight.v, %nv4 : tensor<16x8xf32>
  %p6 = graph.read_param @attn.v.weight : tensor<16x8xf32>
  %m6 = graph.read_param @attn.v.weight.m : tensor<16x8xf32>
  %v6 = graph.read_param @attn.v.weight.v : tensor<16x8xf32>
  %np6, %nm6, %nv6 = graph.adamw %p6, %dwv, %m6, %v6, %step {lr = 1.000000e-02 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<i64>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
  graph.assign @attn.v.weight, %np6 : tensor<16x8xf32>
  graph.assign @attn.v.weight.m, %nm6 : tensor<16x8xf32>
  graph.assign @attn.v.weight.v, %nv6 : tensor<16x8xf32>
  %p7 = graph.read_param @attn.v.bias : tensor<8xf32>
  %m7 = graph.read_param @attn.v.bias.m : tensor<8xf32>
  %v7 = graph.read_param @attn.v.bias.v : tensor<8xf32>
  %np7, %nm7, %nv7 = graph.adamw %p7, %dbv, %m7, %v7, %step {lr = 1.000000e-02 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  graph.assign @attn.v.bias, %np7 : tensor<8xf32>
  graph.assign @attn.v.bias.m, %nm7 : tensor<8xf32>
  graph.assign @attn.v.bias.v, %nv7 : tensor<8xf32>
  %p8 = graph.read_param @attn.out.weight : tensor<8x16xf32>
  %m8 = graph.read_param @attn.out.weight.m : tensor<8x16xf32>
  %v8 = graph.read_param @attn.out.weight.v : tensor<8x16xf32>
  %np8, %nm8, %nv8 = graph.adamw %p8, %dwo, %m8, %v8, %step {lr = 1.000000e-02 : f64} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<i64>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>)
  graph.assign @attn.out.weight, %np8 : tensor<8x16xf32>
  graph.assign @attn.out.weight.m, %nm8 : tensor<8x16xf32>
  graph.assign @attn.out.weight.v, %nv8 : tensor<8x16xf32>
  %p9 = graph.read_param @attn.out.bias : tensor<16xf32>
  %m9 = graph.read_param @attn.out.bias.m : tensor<16xf32>
  %v9 = graph.read_param @attn.out.bias.v : tensor<16xf32>
  %np9, %nm9, %nv9 = graph.adamw %p9, %dbo, %m9, %v9, %step {lr = 1.000000e-02 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  graph.assign @attn.out.bias, %np9 : tensor<16xf32>
  graph.assign @attn.out.bias.m, %nm9 : tensor<16xf32>
  graph.assign @attn.out.bias.v, %nv9 : tensor<16xf32>
  %p10 = graph.read_param @ln2.weight : tensor<16xf32>
  %m10 = graph.read_param @ln2.weight.m : tensor<16xf32>
  %v10 = graph.read_param @ln2.weight.v : tensor<16xf32>
  %np10, %nm10, %nv10 = graph.adamw %p10, %ln2_dw, %m10, %v10, %step {lr = 1.000000e-02 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  graph.assign @ln2.weight, %np10 : tensor<16xf32>
  graph.assign @ln2.weight.m, %nm10 : tensor<16xf32>
  graph.assign @ln2.weight.v, %nv10 : tensor<16xf32>
  %p11 = graph.read_param @ln2.bias : tensor<16xf32>
  %m11 = graph.read_param @ln2.bias.m : tensor<16xf32>
  %v11 = graph.read_param @ln2.bias.v : tensor<16xf32>
  %np11, %nm11, %nv11 = graph.adamw %p11, %ln2_db, %m11, %v11, %step {lr = 1.000000e-02 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  graph.assign @ln2.bias, %np11 : tensor<16xf32>
  graph.assign @ln2.bias.m, %nm11 : tensor<16xf32>
  graph.assign @ln2.bias.v, %nv11 : tensor<16xf32>
  %p12 = graph.read_param @mlp.fc1.weight : tensor<16x16xf32>
  %m12 = graph.read_param @mlp.fc1.weight.m : tensor<16x16xf32>
  %v12 = graph.read_param @mlp.fc1.weight.v : tensor<16x16xf32>
  %np12, %nm12, %nv12 = graph.adamw %p12, %dw1, %m12, %v12, %step {lr = 1.000000e-02 : f64} : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<i64>) -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>)
  graph.assign @mlp.fc1.weight, %np12 : tensor<16x16xf32>
  graph.assign @mlp.fc1.weight.m, %nm12 : tensor<16x16xf32>
  graph.assign @mlp.fc1.weight.v, %nv12 : tensor<16x16xf32>
  %p13 = graph.read_param @mlp.fc1.bias : tensor<16xf32>
  %m13 = graph.read_param @mlp.fc1.bias.m : tensor<16xf32>
  %v13 = graph.read_param @mlp.fc1.bias.v : tensor<16xf32>
  %np13, %nm13, %nv13 = graph.adamw %p13, %db1, %m13, %v13, %step {lr = 1.000000e-02 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  graph.assign @mlp.fc1.bias, %np13 : tensor<16xf32>
  graph.assign @mlp.fc1.bias.m, %nm13 : tensor<16xf32>
  graph.assign @mlp.fc1.bias.v, %nv13 : tensor<16xf32>
  %p14 = graph.read_param @mlp.fc2.weight : tensor<16x16xf32>
  %m14 = graph.read_param @mlp.fc2.weight.m : tensor<16x16xf32>
  %v14 = graph.read_param @mlp.fc2.weight.v : tensor<16x16xf32>
  %np14, %nm14, %nv14 = graph.adamw %p14, %dw2, %m14, %v14, %step {lr = 1.000000e-02 : f64} : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<i64>) -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>)
  graph.assign @mlp.fc2.weight, %np14 : tensor<16x16xf32>
  graph.assign @mlp.fc2.weight.m, %nm14 : tensor<16x16xf32>
  graph.assign @mlp.fc2.weight.v, %nv14 : tensor<16x16xf32>
  %p15 = graph.read_param @mlp.fc2.bias : tensor<16xf32>
  %m15 = graph.read_param @mlp.fc2.bias.m : tensor<16xf32>
  %v15 = graph.read_param @mlp.fc2.bias.v : tensor<16xf32>
  %np15, %nm15, %nv15 = graph.adamw %p15, %db2, %m15, %v15, %step {lr = 1.000000e-02 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  graph.assign @mlp.fc2.bias, %np15 : tensor<16xf32>
  graph.assign @mlp.fc2.bias.m, %nm15 : tensor<16xf32>
  graph.assign @mlp.fc2.bias.v, %nv15 : tensor<16xf32>
  %p16 = graph.read_param @head.weight : tensor<16x8xf32>
  %m16 = graph.read_param @head.weight.m : tensor<16x8xf32>
  %v16 = graph.read_param @head.weight.v : tensor<16x8xf32>
  %np16, %nm16, %nv16 = graph.adamw %p16, %dwh, %m16, %v16, %step {lr = 1.000000e-02 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<i64>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
  graph.assign @head.weight, %np16 : tensor<16x8xf32>
  graph.assign @head.weight.m, %nm16 : tensor<16x8xf32>
  graph.assign @head.weight.v, %nv16 : tensor<16x8xf32>
  %p17 = graph.read_param @head.bias : tensor<8xf32>
  %m17 = graph.read_param @head.bias.m : tensor<8xf32>
  %v17 = graph.read_param @head.bias.v : tensor<8xf32>
  %np17, %nm17, %nv17 = graph.adamw %p17, %dbh, %m17, %v17, %step {lr = 1.000000e-02 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  graph.assign @head.bias, %np17 : tensor<8xf32>
  graph.assign @head.bias.m, %nm17 : tensor<8xf32>
  graph.assign @head.bias.v, %nv17 : tensor<8xf32>
  return %loss : tensor<f32>
}
