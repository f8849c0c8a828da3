// A training step through the runtime: the backward kernels, the step
// counter's copy into its parameter and the fused SGD update on the
// parameter's own storage; the metadata marks a training program with one
// model parameter (the rest is optimizer state) and carries its config.
// RUN: cleave-opt %s --cleave-autodiff="optimizer=sgd momentum=0.9 lr=0.1" --cleave-plan-memory=entry=train_step --cleave-lower-to-runtime=entry=train_step | FileCheck %s %rt-abi
// RUN: cleave-opt %s --cleave-autodiff="optimizer=sgd momentum=0.9 lr=0.1" --cleave-plan-memory=entry=train_step --cleave-lower-to-runtime=entry=train_step | FileCheck %s --check-prefix=CONFIG
// RUN: cleave-opt %s --cleave-autodiff="optimizer=sgd momentum=0.9 lr=0.1" --cleave-plan-memory=entry=train_step --cleave-lower-to-runtime=entry=train_step | FileCheck %s %rt-abi --check-prefix=ROLES
// RUN: cleave-opt %s --cleave-autodiff="optimizer=sgd lr=0.1 ignore-index=-100" --cleave-plan-memory=entry=train_step --cleave-lower-to-runtime=entry=train_step | FileCheck %s %rt-abi --check-prefix=REDUCE

// The loss is a sum over an explicit count: the cross-entropy's arguments
// end with has_ignore, ignore_index and the reduction CLEAVE_SUM.
// REDUCE: llvm.mlir.constant(-100 : i64)
// REDUCE-NEXT: %[[SUM:.*]] = llvm.mlir.constant([[#CLEAVE_SUM]] : i32)
// REDUCE-NEXT: llvm.call @cleave_rt_cross_entropy({{.*}}, %[[SUM]])
// REDUCE: llvm.mlir.constant(-100 : i64)
// REDUCE-NEXT: %[[GSUM:.*]] = llvm.mlir.constant([[#CLEAVE_SUM]] : i32)
// REDUCE-NEXT: llvm.call @cleave_rt_cross_entropy_grad({{.*}}, %[[GSUM]])

// CHECK-LABEL: llvm.func @cleave_program_run
// The run-time hyperparameters' array, found once at the entry: the
// context at argument 1, its hyperparameters at field 3, a zeroed global
// read instead when either is null, so that nothing loads from null.
// CHECK: %[[NOCTX:.*]] = llvm.mlir.addressof @cleave.no_context
// CHECK: %[[NOARG:.*]] = llvm.icmp "eq" %arg1
// CHECK: %[[CTX:.*]] = llvm.select %[[NOARG]], %[[NOCTX]], %arg1 : i1, !llvm.ptr
// CHECK: %[[FIELD:.*]] = llvm.getelementptr %[[CTX]][3] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[HPS:.*]] = llvm.load %[[FIELD]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[NONE:.*]] = llvm.icmp "eq" %[[HPS]]
// CHECK: %[[SAFE:.*]] = llvm.select %[[NONE]], %[[NOCTX]], %[[HPS]]
// CHECK-NOT: cleave.no_context
// CHECK: llvm.call @cleave_rt_matmul
// CHECK: llvm.call @cleave_rt_cross_entropy(
// CHECK: llvm.call @cleave_rt_cross_entropy_grad(
// The GELU's gradient: unary kind CLEAVE_GELU_ERF.
// CHECK: %[[GELU:.*]] = llvm.mlir.constant([[#CLEAVE_GELU_ERF]] : i32)
// CHECK: llvm.call @cleave_rt_unary_grad(%{{.*}}, %[[GELU]]
// CHECK: llvm.call @cleave_rt_copy(
// The update runs in the parameter's and the buffer's own storage: no copy
// before it, and its assignments copy nothing.
// CHECK-NOT: llvm.call @cleave_rt_copy(
// The update: param, grad, momentum buffer, step, no scale, lr, momentum,
// dampening, weight decay, nesterov. Its hyperparameters are the run's:
// context->hyperparameters[slot] (CLEAVE_HP_LR, CLEAVE_HP_MOMENTUM, ...),
// and the compiled values when the context or its hyperparameters are
// null (the array found at the function's entry, above).
// CHECK: %[[AT:.*]] = llvm.getelementptr %[[SAFE]]{{\[}}[[#CLEAVE_HP_LR]]{{\]}} : (!llvm.ptr) -> !llvm.ptr, f64
// CHECK: %[[VAL:.*]] = llvm.load %[[AT]] : !llvm.ptr -> f64
// CHECK: %[[COMPILED:.*]] = llvm.mlir.constant(1.000000e-01 : f64)
// CHECK: %[[LR:.*]] = llvm.select %[[NONE]], %[[COMPILED]], %[[VAL]] : i1, f64
// CHECK: llvm.getelementptr %{{.*}}{{\[}}[[#CLEAVE_HP_MOMENTUM]]{{\]}} : (!llvm.ptr) -> !llvm.ptr, f64
// CHECK: %[[MOM0:.*]] = llvm.mlir.constant(9.000000e-01 : f64)
// CHECK: %[[MOM:.*]] = llvm.select %{{.*}}, %[[MOM0]], %{{.*}} : i1, f64
// CHECK: llvm.getelementptr %{{.*}}{{\[}}[[#CLEAVE_HP_DAMPENING]]{{\]}} : (!llvm.ptr) -> !llvm.ptr, f64
// The weight is [3, 5]: its weight decay is slot weight_decay (the 1-D
// group's is for the bias's update).
// CHECK: llvm.getelementptr %{{.*}}{{\[}}[[#CLEAVE_HP_WEIGHT_DECAY]]{{\]}} : (!llvm.ptr) -> !llvm.ptr, f64
// CHECK: llvm.call @cleave_rt_sgd(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LR]], %[[MOM]]
// CHECK-NOT: llvm.call @cleave_rt_copy(
// CHECK: llvm.return
// CHECK-LABEL: llvm.mlir.global external constant @cleave_program()
// CHECK: %[[KIND:.*]] = llvm.mlir.constant([[#CLEAVE_PROGRAM_TRAINING]] : i32)
// CHECK: llvm.insertvalue %[[KIND]], %{{.*}}[1]
// CHECK: %[[MODEL:.*]] = llvm.mlir.constant(1 : i64)
// CHECK: llvm.insertvalue %[[MODEL]], %{{.*}}[4]
// CHECK: llvm.insertvalue %{{.*}}, %{{.*}}[11]
// The cleave.training_config dictionary becomes the JSON the runtime reads,
// its members in the schema's order and floats in their shortest form.
// CONFIG: llvm.mlir.global private constant @{{.*}}("{\22loss\22:\22cross-entropy\22,\22optimizer\22:\22sgd\22,\22lr\22:0.1,\22momentum\22:0.9,\22dampening\22:0,\22nesterov\22:false,\22weight_decay\22:0,\22grad_clip\22:0,\22accumulate\22:1,\22run_time_hyperparameters\22:true}\00")

