//===- GraphShardingRules.cpp - factor rules of the graph ops -----------===//
//
// The `ShardingRuleOpInterface` implementation of every `graph` op
// (DESIGN.md §3). Each rule names the factors that operand and result
// dimensions share; propagation and partitioning only read these rules.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

using B = ShardingRuleBuilder;

namespace {
int64_t dimSize(Value v, int64_t d) {
  return cast<RankedTensorType>(v.getType()).getDimSize(d);
}
ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// Elementwise ops: every operand broadcasts into every result.
ShardingRule elementwiseRule(Operation *op) {
  B b(op);
  SmallVector<unsigned> operands =
      llvm::to_vector(llvm::seq<unsigned>(0, op->getNumOperands()));
  b.addElementwiseFactors(operands, shapeOf(op->getResult(0)));
  return b.take();
}

/// An elementwise rule, linear in each of `groups`.
ShardingRule linearElementwiseRule(Operation *op,
                                   ArrayRef<SmallVector<unsigned, 2>> groups) {
  ShardingRule rule = elementwiseRule(op);
  for (const auto &g : groups)
    rule.addLinearGroup(g);
  return rule;
}

/// `rule`, declared linear in operand 0.
ShardingRule linearInFirst(ShardingRule rule) {
  rule.addLinearGroup({0});
  return rule;
}

/// Ops whose single result is made from nothing: each dimension is its own
/// parallel factor (a constant or parameter can be sliced per shard).
ShardingRule sourceRule(Operation *op) {
  B b(op);
  b.addOwnFactorsToResults();
  return b.take();
}

/// Operand 0 and result 0 share every dimension except `dim`, which gets a
/// factor of the given kind on both when they have the same size there, or a
/// need-replication factor on each otherwise.
ShardingRule sameShapeExceptDim(Operation *op, int64_t dim, FactorKind kind) {
  B b(op);
  Value in = op->getOperand(0);
  auto rank = cast<RankedTensorType>(in.getType()).getRank();
  for (int64_t d = 0; d < rank; ++d) {
    SmallVector<B::DimRef> dims = {B::operand(0, d)};
    for (unsigned r = 0; r < op->getNumResults(); ++r)
      if (d != dim || dimSize(op->getResult(r), d) == dimSize(in, d))
        dims.push_back(B::result(r, d));
    b.addFactor(dimSize(in, d), dims,
                d == dim ? kind : FactorKind::Parallel);
  }
  b.addOwnFactorsToResults(FactorKind::NeedReplication);
  return b.take();
}

/// layer_norm and rms_norm: the normalized dimensions are shared with the
/// affine operands and must stay whole; the leading ones are parallel.
ShardingRule normRule(Operation *op, int64_t normDim) {
  B b(op);
  Value in = op->getOperand(0);
  auto rank = cast<RankedTensorType>(in.getType()).getRank();
  for (int64_t d = 0; d < rank; ++d) {
    SmallVector<B::DimRef> dims = {B::operand(0, d), B::result(0, d)};
    bool normalized = d >= normDim;
    if (normalized)
      for (unsigned o = 1; o < op->getNumOperands(); ++o)
        dims.push_back(B::operand(o, d - normDim));
    b.addFactor(dimSize(in, d), dims,
                normalized ? FactorKind::NeedReplication
                           : FactorKind::Parallel);
  }
  return b.take();
}
} // namespace

//===----------------------------------------------------------------------===//
// Parameters, constants, elementwise
//===----------------------------------------------------------------------===//

ShardingRule ReadParamOp::getShardingRule() { return sourceRule(*this); }
ShardingRule ConstantOp::getShardingRule() { return sourceRule(*this); }

ShardingRule IotaOp::getShardingRule() {
  // Sharding the counted dimension needs the shard's offset: a hook.
  B b(*this);
  for (int64_t d = 0, e = getType().getRank(); d < e; ++d)
    b.addFactor(getType().getDimSize(d), {B::result(0, d)},
                FactorKind::Parallel, ReductionKind::Sum, d == static_cast<int64_t>(getDim()));
  return b.take();
}

