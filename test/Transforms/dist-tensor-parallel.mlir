// -dist-tensor-parallel annotates parameters only: in each pair of
// projections whose first one's output features reach only the
// contracting dimension of the second, the first weight is split by output
// features (column-parallel), its bias with it, and the second weight by
// input features (row-parallel); the optimizer state of a split parameter
// is split as the parameter. Every mesh is ["tp" = 2] unless the case says
// otherwise; the axis is the default, "tp".
// RUN: cleave-opt %s -split-input-file -dist-tensor-parallel | FileCheck %s

// An MLP, x @ W1 + b1 -> gelu -> @ W2 + b2, with the weights stored
// [in, out]: W1 is split on its output features (dimension 1), b1 with
// them, W2 on its input features (dimension 0). b2 is added to the
// row-parallel output and the norm's scale is not a projection: both stay
// whole. The function body is not changed.
// CHECK-LABEL: graph.param @mlp.ln.scale : tensor<8xf32>{{$}}
// CHECK-NEXT: graph.param @mlp.w1 : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @mlp.b1 : tensor<16xf32> sharding <@mesh, [{"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @mlp.w2 : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @mlp.b2 : tensor<8xf32>{{$}}
// CHECK-LABEL: func.func @mlp
// CHECK-NOT: sharding
// CHECK: return
dist.mesh @mesh ["tp" = 2]
graph.param @mlp.ln.scale : tensor<8xf32>
graph.param @mlp.w1 : tensor<8x16xf32>
graph.param @mlp.b1 : tensor<16xf32>
graph.param @mlp.w2 : tensor<16x8xf32>
graph.param @mlp.b2 : tensor<8xf32>
func.func @mlp(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %s = graph.read_param @mlp.ln.scale : tensor<8xf32>
  %n = graph.layer_norm %x, %s dim 2 : tensor<2x4x8xf32>, tensor<8xf32>
  %w1 = graph.read_param @mlp.w1 : tensor<8x16xf32>
  %h = graph.matmul %n, %w1 : tensor<2x4x8xf32>, tensor<8x16xf32>
  %b1 = graph.read_param @mlp.b1 : tensor<16xf32>
  %hb = graph.add %h, %b1 : tensor<2x4x16xf32>, tensor<16xf32>
  %g = graph.gelu %hb : tensor<2x4x16xf32>
  %w2 = graph.read_param @mlp.w2 : tensor<16x8xf32>
  %y = graph.matmul %g, %w2 : tensor<2x4x16xf32>, tensor<16x8xf32>
  %b2 = graph.read_param @mlp.b2 : tensor<8xf32>
  %yb = graph.add %y, %b2 : tensor<2x4x8xf32>, tensor<8xf32>
  %out = graph.add %x, %yb : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

// -----

// The same MLP as ONNX and PyTorch export it: the weights stored
// [out, in] and transposed before the matmul, the biases added on the
// left. The split dimensions are the stored ones: fc1.weight by its rows
// (dimension 0), fc2.weight by its columns (dimension 1).
// CHECK-LABEL: graph.param @fc1.weight : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @fc1.bias : tensor<16xf32> sharding <@mesh, [{"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @fc2.weight : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @fc2.bias : tensor<8xf32>{{$}}
dist.mesh @mesh ["tp" = 2]
graph.param @fc1.weight : tensor<16x8xf32>
graph.param @fc1.bias : tensor<16xf32>
graph.param @fc2.weight : tensor<8x16xf32>
graph.param @fc2.bias : tensor<8xf32>
func.func @exported_mlp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = graph.read_param @fc1.weight : tensor<16x8xf32>
  %w1t = graph.transpose %w1 perm [1, 0] : tensor<16x8xf32>
  %h = graph.matmul %x, %w1t : tensor<4x8xf32>, tensor<8x16xf32>
  %b1 = graph.read_param @fc1.bias : tensor<16xf32>
  %hb = graph.add %b1, %h : tensor<16xf32>, tensor<4x16xf32>
  %g = graph.gelu %hb approximate tanh : tensor<4x16xf32>
  %w2 = graph.read_param @fc2.weight : tensor<8x16xf32>
  %w2t = graph.transpose %w2 perm [1, 0] : tensor<8x16xf32>
  %y = graph.matmul %g, %w2t : tensor<4x16xf32>, tensor<16x8xf32>
  %b2 = graph.read_param @fc2.bias : tensor<8xf32>
  %yb = graph.add %b2, %y : tensor<8xf32>, tensor<4x8xf32>
  return %yb : tensor<4x8xf32>
}

