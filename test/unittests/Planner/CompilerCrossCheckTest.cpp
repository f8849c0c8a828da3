//===- CompilerCrossCheckTest.cpp - the planner against the compiler ----===//
//
// For each example model on one device, the planner's memory estimate must
// agree with the static memory plan the compiler emits
// (-cleave-plan-memory): parameters, gradients and optimizer state exactly.
//
// Parameters are compared on the plan of `@forward`, three ways: the same tensors in the same order with the same byte
// sizes; each tensor's slot in the plan (its size rounded up to the plan's
// 64-byte alignment); and the region's total. The planner's own parameter
// estimate (precision fp32 as the files store, tp = pp = dp = 1) must equal
// the unaligned sum: alignment padding is a property of the arena, not of
// the model, and is accounted for by alignedParamBytes().
//
// Gradients and optimizer state are compared on an AdamW `@train_step`:
// the bytes of the gradients the updates consume, and of the fp32 moments
// the optimizer adds. Under bf16 mixed precision (the pipeline of
// `cleave-compile --precision bf16`) the planner's 2 + 4 + 12 bytes per
// parameter are compared with the step's bf16 weight copies, its f32
// gradients, and its f32 parameters (the master weights) plus moments. Activations are not compared yet: the compiler keeps
// them as arena temporaries that share bytes with backward values, so the
// planner's stored-activation estimate has no region to match until the
// plan reports the forward's saved values separately. When partitioning
// lands, add meshes to the parameter list (the planner's per-GPU estimate
// against each rank's plan).
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Estimate.h"
#include "cleave/Planner/ModelReader.h"

#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Import/OnnxImporter.h"
#include "cleave/Transforms/MemoryPlan.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>


using namespace cleave::planner;

namespace {

std::string examplePath(const std::string &name) {
  return std::string(CLEAVE_EXAMPLES_DIR) + "/" + name + "/model.onnx";
}

/// What the compiler's memory plan holds, per category.
struct CompilerMemory {
  struct Param {
    std::string name;
    int64_t bytes = 0; ///< the tensor's size
    int64_t slot = 0;  ///< bytes up to the next parameter's offset
  };
  std::vector<Param> params;
  int64_t paramRegionBytes = 0; ///< cleave.param_bytes
  // From the plan of an AdamW training step.
  int64_t gradBytes = 0;
  int64_t optimizerBytes = 0;
};

/// Compiles an AdamW training step of the imported `module` and plans its
/// memory: the gradients are the values the updates consume, the optimizer
/// state the moment parameters the optimizer added.
bool trainingPlan(mlir::ModuleOp module, CompilerMemory &out) {
  mlir::PassManager pm(module.getContext());
  pm.addPass(cleave::createRaisePass());
  cleave::AutodiffPassOptions autodiff;
  autodiff.optimizer = cleave::OptimizerKind::Adamw;
  pm.addPass(cleave::createAutodiffPass(autodiff));
  cleave::PlanMemoryPassOptions plan;
  plan.entry = "train_step";
  pm.addPass(cleave::createPlanMemoryPass(plan));
  if (mlir::failed(pm.run(module)))
    return false;
  int64_t grads = 0, moments = 0;
  module.walk([&](cleave::graph::AdamwOp update) {
    grads += cleave::getTensorBytes(update.getGrad().getType());
  });
  for (auto param : module.getOps<cleave::graph::ParamOp>()) {
    if (cleave::getParamRole(param) == CLEAVE_PARAM_OPTIMIZER_STATE)
      moments += cleave::getTensorBytes(param.getType());
  }
  out.gradBytes = grads;
  out.optimizerBytes = moments;
  return true;
}

/// The ONNX model at `path` imported into `context`; null on failure.
mlir::OwningOpRef<mlir::ModuleOp> importExample(const std::string &path,
                                                mlir::MLIRContext &context) {
  context.loadDialect<cleave::graph::GraphDialect, mlir::func::FuncDialect>();
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return nullptr;
  cleave::OnnxImportOptions options;
  options.fileName = path;
  return cleave::importOnnxModel((*buffer)->getBuffer(), options, &context);
}

/// Imports `path` once; runs -cleave-plan-memory on it as cleave-opt would,
/// and trainingPlan on a copy.
bool compilerPlan(const std::string &path, CompilerMemory &out) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = importExample(path, context);
  if (!module)
    return false;
  mlir::OwningOpRef<mlir::ModuleOp> training = module->clone();
  mlir::PassManager pm(&context);
  pm.addPass(cleave::createPlanMemoryPass());
  if (mlir::failed(pm.run(*module)))
    return false;

