// -cleave-mixed-precision: 16-bit compute, f32 parameters and signature.
// RUN: cleave-opt %s --split-input-file --cleave-mixed-precision | FileCheck %s --check-prefix=BF16
// RUN: cleave-opt %s --split-input-file --cleave-mixed-precision=precision=f16 | FileCheck %s --check-prefix=F16
// RUN: cleave-opt %s --split-input-file --cleave-mixed-precision | FileCheck %s --check-prefix=ROUTER
// RUN: cleave-opt %s --split-input-file --cleave-mixed-precision=router-f32=false | FileCheck %s --check-prefix=NOROUTER
// RUN: cleave-opt %s --split-input-file --cleave-mixed-precision="keep-f32=softmax,graph.layer_norm" | FileCheck %s --check-prefix=KEEP
// RUN: not cleave-opt %s --split-input-file --cleave-mixed-precision="keep-f32=softmax,lyer_norm" 2>&1 | FileCheck %s --check-prefix=KEEPBAD
// RUN: cleave-opt %s --split-input-file --cleave-mixed-precision=precision=f16 --cleave-autodiff="optimizer=adamw" --canonicalize | FileCheck %s --check-prefix=TRAIN
// RUN: not cleave-opt %s --split-input-file --cleave-mixed-precision=precision=f8 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not cleave-opt %s --split-input-file --cleave-mixed-precision --cleave-mixed-precision 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not cleave-opt %s --split-input-file --cleave-autodiff="optimizer=sgd" --cleave-mixed-precision 2>&1 | FileCheck %s --check-prefix=AFTER

// UNKNOWN: for the --precision option: unknown value 'f8' (available: bf16, f16)
// TWICE: error: the module already computes in bf16 (-cleave-mixed-precision ran before)
// AFTER: error: 'graph.assign' op updates a parameter: run -cleave-mixed-precision before -cleave-autodiff
// KEEPBAD: error: keep-f32: 'lyer_norm' is not a graph op (give mnemonics such as softmax, layer_norm)

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
// TRAIN: %[[DG:.*]] = graph.gelu_grad %{{.*}}, %[[DY]]{{.*}} : tensor<4x5xf16>
// TRAIN: %[[DW:.*]] = graph.matmul %{{.*}}, %[[DG]]{{.*}} : tensor<3x4xf16>, tensor<4x5xf16>
// TRAIN: %[[DWF:.*]] = graph.cast %[[DW]]{{.*}} : tensor<3x5xf16> -> tensor<3x5xf32>
// TRAIN: %[[NEW:.*]], %{{.*}}, %{{.*}} = graph.adamw %{{.*}}, %[[DWF]], %{{.*}}, %{{.*}}, %{{.*}}
// TRAIN: graph.assign @w, %[[NEW]] {{.*}}:
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


// -----

// MoE routing stays f32 (router-f32, the default): the top-k, and the
// softmax, matmul, transpose and weight read that only feed it, compute in
// f32 from the tokens cast up; the tokens, which feed the experts too, are
// 16-bit; the top-k values are cast down for their uses outside. With
// router-f32=false everything is 16-bit.
// ROUTER-LABEL: func.func @forward
// ROUTER: %[[XL:.*]] = graph.cast %{{.*}} : tensor<6x4xf32> -> tensor<6x4xbf16>
// ROUTER: %[[T:.*]] = graph.tanh %[[XL]] : tensor<6x4xbf16>
// ROUTER: %[[WR:.*]] = graph.read_param @wr : tensor<3x4xf32>
// ROUTER: %[[WRT:.*]] = graph.transpose %[[WR]] perm [1, 0] : tensor<3x4xf32>
// ROUTER: %[[TF:.*]] = graph.cast %[[T]] : tensor<6x4xbf16> -> tensor<6x4xf32>
// ROUTER: %[[L:.*]] = graph.matmul %[[TF]], %[[WRT]] : tensor<6x4xf32>, tensor<4x3xf32>
// ROUTER: %[[P:.*]] = graph.softmax %[[L]] dim 1 : tensor<6x3xf32>
// ROUTER: %[[V:.*]], %[[I:.*]] = graph.topk %[[P]] k 2 dim 1 : tensor<6x3xf32>
// ROUTER: %[[VL:.*]] = graph.cast %[[V]] : tensor<6x2xf32> -> tensor<6x2xbf16>
// ROUTER: %[[S:.*]] = graph.reduce sum %[[VL]] dims [1] keepdim : tensor<6x2xbf16>
// ROUTER: %[[W1:.*]] = graph.read_param @w1 : tensor<4x5xf32>
// ROUTER: %[[W1L:.*]] = graph.cast %[[W1]] : tensor<4x5xf32> -> tensor<4x5xbf16>
// ROUTER: graph.matmul %[[T]], %[[W1L]] : tensor<6x4xbf16>, tensor<4x5xbf16>
// NOROUTER-LABEL: func.func @forward
// NOROUTER: graph.matmul %{{.*}}, %{{.*}} : tensor<6x4xbf16>, tensor<4x3xbf16>
// NOROUTER: graph.topk %{{.*}} k 2 dim 1 : tensor<6x3xbf16>
graph.param @wr : tensor<3x4xf32>
graph.param @w1 : tensor<4x5xf32>
func.func @forward(%x: tensor<6x4xf32>) -> (tensor<6x1xf32>, tensor<6x5xf32>, tensor<6x2xi64>) {
  %t = graph.tanh %x : tensor<6x4xf32>
  %wr = graph.read_param @wr : tensor<3x4xf32>
  %wrt = graph.transpose %wr perm [1, 0] : tensor<3x4xf32>
  %logits = graph.matmul %t, %wrt : tensor<6x4xf32>, tensor<4x3xf32>
  %p = graph.softmax %logits dim 1 : tensor<6x3xf32>
  %v, %i = graph.topk %p k 2 dim 1 : tensor<6x3xf32>
  %s = graph.reduce sum %v dims [1] keepdim : tensor<6x2xf32>
  %w1 = graph.read_param @w1 : tensor<4x5xf32>
  %h = graph.matmul %t, %w1 : tensor<6x4xf32>, tensor<4x5xf32>
  return %s, %h, %i : tensor<6x1xf32>, tensor<6x5xf32>, tensor<6x2xi64>
}

