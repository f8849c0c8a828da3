// The example models (PyTorch exports, opset 17) import into static graph IR:
// parameters keep their state_dict names, shape arithmetic folds away, tied
// weights stay one parameter. See examples/*/README.md for the architectures.

//===----------------------------------------------------------------------===//
// mlp: Linear(16, 32) -> GELU (erf) -> Linear(32, 4); Gemm with transB.
//===----------------------------------------------------------------------===//

// RUN: cleave-translate --import-onnx %examples/mlp/model.onnx \
// RUN:   | FileCheck %s --check-prefix=MLP
// MLP:      graph.param @fc1.weight : tensor<32x16xf32> = dense<
// MLP-NEXT: graph.param @fc1.bias : tensor<32xf32> = dense<
// MLP-NEXT: graph.param @fc2.weight : tensor<4x32xf32> = dense<
// MLP-NEXT: graph.param @fc2.bias : tensor<4xf32> = dense<
// MLP-LABEL: func.func @forward(
// MLP-SAME:      %[[X:.*]]: tensor<8x16xf32> {onnx.name = "x"}) -> (tensor<8x4xf32> {onnx.name = "logits"})
// MLP-NEXT:    %[[W1:.*]] = graph.read_param @fc1.weight : tensor<32x16xf32>
// MLP-NEXT:    %[[W1T:.*]] = graph.transpose %[[W1]] perm [1, 0] : tensor<32x16xf32>
// MLP-NEXT:    %[[MM1:.*]] = graph.matmul %[[X]], %[[W1T]] : tensor<8x16xf32>, tensor<16x32xf32>
// MLP-NEXT:    %[[B1:.*]] = graph.read_param @fc1.bias : tensor<32xf32>
// MLP-NEXT:    %[[H:.*]] = graph.add %[[MM1]], %[[B1]] : tensor<8x32xf32>, tensor<32xf32>
// MLP-NEXT:    %[[SQRT2:.*]] = graph.constant dense<1.41421354> : tensor<f32>
// MLP-NEXT:    %[[D:.*]] = graph.div %[[H]], %[[SQRT2]]
// MLP-NEXT:    %[[ERF:.*]] = graph.erf %[[D]] : tensor<8x32xf32>
// MLP-NEXT:    %[[ONE:.*]] = graph.constant dense<1.000000e+00> : tensor<f32>
// MLP-NEXT:    %[[E1:.*]] = graph.add %[[ERF]], %[[ONE]]
// MLP-NEXT:    %[[P:.*]] = graph.mul %[[H]], %[[E1]]
// MLP-NEXT:    %[[HALF:.*]] = graph.constant dense<5.000000e-01> : tensor<f32>
// MLP-NEXT:    %[[G:.*]] = graph.mul %[[P]], %[[HALF]]
// MLP-NEXT:    %[[W2:.*]] = graph.read_param @fc2.weight : tensor<4x32xf32>
// MLP-NEXT:    %[[W2T:.*]] = graph.transpose %[[W2]] perm [1, 0] : tensor<4x32xf32>
// MLP-NEXT:    %[[MM2:.*]] = graph.matmul %[[G]], %[[W2T]] : tensor<8x32xf32>, tensor<32x4xf32>
// MLP-NEXT:    %[[B2:.*]] = graph.read_param @fc2.bias : tensor<4xf32>
// MLP-NEXT:    %[[Y:.*]] = graph.add %[[MM2]], %[[B2]] : tensor<8x4xf32>, tensor<4xf32>
// MLP-NEXT:    return %[[Y]] : tensor<8x4xf32>

//===----------------------------------------------------------------------===//
// gpt: LM head tied to the token embedding `wte.weight`.
//===----------------------------------------------------------------------===//

