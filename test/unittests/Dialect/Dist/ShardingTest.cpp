//===- ShardingTest.cpp - meshes and sharding checks through the C++ API ===//
//
// What later passes call: mesh queries, sharding accessors, and the check of
// a sharding against a type and a mesh, with the diagnostic it gives.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Dist/IR/DistOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace cleave;
using namespace cleave::dist;

namespace {
class ShardingTest : public ::testing::Test {
protected:
  ShardingTest() : builder(&context) {
    context.loadDialect<DistDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(
        "dist.mesh @mesh [\"dp\" = 2, \"pp\" = 3, \"tp\" = 4]", &context);
    mesh = cast<MeshOp>(module->getBody()->front());
  }

  ShardingAttr sharding(ArrayRef<ArrayRef<StringRef>> dims,
                        ArrayRef<StringRef> partial = {}) {
    auto strings = [&](ArrayRef<StringRef> axes) {
      SmallVector<Attribute> attrs;
      for (StringRef a : axes)
        attrs.push_back(builder.getStringAttr(a));
      return builder.getArrayAttr(attrs);
    };
    SmallVector<Attribute> dimAttrs;
    for (ArrayRef<StringRef> d : dims)
      dimAttrs.push_back(strings(d));
    return ShardingAttr::get(&context, FlatSymbolRefAttr::get(&context, "mesh"),
                             builder.getArrayAttr(dimAttrs), strings(partial),
                             ReductionKind::Sum);
  }

  /// Runs verifySharding and returns the diagnostic text ("" on success).
  std::string check(ShardingAttr s, ArrayRef<int64_t> shape) {
    std::string message;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      message = diag.str();
      return success();
    });
    auto type = RankedTensorType::get(shape, builder.getF32Type());
    LogicalResult result = verifySharding(
        s, type, mesh,
        [&]() { return mlir::emitError(builder.getUnknownLoc()); },
        "the weight");
    EXPECT_EQ(failed(result), !message.empty());
    return message;
  }

  MLIRContext context;
  Builder builder;
  OwningOpRef<ModuleOp> module;
  MeshOp mesh;
};

TEST_F(ShardingTest, MeshAxesAndDeviceCount) {
  EXPECT_EQ(mesh.getNumDevices(), 24);
  EXPECT_EQ(mesh.getAxisSize("pp"), std::optional<int64_t>(3));
  EXPECT_EQ(mesh.getAxisSize("ep"), std::nullopt);
}

TEST_F(ShardingTest, Accessors) {
  ShardingAttr s = sharding({{"dp", "tp"}, {}});
  EXPECT_EQ(s.getAxes(0), (SmallVector<StringRef>{"dp", "tp"}));
  EXPECT_TRUE(s.getAxes(1).empty());
  EXPECT_FALSE(s.isFullyReplicated());
  EXPECT_TRUE(sharding({{}, {}}).isFullyReplicated());
  EXPECT_FALSE(sharding({{}, {}}, {"tp"}).isFullyReplicated());
}

TEST_F(ShardingTest, DivisibleShardingsPass) {
  EXPECT_EQ(check(sharding({{"dp", "tp"}, {"pp"}}), {16, 9}), "");
  EXPECT_EQ(check(sharding({{}, {}}, {"dp", "tp"}), {5, 7}), "");
}

TEST_F(ShardingTest, IndivisibleDimensionNamesValueDimAxesAndSizes) {
  EXPECT_EQ(check(sharding({{"dp"}, {"pp", "tp"}}), {4, 18}),
            "cannot shard dimension 1 of the weight (size 18) over mesh axis "
            "\"pp\" (3) x \"tp\" (4): the size is not divisible by 12");
}

TEST_F(ShardingTest, UnknownAxisAndRankMismatch) {
  EXPECT_EQ(check(sharding({{"ep"}}), {8}),
            "sharding of the weight uses axis \"ep\" that mesh @mesh does not "
            "have");
  EXPECT_EQ(check(sharding({{}, {}}, {"sp"}), {8, 8}),
            "sharding of the weight uses axis \"sp\" that mesh @mesh does not "
            "have");
  EXPECT_EQ(check(sharding({{"dp"}}), {8, 8}),
            "sharding of the weight lists 1 dimension but 'tensor<8x8xf32>' "
            "has rank 2");
}

