//===- AddLoss.cpp - the training step's forward and loss ---------------===//
//
// -cleave-add-loss, the first of the passes that build the training step:
// `@train_step` computes the forward of each microbatch and the loss on its
// first output, and returns the mean loss. It records the loss for the next
// passes (`cleave.loss` on the function, `cleave.microbatch_loss` on each
// microbatch's loss op), and tags every op with its phase, microbatch and
// layer.
//
//===----------------------------------------------------------------------===//

#include "TrainingStep.h"

#include "cleave/Transforms/GraphBuilders.h"

#include "mlir/IR/IRMapping.h"

#include <cmath>

namespace cleave {
#define GEN_PASS_DEF_ADDLOSSPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The number of positions of `labels` a cross-entropy averages over, as
/// an f32 scalar: all of them, or those not equal to `ignored`. With every
/// position ignored the loss is 0 / 0, NaN, and the gradient zero, as in
/// PyTorch (the sum's gradient kernel writes zeros for ignored positions
/// whatever the scale).
Value countPositions(OpBuilder &b, Location loc, Value labels,
                     IntegerAttr ignored) {
  Type f32 = b.getF32Type();
  auto type = typeOf(labels);
  if (!ignored)
    return scalarConstant(b, loc, f32, double(type.getNumElements()));
  Value ignore = ConstantOp::create(
      b, loc, RankedTensorType::get({}, type.getElementType()),
      DenseElementsAttr::get(
          RankedTensorType::get({}, type.getElementType()),
          b.getIntegerAttr(type.getElementType(), ignored.getInt())));
  Value kept = CompareOp::create(
      b, loc, type.clone(b.getI1Type()),
      CompareDirectionAttr::get(b.getContext(), CompareDirection::NE), labels,
      ignore);
  return sumAll(b, loc, CastOp::create(b, loc, type.clone(f32), kept));
}

/// The load-balancing loss of one routed mixture, from its router's logits
/// [T, E] and the experts it chose [T, k]: E * sum_e f_e * P_e, with f_e the
/// share of the T * k assignments that went to expert e and P_e the mean
/// router probability of e (Switch Transformer's, Fedus et al. 2021, eq. 4;
/// top-k assignments counted as Megatron-Core does). Minimal (1) when both
/// are uniform. Its gradient reaches the router through P only: f counts.
Value loadBalancingLoss(OpBuilder &b, Location loc, RouterTopKOp router) {
  Type f32 = b.getF32Type();
  RankedTensorType logitsType = typeOf(router.getLogits());
  const int64_t tokens = logitsType.getDimSize(0);
  const int64_t experts = logitsType.getDimSize(1);
  const int64_t k = router.getK();
  Value logits = router.getLogits();
  if (logitsType.getElementType() != f32)
    logits = CastOp::create(b, loc, logitsType.clone(f32), logits);
  auto vecType = RankedTensorType::get({experts}, f32);
  Value probs =
      SoftmaxOp::create(b, loc, logitsType.clone(f32), logits, /*dim=*/1);
  auto sum = ReductionKindAttr::get(b.getContext(), ReductionKind::Sum);
  Value probSums = ReduceOp::create(b, loc, vecType, sum, probs,
                                    b.getDenseI64ArrayAttr({0}), UnitAttr());
  // The assignments per expert: a one-hot [T, k, E] of the chosen ids.
  Type i64 = b.getI64Type();
  Value chosen = ReshapeOp::create(
      b, loc, RankedTensorType::get({tokens, k, 1}, i64), router.getExperts());
  SmallVector<int64_t> ids(experts);
  for (int64_t e = 0; e < experts; ++e)
    ids[e] = e;
  auto idsType = RankedTensorType::get({experts}, i64);
  Value arange = ConstantOp::create(
      b, loc, DenseElementsAttr::get(idsType, ArrayRef<int64_t>(ids)));
  auto hotType = RankedTensorType::get({tokens, k, experts}, b.getI1Type());
  Value hot = CompareOp::create(
      b, loc, hotType,
      CompareDirectionAttr::get(b.getContext(), CompareDirection::EQ), chosen,
      arange);
  Value counts = ReduceOp::create(
      b, loc, vecType, sum,
      CastOp::create(b, loc, hotType.clone(f32), hot),
      b.getDenseI64ArrayAttr({0, 1}), UnitAttr());
  Value dot = sumAll(b, loc, MulOp::create(b, loc, vecType, probSums, counts));
  // E * sum_e (counts_e / (T k)) * (probSums_e / T).
  double scale = double(experts) / (double(k) * double(tokens) * double(tokens));
  return MulOp::create(b, loc, RankedTensorType::get({}, f32), dot,
                       scalarConstant(b, loc, f32, scale));
}

/// The layer of each forward op: the one its ONNX node path or the
/// parameter it reads names, else the highest of its operands' (ops after
/// the last layer, the final norm and the head, go with it; ops before the
/// first, the embeddings, have none).
DenseMap<Operation *, std::optional<int64_t>>
forwardLayers(func::FuncOp forward) {
  DenseMap<Operation *, std::optional<int64_t>> layers;
  for (Operation &op : forward.getBody().front()) {
    std::optional<int64_t> layer = layerInLoc(op.getLoc());
    if (auto read = dyn_cast<ReadParamOp>(op); read && !layer)
      layer = layerInName(read.getParam());
    if (!layer)
      for (Value operand : op.getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (std::optional<int64_t> l = layers.lookup(def))
            layer = layer ? std::max(*layer, *l) : *l;
    layers[&op] = layer;
  }
  return layers;
}

LogicalResult checkOptions(ModuleOp module, const AddLossPassOptions &options) {
  if (options.accumulate < 1)
    return module.emitError("accumulate must be >= 1, got ")
           << static_cast<int64_t>(options.accumulate);
  if (options.moeAuxLoss < 0 || !std::isfinite(options.moeAuxLoss))
    return module.emitError("moe-aux-loss must be a finite number >= 0, got ")
           << options.moeAuxLoss;
  if (!options.ignoreIndex.empty()) {
    int64_t value;
    if (StringRef(options.ignoreIndex).getAsInteger(10, value))
      return module.emitError("ignore-index must be an integer, got '")
             << options.ignoreIndex << "'";
    if (options.loss != LossKind::CrossEntropy)
      return module.emitError("ignore-index applies to the cross-entropy "
                              "loss");
  }
  return success();
}

struct AddLossPass : cleave::impl::AddLossPassBase<AddLossPass> {
  using AddLossPassBase::AddLossPassBase;

  void runOnOperation() override {
    AddLossPassOptions options;
    options.loss = loss;
    options.ignoreIndex = ignoreIndex;
    options.accumulate = accumulate;
    options.moeAuxLoss = moeAuxLoss;
    if (failed(buildLossStep(getOperation(), options, "-cleave-add-loss")))
      signalPassFailure();
  }
};

} // namespace

LogicalResult cleave::buildLossStep(ModuleOp module,
                                    const AddLossPassOptions &options,
                                    StringRef pass) {
  if (failed(checkOptions(module, options)))
    return failure();
  const LossKind loss = options.loss;
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || !forward.getBody().hasOneBlock())
    return module.emitError() << pass << " needs a single-block @forward";
  FunctionType fnType = forward.getFunctionType();
  if (fnType.getNumResults() == 0)
    return forward.emitOpError("has no results: the ")
           << stringifyLossKind(options.loss)
           << " loss is computed from its first result";
  auto outType = dyn_cast<RankedTensorType>(fnType.getResult(0));
  if (!outType || !isa<FloatType>(outType.getElementType()) ||
      (loss == LossKind::CrossEntropy && outType.getRank() < 1))
    return forward.emitOpError("first result must be a float tensor")
           << (loss == LossKind::CrossEntropy ? " of logits [..., classes]"
                                              : "")
           << " for the " << stringifyLossKind(loss) << " loss";
  OpBuilder b(module.getContext());
  StepTagger tagger(module.getContext());
  b.setListener(&tagger);
  DenseMap<Operation *, std::optional<int64_t>> layers = forwardLayers(forward);
  Location loc = forward.getLoc();
  RankedTensorType targetType =
      loss == LossKind::Mse
          ? outType
          : RankedTensorType::get(outType.getShape().drop_back(),
                                  b.getI64Type());

