//===- OverlapCollectives.cpp - start collectives early, wait late --------===//
//
// Turns each blocking collective along dimension 0 into a started one and
// a dist.wait before the first reader of its result (or the first
// graph.assign after it, whichever comes first), so that the ops between
// them overlap the communication (Passes.td).
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "llvm/ADT/TypeSwitch.h"

namespace cleave {
#define GEN_PASS_DEF_OVERLAPCOLLECTIVESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// True for a blocking collective the engine can start: along dimension 0.
bool canStart(Operation *op) {
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case<dist::AllReduceOp>([](auto c) { return !c.getAsync(); })
      .Case<dist::AllGatherOp, dist::ReduceScatterOp>(
          [](auto c) { return !c.getAsync() && c.getDim() == 0; })
      .Case<dist::AllToAllOp>([](dist::AllToAllOp c) {
        return !c.getAsync() && c.getSplitDim() == 0 && c.getConcatDim() == 0;
      })
      .Default([](Operation *) { return false; });
}

struct OverlapCollectivesPass
    : cleave::impl::OverlapCollectivesPassBase<OverlapCollectivesPass> {
  void runOnOperation() override {
    getOperation()->walk([&](Block *block) {
      SmallVector<Operation *> starts;
      for (Operation &op : *block)
        if (canStart(&op))
          starts.push_back(&op);
      for (Operation *op : starts)
        start(op);
    });
  }

  void start(Operation *op) {
    Value result = op->getResult(0);
    // The wait goes before the first reader or the first assignment.
    Operation *before = nullptr;
    for (Operation *it = op->getNextNode(); it && !before;
         it = it->getNextNode()) {
      bool reads = llvm::any_of(it->getOperands(),
                                [&](Value v) { return v == result; });
      bool nested = false;
      it->walk([&](Operation *inner) {
        nested |= inner != it && llvm::is_contained(inner->getOperands(),
                                                    result);
      });
      if (reads || nested || isa<graph::AssignOp>(it) ||
          it->hasTrait<OpTrait::IsTerminator>())
        before = it;
    }
    if (!before)
      return;
    OpBuilder b(before);
    op->setAttr("async", b.getUnitAttr());
    auto wait = dist::WaitOp::create(b, op->getLoc(), result.getType(), result);
    result.replaceAllUsesExcept(wait.getResult(), wait);
    ++numStarted;
    if (wait->getPrevNode() != op)
      ++numOverlapped;
  }
};

} // namespace