#define GRAPH_ELEMENTWISE_RULE(OP)                                             \
  ShardingRule OP::getShardingRule() { return elementwiseRule(*this); }
GRAPH_ELEMENTWISE_RULE(AbsOp)
GRAPH_ELEMENTWISE_RULE(ReluOp)
GRAPH_ELEMENTWISE_RULE(ExpOp)
GRAPH_ELEMENTWISE_RULE(LogOp)
GRAPH_ELEMENTWISE_RULE(SqrtOp)
GRAPH_ELEMENTWISE_RULE(RsqrtOp)
GRAPH_ELEMENTWISE_RULE(ReciprocalOp)
GRAPH_ELEMENTWISE_RULE(TanhOp)
GRAPH_ELEMENTWISE_RULE(ErfOp)
GRAPH_ELEMENTWISE_RULE(SigmoidOp)
GRAPH_ELEMENTWISE_RULE(SiluOp)
GRAPH_ELEMENTWISE_RULE(SinOp)
GRAPH_ELEMENTWISE_RULE(CosOp)
GRAPH_ELEMENTWISE_RULE(GeluOp)
GRAPH_ELEMENTWISE_RULE(PowOp)
GRAPH_ELEMENTWISE_RULE(MaxOp)
GRAPH_ELEMENTWISE_RULE(MinOp)
GRAPH_ELEMENTWISE_RULE(CompareOp)
#undef GRAPH_ELEMENTWISE_RULE

// The linear ones: a sum of partial values stays partial through them.
ShardingRule NegOp::getShardingRule() {
  return linearElementwiseRule(*this, {{0}});
}
ShardingRule CastOp::getShardingRule() {
  return linearElementwiseRule(*this, {{0}});
}
ShardingRule AddOp::getShardingRule() {
  return linearElementwiseRule(*this, {{0, 1}});
}
ShardingRule SubOp::getShardingRule() {
  return linearElementwiseRule(*this, {{0, 1}});
}
ShardingRule MulOp::getShardingRule() {
  return linearElementwiseRule(*this, {{0}, {1}});
}
ShardingRule DivOp::getShardingRule() {
  return linearElementwiseRule(*this, {{0}});
}
ShardingRule WhereOp::getShardingRule() {
  return linearElementwiseRule(*this, {{1, 2}});
}

//===----------------------------------------------------------------------===//
// Contractions, normalizations, reductions
//===----------------------------------------------------------------------===//

ShardingRule MatmulOp::getShardingRule() {
  // [batch..., m, k] x [batch..., k, n] -> [batch..., m, n], k reduced.
  B b(*this);
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType(),
                   out = getType();
  int64_t rank = out.getRank(), batch = rank - 2;
  for (int64_t d = 0; d < batch; ++d) {
    SmallVector<B::DimRef> dims = {B::result(0, d)};
    int64_t size = out.getDimSize(d);
    int64_t ld = d - (rank - lhs.getRank()), rd = d - (rank - rhs.getRank());
    if (ld >= 0 && lhs.getDimSize(ld) == size)
      dims.push_back(B::operand(0, ld));
    if (rd >= 0 && rhs.getDimSize(rd) == size)
      dims.push_back(B::operand(1, rd));
    b.addFactor(size, dims);
  }
  b.addFactor(out.getDimSize(rank - 2),
              {B::operand(0, lhs.getRank() - 2), B::result(0, rank - 2)});
  b.addFactor(lhs.getShape().back(),
              {B::operand(0, lhs.getRank() - 1),
               B::operand(1, rhs.getRank() - 2)},
              FactorKind::Reduction, ReductionKind::Sum);
  b.addFactor(out.getShape().back(),
              {B::operand(1, rhs.getRank() - 1), B::result(0, rank - 1)});
  b.addLinearGroup({0});
  b.addLinearGroup({1});
  return b.take();
}

ShardingRule SoftmaxOp::getShardingRule() {
  return sameShapeExceptDim(*this, getDim(), FactorKind::NeedReplication);
}

ShardingRule LogSoftmaxOp::getShardingRule() {
  return sameShapeExceptDim(*this, getDim(), FactorKind::NeedReplication);
}

