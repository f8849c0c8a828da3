// RUN: cleave-opt %s --cleave-plan-memory --cleave-lower-to-runtime | FileCheck %s
// RUN: cleave-opt %s --cleave-plan-memory --cleave-lower-to-runtime=profile=false | FileCheck %s --check-prefix=OFF

// Each op that makes runtime calls has a constant cleave_rt_kernel_info
// (op, location, types, FLOPs, bytes) and a mark before its calls; the
// views (read_param, reshape) make none, so they have no mark; the run ends
// with a null mark.
// CHECK: llvm.func @cleave_rt_profile_mark(!llvm.ptr)
// CHECK-DAG: llvm.mlir.global private constant @[[MATMUL:cleave.kstr.[0-9]+]]("graph.matmul\00")
// CHECK-DAG: llvm.mlir.global private constant @[[LAYER:cleave.kstr.[0-9]+]]("layer0/fc\00")
// CHECK-DAG: llvm.mlir.global private constant @[[TYPES:cleave.kstr.[0-9]+]]("f32[2,4] f32[4,3] -> f32[2,3]\00")

// The matmul's info: 2 x 2 x 3 x 4 = 48 FLOPs, (8 + 12 + 6) x 4 bytes.
// CHECK: llvm.mlir.global private constant @[[MMINFO:cleave.kernel.[0-9]+]]() {{.*}} : !llvm.struct<(ptr, ptr, ptr, f64, i64)> {
// CHECK-NEXT: llvm.mlir.undef
// CHECK-NEXT: llvm.mlir.addressof @[[MATMUL]]
// CHECK-NEXT: llvm.insertvalue
// CHECK-NEXT: llvm.mlir.addressof @[[LAYER]]
// CHECK-NEXT: llvm.insertvalue
// CHECK-NEXT: llvm.mlir.addressof @[[TYPES]]
// CHECK-NEXT: llvm.insertvalue
// CHECK-NEXT: llvm.mlir.constant(4.800000e+01 : f64)
// CHECK-NEXT: llvm.insertvalue
// CHECK-NEXT: llvm.mlir.constant(104 : i64)
// CHECK: llvm.return
// The exp's location is the file's line.
// CHECK: llvm.mlir.global private constant @{{cleave.kstr.[0-9]+}}("cleave-lower-to-runtime-profile.mlir:[[#@LINE+23]]\00")

// CHECK-LABEL: llvm.func @cleave_program_run
// CHECK-NOT: cleave_rt_
// CHECK: %[[M:.*]] = llvm.mlir.addressof @[[MMINFO]]
// CHECK-NEXT: llvm.call @cleave_rt_profile_mark(%[[M]])
// CHECK-NOT: cleave_rt_profile_mark
// CHECK: llvm.call @cleave_rt_matmul(
// CHECK-NOT: cleave_rt_
// CHECK: llvm.call @cleave_rt_profile_mark(
// CHECK-NOT: cleave_rt_
// CHECK: llvm.call @cleave_rt_unary(
// CHECK-NOT: cleave_rt_
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: llvm.call @cleave_rt_profile_mark(%[[NULL]])
// CHECK-NEXT: llvm.return

// OFF-NOT: cleave.kernel
// OFF-NOT: cleave_rt_profile_mark
graph.param @w : tensor<4x3xf32> = dense<0.5> : tensor<4x3xf32>
func.func @forward(%x: tensor<2x4xf32> {onnx.name = "x"}) -> (tensor<6xf32> {onnx.name = "y"}) {
  %w = graph.read_param @w : tensor<4x3xf32>
  %0 = graph.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> loc("layer0/fc")
  %1 = graph.exp %0 : tensor<2x3xf32>
  %2 = graph.reshape %1 : tensor<2x3xf32> -> tensor<6xf32>
  return %2 : tensor<6xf32>
}