  // With K microbatches every input (and the target) holds K batches along
  // a new leading dimension, [K, B, ...]: the batch dimension stays its
  // own, so data parallelism can shard it (a slice of a [K * B] dimension
  // would keep it whole).
  const int64_t k = options.accumulate;
  auto stacked = [&](Type t) -> FailureOr<Type> {
    auto type = cast<RankedTensorType>(t);
    if (k == 1)
      return t;
    if (type.getRank() == 0)
      return failure();
    SmallVector<int64_t> shape = {k};
    llvm::append_range(shape, type.getShape());
    return Type(type.clone(shape));
  };
  SmallVector<Type> argTypes;
  for (Type t : llvm::concat<Type>(llvm::to_vector(fnType.getInputs()),
                                   SmallVector<Type>{targetType})) {
    FailureOr<Type> s = stacked(t);
    if (failed(s))
      return forward.emitOpError("accumulate=")
             << k << " needs a batch dimension on every input and on the "
             << "loss's target, got " << t;
    argTypes.push_back(*s);
  }

  b.setInsertionPointAfter(forward);
  auto step = func::FuncOp::create(b, loc, "train_step",
                                   b.getFunctionType(argTypes, {}));
  Block *entry = step.addEntryBlock();
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (DictionaryAttr attrs = forward.getArgAttrDict(i))
      step.setArgAttrs(i, attrs);
  step.setArgAttr(
      forward.getNumArguments(), "onnx.name",
      b.getStringAttr(loss == LossKind::Mse ? "targets" : "labels"));
  b.setInsertionPointToStart(entry);

  IntegerAttr ignored;
  if (!options.ignoreIndex.empty()) {
    int64_t value = 0;
    StringRef(options.ignoreIndex).getAsInteger(10, value);
    ignored = b.getI64IntegerAttr(value);
  }

