// The compiler driver: pipeline, early stops and errors.

// RUN: cleave-compile --print-pipeline | FileCheck %s --check-prefix=PIPE
// PIPE: cleave-raise{{.*}}canonicalize{{.*}}cse{{.*}}cleave-normalize-collectives{{.*}}cleave-overlap-collectives{{.*}}cleave-fuse-linear{{.*}}cleave-plan-memory{{.*}}cleave-lower-to-runtime
// The run function is cut into chunks of --run-chunk-size calls (0: one
// function).
// RUN: cleave-compile --print-pipeline | FileCheck %s --check-prefix=CHUNKS
// CHUNKS: cleave-lower-to-runtime{chunk-size=256
// RUN: cleave-compile --print-pipeline --run-chunk-size 0 | FileCheck %s --check-prefix=NOCHUNKS
// NOCHUNKS: cleave-lower-to-runtime{chunk-size=0
// RUN: not cleave-compile %s --run-chunk-size -1 2>&1 | FileCheck %s --check-prefix=ERR-CHUNKS
// ERR-CHUNKS: cleave-compile: error: --run-chunk-size must be >= 0
// RUN: cleave-compile --print-pipeline --no-fusion | FileCheck %s --check-prefix=NOFUSE
// NOFUSE-NOT: cleave-fuse-linear
// NOFUSE: cleave-plan-memory
// RUN: cleave-compile --print-pipeline --precision bf16 | FileCheck %s --check-prefix=ROUTER
// ROUTER: cleave-mixed-precision{{[{] *}}precision=bf16 router-f32=true}
// RUN: cleave-compile --print-pipeline --precision fp16 --router-f32=false --keep-f32 softmax,layer_norm | FileCheck %s --check-prefix=NOROUTER
// NOROUTER: cleave-mixed-precision{keep-f32={softmax,layer_norm} precision=f16 router-f32=false}
// RUN: not cleave-compile %s --router-f32=false 2>&1 | FileCheck %s --check-prefix=ROUTERFP32
// ROUTERFP32: cleave-compile: error: --router-f32 and --keep-f32 apply to --precision bf16 and fp16

// RUN: cleave-compile %s --emit=mlir -o - | FileCheck %s --check-prefix=MLIR
// MLIR: llvm.func @cleave_rt_unary(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr)
// MLIR: llvm.func @cleave_program_run(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// MLIR: llvm.mlir.global external constant @cleave_program()

// The metadata (ABI version, program kind, arena size...) and the calls,
// their numbers named as in cleave_rt_enums.h (%rt-abi, see lit.cfg.py).
// RUN: cleave-compile %s --emit=llvm -o - | FileCheck %s %rt-abi --check-prefix=LLVM
// LLVM: @cleave_program = local_unnamed_addr constant { i32, i32, i64, i64, i64, ptr, i64, ptr, i64, ptr, ptr, ptr, i32, ptr, ptr, i64, ptr, ptr, i64, i64, ptr, ptr, ptr, ptr, double } { i32 [[#CLEAVE_RT_ABI_VERSION]], i32 [[#CLEAVE_PROGRAM_INFERENCE]], i64 128,
// An exp has no matrix product: the program's FLOPs (the last field) are 0.
// LLVM-SAME: ptr null, ptr null, double 0.000000e+00 }
// LLVM: define void @cleave_program_run(ptr
// LLVM: call void @cleave_rt_unary(ptr %0, i32 [[#CLEAVE_EXP]],

// RUN: cleave-compile %s --emit=obj -o %t.o && test -s %t.o

// RUN: not cleave-compile %S/does-not-exist.onnx 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: cleave-compile: error: cannot open input file '{{.*}}does-not-exist.onnx': No such file or directory

// RUN: not cleave-compile 2>&1 | FileCheck %s --check-prefix=NOINPUT
// NOINPUT: cleave-compile: error: no input model (see --help)

// RUN: not cleave-compile %s --input-shape x=2 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: error: --input-shape applies to ONNX models only

func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
