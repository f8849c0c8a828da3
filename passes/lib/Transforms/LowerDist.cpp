//===- LowerDist.cpp - dist ops of a partitioned program -> runtime calls -===//
//
// The patterns that a partitioned program adds to -cleave-lower-to-runtime:
// the collectives become calls of the communication engine (cleave_comm.h)
// on the communicator that the program context holds for their group,
// dist.axis_index writes this device's group rank (also from the context),
// and dist.local_slice keeps the block of that index. The engine moves
// contiguous blocks along dimension 0; -cleave-normalize-collectives puts
// every collective in that form before the memory plan, so the packing
// copies are ordinary planned transposes. The ops that only an unpartitioned
// program has are refused with a hint.
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include "cleave/Transforms/MemoryPlan.h"

#include "cleave/Runtime/cleave_comm.h"

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;
using namespace cleave::lowering;

namespace cleave::lowering {

FailureOr<int64_t> Lowering::groupOf(Operation *op, FlatSymbolRefAttr meshRef,
                                     ArrayAttr axes) {
  dist::MeshOp m = mesh();
  if (!m || m.getSymName() != meshRef.getValue())
    return op->emitOpError("names mesh ")
           << meshRef << ", which is not the program's dist.mesh";
  SmallVector<int64_t> indices;
  ArrayRef<Attribute> names = m.getAxisNames().getValue();
  for (Attribute axis : axes) {
    auto *it = llvm::find(names, axis);
    if (it == names.end())
      return op->emitOpError("names axis ")
             << axis << ", which mesh @" << m.getSymName() << " lacks";
    indices.push_back(it - names.begin());
  }
  auto *it = llvm::find(groups, indices);
  if (it != groups.end())
    return int64_t(it - groups.begin());
  groups.push_back(indices);
  return int64_t(groups.size() - 1);
}

Value RuntimeBuilder::loadComm(int64_t g) {
  // context->comms[g]
  Value comms = LLVM::LoadOp::create(b, loc, ptr, state.context);
  Value at = LLVM::GEPOp::create(b, loc, ptr, i32, comms,
                                 ArrayRef<LLVM::GEPArg>{int32_t(g)});
  return LLVM::LoadOp::create(b, loc, i32, at);
}

Value RuntimeBuilder::loadGroupRank(int64_t g) {
  // context->group_ranks[g]
  Value field = LLVM::GEPOp::create(b, loc, ptr, ptr, state.context,
                                    ArrayRef<LLVM::GEPArg>{1});
  Value ranks = LLVM::LoadOp::create(b, loc, ptr, field);
  Value at = LLVM::GEPOp::create(b, loc, ptr, i64, ranks,
                                 ArrayRef<LLVM::GEPArg>{int32_t(g)});
  return LLVM::LoadOp::create(b, loc, i64, at);
}

FailureOr<SmallVector<int64_t>>
Lowering::shardingWords(dist::ShardingAttr sharding, RankedTensorType global,
                        Operation *where, const Twine &what) {
  dist::MeshOp m = mesh();
  if (!m || m.getSymName() != sharding.getMesh().getValue())
    return where->emitOpError("shards ")
           << what << " over " << sharding.getMesh()
           << ", which is not the program's dist.mesh";
  if (sharding.isPartial())
    return where->emitOpError("has ")
           << what << " partial over mesh axes: the runtime holds values "
           << "that are whole or split, so reduce it in the program";
  SmallVector<int64_t> words(kShardingWords, 0);
  ArrayRef<Attribute> names = m.getAxisNames().getValue();
  for (int64_t d = 0; d < global.getRank(); ++d) {
    words[d] = global.getDimSize(d);
    SmallVector<dist::AxisRef> axes = sharding.getAxisRefs(d);
    words[CLEAVE_RT_MAX_RANK + d] = int64_t(axes.size());
    for (auto [j, axis] : llvm::enumerate(axes)) {
      int64_t size = m.getAxisSize(axis.name).value_or(0);
      if (axis.getSize(size) != size)
        return where->emitOpError("shards ")
               << what << " over a part of mesh axis \"" << axis.name
               << "\": the runtime splits values over whole axes";
      auto *it = llvm::find(names, StringAttr::get(ctx, axis.name));
      words[2 * CLEAVE_RT_MAX_RANK + d * CLEAVE_RT_MAX_MESH_RANK + j] =
          it - names.begin();
    }
  }
  return words;
}

} // namespace cleave::lowering

