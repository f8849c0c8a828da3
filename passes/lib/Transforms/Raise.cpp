//===- Raise.cpp - decomposed exporter patterns -> fused graph ops -------===//
//
// Exporters spell layer norm, RMS norm, GELU, SiLU and attention as chains of
// primitive ops. These patterns recognize the chains (in any operand order
// and the common variants) and replace them with the fused `graph` ops that
// matter for speed and for sharding. A chain that differs in any constant,
// axis or operand is left alone.
//
//===----------------------------------------------------------------------===//

#include "RaiseMoe.h"

#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace cleave {
#define GEN_PASS_DEF_RAISEPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

//===----------------------------------------------------------------------===//
// Matching helpers
//===----------------------------------------------------------------------===//

/// The value of a splat constant (any shape), as a double.
std::optional<double> splatValue(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!dense || !dense.isSplat())
    return std::nullopt;
  if (isa<FloatType>(dense.getElementType()))
    return dense.getSplatValue<APFloat>().convertToDouble();
  if (dense.getElementType().isInteger(1))
    return dense.getSplatValue<bool>() ? 1.0 : 0.0;
  return static_cast<double>(dense.getSplatValue<APInt>().getSExtValue());
}

bool isConstant(Value v, double expected, double relTol = 1e-3) {
  std::optional<double> s = splatValue(v);
  return s && std::fabs(*s - expected) <= relTol * std::fabs(expected);
}

/// A product flattened through `mul` (and `pow` by small integer constants
/// and `div` by constants): the constant factor and the other factors.
struct Product {
  double constant = 1.0;
  SmallVector<Value> factors;
};

void flatten(Value v, Product &p, int depth = 0) {
  if (std::optional<double> s = splatValue(v)) {
    p.constant *= *s;
    return;
  }
  if (depth < 6) {
    if (auto mul = v.getDefiningOp<MulOp>()) {
      flatten(mul.getLhs(), p, depth + 1);
      flatten(mul.getRhs(), p, depth + 1);
      return;
    }
    if (auto div = v.getDefiningOp<DivOp>()) {
      if (std::optional<double> s = splatValue(div.getRhs()); s && *s != 0) {
        flatten(div.getLhs(), p, depth + 1);
        p.constant /= *s;
        return;
      }
    }
    if (auto pow = v.getDefiningOp<PowOp>()) {
      std::optional<double> e = splatValue(pow.getRhs());
      if (e && *e >= 1 && *e <= 4 && *e == std::floor(*e)) {
        for (int i = 0; i < static_cast<int>(*e); ++i)
          flatten(pow.getLhs(), p, depth + 1);
        return;
      }
    }
  }
  p.factors.push_back(v);
}

Product productOf(Value v) {
  Product p;
  flatten(v, p);
  return p;
}

/// `a + b` where one side is the splat `c`: returns the other side.
Value addOfConstant(Value v, double c) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add)
    return {};
  if (isConstant(add.getRhs(), c))
    return add.getLhs();
  if (isConstant(add.getLhs(), c))
    return add.getRhs();
  return {};
}

/// `a + eps` with a small splat eps: returns a and eps.
Value addOfEpsilon(Value v, double &eps) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add)
    return {};
  for (auto [x, c] : {std::pair(add.getLhs(), add.getRhs()),
                      std::pair(add.getRhs(), add.getLhs())}) {
    std::optional<double> s = splatValue(c);
    if (s && *s > 0 && *s < 1e-1) {
      eps = *s;
      return x;
    }
  }
  return {};
}

bool sameShape(Value a, Value b) { return a.getType() == b.getType(); }

/// The trailing dims of rank `rank` starting at `first`, as reduce dims.
bool isTrailing(ArrayRef<int64_t> dims, int64_t rank, int64_t &first) {
  if (dims.empty() || dims.back() != rank - 1)
    return false;
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] != dims[i - 1] + 1)
      return false;
  first = dims.front();
  return true;
}

/// `reduce mean %x dims [trailing] keepdim`: returns x and the first dim.
Value meanOverTrailing(Value v, int64_t &first) {
  auto r = v.getDefiningOp<ReduceOp>();
  if (!r || r.getKind() != ReductionKind::Mean || !r.getKeepdim())
    return {};
  if (!isTrailing(r.getDims(), r.getOperand().getType().getRank(), first))
    return {};
  return r.getOperand();
}

/// x^2 as pow(x, 2) or mul(x, x): returns x.
Value squareOf(Value v) {
  if (!v)
    return {};
  Product p = productOf(v);
  if (p.constant == 1.0 && p.factors.size() == 2 &&
      p.factors[0] == p.factors[1])
    return p.factors[0];
  return {};
}

