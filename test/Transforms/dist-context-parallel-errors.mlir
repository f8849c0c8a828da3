// Errors of -dist-context-parallel, each a diagnostic and a failed pass.
// RUN: cleave-opt %s -split-input-file -dist-context-parallel -verify-diagnostics -o /dev/null
//
// An axis the mesh lacks, named by the option.
// RUN: not cleave-opt %s -split-input-file -dist-context-parallel="axis=sp" 2>&1 | FileCheck %s --check-prefix=AXIS
// AXIS: error: -dist-context-parallel: the mesh has no axis 'sp'
//
// An unknown form.
// RUN: not cleave-opt %s -split-input-file -dist-context-parallel="form=star" 2>&1 | FileCheck %s --check-prefix=FORM
// FORM: error: -dist-context-parallel: form must be 'ring' or 'gather', got 'star'
//
// An unknown layout.
// RUN: not cleave-opt %s -split-input-file -dist-context-parallel="layout=striped" 2>&1 | FileCheck %s --check-prefix=LAYOUT
// LAYOUT: error: -dist-context-parallel: layout must be 'zigzag' or 'contiguous', got 'striped'

// A sequence the axis does not divide.
dist.mesh @mesh ["cp" = 4]
func.func @six(%q: tensor<1x2x6x4xf32>) -> tensor<1x2x6x4xf32> {
  // expected-error @+1 {{'graph.attention' op attends over a sequence of 6 tokens, which the 4 devices of axis 'cp' do not divide}}
  %o = graph.attention %q, %q, %q causal : tensor<1x2x6x4xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x4xf32>
  return %o : tensor<1x2x6x4xf32>
}

// -----

// The zigzag layout's 2n chunks: 4 devices take 4 tokens contiguously only.
dist.mesh @mesh ["cp" = 4]
func.func @four(%q: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  // expected-error @+1 {{'graph.attention' op attends over a sequence of 4 tokens, which the 4 devices of axis 'cp' do not divide into 8 chunks, two per device (the zigzag layout; layout=contiguous takes it)}}
  %o = graph.attention %q, %q, %q causal : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  return %o : tensor<1x2x4x4xf32>
}

// -----

// Cross-attention: queries and keys of other lengths.
dist.mesh @mesh ["cp" = 2]
func.func @cross(%q: tensor<1x2x4x4xf32>, %k: tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32> {
  // expected-error @+1 {{'graph.attention' op attends 4 queries to 8 keys: -dist-context-parallel splits one sequence of self-attention}}
  %o = graph.attention %q, %k, %k : tensor<1x2x4x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
  return %o : tensor<1x2x4x4xf32>
}

// -----

// Nothing to split.
// expected-error @+1 {{-dist-context-parallel found no attention (graph.attention) whose sequence to split on axis 'cp'}}
module {
  dist.mesh @mesh ["cp" = 2]
  func.func @mlp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    return %x : tensor<4x8xf32>
  }
}

// -----

// The ring takes no mask operand (the gather form does).
dist.mesh @mesh ["cp" = 2]
func.func @masked(%q: tensor<1x2x4x4xf32>, %m: tensor<4x4xi1>) -> tensor<1x2x4x4xf32> {
  // expected-error @+1 {{'graph.attention' op has a mask operand, which the ring form of context parallelism does not take (causal masking it does; form=gather takes masks)}}
  %o = graph.attention %q, %q, %q mask %m : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<4x4xi1>
  return %o : tensor<1x2x4x4xf32>
}