  mlir::func::FuncOp fn = cleave::getEntryFunction(*module, "forward");
  auto region = fn->getAttrOfType<mlir::IntegerAttr>(cleave::kParamBytesAttr);
  if (!region)
    return false;
  out.paramRegionBytes = region.getInt();
  std::vector<int64_t> offsets;
  for (auto param : module->getOps<cleave::graph::ParamOp>()) {
    out.params.push_back(
        {param.getSymName().str(), cleave::getTensorBytes(param.getType()), 0});
    offsets.push_back(
        param->getAttrOfType<mlir::IntegerAttr>(cleave::kOffsetAttr).getInt());
  }
  offsets.push_back(out.paramRegionBytes);
  for (size_t i = 0; i < out.params.size(); ++i)
    out.params[i].slot = offsets[i + 1] - offsets[i];
  return trainingPlan(*training, out);
}

class CompilerCrossCheck : public ::testing::TestWithParam<const char *> {};

TEST_P(CompilerCrossCheck, OneDevice) {
  const std::string path = examplePath(GetParam());
  ModelFile file;
  std::string error;
  ASSERT_TRUE(readModelFile(path, {}, file, error)) << error;
  CompilerMemory compiler;
  ASSERT_TRUE(compilerPlan(path, compiler)) << path;

  // The same parameters, in order, with the same sizes and slots.
  ASSERT_EQ(file.params.size(), compiler.params.size());
  int64_t unaligned = 0;
  for (size_t i = 0; i < file.params.size(); ++i) {
    const ParamTensor &p = file.params[i];
    EXPECT_EQ(p.name, compiler.params[i].name);
    EXPECT_EQ(p.bytes(), compiler.params[i].bytes) << p.name;
    EXPECT_EQ((p.bytes() + 63) / 64 * 64, compiler.params[i].slot) << p.name;
    unaligned += p.bytes();
  }
  EXPECT_EQ(alignedParamBytes(file.params, 64), compiler.paramRegionBytes);

  // The planner's estimate on one device, in the files' precision.
  EXPECT_EQ(file.paramType, "f32");
  TrainingConfig training;
  training.precision = Precision::FP32;
  training.globalBatch = file.batch ? file.batch : 1;
  ModelStates states;
  if (checkModel(file.spec).empty()) {
    ClusterSpec cluster = findClusterPreset("a100-80g")->spec;
    cluster.gpus = 1;
    Estimate e = estimate(file.spec, training, cluster, Layout());
    states.params = e.memory.params;
    states.grads = e.memory.grads;
    states.optimizer = e.memory.optimizer;
  } else {
    // No transformer shapes (the MLP): model states only.
    states = modelStates(double(file.spec.params().total()),
                         stateBytes(training), 0, 1, false);
  }
  EXPECT_EQ(int64_t(states.params), unaligned);

  // fp32 gradients (4 bytes per parameter) and AdamW's two fp32 moments.
  EXPECT_EQ(int64_t(states.grads), compiler.gradBytes);
  EXPECT_EQ(int64_t(states.optimizer), compiler.optimizerBytes);
}

/// What a bf16 AdamW training step holds, compiled as cleave-compile
/// --precision bf16 does (router in f32, fusion on).
struct MixedPrecisionMemory {
  int64_t copyBytes = 0;   ///< bf16 copies of parameters read by the step
  int64_t gradBytes = 0;   ///< gradients the updates consume
  int64_t masterBytes = 0; ///< the f32 parameters
  int64_t momentBytes = 0; ///< AdamW's moments
  std::vector<std::string> uncopied; ///< parameters read without a bf16 copy
};

