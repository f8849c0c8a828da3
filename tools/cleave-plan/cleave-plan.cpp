//===- cleave-plan.cpp - how to split a model over a cluster ------------===//
//
// The planner's command line (DESIGN.md section 7):
//   cleave-plan --preset llama3-70b --cluster h100 --gpus 64
//   cleave-plan model.onnx --cluster a100-80g --gpus 8 --tp 2 --pp 2 --dp 2
//   cleave-plan --arch gpt --layers 24 --hidden 2048 --heads 16 --vocab 50257
//               --seq 2048 --cluster h100 --gpus 16 --json --out plan.json
// Given degrees are checked and the rest searched; the fastest layout that
// fits is reported with a ranked table, as JSON, and as a plan file.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/ModelReader.h"
#include "cleave/Planner/Report.h"
#include "cleave/Tools/ToolVersion.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <set>

using namespace llvm;
using namespace cleave::planner;

namespace {

cl::OptionCategory modelCat("Model (a file, a --preset, or --arch and shapes)");
cl::OptionCategory trainCat("Training");
cl::OptionCategory clusterCat("Cluster");
cl::OptionCategory layoutCat("Layout (given degrees are checked, the rest "
                             "searched)");
cl::OptionCategory outputCat("Output");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("[model.onnx|.mlir]"),
                               cl::init(""), cl::cat(modelCat));
cl::opt<std::string>
    preset("preset",
           cl::desc("gpt3-175b, llama3-8b, llama3-70b, llama3-405b, "
                    "mixtral-8x7b (--list-presets)"),
           cl::cat(modelCat));
cl::opt<std::string> arch("arch", cl::desc("gpt, llama or moe"),
                          cl::cat(modelCat));
cl::opt<int64_t> layers("layers", cl::desc("transformer layers"),
                        cl::cat(modelCat));
cl::opt<int64_t> hidden("hidden", cl::desc("hidden size"), cl::cat(modelCat));
cl::opt<int64_t> heads("heads", cl::desc("attention heads"), cl::cat(modelCat));
cl::opt<int64_t> kvHeads("kv-heads",
                         cl::desc("key/value heads (default: --heads)"),
                         cl::cat(modelCat));
cl::opt<int64_t> ffn("ffn",
                     cl::desc("FFN size (default: 4 x hidden for gpt; "
                              "8/3 x hidden rounded up to 256 otherwise)"),
                     cl::cat(modelCat));
cl::opt<int64_t> vocab("vocab", cl::desc("vocabulary size"), cl::cat(modelCat));
cl::opt<int64_t> seq("seq", cl::desc("sequence length"), cl::cat(modelCat));
cl::opt<int64_t> experts("experts", cl::desc("experts per MoE layer"),
                         cl::cat(modelCat));
cl::opt<int64_t> topK("top-k", cl::desc("experts per token (default 2)"),
                      cl::cat(modelCat));
cl::opt<std::string>
    dropout("dropout",
            cl::desc("on|off: dropout masks kept for backward (default: on "
                     "for gpt, off for llama, moe and model files)"),
            cl::cat(modelCat));
cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("static shape of a symbolic ONNX input, "
                         "name=2x128 (repeatable)"),
                cl::cat(modelCat));
cl::opt<bool> modelSummary(
    "model-summary",
    cl::desc("print the parameters of the model file and what was inferred"),
    cl::cat(modelCat));

cl::opt<int64_t> globalBatch(
    "global-batch",
    cl::desc("sequences per optimizer step (default: the preset's, the "
             "model file's batch, else 512)"),
    cl::cat(trainCat));
cl::opt<std::string> precision(
    "precision",
    cl::desc("fp32, bf16 or fp16 (default: the model file's parameter type, "
             "else bf16)"),
    cl::cat(trainCat));
