// RUN: cleave-opt %s -dist-propagate -dist-partition -dist-explain -o /dev/null | FileCheck %s

// One line per collective of the partitioned program, in step order, with
// its place, its bytes per rank, and why it is there; the summary line
// totals the bytes per kind and axis. A row-parallel product of [8, 4] f32
// (128 B) all-reduced over 2 devices sends 2 (n-1)/n * 128 = 128 B, the
// gather of the [8, 8] result 1/2 * 256 = 128 B. The all-reduce is placed
// (and its place named) at its producer, the row-parallel matmul; its
// cause names the reader.
// CHECK: dist-explain: @f on mesh (2 devices): 2 collectives; per rank and step: all_gather over ["tp"] 128 B, all_reduce over ["tp"] 128 B
// CHECK-NEXT: 1  forward layer 3 {{ *}}all_reduce ["tp"] tensor<8x4xf32>  128 B/rank
// CHECK-NEXT: all_reduce [{}, {}] partial sum {"tp"} -> [{}, {}] for operand #0 of graph.relu; the value's layout from -dist-tensor-parallel
// CHECK-NEXT: at loc("relu"
// CHECK-NEXT: 2  - {{ *}}all_gather ["tp"] tensor<8x4xf32>  128 B/rank
// CHECK-NEXT: all_gather [{}, {"tp"}] -> [{}, {}] for result #0 of @f; the value's layout from -dist-tensor-parallel
dist.mesh @mesh ["tp" = 2]
graph.param @w1 : tensor<16x8xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">
graph.param @w2 : tensor<8x4xf32> sharding <@mesh, [{"tp"}, {}], priority strategy, origin "-dist-tensor-parallel">
graph.param @w3 : tensor<4x8xf32> sharding <@mesh, [{}, {"tp"}], priority strategy, origin "-dist-tensor-parallel">
func.func @f(%x: tensor<8x16xf32>) -> tensor<8x8xf32> {
  %w1 = graph.read_param @w1 : tensor<16x8xf32>
  %w2 = graph.read_param @w2 : tensor<8x4xf32>
  %w3 = graph.read_param @w3 : tensor<4x8xf32>
  %h = graph.matmul %x, %w1 : tensor<8x16xf32>, tensor<16x8xf32>
  %y = graph.matmul %h, %w2 {graph.phase = #graph<phase forward>, graph.layer = 3 : i64} : tensor<8x8xf32>, tensor<8x4xf32>
  %r = graph.relu %y : tensor<8x4xf32> loc("relu")
  %z = graph.matmul %r, %w3 : tensor<8x4xf32>, tensor<4x8xf32>
  return %z : tensor<8x8xf32>
}
