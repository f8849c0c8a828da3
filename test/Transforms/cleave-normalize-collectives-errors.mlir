// RUN: cleave-opt %s --cleave-normalize-collectives -verify-diagnostics -o /dev/null

// A started collective cannot be normalized: the transposes would come
// between its start and its wait.
dist.mesh @mesh ["tp" = 2]
func.func @started(%x: tensor<4x2xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'dist.all_gather' op is started (async) before it is normalized: run -cleave-normalize-collectives before -cleave-overlap-collectives}}
  %s = dist.all_gather async %x on @mesh ["tp"] dim 1 : tensor<4x2xf32> -> tensor<4x4xf32>
  %y = dist.wait %s : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
