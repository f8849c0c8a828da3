//===- DistOps.td - dist dialect ops ------------------------*- tablegen -*-===//
//
// Meshes, sharding constraints and the collectives that partitioning emits.
// Collectives check their result types against their semantics and the mesh.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_DIST_IR_DISTOPS_TD
#define CLEAVE_DIALECT_DIST_IR_DISTOPS_TD

include "cleave/Dialect/Dist/IR/DistBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

def Dist_Tensor : StaticShapeTensorOf<[F32, BF16, F16, I64, I32, I1]>;

//===----------------------------------------------------------------------===//
// Mesh and sharding constraints
//===----------------------------------------------------------------------===//

def Dist_MeshOp : Dist_Op<"mesh", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a named grid of devices";
  let description = [{
    ```mlir
    dist.mesh @mesh ["dp" = 2, "pp" = 2, "tp" = 4]
    ```
    Devices are numbered row-major over the axes (the last axis varies
    fastest), so the minor axes should be the ones with the fastest links.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$axis_sizes);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The size of the named axis, if it exists.
    std::optional<int64_t> getAxisSize(::llvm::StringRef axis);
    /// The number of devices, the product of the axis sizes.
    int64_t getNumDevices();
  }];
}

def Dist_ShardOp : Dist_Op<"shard", [Pure, AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "constrains the sharding of a value";
  let description = [{
    The result is the input laid out as `sharding` says; propagation treats
    it as a user constraint, the highest priority.

    ```mlir
    %y = dist.shard %x to <@mesh, [{"dp"}, {} ]> : tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, Dist_ShardingAttr:$sharding);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "$input `to` $sharding attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// A collective over the device groups that differ only along `axes`.
class Dist_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Dist_Op<mnemonic, !listconcat(traits, [
          DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  code commonExtraClassDeclaration = [{
    /// Checks what depends on the size `groupSize` of the device group.
    ::llvm::LogicalResult verifyGroupSize(int64_t groupSize);
  }];
  let extraClassDeclaration = commonExtraClassDeclaration;
}

def Dist_AllReduceOp : Dist_CollectiveOp<"all_reduce", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "every device gets the reduction over its group";
  let description = [{
    ```mlir
    %y = dist.all_reduce %x on @mesh ["tp"] sum : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, Cleave_ReductionKind:$kind);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes $kind attr-dict `:` type($input)
  }];
}

def Dist_AllGatherOp : Dist_CollectiveOp<"all_gather", [Pure]> {
  let summary = "concatenates the group's pieces along a dimension";
  let description = [{
    The result dimension `dim` is the input's times the group size, in group
    order (row-major over `axes`).

    ```mlir
    %y = dist.all_gather %x on @mesh ["tp"] dim 1 : tensor<4x2xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes `dim` $dim attr-dict `:` type($input) `->`
    type($result)
  }];
}

def Dist_ReduceScatterOp : Dist_CollectiveOp<"reduce_scatter", [Pure]> {
  let summary = "reduces over the group and keeps this device's piece";
  let description = [{
    The result dimension `dim` is the input's divided by the group size.

    ```mlir
    %y = dist.reduce_scatter %x on @mesh ["tp"] sum dim 0 : tensor<8x8xf32> -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, Cleave_ReductionKind:$kind,
                       I64Attr:$dim);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes $kind `dim` $dim attr-dict `:` type($input) `->`
    type($result)
  }];
}

def Dist_AllToAllOp : Dist_CollectiveOp<"all_to_all", [Pure]> {
  let summary = "splits one dimension over the group and concatenates another";
  let description = [{
    Piece i of `split_dim` goes to group member i; received pieces are
    concatenated along `concat_dim` in group order. The result's split
    dimension is divided by the group size and its concat dimension
    multiplied (the same dimension when they are equal).

    ```mlir
    %y = dist.all_to_all %x on @mesh ["ep"] split 0 concat 1 : tensor<8x4xf32> -> tensor<2x16xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes `split` $split_dim `concat` $concat_dim attr-dict
    `:` type($input) `->` type($result)
  }];
}

def Dist_CollectivePermuteOp : Dist_CollectiveOp<"collective_permute", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "sends to fixed group members and receives from others";
  let description = [{
    Each `[source, target]` pair (group indices) sends source's input to
    target; no index is a source twice or a target twice. A member that is
    nobody's target gets zeros. A ring over 4 members:

    ```mlir
    %y = dist.collective_permute %x on @mesh ["cp"] pairs [[0, 1], [1, 2], [2, 3], [3, 0]] : tensor<4xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64ArrayAttr:$flat_pairs);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes `pairs` custom<Pairs>($flat_pairs) attr-dict `:`
    type($input)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = commonExtraClassDeclaration # [{
    /// The (source, target) pairs.
    ::llvm::SmallVector<std::pair<int64_t, int64_t>> getPairs();
  }];
}

def Dist_BroadcastOp : Dist_CollectiveOp<"broadcast", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "every group member gets the root member's value";
  let description = [{
    ```mlir
    %y = dist.broadcast %x on @mesh ["dp"] root 0 : tensor<4xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$root);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes `root` $root attr-dict `:` type($input)
  }];
}

def Dist_SendOp : Dist_CollectiveOp<"send"> {
  let summary = "point-to-point send to a group member (pipeline stages)";
  let description = [{
    Sends to the device at group index `target` (same coordinates along the
    other axes); matched with the `dist.recv` of the same `tag` there.

    ```mlir
    dist.send %act on @mesh ["pp"] to 1 tag 0 : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$target,
                       DefaultValuedAttr<I64Attr, "0">:$tag);
  let assemblyFormat = [{
    $input `on` $mesh $axes `to` $target (`tag` $tag^)? attr-dict `:`
    type($input)
  }];
}

def Dist_RecvOp : Dist_CollectiveOp<"recv"> {
  let summary = "point-to-point receive from a group member";
  let description = [{
    ```mlir
    %act = dist.recv on @mesh ["pp"] from 0 tag 0 : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$source, DefaultValuedAttr<I64Attr, "0">:$tag);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    `on` $mesh $axes `from` $source (`tag` $tag^)? attr-dict `:` type($result)
  }];
}

#endif // CLEAVE_DIALECT_DIST_IR_DISTOPS_TD
