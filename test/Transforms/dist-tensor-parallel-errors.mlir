// Errors of -dist-tensor-parallel, each a diagnostic and a failed pass.
// The reasons name the op that refuses the split by its location, so the
// ops named are given one (loc("...")).
// RUN: cleave-opt %s -split-input-file -dist-tensor-parallel -verify-diagnostics -o /dev/null
//
// An axis the mesh lacks, named by the option.
// RUN: not cleave-opt %s -split-input-file -dist-tensor-parallel="axis=sp" 2>&1 | FileCheck %s --check-prefix=AXIS
// AXIS: error: -dist-tensor-parallel: the mesh has no axis 'sp'

// Heads the axis does not divide: 12 query features into 3 heads on 2
// devices. The error is on the projection and names the reshape into
// heads and the sizes.
dist.mesh @mesh ["tp" = 2]
graph.param @wq : tensor<16x12xf32>
graph.param @wo : tensor<12x16xf32>
func.func @three_heads(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %wq = graph.read_param @wq : tensor<16x12xf32>
  // expected-error @+1 {{'graph.matmul' op cannot be split on axis 'tp': graph.reshape at loc("q_heads") splits 12 features into 3 heads, which the 2 devices of axis 'tp' do not divide}}
  %q0 = graph.matmul %x, %wq : tensor<2x8x16xf32>, tensor<16x12xf32>
  %q1 = graph.reshape %q0 : tensor<2x8x12xf32> -> tensor<2x8x3x4xf32> loc("q_heads")
  %q = graph.transpose %q1 perm [0, 2, 1, 3] : tensor<2x8x3x4xf32>
  %a = graph.attention %q, %q, %q causal : tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>
  %at = graph.transpose %a perm [0, 2, 1, 3] : tensor<2x3x8x4xf32>
  %ar = graph.reshape %at : tensor<2x8x3x4xf32> -> tensor<2x8x12xf32>
  %wo = graph.read_param @wo : tensor<12x16xf32>
  %o = graph.matmul %ar, %wo : tensor<2x8x12xf32>, tensor<12x16xf32>
  return %o : tensor<2x8x16xf32>
}

// -----

// Grouped-query attention on 4 devices: the 4 query heads divide, the 2
// key/value heads do not. The query's projection reaches the attention
// first; the error names the attention and the heads it cannot split.
dist.mesh @mesh ["tp" = 4]
graph.param @wq : tensor<16x16xf32>
graph.param @wk : tensor<16x8xf32>
graph.param @wv : tensor<16x8xf32>
graph.param @wo : tensor<16x16xf32>
func.func @gqa(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %wq = graph.read_param @wq : tensor<16x16xf32>
  // expected-error @+1 {{'graph.matmul' op cannot be split on axis 'tp': graph.attention at loc("attn") has 2 heads, which the 4 devices of axis 'tp' do not divide}}
  %q0 = graph.matmul %x, %wq : tensor<2x8x16xf32>, tensor<16x16xf32>
  %q1 = graph.reshape %q0 : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %q = graph.transpose %q1 perm [0, 2, 1, 3] : tensor<2x8x4x4xf32>
  %wk = graph.read_param @wk : tensor<16x8xf32>
  %k0 = graph.matmul %x, %wk : tensor<2x8x16xf32>, tensor<16x8xf32>
  %k1 = graph.reshape %k0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %k = graph.transpose %k1 perm [0, 2, 1, 3] : tensor<2x8x2x4xf32>
  %wv = graph.read_param @wv : tensor<16x8xf32>
  %v0 = graph.matmul %x, %wv : tensor<2x8x16xf32>, tensor<16x8xf32>
  %v1 = graph.reshape %v0 : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %v = graph.transpose %v1 perm [0, 2, 1, 3] : tensor<2x8x2x4xf32>
  %a = graph.attention %q, %k, %v causal : tensor<2x4x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32> loc("attn")
  %at = graph.transpose %a perm [0, 2, 1, 3] : tensor<2x4x8x4xf32>
  %ar = graph.reshape %at : tensor<2x8x4x4xf32> -> tensor<2x8x16xf32>
  %wo = graph.read_param @wo : tensor<16x16xf32>
  %o = graph.matmul %ar, %wo : tensor<2x8x16xf32>, tensor<16x16xf32>
  return %o : tensor<2x8x16xf32>
}

// -----

// Indivisible heads are an error even when another pair in the module
// could be split (here an MLP before the attention).
dist.mesh @mesh ["tp" = 2]
graph.param @w1 : tensor<16x32xf32>
graph.param @w2 : tensor<32x16xf32>
graph.param @wq : tensor<16x12xf32>
graph.param @wo : tensor<12x16xf32>
func.func @mlp_and_three_heads(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %w1 = graph.read_param @w1 : tensor<16x32xf32>
  %h = graph.matmul %x, %w1 : tensor<2x8x16xf32>, tensor<16x32xf32>
  %g = graph.gelu %h : tensor<2x8x32xf32>
  %w2 = graph.read_param @w2 : tensor<32x16xf32>
  %y = graph.matmul %g, %w2 : tensor<2x8x32xf32>, tensor<32x16xf32>
  %wq = graph.read_param @wq : tensor<16x12xf32>
  // expected-error @+1 {{'graph.matmul' op cannot be split on axis 'tp': graph.reshape at loc("q_heads") splits 12 features into 3 heads, which the 2 devices of axis 'tp' do not divide}}
  %q0 = graph.matmul %y, %wq : tensor<2x8x16xf32>, tensor<16x12xf32>
  %q1 = graph.reshape %q0 : tensor<2x8x12xf32> -> tensor<2x8x3x4xf32> loc("q_heads")
  %q = graph.transpose %q1 perm [0, 2, 1, 3] : tensor<2x8x3x4xf32>
  %a = graph.attention %q, %q, %q causal : tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>
  %at = graph.transpose %a perm [0, 2, 1, 3] : tensor<2x3x8x4xf32>
  %ar = graph.reshape %at : tensor<2x8x3x4xf32> -> tensor<2x8x12xf32>
  %wo = graph.read_param @wo : tensor<12x16xf32>
  %o = graph.matmul %ar, %wo : tensor<2x8x12xf32>, tensor<12x16xf32>
  return %o : tensor<2x8x16xf32>
}

