//===- DistPartition.cpp - the global program as one device's program -----===//
//
// -dist-partition: every op runs on this device's blocks; where it reads a
// value in another layout than the value has, collectives convert it (see
// Passes.td). The layouts an op reads and writes are decided as
// -dist-propagate decided them (ShardingLayout.h), with the results'
// annotated layouts first.
//
//===----------------------------------------------------------------------===//

#include "ShardingLayout.h"
#include "TrainingStep.h"

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/ScopeExit.h"

namespace cleave {
#define GEN_PASS_DEF_DISTPARTITIONPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::dist;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// While alive, gives the ops `b` inserts the training-step annotations
/// (phase, microbatch, layer) of `from`.
class Annotator : public OpBuilder::Listener {
public:
  Annotator(OpBuilder &b, Operation *from)
      : b(b), from(from), previous(b.getListener()) {
    b.setListener(this);
  }
  ~Annotator() override { b.setListener(previous); }
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    copyStepAnnotations(from, op);
  }

private:
  OpBuilder &b;
  Operation *from;
  OpBuilder::Listener *previous;
};

/// This device's block of a global value, and the layout it is a block of.
struct Local {
  Value value;
  Layout layout;
  ShardingPriority priority = ShardingPriority::Propagated;
  /// The annotation the layout derives from (a strategy pass, a
  /// constraint), if known.
  StringAttr origin;
};

class Partitioner {
public:
  Partitioner(func::FuncOp fn, MeshOp mesh)
      : fn(fn), mesh(mesh),
        meshRef(FlatSymbolRefAttr::get(mesh.getSymNameAttr())),
        module(fn->getParentOfType<ModuleOp>()) {}

  LogicalResult run();

private:
  LogicalResult partition(Operation *op);
  LogicalResult partitionRuled(Operation *op, ShardingRuleOpInterface ruled);
  /// The block of `old` in layout `to`, converted by collectives inserted
  /// at `b`'s point; `why` names the reader in their location.
  FailureOr<Value> convert(Value old, const Layout &to, OpBuilder &b,
                           Operation *reader, const Twine &why);
  /// How a conversion that starts (or stops) splitting dimension `d` on
  /// `added` after the axes `before` treats a zigzag axis: the dimension's
  /// chunks are reordered when it is whole before and the zigzag axis is
  /// the first added (true), nothing when no zigzag axis is added (false),
  /// and any other use of a zigzag axis is an error (failure).
  FailureOr<bool> reordersChunks(ArrayRef<StringRef> before,
                                 ArrayRef<StringRef> added);
  /// `v`, whole along `d`, with its 2n chunks of the zigzag axis `axis`
  /// in the order whose n contiguous blocks are the devices' zigzag pairs
  /// (0, 2n-1, 1, 2n-2, ...), or back from that order to the sequence's.
  FailureOr<Value> reorderChunks(OpBuilder &b, Location loc, Value v,
                                 int64_t d, StringRef axis, bool toZigzag);
  /// `layout` without the zigzag axes (and the axes after them) of each
  /// dimension: how the program takes and returns values split on them.
  Layout wholeAlongZigzag(Layout layout);
  FailureOr<Layout> layoutOf(ShardingAttr sharding, Operation *at);
  /// The layout of a parameter: its sharding's, or replicated.
  FailureOr<Layout> paramLayout(StringRef name, Operation *at);

  func::FuncOp fn;
  MeshOp mesh;
  FlatSymbolRefAttr meshRef;
  ModuleOp module;
  SymbolTable symbols{module};
  llvm::DenseMap<Value, Local> locals;
  /// The local types of the arguments, which keep their global types
  /// until the end (the old ops' rules read them).
  llvm::DenseMap<Value, RankedTensorType> argLocals;
  RankedTensorType localTypeOf(Value local) const {
    auto it = argLocals.find(local);
    return it != argLocals.end() ? it->second : typeOf(local);
  }
  /// What the partition hooks share across the function's ops.
  HookState hookState;
  /// The conversions made so far: (value, target layout) -> the block.
  std::map<std::pair<void *, std::string>, std::pair<Value, Layout>>
      converted;
};

