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
include "mlir/IR/RegionKindInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

def Dist_Tensor : StaticShapeTensorOf<[F32, BF16, F16, I64, I32, I1]>;
/// A device index: an i64 scalar tensor.
def Dist_IndexScalar : 0DTensorOf<[I64]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getI64Type())";
}

/// The communicators of the mesh. Every collective reads and writes it, so
/// collectives are neither merged (-cse), nor removed when unused, nor
/// reordered among themselves: every rank issues them in program order,
/// and ZeRO-3's second gather of a parameter stays a second gather.
def Dist_CommResource : Resource<"::cleave::dist::CommResource">;
def Dist_CommEffects : MemoryEffects<[MemRead<Dist_CommResource>,
                                      MemWrite<Dist_CommResource>]>;

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

    A dimension split on an axis holds, on device r of the axis's n, the
    r-th of n contiguous blocks, unless the axis is one of `zigzag_axes`:
    then the dimension is cut into 2n chunks and device r holds chunks r and
    2n - 1 - r, one after the other (the zigzag layout that balances a
    causal attention's work over context-parallel devices). A zigzag axis
    is the major axis of any dimension it splits.

    ```mlir
    dist.mesh @mesh ["dp" = 2, "cp" = 2] {zigzag_axes = ["cp"]}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$axis_sizes,
                       OptionalAttr<StrArrayAttr>:$zigzag_axes);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The size of the named axis, if it exists.
    std::optional<int64_t> getAxisSize(::llvm::StringRef axis);
    /// The number of devices, the product of the axis sizes.
    int64_t getNumDevices();
    /// True when dimensions split on `axis` are in the zigzag layout.
    bool isZigzag(::llvm::StringRef axis);
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

/// A collective over the device groups that differ only along `axes`. It
/// has the communication effects (see Dist_CommResource).
class Dist_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Dist_Op<mnemonic, !listconcat(traits, [Dist_CommEffects,
          DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  code commonExtraClassDeclaration = [{
    /// Checks what depends on the size `groupSize` of the device group.
    ::llvm::LogicalResult verifyGroupSize(int64_t groupSize);
  }];
  let extraClassDeclaration = commonExtraClassDeclaration;
}

def Dist_AllReduceOp : Dist_CollectiveOp<"all_reduce", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "every device gets the reduction over its group";
  let description = [{
    `mean` needs a float element type, `sum` a non-boolean one.

    ```mlir
    %y = dist.all_reduce %x on @mesh ["tp"] sum : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, Cleave_ReductionKind:$kind,
                       UnitAttr:$async);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    (`async` $async^)? $input `on` $mesh $axes $kind attr-dict `:`
    type($input)
  }];
  let hasVerifier = 1;
}

def Dist_AllReduceBucketOp : Dist_CollectiveOp<"all_reduce_bucket"> {
  let summary = "one all_reduce of several values laid out in one buffer";
  let description = [{
    Reduces every input over the group as `dist.all_reduce` would, in one
    collective: the memory plan places the inputs one after another in one
    buffer (each at an aligned offset) and the results in the same places,
    so the collective reduces the whole buffer without a copy. The inputs
    share one element type and die here. `-cleave-bucket-collectives`
    writes them from the gradients' all-reduces.

    ```mlir
    %a, %b = dist.all_reduce_bucket %ga, %gb on @mesh ["dp"] sum : tensor<4xf32>, tensor<32x4xf32> -> tensor<4xf32>, tensor<32x4xf32>
    ```

    Marked `async`, the reduction starts here and each result's one use is
    a `dist.wait`: the first of them in program order completes the whole
    bucket, the others find it complete (a gradient bucket reduced while
    the rest of the backward runs).
  }];
  let arguments = (ins Variadic<Dist_Tensor>:$inputs, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, Cleave_ReductionKind:$kind,
                       UnitAttr:$async);
  let results = (outs Variadic<Dist_Tensor>:$results);
  let assemblyFormat = [{
    (`async` $async^)? $inputs `on` $mesh $axes $kind attr-dict `:`
    type($inputs) `->` type($results)
  }];
  let hasVerifier = 1;
}

