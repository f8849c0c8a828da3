//===- RaiseMoe.cpp - dense mixtures of experts -> routed experts --------===//
//
// An exporter sees a mixture of experts with static shapes only when it is
// written densely: every expert applied to every token through stacked
// expert weights, and a gate matrix that is zero off each token's top-k
// experts. This rewrite recognizes that form and computes it routed:
//
//   logits [T, E] -> softmax -> topk k (-> values / sum(values))
//     gates [T, E] = sum_j values[t, j] * (indices[t, j] == arange(E))
//   Y [E, T, H] = FFN_e(x): matmul([1, T, H], [E, H, F]), elementwise ops,
//                           matmul by [E, F, H] (any such chain)
//   out [T, H] = sum_e Y[e] * gates^T[e, :, None]
// becomes
//   gates, experts = router_topk logits k (normalize)
//   out = moe_combine(FFN(moe_dispatch(x, experts)), gates, experts)
//
// with the expert matmuls as expert_matmul on [E, G * C, .] slots. The
// dense ops left dead are erased.
//
//===----------------------------------------------------------------------===//

#include "RaiseMoe.h"

#include "cleave/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

RankedTensorType tensorType(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

bool hasShape(Value v, ArrayRef<int64_t> shape) {
  RankedTensorType t = tensorType(v);
  return t && t.hasStaticShape() && t.getShape() == shape;
}

/// `reduce sum` over exactly `dims`.
ReduceOp sumOver(Value v, ArrayRef<int64_t> dims, bool keepdim) {
  auto r = v.getDefiningOp<ReduceOp>();
  if (!r || r.getKind() != ReductionKind::Sum || r.getDims() != dims ||
      r.getKeepdim() != keepdim)
    return {};
  return r;
}

/// The operand of a reshape, or null.
Value reshaped(Value v) {
  auto r = v.getDefiningOp<ReshapeOp>();
  return r ? r.getOperand() : Value();
}

/// 0, 1, ..., n - 1 as a constant or an iota, in any shape of n elements.
bool isArange(Value v, int64_t n) {
  RankedTensorType t = tensorType(v);
  if (!t || !t.hasStaticShape() || t.getNumElements() != n)
    return false;
  if (auto iota = v.getDefiningOp<IotaOp>())
    return t.getDimSize(iota.getDim()) == n;
  DenseIntElementsAttr values;
  if (!matchPattern(v, m_Constant(&values)))
    return false;
  int64_t i = 0;
  for (const APInt &x : values)
    if (x.getSExtValue() != i++)
      return false;
  return true;
}

/// One dense mixture, matched.
struct DenseMoe {
  ReduceOp sum;  // sum over the experts: [E, T, H] -> [T, H]
  Value experts; // Y: [E, T, H]
  TopKOp topk;
  Value logits; // the router's [T, E]
  bool normalize = false;
  int64_t numExperts = 0, tokens = 0;
};

/// Matches the gate-weighted sum over the experts at `sum`.
std::optional<DenseMoe> match(ReduceOp sum) {
  DenseMoe m;
  m.sum = sum;
  if (!sumOver(sum.getResult(), {0}, false))
    return std::nullopt;
  RankedTensorType yType = tensorType(sum.getOperand());
  if (!yType || yType.getRank() != 3 || !yType.hasStaticShape())
    return std::nullopt;
  int64_t e = yType.getDimSize(0), t = yType.getDimSize(1);
  auto mul = sum.getOperand().getDefiningOp<MulOp>();
  if (!mul)
    return std::nullopt;
  // Y * reshape(transpose(gates)) in either order.
  Value gatesT;
  for (auto [y, g] : {std::pair(mul.getLhs(), mul.getRhs()),
                      std::pair(mul.getRhs(), mul.getLhs())})
    if (y.getType() == yType && hasShape(g, {e, t, 1})) {
      m.experts = y;
      gatesT = g;
    }
  if (!m.experts)
    return std::nullopt;
  auto transpose = reshaped(gatesT).getDefiningOp<TransposeOp>();
  if (!reshaped(gatesT) || !transpose ||
      transpose.getPerm() != ArrayRef<int64_t>{1, 0} ||
      !hasShape(transpose.getOperand(), {t, e}))
    return std::nullopt;
  // gates [T, E] = sum_j p[t, j, None] * (indices[t, j, None] == arange(E)).
  ReduceOp gates = sumOver(transpose.getOperand(), {1}, false);
  if (!gates)
    return std::nullopt;
  auto weighted = gates.getOperand().getDefiningOp<MulOp>();
  if (!weighted)
    return std::nullopt;
  Value p, onehot;
  for (auto [a, b] : {std::pair(weighted.getLhs(), weighted.getRhs()),
                      std::pair(weighted.getRhs(), weighted.getLhs())})
    if (auto cast = b.getDefiningOp<CastOp>(); cast && reshaped(a)) {
      p = reshaped(a);
      onehot = cast.getOperand();
    }
  if (!p)
    return std::nullopt;
  auto compare = onehot.getDefiningOp<CompareOp>();
  if (!compare || compare.getDirection() != CompareDirection::EQ)
    return std::nullopt;
  Value indices;
  for (auto [a, b] : {std::pair(compare.getLhs(), compare.getRhs()),
                      std::pair(compare.getRhs(), compare.getLhs())})
    if (reshaped(a) && isArange(b, e))
      indices = reshaped(a);
  if (!indices)
    return std::nullopt;
  m.topk = indices.getDefiningOp<TopKOp>();
  if (!m.topk || indices != m.topk.getIndices() || m.topk.getSmallest() ||
      m.topk.getDim() != 1)
    return std::nullopt;
  int64_t k = m.topk.getK();
  if (!hasShape(p, {t, k}) || !hasShape(m.topk.getOperand(), {t, e}))
    return std::nullopt;
  // The gates: the top-k probabilities, or those renormalized over the k.
  if (p != m.topk.getValues()) {
    auto div = p.getDefiningOp<DivOp>();
    ReduceOp total = div ? sumOver(div.getRhs(), {1}, true) : ReduceOp();
    if (!div || div.getLhs() != m.topk.getValues() || !total ||
        total.getOperand() != m.topk.getValues())
      return std::nullopt;
    m.normalize = true;
  }
  auto softmax = m.topk.getOperand().getDefiningOp<SoftmaxOp>();
  if (!softmax || softmax.getDim() != 1)
    return std::nullopt;
  m.logits = softmax.getOperand();
  m.numExperts = e;
  m.tokens = t;
  return m;
}

/// Rebuilds the experts' computation Y on slots instead of tokens.
class ExpertChain {
public:
  ExpertChain(OpBuilder &b, const DenseMoe &m) : b(b), m(m) {}

  /// The slots' version of `v` ([E, T, F] -> [E, slots, F]), built with
  /// `dispatch` (which makes [E, slots, H] of the [T, H] tokens it is given).
  /// Without `dispatch`, a dry run: checks the chain, finds its tokens and
  /// builds nothing (returning `v`).
  FailureOr<Value> rebuild(Value v,
                           function_ref<Value(Value tokens)> dispatch) {
    if (auto it = done.find(v); it != done.end())
      return it->second;
    FailureOr<Value> made = make(v, dispatch);
    if (succeeded(made))
      done[v] = *made;
    return made;
  }

  /// The [1, T, H] value the expert matmuls broadcast over the experts.
  Value tokens;

private:
  /// A [E, T, F] value of the chain.
  bool inChain(Value v) const {
    RankedTensorType t = tensorType(v);
    return t && t.getRank() == 3 && t.getDimSize(0) == m.numExperts &&
           t.getDimSize(1) == m.tokens;
  }
  /// A value of the chain by what computes it, not only by its shape (an
  /// expert weight [E, H, F] has the shape of one when H = T): a dry run of
  /// its own. A product of two chain values is not an expert matmul.
  bool isChainValue(Value v) const {
    if (!inChain(v))
      return false;
    ExpertChain probe(b, m);
    return succeeded(probe.rebuild(v, {}));
  }
  /// A value that broadcasts over the tokens ([F], [1, F], [E, 1, F]...).
  bool broadcastsOverTokens(Value v) const {
    RankedTensorType t = tensorType(v);
    if (!t)
      return false;
    int64_t r = t.getRank();
    return r <= 1 || t.getDimSize(r - 2) == 1;
  }

  FailureOr<Value> make(Value v, function_ref<Value(Value)> dispatch) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getNumResults() != 1 || !isPure(def))
      return failure();
    if (auto mm = dyn_cast<MatmulOp>(def)) {
      RankedTensorType w = tensorType(mm.getRhs());
      if (!w || w.getRank() != 3 || w.getDimSize(0) != m.numExperts ||
          isChainValue(mm.getRhs()))
        return failure();
      Value in;
      if (hasShape(mm.getLhs(), {1, m.tokens, w.getDimSize(1)})) {
        if (tokens && tokens != mm.getLhs())
          return failure(); // two token sources: not one mixture
        tokens = mm.getLhs();
        in = dispatch ? dispatch(tokens) : Value();
      } else {
        FailureOr<Value> x = rebuild(mm.getLhs(), dispatch);
        if (failed(x))
          return failure();
        in = *x;
      }
      if (!dispatch)
        return v;
      return ExpertMatmulOp::create(b, mm.getLoc(), in, mm.getRhs())
          .getResult();
    }
    // Elementwise ops of chain values and of values broadcast over the
    // tokens run on the slots alike.
    bool unary = def->getNumOperands() == 1 &&
                 def->hasTrait<OpTrait::SameOperandsAndResultType>();
    bool binary = isa<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp>(def);
    if (!unary && !binary)
      return failure();
    IRMapping mapping;
    RankedTensorType slotsType;
    for (Value operand : def->getOperands()) {
      if (inChain(operand)) {
        FailureOr<Value> x = rebuild(operand, dispatch);
        if (failed(x))
          return failure();
        mapping.map(operand, *x);
        slotsType = tensorType(*x);
      } else if (!broadcastsOverTokens(operand)) {
        return failure();
      }
    }
    if (!slotsType)
      return failure();
    if (!dispatch)
      return v;
    RankedTensorType type = tensorType(v);
    SmallVector<int64_t> shape(type.getShape());
    shape[1] = slotsType.getDimSize(1);
    Operation *clone = b.clone(*def, mapping);
    clone->getResult(0).setType(type.clone(shape));
    return clone->getResult(0);
  }

  OpBuilder &b;
  const DenseMoe &m;
  llvm::DenseMap<Value, Value> done;
};