// -----

// The weight is found through what mixed precision and imports put
// between the parameter and the matmul: a size-1 reshape of a [1, 8, 16]
// weight and a cast to bf16 (the split dimension is the stored one, 2), a
// slice that keeps the whole [16, 8] weight and a cast; the hidden
// features pass a cast back to f32 and a relu.
// CHECK-LABEL: graph.param @cast.w1 : tensor<1x8x16xf32> sharding <@mesh, [{}, {}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @cast.w2 : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel">{{$}}
dist.mesh @mesh ["tp" = 2]
graph.param @cast.w1 : tensor<1x8x16xf32>
graph.param @cast.w2 : tensor<16x8xf32>
func.func @through_casts(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %w1 = graph.read_param @cast.w1 : tensor<1x8x16xf32>
  %w1r = graph.reshape %w1 : tensor<1x8x16xf32> -> tensor<8x16xf32>
  %w1h = graph.cast %w1r : tensor<8x16xf32> -> tensor<8x16xbf16>
  %h = graph.matmul %x, %w1h : tensor<4x8xbf16>, tensor<8x16xbf16>
  %hf = graph.cast %h : tensor<4x16xbf16> -> tensor<4x16xf32>
  %g = graph.relu %hf : tensor<4x16xf32>
  %gh = graph.cast %g : tensor<4x16xf32> -> tensor<4x16xbf16>
  %w2 = graph.read_param @cast.w2 : tensor<16x8xf32>
  %w2s = graph.slice %w2 start [0, 0] limit [16, 8] : tensor<16x8xf32>
  %w2h = graph.cast %w2s : tensor<16x8xf32> -> tensor<16x8xbf16>
  %y = graph.matmul %gh, %w2h : tensor<4x16xbf16>, tensor<16x8xbf16>
  return %y : tensor<4x8xbf16>
}

// -----