def Dist_AllGatherOp : Dist_CollectiveOp<"all_gather"> {
  let summary = "concatenates the group's pieces along a dimension";
  let description = [{
    The result dimension `dim` is the input's times the group size, in group
    order (row-major over `axes`).

    ```mlir
    %y = dist.all_gather %x on @mesh ["tp"] dim 1 : tensor<4x2xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$dim, UnitAttr:$async);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    (`async` $async^)? $input `on` $mesh $axes `dim` $dim attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_ReduceScatterOp : Dist_CollectiveOp<"reduce_scatter"> {
  let summary = "reduces over the group and keeps this device's piece";
  let description = [{
    The result dimension `dim` is the input's divided by the group size.
    `mean` needs a float element type, `sum` a non-boolean one.

    ```mlir
    %y = dist.reduce_scatter %x on @mesh ["tp"] sum dim 0 : tensor<8x8xf32> -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, Cleave_ReductionKind:$kind,
                       I64Attr:$dim, UnitAttr:$async);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    (`async` $async^)? $input `on` $mesh $axes $kind `dim` $dim attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_AllToAllOp : Dist_CollectiveOp<"all_to_all"> {
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
                       I64Attr:$concat_dim, UnitAttr:$async);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    (`async` $async^)? $input `on` $mesh $axes `split` $split_dim `concat`
    $concat_dim attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_CollectivePermuteOp : Dist_CollectiveOp<"collective_permute", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "sends to fixed group members and receives from others";
  let description = [{
    Each `[source, target]` pair (group indices) sends source's input to
    target; no index is a source twice or a target twice. A member that is
    nobody's target gets zeros. A ring over 4 members:

    ```mlir
    %y = dist.collective_permute %x on @mesh ["cp"] pairs [[0, 1], [1, 2], [2, 3], [3, 0]] : tensor<4xf32>
    ```

    Marked `async`, the sends and receives start here and complete at the
    result's one use, a `dist.wait` (ring attention's next block moves
    while the current one is computed).
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64ArrayAttr:$flat_pairs,
                       UnitAttr:$async);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    (`async` $async^)? $input `on` $mesh $axes `pairs`
    custom<Pairs>($flat_pairs) attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = commonExtraClassDeclaration # [{
    /// The (source, target) pairs.
    ::llvm::SmallVector<std::pair<int64_t, int64_t>> getPairs();
  }];
}

def Dist_BroadcastOp : Dist_CollectiveOp<"broadcast", [
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
    Marked `async`, the receive is posted here and completes at the
    `dist.wait` that is its one use, so that the sender need not wait for
    this device to reach the receive (`-cleave-overlap-collectives` posts a
    pipeline stage's receives one schedule step early). Receives from one
    source match its sends in the order they are posted.

    ```mlir
    %act = dist.recv on @mesh ["pp"] from 0 tag 0 : tensor<4x16xf32>
    %h = dist.recv async on @mesh ["pp"] from 0 : tensor<4x16xf32>
    %g = dist.wait %h : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes,
                       I64Attr:$source, DefaultValuedAttr<I64Attr, "0">:$tag,
                       UnitAttr:$async);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    (`async` $async^)? `on` $mesh $axes `from` $source (`tag` $tag^)?
    attr-dict `:` type($result)
  }];
}

def Dist_SendRecvOp : Dist_CollectiveOp<"send_recv"> {
  let summary = "sends to one group member and receives from another at once";
  let description = [{
    Sends `input` to the device at group index `target` and receives the
    result from the one at `source` as one grouped operation, so that two
    neighbours that each send to the other before receiving cannot wait on
    each other (the pipeline's send of an activation and receive of a
    gradient). Each half matches the peer's `dist.send`, `dist.recv` or
    `dist.send_recv` in program order per pair of devices.

    ```mlir
    %g = dist.send_recv %act on @mesh ["pp"] to 1 from 1 : tensor<4x16xf32> -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$target, I64Attr:$source);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $axes `to` $target `from` $source attr-dict `:`
    type($input) `->` type($result)
  }];
}

