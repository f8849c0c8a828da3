// Meshes, shardings and every collective round-trip (custom and generic form).
// RUN: cleave-opt %s | cleave-opt | FileCheck %s
// RUN: cleave-opt %s --mlir-print-op-generic | cleave-opt | FileCheck %s

// CHECK: dist.mesh @mesh ["dp" = 2, "tp" = 4]
dist.mesh @mesh ["dp" = 2, "tp" = 4]
// CHECK: dist.mesh @pipe ["pp" = 4]
dist.mesh @pipe ["pp" = 4]
// CHECK: dist.mesh @context ["dp" = 2, "cp" = 4] {zigzag_axes = ["cp"]}
dist.mesh @context ["dp" = 2, "cp" = 4] {zigzag_axes = ["cp"]}

// CHECK-LABEL: func.func @shardings
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
// CHECK-SAME: %{{.*}}: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"dp", "tp"}]>})
// CHECK-SAME: -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], partial sum {"tp"}>})
func.func @shardings(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}]>},
                     %y: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"dp", "tp"}]>})
    -> (tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], partial sum {"tp"}>}) {
  // CHECK: %[[S:.*]] = dist.shard %[[X]] to <@mesh, [{"dp"}, {"tp"}]> : tensor<8x16xf32>
  %0 = dist.shard %x to <@mesh, [{"dp"}, {"tp"}]> : tensor<8x16xf32>
  // CHECK: dist.shard %[[S]] to <@mesh, [{}, {}], partial max {"dp", "tp"}> : tensor<8x16xf32>
  %1 = dist.shard %0 to <@mesh, [{}, {}], partial max {"dp", "tp"}> : tensor<8x16xf32>
  // CHECK: dist.shard %{{.*}} to <@mesh, [{}, {}]> : tensor<8x16xf32>
  %2 = dist.shard %1 to <@mesh, [{}, {}]> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Started collectives and their waits.
// CHECK-LABEL: func.func @async_collectives
func.func @async_collectives(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<32x16xf32>, tensor<2x16xf32>, tensor<8x16xf32>) {
  // CHECK: %[[R:.*]] = dist.all_reduce async %{{.*}} on @mesh ["tp"] sum : tensor<8x16xf32>
  %0 = dist.all_reduce async %x on @mesh ["tp"] sum : tensor<8x16xf32>
  // CHECK: dist.all_gather async %{{.*}} on @mesh ["tp"] dim 0 : tensor<8x16xf32> -> tensor<32x16xf32>
  %1 = dist.all_gather async %x on @mesh ["tp"] dim 0 : tensor<8x16xf32> -> tensor<32x16xf32>
  // CHECK: dist.reduce_scatter async %{{.*}} on @mesh ["tp"] sum dim 0 : tensor<8x16xf32> -> tensor<2x16xf32>
  %2 = dist.reduce_scatter async %x on @mesh ["tp"] sum dim 0 : tensor<8x16xf32> -> tensor<2x16xf32>
  // CHECK: dist.all_to_all async %{{.*}} on @mesh ["tp"] split 0 concat 0 : tensor<8x16xf32> -> tensor<8x16xf32>
  %3 = dist.all_to_all async %x on @mesh ["tp"] split 0 concat 0 : tensor<8x16xf32> -> tensor<8x16xf32>
  // CHECK: %[[P:.*]] = dist.collective_permute async %{{.*}} on @mesh ["tp"] pairs {{\[\[}}0, 1], [1, 2], [2, 3], [3, 0]] : tensor<8x16xf32>
  %p = dist.collective_permute async %x on @mesh ["tp"] pairs [[0, 1], [1, 2], [2, 3], [3, 0]] : tensor<8x16xf32>
  // CHECK: dist.wait %[[R]] : tensor<8x16xf32>
  %4 = dist.wait %0 : tensor<8x16xf32>
  %5 = dist.wait %1 : tensor<32x16xf32>
  %6 = dist.wait %2 : tensor<2x16xf32>
  %7 = dist.wait %3 : tensor<8x16xf32>
  // CHECK: dist.wait %[[P]] : tensor<8x16xf32>
  %8 = dist.wait %p : tensor<8x16xf32>
  %9 = graph.add %7, %8 : tensor<8x16xf32>, tensor<8x16xf32>
  return %4, %5, %6, %9 : tensor<8x16xf32>, tensor<32x16xf32>, tensor<2x16xf32>, tensor<8x16xf32>
}

// CHECK-LABEL: func.func @bucket
func.func @bucket(%x: tensor<8x16xf32>, %y: tensor<4xf32>) -> (tensor<8x16xf32>, tensor<4xf32>) {
  // CHECK: dist.all_reduce_bucket %{{.*}}, %{{.*}} on @mesh ["dp"] mean : tensor<8x16xf32>, tensor<4xf32> -> tensor<8x16xf32>, tensor<4xf32>
  %0:2 = dist.all_reduce_bucket %x, %y on @mesh ["dp"] mean : tensor<8x16xf32>, tensor<4xf32> -> tensor<8x16xf32>, tensor<4xf32>
  return %0#0, %0#1 : tensor<8x16xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<8x16xf32>) {
  // CHECK: dist.all_reduce %{{.*}} on @mesh ["tp"] sum : tensor<8x16xf32>
  %0 = dist.all_reduce %x on @mesh ["tp"] sum : tensor<8x16xf32>
  // CHECK: dist.all_reduce %{{.*}} on @mesh ["dp", "tp"] max : tensor<8x16xf32>
  %1 = dist.all_reduce %x on @mesh ["dp", "tp"] max : tensor<8x16xf32>
  // CHECK: dist.all_gather %{{.*}} on @mesh ["tp"] dim 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  %2 = dist.all_gather %x on @mesh ["tp"] dim 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  // Two axes: a group of 8.
  // CHECK: dist.all_gather %{{.*}} on @mesh ["dp", "tp"] dim 0 : tensor<8x16xf32> -> tensor<64x16xf32>
  %3 = dist.all_gather %x on @mesh ["dp", "tp"] dim 0 : tensor<8x16xf32> -> tensor<64x16xf32>
  // CHECK: dist.reduce_scatter %{{.*}} on @mesh ["tp"] sum dim 0 : tensor<8x16xf32> -> tensor<2x16xf32>
  %4 = dist.reduce_scatter %x on @mesh ["tp"] sum dim 0 : tensor<8x16xf32> -> tensor<2x16xf32>
  // CHECK: dist.reduce_scatter %{{.*}} on @mesh ["dp"] mean dim 1 : tensor<8x16xf32> -> tensor<8x8xf32>
  %5 = dist.reduce_scatter %x on @mesh ["dp"] mean dim 1 : tensor<8x16xf32> -> tensor<8x8xf32>
  // CHECK: dist.all_to_all %{{.*}} on @mesh ["tp"] split 0 concat 1 : tensor<8x16xf32> -> tensor<2x64xf32>
  %6 = dist.all_to_all %x on @mesh ["tp"] split 0 concat 1 : tensor<8x16xf32> -> tensor<2x64xf32>
  // CHECK: dist.all_to_all %{{.*}} on @mesh ["tp"] split 1 concat 1 : tensor<8x16xf32> -> tensor<8x16xf32>
  %7 = dist.all_to_all %x on @mesh ["tp"] split 1 concat 1 : tensor<8x16xf32> -> tensor<8x16xf32>
  // CHECK: dist.collective_permute %{{.*}} on @mesh ["tp"] pairs {{\[\[}}0, 1], [1, 2], [2, 3], [3, 0]] : tensor<8x16xf32>
  %8 = dist.collective_permute %x on @mesh ["tp"] pairs [[0, 1], [1, 2], [2, 3], [3, 0]] : tensor<8x16xf32>
  // CHECK: dist.broadcast %{{.*}} on @mesh ["dp"] root 1 : tensor<8x16xf32>
  %9 = dist.broadcast %x on @mesh ["dp"] root 1 : tensor<8x16xf32>
  return
}

// CHECK-LABEL: func.func @stage0
func.func @stage0(%act: tensor<4x16xf32>) {
  // CHECK: dist.send %{{.*}} on @pipe ["pp"] to 1 : tensor<4x16xf32>
  dist.send %act on @pipe ["pp"] to 1 : tensor<4x16xf32>
  // CHECK: dist.send %{{.*}} on @pipe ["pp"] to 1 tag 7 : tensor<4x16xf32>
  dist.send %act on @pipe ["pp"] to 1 tag 7 : tensor<4x16xf32>
  return
}

// CHECK-LABEL: func.func @stage1
func.func @stage1() -> tensor<4x16xf32> {
  // CHECK: %[[R:.*]] = dist.recv on @pipe ["pp"] from 0 : tensor<4x16xf32>
  %0 = dist.recv on @pipe ["pp"] from 0 : tensor<4x16xf32>
  // CHECK: dist.recv on @pipe ["pp"] from 0 tag 7 : tensor<4x16xf32>
  %1 = dist.recv on @pipe ["pp"] from 0 tag 7 : tensor<4x16xf32>
  // CHECK: return %[[R]]
  return %0 : tensor<4x16xf32>
}

// A grouped send and receive: the activation out, a gradient of another
// shape in.
// CHECK-LABEL: func.func @stage_send_recv
func.func @stage_send_recv(%act: tensor<4x16xf32>) -> tensor<2x16xf32> {
  // CHECK: dist.send_recv %{{.*}} on @pipe ["pp"] to 1 from 1 : tensor<4x16xf32> -> tensor<2x16xf32>
  %g = dist.send_recv %act on @pipe ["pp"] to 1 from 1 : tensor<4x16xf32> -> tensor<2x16xf32>
  return %g : tensor<2x16xf32>
}

// The marks of a stage's schedule steps.
// CHECK-LABEL: func.func @pipeline_steps
func.func @pipeline_steps() {
  // CHECK: dist.pipeline_step "forward"
  // CHECK-NEXT: dist.pipeline_step "backward" microbatch 3 chunk 1
  // CHECK-NEXT: dist.pipeline_step "optimizer"
  dist.pipeline_step "forward" microbatch 0 chunk 0
  dist.pipeline_step "backward" microbatch 3 chunk 1
  dist.pipeline_step "optimizer"
  return
}

// Open dimensions, sub-axes, priority and origin.
// CHECK-LABEL: func.func @sharding_details
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, [{"dp", ?}, {?}]>}
// CHECK-SAME: {dist.sharding = #dist.sharding<@mesh, [{"tp":(1)2}, {"tp":(2)2}], priority strategy, origin "-dist-tensor-parallel">}
func.func @sharding_details(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp", ?}, {?}]>},
                            %y: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp":(1)2}, {"tp":(2)2}], priority strategy, origin "-dist-tensor-parallel">}) {
  return
}

