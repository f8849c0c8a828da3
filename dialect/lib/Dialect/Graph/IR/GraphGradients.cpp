//===- GraphGradients.cpp - vector-Jacobian rules of the graph ops -------===//
//
// The `GradientOpInterface` implementation of every `graph` value op: given
// the gradients of its results, each op builds the gradients of its operands
// (reverse mode). -cleave-differentiate only walks the ops backwards, calls
// these rules and sums the gradients of values used several times.
//
// Rules use the fused backward ops (gelu_grad, layer_norm_grad,
// attention_grad, gather_grad, cross_entropy_grad...) where a chain of
// elementwise ops would cost several passes over large tensors, and plain
// graph ops elsewhere. Broadcast operands get their gradient summed back to
// their own shape.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"

#include <cmath>

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

bool isFloatTensor(Value v) {
  return isa<FloatType>(typeOf(v).getElementType());
}

/// The builders the rules share: typed elementwise arithmetic with NumPy
/// broadcasting, and the reductions that undo a broadcast.
class Grad {
public:
  Grad(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value scalar(Type elem, double v) {
    auto type = RankedTensorType::get({}, elem);
    return ConstantOp::create(
        b, loc, type, DenseElementsAttr::get(type, b.getFloatAttr(elem, v)));
  }

  static RankedTensorType broadcastType(RankedTensorType x,
                                        RankedTensorType y) {
    int64_t rank = std::max(x.getRank(), y.getRank());
    SmallVector<int64_t> shape(rank, 1);
    for (int64_t d = 0; d < rank; ++d) {
      int64_t dx = d - (rank - x.getRank()), dy = d - (rank - y.getRank());
      int64_t sx = dx >= 0 ? x.getDimSize(dx) : 1;
      int64_t sy = dy >= 0 ? y.getDimSize(dy) : 1;
      shape[d] = std::max(sx, sy);
    }
    return RankedTensorType::get(shape, x.getElementType());
  }

  Value add(Value x, Value y) {
    return AddOp::create(b, loc, broadcastType(typeOf(x), typeOf(y)), x, y);
  }
  Value sub(Value x, Value y) {
    return SubOp::create(b, loc, broadcastType(typeOf(x), typeOf(y)), x, y);
  }
  Value mul(Value x, Value y) {
    return MulOp::create(b, loc, broadcastType(typeOf(x), typeOf(y)), x, y);
  }
  Value div(Value x, Value y) {
    return DivOp::create(b, loc, broadcastType(typeOf(x), typeOf(y)), x, y);
  }
  Value mul(Value x, double c) {
    return mul(x, scalar(typeOf(x).getElementType(), c));
  }
  Value neg(Value x) { return NegOp::create(b, loc, x.getType(), x); }

  /// cast(compare(x, y)) to the element type of `like`.
  Value indicator(CompareDirection dir, Value x, Value y, Value like) {
    RankedTensorType type = broadcastType(typeOf(x), typeOf(y));
    Value hit = CompareOp::create(
        b, loc, type.clone(b.getI1Type()),
        CompareDirectionAttr::get(b.getContext(), dir), x, y);
    return CastOp::create(b, loc, type.clone(typeOf(like).getElementType()),
                          hit);
  }

  /// Sums `g` over the given dims, keeping them as size 1.
  Value sumKeep(Value g, ArrayRef<int64_t> dims) {
    if (dims.empty())
      return g;
    RankedTensorType type = typeOf(g);
    SmallVector<int64_t> kept(type.getShape());
    for (int64_t d : dims)
      kept[d] = 1;
    return ReduceOp::create(
        b, loc, type.clone(kept),
        ReductionKindAttr::get(b.getContext(), ReductionKind::Sum), g,
        b.getDenseI64ArrayAttr(dims), b.getUnitAttr());
  }

  /// Sums a broadcast gradient back to the shape of the operand it came from.
  Value reduceTo(Value g, Type targetType) {
    auto target = cast<RankedTensorType>(targetType);
    RankedTensorType type = typeOf(g);
    if (type == target)
      return g;
    int64_t offset = type.getRank() - target.getRank();
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d < offset ||
          (target.getDimSize(d - offset) == 1 && type.getDimSize(d) != 1))
        dims.push_back(d);
    g = sumKeep(g, dims);
    if (typeOf(g) != target)
      g = ReshapeOp::create(b, loc, target, g);
    return g;
  }