/// 1/sqrt(s) as rsqrt(s), reciprocal(sqrt(s)) or div(1, sqrt(s)): returns s.
Value inverseSqrtOf(Value v) {
  if (auto r = v.getDefiningOp<RsqrtOp>())
    return r.getOperand();
  Value sq;
  if (auto r = v.getDefiningOp<ReciprocalOp>())
    sq = r.getOperand();
  else if (auto d = v.getDefiningOp<DivOp>(); d && isConstant(d.getLhs(), 1.0))
    sq = d.getRhs();
  if (auto s = sq ? sq.getDefiningOp<SqrtOp>() : SqrtOp())
    return s.getOperand();
  return {};
}

/// A normalization `x * invsqrt(denominator)` or `x / sqrt(denominator)`:
/// returns x and the denominator.
bool matchNormalize(Operation *op, Value &x, Value &denominator) {
  if (auto div = dyn_cast<DivOp>(op)) {
    if (auto s = div.getRhs().getDefiningOp<SqrtOp>()) {
      x = div.getLhs();
      denominator = s.getOperand();
      return true;
    }
    return false;
  }
  auto mul = dyn_cast<MulOp>(op);
  if (!mul)
    return false;
  for (auto [a, b] : {std::pair(mul.getLhs(), mul.getRhs()),
                      std::pair(mul.getRhs(), mul.getLhs())})
    if (Value s = inverseSqrtOf(b)) {
      x = a;
      denominator = s;
      return true;
    }
  return false;
}

/// If `v`'s only user is an `OpTy` (mul by a scale, add of a bias) whose
/// other operand has `shape` and whose result keeps v's type, returns that
/// user and sets `other`.
template <typename OpTy>
OpTy singleAffineUser(Value v, ArrayRef<int64_t> shape, Value &other) {
  if (!v.hasOneUse())
    return {};
  auto user = dyn_cast<OpTy>(*v.getUsers().begin());
  if (!user || user.getType() != v.getType())
    return {};
  other = user.getLhs() == v ? user.getRhs() : user.getLhs();
  if (cast<RankedTensorType>(other.getType()).getShape() != shape)
    return {};
  return user;
}

Value onesLike(PatternRewriter &rewriter, Location loc, Type elem,
               ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, elem);
  return ConstantOp::create(rewriter, loc, type,
                            DenseElementsAttr::get(
                                type, rewriter.getFloatAttr(elem, 1.0)));
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

/// Replaces the normalization `op` of `x` over dims [first, rank) and its
/// affine users (`* gamma`, and `+ beta` for layer norm) with one `NormOp`.
template <typename NormOp>
LogicalResult replaceWithNorm(Operation *op, Value x, int64_t first,
                              double eps, PatternRewriter &rewriter) {
  constexpr bool hasBias = std::is_same_v<NormOp, LayerNormOp>;
  Value result = op->getResult(0);
  if (result.getType() != x.getType())
    return failure();
  auto type = cast<RankedTensorType>(x.getType());
  ArrayRef<int64_t> normShape = type.getShape().drop_front(first);
  Value scale, bias;
  Operation *last = op;
  if (MulOp mul = singleAffineUser<MulOp>(result, normShape, scale)) {
    last = mul;
    if (hasBias)
      if (AddOp add = singleAffineUser<AddOp>(mul, normShape, bias))
        last = add;
  }
  rewriter.setInsertionPoint(last);
  if (!scale)
    scale = onesLike(rewriter, op->getLoc(), type.getElementType(), normShape);
  if constexpr (hasBias)
    rewriter.replaceOpWithNewOp<NormOp>(last, type, x, scale, bias,
                                        rewriter.getI64IntegerAttr(first),
                                        rewriter.getF64FloatAttr(eps));
  else
    rewriter.replaceOpWithNewOp<NormOp>(last, type, x, scale,
                                        rewriter.getI64IntegerAttr(first),
                                        rewriter.getF64FloatAttr(eps));
  return success();
}

/// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) [* gamma] [+ beta]
struct RaiseLayerNorm : RewritePattern {
  // Tried before RMS norm: a centered input would also match that.
  RaiseLayerNorm(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/2, ctx) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    Value centered, denominator;
    if (!isa<DivOp, MulOp>(op) || !matchNormalize(op, centered, denominator))
      return failure();
    auto sub = centered.getDefiningOp<SubOp>();
    if (!sub)
      return failure();
    Value x = sub.getLhs();
    int64_t first, varFirst;
    if (meanOverTrailing(sub.getRhs(), first) != x || !sameShape(x, centered))
      return failure();
    double eps;
    Value var = addOfEpsilon(denominator, eps);
    if (!var || squareOf(meanOverTrailing(var, varFirst)) != centered ||
        varFirst != first)
      return failure();
    return replaceWithNorm<LayerNormOp>(op, x, first, eps, rewriter);
  }
};

