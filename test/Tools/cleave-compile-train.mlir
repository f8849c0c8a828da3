// cleave-compile's training and precision flags: what reaches the program,
// and each inconsistent combination as a clear error.
// RUN: cleave-compile %s --train --precision bf16 --emit=mlir -o - | FileCheck %s --check-prefix=BF16
// RUN: cleave-compile %s --train --precision fp16 --emit=mlir -o - | FileCheck %s --check-prefix=FP16
// RUN: cleave-compile %s --train --precision fp16 --loss-scale 0 --emit=mlir -o - | FileCheck %s --check-prefix=FP16-NOSCALE
// RUN: cleave-compile %s --train --loss-scale 128 --loss-scale-growth-interval 10 --emit=mlir -o - | FileCheck %s --check-prefix=FP32-SCALE
// RUN: cleave-compile %s --precision bf16 --emit=mlir -o - | FileCheck %s --check-prefix=INFER

// The training configuration records the precision and the loss scaler;
// the scaler's state is part of the program's parameters.
// BF16: \22precision\22:\22bf16\22,\22run_time_hyperparameters\22:true}
// FP16: \22precision\22:\22f16\22,\22loss_scale\22:65536,\22loss_scale_growth_interval\22:2000,\22run_time_hyperparameters\22:true}
// FP16-DAG: amp.loss_scale
// FP16-DAG: amp.growth_tracker
// FP16-NOSCALE: \22precision\22:\22f16\22,\22run_time_hyperparameters\22:true}
// FP16-NOSCALE-NOT: amp.loss_scale
// FP32-SCALE: \22accumulate\22:1,\22loss_scale\22:128,\22loss_scale_growth_interval\22:10,\22run_time_hyperparameters\22:true}
// INFER: llvm.func @cleave_program_run

// RUN: not cleave-compile %s --precision fp8 2>&1 | FileCheck %s --check-prefix=ERR-PRECISION
// ERR-PRECISION: cleave-compile: for the --precision option: unknown value 'fp8' (available: fp32, bf16, fp16)
// RUN: not cleave-compile %s --loss-scale 8 2>&1 | FileCheck %s --check-prefix=ERR-NOTRAIN
// ERR-NOTRAIN: cleave-compile: error: optimizer options need --train
// RUN: not cleave-compile %s --train --loss-scale -1 2>&1 | FileCheck %s --check-prefix=ERR-SCALE
// ERR-SCALE: cleave-compile: error: --loss-scale must be finite and >= 0
// RUN: not cleave-compile %s --train --loss-scale-growth-interval 0 2>&1 | FileCheck %s --check-prefix=ERR-GROWTH
// ERR-GROWTH: cleave-compile: error: --loss-scale-growth-interval must be >= 1
// RUN: not cleave-compile %s --train --optimizer lion 2>&1 | FileCheck %s --check-prefix=ERR-OPT
// ERR-OPT: cleave-compile: for the --optimizer option: unknown value 'lion' (available: sgd, adamw)
// RUN: not cleave-compile %s --loss hinge 2>&1 | FileCheck %s --check-prefix=ERR-LOSS
// ERR-LOSS: cleave-compile: for the --loss option: unknown value 'hinge' (available: cross-entropy, mse)
// RUN: not cleave-compile %s --train --momentum 0.9 2>&1 | FileCheck %s --check-prefix=ERR-MOM
// ERR-MOM: cleave-compile: error: --momentum, --dampening and --nesterov apply to --optimizer sgd
// RUN: not cleave-compile %s --lr 0.1 2>&1 | FileCheck %s --check-prefix=ERR-LR
// ERR-LR: cleave-compile: error: optimizer options need --train

graph.param @w : tensor<3x5xf32>
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  return %y : tensor<4x5xf32>
}