  /// Broadcasts `g` (of `reduced` with the reduced dims kept or dropped) back
  /// over the dims of `full`.
  Value expandTo(Value g, RankedTensorType full, ArrayRef<int64_t> dims) {
    SmallVector<int64_t> kept(full.getShape());
    for (int64_t d : dims)
      kept[d] = 1;
    if (typeOf(g).getShape() != ArrayRef<int64_t>(kept))
      g = ReshapeOp::create(b, loc, typeOf(g).clone(kept), g);
    SmallVector<int64_t> all =
        llvm::to_vector(llvm::seq<int64_t>(0, full.getRank()));
    return BroadcastInDimOp::create(b, loc,
                                    full.clone(typeOf(g).getElementType()), g,
                                    b.getDenseI64ArrayAttr(all));
  }

  /// Swaps the last two dimensions.
  Value transposeLast(Value v) {
    RankedTensorType type = typeOf(v);
    int64_t rank = type.getRank();
    SmallVector<int64_t> perm =
        llvm::to_vector(llvm::seq<int64_t>(0, rank));
    std::swap(perm[rank - 1], perm[rank - 2]);
    SmallVector<int64_t> shape(type.getShape());
    std::swap(shape[rank - 1], shape[rank - 2]);
    return TransposeOp::create(b, loc, type.clone(shape), v,
                               b.getDenseI64ArrayAttr(perm));
  }

  Value reshape(Value v, ArrayRef<int64_t> shape) {
    if (typeOf(v).getShape() == shape)
      return v;
    return ReshapeOp::create(b, loc, typeOf(v).clone(shape), v);
  }

  /// [..., m, k] x [..., k, n] with broadcast batch dims.
  Value matmul(Value x, Value y) {
    RankedTensorType tx = typeOf(x), ty = typeOf(y);
    RankedTensorType batch = broadcastType(
        RankedTensorType::get(tx.getShape().drop_back(2), tx.getElementType()),
        RankedTensorType::get(ty.getShape().drop_back(2), ty.getElementType()));
    SmallVector<int64_t> shape(batch.getShape());
    shape.push_back(tx.getDimSize(tx.getRank() - 2));
    shape.push_back(ty.getShape().back());
    return MatmulOp::create(b, loc, tx.clone(shape), x, y);
  }

  /// The gradients of lhs [..., m, k] x rhs [..., k, n] (both rank >= 2).
  /// A rank-2 operand shared by every batch gets its gradient from one
  /// flattened product instead of a batched product and a reduction.
  std::pair<Value, Value> matmulGrads(Value lhs, Value rhs, Value g) {
    RankedTensorType lt = typeOf(lhs), rt = typeOf(rhs), gt = typeOf(g);
    Value dl, dr;
    if (rt.getRank() == 2 && lt.getRank() > 2) {
      // [B..., m, k] x [k, n]: dW = lhs2^T g2 over all rows.
      int64_t rows = lt.getNumElements() / lt.getShape().back();
      Value l2 = reshape(lhs, {rows, lt.getShape().back()});
      Value g2 = reshape(g, {rows, gt.getShape().back()});
      dr = matmul(transposeLast(l2), g2);
      dl = matmul(g, transposeLast(rhs));
    } else {
      dl = reduceTo(matmul(g, transposeLast(rhs)), lt);
      dr = reduceTo(matmul(transposeLast(lhs), g), rt);
    }
    return {dl, dr};
  }

  OpBuilder &b;
  Location loc;
};

/// Most rules have one result gradient and fill operand gradients.
#define GRAPH_GRADIENT(OP)                                                     \
  LogicalResult OP::buildGradients(OpBuilder &builder,                         \
                                   ArrayRef<Value> resultGrads,                \
                                   SmallVectorImpl<Value> &operandGrads)

} // namespace

//===----------------------------------------------------------------------===//
// Sources: nothing flows back
//===----------------------------------------------------------------------===//

#define GRAPH_NO_GRADIENT(OP)                                                  \
  GRAPH_GRADIENT(OP) { return success(); }
GRAPH_NO_GRADIENT(ReadParamOp)
GRAPH_NO_GRADIENT(ConstantOp)
GRAPH_NO_GRADIENT(IotaOp)
GRAPH_NO_GRADIENT(CompareOp)
#undef GRAPH_NO_GRADIENT