cl::opt<std::string>
    masterWeights("master-weights",
                  cl::desc("on|off: fp32 master weights of 16-bit parameters "
                           "(4 of the 18 bytes of state per parameter with "
                           "Adam)"),
                  cl::init("on"), cl::cat(trainCat));
cl::opt<std::string>
    f32Grads("f32-grads",
             cl::desc("on|off: fp32 weight gradients of 16-bit parameters, "
                      "as cleave-compile emits them (off: 16-bit, 2 bytes "
                      "per parameter fewer, as in the ZeRO paper)"),
             cl::init("on"), cl::cat(trainCat));
cl::opt<std::string> optimizer("optimizer", cl::desc("adam (default) or sgd"),
                               cl::init("adam"), cl::cat(trainCat));
cl::opt<std::string> recompute("recompute",
                               cl::desc("none, selective or full (default: "
                                        "searched)"),
                               cl::cat(trainCat));
cl::opt<int> zero("zero", cl::desc("ZeRO stage 0..3 (default: searched)"),
                  cl::cat(trainCat));
cl::opt<bool> offload("offload",
                      cl::desc("optimizer state in host memory (ZeRO-Offload)"),
                      cl::cat(trainCat));
cl::opt<std::string>
    sequenceParallel("sequence-parallel",
                     cl::desc("on|off: Megatron sequence parallelism with TP"),
                     cl::init("on"), cl::cat(trainCat));

cl::opt<std::string> flashAttention(
    "flash-attention",
    cl::desc("on|off: the attention core as one fused kernel "
             "(FlashAttention: no scores stored or written; off: "
             "Megatron-LM's kernels)"),
    cl::init("off"), cl::cat(trainCat));

cl::opt<std::string> clusterName("cluster",
                                 cl::desc("a100-80g, h100, h800 or h200"),
                                 cl::cat(clusterCat));
cl::opt<int64_t> gpus("gpus", cl::desc("GPUs in all"), cl::cat(clusterCat));
cl::opt<int64_t> gpusPerNode("gpus-per-node", cl::desc("GPUs per node (8)"),
                             cl::cat(clusterCat));
cl::opt<double> gpuMem("gpu-mem", cl::desc("GB of memory per GPU"),
                       cl::cat(clusterCat));
cl::opt<double> gpuTflops("gpu-tflops",
                          cl::desc("dense bf16/fp16 peak TFLOP/s per GPU"),
                          cl::cat(clusterCat));
cl::opt<double> intraBW("intra-bw",
                        cl::desc("GB/s per GPU per direction inside a node"),
                        cl::cat(clusterCat));
cl::opt<double> interBW("inter-bw",
                        cl::desc("GB/s per GPU per direction between nodes"),
                        cl::cat(clusterCat));
cl::opt<double> hbmBW("hbm-bw", cl::desc("GB/s of GPU memory bandwidth"),
                      cl::cat(clusterCat));
cl::opt<int64_t> gpuSms("gpu-sms",
                        cl::desc("streaming multiprocessors per GPU (GEMM wave "
                                 "quantization; 0: none)"),
                        cl::cat(clusterCat));
cl::opt<double> pcieBW("pcie-bw", cl::desc("GB/s host <-> GPU (offload)"),
                       cl::cat(clusterCat));
cl::opt<double>
    computeEfficiency("compute-efficiency",
                      cl::desc("fraction of peak that matmuls sustain (0.7)"),
                      cl::cat(clusterCat));
cl::opt<double> memEfficiency(
    "mem-efficiency",
    cl::desc("fraction of memory bandwidth that memory-bound kernels reach "
             "(0.8)"),
    cl::cat(clusterCat));
cl::opt<double> commEfficiency(
    "comm-efficiency",
    cl::desc("fraction of link bandwidth collectives reach (0.8)"),
    cl::cat(clusterCat));
cl::opt<double> memHeadroom(
    "mem-headroom",
    cl::desc("fraction of GPU memory kept free for what the estimate leaves "
             "out (0.1)"),
    cl::cat(clusterCat));