/// x / sqrt(mean(x^2) + eps) [* gamma], in its exported spellings.
struct RaiseRmsNorm : RewritePattern {
  RaiseRmsNorm(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    Value x, denominator;
    if (!isa<DivOp, MulOp>(op) || !matchNormalize(op, x, denominator))
      return failure();
    double eps;
    int64_t first;
    Value meanSq = addOfEpsilon(denominator, eps);
    if (!meanSq || squareOf(meanOverTrailing(meanSq, first)) != x)
      return failure();
    return replaceWithNorm<RmsNormOp>(op, x, first, eps, rewriter);
  }
};

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// If the product is `c * x * other` with the expected constant, returns x
/// given a predicate on `other`.
Value matchScaledPair(const Product &p, double c,
                      function_ref<bool(Value other, Value x)> isOther) {
  if (p.factors.size() != 2 || std::fabs(p.constant - c) > 1e-3 * c)
    return {};
  for (int i = 0; i < 2; ++i)
    if (isOther(p.factors[1 - i], p.factors[i]))
      return p.factors[i];
  return {};
}

/// 0.5 * x * (1 + erf(x / sqrt(2)))  and
/// 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
struct RaiseGelu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    Product p = productOf(op.getResult());
    GeluApproximation approx = GeluApproximation::None;
    Value x = matchScaledPair(p, 0.5, [&](Value other, Value x) {
      Value inner = addOfConstant(other, 1.0);
      if (!inner)
        return false;
      if (auto erf = inner.getDefiningOp<ErfOp>()) {
        Product arg = productOf(erf.getOperand());
        approx = GeluApproximation::None;
        return arg.factors.size() == 1 && arg.factors[0] == x &&
               std::fabs(arg.constant - M_SQRT1_2) < 1e-4;
      }
      if (auto tanh = inner.getDefiningOp<TanhOp>()) {
        Product arg = productOf(tanh.getOperand());
        if (arg.factors.size() != 1 ||
            std::fabs(arg.constant - std::sqrt(2.0 / M_PI)) > 1e-4)
          return false;
        auto sum = arg.factors[0].getDefiningOp<AddOp>();
        if (!sum)
          return false;
        for (auto [a, b] : {std::pair(sum.getLhs(), sum.getRhs()),
                            std::pair(sum.getRhs(), sum.getLhs())}) {
          Product cube = productOf(b);
          if (a == x && cube.factors.size() == 3 &&
              llvm::all_of(cube.factors, [&](Value f) { return f == x; }) &&
              std::fabs(cube.constant - 0.044715) < 1e-5) {
            approx = GeluApproximation::Tanh;
            return true;
          }
        }
      }
      return false;
    });
    if (!x || x.getType() != op.getType())
      return failure();
    rewriter.replaceOpWithNewOp<GeluOp>(op, op.getType(), x, approx);
    return success();
  }
};

/// x * sigmoid(x)
struct RaiseSilu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [x, s] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())}) {
      auto sig = s.getDefiningOp<SigmoidOp>();
      if (sig && sig.getOperand() == x && x.getType() == op.getType()) {
        rewriter.replaceOpWithNewOp<SiluOp>(op, op.getType(), x);
        return success();
      }
    }
    return failure();
  }
};

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// True when `v` is a constant that is `expected(i, j)` over its last two
/// dimensions (i query, j key) and has size-1 leading dimensions.
bool isTriangularConstant(Value v, function_ref<bool(double, int64_t, int64_t)>
                                       expected) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : nullptr;
  auto type = c ? dyn_cast<RankedTensorType>(c.getType()) : nullptr;
  if (!dense || !type || type.getRank() < 2)
    return false;
  for (int64_t d = 0; d + 2 < type.getRank(); ++d)
    if (type.getDimSize(d) != 1)
      return false;
  int64_t cols = type.getShape().back();
  int64_t i = 0;
  auto check = [&](double value) {
    bool ok = expected(value, i / cols, i % cols);
    ++i;
    return ok;
  };
  if (dense.getElementType().isInteger(1)) {
    for (bool b : dense.getValues<bool>())
      if (!check(b ? 1.0 : 0.0))
        return false;
    return true;
  }
  if (!isa<FloatType>(dense.getElementType()))
    return false;
  for (APFloat f : dense.getValues<APFloat>())
    if (!check(f.convertToDouble()))
      return false;
  return true;
}

bool isLargeNegative(Value v) {
  std::optional<double> s = splatValue(v);
  return s && *s <= -1e4;
}