  // The forward and the loss of each microbatch, and their sum. The loss's
  // type: cross-entropy's is f32 whatever the logits' type.
  Type f32 = loss == LossKind::Mse ? outType.getElementType() : b.getF32Type();
  auto scalarType = RankedTensorType::get({}, f32);
  Value totalLoss;
  for (int64_t m = 0; m < k; ++m) {
    tagger.phase = Phase::Forward;
    tagger.microbatch = m;
    tagger.layer = std::nullopt;
    IRMapping map;
    for (auto [i, arg] : llvm::enumerate(entry->getArguments())) {
      Value v = arg;
      if (k > 1) {
        // Microbatch m: row m of the [K, B, ...] input, as [B, ...].
        v = buildLeadingEntry(b, loc, arg, m);
      }
      if (i < forward.getNumArguments())
        map.map(forward.getArgument(i), v);
      else
        map.map(arg, v); // the target of this microbatch
    }
    Value target = map.lookup(entry->getArguments().back());
    Value output;
    SmallVector<std::pair<RouterTopKOp, std::optional<int64_t>>> routers;
    for (Operation &op : forward.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        output = map.lookup(ret.getOperand(0));
        break;
      }
      tagger.layer = layers.lookup(&op);
      Operation *clone = b.clone(op, map);
      if (auto router = dyn_cast<RouterTopKOp>(clone))
        routers.push_back({router, tagger.layer});
    }
    if (options.moeAuxLoss > 0 && routers.empty())
      return forward.emitOpError("has no routed mixture of experts "
                                 "(graph.router_topk) for the "
                                 "load-balancing loss (moe-aux-loss); a "
                                 "mixture kept dense (--moe-dense) has none");
    // Logits the forward computed in 16 bits and cast to f32 for its
    // signature (-cleave-mixed-precision) go to the cross-entropy as they
    // are: it reads them into f32 anyway, and the f32 logits and their f32
    // gradient are never stored.
    if (auto widen = output.getDefiningOp<CastOp>())
      if (loss == LossKind::CrossEntropy &&
          isa<FloatType>(typeOf(widen.getOperand()).getElementType()))
        output = widen.getOperand();
    tagger.layer =
        output.getDefiningOp() ? layerOf(output.getDefiningOp()) : std::nullopt;
    Operation *lossOp;
    if (loss == LossKind::Mse) {
      lossOp = MseOp::create(b, loc, scalarType, output, target);
    } else {
      // The mean as an explicit sum over a count of the whole batch, so
      // that sharding the batch leaves sums and counts that add up (a
      // kernel's own mean would divide by the shard's count).
      auto sum = CrossEntropyOp::create(
          b, loc, scalarType, output, target, ignored,
          ReductionKindAttr::get(b.getContext(), ReductionKind::Sum));
      lossOp = DivOp::create(b, loc, scalarType, sum.getResult(),
                             countPositions(b, loc, target, ignored));
    }
    // The load-balancing loss of each routed mixture, in the mixture's
    // layer, weighted by the coefficient and added to the task's loss.
    if (options.moeAuxLoss > 0) {
      Value aux;
      for (auto [router, layer] : routers) {
        tagger.layer = layer;
        Value l = loadBalancingLoss(b, router.getLoc(), router);
        aux = aux ? AddOp::create(b, loc, scalarType, aux, l).getResult() : l;
      }
      tagger.layer = std::nullopt;
      aux = MulOp::create(b, loc, scalarType, aux,
                          scalarConstant(b, loc, f32, options.moeAuxLoss));
      lossOp = AddOp::create(b, loc, scalarType, lossOp->getResult(0), aux);
    }
    // Where -cleave-differentiate starts this microbatch's backward pass.
    lossOp->setAttr(kMicrobatchLossAttr, b.getUnitAttr());
    Value microLoss = lossOp->getResult(0);
    totalLoss = totalLoss
                    ? AddOp::create(b, loc, scalarType, totalLoss, microLoss)
                          .getResult()
                    : microLoss;
  }
  tagger.phase = Phase::Forward;
  tagger.microbatch = std::nullopt;
  tagger.layer = std::nullopt;
  if (k > 1)
    totalLoss = MulOp::create(b, loc, scalarType, totalLoss,
                              scalarConstant(b, loc, f32, 1.0 / double(k)));

  func::ReturnOp::create(b, loc, totalLoss);
  step.setType(b.getFunctionType(argTypes, {scalarType}));
  step.setResultAttr(0, "onnx.name", b.getStringAttr("loss"));
  // The loss's part of the training configuration, for the next passes.
  NamedAttrList config;
  config.append("loss", b.getStringAttr(stringifyLossKind(loss)));
  if (ignored)
    config.append("ignore_index", ignored);
  config.append("accumulate", b.getI64IntegerAttr(k));
  if (options.moeAuxLoss > 0)
    config.append("moe_aux_loss", b.getF64FloatAttr(options.moeAuxLoss));
  step->setAttr(kLossAttr, config.getDictionary(b.getContext()));
  forward.erase();
  // Forward values off the loss's path (other outputs) are dead.
  eraseDeadOps(step);
  return success();
}
