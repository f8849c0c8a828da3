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

LogicalResult LinearOp::verify() {
  RankedTensorType x = getInput().getType(), w = getWeight().getType(),
                   bias = getBias().getType(), out = getResult().getType();
  for (RankedTensorType t : {w, bias, out})
    if (t.getElementType() != x.getElementType())
      return emitOpError("expects one element type, got ") << x << " and " << t;
  if (x.getRank() < 1)
    return emitOpError("expects an input of rank >= 1, got ") << x;
  if (w.getRank() != 2)
    return emitOpError("expects a weight of rank 2, got ") << w;
  bool transposed = getTransposeWeight();
  int64_t k = w.getDimSize(transposed ? 1 : 0),
          n = w.getDimSize(transposed ? 0 : 1);
  if (x.getShape().back() != k)
    return emitOpError("contracting dimensions differ: input ")
           << x << " has " << x.getShape().back() << " columns, weight " << w
           << (transposed ? " (transposed)" : "") << " has " << k << " rows";
  if (bias.getRank() != 1 || bias.getDimSize(0) != n)
    return emitOpError("expects a bias of shape [") << n << "], got " << bias;
  SmallVector<int64_t> shape(x.getShape().drop_back());
  shape.push_back(n);
  if (out.getShape() != ArrayRef<int64_t>(shape))
    return emitOpError("expects a result of shape [")
           << shape << "], got " << out;
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
  // [batch..., k] x [k, n] (+ [n]) -> [batch..., n], k reduced; the
  // preactivation shares every factor of the result.
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
              FactorKind::Reduction, ReductionKind::Sum);
  b.addFactor(getBias().getType().getDimSize(0),
              withPre({B::operand(1, transposed ? 0 : 1), B::operand(2, 0),
                       B::result(0, rank - 1)},
                      rank - 1));
  return b.take();
}