// -----

// keep-f32 (by mnemonic, with or without "graph."), and the cleave.keep_f32
// attribute: the op reads its operands cast up to f32 (the f32 value itself
// where this pass narrowed one: the argument, the parameters) and stores
// f32; the ops after it read its result cast down, and a return reads the
// f32 result itself.
// KEEP: graph.param @b : tensor<8xf32>
// KEEP: func.func @forward
// KEEP-SAME: (%[[X:.*]]: tensor<2x8xf32>)
// KEEP: %[[G:.*]] = graph.read_param @g : tensor<8xf32>
// KEEP: %[[B:.*]] = graph.read_param @b : tensor<8xf32>
// KEEP: %[[LN:.*]] = graph.layer_norm %[[X]], %[[G]], %[[B]] dim 1 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
// KEEP: %[[LNL:.*]] = graph.cast %[[LN]] : tensor<2x8xf32> -> tensor<2x8xbf16>
// KEEP: %[[T:.*]] = graph.tanh %[[LNL]] : tensor<2x8xbf16>
// KEEP: %[[TF:.*]] = graph.cast %[[T]] : tensor<2x8xbf16> -> tensor<2x8xf32>
// KEEP: %[[S:.*]] = graph.softmax %[[TF]] dim 1 : tensor<2x8xf32>
// KEEP: %[[SL:.*]] = graph.cast %[[S]] : tensor<2x8xf32> -> tensor<2x8xbf16>
// KEEP: %[[E:.*]] = graph.exp %[[X]] {cleave.keep_f32} : tensor<2x8xf32>
// KEEP: %[[EL:.*]] = graph.cast %[[E]] : tensor<2x8xf32> -> tensor<2x8xbf16>
// KEEP: %[[SUM:.*]] = graph.add %[[SL]], %[[EL]] : tensor<2x8xbf16>, tensor<2x8xbf16>
// KEEP: %[[OUT:.*]] = graph.cast %[[SUM]] : tensor<2x8xbf16> -> tensor<2x8xf32>
// KEEP: return %[[OUT]], %[[S]] : tensor<2x8xf32>, tensor<2x8xf32>
graph.param @g : tensor<8xf32>
graph.param @b : tensor<8xf32>
func.func @forward(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %g = graph.read_param @g : tensor<8xf32>
  %b = graph.read_param @b : tensor<8xf32>
  %ln = graph.layer_norm %x, %g, %b dim 1 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
  %t = graph.tanh %ln : tensor<2x8xf32>
  %s = graph.softmax %t dim 1 : tensor<2x8xf32>
  %e = graph.exp %x {cleave.keep_f32} : tensor<2x8xf32>
  %sum = graph.add %s, %e : tensor<2x8xf32>, tensor<2x8xf32>
  return %sum, %s : tensor<2x8xf32>, tensor<2x8xf32>
}
