//===- Recompute.cpp - full activation recomputation ----------------------===//
//
// -cleave-recompute: the forward of each layer (per microbatch, the ops
// whose location or parameter names the layer) is computed again in the
// backward, just before the first backward op that reads one of its
// values, and the backward reads the recomputed values. The layer's own
// values then die inside the forward; only what crosses layers (each
// layer's input and output, the residual stream) is held from the forward
// to the backward: Megatron-LM's full recomputation, one layer at a time.
// Only the values the backward reads are recomputed, with what they are
// computed from inside the layer, the tensor-parallel collectives included.
// The ops after the last layer (final norm, LM head, loss), which graph.layer
// puts in it for pipeline stages, are not. A layer holding an op that cannot
// run twice (a pipeline transfer, anything else with a side effect but a
// parameter read) is left as it is, and the pass says so in a remark.
//
//===----------------------------------------------------------------------===//

#include "TrainingStep.h"

#include "cleave/Dialect/Dist/IR/DistDialect.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"

namespace cleave {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

bool isForward(Operation *op) {
  return phaseOf(op).value_or(Phase::Backward) == Phase::Forward;
}

/// The layer whose forward `op` is part of: the one its location or the
/// parameter it reads names. Not one it goes with for pipeline stages
/// alone (graph.layer of the ops after the last layer, the final norm, the
/// LM head and the loss, which are not recomputed).
std::optional<int64_t> ownLayer(Operation *op) {
  std::optional<int64_t> layer = layerOf(op);
  if (!layer)
    return std::nullopt;
  std::optional<int64_t> named = layerInLoc(op->getLoc());
  if (auto read = dyn_cast<ReadParamOp>(op); read && !named)
    named = layerInName(read.getParam());
  return named == layer ? layer : std::nullopt;
}

/// Pure ops, parameter reads (the optimizer updates only after every
/// backward), and the collectives among the mesh's devices, which every
/// device recomputes in the same order (the program is the same on each,
/// as Megatron-LM recomputes its tensor-parallel all-reduces). Not the
/// point-to-point transfers of pipeline stages, whose peers would not
/// match.
bool canRunTwice(Operation *op) {
  if (op->getNumRegions() != 0)
    return false;
  if (isa<dist::AllReduceOp, dist::AllGatherOp, dist::ReduceScatterOp,
          dist::AllToAllOp, dist::WaitOp>(op))
    return true;
  if (isa<dist::DistDialect>(op->getDialect()))
    return isMemoryEffectFree(op);
  return isa<ReadParamOp>(op) || isMemoryEffectFree(op);
}

/// Recomputes `layer` (one microbatch's forward ops of one layer, in
/// order) for its backward readers; the number of ops recomputed.
int64_t recomputeLayer(ArrayRef<Operation *> layer) {
  llvm::SmallPtrSet<Operation *, 32> inLayer(layer.begin(), layer.end());
  // The layer's outputs, which later layers read, are held anyway (they
  // are the checkpoints): the backward reads them as they are.
  auto isOutput = [&](Operation *op) {
    return llvm::any_of(op->getUsers(), [&](Operation *user) {
      return isForward(user) && !inLayer.contains(user);
    });
  };
  // The other values of the layer that ops outside the forward read, and
  // the first of those readers.
  Operation *first = nullptr;
  llvm::SmallPtrSet<Operation *, 32> needed;
  SmallVector<Operation *> worklist;
  for (Operation *op : layer) {
    if (isOutput(op))
      continue;
    for (Operation *user : op->getUsers())
      if (!isForward(user)) {
        if (!first || user->isBeforeInBlock(first))
          first = user;
        if (needed.insert(op).second)
          worklist.push_back(op);
      }
  }
  if (!first)
    return 0;
  // What those values are computed from inside the layer, down to its
  // inputs and outputs.
  while (!worklist.empty())
    for (Value operand : worklist.pop_back_val()->getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (inLayer.contains(def) && !isOutput(def) &&
            needed.insert(def).second)
          worklist.push_back(def);

  OpBuilder b(first);
  IRMapping recomputed;
  auto backward = PhaseAttr::get(b.getContext(), Phase::Backward);
  for (Operation *op : layer)
    if (needed.contains(op))
      b.clone(*op, recomputed)
          ->setAttr(GraphDialect::getPhaseAttrName(), backward);
  for (Operation *op : layer)
    if (needed.contains(op))
      for (OpResult result : op->getResults())
        result.replaceUsesWithIf(recomputed.lookup(result), [](OpOperand &use) {
          return !isForward(use.getOwner());
        });
  return int64_t(needed.size());
}

struct RecomputePass : cleave::impl::RecomputePassBase<RecomputePass> {
  void runOnOperation() override {
    getOperation()->walk([&](func::FuncOp fn) {
      if (fn.getBody().empty())
        return;
      // Each microbatch's layers, in order.
      llvm::MapVector<std::pair<int64_t, int64_t>, SmallVector<Operation *>>
          layers;
      for (Operation &op : fn.getBody().front())
        if (isForward(&op))
          if (std::optional<int64_t> layer = ownLayer(&op))
            layers[{microbatchOf(&op).value_or(0), *layer}].push_back(&op);
      // The layers that cannot be recomputed, and the first op in the way.
      int64_t blocked = 0;
      Operation *firstBlocker = nullptr;
      for (auto &[key, ops] : layers) {
        auto blocker =
            llvm::find_if(ops, [](Operation *op) { return !canRunTwice(op); });
        if (blocker != ops.end()) {
          ++blocked;
          firstBlocker = firstBlocker ? firstBlocker : *blocker;
          continue;
        }
        int64_t count = recomputeLayer(ops);
        numRecomputed += count;
        numLayers += count > 0;
      }
      if (blocked)
        firstBlocker->emitRemark()
            << blocked << " of " << layers.size()
            << " layers (per microbatch) are not recomputed: they hold ops "
               "that cannot run twice, such as this '"
            << firstBlocker->getName() << "'";
    });
  }
};

} // namespace