FailureOr<Layout> Partitioner::layoutOf(ShardingAttr sharding, Operation *at) {
  return Layout::get(sharding, [&]() { return at->emitOpError(); });
}

FailureOr<Layout> Partitioner::paramLayout(StringRef name, Operation *at) {
  auto param = symbols.lookup<graph::ParamOp>(name);
  if (!param)
    return at->emitOpError("reads unknown parameter @") << name;
  if (ShardingAttr s = param.getShardingAttr())
    return layoutOf(s, param);
  return Layout::replicated(cast<RankedTensorType>(param.getType()).getRank());
}

FailureOr<bool> Partitioner::reordersChunks(ArrayRef<StringRef> before,
                                            ArrayRef<StringRef> added) {
  auto zigzag = [&](StringRef a) { return mesh.isZigzag(a); };
  if (llvm::none_of(added, zigzag))
    return false;
  if (!before.empty() || !zigzag(added.front()) ||
      llvm::count_if(added, zigzag) != 1)
    return failure();
  return true;
}

FailureOr<Value> Partitioner::reorderChunks(OpBuilder &b, Location loc,
                                            Value v, int64_t d, StringRef axis,
                                            bool toZigzag) {
  RankedTensorType type = localTypeOf(v);
  int64_t n = *mesh.getAxisSize(axis), size = type.getDimSize(d);
  if (size % (2 * n) != 0)
    return emitError(loc) << "dimension " << d << " of size " << size
                          << " does not divide into the " << 2 * n
                          << " chunks of the zigzag axis \"" << axis << "\"";
  int64_t chunk = size / (2 * n);
  // order[j]: the chunk of the sequence at place j of the zigzag order.
  SmallVector<int64_t> order;
  for (int64_t r = 0; r < n; ++r)
    order.append({r, 2 * n - 1 - r});
  // from[j]: the input chunk that output chunk j takes.
  SmallVector<int64_t> from(2 * n);
  for (int64_t j = 0; j < 2 * n; ++j) {
    if (toZigzag)
      from[j] = order[j];
    else
      from[order[j]] = j;
  }
  SmallVector<int64_t> indices;
  indices.reserve(size);
  for (int64_t j = 0; j < 2 * n; ++j)
    for (int64_t i = 0; i < chunk; ++i)
      indices.push_back(from[j] * chunk + i);
  auto indexType = RankedTensorType::get({size}, b.getI64Type());
  Value table = graph::ConstantOp::create(
      b, loc, DenseElementsAttr::get(indexType, ArrayRef<int64_t>(indices)));
  return graph::GatherOp::create(b, loc, type, v, table,
                                 /*offset=*/Value(), d)
      .getResult();
}

Layout Partitioner::wholeAlongZigzag(Layout layout) {
  for (auto &axes : layout.dims)
    for (size_t i = 0; i < axes.size(); ++i)
      if (mesh.isZigzag(axes[i])) {
        axes.resize(i);
        break;
      }
  return layout;
}

/// The axes `want` splits a dimension on after those `have` splits it on,
/// when `have` is a proper prefix of `want`.
static std::optional<ArrayRef<StringRef>>
extraAxes(ArrayRef<StringRef> have, ArrayRef<StringRef> want) {
  if (want.size() <= have.size() || want.take_front(have.size()) != have)
    return std::nullopt;
  return want.drop_front(have.size());
}

