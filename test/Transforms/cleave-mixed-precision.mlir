// -cleave-mixed-precision: 16-bit compute, f32 parameters and signature.
// RUN: cleave-opt %s --split-input-file --cleave-mixed-precision | FileCheck %s --check-prefix=BF16
// RUN: cleave-opt %s --split-input-file --cleave-mixed-precision=precision=f16 | FileCheck %s --check-prefix=F16
// RUN: cleave-opt %s --split-input-file --cleave-mixed-precision=precision=f16 --cleave-autodiff="optimizer=adamw" --canonicalize | FileCheck %s --check-prefix=TRAIN
// RUN: not cleave-opt %s --split-input-file --cleave-mixed-precision=precision=f8 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not cleave-opt %s --split-input-file --cleave-mixed-precision --cleave-mixed-precision 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="optimizer=sgd" --cleave-mixed-precision 2>&1 | FileCheck %s --check-prefix=AFTER

// UNKNOWN: error: unknown precision 'f8' (available: bf16, f16)
// TWICE: error: the module already computes in bf16 (-cleave-mixed-precision ran before)
// AFTER: error: 'graph.assign' op updates a parameter: run -cleave-mixed-precision before -cleave-autodiff

// The parameter stays f32 and is cast where read; the f32 argument is cast
// on entry, the constant converted, the integer cast retargeted, the
// cross-entropy inside the model reads the 16-bit logits (its result is
// f32), an mse computes in f32 (its result has its operands' type), and
// the result is cast back to f32.
// BF16: module attributes {cleave.precision = "bf16"}
// BF16: graph.param @w : tensor<3x5xf32>
// BF16-LABEL: func.func @forward
// BF16-SAME: (%[[X:.*]]: tensor<4x3xf32>, %[[I:.*]]: tensor<4xi64>) -> (tensor<4x5xf32>, tensor<f32>, tensor<f32>)
// BF16: %[[XL:.*]] = graph.cast %[[X]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// BF16: %[[W:.*]] = graph.read_param @w : tensor<3x5xf32>
// BF16: %[[WL:.*]] = graph.cast %[[W]] : tensor<3x5xf32> -> tensor<3x5xbf16>
// BF16: %[[Y:.*]] = graph.matmul %[[XL]], %[[WL]] : tensor<4x3xbf16>, tensor<3x5xbf16>
// BF16: %[[C:.*]] = graph.constant dense<[1.000000e+00, 2.500000e-01, 1.000980e-01, 3.000000e+00, 3.276800e+04]> : tensor<5xbf16>
// BF16: %[[Z:.*]] = graph.add %[[Y]], %[[C]] : tensor<4x5xbf16>, tensor<5xbf16>
// BF16: %[[IF:.*]] = graph.cast %[[I]] : tensor<4xi64> -> tensor<4xbf16>
// BF16: %[[G:.*]] = graph.gelu %[[Z]] : tensor<4x5xbf16>
// BF16: %[[L:.*]] = graph.cross_entropy %[[G]], %[[I]] : tensor<4x5xbf16>, tensor<4xi64>
// BF16: %[[ZF:.*]] = graph.cast %[[Z]] : tensor<4x5xbf16> -> tensor<4x5xf32>
// BF16: %[[YF:.*]] = graph.cast %[[Y]] : tensor<4x5xbf16> -> tensor<4x5xf32>
// BF16: %[[M:.*]] = graph.mse %[[ZF]], %[[YF]] : tensor<4x5xf32>
// BF16: %[[OUT:.*]] = graph.cast %[[G]] : tensor<4x5xbf16> -> tensor<4x5xf32>
// BF16: return %[[OUT]], %[[L]], %[[M]] : tensor<4x5xf32>, tensor<f32>, tensor<f32>

// f16 rounds the constant to its own precision.
// F16: module attributes {cleave.precision = "f16"}
// F16: graph.matmul %{{.*}}, %{{.*}} : tensor<4x3xf16>, tensor<3x5xf16>
// F16: graph.constant dense<[1.000000e+00, 2.500000e-01, 9.997550e-02, 3.000000e+00, 3.276800e+04]> : tensor<5xf16>

// Trained: the loss reads the 16-bit logits (no f32 copy of them or of
// their gradient); the gradient of the parameter's cast is the cast back,
// so the update reads an f32 gradient; the backward runs in f16.
// TRAIN-LABEL: func.func @train_step
// TRAIN: graph.cross_entropy %{{.*}}, %{{.*}} : tensor<4x5xf16>, tensor<4xi64>
// TRAIN: %[[DY:.*]] = graph.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x5xf16>, tensor<4xi64>, tensor<f32>
// TRAIN: %[[DG:.*]] = graph.gelu_grad %{{.*}}, %[[DY]] : tensor<4x5xf16>
// TRAIN: %[[DW:.*]] = graph.matmul %{{.*}}, %[[DG]] : tensor<3x4xf16>, tensor<4x5xf16>
// TRAIN: %[[DWF:.*]] = graph.cast %[[DW]] : tensor<3x5xf16> -> tensor<3x5xf32>
// TRAIN: graph.adamw_update @w, %[[DWF]], %{{.*}} moments @w.m, @w.v
graph.param @w : tensor<3x5xf32>
func.func @forward(%x: tensor<4x3xf32>, %i: tensor<4xi64>) -> (tensor<4x5xf32>, tensor<f32>, tensor<f32>) {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  %c = graph.constant dense<[1.0, 0.25, 0.1, 3.0, 32768.0]> : tensor<5xf32>
  %z = graph.add %y, %c : tensor<4x5xf32>, tensor<5xf32>
  %f = graph.cast %i : tensor<4xi64> -> tensor<4xf32>
  %g = graph.gelu %z : tensor<4x5xf32>
  %l = graph.cross_entropy %g, %i : tensor<4x5xf32>, tensor<4xi64>
  %m = graph.mse %z, %y : tensor<4x5xf32>
  return %g, %l, %m : tensor<4x5xf32>, tensor<f32>, tensor<f32>
}