ShardingRule ReduceOp::getShardingRule() {
  B b(*this);
  RankedTensorType in = getOperand().getType();
  ArrayRef<int64_t> dims = getDims();
  int64_t r = 0;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    bool reduced = llvm::is_contained(dims, d);
    if (reduced) {
      b.addFactor(in.getDimSize(d), {B::operand(0, d)},
                  FactorKind::Reduction, getKind());
      if (getKeepdim())
        ++r;
      continue;
    }
    b.addFactor(in.getDimSize(d), {B::operand(0, d), B::result(0, r++)});
  }
  if (getKind() == ReductionKind::Sum || getKind() == ReductionKind::Mean)
    b.addLinearGroup({0});
  return b.take();
}

ShardingRule LayerNormOp::getShardingRule() {
  return normRule(*this, getDim());
}
ShardingRule RmsNormOp::getShardingRule() { return normRule(*this, getDim()); }

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

ShardingRule ReshapeOp::getShardingRule() {
  B b(*this);
  b.addReshapeFactors(B::operand(0, 0), getOperand().getType().getShape(),
                      B::result(0, 0), getType().getShape());
  b.addLinearGroup({0});
  return b.take();
}

ShardingRule TransposeOp::getShardingRule() {
  B b(*this);
  for (auto [d, p] : llvm::enumerate(getPerm()))
    b.addFactor(getType().getDimSize(d),
                {B::operand(0, p), B::result(0, d)});
  b.addLinearGroup({0});
  return b.take();
}

ShardingRule BroadcastInDimOp::getShardingRule() {
  B b(*this);
  RankedTensorType in = getOperand().getType();
  for (auto [i, d] : llvm::enumerate(getDims()))
    if (in.getDimSize(i) == getType().getDimSize(d))
      b.addFactor(in.getDimSize(i), {B::operand(0, i), B::result(0, d)});
  b.addOwnFactorsToResults();
  b.addLinearGroup({0});
  return b.take();
}

ShardingRule SliceOp::getShardingRule() {
  // Untouched dimensions are shared; sliced ones are separate and whole.
  B b(*this);
  RankedTensorType in = getOperand().getType();
  SmallVector<int64_t> strides = getStridesOrOnes();
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (getStart()[d] == 0 && getLimit()[d] == in.getDimSize(d) &&
        strides[d] == 1)
      b.addFactor(in.getDimSize(d), {B::operand(0, d), B::result(0, d)});
  b.addOwnFactorsToOperands(FactorKind::NeedReplication);
  b.addOwnFactorsToResults(FactorKind::NeedReplication);
  b.addLinearGroup({0});
  return b.take();
}

ShardingRule ConcatOp::getShardingRule() {
  B b(*this);
  for (int64_t d = 0, e = getType().getRank(); d < e; ++d) {
    if (d == static_cast<int64_t>(getDim()))
      continue;
    SmallVector<B::DimRef> dims = {B::result(0, d)};
    for (unsigned o = 0; o < getNumOperands(); ++o)
      dims.push_back(B::operand(o, d));
    b.addFactor(getType().getDimSize(d), dims);
  }
  b.addOwnFactorsToOperands(FactorKind::NeedReplication);
  b.addOwnFactorsToResults(FactorKind::NeedReplication);
  b.addLinearGroup(llvm::to_vector(llvm::seq<unsigned>(0, getNumOperands())));
  return b.take();
}

ShardingRule SplitOp::getShardingRule() {
  return linearInFirst(
      sameShapeExceptDim(*this, getDim(), FactorKind::NeedReplication));
}

