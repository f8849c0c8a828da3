//===- Autodiff.cpp - training step from the forward function -----------===//
//
// -cleave-autodiff builds `@train_step` from `@forward` in one pass: it runs
// the stages of -cleave-add-loss, -cleave-differentiate and, when asked,
// -cleave-add-optimizer in sequence (TrainingStep.h), after checking its
// options together. Without an optimizer the step returns the gradients,
// without the attributes that hand it between the three passes.
//
//===----------------------------------------------------------------------===//

#include "TrainingStep.h"

#include <cmath>

namespace cleave {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

namespace {

struct AutodiffPass : cleave::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override;

private:
  /// The options together, before any stage changes the module.
  LogicalResult checkOptions(ModuleOp module);
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

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions(module)))
    return signalPassFailure();
  constexpr llvm::StringLiteral pass("-cleave-autodiff");

  AddLossPassOptions lossOptions;
  lossOptions.loss = loss;
  lossOptions.ignoreIndex = ignoreIndex;
  lossOptions.accumulate = accumulate;
  lossOptions.moeAuxLoss = moeAuxLoss;
  if (failed(buildLossStep(module, lossOptions, pass)))
    return signalPassFailure();

  DifferentiatePassOptions differentiateOptions;
  differentiateOptions.lossScale = lossScale;
  int64_t rules = 0;
  if (failed(differentiateStep(module, differentiateOptions, pass, rules)))
    return signalPassFailure();
  numRules = rules;

  if (optimizer == OptimizerKind::None) {
    // The gradient program: the hand-over attributes have no reader.
    func::FuncOp step = *lookupLossStep(module, pass, "", "");
    step->removeAttr(kLossAttr);
    for (unsigned i = 0; i < step.getNumResults(); ++i)
      step.removeResultAttr(
          i, StringAttr::get(module.getContext(), kGradientAttr));
    return;
  }
  AddOptimizerPassOptions optimizerOptions;
  optimizerOptions.optimizer = optimizer;
  optimizerOptions.lr = lr;
  optimizerOptions.momentum = momentum;
  optimizerOptions.dampening = dampening;
  optimizerOptions.nesterov = nesterov;
  optimizerOptions.weightDecay = weightDecay;
  optimizerOptions.beta1 = beta1;
  optimizerOptions.beta2 = beta2;
  optimizerOptions.eps = eps;
  optimizerOptions.gradClip = gradClip;
  optimizerOptions.gradNorm = gradNorm;
  optimizerOptions.lossScaleGrowthInterval = lossScaleGrowthInterval;
  if (failed(addOptimizerUpdates(module, optimizerOptions, pass)))
    return signalPassFailure();
}

} // namespace
