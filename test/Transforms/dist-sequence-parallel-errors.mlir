// RUN: cleave-opt %s -split-input-file -dist-sequence-parallel -verify-diagnostics -o /dev/null

// Tokens that the axis does not divide: an error naming the projection.
dist.mesh @mesh ["tp" = 2]
graph.param @w1 : tensor<8x16xf32> sharding <@mesh, [{}, {"tp"}], priority strategy>
graph.param @w2 : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy>
func.func @odd_tokens(%x: tensor<2x7x8xf32>) -> tensor<2x7x8xf32> {
  %w1 = graph.read_param @w1 : tensor<8x16xf32>
  %h = graph.matmul %x, %w1 : tensor<2x7x8xf32>, tensor<8x16xf32>
  %w2 = graph.read_param @w2 : tensor<16x8xf32>
  // expected-error @+1 {{'graph.matmul' op cannot split its 7 tokens on the 2 devices of axis 'tp' (-dist-sequence-parallel)}}
  %y = graph.matmul %h, %w2 : tensor<2x7x16xf32>, tensor<16x8xf32>
  return %y : tensor<2x7x8xf32>
}

// -----

// Nothing split on the axis: run -dist-tensor-parallel first.
// expected-error @+1 {{-dist-sequence-parallel found no row-parallel projection split on axis 'tp' (run -dist-tensor-parallel first)}}
module {
  dist.mesh @mesh ["tp" = 2]
  graph.param @w : tensor<8x8xf32>
  func.func @whole(%x: tensor<2x8x8xf32>) -> tensor<2x8x8xf32> {
    %w = graph.read_param @w : tensor<8x8xf32>
    %y = graph.matmul %x, %w : tensor<2x8x8xf32>, tensor<8x8xf32>
    return %y : tensor<2x8x8xf32>
  }
}

// -----

// expected-error @+1 {{-dist-sequence-parallel: the mesh has no axis 'tp'}}
module {
  dist.mesh @mesh ["dp" = 2]
}