cl::opt<int64_t> tp("tp", cl::desc("tensor parallel degree"),
                    cl::cat(layoutCat));
cl::opt<int64_t> pp("pp", cl::desc("pipeline parallel degree"),
                    cl::cat(layoutCat));
cl::opt<int64_t> dp("dp", cl::desc("data parallel degree"), cl::cat(layoutCat));
cl::opt<int64_t> cp("cp", cl::desc("context parallel degree"),
                    cl::cat(layoutCat));
cl::opt<int64_t> ep("ep", cl::desc("expert parallel degree"),
                    cl::cat(layoutCat));
cl::opt<int64_t> microbatches("microbatches",
                              cl::desc("microbatches per step and replica"),
                              cl::cat(layoutCat));
cl::opt<std::string> schedule("schedule",
                              cl::desc("gpipe, 1f1b or interleaved"),
                              cl::cat(layoutCat));
cl::opt<int64_t>
    virtualStages("virtual-stages",
                  cl::desc("model chunks per GPU of the interleaved schedule"),
                  cl::cat(layoutCat));
cl::list<int64_t> pipelineSplit(
    "pipeline-split", cl::CommaSeparated,
    cl::desc("the first layer of each pipeline chunk after the first (pp x "
             "virtual stages - 1 of them), instead of the balance by FLOPs"),
    cl::value_desc("L1,L2,..."), cl::cat(layoutCat));
cl::opt<std::string>
    foldEp("fold-ep",
           cl::desc("on|off: expert-parallel ranks are data-parallel ranks "
                    "(on), or ep is its own axis in the GPU product (off)"),
           cl::init("on"), cl::cat(layoutCat));

cl::opt<bool> json("json", cl::desc("print the chosen layout as JSON"),
                   cl::cat(outputCat));
cl::opt<std::string>
    outFile("out", cl::desc("write the plan file (docs/planner.md)"),
            cl::value_desc("plan.json"), cl::cat(outputCat));
cl::opt<unsigned> top("top", cl::desc("rows of the ranked table (5)"),
                      cl::init(5), cl::cat(outputCat));
cl::opt<bool> listPresets("list-presets",
                          cl::desc("list the model and cluster presets"),
                          cl::cat(outputCat));

/// Exit codes: 0, a layout that fits; kUsageError, a flag or a layout rule
/// broken (nothing estimated); kDoesNotFit, no layout fits the memory (a
/// mesh given in full is still reported, on stdout).
constexpr int kUsageError = 1;
constexpr int kDoesNotFit = 2;

/// Errors go to stderr as `error: ...`; main returns 1 when there was one.
struct Errors {
  bool any = false;
  void operator()(const std::string &message) {
    errs() << "error: " << message << "\n";
    any = true;
  }
};

template <typename T> bool given(const cl::opt<T> &opt) {
  return opt.getNumOccurrences() > 0;
}

std::optional<bool> onOff(const cl::opt<std::string> &opt, Errors &error) {
  if (opt == "on")
    return true;
  if (opt == "off")
    return false;
  error("--" + opt.ArgStr.str() + " expects on or off, got '" + opt + "'");
  return std::nullopt;
}

void printPresets() {
  outs() << "models:\n";
  for (const ModelPreset &p : modelPresets()) {
    const ModelSpec &m = p.spec;
    outs() << "  " << p.name << ": " << p.description << "; " << m.layers
           << " layers, hidden " << m.hidden << ", " << m.heads << " heads ("
           << (m.kvHeads ? m.kvHeads : m.heads) << " kv), FFN " << m.ffn
           << ", vocab " << m.vocab << ", seq " << m.seq;
    if (m.isMoE())
      outs() << ", " << m.experts << " experts top-" << m.topK;
    outs() << ", batch " << p.globalBatch << "\n";
  }
  outs() << "clusters:\n";
  for (const ClusterPreset &p : clusterPresets()) {
    const ClusterSpec &c = p.spec;
    outs() << "  " << p.name << ": " << p.description << "; "
           << format("%g", c.memGB) << " GB, " << format("%g", c.tflops)
           << " TFLOP/s bf16, " << format("%g", c.intraBW) << " GB/s NVLink, "
           << format("%g", c.interBW) << " GB/s network, " << c.gpusPerNode
           << " GPUs per node, " << format("%g", c.hbmBW) << " GB/s memory, "
           << c.sms << " SMs\n";
  }
}