bool mixedPrecisionPlan(const std::string &path, MixedPrecisionMemory &out) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = importExample(path, context);
  if (!module)
    return false;
  mlir::PassManager pm(&context);
  pm.addPass(cleave::createRaisePass());
  cleave::MixedPrecisionPassOptions mixed;
  mixed.precision = cleave::Precision::BF16;
  pm.addPass(cleave::createMixedPrecisionPass(mixed));
  pm.addPass(mlir::createCanonicalizerPass());
  cleave::AutodiffPassOptions autodiff;
  autodiff.optimizer = cleave::OptimizerKind::Adamw;
  pm.addPass(cleave::createAutodiffPass(autodiff));
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  pm.addPass(cleave::createFuseLinearPass());
  cleave::PlanMemoryPassOptions plan;
  plan.entry = "train_step";
  pm.addPass(cleave::createPlanMemoryPass(plan));
  if (mlir::failed(pm.run(*module)))
    return false;
  mlir::func::FuncOp step = cleave::getEntryFunction(*module, "train_step");
  if (!step)
    return false;
  step.walk([&](cleave::graph::AdamwOp update) {
    out.gradBytes += cleave::getTensorBytes(update.getGrad().getType());
  });
  step.walk([&](cleave::graph::ReadParamOp read) {
    auto param = mlir::SymbolTable::lookupNearestSymbolFrom<
        cleave::graph::ParamOp>(read, read.getParamAttr());
    if (!param || cleave::getParamRole(param) != CLEAVE_PARAM_MODEL)
      return; // the step counter
    // The optimizer reads the f32 master weight itself.
    if (llvm::all_of(read->getUsers(), [](mlir::Operation *user) {
          return llvm::isa<cleave::graph::AdamwOp>(user);
        }))
      return;
    bool copied = false;
    for (mlir::Operation *user : read->getUsers()) {
      auto cast = llvm::dyn_cast<cleave::graph::CastOp>(user);
      if (cast && llvm::cast<mlir::ShapedType>(cast.getType())
                      .getElementType()
                      .isBF16()) {
        out.copyBytes += cleave::getTensorBytes(cast.getType());
        copied = true;
      }
    }
    if (!copied)
      out.uncopied.push_back(read.getParam().str());
  });
  for (auto param : module->getOps<cleave::graph::ParamOp>()) {
    int64_t bytes = cleave::getTensorBytes(param.getType());
    cleave_param_role role = cleave::getParamRole(param);
    if (role == CLEAVE_PARAM_MODEL)
      out.masterBytes += bytes;
    else if (role == CLEAVE_PARAM_OPTIMIZER_STATE)
      out.momentBytes += bytes;
  }
  return true;
}

TEST_P(CompilerCrossCheck, OneDeviceBf16) {
  const std::string path = examplePath(GetParam());
  ModelFile file;
  std::string error;
  ASSERT_TRUE(readModelFile(path, {}, file, error)) << error;
  MixedPrecisionMemory compiler;
  ASSERT_TRUE(mixedPrecisionPlan(path, compiler)) << path;

  TrainingConfig training; // bf16, fp32 master weights and gradients, Adam
  ASSERT_EQ(training.precision, Precision::BF16);
  const double params = double(file.spec.params().total());
  ModelStates states =
      modelStates(params, stateBytes(training), /*zero=*/0, 1, false);

  // Every parameter gets one bf16 copy, except an MoE router's weight, which
  // the step reads in f32 (--router-f32): the planner counts its copy too,
  // an overestimate of 2 bytes per router parameter.
  int64_t routerElements = 0;
  std::vector<std::string> expectUncopied;
  for (const ParamTensor &p : file.params) {
    if (!llvm::StringRef(p.name).ends_with(".router.weight"))
      continue;
    routerElements += p.bytes() / 4;
    expectUncopied.push_back(p.name);
  }
  EXPECT_EQ(compiler.uncopied, expectUncopied);
  EXPECT_EQ(int64_t(states.params), compiler.copyBytes + 2 * routerElements);

  // f32 weight gradients, and f32 master weights plus two f32 moments.
  EXPECT_EQ(int64_t(states.grads), compiler.gradBytes);
  EXPECT_EQ(int64_t(states.grads), 4 * int64_t(params));
  EXPECT_EQ(int64_t(states.optimizer),
            compiler.masterBytes + compiler.momentBytes);
}

