//===- DistOptimizeCollectives.cpp - fewer bytes, earlier gathers ---------===//
//
// -dist-optimize-collectives: all_reduce + local_slice into reduce_scatter,
// and ZeRO-3's parameter gathers moved one layer ahead (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "TrainingStep.h"

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

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

struct DistOptimizeCollectivesPass
    : public cleave::impl::DistOptimizeCollectivesPassBase<
          DistOptimizeCollectivesPass> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (!fn->hasAttr(DistDialect::getPartitionedAttrName()) ||
          !fn.getBody().hasOneBlock())
        continue;
      reduceScatterSlices(fn);
      prefetchGathers(fn);
    }
  }
};

} // namespace
