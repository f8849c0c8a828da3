// A gather at a block's offset (the vocabulary-parallel lookup, as the
// partition hook writes it) is one cleave_rt_gather_block call: data,
// indices, offset, out, dim; its gradient (which keeps the offset) one
// cleave_rt_gather_grad_block call: dy, indices, offset, out, dim.
// RUN: cleave-opt %s --cleave-autodiff="optimizer=sgd lr=0.1" --cleave-plan-memory=entry=train_step --cleave-lower-to-runtime=entry=train_step | FileCheck %s

// CHECK-DAG: llvm.func @cleave_rt_gather_block(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64)
// CHECK-DAG: llvm.func @cleave_rt_gather_grad_block(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64)
// CHECK-LABEL: llvm.func @cleave_program_run
// CHECK: %[[DIM:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: llvm.call @cleave_rt_gather_block(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[DIM]])
// CHECK-NOT: llvm.call @cleave_rt_gather(
// CHECK: llvm.call @cleave_rt_gather_grad_block(
// CHECK-NOT: llvm.call @cleave_rt_gather_grad(
// CHECK: llvm.call @cleave_rt_sgd(

graph.param @table : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
func.func @forward(%ids: tensor<6xi64> {onnx.name = "ids"}, %offset: tensor<i64> {onnx.name = "offset"}) -> tensor<6x4xf32> {
  %t = graph.read_param @table : tensor<8x4xf32>
  %e = graph.gather %t[%ids] dim 0 offset %offset : tensor<8x4xf32>, tensor<6xi64>
  return %e : tensor<6x4xf32>
}