FailureOr<Value> Partitioner::convert(Value old, const Layout &to,
                                      OpBuilder &b, Operation *reader,
                                      const Twine &why) {
  Location at = reader->getLoc();
  const Local &src = locals.at(old);
  if (src.layout == to)
    return src.value;
  std::string key = to.str();
  auto cached = converted.find({old.getAsOpaquePointer(), key});
  if (cached != converted.end())
    return cached->second.first;

  // The inserted ops belong to the reader's phase, microbatch and layer.
  Annotator annotator(b, reader);

  RankedTensorType global = typeOf(old);
  // A transpose of a value that is already converted to the layout asked
  // for (permuted) is that conversion transposed: the backward's transpose
  // of an expert matmul's input reuses the forward's all_to_all.
  if (auto transpose = old.getDefiningOp<graph::TransposeOp>();
      transpose && locals.count(transpose.getOperand())) {
    ArrayRef<int64_t> perm = transpose.getPerm();
    Layout in = to;
    for (auto [d, p] : llvm::enumerate(perm))
      in.dims[p] = to.dims[d];
    auto done = converted.find(
        {transpose.getOperand().getAsOpaquePointer(), in.str()});
    if (done != converted.end()) {
      Value v = graph::TransposeOp::create(b, transpose.getLoc(),
                                           to.localType(global, mesh),
                                           done->second.first,
                                           transpose.getPermAttr());
      converted[{old.getAsOpaquePointer(), key}] = {v, to};
      return v;
    }
  }
  Layout cur = src.layout;
  Value v = src.value;
  // A partial value that an earlier reader had reduced is converted from
  // that reduction (by slices or gathers), not reduced again.
  if (cur.isPartial() && !to.isPartial())
    for (auto it = converted.lower_bound({old.getAsOpaquePointer(), ""});
         it != converted.end() && it->first.first == old.getAsOpaquePointer();
         ++it)
      if (!it->second.second.isPartial()) {
        std::tie(v, cur) = it->second;
        break;
      }
  std::string cause = why.str();
  if (src.origin)
    cause += "; the value's layout from " + src.origin.str();
  auto loc = [&](StringRef what) {
    return NameLoc::get(b.getStringAttr(what + " " + cur.str() + " -> " +
                                        to.str() + " for " + cause),
                        at);
  };
  auto fail = [&]() {
    return emitError(at) << "cannot convert " << src.layout.str() << " to "
                         << to.str() << " for " << why;
  };
  // Where the split on a zigzag axis starts or stops, the chunks are
  // reordered (MeshOp's zigzag_axes) on the whole dimension.
  auto zigzagAt = [&](int64_t d, ArrayRef<StringRef> before,
                      ArrayRef<StringRef> added) -> FailureOr<bool> {
    FailureOr<bool> reorders = reordersChunks(before, added);
    if (failed(reorders))
      fail() << ": a zigzag axis splits dimension " << d
             << " only as its major axis, from or to the whole dimension";
    return reorders;
  };
  auto reorder = [&](int64_t d, StringRef axis, bool toZigzag) {
    FailureOr<Value> r = reorderChunks(
        b, loc(toZigzag ? "zigzag order" : "sequence order"), v, d, axis,
        toZigzag);
    if (succeeded(r))
      v = *r;
    return r;
  };

  // A splat constant is rebuilt at the size of the block.
  if (auto constant = v.getDefiningOp<graph::ConstantOp>())
    if (auto splat = dyn_cast<SplatElementsAttr>(constant.getValue()))
      if (!cur.isPartial() && !to.isPartial()) {
        Value rebuilt = graph::ConstantOp::create(
            b, constant.getLoc(), splat.resizeSplat(to.localType(global, mesh)));
        converted[{old.getAsOpaquePointer(), key}] = {rebuilt, to};
        return rebuilt;
      }

  bool samePartial = cur.partial == to.partial &&
                     (!cur.isPartial() || cur.partialKind == to.partialKind);
  if (cur.isPartial() && !samePartial) {
    if (to.isPartial())
      return fail();
    // Axes a dimension of `to` splits that the value is partial over are
    // reduce-scattered there; the other partial axes all-reduced first.
    // The axes `to` splits a dimension on before any partial one are sliced
    // locally before both, so that the reduction moves only the block (a
    // gradient reduced over dp and read split on tp reduces its tp block).
    auto isPartialAxis = [&](StringRef a) {
      return llvm::is_contained(cur.partial, a);
    };
    std::optional<int64_t> scatterDim;
    SmallVector<StringRef, 2> scattered;
    SmallVector<std::pair<int64_t, SmallVector<StringRef, 2>>> slices;
    for (auto [d, axes] : llvm::enumerate(to.dims)) {
      std::optional<ArrayRef<StringRef>> more = extraAxes(cur.dims[d], axes);
      if (!more)
        continue;
      ArrayRef<StringRef> extra = *more;
      size_t k = 0;
      while (k < extra.size() && !isPartialAxis(extra[k]))
        ++k;
      if (k > 0)
        slices.push_back({d, SmallVector<StringRef, 2>(extra.take_front(k))});
      if (!scatterDim && k < extra.size() &&
          llvm::all_of(extra.drop_front(k), isPartialAxis)) {
        scatterDim = d;
        scattered.assign(extra.begin() + k, extra.end());
      }
    }
    // decideLayouts keeps partial axes in the mesh's order, so values
    // partial over the same axes reduce over one group.
    SmallVector<StringRef, 2> rest;
    for (StringRef a : cur.partial)
      if (!llvm::is_contained(scattered, a))
        rest.push_back(a);
    {
      // A whole all-reduce goes right after the value's producer, not
      // before its reader: started there (-cleave-overlap-collectives), a
      // gradient's reduction runs during the rest of the backward, as
      // data-parallel training overlaps it. It runs in place, so the
      // buffer lives no longer. Every reader reuses it.
      OpBuilder::InsertionGuard guard(b);
      std::optional<Annotator> producerPhase;
      Operation *def = v.getDefiningOp();
      if (!scatterDim && !rest.empty() && def &&
          def->getBlock() == reader->getBlock()) {
        b.setInsertionPointAfter(def);
        producerPhase.emplace(b, def);
      }
      for (auto &[d, axes] : slices) {
        FailureOr<bool> zigzag = zigzagAt(d, cur.dims[d], axes);
        if (failed(zigzag) || (*zigzag && failed(reorder(d, axes[0], true))))
          return failure();
        Value index = AxisIndexOp::create(
            b, loc("axis_index"), RankedTensorType::get({}, b.getI64Type()),
            meshRef, b.getStrArrayAttr(axes));
        llvm::append_range(cur.dims[d], axes);
        v = LocalSliceOp::create(b, loc("local_slice"),
                                 cur.localType(global, mesh), v, index,
                                 b.getI64IntegerAttr(d));
      }
      if (!rest.empty())
        v = AllReduceOp::create(b, loc("all_reduce"), v.getType(), v, meshRef,
                                b.getStrArrayAttr(rest),
                                ReductionKindAttr::get(b.getContext(),
                                                       cur.partialKind));
    }
    if (scatterDim) {
      FailureOr<bool> zigzag =
          zigzagAt(*scatterDim, cur.dims[*scatterDim], scattered);
      if (failed(zigzag) ||
          (*zigzag && failed(reorder(*scatterDim, scattered[0], true))))
        return failure();
      Layout next = cur;
      next.dims[*scatterDim] = to.dims[*scatterDim];
      v = ReduceScatterOp::create(
          b, loc("reduce_scatter"), next.localType(global, mesh), v, meshRef,
          b.getStrArrayAttr(scattered),
          ReductionKindAttr::get(b.getContext(), cur.partialKind),
          b.getI64IntegerAttr(*scatterDim));
      cur.dims = next.dims;
    }
    cur.partial.clear();
    converted.try_emplace({old.getAsOpaquePointer(), cur.str()}, v, cur);
  } else if (to.isPartial() && !samePartial) {
    return fail();
  }

  // An axis that leaves one dimension for another moves there by an
  // all_to_all: the minor-most axis of a dimension that `to` splits on
  // fewer axes, when it is the next axis `to` splits another dimension on
  // (a dispatch's slots, split by token groups, become the experts of an
  // expert-parallel matmul). Each device sends (n-1)/n of its block, where
  // a gather and a slice would receive n-1 blocks.
  auto commonPrefix = [](ArrayRef<StringRef> x, ArrayRef<StringRef> y) {
    size_t k = 0;
    while (k < x.size() && k < y.size() && x[k] == y[k])
      ++k;
    return k;
  };
  auto nextAxisOf = [&](int64_t d) -> std::optional<StringRef> {
    if (std::optional<ArrayRef<StringRef>> more =
            extraAxes(cur.dims[d], to.dims[d]))
      return more->front();
    return std::nullopt;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int64_t i = 0, e = cur.dims.size(); i < e && !moved; ++i) {
      ArrayRef<StringRef> have = cur.dims[i];
      if (commonPrefix(have, to.dims[i]) == have.size())
        continue;
      StringRef axis = have.back();
      for (int64_t j = 0; j < e && !moved; ++j) {
        if (j == i || nextAxisOf(j) != axis)
          continue;
        Layout next = cur;
        next.dims[i].pop_back();
        next.dims[j].push_back(axis);
        if (global.getDimSize(j) % groupSize(mesh, next.dims[j]) != 0)
          continue;
        if (mesh.isZigzag(axis))
          return fail() << ": the zigzag axis \"" << axis
                        << "\" does not move between dimensions";
        v = AllToAllOp::create(b, loc("all_to_all"),
                               next.localType(global, mesh), v, meshRef,
                               b.getStrArrayAttr({axis}),
                               b.getI64IntegerAttr(j), b.getI64IntegerAttr(i));
        cur = next;
        moved = true;
      }
    }
  }

  // Axes a dimension is split on that `to` does not split it on (after
  // their common major axes) are gathered...
  for (int64_t d = 0, e = cur.dims.size(); d < e; ++d) {
    ArrayRef<StringRef> have = cur.dims[d], want = to.dims[d];
    size_t common = commonPrefix(have, want);
    if (common == have.size())
      continue;
    SmallVector<StringRef, 2> extra(have.drop_front(common));
    FailureOr<bool> zigzag = zigzagAt(d, have.take_front(common), extra);
    if (failed(zigzag))
      return failure();
    Layout next = cur;
    next.dims[d].resize(common);
    v = AllGatherOp::create(b, loc("all_gather"), next.localType(global, mesh),
                            v, meshRef, b.getStrArrayAttr(extra),
                            b.getI64IntegerAttr(d));
    cur = next;
    if (*zigzag && failed(reorder(d, extra[0], false)))
      return failure();
  }
  // ...and the axes `to` splits it on in addition are sliced locally.
  for (int64_t d = 0, e = cur.dims.size(); d < e; ++d) {
    ArrayRef<StringRef> want = to.dims[d];
    if (want.size() == cur.dims[d].size())
      continue;
    SmallVector<StringRef, 2> extra(want.drop_front(cur.dims[d].size()));
    FailureOr<bool> zigzag = zigzagAt(d, cur.dims[d], extra);
    if (failed(zigzag) || (*zigzag && failed(reorder(d, extra[0], true))))
      return failure();
    Value index = AxisIndexOp::create(
        b, loc("axis_index"), RankedTensorType::get({}, b.getI64Type()),
        meshRef, b.getStrArrayAttr(extra));
    cur.dims[d] = to.dims[d];
    v = LocalSliceOp::create(b, loc("local_slice"), cur.localType(global, mesh),
                             v, index, b.getI64IntegerAttr(d));
  }
  if (cur != to)
    return fail();
  converted[{old.getAsOpaquePointer(), key}] = {v, to};
  return v;
}

