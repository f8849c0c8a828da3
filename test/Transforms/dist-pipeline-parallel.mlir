// RUN: cleave-opt %s -dist-pipeline-parallel=report=true | FileCheck %s
// RUN: cleave-opt %s -dist-pipeline-parallel="schedule=gpipe split=2" | FileCheck %s --check-prefix=SPLIT
// Each stage lowered on its own, then -cleave-link-stages: one program
// whose metadata (ABI 5) lists the stages and whose run function runs the
// stage of context->stage.
// RUN: cleave-opt %s --pass-pipeline='builtin.module(dist-pipeline-parallel,builtin.module(cleave-plan-memory,cleave-lower-to-runtime),cleave-link-stages)' | FileCheck %s --check-prefix=LINK
// LINK-DAG: llvm.func @cleave_comm_sendrecv(i32, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i32)
// LINK-DAG: llvm.func @cleave_comm_trace_phase(i32, i32, i32)
// LINK-DAG: llvm.func @cleave_stage0_run(
// LINK-DAG: llvm.func @cleave_stage1_run(
// LINK-DAG: llvm.mlir.global external constant @cleave_stage0_program()
// LINK-DAG: llvm.mlir.global external constant @cleave_stage1_program()
// LINK: llvm.mlir.global private constant @cleave_stages() {{.*}} : !llvm.array<2 x ptr>
// LINK: llvm.mlir.addressof @cleave_stage0_program
// LINK: llvm.mlir.addressof @cleave_stage1_program
// LINK: llvm.mlir.global private constant @cleave_stage_runs()
// LINK: llvm.mlir.global external constant @cleave_program()
// LINK: llvm.mlir.constant(2 : i64)
// LINK-NEXT: llvm.insertvalue {{.*}}[18]
// LINK: llvm.func @cleave_program_run(%[[A:.*]]: !llvm.ptr, %[[C:.*]]: !llvm.ptr)
// LINK-NEXT: %[[F:.*]] = llvm.getelementptr %[[C]][0, 2]
// LINK-NEXT: %[[S:.*]] = llvm.load %[[F]] : !llvm.ptr -> i64
// LINK: llvm.getelementptr %{{.*}}[%[[S]]]
// LINK: llvm.call %{{.*}}(%[[A]], %[[C]])
// LINK-NOT: dist.mesh

// A step of two microbatches through three layers (a matmul each; the
// "backward" is a matmul per layer too, in reverse), then the update of
// every weight and the loss of the last layer. Three layers of equal cost
// on two stages: the first stage takes one layer, the second two (a tie
// goes to the earlier cut, whose stage holds more microbatches under
// 1F1B).
// CHECK: dist-pipeline-parallel: @train_step over "pp": 2 stages, 2 microbatches, 1f1b
// CHECK-NEXT: stage 0: layers 0-0 (and the ops before them: the embedding), 44.9% of the forward FLOPs, activations of at most 2 microbatch-chunks held
// Each stage's memory: its weights (64 B each), no optimizer state (the
// update is a plain add here), and the forward values its backward reads
// (stage 1's layer-2 output, 64 B, of one microbatch at a time).
// CHECK-NEXT: stage 0 memory: parameters 64 B, gradients 0 B, optimizer state 0 B, saved activations at most 0 B
// CHECK-NEXT: stage 1: layers 1-2 (and the ops after them: the head, the loss), 55.1% of the forward FLOPs, activations of at most 1 microbatch-chunk held
// CHECK-NEXT: stage 1 memory: parameters 128 B, gradients 0 B, optimizer state 0 B, saved activations at most 64 B
// CHECK-NEXT: bubble 0.3333 of the step with equal stages (closed form (p-1)/(m+p-1) = 0.3333)
// With the stages' 44.9% and 55.1%: stage 0 waits longer for the second.
// CHECK-NEXT: bubble 0.3551 of the step with the stages' estimated costs (backward 2x forward)

