//===- Pipeline.cpp - the Cleave pass pipeline --------------------------===//
//
// buildCleavePipeline in three stages: the single-device training step, the
// distribution of the program over a mesh (its place is kept, its passes are
// to come), and the lowering of the local program to runtime calls. The
// checks of option combinations live here, once, for every driver.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Pipeline.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <cmath>

using namespace mlir;
using namespace cleave;

LogicalResult CleavePipelineOptions::verify(
    function_ref<LogicalResult(const Twine &)> emitError) const {
  bool optimizerOptions =
      optimizer.hasValue() || lr.hasValue() || momentum.hasValue() ||
      dampening.hasValue() || nesterov.hasValue() || weightDecay.hasValue() ||
      beta1.hasValue() || beta2.hasValue() || eps.hasValue() ||
      gradClip.hasValue() || accumulate.hasValue() || lossScale.hasValue() ||
      lossScaleGrowthInterval.hasValue();
  if (optimizerOptions && !train)
    return emitError("optimizer options need --train");
  if (optimizer == OptimizerKind::Adamw &&
      (momentum.hasValue() || dampening.hasValue() || nesterov.hasValue()))
    return emitError(
        "--momentum, --dampening and --nesterov apply to --optimizer sgd");
  if (optimizer == OptimizerKind::Sgd &&
      (beta1.hasValue() || beta2.hasValue() || eps.hasValue()))
    return emitError("--beta1, --beta2 and --eps apply to --optimizer adamw");
  if (accumulate < 1)
    return emitError("--accumulate must be >= 1");
  if ((routerF32.hasValue() || keepF32.hasValue()) &&
      precision == Precision::F32)
    return emitError(
        "--router-f32 and --keep-f32 apply to --precision bf16 and fp16");
  if (!(lossScale >= 0.0) || std::isinf(lossScale))
    return emitError("--loss-scale must be finite and >= 0");
  if (lossScaleGrowthInterval < 1)
    return emitError("--loss-scale-growth-interval must be >= 1");
  return success();
}

MixedPrecisionPassOptions CleavePipelineOptions::mixedPrecisionOptions() const {
  MixedPrecisionPassOptions options;
  options.precision = precision;
  options.routerF32 = routerF32;
  options.keepF32.assign(keepF32.begin(), keepF32.end());
  return options;
}

AutodiffPassOptions CleavePipelineOptions::autodiffOptions() const {
  AutodiffPassOptions options;
  options.loss = loss;
  options.ignoreIndex = ignoreIndex;
  if (!train)
    return options; // no optimizer: the gradients
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
  options.accumulate = accumulate;
  // fp16's narrow range needs loss scaling unless asked otherwise.
  options.lossScale = lossScale.hasValue()          ? lossScale.getValue()
                      : precision == Precision::F16 ? 65536.0
                                                    : 0.0;
  options.lossScaleGrowthInterval = lossScaleGrowthInterval;
  return options;
}

void CleavePipelineOptions::addToCommandLine(
    function_ref<llvm::cl::OptionCategory &(StringRef)> categoryOf) {
  // PassOptions is an llvm::cl::SubCommand that its options are registered
  // in; registering each in the top-level command too makes it a flag of
  // the tool, which the tool's parse sets here.
  SmallVector<llvm::cl::Option *> options;
  for (auto &entry : OptionsMap)
    options.push_back(entry.second);
  for (llvm::cl::Option *option : options) {
    option->removeArgument();
    option->addSubCommand(llvm::cl::SubCommand::getTopLevel());
    option->addCategory(categoryOf(option->ArgStr));
    option->addArgument();
  }
}

/// The single-device program: fused ops raised from the exporter's
/// patterns, the compute type and, when differentiating, the training step.
static void addTrainingStepPasses(OpPassManager &pm,
                                  const CleavePipelineOptions &options) {
  pm.addPass(createRaisePass());
  if (options.splitProjections)
    pm.addPass(createSplitProjectionsPass());
  if (options.precision != Precision::F32)
    pm.addPass(createMixedPrecisionPass(options.mixedPrecisionOptions()));
  if (options.differentiates()) {
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createAutodiffPass(options.autodiffOptions()));
  }
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

/// The distribution of the training step over a device mesh: global program
/// in, per-rank local program with explicit collectives out.
static void addDistributionPasses(OpPassManager &pm,
                                  const CleavePipelineOptions &options) {
  // The distribution passes go here, before memory planning and after the
  // training step (whose gradients and optimizer state they shard), with
  // their options (the mesh, the strategies) in CleavePipelineOptions:
  //   strategy passes: -dist-data-parallel (zero=0..3),
  //     -dist-tensor-parallel, -dist-sequence-parallel,
  //     -dist-context-parallel, -dist-expert-parallel,
  //     -dist-pipeline-parallel
  //   -dist-propagate
  //   -dist-pipeline-split
  //   -dist-partition
  //   -dist-optimize-collectives
  // Fusion runs after them, on the local program (fused ops have no
  // sharding rules). Without a mesh the program stays single-device.
  (void)pm;
  (void)options;
}

/// The local program to runtime calls: fused kernels, the arena plan, and
/// the calls of the runtime C ABI in the LLVM dialect.
static void addLoweringPasses(OpPassManager &pm,
                              const CleavePipelineOptions &options) {
  // Collectives in the engine's layout, their packing planned like any op.
  pm.addPass(createNormalizeCollectivesPass());
  if (!options.noFusion)
    pm.addPass(createFuseLinearPass());
  pm.addPass(createPlanMemoryPass());
  pm.addPass(createLowerToRuntimePass());
}

void cleave::buildCleavePipeline(OpPassManager &pm,
                                 const CleavePipelineOptions &options) {
  addTrainingStepPasses(pm, options);
  addDistributionPasses(pm, options);
  addLoweringPasses(pm, options);
}

void cleave::registerCleavePipelines() {
  registerPassPipeline(
      "cleave-pipeline",
      "The pipeline of cleave-compile: graph IR to runtime calls in the "
      "LLVM dialect (the options are cleave-compile's flags)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        CleavePipelineOptions options;
        if (failed(options.parseFromString(text)) ||
            failed(options.verify(errorHandler)))
          return failure();
        buildCleavePipeline(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optionsHandler) {
        optionsHandler(CleavePipelineOptions());
      });
}