// RUN: cleave-translate --import-onnx %examples/gpt/model.onnx \
// RUN:   | FileCheck %s --check-prefix=GPT
// GPT:       graph.param @wte.weight : tensor<64x32xf32> = dense<
// GPT-NEXT:  graph.param @wpe.weight : tensor<8x32xf32> = dense<
// GPT:       graph.param @blocks.0.attn.qkv.weight : tensor<96x32xf32> = dense<
// GPT:       graph.param @blocks.1.mlp.proj.weight : tensor<32x128xf32> = dense<
// GPT:       graph.param @ln_f.weight : tensor<32xf32> = dense<
// GPT-NEXT:  graph.param @ln_f.bias : tensor<32xf32> = dense<
// GPT-NEXT:  func.func @forward(
// GPT-SAME:      %[[IDX:.*]]: tensor<2x8xi64> {onnx.name = "idx"}) -> (tensor<2x8x64xf32> {onnx.name = "logits"})
// GPT-NEXT:    %[[WTE:.*]] = graph.read_param @wte.weight : tensor<64x32xf32>
// GPT-NEXT:    %[[TOK:.*]] = graph.gather %[[WTE]][%[[IDX]]] dim 0 : tensor<64x32xf32>, tensor<2x8xi64>
// torch.arange(t) for the positions is known at import.
// GPT-NEXT:    %[[POS:.*]] = graph.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
// GPT-NEXT:    %[[WPE:.*]] = graph.read_param @wpe.weight : tensor<8x32xf32>
// GPT-NEXT:    %[[PE:.*]] = graph.gather %[[WPE]][%[[POS]]] dim 0 : tensor<8x32xf32>, tensor<8xi64>
// GPT-NEXT:    %{{.*}} = graph.add %[[TOK]], %[[PE]] : tensor<2x8x32xf32>, tensor<8x32xf32>
// GPT:         graph.split %{{.*}} dim 2 sizes [32, 32, 32] : tensor<2x8x96xf32>
// GPT:         graph.reshape %{{.*}} : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
// The causal mask built in forward() is a known i1 constant.
// GPT:         graph.constant dense<{{\[\[}}false, true, true, true, true, true, true, true], [false, false, true, {{.*}}]]> : tensor<8x8xi1>
// GPT:         graph.softmax %{{.*}} dim 3 : tensor<2x4x8x8xf32>
// GPT:         graph.tanh
// GPT-DAG:     %[[LNFB:.*]] = graph.read_param @ln_f.bias : tensor<32xf32>
// GPT-DAG:     %[[LNFW:.*]] = graph.read_param @ln_f.weight : tensor<32xf32>
// GPT:         %[[LNF:.*]] = graph.layer_norm %{{.*}}, %[[LNFW]], %[[LNFB]] dim 2
// The LM head uses the same read of wte.weight as the embedding.
// GPT-NEXT:    %[[WTET:.*]] = graph.transpose %[[WTE]] perm [1, 0] : tensor<64x32xf32>
// GPT-NEXT:    %[[LOGITS:.*]] = graph.matmul %[[LNF]], %[[WTET]] : tensor<2x8x32xf32>, tensor<32x64xf32>
// GPT-NEXT:    return %[[LOGITS]] : tensor<2x8x64xf32>

// wte.weight is one parameter read once; there is no separate LM-head weight.
// RUN: cleave-translate --import-onnx %examples/gpt/model.onnx \
// RUN:   | FileCheck %s --check-prefix=GPT-TIED \
// RUN:       --implicit-check-not=@wte.weight --implicit-check-not=lm_head
// GPT-TIED: graph.param @wte.weight : tensor<64x32xf32>
// GPT-TIED: graph.read_param @wte.weight : tensor<64x32xf32>

// Every reshape is static, from an activation (graph.reshape has no shape
// operand); the Unsqueeze/Concat shape arithmetic left no i64 shape constant
// (the only i64 constant is the positions) and no dynamic dimension.
// RUN: cleave-translate --import-onnx %examples/gpt/model.onnx \
// RUN:   | FileCheck %s --check-prefix=GPT-SHAPES \
// RUN:       --implicit-check-not='graph.constant dense<{{.*}}> : tensor<{{[0-9x]+}}xi64>' \
// RUN:       --implicit-check-not='tensor<{{[0-9x]*}}?'
// GPT-SHAPES:         graph.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
// GPT-SHAPES-COUNT-8: graph.reshape %{{[0-9#]+}} : tensor<{{[0-9x]+}}xf32> -> tensor<{{[0-9x]+}}xf32>
// GPT-SHAPES-NOT:     graph.reshape
// GPT-SHAPES:         return

//===----------------------------------------------------------------------===//
// llama: RMSNorm by hand, rotary tables computed in forward(), untied head.
//===----------------------------------------------------------------------===//

