//===- OverlapCollectives.cpp - start collectives early, wait late --------===//
//
// Turns each blocking collective along dimension 0 into a started one and
// a dist.wait before the first reader of its result (or the first
// graph.assign after it, whichever comes first), so that the ops between
// them overlap the communication; and posts each pipeline receive a
// schedule step early (Passes.td).
//
//===----------------------------------------------------------------------===//

#include "TrainingStep.h"

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
      .Case<dist::AllReduceOp, dist::AllReduceBucketOp,
            dist::CollectivePermuteOp>([](auto c) { return !c.getAsync(); })
      .Case<dist::AllGatherOp, dist::ReduceScatterOp>(
          [](auto c) { return !c.getAsync() && c.getDim() == 0; })
      .Case<dist::AllToAllOp>([](dist::AllToAllOp c) {
        return !c.getAsync() && c.getSplitDim() == 0 && c.getConcatDim() == 0;
      })
      .Default([](Operation *) { return false; });
}

/// True for a receive on `recv`'s group from its source.
bool receivesFromSameSource(Operation *op, dist::RecvOp recv) {
  auto same = [&](auto other) {
    return other.getMeshAttr() == recv.getMeshAttr() &&
           other.getAxes() == recv.getAxes() &&
           other.getSource() == recv.getSource();
  };
  if (auto r = dyn_cast<dist::RecvOp>(op))
    return same(r);
  if (auto sr = dyn_cast<dist::SendRecvOp>(op))
    return same(sr);
  return false;
}

/// Where a blocking receive is posted: after the previous receive from its
/// source, or the mark of the schedule step before its own, or at the
/// start of the block, whichever comes last.
void postEarly(dist::RecvOp recv) {
  int marks = 0;
  Operation *after = nullptr;
  for (Operation *it = recv->getPrevNode(); it; it = it->getPrevNode())
    if (receivesFromSameSource(it, recv) ||
        (isa<dist::PipelineStepOp>(it) && ++marks == 2)) {
      after = it;
      break;
    }
  if (after)
    recv->moveAfter(after);
  else
    recv->moveBefore(&recv->getBlock()->front());
}

struct OverlapCollectivesPass
    : cleave::impl::OverlapCollectivesPassBase<OverlapCollectivesPass> {
  void runOnOperation() override {
    getOperation()->walk([&](Block *block) {
      SmallVector<Operation *> starts;
      SmallVector<dist::RecvOp> receives;
      for (Operation &op : *block) {
        if (canStart(&op))
          starts.push_back(&op);
        if (auto recv = dyn_cast<dist::RecvOp>(op); recv && !recv.getAsync())
          receives.push_back(recv);
      }
      for (Operation *op : starts)
        start(op);
      // In program order, so that each stays after the receives before it.
      for (dist::RecvOp recv : receives) {
        Operation *next = recv->getNextNode();
        postEarly(recv);
        start(recv, next);
      }
    });
  }

  /// The op before which `result` is waited for: its first reader (or the
  /// first assignment, or the terminator) from `from` on.
  static Operation *waitPoint(Value result, Operation *from) {
    for (Operation *it = from; it; it = it->getNextNode()) {
      bool reads = llvm::any_of(it->getOperands(),
                                [&](Value v) { return v == result; });
      bool nested = false;
      it->walk([&](Operation *inner) {
        nested |= inner != it && llvm::is_contained(inner->getOperands(),
                                                    result);
      });
      if (reads || nested || isa<graph::AssignOp>(it) ||
          it->hasTrait<OpTrait::IsTerminator>())
        return it;
    }
    return nullptr;
  }

  /// Starts `op` and waits for each result before its wait point from
  /// `from` on (the op after it by default). A bucket's results each get a
  /// wait; the first completes them all.
  void start(Operation *op, Operation *from = nullptr) {
    SmallVector<Operation *> points;
    for (Value result : op->getResults()) {
      points.push_back(waitPoint(result, from ? from : op->getNextNode()));
      if (!points.back())
        return;
    }
    op->setAttr("async", UnitAttr::get(op->getContext()));
    bool overlapped = false;
    for (auto [result, before] : llvm::zip(op->getResults(), points)) {
      OpBuilder b(before);
      auto wait =
          dist::WaitOp::create(b, op->getLoc(), result.getType(), result);
      // The wait is part of the collective's phase, microbatch and layer
      // (-cleave-recompute reads them).
      copyStepAnnotations(op, wait);
      result.replaceAllUsesExcept(wait.getResult(), wait);
      overlapped |= wait->getPrevNode() != op;
    }
    ++numStarted;
    if (overlapped)
      ++numOverlapped;
  }
};

} // namespace
