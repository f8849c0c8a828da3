//===- Pipeline.cpp - the Cleave pass pipeline --------------------------===//
//
// buildCleavePipeline in four stages: the single-device program and, when
// differentiating, its loss and gradients; the optimizer; the distribution
// of the whole step over a mesh (--mesh); and the lowering of the local
// program to runtime calls. The checks of
// option combinations live here, once, for every driver.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Pipeline.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace cleave;

LogicalResult CleavePipelineOptions::verify(
    function_ref<LogicalResult(const Twine &)> emitError) const {
  bool optimizerOptions =
      optimizer.hasValue() || lr.hasValue() || momentum.hasValue() ||
      dampening.hasValue() || nesterov.hasValue() || weightDecay.hasValue() ||
      beta1.hasValue() || beta2.hasValue() || eps.hasValue() ||
      gradClip.hasValue() || gradNorm.hasValue() || accumulate.hasValue() ||
      lossScale.hasValue() ||
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
  if (recompute != "none" && recompute != "full")
    return emitError("--recompute must be none or full, not '" + recompute +
                     "'");
  if (recompute == "full" && !train)
    return emitError("--recompute full needs --train");
  if ((routerF32.hasValue() || keepF32.hasValue()) &&
      precision == Precision::F32)
    return emitError(
        "--router-f32 and --keep-f32 apply to --precision bf16 and fp16");
  if (!(lossScale >= 0.0) || std::isinf(lossScale))
    return emitError("--loss-scale must be finite and >= 0");
  if (lossScaleGrowthInterval < 1)
    return emitError("--loss-scale-growth-interval must be >= 1");
  if (bucketBytes < 0)
    return emitError("--bucket-bytes must be >= 0");
  if (runChunkSize < 0)
    return emitError("--run-chunk-size must be >= 0");
  llvm::SmallVector<std::string> axes = meshAxes();
  for (StringRef axis : axes) {
    auto [name, size] = axis.split('=');
    int64_t n = 0;
    if (name.empty() || size.getAsInteger(10, n) || n < 1)
      return emitError("--mesh: '" + axis +
                       "' is not an axis name=size with size >= 1");
    if (name != "dp" && name != "tp" && name != "pp" && name != "ep" &&
        name != "cp")
      return emitError("--mesh: unknown axis '" + name +
                       "' (dp splits the batch, tp the layers, ep the "
                       "experts, cp the sequence, pp cuts the layers into "
                       "pipeline stages)");
    if (llvm::count_if(axes, [&](StringRef a) {
          return a.split('=').first == name;
        }) > 1)
      return emitError("--mesh: axis '" + name + "' appears twice");
  }
  bool pipeline = hasMeshAxis("pp");
  if ((microbatches.hasValue() || schedule.hasValue() ||
       virtualStages.hasValue() || !pipelineSplit.empty() ||
       pipelineReport || trace.hasValue()) &&
      !pipeline)
    return emitError("--microbatches, --schedule, --virtual-stages, "
                     "--pipeline-split, --pipeline-report and --trace need "
                     "a pp axis in --mesh");
  if (pipeline && !train)
    return emitError("--mesh with pp pipelines the training step: it needs "
                     "--train");
  if (microbatches.hasValue() && accumulate.hasValue() &&
      microbatches != accumulate)
    return emitError("--microbatches and --accumulate are the same count; "
                     "give one");
  if (microbatches < 1)
    return emitError("--microbatches must be >= 1");
  if (pipeline && !axes.empty() && axes.front().rfind("pp=", 0) != 0)
    return emitError("--mesh: put pp first (the stages are the slowest "
                     "links, across nodes; dp and tp inside a stage)");
  if (zero < 0 || zero > 3)
    return emitError("--zero must be 0, 1, 2 or 3");
  auto meshIndex = [&](StringRef name) {
    return llvm::find_if(axes, [&](StringRef a) {
             return a.split('=').first == name;
           }) - axes.begin();
  };
  if (hasMeshAxis("ep") && hasMeshAxis("dp") &&
      meshIndex("ep") < meshIndex("dp"))
    return emitError("--mesh: put ep after dp (each data-parallel group's "
                     "ranks exchange their tokens over ep, the closer "
                     "links)");
  if (moeAuxLoss > 0 && moeDense)
    return emitError("--moe-aux-loss balances routed experts: a mixture kept "
                     "dense (--moe-dense) has no routing to balance");
  if (moeAuxLoss > 0 && !differentiates())
    return emitError("--moe-aux-loss is a training loss: it needs --train "
                     "(or --loss, for the gradients)");
  if (hasMeshAxis("ep") && moeDense)
    return emitError("--mesh with ep splits routed experts: it cannot keep "
                     "the mixture dense (--moe-dense)");
  if (zero.hasValue() && !hasMeshAxis("dp"))
    return emitError("--zero needs a dp axis in --mesh");
  if (sp && !hasMeshAxis("tp"))
    return emitError("--sp needs a tp axis in --mesh");
  if (distExplain && axes.empty())
    return emitError("--dist-explain needs --mesh");
  if (zero > 0 && !train)
    return emitError("--zero shards the training state: it needs --train");
  if (zero3GatherOnce && zero != 3)
    return emitError("--zero3-gather-once keeps ZeRO-3's gathered "
                     "parameters for the step: it needs --zero 3");
  if (!axes.empty() && loss.hasValue() && !train)
    return emitError("--mesh with --loss needs --train (the gradient "
                     "program returns whole gradients)");
  return success();
}

