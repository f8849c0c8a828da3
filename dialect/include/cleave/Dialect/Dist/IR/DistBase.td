//===- DistBase.td - dist dialect and sharding attribute ---*- tablegen -*-===//
//
// The `dist` dialect: device meshes, sharding annotations and collectives.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_DIST_IR_DISTBASE_TD
#define CLEAVE_DIALECT_DIST_IR_DISTBASE_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"
include "cleave/Interfaces/CleaveEnums.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::cleave::dist";
  let summary = "distribution: meshes, shardings and collectives";
  let description = [{
    A `dist.mesh` names the axes of the device grid. A `#dist.sharding`
    attribute says, for each tensor dimension, which mesh axes split it
    (major to minor) and over which axes the value is partial (unreduced).
    Collectives operate over groups of devices that differ only along the
    listed mesh axes.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The discardable attribute that carries a function argument's or
    /// result's sharding.
    static constexpr ::llvm::StringLiteral getShardingAttrName() {
      return ::llvm::StringLiteral("dist.sharding");
    }
  }];
}


def Dist_ShardingAttr : AttrDef<Dist_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "how a tensor is laid out over a mesh";
  let description = [{
    One brace list of mesh axes per tensor dimension (major to minor; empty
    means replicated along that dimension), and optionally the axes over
    which the value is partial with their reduction kind:

    ```mlir
    #dist.sharding<@mesh, [{"dp"}, {}, {"tp"} ]>
    #dist.sharding<@mesh, [{"dp"}, {} ], partial sum {"tp"}>
    ```

    An axis appears at most once. Against the mesh, every axis must exist and
    the product of a dimension's axis sizes must divide it (checked where the
    attribute is used).
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$dims,
                        "::mlir::ArrayAttr":$partial_axes,
                        "::cleave::ReductionKind":$partial_kind);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The axes splitting dimension `dim`, major to minor.
    ::llvm::SmallVector<::llvm::StringRef> getAxes(int64_t dim) const;
    /// True when no dimension is split and nothing is partial.
    bool isFullyReplicated() const;
  }];
}

#endif // CLEAVE_DIALECT_DIST_IR_DISTBASE_TD
