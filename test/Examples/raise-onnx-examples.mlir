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

// The router's softmax over experts is not attention and must stay.
// RUN: cleave-translate --import-onnx %examples/moe/model.onnx | cleave-opt --cleave-raise -canonicalize | FileCheck %s --check-prefix=MOE --implicit-check-not=graph.tanh
// MOE-LABEL: func.func @forward
// MOE: graph.attention {{.*}} causal
// MOE: %[[P:.*]] = graph.softmax %{{.*}} dim 1 : tensor<16x4xf32>
// MOE: graph.topk %[[P]] k 2 dim 1
// MOE: graph.gelu {{.*}} approximate tanh : tensor<4x16x64xf32>
// MOE: graph.attention {{.*}} causal
// MOE: graph.softmax %{{.*}} dim 1 : tensor<16x4xf32>
// MOE: graph.gelu {{.*}} approximate tanh