INSTANTIATE_TEST_SUITE_P(Examples, CompilerCrossCheck,
                         ::testing::Values("mlp", "gpt", "llama", "moe"));

// The planner's parameter count of each example is the one its README
// (examples/<name>/README.md) documents.
TEST(ExampleModels, ParameterCountsAndShapes) {
  struct Expected {
    const char *name;
    int64_t params;
    Arch arch;
    int64_t layers, hidden, heads, ffn, vocab, seq, experts, topK;
    bool tied;
    // Parameters by role: embeddings (token + position), LM head, experts,
    // final norm; the rest are layer parameters.
    int64_t embedding, head, expertParams, final;
  };
  // The tiny llama's FFN (64) equals its vocabulary: its [64, 32] MLP
  // weights must not be mistaken for the LM head.
  const Expected cases[] = {
      {"gpt", 27776, Arch::GPT, 2, 32, 4, 128, 64, 8, 0, 0, true, 2304, 0, 0,
       64},
      {"llama", 24736, Arch::Llama, 2, 32, 4, 64, 64, 8, 0, 0, false, 2048,
       2048, 0, 32},
      {"moe", 46144, Arch::MoE, 2, 32, 4, 64, 64, 8, 4, 2, false, 2304, 2048,
       32768, 64},
  };
  for (const Expected &c : cases) {
    ModelFile file;
    std::string error;
    ASSERT_TRUE(readModelFile(examplePath(c.name), {}, file, error)) << error;
    const ModelSpec &m = file.spec;
    EXPECT_EQ(m.params().total(), c.params) << c.name;
    EXPECT_EQ(m.arch, c.arch) << c.name;
    EXPECT_EQ(m.layers, c.layers) << c.name;
    EXPECT_EQ(m.hidden, c.hidden) << c.name;
    EXPECT_EQ(m.heads, c.heads) << c.name;
    EXPECT_EQ(m.kvHeads, c.heads) << c.name;
    EXPECT_EQ(m.ffn, c.ffn) << c.name;
    EXPECT_EQ(m.vocab, c.vocab) << c.name;
    EXPECT_EQ(m.seq, c.seq) << c.name;
    EXPECT_EQ(m.experts, c.experts) << c.name;
    EXPECT_EQ(m.topK, c.topK) << c.name;
    EXPECT_EQ(m.tiedEmbeddings, c.tied) << c.name;
    ParamCounts counts = m.params();
    EXPECT_EQ(counts.embedding, c.embedding) << c.name;
    EXPECT_EQ(counts.tokenEmbedding, 2048) << c.name;
    EXPECT_EQ(counts.head, c.head) << c.name;
    EXPECT_EQ(counts.experts, c.expertParams) << c.name;
    EXPECT_EQ(counts.final, c.final) << c.name;
    EXPECT_EQ(file.batch, 2) << c.name;
    EXPECT_TRUE(checkModel(m).empty()) << c.name;
  }

  // The formula agrees with the files for the GPT-style example, whose
  // shapes it describes fully (biases, LayerNorm, tied head, learned
  // positions).
  ModelFile gpt;
  std::string error;
  ASSERT_TRUE(readModelFile(examplePath("gpt"), {}, gpt, error));
  ModelSpec formula = gpt.spec;
  formula.measured.reset();
  EXPECT_EQ(formula.params().total(), 27776);
  EXPECT_EQ(formula.params().embedding, gpt.spec.params().embedding);

  ModelFile mlp;
  ASSERT_TRUE(readModelFile(examplePath("mlp"), {}, mlp, error));
  EXPECT_EQ(mlp.spec.params().total(), 676);
  EXPECT_FALSE(checkModel(mlp.spec).empty()); // no attention: flags needed
}

} // namespace