namespace {

/// The engine moves blocks along dimension 0.
LogicalResult checkDimZero(Operation *op, int64_t dim) {
  if (dim == 0)
    return success();
  return op->emitOpError("works along dimension ")
         << dim << "; run -cleave-normalize-collectives first (the "
         << "engine moves blocks along dimension 0)";
}

/// The collectives and point-to-point transfers: a call of the engine on
/// the communicator of the op's group, loaded from the program context.
template <typename Op> struct CollectivePattern : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;
  LogicalResult lower(Op op, ArrayRef<Value> in, ArrayRef<Value> out,
                      RuntimeBuilder &rt) const override {
    FailureOr<int64_t> g =
        this->state.groupOf(op, op.getMeshAttr(), op.getAxes());
    if (failed(g) || failed(check(op)))
      return failure();
    build(op, rt.loadComm(*g), in, out, rt, this->state);
    return success();
  }

private:
  static LogicalResult check(Operation *) { return success(); }
  static LogicalResult check(dist::AllGatherOp g) {
    return checkDimZero(g, g.getDim());
  }
  static LogicalResult check(dist::ReduceScatterOp r) {
    return checkDimZero(r, r.getDim());
  }
  static LogicalResult check(dist::AllToAllOp a) {
    if (failed(checkDimZero(a, a.getSplitDim())))
      return failure();
    return checkDimZero(a, a.getConcatDim());
  }

  /// The blocking call `cleave_comm_<kind>`, or for a started (`async`)
  /// collective `cleave_comm_<kind>_start`, whose handle its dist.wait
  /// takes.
  static void collective(Operation *op, bool async, StringRef kind,
                         ValueRange args, RuntimeBuilder &rt,
                         Lowering &state) {
    std::string name = ("cleave_comm_" + kind).str();
    if (!async) {
      rt.call(name, args);
      return;
    }
    state.handles[op->getResult(0)] = rt.call(name + "_start", args, state.i64);
  }
  static void build(dist::AllReduceOp r, Value comm, ArrayRef<Value> in,
                    ArrayRef<Value> out, RuntimeBuilder &rt, Lowering &state) {
    collective(r, r.getAsync(), "all_reduce",
               {comm, rt.arena(), rt.constI32(runtimeKind(r.getKind())),
                in[0], out[0]},
               rt, state);
  }
  static void build(dist::AllGatherOp g, Value comm, ArrayRef<Value> in,
                    ArrayRef<Value> out, RuntimeBuilder &rt, Lowering &state) {
    collective(g, g.getAsync(), "all_gather",
               {comm, rt.arena(), in[0], out[0]}, rt, state);
  }
  static void build(dist::ReduceScatterOp r, Value comm, ArrayRef<Value> in,
                    ArrayRef<Value> out, RuntimeBuilder &rt, Lowering &state) {
    collective(r, r.getAsync(), "reduce_scatter",
               {comm, rt.arena(), rt.constI32(runtimeKind(r.getKind())),
                in[0], out[0]},
               rt, state);
  }
  static void build(dist::AllToAllOp a, Value comm, ArrayRef<Value> in,
                    ArrayRef<Value> out, RuntimeBuilder &rt, Lowering &state) {
    collective(a, a.getAsync(), "all_to_all",
               {comm, rt.arena(), in[0], out[0]}, rt, state);
  }
  static void build(dist::CollectivePermuteOp p, Value comm, ArrayRef<Value> in,
                    ArrayRef<Value> out, RuntimeBuilder &rt, Lowering &state) {
    SmallVector<int64_t> pairs;
    for (auto [source, target] : p.getPairs()) {
      pairs.push_back(source);
      pairs.push_back(target);
    }
    collective(p, p.getAsync(), "collective_permute",
               {comm, rt.arena(), in[0], out[0], rt.int64s(pairs),
                rt.constI64(int64_t(pairs.size() / 2))},
               rt, state);
  }
  // The engine broadcasts in place: the result starts as the input.
  static void build(dist::BroadcastOp bc, Value comm, ArrayRef<Value> in,
                    ArrayRef<Value> out, RuntimeBuilder &rt, Lowering &) {
    rt.copyUnlessAliased(bc.getInput(), bc.getResult(), in[0], out[0]);
    rt.call("cleave_comm_broadcast",
            {comm, rt.arena(), out[0], rt.constI32(bc.getRoot())});
  }
  static void build(dist::SendOp s, Value comm, ArrayRef<Value> in,
                    ArrayRef<Value>, RuntimeBuilder &rt, Lowering &) {
    rt.call("cleave_comm_send",
            {comm, rt.arena(), in[0], rt.constI32(s.getTarget())});
  }
  static void build(dist::RecvOp r, Value comm, ArrayRef<Value>,
                    ArrayRef<Value> out, RuntimeBuilder &rt, Lowering &state) {
    collective(r, r.getAsync(), "recv",
               {comm, rt.arena(), out[0], rt.constI32(r.getSource())}, rt,
               state);
  }
  static void build(dist::SendRecvOp sr, Value comm, ArrayRef<Value> in,
                    ArrayRef<Value> out, RuntimeBuilder &rt, Lowering &) {
    rt.call("cleave_comm_sendrecv",
            {comm, rt.arena(), in[0], rt.constI32(sr.getTarget()), out[0],
             rt.constI32(sr.getSource())});
  }
};

