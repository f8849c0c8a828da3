//===- GraphFusedOps.cpp - verifiers and rules of the fused ops ---------===//
//
// The fused kernels that -cleave-fuse-linear creates (GraphFusedOps.td):
// their verifiers and sharding rules. The op classes themselves are
// generated into GraphOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

namespace {

/// Checks `out = x W` for the fused GEMMs: one element type for `x`, the
/// weight and `others`; x [..., k]; W the rank-2 weight [k, n] (or [n, k]
/// transposed); out [..., n]. Returns n.
FailureOr<int64_t> verifyRowsTimesWeight(Operation *op, StringRef xName,
                                         RankedTensorType x,
                                         RankedTensorType w, bool transposed,
                                         RankedTensorType out,
                                         ArrayRef<Type> others) {
  SmallVector<Type> types = {w, out};
  types.append(others.begin(), others.end());
  for (Type t : types)
    if (cast<RankedTensorType>(t).getElementType() != x.getElementType())
      return op->emitOpError("expects one element type, got ")
             << x << " and " << t;
  if (x.getRank() < 1)
    return op->emitOpError("expects ")
           << xName << " of rank >= 1, got " << x;
  if (w.getRank() != 2)
    return op->emitOpError("expects a weight of rank 2, got ") << w;
  int64_t k = w.getDimSize(transposed ? 1 : 0),
          n = w.getDimSize(transposed ? 0 : 1);
  if (x.getShape().back() != k)
    return op->emitOpError("contracting dimensions differ: ")
           << xName << " " << x << " has " << x.getShape().back()
           << " columns, weight " << w << (transposed ? " (transposed)" : "")
           << " has " << k << " rows";
  SmallVector<int64_t> shape(x.getShape().drop_back());
  shape.push_back(n);
  if (out.getShape() != ArrayRef<int64_t>(shape))
    return op->emitOpError("expects a result of shape [")
           << shape << "], got " << out;
  return n;
}

/// Checks a bias gradient result: n elements, as [n] or as [1, ..., 1, n]
/// (the summed dimensions kept, `keptRank` of them plus one when
/// `keptRank` > 0, any number otherwise), of one of `elementTypes`.
LogicalResult verifyBiasGrad(Operation *op, Value biasGrad, int64_t n,
                             int64_t keptRank, ArrayRef<Type> elementTypes) {
  auto type = cast<RankedTensorType>(biasGrad.getType());
  bool kept = (keptRank == 0 || type.getRank() == keptRank) &&
              llvm::all_of(type.getShape().drop_back(),
                           [](int64_t d) { return d == 1; });
  if (llvm::is_contained(elementTypes, type.getElementType()) &&
      (type.getRank() == 1 || kept) && type.getShape().back() == n)
    return success();
  InFlightDiagnostic diag =
      op->emitOpError("expects a bias gradient of shape [")
      << n << "] or with the summed dimensions kept, of ";
  llvm::interleave(elementTypes, diag, " or ");
  return diag << ", got " << type;
}

} // namespace

LogicalResult LinearOp::verify() {
  RankedTensorType bias = getBias().getType(), out = getResult().getType();
  FailureOr<int64_t> n = verifyRowsTimesWeight(
      *this, "input", getInput().getType(), getWeight().getType(),
      getTransposeWeight(), out, {bias});
  if (failed(n))
    return failure();
  if (bias.getRank() != 1 || bias.getDimSize(0) != *n)
    return emitOpError("expects a bias of shape [") << *n << "], got " << bias;
  if (Value pre = getPreactivation()) {
    if (getActivation() == Activation::None)
      return emitOpError("has a preactivation result but no activation");
    if (pre.getType() != out)
      return emitOpError("expects the preactivation to have the result's "
                         "type ")
             << out << ", got " << pre.getType();
  }
  return success();
}

ShardingRule LinearOp::getShardingRule() {
  // [batch..., k] x [k, n] (+ [n]) -> [batch..., n]; the preactivation
  // shares every factor of the result. k must stay whole: partial products
  // would each get the bias (and the activation is not linear).
  ShardingRuleBuilder b(*this);
  using B = ShardingRuleBuilder;
  RankedTensorType x = getInput().getType();
  int64_t rank = x.getRank();
  bool transposed = getTransposeWeight();
  auto withPre = [&](SmallVector<B::DimRef> dims, int64_t d) {
    if (getPreactivation())
      dims.push_back(B::result(1, d));
    return dims;
  };
  for (int64_t d = 0; d + 1 < rank; ++d)
    b.addFactor(x.getDimSize(d),
                withPre({B::operand(0, d), B::result(0, d)}, d));
  b.addFactor(x.getShape().back(),
              {B::operand(0, rank - 1), B::operand(1, transposed ? 1 : 0)},
              FactorKind::NeedReplication);
  b.addFactor(getBias().getType().getDimSize(0),
              withPre({B::operand(1, transposed ? 0 : 1), B::operand(2, 0),
                       B::result(0, rank - 1)},
                      rank - 1));
  return b.take();
}

//===----------------------------------------------------------------------===//
// MatmulGeluGradOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulGeluGradOp::verify() {
  RankedTensorType out = getResult().getType();
  FailureOr<int64_t> n = verifyRowsTimesWeight(
      *this, "grad", getGrad().getType(), getWeight().getType(),
      getTransposeWeight(), out, {getPreactivation().getType()});
  if (failed(n))
    return failure();
  if (getPreactivation().getType() != out)
    return emitOpError("expects the preactivation to have the result's type ")
           << out << ", got " << getPreactivation().getType();
  if (Value db = getBiasGrad())
    return verifyBiasGrad(*this, db, *n, out.getRank(), {out.getElementType()});
  return success();
}