/// Erases `op` and the ops that only fed it, once dead.
void eraseDeadSlice(Operation *op) {
  SmallVector<Operation *> worklist = {op};
  while (!worklist.empty()) {
    Operation *dead = worklist.pop_back_val();
    if (!dead->use_empty() || !isPure(dead))
      continue;
    SmallVector<Operation *> defs;
    for (Value operand : dead->getOperands())
      if (Operation *def = operand.getDefiningOp())
        defs.push_back(def);
    dead->erase();
    for (Operation *def : defs)
      if (!llvm::is_contained(worklist, def))
        worklist.push_back(def);
  }
}

/// The groups of the mixture: `groupSize` tokens each, or one sequence
/// each when the tokens are a reshape of [B, S, H] (else one group).
FailureOr<int64_t> groupsOf(DenseMoe m, Value tokens,
                            const RaiseMoeOptions &options) {
  if (options.groupSize > 0) {
    if (m.tokens % options.groupSize != 0)
      return m.sum.emitError("-cleave-raise: moe-group-size ")
             << options.groupSize << " does not divide the mixture's "
             << m.tokens << " tokens";
    return m.tokens / options.groupSize;
  }
  for (Value v = tokens; v; v = reshaped(v)) {
    RankedTensorType t = tensorType(v);
    if (t && t.getRank() == 3 && t.getDimSize(0) > 1 &&
        t.getDimSize(0) * t.getDimSize(1) == m.tokens)
      return t.getDimSize(0);
  }
  return 1;
}

