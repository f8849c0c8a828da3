// --cleave-pipeline is cleave-compile's pass pipeline: the same IR as the
// passes one by one, and as cleave-compile --emit=mlir with the same flags.

// A training step: raise, autodiff with SGD, fusion, memory plan, lowering.
// The pipeline runs -cleave-add-loss, -cleave-differentiate and
// -cleave-add-optimizer, whose output is -cleave-autodiff's.
// RUN: cleave-opt %s --cleave-pipeline='train optimizer=sgd lr=0.1 momentum=0.9' > %t.pipeline.mlir
// RUN: cleave-opt %s --cleave-raise --canonicalize --cleave-autodiff='optimizer=sgd lr=0.1 momentum=0.9' --canonicalize --cse --cleave-normalize-collectives --cleave-overlap-collectives --cleave-fuse-linear --cleave-plan-memory --cleave-lower-to-runtime > %t.passes.mlir
// RUN: diff %t.pipeline.mlir %t.passes.mlir
// cleave-compile --train also links the evaluation program (the
// --cleave-eval-pipeline of the same flags, -cleave-link-eval), which
// --no-eval leaves out.
// RUN: cleave-compile %s --train --optimizer sgd --lr 0.1 --momentum 0.9 --no-eval --emit=mlir -o %t.compile.mlir
// RUN: diff -B %t.pipeline.mlir %t.compile.mlir
// RUN: cleave-opt %s --cleave-eval-pipeline='train optimizer=sgd lr=0.1 momentum=0.9' | FileCheck %s --check-prefix=EVAL
// EVAL-LABEL: llvm.func @cleave_eval_run
// EVAL-NOT: _grad
// EVAL: llvm.call @cleave_rt_cross_entropy(
// EVAL-NOT: llvm.call @cleave_rt_sgd
// EVAL: llvm.mlir.global external constant @cleave_eval_program()
// RUN: FileCheck %s --check-prefix=TRAIN < %t.pipeline.mlir
// TRAIN: \22optimizer\22:\22sgd\22,\22lr\22:0.1,\22momentum\22:0.9
// TRAIN-LABEL: llvm.func @cleave_program_run
// TRAIN: llvm.call @cleave_rt_linear
// TRAIN: llvm.call @cleave_rt_unary
// TRAIN: llvm.call @cleave_rt_cross_entropy
// TRAIN: llvm.call @cleave_rt_gemm
// TRAIN: llvm.call @cleave_rt_sgd

// The gradients (a loss without train) in bf16, without fusion.
// RUN: cleave-opt %s --cleave-pipeline='loss=mse precision=bf16 no-fusion' > %t.grad-pipeline.mlir
// RUN: cleave-opt %s --cleave-raise --cleave-mixed-precision=precision=bf16 --canonicalize --cleave-autodiff=loss=mse --canonicalize --cse --cleave-normalize-collectives --cleave-overlap-collectives --cleave-plan-memory --cleave-lower-to-runtime > %t.grad-passes.mlir
// RUN: diff %t.grad-pipeline.mlir %t.grad-passes.mlir
// RUN: FileCheck %s --check-prefix=GRAD < %t.grad-pipeline.mlir
// GRAD: module attributes {cleave.precision = "bf16"}
// GRAD: ("grad.w1\00")
// GRAD-LABEL: llvm.func @cleave_program_run
// GRAD-NOT: cleave_rt_linear
// GRAD: llvm.call @cleave_rt_mse
// GRAD-NOT: cleave_rt_sgd
// GRAD-NOT: cleave_rt_adamw
// GRAD: llvm.return

// The passes and their options; fp16 training scales the loss by default.
// The distribution passes will go between the gradients and the optimizer.
// RUN: cleave-opt %s --cleave-pipeline='train precision=fp16 keep-f32=softmax' --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PASSES
// PASSES: builtin.module(
// PASSES-NEXT: cleave-raise{moe=true moe-capacity-factor=0.000000e+00 moe-group-size=0},
// PASSES-NEXT: cleave-mixed-precision{keep-f32={softmax} precision=f16 router-f32=true},
// PASSES-NEXT: canonicalize
// PASSES-NEXT: cleave-add-loss{accumulate=1 ignore-index= loss=cross-entropy moe-aux-loss=0.000000e+00},
// PASSES-NEXT: cleave-differentiate{loss-scale=6.553600e+04},
// PASSES-NEXT: cleave-add-optimizer{{.*}} optimizer=adamw
// PASSES-NEXT: canonicalize
// PASSES-NEXT: cse,
// PASSES-NEXT: cleave-normalize-collectives,
// PASSES-NEXT: cleave-overlap-collectives,
// PASSES-NEXT: cleave-fuse-linear,
// PASSES-NEXT: cleave-plan-memory
// PASSES-NEXT: cleave-lower-to-runtime
// PASSES-NEXT: )
// Inference: no autodiff, no mixed precision.
// RUN: cleave-opt %s --cleave-pipeline --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=INFER
// INFER: cleave-raise{moe=true moe-capacity-factor=0.000000e+00 moe-group-size=0},
// INFER-NOT: cleave-mixed-precision
// INFER-NOT: cleave-autodiff
// INFER-NOT: cleave-add-loss
// INFER-NOT: cleave-differentiate
// INFER-NOT: cleave-add-optimizer
// INFER: cleave-lower-to-runtime