ShardingRule GatherOp::getShardingRule() {
  // data[pre..., V, post...], indices[idx...] -> [pre..., idx..., post...].
  // Sharding V (vocabulary-parallel embedding) leaves partial sums: each
  // shard contributes the rows it owns, through the op's partition hook.
  B b(*this);
  RankedTensorType data = getData().getType(), idx = getIndices().getType();
  int64_t dim = getDim(), n = idx.getRank();
  for (int64_t d = 0; d < dim; ++d)
    b.addFactor(data.getDimSize(d), {B::operand(0, d), B::result(0, d)});
  for (int64_t d = 0; d < n; ++d)
    b.addFactor(idx.getDimSize(d), {B::operand(1, d), B::result(0, dim + d)});
  for (int64_t d = dim + 1; d < data.getRank(); ++d)
    b.addFactor(data.getDimSize(d),
                {B::operand(0, d), B::result(0, d - 1 + n)});
  b.addFactor(data.getDimSize(dim), {B::operand(0, dim)},
              FactorKind::Reduction, ReductionKind::Sum, /*needsHook=*/true);
  b.addLinearGroup({0});
  return b.take();
}

ShardingRule TopKOp::getShardingRule() {
  return sameShapeExceptDim(*this, getDim(), FactorKind::NeedReplication);
}

//===----------------------------------------------------------------------===//
// Attention and losses
//===----------------------------------------------------------------------===//

ShardingRule AttentionOp::getShardingRule() {
  // q[b, (hkv g), sq, d], k[b, hkv, sk, d], v[b, hkv, sk, dv]
  //   -> [b, (hkv g), sq, dv]
  // Heads and queries are parallel; the head dim must stay whole (softmax
  // follows the contraction); the key sequence is a ring under context
  // parallelism, which only the attention partition hook can do.
  B b(*this);
  ArrayRef<int64_t> q = getQuery().getType().getShape(),
                    k = getKey().getType().getShape(),
                    v = getValue().getType().getShape();
  int64_t groups = q[1] / k[1];
  SmallVector<B::DimRef> batch = {B::operand(0, 0), B::operand(1, 0),
                                  B::operand(2, 0), B::result(0, 0)};
  SmallVector<B::DimRef> kvHeads = {B::operand(0, 1), B::operand(1, 1),
                                    B::operand(2, 1), B::result(0, 1)};
  SmallVector<B::DimRef> qSeq = {B::operand(0, 2), B::result(0, 2)};
  SmallVector<B::DimRef> kSeq = {B::operand(1, 2), B::operand(2, 2)};
  if (Value mask = getMask()) {
    auto m = cast<RankedTensorType>(mask.getType());
    int64_t off = 4 - m.getRank();
    auto add = [&](SmallVector<B::DimRef> &dims, int64_t d, int64_t size) {
      if (d - off >= 0 && m.getDimSize(d - off) == size)
        dims.push_back(B::operand(3, d - off));
    };
    add(batch, 0, q[0]);
    // A per-head mask shares the head factors only without grouping.
    if (groups == 1)
      add(kvHeads, 1, q[1]);
    add(qSeq, 2, q[2]);
    add(kSeq, 3, k[2]);
  }
  b.addFactor(q[0], batch);
  b.addFactor(k[1], kvHeads);
  b.addFactor(groups, {B::operand(0, 1), B::result(0, 1)});
  // Under a causal mask each query shard must know its global offset.
  b.addFactor(q[2], qSeq, FactorKind::Parallel, ReductionKind::Sum,
              /*needsHook=*/getCausal());
  b.addFactor(k[2], kSeq, FactorKind::NeedReplication, ReductionKind::Sum,
              /*needsHook=*/true);
  b.addFactor(q[3], {B::operand(0, 3), B::operand(1, 3)},
              FactorKind::NeedReplication);
  b.addFactor(v[3], {B::operand(2, 3), B::result(0, 3)});
  // A grouped per-head mask dimension keeps its own, whole factor.
  b.addOwnFactorsToOperands(FactorKind::NeedReplication);
  b.addLinearGroup({2});
  return b.take();
}