// Stage 0: its weight only; 1F1B's order F0 F1 B0 B1 with the
// activation of microbatch 1 sent and the gradient of microbatch 0
// received at once; the loss received from the last stage.
// CHECK-LABEL: module @stage0 attributes {dist.groups = {{\[\["pp"\]\]}}, dist.stage = 0 : i64, dist.stage_axis = 0 : i64}
// CHECK-NEXT: dist.mesh @mesh ["pp" = 2]
// CHECK-NEXT: graph.param @w0
// CHECK-NOT: graph.param
// Each schedule step begins with its mark (the measured timeline).
// CHECK: func.func @train_step(%{{.*}}: tensor<2x4x4xf32>) -> tensor<f32> attributes {cleave.training_config = {accumulate = 2 : i64, {{.*}}}, dist.partitioned}
// CHECK-NEXT: dist.pipeline_step "forward"{{$}}
// CHECK: %[[H00:.*]] = graph.matmul {{.*}}graph.layer = 0 : i64, graph.microbatch = 0
// CHECK: dist.send %[[H00]] on @mesh ["pp"] to 1
// CHECK-NEXT: dist.pipeline_step "forward" microbatch 1{{$}}
// CHECK: %[[H10:.*]] = graph.matmul {{.*}}graph.layer = 0 : i64, graph.microbatch = 1
// CHECK: %[[G01:.*]] = dist.send_recv %[[H10]] on @mesh ["pp"] to 1 from 1 {{.*}}: tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: dist.pipeline_step "backward"{{$}}
// CHECK: graph.matmul %[[G01]], {{.*}}graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>
// CHECK-NEXT: dist.pipeline_step "backward" microbatch 1{{$}}
// CHECK: dist.recv on @mesh ["pp"] from 1 {{.*}}graph.microbatch = 1
// CHECK: dist.pipeline_step "optimizer"
// CHECK-NEXT: graph.add
// CHECK-NEXT: graph.assign @w0
// CHECK: %[[L:.*]] = dist.recv on @mesh ["pp"] from 1 {{.*}}: tensor<f32>
// CHECK: return %[[L]] : tensor<f32>

// Stage 1: layers 1 and 2, F0 B0 F1 B1; it computes the loss and sends
// it in its optimizer step, where stage 0 reads it.
// CHECK-LABEL: module @stage1
// CHECK: graph.param @w1
// CHECK-NEXT: graph.param @w2
// CHECK-NOT: graph.param
// CHECK: dist.recv on @mesh ["pp"] from 0 {{.*}}graph.microbatch = 0
// CHECK: graph.matmul {{.*}}graph.layer = 2 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>
// CHECK: dist.send {{.*}} to 0 {{.*}}graph.microbatch = 0
// CHECK: dist.recv on @mesh ["pp"] from 0 {{.*}}graph.microbatch = 1
// CHECK: %[[LOSS:.*]] = graph.reduce sum
// CHECK: graph.assign @w1
// CHECK: graph.assign @w2
// CHECK: dist.send %[[LOSS]] on @mesh ["pp"] to 0
// CHECK: return %[[LOSS]]

// With split=2 the first stage takes layers 0 and 1; GPipe runs every
// forward before the backward.
// SPLIT-LABEL: module @stage0
// SPLIT: graph.param @w0
// SPLIT-NEXT: graph.param @w1
// SPLIT-NOT: graph.param
// SPLIT-LABEL: module @stage1
// SPLIT: graph.param @w2
// SPLIT-NOT: graph.param

