// -cleave-differentiate: the backward pass of the step that -cleave-add-loss
// built, and the gradients as its results, each marked with the parameter
// it belongs to (cleave.gradient), which -cleave-add-optimizer consumes.
// RUN: cleave-opt %s --cleave-add-loss --cleave-differentiate | FileCheck %s
// RUN: cleave-opt %s --cleave-add-loss=accumulate=2 --cleave-differentiate | FileCheck %s --check-prefix=ACC
// RUN: cleave-opt %s --cleave-add-loss --cleave-differentiate=loss-scale=1024 | FileCheck %s --check-prefix=SCALE

// Without an optimizer this is -cleave-autodiff's gradient program, but for
// the attributes that hand the step to the next pass.
// RUN: cleave-opt %s --cleave-add-loss=loss=mse --cleave-differentiate \
// RUN:   | sed -e 's/cleave.gradient = @[a-z]*, //g' -e 's/ attributes {cleave.loss = {[^}]*}}//' > %t.split.mlir
// RUN: cleave-opt %s --cleave-autodiff=loss=mse > %t.autodiff.mlir
// RUN: diff %t.split.mlir %t.autodiff.mlir

// The gradients follow the loss, in the parameters' order; the frozen
// parameter gets none. The markers are consumed, the loss is kept.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<3x5xf32> {cleave.gradient = @w, onnx.name = "grad.w"}, tensor<5xf32> {cleave.gradient = @b, onnx.name = "grad.b"})
// CHECK-SAME: attributes {cleave.loss = {accumulate = 1 : i64, loss = "cross-entropy"}}
// CHECK-NOT: cleave.microbatch_loss
// CHECK: %[[LOSS:.*]] = graph.div {{.*}}graph.phase = #graph<phase forward>
// The seed is 1 / count, the backward ops are tagged.
// CHECK: %[[DL:.*]] = graph.cross_entropy_grad {{.*}}{graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>}
// CHECK: %[[DB:.*]] = graph.reshape
// CHECK: %[[DW:.*]] = graph.matmul
// CHECK: return %[[LOSS]], %[[DW]], %[[DB]]

// Each microbatch's backward follows its forward, before the next
// microbatch's forward; the gradients add over microbatches.
// ACC-LABEL: func.func @train_step
// ACC: graph.cross_entropy_grad {{.*}}{graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>}
// ACC: %[[DW0:.*]] = graph.matmul {{.*}}{graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>}
// ACC: graph.slice %{{.*}} start [1, 0, 0] limit [2, 4, 3] {graph.microbatch = 1 : i64, graph.phase = #graph<phase forward>}
// ACC: graph.cross_entropy_grad {{.*}}{graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>}
// ACC: %[[DW1:.*]] = graph.matmul {{.*}}{graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>}
// ACC: %[[DW:.*]] = graph.add %[[DW0]], %[[DW1]]
// ACC: return %{{.*}}, %[[DW]], %{{.*}}

// Loss scaling: the state amp.loss_scale, read first, is the seed; the
// gradients are those of the scaled loss, which cleave.loss records.
// SCALE: graph.param @amp.loss_scale frozen : tensor<f32> = dense<1.024000e+03> : tensor<f32> {cleave.role = #cleave.role<loss_scale>}
// SCALE-LABEL: func.func @train_step
// SCALE-SAME: cleave.loss = {accumulate = 1 : i64, loss = "cross-entropy", loss_scale = 1.024000e+03 : f64}
// SCALE-NEXT: %[[S:.*]] = graph.read_param @amp.loss_scale {graph.phase = #graph<phase backward>} : tensor<f32>
// SCALE: %[[SEED:.*]] = graph.div %[[S]], %{{.*}} {graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>}
// SCALE: graph.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SEED]]

graph.param @w : tensor<3x5xf32>
graph.param @b : tensor<5xf32>
graph.param @s frozen : tensor<5xf32>
func.func @forward(%x: tensor<4x3xf32> {onnx.name = "x"}) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  %b = graph.read_param @b : tensor<5xf32>
  %z = graph.add %y, %b : tensor<4x5xf32>, tensor<5xf32>
  %s = graph.read_param @s : tensor<5xf32>
  %o = graph.mul %z, %s : tensor<4x5xf32>, tensor<5xf32>
  return %o : tensor<4x5xf32>
}