// -----

// A projection but no pair: the only projection's output is the result
// (a language-model head). The error says why the first projection was
// refused, naming the op that needs its features whole.
// expected-error @below {{-dist-tensor-parallel found no pair of projections to split on axis 'tp' (2 devices); the first projection: func.return at loc("result") reads the features, which it needs whole}}
module {
  dist.mesh @mesh ["tp" = 2]
  graph.param @head : tensor<8x32xf32>
  func.func @lm_head(%x: tensor<4x8xf32>) -> tensor<4x32xf32> {
    %w = graph.read_param @head : tensor<8x32xf32>
    %y = graph.matmul %x, %w : tensor<4x8xf32>, tensor<8x32xf32>
    return %y : tensor<4x32xf32> loc("result")
  }
}

// -----

// Two projections in a row whose features meet a residual: the first
// one's output is added to the argument (refused there), the second's is
// returned.
// expected-error @below {{-dist-tensor-parallel found no pair of projections to split on axis 'tp' (2 devices); the first projection: graph.add at loc("residual") combines the features with a value that is not split with them (a residual, a norm's output)}}
module {
  dist.mesh @mesh ["tp" = 2]
  graph.param @w1 : tensor<8x8xf32>
  graph.param @w2 : tensor<8x8xf32>
  func.func @residual(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %w1 = graph.read_param @w1 : tensor<8x8xf32>
    %h = graph.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x8xf32>
    %r = graph.add %x, %h : tensor<4x8xf32>, tensor<4x8xf32> loc("residual")
    %w2 = graph.read_param @w2 : tensor<8x8xf32>
    %y = graph.matmul %r, %w2 : tensor<4x8xf32>, tensor<8x8xf32>
    return %y : tensor<4x8xf32>
  }
}

// -----

// No projection at all: no matmul reads a parameter.
// expected-error @below {{-dist-tensor-parallel found no pair of projections to split on axis 'tp' (2 devices)}}
module {
  dist.mesh @mesh ["tp" = 2]
  func.func @no_projection(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
    %y = graph.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
    return %y : tensor<4x8xf32>
  }
}

// -----

// The mesh has no axis "tp" (the default axis).
// expected-error @below {{-dist-tensor-parallel: the mesh has no axis 'tp'}}
module {
  dist.mesh @mesh ["dp" = 2]
  func.func @missing_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    return %x : tensor<4x8xf32>
  }
}

// -----

// No mesh to split over.
// expected-error @below {{-dist-tensor-parallel needs a dist.mesh in the module (cleave-compile --mesh, or -dist-add-mesh, adds one)}}
module {
  func.func @no_mesh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    return %x : tensor<4x8xf32>
  }
}

// -----

// Two meshes: which one is meant is not guessed.
// expected-error @below {{-dist-tensor-parallel needs exactly one dist.mesh, found 2}}
module {
  dist.mesh @a ["tp" = 2]
  dist.mesh @b ["tp" = 4]
  func.func @two_meshes(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    return %x : tensor<4x8xf32>
  }
}

// -----

// Output features the axis does not divide are an error naming the
// projection, even next to a pair that splits.
dist.mesh @mesh ["tp" = 2]
graph.param @w1 : tensor<8x16xf32>
graph.param @w2 : tensor<16x8xf32>
graph.param @u1 : tensor<8x15xf32>
graph.param @u2 : tensor<15x8xf32>
func.func @two(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %w1 = graph.read_param @w1 : tensor<8x16xf32>
  %h = graph.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32>
  %g = graph.relu %h : tensor<4x16xf32>
  %w2 = graph.read_param @w2 : tensor<16x8xf32>
  %y = graph.matmul %g, %w2 : tensor<4x16xf32>, tensor<16x8xf32>
  %u1 = graph.read_param @u1 : tensor<8x15xf32>
  // expected-error @+1 {{'graph.matmul' op cannot be split on axis 'tp': its 15 output features are not divisible by the 2 devices of the axis}}
  %k = graph.matmul %x, %u1 : tensor<4x8xf32>, tensor<8x15xf32>
  %kg = graph.relu %k : tensor<4x15xf32>
  %u2 = graph.read_param @u2 : tensor<15x8xf32>
  %z = graph.matmul %kg, %u2 : tensor<4x15xf32>, tensor<15x8xf32>
  return %y, %z : tensor<4x8xf32>, tensor<4x8xf32>
}