TEST_F(ShardingTest, RepeatedAxisIsRejectedWhenBuilt) {
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  auto loc = builder.getUnknownLoc();
  auto axes = builder.getArrayAttr({builder.getStringAttr("tp")});
  ShardingAttr bad = ShardingAttr::getChecked(
      [&]() { return mlir::emitError(loc); }, &context,
      FlatSymbolRefAttr::get(&context, "mesh"),
      builder.getArrayAttr({axes, axes}), builder.getArrayAttr({}),
      ReductionKind::Sum);
  EXPECT_FALSE(bad);
  EXPECT_EQ(message, "sharding uses mesh axis \"tp\" more than once");

  // Builders cannot smuggle in malformed axis lists either.
  ShardingAttr notLists = ShardingAttr::getChecked(
      [&]() { return mlir::emitError(loc); }, &context,
      FlatSymbolRefAttr::get(&context, "mesh"),
      builder.getArrayAttr({builder.getStringAttr("tp")}),
      builder.getArrayAttr({}), ReductionKind::Sum);
  EXPECT_FALSE(notLists);
  EXPECT_EQ(message, "sharding dimensions must be axis lists, got \"tp\"");
  ShardingAttr notStrings = ShardingAttr::getChecked(
      [&]() { return mlir::emitError(loc); }, &context,
      FlatSymbolRefAttr::get(&context, "mesh"), builder.getArrayAttr({}),
      builder.getArrayAttr({builder.getI64IntegerAttr(1)}),
      ReductionKind::Sum);
  EXPECT_FALSE(notStrings);
  EXPECT_EQ(message, "sharding axes must be strings or sub-axes, got 1 : i64");
}
TEST_F(ShardingTest, SubAxesOpenDimsPriorityAndOrigin) {
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(
      "dist.mesh @mesh [\"dp\" = 2, \"pp\" = 3, \"tp\" = 4]\n"
      "func.func @f(%x: tensor<8x16xf32> {dist.sharding = "
      "#dist.sharding<@mesh, [{\"tp\":(1)2, ?}, {\"dp\", \"tp\":(2)2}], "
      "priority strategy, origin \"-dist-tensor-parallel\">}) {\n"
      "  return\n}",
      &context);
  ASSERT_TRUE(parsed);
  auto fn = cast<func::FuncOp>(parsed->getBody()->back());
  auto s = fn.getArgAttrOfType<ShardingAttr>(0, "dist.sharding");
  ASSERT_TRUE(s);
  SmallVector<AxisRef> d0 = s.getAxisRefs(0), d1 = s.getAxisRefs(1);
  ASSERT_EQ(d0.size(), 1u);
  EXPECT_TRUE(d0[0].isSubAxis());
  EXPECT_EQ(d0[0].str(), "\"tp\":(1)2");
  EXPECT_EQ(d1[1].str(), "\"tp\":(2)2");
  EXPECT_EQ(s.getAxes(1), (SmallVector<StringRef>{"dp", "tp"}));
  EXPECT_TRUE(s.isOpen(0));
  EXPECT_FALSE(s.isOpen(1));
  EXPECT_EQ(s.getPriority(), ShardingPriority::Strategy);
  EXPECT_EQ(s.getOrigin().getValue(), "-dist-tensor-parallel");
  // The halves of tp: 8 / 2 rows, 16 / (2 * 2) columns.
  auto type = RankedTensorType::get({8, 16}, builder.getF32Type());
  EXPECT_EQ(getLocalType(s, type, mesh),
            RankedTensorType::get({4, 4}, builder.getF32Type()));
  // Only the dp axis counted: the manual axes of a region.
  EXPECT_EQ(
      getLocalType(s, type, mesh, [](StringRef axis) { return axis == "dp"; }),
      RankedTensorType::get({8, 8}, builder.getF32Type()));
  ShardingAttr propagated =
      s.withOrigin(ShardingPriority::Propagated, builder.getStringAttr("%x"));
  EXPECT_EQ(propagated.getDims(), s.getDims());
  EXPECT_EQ(propagated.getPriority(), ShardingPriority::Propagated);
}

TEST_F(ShardingTest, OverlappingSubAxes) {
  AxisRef whole{"tp", 1, 0}, major{"tp", 1, 2}, minor{"tp", 2, 2},
      middle{"tp", 2, 4}, other{"dp", 1, 2};
  EXPECT_TRUE(whole.overlaps(major));
  EXPECT_FALSE(major.overlaps(minor));
  EXPECT_TRUE(minor.overlaps(middle));
  EXPECT_FALSE(major.overlaps(other));
}

TEST_F(ShardingTest, ResultShardingsOfOps) {
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(
      "dist.mesh @mesh [\"dp\" = 2]\n"
      "func.func @f(%x: tensor<8xf32>) {\n"
      "  %i = dist.axis_index on @mesh [\"dp\"] : tensor<i64>\n"
      "  %y = dist.local_slice %x[%i] dim 0 {dist.sharding = "
      "#dist.sharding<@mesh, [{\"dp\"}]>} : tensor<8xf32> -> tensor<4xf32>\n"
      "  return\n}",
      &context);
  ASSERT_TRUE(parsed);
  Operation *slice = nullptr;
  parsed->walk([&](LocalSliceOp op) { slice = op; });
  ASSERT_TRUE(slice);
  ShardingAttr s = getResultSharding(slice, 0);
  ASSERT_TRUE(s);
  EXPECT_EQ(s.getAxes(0), (SmallVector<StringRef>{"dp"}));
  EXPECT_FALSE(getResultSharding(slice, 1));
  setResultShardings(slice, {s, s});
  EXPECT_TRUE(isa<ArrayAttr>(slice->getAttr("dist.sharding")));
  EXPECT_EQ(getResultSharding(slice, 1), s);
}
} // namespace
