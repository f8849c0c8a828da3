//===- Autodiff.cpp - training step from the forward function -----------===//
//
// Builds `@train_step` from `@forward`: the forward computation, a loss on
// its first output, the reverse-mode backward pass and, when asked, the
// optimizer update of every trainable parameter (values that graph.assign
// stores). The rules live
// with the ops (GradientOpInterface, GraphGradients.cpp); this pass walks
// the ops backwards, sums the gradients of values used several times (tied
// weights, residuals) and only differentiates values that depend on a
// trainable parameter.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/GraphBuilders.h"
#include "cleave/Transforms/MemoryPlan.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#include <cmath>
#include <limits>

namespace cleave {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

Value scalarConstant(OpBuilder &b, Location loc, Type elem, double v) {
  auto type = RankedTensorType::get({}, elem);
  Attribute value = isa<FloatType>(elem)
                        ? Attribute(b.getFloatAttr(elem, v))
                        : Attribute(b.getIntegerAttr(elem, int64_t(v)));
  return ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, value));
}

/// The sum of all elements of `v` as a scalar of its element type.
Value sumAll(OpBuilder &b, Location loc, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() == 0)
    return v;
  SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
  return ReduceOp::create(
             b, loc, RankedTensorType::get({}, type.getElementType()),
             ReductionKindAttr::get(b.getContext(), ReductionKind::Sum), v,
             b.getDenseI64ArrayAttr(all), UnitAttr())
      .getResult();
}

/// The number of positions of `labels` a cross-entropy averages over, as
/// an f32 scalar: all of them, or those not equal to `ignored`, at least 1
/// (every position ignored gives a loss of 0, not 0 / 0).
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
  Value count = sumAll(b, loc, CastOp::create(b, loc, type.clone(f32), kept));
  return MaxOp::create(b, loc, RankedTensorType::get({}, f32), count,
                       scalarConstant(b, loc, f32, 1.0));
}

/// The layer index a name speaks of: `blocks.3.attn.qkv.weight`,
/// `/blocks.3/attn/MatMul`, `layers.3`, `h.3` (the PyTorch and ONNX
/// spellings of a stack of layers).
std::optional<int64_t> layerInName(StringRef name) {
  static const char *kStacks[] = {"blocks", "layers", "layer", "block", "h"};
  for (size_t pos = 0; pos < name.size(); ++pos) {
    if (pos > 0 && !StringRef("/._").contains(name[pos - 1]))
      continue;
    for (StringRef stack : kStacks) {
      StringRef rest = name.drop_front(pos);
      if (!rest.consume_front(stack) || rest.empty() ||
          !StringRef("._").contains(rest.front()))
        continue;
      rest = rest.drop_front();
      size_t digits = rest.find_first_not_of("0123456789");
      StringRef number = rest.take_front(digits);
      rest = rest.drop_front(number.size());
      int64_t n;
      if (!number.empty() && !number.getAsInteger(10, n) &&
          (rest.empty() || StringRef("/._").contains(rest.front())))
        return n;
    }
  }
  return std::nullopt;
}

