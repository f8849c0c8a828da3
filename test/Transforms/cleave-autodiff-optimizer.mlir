// -cleave-autodiff with an optimizer: state parameters, the step counter,
// the fused updates, clipping and gradient accumulation.
// RUN: cleave-opt %s --cleave-autodiff="optimizer=sgd momentum=0.9 lr=0.5 loss=mse accumulate=2" | FileCheck %s --check-prefix=SGD
// RUN: cleave-opt %s --cleave-autodiff="optimizer=adamw lr=0.01 grad-clip=1.0" | FileCheck %s --check-prefix=ADAMW
// RUN: cleave-opt %s --cleave-autodiff="optimizer=sgd ignore-index=-100" | FileCheck %s --check-prefix=IGNORE

// Labels equal to ignore-index add no loss and get no gradient.
// IGNORE: cleave.training_config = {accumulate = 1 : i64, {{.*}}, ignore_index = -100 : i64, loss = "cross-entropy"
// IGNORE: graph.cross_entropy %{{.*}}, %{{.*}} ignore_index -100
// IGNORE: graph.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} ignore_index -100

// SGD with momentum, mse and two microbatches: the inputs hold two batches,
// each a row of the [K, B, ...] inputs, run forward and backward with the gradient seeded 1/2; one
// update per parameter uses the summed gradients and the new step count.
// SGD: graph.param @optimizer.step frozen{{.*}} : tensor<i64> {cleave.role = #cleave.role<step_counter>}
// SGD: graph.param @w.momentum frozen{{.*}} : tensor<3x5xf32> {cleave.role = #cleave.role<optimizer_state>}
// SGD: graph.param @b.momentum frozen{{.*}} : tensor<5xf32> {cleave.role = #cleave.role<optimizer_state>}
// SGD-LABEL: func.func @train_step
// SGD-SAME: (%[[X:.*]]: tensor<2x4x3xf32>, %[[T:.*]]: tensor<2x4x5xf32> {onnx.name = "targets"}) -> (tensor<f32> {onnx.name = "loss"})
// The training configuration, a dictionary the cleave dialect verifies.
// SGD-SAME: cleave.training_config = {accumulate = 2 : i64, dampening = 0.000000e+00 : f64, grad_clip = 0.000000e+00 : f64, loss = "mse", lr = 5.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, optimizer = "sgd", run_time_hyperparameters = true, weight_decay = 0.000000e+00 : f64}
// Microbatch m is row m of the [2, 4, ...] inputs.
// SGD: %[[X0:.*]] = graph.slice %[[X]] start [0, 0, 0] limit [1, 4, 3]
// SGD: graph.reshape %[[X0]]{{.*}} : tensor<1x4x3xf32> -> tensor<4x3xf32>
// SGD: %[[L0:.*]] = graph.mse
// SGD: graph.constant {{.*}}dense<5.000000e-01>
// SGD: graph.slice %[[X]] start [1, 0, 0] limit [2, 4, 3]
// SGD: %[[L1:.*]] = graph.mse
// SGD: %[[SUM:.*]] = graph.add %[[L0]], %[[L1]]
// SGD: %[[MEAN:.*]] = graph.mul %[[SUM]]
// SGD: %[[OLD:.*]] = graph.read_param @optimizer.step{{.*}} : tensor<i64>
// SGD: %[[STEP:.*]] = graph.add %[[OLD]]
// SGD: graph.assign @optimizer.step, %[[STEP]]
// The updates are values: read the parameter and its state, compute, assign.
// SGD: %[[W:.*]] = graph.read_param @w{{.*}} : tensor<3x5xf32>
// SGD: %[[WB:.*]] = graph.read_param @w.momentum{{.*}} : tensor<3x5xf32>
// SGD: %[[NW:.*]], %[[NWB:.*]] = graph.sgd %[[W]], %{{.*}}, %[[STEP]] momentum_buffer %[[WB]] {{.*}}lr = 5.000000e-01 : f64, momentum = 9.000000e-01 : f64, run_time_hyperparameters}
// SGD: graph.assign @w, %[[NW]]
// SGD: graph.assign @w.momentum, %[[NWB]]
// SGD: %[[B:.*]] = graph.read_param @b{{.*}} : tensor<5xf32>
// SGD: %[[BB:.*]] = graph.read_param @b.momentum{{.*}} : tensor<5xf32>
// SGD: graph.sgd %[[B]], %{{.*}}, %[[STEP]] momentum_buffer %[[BB]]
// SGD: return %[[MEAN]] : tensor<f32>

// AdamW with clipping: the scale is min(1, clip / (norm + 1e-6)), clip the
// step's run-time value (its compiled value the default), and 1 when the
// run sets it to 0 (no clipping).
// ADAMW: graph.param @w.m frozen{{.*}} : tensor<3x5xf32> {cleave.role = #cleave.role<optimizer_state>}
// ADAMW: graph.param @w.v frozen{{.*}} : tensor<3x5xf32> {cleave.role = #cleave.role<optimizer_state>}
// ADAMW-LABEL: func.func @train_step
// ADAMW: %[[NORM:.*]] = graph.sqrt
// ADAMW: %[[CLIP:.*]] = graph.hyperparameter "grad_clip" default 1.000000e+00 {{.*}}: tensor<f32>
// ADAMW: %[[COEF:.*]] = graph.div %[[CLIP]]
// ADAMW-DAG: %[[ON:.*]] = graph.compare gt %[[CLIP]]
// ADAMW-DAG: %[[MIN:.*]] = graph.min %[[COEF]]
// ADAMW: %[[SCALE:.*]] = graph.where %[[ON]], %[[MIN]]
// ADAMW: %[[W:.*]] = graph.read_param @w{{.*}} : tensor<3x5xf32>
// ADAMW: %[[M:.*]] = graph.read_param @w.m{{.*}} : tensor<3x5xf32>
// ADAMW: %[[V:.*]] = graph.read_param @w.v{{.*}} : tensor<3x5xf32>
// ADAMW: %[[NW:.*]], %[[NM:.*]], %[[NV:.*]] = graph.adamw %[[W]], %{{.*}}, %[[M]], %[[V]], %{{.*}} scale %[[SCALE]] {{.*}}lr = 1.000000e-02 : f64, run_time_hyperparameters}
// ADAMW: graph.assign @w, %[[NW]]
// ADAMW: graph.assign @w.m, %[[NM]]
// ADAMW: graph.assign @w.v, %[[NV]]
graph.param @w : tensor<3x5xf32>
graph.param @b : tensor<5xf32>
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y1 = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  %w2 = graph.read_param @w : tensor<3x5xf32>
  %y2 = graph.matmul %x, %w2 : tensor<4x3xf32>, tensor<3x5xf32>
  %y = graph.add %y1, %y2 : tensor<4x5xf32>, tensor<4x5xf32>
  %b = graph.read_param @b : tensor<5xf32>
  %z = graph.add %y, %b : tensor<4x5xf32>, tensor<5xf32>
  return %z : tensor<4x5xf32>
}
