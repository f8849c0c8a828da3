//===- GraphOps.td - graph dialect ops ----------------------*- tablegen -*-===//
//
// The ops of the model graph. Result types are inferred wherever they follow
// from the operands; every op has a sharding rule and a verifier whose checks
// are exercised by test/Dialect/Graph/invalid.mlir.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_GRAPH_IR_GRAPHOPS_TD
#define CLEAVE_DIALECT_GRAPH_IR_GRAPHOPS_TD

include "cleave/Dialect/Graph/IR/GraphBase.td"
include "cleave/Dialect/Dist/IR/DistBase.td"
include "cleave/Interfaces/GradientOpInterface.td"
include "cleave/Interfaces/ShardingRuleOpInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

/// A value op of the model graph: it has a sharding rule
/// (GraphShardingRules.cpp) and a gradient rule (GraphGradients.cpp).
class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic,
         !listconcat(traits,
                     [DeclareOpInterfaceMethods<ShardingRuleOpInterface>,
                      DeclareOpInterfaceMethods<GradientOpInterface>])>;

/// An op that -cleave-autodiff creates for a backward pass: it has a
/// sharding rule, and no gradient of its own (no second derivatives).
class Graph_BackwardOp<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic,
         !listconcat(traits,
                     [DeclareOpInterfaceMethods<ShardingRuleOpInterface>])>;

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

