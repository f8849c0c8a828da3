//===- ShardingTest.cpp - meshes and sharding checks through the C++ API ===//
//
// What later passes call: mesh queries, sharding accessors, and the check of
// a sharding against a type and a mesh, with the diagnostic it gives.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Dist/IR/DistOps.h"

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
    context.loadDialect<DistDialect>();
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
} // namespace