//===----------------------------------------------------------------------===//
// Elementwise unary
//===----------------------------------------------------------------------===//

GRAPH_GRADIENT(NegOp) {
  operandGrads[0] = Grad(builder, getLoc()).neg(resultGrads[0]);
  return success();
}

GRAPH_GRADIENT(AbsOp) {
  // sign(x), with 0 at 0 as in PyTorch.
  Grad g(builder, getLoc());
  Value x = getOperand();
  Value zero = g.scalar(getType().getElementType(), 0.0);
  Value sign = g.sub(g.indicator(CompareDirection::GT, x, zero, x),
                     g.indicator(CompareDirection::LT, x, zero, x));
  operandGrads[0] = g.mul(resultGrads[0], sign);
  return success();
}

GRAPH_GRADIENT(ReluOp) {
  Grad g(builder, getLoc());
  Value x = getOperand();
  Value zero = g.scalar(getType().getElementType(), 0.0);
  operandGrads[0] =
      g.mul(resultGrads[0], g.indicator(CompareDirection::GT, x, zero, x));
  return success();
}

GRAPH_GRADIENT(ExpOp) {
  operandGrads[0] = Grad(builder, getLoc()).mul(resultGrads[0], getResult());
  return success();
}

GRAPH_GRADIENT(LogOp) {
  operandGrads[0] = Grad(builder, getLoc()).div(resultGrads[0], getOperand());
  return success();
}

GRAPH_GRADIENT(SqrtOp) {
  // d sqrt(x) = 0.5 / sqrt(x)
  Grad g(builder, getLoc());
  operandGrads[0] = g.div(g.mul(resultGrads[0], 0.5), getResult());
  return success();
}

GRAPH_GRADIENT(RsqrtOp) {
  // d x^-1/2 = -0.5 y^3
  Grad g(builder, getLoc());
  Value y = getResult();
  operandGrads[0] = g.mul(resultGrads[0], g.mul(g.mul(y, g.mul(y, y)), -0.5));
  return success();
}

GRAPH_GRADIENT(ReciprocalOp) {
  Grad g(builder, getLoc());
  Value y = getResult();
  operandGrads[0] = g.neg(g.mul(resultGrads[0], g.mul(y, y)));
  return success();
}

GRAPH_GRADIENT(TanhOp) {
  Grad g(builder, getLoc());
  Value y = getResult();
  Value one = g.scalar(getType().getElementType(), 1.0);
  operandGrads[0] = g.mul(resultGrads[0], g.sub(one, g.mul(y, y)));
  return success();
}

GRAPH_GRADIENT(ErfOp) {
  // d erf(x) = 2/sqrt(pi) exp(-x^2)
  Grad g(builder, getLoc());
  Value x = getOperand();
  Value e = ExpOp::create(builder, getLoc(), getType(),
                          g.neg(g.mul(x, x)));
  operandGrads[0] = g.mul(resultGrads[0], g.mul(e, M_2_SQRTPI));
  return success();
}

GRAPH_GRADIENT(SigmoidOp) {
  Grad g(builder, getLoc());
  Value y = getResult();
  Value one = g.scalar(getType().getElementType(), 1.0);
  operandGrads[0] = g.mul(resultGrads[0], g.mul(y, g.sub(one, y)));
  return success();
}

GRAPH_GRADIENT(SiluOp) {
  operandGrads[0] = SiluGradOp::create(builder, getLoc(), getType(),
                                       getOperand(), resultGrads[0]);
  return success();
}

GRAPH_GRADIENT(GeluOp) {
  operandGrads[0] =
      GeluGradOp::create(builder, getLoc(), getType(), getOperand(),
                         resultGrads[0], getApproximateAttr());
  return success();
}

GRAPH_GRADIENT(SinOp) {
  Grad g(builder, getLoc());
  operandGrads[0] = g.mul(
      resultGrads[0], CosOp::create(builder, getLoc(), getType(), getOperand()));
  return success();
}