// Shardings of op results: one for a single result, a list otherwise.
// CHECK-LABEL: func.func @result_shardings
func.func @result_shardings(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: graph.neg %{{.*}} {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], priority propagated, origin "%x">}
  %0 = graph.neg %x {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], priority propagated, origin "%x">} : tensor<8x16xf32>
  // CHECK: graph.split {{.*}} {dist.sharding = [#dist.sharding<@mesh, [{"dp"}, {}]>, #dist.sharding<@mesh, [{}, {"tp"}]>]}
  %1:2 = graph.split %0 dim 1 sizes [8, 8] {dist.sharding = [#dist.sharding<@mesh, [{"dp"}, {}]>, #dist.sharding<@mesh, [{}, {"tp"}]>]} : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// The device's coordinate, its block of a replicated value, and a region
// written per device.
// CHECK-LABEL: func.func @rank_aware
func.func @rank_aware(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: %[[I:.*]] = dist.axis_index on @mesh ["tp"] : tensor<i64>
  %i = dist.axis_index on @mesh ["tp"] : tensor<i64>
  // CHECK: dist.local_slice %{{.*}}[%[[I]]] dim 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  %0 = dist.local_slice %x[%i] dim 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  // CHECK: dist.manual_computation(%{{.*}}) on @mesh ["tp"] in [#dist.sharding<@mesh, [{"dp"}, {"tp"}]>] out [#dist.sharding<@mesh, [{"dp"}, {"tp"}]>] : (tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: ^bb0(%[[L:.*]]: tensor<8x4xf32>):
  // CHECK:   %[[S:.*]] = dist.all_reduce %[[L]] on @mesh ["tp"] sum : tensor<8x4xf32>
  // CHECK:   dist.yield %[[S]] : tensor<8x4xf32>
  %1 = dist.manual_computation(%x) on @mesh ["tp"] in [#dist.sharding<@mesh, [{"dp"}, {"tp"}]>] out [#dist.sharding<@mesh, [{"dp"}, {"tp"}]>] : (tensor<8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%l: tensor<8x4xf32>):
    %s = dist.all_reduce %l on @mesh ["tp"] sum : tensor<8x4xf32>
    dist.yield %s : tensor<8x4xf32>
  }
  return %1 : tensor<8x16xf32>
}