// RUN: cleave-translate --import-onnx %examples/llama/model.onnx \
// RUN:   | FileCheck %s --check-prefix=LLAMA \
// RUN:       --implicit-check-not=graph.cos --implicit-check-not=graph.sin \
// RUN:       --implicit-check-not=graph.iota \
// RUN:       --implicit-check-not='graph.constant dense<{{.*}}xi64>' \
// RUN:       --implicit-check-not='tensor<{{[0-9x]*}}?'
// LLAMA:       graph.param @tok_embeddings.weight : tensor<64x32xf32> = dense<
// LLAMA-NEXT:  graph.param @layers.0.attention_norm.weight : tensor<32xf32> = dense<
// LLAMA-NEXT:  graph.param @layers.0.attention.wq.weight : tensor<32x32xf32> = dense<
// LLAMA:       graph.param @layers.1.feed_forward.w2.weight : tensor<32x64xf32> = dense<
// LLAMA-NEXT:  graph.param @norm.weight : tensor<32xf32> = dense<
// LLAMA-NEXT:  graph.param @output.weight : tensor<64x32xf32> = dense<
// LLAMA-NEXT:  func.func @forward(
// LLAMA-SAME:      %[[IDX:.*]]: tensor<2x8xi64> {onnx.name = "idx"}) -> (tensor<2x8x64xf32> {onnx.name = "logits"})
// LLAMA-NEXT:    %[[EMB:.*]] = graph.read_param @tok_embeddings.weight : tensor<64x32xf32>
// LLAMA-NEXT:    %[[X:.*]] = graph.gather %[[EMB]][%[[IDX]]] dim 0 : tensor<64x32xf32>, tensor<2x8xi64>
// RMSNorm: x * 1 / sqrt(mean(x^2) + eps) * weight.
// LLAMA-NEXT:    %[[TWO:.*]] = graph.constant dense<2.000000e+00> : tensor<f32>
// LLAMA-NEXT:    %[[SQ:.*]] = graph.pow %[[X]], %[[TWO]] : tensor<2x8x32xf32>, tensor<f32>
// LLAMA-NEXT:    %[[MS:.*]] = graph.reduce mean %[[SQ]] dims [2] keepdim : tensor<2x8x32xf32>
// LLAMA:         graph.sqrt %{{.*}} : tensor<2x8x1xf32>
// LLAMA:         graph.read_param @layers.0.attention_norm.weight : tensor<32xf32>
// The cos and sin tables (from arange, cat, cos, sin in forward()) are
// folded into 8x8 constants; rotate-half is two slices, a neg and a concat.
// LLAMA:         %[[COS:.*]] = graph.constant dense<{{\[\[}}1.000000e+00, {{.*}}]]> : tensor<8x8xf32>
// LLAMA-NEXT:    graph.mul %[[Q:.*]], %[[COS]] : tensor<2x4x8x8xf32>, tensor<8x8xf32>
// LLAMA-NEXT:    %[[LO:.*]] = graph.slice %[[Q]] start [0, 0, 0, 0] limit [2, 4, 8, 4] : tensor<2x4x8x8xf32>
// LLAMA-NEXT:    %[[HI:.*]] = graph.slice %[[Q]] start [0, 0, 0, 4] limit [2, 4, 8, 8] : tensor<2x4x8x8xf32>
// LLAMA-NEXT:    %[[NHI:.*]] = graph.neg %[[HI]] : tensor<2x4x8x4xf32>
// LLAMA-NEXT:    graph.concat %[[NHI]], %[[LO]] dim 3 : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>
// LLAMA-NEXT:    %[[SIN:.*]] = graph.constant dense<{{\[\[}}0.000000e+00, {{.*}}]]> : tensor<8x8xf32>
// SwiGLU: silu as x * sigmoid(x).
// LLAMA:         %[[GATE:.*]] = graph.matmul %{{.*}} : tensor<2x8x32xf32>, tensor<32x64xf32>
// LLAMA-NEXT:    %[[SIG:.*]] = graph.sigmoid %[[GATE]] : tensor<2x8x64xf32>
// LLAMA-NEXT:    graph.mul %[[GATE]], %[[SIG]]
// The untied head reads its own weight.
// LLAMA:         %[[OUT:.*]] = graph.read_param @output.weight : tensor<64x32xf32>
// LLAMA-NEXT:    %[[OUTT:.*]] = graph.transpose %[[OUT]] perm [1, 0] : tensor<64x32xf32>
// LLAMA-NEXT:    %[[LOGITS:.*]] = graph.matmul %{{.*}}, %[[OUTT]] : tensor<2x8x32xf32>, tensor<32x64xf32>
// LLAMA-NEXT:    return %[[LOGITS]] : tensor<2x8x64xf32>

//===----------------------------------------------------------------------===//
// moe: top-2 routing over 4 experts, experts as broadcasting matmuls.
//===----------------------------------------------------------------------===//