GRAPH_GRADIENT(CosOp) {
  Grad g(builder, getLoc());
  operandGrads[0] = g.neg(g.mul(
      resultGrads[0], SinOp::create(builder, getLoc(), getType(), getOperand())));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise binary
//===----------------------------------------------------------------------===//

GRAPH_GRADIENT(AddOp) {
  Grad g(builder, getLoc());
  operandGrads[0] = g.reduceTo(resultGrads[0], getLhs().getType());
  operandGrads[1] = g.reduceTo(resultGrads[0], getRhs().getType());
  return success();
}

GRAPH_GRADIENT(SubOp) {
  Grad g(builder, getLoc());
  operandGrads[0] = g.reduceTo(resultGrads[0], getLhs().getType());
  operandGrads[1] = g.reduceTo(g.neg(resultGrads[0]), getRhs().getType());
  return success();
}

GRAPH_GRADIENT(MulOp) {
  Grad g(builder, getLoc());
  Value d = resultGrads[0];
  operandGrads[0] = g.reduceTo(g.mul(d, getRhs()), getLhs().getType());
  operandGrads[1] = g.reduceTo(g.mul(d, getLhs()), getRhs().getType());
  return success();
}

GRAPH_GRADIENT(DivOp) {
  // d lhs = g / rhs; d rhs = -g lhs / rhs^2 = -(g / rhs) * result
  Grad g(builder, getLoc());
  Value gl = g.div(resultGrads[0], getRhs());
  operandGrads[0] = g.reduceTo(gl, getLhs().getType());
  operandGrads[1] =
      g.reduceTo(g.neg(g.mul(gl, getResult())), getRhs().getType());
  return success();
}

GRAPH_GRADIENT(PowOp) {
  // d lhs = g rhs lhs^(rhs - 1), 0 where rhs == 0; d rhs = g result log(lhs),
  // 0 where lhs == 0 and rhs >= 0 (PyTorch's masks: 0 * inf would be NaN).
  Grad g(builder, getLoc());
  Value x = getLhs(), y = getRhs(), d = resultGrads[0];
  Type elem = getType().getElementType();
  Value zero = g.scalar(elem, 0.0), one = g.scalar(elem, 1.0);
  auto select = [&](Value cond, Value onTrue, Value onFalse) {
    return WhereOp::create(builder, getLoc(), typeOf(onFalse), cond, onTrue,
                           onFalse)
        .getResult();
  };
  auto compare = [&](CompareDirection dir, Value a, Value c) {
    RankedTensorType t = Grad::broadcastType(typeOf(a), typeOf(c));
    return CompareOp::create(builder, getLoc(), t.clone(builder.getI1Type()),
                             CompareDirectionAttr::get(getContext(), dir), a,
                             c)
        .getResult();
  };
  Value ym1 = g.sub(y, one);
  Value p = PowOp::create(builder, getLoc(),
                          Grad::broadcastType(typeOf(x), typeOf(ym1)), x, ym1);
  Value dx = g.mul(d, g.mul(y, p));
  dx = select(compare(CompareDirection::EQ, y, zero), zero, dx);
  operandGrads[0] = g.reduceTo(dx, x.getType());
  Value logx = LogOp::create(builder, getLoc(), x.getType(), x);
  Value dy = g.mul(d, g.mul(getResult(), logx));
  Value masked = select(compare(CompareDirection::GE, y, zero), zero, dy);
  dy = select(compare(CompareDirection::EQ, x, zero), masked, dy);
  operandGrads[1] = g.reduceTo(dy, y.getType());
  return success();
}

namespace {
/// max/min: the selected operand gets the gradient; ties split it evenly,
/// as PyTorch's maximum and minimum do.
void minMaxGrads(OpBuilder &builder, Location loc, Value lhs, Value rhs,
                 Value d, CompareDirection wins,
                 SmallVectorImpl<Value> &operandGrads) {
  Grad g(builder, loc);
  Value w = g.add(g.indicator(wins, lhs, rhs, d),
                  g.mul(g.indicator(CompareDirection::EQ, lhs, rhs, d), 0.5));
  Value one = g.scalar(typeOf(d).getElementType(), 1.0);
  operandGrads[0] = g.reduceTo(g.mul(d, w), lhs.getType());
  operandGrads[1] = g.reduceTo(g.mul(d, g.sub(one, w)), rhs.getType());
}
} // namespace

GRAPH_GRADIENT(MaxOp) {
  minMaxGrads(builder, getLoc(), getLhs(), getRhs(), resultGrads[0],
              CompareDirection::GT, operandGrads);
  return success();
}

GRAPH_GRADIENT(MinOp) {
  minMaxGrads(builder, getLoc(), getLhs(), getRhs(), resultGrads[0],
              CompareDirection::LT, operandGrads);
  return success();
}

GRAPH_GRADIENT(WhereOp) {
  Grad g(builder, getLoc());
  Value d = resultGrads[0];
  Value zero = g.scalar(typeOf(d).getElementType(), 0.0);
  auto select = [&](Value onTrue, Value onFalse) {
    return WhereOp::create(builder, getLoc(), typeOf(d), getCondition(),
                           onTrue, onFalse)
        .getResult();
  };
  operandGrads[1] = g.reduceTo(select(d, zero), getOnTrue().getType());
  operandGrads[2] = g.reduceTo(select(zero, d), getOnFalse().getType());
  return success();
}

GRAPH_GRADIENT(CastOp) {
  // Only a float-to-float cast passes a gradient.
  if (isFloatTensor(getOperand()) && isFloatTensor(getResult()))
    operandGrads[0] = CastOp::create(builder, getLoc(),
                                     getOperand().getType(), resultGrads[0]);
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions and normalizations
//===----------------------------------------------------------------------===//

GRAPH_GRADIENT(MatmulOp) {
  auto [dl, dr] = Grad(builder, getLoc())
                      .matmulGrads(getLhs(), getRhs(), resultGrads[0]);
  operandGrads[0] = dl;
  operandGrads[1] = dr;
  return success();
}

GRAPH_GRADIENT(SoftmaxOp) {
  // dx = y * (g - sum(g * y, dim))
  Grad g(builder, getLoc());
  Value y = getResult(), d = resultGrads[0];
  Value dot = g.sumKeep(g.mul(d, y), {static_cast<int64_t>(getDim())});
  operandGrads[0] = g.mul(y, g.sub(d, dot));
  return success();
}

GRAPH_GRADIENT(LogSoftmaxOp) {
  // dx = g - softmax(x) * sum(g, dim)
  Grad g(builder, getLoc());
  Value d = resultGrads[0];
  Value p = ExpOp::create(builder, getLoc(), getType(), getResult());
  Value sum = g.sumKeep(d, {static_cast<int64_t>(getDim())});
  operandGrads[0] = g.sub(d, g.mul(p, sum));
  return success();
}

GRAPH_GRADIENT(ReduceOp) {
  Grad g(builder, getLoc());
  RankedTensorType in = getOperand().getType();
  ArrayRef<int64_t> dims = getDims();
  Value d = g.expandTo(resultGrads[0], in, dims);
  switch (getKind()) {
  case ReductionKind::Sum:
    operandGrads[0] = d;
    return success();
  case ReductionKind::Mean: {
    int64_t count = 1;
    for (int64_t dim : dims)
      count *= in.getDimSize(dim);
    operandGrads[0] = g.mul(d, 1.0 / static_cast<double>(count));
    return success();
  }
  case ReductionKind::Max:
  case ReductionKind::Min: {
    // Shared evenly among the elements equal to the extremum (amax/amin).
    Value extremum = g.expandTo(getResult(), in, dims);
    Value hit =
        g.indicator(CompareDirection::EQ, getOperand(), extremum, d);
    Value count = g.expandTo(g.sumKeep(hit, dims), in, dims);
    operandGrads[0] = g.div(g.mul(d, hit), count);
    return success();
  }
  }
  return emitOpError("has no gradient rule for this reduction");
}

GRAPH_GRADIENT(LayerNormOp) {
  auto grads = LayerNormGradOp::create(
      builder, getLoc(), getType(), getScale().getType(),
      getScale().getType(), getInput(), getScale(), resultGrads[0], getDimAttr(),
      getEpsilonAttr());
  operandGrads[0] = grads.getInputGrad();
  operandGrads[1] = grads.getScaleGrad();
  if (getBias()) {
    if (getBias().getType() != getScale().getType())
      return emitOpError("gradient needs bias and scale of one type, got ")
             << getBias().getType() << " and " << getScale().getType();
    operandGrads[2] = grads.getBiasGrad();
  }
  return success();
}

GRAPH_GRADIENT(RmsNormOp) {
  auto grads = RmsNormGradOp::create(builder, getLoc(), getType(),
                                     getScale().getType(), getInput(),
                                     getScale(), resultGrads[0], getDimAttr(),
                                     getEpsilonAttr());
  operandGrads[0] = grads.getInputGrad();
  operandGrads[1] = grads.getScaleGrad();
  return success();
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

GRAPH_GRADIENT(ReshapeOp) {
  operandGrads[0] = ReshapeOp::create(builder, getLoc(),
                                      getOperand().getType(), resultGrads[0]);
  return success();
}

GRAPH_GRADIENT(TransposeOp) {
  SmallVector<int64_t> inverse(getPerm().size());
  for (auto [i, p] : llvm::enumerate(getPerm()))
    inverse[p] = i;
  operandGrads[0] =
      TransposeOp::create(builder, getLoc(), getOperand().getType(),
                          resultGrads[0], builder.getDenseI64ArrayAttr(inverse));
  return success();
}

GRAPH_GRADIENT(BroadcastInDimOp) {
  // Sum over the result dims that the operand does not have or broadcasts.
  Grad g(builder, getLoc());
  RankedTensorType in = getOperand().getType(), out = getType();
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < out.getRank(); ++d) {
    const auto *it = llvm::find(getDims(), d);
    if (it == getDims().end() ||
        in.getDimSize(it - getDims().begin()) != out.getDimSize(d))
      dims.push_back(d);
  }
  Value sum = g.sumKeep(resultGrads[0], dims);
  // The kept dims, in result order, are the operand's dims permuted.
  SmallVector<int64_t> order =
      llvm::to_vector(llvm::seq<int64_t>(0, in.getRank()));
  llvm::sort(order, [&](int64_t a, int64_t b) {
    return getDims()[a] < getDims()[b];
  });
  SmallVector<int64_t> keptShape;
  for (int64_t i : order)
    keptShape.push_back(in.getDimSize(i));
  Value v = g.reshape(sum, keptShape);
  SmallVector<int64_t> perm(in.getRank());
  for (auto [pos, i] : llvm::enumerate(order))
    perm[i] = pos;
  if (!llvm::is_sorted(order))
    v = TransposeOp::create(builder, getLoc(), in.clone(
                                typeOf(v).getElementType()),
                            v, builder.getDenseI64ArrayAttr(perm));
  operandGrads[0] = v;
  return success();
}

GRAPH_GRADIENT(SliceOp) {
  operandGrads[0] = SliceGradOp::create(
      builder, getLoc(), getOperand().getType(), resultGrads[0],
      getStartAttr(), builder.getDenseI64ArrayAttr(getStridesOrOnes()));
  return success();
}

GRAPH_GRADIENT(ConcatOp) {
  int64_t dim = getDim(), offset = 0;
  RankedTensorType out = getType();
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    RankedTensorType t = typeOf(input);
    SmallVector<int64_t> start(out.getRank(), 0);
    SmallVector<int64_t> limit(out.getShape());
    start[dim] = offset;
    limit[dim] = offset + t.getDimSize(dim);
    offset += t.getDimSize(dim);
    operandGrads[i] = SliceOp::create(
        builder, getLoc(), t, resultGrads[0],
        builder.getDenseI64ArrayAttr(start),
        builder.getDenseI64ArrayAttr(limit), DenseI64ArrayAttr());
  }
  return success();
}

GRAPH_GRADIENT(SplitOp) {
  // Pieces without a gradient contribute zeros.
  SmallVector<Value> pieces;
  for (auto [r, d] : llvm::zip(getResults(), resultGrads)) {
    if (d) {
      pieces.push_back(d);
      continue;
    }
    auto type = typeOf(r);
    pieces.push_back(ConstantOp::create(
        builder, getLoc(), type,
        DenseElementsAttr::get(type,
                               builder.getZeroAttr(type.getElementType()))));
  }
  operandGrads[0] = ConcatOp::create(builder, getLoc(), getOperand().getType(),
                                     pieces, getDimAttr());
  return success();
}

GRAPH_GRADIENT(GatherOp) {
  if (!isFloatTensor(getData()))
    return success();
  operandGrads[0] = GatherGradOp::create(
      builder, getLoc(), getData().getType(), resultGrads[0], getIndices(),
      getOffset(), getDimAttr());
  return success();
}

GRAPH_GRADIENT(TopKOp) {
  if (!resultGrads[0])
    return success(); // only the indices are used
  // Each value's gradient goes back to the position it was taken from:
  // d x[..., i, ...] = sum_j [indices[..., j, ...] == i] d values[..., j, ...]
  // built as a one-hot over a new last axis of the operand's size n.
  Grad g(builder, getLoc());
  RankedTensorType in = getOperand().getType();
  RankedTensorType vt = getValues().getType();
  int64_t dim = getDim(), rank = in.getRank(), n = in.getDimSize(dim);
  SmallVector<int64_t> wide(vt.getShape()), col(vt.getShape());
  wide.push_back(n);
  col.push_back(1);
  Value positions = IotaOp::create(
      builder, getLoc(), RankedTensorType::get(wide, builder.getI64Type()),
      builder.getI64IntegerAttr(rank));
  Value picked = g.reshape(getIndices(), col);
  Value hit = g.indicator(CompareDirection::EQ, positions, picked,
                          resultGrads[0]);
  Value spread = g.mul(hit, g.reshape(resultGrads[0], col));
  // Sum the k picks away, then move the n axis back to `dim`.
  SmallVector<int64_t> summed;
  for (int64_t d = 0; d <= rank; ++d)
    if (d != dim)
      summed.push_back(wide[d]);
  Value dx = ReduceOp::create(
      builder, getLoc(), in.clone(summed),
      ReductionKindAttr::get(getContext(), ReductionKind::Sum), spread,
      builder.getDenseI64ArrayAttr({dim}), UnitAttr());
  if (dim != rank - 1) {
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < rank - 1; ++d) {
      if (d == dim)
        perm.push_back(rank - 1);
      perm.push_back(d);
    }
    dx = TransposeOp::create(builder, getLoc(), in, dx,
                             builder.getDenseI64ArrayAttr(perm));
  }
  operandGrads[0] = dx;
  return success();
}