/// A bucket: one all_reduce, in place, of the buffer that the memory plan
/// laid the inputs out in, one after another.
template <typename Op> struct BucketPattern : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;
  LogicalResult lower(Op op, ArrayRef<Value>, ArrayRef<Value>,
                      RuntimeBuilder &rt) const override {
    FailureOr<int64_t> g =
        this->state.groupOf(op, op.getMeshAttr(), op.getAxes());
    if (failed(g))
      return failure();
    int64_t start = this->state.offsets.lookup(op.getInputs()[0]);
    int64_t end = start;
    for (auto [in, result] : llvm::zip(op.getInputs(), op.getResults())) {
      if (this->state.offsets.lookup(in) != end ||
          this->state.offsets.lookup(result) != end)
        return op.emitOpError("inputs are not laid out one after another in "
                              "one buffer; run -cleave-plan-memory");
      end += alignTo(getTensorBytes(in.getType()), CLEAVE_RT_ALIGNMENT);
    }
    Type elem = cast<RankedTensorType>(op.getInputs()[0].getType())
                    .getElementType();
    int64_t count =
        (end - start) / (elem.getIntOrFloatBitWidth() / 8);
    Value whole = rt.desc(start, RankedTensorType::get({count}, elem));
    SmallVector<Value> args = {rt.loadComm(*g), rt.arena(),
                               rt.constI32(runtimeKind(op.getKind())), whole,
                               whole};
    if (!op.getAsync()) {
      rt.call("cleave_comm_all_reduce", args);
      return success();
    }
    // One handle for the bucket: the first wait of any result takes it.
    Value handle =
        rt.call("cleave_comm_all_reduce_start", args, this->state.i64);
    for (Value r : op.getResults())
      this->state.handles[r] = handle;
    this->state.bucketWaited[handle.getAsOpaquePointer()] = false;
    return success();
  }
};

