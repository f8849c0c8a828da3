//===- GraphBase.td - graph dialect, attributes, types -----*- tablegen -*-===//
//
// The `graph` dialect definition, its attributes and the tensor type
// constraints shared by its ops.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_GRAPH_IR_GRAPHBASE_TD
#define CLEAVE_DIALECT_GRAPH_IR_GRAPHBASE_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"
include "cleave/Interfaces/CleaveEnums.td"
include "cleave/Dialect/Graph/IR/GraphEnums.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::cleave::graph";
  let summary = "the model graph: static ranked tensors with value semantics";
  let description = [{
    Ops are few and general (ONNX-like), plus the fused ops that matter for
    speed and for sharding: attention, layer and RMS norm, gelu, cross-entropy
    and the mixture-of-experts pieces. Trainable parameters are module-level
    `graph.param` symbols read by `graph.read_param`, so that training can
    update them in place. Every op carries a sharding rule
    (`ShardingRuleOpInterface`).
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  // Parameters carry #dist.sharding attributes; the `cleave.*` metadata on
  // graph IR (memory plan, parameter roles) is verified by the cleave
  // dialect, which must be loaded for that.
  let dependentDialects = ["::cleave::dist::DistDialect",
                           "::cleave::CleaveDialect"];
  // The training-step annotations (graph.phase, graph.microbatch,
  // graph.layer) are verified.
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// On ops of a training step: `#graph<phase forward|backward|optimizer>`.
    static constexpr ::llvm::StringLiteral getPhaseAttrName() {
      return ::llvm::StringLiteral("graph.phase");
    }
    /// On ops of a training step: the 0-based microbatch (accumulation).
    static constexpr ::llvm::StringLiteral getMicrobatchAttrName() {
      return ::llvm::StringLiteral("graph.microbatch");
    }
    /// On ops of a training step: the model layer (`blocks.N`) they belong
    /// to, for pipeline stages and recomputation; absent outside layers.
    static constexpr ::llvm::StringLiteral getLayerAttrName() {
      return ::llvm::StringLiteral("graph.layer");
    }
  }];
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//


def Graph_ExternalWeightsAttr : AttrDef<Graph_Dialect, "ExternalWeights"> {
  let mnemonic = "external";
  let summary = "initial value stored in an external weights file";
  let description = [{
    For models too large to embed: the parameter's initial value is `size`
    bytes of raw little-endian data at byte `offset` of `path` (relative to
    the IR file), e.g. `#graph.external<"model.bin", offset = 0, size = 128>`.
  }];
  let parameters = (ins StringRefParameter<"file path">:$path,
                        "int64_t":$offset, "int64_t":$size);
  let assemblyFormat = "`<` $path `,` `offset` `=` $offset `,` `size` `=` $size `>`";
  let genVerifyDecl = 1;
}

def Graph_PhaseAttr : EnumAttr<Graph_Dialect, Graph_Phase, "phase"> {
  let summary = "forward, backward or optimizer";
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Graph_Tensor : StaticShapeTensorOf<[F32, BF16, F16, I64, I32, I1]>;
def Graph_FloatTensor : StaticShapeTensorOf<[F32, BF16, F16]>;
def Graph_NumericTensor : StaticShapeTensorOf<[F32, BF16, F16, I64, I32]>;
def Graph_IndexTensor : StaticShapeTensorOf<[I64, I32]>;
def Graph_BoolTensor : StaticShapeTensorOf<[I1]>;
/// An i64 scalar, written without its type (a block's offset).
def Graph_I64Scalar : 0DTensorOf<[I64]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI64Type())">;

#endif // CLEAVE_DIALECT_GRAPH_IR_GRAPHBASE_TD
