// Errors of -dist-expert-parallel, each a diagnostic and a failed pass.
// RUN: cleave-opt %s -split-input-file -dist-expert-parallel -verify-diagnostics -o /dev/null
//
// An axis the mesh lacks, named by the option.
// RUN: not cleave-opt %s -split-input-file -dist-expert-parallel="axis=xp" 2>&1 | FileCheck %s --check-prefix=AXIS
// AXIS: error: -dist-expert-parallel: the mesh has no axis 'xp'

// More devices than experts.
dist.mesh @mesh ["ep" = 8]
graph.param @w : tensor<4x16x16xf32>
func.func @few_experts(%x: tensor<16x16xf32>, %e: tensor<16x1xi64>) -> tensor<4x32x16xf32> {
  // expected-error @+1 {{'graph.moe_dispatch' op routes to 4 experts, fewer than the 8 devices of axis 'ep' (each device holds at least one expert; give the other devices to dp)}}
  %d = graph.moe_dispatch %x, %e experts 4 capacity 4 groups 8 : tensor<16x16xf32>, tensor<16x1xi64>
  %w = graph.read_param @w : tensor<4x16x16xf32>
  %y = graph.expert_matmul %d, %w : tensor<4x32x16xf32>, tensor<4x16x16xf32>
  return %y : tensor<4x32x16xf32>
}

// -----

// Experts the axis does not divide.
dist.mesh @mesh ["ep" = 4]
graph.param @w : tensor<6x16x16xf32>
func.func @six_experts(%x: tensor<16x16xf32>, %e: tensor<16x1xi64>) -> tensor<6x16x16xf32> {
  // expected-error @+1 {{'graph.moe_dispatch' op routes to 6 experts, which the 4 devices of axis 'ep' do not divide (-dist-expert-parallel gives each device the same number of experts)}}
  %d = graph.moe_dispatch %x, %e experts 6 capacity 4 groups 4 : tensor<16x16xf32>, tensor<16x1xi64>
  %w = graph.read_param @w : tensor<6x16x16xf32>
  %y = graph.expert_matmul %d, %w : tensor<6x16x16xf32>, tensor<6x16x16xf32>
  return %y : tensor<6x16x16xf32>
}

// -----

// Token groups the axis does not divide: a device routes whole groups.
dist.mesh @mesh ["ep" = 2]
graph.param @w : tensor<4x16x16xf32>
func.func @three_groups(%x: tensor<12x16xf32>, %e: tensor<12x1xi64>) -> tensor<4x12x16xf32> {
  // expected-error @+1 {{'graph.moe_dispatch' op routes its tokens in 3 groups, which the 2 devices of axis 'ep' do not divide (each device routes whole groups; --moe-group-size sets their size)}}
  %d = graph.moe_dispatch %x, %e experts 4 capacity 4 groups 3 : tensor<12x16xf32>, tensor<12x1xi64>
  %w = graph.read_param @w : tensor<4x16x16xf32>
  %y = graph.expert_matmul %d, %w : tensor<4x12x16xf32>, tensor<4x16x16xf32>
  return %y : tensor<4x12x16xf32>
}

// -----

// Expert weights that are not a parameter's.
dist.mesh @mesh ["ep" = 2]
func.func @argument_weights(%x: tensor<16x16xf32>, %e: tensor<16x1xi64>, %w: tensor<4x16x16xf32>) -> tensor<4x16x16xf32> {
  %d = graph.moe_dispatch %x, %e experts 4 capacity 4 groups 4 : tensor<16x16xf32>, tensor<16x1xi64>
  // expected-error @+1 {{'graph.expert_matmul' op multiplies by expert weights that are not a parameter's (-dist-expert-parallel splits the stacked parameters [E, ...])}}
  %y = graph.expert_matmul %d, %w : tensor<4x16x16xf32>, tensor<4x16x16xf32>
  return %y : tensor<4x16x16xf32>
}

// -----

// Nothing routed: a dense mixture (--moe-dense) or no mixture at all.
// expected-error @+1 {{-dist-expert-parallel found no routed experts (graph.moe_dispatch and graph.expert_matmul) to split on axis 'ep'; a mixture of experts compiled with --moe-dense stays dense, and a model without one has nothing to split}}
module {
  dist.mesh @mesh ["ep" = 2]
  graph.param @w : tensor<16x16xf32>
  func.func @dense(%x: tensor<16x16xf32>) -> tensor<16x16xf32> {
    %w = graph.read_param @w : tensor<16x16xf32>
    %y = graph.matmul %x, %w : tensor<16x16xf32>, tensor<16x16xf32>
    return %y : tensor<16x16xf32>
  }
}