LogicalResult raise(DenseMoe m, const RaiseMoeOptions &options) {
  OpBuilder b(m.sum);
  // A dry run checks the chain and finds its tokens before anything is
  // built in place.
  ExpertChain probe(b, m);
  if (failed(probe.rebuild(m.experts, {})) || !probe.tokens)
    return success(); // not a mixture this rewrite knows: left alone
  RankedTensorType x = tensorType(probe.tokens); // [1, T, H]
  FailureOr<int64_t> groups = groupsOf(m, probe.tokens, options);
  if (failed(groups))
    return failure();
  int64_t perGroup = m.tokens / *groups, k = m.topk.getK();
  int64_t capacity = perGroup;
  if (options.capacityFactor > 0)
    capacity = std::clamp<int64_t>(
        static_cast<int64_t>(std::ceil(options.capacityFactor * double(k) *
                                       double(perGroup) /
                                       double(m.numExperts))),
        1, perGroup);

  Location routerLoc = m.topk.getLoc();
  auto router = RouterTopKOp::create(
      b, routerLoc, m.logits, b.getI64IntegerAttr(k),
      m.normalize ? b.getUnitAttr() : UnitAttr());
  Value gates = router.getGates();
  Type elem = x.getElementType();
  if (tensorType(gates).getElementType() != elem)
    gates = CastOp::create(b, routerLoc, tensorType(gates).clone(elem), gates);
  auto dispatch = [&](Value tokens) -> Value {
    auto flat = ReshapeOp::create(
        b, tokens.getLoc(),
        RankedTensorType::get({m.tokens, x.getDimSize(2)}, elem), tokens);
    return MoeDispatchOp::create(b, tokens.getLoc(), flat, router.getExperts(),
                                 b.getI64IntegerAttr(m.numExperts),
                                 b.getI64IntegerAttr(capacity),
                                 b.getI64IntegerAttr(*groups))
        .getResult();
  };
  ExpertChain chain(b, m);
  FailureOr<Value> y = chain.rebuild(m.experts, dispatch);
  if (failed(y))
    return m.sum.emitError("-cleave-raise: the experts' computation matched "
                           "once but not when rebuilt");
  Value out = MoeCombineOp::create(b, m.sum.getLoc(), m.sum.getType(), *y,
                                   gates, router.getExperts(),
                                   b.getI64IntegerAttr(*groups));
  m.sum.getResult().replaceAllUsesWith(out);
  eraseDeadSlice(m.sum);
  return success();
}

} // namespace

LogicalResult cleave::raiseMixturesOfExperts(Operation *root,
                                             const RaiseMoeOptions &options) {
  if (options.capacityFactor < 0 || !std::isfinite(options.capacityFactor))
    return root->emitError("-cleave-raise: moe-capacity-factor must be a "
                           "finite number >= 0 (0: dropless), got ")
           << options.capacityFactor;
  if (options.groupSize < 0)
    return root->emitError("-cleave-raise: moe-group-size must be >= 0 (0: "
                           "one group per sequence), got ")
           << options.groupSize;
  SmallVector<DenseMoe> found;
  root->walk([&](ReduceOp sum) {
    if (std::optional<DenseMoe> m = match(sum))
      found.push_back(*m);
  });
  for (DenseMoe &m : found)
    if (failed(raise(m, options)))
      return failure();
  return success();
}