// RUN: cleave-translate --import-onnx %examples/moe/model.onnx \
// RUN:   | FileCheck %s --check-prefix=MOE \
// RUN:       --implicit-check-not='tensor<{{[0-9x]*}}?'
// MOE:       graph.param @wte.weight : tensor<64x32xf32> = dense<
// MOE:       graph.param @blocks.0.moe.w1 : tensor<4x32x64xf32> = dense<
// MOE-NEXT:  graph.param @blocks.0.moe.w2 : tensor<4x64x32xf32> = dense<
// MOE-NEXT:  graph.param @blocks.0.moe.router.weight : tensor<4x32xf32> = dense<
// MOE:       graph.param @lm_head.weight : tensor<64x32xf32> = dense<
// MOE-NEXT:  func.func @forward(
// MOE-SAME:      %{{.*}}: tensor<2x8xi64> {onnx.name = "idx"}) -> (tensor<2x8x64xf32> {onnx.name = "logits"})
// Router: tokens [16, 32] -> probs [16, 4] -> top-2, renormalized.
// MOE:         %[[TOKENS:.*]] = graph.reshape %{{.*}} : tensor<2x8x32xf32> -> tensor<16x32xf32>
// MOE-NEXT:    %[[R:.*]] = graph.read_param @blocks.0.moe.router.weight : tensor<4x32xf32>
// MOE-NEXT:    %[[RT:.*]] = graph.transpose %[[R]] perm [1, 0] : tensor<4x32xf32>
// MOE-NEXT:    %[[LOGITS:.*]] = graph.matmul %[[TOKENS]], %[[RT]] : tensor<16x32xf32>, tensor<32x4xf32>
// MOE-NEXT:    %[[PROBS:.*]] = graph.softmax %[[LOGITS]] dim 1 : tensor<16x4xf32>
// MOE-NEXT:    %[[TOPP:.*]], %[[TOPI:.*]] = graph.topk %[[PROBS]] k 2 dim 1 : tensor<16x4xf32>
// MOE-NEXT:    %[[SUM:.*]] = graph.reduce sum %[[TOPP]] dims [1] keepdim : tensor<16x2xf32>
// MOE-NEXT:    graph.div %[[TOPP]], %[[SUM]] : tensor<16x2xf32>, tensor<16x1xf32>
// One-hot of the expert ids against torch.arange(4).
// MOE-NEXT:    %[[IDS:.*]] = graph.reshape %[[TOPI]] : tensor<16x2xi64> -> tensor<16x2x1xi64>
// MOE-NEXT:    %[[ARANGE:.*]] = graph.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
// MOE-NEXT:    %[[EQ:.*]] = graph.compare eq %[[IDS]], %[[ARANGE]] : tensor<16x2x1xi64>, tensor<4xi64>
// MOE-NEXT:    graph.cast %[[EQ]] : tensor<16x2x4xi1> -> tensor<16x2x4xf32>
// Every expert on every token: [1, 16, 32] x [4, 32, 64] -> [4, 16, 64].
// MOE:         %[[W1:.*]] = graph.read_param @blocks.0.moe.w1 : tensor<4x32x64xf32>
// MOE-NEXT:    graph.matmul %{{.*}}, %[[W1]] : tensor<1x16x32xf32>, tensor<4x32x64xf32>
// MOE:         %[[W2:.*]] = graph.read_param @blocks.0.moe.w2 : tensor<4x64x32xf32>
// MOE-NEXT:    graph.matmul %{{.*}}, %[[W2]] : tensor<4x16x64xf32>, tensor<4x64x32xf32>
// MOE:         graph.reduce sum %{{.*}} dims [0] : tensor<4x16x32xf32>
// MOE-NEXT:    graph.reshape %{{.*}} : tensor<16x32xf32> -> tensor<2x8x32xf32>
// MOE:         graph.topk %{{.*}} k 2 dim 1 : tensor<16x4xf32>
// MOE:         %[[HEAD:.*]] = graph.read_param @lm_head.weight : tensor<64x32xf32>
// MOE-NEXT:    %[[HEADT:.*]] = graph.transpose %[[HEAD]] perm [1, 0] : tensor<64x32xf32>
// MOE-NEXT:    %[[OUT:.*]] = graph.matmul %{{.*}}, %[[HEADT]] : tensor<2x8x32xf32>, tensor<32x64xf32>
// MOE-NEXT:    return %[[OUT]] : tensor<2x8x64xf32>
