// RUN: cleave-opt %s -split-input-file -dist-sequence-parallel | FileCheck %s

// After tensor parallelism: the row-parallel product is constrained to
// split its tokens (dimension 1 of [B, S, H]) on "tp", at priority
// propagated, so that the column-parallel weights win over it at the next
// projection; every use of the product reads the constraint. The head,
// which tensor parallelism left whole, reads all the tokens: its input is
// constrained whole on the tokens, its other dimensions open (a
// data-parallel batch stays split). So is the gradient an embedding
// table's gradient is scattered from.
// CHECK-LABEL: func.func @layer
// CHECK: %[[Y:.*]] = graph.matmul %{{.*}}, %[[W2:.*]] : tensor<2x8x16xf32>, tensor<16x8xf32>
// CHECK-NEXT: %[[S:.*]] = dist.shard %[[Y]] to <@mesh, [{?}, {"tp"}, {?}], priority propagated, origin "-dist-sequence-parallel"> : tensor<2x8x8xf32>
// CHECK-NEXT: %[[R:.*]] = graph.add %arg0, %[[S]]
// CHECK: %[[H:.*]] = dist.shard %[[R]] to <@mesh, [{?}, {}, {?}], priority propagated, origin "-dist-sequence-parallel"> : tensor<2x8x8xf32>
// CHECK-NEXT: graph.matmul %[[H]], %{{.*}} : tensor<2x8x8xf32>, tensor<8x4xf32>
// CHECK: %[[G:.*]] = dist.shard %arg1 to <@mesh, [{?}, {}, {?}], priority propagated, origin "-dist-sequence-parallel"> {graph.phase = #graph<phase backward>} : tensor<2x8x8xf32>
// CHECK-NEXT: graph.gather_grad %[[G]][%arg2] dim 0
dist.mesh @mesh ["tp" = 2]
graph.param @w1 : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy>
graph.param @w2 : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy>
graph.param @head : tensor<8x4xf32>
func.func @layer(%x: tensor<2x8x8xf32>, %dx: tensor<2x8x8xf32>, %ids: tensor<2x8xi64>) -> (tensor<2x8x4xf32>, tensor<10x8xf32>) {
  %w1 = graph.read_param @w1 : tensor<8x16xf32>
  %h = graph.matmul %x, %w1 : tensor<2x8x8xf32>, tensor<8x16xf32>
  %g = graph.gelu %h : tensor<2x8x16xf32>
  %w2 = graph.read_param @w2 : tensor<16x8xf32>
  %y = graph.matmul %g, %w2 : tensor<2x8x16xf32>, tensor<16x8xf32>
  %r = graph.add %x, %y : tensor<2x8x8xf32>, tensor<2x8x8xf32>
  %wh = graph.read_param @head : tensor<8x4xf32>
  %logits = graph.matmul %r, %wh : tensor<2x8x8xf32>, tensor<8x4xf32>
  %dt = graph.gather_grad %dx[%ids] dim 0 {graph.phase = #graph<phase backward>} : tensor<2x8x8xf32>, tensor<2x8xi64> -> tensor<10x8xf32>
  return %logits, %dt : tensor<2x8x4xf32>, tensor<10x8xf32>
}