const char *roleName(ParamRole role) {
  switch (role) {
  case ParamRole::Embedding:
    return "embedding";
  case ParamRole::TokenEmbedding:
    return "token-embedding";
  case ParamRole::Head:
    return "head";
  case ParamRole::Layer:
    return "layer";
  case ParamRole::Expert:
    return "expert";
  case ParamRole::Final:
    return "final";
  case ParamRole::Frozen:
    return "frozen";
  }
  return "?";
}

void printSummary(const ModelFile &file) {
  ParamCounts c = countTensors(file.params);
  int64_t bytes = 0;
  for (const ParamTensor &t : file.params)
    bytes += t.bytes();
  outs() << "model " << file.spec.name << ": " << file.params.size()
         << " parameter tensors, " << c.total() << " values (" << file.paramType
         << ")\n";
  outs() << "parameter bytes: " << bytes << "\n";
  outs() << "aligned parameter bytes: " << alignedParamBytes(file.params, 64)
         << " (each at a 64-byte offset, as -cleave-plan-memory lays them "
            "out)\n";
  outs() << "by role: embedding " << c.embedding << " (token "
         << c.tokenEmbedding << "), head " << c.head << ", layers " << c.layers
         << ", experts " << c.experts << ", final " << c.final << ", frozen "
         << c.frozen << "\n";
  if (file.batch)
    outs() << "batch " << file.batch << ": the token input\n";
  for (const std::string &note : file.notes)
    outs() << note << "\n";
  for (const ParamTensor &t : file.params) {
    outs() << "  @" << t.name << " [";
    for (size_t i = 0; i < t.shape.size(); ++i)
      outs() << (i ? ", " : "") << t.shape[i];
    outs() << "] " << roleName(t.role) << " " << t.bytes() << " bytes\n";
  }
}

void printDiagnostics(const std::vector<Diagnostic> &diags) {
  for (const Diagnostic &d : diags)
    errs() << severityName(d.severity) << ": " << d.message << "\n";
}

