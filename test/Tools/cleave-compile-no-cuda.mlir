// --target cuda from a cleave-compile built without the CUDA backend.
// UNSUPPORTED: cuda

// RUN: not cleave-compile %s --target=cuda -o %t 2>&1 | FileCheck %s
// CHECK: cleave-compile: error: --target cuda: this cleave-compile was built without the CUDA backend (CLEAVE_ENABLE_CUDA=OFF)

func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
