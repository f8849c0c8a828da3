// RUN: cleave-opt %examples/mlp/mlp.mlir | FileCheck %s
// RUN: cleave-opt %examples/mlp/mlp.mlir | cleave-opt | FileCheck %s
// RUN: cleave-opt %examples/mlp/mlp.mlir --cleave-print-sharding-rules \
// RUN:   -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RULES

// The two-layer MLP example parses, verifies and prints back to IR that
// parses again to the same thing; its ops report their sharding rules.

// CHECK: dist.mesh @mesh ["dp" = 2]
// CHECK: graph.param @fc1.weight : tensor<16x32xf32> = dense<6.250000e-02> : tensor<16x32xf32>
// CHECK: graph.param @fc1.bias : tensor<32xf32> = dense<1.250000e-01> : tensor<32xf32>
// CHECK: graph.param @fc2.weight : tensor<32x4xf32> = dense<-3.125000e-02> : tensor<32x4xf32>
// CHECK: graph.param @fc2.bias : tensor<4xf32> = dense<[0.000000e+00, 2.500000e-01, -2.500000e-01, 5.000000e-01]> : tensor<4xf32>

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:.*]]: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x4xf32>
// CHECK: %[[W1:.*]] = graph.read_param @fc1.weight : tensor<16x32xf32>
// CHECK: %[[B1:.*]] = graph.read_param @fc1.bias : tensor<32xf32>
// CHECK: %[[W2:.*]] = graph.read_param @fc2.weight : tensor<32x4xf32>
// CHECK: %[[B2:.*]] = graph.read_param @fc2.bias : tensor<4xf32>
// CHECK: %[[H0:.*]] = graph.matmul %[[X]], %[[W1]] : tensor<8x16xf32>, tensor<16x32xf32>
// CHECK: %[[H1:.*]] = graph.add %[[H0]], %[[B1]] : tensor<8x32xf32>, tensor<32xf32>
// CHECK: %[[H:.*]] = graph.relu %[[H1]] : tensor<8x32xf32>
// CHECK: %[[Y0:.*]] = graph.matmul %[[H]], %[[W2]] : tensor<8x32xf32>, tensor<32x4xf32>
// CHECK: %[[Y:.*]] = graph.add %[[Y0]], %[[B2]] : tensor<8x4xf32>, tensor<4xf32>
// CHECK: return %[[Y]] : tensor<8x4xf32>

// CHECK-LABEL: func.func @loss(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
// CHECK-SAME: %[[LABELS:[^:]*]]: tensor<8xi64> {dist.sharding = #dist.sharding<@mesh, [{"dp"}]>}) -> tensor<f32>
// CHECK: %[[W1:.*]] = graph.read_param @fc1.weight
// CHECK: %[[B1:.*]] = graph.read_param @fc1.bias
// CHECK: %[[W2:.*]] = graph.read_param @fc2.weight
// CHECK: %[[B2:.*]] = graph.read_param @fc2.bias
// CHECK: %[[H0:.*]] = graph.matmul %[[X]], %[[W1]]
// CHECK: %[[H1:.*]] = graph.add %[[H0]], %[[B1]]
// CHECK: %[[H:.*]] = graph.relu %[[H1]]
// CHECK: %[[Y0:.*]] = graph.matmul %[[H]], %[[W2]]
// CHECK: %[[LOGITS:.*]] = graph.add %[[Y0]], %[[B2]]
// CHECK: %[[L:.*]] = graph.cross_entropy %[[LOGITS]], %[[LABELS]] : tensor<8x4xf32>, tensor<8xi64>
// CHECK: return %[[L]] : tensor<f32>

// Matmul: the batch and output features pass through, the contracted
// features are a sum reduction. Cross-entropy: the batch is a mean
// reduction; the class dimension needs replication unless a hook handles it.
// RULES: mlp.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b], [b, c]) -> ([a, c]) {a=8, b=16 reduction(sum), c=32}
// RULES: mlp.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b], [b]) -> ([a, b]) {a=8, b=32}
// RULES: mlp.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b]) -> ([a, b]) {a=8, b=32}
// RULES: mlp.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b], [b, c]) -> ([a, c]) {a=8, b=32 reduction(sum), c=4}
// RULES: mlp.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b], [a]) -> ([]) {a=8 reduction(mean), b=4 need_replication hook}
// RULES-NOT: error
