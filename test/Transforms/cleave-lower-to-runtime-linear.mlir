// A fused linear is one cleave_rt_linear call: x, w, bias, out, pre (null
// when absent), transpose_w, activation (cleave_activation: 2 is the tanh
// GELU). In the training step the pre-activation is kept for gelu_grad.
// RUN: cleave-opt %s --cleave-fuse-linear --cleave-plan-memory --cleave-lower-to-runtime | FileCheck %s --check-prefix=INFER
// RUN: cleave-opt %s --cleave-autodiff="optimizer=sgd lr=0.1" --cse --cleave-fuse-linear --cleave-plan-memory=entry=train_step --cleave-lower-to-runtime=entry=train_step | FileCheck %s --check-prefix=TRAIN

// INFER-DAG: llvm.func @cleave_rt_linear(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32)
// INFER-LABEL: llvm.func @cleave_program_run
// INFER: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// INFER-NEXT: %[[T:.*]] = llvm.mlir.constant(1 : i32) : i32
// INFER-NEXT: %[[ACT:.*]] = llvm.mlir.constant(2 : i32) : i32
// INFER-NEXT: llvm.call @cleave_rt_linear(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[NULL]], %[[T]], %[[ACT]])
// INFER-NOT: cleave_rt_transpose
// INFER-NOT: cleave_rt_binary
// INFER-NOT: cleave_rt_unary(
// INFER: llvm.return

// TRAIN-LABEL: llvm.func @cleave_program_run
// TRAIN-NOT: llvm.mlir.zero
// TRAIN: %[[T:.*]] = llvm.mlir.constant(1 : i32) : i32
// TRAIN-NEXT: %[[ACT:.*]] = llvm.mlir.constant(2 : i32) : i32
// TRAIN-NEXT: llvm.call @cleave_rt_linear(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[T]], %[[ACT]])
// TRAIN: %[[KIND:.*]] = llvm.mlir.constant(15 : i32) : i32
// TRAIN-NEXT: llvm.call @cleave_rt_unary_grad(%{{.*}}, %[[KIND]],
// TRAIN: llvm.call @cleave_rt_sgd(

graph.param @w : tensor<5x3xf32> = dense<0.5> : tensor<5x3xf32>
graph.param @b : tensor<5xf32> = dense<0.25> : tensor<5xf32>
func.func @forward(%x: tensor<4x3xf32> {onnx.name = "x"}) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<5x3xf32>
  %b = graph.read_param @b : tensor<5xf32>
  %wt = graph.transpose %w perm [1, 0] : tensor<5x3xf32>
  %y = graph.matmul %x, %wt : tensor<4x3xf32>, tensor<3x5xf32>
  %z = graph.add %b, %y : tensor<5xf32>, tensor<4x5xf32>
  %g = graph.gelu %z approximate tanh : tensor<4x5xf32>
  return %g : tensor<4x5xf32>
}