LogicalResult Partitioner::partitionRuled(Operation *op,
                                          ShardingRuleOpInterface ruled) {
  ShardingRule rule = ruled.getShardingRule();
  SmallVector<KnownLayout> operands, results;
  for (Value v : op->getOperands()) {
    const Local &l = locals.at(v);
    operands.push_back({&l.layout, l.priority});
  }
  // The annotated result layouts lead: they are what propagation decided.
  std::vector<Layout> annotated;
  annotated.reserve(op->getNumResults());
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    ShardingAttr s = getResultSharding(op, i);
    if (!s) {
      results.push_back({});
      continue;
    }
    FailureOr<Layout> l = layoutOf(s, op);
    if (failed(l))
      return failure();
    annotated.push_back(*l);
    results.push_back({&annotated.back(), ShardingPriority::User});
  }
  OpLayouts decided = decideLayouts(op, rule, operands, results, mesh);
  auto originOf = [&](int64_t tensor) -> StringAttr {
    if (tensor < 0)
      return {};
    if (tensor < op->getNumOperands())
      return locals.at(op->getOperand(tensor)).origin;
    ShardingAttr s = getResultSharding(op, tensor - op->getNumOperands());
    return s ? s.getOrigin() : StringAttr();
  };

  OpBuilder b(op);
  SmallVector<Value> newOperands;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    // Who split the factors this operand is read along.
    StringAttr readerOrigin;
    for (const DimFactors &dim : rule.getOperands()[i])
      if (!readerOrigin && !dim.empty())
        readerOrigin = originOf(decided.factorSource[dim.front()]);
    std::string why = ("operand #" + Twine(i) + " of " +
                       op->getName().getStringRef())
                          .str();
    if (readerOrigin && readerOrigin != locals.at(v).origin)
      why += " (read as " + readerOrigin.str() + " splits it)";
    FailureOr<Value> local = convert(v, decided.operands[i], b, op, why);
    if (failed(local))
      return failure();
    newOperands.push_back(*local);
  }
  SmallVector<RankedTensorType> types;
  for (auto [i, r] : llvm::enumerate(op->getResults()))
    types.push_back(decided.results[i].localType(typeOf(r), mesh));

  // An op whose hook factor is split computes through its hook; any other
  // runs as it is on its blocks.
  SmallVector<Value> values;
  int64_t hooked = hookFactor(op, rule);
  if (hooked >= 0 && !decided.factorAxes[hooked].empty()) {
    Annotator annotator(b, op);
    FailureOr<SmallVector<Value>> hookResults = partitionWithHook(
        b, op, newOperands, types, decided.factorAxes[hooked], mesh,
        [&](Value v) { return localTypeOf(v); }, hookState);
    if (failed(hookResults))
      return failure();
    values = std::move(*hookResults);
  } else {
    Operation *clone = b.clone(*op);
    clone->setOperands(newOperands);
    clone->removeAttr(DistDialect::getShardingAttrName());
    for (auto [r, type] : llvm::zip(clone->getResults(), types))
      r.setType(type);
    // A slice keeps the dimensions it shares with its input whole: at the
    // block's size.
    if (auto slice = dyn_cast<graph::SliceOp>(clone)) {
      SmallVector<int64_t> limit(slice.getLimit());
      for (int64_t d = 0, e = limit.size(); d < e; ++d)
        if (!decided.results[0].dims[d].empty())
          limit[d] = slice.getType().getDimSize(d);
      slice.setLimit(limit);
    }
    // A routing op's groups split with its tokens (its rule keeps each
    // group whole): the block routes its own groups, of the same size.
    auto localGroups = [&](Value tokens, Value localTokens, int64_t groups) {
      int64_t groupTokens = typeOf(tokens).getDimSize(0) / groups;
      return localTypeOf(localTokens).getDimSize(0) / groupTokens;
    };
    if (auto dispatch = dyn_cast<graph::MoeDispatchOp>(clone))
      dispatch.setGroups(localGroups(op->getOperand(0), newOperands[0],
                                     dispatch.getGroups()));
    if (auto combine = dyn_cast<graph::MoeCombineOp>(clone))
      combine.setGroups(localGroups(op->getOperand(1), newOperands[1],
                                    combine.getGroups()));
    llvm::append_range(values, clone->getResults());
  }
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    SmallVector<StringAttr> origins;
    for (int64_t t : decided.sourcesOfResult(rule, i))
      origins.push_back(originOf(t));
    locals[r] = {values[i], decided.results[i], ShardingPriority::Propagated,
                 joinOrigins(op->getContext(), origins)};
  }
  return success();
}