def Graph_ParamOp : Op<Graph_Dialect, "param", [Symbol,
    HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a trainable (or frozen) model parameter";
  let description = [{
    A module-level parameter with its global type and its initial value:
    inline dense elements, a `dense_resource` blob, or an external weights
    file. `frozen` parameters are not trained. Functions read it with
    `graph.read_param`.

    An optional `sharding` says how the parameter is laid out over a mesh
    (ZeRO-3 and tensor parallelism shard parameters; optimizer state is
    sharded under ZeRO-1). The type and the initial value stay global: each
    device keeps the block the sharding gives it, and after partitioning
    `graph.read_param` returns that local block. The sharding must name a
    `dist.mesh`, use its axes once each, divide every dimension, and must
    not be partial.

    ```mlir
    graph.param @fc1.weight : tensor<16x8xf32> = dense_resource<fc1> : tensor<16x8xf32>
    graph.param @pos frozen : tensor<4xf32> = dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf32>
    graph.param @big : tensor<1024xf32> = #graph.external<"w.bin", offset = 0, size = 4096>
    graph.param @fc2.weight : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {} ]>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttrOf<Graph_Tensor>:$type,
                       OptionalAttr<AnyAttr>:$initial_value, UnitAttr:$frozen,
                       OptionalAttr<Dist_ShardingAttr>:$sharding);
  let assemblyFormat = [{
    $sym_name (`frozen` $frozen^)? `:` $type (`sharding` $sharding^)?
    (`=` $initial_value^)? attr-dict
  }];
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$name, "::mlir::Type":$type,
                   "::mlir::Attribute":$initial_value, "bool":$frozen), [{
      build($_builder, $_state, name, ::llvm::cast<::mlir::RankedTensorType>(type),
            initial_value, frozen, ::cleave::dist::ShardingAttr());
    }]>
  ];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def Graph_ReadParamOp : Graph_Op<"read_param", [
    MemoryEffects<[MemRead]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads the current value of a parameter";
  let description = [{
    The result has the parameter's global type, or, for a sharded parameter
    in a partitioned program, the type of this device's block.

    ```mlir
    %w = graph.read_param @fc1.weight : tensor<16x8xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "$param attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Constants and index generators
//===----------------------------------------------------------------------===//

def Graph_ConstantOp : Graph_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor";
  let description = [{
    ```mlir
    %c = graph.constant dense<1.0> : tensor<4xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Graph_IotaOp : Graph_Op<"iota", [Pure]> {
  let summary = "0, 1, 2, ... along one dimension";
  let description = [{
    Each element is its index along `dim` (ONNX Range, positions).

    ```mlir
    %pos = graph.iota dim 1 : tensor<2x128xi64>
    ```
  }];
  let arguments = (ins I64Attr:$dim);
  let results = (outs Graph_NumericTensor:$result);
  let assemblyFormat = "`dim` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Graph_UnaryOp<string mnemonic, Type type, list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat(traits,
                                     [Pure, SameOperandsAndResultType])> {
  let arguments = (ins type:$operand);
  let results = (outs type:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand)";
}

def Graph_NegOp : Graph_UnaryOp<"neg", Graph_NumericTensor> {
  let summary = "elementwise negation";
}
def Graph_AbsOp : Graph_UnaryOp<"abs", Graph_NumericTensor> {
  let summary = "elementwise absolute value";
}
def Graph_ReluOp : Graph_UnaryOp<"relu", Graph_NumericTensor> {
  let summary = "elementwise max(x, 0)";
}
def Graph_ExpOp : Graph_UnaryOp<"exp", Graph_FloatTensor> {
  let summary = "elementwise e^x";
}
def Graph_LogOp : Graph_UnaryOp<"log", Graph_FloatTensor> {
  let summary = "elementwise natural logarithm";
}
def Graph_SqrtOp : Graph_UnaryOp<"sqrt", Graph_FloatTensor> {
  let summary = "elementwise square root";
}
def Graph_RsqrtOp : Graph_UnaryOp<"rsqrt", Graph_FloatTensor> {
  let summary = "elementwise 1 / sqrt(x)";
}
def Graph_ReciprocalOp : Graph_UnaryOp<"reciprocal", Graph_FloatTensor> {
  let summary = "elementwise 1 / x";
}
def Graph_TanhOp : Graph_UnaryOp<"tanh", Graph_FloatTensor> {
  let summary = "elementwise hyperbolic tangent";
}
def Graph_ErfOp : Graph_UnaryOp<"erf", Graph_FloatTensor> {
  let summary = "elementwise error function";
}
def Graph_SigmoidOp : Graph_UnaryOp<"sigmoid", Graph_FloatTensor> {
  let summary = "elementwise 1 / (1 + e^-x)";
}
def Graph_SiluOp : Graph_UnaryOp<"silu", Graph_FloatTensor> {
  let summary = "elementwise x * sigmoid(x)";
}
def Graph_SinOp : Graph_UnaryOp<"sin", Graph_FloatTensor> {
  let summary = "elementwise sine";
}
def Graph_CosOp : Graph_UnaryOp<"cos", Graph_FloatTensor> {
  let summary = "elementwise cosine";
}

def Graph_GeluOp : Graph_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise Gaussian error linear unit";
  let description = [{
    `x * Phi(x)` with the exact erf form by default, or the tanh
    approximation (`approximate tanh`) that GPT-2 uses.

    ```mlir
    %y = graph.gelu %x approximate tanh : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$operand,
                       DefaultValuedAttr<Graph_GeluApproximation,
                                         "GeluApproximation::None">:$approximate);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $operand (`approximate` $approximate^)? attr-dict `:` type($operand)
  }];
}

class Graph_BinaryOp<string mnemonic, Type type, list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor])> {
  let description = [{
    Elementwise with NumPy broadcasting: shapes are aligned from the right and
    each pair of dimensions must be equal or one of them 1. Both operands have
    the same element type.
  }];
  let arguments = (ins type:$lhs, type:$rhs);
  let results = (outs type:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

def Graph_AddOp : Graph_BinaryOp<"add", Graph_NumericTensor, [Commutative]> {
  let summary = "elementwise sum";
}
def Graph_SubOp : Graph_BinaryOp<"sub", Graph_NumericTensor> {
  let summary = "elementwise difference";
}
def Graph_MulOp : Graph_BinaryOp<"mul", Graph_NumericTensor, [Commutative]> {
  let summary = "elementwise product";
}
def Graph_DivOp : Graph_BinaryOp<"div", Graph_NumericTensor> {
  let summary = "elementwise quotient";
}
def Graph_PowOp : Graph_BinaryOp<"pow", Graph_FloatTensor> {
  let summary = "elementwise lhs ^ rhs";
}
def Graph_MaxOp : Graph_BinaryOp<"max", Graph_NumericTensor, [Commutative]> {
  let summary = "elementwise maximum";
}
def Graph_MinOp : Graph_BinaryOp<"min", Graph_NumericTensor, [Commutative]> {
  let summary = "elementwise minimum";
}

def Graph_CompareOp : Graph_Op<"compare", [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise comparison with broadcasting, giving i1";
  let description = [{
    ```mlir
    %m = graph.compare lt %a, %b : tensor<4x8xi64>, tensor<8xi64>
    ```
  }];
  let arguments = (ins Graph_CompareDirection:$direction,
                       Graph_NumericTensor:$lhs, Graph_NumericTensor:$rhs);
  let results = (outs Graph_BoolTensor:$result);
  let assemblyFormat = [{
    $direction $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)
  }];
}

def Graph_WhereOp : Graph_Op<"where", [Pure, InferTypeOpAdaptor]> {
  let summary = "elementwise select: condition ? on_true : on_false";
  let description = [{
    The three operands broadcast together (NumPy rules).

    ```mlir
    %y = graph.where %mask, %x, %neg_inf : tensor<8x8xi1>, tensor<2x8x8xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Graph_BoolTensor:$condition, Graph_Tensor:$on_true,
                       Graph_Tensor:$on_false);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:` type($condition) `,`
    type($on_true) `,` type($on_false)
  }];
}

def Graph_CastOp : Graph_Op<"cast", [Pure]> {
  let summary = "converts the element type";
  let description = [{
    ```mlir
    %h = graph.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
    ```
  }];
  let arguments = (ins Graph_Tensor:$operand);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Contractions, normalizations, reductions
//===----------------------------------------------------------------------===//

def Graph_MatmulOp : Graph_Op<"matmul", [Pure, InferTypeOpAdaptor]> {
  let summary = "batched matrix product with broadcast batch dimensions";
  let description = [{
    `[..., m, k] x [..., k, n] -> [..., m, n]`. Both operands have rank >= 2;
    the batch dimensions broadcast (NumPy rules).

    ```mlir
    %y = graph.matmul %x, %w : tensor<2x16x64xf32>, tensor<64x256xf32>
    ```
  }];
  let arguments = (ins Graph_NumericTensor:$lhs, Graph_NumericTensor:$rhs);
  let results = (outs Graph_NumericTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}

class Graph_SoftmaxLikeOp<string mnemonic>
    : Graph_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let arguments = (ins Graph_FloatTensor:$operand, I64Attr:$dim);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$operand `dim` $dim attr-dict `:` type($operand)";
  let hasVerifier = 1;
}

def Graph_SoftmaxOp : Graph_SoftmaxLikeOp<"softmax"> {
  let summary = "softmax along one dimension";
  let description = [{
    ```mlir
    %p = graph.softmax %x dim 1 : tensor<4x8xf32>
    ```
  }];
}
def Graph_LogSoftmaxOp : Graph_SoftmaxLikeOp<"log_softmax"> {
  let summary = "log of softmax along one dimension";
}

def Graph_ReduceOp : Graph_Op<"reduce", [Pure, InferTypeOpAdaptor]> {
  let summary = "sum, mean, max or min over dimensions";
  let description = [{
    Reduces the sorted, distinct `dims`; with `keepdim` they stay as size 1.

    ```mlir
    %m = graph.reduce mean %x dims [2] keepdim : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Cleave_ReductionKind:$kind,
                       Graph_NumericTensor:$operand,
                       DenseI64ArrayAttr:$dims, UnitAttr:$keepdim);
  let results = (outs Graph_NumericTensor:$result);
  let assemblyFormat = [{
    $kind $operand `dims` $dims (`keepdim` $keepdim^)? attr-dict `:`
    type($operand)
  }];
}

def Graph_LayerNormOp : Graph_Op<"layer_norm", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "layer normalization over the trailing dimensions";
  let description = [{
    Normalizes over dimensions `dim ..< rank` (ONNX LayerNormalization's
    axis): `(x - mean) / sqrt(var + eps) * scale + bias`, with the biased
    variance. `scale` and the optional `bias` have the normalized shape.

    ```mlir
    %y = graph.layer_norm %x, %g, %b dim 2 eps 1.0e-05 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       Optional<Graph_FloatTensor>:$bias, I64Attr:$dim,
                       DefaultValuedAttr<F64Attr, "1e-5">:$epsilon);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? `dim` $dim (`eps` $epsilon^)? attr-dict
    `:` type($input) `,` type($scale) (`,` type($bias)^)?
  }];
  let hasVerifier = 1;
}

def Graph_RmsNormOp : Graph_Op<"rms_norm", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "RMS normalization over the trailing dimensions";
  let description = [{
    `x / sqrt(mean(x^2) + eps) * scale` over dimensions `dim ..< rank`.

    ```mlir
    %y = graph.rms_norm %x, %g dim 2 eps 1.0e-06 : tensor<2x8x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$scale,
                       I64Attr:$dim,
                       DefaultValuedAttr<F64Attr, "1e-6">:$epsilon);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `dim` $dim (`eps` $epsilon^)? attr-dict `:`
    type($input) `,` type($scale)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def Graph_ReshapeOp : Graph_Op<"reshape", [Pure]> {
  let summary = "same elements, new shape (row-major order)";
  let description = [{
    ```mlir
    %h = graph.reshape %x : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$operand);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_TransposeOp : Graph_Op<"transpose", [Pure, InferTypeOpAdaptor]> {
  let summary = "permutes dimensions: result dim i is operand dim perm[i]";
  let description = [{
    ```mlir
    %t = graph.transpose %x perm [0, 2, 1, 3] : tensor<2x8x4x16xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$operand, DenseI64ArrayAttr:$perm);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "$operand `perm` $perm attr-dict `:` type($operand)";
  let hasFolder = 1;
}

def Graph_BroadcastInDimOp : Graph_Op<"broadcast_in_dim", [Pure]> {
  let summary = "broadcasts into a larger shape (ONNX Expand)";
  let description = [{
    Operand dimension i becomes result dimension `dims[i]`; it must be 1 or
    equal to that result dimension. The other result dimensions are new.

    ```mlir
    %b = graph.broadcast_in_dim %x dims [1] : tensor<8xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$operand, DenseI64ArrayAttr:$dims);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = [{
    $operand `dims` $dims attr-dict `:` type($operand) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Graph_SliceOp : Graph_Op<"slice", [Pure, InferTypeOpAdaptor]> {
  let summary = "a strided box [start, limit) of the operand";
  let description = [{
    ```mlir
    %s = graph.slice %x start [0, 2] limit [4, 8] strides [1, 2] : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$operand, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = [{
    $operand `start` $start `limit` $limit (`strides` $strides^)? attr-dict `:`
    type($operand)
  }];
  let extraClassDeclaration = [{
    /// The strides, all ones when absent.
    ::llvm::SmallVector<int64_t> getStridesOrOnes();
  }];
  let hasFolder = 1;
}

def Graph_ConcatOp : Graph_Op<"concat", [Pure, InferTypeOpAdaptor]> {
  let summary = "joins tensors along one dimension";
  let description = [{
    ```mlir
    %c = graph.concat %a, %b dim 1 : tensor<4x2xf32>, tensor<4x6xf32>
    ```
  }];
  let arguments = (ins Variadic<Graph_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = "$inputs `dim` $dim attr-dict `:` type($inputs)";
}

def Graph_SplitOp : Graph_Op<"split", [Pure, InferTypeOpAdaptor]> {
  let summary = "cuts a tensor into consecutive pieces along one dimension";
  let description = [{
    ```mlir
    %q, %k, %v = graph.split %qkv dim 2 sizes [64, 64, 64] : tensor<2x8x192xf32>
    ```
  }];
  let arguments = (ins Graph_Tensor:$operand, I64Attr:$dim,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Graph_Tensor>:$results);
  let assemblyFormat = [{
    $operand `dim` $dim `sizes` $sizes attr-dict `:` type($operand)
  }];
}

def Graph_GatherOp : Graph_Op<"gather", [Pure, InferTypeOpAdaptor]> {
  let summary = "takes slices at the given indices (ONNX Gather, embedding)";
  let description = [{
    Result shape is `data[:dim] + indices + data[dim+1:]`. A negative index
    counts from the end (as in ONNX); one outside `[-size, size)` is a
    runtime error. An embedding
    lookup is a gather on dimension 0 of the table.

    With an `offset` (an i64 scalar o), `data` is the block of a larger
    table that holds its entries `[o, o + size)` along `dim`: index `i`
    takes entry `i - o`, and an index outside the block a slice of zeros
    (no index counts from the end). This is the vocabulary-parallel
    embedding's lookup, one kernel where the partition hook would otherwise
    shift, compare, select and mask: a device holds a block of the
    vocabulary at an offset computed from its `dist.axis_index`.

    ```mlir
    %e = graph.gather %table[%ids] dim 0 : tensor<100x64xf32>, tensor<2x8xi64>
    %p = graph.gather %block[%ids] dim 0 offset %o : tensor<50x64xf32>, tensor<2x8xi64>
    ```
  }];
  let arguments = (ins Graph_Tensor:$data, Graph_IndexTensor:$indices,
                       Optional<Graph_I64Scalar>:$offset, I64Attr:$dim);
  let results = (outs Graph_Tensor:$result);
  let assemblyFormat = [{
    $data `[` $indices `]` `dim` $dim (`offset` $offset^)? attr-dict `:`
    type($data) `,` type($indices)
  }];
}

def Graph_TopKOp : Graph_Op<"topk", [Pure, InferTypeOpAdaptor]> {
  let summary = "the k largest (or smallest) values along a dimension";
  let description = [{
    Values in descending order (ascending with `smallest`) and their i64
    indices; ties go to the lower index.

    ```mlir
    %v, %i = graph.topk %x k 2 dim 1 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Graph_NumericTensor:$operand, I64Attr:$k, I64Attr:$dim,
                       UnitAttr:$smallest);
  let results = (outs Graph_NumericTensor:$values,
                      StaticShapeTensorOf<[I64]>:$indices);
  let assemblyFormat = [{
    $operand `k` $k `dim` $dim (`smallest` $smallest^)? attr-dict `:`
    type($operand)
  }];
}

//===----------------------------------------------------------------------===//
// Fused transformer ops and losses
//===----------------------------------------------------------------------===//

def Graph_AttentionOp : Graph_Op<"attention", [Pure, InferTypeOpAdaptor]> {
  let summary = "scaled dot-product attention";
  let description = [{
    `softmax(q k^T * scale + mask) v` on `q: [B, H, Sq, D]`,
    `k: [B, Hkv, Sk, D]`, `v: [B, Hkv, Sk, Dv]` giving `[B, H, Sq, Dv]`.
    `H` must be a multiple of `Hkv` (grouped-query attention: query head h
    uses key/value head `h / (H / Hkv)`). `scale` defaults to `1/sqrt(D)`.
    The optional mask broadcasts to `[B, H, Sq, Sk]`: i1 (true keeps the
    score) or the query's float type (added to the scores). `causal` masks
    key positions after the query position (top-left aligned).

    ```mlir
    %o = graph.attention %q, %k, %v causal : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$query, Graph_FloatTensor:$key,
                       Graph_FloatTensor:$value, Optional<Graph_Tensor>:$mask,
                       UnitAttr:$causal, OptionalAttr<F64Attr>:$scale);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? (`causal` $causal^)?
    (`scale` $scale^)? attr-dict `:` type($query) `,` type($key) `,`
    type($value) (`,` type($mask)^)?
  }];
  let extraClassDeclaration = [{
    /// The scale of the scores: `scale`, or 1/sqrt of the head size.
    double getScaleOrDefault();
  }];
}

def Graph_CrossEntropyOp : Graph_Op<"cross_entropy", [Pure,
    InferTypeOpAdaptor]> {
  let summary = "softmax cross-entropy with class-index labels";
  let description = [{
    `logits: [..., C]`, `labels: [...]` (integers in [0, C)); the result is
    the mean (or, with `reduction sum`, the sum) over all positions whose
    label is not `ignore_index` of `-log_softmax(logits)[label]`, as
    PyTorch's `cross_entropy`. The result is f32 whatever the logits' float
    type: the log-sum-exp and the reduction are taken in f32, so 16-bit
    logits need no f32 copy. With every position ignored the mean is 0.

    The training step uses the sum and divides by the count of positions
    itself: sharded over the batch, the sums and the counts add up across
    devices, while means of shards that count different positions would
    not.

    ```mlir
    %l = graph.cross_entropy %logits, %labels ignore_index -100 : tensor<2x8x100xf32>, tensor<2x8xi64>
    %s = graph.cross_entropy %logits, %labels reduction sum : tensor<2x8x100xf32>, tensor<2x8xi64>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IndexTensor:$labels,
                       OptionalAttr<I64Attr>:$ignore_index,
                       DefaultValuedAttr<Cleave_ReductionKind,
                                         "::cleave::ReductionKind::Mean">:$reduction);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels (`ignore_index` $ignore_index^)?
    (`reduction` $reduction^)? attr-dict `:` type($logits) `,` type($labels)
  }];
  let hasVerifier = 1;
}

def Graph_MseOp : Graph_Op<"mse", [Pure, InferTypeOpAdaptor,
    AllTypesMatch<["prediction", "target"]>]> {
  let summary = "mean squared error";
  let description = [{
    ```mlir
    %l = graph.mse %pred, %target : tensor<4x2xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$prediction, Graph_FloatTensor:$target);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$prediction `,` $target attr-dict `:` type($prediction)";
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

def Graph_RouterTopKOp : Graph_Op<"router_topk", [Pure, InferTypeOpAdaptor]> {
  let summary = "picks each token's top-k experts and their gates";
  let description = [{
    `logits: [T, E]` -> `gates: [T, k]` (float), `experts: [T, k]` (i64).
    Gates are the softmax probabilities of the chosen experts, renormalized to
    sum to 1 over the k choices with `normalize` (Mixtral's routing).

    ```mlir
    %g, %e = graph.router_topk %logits k 2 normalize : tensor<16x8xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$logits, I64Attr:$k,
                       UnitAttr:$normalize);
  let results = (outs Graph_FloatTensor:$gates,
                      StaticShapeTensorOf<[I64]>:$experts);
  let assemblyFormat = [{
    $logits `k` $k (`normalize` $normalize^)? attr-dict `:` type($logits)
  }];
}

def Graph_MoeDispatchOp : Graph_Op<"moe_dispatch", [Pure, InferTypeOpAdaptor]> {
  let summary = "scatters tokens into per-expert buffers of fixed capacity";
  let description = [{
    `tokens: [T, H]`, `experts: [T, k]` -> `[E, G * C, H]`. The tokens form
    `G` groups of `T / G` consecutive tokens (`groups`, default 1), and each
    group has `C` slots per expert (`capacity`, per group, as GShard defines
    it): assignment (t, j) of group g goes to expert `experts[t, j]` at its
    next free slot of the group, in order of t then j, slot `g * C + n`;
    assignments beyond the group's capacity are dropped; empty slots are
    zero. Sharding the tokens by whole groups therefore drops exactly the
    assignments one device drops, and under expert parallelism the
    partitioner turns the groups' slots into experts with an all_to_all.

    ```mlir
    %d = graph.moe_dispatch %x, %e experts 8 capacity 4 : tensor<16x64xf32>, tensor<16x2xi64>
    %g = graph.moe_dispatch %x, %e experts 8 capacity 4 groups 2 : tensor<16x64xf32>, tensor<16x2xi64>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$tokens,
                       StaticShapeTensorOf<[I64]>:$experts,
                       I64Attr:$num_experts, I64Attr:$capacity,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $tokens `,` $experts `experts` $num_experts `capacity` $capacity
    (`groups` $groups^)? attr-dict `:` type($tokens) `,` type($experts)
  }];
}

def Graph_ExpertMatmulOp : Graph_Op<"expert_matmul", [Pure,
    InferTypeOpAdaptor]> {
  let summary = "one matrix product per expert over a stacked expert dimension";
  let description = [{
    `[E, C, H] x [E, H, F] -> [E, C, F]`; expert parallelism shards E.

    ```mlir
    %h = graph.expert_matmul %d, %w1 : tensor<8x4x64xf32>, tensor<8x64x256xf32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$weight);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` type($weight)";
}

def Graph_MoeCombineOp : Graph_Op<"moe_combine", [Pure, InferTypeOpAdaptor]> {
  let summary = "gathers expert outputs back to tokens, weighted by the gates";
  let description = [{
    `expert_out: [E, G * C, H]`, `gates: [T, k]`, `experts: [T, k]` ->
    `[T, H]`: token t receives `sum_j gates[t, j] * expert_out[experts[t, j],
    slot]` over its assignments that were not dropped, with the slots that
    `graph.moe_dispatch` with the same `groups` assigns.

    ```mlir
    %y = graph.moe_combine %o, %g, %e : tensor<8x4x64xf32>, tensor<16x2xf32>, tensor<16x2xi64>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$expert_out, Graph_FloatTensor:$gates,
                       StaticShapeTensorOf<[I64]>:$experts,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $expert_out `,` $gates `,` $experts (`groups` $groups^)? attr-dict `:`
    type($expert_out) `,` type($gates) `,` type($experts)
  }];
}

include "cleave/Dialect/Graph/IR/GraphTrainingOps.td"
include "cleave/Dialect/Graph/IR/GraphFusedOps.td"

#endif // CLEAVE_DIALECT_GRAPH_IR_GRAPHOPS_TD