/// matmul(softmax(mask(scale(matmul(q, k^T)))), v) -> graph.attention
struct RaiseAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto softmax = op.getLhs().getDefiningOp<SoftmaxOp>();
    Value v = op.getRhs();
    if (!softmax || !softmax->hasOneUse() ||
        softmax.getType().getRank() != 4 || softmax.getDim() != 3)
      return failure();
    Value scores = softmax.getOperand();
    Location loc = op.getLoc();

    // Masking: causal constants become the flag, others the mask operand.
    bool causal = false;
    Value mask, notMask;
    if (auto where = scores.getDefiningOp<WhereOp>()) {
      if (where.getOnTrue().getType() != where.getType() &&
          where.getOnFalse().getType() != where.getType())
        return failure();
      if (isLargeNegative(where.getOnTrue())) {
        if (where.getOnFalse().getType() != where.getType())
          return failure();
        // true = masked out
        scores = where.getOnFalse();
        if (isTriangularConstant(where.getCondition(),
                                 [](double m, int64_t i, int64_t j) {
                                   return (m != 0) == (j > i);
                                 }))
          causal = true;
        else
          notMask = where.getCondition();
      } else if (isLargeNegative(where.getOnFalse())) {
        if (where.getOnTrue().getType() != where.getType())
          return failure();
        scores = where.getOnTrue();
        if (isTriangularConstant(where.getCondition(),
                                 [](double m, int64_t i, int64_t j) {
                                   return (m != 0) == (j <= i);
                                 }))
          causal = true;
        else
          mask = where.getCondition();
      } else {
        return failure();
      }
    } else if (auto add = scores.getDefiningOp<AddOp>()) {
      auto isScaledScores = [](Value s) {
        return s.getDefiningOp<MatmulOp>() || s.getDefiningOp<MulOp>() ||
               s.getDefiningOp<DivOp>();
      };
      Value additive;
      if (isScaledScores(add.getLhs()))
        std::tie(scores, additive) = std::pair(add.getLhs(), add.getRhs());
      else if (isScaledScores(add.getRhs()))
        std::tie(scores, additive) = std::pair(add.getRhs(), add.getLhs());
      else
        return failure();
      if (add.getType() != scores.getType())
        return failure();
      if (isTriangularConstant(additive, [](double m, int64_t i, int64_t j) {
            return j > i ? m <= -1e4 : m == 0.0;
          }))
        causal = true;
      else
        mask = additive;
    }

    // Scaling by a constant, on the scores.
    std::optional<double> scale;
    if (auto div = scores.getDefiningOp<DivOp>()) {
      if (std::optional<double> c = splatValue(div.getRhs()); c && *c > 0) {
        scale = 1.0 / *c;
        scores = div.getLhs();
      }
    } else if (auto mul = scores.getDefiningOp<MulOp>()) {
      for (auto [s, c] : {std::pair(mul.getLhs(), mul.getRhs()),
                          std::pair(mul.getRhs(), mul.getLhs())})
        if (std::optional<double> k = splatValue(c); k && *k > 0) {
          scale = *k;
          scores = s;
          break;
        }
      if (!scale)
        return failure();
    }
    auto qk = scores.getDefiningOp<MatmulOp>();
    if (!qk)
      return failure();
    Value q = qk.getLhs(), kT = qk.getRhs();
    auto qType = cast<RankedTensorType>(q.getType());
    auto kTType = cast<RankedTensorType>(kT.getType());
    auto vType = cast<RankedTensorType>(v.getType());
    // [B, H, S, D] everywhere, batch dims equal (no broadcasting).
    if (qType.getRank() != 4 || kTType.getRank() != 4 || vType.getRank() != 4 ||
        qType.getShape().take_front(2) != kTType.getShape().take_front(2) ||
        qType.getShape().take_front(2) != vType.getShape().take_front(2) ||
        qk.getType() != softmax.getType())
      return failure();

    Value k = TransposeOp::create(rewriter, loc, kT,
                                  rewriter.getDenseI64ArrayAttr({0, 1, 3, 2}));
    if (notMask) {
      auto i1 = RankedTensorType::get({}, rewriter.getI1Type());
      auto f = ConstantOp::create(rewriter, loc, i1,
                                  DenseElementsAttr::get(i1, false));
      auto t = ConstantOp::create(rewriter, loc, i1,
                                  DenseElementsAttr::get(i1, true));
      mask = WhereOp::create(rewriter, loc, notMask, f, t);
    }
    auto attention = AttentionOp::create(
        rewriter, loc, op.getType(), q, k, v, mask,
        causal ? rewriter.getUnitAttr() : UnitAttr(),
        rewriter.getF64FloatAttr(scale.value_or(1.0)));
    rewriter.replaceOp(op, attention.getResult());
    return success();
  }
};

struct RaisePass : cleave::impl::RaisePassBase<RaisePass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseLayerNorm, RaiseRmsNorm, RaiseGelu, RaiseSilu,
                 RaiseAttention>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    if (moe && failed(raiseMixturesOfExperts(
                   getOperation(), {moeCapacityFactor, moeGroupSize})))
      signalPassFailure();
  }
};
} // namespace
