// A training step through the runtime: the backward kernels, the step
// counter's copy into its parameter and the fused SGD update on the
// parameter's own storage; the metadata marks a training program with one
// model parameter (the rest is optimizer state) and carries its config.
// RUN: cleave-opt %s --cleave-autodiff="optimizer=sgd momentum=0.9 lr=0.1" --cleave-plan-memory=entry=train_step --cleave-lower-to-runtime=entry=train_step | FileCheck %s
// RUN: cleave-opt %s --cleave-autodiff="optimizer=sgd momentum=0.9 lr=0.1" --cleave-plan-memory=entry=train_step --cleave-lower-to-runtime=entry=train_step | FileCheck %s --check-prefix=CONFIG

// CHECK-LABEL: llvm.func @cleave_program_run
// CHECK: llvm.call @cleave_rt_matmul
// CHECK: llvm.call @cleave_rt_cross_entropy(
// CHECK: llvm.call @cleave_rt_cross_entropy_grad(
// GELU erf is kind 14 of the unary codes.
// CHECK: %[[GELU:.*]] = llvm.mlir.constant(14 : i32)
// CHECK: llvm.call @cleave_rt_unary_grad(%{{.*}}, %[[GELU]]
// CHECK: llvm.call @cleave_rt_copy(
// The update runs in the parameter's and the buffer's own storage: no copy
// before it, and its assignments copy nothing.
// CHECK-NOT: llvm.call @cleave_rt_copy(
// The update: param, grad, momentum buffer, step, no scale, lr, momentum,
// dampening, weight decay, nesterov.
// CHECK: %[[LR:.*]] = llvm.mlir.constant(1.000000e-01 : f64)
// CHECK: %[[MOM:.*]] = llvm.mlir.constant(9.000000e-01 : f64)
// CHECK: llvm.call @cleave_rt_sgd(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LR]], %[[MOM]]
// CHECK-NOT: llvm.call @cleave_rt_copy(
// CHECK: llvm.return
// CHECK-LABEL: llvm.mlir.global external constant @cleave_program()
// CHECK: %[[KIND:.*]] = llvm.mlir.constant(1 : i32)
// CHECK: llvm.insertvalue %[[KIND]], %{{.*}}[1]
// CHECK: %[[MODEL:.*]] = llvm.mlir.constant(1 : i64)
// CHECK: llvm.insertvalue %[[MODEL]], %{{.*}}[4]
// CHECK: llvm.insertvalue %{{.*}}, %{{.*}}[11]
// CONFIG: llvm.mlir.global private constant @{{.*}}("{\22loss\22:\22cross-entropy\22,\22optimizer\22:\22sgd\22,\22lr\22:0.1,\22momentum\22:0.9

graph.param @w : tensor<3x5xf32> = dense<0.5> : tensor<3x5xf32>
func.func @forward(%x: tensor<4x3xf32> {onnx.name = "x"}) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  %g = graph.gelu %y : tensor<4x5xf32>
  return %g : tensor<4x5xf32>
}
