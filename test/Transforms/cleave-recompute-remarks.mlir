// RUN: cleave-opt %s --cleave-recompute 2>&1 | FileCheck %s

// A layer with a pipeline transfer is not recomputed (its peer would not
// send again), and the pass says so; the layer's exp is not cloned.
// CHECK: remark: loc("/blocks.0/send"): 1 of 1 layers (per microbatch) are not recomputed: they hold ops that cannot run twice, such as this 'dist.send_recv'
// CHECK-COUNT-1: graph.exp
// CHECK-NOT: graph.exp
dist.mesh @mesh ["pp" = 2]
func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.exp %x {graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32> loc("/blocks.0/exp")
  %1 = dist.send_recv %0 on @mesh ["pp"] to 0 from 0 {graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4xf32> -> tensor<4xf32> loc("/blocks.0/send")
  %2 = graph.mul %1, %0 {graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>} : tensor<4xf32>, tensor<4xf32>
  return %2 : tensor<4xf32>
}
