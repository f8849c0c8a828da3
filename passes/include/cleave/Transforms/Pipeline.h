//===- Pipeline.h - the Cleave pass pipeline and its options ----*- C++ -*-===//
//
// The one pass pipeline from graph IR to runtime calls in the LLVM dialect,
// and its options. cleave-compile's pipeline flags are these options (bound
// into its command line), cleave-opt runs it as --cleave-pipeline='...', and
// tests build it from C++, so all three run the same passes.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_PIPELINE_H
#define CLEAVE_TRANSFORMS_PIPELINE_H

#include "cleave/Transforms/Passes.h"

#include "mlir/Pass/PassOptions.h"

namespace cleave {

/// How context parallelism (--mesh cp=N) meets the keys and values.
enum class ContextParallelForm {
  /// Pass the key/value blocks around the devices (ring attention).
  Ring,
  /// Gather the keys and values whole on every device.
  Gather,
};

/// How context parallelism lays the sequence out over the cp devices.
enum class ContextParallelLayout {
  /// Device r of n holds chunks r and 2n - 1 - r of 2n: a causal
  /// attention's work is the same on every device.
  Zigzag,
  /// Device r holds chunk r of n.
  Contiguous,
};

/// The options of the pipeline, named as cleave-compile's flags: `--lr 0.1`
/// there is `lr=0.1` in a textual pipeline. Defaults are PyTorch's. An
/// option's `hasValue()` says whether it was given, which some options need
/// (--loss without --train, the default loss scale of fp16).
struct CleavePipelineOptions
    : public mlir::PassPipelineOptions<CleavePipelineOptions> {
  //===--- The training step (-cleave-add-loss, -cleave-differentiate,
  //===--- -cleave-add-optimizer) -----------------------------------------===//

  PassOptions::Option<bool> train{
      *this, "train",
      llvm::cl::desc("Compile a training step: the program takes the model's "
                     "inputs and the loss's target, returns the loss and "
                     "updates the parameters in place")};
  PassOptions::Option<LossKind> loss{
      *this, "loss",
      llvm::cl::desc("Loss on the model's first output (default "
                     "cross-entropy); given without --train, the program "
                     "returns the loss and grad.<param> of each parameter"),
      llvm::cl::init(LossKind::CrossEntropy),
      llvm::cl::values(clEnumValN(LossKind::CrossEntropy, "cross-entropy",
                                  "integer labels, mean over positions"),
                       clEnumValN(LossKind::Mse, "mse", "float targets"))};
  PassOptions::Option<std::string> ignoreIndex{
      *this, "ignore-index",
      llvm::cl::desc("Cross-entropy: positions whose label is this value add "
                     "no loss (e.g. -100, PyTorch's padding convention; "
                     "default: none)"),
      llvm::cl::value_desc("label")};
  PassOptions::Option<OptimizerKind> optimizer{
      *this, "optimizer", llvm::cl::desc("Optimizer (default adamw)"),
      llvm::cl::init(OptimizerKind::Adamw),
      llvm::cl::values(
          clEnumValN(OptimizerKind::Sgd, "sgd", "torch.optim.SGD"),
          clEnumValN(OptimizerKind::Adamw, "adamw", "torch.optim.AdamW"))};
  PassOptions::Option<double> lr{*this, "lr",
                                 llvm::cl::desc("Learning rate (default 1e-3)"),
                                 llvm::cl::init(1e-3)};
  PassOptions::Option<double> momentum{
      *this, "momentum", llvm::cl::desc("SGD momentum (default 0)"),
      llvm::cl::init(0.0)};
  PassOptions::Option<double> dampening{
      *this, "dampening", llvm::cl::desc("SGD dampening (default 0)"),
      llvm::cl::init(0.0)};
  PassOptions::Option<bool> nesterov{*this, "nesterov",
                                     llvm::cl::desc("SGD Nesterov momentum")};
  PassOptions::Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (default 0 for sgd, 0.01 for adamw, "
                     "decoupled for adamw)"),
      llvm::cl::init(-1.0)};
  PassOptions::Option<double> beta1{*this, "beta1",
                                    llvm::cl::desc("AdamW beta1 (default 0.9)"),
                                    llvm::cl::init(0.9)};
  PassOptions::Option<double> beta2{
      *this, "beta2", llvm::cl::desc("AdamW beta2 (default 0.999)"),
      llvm::cl::init(0.999)};
  PassOptions::Option<double> eps{
      *this, "eps", llvm::cl::desc("AdamW epsilon (default 1e-8)"),
      llvm::cl::init(1e-8)};
  PassOptions::Option<double> gradClip{
      *this, "grad-clip",
      llvm::cl::desc("Clip the global gradient 2-norm to this value, as "
                     "clip_grad_norm_ (default off)"),
      llvm::cl::init(0.0)};
  PassOptions::Option<bool> gradNorm{
      *this, "grad-norm",
      llvm::cl::desc("Compute the global gradient 2-norm (before clipping) "
                     "every step without clipping too, for the training "
                     "binary's log (with --grad-clip it always is)")};
  PassOptions::Option<int64_t> accumulate{
      *this, "accumulate",
      llvm::cl::desc("Microbatches per step: the program's inputs hold K "
                     "batches of the model's batch size as a leading "
                     "dimension [K, B, ...], each run forward and backward "
                     "in turn before one update (default 1)"),
      llvm::cl::init(1)};
  PassOptions::Option<double> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("Initial dynamic loss scale, as "
                     "torch.cuda.amp.GradScaler: a step with inf/NaN "
                     "gradients is skipped and halves the scale (default "
                     "65536 with --precision fp16, else off; 0: off)"),
      llvm::cl::init(0.0)};
  PassOptions::Option<int64_t> lossScaleGrowthInterval{
      *this, "loss-scale-growth-interval",
      llvm::cl::desc("Finite steps in a row after which the loss scale "
                     "doubles (default 2000)"),
      llvm::cl::init(2000)};

  //===--- The model's form -----------------------------------------------===//

  PassOptions::Option<bool> splitProjections{
      *this, "split-projections",
      llvm::cl::desc("Compute each part of a fused, split projection (GPT-2's "
                     "QKV) as its own projection of its weight's block "
                     "(-cleave-split-projections), as tensor parallelism "
                     "needs; the weights keep their names and bytes")};

  PassOptions::Option<bool> moeDense{
      *this, "moe-dense",
      llvm::cl::desc("Keep a mixture of experts as the model wrote it, every "
                     "expert on every token (default: raised to routed "
                     "experts, which run only on their tokens and which "
                     "expert parallelism splits)")};
  PassOptions::Option<double> moeCapacityFactor{
      *this, "moe-capacity-factor",
      llvm::cl::desc("Routed experts: slots per expert and routing group, "
                     "ceil(f * k * group tokens / experts), the assignments "
                     "beyond them dropped as GShard and Switch do; 0 (the "
                     "default) is dropless and computes what the dense "
                     "form does"),
      llvm::cl::value_desc("f"), llvm::cl::init(0.0)};
  PassOptions::Option<int64_t> moeGroupSize{
      *this, "moe-group-size",
      llvm::cl::desc("Routed experts: tokens per routing group, over which "
                     "capacity is counted (default: one sequence); a "
                     "sharded run splits whole groups, so it drops exactly "
                     "what one device drops"),
      llvm::cl::value_desc("tokens"), llvm::cl::init(0)};
  PassOptions::Option<double> moeAuxLoss{
      *this, "moe-aux-loss",
      llvm::cl::desc("Routed experts: the coefficient of the load-balancing "
                     "loss added to the training loss, E * sum over experts "
                     "of (share of the assignments) x (mean router "
                     "probability) per mixture, as Switch Transformer's "
                     "(0.01 there); 0 (the default): none"),
      llvm::cl::value_desc("alpha"), llvm::cl::init(0.0)};

  //===--- The compute type (-cleave-mixed-precision) ---------------------===//

  PassOptions::Option<Precision> precision{
      *this, "precision",
      llvm::cl::desc(
          "Compute type (default fp32). bf16 and fp16 compute activations "
          "(and, training, their gradients) in 16 bits, with f32 "
          "accumulation in every kernel; parameters, their gradients and "
          "the optimizer state stay f32 (master weights). fp16 training "
          "adds dynamic loss scaling"),
      llvm::cl::init(Precision::F32),
      llvm::cl::values(
          clEnumValN(Precision::F32, "fp32", "the model's own types"),
          clEnumValN(Precision::BF16, "bf16", "bfloat16"),
          clEnumValN(Precision::F16, "fp16", "IEEE half"))};
  PassOptions::Option<bool> routerF32{
      *this, "router-f32",
      llvm::cl::desc("With --precision bf16|fp16, keep the routing decision "
                     "in f32: each top-k selection (the MoE router) and the "
                     "ops that only feed it, such as the router's matmul and "
                     "softmax (default on; --router-f32=false computes them "
                     "in 16 bits too)"),
      llvm::cl::init(true)};
  PassOptions::ListOption<std::string> keepF32{
      *this, "keep-f32",
      llvm::cl::desc("With --precision bf16|fp16, graph ops that compute and "
                     "store in f32 (mnemonics, comma-separated, e.g. "
                     "softmax,layer_norm; their consumers read them cast to "
                     "16 bits)"),
      llvm::cl::value_desc("ops")};

  //===--- The distribution over a device mesh -----------------------------===//

  PassOptions::Option<std::string> mesh{
      *this, "mesh",
      llvm::cl::desc("Split the program over a mesh of devices, axes major "
                     "to minor: dp=2,tp=2 (one rank per device, launched by "
                     "mpirun -np <product>). `dp` splits the batch "
                     "(-dist-data-parallel); `tp` splits the layers "
                     "(-dist-tensor-parallel); `ep` splits a mixture's "
                     "experts and the batch, tokens exchanged by "
                     "all-to-all (-dist-expert-parallel), after dp; `cp` "
                     "splits the sequence, key/value blocks passed "
                     "around the cp devices (ring attention; "
                     "--cp-form, --cp-layout; -dist-context-parallel); "
                     "`pp` "
                     "cuts the layers into pipeline stages "
                     "(-dist-pipeline-parallel), put it first"),
      llvm::cl::value_desc("axis=size,...")};

  PassOptions::Option<int64_t> zero{
      *this, "zero",
      llvm::cl::desc("ZeRO stage of the data-parallel axis: 0 (replicated "
                     "state), 1 and 2 (optimizer state and gradients split "
                     "over dp), 3 (parameters too, gathered before each "
                     "use, as FSDP)"),
      llvm::cl::init(0)};

  PassOptions::Option<bool> zero3GatherOnce{
      *this, "zero3-gather-once",
      llvm::cl::desc("With --zero 3 and several microbatches: gather each "
                     "parameter block once per step and keep it for every "
                     "microbatch (one gather per parameter instead of two "
                     "per microbatch; the parameters are whole for the "
                     "whole step, as under ZeRO-2)")};

  PassOptions::Option<bool> sp{
      *this, "sp",
      llvm::cl::desc("Megatron sequence parallelism on the tp axis: the "
                     "tokens between the tensor-parallel regions split over "
                     "tp, reduce-scatter and all-gather in place of each "
                     "all-reduce (-dist-sequence-parallel)")};

  PassOptions::Option<ContextParallelForm> cpForm{
      *this, "cp-form",
      llvm::cl::desc("How context parallelism (--mesh cp=N) attends over "
                     "the sequence split on cp (-dist-context-parallel)"),
      llvm::cl::init(ContextParallelForm::Ring),
      llvm::cl::values(
          clEnumValN(ContextParallelForm::Ring, "ring",
                     "each device's queries meet the key/value blocks "
                     "passed around the cp devices, merged by log-sum-exp "
                     "(ring attention; the default)"),
          clEnumValN(ContextParallelForm::Gather, "gather",
                     "the keys and values are gathered whole on every "
                     "device (Llama 3's all-gather form)"))};

  PassOptions::Option<ContextParallelLayout> cpLayout{
      *this, "cp-layout",
      llvm::cl::desc("How context parallelism (--mesh cp=N) lays the "
                     "sequence out over the cp devices"),
      llvm::cl::init(ContextParallelLayout::Zigzag),
      llvm::cl::values(
          clEnumValN(ContextParallelLayout::Zigzag, "zigzag",
                     "device r of n holds chunks r and 2n-1-r of 2n, so a "
                     "causal attention's work is balanced (the default; "
                     "the sequence must divide by 2n)"),
          clEnumValN(ContextParallelLayout::Contiguous, "contiguous",
                     "device r holds chunk r of n"))};

  PassOptions::Option<int64_t> microbatches{
      *this, "microbatches",
      llvm::cl::desc("Microbatches per step for the pipeline (--mesh "
                     "pp=N): the same as --accumulate, the inputs [M, B, "
                     "...]; at least the stages to fill the pipeline"),
      llvm::cl::init(1)};

  PassOptions::Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("The pipeline schedule of the pp axis: gpipe, 1f1b "
                     "(the default: at most p microbatches in flight) or "
                     "interleaved (--virtual-stages chunks per stage)"),
      llvm::cl::init("1f1b")};

  PassOptions::Option<int64_t> virtualStages{
      *this, "virtual-stages",
      llvm::cl::desc("Model chunks per pipeline stage of the interleaved "
                     "schedule (default 2 with --schedule interleaved)"),
      llvm::cl::init(1)};

  PassOptions::ListOption<int64_t> pipelineSplit{
      *this, "pipeline-split",
      llvm::cl::desc("The first layer of each pipeline chunk after the "
                     "first (default: balanced by estimated FLOPs)")};

  PassOptions::Option<bool> pipelineReport{
      *this, "pipeline-report",
      llvm::cl::desc("Print the pipeline's stages, the schedule's bubble "
                     "and the activations each stage holds")};

  PassOptions::Option<std::string> trace{
      *this, "trace",
      llvm::cl::desc("Write the planned pipeline schedule as a Chrome trace "
                     "(Perfetto, chrome://tracing) to this file"),
      llvm::cl::value_desc("schedule.json")};

  PassOptions::Option<bool> distExplain{
      *this, "dist-explain",
      llvm::cl::desc("Print each collective of the partitioned step with "
                     "its place, its bytes per rank and what caused it "
                     "(-dist-explain)")};

  //===--- The lowering of the local program ------------------------------===//

  PassOptions::Option<bool> noFusion{
      *this, "no-fusion",
      llvm::cl::desc("Keep each matmul, bias add and GELU a kernel of its "
                     "own instead of one fused linear kernel "
                     "(-cleave-fuse-linear), e.g. to compare the two")};

  PassOptions::Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("Activation recomputation of the training step: none "
                     "(the default) or full, each layer's forward computed "
                     "again in its backward so that only the layers' inputs "
                     "are held (-cleave-recompute); attention's scores are "
                     "recomputed by its fused kernel either way"),
      llvm::cl::init("none")};

  PassOptions::Option<bool> noProfileMarks{
      *this, "no-profile-marks",
      llvm::cl::desc("Leave out the profiler's marks (a call before each "
                     "op, which returns at once unless the trainer runs "
                     "with --profile), e.g. to measure what they cost")};

  PassOptions::Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("A partitioned program: reduce the gradients in "
                     "buckets of at most this many bytes, one all-reduce "
                     "each (-cleave-bucket-collectives; 0, the default: "
                     "one per gradient, each overlapping compute)"),
      llvm::cl::init(0)};

  PassOptions::Option<int64_t> runChunkSize{
      *this, "run-chunk-size",
      llvm::cl::desc("Cut the program's run function into noinline "
                     "functions of at most this many runtime calls each "
                     "(-cleave-lower-to-runtime chunk-size), which bounds "
                     "LLVM's compile time on large models (default 256; 0: "
                     "one function)"),
      llvm::cl::init(256)};

  /// Checks the options together (--momentum needs --optimizer sgd, ...):
  /// the first problem goes to `emitError`, whose result is returned.
  mlir::LogicalResult
  verify(llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)> emitError)
      const;

  /// Whether the pipeline differentiates the model: with --train, or with
  /// --loss alone for the gradients.
  bool differentiates() const { return train || loss.hasValue(); }

  /// The axes of --mesh as name=size entries (verify() checks them).
  llvm::SmallVector<std::string> meshAxes() const;
  /// Microbatches per step: --microbatches, else --accumulate.
  int64_t stepMicrobatches() const {
    return microbatches.hasValue() ? int64_t(microbatches)
                                   : int64_t(accumulate);
  }
  /// Whether --mesh has the axis `name`.
  bool hasMeshAxis(llvm::StringRef name) const;

  /// The options of the passes, projected out of these.
  RaisePassOptions raiseOptions() const;
  MixedPrecisionPassOptions mixedPrecisionOptions() const;
  AddLossPassOptions addLossOptions() const;
  DifferentiatePassOptions differentiateOptions() const;
  AddOptimizerPassOptions addOptimizerOptions() const;
  /// The three together, as the one pass -cleave-autodiff takes them.
  AutodiffPassOptions autodiffOptions() const;

  /// Makes every option a flag of the tool's own command line as well,
  /// listed by --help under `categoryOf(flag)`, so that
  /// llvm::cl::ParseCommandLineOptions sets it in this object. One object
  /// per tool, bound before parsing and alive until the tool exits.
  void addToCommandLine(
      llvm::function_ref<llvm::cl::OptionCategory &(llvm::StringRef flag)>
          categoryOf);
};

/// Adds the pipeline to `pm` (a module pass manager): the model's form, the
/// loss and its gradients, the distribution of the program (to come), the
/// optimizer, and the lowering of the local program to runtime calls.
/// `options` must have been verified.
void buildCleavePipeline(mlir::OpPassManager &pm,
                         const CleavePipelineOptions &options);

/// Whether a training step of these options has an evaluation program:
/// with --train, unless the step is pipelined (--mesh pp=N; its
/// forward-only schedule is still to come).
bool hasEvalProgram(const CleavePipelineOptions &options);

/// Adds the pipeline of the training step's evaluation program to `pm`: the
/// same model's form, compute type, loss and distribution, but no backward
/// and no optimizer (the step's forward pass and loss only, without an
/// auxiliary loss), lowered with its symbols prefixed cleave_eval_ for
/// -cleave-link-eval. `options` must have been verified and
/// hasEvalProgram(options) hold.
void buildCleaveEvalPipeline(mlir::OpPassManager &pm,
                             const CleavePipelineOptions &options);

/// Registers the pipelines as `cleave-pipeline` and `cleave-eval-pipeline`
/// (once per process).
void registerCleavePipelines();

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_PIPELINE_H
