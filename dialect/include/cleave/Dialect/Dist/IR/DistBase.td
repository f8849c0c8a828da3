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
include "cleave/Dialect/Dist/IR/DistEnums.td"

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

    Shardings are attached to function arguments and results
    (`dist.sharding` argument and result attributes), to `graph.param`
    (its `sharding`), and to any op's results as the discardable attribute
    `dist.sharding`: a `#dist.sharding` for an op with one result, an array
    of them (one per result) otherwise. Each is checked against the mesh it
    names and the type of the value it describes.

    A function marked `dist.partitioned` is one device's program, as the
    partitioner leaves it: its argument and result types are this device's
    blocks, and their shardings say how the blocks make up the global
    values (the runtime splits the global batch by them).
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The discardable attribute that carries the sharding of a function
    /// argument or result, or of an op's results.
    static constexpr ::llvm::StringLiteral getShardingAttrName() {
      return ::llvm::StringLiteral("dist.sharding");
    }
    /// The unit attribute of a function that is one device's program (the
    /// partitioner's output): its argument and result types are the
    /// blocks that their shardings describe, not global types.
    static constexpr ::llvm::StringLiteral getPartitionedAttrName() {
      return ::llvm::StringLiteral("dist.partitioned");
    }
    /// On the module of one pipeline stage (-dist-pipeline-parallel): its
    /// index, the mesh axis of the stages, and the communicator groups of
    /// every stage in one order (an array of arrays of axis names).
    static constexpr ::llvm::StringLiteral getStageAttrName() {
      return ::llvm::StringLiteral("dist.stage");
    }
    static constexpr ::llvm::StringLiteral getStageAxisAttrName() {
      return ::llvm::StringLiteral("dist.stage_axis");
    }
    static constexpr ::llvm::StringLiteral getGroupsAttrName() {
      return ::llvm::StringLiteral("dist.groups");
    }
    /// The attribute of a graph.attention or graph.attention_grad whose
    /// split queries meet the keys block by block around a ring
    /// (-dist-context-parallel's ring form): the partition hook passes the
    /// key and value blocks with collective_permute instead of gathering
    /// them. Its value is the layout of the sequence over the ring's
    /// devices: "contiguous" (device r holds chunk r of n) or "zigzag"
    /// (chunks r and 2n - 1 - r of 2n; the mesh names the ring's axes in
    /// its zigzag_axes).
    static constexpr ::llvm::StringLiteral getRingAttrName() {
      return ::llvm::StringLiteral("dist.ring");
    }
  }];
}

def Dist_SubAxisAttr : AttrDef<Dist_Dialect, "SubAxis"> {
  let mnemonic = "sub_axis";
  let summary = "a factor of a mesh axis";
  let description = [{
    The `size` devices of axis `name` that are `pre_size` apart: axis
    `"tp" = 4` is `"tp":(1)2` (the major half) followed by `"tp":(2)2`
    (the minor half). In a sharding it is written `"tp":(1)2`. It lets a
    dimension use part of an axis, e.g. the key/value heads of grouped
    attention when `tp` is larger than their count. `pre_size * size` must
    divide the axis size.
  }];
  let parameters = (ins "::mlir::StringAttr":$name, "int64_t":$pre_size,
                        "int64_t":$size);
  let assemblyFormat = "`<` $name `,` $pre_size `,` $size `>`";
  let genVerifyDecl = 1;
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
    #dist.sharding<@mesh, [{"dp", ?}, {"tp":(1)2} ], priority strategy, origin "-dist-data-parallel">
    ```

    - An axis is a whole mesh axis (`"tp"`) or a sub-axis (`"tp":(2)2`, see
      `#dist.sub_axis`). An axis, or two overlapping parts of one, appears
      at most once in a sharding.
    - A dimension ending in `?` is *open*: propagation may split it further
      (minor to the listed axes). Without it the dimension is *closed*.
    - `priority` says who decided the sharding: `user` (the default: a
      written constraint), `strategy` (a strategy pass) or `propagated`.
      Conflicts are resolved in that order.
    - `origin` names the op or annotation that decided it, for diagnostics
      and for explaining the collectives it causes.

    Against the mesh, every axis must exist and the product of a
    dimension's axis sizes must divide it; a partial `mean` needs a float
    element type and a partial `sum` a non-boolean one (checked where the
    attribute is used).
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh,
                        "::mlir::ArrayAttr":$dims,
                        "::mlir::ArrayAttr":$partial_axes,
                        "::cleave::ReductionKind":$partial_kind,
                        OptionalArrayRefParameter<"int64_t">:$open_dims,
                        "::cleave::dist::ShardingPriority":$priority,
                        "::mlir::StringAttr":$origin);
  let builders = [
    AttrBuilder<(ins "::mlir::FlatSymbolRefAttr":$mesh,
                     "::mlir::ArrayAttr":$dims,
                     "::mlir::ArrayAttr":$partial_axes,
                     "::cleave::ReductionKind":$partial_kind), [{
      return $_get($_ctxt, mesh, dims, partial_axes, partial_kind,
                   ::llvm::ArrayRef<int64_t>(),
                   ::cleave::dist::ShardingPriority::User,
                   ::mlir::StringAttr());
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The names of the axes splitting dimension `dim`, major to minor (the
    /// axis a sub-axis is part of).
    ::llvm::SmallVector<::llvm::StringRef> getAxes(int64_t dim) const;
    /// The axes splitting dimension `dim`, with their sub-axis extents.
    ::llvm::SmallVector<::cleave::dist::AxisRef> getAxisRefs(int64_t dim) const;
    /// The axes over which the value is partial.
    ::llvm::SmallVector<::cleave::dist::AxisRef> getPartialAxisRefs() const;
    /// True when propagation may split dimension `dim` further.
    bool isOpen(int64_t dim) const;
    /// True when no dimension is split and nothing is partial.
    bool isFullyReplicated() const;
    /// True when the value is partial over some axis.
    bool isPartial() const { return !getPartialAxes().empty(); }
    /// The same sharding with another priority and origin.
    ShardingAttr withOrigin(::cleave::dist::ShardingPriority priority,
                            ::mlir::StringAttr origin) const;
  }];
}

#endif // CLEAVE_DIALECT_DIST_IR_DISTBASE_TD