llvm::SmallVector<std::string> CleavePipelineOptions::meshAxes() const {
  llvm::SmallVector<std::string> axes;
  llvm::SmallVector<StringRef> parts;
  StringRef(mesh).split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef p : parts)
    axes.push_back(p.trim().str());
  return axes;
}

bool CleavePipelineOptions::hasMeshAxis(StringRef name) const {
  return llvm::any_of(meshAxes(), [&](StringRef a) {
    return a.split('=').first == name;
  });
}

RaisePassOptions CleavePipelineOptions::raiseOptions() const {
  RaisePassOptions options;
  options.moe = !moeDense;
  options.moeCapacityFactor = moeCapacityFactor;
  options.moeGroupSize = moeGroupSize;
  return options;
}

MixedPrecisionPassOptions CleavePipelineOptions::mixedPrecisionOptions() const {
  MixedPrecisionPassOptions options;
  options.precision = precision;
  options.routerF32 = routerF32;
  options.keepF32.assign(keepF32.begin(), keepF32.end());
  return options;
}

AddLossPassOptions CleavePipelineOptions::addLossOptions() const {
  AddLossPassOptions options;
  options.loss = loss;
  options.ignoreIndex = ignoreIndex;
  options.moeAuxLoss = moeAuxLoss;
  if (train)
    options.accumulate = stepMicrobatches();
  return options;
}

DifferentiatePassOptions CleavePipelineOptions::differentiateOptions() const {
  DifferentiatePassOptions options;
  // fp16's narrow range needs loss scaling unless asked otherwise; the
  // gradient program (no --train) returns the gradients unscaled.
  if (train)
    options.lossScale = lossScale.hasValue()          ? lossScale.getValue()
                        : precision == Precision::F16 ? 65536.0
                                                      : 0.0;
  return options;
}

AddOptimizerPassOptions CleavePipelineOptions::addOptimizerOptions() const {
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
  return options;
}

