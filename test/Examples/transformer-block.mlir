// RUN: cleave-opt %examples/transformer/block.mlir | FileCheck %s
// RUN: cleave-opt %examples/transformer/block.mlir | cleave-opt | FileCheck %s
// RUN: cleave-opt %examples/transformer/block.mlir --cleave-print-sharding-rules \
// RUN:   -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RULES

// The pre-norm transformer block example parses, verifies and round-trips;
// its Megatron constraints survive printing; its ops report their rules.

// CHECK: dist.mesh @mesh ["dp" = 2, "tp" = 4]
// CHECK: graph.param @attn.qkv.weight : tensor<64x192xf32> = dense<1.562500e-02> : tensor<64x192xf32>
// CHECK: graph.param @mlp.fc2.bias : tensor<64xf32> = dense<0.000000e+00> : tensor<64xf32>

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:.*]]: tensor<2x8x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}, {}]>}) -> tensor<2x8x64xf32>

// Attention half.
// CHECK: %[[LN1W:.*]] = graph.read_param @ln1.weight : tensor<64xf32>
// CHECK: %[[LN1B:.*]] = graph.read_param @ln1.bias : tensor<64xf32>
// CHECK: %[[H:.*]] = graph.layer_norm %[[X]], %[[LN1W]], %[[LN1B]] dim 2 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
// CHECK: %[[WQKVP:.*]] = graph.read_param @attn.qkv.weight : tensor<64x192xf32>
// CHECK: %[[WQKV:.*]] = dist.shard %[[WQKVP]] to <@mesh, [{}, {"tp"}]> : tensor<64x192xf32>
// CHECK: %[[BQKVP:.*]] = graph.read_param @attn.qkv.bias : tensor<192xf32>
// CHECK: %[[BQKV:.*]] = dist.shard %[[BQKVP]] to <@mesh, [{"tp"}]> : tensor<192xf32>
// CHECK: %[[QKV0:.*]] = graph.matmul %[[H]], %[[WQKV]] : tensor<2x8x64xf32>, tensor<64x192xf32>
// CHECK: %[[QKV:.*]] = graph.add %[[QKV0]], %[[BQKV]] : tensor<2x8x192xf32>, tensor<192xf32>
// CHECK: %[[QKVH:.*]] = graph.reshape %[[QKV]] : tensor<2x8x192xf32> -> tensor<2x8x4x48xf32>
// CHECK: %[[SPLIT:.*]]:3 = graph.split %[[QKVH]] dim 3 sizes [16, 16, 16] : tensor<2x8x4x48xf32>
// CHECK: %[[Q:.*]] = graph.transpose %[[SPLIT]]#0 perm [0, 2, 1, 3] : tensor<2x8x4x16xf32>
// CHECK: %[[K:.*]] = graph.transpose %[[SPLIT]]#1 perm [0, 2, 1, 3] : tensor<2x8x4x16xf32>
// CHECK: %[[V:.*]] = graph.transpose %[[SPLIT]]#2 perm [0, 2, 1, 3] : tensor<2x8x4x16xf32>
// CHECK: %[[O0:.*]] = graph.attention %[[Q]], %[[K]], %[[V]] causal : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
// CHECK: %[[O1:.*]] = graph.transpose %[[O0]] perm [0, 2, 1, 3] : tensor<2x4x8x16xf32>
// CHECK: %[[O:.*]] = graph.reshape %[[O1]] : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
// CHECK: %[[WOP:.*]] = graph.read_param @attn.out.weight : tensor<64x64xf32>
// CHECK: %[[WO:.*]] = dist.shard %[[WOP]] to <@mesh, [{"tp"}, {}]> : tensor<64x64xf32>
// CHECK: %[[BO:.*]] = graph.read_param @attn.out.bias : tensor<64xf32>
// CHECK: %[[A0:.*]] = graph.matmul %[[O]], %[[WO]] : tensor<2x8x64xf32>, tensor<64x64xf32>
// CHECK: %[[A:.*]] = graph.add %[[A0]], %[[BO]] : tensor<2x8x64xf32>, tensor<64xf32>
// CHECK: %[[X1:.*]] = graph.add %[[X]], %[[A]] : tensor<2x8x64xf32>, tensor<2x8x64xf32>

