// Errors of -dist-data-parallel, each a diagnostic and a failed pass.
// RUN: cleave-opt %s -split-input-file -dist-data-parallel -verify-diagnostics -o /dev/null
//
// A ZeRO stage outside 0..3, and an axis the mesh lacks, named by the
// option.
// RUN: not cleave-opt %s -split-input-file -dist-data-parallel="zero=5" 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: -dist-data-parallel: zero must be 0, 1, 2 or 3, got 5
// RUN: not cleave-opt %s -split-input-file -dist-data-parallel="zero=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: -dist-data-parallel: zero must be 0, 1, 2 or 3, got -1
// RUN: not cleave-opt %s -split-input-file -dist-data-parallel="axis=sp" 2>&1 | FileCheck %s --check-prefix=AXIS
// AXIS: error: -dist-data-parallel: the mesh has no axis 'sp'

// A batch the axis does not divide: each such argument is named with its
// type, its batch and the size of the axis (the first argument divides).
dist.mesh @mesh ["dp" = 4]
// expected-error @+2 {{'func.func' op argument #1 ('tensor<6x2xf32>') has a batch of 6 along dimension 0, which the 4 devices of axis 'dp' do not divide}}
// expected-error @+1 {{'func.func' op argument #2 ('tensor<3xi64>') has a batch of 3 along dimension 0, which the 4 devices of axis 'dp' do not divide}}
func.func @indivisible(%x: tensor<8x16xf32>, %y: tensor<6x2xf32>, %labels: tensor<3xi64>) {
  return
}

// -----

// The batch is what is left of it in a block of the argument's own
// sharding: 2 rows split on "tp" leave 1 per block.
dist.mesh @mesh ["dp" = 2, "tp" = 2]
// expected-error @+1 {{'func.func' op argument #0 ('tensor<2x16xf32>') has a batch of 1 along dimension 0, which the 2 devices of axis 'dp' do not divide}}
func.func @within_block(%x: tensor<2x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"tp"}, {}], priority strategy>}) {
  return
}

// -----

// Accumulating microbatches: the batch is dimension 1.
dist.mesh @mesh ["dp" = 2]
// expected-error @+1 {{'func.func' op argument #0 ('tensor<2x3x16xf32>') has a batch of 3 along dimension 1, which the 2 devices of axis 'dp' do not divide}}
func.func @accumulating(%x: tensor<2x3x16xf32>) attributes {cleave.training_config = {accumulate = 2 : i64, dampening = 0.0 : f64, grad_clip = 0.0 : f64, loss = "mse", lr = 0.5 : f64, momentum = 0.0 : f64, nesterov = false, optimizer = "sgd", weight_decay = 0.0 : f64}} {
  return
}

// -----

// No mesh to split over.
// expected-error @below {{-dist-data-parallel needs a dist.mesh in the module (cleave-compile --mesh, or -dist-add-mesh, adds one)}}
module {
  func.func @no_mesh(%x: tensor<8x16xf32>) {
    return
  }
}

// -----

// Two meshes: which one is meant is not guessed.
// expected-error @below {{-dist-data-parallel needs exactly one dist.mesh, found 2}}
module {
  dist.mesh @a ["dp" = 2]
  dist.mesh @b ["dp" = 4]
  func.func @two_meshes(%x: tensor<8x16xf32>) {
    return
  }
}

// -----

// The mesh has no axis "dp" (the default axis).
// expected-error @below {{-dist-data-parallel: the mesh has no axis 'dp'}}
module {
  dist.mesh @mesh ["tp" = 2]
  func.func @missing_axis(%x: tensor<8x16xf32>) {
    return
  }
}