/// The completion of a started collective: the engine's wait on its
/// handle; the memory plan keeps the result in the started one's buffer.
template <typename Op> struct WaitPattern : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;
  LogicalResult lower(Op w, ArrayRef<Value> in, ArrayRef<Value> out,
                      RuntimeBuilder &rt) const override {
    Value handle = this->state.handles.lookup(w.getInput());
    if (!handle)
      return w.emitOpError("waits for a collective that was not started");
    // A bucket's results share its handle: the first wait completes it.
    auto bucket = this->state.bucketWaited.find(handle.getAsOpaquePointer());
    if (bucket == this->state.bucketWaited.end() || !bucket->second)
      rt.call("cleave_comm_wait", {handle});
    if (bucket != this->state.bucketWaited.end())
      bucket->second = true;
    rt.copyUnlessAliased(w.getInput(), w.getResult(), in[0], out[0]);
    return success();
  }
};

/// This device's place on the mesh: its index along axes (the group rank
/// the context holds) and its block of a value.
template <typename Op> struct DeviceIndexPattern : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;
  LogicalResult lower(Op op, ArrayRef<Value> in, ArrayRef<Value> out,
                      RuntimeBuilder &rt) const override {
    return build(op, in, out, rt);
  }

private:
  LogicalResult build(dist::AxisIndexOp a, ArrayRef<Value>, ArrayRef<Value> out,
                      RuntimeBuilder &rt) const {
    FailureOr<int64_t> g = this->state.groupOf(a, a.getMeshAttr(), a.getAxes());
    if (failed(g))
      return failure();
    rt.call("cleave_rt_set_index", {rt.arena(), out[0], rt.loadGroupRank(*g)});
    return success();
  }
  static LogicalResult build(dist::LocalSliceOp s, ArrayRef<Value> in,
                             ArrayRef<Value> out, RuntimeBuilder &rt) {
    rt.call("cleave_rt_local_slice",
            {rt.arena(), in[0], in[1], out[0], rt.constI64(s.getDim())});
    return success();
  }
};

/// The start of a pipeline schedule step: the engine records it in the
/// timeline while the trainer traces (cleave_comm_trace_phase).
template <typename Op> struct PipelineStepPattern : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;
  LogicalResult lower(Op op, ArrayRef<Value>, ArrayRef<Value>,
                      RuntimeBuilder &rt) const override {
    StringRef phase = op.getPhase();
    int32_t kind = phase == "forward"    ? CLEAVE_COMM_TRACE_FORWARD
                   : phase == "backward" ? CLEAVE_COMM_TRACE_BACKWARD
                                         : CLEAVE_COMM_TRACE_OPTIMIZER;
    rt.call("cleave_comm_trace_phase",
            {rt.constI32(kind), rt.constI32(op.getMicrobatch()),
             rt.constI32(op.getChunk())});
    return success();
  }
};

/// The ops of a program before partitioning (sharding annotations, manual
/// regions), which one device's program no longer has.
template <typename Op> struct UnpartitionedPattern : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;
  LogicalResult lower(Op op, ArrayRef<Value>, ArrayRef<Value>,
                      RuntimeBuilder &) const override {
    return op.emitOpError("is not part of a partitioned program (run the "
                          "partitioner before lowering)");
  }
};

} // namespace

namespace cleave::lowering {

void populateDistToRuntimePatterns(RewritePatternSet &patterns,
                                   const DescriptorConverter &converter,
                                   Lowering &state) {
  addFamily<CollectivePattern, dist::AllReduceOp, dist::AllGatherOp,
            dist::ReduceScatterOp, dist::AllToAllOp, dist::CollectivePermuteOp,
            dist::BroadcastOp, dist::SendOp, dist::RecvOp, dist::SendRecvOp>(patterns, converter,
                                                           state);
  addFamily<WaitPattern, dist::WaitOp>(patterns, converter, state);
  addFamily<BucketPattern, dist::AllReduceBucketOp>(patterns, converter,
                                                    state);
  addFamily<DeviceIndexPattern, dist::AxisIndexOp, dist::LocalSliceOp>(
      patterns, converter, state);
  addFamily<PipelineStepPattern, dist::PipelineStepOp>(patterns, converter,
                                                      state);
  addFamily<UnpartitionedPattern, dist::ShardOp, dist::ManualComputationOp>(
      patterns, converter, state);
}

} // namespace cleave::lowering