LogicalResult Partitioner::partition(Operation *op) {
  OpBuilder b(op);
  if (auto read = dyn_cast<graph::ReadParamOp>(op)) {
    FailureOr<Layout> layout = paramLayout(read.getParam(), op);
    if (failed(layout))
      return failure();
    auto clone = cast<graph::ReadParamOp>(b.clone(*op));
    clone->removeAttr(DistDialect::getShardingAttrName());
    clone.getResult().setType(layout->localType(read.getType(), mesh));
    auto param = symbols.lookup<graph::ParamOp>(read.getParam());
    StringAttr origin = param && param.getShardingAttr()
                            ? param.getShardingAttr().getOrigin()
                            : StringAttr();
    locals[read.getResult()] = {clone.getResult(), *layout,
                                ShardingPriority::User, origin};
    return success();
  }
  if (auto assign = dyn_cast<graph::AssignOp>(op)) {
    FailureOr<Layout> layout = paramLayout(assign.getParam(), op);
    if (failed(layout))
      return failure();
    FailureOr<Value> v = convert(assign.getValue(), *layout, b, op,
                                 "graph.assign @" + assign.getParam());
    if (failed(v))
      return failure();
    Operation *clone = b.clone(*op);
    clone->setOperand(0, *v);
    return success();
  }
  if (auto constant = dyn_cast<graph::ConstantOp>(op)) {
    // Replicated; readers convert (a splat is rebuilt at their size).
    Operation *clone = b.clone(*op);
    clone->removeAttr(DistDialect::getShardingAttrName());
    locals[constant.getResult()] = {
        clone->getResult(0),
        Layout::replicated(typeOf(constant.getResult()).getRank()),
        ShardingPriority::Propagated};
    return success();
  }
  if (auto shard = dyn_cast<ShardOp>(op)) {
    FailureOr<Layout> layout = layoutOf(shard.getSharding(), op);
    if (failed(layout))
      return failure();
    *layout = constrain(shard.getSharding(), *layout,
                        locals.at(shard.getInput()).layout);
    FailureOr<Value> v =
        convert(shard.getInput(), *layout, b, op, "dist.shard");
    if (failed(v))
      return failure();
    locals[shard.getResult()] = {*v, *layout, ShardingPriority::User,
                                 shard.getSharding().getOrigin()};
    return success();
  }
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    SmallVector<Value> values;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      Layout layout = Layout::replicated(typeOf(v).getRank());
      if (auto s = fn.getResultAttrOfType<ShardingAttr>(
              i, DistDialect::getShardingAttrName())) {
        FailureOr<Layout> l = layoutOf(s, fn);
        if (failed(l))
          return failure();
        layout = *l;
      }
      if (layout.isPartial())
        return fn.emitOpError("result #")
               << i << " cannot be returned partial; a device returns its "
               << "block of the global value";
      if (Layout whole = wholeAlongZigzag(layout); whole != layout) {
        layout = whole;
        auto s = fn.getResultAttrOfType<ShardingAttr>(
            i, DistDialect::getShardingAttrName());
        fn.setResultAttr(i, DistDialect::getShardingAttrName(),
                         layout.toAttr(meshRef, s.getPriority(),
                                       s.getOrigin()));
      }
      FailureOr<Value> local = convert(v, layout, b, op,
                                       "result #" + Twine(i) + " of @" +
                                           fn.getSymName());
      if (failed(local))
        return failure();
      values.push_back(*local);
    }
    ret->setOperands(values);
    return success();
  }
  if (isa<AllReduceOp, AllReduceBucketOp, AllGatherOp, ReduceScatterOp,
          AllToAllOp, CollectivePermuteOp, BroadcastOp, SendOp, RecvOp,
          WaitOp, AxisIndexOp, LocalSliceOp, ManualComputationOp>(op))
    return op->emitOpError("is already per-device code; -dist-partition "
                           "takes the global program");
  if (op->getNumRegions() != 0)
    return op->emitOpError("has regions, which -dist-partition does not "
                           "partition");
  if (auto ruled = dyn_cast<ShardingRuleOpInterface>(op))
    return partitionRuled(op, ruled);
  return op->emitOpError("has no sharding rule, so -dist-partition cannot "
                         "run it on blocks");
}

