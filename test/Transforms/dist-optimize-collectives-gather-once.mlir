// RUN: cleave-opt %s -dist-optimize-collectives=gather-once=true | FileCheck %s
// RUN: cleave-opt %s -dist-optimize-collectives | FileCheck %s --check-prefix=EACH

// ZeRO-3 over two microbatches: layer 0 gathers @w0's block for each
// microbatch's forward and backward. With gather-once the first gather
// serves all four readers (its read and gather then move ahead of the
// layer before, as prefetched); the gather after the update stays, and so
// does the gather by another layer (a tied weight read on another stage).
// CHECK-LABEL: func.func @step
// CHECK: %[[G:.*]] = dist.all_gather
// CHECK-NOT: dist.all_gather
// CHECK: graph.matmul %arg0, %[[G]]
// CHECK: graph.matmul %arg1, %[[G]]
// CHECK: graph.matmul %{{.*}}, %[[G]] {{.*}}graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>
// CHECK: graph.matmul %{{.*}}, %[[G]] {{.*}}graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>
// CHECK: %[[H:.*]] = dist.all_gather
// CHECK-NEXT: graph.matmul %{{.*}}, %[[H]] {graph.layer = 1 : i64
// CHECK: graph.assign @w0
// CHECK: %[[AFTER:.*]] = dist.all_gather
// CHECK: return %[[AFTER]]
// EACH-LABEL: func.func @step
// EACH-COUNT-6: dist.all_gather
// EACH-NOT: dist.all_gather
dist.mesh @mesh ["dp" = 2]
graph.param @w0 : tensor<8x8xf32> sharding <@mesh, [{"dp"}, {}]>
func.func @step(%x0: tensor<4x8xf32>, %x1: tensor<4x8xf32>, %u: tensor<4x8xf32>) -> tensor<8x8xf32> attributes {dist.partitioned} {
  %r0 = graph.read_param @w0 {graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4x8xf32>
  %g0 = dist.all_gather %r0 on @mesh ["dp"] dim 0 {graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4x8xf32> -> tensor<8x8xf32>
  %h0 = graph.matmul %x0, %g0 {graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4x8xf32>, tensor<8x8xf32>
  %r1 = graph.read_param @w0 {graph.layer = 0 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase forward>} : tensor<4x8xf32>
  %g1 = dist.all_gather %r1 on @mesh ["dp"] dim 0 {graph.layer = 0 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase forward>} : tensor<4x8xf32> -> tensor<8x8xf32>
  %h1 = graph.matmul %x1, %g1 {graph.layer = 0 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase forward>} : tensor<4x8xf32>, tensor<8x8xf32>
  %r2 = graph.read_param @w0 {graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32>
  %g2 = dist.all_gather %r2 on @mesh ["dp"] dim 0 {graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32> -> tensor<8x8xf32>
  %d0 = graph.matmul %h0, %g2 {graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32>, tensor<8x8xf32>
  %r3 = graph.read_param @w0 {graph.layer = 0 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32>
  %g3 = dist.all_gather %r3 on @mesh ["dp"] dim 0 {graph.layer = 0 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32> -> tensor<8x8xf32>
  %d1 = graph.matmul %h1, %g3 {graph.layer = 0 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32>, tensor<8x8xf32>
  %r4 = graph.read_param @w0 {graph.layer = 1 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32>
  %g4 = dist.all_gather %r4 on @mesh ["dp"] dim 0 {graph.layer = 1 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32> -> tensor<8x8xf32>
  %e1 = graph.matmul %d1, %g4 {graph.layer = 1 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>} : tensor<4x8xf32>, tensor<8x8xf32>
  %n = graph.add %d0, %e1 {graph.layer = 0 : i64, graph.phase = #graph<phase optimizer>} : tensor<4x8xf32>, tensor<4x8xf32>
  graph.assign @w0, %n {graph.layer = 0 : i64, graph.phase = #graph<phase optimizer>} : tensor<4x8xf32>
  %r5 = graph.read_param @w0 {graph.layer = 0 : i64, graph.phase = #graph<phase optimizer>} : tensor<4x8xf32>
  %g5 = dist.all_gather %r5 on @mesh ["dp"] dim 0 {graph.layer = 0 : i64, graph.phase = #graph<phase optimizer>} : tensor<4x8xf32> -> tensor<8x8xf32>
  return %g5 : tensor<8x8xf32>
}
