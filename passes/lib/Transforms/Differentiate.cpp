//===- Differentiate.cpp - the training step's backward pass ------------===//
//
// -cleave-differentiate: the reverse-mode backward pass of the loss that
// -cleave-add-loss built, one microbatch after the other, and the gradient
// of every trainable parameter as a result of the step. The rules live with
// the ops (GradientOpInterface, GraphGradients.cpp); this pass walks the
// ops backwards, sums the gradients of values used several times (tied
// weights, residuals) and only differentiates values that depend on a
// trainable parameter.
//
//===----------------------------------------------------------------------===//

#include "TrainingStep.h"

#include <cmath>

namespace cleave {
#define GEN_PASS_DEF_DIFFERENTIATEPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The reverse pass over the forward ops of one microbatch.
class Differentiator {
public:
  Differentiator(OpBuilder &b, StepTagger &tagger, int64_t &numRules)
      : b(b), tagger(tagger), numRules(numRules) {}

  /// Values that depend on a trainable parameter, in forward order.
  void markActive(ArrayRef<Operation *> ops,
                  const DenseSet<StringRef> &trained) {
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
    slot =
        slot ? AddOp::create(b, g.getLoc(), slot.getType(), slot, g).getResult()
             : g;
  }

  LogicalResult backward(Operation *op) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      resultGrads.push_back(gradOf(r));
      any |= static_cast<bool>(resultGrads.back());
    }
    if (!any || llvm::none_of(op->getOperands(),
                              [&](Value v) { return active.contains(v); }))
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

/// The microbatch an op of the step belongs to, if it is a forward op.
std::optional<int64_t> forwardMicrobatch(Operation *op) {
  auto phase = op->getAttrOfType<PhaseAttr>(GraphDialect::getPhaseAttrName());
  auto microbatch =
      op->getAttrOfType<IntegerAttr>(GraphDialect::getMicrobatchAttrName());
  if (!phase || phase.getValue() != Phase::Forward || !microbatch)
    return std::nullopt;
  return microbatch.getInt();
}

/// The ops that compute each microbatch's loss, in microbatch order, after
/// checking that there is one for each of the `accumulate` microbatches.
FailureOr<SmallVector<Operation *>> microbatchLosses(func::FuncOp step,
                                                     int64_t accumulate) {
  SmallVector<Operation *> losses(accumulate);
  int64_t found = 0;
  for (Operation &op : step.getBody().front()) {
    if (!op.hasAttr(kMicrobatchLossAttr))
      continue;
    std::optional<int64_t> m = forwardMicrobatch(&op);
    if (!m || *m >= accumulate)
      return op.emitOpError("marks a microbatch loss, so expects 'graph.phase' "
                            "forward and a 'graph.microbatch' below ")
             << accumulate;
    if (losses[*m])
      return op.emitOpError("is a second loss of microbatch ") << *m;
    losses[*m] = &op;
    ++found;
  }
  if (found == 0) {
    for (unsigned i = 0; i < step.getNumResults(); ++i)
      if (step.getResultAttr(i, kGradientAttr))
        return step.emitOpError("is differentiated already: result #")
               << i << " is a gradient";
    return step.emitOpError("has no loss to differentiate: no op carries '")
           << kMicrobatchLossAttr << "'";
  }
  if (found != accumulate)
    return step.emitOpError("expects ")
           << accumulate << " microbatch losses ('accumulate' of '" << kLossAttr
           << "'), got " << found;
  return losses;
}

struct DifferentiatePass
    : cleave::impl::DifferentiatePassBase<DifferentiatePass> {
  using DifferentiatePassBase::DifferentiatePassBase;

  void runOnOperation() override {
    DifferentiatePassOptions options;
    options.lossScale = lossScale;
    int64_t rules = 0;
    if (failed(differentiateStep(getOperation(), options,
                                 "-cleave-differentiate", rules)))
      return signalPassFailure();
    numRules = rules;
  }
};

} // namespace

