//===- BucketCollectives.cpp - several all-reduces as one ----------------===//
//
// Groups blocking all-reduces whose inputs die there into
// dist.all_reduce_bucket ops, each placed before the first reader of one
// of its results or when it is full (Passes.td).
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/MemoryPlan.h"
#include "cleave/Transforms/Passes.h"

#include <map>
#include <tuple>

namespace cleave {
#define GEN_PASS_DEF_BUCKETCOLLECTIVESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// An all-reduce that a bucket can take: blocking, its input a temporary
/// (not an argument or a parameter's storage) used by it alone.
bool canBucket(dist::AllReduceOp op) {
  Value in = op.getInput();
  Operation *def = in.getDefiningOp();
  return !op.getAsync() && def && !isa<graph::ReadParamOp>(def) &&
         in.hasOneUse();
}

struct Bucket {
  SmallVector<dist::AllReduceOp> members;
  int64_t bytes = 0;
};

struct BucketCollectivesPass
    : cleave::impl::BucketCollectivesPassBase<BucketCollectivesPass> {
  using BucketCollectivesPassBase::BucketCollectivesPassBase;

  void runOnOperation() override {
    getOperation()->walk([&](Block *block) { bucketBlock(*block); });
  }

  /// Replaces the members of `bucket` by one bucket op before `at`.
  void flush(Bucket &bucket, Operation *at) {
    if (bucket.members.size() > 1) {
      OpBuilder b(at);
      dist::AllReduceOp first = bucket.members.front();
      SmallVector<Value> inputs;
      SmallVector<Type> types;
      for (dist::AllReduceOp m : bucket.members) {
        inputs.push_back(m.getInput());
        types.push_back(m.getType());
      }
      auto op = dist::AllReduceBucketOp::create(
          b, first.getLoc(), types, inputs, first.getMeshAttr(),
          first.getAxes(), first.getKindAttr());
      for (auto [m, result] : llvm::zip(bucket.members, op.getResults())) {
        m.getResult().replaceAllUsesWith(result);
        m.erase();
      }
      ++numBuckets;
      numBucketed += bucket.members.size();
    }
    bucket = Bucket();
  }

  void bucketBlock(Block &block) {
    // One open bucket per group, reduction and element type.
    using Key = std::tuple<std::string, std::string, int, std::string>;
    std::map<Key, Bucket> open;
    auto keyOf = [](dist::AllReduceOp op) {
      std::string axes, elem;
      for (Attribute a : op.getAxes())
        axes += cast<StringAttr>(a).getValue().str() + ",";
      llvm::raw_string_ostream os(elem);
      os << op.getType().getElementType();
      return Key{op.getMesh().str(), axes, int(op.getKind()), elem};
    };
    for (Operation &op : llvm::make_early_inc_range(block)) {
      // A reader of a pending result: its bucket goes first.
      for (auto &[key, bucket] : open) {
        bool reads = llvm::any_of(bucket.members, [&](dist::AllReduceOp m) {
          bool used = false;
          op.walk([&](Operation *inner) {
            used |= llvm::is_contained(inner->getOperands(), m.getResult());
          });
          return used;
        });
        if (reads || op.hasTrait<OpTrait::IsTerminator>())
          flush(bucket, &op);
      }
      auto reduce = dyn_cast<dist::AllReduceOp>(op);
      if (!reduce || !canBucket(reduce))
        continue;
      Bucket &bucket = open[keyOf(reduce)];
      int64_t bytes = alignTo(getTensorBytes(reduce.getType()),
                              CLEAVE_RT_ALIGNMENT);
      if (!bucket.members.empty() && bucket.bytes + bytes > bucketBytes)
        flush(bucket, &op);
      bucket.members.push_back(reduce);
      bucket.bytes += bytes;
    }
  }
};

} // namespace
