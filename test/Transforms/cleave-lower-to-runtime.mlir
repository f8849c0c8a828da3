// RUN: cleave-opt %s --cleave-plan-memory --cleave-lower-to-runtime=profile=false | FileCheck %s %rt-abi
// (%rt-abi defines the runtime's numbers by name, see lit.cfg.py; the
// profiler's marks are cleave-lower-to-runtime-profile.mlir's.)

// Each op is one runtime call on constant descriptors: [offset, dtype |
// rank << 32, shape...], CLEAVE_RT_MAX_RANK + 2 words.
// CHECK-DAG: llvm.mlir.global private constant @[[W:cleave.desc.[0-9]+]](dense<[0, [[#CLEAVE_F32 + mul(2, 4294967296)]], 4, 4, 0, 0, 0, 0, 0, 0]> : tensor<[[#CLEAVE_RT_MAX_RANK + 2]]xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[X:cleave.desc.[0-9]+]](dense<[64, [[#CLEAVE_F32 + mul(2, 4294967296)]], 2, 4, 0, 0, 0, 0, 0, 0]> : tensor<[[#CLEAVE_RT_MAX_RANK + 2]]xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[MM:cleave.desc.[0-9]+]](dense<[128, [[#CLEAVE_F32 + mul(2, 4294967296)]], 2, 4, 0, 0, 0, 0, 0, 0]> : tensor<[[#CLEAVE_RT_MAX_RANK + 2]]xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[SM:cleave.desc.[0-9]+]](dense<[192, [[#CLEAVE_F32 + mul(2, 4294967296)]], 2, 4, 0, 0, 0, 0, 0, 0]> : tensor<[[#CLEAVE_RT_MAX_RANK + 2]]xi64>)
// CHECK-DAG: llvm.mlir.global private constant @[[PERM:cleave.ints.[0-9]+]](dense<[1, 0]> : tensor<2xi64>)
// CHECK-DAG: llvm.func @cleave_rt_matmul(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
// CHECK-DAG: llvm.func @cleave_rt_softmax(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i32)
// The parameter's initial value is embedded as bytes (0.5f is 0x3F000000).
// CHECK-DAG: llvm.mlir.global private constant @cleave.init.{{[0-9]+}}("\00\00\00?\00\00\00?
// CHECK: llvm.func @cleave_program_run(%[[ARENA:[^:]*]]: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK: %[[A:.*]] = llvm.mlir.addressof @[[X]]
// CHECK: %[[B:.*]] = llvm.mlir.addressof @[[W]]
// CHECK: %[[C:.*]] = llvm.mlir.addressof @[[MM]]
// CHECK: llvm.call @cleave_rt_matmul(%[[ARENA]], %[[A]], %[[B]], %[[C]])
// CHECK: %[[DIM:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK: %[[LOG:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: llvm.call @cleave_rt_softmax(%[[ARENA]], %{{.*}}, %{{.*}}, %[[DIM]], %[[LOG]])
// The reshape is a view: no call. The transpose passes its permutation.
// An op's operand is the descriptor its producer made for its result.
// CHECK-NOT: cleave_rt_copy
// CHECK: llvm.call @cleave_rt_transpose(%[[ARENA]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NEXT: %[[T:.*]] = llvm.mlir.addressof @[[G:cleave.desc.[0-9]+]]
// CHECK-NEXT: %[[P:.*]] = llvm.mlir.addressof @{{cleave.ints.[0-9]+}}
// CHECK-NEXT: llvm.call @cleave_rt_transpose(%[[ARENA]], %{{.*}}, %[[T]], %[[P]])
// GELU with the tanh form is unary kind CLEAVE_GELU_TANH, in place: both
// descriptors are the same tensor.
// CHECK-NEXT: %[[OUT:.*]] = llvm.mlir.addressof @[[G]]
// CHECK-NEXT: %[[KIND:.*]] = llvm.mlir.constant([[#CLEAVE_GELU_TANH]] : i32) : i32
// CHECK-NEXT: llvm.call @cleave_rt_unary(%[[ARENA]], %[[KIND]], %[[T]], %[[OUT]])
// CHECK: llvm.return
// The metadata: the ABI version, an inference program, the arena size, one
// parameter (a model parameter), one input, one output.
// CHECK-LABEL: llvm.mlir.global external constant @cleave_program()
// CHECK: %[[ABI:.*]] = llvm.mlir.constant([[#CLEAVE_RT_ABI_VERSION]] : i32)
// CHECK: llvm.insertvalue %[[ABI]], %{{.*}}[0]
// CHECK: %[[KIND:.*]] = llvm.mlir.constant([[#CLEAVE_PROGRAM_INFERENCE]] : i32)
// CHECK: llvm.insertvalue %[[KIND]], %{{.*}}[1]
// CHECK: %[[ARENA_BYTES:.*]] = llvm.mlir.constant(256 : i64)
// CHECK: llvm.insertvalue %[[ARENA_BYTES]], %{{.*}}[2]
// CHECK-NOT: graph.
graph.param @w : tensor<4x4xf32> = dense<0.5> : tensor<4x4xf32>
func.func @forward(%x: tensor<2x4xf32> {onnx.name = "x"}) -> (tensor<2x4xf32> {onnx.name = "y"}) {
  %w = graph.read_param @w : tensor<4x4xf32>
  %0 = graph.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32>
  %1 = graph.softmax %0 dim 1 : tensor<2x4xf32>
  %2 = graph.reshape %1 : tensor<2x4xf32> -> tensor<8xf32>
  %3 = graph.reshape %2 : tensor<8xf32> -> tensor<2x4xf32>
  %4 = graph.transpose %3 perm [1, 0] : tensor<2x4xf32>
  %5 = graph.transpose %4 perm [1, 0] : tensor<4x2xf32>
  %6 = graph.gelu %5 approximate tanh : tensor<2x4xf32>
  return %6 : tensor<2x4xf32>
}
