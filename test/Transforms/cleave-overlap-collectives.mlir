// RUN: cleave-opt %s --cleave-overlap-collectives -split-input-file | FileCheck %s
// RUN: cleave-opt %s --cleave-normalize-collectives --cleave-overlap-collectives --cleave-plan-memory --cleave-lower-to-runtime -split-input-file | FileCheck %s --check-prefix=LOWER

// A gradient's all-reduce starts where it was and is waited for just
// before its first reader, the update: the matmul in between overlaps it.
// CHECK-LABEL: func.func @step
// CHECK: %[[S:.*]] = dist.all_reduce async %{{.*}} on @mesh ["dp"] sum : tensor<16xf32>
// CHECK-NEXT: graph.matmul
// CHECK-NEXT: graph.read_param @w
// CHECK-NEXT: graph.read_param @counter
// CHECK-NEXT: %[[R:.*]] = dist.wait %[[S]] : tensor<16xf32>
// CHECK-NEXT: graph.sgd %{{.*}}, %[[R]],
// A collective along dimension 1 stays blocking (normalize first).
// CHECK: dist.all_gather %{{.*}} dim 1 :
// CHECK-NOT: dist.wait
// CHECK: return

// LOWER-LABEL: llvm.func @cleave_program_run
// LOWER: %[[H:.*]] = llvm.call @cleave_comm_all_reduce_start(
// LOWER: llvm.call @cleave_rt_matmul(
// LOWER: llvm.call @cleave_comm_wait(%[[H]]) : (i64) -> ()
// LOWER: llvm.call @cleave_rt_sgd(

dist.mesh @mesh ["dp" = 2]
graph.param @w : tensor<16xf32>
graph.param @counter frozen : tensor<i64>
func.func @step(%g: tensor<16xf32>, %a: tensor<4x4xf32>, %c: tensor<4x2xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %r = dist.all_reduce %g on @mesh ["dp"] sum : tensor<16xf32>
  %m = graph.matmul %a, %a : tensor<4x4xf32>, tensor<4x4xf32>
  %w = graph.read_param @w : tensor<16xf32>
  %s = graph.read_param @counter : tensor<i64>
  %u = graph.sgd %w, %r, %s {lr = 0.1 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> tensor<16xf32>
  graph.assign @w, %u : tensor<16xf32>
  %cg = dist.all_gather %c on @mesh ["dp"] dim 1 : tensor<4x2xf32> -> tensor<4x4xf32>
  return %m, %cg : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A wait goes no later than the first assignment after its start (the
// input may be a parameter's storage), and before the terminator when
// only the return reads the result.
// CHECK-LABEL: func.func @until_assign
// CHECK: dist.all_gather async
// CHECK-NEXT: %[[W:.*]] = dist.wait
// CHECK-NEXT: graph.assign @p
// CHECK: dist.all_reduce async
// CHECK-NEXT: graph.neg
// CHECK-NEXT: dist.wait
// CHECK-NEXT: return
dist.mesh @mesh ["dp" = 2]
graph.param @p : tensor<4xf32>
func.func @until_assign(%x: tensor<4xf32>) -> (tensor<8xf32>, tensor<4xf32>, tensor<4xf32>) {
  %v = graph.read_param @p : tensor<4xf32>
  %g = dist.all_gather %v on @mesh ["dp"] dim 0 : tensor<4xf32> -> tensor<8xf32>
  graph.assign @p, %x : tensor<4xf32>
  %r = dist.all_reduce %x on @mesh ["dp"] sum : tensor<4xf32>
  %n = graph.neg %x : tensor<4xf32>
  return %g, %r, %n : tensor<8xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A pipeline stage's receives are posted a schedule step early: the
// activation of microbatch 1 at the start of microbatch 0's step, and
// waited for where it was received. A receive is never posted before an
// earlier receive from the same source (a source's messages match the
// receives in posting order): the gradient after the grouped transfer
// stays after it. The lowering starts the receive and waits for its
// handle.
// CHECK-LABEL: func.func @forward
// CHECK: dist.pipeline_step "forward"{{$}}
// CHECK-NEXT: %[[A:.*]] = dist.recv async on @mesh ["pp"] from 0
// CHECK-NEXT: graph.neg %arg0
// CHECK-NEXT: dist.pipeline_step "forward" microbatch 1
// CHECK-NEXT: graph.exp
// CHECK-NEXT: %[[AW:.*]] = dist.wait %[[A]]
// CHECK-NEXT: %[[S:.*]] = graph.add %[[AW]]
// CHECK-NEXT: dist.pipeline_step "backward"
// CHECK-NEXT: %[[B:.*]] = dist.send_recv %[[S]]
// CHECK-NEXT: %[[G:.*]] = dist.recv async on @mesh ["pp"] from 0
// CHECK-NEXT: %[[GW:.*]] = dist.wait %[[G]]
// CHECK-NEXT: graph.mul %[[GW]], %[[B]]
// LOWER-LABEL: llvm.func @cleave_program_run
// LOWER: %[[H:.*]] = llvm.call @cleave_comm_recv_start({{.*}}) : (i32, !llvm.ptr, !llvm.ptr, i32) -> i64
// LOWER: llvm.call @cleave_comm_wait(%[[H]])
dist.mesh @mesh ["pp" = 2]
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> attributes {dist.partitioned} {
  dist.pipeline_step "forward"
  %n = graph.neg %x : tensor<4xf32>
  dist.pipeline_step "forward" microbatch 1
  %e = graph.exp %n : tensor<4xf32>
  %a = dist.recv on @mesh ["pp"] from 0 : tensor<4xf32>
  %s = graph.add %a, %e : tensor<4xf32>, tensor<4xf32>
  dist.pipeline_step "backward"
  %b = dist.send_recv %s on @mesh ["pp"] to 0 from 0 : tensor<4xf32> -> tensor<4xf32>
  %g = dist.recv on @mesh ["pp"] from 0 : tensor<4xf32>
  %m = graph.mul %g, %b : tensor<4xf32>, tensor<4xf32>
  return %m : tensor<4xf32>
}

// -----

// Ring attention's step: the permute of the next block starts before the
// current block's compute and is waited for before its first reader.
// CHECK-LABEL: func.func @ring
// CHECK: %[[P:.*]] = dist.collective_permute async %arg0 on @mesh ["cp"] pairs
// CHECK-NEXT: %[[B:.*]] = graph.matmul %arg0, %arg0
// CHECK-NEXT: %[[N:.*]] = dist.wait %[[P]] : tensor<4x4xf32>
// CHECK-NEXT: graph.matmul %[[B]], %[[N]]
// LOWER: %[[H:.*]] = llvm.call @cleave_comm_collective_permute_start(
// LOWER: llvm.call @cleave_rt_matmul(
// LOWER: llvm.call @cleave_comm_wait(%[[H]]) : (i64) -> ()
// LOWER: llvm.call @cleave_rt_matmul(
dist.mesh @mesh ["cp" = 2]
func.func @ring(%k: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %next = dist.collective_permute %k on @mesh ["cp"] pairs [[0, 1], [1, 0]] : tensor<4x4xf32>
  %b = graph.matmul %k, %k : tensor<4x4xf32>, tensor<4x4xf32>
  %c = graph.matmul %b, %next : tensor<4x4xf32>, tensor<4x4xf32>
  return %c : tensor<4x4xf32>
}
