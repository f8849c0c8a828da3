//===- DistHooks.cpp - partition hooks: the vocabulary-parallel ops --------===//
//
// Factors a rule marks as needing a hook are split only by the op's own
// partitioning, written here with ordinary graph ops and collectives:
//
// - graph.gather along a split vocabulary (Megatron's vocabulary-parallel
//   embedding): each device looks up the ids in its range, shifted to its
//   block, and contributes zero rows for the others; the result is partial
//   over the vocabulary's axes.
// - graph.gather_grad into a split table: each device scatters the rows of
//   the ids in its range into its block.
// - graph.cross_entropy and graph.cross_entropy_grad (reduction sum) over
//   split classes (the vocabulary-parallel loss, which never gathers the
//   logits): the row maximum and the sum of exponentials are all-reduced,
//   the label's logit is picked by a one-hot of this device's classes and
//   all-reduced.
// - graph.attention and graph.attention_grad, causal, with their queries
//   split (context parallelism): the block of queries attends to all the
//   keys under an explicit causal mask at the block's offset.
//
//===----------------------------------------------------------------------===//

#include "ShardingLayout.h"

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace cleave::dist {

namespace {

/// The factor of dimension `dim` of operand (or result) `index`.
int64_t factorOf(const TensorFactors &tf, int64_t dim) {
  return dim < int64_t(tf.size()) && !tf[dim].empty() ? tf[dim].front() : -1;
}

/// Typed elementwise builders with NumPy broadcasting.
class Builder {
public:
  /// `localTypeOf` gives the local type of a value the hooks build on (the
  /// partitioner's arguments keep their global types until it ends).
  Builder(OpBuilder &b, Location loc,
          function_ref<RankedTensorType(Value)> localTypeOf)
      : b(b), loc(loc), localTypeOf(localTypeOf) {}

  RankedTensorType type(Value v) const { return localTypeOf(v); }

  static RankedTensorType broadcast(RankedTensorType x, RankedTensorType y) {
    int64_t rank = std::max(x.getRank(), y.getRank());
    SmallVector<int64_t> shape(rank, 1);
    for (int64_t d = 0; d < rank; ++d) {
      int64_t dx = d - (rank - x.getRank()), dy = d - (rank - y.getRank());
      shape[d] = std::max(dx >= 0 ? x.getDimSize(dx) : 1,
                          dy >= 0 ? y.getDimSize(dy) : 1);
    }
    return RankedTensorType::get(shape, x.getElementType());
  }
  template <typename Op> Value binary(Value x, Value y) {
    return Op::create(b, loc, broadcast(type(x), type(y)), x, y);
  }
  Value add(Value x, Value y) { return binary<AddOp>(x, y); }
  Value sub(Value x, Value y) { return binary<SubOp>(x, y); }
  Value mul(Value x, Value y) { return binary<MulOp>(x, y); }
  Value div(Value x, Value y) { return binary<DivOp>(x, y); }
  Value compare(CompareDirection dir, Value x, Value y) {
    return CompareOp::create(
        b, loc, broadcast(type(x), type(y)).clone(b.getI1Type()), dir, x,
        y);
  }
  Value cast(Value x, Type elem) {
    if (type(x).getElementType() == elem)
      return x;
    return CastOp::create(b, loc, type(x).clone(elem), x);
  }
  Value scalar(Type elem, double v) {
    auto type = RankedTensorType::get({}, elem);
    Attribute value = isa<FloatType>(elem)
                          ? Attribute(b.getFloatAttr(elem, v))
                          : Attribute(b.getIntegerAttr(elem, int64_t(v)));
    return ConstantOp::create(b, loc, type,
                              DenseElementsAttr::get(type, value));
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (type(x).getShape() == shape)
      return x;
    return ReshapeOp::create(b, loc, type(x).clone(shape), x);
  }
  /// A reduction over the last dimension, kept as size 1.
  Value reduceLast(ReductionKind kind, Value x) {
    RankedTensorType t = type(x);
    SmallVector<int64_t> shape(t.getShape());
    shape.back() = 1;
    return ReduceOp::create(b, loc, t.clone(shape), kind, x,
                            {t.getRank() - 1}, /*keepdim=*/true);
  }
  Value reduceAll(Value x) {
    RankedTensorType t = type(x);
    return ReduceOp::create(b, loc, RankedTensorType::get({}, t.getElementType()),
                            ReductionKind::Sum, x,
                            llvm::to_vector(llvm::seq<int64_t>(0, t.getRank())),
                            /*keepdim=*/false);
  }

  OpBuilder &b;
  Location loc;
  function_ref<RankedTensorType(Value)> localTypeOf;
};

/// The hook's collectives and this device's vocabulary offset.
struct Vocabulary {
  FlatSymbolRefAttr mesh;
  ArrayAttr axes;
  int64_t block; // entries per device

  Value allReduce(Builder &g, Value x, ReductionKind kind) const {
    return AllReduceOp::create(g.b, g.loc, x.getType(), x, mesh, axes,
                               ReductionKindAttr::get(g.b.getContext(), kind));
  }
  /// The first index this device holds, as a scalar of `elem`.
  Value offset(Builder &g, Type elem) const {
    Value index = AxisIndexOp::create(
        g.b, g.loc, RankedTensorType::get({}, g.b.getI64Type()), mesh, axes);
    return g.cast(g.mul(index, g.scalar(g.b.getI64Type(), double(block))),
                  elem);
  }
  /// `ids` shifted to this device's block, the shifted ids clamped into it,
  /// and whether each was in it.
  std::pair<Value, Value> localIds(Builder &g, Value ids) const {
    Type elem = g.type(ids).getElementType();
    Value local = g.sub(ids, offset(g, elem));
    Value low = g.compare(CompareDirection::GE, local, g.scalar(elem, 0));
    Value high = g.compare(CompareDirection::LT, local,
                           g.scalar(elem, double(block)));
    Value in = WhereOp::create(g.b, g.loc, g.type(low), low, high, low);
    Value clamped = WhereOp::create(g.b, g.loc, g.type(local), in, local,
                                    g.scalar(elem, 0));
    return {clamped, in};
  }
  /// A 0/1 mask of `in`, of `elem`, shaped to broadcast over `rank - rank
  /// of in` trailing dimensions.
  Value mask(Builder &g, Value in, Type elem, int64_t rank) const {
    SmallVector<int64_t> shape(g.type(in).getShape());
    shape.resize(rank, 1);
    return g.reshape(g.cast(in, elem), shape);
  }
  /// The one-hot of `labels` over this device's classes, [..., block] f32.
  Value oneHot(Builder &g, Value labels) const {
    Type elem = g.type(labels).getElementType();
    Value classes =
        IotaOp::create(g.b, g.loc, RankedTensorType::get({block}, elem), 0);
    classes = g.add(classes, offset(g, elem));
    SmallVector<int64_t> shape(g.type(labels).getShape());
    shape.push_back(1);
    Value hit =
        g.compare(CompareDirection::EQ, classes, g.reshape(labels, shape));
    return g.cast(hit, g.b.getF32Type());
  }
};

/// The row maximum (all-reduced), the shifted logits z = x - max, their
/// exponentials and the all-reduced sum of those, of f32 logits.
struct Softmax {
  Value z, e, sum;
};
Softmax softmax(Builder &g, const Vocabulary &v, Value logits) {
  Value x = g.cast(logits, g.b.getF32Type());
  Value max = v.allReduce(g, g.reduceLast(ReductionKind::Max, x),
                          ReductionKind::Max);
  Value z = g.sub(x, max);
  Value e = ExpOp::create(g.b, g.loc, z.getType(), z);
  Value sum =
      v.allReduce(g, g.reduceLast(ReductionKind::Sum, e), ReductionKind::Sum);
  return {z, e, sum};
}

/// 1 where a label is not the ignored index, [..., 1] f32; null without one.
Value kept(Builder &g, Value labels, std::optional<int64_t> ignore) {
  if (!ignore)
    return {};
  SmallVector<int64_t> shape(g.type(labels).getShape());
  shape.push_back(1);
  Type elem = g.type(labels).getElementType();
  Value keep = g.compare(CompareDirection::NE, g.reshape(labels, shape),
                         g.scalar(elem, double(*ignore)));
  return g.cast(keep, g.b.getF32Type());
}

} // namespace

int64_t hookFactor(Operation *op, const ShardingRule &rule) {
  // A causal attention whose queries are split needs its offset.
  if (auto attention = dyn_cast<AttentionOp>(op))
    return attention.getCausal() ? factorOf(rule.getOperands()[0], 2) : -1;
  if (auto grad = dyn_cast<AttentionGradOp>(op))
    return grad.getCausal() ? factorOf(rule.getOperands()[0], 2) : -1;
  if (auto gather = dyn_cast<GatherOp>(op))
    return gather.getDim() == 0 ? factorOf(rule.getOperands()[0], 0) : -1;
  if (auto grad = dyn_cast<GatherGradOp>(op))
    return grad.getDim() == 0 ? factorOf(rule.getResults()[0], 0) : -1;
  if (auto ce = dyn_cast<CrossEntropyOp>(op))
    return ce.getReduction() == ReductionKind::Sum
               ? factorOf(rule.getOperands()[0], ce.getLogits().getType().getRank() - 1)
               : -1;
  if (auto ce = dyn_cast<CrossEntropyGradOp>(op))
    return ce.getReduction() == ReductionKind::Sum
               ? factorOf(rule.getOperands()[0], ce.getLogits().getType().getRank() - 1)
               : -1;
  return -1;
}

namespace {

/// The causal mask of a block of queries [sq] at this device's offset
/// against all [sk] keys: true where the key is not after the query,
/// [sq, sk] i1 (a causal mask is top-left aligned, as the op's own).
Value causalBlockMask(Builder &g, FlatSymbolRefAttr mesh, ArrayAttr axes,
                      int64_t queries, int64_t keys) {
  Type i64 = g.b.getI64Type();
  Value index = AxisIndexOp::create(g.b, g.loc, RankedTensorType::get({}, i64),
                                    mesh, axes);
  Value q = IotaOp::create(g.b, g.loc, RankedTensorType::get({queries}, i64), 0);
  q = g.add(q, g.mul(index, g.scalar(i64, double(queries))));
  Value k = IotaOp::create(g.b, g.loc, RankedTensorType::get({keys}, i64), 0);
  return g.compare(CompareDirection::LE, g.reshape(k, {1, keys}),
                   g.reshape(q, {queries, 1}));
}

/// The location of a hook's ops: what they split, on which axes.
Location hookLoc(OpBuilder &b, Operation *op, StringRef split,
                 ArrayRef<StringRef> axes) {
  std::string what;
  llvm::raw_string_ostream os(what);
  os << "the partition hook of " << op->getName() << " (its " << split
     << " split on";
  for (StringRef a : axes)
    os << " \"" << a << "\"";
  os << ")";
  return NameLoc::get(b.getStringAttr(what), op->getLoc());
}

/// Context parallelism: this device's queries against all the keys
/// (gathered), the causal mask at its offset.
FailureOr<SmallVector<Value>>
partitionAttention(Builder &g, Operation *op, ArrayRef<Value> operands,
                   ArrayRef<RankedTensorType> resultTypes,
                   ArrayRef<StringRef> axes, MeshOp mesh) {
  if (op->getNumOperands() != (isa<AttentionOp>(op) ? 3u : 4u))
    return op->emitOpError("cannot split its queries with both a mask and "
                           "causal masking (context parallelism)");
  int64_t queries = g.type(operands[0]).getDimSize(2);
  int64_t keys = g.type(operands[1]).getDimSize(2);
  if (keys != queries * groupSize(mesh, axes))
    return op->emitOpError("reads a block of ")
           << keys << " keys for its " << queries
           << " queries: context parallelism attends to the whole sequence";
  Value mask =
      causalBlockMask(g, FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                      g.b.getStrArrayAttr(axes), queries, keys);
  if (auto attention = dyn_cast<AttentionOp>(op))
    return SmallVector<Value>{AttentionOp::create(
        g.b, g.loc, resultTypes[0], operands[0], operands[1], operands[2],
        mask, UnitAttr(), attention.getScaleAttr())};
  auto grad = cast<AttentionGradOp>(op);
  SmallVector<Type> types(resultTypes.begin(), resultTypes.end());
  auto made = AttentionGradOp::create(g.b, g.loc, types, operands[0],
                                      operands[1], operands[2], operands[3],
                                      mask, UnitAttr(), grad.getScaleAttr());
  return SmallVector<Value>(made->getResults());
}

} // namespace

FailureOr<SmallVector<Value>> partitionWithHook(
    OpBuilder &b, Operation *op, ArrayRef<Value> operands,
    ArrayRef<RankedTensorType> resultTypes, ArrayRef<StringRef> axes,
    MeshOp mesh, function_ref<RankedTensorType(Value)> localTypeOf) {
  if (isa<AttentionOp, AttentionGradOp>(op)) {
    Builder g(b, hookLoc(b, op, "queries", axes), localTypeOf);
    return partitionAttention(g, op, operands, resultTypes, axes, mesh);
  }
  Builder g(b, hookLoc(b, op, "vocabulary", axes), localTypeOf);
  Vocabulary v{FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
               b.getStrArrayAttr(axes), 0};
  if (auto gather = dyn_cast<GatherOp>(op)) {
    Value data = operands[0];
    v.block = g.type(data).getDimSize(0);
    auto [ids, in] = v.localIds(g, operands[1]);
    Value rows = GatherOp::create(b, g.loc, resultTypes[0], data, ids, 0);
    return SmallVector<Value>{g.mul(
        rows, v.mask(g, in, g.type(data).getElementType(),
                     resultTypes[0].getRank()))};
  }
  if (isa<GatherGradOp>(op)) {
    Value grad = operands[0];
    v.block = resultTypes[0].getDimSize(0);
    auto [ids, in] = v.localIds(g, operands[1]);
    Value masked = g.mul(grad, v.mask(g, in, g.type(grad).getElementType(),
                                      g.type(grad).getRank()));
    return SmallVector<Value>{
        GatherGradOp::create(b, g.loc, resultTypes[0], masked, ids, 0)};
  }
  if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
    Value logits = operands[0], labels = operands[1];
    v.block = g.type(logits).getShape().back();
    Softmax s = softmax(g, v, logits);
    Value lse = LogOp::create(b, g.loc, s.sum.getType(), s.sum);
    Value target = v.allReduce(
        g, g.reduceLast(ReductionKind::Sum, g.mul(s.z, v.oneHot(g, labels))),
        ReductionKind::Sum);
    Value loss = g.sub(lse, target);
    if (Value keep = kept(g, labels, ce.getIgnoreIndex()))
      loss = g.mul(loss, keep);
    return SmallVector<Value>{g.cast(g.reduceAll(loss),
                                     resultTypes[0].getElementType())};
  }
  if (auto ce = dyn_cast<CrossEntropyGradOp>(op)) {
    Value logits = operands[0], labels = operands[1], scale = operands[2];
    v.block = g.type(logits).getShape().back();
    Softmax s = softmax(g, v, logits);
    Value grad = g.sub(g.div(s.e, s.sum), v.oneHot(g, labels));
    grad = g.mul(grad, g.cast(scale, g.b.getF32Type()));
    if (Value keep = kept(g, labels, ce.getIgnoreIndex()))
      grad = g.mul(grad, keep);
    return SmallVector<Value>{
        g.cast(grad, resultTypes[0].getElementType())};
  }
  return op->emitOpError("has no partition hook");
}

} // namespace cleave::dist