int run() {
  Errors error;
  if (listPresets) {
    printPresets();
    return 0;
  }

  // The model.
  ModelSpec model;
  int64_t defaultBatch = 512;
  std::optional<Precision> defaultPrecision;
  if (!inputFile.empty() && given(preset)) {
    error("give a model file or --preset, not both");
    return kUsageError;
  }
  if (!inputFile.empty()) {
    ModelFile file;
    std::string message;
    ReadOptions options;
    options.inputShapes.assign(inputShapes.begin(), inputShapes.end());
    if (!readModelFile(inputFile, options, file, message)) {
      errs() << message;
      if (message.empty() || message.back() != '\n')
        errs() << "\n";
      return kUsageError;
    }
    if (modelSummary) {
      printSummary(file);
      return 0;
    }
    model = file.spec;
    if (file.batch)
      defaultBatch = file.batch;
    defaultPrecision = parsePrecision(file.paramType == "f32"   ? "fp32"
                                      : file.paramType == "f16" ? "fp16"
                                                                : "bf16");
  } else if (modelSummary) {
    error("--model-summary needs a model file");
    return kUsageError;
  } else if (given(preset)) {
    const ModelPreset *p = findModelPreset(preset);
    if (!p) {
      error("unknown --preset '" + preset + "' (--list-presets)");
      return kUsageError;
    }
    model = p->spec;
    defaultBatch = p->globalBatch;
  } else {
    model.applyArchDefaults(Arch::GPT);
  }
  if (given(arch)) {
    std::optional<Arch> a = parseArch(arch);
    if (!a) {
      error("--arch expects gpt, llama or moe, got '" + arch + "'");
      return kUsageError;
    }
    model.applyArchDefaults(*a);
  }
  if (given(layers))
    model.layers = layers;
  if (given(hidden))
    model.hidden = hidden;
  if (given(heads))
    model.heads = heads;
  if (given(kvHeads))
    model.kvHeads = kvHeads;
  if (given(vocab))
    model.vocab = vocab;
  if (given(seq))
    model.seq = seq;
  if (given(experts))
    model.experts = experts;
  if (given(topK))
    model.topK = topK;
  if (given(ffn))
    model.ffn = ffn;
  if (given(dropout))
    if (std::optional<bool> on = onOff(dropout, error))
      model.dropout = *on;
  // Defaults for shapes given by flags.
  if (!model.kvHeads)
    model.kvHeads = model.heads;
  if (!model.ffn && model.hidden)
    model.ffn = model.arch == Arch::GPT
                    ? 4 * model.hidden
                    : (8 * model.hidden / 3 + 255) / 256 * 256;
  if (model.experts && !model.topK)
    model.topK = 2;
  if (model.name.empty())
    model.name = archName(model.arch);
  for (const std::string &message : checkModel(model))
    error(message);
  if (error.any && !inputFile.empty())
    errs() << "note: flags complete what " << inputFile
           << " does not show (--model-summary lists what was inferred)\n";

  // Training.
  TrainingConfig training;
  training.globalBatch =
      given(globalBatch) ? int64_t(globalBatch) : defaultBatch;
  // Bounds that keep the search (divisors of these) and the schedules'
  // simulation quick: far beyond any cluster or batch run today.
  if (given(globalBatch) && (globalBatch < 1 || globalBatch > (int64_t(1) << 32)))
    error("--global-batch expects 1 to 2^32 sequences, got " +
          std::to_string(int64_t(globalBatch)));
  training.precision = defaultPrecision.value_or(Precision::BF16);
  if (given(precision)) {
    if (std::optional<Precision> p = parsePrecision(precision))
      training.precision = *p;
    else
      error("--precision expects fp32, bf16 or fp16, got '" + precision + "'");
  }
  if (std::optional<bool> on = onOff(masterWeights, error))
    training.masterWeights = *on;
  if (std::optional<bool> on = onOff(f32Grads, error))
    training.f32Grads = *on;
  if (std::optional<bool> on = onOff(sequenceParallel, error))
    training.sequenceParallel = *on;
  if (std::optional<bool> on = onOff(flashAttention, error))
    training.fusedAttention = *on;
  if (std::optional<Optimizer> o = parseOptimizer(optimizer))
    training.optimizer = *o;
  else
    error("--optimizer expects adam or sgd, got '" + optimizer + "'");
  training.offload = offload;

  // The cluster.
  ClusterSpec cluster;
  if (given(clusterName)) {
    const ClusterPreset *p = findClusterPreset(clusterName);
    if (!p) {
      error("unknown --cluster '" + clusterName + "' (--list-presets)");
      return kUsageError;
    }
    cluster = p->spec;
  }
  if (given(gpus)) {
    if (gpus > (int64_t(1) << 20))
      error("--gpus expects at most 2^20 GPUs, got " +
            std::to_string(int64_t(gpus)));
    cluster.gpus = gpus;
  }
  if (given(gpusPerNode))
    cluster.gpusPerNode = gpusPerNode;
  if (given(gpuMem))
    cluster.memGB = gpuMem;
  if (given(gpuTflops))
    cluster.tflops = gpuTflops;
  if (given(intraBW))
    cluster.intraBW = intraBW;
  if (given(interBW))
    cluster.interBW = interBW;
  if (given(pcieBW))
    cluster.pcieBW = pcieBW;
  if (given(hbmBW))
    cluster.hbmBW = hbmBW;
  if (given(gpuSms))
    cluster.sms = gpuSms;
  if (given(memEfficiency))
    cluster.memEfficiency = memEfficiency;
  if (given(computeEfficiency))
    cluster.computeEfficiency = computeEfficiency;
  if (given(commEfficiency))
    cluster.commEfficiency = commEfficiency;
  if (given(memHeadroom))
    cluster.memHeadroom = memHeadroom;
  for (const std::string &message : checkCluster(cluster))
    error(message);
  if (offload && !(cluster.pcieBW > 0))
    error("--offload moves optimizer state over the host link: --pcie-bw "
          "must be > 0");

  // The layout: given parts are constraints, each a count >= 1 (a 0 would
  // divide the search by zero).
  for (auto [name, opt] :
       {std::pair{"--tp", &tp}, std::pair{"--pp", &pp}, std::pair{"--dp", &dp},
        std::pair{"--cp", &cp}, std::pair{"--ep", &ep},
        std::pair{"--microbatches", &microbatches},
        std::pair{"--virtual-stages", &virtualStages}})
    if (given(*opt) && *opt < 1)
      error(std::string(name) + " expects a count >= 1, got " +
            std::to_string(int64_t(*opt)));
  SearchConstraints k;
  if (std::optional<bool> on = onOff(foldEp, error))
    k.foldEp = *on;
  if (given(tp))
    k.tp = tp;
  if (given(pp))
    k.pp = pp;
  if (given(dp))
    k.dp = dp;
  if (given(cp))
    k.cp = cp;
  if (given(ep))
    k.ep = ep;
  if (given(microbatches))
    k.microbatches = microbatches;
  if (given(virtualStages))
    k.virtualStages = virtualStages;
  k.split.assign(pipelineSplit.begin(), pipelineSplit.end());
  if (given(schedule)) {
    if (std::optional<Schedule> s = parseSchedule(schedule))
      k.schedule = *s;
    else
      error("--schedule expects gpipe, 1f1b or interleaved, got '" + schedule +
            "'");
  }
  if (given(zero)) {
    if (zero < 0 || zero > 3)
      error("--zero expects 0 to 3, got " + std::to_string(zero));
    k.zero = zero;
  }
  if (given(recompute)) {
    if (std::optional<Recompute> r = parseRecompute(recompute))
      k.recompute = *r;
    else
      error("--recompute expects none, selective or full, got '" + recompute +
            "'");
  }
  if (k.schedule == Schedule::Interleaved && !k.virtualStages)
    k.virtualStages = 2;
  if (error.any)
    return kUsageError;

  // A complete mesh (tp, pp and dp given) is checked as such, so that its
  // errors name the degrees rather than an empty search.
  bool fixedMesh = k.tp && k.pp && k.dp;
  if (fixedMesh) {
    Layout mesh;
    mesh.tp = *k.tp;
    mesh.pp = *k.pp;
    mesh.dp = *k.dp;
    mesh.cp = k.cp.value_or(1);
    mesh.ep = k.ep.value_or(1);
    mesh.foldEp = k.foldEp;
    k.cp = mesh.cp;
    k.ep = mesh.ep;
    std::vector<Diagnostic> diags =
        validateMesh(model, training, cluster, mesh);
    if (hasErrors(diags)) {
      printDiagnostics(diags);
      return kUsageError;
    }
    if (!k.split.empty()) {
      Layout l = mesh;
      l.schedule = k.schedule.value_or(Schedule::OneFOneB);
      l.virtualStages = k.virtualStages.value_or(2);
      l.split = k.split;
      std::vector<Diagnostic> s = validateSplit(model, l);
      if (hasErrors(s)) {
        printDiagnostics(s);
        return kUsageError;
      }
    }
    if (k.microbatches) {
      Layout l = mesh;
      l.microbatches = *k.microbatches;
      l.schedule = k.schedule.value_or(Schedule::OneFOneB);
      l.virtualStages = k.virtualStages.value_or(2);
      l.zero = k.zero.value_or(0);
      l.split = k.split;
      std::vector<Diagnostic> s = validateSchedule(model, training, l);
      if (hasErrors(s)) {
        printDiagnostics(s);
        return kUsageError;
      }
    }
  }

  SearchResult result = search(model, training, cluster, k);
  if (result.ranked.empty() && fixedMesh && result.smallest) {
    // A mesh given in full that does not fit is still estimated: its
    // configuration that needs the least memory, reported with what does
    // not fit, and the exit code says so.
    const Estimate &smallest = *result.smallest;
    printDiagnostics(checkMemory(smallest, cluster));
    if (json) {
      outs() << estimateToJson(smallest);
    } else {
      outs() << formatSetup(model, training, cluster) << "\n";
      char reason[128];
      std::snprintf(reason, sizeof(reason),
                    "does not fit: %.1f GB over the %.1f GB usable",
                    smallest.overBytes() / 1e9, smallest.usableBytes / 1e9);
      SearchResult table = result;
      table.ranked = {{smallest, reason}};
      outs() << formatTable(table, top) << "\n";
      outs() << formatEstimate(smallest, cluster);
    }
    if (!outFile.empty())
      errs() << "note: no plan file is written for a layout that does not "
                "fit\n";
    return kDoesNotFit;
  }
  if (result.ranked.empty()) {
    if (result.smallest) {
      printDiagnostics(checkMemory(*result.smallest, cluster));
      errs() << "note: the smallest layout is " << result.smallest->layout.str()
             << "; more GPUs, --zero 3, --recompute full, --offload or a "
                "smaller --global-batch reduce memory\n";
      return kDoesNotFit;
    }
    if (result.meshes == 0) {
      error("no layout of " + std::to_string(cluster.gpus) +
            " GPUs has the given degrees: their product must divide --gpus");
    } else if (result.invalidMeshes == result.meshes) {
      std::set<std::string> seen;
      for (const std::string &message : result.meshErrors)
        if (seen.insert(message).second && seen.size() <= 5)
          error(message);
    } else {
      error("no microbatch count, schedule, ZeRO stage and recomputation "
            "satisfy the given constraints");
    }
    return kUsageError;
  }

  const Estimate &best = result.ranked.front().estimate;
  printDiagnostics(validateLayout(model, training, cluster, best.layout));

  if (json) {
    outs() << estimateToJson(best);
  } else {
    outs() << formatSetup(model, training, cluster) << "\n";
    if (result.evaluated > 1)
      outs() << formatTable(result, top) << "\n";
    outs() << formatEstimate(best, cluster);
  }

  if (!outFile.empty()) {
    std::error_code ec;
    raw_fd_ostream os(outFile, ec, sys::fs::OF_Text);
    if (ec) {
      error("cannot write '" + outFile + "': " + ec.message());
      return kUsageError;
    }
    os << planFileJson(model, training, cluster, best);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  cleave::setToolVersion("cleave-plan");
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(
      {&modelCat, &trainCat, &clusterCat, &layoutCat, &outputCat});
  cl::ParseCommandLineOptions(
      argc, argv,
      "Cleave planner: validates and searches the ways to split a model over "
      "a GPU cluster, with memory, communication and time estimates\n\n"
      "Exit status: 0 when the layout (given or found) fits; 1 on a usage "
      "error or a broken layout rule (nothing estimated); 2 when nothing "
      "fits the GPU memory (a mesh given in full with --tp --pp --dp is "
      "still estimated and reported, with \"fits\": false)\n");
  return run();
}
