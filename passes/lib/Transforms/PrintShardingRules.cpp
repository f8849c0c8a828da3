//===- PrintShardingRules.cpp - report each op's sharding rule ----------===//
//
// A diagnostic pass: checks every op's factor rule against its types and
// reports it as a remark, so rules can be inspected and tested in lit. An op
// of the computation without a rule is an error: propagation and
// partitioning could not handle it.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Dist/IR/DistDialect.h"
#include "cleave/Interfaces/ShardingRule.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace cleave {
#define GEN_PASS_DEF_PRINTSHARDINGRULESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {
/// Structure, declarations and layout: functions and their terminators,
/// symbols that declare rather than compute (parameters, meshes), and the
/// dist ops, which are the partitioner's own vocabulary.
bool needsNoRule(Operation *op) {
  if (isa<ModuleOp, FunctionOpInterface>(op) ||
      op->hasTrait<OpTrait::IsTerminator>() ||
      isa<dist::DistDialect>(op->getDialect()))
    return true;
  return op->getNumRegions() == 0 && op->getNumOperands() == 0 &&
         op->getNumResults() == 0 && isa<SymbolOpInterface>(op);
}

struct PrintShardingRulesPass
    : cleave::impl::PrintShardingRulesPassBase<PrintShardingRulesPass> {
  void runOnOperation() override {
    WalkResult result = getOperation()->walk([&](Operation *op) {
      auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
      if (!ruled) {
        if (needsNoRule(op))
          return WalkResult::advance();
        op->emitOpError("has no sharding rule");
        return WalkResult::interrupt();
      }
      ShardingRule rule = ruled.getShardingRule();
      if (failed(rule.verifyAgainst(op)))
        return WalkResult::interrupt();
      // At the op's location, without the op: Operation::emitRemark would
      // attach it as a note, printed after verifying the whole module, once
      // per op.
      emitRemark(op->getLoc(), "sharding rule ") << rule.str();
      ++numRules;
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
