//===- DistHooks.cpp - partition hooks: the vocabulary-parallel ops --------===//
//
// Factors a rule marks as needing a hook are split only by the op's own
// partitioning, written here with ordinary graph ops and collectives:
//
// - graph.gather along a split vocabulary (Megatron's vocabulary-parallel
//   embedding): each device looks up the ids in its block, at its offset,
//   with zero rows for the others (one gather with an offset); the result
//   is partial over the vocabulary's axes.
// - graph.gather_grad into a split table: each device scatters the rows of
//   the ids in its block into it (one gather_grad with an offset).
// - graph.cross_entropy and graph.cross_entropy_grad (reduction sum) over
//   split classes (the vocabulary-parallel loss, which never gathers the
//   logits): the row maximum and the sum of exponentials are all-reduced,
//   the label's logit is picked by a one-hot of this device's classes and
//   all-reduced.
// - graph.attention and graph.attention_grad, causal, with their queries
//   split (context parallelism): the block of queries attends to all the
//   keys under an explicit causal mask at the block's offset.
// - the same ops marked dist.ring, with queries and keys split alike (ring
//   attention, Liu et al. 2023): each device computes its queries against
//   the key/value block it holds while passing the blocks on around the
//   ring by collective_permute, and merges the blocks by their log-sum-exp
//   (graph.attention_block). The backward passes the key/value blocks the
//   same way, with their gradients travelling beside them, and one more
//   step brings each block's gradient home (graph.attention_block_grad,
//   which reads the forward's output and log-sum-exp). In the zigzag
//   layout (the mesh's zigzag_axes) a device's block is two chunks, and
//   the blocks' positions say which.
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

namespace {
bool isRing(Operation *op) {
  return isa<AttentionOp, AttentionGradOp>(op) &&
         op->hasAttr(DistDialect::getRingAttrName());
}
} // namespace

