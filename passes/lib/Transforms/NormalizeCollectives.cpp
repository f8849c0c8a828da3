//===- NormalizeCollectives.cpp - collectives along dimension 0 -----------===//
//
// Rewrites all_gather, reduce_scatter and all_to_all along other
// dimensions into transposes (and reshapes) around the same collective
// along dimension 0, the layout of the communication engine (see
// Passes.td).
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "llvm/ADT/TypeSwitch.h"

namespace cleave {
#define GEN_PASS_DEF_NORMALIZECOLLECTIVESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

/// The permutation that moves dimension `d` of a rank-`rank` tensor to the
/// front, keeping the others in order.
SmallVector<int64_t> toFront(int64_t d, int64_t rank) {
  SmallVector<int64_t> perm = {d};
  for (int64_t k = 0; k < rank; ++k)
    if (k != d)
      perm.push_back(k);
  return perm;
}

SmallVector<int64_t> inverse(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inv(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inv[p] = int64_t(i);
  return inv;
}

bool isIdentity(ArrayRef<int64_t> perm) {
  for (auto [i, p] : llvm::enumerate(perm))
    if (p != int64_t(i))
      return false;
  return true;
}

Value transpose(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> perm) {
  if (isIdentity(perm))
    return x;
  return graph::TransposeOp::create(b, loc, x, b.getDenseI64ArrayAttr(perm))
      .getResult();
}

RankedTensorType permuted(RankedTensorType type, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  return type.clone(shape);
}

/// all_gather / reduce_scatter along `dim`: transpose, collective along 0,
/// transpose back.
template <typename OpT> void normalizeAlongDim(OpT op, int64_t dim) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto inType = cast<RankedTensorType>(op.getInput().getType());
  auto outType = cast<RankedTensorType>(op.getResult().getType());
  SmallVector<int64_t> perm = toFront(dim, inType.getRank());
  Value x = transpose(b, loc, op.getInput(), perm);
  auto *moved = b.clone(*op.getOperation());
  moved->setOperand(0, x);
  moved->getResult(0).setType(permuted(outType, perm));
  moved->setAttr("dim", b.getI64IntegerAttr(0));
  Value y = transpose(b, loc, moved->getResult(0), inverse(perm));
  op.getResult().replaceAllUsesWith(y);
  op.erase();
}

void normalizeAllToAll(dist::AllToAllOp op, int64_t groupSize) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto inType = cast<RankedTensorType>(op.getInput().getType());
  auto outType = cast<RankedTensorType>(op.getResult().getType());
  int64_t rank = inType.getRank(), s = op.getSplitDim(),
          c = op.getConcatDim(), n = groupSize;
  // The split dimension to the front; the exchange along 0 keeps the
  // shape, block i now holding group member i's piece for this device.
  SmallVector<int64_t> perm = toFront(s, rank);
  Value x = transpose(b, loc, op.getInput(), perm);
  auto xType = cast<RankedTensorType>(x.getType());
  Value a = dist::AllToAllOp::create(b, loc, xType, x, op.getMeshAttr(),
                                     op.getAxes(), b.getI64IntegerAttr(0),
                                     b.getI64IntegerAttr(0))
                .getResult();
  // [n, S/n, the other dims in order]: r dim 0 is the member, dim 1 the
  // split dim, dim 2 + j the j-th other original dim.
  SmallVector<int64_t> rShape = {n, xType.getDimSize(0) / n};
  for (int64_t k = 1; k < rank; ++k)
    rShape.push_back(xType.getDimSize(k));
  Value r = graph::ReshapeOp::create(b, loc, xType.clone(rShape), a);
  // The original order with the member dim just before `c` (the major part
  // of the concatenated dim), then merged with it.
  auto rDimOf = [&](int64_t k) { return k == s ? 1 : 2 + (k < s ? k : k - 1); };
  SmallVector<int64_t> q;
  for (int64_t k = 0; k < rank; ++k) {
    if (k == c)
      q.push_back(0);
    q.push_back(rDimOf(k));
  }
  Value t = transpose(b, loc, r, q);
  Value y = graph::ReshapeOp::create(b, loc, outType, t);
  op.getResult().replaceAllUsesWith(y);
  op.erase();
}

struct NormalizeCollectivesPass
    : cleave::impl::NormalizeCollectivesPassBase<NormalizeCollectivesPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation()->walk([&](Operation *op) {
      if (isa<dist::AllGatherOp, dist::ReduceScatterOp, dist::AllToAllOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      bool dimZero = llvm::TypeSwitch<Operation *, bool>(op)
                         .Case<dist::AllGatherOp, dist::ReduceScatterOp>(
                             [](auto c) { return c.getDim() == 0; })
                         .Case<dist::AllToAllOp>([](dist::AllToAllOp c) {
                           return c.getSplitDim() == 0 &&
                                  c.getConcatDim() == 0;
                         })
                         .Default([](Operation *) { return true; });
      // The transposes would come between the start and its wait.
      if (!dimZero && op->hasAttr("async")) {
        op->emitOpError("is started (async) before it is normalized: run "
                        "-cleave-normalize-collectives before "
                        "-cleave-overlap-collectives");
        return signalPassFailure();
      }
      if (auto g = dyn_cast<dist::AllGatherOp>(op)) {
        if (g.getDim() != 0) {
          normalizeAlongDim(g, g.getDim());
          ++numNormalized;
        }
      } else if (auto r = dyn_cast<dist::ReduceScatterOp>(op)) {
        if (r.getDim() != 0) {
          normalizeAlongDim(r, r.getDim());
          ++numNormalized;
        }
      } else if (auto a = dyn_cast<dist::AllToAllOp>(op)) {
        if (a.getSplitDim() == 0 && a.getConcatDim() == 0)
          continue;
        // The group size is the split dim's in / out ratio.
        auto in = cast<RankedTensorType>(a.getInput().getType());
        auto out = cast<RankedTensorType>(a.getResult().getType());
        int64_t s = a.getSplitDim();
        int64_t n = a.getSplitDim() == a.getConcatDim()
                        ? 0
                        : in.getDimSize(s) / out.getDimSize(s);
        if (n == 0) {
          // Same dim: the shape is kept; the group size comes from the mesh.
          auto mesh = SymbolTable::lookupNearestSymbolFrom<dist::MeshOp>(
              a, a.getMeshAttr());
          n = 1;
          for (Attribute axis : a.getAxes())
            n *= mesh.getAxisSize(cast<StringAttr>(axis).getValue())
                     .value_or(1);
        }
        normalizeAllToAll(a, n);
        ++numNormalized;
      }
    }
  }
};

} // namespace
