//===- CleaveBase.td - the cleave dialect: pipeline metadata -*- tablegen -*-===//
//
// The `cleave` dialect has no ops: it owns the `cleave.*` discardable
// attributes through which the passes hand metadata down the pipeline (the
// memory plan, the training configuration, the parameters' roles, the
// source model) and verifies each of them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_CLEAVE_IR_CLEAVEBASE_TD
#define CLEAVE_DIALECT_CLEAVE_IR_CLEAVEBASE_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"

def Cleave_Dialect : Dialect {
  let name = "cleave";
  let cppNamespace = "::cleave";
  let summary = "the metadata the compilation pipeline attaches to the IR";
  let description = [{
    The passes record what later passes and the runtime need as discardable
    attributes named `cleave.*`, and this dialect verifies every one of them
    wherever it appears (an attribute whose name starts with a dialect's
    namespace is verified by that dialect):

    | attribute | on | value |
    |---|---|---|
    | `cleave.offset` | `graph.param`, entry function arguments | i64, the byte offset in the arena |
    | `cleave.offsets` | ops with results | `array<i64>`, one offset per result |
    | `cleave.param_bytes`, `cleave.persistent_bytes`, `cleave.peak_bytes`, `cleave.arena_bytes` | the planned function | i64 |
    | `cleave.role` | `graph.param` | `#cleave.role<...>`; absent: a model parameter |
    | `cleave.training_config` | the training function | a dictionary of the loss and the optimizer |
    | `cleave.loss` | the training function, from -cleave-add-loss to -cleave-add-optimizer | a dictionary of the loss keys of the training configuration |
    | `cleave.microbatch_loss` | the op computing a microbatch's loss, until -cleave-differentiate | unit |
    | `cleave.gradient` | results of the training function, from -cleave-differentiate to -cleave-add-optimizer | `@param`, the parameter the result is the gradient of |
    | `cleave.source_model` | the module | the absolute path of the imported ONNX model |
    | `cleave.precision` | the module | `"bf16"` or `"f16"` (-cleave-mixed-precision) |
    | `cleave.eval_program` | a module nested in the training program's | unit: the lowered evaluation program that `-cleave-link-eval` takes in |
    | `cleave.keep_f32` | any op | unit: computes in f32 under mixed precision |

    `cleave.loss`, `cleave.microbatch_loss` and `cleave.gradient` hand the
    training step from one of the passes that build it to the next
    (-cleave-add-loss, -cleave-differentiate, -cleave-add-optimizer; see
    docs/training.md). `cleave.loss` holds the keys `loss`, `ignore_index`,
    `accumulate` and `loss_scale` of the training configuration, with the
    same types and ranges; a `cleave.gradient` must name a `graph.param`.

    ```mlir
    func.func @train_step(%x: tensor<4x3xf32>, %labels: tensor<4xi64>)
        -> (tensor<f32> {onnx.name = "loss"},
            tensor<3x5xf32> {cleave.gradient = @w, onnx.name = "grad.w"})
        attributes {cleave.loss = {accumulate = 1 : i64, loss = "cross-entropy"}}
    ```

    Offsets are multiples of the runtime's CLEAVE_RT_ALIGNMENT, and the
    roles are the runtime's own list (cleave_rt_enums.h), so that the
    lowering passes both on unchanged.

    The attributes span dialects (func.func, builtin.module, graph and dist
    ops), which is why they have a dialect of their own rather than the
    `graph.` prefix; the graph dialect loads this one, so that they are
    verified wherever graph IR is.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

def Cleave_ParamRoleAttr : AttrDef<Cleave_Dialect, "ParamRole"> {
  let mnemonic = "role";
  let summary = "what a parameter holds";
  let description = [{
    One of the runtime's parameter roles (CLEAVE_RT_PARAM_ROLES in
    cleave_rt_enums.h), by its mnemonic: `model`, `optimizer_state`,
    `step_counter`, `loss_scale`, `growth_tracker`. -cleave-differentiate
    (the loss scale) and -cleave-add-optimizer set it on the state they add;
    -cleave-lower-to-runtime passes it to the runtime
    in the program's parameter table, where the trainer finds the step
    counter and the loss scale by role.

    ```mlir
    graph.param @optimizer.step frozen : tensor<i64> {cleave.role = #cleave.role<step_counter>}
    ```
  }];
  // The runtime's enum itself, so that no number is copied between them.
  let parameters = (ins "::cleave_param_role":$value);
  let hasCustomAssemblyFormat = 1;
}

#endif // CLEAVE_DIALECT_CLEAVE_IR_CLEAVEBASE_TD
