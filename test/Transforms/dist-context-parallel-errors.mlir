// Errors of -dist-context-parallel, each a diagnostic and a failed pass.
// RUN: cleave-opt %s -split-input-file -dist-context-parallel -verify-diagnostics -o /dev/null
//
// An axis the mesh lacks, named by the option.
// RUN: not cleave-opt %s -split-input-file -dist-context-parallel="axis=sp" 2>&1 | FileCheck %s --check-prefix=AXIS
// AXIS: error: -dist-context-parallel: the mesh has no axis 'sp'

// A sequence the axis does not divide.
dist.mesh @mesh ["cp" = 4]
func.func @six(%q: tensor<1x2x6x4xf32>) -> tensor<1x2x6x4xf32> {
  // expected-error @+1 {{'graph.attention' op attends over a sequence of 6 tokens, which the 4 devices of axis 'cp' do not divide}}
  %o = graph.attention %q, %q, %q causal : tensor<1x2x6x4xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x4xf32>
  return %o : tensor<1x2x6x4xf32>
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
