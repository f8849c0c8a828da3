// RUN: cleave-opt %s -split-input-file --cleave-plan-memory --cleave-lower-to-runtime="chunk-size=2 profile=false" | FileCheck %s %rt-abi
// RUN: cleave-opt %s -split-input-file --cleave-plan-memory --cleave-lower-to-runtime="chunk-size=0 profile=false" | FileCheck %s --check-prefix=WHOLE
// RUN: cleave-opt %s -split-input-file --cleave-plan-memory --cleave-lower-to-runtime=profile=false | FileCheck %s --check-prefix=WHOLE
// RUN: cleave-opt %s -split-input-file --cleave-normalize-collectives --cleave-overlap-collectives --cleave-plan-memory --cleave-lower-to-runtime="chunk-size=1 profile=false" | FileCheck %s --check-prefix=PASSED
// RUN: not cleave-opt %s -split-input-file --cleave-plan-memory --cleave-lower-to-runtime="chunk-size=-1 profile=false" 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// Five calls in chunks of two: three private noinline functions, each with
// the run function's (arena, context) and the descriptors and constants of
// its own calls, called in order (without the profiler's marks, which
// are calls too).
// CHECK-LABEL: llvm.func private @cleave_program_run.chunk.0(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) attributes {no_inline}
// CHECK: %[[EXP:.*]] = llvm.mlir.constant([[#CLEAVE_EXP]] : i32)
// CHECK: %[[X:.*]] = llvm.mlir.addressof @[[XD:cleave.desc.[0-9]+]]
// CHECK: %[[Y:.*]] = llvm.mlir.addressof @[[YD:cleave.desc.[0-9]+]]
// CHECK: llvm.call @cleave_rt_unary(%{{.*}}, %[[EXP]], %[[X]], %[[Y]])
// CHECK: llvm.mlir.constant([[#CLEAVE_TANH]] : i32)
// CHECK: llvm.call @cleave_rt_unary(
// CHECK-NOT: llvm.call
// CHECK: llvm.return{{$}}
// CHECK-LABEL: llvm.func private @cleave_program_run.chunk.1(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) attributes {no_inline}
// CHECK: %[[NEG:.*]] = llvm.mlir.constant([[#CLEAVE_NEG]] : i32)
// CHECK: %[[IN:.*]] = llvm.mlir.addressof @[[YD]]
// CHECK: llvm.call @cleave_rt_unary(%{{.*}}, %[[NEG]], %[[IN]],
// CHECK: llvm.mlir.constant([[#CLEAVE_EXP]] : i32)
// CHECK: llvm.call @cleave_rt_unary(
// CHECK-NOT: llvm.call
// CHECK: llvm.return{{$}}
// CHECK-LABEL: llvm.func private @cleave_program_run.chunk.2(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) attributes {no_inline}
// CHECK: llvm.mlir.constant([[#CLEAVE_TANH]] : i32)
// CHECK: llvm.call @cleave_rt_unary(
// CHECK-NOT: llvm.call
// CHECK: llvm.return{{$}}
// CHECK-LABEL: llvm.func @cleave_program_run(
// CHECK-SAME: %[[ARENA:[^:]*]]: !llvm.ptr, %[[CONTEXT:[^:]*]]: !llvm.ptr)
// CHECK-NEXT: llvm.call @cleave_program_run.chunk.0(%[[ARENA]], %[[CONTEXT]]) : (!llvm.ptr, !llvm.ptr) -> ()
// CHECK-NEXT: llvm.call @cleave_program_run.chunk.1(%[[ARENA]], %[[CONTEXT]]) : (!llvm.ptr, !llvm.ptr) -> ()
// CHECK-NEXT: llvm.call @cleave_program_run.chunk.2(%[[ARENA]], %[[CONTEXT]]) : (!llvm.ptr, !llvm.ptr) -> ()
// CHECK-NEXT: llvm.return

// With chunk-size=0, and with the default (256) on a function of fewer
// calls, the run function is one function.
// WHOLE-NOT: chunk
// WHOLE-LABEL: llvm.func @cleave_program_run(
// WHOLE-COUNT-5: llvm.call @cleave_rt_unary(
// WHOLE-NOT: chunk
// WHOLE: llvm.return
// WHOLE-NOT: chunk

// NEGATIVE: error: expects chunk-size >= 0, got -1
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.exp %x : tensor<4xf32>
  %1 = graph.tanh %0 : tensor<4xf32>
  %2 = graph.neg %1 : tensor<4xf32>
  %3 = graph.exp %2 : tensor<4xf32>
  %4 = graph.tanh %3 : tensor<4xf32>
  return %4 : tensor<4xf32>
}

