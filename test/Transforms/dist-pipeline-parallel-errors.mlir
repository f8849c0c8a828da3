// Errors of -dist-pipeline-parallel, each a diagnostic naming the numbers
// or the function, and a failed pass.
// RUN: cleave-opt %s -split-input-file -dist-pipeline-parallel -verify-diagnostics -o /dev/null
// RUN: not cleave-opt %s -split-input-file -dist-pipeline-parallel="schedule=zigzag" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// SCHEDULE: unknown schedule 'zigzag' (gpipe, 1f1b or interleaved)
// RUN: not cleave-opt %s -split-input-file -dist-pipeline-parallel="virtual=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=VIRTUAL
// VIRTUAL: virtual=2 needs schedule=interleaved (gpipe and 1f1b run one chunk per stage)
// RUN: not cleave-opt %s -split-input-file -dist-pipeline-parallel="schedule=interleaved virtual=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHUNKS
// CHUNKS: 2 stages x 2 chunks need at least 4 layers; the step has 2 (graph.layer tags)
// RUN: not cleave-opt %s -split-input-file -dist-pipeline-parallel="split=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SPLIT
// SPLIT: split: 0 is not a layer after the previous chunk's first and before 2

// More stages than layers.
dist.mesh @mesh ["pp" = 4]
graph.param @w0 : tensor<4x4xf32> = dense<0.5> : tensor<4x4xf32>
// expected-error @+1 {{'func.func' op (-dist-pipeline-parallel): 4 stages x 1 chunks need at least 4 layers; the step has 2 (graph.layer tags)}}
func.func @shallow(%x: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {dist.partitioned} {
  %w0 = graph.read_param @w0 : tensor<4x4xf32>
  %h0 = graph.matmul %x, %w0 {graph.layer = 0 : i64} : tensor<4x4xf32>, tensor<4x4xf32>
  %h1 = graph.matmul %h0, %w0 {graph.layer = 1 : i64} : tensor<4x4xf32>, tensor<4x4xf32>
  return %h1 : tensor<4x4xf32>
}

// -----

// The step is not partitioned yet.
dist.mesh @mesh ["pp" = 2]
// expected-error @+1 {{'func.func' op is not one device's program; run -dist-partition before -dist-pipeline-parallel}}
func.func @global(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %h0 = graph.relu %x {graph.layer = 0 : i64} : tensor<4x4xf32>
  %h1 = graph.relu %h0 {graph.layer = 1 : i64} : tensor<4x4xf32>
  return %h1 : tensor<4x4xf32>
}

// -----

// No pipeline axis on the mesh.
// expected-error @+1 {{-dist-pipeline-parallel: the mesh has no axis 'pp'}}
module {
  dist.mesh @mesh ["dp" = 2]
}

// -----

// Two microbatches cannot be grouped by 2 stages of the interleaved
// schedule... but 1F1B takes them; with one layer per stage the split is
// valid, and the schedule's microbatches come from the step.
dist.mesh @mesh ["pp" = 2]
func.func @ok(%x: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {dist.partitioned} {
  %h0 = graph.relu %x {graph.layer = 0 : i64} : tensor<4x4xf32>
  %h1 = graph.relu %h0 {graph.layer = 1 : i64} : tensor<4x4xf32>
  return %h1 : tensor<4x4xf32>
}