// A value outside an option's set is rejected by the option's parser, which
// lists the set; the pipeline spells precisions as cleave-compile does.
// RUN: not cleave-opt %s --cleave-pipeline='train optimizer=lion' 2>&1 | FileCheck %s --check-prefix=ERR-OPT
// ERR-OPT: for the --optimizer option: unknown value 'lion' (available: sgd, adamw)
// RUN: not cleave-opt %s --cleave-pipeline='loss=hinge' 2>&1 | FileCheck %s --check-prefix=ERR-LOSS
// ERR-LOSS: for the --loss option: unknown value 'hinge' (available: cross-entropy, mse)
// RUN: not cleave-opt %s --cleave-pipeline='precision=f16' 2>&1 | FileCheck %s --check-prefix=ERR-PRECISION
// ERR-PRECISION: for the --precision option: unknown value 'f16' (available: fp32, bf16, fp16)

// Combinations are checked before any pass runs.
// RUN: not cleave-opt %s --cleave-pipeline='lr=0.1' 2>&1 | FileCheck %s --check-prefix=ERR-TRAIN
// ERR-TRAIN: error: optimizer options need --train
// RUN: not cleave-opt %s --cleave-pipeline='train momentum=0.9' 2>&1 | FileCheck %s --check-prefix=ERR-MOM
// ERR-MOM: error: --momentum, --dampening and --nesterov apply to --optimizer sgd
// RUN: not cleave-opt %s --cleave-pipeline='train optimizer=sgd beta1=0.5' 2>&1 | FileCheck %s --check-prefix=ERR-BETA
// ERR-BETA: error: --beta1, --beta2 and --eps apply to --optimizer adamw
// RUN: not cleave-opt %s --cleave-pipeline='train accumulate=0' 2>&1 | FileCheck %s --check-prefix=ERR-ACC
// ERR-ACC: error: --accumulate must be >= 1
// RUN: not cleave-opt %s --cleave-pipeline='keep-f32=softmax' 2>&1 | FileCheck %s --check-prefix=ERR-KEEP
// ERR-KEEP: error: --router-f32 and --keep-f32 apply to --precision bf16 and fp16
// RUN: not cleave-opt %s --cleave-pipeline='train loss-scale=-1' 2>&1 | FileCheck %s --check-prefix=ERR-SCALE
// ERR-SCALE: error: --loss-scale must be finite and >= 0
// RUN: not cleave-opt %s --cleave-pipeline='train loss-scale-growth-interval=0' 2>&1 | FileCheck %s --check-prefix=ERR-GROWTH
// ERR-GROWTH: error: --loss-scale-growth-interval must be >= 1

graph.param @w1 : tensor<6x3xf32> = dense<0.5> : tensor<6x3xf32>
graph.param @b1 : tensor<6xf32> = dense<0.25> : tensor<6xf32>
graph.param @w2 : tensor<5x6xf32> = dense<0.125> : tensor<5x6xf32>
func.func @forward(%x: tensor<4x3xf32> {onnx.name = "x"}) -> tensor<4x5xf32> {
  %w1 = graph.read_param @w1 : tensor<6x3xf32>
  %b1 = graph.read_param @b1 : tensor<6xf32>
  %w2 = graph.read_param @w2 : tensor<5x6xf32>
  %w1t = graph.transpose %w1 perm [1, 0] : tensor<6x3xf32>
  %0 = graph.matmul %x, %w1t : tensor<4x3xf32>, tensor<3x6xf32>
  %1 = graph.add %b1, %0 : tensor<6xf32>, tensor<4x6xf32>
  // x * sigmoid(x), which -cleave-raise makes a graph.silu.
  %s = graph.sigmoid %1 : tensor<4x6xf32>
  %2 = graph.mul %1, %s : tensor<4x6xf32>, tensor<4x6xf32>
  %w2t = graph.transpose %w2 perm [1, 0] : tensor<5x6xf32>
  %3 = graph.matmul %2, %w2t : tensor<4x6xf32>, tensor<6x5xf32>
  return %3 : tensor<4x5xf32>
}
