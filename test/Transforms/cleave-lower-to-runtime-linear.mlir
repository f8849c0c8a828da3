// A fused linear is one cleave_rt_linear call: x, w, bias, out, pre (null
// when absent), transpose_w, activation (enum cleave_activation). In the
// training step the pre-activation is kept, and the backward of the GELU
// layer is one cleave_rt_matmul_gelu_grad call: dy, w, pre, dz,
// dbias, transpose_w, activation. The weight gradients are cleave_rt_gemm
// calls: a, b, out, dbias, transpose_a, transpose_b; the second layer's
// (no GELU) also sums its bias gradient, the first layer's is null (the
// matmul_gelu_grad sums it).
// RUN: cleave-opt %s --cleave-fuse-linear --cleave-plan-memory --cleave-lower-to-runtime | FileCheck %s %rt-abi --check-prefix=INFER
// RUN: cleave-opt %s --cleave-autodiff="optimizer=sgd lr=0.1" --canonicalize --cse --cleave-fuse-linear --cleave-plan-memory=entry=train_step --cleave-lower-to-runtime=entry=train_step | FileCheck %s %rt-abi --check-prefix=TRAIN

// INFER-DAG: llvm.func @cleave_rt_linear(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32)
// INFER-LABEL: llvm.func @cleave_program_run
// INFER: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// INFER-NEXT: %[[T:.*]] = llvm.mlir.constant(1 : i32) : i32
// INFER-NEXT: %[[ACT:.*]] = llvm.mlir.constant([[#CLEAVE_ACT_GELU_TANH]] : i32) : i32
// INFER-NEXT: llvm.call @cleave_rt_linear(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[NULL]], %[[T]], %[[ACT]])
// The second layer: no activation, no pre.
// INFER: %[[NULL2:.*]] = llvm.mlir.zero : !llvm.ptr
// INFER-NEXT: %[[T2:.*]] = llvm.mlir.constant(1 : i32) : i32
// INFER-NEXT: %[[NONE:.*]] = llvm.mlir.constant([[#CLEAVE_ACT_NONE]] : i32) : i32
// INFER-NEXT: llvm.call @cleave_rt_linear(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[NULL2]], %[[T2]], %[[NONE]])
// INFER-NOT: cleave_rt_transpose
// INFER-NOT: cleave_rt_binary
// INFER-NOT: cleave_rt_unary(
// INFER: llvm.return

// TRAIN-LABEL: llvm.func @cleave_program_run
// After the entry's run-time hyperparameters (their null checks), the
// first linear keeps its pre-activation: no null pointer before it.
// TRAIN: llvm.mlir.addressof @cleave.no_context
// TRAIN: llvm.getelementptr %{{.*}}[3] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// TRAIN: llvm.icmp "eq"
// TRAIN-NEXT: llvm.select
// TRAIN-NOT: llvm.mlir.zero
// TRAIN: %[[T:.*]] = llvm.mlir.constant(1 : i32) : i32
// TRAIN-NEXT: %[[ACT:.*]] = llvm.mlir.constant([[#CLEAVE_ACT_GELU_TANH]] : i32) : i32
// TRAIN-NEXT: llvm.call @cleave_rt_linear(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[T]], %[[ACT]])
// TRAIN: llvm.call @cleave_rt_cross_entropy_grad(
// Each weight gradient dy^T x is one cleave_rt_gemm reading dy transposed
// (transpose_a 1, transpose_b 0); no transposed copy is made, and no
// separate sum of dy.
// TRAIN-NOT: cleave_rt_transpose
// TRAIN-NOT: cleave_rt_reduce
// TRAIN-NOT: llvm.mlir.zero
// TRAIN: %[[TA:.*]] = llvm.mlir.constant(1 : i32) : i32
// TRAIN-NEXT: %[[TB:.*]] = llvm.mlir.constant(0 : i32) : i32
// TRAIN-NEXT: llvm.call @cleave_rt_gemm(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[0-9]+}}, %[[TA]], %[[TB]])
// TRAIN: %[[GACT:.*]] = llvm.mlir.constant([[#CLEAVE_ACT_GELU_TANH]] : i32) : i32
// TRAIN-NEXT: llvm.call @cleave_rt_matmul_gelu_grad(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[GACT]])
// TRAIN-NOT: cleave_rt_unary_grad
// TRAIN-NOT: cleave_rt_transpose
// TRAIN: %[[NODB:.*]] = llvm.mlir.zero : !llvm.ptr
// TRAIN-NEXT: %{{.*}} = llvm.mlir.constant(1 : i32) : i32
// TRAIN-NEXT: %{{.*}} = llvm.mlir.constant(0 : i32) : i32
// TRAIN-NEXT: llvm.call @cleave_rt_gemm(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[NODB]], 
// TRAIN-NOT: cleave_rt_transpose
// TRAIN: llvm.call @cleave_rt_sgd(

graph.param @w1 : tensor<6x3xf32> = dense<0.5> : tensor<6x3xf32>
graph.param @b1 : tensor<6xf32> = dense<0.25> : tensor<6xf32>
graph.param @w2 : tensor<5x6xf32> = dense<0.125> : tensor<5x6xf32>
graph.param @b2 : tensor<5xf32> = dense<0.0625> : tensor<5xf32>
func.func @forward(%x: tensor<4x3xf32> {onnx.name = "x"}) -> tensor<4x5xf32> {
  %w1 = graph.read_param @w1 : tensor<6x3xf32>
  %b1 = graph.read_param @b1 : tensor<6xf32>
  %w2 = graph.read_param @w2 : tensor<5x6xf32>
  %b2 = graph.read_param @b2 : tensor<5xf32>
  %w1t = graph.transpose %w1 perm [1, 0] : tensor<6x3xf32>
  %0 = graph.matmul %x, %w1t : tensor<4x3xf32>, tensor<3x6xf32>
  %1 = graph.add %b1, %0 : tensor<6xf32>, tensor<4x6xf32>
  %2 = graph.gelu %1 approximate tanh : tensor<4x6xf32>
  %w2t = graph.transpose %w2 perm [1, 0] : tensor<5x6xf32>
  %3 = graph.matmul %2, %w2t : tensor<4x6xf32>, tensor<6x5xf32>
  %4 = graph.add %b2, %3 : tensor<5xf32>, tensor<4x5xf32>
  return %4 : tensor<4x5xf32>
}
