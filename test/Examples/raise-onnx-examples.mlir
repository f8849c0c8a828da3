// Each example model, imported from ONNX and raised: the decomposed patterns
// of the PyTorch export become the fused ops, and none of their pieces stay.

// RUN: cleave-translate --import-onnx %examples/mlp/model.onnx | cleave-opt --cleave-raise -canonicalize | FileCheck %s --check-prefix=MLP
// MLP-LABEL: func.func @forward
// MLP: %[[H:.*]] = graph.add
// MLP-NEXT: graph.gelu %[[H]] : tensor<8x32xf32>
// MLP-NOT: graph.erf

// RUN: cleave-translate --import-onnx %examples/gpt/model.onnx | cleave-opt --cleave-raise -canonicalize | FileCheck %s --check-prefix=GPT --implicit-check-not=graph.softmax --implicit-check-not=graph.tanh --implicit-check-not=graph.where
// GPT-LABEL: func.func @forward
// GPT: graph.layer_norm
// GPT: graph.attention %{{.*}}, %{{.*}}, %{{.*}} causal scale 0.35355339664408242 : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
// GPT: graph.layer_norm
// GPT: graph.gelu %{{.*}} approximate tanh : tensor<2x8x128xf32>
// GPT: graph.layer_norm
// GPT: graph.attention {{.*}} causal
// GPT: graph.layer_norm
// GPT: graph.gelu {{.*}} approximate tanh
// GPT: graph.layer_norm
// GPT: return

// RUN: cleave-translate --import-onnx %examples/llama/model.onnx | cleave-opt --cleave-raise -canonicalize | FileCheck %s --check-prefix=LLAMA --implicit-check-not=graph.softmax --implicit-check-not=graph.sigmoid --implicit-check-not=graph.sqrt --implicit-check-not=graph.pow
// LLAMA-LABEL: func.func @forward
// LLAMA: graph.rms_norm %{{.*}}, %{{.*}} dim 2 eps {{.*}} : tensor<2x8x32xf32>, tensor<32xf32>
// LLAMA: graph.attention {{.*}} causal scale 0.35355339664408242
// LLAMA: graph.rms_norm
// LLAMA: %[[GATE:.*]] = graph.silu %{{.*}} : tensor<2x8x{{[0-9]+}}xf32>
// LLAMA: graph.mul %[[GATE]]
// LLAMA: graph.rms_norm
// LLAMA: graph.attention {{.*}} causal
// LLAMA: graph.rms_norm
// LLAMA: graph.silu
// LLAMA: graph.rms_norm
// LLAMA: return

// The dense mixture of experts becomes routed experts: one group per
// sequence (batch 2 x 8 tokens), dropless (8 slots per expert and group).
// The router's softmax over experts is not attention.
// RUN: cleave-translate --import-onnx %examples/moe/model.onnx | cleave-opt --cleave-raise -canonicalize | FileCheck %s --check-prefix=MOE --implicit-check-not=graph.tanh --implicit-check-not=graph.topk
// MOE-LABEL: func.func @forward
// MOE: graph.attention {{.*}} causal
// MOE: %[[L:.*]] = graph.matmul %{{.*}} : tensor<16x32xf32>, tensor<32x4xf32>
// MOE: %[[G:.*]], %[[E:.*]] = graph.router_topk %[[L]] k 2 normalize : tensor<16x4xf32>
// MOE: %[[D:.*]] = graph.moe_dispatch %{{.*}}, %[[E]] experts 4 capacity 8 groups 2 : tensor<16x32xf32>, tensor<16x2xi64>
// MOE: %[[H:.*]] = graph.expert_matmul %[[D]], %{{.*}} : tensor<4x16x32xf32>, tensor<4x32x64xf32>
// MOE: %[[A:.*]] = graph.gelu %[[H]] approximate tanh : tensor<4x16x64xf32>
// MOE: %[[Y:.*]] = graph.expert_matmul %[[A]], %{{.*}} : tensor<4x16x64xf32>, tensor<4x64x32xf32>
// MOE: graph.moe_combine %[[Y]], %[[G]], %[[E]] groups 2 : tensor<4x16x32xf32>, tensor<16x2xf32>, tensor<16x2xi64>
// MOE: graph.attention {{.*}} causal
// MOE: graph.router_topk
// MOE: graph.moe_combine

// The same model exported for batch 4 (examples/moe/batch4): 32 tokens,
// as many as the hidden size, so an expert weight [4, 32, 64] has the
// shape of a value of the experts' chain [E, T, F]; it is told apart by
// what computes it.
// RUN: cleave-translate --import-onnx %examples/moe/batch4/model.onnx | cleave-opt --cleave-raise | FileCheck %s --check-prefix=B4 --implicit-check-not=graph.topk
// B4: graph.moe_dispatch %{{.*}} experts 4 capacity 8 groups 4 : tensor<32x32xf32>, tensor<32x2xi64>
// B4: graph.expert_matmul %{{.*}} : tensor<4x32x32xf32>, tensor<4x32x64xf32>
// B4: graph.moe_dispatch

// With capacity: ceil(1.0 * 2 * 4 / 4) = 2 slots per expert in each group
// of 4 tokens; moe=false keeps the dense form.
// RUN: cleave-translate --import-onnx %examples/moe/model.onnx | cleave-opt --cleave-raise='moe-capacity-factor=1.0 moe-group-size=4' | FileCheck %s --check-prefix=CAP
// CAP: graph.moe_dispatch %{{.*}} experts 4 capacity 2 groups 4 : tensor<16x32xf32>, tensor<16x2xi64>
// CAP: graph.expert_matmul %{{.*}} : tensor<4x8x32xf32>, tensor<4x32x64xf32>
// RUN: cleave-translate --import-onnx %examples/moe/model.onnx | cleave-opt --cleave-raise='moe=false' | FileCheck %s --check-prefix=DENSE --implicit-check-not=graph.moe_dispatch
// DENSE: graph.topk
// DENSE: graph.matmul %{{.*}} : tensor<1x16x32xf32>, tensor<4x32x64xf32>

// Options that do not fit the model are errors.
// RUN: cleave-translate --import-onnx %examples/moe/model.onnx | not cleave-opt --cleave-raise='moe-group-size=5' 2>&1 | FileCheck %s --check-prefix=BADGROUP
// BADGROUP: error: -cleave-raise: moe-group-size 5 does not divide the mixture's 16 tokens
// RUN: cleave-translate --import-onnx %examples/moe/model.onnx | not cleave-opt --cleave-raise='moe-capacity-factor=-1' 2>&1 | FileCheck %s --check-prefix=BADCAP
// BADCAP: error: -cleave-raise: moe-capacity-factor must be a finite number >= 0 (0: dropless), got -1