/// The layer a location names (the ONNX node path of an imported op).
std::optional<int64_t> layerInLoc(Location loc) {
  std::optional<int64_t> found;
  loc->walk([&](Location l) {
    if (auto named = dyn_cast<NameLoc>(l))
      if ((found = layerInName(named.getName().getValue())))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return found;
}

/// Tags every op the pass inserts into the training step with its phase,
/// microbatch and layer (GraphDialect's training-step annotations), so that
/// stage assignment and recomputation can find them.
class StepTagger : public OpBuilder::Listener {
public:
  explicit StepTagger(MLIRContext *ctx) : ctx(ctx) {}

  Phase phase = Phase::Forward;
  std::optional<int64_t> microbatch;
  std::optional<int64_t> layer;

  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint) override {
    if (!op->getParentOfType<func::FuncOp>() || isa<func::ReturnOp>(op))
      return;
    Builder b(ctx);
    op->setAttr(GraphDialect::getPhaseAttrName(), PhaseAttr::get(ctx, phase));
    auto set = [&](StringRef name, std::optional<int64_t> v) {
      if (v)
        op->setAttr(name, b.getI64IntegerAttr(*v));
      else
        op->removeAttr(name);
    };
    set(GraphDialect::getMicrobatchAttrName(), microbatch);
    set(GraphDialect::getLayerAttrName(), layer);
  }

private:
  MLIRContext *ctx;
};

/// The layer of an op: its own attribute once tagged.
std::optional<int64_t> layerOf(Operation *op) {
  if (auto attr =
          op->getAttrOfType<IntegerAttr>(GraphDialect::getLayerAttrName()))
    return attr.getInt();
  return std::nullopt;
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

/// The reverse pass over one clone of the forward ops.
class Differentiator {
public:
  Differentiator(OpBuilder &b, StepTagger &tagger, int64_t &numRules)
      : b(b), tagger(tagger), numRules(numRules) {}

  /// Values that depend on a trainable parameter, in forward order.
  void markActive(ArrayRef<Operation *> ops, const DenseSet<StringRef> &trained) {
    for (Operation *op : ops) {
      bool on = false;
      if (auto read = dyn_cast<ReadParamOp>(op))
        on = trained.contains(read.getParam());
      for (Value operand : op->getOperands())
        on |= active.contains(operand);
      if (on)
        for (Value r : op->getResults())
          if (isa<FloatType>(typeOf(r).getElementType()))
            active.insert(r);
    }
  }

  Value gradOf(Value v) { return grads.lookup(v); }

  void accumulate(Value v, Value g) {
    if (!g || !active.contains(v))
      return;
    Value &slot = grads[v];
    slot = slot ? AddOp::create(b, g.getLoc(), slot.getType(), slot, g)
                      .getResult()
                : g;
  }

  LogicalResult backward(Operation *op) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      resultGrads.push_back(gradOf(r));
      any |= static_cast<bool>(resultGrads.back());
    }
    if (!any || llvm::none_of(op->getOperands(), [&](Value v) {
          return active.contains(v);
        }))
      return success();
    auto rule = dyn_cast<GradientOpInterface>(op);
    if (!rule)
      return op->emitOpError("has no gradient rule");
    // The gradient of a layer's op belongs to that layer.
    tagger.layer = layerOf(op);
    SmallVector<Value> operandGrads(op->getNumOperands());
    if (failed(rule.buildGradients(b, resultGrads, operandGrads)))
      return failure();
    ++numRules;
    for (auto [i, operand, g] :
         llvm::enumerate(op->getOperands(), operandGrads)) {
      if (!g && active.contains(operand))
        return op->emitOpError("has no gradient for operand #")
               << i << ", which depends on a trainable parameter";
      if (g && g.getType() != operand.getType())
        return op->emitOpError("gradient rule produced ")
               << g.getType() << " for an operand of type "
               << operand.getType();
      accumulate(operand, g);
    }
    return success();
  }

private:
  OpBuilder &b;
  StepTagger &tagger;
  int64_t &numRules;
  DenseSet<Value> active;
  DenseMap<Value, Value> grads;
};

struct AutodiffPass : cleave::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override;

private:
  LogicalResult checkOptions(ModuleOp module);
  /// The loss and optimizer, as the cleave.training_config dictionary
  /// (verified by the cleave dialect, written as JSON by the lowering).
  DictionaryAttr trainingConfig(Builder &b, double weightDecay,
                                StringRef precision) const;
  /// Adds an optimizer state parameter of `role` after `after`,
  /// zero-initialized unless `initial` is given.
  FailureOr<ParamOp> addState(OpBuilder &b, ModuleOp module, Operation *after,
                              StringRef name, RankedTensorType type,
                              cleave_param_role role, Attribute initial = {});
  /// Dynamic loss scaling after the updates: the scale halves after a step
  /// with non-finite gradients (`finite` false) and doubles after
  /// lossScaleGrowthInterval finite steps in a row.
  FailureOr<Operation *> updateLossScale(OpBuilder &b, ModuleOp module,
                                         Operation *after, Location loc,
                                         Value scale, Value finite);
};

