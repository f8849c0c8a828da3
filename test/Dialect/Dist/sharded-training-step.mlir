// A training step of the mlp example as the partitioner will write it for
// two data-parallel devices, by hand: each device holds half the batch,
// the loss and most gradients are averaged with all_reduce, fc1.weight's
// gradient is reduce-scattered (ZeRO-2) and its AdamW moments are sharded
// (ZeRO-1): each device updates its rows and all_gathers the new weight.
// It parses and verifies, keeps every collective through -cse and
// -canonicalize, and gets a memory plan with the moments at their local
// size.
// RUN: cleave-opt %s | cleave-opt | FileCheck %s --enable-var-scope
// RUN: cleave-opt %s -cse -canonicalize | FileCheck %s --check-prefix=CSE
// RUN: cleave-opt %s --cleave-plan-memory="entry=train_step report=true" -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=PLAN
// RUN: cleave-opt %s --cleave-print-sharding-rules -o /dev/null 2>&1 | FileCheck %s --check-prefix=RULES
// RUN: cleave-opt %s --cleave-plan-memory=entry=train_step --cleave-lower-to-runtime=entry=train_step | FileCheck %s --check-prefix=LOWER

// CHECK: graph.param @fc1.weight.m frozen : tensor<16x32xf32> sharding <@mesh, [{"dp"}, {}]>
// CHECK-LABEL: func.func @train_step
// CHECK: %[[LOSS:.*]] = dist.all_reduce %{{.*}} on @mesh ["dp"] mean : tensor<f32>
// CHECK: dist.reduce_scatter %{{.*}} on @mesh ["dp"] mean dim 0 : tensor<16x32xf32> -> tensor<8x32xf32>
// CHECK: %[[I:.*]] = dist.axis_index on @mesh ["dp"] : tensor<i64>
// CHECK: dist.local_slice %{{.*}}[%[[I]]] dim 0 : tensor<16x32xf32> -> tensor<8x32xf32>
// CHECK: graph.read_param @fc1.weight.m : tensor<8x32xf32>
// CHECK: graph.adamw
// CHECK: dist.all_gather %{{.*}} on @mesh ["dp"] dim 0 : tensor<8x32xf32> -> tensor<16x32xf32>
// CHECK: return %[[LOSS]]

// The loss's all_reduce, three gradient all_reduces and a second, unused
// one of fc1.bias's gradient, one reduce_scatter, one all_gather: nothing
// merged, nothing dropped.
// CSE-COUNT-5: dist.all_reduce
// CSE-NOT: dist.all_reduce
// CSE-COUNT-1: dist.reduce_scatter
// CSE-COUNT-1: dist.all_gather

// The sharded moments take their local 8x32 floats (1024 bytes) each: the
// parameters are 16x32 + 32 + 32x4 + 4 floats, the step and the two
// moments, each rounded up to 64 bytes: 2048 + 128 + 512 + 64 + 64 +
// 2 * 1024 (the global moments would make it 6912).
// PLAN: remark: memory plan: arena {{[0-9]+}} bytes (parameters 4864,

// The graph ops of the step have rules; the dist ops need none.
// RULES-NOT: error
// RULES: sharding rule

// It lowers to calls of the communication engine, each on the
// communicator the program context holds for its group (here one group,
// "dp", index 0), and the metadata names the mesh, the group and the
// engine; the sharded moments are described as blocks of their global
// value.
// LOWER-DAG: llvm.mlir.global external constant @cleave_comm_engine()
// LOWER-DAG: llvm.mlir.global private constant @[[GROUPS:cleave.groups.[0-9]+]](dense<[1, 0, 0, 0, 0, 0, 0, 0, 0]> : tensor<9xi64>)
// LOWER-DAG: llvm.mlir.global private constant @{{cleave.sharding.[0-9]+}}(dense<[16, 32, 0, 0, 0, 0, 0, 0, 1, 0,
// LOWER: llvm.func @cleave_program_run(%{{.*}}: !llvm.ptr, %[[CTX:[^:]*]]: !llvm.ptr)
// LOWER: %[[COMMS:.*]] = llvm.load %[[CTX]] : !llvm.ptr -> !llvm.ptr
// LOWER: %[[AT:.*]] = llvm.getelementptr %[[COMMS]][0] : (!llvm.ptr) -> !llvm.ptr, i32
// LOWER: %[[COMM:.*]] = llvm.load %[[AT]] : !llvm.ptr -> i32
// LOWER: llvm.call @cleave_comm_all_reduce(%[[COMM]],
// LOWER: llvm.call @cleave_comm_reduce_scatter(
// LOWER: llvm.call @cleave_rt_set_index(
// LOWER: llvm.call @cleave_rt_local_slice(
// LOWER: llvm.call @cleave_rt_adamw(
// LOWER: llvm.call @cleave_comm_all_gather(
// LOWER: llvm.mlir.addressof @[[GROUPS]]
// LOWER: llvm.mlir.addressof @cleave_comm_engine

dist.mesh @mesh ["dp" = 2]

graph.param @fc1.weight : tensor<16x32xf32> = dense<0.0625> : tensor<16x32xf32>
graph.param @fc1.bias : tensor<32xf32> = dense<0.125> : tensor<32xf32>
graph.param @fc2.weight : tensor<32x4xf32> = dense<-0.03125> : tensor<32x4xf32>
graph.param @fc2.bias : tensor<4xf32> = dense<[0.0, 0.25, -0.25, 0.5]> : tensor<4xf32>
graph.param @optimizer.step frozen : tensor<i64> = dense<0> : tensor<i64>
graph.param @fc1.weight.m frozen : tensor<16x32xf32> sharding <@mesh, [{"dp"}, {}]>
graph.param @fc1.weight.v frozen : tensor<16x32xf32> sharding <@mesh, [{"dp"}, {}]>

