// -dist-expert-parallel splits the routed experts on the axis: dimension 0
// of the stacked expert weights and of the per-expert bias, and the batch
// of every input. Partitioned, the dispatched tokens [E, G*C, H] (split by
// token group, as the batch) reach the experts' devices by one all_to_all
// and come back by another; each device routes its own groups.
// RUN: cleave-opt %s -split-input-file -dist-expert-parallel | FileCheck %s
// RUN: cleave-opt %s -split-input-file -dist-expert-parallel -dist-propagate -dist-partition -canonicalize -cse | FileCheck %s --check-prefix=PART

// CHECK: graph.param @router : tensor<16x4xf32>{{$}}
// CHECK: graph.param @w1 : tensor<4x16x32xf32> sharding <@mesh, [{"ep"}, {}, {}], priority strategy, origin "-dist-expert-parallel">
// CHECK: graph.param @b1 : tensor<4x1x32xf32> sharding <@mesh, [{"ep"}, {}, {}], priority strategy, origin "-dist-expert-parallel">
// CHECK: graph.param @w2 : tensor<4x32x16xf32> sharding <@mesh, [{"ep"}, {}, {}], priority strategy, origin "-dist-expert-parallel">
// CHECK: func.func @moe(%arg0: tensor<16x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"ep"}, {}], priority strategy, origin "-dist-expert-parallel">})

// PART-LABEL: func.func @moe
// PART-SAME: %arg0: tensor<8x16xf32>
// PART: graph.router_topk %{{.*}} k 2 normalize : tensor<8x4xf32>
// PART: %[[D:.*]] = graph.moe_dispatch %arg0, %{{.*}} experts 4 capacity 8 : tensor<8x16xf32>, tensor<8x2xi64>
// PART: %[[W1:.*]] = graph.read_param @w1 : tensor<2x16x32xf32>
// PART: %[[A:.*]] = dist.all_to_all %[[D]] on @mesh ["ep"] split 0 concat 1 : tensor<4x8x16xf32> -> tensor<2x16x16xf32>
// PART: graph.expert_matmul %[[A]], %[[W1]] : tensor<2x16x16xf32>, tensor<2x16x32xf32>
// PART: graph.add %{{.*}}, %{{.*}} : tensor<2x16x32xf32>, tensor<2x1x32xf32>
// PART: %[[Y:.*]] = graph.expert_matmul %{{.*}}, %{{.*}} : tensor<2x16x32xf32>, tensor<2x32x16xf32>
// PART: %[[B:.*]] = dist.all_to_all %[[Y]] on @mesh ["ep"] split 1 concat 0 : tensor<2x16x16xf32> -> tensor<4x8x16xf32>
// PART: graph.moe_combine %[[B]], %{{.*}}, %{{.*}} : tensor<4x8x16xf32>, tensor<8x2xf32>, tensor<8x2xi64>
// PART-NOT: dist.all_to_all
dist.mesh @mesh ["ep" = 2]
graph.param @router : tensor<16x4xf32>
graph.param @w1 : tensor<4x16x32xf32>
graph.param @b1 : tensor<4x1x32xf32>
graph.param @w2 : tensor<4x32x16xf32>
func.func @moe(%x: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %r = graph.read_param @router : tensor<16x4xf32>
  %l = graph.matmul %x, %r : tensor<16x16xf32>, tensor<16x4xf32>
  %g, %e = graph.router_topk %l k 2 normalize : tensor<16x4xf32>
  %d = graph.moe_dispatch %x, %e experts 4 capacity 8 groups 2 : tensor<16x16xf32>, tensor<16x2xi64>
  %w1 = graph.read_param @w1 : tensor<4x16x32xf32>
  %h = graph.expert_matmul %d, %w1 : tensor<4x16x16xf32>, tensor<4x16x32xf32>
  %b1 = graph.read_param @b1 : tensor<4x1x32xf32>
  %hb = graph.add %h, %b1 : tensor<4x16x32xf32>, tensor<4x1x32xf32>
  %a = graph.gelu %hb : tensor<4x16x32xf32>
  %w2 = graph.read_param @w2 : tensor<4x32x16xf32>
  %y = graph.expert_matmul %a, %w2 : tensor<4x16x32xf32>, tensor<4x32x16xf32>
  %o = graph.moe_combine %y, %g, %e groups 2 : tensor<4x16x16xf32>, tensor<16x2xf32>, tensor<16x2xi64>
  return %o : tensor<16x16xf32>
}

// -----

// With dp before ep, the batch takes both axes, dp major; the experts only
// ep. The tokens of a dp group are exchanged within it.
// CHECK: graph.param @w : tensor<4x16x16xf32> sharding <@mesh, [{"ep"}, {}, {}]
// CHECK: func.func @dp_ep(%arg0: tensor<16x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp", "ep"}, {}], priority strategy
// PART-LABEL: func.func @dp_ep
// PART: graph.moe_dispatch %arg0, %{{.*}} experts 4 capacity 4 : tensor<4x16xf32>, tensor<4x1xi64>
// PART: dist.all_to_all %{{.*}} on @mesh ["ep"] split 0 concat 1 : tensor<4x4x16xf32> -> tensor<2x8x16xf32>
dist.mesh @mesh ["dp" = 2, "ep" = 2]
graph.param @router : tensor<16x4xf32>
graph.param @w : tensor<4x16x16xf32>
func.func @dp_ep(%x: tensor<16x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], priority strategy, origin "-dist-data-parallel">}) -> tensor<16x16xf32> {
  %r = graph.read_param @router : tensor<16x4xf32>
  %l = graph.matmul %x, %r : tensor<16x16xf32>, tensor<16x4xf32>
  %g, %e = graph.router_topk %l k 1 : tensor<16x4xf32>
  %d = graph.moe_dispatch %x, %e experts 4 capacity 4 groups 4 : tensor<16x16xf32>, tensor<16x1xi64>
  %w = graph.read_param @w : tensor<4x16x16xf32>
  %y = graph.expert_matmul %d, %w : tensor<4x16x16xf32>, tensor<4x16x16xf32>
  %o = graph.moe_combine %y, %g, %e groups 4 : tensor<4x16x16xf32>, tensor<16x1xf32>, tensor<16x1xi64>
  return %o : tensor<16x16xf32>
}
