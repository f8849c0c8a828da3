//===- GraphFusedOps.td - fused kernels of the graph ------*- tablegen -*-===//
//
// Ops that -cleave-fuse-linear creates after -cleave-autodiff: several graph
// ops computed by one runtime kernel (a GEMM with its bias and activation,
// or the activation's gradient and the bias gradient, as the epilogue, as
// cuBLASLt offers it; a GEMM that reads its operands transposed, and may
// sum the bias gradient too). They have sharding rules and
// verifiers (GraphFusedOps.cpp) and no gradient: fusion runs on the finished
// training step. Included by GraphOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_GRAPH_IR_GRAPHFUSEDOPS_TD
#define CLEAVE_DIALECT_GRAPH_IR_GRAPHFUSEDOPS_TD

/// A fused kernel: a sharding rule, no gradient rule.
class Graph_FusedOp<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic,
         !listconcat(traits,
                     [DeclareOpInterfaceMethods<ShardingRuleOpInterface>])>;

def Graph_LinearOp : Graph_FusedOp<"linear", [Pure]> {
  let summary = "matmul with a bias and an activation in its epilogue";
  let description = [{
    `result = activation(input x W + bias)`, where `input` is `[..., k]`,
    `W` is `weight` (`[k, n]`) or, with `transpose_weight`, its transpose
    (`weight` is `[n, k]`, as a PyTorch `Linear` stores it), `bias` is
    `[n]`, and `result` is `[..., n]`. Every operand and result has one
    float element type; the product accumulates in f32 and the result is
    rounded once.

    With an activation, the op may also return `preactivation`
    (`input x W + bias`, the value the activation's gradient needs), as
    cuBLASLt's `*_AUX` epilogues store it.

    ```mlir
    %h, %pre = graph.linear %x, %w, %b transpose_weight activation gelu_tanh
        : tensor<2x8x32xf32>, tensor<128x32xf32>, tensor<128xf32>
        -> tensor<2x8x128xf32>, tensor<2x8x128xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$weight,
                       Graph_FloatTensor:$bias,
                       UnitAttr:$transpose_weight,
                       DefaultValuedAttr<Graph_Activation,
                                         "Activation::None">:$activation);
  let results = (outs Graph_FloatTensor:$result,
                      Optional<Graph_FloatTensor>:$preactivation);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias (`transpose_weight` $transpose_weight^)?
    (`activation` $activation^)? attr-dict `:` type($input) `,`
    type($weight) `,` type($bias) `->` type(results)
  }];
  let hasVerifier = 1;
}

def Graph_MatmulGeluGradOp : Graph_FusedOp<"matmul_gelu_grad", [Pure]> {
  let summary = "matmul, gelu_grad and the bias gradient in one kernel";
  let description = [{
    The backward of a `graph.linear` with a GELU, seen from the layer
    after it: `result = gelu_grad(preactivation, grad x W)`, where `grad` is
    `[..., k]`, `W` is `weight` (`[k, n]`) or, with `transpose_weight`, its
    transpose, and `preactivation` and `result` are `[..., n]`. The optional
    `bias_grad` is the sum of `result` over every dimension but the last
    (the GELU's bias gradient), as `[n]` or with the summed dimensions kept
    as 1. cuBLASLt computes this as one matmul with its `DGELU_BGRAD`
    epilogue. One float element type; sums accumulate in f32.

    ```mlir
    %dz, %db = graph.matmul_gelu_grad %dy, %w, %pre approximate tanh
        : tensor<2x8x32xf32>, tensor<32x128xf32>, tensor<2x8x128xf32>
        -> tensor<2x8x128xf32>, tensor<1x1x128xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$grad, Graph_FloatTensor:$weight,
                       Graph_FloatTensor:$preactivation,
                       UnitAttr:$transpose_weight,
                       DefaultValuedAttr<Graph_GeluApproximation,
                                         "GeluApproximation::None">:$approximate);
  let results = (outs Graph_FloatTensor:$result,
                      Optional<Graph_FloatTensor>:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $weight `,` $preactivation
    (`transpose_weight` $transpose_weight^)?
    (`approximate` $approximate^)? attr-dict `:` type($grad) `,`
    type($weight) `,` type($preactivation) `->` type(results)
  }];
  let hasVerifier = 1;
}

def Graph_GemmOp : Graph_FusedOp<"gemm", [Pure]> {
  let summary = "matmul that reads either operand transposed";
  let description = [{
    `result = op(lhs) x op(rhs)`, as BLAS's GEMM: `lhs` is `[..., m, k]`
    (its leading dimensions are rows of one matrix) or, with
    `transpose_lhs`, the rank-2 `[k, m]`; `rhs` is the rank-2 `[k, n]` or,
    with `transpose_rhs`, `[n, k]`; `result` is `[..., m, n]`. One float
    element type for the operands; the product accumulates in f32 and is
    rounded once to the result's type, the operands' or f32 (a 16-bit
    weight gradient that the optimizer reads in f32).
    `-cleave-fuse-linear` folds the rank-2 transposes around matmuls into
    it: a weight gradient `transpose(transpose(x) dy)` becomes
    `gemm dy, x transpose_lhs`, a tied LM head's `x transpose(W)` becomes
    `gemm x, W transpose_rhs`. No transposed copy is stored.

    With `transpose_lhs`, the op may also return `bias_grad`, the sum of
    `lhs` over its rows (the contraction dimension): for the weight
    gradient `dy^T x` of a linear, the bias gradient, which cuBLASLt sums
    in the GEMM's epilogue (`BGRADB`) instead of a second pass over `dy`.
    It is `[m]` or `[1, ..., 1, m]`, of the result's element type or the
    operands', and sums in f32.

    ```mlir
    %dw, %db = graph.gemm %dy, %x transpose_lhs
        : tensor<16x64xf32>, tensor<16x32xf32>
        -> tensor<64x32xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Graph_FloatTensor:$result,
                      Optional<Graph_FloatTensor>:$bias_grad);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:` type($lhs) `,`
    type($rhs) `->` type(results)
  }];
  let hasVerifier = 1;
}

#endif // CLEAVE_DIALECT_GRAPH_IR_GRAPHFUSEDOPS_TD
