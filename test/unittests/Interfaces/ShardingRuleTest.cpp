//===- ShardingRuleTest.cpp - factor rules of the graph ops -------------===//
//
// Parses one op at a time and checks the factor rule it reports: which
// dimensions share factors, their sizes and kinds.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Interfaces/ShardingRule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace cleave;

namespace {
class ShardingRuleTest : public ::testing::Test {
protected:
  ShardingRuleTest() {
    context.loadDialect<graph::GraphDialect, func::FuncDialect>();
  }

  /// Parses `body` as the body of a function with arguments `args` and
  /// returns the rule of its first op.
  ShardingRule ruleOf(StringRef args, StringRef body) {
    std::string text = ("func.func @f(" + args + ") {\n" + body +
                        "\n  return\n}\n")
                           .str();
    module = parseSourceString<ModuleOp>(text, &context);
    EXPECT_TRUE(module) << text;
    if (!module)
      return {};
    auto fn = cast<func::FuncOp>(module->getBody()->front());
    auto op = cast<ShardingRuleOpInterface>(fn.getBody().front().front());
    ShardingRule rule = op.getShardingRule();
    EXPECT_TRUE(succeeded(rule.verifyAgainst(op)));
    return rule;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(ShardingRuleTest, MatmulContractsK) {
  ShardingRule rule =
      ruleOf("%a: tensor<4x8xf32>, %b: tensor<8x16xf32>",
             "%0 = graph.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32>");
  EXPECT_EQ(rule.str(),
            "([a, b], [b, c]) -> ([a, c]) {a=4, b=8 reduction(sum), c=16}"
            " linear in (0), (1)");
  EXPECT_EQ(rule.getFactorsOfKind(FactorKind::Reduction),
            SmallVector<int64_t>{1});
}

TEST_F(ShardingRuleTest, MatmulBroadcastsBatch) {
  // The rhs has no batch dimension: only lhs and result carry factor a.
  ShardingRule rule = ruleOf(
      "%a: tensor<2x4x8xf32>, %b: tensor<1x8x16xf32>",
      "%0 = graph.matmul %a, %b : tensor<2x4x8xf32>, tensor<1x8x16xf32>");
  EXPECT_EQ(rule.str(), "([a, b, c], [1, c, d]) -> ([a, b, d]) {a=2, b=4, "
                        "c=8 reduction(sum), d=16}"
                        " linear in (0), (1)");
}

TEST_F(ShardingRuleTest, ReshapeSplitsAFactor) {
  // [2, 8, 64] -> [2, 8, 4, 16]: hidden splits into heads x head_dim.
  ShardingRule rule =
      ruleOf("%x: tensor<2x8x64xf32>",
             "%0 = graph.reshape %x : tensor<2x8x64xf32> -> "
             "tensor<2x8x4x16xf32>");
  EXPECT_EQ(rule.str(),
            "([a, b, (c d)]) -> ([a, b, c, d]) {a=2, b=8, c=4, d=16}"
            " linear in (0)");
}

TEST_F(ShardingRuleTest, ReshapeMergesFactors) {
  ShardingRule rule = ruleOf(
      "%x: tensor<2x8x4x16xf32>",
      "%0 = graph.reshape %x : tensor<2x8x4x16xf32> -> tensor<16x64xf32>");
  EXPECT_EQ(rule.str(),
            "([a, b, c, d]) -> ([(a b), (c d)]) {a=2, b=8, c=4, d=16}"
            " linear in (0)");
}

TEST_F(ShardingRuleTest, ReshapeWithPartialOverlap) {
  // 4x6 -> 8x3: 8 = 4 x 2 and 6 = 2 x 3 share the middle factor.
  ShardingRule rule = ruleOf(
      "%x: tensor<4x6xf32>",
      "%0 = graph.reshape %x : tensor<4x6xf32> -> tensor<8x3xf32>");
  EXPECT_EQ(rule.str(), "([a, (b c)]) -> ([(a b), c]) {a=4, b=2, c=3}"
                        " linear in (0)");
}

TEST_F(ShardingRuleTest, ReshapeThatInterleavesNeedsReplication) {
  // 6x4 -> 4x6 cannot split any dimension in step.
  ShardingRule rule = ruleOf(
      "%x: tensor<6x4xf32>",
      "%0 = graph.reshape %x : tensor<6x4xf32> -> tensor<4x6xf32>");
  EXPECT_EQ(rule.str(),
            "([a, b]) -> ([c, d]) {a=6 need_replication, b=4 "
            "need_replication, c=4 need_replication, d=6 need_replication}"
            " linear in (0)");
}

TEST_F(ShardingRuleTest, ReshapeSkipsUnitDims) {
  ShardingRule rule = ruleOf(
      "%x: tensor<1x6xf32>",
      "%0 = graph.reshape %x : tensor<1x6xf32> -> tensor<2x1x3xf32>");
  EXPECT_EQ(rule.str(), "([1, (a b)]) -> ([a, 1, b]) {a=2, b=3}"
                        " linear in (0)");
}

TEST_F(ShardingRuleTest, TransposePermutesFactors) {
  ShardingRule rule =
      ruleOf("%x: tensor<2x8x4x16xf32>",
             "%0 = graph.transpose %x perm [0, 2, 1, 3] : tensor<2x8x4x16xf32>");
  EXPECT_EQ(rule.str(), "([a, c, b, d]) -> ([a, b, c, d]) {a=2, b=4, c=8, d=16}"
                        " linear in (0)");
}

TEST_F(ShardingRuleTest, SoftmaxAxisNeedsReplication) {
  ShardingRule rule = ruleOf("%x: tensor<4x8xf32>",
                             "%0 = graph.softmax %x dim 1 : tensor<4x8xf32>");
  EXPECT_EQ(rule.str(), "([a, b]) -> ([a, b]) {a=4, b=8 need_replication}");
}

TEST_F(ShardingRuleTest, LayerNormSharesNormalizedDimsWithAffine) {
  ShardingRule rule = ruleOf(
      "%x: tensor<2x8x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>",
      "%0 = graph.layer_norm %x, %g, %b dim 2 : tensor<2x8x64xf32>, "
      "tensor<64xf32>, tensor<64xf32>");
  EXPECT_EQ(rule.str(), "([a, b, c], [c], [c]) -> ([a, b, c]) {a=2, b=8, "
                        "c=64 need_replication}");
}

TEST_F(ShardingRuleTest, ReduceMakesReductionFactors) {
  ShardingRule keep = ruleOf(
      "%x: tensor<2x8x64xf32>",
      "%0 = graph.reduce mean %x dims [2] keepdim : tensor<2x8x64xf32>");
  EXPECT_EQ(keep.str(),
            "([a, b, c]) -> ([a, b, 1]) {a=2, b=8, c=64 reduction(mean)}"
            " linear in (0)");
  ShardingRule drop =
      ruleOf("%x: tensor<2x8x64xf32>",
             "%0 = graph.reduce max %x dims [0, 1] : tensor<2x8x64xf32>");
  EXPECT_EQ(drop.str(), "([a, b, c]) -> ([c]) {a=2 reduction(max), b=8 "
                        "reduction(max), c=64}");
}

TEST_F(ShardingRuleTest, GatherVocabularyIsAPartialSumThroughTheHook) {
  ShardingRule rule =
      ruleOf("%t: tensor<100x64xf32>, %i: tensor<2x8xi64>",
             "%0 = graph.gather %t[%i] dim 0 : tensor<100x64xf32>, "
             "tensor<2x8xi64>");
  EXPECT_EQ(rule.str(), "([d, c], [a, b]) -> ([a, b, c]) {a=2, b=8, c=64, "
                        "d=100 reduction(sum) hook}"
                        " linear in (0)");
}

TEST_F(ShardingRuleTest, GroupedQueryAttention) {
  // 8 query heads over 2 key/value heads: query heads are (hkv g).
  ShardingRule rule = ruleOf(
      "%q: tensor<2x8x16x32xf32>, %k: tensor<2x2x16x32xf32>, "
      "%v: tensor<2x2x16x32xf32>",
      "%0 = graph.attention %q, %k, %v causal : tensor<2x8x16x32xf32>, "
      "tensor<2x2x16x32xf32>, tensor<2x2x16x32xf32>");
  EXPECT_EQ(
      rule.str(),
      "([a, (b c), d, f], [a, b, e, f], [a, b, e, g]) -> "
      "([a, (b c), d, g]) {a=2, b=2, c=4, d=16 hook, e=16 need_replication "
      "hook, f=32 need_replication, g=32}"
      " linear in (2)");
}

TEST_F(ShardingRuleTest, AttentionMaskSharesSequenceFactors) {
  ShardingRule rule = ruleOf(
      "%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x16x32xf32>, "
      "%v: tensor<2x4x16x32xf32>, %m: tensor<16x16xi1>",
      "%0 = graph.attention %q, %k, %v mask %m : tensor<2x4x16x32xf32>, "
      "tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<16x16xi1>");
  EXPECT_EQ(rule.str(),
            "([a, b, c, e], [a, b, d, e], [a, b, d, f], [c, d]) -> "
            "([a, b, c, f]) {a=2, b=4, c=16, d=16 need_replication hook, "
            "e=32 need_replication, f=32}"
            " linear in (2)");
}

TEST_F(ShardingRuleTest, CrossEntropyAveragesPositions) {
  ShardingRule rule =
      ruleOf("%l: tensor<2x8x100xf32>, %y: tensor<2x8xi64>",
             "%0 = graph.cross_entropy %l, %y : tensor<2x8x100xf32>, "
             "tensor<2x8xi64>");
  EXPECT_EQ(rule.str(), "([a, b, c], [a, b]) -> ([]) {a=2 reduction(mean), "
                        "b=8 reduction(mean), c=100 need_replication hook}");
}

TEST_F(ShardingRuleTest, CrossEntropyWithIgnoreIndexNeedsTheHook) {
  ShardingRule rule =
      ruleOf("%l: tensor<8x100xf32>, %y: tensor<8xi64>",
             "%0 = graph.cross_entropy %l, %y ignore_index -100 : "
             "tensor<8x100xf32>, tensor<8xi64>");
  EXPECT_EQ(rule.str(), "([a, b], [a]) -> ([]) {a=8 reduction(mean) hook, "
                        "b=100 need_replication hook}");
}

TEST_F(ShardingRuleTest, MoeRouterDispatchExpertMatmulCombine) {
  ShardingRule router =
      ruleOf("%l: tensor<16x8xf32>",
             "%g, %e = graph.router_topk %l k 2 : tensor<16x8xf32>");
  EXPECT_EQ(router.str(), "([a, b]) -> ([a, c], [a, c]) {a=16, b=8 "
                          "need_replication, c=2 need_replication}");

  ShardingRule dispatch = ruleOf(
      "%x: tensor<16x64xf32>, %e: tensor<16x2xi64>",
      "%0 = graph.moe_dispatch %x, %e experts 8 capacity 4 : "
      "tensor<16x64xf32>, tensor<16x2xi64>");
  EXPECT_EQ(dispatch.str(),
            "([b, a], [b, c]) -> ([d, e, a]) {a=64, b=16 need_replication, "
            "c=2 need_replication, d=8 need_replication, e=4 "
            "need_replication} linear in (0)");
  // Groups split freely: the tokens' and the slots' major factor.
  ShardingRule grouped = ruleOf(
      "%x: tensor<16x64xf32>, %e: tensor<16x2xi64>",
      "%0 = graph.moe_dispatch %x, %e experts 8 capacity 3 groups 4 : "
      "tensor<16x64xf32>, tensor<16x2xi64>");
  EXPECT_EQ(grouped.str(),
            "([(a c), b], [(a c), d]) -> ([e, (a f), b]) {a=4, b=64, c=4 "
            "need_replication, d=2 need_replication, e=8 need_replication, "
            "f=3 need_replication} linear in (0)");

  ShardingRule expert = ruleOf(
      "%x: tensor<8x4x64xf32>, %w: tensor<8x64x256xf32>",
      "%0 = graph.expert_matmul %x, %w : tensor<8x4x64xf32>, "
      "tensor<8x64x256xf32>");
  EXPECT_EQ(expert.str(), "([a, b, c], [a, c, d]) -> ([a, b, d]) {a=8, b=4, "
                          "c=64 reduction(sum), d=256}"
                          " linear in (0), (1)");

  ShardingRule combine = ruleOf(
      "%o: tensor<8x4x64xf32>, %g: tensor<16x2xf32>, %e: tensor<16x2xi64>",
      "%0 = graph.moe_combine %o, %g, %e : tensor<8x4x64xf32>, "
      "tensor<16x2xf32>, tensor<16x2xi64>");
  EXPECT_EQ(combine.str(),
            "([b, c, a], [d, e], [d, e]) -> ([d, a]) {a=64, b=8 "
            "need_replication, c=4 need_replication, d=16 need_replication, "
            "e=2 need_replication} linear in (0), (1)");
  ShardingRule groupedCombine = ruleOf(
      "%o: tensor<8x12x64xf32>, %g: tensor<16x2xf32>, %e: tensor<16x2xi64>",
      "%0 = graph.moe_combine %o, %g, %e groups 4 : tensor<8x12x64xf32>, "
      "tensor<16x2xf32>, tensor<16x2xi64>");
  EXPECT_EQ(groupedCombine.str(),
            "([c, (a d), b], [(a e), f], [(a e), f]) -> ([(a e), b]) {a=4, "
            "b=64, c=8 need_replication, d=3 need_replication, e=4 "
            "need_replication, f=2 need_replication} linear in (0), (1)");
}

TEST_F(ShardingRuleTest, ElementwiseBroadcastLeavesUnitDimsEmpty) {
  ShardingRule rule = ruleOf(
      "%a: tensor<4x8xf32>, %b: tensor<1x8xf32>",
      "%0 = graph.add %a, %b : tensor<4x8xf32>, tensor<1x8xf32>");
  EXPECT_EQ(rule.str(), "([a, b], [1, b]) -> ([a, b]) {a=4, b=8}"
                        " linear in (0, 1)");
}

TEST_F(ShardingRuleTest, SliceKeepsUntouchedDims) {
  ShardingRule rule =
      ruleOf("%x: tensor<4x8xf32>",
             "%0 = graph.slice %x start [0, 2] limit [4, 6] : tensor<4x8xf32>");
  EXPECT_EQ(rule.str(), "([a, b]) -> ([a, c]) {a=4, b=8 need_replication, "
                        "c=4 need_replication}"
                        " linear in (0)");
}

TEST_F(ShardingRuleTest, VerifyRejectsRuleThatMisdescribesShape) {
  ShardingRule good = ruleOf("%x: tensor<4x8xf32>",
                             "%0 = graph.exp %x : tensor<4x8xf32>");
  auto fn = cast<func::FuncOp>(module->getBody()->front());
  Operation *op = &fn.getBody().front().front();
  ShardingRule bad(1, 1);
  int64_t f = bad.addFactor(4);
  bad.operand(0) = {{f}, {f}};
  bad.result(0) = {{f}, {f}};
  // Dimension 1 has size 8, not 4; the verifier must say so.
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  EXPECT_TRUE(failed(bad.verifyAgainst(op)));
  EXPECT_NE(message.find("multiply to 4 but the dimension is 8"),
            std::string::npos)
      << message;
  EXPECT_TRUE(succeeded(good.verifyAgainst(op)));
}
} // namespace
