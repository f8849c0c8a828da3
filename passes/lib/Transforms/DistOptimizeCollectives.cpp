//===- DistOptimizeCollectives.cpp - fewer bytes, earlier gathers ---------===//
//
// -dist-optimize-collectives: all_reduce + local_slice into reduce_scatter,
// ZeRO-3's parameter gathers merged into one per step (gather-once) and
// moved one layer ahead (see DistPasses.td).
//
//===----------------------------------------------------------------------===//

#include "TrainingStep.h"

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>
#include <tuple>

namespace cleave {
#define GEN_PASS_DEF_DISTOPTIMIZECOLLECTIVESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::dist;

namespace {

/// An all-reduce read only by local slices of its group's blocks along one
/// dimension becomes one reduce-scatter.
void reduceScatterSlices(func::FuncOp fn) {
  SmallVector<AllReduceOp> reduces;
  fn.walk([&](AllReduceOp r) { reduces.push_back(r); });
  for (AllReduceOp reduce : reduces) {
    if (reduce.getAsync() || reduce->use_empty())
      continue;
    std::optional<int64_t> dim;
    Type type;
    bool ok = llvm::all_of(reduce->getUsers(), [&](Operation *user) {
      auto slice = dyn_cast<LocalSliceOp>(user);
      if (!slice || slice.getInput() != reduce.getResult())
        return false;
      auto index = slice.getIndex().getDefiningOp<AxisIndexOp>();
      if (!index || index.getMesh() != reduce.getMesh() ||
          index.getAxes() != reduce.getAxes())
        return false;
      if (dim && (*dim != int64_t(slice.getDim()) ||
                  type != slice.getType()))
        return false;
      dim = slice.getDim();
      type = slice.getType();
      return true;
    });
    if (!ok || !dim)
      continue;
    OpBuilder b(reduce);
    auto scatter = ReduceScatterOp::create(
        b, reduce.getLoc(), type, reduce.getInput(), reduce.getMeshAttr(),
        reduce.getAxes(), reduce.getKindAttr(), b.getI64IntegerAttr(*dim));
    scatter->setDiscardableAttrs(reduce->getDiscardableAttrDictionary());
    for (Operation *user : llvm::make_early_inc_range(reduce->getUsers())) {
      user->getResult(0).replaceAllUsesWith(scatter.getResult());
      user->erase();
    }
    reduce->erase();
  }
}

/// Each gather of a parameter's block for layer L (and its read) moves to
/// the start of the layer computed before it: L-1 in the forward, L+1 in
/// the backward, of the same microbatch.
void prefetchGathers(func::FuncOp fn) {
  Block &body = fn.getBody().front();
  // The first op of each (phase, microbatch, layer).
  std::map<std::tuple<int, int64_t, int64_t>, Operation *> firstOf;
  auto keyOf = [](Operation *op, int64_t layer)
      -> std::optional<std::tuple<int, int64_t, int64_t>> {
    std::optional<graph::Phase> phase = phaseOf(op);
    if (!phase || *phase == graph::Phase::Optimizer)
      return std::nullopt;
    int64_t mb = microbatchOf(op).value_or(0);
    return std::tuple{int(*phase), mb, layer};
  };
  for (Operation &op : body)
    if (std::optional<int64_t> layer =
            layerOf(&op))
      if (auto key = keyOf(&op, *layer))
        firstOf.try_emplace(*key, &op);
  SmallVector<AllGatherOp> gathers;
  fn.walk([&](AllGatherOp g) { gathers.push_back(g); });
  for (AllGatherOp gather : gathers) {
    auto read = gather.getInput().getDefiningOp<graph::ReadParamOp>();
    std::optional<int64_t> layer =
        layerOf(gather);
    std::optional<graph::Phase> phase = phaseOf(gather);
    if (!read || !layer || !phase || !read->hasOneUse())
      continue;
    int64_t before = *phase == graph::Phase::Backward ? *layer + 1 : *layer - 1;
    auto key = keyOf(gather, before);
    if (!key)
      continue;
    auto it = firstOf.find(*key);
    if (it == firstOf.end() || !it->second->isBeforeInBlock(read))
      continue;
    read->moveBefore(it->second);
    gather->moveBefore(it->second);
  }
}

/// The first gather of each parameter block by a layer (or by the ops
/// outside the layers) serves that layer's later gathers of the block in
/// the step, those before the parameter's update: they gather the same
/// value. Returns the gathers removed.
int64_t gatherOncePerStep(func::FuncOp fn) {
  Block &body = fn.getBody().front();
  DenseMap<StringAttr, Operation *> firstAssign;
  for (Operation &op : body)
    if (auto assign = dyn_cast<graph::AssignOp>(op))
      firstAssign.try_emplace(assign.getParamAttr().getAttr(), &op);
  // (parameter, layer or -1, gather axes, dim, result type) -> the first.
  using Key = std::tuple<const void *, int64_t, const void *, int64_t,
                         const void *>;
  std::map<Key, AllGatherOp> first;
  SmallVector<AllGatherOp> gathers;
  for (Operation &op : body)
    if (auto gather = dyn_cast<AllGatherOp>(op))
      gathers.push_back(gather);
  int64_t merged = 0;
  for (AllGatherOp gather : gathers) {
    auto read = gather.getInput().getDefiningOp<graph::ReadParamOp>();
    if (!read)
      continue;
    StringAttr param = read.getParamAttr().getAttr();
    Operation *assign = firstAssign.lookup(param);
    if (assign && assign->isBeforeInBlock(gather))
      continue;
    Key key{param.getAsOpaquePointer(), layerOf(gather).value_or(-1),
            gather.getAxes().getAsOpaquePointer(), int64_t(gather.getDim()),
            gather.getType().getAsOpaquePointer()};
    auto [it, inserted] = first.try_emplace(key, gather);
    if (inserted)
      continue;
    gather.getResult().replaceAllUsesWith(it->second.getResult());
    gather->erase();
    if (read->use_empty())
      read->erase();
    ++merged;
  }
  return merged;
}

struct DistOptimizeCollectivesPass
    : public cleave::impl::DistOptimizeCollectivesPassBase<
          DistOptimizeCollectivesPass> {
  using DistOptimizeCollectivesPassBase::DistOptimizeCollectivesPassBase;
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (!fn->hasAttr(DistDialect::getPartitionedAttrName()) ||
          !fn.getBody().hasOneBlock())
        continue;
      reduceScatterSlices(fn);
      if (gatherOnce)
        numGathersMerged += gatherOncePerStep(fn);
      prefetchGathers(fn);
    }
  }
};

} // namespace