//===----------------------------------------------------------------------===//
// Attention and losses
//===----------------------------------------------------------------------===//

GRAPH_GRADIENT(AttentionOp) {
  double scale = getScaleOrDefault();
  auto grads = AttentionGradOp::create(
      builder, getLoc(), getQuery().getType(), getKey().getType(),
      getValue().getType(), getQuery(), getKey(), getValue(), resultGrads[0],
      getMask(), getCausalAttr(), builder.getF64FloatAttr(scale));
  operandGrads[0] = grads.getQueryGrad();
  operandGrads[1] = grads.getKeyGrad();
  operandGrads[2] = grads.getValueGrad();
  return success();
}

GRAPH_GRADIENT(CrossEntropyOp) {
  operandGrads[0] = CrossEntropyGradOp::create(
      builder, getLoc(), getLogits().getType(), getLogits(), getLabels(),
      resultGrads[0], getIgnoreIndexAttr(), getReductionAttr());
  return success();
}

GRAPH_GRADIENT(MseOp) {
  // d pred = 2 (pred - target) / n * g; d target = -d pred
  Grad g(builder, getLoc());
  int64_t n = getPrediction().getType().getNumElements();
  Value diff = g.sub(getPrediction(), getTarget());
  Value dp = g.mul(g.mul(diff, 2.0 / static_cast<double>(n)), resultGrads[0]);
  operandGrads[0] = dp;
  operandGrads[1] = g.neg(dp);
  return success();
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

GRAPH_GRADIENT(ExpertMatmulOp) {
  // A matmul batched over experts: [E, C, H] x [E, H, F].
  auto [dl, dr] = Grad(builder, getLoc())
                      .matmulGrads(getInput(), getWeight(), resultGrads[0]);
  operandGrads[0] = dl;
  operandGrads[1] = dr;
  return success();
}

GRAPH_GRADIENT(MoeDispatchOp) {
  // Token t's gradient collects its slots' gradients: a combine with unit
  // gates reads exactly the slots this dispatch filled (dropped ones add 0).
  RankedTensorType experts = getExperts().getType();
  auto gates = RankedTensorType::get(experts.getShape(),
                                     getTokens().getType().getElementType());
  Value ones = ConstantOp::create(
      builder, getLoc(), gates,
      DenseElementsAttr::get(gates, builder.getFloatAttr(
                                        gates.getElementType(), 1.0)));
  operandGrads[0] = MoeCombineOp::create(
      builder, getLoc(), getTokens().getType(), resultGrads[0], ones,
      getExperts(), builder.getI64IntegerAttr(getGroups()));
  return success();
}

GRAPH_GRADIENT(MoeCombineOp) {
  Grad g(builder, getLoc());
  Value dy = resultGrads[0];                      // [T, H]
  RankedTensorType out = getExpertOut().getType(); // [E, C, H]
  RankedTensorType gt = getGates().getType();      // [T, k]
  int64_t t = gt.getDimSize(0), k = gt.getDimSize(1), h = out.getDimSize(2);
  // d expert_out[slot of (t, j)] = gates[t, j] dy[t]: a dispatch of the
  // T*k weighted rows, one assignment each, which fills the slots in the
  // same (t, j) order as the forward's (each group's rows stay together).
  int64_t groups = getGroups();
  Value weighted = g.mul(g.reshape(getGates(), {t, k, 1}),
                         g.reshape(dy, {t, 1, h})); // [T, k, H]
  Value rows = g.reshape(weighted, {t * k, h});
  Value each = g.reshape(getExperts(), {t * k, 1});
  operandGrads[0] = MoeDispatchOp::create(
      builder, getLoc(), out, rows, each,
      builder.getI64IntegerAttr(out.getDimSize(0)),
      builder.getI64IntegerAttr(out.getDimSize(1) / groups),
      builder.getI64IntegerAttr(groups));
  // d gates[t, j] = <dy[t], expert_out[slot of (t, j)]>: combine with the
  // one-hot gate of column j reads that slot.
  SmallVector<Value> columns;
  for (int64_t j = 0; j < k; ++j) {
    SmallVector<float> onehot(t * k, 0.0f);
    for (int64_t r = 0; r < t; ++r)
      onehot[r * k + j] = 1.0f;
    Value unit = ConstantOp::create(
        builder, getLoc(), gt.clone(builder.getF32Type()),
        DenseElementsAttr::get(gt.clone(builder.getF32Type()),
                               ArrayRef<float>(onehot)));
    if (!gt.getElementType().isF32())
      unit = CastOp::create(builder, getLoc(), gt, unit);
    Value picked = MoeCombineOp::create(
        builder, getLoc(), dy.getType(), getExpertOut(), unit, getExperts(),
        builder.getI64IntegerAttr(groups));
    columns.push_back(g.sumKeep(g.mul(picked, dy), {1})); // [T, 1]
  }
  operandGrads[1] =
      k == 1 ? columns[0]
             : ConcatOp::create(builder, getLoc(), gt, columns,
                                builder.getI64IntegerAttr(1))
                   .getResult();
  return success();
}

GRAPH_GRADIENT(RouterTopKOp) {
  if (!resultGrads[0])
    return success(); // only the expert choice is used
  // gates = p[experts] (divided by their sum S with normalize), p the
  // softmax of the logits; the choice itself is piecewise constant.
  Grad g(builder, getLoc());
  RankedTensorType lt = getLogits().getType(); // [T, E]
  RankedTensorType gt = getGates().getType();  // [T, k]
  int64_t t = lt.getDimSize(0), e = lt.getDimSize(1), k = gt.getDimSize(1);
  Value p = SoftmaxOp::create(builder, getLoc(), lt, getLogits(),
                              builder.getI64IntegerAttr(1));
  Value positions = IotaOp::create(
      builder, getLoc(), RankedTensorType::get({t, k, e}, builder.getI64Type()),
      builder.getI64IntegerAttr(2));
  Value onehot = g.indicator(CompareDirection::EQ, positions,
                             g.reshape(getExperts(), {t, k, 1}),
                             getLogits()); // [T, k, E]
  Value dsel = resultGrads[0];
  if (getNormalize()) {
    // g_j = p_j / S: d p_j = (dg_j - sum_i dg_i g_i) / S.
    Value psel = g.reshape(
        g.sumKeep(g.mul(onehot, g.reshape(p, {t, 1, e})), {2}), {t, k});
    Value sum = g.sumKeep(psel, {1});
    Value dot = g.sumKeep(g.mul(dsel, getGates()), {1});
    dsel = g.div(g.sub(dsel, dot), sum);
  }
  Value dp = g.reshape(
      g.sumKeep(g.mul(onehot, g.reshape(dsel, {t, k, 1})), {1}), {t, e});
  Value dot = g.sumKeep(g.mul(dp, p), {1});
  operandGrads[0] = g.mul(p, g.sub(dp, dot));
  return success();
}
