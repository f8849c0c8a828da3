// A weight tied through an Identity node, the way PyTorch exports a shared
// nn.Parameter (`head.weight = Identity(emb)` placed before the first use):
// still one graph.param read once, feeding both the gather and the head.
//
// Importer bug: NodeContext::forward copies the not-yet-materialized
// ImportedValue, so `emb` and `head.weight` each get their own

// RUN: cleave-translate --import-onnx %S/Inputs/tied_identity.onnx \
// RUN:   | FileCheck %s --implicit-check-not=@emb
// CHECK:       graph.param @emb : tensor<5x4xf32>
// CHECK-LABEL: func.func @forward(
// CHECK-SAME:      %[[IDS:.*]]: tensor<2x3xi64> {onnx.name = "ids"})
// CHECK-NEXT:    %[[W:.*]] = graph.read_param @emb : tensor<5x4xf32>
// CHECK-NEXT:    %[[E:.*]] = graph.gather %[[W]][%[[IDS]]] dim 0 : tensor<5x4xf32>, tensor<2x3xi64>
// CHECK-NEXT:    %[[WT:.*]] = graph.transpose %[[W]] perm [1, 0] : tensor<5x4xf32>
// CHECK-NEXT:    %[[L:.*]] = graph.matmul %[[E]], %[[WT]] : tensor<2x3x4xf32>, tensor<4x5xf32>
// CHECK-NEXT:    return %[[L]] : tensor<2x3x5xf32>
