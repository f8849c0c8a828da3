//===- GraphTrainingOps.td - graph ops of the training step -*- tablegen -*-===//
//
// The ops that -cleave-autodiff creates: the fused backward ops of the
// gradient rules (GraphGradients.cpp) and the optimizer updates, which
// compute new values that graph.assign stores. Included by GraphOps.td, whose Graph_Op classes they use;
// verifiers in GraphTrainingOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_GRAPH_IR_GRAPHTRAININGOPS_TD
#define CLEAVE_DIALECT_GRAPH_IR_GRAPHTRAININGOPS_TD

//===----------------------------------------------------------------------===//
// Backward ops: the fused vector-Jacobian products of the gradient rules
//===----------------------------------------------------------------------===//

def Graph_GeluGradOp : Graph_BackwardOp<"gelu_grad", [Pure,
    AllTypesMatch<["operand", "grad", "result"]>]> {
  let summary = "gradient of gelu: grad * gelu'(operand)";
  let description = [{
    ```mlir
    %dx = graph.gelu_grad %x, %dy approximate tanh : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$operand, Graph_FloatTensor:$grad,
                       DefaultValuedAttr<Graph_GeluApproximation,
                                         "GeluApproximation::None">:$approximate);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $operand `,` $grad (`approximate` $approximate^)? attr-dict `:`
    type($operand)
  }];
}

def Graph_SiluGradOp : Graph_BackwardOp<"silu_grad", [Pure,
    AllTypesMatch<["operand", "grad", "result"]>]> {
  let summary = "gradient of silu: grad * silu'(operand)";
  let description = [{
    ```mlir
    %dx = graph.silu_grad %x, %dy : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$operand, Graph_FloatTensor:$grad);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$operand `,` $grad attr-dict `:` type($operand)";
}

def Graph_LayerNormGradOp : Graph_BackwardOp<"layer_norm_grad", [Pure,
    AllTypesMatch<["input", "grad", "input_grad"]>,
    AllTypesMatch<["scale", "scale_grad", "bias_grad"]>]> {
  let summary = "gradients of layer_norm with respect to input, scale, bias";
  let description = [{
    The statistics are recomputed from `input`; `scale_grad` and `bias_grad`
    are summed over the leading dimensions `0 ..< dim`.

    ```mlir
    %dx, %dg, %db = graph.layer_norm_grad %x, %g, %dy dim 2 eps 1.0e-05 : tensor<2x8x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       Graph_FloatTensor:$grad, I64Attr:$dim,
                       F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$input_grad,
                      Graph_FloatTensor:$scale_grad,
                      Graph_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad `dim` $dim `eps` $epsilon attr-dict `:`
    type($input) `,` type($scale)
  }];
}

def Graph_RmsNormGradOp : Graph_BackwardOp<"rms_norm_grad", [Pure,
    AllTypesMatch<["input", "grad", "input_grad"]>,
    AllTypesMatch<["scale", "scale_grad"]>]> {
  let summary = "gradients of rms_norm with respect to input and scale";
  let description = [{
    ```mlir
    %dx, %dg = graph.rms_norm_grad %x, %g, %dy dim 2 eps 1.0e-06 : tensor<2x8x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       Graph_FloatTensor:$grad, I64Attr:$dim,
                       F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$input_grad,
                      Graph_FloatTensor:$scale_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad `dim` $dim `eps` $epsilon attr-dict `:`
    type($input) `,` type($scale)
  }];
}

def Graph_AttentionGradOp : Graph_BackwardOp<"attention_grad", [Pure,
    AllTypesMatch<["query", "query_grad"]>,
    AllTypesMatch<["key", "key_grad"]>,
    AllTypesMatch<["value", "value_grad"]>]> {
  let summary = "gradients of attention with respect to query, key, value";
  let description = [{
    Same operands and attributes as `graph.attention` plus the gradient of
    its result; the scores are recomputed. Key and value gradients are
    summed over the query heads that share them; the mask gets none.

    ```mlir
    %dq, %dk, %dv = graph.attention_grad %q, %k, %v, %do causal scale 0.25 : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$query, Graph_FloatTensor:$key,
                       Graph_FloatTensor:$value, Graph_FloatTensor:$grad,
                       Optional<Graph_Tensor>:$mask, UnitAttr:$causal,
                       F64Attr:$scale);
  let results = (outs Graph_FloatTensor:$query_grad,
                      Graph_FloatTensor:$key_grad,
                      Graph_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $grad (`mask` $mask^)? (`causal` $causal^)?
    `scale` $scale attr-dict `:` type($query) `,` type($key) `,`
    type($value) `,` type($grad) (`,` type($mask)^)?
  }];
}

def Graph_AttentionBlockOp : Graph_BackwardOp<"attention_block", [Pure,
    AttrSizedOperandSegments]> {
  let summary = "attention over one block of keys, merged into the blocks before";
  let description = [{
    One step of ring attention (context parallelism), which the attention's
    partition hook builds: the queries `q: [B, H, Sq, D]` attend to one block
    of keys and values `k: [B, Hkv, Sk, D]`, `v: [B, Hkv, Sk, Dv]`, and the
    result is merged with `out_in` and `lse_in`, the attention over the
    blocks before (both absent for the first block). The results are the
    attention over every block so far, `out: [B, H, Sq, Dv]`, and the log of
    the sum of the exponentials of its scores, `lse: [B, H, Sq]` (f32):
    merging rescales the earlier result by `exp(lse_in - lse)`. A query row
    with no live key so far has zeros and `lse` -inf.

    `query_positions: [Sq]` and `key_positions: [Sk]` (i64) are the tokens'
    places in the sequence: under `causal` a key after the query is masked,
    whatever the layout of the blocks. Grouped-query heads as in
    `graph.attention`.

    ```mlir
    %o, %lse = graph.attention_block %q, %k, %v positions %qp, %kp causal scale 0.25 : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<8xi64>, tensor<8xi64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
    %o2, %lse2 = graph.attention_block %q, %k2, %v2 positions %qp, %kp2 merge %o, %lse causal scale 0.25 : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<8xi64>, tensor<8xi64>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$query, Graph_FloatTensor:$key,
                       Graph_FloatTensor:$value,
                       Graph_IndexTensor:$query_positions,
                       Graph_IndexTensor:$key_positions,
                       Optional<Graph_FloatTensor>:$out_in,
                       Optional<Graph_FloatTensor>:$lse_in, UnitAttr:$causal,
                       F64Attr:$scale);
  let results = (outs Graph_FloatTensor:$out, Graph_FloatTensor:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value `positions` $query_positions `,` $key_positions
    (`merge` $out_in^ `,` $lse_in)? (`causal` $causal^)? `scale` $scale
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_AttentionBlockGradOp : Graph_BackwardOp<"attention_block_grad", [
    Pure, AllTypesMatch<["query", "query_grad"]>,
    AllTypesMatch<["key", "key_grad"]>,
    AllTypesMatch<["value", "value_grad"]>]> {
  let summary = "gradients of attention for one block of keys";
  let description = [{
    The backward step of ring attention: `out` and `lse` are the forward's
    final results over all the blocks (`graph.attention_block`), `grad` the
    gradient flowing into `out`. The probabilities of this block's keys are
    `exp(scores - lse)`, so the results are this block's exact share: the
    query gradient (summed over the blocks by the ring) and the key and
    value gradients of this block (summed over the query heads that share
    a key/value head). Positions, `causal` and `scale` as in the forward.

    ```mlir
    %dq, %dk, %dv = graph.attention_block_grad %q, %k, %v, %o, %lse, %do positions %qp, %kp causal scale 0.25 : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8x16xf32>, tensor<8xi64>, tensor<8xi64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$query, Graph_FloatTensor:$key,
                       Graph_FloatTensor:$value, Graph_FloatTensor:$out,
                       Graph_FloatTensor:$lse, Graph_FloatTensor:$grad,
                       Graph_IndexTensor:$query_positions,
                       Graph_IndexTensor:$key_positions, UnitAttr:$causal,
                       F64Attr:$scale);
  let results = (outs Graph_FloatTensor:$query_grad,
                      Graph_FloatTensor:$key_grad,
                      Graph_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $out `,` $lse `,` $grad `positions`
    $query_positions `,` $key_positions (`causal` $causal^)? `scale` $scale
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_GatherGradOp : Graph_BackwardOp<"gather_grad", [Pure]> {
  let summary = "the transpose of gather: scatter-adds slices into zeros";
  let description = [{
    The result has the gathered data's shape; each slice of `grad` at index
    position `j` is added at `indices[j]` along `dim` (repeated indices
    accumulate, negative ones count from the end).

    With an `offset` o (the gradient of a gather with one), the result is
    the block `[o, o + size)` of a larger table's gradient: a slice goes to
    entry `indices[j] - o`, and one whose index falls outside the block is
    dropped.

    ```mlir
    %dt = graph.gather_grad %de[%ids] dim 0 : tensor<2x8x64xf32>, tensor<2x8xi64> -> tensor<100x64xf32>
    %db = graph.gather_grad %de[%ids] dim 0 offset %o : tensor<2x8x64xf32>, tensor<2x8xi64> -> tensor<50x64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$grad, Graph_IndexTensor:$indices,
                       Optional<Graph_I64Scalar>:$offset, I64Attr:$dim);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `[` $indices `]` `dim` $dim (`offset` $offset^)? attr-dict `:`
    type($grad) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Graph_SliceGradOp : Graph_BackwardOp<"slice_grad", [Pure]> {
  let summary = "the transpose of slice: places grad into zeros";
  let description = [{
    The result has the sliced operand's shape: zeros except
    `result[start + i * strides] = grad[i]`.

    ```mlir
    %dx = graph.slice_grad %dy start [0, 2] strides [1, 1] : tensor<4x2xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$grad, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$strides);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = [{
    $grad `start` $start `strides` $strides attr-dict `:` type($grad) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Graph_CrossEntropyGradOp : Graph_BackwardOp<"cross_entropy_grad", [Pure,
    AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of the cross-entropy with respect to logits";
  let description = [{
    `(softmax(logits) - onehot(labels)) * grad / count` with `grad` the
    scalar gradient of the loss and `count` the positions not ignored
    (`reduction mean`, the default), or `(softmax(logits) - onehot(labels))
    * grad` for the gradient of the sum (`reduction sum`), whose scale the
    caller chose; ignored positions get zeros.

    ```mlir
    %dl = graph.cross_entropy_grad %logits, %labels, %g : tensor<2x8x100xf32>, tensor<2x8xi64>, tensor<f32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IndexTensor:$labels,
                       Graph_FloatTensor:$grad,
                       OptionalAttr<I64Attr>:$ignore_index,
                       DefaultValuedAttr<Cleave_ReductionKind,
                                         "::cleave::ReductionKind::Mean">:$reduction);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad (`ignore_index` $ignore_index^)?
    (`reduction` $reduction^)? attr-dict `:` type($logits) `,`
    type($labels) `,` type($grad)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Parameter updates: the optimizer as values, stored by graph.assign
//===----------------------------------------------------------------------===//

def Graph_AssignOp : Op<Graph_Dialect, "assign", [
    MemoryEffects<[MemWrite]>,
    DeclareOpInterfaceMethods<ShardingRuleOpInterface>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "overwrites a parameter with a value";
  let description = [{
    Reads of the parameter after the assignment see the new value; a value
    read before it must not be used after it. The value has the parameter's
    global type, or its local type in a partitioned program. When the value
    is an optimizer update of what the parameter held, the memory plan
    computes it in the parameter's storage and the assignment costs
    nothing.

    ```mlir
    graph.assign @optimizer.step, %next : tensor<i64>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, Graph_Tensor:$value);
  let assemblyFormat = "$param `,` $value attr-dict `:` type($value)";
}

def Graph_SgdOp : Graph_BackwardOp<"sgd", [Pure, AttrSizedOperandSegments,
    AllTypesMatch<["param", "new_param"]>]> {
  let summary = "one torch.optim.SGD step: the new parameter (and buffer)";
  let description = [{
    `g = grad * scale + weight_decay * param`; with momentum, the buffer is
    `g` on step 1 and `momentum * buf + (1 - dampening) * g` after, and `g`
    is the buffer (`g + momentum * buf` with `nesterov`); then `new_param =
    param - lr * g`. `step` is the 1-based i64 step number; `scale` the
    optional f32 scalar (global-norm clipping, loss scaling): a non-finite
    scale leaves parameter and buffer unchanged. Parameter and buffer are
    f32 and the gradient has their shape. The op is elementwise, so any
    sharding of the parameter, the gradient and the buffer that agrees is
    valid (ZeRO shards the buffer and the gradient).

    With `run_time_hyperparameters`, lr, momentum, dampening and the
    weight decay are the values the program is run with (the trainer's
    `--lr`, its schedule: `cleave_program_context.hyperparameters`, slots
    of `cleave_rt_enums.h`), the attributes their defaults; the weight decay
    is slot `weight_decay` for a parameter of rank >= 2 and
    `weight_decay_1d` for the others. Nesterov stays fixed.

    ```mlir
    %p = graph.read_param @w : tensor<4x8xf32>
    %b = graph.read_param @w.momentum : tensor<4x8xf32>
    %p1, %b1 = graph.sgd %p, %g, %step momentum_buffer %b {lr = 1.0e-01 : f64, momentum = 9.0e-01 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
    graph.assign @w, %p1 : tensor<4x8xf32>
    graph.assign @w.momentum, %b1 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$param,
                       Graph_FloatTensor:$grad,
                       StaticShapeTensorOf<[I64]>:$step,
                       Optional<StaticShapeTensorOf<[F32]>>:$grad_scale,
                       Optional<StaticShapeTensorOf<[F32]>>:$momentum_buffer,
                       F64Attr:$lr,
                       DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F64Attr, "0.0">:$dampening,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       UnitAttr:$nesterov,
                       UnitAttr:$run_time_hyperparameters);
  let results = (outs StaticShapeTensorOf<[F32]>:$new_param,
                      Optional<StaticShapeTensorOf<[F32]>>:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $step (`scale` $grad_scale^)?
    (`momentum_buffer` $momentum_buffer^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_AdamwOp : Graph_BackwardOp<"adamw", [Pure,
    AllTypesMatch<["param", "new_param"]>,
    AllTypesMatch<["first_moment", "new_first_moment"]>,
    AllTypesMatch<["second_moment", "new_second_moment"]>]> {
  let summary = "one torch.optim.AdamW step: the new parameter and moments";
  let description = [{
    `p = param * (1 - lr * weight_decay); m = beta1 m + (1 - beta1) g;
    v = beta2 v + (1 - beta2) g^2; new_param = p - lr / (1 - beta1^t) * m /
    (sqrt(v) / sqrt(1 - beta2^t) + eps)` with `g = grad * scale` and `t`
    the 1-based i64 `step`; a non-finite `scale` (loss scaling found an inf
    or NaN gradient) leaves parameter and moments unchanged. Parameter and
    moments are f32 and the gradient has their shape. The op is
    elementwise: ZeRO-1 shards the moments (and the parameter's update),
    ZeRO-2 the gradient too.

    With `run_time_hyperparameters`, lr, the betas, eps and the weight decay
    are the values the program is run with
    (`cleave_program_context.hyperparameters`), the attributes their
    defaults; the weight decay is slot `weight_decay` for a parameter of
    rank >= 2 and `weight_decay_1d` for the others (biases and
    normalisation weights, which `--no-decay-1d` exempts).

    ```mlir
    %p1, %m1, %v1 = graph.adamw %p, %g, %m, %v, %step {lr = 1.0e-03 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$param,
                       Graph_FloatTensor:$grad,
                       StaticShapeTensorOf<[F32]>:$first_moment,
                       StaticShapeTensorOf<[F32]>:$second_moment,
                       StaticShapeTensorOf<[I64]>:$step,
                       Optional<StaticShapeTensorOf<[F32]>>:$grad_scale,
                       F64Attr:$lr,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "0.01">:$weight_decay,
                       UnitAttr:$run_time_hyperparameters);
  let results = (outs StaticShapeTensorOf<[F32]>:$new_param,
                      StaticShapeTensorOf<[F32]>:$new_first_moment,
                      StaticShapeTensorOf<[F32]>:$new_second_moment);
  let assemblyFormat = [{
    $param `,` $grad `,` $first_moment `,` $second_moment `,` $step
    (`scale` $grad_scale^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_HyperparameterOp : Graph_BackwardOp<"hyperparameter", [Pure]> {
  let summary = "a run-time hyperparameter of the training step";
  let description = [{
    The value of hyperparameter `name` (a slot of `cleave_rt_enums.h`:
    `grad_clip`, `loss_scale_growth_interval`, `lr`, ...) that this step
    runs with: `cleave_program_context.hyperparameters[slot]`, or `default`
    when the program is run without them. The result is a scalar, f32 or
    i64 (the double converted to it).

    ```mlir
    %clip = graph.hyperparameter "grad_clip" default 1.0 : tensor<f32>
    ```
  }];
  let arguments = (ins StrAttr:$name, F64Attr:$default_value);
  let results = (outs 0DTensorOf<[F32, I64]>:$result);
  let assemblyFormat = [{
    $name `default` $default_value attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

#endif // CLEAVE_DIALECT_GRAPH_IR_GRAPHTRAININGOPS_TD