LogicalResult AutodiffPass::checkOptions(ModuleOp module) {
  if (accumulate < 1)
    return module.emitError("accumulate must be >= 1, got ")
           << static_cast<int64_t>(accumulate);
  if (!(lr >= 0.0) || !(gradClip >= 0.0))
    return module.emitError("lr and grad-clip must be >= 0");
  if (optimizer == OptimizerKind::None && gradClip > 0.0)
    return module.emitError("grad-clip needs an optimizer");
  if (!(lossScale >= 0.0) || std::isinf(lossScale))
    return module.emitError("loss-scale must be finite and >= 0, got ")
           << lossScale;
  if (lossScale > 0.0 && optimizer == OptimizerKind::None)
    return module.emitError("loss-scale needs an optimizer (the updates "
                            "divide the scale out)");
  if (lossScaleGrowthInterval < 1)
    return module.emitError("loss-scale-growth-interval must be >= 1, got ")
           << static_cast<int64_t>(lossScaleGrowthInterval);
  if (!ignoreIndex.empty()) {
    int64_t value;
    if (llvm::StringRef(ignoreIndex).getAsInteger(10, value))
      return module.emitError("ignore-index must be an integer, got '")
             << ignoreIndex << "'";
    if (loss != LossKind::CrossEntropy)
      return module.emitError("ignore-index applies to the cross-entropy "
                              "loss");
  }
  return success();
}

DictionaryAttr AutodiffPass::trainingConfig(Builder &b, double weightDecay,
                                            StringRef precision) const {
  NamedAttrList config;
  auto real = [&](StringRef key, double v) {
    config.append(key, b.getF64FloatAttr(v));
  };
  auto integer = [&](StringRef key, int64_t v) {
    config.append(key, b.getI64IntegerAttr(v));
  };
  config.append("loss", b.getStringAttr(stringifyLossKind(loss)));
  config.append("optimizer",
                b.getStringAttr(stringifyOptimizerKind(optimizer)));
  real("lr", lr);
  if (optimizer == OptimizerKind::Sgd) {
    real("momentum", momentum);
    real("dampening", dampening);
    config.append("nesterov", b.getBoolAttr(nesterov));
  }
  if (optimizer == OptimizerKind::Adamw) {
    real("beta1", beta1);
    real("beta2", beta2);
    real("eps", eps);
  }
  if (!ignoreIndex.empty()) {
    int64_t value = 0;
    llvm::StringRef(ignoreIndex).getAsInteger(10, value);
    integer("ignore_index", value);
  }
  real("weight_decay", weightDecay);
  real("grad_clip", gradClip);
  integer("accumulate", accumulate);
  if (!precision.empty())
    config.append("precision", b.getStringAttr(precision));
  if (lossScale > 0.0) {
    real("loss_scale", lossScale);
    integer("loss_scale_growth_interval", lossScaleGrowthInterval);
  }
  return config.getDictionary(b.getContext());
}

FailureOr<ParamOp> AutodiffPass::addState(OpBuilder &b, ModuleOp module,
                                          Operation *after, StringRef name,
                                          RankedTensorType type,
                                          cleave_param_role role,
                                          Attribute initial) {
  if (Operation *existing = module.lookupSymbol(name))
    return existing->emitOpError("is named '")
           << name << "', which the optimizer state needs";
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfter(after);
  auto param = ParamOp::create(b, module.getLoc(), name, type, initial,
                               /*frozen=*/true);
  setParamRole(param, role);
  return param;
}

