//===- LowerDist.cpp - dist ops of a partitioned program -> runtime calls -===//
//
// The part of -cleave-lower-to-runtime that a partitioned program adds: the
// collectives become calls of the communication engine (cleave_comm.h) on
// the communicator that the program context holds for their group,
// dist.axis_index writes this device's group rank (also from the context),
// and dist.local_slice keeps the block of that index. The engine moves
// contiguous blocks along dimension 0; -cleave-normalize-collectives puts
// every collective in that form before the memory plan, so the packing
// copies are ordinary planned transposes.
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include "cleave/Runtime/cleave_comm.h"

#include "llvm/ADT/TypeSwitch.h"

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

Value Lowering::loadComm(int64_t g) {
  // context->comms[g]
  Value comms = LLVM::LoadOp::create(b, loc, ptr, context);
  Value at = LLVM::GEPOp::create(b, loc, ptr, i32, comms,
                                 ArrayRef<LLVM::GEPArg>{int32_t(g)});
  return LLVM::LoadOp::create(b, loc, i32, at);
}

Value Lowering::loadGroupRank(int64_t g) {
  // context->group_ranks[g]
  Value field = LLVM::GEPOp::create(b, loc, ptr, ptr, context,
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

LogicalResult Lowering::lowerDistOp(Operation *op, ArrayRef<Value> in,
                                    ArrayRef<Value> out) {
  // The communicator of a collective's group, as an i32 value.
  auto commOf = [&](auto c) -> FailureOr<Value> {
    FailureOr<int64_t> g = groupOf(op, c.getMeshAttr(), c.getAxes());
    if (failed(g))
      return failure();
    return loadComm(*g);
  };
  // The engine moves blocks along dimension 0.
  auto dimZero = [&](int64_t dim) -> LogicalResult {
    if (dim == 0)
      return success();
    return op->emitOpError("works along dimension ")
           << dim << "; run -cleave-normalize-collectives first (the "
           << "engine moves blocks along dimension 0)";
  };
  // A blocking collective, or the start of an async one (whose handle its
  // dist.wait takes).
  auto collective = [&](StringRef kind, bool async, ValueRange args) {
    std::string name = ("cleave_comm_" + kind).str();
    if (!async) {
      call(name, args);
      return;
    }
    handles[op->getResult(0)] = callI64(name + "_start", args);
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<dist::AllReduceOp>([&](dist::AllReduceOp r) -> LogicalResult {
        FailureOr<Value> comm = commOf(r);
        if (failed(comm))
          return failure();
        collective("all_reduce", r.getAsync(),
                   {*comm, arena, constI32(runtimeKind(r.getKind())), in[0],
                    out[0]});
        return success();
      })
      .Case<dist::AllGatherOp>([&](dist::AllGatherOp g) -> LogicalResult {
        FailureOr<Value> comm = commOf(g);
        if (failed(comm) || failed(dimZero(g.getDim())))
          return failure();
        collective("all_gather", g.getAsync(), {*comm, arena, in[0], out[0]});
        return success();
      })
      .Case<dist::ReduceScatterOp>(
          [&](dist::ReduceScatterOp r) -> LogicalResult {
            FailureOr<Value> comm = commOf(r);
            if (failed(comm) || failed(dimZero(r.getDim())))
              return failure();
            collective("reduce_scatter", r.getAsync(),
                       {*comm, arena, constI32(runtimeKind(r.getKind())),
                        in[0], out[0]});
            return success();
          })
      .Case<dist::AllToAllOp>([&](dist::AllToAllOp a) -> LogicalResult {
        FailureOr<Value> comm = commOf(a);
        if (failed(comm) || failed(dimZero(a.getSplitDim())) ||
            failed(dimZero(a.getConcatDim())))
          return failure();
        collective("all_to_all", a.getAsync(), {*comm, arena, in[0], out[0]});
        return success();
      })
      .Case<dist::WaitOp>([&](dist::WaitOp w) -> LogicalResult {
        Value handle = handles.lookup(w.getInput());
        if (!handle)
          return w.emitOpError("waits for a collective that was not started");
        call("cleave_comm_wait", {handle});
        // The memory plan keeps the result in the started one's buffer.
        if (offsets.lookup(w.getInput()) != offsets.lookup(w.getResult()))
          call("cleave_rt_copy", {arena, in[0], out[0]});
        return success();
      })
      .Case<dist::CollectivePermuteOp>(
          [&](dist::CollectivePermuteOp p) -> LogicalResult {
            FailureOr<Value> comm = commOf(p);
            if (failed(comm))
              return failure();
            SmallVector<int64_t> pairs;
            for (auto [source, target] : p.getPairs()) {
              pairs.push_back(source);
              pairs.push_back(target);
            }
            call("cleave_comm_collective_permute",
                 {*comm, arena, in[0], out[0], int64s(pairs),
                  constI64(int64_t(pairs.size() / 2))});
            return success();
          })
      .Case<dist::BroadcastOp>([&](dist::BroadcastOp bc) -> LogicalResult {
        FailureOr<Value> comm = commOf(bc);
        if (failed(comm))
          return failure();
        // The engine broadcasts in place: the result starts as the input.
        copyUnlessAliased(bc.getInput(), bc.getResult(), in[0], out[0]);
        call("cleave_comm_broadcast",
             {*comm, arena, out[0], constI32(bc.getRoot())});
        return success();
      })
      .Case<dist::SendOp>([&](dist::SendOp s) -> LogicalResult {
        FailureOr<Value> comm = commOf(s);
        if (failed(comm))
          return failure();
        call("cleave_comm_send",
             {*comm, arena, in[0], constI32(s.getTarget())});
        return success();
      })
      .Case<dist::RecvOp>([&](dist::RecvOp r) -> LogicalResult {
        FailureOr<Value> comm = commOf(r);
        if (failed(comm))
          return failure();
        call("cleave_comm_recv",
             {*comm, arena, out[0], constI32(r.getSource())});
        return success();
      })
      .Case<dist::AxisIndexOp>([&](dist::AxisIndexOp a) -> LogicalResult {
        FailureOr<int64_t> g = groupOf(op, a.getMeshAttr(), a.getAxes());
        if (failed(g))
          return failure();
        call("cleave_rt_set_index", {arena, out[0], loadGroupRank(*g)});
        return success();
      })
      .Case<dist::LocalSliceOp>([&](dist::LocalSliceOp s) {
        call("cleave_rt_local_slice",
             {arena, in[0], in[1], out[0], constI64(s.getDim())});
        return success();
      })
      .Default([](Operation *op) {
        return op->emitOpError("is not part of a partitioned program (run "
                               "the partitioner before lowering)");
      });
}

} // namespace cleave::lowering