// -----

// A value that is not a constant and crosses a cut is returned by its
// chunk and passed to those that use it: here the hyperparameter array the
// entry loads from the context (and whether it is null), and the handle of
// the all-reduce, started before the matmul and waited for after it.
// PASSED-LABEL: llvm.func private @cleave_program_run.chunk.0(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) -> !llvm.struct<(i1, ptr, i64)> attributes {no_inline}
// PASSED: %[[HPS:.*]] = llvm.load
// PASSED: %[[NONE:.*]] = llvm.icmp "eq" %[[HPS]]
// PASSED: %[[SAFE:.*]] = llvm.select %[[NONE]], %{{.*}}, %[[HPS]]
// PASSED: %[[H:.*]] = llvm.call @cleave_comm_all_reduce_start(
// PASSED: %[[S0:.*]] = llvm.insertvalue %[[NONE]], %{{.*}}[0]
// PASSED: %[[S1:.*]] = llvm.insertvalue %[[SAFE]], %[[S0]][1]
// PASSED: %[[S2:.*]] = llvm.insertvalue %[[H]], %[[S1]][2]
// PASSED: llvm.return %[[S2]] : !llvm.struct<(i1, ptr, i64)>
// PASSED-LABEL: llvm.func private @cleave_program_run.chunk.1(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) attributes {no_inline}
// PASSED: llvm.call @cleave_rt_matmul(
// PASSED-LABEL: llvm.func private @cleave_program_run.chunk.2(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) attributes {no_inline}
// PASSED: llvm.call @cleave_rt_unary(
// PASSED-LABEL: llvm.func private @cleave_program_run.chunk.3(
// PASSED-SAME: %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[HANDLE:[^:]*]]: i64) attributes {no_inline}
// PASSED: llvm.call @cleave_comm_wait(%[[HANDLE]])
// PASSED-LABEL: llvm.func private @cleave_program_run.chunk.4(
// PASSED-SAME: %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[ISNULL:[^:]*]]: i1, %[[ARRAY:[^:]*]]: !llvm.ptr) attributes {no_inline}
// PASSED: llvm.getelementptr %[[ARRAY]]
// PASSED: llvm.select %[[ISNULL]]
// PASSED: llvm.call @cleave_rt_sgd(
// PASSED-LABEL: llvm.func @cleave_program_run(
// PASSED-SAME: %[[ARENA:[^:]*]]: !llvm.ptr, %[[CONTEXT:[^:]*]]: !llvm.ptr)
// PASSED-NEXT: %[[OUT:.*]] = llvm.call @cleave_program_run.chunk.0(%[[ARENA]], %[[CONTEXT]])
// PASSED-NEXT: %[[P0:.*]] = llvm.extractvalue %[[OUT]][0]
// PASSED-NEXT: %[[P1:.*]] = llvm.extractvalue %[[OUT]][1]
// PASSED-NEXT: %[[P2:.*]] = llvm.extractvalue %[[OUT]][2]
// PASSED-NEXT: llvm.call @cleave_program_run.chunk.1(%[[ARENA]], %[[CONTEXT]])
// PASSED-NEXT: llvm.call @cleave_program_run.chunk.2(%[[ARENA]], %[[CONTEXT]])
// PASSED-NEXT: llvm.call @cleave_program_run.chunk.3(%[[ARENA]], %[[CONTEXT]], %[[P2]])
// PASSED-NEXT: llvm.call @cleave_program_run.chunk.4(%[[ARENA]], %[[CONTEXT]], %[[P0]], %[[P1]])
// PASSED-NEXT: llvm.return
dist.mesh @mesh ["dp" = 2]
graph.param @w : tensor<16xf32>
graph.param @counter frozen : tensor<i64>
func.func @step(%g: tensor<16xf32>, %a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = dist.all_reduce %g on @mesh ["dp"] sum : tensor<16xf32>
  %m = graph.matmul %a, %a : tensor<4x4xf32>, tensor<4x4xf32>
  %n = graph.neg %m : tensor<4x4xf32>
  %w = graph.read_param @w : tensor<16xf32>
  %s = graph.read_param @counter : tensor<i64>
  %u = graph.sgd %w, %r, %s {lr = 0.1 : f64, run_time_hyperparameters} : (tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> tensor<16xf32>
  graph.assign @w, %u : tensor<16xf32>
  return %n : tensor<4x4xf32>
}