FailureOr<Operation *> AutodiffPass::updateLossScale(OpBuilder &b,
                                                     ModuleOp module,
                                                     Operation *after,
                                                     Location loc, Value scale,
                                                     Value finite) {
  auto f32Scalar = RankedTensorType::get({}, b.getF32Type());
  auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
  FailureOr<ParamOp> scaleState = addState(
      b, module, after, "amp.loss_scale", f32Scalar, CLEAVE_PARAM_LOSS_SCALE,
      DenseElementsAttr::get(f32Scalar, b.getF32FloatAttr(lossScale)));
  if (failed(scaleState))
    return failure();
  FailureOr<ParamOp> tracker =
      addState(b, module, *scaleState, "amp.growth_tracker", i64Scalar,
               CLEAVE_PARAM_GROWTH_TRACKER);
  if (failed(tracker))
    return failure();
  // torch.cuda.amp.GradScaler's update: after a non-finite step the scale
  // halves and the count restarts; a finite step counts, and the
  // growth-interval-th one in a row doubles the scale (unless the double
  // overflows f32: an infinite scale would make every later step
  // non-finite) and restarts the count.
  Type f32 = b.getF32Type(), i64 = b.getI64Type();
  Value count = AddOp::create(
      b, loc, i64Scalar,
      ReadParamOp::create(b, loc, i64Scalar, "amp.growth_tracker"),
      scalarConstant(b, loc, i64, 1.0));
  Value grow = CompareOp::create(
      b, loc, RankedTensorType::get({}, b.getI1Type()),
      CompareDirectionAttr::get(b.getContext(), CompareDirection::GE), count,
      scalarConstant(b, loc, i64, double(lossScaleGrowthInterval)));
  auto times = [&](double factor) {
    return MulOp::create(b, loc, f32Scalar, scale,
                         scalarConstant(b, loc, f32, factor))
        .getResult();
  };
  Value zero = scalarConstant(b, loc, i64, 0.0);
  Value grown = times(2.0);
  Value grownFinite = CompareOp::create(
      b, loc, RankedTensorType::get({}, b.getI1Type()),
      CompareDirectionAttr::get(b.getContext(), CompareDirection::LT), grown,
      scalarConstant(b, loc, f32, std::numeric_limits<double>::infinity()));
  Value grownScale =
      WhereOp::create(b, loc, f32Scalar, grownFinite, grown, scale);
  Value nextScale = WhereOp::create(
      b, loc, f32Scalar, finite,
      WhereOp::create(b, loc, f32Scalar, grow, grownScale, scale),
      times(0.5));
  Value nextCount = WhereOp::create(
      b, loc, i64Scalar, finite,
      WhereOp::create(b, loc, i64Scalar, grow, zero, count), zero);
  AssignOp::create(b, loc, "amp.loss_scale", nextScale);
  AssignOp::create(b, loc, "amp.growth_tracker", nextCount);
  return tracker->getOperation();
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions(module)))
    return signalPassFailure();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || !forward.getBody().hasOneBlock()) {
    module.emitError("-cleave-autodiff needs a single-block @forward");
    return signalPassFailure();
  }
  FunctionType fnType = forward.getFunctionType();
  auto outType = dyn_cast<RankedTensorType>(
      fnType.getNumResults() > 0 ? fnType.getResult(0) : Type());
  if (!outType || !isa<FloatType>(outType.getElementType()) ||
      (loss == LossKind::CrossEntropy && outType.getRank() < 1)) {
    forward.emitOpError("first result must be a float tensor")
        << (loss == LossKind::CrossEntropy ? " of logits [..., classes]" : "")
        << " for the " << stringifyLossKind(loss) << " loss";
    return signalPassFailure();
  }
  OpBuilder b(module.getContext());
  StepTagger tagger(module.getContext());
  b.setListener(&tagger);
  DenseMap<Operation *, std::optional<int64_t>> layers =
      forwardLayers(forward);
  // A parameter's layer: its name's, else that of the forward's reads of it
  // (named by their ONNX node path).
  llvm::StringMap<std::optional<int64_t>> paramLayers;
  for (auto [op, layer] : layers)
    if (auto read = dyn_cast<ReadParamOp>(op)) {
      std::optional<int64_t> &slot = paramLayers[read.getParam()];
      if (std::optional<int64_t> named = layerInName(read.getParam()))
        slot = named;
      else if (layer && !slot)
        slot = layer;
    }
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
  const int64_t k = accumulate;
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
    if (failed(s)) {
      forward.emitOpError("accumulate=")
          << k << " needs a batch dimension on every input and on the "
          << "loss's target, got " << t;
      return signalPassFailure();
    }
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

  DenseSet<StringRef> trained;
  SmallVector<ParamOp> params;
  for (auto param : module.getOps<ParamOp>()) {
    params.push_back(param);
    if (!param.getFrozen())
      trained.insert(param.getSymName());
  }

  IntegerAttr ignored;
  if (!ignoreIndex.empty()) {
    int64_t value = 0;
    llvm::StringRef(ignoreIndex).getAsInteger(10, value);
    ignored = b.getI64IntegerAttr(value);
  }

  // Forward, loss and backward of each microbatch; parameter gradients
  // summed over reads and microbatches.
  // The loss's type: cross-entropy's is f32 whatever the logits' type.
  Type f32 = loss == LossKind::Mse ? outType.getElementType() : b.getF32Type();
  int64_t numRulesApplied = 0;
  // The loss gradient each microbatch starts from: 1/K, times the loss
  // scale when scaling (the state parameter added with the updates).
  auto f32Scalar = RankedTensorType::get({}, f32);
  Value lossScaleValue;
  if (lossScale > 0.0) {
    if (!f32.isF32()) {
      forward.emitOpError("loss-scale needs an f32 first result, got ")
          << outType;
      return signalPassFailure();
    }
    tagger.phase = Phase::Backward;
    lossScaleValue = ReadParamOp::create(b, loc, f32Scalar, "amp.loss_scale");
  }
  Value totalLoss;
  llvm::StringMap<Value> paramGrads;
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
    SmallVector<Operation *> cloned;
    Value output;
    for (Operation &op : forward.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        output = map.lookup(ret.getOperand(0));
        break;
      }
      tagger.layer = layers.lookup(&op);
      cloned.push_back(b.clone(op, map));
    }
    // Logits the forward computed in 16 bits and cast to f32 for its
    // signature (-cleave-mixed-precision) go to the cross-entropy as they
    // are: it reads them into f32 anyway, and the f32 logits and their f32
    // gradient are never stored.
    if (auto widen = output.getDefiningOp<CastOp>())
      if (loss == LossKind::CrossEntropy &&
          isa<FloatType>(typeOf(widen.getOperand()).getElementType()))
        output = widen.getOperand();
    auto scalarType = RankedTensorType::get({}, f32);
    tagger.layer = output.getDefiningOp() ? layerOf(output.getDefiningOp())
                                          : std::nullopt;
    Value microLoss;
    if (loss == LossKind::Mse) {
      Operation *lossOp = MseOp::create(b, loc, scalarType, output, target);
      cloned.push_back(lossOp);
      microLoss = lossOp->getResult(0);
    } else {
      // The mean as an explicit sum over a count of the whole batch, so
      // that sharding the batch leaves sums and counts that add up (a
      // kernel's own mean would divide by the shard's count).
      auto sum = CrossEntropyOp::create(
          b, loc, scalarType, output, target, ignored,
          ReductionKindAttr::get(b.getContext(), ReductionKind::Sum));
      cloned.push_back(sum);
      auto div = DivOp::create(b, loc, scalarType, sum.getResult(),
                               countPositions(b, loc, target, ignored));
      cloned.push_back(div);
      microLoss = div.getResult();
    }
    totalLoss = totalLoss ? AddOp::create(b, loc, scalarType, totalLoss,
                                          microLoss)
                                .getResult()
                          : microLoss;

    tagger.phase = Phase::Backward;
    Differentiator diff(b, tagger, numRulesApplied);
    diff.markActive(cloned, trained);
    Value seed = scalarConstant(b, loc, f32, 1.0 / double(k));
    if (lossScaleValue)
      seed = k == 1 ? lossScaleValue
                    : MulOp::create(b, loc, f32Scalar, lossScaleValue, seed)
                          .getResult();
    diff.accumulate(microLoss, seed);
    for (Operation *op : llvm::reverse(cloned))
      if (failed(diff.backward(op)))
        return signalPassFailure();
    for (Operation *op : cloned)
      if (auto read = dyn_cast<ReadParamOp>(op))
        if (Value g = diff.gradOf(read.getResult())) {
          tagger.layer = paramLayers.lookup(read.getParam());
          Value &slot = paramGrads[read.getParam()];
          slot = slot ? AddOp::create(b, loc, g.getType(), slot, g).getResult()
                      : g;
        }
  }
  tagger.phase = Phase::Forward;
  tagger.microbatch = std::nullopt;
  tagger.layer = std::nullopt;
  if (k > 1)
    totalLoss = MulOp::create(b, loc, typeOf(totalLoss), totalLoss,
                              scalarConstant(b, loc, f32, 1.0 / double(k)));
  numRules = numRulesApplied;

  SmallVector<Value> results = {totalLoss};
  SmallVector<std::string> names = {"loss"};
  SmallVector<ParamOp> updated;
  for (ParamOp param : params)
    if (paramGrads.count(param.getSymName()))
      updated.push_back(param);

  if (optimizer == OptimizerKind::None) {
    for (ParamOp param : updated) {
      results.push_back(paramGrads[param.getSymName()]);
      names.push_back(("grad." + param.getSymName()).str());
    }
  } else {
    tagger.phase = Phase::Optimizer;
    tagger.layer = std::nullopt;
    double weightDecay = this->weightDecay >= 0.0
                             ? this->weightDecay
                             : (optimizer == OptimizerKind::Adamw ? 0.01 : 0.0);
    // Global-norm clipping: scale = min(1, clip / (||g|| + 1e-6)), the norm
    // taken of the unscaled gradients when loss scaling.
    Value scale, sumsq;
    Value inverseLossScale =
        lossScaleValue
            ? DivOp::create(b, loc, f32Scalar,
                            scalarConstant(b, loc, f32, 1.0), lossScaleValue)
                  .getResult()
            : Value();
    if (gradClip > 0.0) {
      auto scalarType = RankedTensorType::get({}, b.getF32Type());
      for (ParamOp param : updated) {
        Value g = paramGrads[param.getSymName()];
        if (!typeOf(g).getElementType().isF32())
          g = CastOp::create(b, loc, typeOf(g).clone(b.getF32Type()), g);
        Value s = sumAll(b, loc, MulOp::create(b, loc, g.getType(), g, g));
        sumsq = sumsq ? AddOp::create(b, loc, scalarType, sumsq, s).getResult()
                      : s;
      }
      if (sumsq) {
        Type e = b.getF32Type();
        Value norm = SqrtOp::create(b, loc, scalarType, sumsq);
        if (inverseLossScale)
          norm = MulOp::create(b, loc, scalarType, norm, inverseLossScale);
        Value coef = DivOp::create(
            b, loc, scalarType, scalarConstant(b, loc, e, gradClip),
            AddOp::create(b, loc, scalarType, norm,
                          scalarConstant(b, loc, e, 1e-6)));
        scale = MinOp::create(b, loc, scalarType, coef,
                              scalarConstant(b, loc, e, 1.0));
      }
    }

    // Loss scaling: the updates multiply the gradients by 1/scale, plus a
    // term that is 0 when every gradient is finite and NaN otherwise (a sum
    // over all gradients, times 0), and an update whose scale is not
    // finite leaves its parameter and state unchanged (cleave_rt.h).
    Value finite;
    if (lossScaleValue) {
      Value total = sumsq;
      if (!total)
        for (ParamOp param : updated) {
          Value s = sumAll(b, loc, paramGrads[param.getSymName()]);
          if (!typeOf(s).getElementType().isF32())
            s = CastOp::create(b, loc, f32Scalar, s);
          total = total ? AddOp::create(b, loc, f32Scalar, total, s).getResult()
                        : s;
        }
      Value poison = MulOp::create(b, loc, f32Scalar, total,
                                   scalarConstant(b, loc, f32, 0.0));
      finite = CompareOp::create(
          b, loc, RankedTensorType::get({}, b.getI1Type()),
          CompareDirectionAttr::get(b.getContext(), CompareDirection::EQ),
          poison, scalarConstant(b, loc, f32, 0.0));
      scale = scale ? MulOp::create(b, loc, f32Scalar, scale, inverseLossScale)
                          .getResult()
                    : inverseLossScale;
      scale = AddOp::create(b, loc, f32Scalar, scale, poison);
    }

    // The step counter: read, increment, store; updates use the new value.
    Operation *lastParam = params.empty() ? nullptr : params.back();
    auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
    if (!lastParam) {
      module.emitError("the model has no parameters to train");
      return signalPassFailure();
    }
    FailureOr<ParamOp> counter =
        addState(b, module, lastParam, "optimizer.step", i64Scalar,
                 CLEAVE_PARAM_STEP_COUNTER);
    if (failed(counter))
      return signalPassFailure();
    lastParam = *counter;
    Value stepRead = ReadParamOp::create(b, loc, i64Scalar, "optimizer.step");
    Value stepValue = AddOp::create(
        b, loc, i64Scalar, stepRead,
        scalarConstant(b, loc, b.getI64Type(), 1.0));
    // A skipped step (loss scaling, non-finite gradients) is not counted,
    // as torch.optim never sees it.
    AssignOp::create(b, loc, "optimizer.step",
                     finite ? WhereOp::create(b, loc, i64Scalar, finite,
                                              stepValue, stepRead)
                                  .getResult()
                            : stepValue);

    for (ParamOp param : updated) {
      StringRef name = param.getSymName();
      tagger.layer = paramLayers.lookup(name);
      auto type = cast<RankedTensorType>(param.getType());
      if (!type.getElementType().isF32()) {
        param.emitOpError("is ") << type
                                 << "; optimizer updates need f32 parameters";
        return signalPassFailure();
      }
      Value g = paramGrads[name];
      // The update is a value (new parameter and state) that assign stores;
      // the memory plan computes it in the parameter's own storage.
      Value p = ReadParamOp::create(b, loc, type, name);
      if (optimizer == OptimizerKind::Sgd) {
        Value buf;
        std::string bufName = (name + ".momentum").str();
        if (momentum != 0.0) {
          FailureOr<ParamOp> state =
              addState(b, module, lastParam, bufName, type,
                       CLEAVE_PARAM_OPTIMIZER_STATE);
          if (failed(state))
            return signalPassFailure();
          lastParam = *state;
          buf = ReadParamOp::create(b, loc, type, bufName);
        }
        auto update = SgdOp::create(
            b, loc, type, buf ? Type(type) : Type(), p, g, stepValue, scale,
            buf, b.getF64FloatAttr(lr), b.getF64FloatAttr(momentum),
            b.getF64FloatAttr(dampening), b.getF64FloatAttr(weightDecay),
            nesterov ? b.getUnitAttr() : UnitAttr());
        if (failed(update.verify()))
          return signalPassFailure();
        AssignOp::create(b, loc, name, update.getNewParam());
        if (buf)
          AssignOp::create(b, loc, bufName, update.getNewMomentumBuffer());
      } else {
        std::string mName = (name + ".m").str(), vName = (name + ".v").str();
        FailureOr<ParamOp> m1 = addState(b, module, lastParam, mName, type,
                                         CLEAVE_PARAM_OPTIMIZER_STATE);
        if (failed(m1))
          return signalPassFailure();
        FailureOr<ParamOp> m2 = addState(b, module, *m1, vName, type,
                                         CLEAVE_PARAM_OPTIMIZER_STATE);
        if (failed(m2))
          return signalPassFailure();
        lastParam = *m2;
        Value m = ReadParamOp::create(b, loc, type, mName);
        Value v = ReadParamOp::create(b, loc, type, vName);
        auto update = AdamwOp::create(
            b, loc, type, type, type, p, g, m, v, stepValue, scale,
            b.getF64FloatAttr(lr), b.getF64FloatAttr(beta1),
            b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
            b.getF64FloatAttr(weightDecay));
        if (failed(update.verify()))
          return signalPassFailure();
        AssignOp::create(b, loc, name, update.getNewParam());
        AssignOp::create(b, loc, mName, update.getNewFirstMoment());
        AssignOp::create(b, loc, vName, update.getNewSecondMoment());
      }
    }
    tagger.layer = std::nullopt;
    if (finite) {
      FailureOr<Operation *> last =
          updateLossScale(b, module, lastParam, loc, lossScaleValue, finite);
      if (failed(last))
        return signalPassFailure();
      lastParam = *last;
    }
    auto precisionAttr = module->getAttrOfType<StringAttr>(kPrecisionAttr);
    step->setAttr(kTrainingConfigAttr,
                  trainingConfig(b, weightDecay,
                                 precisionAttr ? precisionAttr.getValue()
                                               : StringRef()));
  }

  func::ReturnOp::create(b, loc, results);
  step.setType(b.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (auto [i, name] : llvm::enumerate(names))
    step.setResultAttr(i, "onnx.name", b.getStringAttr(name));
  forward.erase();

  // Gradients nobody needs (of constants, of frozen parameters) are dead.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*entry)))
    if (isOpTriviallyDead(&op))
      op.erase();
}
} // namespace