int64_t hookFactor(Operation *op, const ShardingRule &rule) {
  // A causal attention whose queries are split needs its offset; a ring
  // attention computes its own way whether causal or not.
  if (auto attention = dyn_cast<AttentionOp>(op))
    return attention.getCausal() || isRing(op)
               ? factorOf(rule.getOperands()[0], 2)
               : -1;
  if (auto grad = dyn_cast<AttentionGradOp>(op))
    return grad.getCausal() || isRing(op) ? factorOf(rule.getOperands()[0], 2)
                                          : -1;
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

int64_t resultOnlyHookFactor(Operation *op, const ShardingRule &rule) {
  int64_t hooked = hookFactor(op, rule);
  if (hooked < 0)
    return -1;
  for (const TensorFactors &tf : rule.getOperands())
    for (const DimFactors &dim : tf)
      if (llvm::is_contained(dim, hooked))
        return -1;
  return hooked;
}

int64_t hookTiedFactor(Operation *op, const ShardingRule &rule) {
  return isRing(op) ? factorOf(rule.getOperands()[1], 2) : -1;
}

namespace {

/// The sequence positions [size] of the block device `device` (an i64
/// scalar) of `n` holds: chunk `device` of n, or under the zigzag layout
/// chunks `device` and 2n - 1 - device of 2n, one after the other.
Value blockPositions(Builder &g, Value device, int64_t size, int64_t n,
                     bool zigzag) {
  Type i64 = g.b.getI64Type();
  auto chunk = [&](Value which, int64_t length) {
    Value iota =
        IotaOp::create(g.b, g.loc, RankedTensorType::get({length}, i64), 0);
    return g.add(iota, g.mul(which, g.scalar(i64, double(length))));
  };
  if (!zigzag)
    return chunk(device, size);
  Value late = g.sub(g.scalar(i64, double(2 * n - 1)), device);
  return ConcatOp::create(g.b, g.loc, RankedTensorType::get({size}, i64),
                          ValueRange{chunk(device, size / 2),
                                     chunk(late, size / 2)},
                          0);
}

/// Whether the sequence split on `axes` is in the zigzag layout (its one
/// axis among the mesh's zigzag axes); an error where the ring's marking
/// and the mesh disagree, or a zigzag axis is one of several.
FailureOr<bool> zigzagLayout(Operation *op, ArrayRef<StringRef> axes,
                             MeshOp mesh) {
  bool zigzag = llvm::any_of(axes, [&](StringRef a) { return mesh.isZigzag(a); });
  if (zigzag && axes.size() != 1)
    return op->emitOpError("splits its sequence on several axes, one of "
                           "them zigzag: the zigzag layout takes one axis");
  if (auto ring = op->getAttrOfType<StringAttr>(DistDialect::getRingAttrName());
      ring && (ring.getValue() == "zigzag") != zigzag)
    return op->emitOpError("is marked ")
           << DistDialect::getRingAttrName() << " = \"" << ring.getValue()
           << "\" but its sequence axis is "
           << (zigzag ? "" : "not ") << "one of the mesh's zigzag axes";
  return zigzag;
}

/// The causal mask of a block of queries [sq] at this device's place
/// against all [sk] keys: true where the key is not after the query,
/// [sq, sk] i1 (a causal mask is top-left aligned, as the op's own).
Value causalBlockMask(Builder &g, FlatSymbolRefAttr mesh, ArrayAttr axes,
                      int64_t n, bool zigzag, int64_t queries, int64_t keys) {
  Type i64 = g.b.getI64Type();
  Value index = AxisIndexOp::create(g.b, g.loc, RankedTensorType::get({}, i64),
                                    mesh, axes);
  Value q = blockPositions(g, index, queries, n, zigzag);
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
  int64_t n = groupSize(mesh, axes);
  if (keys != queries * n)
    return op->emitOpError("reads a block of ")
           << keys << " keys for its " << queries
           << " queries: context parallelism attends to the whole sequence";
  FailureOr<bool> zigzag = zigzagLayout(op, axes, mesh);
  if (failed(zigzag))
    return failure();
  Value mask =
      causalBlockMask(g, FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                      g.b.getStrArrayAttr(axes), n, *zigzag, queries, keys);
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

/// Ring attention over the devices of `axes`: the blocks' positions, the
/// permutes that pass a block on, the forward and backward rings.
struct Ring {
  Builder &g;
  FlatSymbolRefAttr mesh;
  ArrayAttr axes;
  int64_t n;    // devices around the ring
  bool causal;
  FloatAttr scale;
  bool zigzag;  // the sequence's layout over the devices

  Value index() const {
    return AxisIndexOp::create(g.b, g.loc,
                               RankedTensorType::get({}, g.b.getI64Type()),
                               mesh, axes);
  }
  /// The device whose block this one holds at step `i`: (index - i) mod n.
  Value holder(int64_t i) const {
    if (i == 0)
      return index();
    Type i64 = g.b.getI64Type();
    Value at = g.sub(index(), g.scalar(i64, double(i)));
    Value wrapped = g.add(at, g.scalar(i64, double(n)));
    Value negative = g.compare(CompareDirection::LT, at, g.scalar(i64, 0));
    return WhereOp::create(g.b, g.loc, g.type(at), negative, wrapped, at);
  }
  /// The sequence positions [size] of device `device`'s block.
  Value positions(Value device, int64_t size) const {
    return blockPositions(g, device, size, n, zigzag);
  }
  /// `x` sent to the next device around the ring, received from the one
  /// before.
  Value pass(Value x) const {
    SmallVector<int64_t> pairs;
    for (int64_t d = 0; d < n; ++d)
      pairs.append({d, (d + 1) % n});
    return CollectivePermuteOp::create(g.b, g.loc, x.getType(), x, mesh, axes,
                                       g.b.getI64ArrayAttr(pairs));
  }
  /// Step `i`'s key and value blocks passed on for the next step (none
  /// after the last); one permute when they are the same value.
  std::pair<Value, Value> passOn(int64_t i, Value k, Value v) const {
    if (i + 1 == n)
      return {};
    Value next = pass(k);
    return {next, v == k ? next : pass(v)};
  }
  RankedTensorType lseType(Value q) const {
    ArrayRef<int64_t> s = g.type(q).getShape();
    return RankedTensorType::get({s[0], s[1], s[2]}, g.b.getF32Type());
  }

  /// The attention of this device's queries over every block: its output
  /// (of `outType`) and log-sum-exp. Each step's permute is issued before
  /// the step's block, so that the transfer can overlap it.
  std::pair<Value, Value> forward(Value q, Value k, Value v,
                                  RankedTensorType outType) const {
    UnitAttr unit = causal ? g.b.getUnitAttr() : UnitAttr();
    Value qPos = positions(index(), g.type(q).getDimSize(2));
    Value out, lse;
    for (int64_t i = 0; i < n; ++i) {
      auto [nextK, nextV] = passOn(i, k, v);
      Value kPos = positions(holder(i), g.type(k).getDimSize(2));
      auto block = AttentionBlockOp::create(g.b, g.loc, outType, lseType(q), q,
                                            k, v, qPos, kPos, out, lse, unit,
                                            scale);
      out = block.getOut();
      lse = block.getLse();
      k = nextK;
      v = nextV;
    }
    return {out, lse};
  }

  /// dq, dk, dv of the ring: the key/value blocks pass as in the forward,
  /// each with the gradient accumulated for it so far; after the last step
  /// one more pass brings the gradients to the block's own device.
  SmallVector<Value> backward(Value q, Value k, Value v, Value out, Value lse,
                              Value dout, ArrayRef<RankedTensorType> types) {
    UnitAttr unit = causal ? g.b.getUnitAttr() : UnitAttr();
    Value qPos = positions(index(), g.type(q).getDimSize(2));
    Value dq, dk, dv;
    for (int64_t i = 0; i < n; ++i) {
      auto [nextK, nextV] = passOn(i, k, v);
      Value kPos = positions(holder(i), g.type(k).getDimSize(2));
      auto block = AttentionBlockGradOp::create(
          g.b, g.loc, types[0], types[1], types[2], q, k, v, out, lse, dout,
          qPos, kPos, unit, scale);
      dq = dq ? g.add(dq, block.getQueryGrad()) : block.getQueryGrad();
      dk = dk ? g.add(dk, block.getKeyGrad()) : block.getKeyGrad();
      dv = dv ? g.add(dv, block.getValueGrad()) : block.getValueGrad();
      if (n > 1) {
        dk = pass(dk);
        dv = pass(dv);
      }
      k = nextK;
      v = nextV;
    }
    return {dq, dk, dv};
  }
};

/// The forward graph.attention whose gradient `grad` is: the one reading
/// the same query, key and value with the same masking and scale.
AttentionOp forwardOf(AttentionGradOp grad) {
  for (Operation *user : grad.getQuery().getUsers()) {
    auto attention = dyn_cast<AttentionOp>(user);
    if (!attention || attention.getKey() != grad.getKey() ||
        attention.getValue() != grad.getValue() || attention.getMask() ||
        attention.getCausal() != grad.getCausal())
      continue;
    if (attention.getScaleOrDefault() == grad.getScale().convertToDouble())
      return attention;
  }
  return {};
}

FailureOr<SmallVector<Value>>
partitionRing(Builder &g, Operation *op, ArrayRef<Value> operands,
              ArrayRef<RankedTensorType> resultTypes, ArrayRef<StringRef> axes,
              MeshOp mesh, HookState &state) {
  if (op->getNumOperands() != (isa<AttentionOp>(op) ? 3u : 4u))
    return op->emitOpError("has a mask operand, which the ring form of "
                           "context parallelism does not take (causal "
                           "masking it does)");
  int64_t queries = g.type(operands[0]).getDimSize(2);
  int64_t keys = g.type(operands[1]).getDimSize(2);
  if (keys != queries)
    return op->emitOpError("holds ")
           << keys << " keys per device for its " << queries
           << " queries: ring attention passes blocks of the sequence its "
              "queries are split into";
  auto attention = dyn_cast<AttentionOp>(op);
  auto grad = dyn_cast<AttentionGradOp>(op);
  double scale = grad ? grad.getScale().convertToDouble()
                      : attention.getScaleOrDefault();
  FailureOr<bool> zigzag = zigzagLayout(op, axes, mesh);
  if (failed(zigzag))
    return failure();
  Ring ring{g,
            FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
            g.b.getStrArrayAttr(axes),
            groupSize(mesh, axes),
            attention ? attention.getCausal() : grad.getCausal(),
            g.b.getF64FloatAttr(scale),
            *zigzag};
  if (attention) {
    auto [out, lse] =
        ring.forward(operands[0], operands[1], operands[2], resultTypes[0]);
    state.ringResults[op] = {out, lse};
    return SmallVector<Value>{out};
  }
  // The forward's output and log-sum-exp, or, where the gradient has no
  // forward ring of its own (a recomputed forward), the ring again.
  Value out, lse;
  if (AttentionOp forward = forwardOf(grad)) {
    auto it = state.ringResults.find(forward);
    if (it != state.ringResults.end())
      std::tie(out, lse) = it->second;
  }
  if (!out) {
    RankedTensorType outType = g.type(operands[3]);
    std::tie(out, lse) =
        ring.forward(operands[0], operands[1], operands[2], outType);
  }
  return ring.backward(operands[0], operands[1], operands[2], out, lse,
                       operands[3], resultTypes);
}

} // namespace

FailureOr<SmallVector<Value>> partitionWithHook(
    OpBuilder &b, Operation *op, ArrayRef<Value> operands,
    ArrayRef<RankedTensorType> resultTypes, ArrayRef<StringRef> axes,
    MeshOp mesh, function_ref<RankedTensorType(Value)> localTypeOf,
    HookState &state) {
  if (isRing(op)) {
    Builder g(b, hookLoc(b, op, "sequence", axes), localTypeOf);
    return partitionRing(g, op, operands, resultTypes, axes, mesh, state);
  }
  if (isa<AttentionOp, AttentionGradOp>(op)) {
    Builder g(b, hookLoc(b, op, "queries", axes), localTypeOf);
    return partitionAttention(g, op, operands, resultTypes, axes, mesh);
  }
  Builder g(b, hookLoc(b, op, "vocabulary", axes), localTypeOf);
  Vocabulary v{FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
               b.getStrArrayAttr(axes), 0};
  // The lookup and its gradient keep the ids global and take the block's
  // offset (added to one the op already has).
  auto blockOffset = [&](ArrayRef<Value> operands) {
    Value offset = v.offset(g, g.b.getI64Type());
    return operands.size() > 2 ? g.add(operands[2], offset) : offset;
  };
  if (isa<GatherOp>(op)) {
    v.block = g.type(operands[0]).getDimSize(0);
    return SmallVector<Value>{
        GatherOp::create(b, g.loc, resultTypes[0], operands[0], operands[1],
                         blockOffset(operands), 0)
            .getResult()};
  }
  if (isa<GatherGradOp>(op)) {
    v.block = resultTypes[0].getDimSize(0);
    return SmallVector<Value>{
        GatherGradOp::create(b, g.loc, resultTypes[0], operands[0],
                             operands[1], blockOffset(operands), 0)
            .getResult()};
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