// SwiGLU, (silu(x @ W1) * (x @ W3)) @ W2: the gate W1 and the up
// projection W3 are both column-parallel (each is the other factor of the
// product), the down projection W2 row-parallel.
// CHECK-LABEL: graph.param @swiglu.w1 : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @swiglu.w3 : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @swiglu.w2 : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel">{{$}}
dist.mesh @mesh ["tp" = 2]
graph.param @swiglu.w1 : tensor<8x16xf32>
graph.param @swiglu.w3 : tensor<8x16xf32>
graph.param @swiglu.w2 : tensor<16x8xf32>
func.func @swiglu(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w1 = graph.read_param @swiglu.w1 : tensor<8x16xf32>
  %a = graph.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x16xf32>
  %s = graph.silu %a : tensor<2x4x16xf32>
  %w3 = graph.read_param @swiglu.w3 : tensor<8x16xf32>
  %u = graph.matmul %x, %w3 : tensor<2x4x8xf32>, tensor<8x16xf32>
  %p = graph.mul %s, %u : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  %w2 = graph.read_param @swiglu.w2 : tensor<16x8xf32>
  %y = graph.matmul %p, %w2 : tensor<2x4x16xf32>, tensor<16x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Attention: the query, key and value projections, reshaped [B, S, H] ->
// [B, S, heads, hd] and transposed to [B, heads, S, hd], meet in a causal
// graph.attention, whose output is transposed back, reshaped to [B, S, H]
// and projected. The query, key and value weights (and the query's bias)
// are split by heads, the output weight by its input features; the
// output's bias stays whole.
// CHECK-LABEL: graph.param @attn.q.weight : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @attn.q.bias : tensor<16xf32> sharding <@mesh, [{"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @attn.k.weight : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @attn.v.weight : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @attn.o.weight : tensor<16x16xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @attn.o.bias : tensor<16xf32>{{$}}
dist.mesh @mesh ["tp" = 2]
graph.param @attn.q.weight : tensor<16x16xf32>
graph.param @attn.q.bias : tensor<16xf32>
graph.param @attn.k.weight : tensor<16x16xf32>
graph.param @attn.v.weight : tensor<16x16xf32>
graph.param @attn.o.weight : tensor<16x16xf32>
graph.param @attn.o.bias : tensor<16xf32>
func.func @attention(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %wq = graph.read_param @attn.q.weight : tensor<16x16xf32>
  %q0 = graph.matmul %x, %wq : tensor<2x8x16xf32>, tensor<16x16xf32>
  %bq = graph.read_param @attn.q.bias : tensor<16xf32>
  %q1 = graph.add %q0, %bq : tensor<2x8x16xf32>, tensor<16xf32>
  %q2 = graph.reshape %q1 : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %q = graph.transpose %q2 perm [0, 2, 1, 3] : tensor<2x8x4x4xf32>
  %wk = graph.read_param @attn.k.weight : tensor<16x16xf32>
  %k0 = graph.matmul %x, %wk : tensor<2x8x16xf32>, tensor<16x16xf32>
  %k1 = graph.reshape %k0 : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %k = graph.transpose %k1 perm [0, 2, 1, 3] : tensor<2x8x4x4xf32>
  %wv = graph.read_param @attn.v.weight : tensor<16x16xf32>
  %v0 = graph.matmul %x, %wv : tensor<2x8x16xf32>, tensor<16x16xf32>
  %v1 = graph.reshape %v0 : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %v = graph.transpose %v1 perm [0, 2, 1, 3] : tensor<2x8x4x4xf32>
  %a = graph.attention %q, %k, %v causal : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>
  %at = graph.transpose %a perm [0, 2, 1, 3] : tensor<2x4x8x4xf32>
  %ar = graph.reshape %at : tensor<2x8x4x4xf32> -> tensor<2x8x16xf32>
  %wo = graph.read_param @attn.o.weight : tensor<16x16xf32>
  %o = graph.matmul %ar, %wo : tensor<2x8x16xf32>, tensor<16x16xf32>
  %bo = graph.read_param @attn.o.bias : tensor<16xf32>
  %ob = graph.add %o, %bo : tensor<2x8x16xf32>, tensor<16xf32>
  return %ob : tensor<2x8x16xf32>
}

// -----

// Grouped-query attention with rotary embeddings on the query: 4 query
// heads, 2 key/value heads (both divisible by 2). The rotation slices the
// head features in halves, negates one and concatenates them back, and
// multiplies by [S, hd] tables that broadcast along the heads: the heads
// stay apart, so the layout is the same as without it.
// CHECK-LABEL: graph.param @gqa.wq : tensor<16x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @gqa.wk : tensor<16x8xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @gqa.wv : tensor<16x8xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @gqa.wo : tensor<16x16xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel">{{$}}
dist.mesh @mesh ["tp" = 2]
graph.param @gqa.wq : tensor<16x16xf32>
graph.param @gqa.wk : tensor<16x8xf32>
graph.param @gqa.wv : tensor<16x8xf32>
graph.param @gqa.wo : tensor<16x16xf32>
func.func @rotary_gqa(%x: tensor<2x8x16xf32>, %cos: tensor<8x4xf32>, %sin: tensor<8x4xf32>) -> tensor<2x8x16xf32> {
  %wq = graph.read_param @gqa.wq : tensor<16x16xf32>
  %q0 = graph.matmul %x, %wq : tensor<2x8x16xf32>, tensor<16x16xf32>
  %q1 = graph.reshape %q0 : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %q = graph.transpose %q1 perm [0, 2, 1, 3] : tensor<2x8x4x4xf32>
  %qa = graph.slice %q start [0, 0, 0, 0] limit [2, 4, 8, 2] : tensor<2x4x8x4xf32>
  %qb = graph.slice %q start [0, 0, 0, 2] limit [2, 4, 8, 4] : tensor<2x4x8x4xf32>
  %nqb = graph.neg %qb : tensor<2x4x8x2xf32>
  %qr = graph.concat %nqb, %qa dim 3 : tensor<2x4x8x2xf32>, tensor<2x4x8x2xf32>
  %qc = graph.mul %q, %cos : tensor<2x4x8x4xf32>, tensor<8x4xf32>
  %qs = graph.mul %qr, %sin : tensor<2x4x8x4xf32>, tensor<8x4xf32>
  %qq = graph.add %qc, %qs : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>
  %wk = graph.read_param @gqa.wk : tensor<16x8xf32>
  %k0 = graph.matmul %x, %wk : tensor<2x8x16xf32>, tensor<16x8xf32>
  %k1 = graph.reshape %k0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %k = graph.transpose %k1 perm [0, 2, 1, 3] : tensor<2x8x2x4xf32>
  %wv = graph.read_param @gqa.wv : tensor<16x8xf32>
  %v0 = graph.matmul %x, %wv : tensor<2x8x16xf32>, tensor<16x8xf32>
  %v1 = graph.reshape %v0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %v = graph.transpose %v1 perm [0, 2, 1, 3] : tensor<2x8x2x4xf32>
  %a = graph.attention %qq, %k, %v causal : tensor<2x4x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>
  %at = graph.transpose %a perm [0, 2, 1, 3] : tensor<2x4x8x4xf32>
  %ar = graph.reshape %at : tensor<2x8x4x4xf32> -> tensor<2x8x16xf32>
  %wo = graph.read_param @gqa.wo : tensor<16x16xf32>
  %o = graph.matmul %ar, %wo : tensor<2x8x16xf32>, tensor<16x16xf32>
  return %o : tensor<2x8x16xf32>
}

// -----

// Projections whose features reach anything but another projection's
// contracting dimension stay whole, while the valid pair (up, down) in the
// same function is split: @res, whose output is added to the function's
// argument (a residual); @normed, whose output is layer-normalized (the
// norm reads the features whole; its scale and bias are untouched too);
// @head, whose output is the function's result (a language-model head);
// @both, whose output reaches @both.next but is also returned. @both.next
// is then a column start of its own, and its output is returned.
// CHECK-LABEL: graph.param @up : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @down : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @res : tensor<8x8xf32>{{$}}
// CHECK-NEXT: graph.param @normed : tensor<8x8xf32>{{$}}
// CHECK-NEXT: graph.param @ln.scale : tensor<8xf32>{{$}}
// CHECK-NEXT: graph.param @ln.bias : tensor<8xf32>{{$}}
// CHECK-NEXT: graph.param @head : tensor<8x32xf32>{{$}}
// CHECK-NEXT: graph.param @both : tensor<8x16xf32>{{$}}
// CHECK-NEXT: graph.param @both.next : tensor<16x8xf32>{{$}}
dist.mesh @mesh ["tp" = 2]
graph.param @up : tensor<8x16xf32>
graph.param @down : tensor<16x8xf32>
graph.param @res : tensor<8x8xf32>
graph.param @normed : tensor<8x8xf32>
graph.param @ln.scale : tensor<8xf32>
graph.param @ln.bias : tensor<8xf32>
graph.param @head : tensor<8x32xf32>
graph.param @both : tensor<8x16xf32>
graph.param @both.next : tensor<16x8xf32>
func.func @stays_whole(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x32xf32>, tensor<4x16xf32>, tensor<4x8xf32>) {
  %wu = graph.read_param @up : tensor<8x16xf32>
  %h = graph.matmul %x, %wu : tensor<4x8xf32>, tensor<8x16xf32>
  %g = graph.relu %h : tensor<4x16xf32>
  %wd = graph.read_param @down : tensor<16x8xf32>
  %d = graph.matmul %g, %wd : tensor<4x16xf32>, tensor<16x8xf32>
  %wr = graph.read_param @res : tensor<8x8xf32>
  %r = graph.matmul %x, %wr : tensor<4x8xf32>, tensor<8x8xf32>
  %x1 = graph.add %x, %r : tensor<4x8xf32>, tensor<4x8xf32>
  %wn = graph.read_param @normed : tensor<8x8xf32>
  %m = graph.matmul %x, %wn : tensor<4x8xf32>, tensor<8x8xf32>
  %s = graph.read_param @ln.scale : tensor<8xf32>
  %b = graph.read_param @ln.bias : tensor<8xf32>
  %n = graph.layer_norm %m, %s, %b dim 1 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %wh = graph.read_param @head : tensor<8x32xf32>
  %logits = graph.matmul %x, %wh : tensor<4x8xf32>, tensor<8x32xf32>
  %wb = graph.read_param @both : tensor<8x16xf32>
  %e = graph.matmul %x, %wb : tensor<4x8xf32>, tensor<8x16xf32>
  %wbn = graph.read_param @both.next : tensor<16x8xf32>
  %f = graph.matmul %e, %wbn : tensor<4x16xf32>, tensor<16x8xf32>
  return %d, %x1, %logits, %e, %f : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x32xf32>, tensor<4x16xf32>, tensor<4x8xf32>
}

// -----

// A training step: the forward MLP (one matmul tagged forward, the rest
// untagged), its backward and its update. The moments of AdamW (@w1.m,
// @w1.v, @w2.m, @w2.v) and the momentum buffer of SGD (@b1.momentum) get
// the sharding of their parameter; the step counter stays whole. The
// backward reads the hidden features in ways the forward could not (a
// transpose into the weight gradient, gelu_grad), and its matmul by W2's
// transpose would be a projection: being tagged backward they are ignored.
// CHECK-LABEL: graph.param @w1 : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @b1 : tensor<16xf32> sharding <@mesh, [{"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @w2 : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @w1.m frozen : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel"> {cleave.role = #cleave.role<optimizer_state>}
// CHECK-NEXT: graph.param @w1.v frozen : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel"> {cleave.role = #cleave.role<optimizer_state>}
// CHECK-NEXT: graph.param @b1.momentum frozen : tensor<16xf32> sharding <@mesh, [{"tp"}], priority strategy, origin "-dist-tensor-parallel"> {cleave.role = #cleave.role<optimizer_state>}
// CHECK-NEXT: graph.param @w2.m frozen : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel"> {cleave.role = #cleave.role<optimizer_state>}
// CHECK-NEXT: graph.param @w2.v frozen : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel"> {cleave.role = #cleave.role<optimizer_state>}
// CHECK-NEXT: graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
dist.mesh @mesh ["tp" = 2]
graph.param @w1 : tensor<8x16xf32>
graph.param @b1 : tensor<16xf32>
graph.param @w2 : tensor<16x8xf32>
graph.param @w1.m frozen : tensor<8x16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @w1.v frozen : tensor<8x16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @b1.momentum frozen : tensor<16xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @w2.m frozen : tensor<16x8xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @w2.v frozen : tensor<16x8xf32> {cleave.role = #cleave.role<optimizer_state>}
graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
func.func @train_step(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = graph.read_param @w1 : tensor<8x16xf32>
  %h = graph.matmul %x, %w1 {graph.phase = #graph<phase forward>} : tensor<4x8xf32>, tensor<8x16xf32>
  %b1 = graph.read_param @b1 : tensor<16xf32>
  %hb = graph.add %h, %b1 : tensor<4x16xf32>, tensor<16xf32>
  %g = graph.gelu %hb : tensor<4x16xf32>
  %w2 = graph.read_param @w2 : tensor<16x8xf32>
  %y = graph.matmul %g, %w2 : tensor<4x16xf32>, tensor<16x8xf32>
  %gt = graph.transpose %g perm [1, 0] {graph.phase = #graph<phase backward>} : tensor<4x16xf32>
  %dw2 = graph.matmul %gt, %dy {graph.phase = #graph<phase backward>} : tensor<16x4xf32>, tensor<4x8xf32>
  %w2t = graph.transpose %w2 perm [1, 0] {graph.phase = #graph<phase backward>} : tensor<16x8xf32>
  %dg = graph.matmul %dy, %w2t {graph.phase = #graph<phase backward>} : tensor<4x8xf32>, tensor<8x16xf32>
  %dhb = graph.gelu_grad %hb, %dg {graph.phase = #graph<phase backward>} : tensor<4x16xf32>
  %db1 = graph.reduce sum %dhb dims [0] {graph.phase = #graph<phase backward>} : tensor<4x16xf32>
  %xt = graph.transpose %x perm [1, 0] {graph.phase = #graph<phase backward>} : tensor<4x8xf32>
  %dw1 = graph.matmul %xt, %dhb {graph.phase = #graph<phase backward>} : tensor<8x4xf32>, tensor<4x16xf32>
  %step = graph.read_param @optimizer.step : tensor<i64>
  %m1 = graph.read_param @w1.m : tensor<8x16xf32>
  %v1 = graph.read_param @w1.v : tensor<8x16xf32>
  %nw1, %nm1, %nv1 = graph.adamw %w1, %dw1, %m1, %v1, %step {graph.phase = #graph<phase optimizer>, lr = 1.0e-3 : f64} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<i64>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>)
  graph.assign @w1, %nw1 : tensor<8x16xf32>
  graph.assign @w1.m, %nm1 : tensor<8x16xf32>
  graph.assign @w1.v, %nv1 : tensor<8x16xf32>
  %bm = graph.read_param @b1.momentum : tensor<16xf32>
  %nb1, %nbm = graph.sgd %b1, %db1, %step momentum_buffer %bm {graph.phase = #graph<phase optimizer>, lr = 1.0e-1 : f64, momentum = 9.0e-1 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<i64>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
  graph.assign @b1, %nb1 : tensor<16xf32>
  graph.assign @b1.momentum, %nbm : tensor<16xf32>
  %m2 = graph.read_param @w2.m : tensor<16x8xf32>
  %v2 = graph.read_param @w2.v : tensor<16x8xf32>
  %nw2, %nm2, %nv2 = graph.adamw %w2, %dw2, %m2, %v2, %step {graph.phase = #graph<phase optimizer>, lr = 1.0e-3 : f64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<i64>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
  graph.assign @w2, %nw2 : tensor<16x8xf32>
  graph.assign @w2.m, %nm2 : tensor<16x8xf32>
  graph.assign @w2.v, %nv2 : tensor<16x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Only the forward counts: two identical MLPs whose hidden features are
// also transposed into a matmul (as a weight gradient is). For @a that use
// is tagged backward and ignored, so @a.w1 and @a.w2 are split; for @c it
// is untagged, a forward use that is not a projection's input, so
// @c.w1 stays whole (and @c.w2, whose output is returned, too).
// CHECK-LABEL: graph.param @a.w1 : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @a.w2 : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @c.w1 : tensor<8x16xf32>{{$}}
// CHECK-NEXT: graph.param @c.w2 : tensor<16x8xf32>{{$}}
dist.mesh @mesh ["tp" = 2]
graph.param @a.w1 : tensor<8x16xf32>
graph.param @a.w2 : tensor<16x8xf32>
graph.param @c.w1 : tensor<8x16xf32>
graph.param @c.w2 : tensor<16x8xf32>
func.func @phases(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<16x8xf32>, tensor<4x8xf32>, tensor<16x8xf32>) {
  %a1 = graph.read_param @a.w1 : tensor<8x16xf32>
  %ah = graph.matmul %x, %a1 : tensor<4x8xf32>, tensor<8x16xf32>
  %ag = graph.gelu %ah : tensor<4x16xf32>
  %a2 = graph.read_param @a.w2 : tensor<16x8xf32>
  %ay = graph.matmul %ag, %a2 : tensor<4x16xf32>, tensor<16x8xf32>
  %agt = graph.transpose %ag perm [1, 0] {graph.phase = #graph<phase backward>} : tensor<4x16xf32>
  %adw = graph.matmul %agt, %dy {graph.phase = #graph<phase backward>} : tensor<16x4xf32>, tensor<4x8xf32>
  %c1 = graph.read_param @c.w1 : tensor<8x16xf32>
  %ch = graph.matmul %x, %c1 : tensor<4x8xf32>, tensor<8x16xf32>
  %cg = graph.gelu %ch : tensor<4x16xf32>
  %c2 = graph.read_param @c.w2 : tensor<16x8xf32>
  %cy = graph.matmul %cg, %c2 : tensor<4x16xf32>, tensor<16x8xf32>
  %cgt = graph.transpose %cg perm [1, 0] : tensor<4x16xf32>
  %cdw = graph.matmul %cgt, %dy : tensor<16x4xf32>, tensor<4x8xf32>
  return %ay, %adw, %cy, %cdw : tensor<4x8xf32>, tensor<16x8xf32>, tensor<4x8xf32>, tensor<16x8xf32>
}

// -----

// The split uses the named axis only: on a 2 x 2 mesh, "dp" is left alone.
// CHECK-LABEL: graph.param @mesh2d.w1 : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">{{$}}
// CHECK-NEXT: graph.param @mesh2d.w2 : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel">{{$}}
dist.mesh @mesh ["dp" = 2, "tp" = 2]
graph.param @mesh2d.w1 : tensor<8x16xf32>
graph.param @mesh2d.w2 : tensor<16x8xf32>
func.func @mesh2d(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = graph.read_param @mesh2d.w1 : tensor<8x16xf32>
  %h = graph.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>
  %g = graph.relu %h : tensor<4x16xf32>
  %w2 = graph.read_param @mesh2d.w2 : tensor<16x8xf32>
  %y = graph.matmul %g, %w2 : tensor<4x16xf32>, tensor<16x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// An axis of size 1 splits nothing: the MLP's parameters are left as they
// are (and a model with nothing to split would not be an error).
// CHECK-LABEL: graph.param @one.w1 : tensor<8x16xf32>{{$}}
// CHECK-NEXT: graph.param @one.b1 : tensor<16xf32>{{$}}
// CHECK-NEXT: graph.param @one.w2 : tensor<16x8xf32>{{$}}
// CHECK-NEXT: graph.param @one.w1.m frozen : tensor<8x16xf32> {cleave.role = #cleave.role<optimizer_state>}
// CHECK-LABEL: func.func @size_one
// CHECK-NOT: sharding
// CHECK: return
dist.mesh @mesh ["dp" = 2, "tp" = 1]
graph.param @one.w1 : tensor<8x16xf32>
graph.param @one.b1 : tensor<16xf32>
graph.param @one.w2 : tensor<16x8xf32>
graph.param @one.w1.m frozen : tensor<8x16xf32> {cleave.role = #cleave.role<optimizer_state>}
func.func @size_one(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = graph.read_param @one.w1 : tensor<8x16xf32>
  %h = graph.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>
  %b1 = graph.read_param @one.b1 : tensor<16xf32>
  %hb = graph.add %h, %b1 : tensor<4x16xf32>, tensor<16xf32>
  %g = graph.gelu %hb : tensor<4x16xf32>
  %w2 = graph.read_param @one.w2 : tensor<16x8xf32>
  %y = graph.matmul %g, %w2 : tensor<4x16xf32>, tensor<16x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// With "tp" = 1 a module with no projection at all is left as it is too.
// CHECK-LABEL: func.func @nothing_to_split
// CHECK-NEXT: return %arg0
dist.mesh @mesh ["tp" = 1]
func.func @nothing_to_split(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  return %x : tensor<4x8xf32>
}

// -----

// The residual stream stays whole: after an up/down pair, a projection of
// x1 = x + down(...) (a sum with a row-parallel output, which is whole)
// and the projection after it are not split, though the second contracts
// the first's features through the residual add.
// CHECK-LABEL: graph.param @rs.up : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}]
// CHECK-NEXT: graph.param @rs.down : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}]
// CHECK-NEXT: graph.param @rs.res : tensor<8x8xf32>{{$}}
// CHECK-NEXT: graph.param @rs.next : tensor<8x8xf32>{{$}}
dist.mesh @mesh ["tp" = 2]
graph.param @rs.up : tensor<8x16xf32>
graph.param @rs.down : tensor<16x8xf32>
graph.param @rs.res : tensor<8x8xf32>
graph.param @rs.next : tensor<8x8xf32>
func.func @residual_stream(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %wu = graph.read_param @rs.up : tensor<8x16xf32>
  %h = graph.matmul %x, %wu : tensor<4x8xf32>, tensor<8x16xf32>
  %g = graph.relu %h : tensor<4x16xf32>
  %wd = graph.read_param @rs.down : tensor<16x8xf32>
  %d = graph.matmul %g, %wd : tensor<4x16xf32>, tensor<16x8xf32>
  %x1 = graph.add %x, %d : tensor<4x8xf32>, tensor<4x8xf32>
  %wr = graph.read_param @rs.res : tensor<8x8xf32>
  %r = graph.matmul %x1, %wr : tensor<4x8xf32>, tensor<8x8xf32>
  %x2 = graph.add %x1, %r : tensor<4x8xf32>, tensor<4x8xf32>
  %wn = graph.read_param @rs.next : tensor<8x8xf32>
  %y = graph.matmul %x2, %wn : tensor<4x8xf32>, tensor<8x8xf32>
  return %y : tensor<4x8xf32>
}