// This device's half of the batch: 4 of the 8 samples.
func.func @train_step(%x: tensor<4x16xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %w1 = graph.read_param @fc1.weight : tensor<16x32xf32>
  %b1 = graph.read_param @fc1.bias : tensor<32xf32>
  %w2 = graph.read_param @fc2.weight : tensor<32x4xf32>
  %b2 = graph.read_param @fc2.bias : tensor<4xf32>
  %h0 = graph.matmul %x, %w1 : tensor<4x16xf32>, tensor<16x32xf32>
  %h1 = graph.add %h0, %b1 : tensor<4x32xf32>, tensor<32xf32>
  %h = graph.relu %h1 : tensor<4x32xf32>
  %y0 = graph.matmul %h, %w2 : tensor<4x32xf32>, tensor<32x4xf32>
  %logits = graph.add %y0, %b2 : tensor<4x4xf32>, tensor<4xf32>
  %local_loss = graph.cross_entropy %logits, %labels : tensor<4x4xf32>, tensor<4xi64>
  // The global mean: both halves hold the same number of samples.
  %loss = dist.all_reduce %local_loss on @mesh ["dp"] mean : tensor<f32>

  // Backward of this half.
  %one = graph.constant dense<1.0> : tensor<f32>
  %dl = graph.cross_entropy_grad %logits, %labels, %one : tensor<4x4xf32>, tensor<4xi64>, tensor<f32>
  %db2p = graph.reduce sum %dl dims [0] : tensor<4x4xf32>
  %ht = graph.transpose %h perm [1, 0] : tensor<4x32xf32>
  %dw2p = graph.matmul %ht, %dl : tensor<32x4xf32>, tensor<4x4xf32>
  %w2t = graph.transpose %w2 perm [1, 0] : tensor<32x4xf32>
  %dh = graph.matmul %dl, %w2t : tensor<4x4xf32>, tensor<4x32xf32>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %active = graph.compare gt %h1, %zero : tensor<4x32xf32>, tensor<f32>
  %dh1 = graph.where %active, %dh, %zero : tensor<4x32xi1>, tensor<4x32xf32>, tensor<f32>
  %db1p = graph.reduce sum %dh1 dims [0] : tensor<4x32xf32>
  %xt = graph.transpose %x perm [1, 0] : tensor<4x16xf32>
  %dw1p = graph.matmul %xt, %dh1 : tensor<16x4xf32>, tensor<4x32xf32>

  // The gradients of the whole batch: means over the two halves.
  %dw2 = dist.all_reduce %dw2p on @mesh ["dp"] mean : tensor<32x4xf32>
  %db2 = dist.all_reduce %db2p on @mesh ["dp"] mean : tensor<4xf32>
  %db1 = dist.all_reduce %db1p on @mesh ["dp"] mean : tensor<32xf32>
  // Equal to the one above and unused; it still runs on every device.
  %db1x = dist.all_reduce %db1p on @mesh ["dp"] mean : tensor<32xf32>
  // ZeRO-2: each device receives the mean gradient of its 8 rows only.
  %dw1 = dist.reduce_scatter %dw1p on @mesh ["dp"] mean dim 0 : tensor<16x32xf32> -> tensor<8x32xf32>

  %s0 = graph.read_param @optimizer.step : tensor<i64>
  %c1 = graph.constant dense<1> : tensor<i64>
  %s = graph.add %s0, %c1 : tensor<i64>, tensor<i64>
  graph.assign @optimizer.step, %s : tensor<i64>

  // ZeRO-1: AdamW on this device's rows, then everyone gets all rows.
  %i = dist.axis_index on @mesh ["dp"] : tensor<i64>
  %w1s = dist.local_slice %w1[%i] dim 0 : tensor<16x32xf32> -> tensor<8x32xf32>
  %m = graph.read_param @fc1.weight.m : tensor<8x32xf32>
  %v = graph.read_param @fc1.weight.v : tensor<8x32xf32>
  %w1n, %mn, %vn = graph.adamw %w1s, %dw1, %m, %v, %s {lr = 1.0e-02 : f64} : (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>, tensor<i64>) -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>)
  %w1g = dist.all_gather %w1n on @mesh ["dp"] dim 0 : tensor<8x32xf32> -> tensor<16x32xf32>
  graph.assign @fc1.weight, %w1g : tensor<16x32xf32>
  graph.assign @fc1.weight.m, %mn : tensor<8x32xf32>
  graph.assign @fc1.weight.v, %vn : tensor<8x32xf32>

  // Plain data parallelism for the rest: replicated SGD.
  %b1n = graph.sgd %b1, %db1, %s {lr = 1.0e-01 : f64} : (tensor<32xf32>, tensor<32xf32>, tensor<i64>) -> tensor<32xf32>
  graph.assign @fc1.bias, %b1n : tensor<32xf32>
  %w2n = graph.sgd %w2, %dw2, %s {lr = 1.0e-01 : f64} : (tensor<32x4xf32>, tensor<32x4xf32>, tensor<i64>) -> tensor<32x4xf32>
  graph.assign @fc2.weight, %w2n : tensor<32x4xf32>
  %b2n = graph.sgd %b2, %db2, %s {lr = 1.0e-01 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  graph.assign @fc2.bias, %b2n : tensor<4xf32>
  return %loss : tensor<f32>
}
