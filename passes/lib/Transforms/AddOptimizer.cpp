//===- AddOptimizer.cpp - the training step's parameter updates ---------===//
//
// -cleave-add-optimizer: the updates of every parameter from the gradients
// that -cleave-differentiate returns (the step's results marked
// `cleave.gradient`): SGD or AdamW as values (graph.sgd, graph.adamw) that
// graph.assign stores, their state parameters and the step counter, global
// gradient clipping, and the unscaling, skipping and scale update of
// dynamic loss scaling. The gradient results are consumed: the step returns
// its loss and carries the whole training configuration.
//
//===----------------------------------------------------------------------===//

#include "TrainingStep.h"

#include "llvm/ADT/BitVector.h"

#include <cmath>
#include <limits>

namespace cleave {
#define GEN_PASS_DEF_ADDOPTIMIZERPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

LogicalResult checkOptions(ModuleOp module,
                           const AddOptimizerPassOptions &options) {
  // The option's parser accepts sgd and adamw only; none is -cleave-autodiff's
  // (which then does not add an optimizer).
  assert(options.optimizer != OptimizerKind::None && "no optimizer to add");
  if (!(options.lr >= 0.0) || !(options.gradClip >= 0.0))
    return module.emitError("lr and grad-clip must be >= 0");
  if (options.lossScaleGrowthInterval < 1)
    return module.emitError("loss-scale-growth-interval must be >= 1, got ")
           << static_cast<int64_t>(options.lossScaleGrowthInterval);
  return success();
}

/// The gradient of each parameter, from the step's results marked with
/// `cleave.gradient`, after checking that each is a trainable parameter's,
/// of its type, and the only one; `gradientResults` gets their positions.
FailureOr<llvm::StringMap<Value>>
collectGradients(func::FuncOp step, llvm::BitVector &gradientResults) {
  llvm::StringMap<Value> grads;
  auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
  gradientResults.resize(step.getNumResults());
  for (unsigned i = 0; i < step.getNumResults(); ++i) {
    auto name = step.getResultAttrOfType<FlatSymbolRefAttr>(i, kGradientAttr);
    if (!name)
      continue;
    auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(step, name);
    if (!param)
      return step.emitOpError("result #")
             << i << " is the gradient of " << name << ", not a graph.param";
    if (param.getFrozen())
      return step.emitOpError("result #")
             << i << " is the gradient of frozen parameter " << name;
    if (step.getResultTypes()[i] != param.getType())
      return step.emitOpError("result #")
             << i << " is the gradient of " << name << " of type "
             << param.getType() << ", got " << step.getResultTypes()[i];
    if (!grads.try_emplace(name.getValue(), ret.getOperand(i)).second)
      return step.emitOpError("result #")
             << i << " is a second gradient of " << name;
    gradientResults.set(i);
  }
  return grads;
}

/// The loss scale the backward pass was seeded with: the value of the
/// parameter of role loss_scale, read before the first backward op.
FailureOr<std::pair<ParamOp, Value>>
lookupLossScale(OpBuilder &b, ModuleOp module, func::FuncOp step) {
  ParamOp scale;
  for (auto param : module.getOps<ParamOp>())
    if (getParamRole(param) == CLEAVE_PARAM_LOSS_SCALE) {
      scale = param;
      break;
    }
  if (!scale)
    return step.emitOpError("has a scaled loss ('loss_scale' in '")
           << kLossAttr << "') but no parameter has the role loss_scale";
  Value read;
  step.walk([&](ReadParamOp op) {
    if (op.getParam() == scale.getSymName()) {
      read = op.getResult();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (!read)
    read = ReadParamOp::create(b, step.getLoc(), scale.getType(),
                               scale.getSymName());
  return std::make_pair(scale, read);
}

/// Builds the updates at `b`'s insertion point, before the step's return.
class OptimizerBuilder {
public:
  OptimizerBuilder(OpBuilder &b, StepTagger &tagger, ModuleOp module,
                   func::FuncOp step, const AddOptimizerPassOptions &options)
      : b(b), tagger(tagger), module(module), step(step), options(options),
        loc(step.getLoc()) {}

  /// Updates every parameter of `grads`; `scaleState` and `lossScaleValue`
  /// (the value the backward was seeded with) when the loss is scaled.
  /// `lastParam` is the parameter the state parameters follow.
  LogicalResult build(const llvm::StringMap<Value> &grads, Operation *lastParam,
                      ParamOp scaleState, Value lossScaleValue,
                      double weightDecay);
  /// The global gradient norm build() computed (with grad-clip or
  /// grad-norm), else null.
  Value gradNorm() const { return norm; }

private:
  /// Dynamic loss scaling after the updates: the scale halves after a step
  /// with non-finite gradients (`finite` false) and doubles after
  /// lossScaleGrowthInterval finite steps in a row.
  LogicalResult updateLossScale(ParamOp scaleState, Value scale, Value finite);

  OpBuilder &b;
  StepTagger &tagger;
  ModuleOp module;
  func::FuncOp step;
  const AddOptimizerPassOptions &options;
  Location loc;
  Value norm;
};

LogicalResult OptimizerBuilder::build(const llvm::StringMap<Value> &grads,
                                      Operation *lastParam, ParamOp scaleState,
                                      Value lossScaleValue,
                                      double weightDecay) {
  const OptimizerKind optimizer = options.optimizer;
  const double gradClip = options.gradClip;
  SmallVector<ParamOp> updated;
  for (auto param : module.getOps<ParamOp>())
    if (grads.count(param.getSymName()))
      updated.push_back(param);
  llvm::StringMap<std::optional<int64_t>> paramLayers = parameterLayers(step);

  Type f32 = b.getF32Type();
  auto f32Scalar = RankedTensorType::get({}, f32);
  // Global-norm clipping: scale = min(1, clip / (||g|| + 1e-6)), the norm
  // taken of the unscaled gradients when loss scaling.
  Value scale, sumsq;
  Value inverseLossScale =
      lossScaleValue
          ? DivOp::create(b, loc, f32Scalar, scalarConstant(b, loc, f32, 1.0),
                          lossScaleValue)
                .getResult()
          : Value();
  if (gradClip > 0.0 || options.gradNorm) {
    for (ParamOp param : updated) {
      Value g = grads.lookup(param.getSymName());
      if (!typeOf(g).getElementType().isF32())
        g = CastOp::create(b, loc, typeOf(g).clone(f32), g);
      Value s = sumAll(b, loc, MulOp::create(b, loc, g.getType(), g, g));
      sumsq =
          sumsq ? AddOp::create(b, loc, f32Scalar, sumsq, s).getResult() : s;
    }
    if (sumsq) {
      norm = SqrtOp::create(b, loc, f32Scalar, sumsq);
      if (inverseLossScale)
        norm = MulOp::create(b, loc, f32Scalar, norm, inverseLossScale);
    }
    if (sumsq && gradClip > 0.0) {
      // The clipping norm is the step's run-time value (the compile-time
      // one its default); 0 at run time turns clipping off.
      Value clip = HyperparameterOp::create(b, loc, f32Scalar,
                                            b.getStringAttr("grad_clip"),
                                            b.getF64FloatAttr(gradClip));
      Value coef =
          DivOp::create(b, loc, f32Scalar, clip,
                        AddOp::create(b, loc, f32Scalar, norm,
                                      scalarConstant(b, loc, f32, 1e-6)));
      Value one = scalarConstant(b, loc, f32, 1.0);
      Value on = CompareOp::create(
          b, loc, RankedTensorType::get({}, b.getI1Type()),
          CompareDirectionAttr::get(b.getContext(), CompareDirection::GT), clip,
          scalarConstant(b, loc, f32, 0.0));
      scale = WhereOp::create(b, loc, f32Scalar, on,
                              MinOp::create(b, loc, f32Scalar, coef, one), one);
    }
  }

  // Loss scaling: the updates multiply the gradients by 1/scale, plus a
  // term that is 0 when every gradient is finite and NaN otherwise (a sum
  // over all gradients, times 0), and an update whose scale is not
  // finite leaves its parameter and state unchanged (cleave_rt.h).
  Value finite;
  if (lossScaleValue) {
    // (With clipping, the sum of squares the norm took; the squares of
    // --grad-norm alone do not change what is called finite.)
    Value total = gradClip > 0.0 ? sumsq : Value();
    if (!total)
      for (ParamOp param : updated) {
        Value s = sumAll(b, loc, grads.lookup(param.getSymName()));
        if (!typeOf(s).getElementType().isF32())
          s = CastOp::create(b, loc, f32Scalar, s);
        total =
            total ? AddOp::create(b, loc, f32Scalar, total, s).getResult() : s;
      }
    Value poison = MulOp::create(b, loc, f32Scalar, total,
                                 scalarConstant(b, loc, f32, 0.0));
    finite = CompareOp::create(
        b, loc, RankedTensorType::get({}, b.getI1Type()),
        CompareDirectionAttr::get(b.getContext(), CompareDirection::EQ), poison,
        scalarConstant(b, loc, f32, 0.0));
    scale = scale ? MulOp::create(b, loc, f32Scalar, scale, inverseLossScale)
                        .getResult()
                  : inverseLossScale;
    scale = AddOp::create(b, loc, f32Scalar, scale, poison);
  }

  // The step counter: read, increment, store; updates use the new value.
  auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
  if (!lastParam)
    return module.emitError("the model has no parameters to train");
  FailureOr<ParamOp> counter =
      addStateParam(b, module, lastParam, "optimizer.step", i64Scalar,
                    CLEAVE_PARAM_STEP_COUNTER);
  if (failed(counter))
    return failure();
  lastParam = *counter;
  Value stepRead = ReadParamOp::create(b, loc, i64Scalar, "optimizer.step");
  Value stepValue = AddOp::create(b, loc, i64Scalar, stepRead,
                                  scalarConstant(b, loc, b.getI64Type(), 1.0));
  // A skipped step (loss scaling, non-finite gradients) is not counted,
  // as torch.optim never sees it.
  AssignOp::create(
      b, loc, "optimizer.step",
      finite ? WhereOp::create(b, loc, i64Scalar, finite, stepValue, stepRead)
                   .getResult()
             : stepValue);

  for (ParamOp param : updated) {
    StringRef name = param.getSymName();
    tagger.layer = paramLayers.lookup(name);
    auto type = cast<RankedTensorType>(param.getType());
    if (!type.getElementType().isF32())
      return param.emitOpError("is ")
             << type << "; optimizer updates need f32 parameters";
    Value g = grads.lookup(name);
    // The update is a value (new parameter and state) that assign stores;
    // the memory plan computes it in the parameter's own storage.
    Value p = ReadParamOp::create(b, loc, type, name);
    if (optimizer == OptimizerKind::Sgd) {
      Value buf;
      std::string bufName = (name + ".momentum").str();
      if (options.momentum != 0.0) {
        FailureOr<ParamOp> state = addStateParam(
            b, module, lastParam, bufName, type, CLEAVE_PARAM_OPTIMIZER_STATE);
        if (failed(state))
          return failure();
        lastParam = *state;
        buf = ReadParamOp::create(b, loc, type, bufName);
      }
      auto update = SgdOp::create(
          b, loc, type, buf ? Type(type) : Type(), p, g, stepValue, scale, buf,
          b.getF64FloatAttr(options.lr), b.getF64FloatAttr(options.momentum),
          b.getF64FloatAttr(options.dampening), b.getF64FloatAttr(weightDecay),
          options.nesterov ? b.getUnitAttr() : UnitAttr(),
          /*run_time_hyperparameters=*/b.getUnitAttr());
      if (failed(update.verify()))
        return failure();
      AssignOp::create(b, loc, name, update.getNewParam());
      if (buf)
        AssignOp::create(b, loc, bufName, update.getNewMomentumBuffer());
    } else {
      std::string mName = (name + ".m").str(), vName = (name + ".v").str();
      FailureOr<ParamOp> m1 = addStateParam(b, module, lastParam, mName, type,
                                            CLEAVE_PARAM_OPTIMIZER_STATE);
      if (failed(m1))
        return failure();
      FailureOr<ParamOp> m2 = addStateParam(b, module, *m1, vName, type,
                                            CLEAVE_PARAM_OPTIMIZER_STATE);
      if (failed(m2))
        return failure();
      lastParam = *m2;
      Value m = ReadParamOp::create(b, loc, type, mName);
      Value v = ReadParamOp::create(b, loc, type, vName);
      auto update = AdamwOp::create(
          b, loc, type, type, type, p, g, m, v, stepValue, scale,
          b.getF64FloatAttr(options.lr), b.getF64FloatAttr(options.beta1),
          b.getF64FloatAttr(options.beta2), b.getF64FloatAttr(options.eps),
          b.getF64FloatAttr(weightDecay),
          /*run_time_hyperparameters=*/b.getUnitAttr());
      if (failed(update.verify()))
        return failure();
      AssignOp::create(b, loc, name, update.getNewParam());
      AssignOp::create(b, loc, mName, update.getNewFirstMoment());
      AssignOp::create(b, loc, vName, update.getNewSecondMoment());
    }
  }
  tagger.layer = std::nullopt;
  if (finite)
    return updateLossScale(scaleState, lossScaleValue, finite);
  return success();
}

LogicalResult OptimizerBuilder::updateLossScale(ParamOp scaleState, Value scale,
                                                Value finite) {
  auto f32Scalar = RankedTensorType::get({}, b.getF32Type());
  auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
  // The state parameters of the optimizer went before the scale's, so the
  // growth tracker follows it.
  FailureOr<ParamOp> tracker =
      addStateParam(b, module, scaleState, "amp.growth_tracker", i64Scalar,
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
  Value interval = HyperparameterOp::create(
      b, loc, i64Scalar, b.getStringAttr("loss_scale_growth_interval"),
      b.getF64FloatAttr(double(options.lossScaleGrowthInterval)));
  Value grow = CompareOp::create(
      b, loc, RankedTensorType::get({}, b.getI1Type()),
      CompareDirectionAttr::get(b.getContext(), CompareDirection::GE), count,
      interval);
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
      WhereOp::create(b, loc, f32Scalar, grow, grownScale, scale), times(0.5));
  Value nextCount = WhereOp::create(
      b, loc, i64Scalar, finite,
      WhereOp::create(b, loc, i64Scalar, grow, zero, count), zero);
  AssignOp::create(b, loc, scaleState.getSymName(), nextScale);
  AssignOp::create(b, loc, "amp.growth_tracker", nextCount);
  return success();
}

/// The loss and the optimizer, as the cleave.training_config dictionary
/// (verified by the cleave dialect, written as JSON by the lowering): the
/// loss's keys from `cleave.loss`, the rest from the options.
DictionaryAttr trainingConfig(Builder &b, DictionaryAttr lossConfig,
                              const AddOptimizerPassOptions &options,
                              double weightDecay, StringRef precision) {
  NamedAttrList config(lossConfig);
  auto real = [&](StringRef key, double v) {
    config.set(key, b.getF64FloatAttr(v));
  };
  config.set("optimizer",
             b.getStringAttr(stringifyOptimizerKind(options.optimizer)));
  real("lr", options.lr);
  if (options.optimizer == OptimizerKind::Sgd) {
    real("momentum", options.momentum);
    real("dampening", options.dampening);
    config.set("nesterov", b.getBoolAttr(options.nesterov));
  }
  if (options.optimizer == OptimizerKind::Adamw) {
    real("beta1", options.beta1);
    real("beta2", options.beta2);
    real("eps", options.eps);
  }
  real("weight_decay", weightDecay);
  real("grad_clip", options.gradClip);
  if (!precision.empty())
    config.set("precision", b.getStringAttr(precision));
  if (lossConfig.get("loss_scale"))
    config.set("loss_scale_growth_interval",
               b.getI64IntegerAttr(options.lossScaleGrowthInterval));
  // The values above are the defaults of the step's run-time
  // hyperparameters (cleave_rt_enums.h), which the trainer may change.
  config.set("run_time_hyperparameters", b.getBoolAttr(true));
  return config.getDictionary(b.getContext());
}

struct AddOptimizerPass : cleave::impl::AddOptimizerPassBase<AddOptimizerPass> {
  using AddOptimizerPassBase::AddOptimizerPassBase;

  void runOnOperation() override {
    AddOptimizerPassOptions options;
    options.optimizer = optimizer;
    options.lr = lr;
    options.momentum = momentum;
    options.dampening = dampening;
    options.nesterov = nesterov;
    options.weightDecay = weightDecay;
    options.beta1 = beta1;
    options.beta2 = beta2;
    options.eps = eps;
    options.gradClip = gradClip;
    options.gradNorm = gradNorm;
    options.lossScaleGrowthInterval = lossScaleGrowthInterval;
    if (failed(addOptimizerUpdates(getOperation(), options,
                                   "-cleave-add-optimizer")))
      signalPassFailure();
  }
};

} // namespace

LogicalResult cleave::addOptimizerUpdates(
    ModuleOp module, const AddOptimizerPassOptions &options, StringRef pass) {
  if (failed(checkOptions(module, options)))
    return failure();
  FailureOr<func::FuncOp> found = lookupLossStep(
      module, pass, "gradients", "-cleave-add-loss and -cleave-differentiate");
  if (failed(found))
    return failure();
  func::FuncOp step = *found;
  Block *entry = &step.getBody().front();
  for (Operation &op : *entry)
    if (op.hasAttr(kMicrobatchLossAttr))
      return step.emitOpError("has no gradients: its loss is not "
                              "differentiated (run -cleave-differentiate "
                              "before ")
             << pass << ")";
  llvm::BitVector gradientResults;
  FailureOr<llvm::StringMap<Value>> grads =
      collectGradients(step, gradientResults);
  if (failed(grads))
    return failure();

  OpBuilder b(module.getContext());
  StepTagger tagger(module.getContext());
  b.setListener(&tagger);
  auto ret = cast<func::ReturnOp>(entry->getTerminator());
  b.setInsertionPoint(ret);
  tagger.phase = Phase::Optimizer;

  auto lossConfig = step->getAttrOfType<DictionaryAttr>(kLossAttr);
  ParamOp scaleState;
  Value lossScaleValue;
  if (lossConfig.get("loss_scale")) {
    auto scale = lookupLossScale(b, module, step);
    if (failed(scale))
      return failure();
    std::tie(scaleState, lossScaleValue) = *scale;
  }
  // The state parameters follow the model's (the loss scale's state,
  // which -cleave-differentiate added, goes after them).
  Operation *lastParam = nullptr;
  for (auto param : module.getOps<ParamOp>())
    if (param != scaleState)
      lastParam = param;
  double weightDecay =
      options.weightDecay >= 0.0
          ? options.weightDecay
          : (options.optimizer == OptimizerKind::Adamw ? 0.01 : 0.0);
  OptimizerBuilder builder(b, tagger, module, step, options);
  if (failed(builder.build(*grads, lastParam, scaleState, lossScaleValue,
                           weightDecay)))
    return failure();

  // The gradients are consumed: the step returns the rest (the loss), and
  // the gradient norm when it was computed.
  ret->eraseOperands(gradientResults);
  if (failed(step.eraseResults(gradientResults)))
    return failure();
  if (Value norm = builder.gradNorm()) {
    unsigned at = step.getNumResults();
    ret->insertOperands(at, norm);
    if (failed(step.insertResult(
            at, norm.getType(),
            b.getDictionaryAttr(b.getNamedAttr(
                "onnx.name", b.getStringAttr("grad_norm"))))))
      return failure();
  }
  auto precisionAttr = module->getAttrOfType<StringAttr>(kPrecisionAttr);
  step->removeAttr(kLossAttr);
  step->setAttr(
      kTrainingConfigAttr,
      trainingConfig(b, lossConfig, options, weightDecay,
                     precisionAttr ? precisionAttr.getValue() : StringRef()));
  eraseDeadOps(step);
  return success();
}