def Dist_WaitOp : Dist_Op<"wait", [Dist_CommEffects,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "completes a started collective: its result, now valid";
  let description = [{
    An `all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all` or `recv`
    marked `async` starts without completing: its result may be read only through
    the `dist.wait` that is its one use, and its input must not be
    overwritten before that wait. Between the two, the device computes
    while the collective moves data. The order of the starts is the order
    of the collectives on every device, as for blocking ones.
    `-cleave-overlap-collectives` writes them.

    ```mlir
    %s = dist.all_reduce async %g on @mesh ["dp"] sum : tensor<32x4xf32>
    %h = graph.matmul %a, %b : tensor<8x16xf32>, tensor<16x32xf32>
    %r = dist.wait %s : tensor<32x4xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Dist_PipelineStepOp : Dist_Op<"pipeline_step", [Dist_CommEffects]> {
  let summary = "marks where a stage's schedule step begins (measured timeline)";
  let description = [{
    `-dist-pipeline-parallel` puts one at the start of every step of a
    stage's schedule: the forward or backward of microbatch `microbatch`
    through the stage's model chunk `chunk`, or the optimizer step after the
    last. It computes nothing; the lowering calls the engine's
    `cleave_comm_trace_phase`, which, when the trainer records a timeline
    (`--trace run.json`), closes the step before and opens this one. Its
    communication effects keep it in order with the stage's transfers.

    ```mlir
    dist.pipeline_step "forward" microbatch 0 chunk 0
    dist.pipeline_step "backward" microbatch 3 chunk 1
    dist.pipeline_step "optimizer"
    ```
  }];
  let arguments = (ins StrAttr:$phase,
                       DefaultValuedAttr<I64Attr, "0">:$microbatch,
                       DefaultValuedAttr<I64Attr, "0">:$chunk);
  let assemblyFormat = [{
    $phase (`microbatch` $microbatch^)? (`chunk` $chunk^)? attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Rank-aware ops: what a partitioned program computes per device
//===----------------------------------------------------------------------===//

def Dist_AxisIndexOp : Dist_Op<"axis_index", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "this device's index in its group along mesh axes";
  let description = [{
    The row-major index of this device among the devices that differ only
    along `axes` (0 ..< the product of their sizes). Partitioned programs
    use it for the offsets that depend on the device: the vocabulary range
    of a vocabulary-parallel embedding, the positions of a sequence shard,
    the block `dist.local_slice` keeps.

    ```mlir
    %i = dist.axis_index on @mesh ["tp"] : tensor<i64>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let results = (outs Dist_IndexScalar:$result);
  let assemblyFormat = "`on` $mesh $axes attr-dict `:` type($result)";
}

def Dist_LocalSliceOp : Dist_Op<"local_slice", [Pure]> {
  let summary = "keeps block `index` of a dimension";
  let description = [{
    The result equals the input except along `dim`, where it holds the
    block `index` of the input's blocks of the result's size:
    `result = input[index * n : (index + 1) * n]` with `n` the result's size
    there. With `index` a `dist.axis_index`, it turns a replicated value
    into this device's shard without communication. An index outside the
    blocks is a run-time error.

    ```mlir
    %i = dist.axis_index on @mesh ["tp"] : tensor<i64>
    %y = dist.local_slice %x[%i] dim 0 : tensor<8x4xf32> -> tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Dist_Tensor:$input, Dist_IndexScalar:$index,
                       I64Attr:$dim);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `[` $index `]` `dim` $dim attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Dist_ManualComputationOp : Dist_Op<"manual_computation", [
    RecursiveMemoryEffects, IsolatedFromAbove,
    SingleBlockImplicitTerminator<"::cleave::dist::YieldOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a region of per-device code over some mesh axes";
  let description = [{
    The operands are global values with the shardings `in_shardings`; the
    body receives each as its local block along `manual_axes` (its type
    divided by those axes of its sharding, the other axes left global) and
    yields the local blocks of the results, whose global shardings are
    `out_shardings`. Inside, the code is written per device: collectives on
    the manual axes are explicit. Partition hooks write ring attention and
    MoE all-to-all this way; the partitioner leaves the body alone.

    ```mlir
    %y = dist.manual_computation(%x) on @mesh ["cp"]
        in [#dist.sharding<@mesh, [{"cp"}, {} ]>]
        out [#dist.sharding<@mesh, [{"cp"}, {} ]>]
        : (tensor<8x4xf32>) -> tensor<8x4xf32> {
    ^bb0(%local: tensor<2x4xf32>):
      %z = graph.neg %local : tensor<2x4xf32>
      dist.yield %z : tensor<2x4xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Dist_Tensor>:$inputs, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$manual_axes, ArrayAttr:$in_shardings,
                       ArrayAttr:$out_shardings);
  let results = (outs Variadic<Dist_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` `on` $mesh $manual_axes `in` $in_shardings `out`
    $out_shardings attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
}

def Dist_YieldOp : Dist_Op<"yield", [Pure, ReturnLike, Terminator,
    HasParent<"::cleave::dist::ManualComputationOp">]> {
  let summary = "the local results of a dist.manual_computation";
  let arguments = (ins Variadic<Dist_Tensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ /* nothing to yield */ }]>];
}

#endif // CLEAVE_DIALECT_DIST_IR_DISTOPS_TD