LogicalResult cleave::differentiateStep(ModuleOp module,
                                        const DifferentiatePassOptions &options,
                                        StringRef pass, int64_t &numRules) {
  const double lossScale = options.lossScale;
  if (!(lossScale >= 0.0) || std::isinf(lossScale))
    return module.emitError("loss-scale must be finite and >= 0, got ")
           << lossScale;
  FailureOr<func::FuncOp> found =
      lookupLossStep(module, pass, "a loss", "-cleave-add-loss");
  if (failed(found))
    return failure();
  func::FuncOp step = *found;
  auto lossConfig = step->getAttrOfType<DictionaryAttr>(kLossAttr);
  const int64_t k = lossConfig.getAs<IntegerAttr>("accumulate").getInt();
  FailureOr<SmallVector<Operation *>> losses = microbatchLosses(step, k);
  if (failed(losses))
    return failure();
  Type f32 = typeOf((*losses)[0]->getResult(0)).getElementType();
  if (lossScale > 0.0 && !f32.isF32())
    return step.emitOpError("loss-scale needs an f32 loss, got ")
           << (*losses)[0]->getResult(0).getType();

  OpBuilder b(module.getContext());
  StepTagger tagger(module.getContext());
  b.setListener(&tagger);
  Block *entry = &step.getBody().front();
  Location loc = step.getLoc();
  auto f32Scalar = RankedTensorType::get({}, f32);

  DenseSet<StringRef> trained;
  SmallVector<ParamOp> params;
  for (auto param : module.getOps<ParamOp>()) {
    params.push_back(param);
    if (!param.getFrozen())
      trained.insert(param.getSymName());
  }
  llvm::StringMap<std::optional<int64_t>> paramLayers = parameterLayers(step);

  // The loss gradient each microbatch starts from: 1/K, times the loss
  // scale when scaling (a state parameter that -cleave-add-optimizer
  // updates).
  Value lossScaleValue;
  if (lossScale > 0.0) {
    FailureOr<ParamOp> scaleState = addStateParam(
        b, module, params.empty() ? nullptr : params.back().getOperation(),
        "amp.loss_scale", f32Scalar, CLEAVE_PARAM_LOSS_SCALE,
        DenseElementsAttr::get(f32Scalar, b.getF32FloatAttr(lossScale)));
    if (failed(scaleState))
      return failure();
    tagger.phase = Phase::Backward;
    b.setInsertionPointToStart(entry);
    lossScaleValue = ReadParamOp::create(b, loc, f32Scalar, "amp.loss_scale");
  }

  // The backward of each microbatch follows its forward ops (the last op
  // tagged with it), so that only one microbatch's activations are live at
  // a time; parameter gradients are summed over reads and microbatches.
  llvm::StringMap<Value> paramGrads;
  for (auto [m, lossOp] : llvm::enumerate(*losses)) {
    SmallVector<Operation *> forwardOps;
    Operation *last = nullptr;
    bool pastLoss = false;
    for (Operation &op : *entry) {
      if (forwardMicrobatch(&op) != static_cast<int64_t>(m))
        continue;
      last = &op;
      // The ops after the loss (the sum over microbatches) have no
      // gradient to pass on.
      if (!pastLoss)
        forwardOps.push_back(&op);
      pastLoss |= &op == lossOp;
    }
    b.setInsertionPointAfter(last);
    tagger.phase = Phase::Backward;
    tagger.microbatch = m;
    tagger.layer = layerOf(lossOp);
    Differentiator diff(b, tagger, numRules);
    diff.markActive(forwardOps, trained);
    Value seed = scalarConstant(b, loc, f32, 1.0 / double(k));
    if (lossScaleValue)
      seed = k == 1 ? lossScaleValue
                    : MulOp::create(b, loc, f32Scalar, lossScaleValue, seed)
                          .getResult();
    diff.accumulate(lossOp->getResult(0), seed);
    for (Operation *op : llvm::reverse(forwardOps))
      if (failed(diff.backward(op)))
        return failure();
    for (Operation *op : forwardOps)
      if (auto read = dyn_cast<ReadParamOp>(op))
        if (Value g = diff.gradOf(read.getResult())) {
          tagger.layer = paramLayers.lookup(read.getParam());
          Value &slot = paramGrads[read.getParam()];
          slot = slot ? AddOp::create(b, loc, g.getType(), slot, g).getResult()
                      : g;
        }
    lossOp->removeAttr(kMicrobatchLossAttr);
  }

  // The gradients follow the step's results, each naming its parameter.
  auto ret = cast<func::ReturnOp>(entry->getTerminator());
  SmallVector<Value> results = ret.getOperands();
  unsigned first = results.size();
  SmallVector<StringRef> names;
  for (ParamOp param : params)
    if (Value g = paramGrads.lookup(param.getSymName())) {
      results.push_back(g);
      names.push_back(param.getSymName());
    }
  b.setInsertionPoint(ret);
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  step.setType(b.getFunctionType(step.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  for (auto [i, name] : llvm::enumerate(names)) {
    step.setResultAttr(first + i, "onnx.name",
                       b.getStringAttr(("grad." + name).str()));
    step.setResultAttr(first + i, kGradientAttr,
                       FlatSymbolRefAttr::get(b.getContext(), name));
  }
  if (lossScaleValue) {
    NamedAttrList config(lossConfig);
    config.set("loss_scale", b.getF64FloatAttr(lossScale));
    step->setAttr(kLossAttr, config.getDictionary(b.getContext()));
  }
  // Gradients nobody needs (of constants, of frozen parameters) are dead.
  eraseDeadOps(step);
  return success();
}