LogicalResult Partitioner::run() {
  if (!fn.getBody().hasOneBlock())
    return fn.emitOpError("-dist-partition needs a function of one block");
  Block &body = fn.getBody().front();

  SmallVector<Type> inputs;
  for (BlockArgument arg : body.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return fn.emitOpError("argument #")
             << arg.getArgNumber() << " is not a ranked tensor";
    Layout layout = Layout::replicated(type.getRank());
    StringAttr origin;
    if (auto s = fn.getArgAttrOfType<ShardingAttr>(
            arg.getArgNumber(), DistDialect::getShardingAttrName())) {
      FailureOr<Layout> l = layoutOf(s, fn);
      if (failed(l))
        return failure();
      if (l->isPartial())
        return fn.emitOpError("argument #")
               << arg.getArgNumber() << " cannot be partial";
      layout = *l;
      origin = s.getOrigin();
      // The runtime passes blocks, not zigzag pairs: an argument split on
      // a zigzag axis comes whole along it and its readers take their
      // chunks.
      if (Layout whole = wholeAlongZigzag(layout); whole != layout) {
        layout = whole;
        fn.setArgAttr(arg.getArgNumber(), DistDialect::getShardingAttrName(),
                      layout.toAttr(meshRef, s.getPriority(), origin));
      }
    }
    RankedTensorType local = layout.localType(type, mesh);
    locals[arg] = {arg, layout, ShardingPriority::User, origin};
    argLocals[arg] = local;
    inputs.push_back(local);
  }
  // The arguments take their local types once every op has been converted
  // (the rules of the old ops read their global types).
  SmallVector<Operation *> old;
  for (Operation &op : body)
    old.push_back(&op);
  for (Operation *op : old)
    if (failed(partition(op)))
      return failure();
  for (Operation *op : llvm::reverse(old))
    if (!isa<func::ReturnOp>(op)) {
      op->dropAllUses();
      op->erase();
    }
  for (auto [arg, type] : llvm::zip(body.getArguments(), inputs))
    arg.setType(type);
  fn.setType(FunctionType::get(fn.getContext(), inputs,
                               body.getTerminator()->getOperandTypes()));
  fn->setAttr(DistDialect::getPartitionedAttrName(),
              UnitAttr::get(fn.getContext()));
  return success();
}

struct DistPartitionPass
    : public cleave::impl::DistPartitionPassBase<DistPartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<MeshOp> mesh = getTheMesh(module, "-dist-partition");
    if (failed(mesh))
      return signalPassFailure();
    for (func::FuncOp fn : globalFunctions(module))
      if (failed(Partitioner(fn, *mesh).run()))
        return signalPassFailure();
  }
};

} // namespace