AutodiffPassOptions CleavePipelineOptions::autodiffOptions() const {
  AddLossPassOptions loss = addLossOptions();
  AutodiffPassOptions options;
  options.loss = loss.loss;
  options.ignoreIndex = loss.ignoreIndex;
  options.accumulate = loss.accumulate;
  options.moeAuxLoss = loss.moeAuxLoss;
  if (!train)
    return options; // no optimizer: the gradients
  options.lossScale = differentiateOptions().lossScale;
  AddOptimizerPassOptions optimizer = addOptimizerOptions();
  options.optimizer = optimizer.optimizer;
  options.lr = optimizer.lr;
  options.momentum = optimizer.momentum;
  options.dampening = optimizer.dampening;
  options.nesterov = optimizer.nesterov;
  options.weightDecay = optimizer.weightDecay;
  options.beta1 = optimizer.beta1;
  options.beta2 = optimizer.beta2;
  options.eps = optimizer.eps;
  options.gradClip = optimizer.gradClip;
  options.gradNorm = optimizer.gradNorm;
  options.lossScaleGrowthInterval = optimizer.lossScaleGrowthInterval;
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
/// patterns, the compute type and, when differentiating, the training
/// step's loss and the gradients of the parameters (as results of the step,
/// marked `cleave.gradient`).
static void addGradientPasses(OpPassManager &pm,
                              const CleavePipelineOptions &options,
                              bool eval = false) {
  pm.addPass(createRaisePass(options.raiseOptions()));
  // Tensor parallelism splits a fused query-key-value projection by heads.
  if (options.splitProjections || options.hasMeshAxis("tp"))
    pm.addPass(createSplitProjectionsPass());
  if (options.precision != Precision::F32)
    pm.addPass(createMixedPrecisionPass(options.mixedPrecisionOptions()));
  if (eval) {
    // The loss the step reports, without the load-balancing term.
    AddLossPassOptions loss = options.addLossOptions();
    loss.moeAuxLoss = 0.0;
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createAddLossPass(loss));
    return;
  }
  if (options.differentiates()) {
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createAddLossPass(options.addLossOptions()));
    pm.addPass(createDifferentiatePass(options.differentiateOptions()));
  }
}