dist.mesh @mesh ["pp" = 2]
graph.param @w0 : tensor<4x4xf32> = dense<0.5> : tensor<4x4xf32>
graph.param @w1 : tensor<4x4xf32> = dense<0.25> : tensor<4x4xf32>
graph.param @w2 : tensor<4x4xf32> = dense<0.125> : tensor<4x4xf32>
func.func @train_step(%x: tensor<2x4x4xf32>) -> tensor<f32>
    attributes {dist.partitioned, cleave.training_config = {accumulate = 2 : i64, dampening = 0.0 : f64, grad_clip = 0.0 : f64, loss = "mse", lr = 0.5 : f64, momentum = 0.0 : f64, nesterov = false, optimizer = "sgd", weight_decay = 0.0 : f64}} {
  %w0 = graph.read_param @w0 : tensor<4x4xf32>
  %w1 = graph.read_param @w1 : tensor<4x4xf32>
  %w2 = graph.read_param @w2 : tensor<4x4xf32>
  %s0 = graph.slice %x start [0, 0, 0] limit [1, 4, 4] {graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<2x4x4xf32>
  %x0 = graph.reshape %s0 {graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<1x4x4xf32> -> tensor<4x4xf32>
  %h00 = graph.matmul %x0, %w0 {graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4x4xf32>, tensor<4x4xf32>
  %h01 = graph.matmul %h00, %w1 {graph.layer = 1 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4x4xf32>, tensor<4x4xf32>
  %h02 = graph.matmul %h01, %w2 {graph.layer = 2 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>} : tensor<4x4xf32>, tensor<4x4xf32>
  %g02 = graph.matmul %h02, %w2 {graph.layer = 2 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>} : tensor<4x4xf32>, tensor<4x4xf32>
  %g01 = graph.matmul %g02, %w1 {graph.layer = 1 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>} : tensor<4x4xf32>, tensor<4x4xf32>
  %g00 = graph.matmul %g01, %w0 {graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>} : tensor<4x4xf32>, tensor<4x4xf32>
  %s1 = graph.slice %x start [1, 0, 0] limit [2, 4, 4] {graph.microbatch = 1 : i64, graph.phase = #graph<phase forward>} : tensor<2x4x4xf32>
  %x1 = graph.reshape %s1 {graph.microbatch = 1 : i64, graph.phase = #graph<phase forward>} : tensor<1x4x4xf32> -> tensor<4x4xf32>
  %h10 = graph.matmul %x1, %w0 {graph.layer = 0 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase forward>} : tensor<4x4xf32>, tensor<4x4xf32>
  %h11 = graph.matmul %h10, %w1 {graph.layer = 1 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase forward>} : tensor<4x4xf32>, tensor<4x4xf32>
  %h12 = graph.matmul %h11, %w2 {graph.layer = 2 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase forward>} : tensor<4x4xf32>, tensor<4x4xf32>
  %g12 = graph.matmul %h12, %w2 {graph.layer = 2 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>} : tensor<4x4xf32>, tensor<4x4xf32>
  %g11 = graph.matmul %g12, %w1 {graph.layer = 1 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>} : tensor<4x4xf32>, tensor<4x4xf32>
  %g10 = graph.matmul %g11, %w0 {graph.layer = 0 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>} : tensor<4x4xf32>, tensor<4x4xf32>
  %n0 = graph.add %g00, %g10 {graph.layer = 0 : i64, graph.phase = #graph<phase optimizer>} : tensor<4x4xf32>, tensor<4x4xf32>
  graph.assign @w0, %n0 {graph.layer = 0 : i64, graph.phase = #graph<phase optimizer>} : tensor<4x4xf32>
  %n1 = graph.add %g01, %g11 {graph.layer = 1 : i64, graph.phase = #graph<phase optimizer>} : tensor<4x4xf32>, tensor<4x4xf32>
  graph.assign @w1, %n1 {graph.layer = 1 : i64, graph.phase = #graph<phase optimizer>} : tensor<4x4xf32>
  %n2 = graph.add %g02, %g12 {graph.layer = 2 : i64, graph.phase = #graph<phase optimizer>} : tensor<4x4xf32>, tensor<4x4xf32>
  graph.assign @w2, %n2 {graph.layer = 2 : i64, graph.phase = #graph<phase optimizer>} : tensor<4x4xf32>
  %l = graph.reduce sum %h12 dims [0, 1] {graph.phase = #graph<phase forward>} : tensor<4x4xf32>
  return %l : tensor<f32>
}