// The parameter table (cleave_named_tensor: name, descriptor, init_data,
// init_file, init_offset, role, sharding): the model's parameter, then the step
// counter and the momentum buffer, each with the role -cleave-autodiff gave
// it.
// ROLES: llvm.mlir.global private constant @cleave.tensors.{{[0-9]+}}() {{.*}} : !llvm.array<3 x struct<(ptr, array<[[#CLEAVE_RT_MAX_RANK + 2]] x i64>, ptr, ptr, i64, i32, ptr)>>
// ROLES: llvm.mlir.addressof @[[W:cleave.str.[0-9]+]]
// ROLES: %[[R0:.*]] = llvm.mlir.constant([[#CLEAVE_PARAM_MODEL]] : i32) : i32
// ROLES-NEXT: llvm.insertvalue %[[R0]], %{{.*}}[0, 5]
// ROLES: llvm.mlir.addressof @[[STEP:cleave.str.[0-9]+]]
// ROLES: %[[R1:.*]] = llvm.mlir.constant([[#CLEAVE_PARAM_STEP_COUNTER]] : i32) : i32
// ROLES-NEXT: llvm.insertvalue %[[R1]], %{{.*}}[1, 5]
// ROLES: llvm.mlir.addressof @[[MOM:cleave.str.[0-9]+]]
// ROLES: %[[R2:.*]] = llvm.mlir.constant([[#CLEAVE_PARAM_OPTIMIZER_STATE]] : i32) : i32
// ROLES-NEXT: llvm.insertvalue %[[R2]], %{{.*}}[2, 5]
// ROLES-DAG: llvm.mlir.global private constant @[[W]]("w\00")
// ROLES-DAG: llvm.mlir.global private constant @[[STEP]]("optimizer.step\00")
// ROLES-DAG: llvm.mlir.global private constant @[[MOM]]("w.momentum\00")
graph.param @w : tensor<3x5xf32> = dense<0.5> : tensor<3x5xf32>
func.func @forward(%x: tensor<4x3xf32> {onnx.name = "x"}) -> tensor<4x5xf32> {
  %w = graph.read_param @w : tensor<3x5xf32>
  %y = graph.matmul %x, %w : tensor<4x3xf32>, tensor<3x5xf32>
  %g = graph.gelu %y : tensor<4x5xf32>
  return %g : tensor<4x5xf32>
}