/// The distribution of the step over a device mesh: global program in,
/// per-rank local program with explicit collectives out. It runs on the
/// whole training step, optimizer included, so that ZeRO's shardings of
/// the state, gradient clipping's global norm and the loss's reduction are
/// all ordinary partitioning. Fusion runs after it, on the local program.
static void addDistributionPasses(OpPassManager &pm,
                                  const CleavePipelineOptions &options,
                                  bool eval = false) {
  llvm::SmallVector<std::string> axes = options.meshAxes();
  if (axes.empty())
    return; // one device
  DistAddMeshPassOptions mesh;
  mesh.axes.assign(axes.begin(), axes.end());
  pm.addPass(createDistAddMeshPass(mesh));
  if (options.hasMeshAxis("tp")) {
    DistTensorParallelPassOptions tp;
    tp.axis = "tp";
    pm.addPass(createDistTensorParallelPass(tp));
    if (options.sp) {
      DistSequenceParallelPassOptions sp;
      sp.axis = "tp";
      pm.addPass(createDistSequenceParallelPass(sp));
    }
  }
  if (options.hasMeshAxis("ep")) {
    DistExpertParallelPassOptions ep;
    ep.axis = "ep";
    pm.addPass(createDistExpertParallelPass(ep));
  }
  if (options.hasMeshAxis("cp")) {
    DistContextParallelPassOptions cp;
    cp.axis = "cp";
    cp.form = options.cpForm == ContextParallelForm::Gather ? "gather" : "ring";
    cp.layout = options.cpLayout == ContextParallelLayout::Contiguous
                    ? "contiguous"
                    : "zigzag";
    pm.addPass(createDistContextParallelPass(cp));
  }
  // After tp, ep and cp: ZeRO splits what they left whole.
  if (options.hasMeshAxis("dp")) {
    DistDataParallelPassOptions dp;
    dp.axis = "dp";
    dp.zero = options.zero;
    pm.addPass(createDistDataParallelPass(dp));
  }
  pm.addPass(createDistPropagatePass());
  pm.addPass(createDistPartitionPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  DistOptimizeCollectivesPassOptions collectives;
  collectives.gatherOnce = options.zero3GatherOnce;
  pm.addPass(createDistOptimizeCollectivesPass(collectives));
  // --dist-explain explains the training step, not its evaluation.
  if (options.distExplain && !eval)
    pm.addPass(createDistExplainPass());
  if (options.hasMeshAxis("pp")) {
    DistPipelineParallelPassOptions pp;
    pp.axis = "pp";
    pp.schedule = options.schedule;
    pp.virtualStages = options.virtualStages.hasValue() ? options.virtualStages
                       : options.schedule == "interleaved" ? 2
                                                           : 1;
    pp.split.assign(options.pipelineSplit.begin(),
                    options.pipelineSplit.end());
    pp.report = options.pipelineReport;
    pp.trace = options.trace;
    pm.addPass(createDistPipelineParallelPass(pp));
  }
}

/// The updates of the parameters from the gradients, when training, and
/// the clean-up of the step.
static void addOptimizerPasses(OpPassManager &pm,
                               const CleavePipelineOptions &options) {
  if (options.train)
    pm.addPass(createAddOptimizerPass(options.addOptimizerOptions()));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

/// The local program to runtime calls: fused kernels, the arena plan, and
/// the calls of the runtime C ABI in the LLVM dialect.
static void addLoweringPasses(OpPassManager &pm,
                              const CleavePipelineOptions &options,
                              StringRef symbolPrefix = "") {
  // Collectives in the engine's layout, their packing planned like any op.
  pm.addPass(createNormalizeCollectivesPass());
  if (options.bucketBytes > 0) {
    BucketCollectivesPassOptions bucket;
    bucket.bucketBytes = options.bucketBytes;
    pm.addPass(createBucketCollectivesPass(bucket));
  }
  // Communication overlapping compute: collectives started early, waited
  // for before their first reader.
  pm.addPass(createOverlapCollectivesPass());
  // Before the fusion, which drops the phase and layer of what it fuses;
  // no CSE may follow, which would merge the recomputed ops back.
  if (options.recompute == "full" && symbolPrefix.empty())
    pm.addPass(createRecomputePass());
  if (!options.noFusion)
    pm.addPass(createFuseLinearPass());
  pm.addPass(createPlanMemoryPass());
  LowerToRuntimePassOptions lower;
  lower.symbolPrefix = symbolPrefix.str();
  lower.profile = !options.noProfileMarks;
  lower.chunkSize = options.runChunkSize;
  pm.addPass(createLowerToRuntimePass(lower));
}

void cleave::buildCleavePipeline(OpPassManager &pm,
                                 const CleavePipelineOptions &options) {
  addGradientPasses(pm, options);
  addOptimizerPasses(pm, options);
  addDistributionPasses(pm, options);
  if (!options.hasMeshAxis("pp")) {
    addLoweringPasses(pm, options);
    return;
  }
  // Each pipeline stage is a program of its own, in a nested module; the
  // lowered stages are then joined into one program.
  addLoweringPasses(pm.nest<ModuleOp>(), options);
  pm.addPass(createLinkStagesPass());
}

bool cleave::hasEvalProgram(const CleavePipelineOptions &options) {
  return options.train && !options.hasMeshAxis("pp");
}

void cleave::buildCleaveEvalPipeline(OpPassManager &pm,
                                     const CleavePipelineOptions &options) {
  addGradientPasses(pm, options, /*eval=*/true);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  addDistributionPasses(pm, options, /*eval=*/true);
  addLoweringPasses(pm, options, "cleave_eval_");
}

/// Registers a pipeline named `name` that parses and verifies the options,
/// then has `build` (which may refuse them) add its passes.
static void registerWithOptions(
    StringRef name, StringRef description,
    std::function<LogicalResult(OpPassManager &, const CleavePipelineOptions &,
                                function_ref<LogicalResult(const Twine &)>)>
        build) {
  registerPassPipeline(
      name, description,
      [build](OpPassManager &pm, StringRef text,
              function_ref<LogicalResult(const Twine &)> errorHandler) {
        CleavePipelineOptions options;
        if (failed(options.parseFromString(text)) ||
            failed(options.verify(errorHandler)))
          return failure();
        return build(pm, options, errorHandler);
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optionsHandler) {
        optionsHandler(CleavePipelineOptions());
      });
}

void cleave::registerCleavePipelines() {
  registerWithOptions(
      "cleave-pipeline",
      "The pipeline of cleave-compile: graph IR to runtime calls in the "
      "LLVM dialect (the options are cleave-compile's flags)",
      [](OpPassManager &pm, const CleavePipelineOptions &options,
         function_ref<LogicalResult(const Twine &)>) {
        buildCleavePipeline(pm, options);
        return success();
      });
  registerWithOptions(
      "cleave-eval-pipeline",
      "The evaluation program of a training step (cleave-compile links it "
      "into the training binary): its forward pass and loss to runtime "
      "calls, symbols prefixed cleave_eval_ (the options are "
      "cleave-compile's flags, with train)",
      [](OpPassManager &pm, const CleavePipelineOptions &options,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        if (!hasEvalProgram(options))
          return errorHandler("an evaluation program needs train, and no pp "
                              "axis in mesh");
        buildCleaveEvalPipeline(pm, options);
        return success();
      });
}