ShardingRule CrossEntropyOp::getShardingRule() {
  // Positions are summed or averaged away; the class dimension is the
  // softmax axis, shardable only by the vocabulary-parallel partition hook.
  // Sums of shards add up exactly. With an ignore index, shards count
  // different numbers of positions, so the mean of shard means is wrong:
  // the hook must reduce sums and counts separately (the training step uses
  // the sum and its own count, which need no hook).
  B b(*this);
  RankedTensorType logits = getLogits().getType();
  int64_t rank = logits.getRank();
  bool sum = getReduction() == ReductionKind::Sum;
  bool unevenCounts = !sum && getIgnoreIndex().has_value();
  for (int64_t d = 0; d + 1 < rank; ++d)
    b.addFactor(logits.getDimSize(d), {B::operand(0, d), B::operand(1, d)},
                FactorKind::Reduction,
                sum ? ReductionKind::Sum : ReductionKind::Mean, unevenCounts);
  b.addFactor(logits.getDimSize(rank - 1), {B::operand(0, rank - 1)},
              FactorKind::NeedReplication, ReductionKind::Sum,
              /*needsHook=*/true);
  return b.take();
}

ShardingRule MseOp::getShardingRule() {
  B b(*this);
  RankedTensorType type = getPrediction().getType();
  for (int64_t d = 0; d < type.getRank(); ++d)
    b.addFactor(type.getDimSize(d), {B::operand(0, d), B::operand(1, d)},
                FactorKind::Reduction, ReductionKind::Mean);
  return b.take();
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

ShardingRule RouterTopKOp::getShardingRule() {
  // logits[t, e] -> gates[t, k], experts[t, k].
  B b(*this);
  ArrayRef<int64_t> logits = getLogits().getType().getShape();
  b.addFactor(logits[0], {B::operand(0, 0), B::result(0, 0), B::result(1, 0)});
  b.addFactor(logits[1], {B::operand(0, 1)}, FactorKind::NeedReplication);
  b.addFactor(getK(), {B::result(0, 1), B::result(1, 1)},
              FactorKind::NeedReplication);
  return b.take();
}

ShardingRule MoeDispatchOp::getShardingRule() {
  // tokens[(g s), h], experts[(g s), k] -> [e, (g c), h]: each group of
  // tokens fills its own slots, so the groups split with no communication;
  // its tokens and slots stay whole. A result split by slots reaches an
  // expert-split reader by an all_to_all (the partitioner's conversion).
  B b(*this);
  ArrayRef<int64_t> tokens = getTokens().getType().getShape();
  ArrayRef<int64_t> out = getType().getShape();
  int64_t groups = getGroups();
  b.addFactor(groups, {B::operand(0, 0), B::operand(1, 0), B::result(0, 1)});
  b.addFactor(tokens[1], {B::operand(0, 1), B::result(0, 2)});
  b.addFactor(tokens[0] / groups, {B::operand(0, 0), B::operand(1, 0)},
              FactorKind::NeedReplication);
  b.addFactor(getExperts().getType().getDimSize(1), {B::operand(1, 1)},
              FactorKind::NeedReplication);
  b.addFactor(out[0], {B::result(0, 0)}, FactorKind::NeedReplication);
  b.addFactor(out[1] / groups, {B::result(0, 1)}, FactorKind::NeedReplication);
  b.addLinearGroup({0});
  return b.take();
}

ShardingRule ExpertMatmulOp::getShardingRule() {
  // [e, c, h] x [e, h, f] -> [e, c, f]: expert parallelism shards e.
  B b(*this);
  ArrayRef<int64_t> in = getInput().getType().getShape();
  ArrayRef<int64_t> w = getWeight().getType().getShape();
  b.addFactor(in[0], {B::operand(0, 0), B::operand(1, 0), B::result(0, 0)});
  b.addFactor(in[1], {B::operand(0, 1), B::result(0, 1)});
  b.addFactor(in[2], {B::operand(0, 2), B::operand(1, 1)},
              FactorKind::Reduction, ReductionKind::Sum);
  b.addFactor(w[2], {B::operand(1, 2), B::result(0, 2)});
  b.addLinearGroup({0});
  b.addLinearGroup({1});
  return b.take();
}

ShardingRule MoeCombineOp::getShardingRule() {
  // expert_out[e, (g c), h], gates[(g s), k], experts[(g s), k] ->
  // [(g s), h]: the groups split as moe_dispatch's do.
  B b(*this);
  ArrayRef<int64_t> out = getExpertOut().getType().getShape();
  ArrayRef<int64_t> gates = getGates().getType().getShape();
  int64_t groups = getGroups();
  b.addFactor(groups, {B::operand(0, 1), B::operand(1, 0), B::operand(2, 0),
                       B::result(0, 0)});
  b.addFactor(out[2], {B::operand(0, 2), B::result(0, 1)});
  b.addFactor(out[0], {B::operand(0, 0)}, FactorKind::NeedReplication);
  b.addFactor(out[1] / groups, {B::operand(0, 1)}, FactorKind::NeedReplication);
  b.addFactor(gates[0] / groups,
              {B::operand(1, 0), B::operand(2, 0), B::result(0, 0)},
              FactorKind::NeedReplication);
  b.addFactor(gates[1], {B::operand(1, 1), B::operand(2, 1)},
              FactorKind::NeedReplication);
  b.addLinearGroup({0});
  b.addLinearGroup({1});
  return b.take();
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//
//
// A factor that the input gradient carries but a parameter gradient does not
// (the batch of a norm's scale gradient, the query heads of a shared key) is
// a reduction: sharding it shards the input gradient and leaves the
// parameter gradient partial.

ShardingRule GeluGradOp::getShardingRule() {
  return linearElementwiseRule(*this, {{1}});
}
ShardingRule SiluGradOp::getShardingRule() {
  return linearElementwiseRule(*this, {{1}});
}

// The optimizer updates are elementwise in the parameter, the gradient and
// the state (step and scale are scalars): ZeRO shards them all alike.
ShardingRule SgdOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule AdamwOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule HyperparameterOp::getShardingRule() { return B(*this).take(); }

ShardingRule AssignOp::getShardingRule() {
  B b(*this);
  b.addOwnFactorsToOperands(FactorKind::Parallel);
  return b.take();
}

namespace {
/// layer_norm_grad and rms_norm_grad: operands (x, scale, dy), results (dx,
/// dscale[, dbias]).
ShardingRule normGradRule(Operation *op, int64_t normDim) {
  B b(op);
  Value in = op->getOperand(0);
  auto rank = cast<RankedTensorType>(in.getType()).getRank();
  for (int64_t d = 0; d < rank; ++d) {
    SmallVector<B::DimRef> dims = {B::operand(0, d), B::operand(2, d),
                                   B::result(0, d)};
    bool normalized = d >= normDim;
    if (normalized) {
      dims.push_back(B::operand(1, d - normDim));
      for (unsigned r = 1; r < op->getNumResults(); ++r)
        dims.push_back(B::result(r, d - normDim));
    }
    b.addFactor(dimSize(in, d), dims,
                normalized ? FactorKind::NeedReplication
                           : FactorKind::Reduction);
  }
  return b.take();
}
} // namespace

ShardingRule LayerNormGradOp::getShardingRule() {
  ShardingRule rule = normGradRule(*this, getDim());
  rule.addLinearGroup({2});
  return rule;
}
ShardingRule RmsNormGradOp::getShardingRule() {
  ShardingRule rule = normGradRule(*this, getDim());
  rule.addLinearGroup({2});
  return rule;
}

ShardingRule AttentionGradOp::getShardingRule() {
  // q[b, (hkv g), sq, d], k[b, hkv, sk, d], v[b, hkv, sk, dv],
  // grad[b, (hkv g), sq, dv] -> dq like q, dk like k, dv like v.
  B b(*this);
  ArrayRef<int64_t> q = getQuery().getType().getShape(),
                    k = getKey().getType().getShape(),
                    v = getValue().getType().getShape();
  int64_t groups = q[1] / k[1];
  b.addFactor(q[0], {B::operand(0, 0), B::operand(1, 0), B::operand(2, 0),
                     B::operand(3, 0), B::result(0, 0), B::result(1, 0),
                     B::result(2, 0)});
  b.addFactor(k[1], {B::operand(0, 1), B::operand(1, 1), B::operand(2, 1),
                     B::operand(3, 1), B::result(0, 1), B::result(1, 1),
                     B::result(2, 1)});
  b.addFactor(groups, {B::operand(0, 1), B::operand(3, 1), B::result(0, 1)},
              FactorKind::Reduction);
  b.addFactor(q[2], {B::operand(0, 2), B::operand(3, 2), B::result(0, 2)},
              FactorKind::Reduction, ReductionKind::Sum,
              /*needsHook=*/getCausal());
  b.addFactor(k[2], {B::operand(1, 2), B::operand(2, 2), B::result(1, 2),
                     B::result(2, 2)},
              FactorKind::NeedReplication, ReductionKind::Sum,
              /*needsHook=*/true);
  b.addFactor(q[3], {B::operand(0, 3), B::operand(1, 3), B::result(0, 3),
                     B::result(1, 3)},
              FactorKind::NeedReplication);
  b.addFactor(v[3], {B::operand(2, 3), B::operand(3, 3), B::result(2, 3)},
              FactorKind::NeedReplication);
  b.addOwnFactorsToOperands(FactorKind::NeedReplication);
  b.addLinearGroup({3});
  return b.take();
}

ShardingRule AttentionBlockOp::getShardingRule() {
  // q[b, (hkv g), sq, d], k[b, hkv, sk, d], v[b, hkv, sk, dv], qpos[sq],
  // kpos[sk] (, out_in, lse_in like the results) -> out[b, (hkv g), sq, dv],
  // lse[b, (hkv g), sq]. The queries are parallel (their positions travel
  // with them); the block's keys meet in the softmax.
  B b(*this);
  ArrayRef<int64_t> q = getQuery().getType().getShape(),
                    k = getKey().getType().getShape(),
                    v = getValue().getType().getShape();
  // Operand 5 and 6 when merging, then results 0 and 1: the tensors shaped
  // as the results.
  SmallVector<std::pair<bool, unsigned>> outs = {{true, 0}};
  SmallVector<std::pair<bool, unsigned>> lses = {{true, 1}};
  if (getOutIn()) {
    outs.push_back({false, 5});
    lses.push_back({false, 6});
  }
  auto ref = [](std::pair<bool, unsigned> t, int64_t d) {
    return t.first ? B::result(t.second, d) : B::operand(t.second, d);
  };
  auto across = [&](SmallVector<B::DimRef> dims, int64_t d, bool withLse) {
    for (auto t : outs)
      dims.push_back(ref(t, d));
    if (withLse)
      for (auto t : lses)
        dims.push_back(ref(t, d));
    return dims;
  };
  b.addFactor(q[0], across({B::operand(0, 0), B::operand(1, 0),
                            B::operand(2, 0)},
                           0, true));
  b.addFactor(k[1], across({B::operand(0, 1), B::operand(1, 1),
                            B::operand(2, 1)},
                           1, true));
  b.addFactor(q[1] / k[1], across({B::operand(0, 1)}, 1, true));
  b.addFactor(q[2], across({B::operand(0, 2), B::operand(3, 0)}, 2, true));
  b.addFactor(k[2], {B::operand(1, 2), B::operand(2, 2), B::operand(4, 0)},
              FactorKind::NeedReplication);
  b.addFactor(q[3], {B::operand(0, 3), B::operand(1, 3)},
              FactorKind::NeedReplication);
  b.addFactor(v[3], across({B::operand(2, 3)}, 3, false));
  return b.take();
}

ShardingRule AttentionBlockGradOp::getShardingRule() {
  // q, k, v, out, lse, grad, qpos, kpos -> dq like q, dk like k, dv like v.
  // With the forward's log-sum-exp each probability is known locally, so
  // a block of keys contributes its share of dq (a sum) and its own dk, dv.
  B b(*this);
  ArrayRef<int64_t> q = getQuery().getType().getShape(),
                    k = getKey().getType().getShape(),
                    v = getValue().getType().getShape();
  // The tensors shaped [b, (hkv g), sq, ...]: q, out, lse, grad, dq.
  auto queryLike = [](int64_t d, bool withLse = true) {
    SmallVector<B::DimRef> dims = {B::operand(0, d), B::operand(3, d),
                                   B::operand(5, d), B::result(0, d)};
    if (withLse)
      dims.push_back(B::operand(4, d));
    return dims;
  };
  auto keyLike = [](int64_t d) {
    return SmallVector<B::DimRef>{B::operand(1, d), B::operand(2, d),
                                  B::result(1, d), B::result(2, d)};
  };
  SmallVector<B::DimRef> batch = queryLike(0), heads = queryLike(1);
  llvm::append_range(batch, keyLike(0));
  llvm::append_range(heads, keyLike(1));
  b.addFactor(q[0], batch);
  b.addFactor(k[1], heads);
  b.addFactor(q[1] / k[1], queryLike(1), FactorKind::Reduction);
  SmallVector<B::DimRef> queries = queryLike(2);
  queries.push_back(B::operand(6, 0));
  b.addFactor(q[2], queries, FactorKind::Reduction);
  SmallVector<B::DimRef> keys = keyLike(2);
  keys.push_back(B::operand(7, 0));
  b.addFactor(k[2], keys, FactorKind::Reduction);
  b.addFactor(q[3], {B::operand(0, 3), B::operand(1, 3), B::result(0, 3),
                     B::result(1, 3)},
              FactorKind::NeedReplication);
  b.addFactor(v[3], {B::operand(2, 3), B::operand(3, 3), B::operand(5, 3),
                     B::result(2, 3)},
              FactorKind::NeedReplication);
  return b.take();
}

ShardingRule GatherGradOp::getShardingRule() {
  // grad[pre..., idx..., post...], indices[idx...] -> [pre..., V, post...]:
  // the index positions are summed away; sharding V (the vocabulary) needs
  // the partition hook that keeps only the rows a shard owns.
  B b(*this);
  RankedTensorType data = getType(), idx = getIndices().getType();
  int64_t dim = getDim(), n = idx.getRank();
  for (int64_t d = 0; d < dim; ++d)
    b.addFactor(data.getDimSize(d), {B::operand(0, d), B::result(0, d)});
  for (int64_t d = 0; d < n; ++d)
    b.addFactor(idx.getDimSize(d), {B::operand(0, dim + d), B::operand(1, d)},
                FactorKind::Reduction);
  for (int64_t d = dim + 1; d < data.getRank(); ++d)
    b.addFactor(data.getDimSize(d),
                {B::operand(0, d - 1 + n), B::result(0, d)});
  b.addFactor(data.getDimSize(dim), {B::result(0, dim)},
              FactorKind::Parallel, ReductionKind::Sum, /*needsHook=*/true);
  b.addLinearGroup({0});
  return b.take();
}

ShardingRule SliceGradOp::getShardingRule() {
  // Dimensions the slice kept whole are shared; the others stay whole.
  B b(*this);
  RankedTensorType grad = getGrad().getType();
  for (int64_t d = 0; d < grad.getRank(); ++d)
    if (grad.getDimSize(d) == getType().getDimSize(d))
      b.addFactor(grad.getDimSize(d), {B::operand(0, d), B::result(0, d)});
  b.addOwnFactorsToOperands(FactorKind::NeedReplication);
  b.addOwnFactorsToResults(FactorKind::NeedReplication);
  b.addLinearGroup({0});
  return b.take();
}

ShardingRule CrossEntropyGradOp::getShardingRule() {
  // Positions are parallel (each gets its own row of probabilities); the
  // class dimension needs the vocabulary-parallel hook for the softmax.
  B b(*this);
  RankedTensorType logits = getLogits().getType();
  int64_t rank = logits.getRank();
  for (int64_t d = 0; d + 1 < rank; ++d)
    b.addFactor(logits.getDimSize(d),
                {B::operand(0, d), B::operand(1, d), B::result(0, d)},
                FactorKind::Parallel, ReductionKind::Sum,
                /*needsHook=*/getIgnoreIndex().has_value());
  b.addFactor(logits.getDimSize(rank - 1),
              {B::operand(0, rank - 1), B::result(0, rank - 1)},
              FactorKind::NeedReplication, ReductionKind::Sum,
              /*needsHook=*/true);
  b.addLinearGroup({2});
  return b.take();
}
