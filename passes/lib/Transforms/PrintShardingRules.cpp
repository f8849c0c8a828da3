//===- PrintShardingRules.cpp - report each op's sharding rule ----------===//
//
// A diagnostic pass: checks every op's factor rule against its types and
// reports it as a remark, so rules can be inspected and tested in lit.
//
//===----------------------------------------------------------------------===//

#include "cleave/Interfaces/ShardingRule.h"
#include "cleave/Transforms/Passes.h"

namespace cleave {
#define GEN_PASS_DEF_PRINTSHARDINGRULESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {
struct PrintShardingRulesPass
    : cleave::impl::PrintShardingRulesPassBase<PrintShardingRulesPass> {
  void runOnOperation() override {
    WalkResult result = getOperation()->walk([&](ShardingRuleOpInterface op) {
      ShardingRule rule = op.getShardingRule();
      if (failed(rule.verifyAgainst(op)))
        return WalkResult::interrupt();
      op->emitRemark("sharding rule ") << rule.str();
      ++numRules;
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