// MLP half.
// CHECK: %[[LN2W:.*]] = graph.read_param @ln2.weight : tensor<64xf32>
// CHECK: %[[LN2B:.*]] = graph.read_param @ln2.bias : tensor<64xf32>
// CHECK: %[[M:.*]] = graph.layer_norm %[[X1]], %[[LN2W]], %[[LN2B]] dim 2 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
// CHECK: %[[W1P:.*]] = graph.read_param @mlp.fc1.weight : tensor<64x256xf32>
// CHECK: %[[W1:.*]] = dist.shard %[[W1P]] to <@mesh, [{}, {"tp"}]> : tensor<64x256xf32>
// CHECK: %[[B1P:.*]] = graph.read_param @mlp.fc1.bias : tensor<256xf32>
// CHECK: %[[B1:.*]] = dist.shard %[[B1P]] to <@mesh, [{"tp"}]> : tensor<256xf32>
// CHECK: %[[F0:.*]] = graph.matmul %[[M]], %[[W1]] : tensor<2x8x64xf32>, tensor<64x256xf32>
// CHECK: %[[F1:.*]] = graph.add %[[F0]], %[[B1]] : tensor<2x8x256xf32>, tensor<256xf32>
// CHECK: %[[F:.*]] = graph.gelu %[[F1]] approximate tanh : tensor<2x8x256xf32>
// CHECK: %[[W2P:.*]] = graph.read_param @mlp.fc2.weight : tensor<256x64xf32>
// CHECK: %[[W2:.*]] = dist.shard %[[W2P]] to <@mesh, [{"tp"}, {}]> : tensor<256x64xf32>
// CHECK: %[[B2:.*]] = graph.read_param @mlp.fc2.bias : tensor<64xf32>
// CHECK: %[[G0:.*]] = graph.matmul %[[F]], %[[W2]] : tensor<2x8x256xf32>, tensor<256x64xf32>
// CHECK: %[[G:.*]] = graph.add %[[G0]], %[[B2]] : tensor<2x8x64xf32>, tensor<64xf32>
// CHECK: %[[Y:.*]] = graph.add %[[X1]], %[[G]] : tensor<2x8x64xf32>, tensor<2x8x64xf32>
// CHECK: return %[[Y]] : tensor<2x8x64xf32>

// Layer norm needs the normalized dimension whole; the column-parallel
// matmul can split its output features d; the head reshape maps the 192
// features onto (heads x 48), heads major, so "tp" on 192 lands on the
// heads; attention shares batch and heads, splits queries only through its
// hook under the causal mask (each shard needs its offset), needs the key sequence whole
// (a hook may do better, e.g. ring attention) and the head dimension whole;
// the row-parallel matmul reduces over the 256 features split on "tp".
// RULES: block.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b, c], [c], [c]) -> ([a, b, c]) {a=2, b=8, c=64 need_replication}
// RULES: block.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b, c], [c, d]) -> ([a, b, d]) {a=2, b=8, c=64 reduction(sum), d=192}
// RULES: block.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b, (c d)]) -> ([a, b, c, d]) {a=2, b=8, c=4, d=48}
// RULES: block.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b, c, d]) -> ([a, b, c, e], [a, b, c, f], [a, b, c, g]) {a=2, b=8, c=4, d=48 need_replication, e=16 need_replication, f=16 need_replication, g=16 need_replication}
// RULES: block.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b, c, e], [a, b, d, e], [a, b, d, f]) -> ([a, b, c, f]) {a=2, b=4, c=8 hook, d=8 need_replication hook, e=16 need_replication, f=16}
// RULES: block.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b, c, d]) -> ([a, b, (c d)]) {a=2, b=8, c=4, d=16}
// RULES: block.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b, c]) -> ([a, b, c]) {a=2, b=8, c=256}
// RULES: block.mlir:{{[0-9]+}}:{{[0-9]+}}: remark: sharding rule ([a, b, c], [c, d]) -> ([a, b, d]) {a=2, b=8, c=256 reduction(sum), d=64}
// RULES-NOT: error
