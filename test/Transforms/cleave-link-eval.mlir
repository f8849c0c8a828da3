// The evaluation program inside the training program: the nested module
// (the step's forward pass and loss, -cleave-add-loss alone) lowered with
// its symbols prefixed cleave_eval_, the outer one (the training step)
// lowered as usual, then -cleave-link-eval moves the first into the second
// and points cleave_program's fields eval and eval_run (22 and 23) at it.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(builtin.module(cleave-add-loss{loss=mse},cleave-plan-memory{entry=train_step},cleave-lower-to-runtime{entry=train_step symbol-prefix=cleave_eval_}),cleave-autodiff{loss=mse optimizer=sgd lr=0.1},cleave-plan-memory{entry=train_step},cleave-lower-to-runtime{entry=train_step},cleave-link-eval)' | FileCheck %s %rt-abi

// CHECK-NOT: module attributes
// CHECK-LABEL: llvm.func @cleave_program_run
// CHECK: llvm.call @cleave_rt_sgd(
// CHECK-LABEL: llvm.mlir.global external constant @cleave_program()
// CHECK: %[[TRAINING:.*]] = llvm.mlir.constant([[#CLEAVE_PROGRAM_TRAINING]] : i32)
// CHECK: llvm.insertvalue %[[TRAINING]], %{{.*}}[1]
// CHECK: %[[EVAL:.*]] = llvm.mlir.addressof @cleave_eval_program
// CHECK: %[[S:.*]] = llvm.insertvalue %[[EVAL]], %{{.*}}[22]
// CHECK: %[[EVALFN:.*]] = llvm.mlir.addressof @cleave_eval_run
// CHECK: %[[T:.*]] = llvm.insertvalue %[[EVALFN]], %[[S]][23]
// CHECK: llvm.return %[[T]]
// The evaluation program's configuration is its loss's.
// CHECK: llvm.mlir.global private constant @cleave_eval_cleave.str.{{[0-9]+}}("{\22loss\22:\22mse\22,\22accumulate\22:1}\00")
// Its run computes the loss and nothing else (no call after it but the
// profiler's last mark).
// CHECK-LABEL: llvm.func @cleave_eval_run
// CHECK-NOT: _grad
// CHECK-NOT: cleave_rt_sgd
// CHECK: llvm.call @cleave_rt_mse(
// CHECK-NOT: llvm.call @cleave_rt_{{[a-oq-z]}}
// CHECK: llvm.return
// CHECK-LABEL: llvm.mlir.global external constant @cleave_eval_program()
// CHECK: %[[KIND:.*]] = llvm.mlir.constant([[#CLEAVE_PROGRAM_EVAL]] : i32)
// CHECK: llvm.insertvalue %[[KIND]], %{{.*}}[1]
// CHECK-NOT: module

graph.param @w : tensor<4x2xf32> = dense<0.5> : tensor<4x2xf32>
func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
  %w = graph.read_param @w : tensor<4x2xf32>
  %y = graph.matmul %x, %w : tensor<3x4xf32>, tensor<4x2xf32>
  return %y : tensor<3x2xf32>
}
module attributes {cleave.eval_program} {
  graph.param @w : tensor<4x2xf32> = dense<0.5> : tensor<4x2xf32>
  func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
    %w = graph.read_param @w : tensor<4x2xf32>
    %y = graph.matmul %x, %w : tensor<3x4xf32>, tensor<4x2xf32>
    return %y : tensor<3x2xf32>
  }
}