ShardingRule MatmulGeluGradOp::getShardingRule() {
  // [rows..., k] x [k, n] -> [rows..., n], k reduced (gelu_grad is linear
  // in its gradient, so partial products may be reduced after it); the
  // bias gradient sums the rows, which makes them reduction factors when it
  // is present (as layer_norm_grad's parameter gradients).
  ShardingRuleBuilder b(*this);
  using B = ShardingRuleBuilder;
  RankedTensorType grad = getGrad().getType();
  int64_t rank = grad.getRank();
  bool transposed = getTransposeWeight();
  Value db = getBiasGrad();
  int64_t dbRank = db ? cast<RankedTensorType>(db.getType()).getRank() : 0;
  for (int64_t d = 0; d + 1 < rank; ++d)
    b.addFactor(grad.getDimSize(d),
                {B::operand(0, d), B::operand(2, d), B::result(0, d)},
                db ? FactorKind::Reduction : FactorKind::Parallel,
                ReductionKind::Sum);
  b.addFactor(grad.getShape().back(),
              {B::operand(0, rank - 1), B::operand(1, transposed ? 1 : 0)},
              FactorKind::Reduction, ReductionKind::Sum);
  SmallVector<B::DimRef> columns = {B::operand(1, transposed ? 0 : 1),
                                    B::operand(2, rank - 1),
                                    B::result(0, rank - 1)};
  if (db)
    columns.push_back(B::result(1, dbRank - 1));
  b.addFactor(getResult().getType().getShape().back(), columns);
  b.addLinearGroup({0});
  return b.take();
}

//===----------------------------------------------------------------------===//
// GemmOp
//===----------------------------------------------------------------------===//

LogicalResult GemmOp::verify() {
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType(),
                   out = getResult().getType();
  bool transposeRhs = getTransposeRhs();
  // The result is in the operands' type, or f32 (the f32 accumulators
  // stored unrounded).
  Type resultElement = out.getElementType();
  if (out.getElementType() != lhs.getElementType()) {
    if (!out.getElementType().isF32())
      return emitOpError("expects a result of the operands' element type or "
                         "f32, got ")
             << out;
    out = out.clone(lhs.getElementType());
  }
  if (Value db = getBiasGrad()) {
    if (!getTransposeLhs())
      return emitOpError("has a bias gradient but no transpose_lhs: it sums "
                         "the rows of the [k, m] lhs");
    SmallVector<Type, 2> types = {lhs.getElementType()};
    if (resultElement != lhs.getElementType())
      types.push_back(resultElement);
    if (lhs.getRank() == 2 &&
        failed(verifyBiasGrad(*this, db, lhs.getDimSize(1), 0, types)))
      return failure();
  }
  if (!getTransposeLhs())
    return verifyRowsTimesWeight(*this, "lhs", lhs, rhs, transposeRhs, out,
                                 {});
  // [k, m]^T x op(rhs): the rank-2 case.
  for (Type t : {Type(rhs), Type(out)})
    if (cast<RankedTensorType>(t).getElementType() != lhs.getElementType())
      return emitOpError("expects one element type, got ")
             << lhs << " and " << t;
  if (lhs.getRank() != 2 || rhs.getRank() != 2)
    return emitOpError("expects rank-2 operands with transpose_lhs, got ")
           << lhs << " and " << rhs;
  int64_t k = rhs.getDimSize(transposeRhs ? 1 : 0),
          n = rhs.getDimSize(transposeRhs ? 0 : 1);
  if (lhs.getDimSize(0) != k)
    return emitOpError("contracting dimensions differ: lhs ")
           << lhs << " (transposed) has " << lhs.getDimSize(0)
           << " columns, rhs " << rhs << (transposeRhs ? " (transposed)" : "")
           << " has " << k << " rows";
  if (out.getShape() != ArrayRef<int64_t>{lhs.getDimSize(1), n})
    return emitOpError("expects a result of shape [")
           << lhs.getDimSize(1) << ", " << n << "], got " << out;
  return success();
}

ShardingRule GemmOp::getShardingRule() {
  // op(lhs) [rows..., k] x op(rhs) [k, n] -> [rows..., n], k reduced.
  ShardingRuleBuilder b(*this);
  using B = ShardingRuleBuilder;
  RankedTensorType lhs = getLhs().getType();
  int64_t rank = lhs.getRank();
  bool tl = getTransposeLhs(), tr = getTransposeRhs();
  if (tl) {
    // The bias gradient shares m and sums over k, the reduction factor.
    SmallVector<B::DimRef> m = {B::operand(0, 1), B::result(0, 0)};
    if (Value db = getBiasGrad())
      m.push_back(
          B::result(1, cast<RankedTensorType>(db.getType()).getRank() - 1));
    b.addFactor(lhs.getDimSize(1), m);
  } else {
    for (int64_t d = 0; d + 1 < rank; ++d)
      b.addFactor(lhs.getDimSize(d), {B::operand(0, d), B::result(0, d)});
  }
  int64_t kDim = tl ? 0 : rank - 1;
  b.addFactor(lhs.getDimSize(kDim),
              {B::operand(0, kDim), B::operand(1, tr ? 1 : 0)},
              FactorKind::Reduction, ReductionKind::Sum);
  RankedTensorType out = getResult().getType();
  b.addFactor(out.getShape().back(),
              {B::operand(1, tr ? 0 : 1), B::result(0, out.getRank() - 1)});
  b.addLinearGroup({0});
  b.addLinearGroup({1});
  return b.take();
}
