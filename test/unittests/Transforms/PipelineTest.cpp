//===- PipelineTest.cpp - CleavePipelineOptions and buildCleavePipeline --===//
//
// The pipeline's C++ API as drivers use it: options set from C++ and from a
// tool's command line, their checks, the pass options projected from them
// and the passes the pipeline holds.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <iterator>
#include <limits>

using namespace mlir;
using namespace cleave;

namespace {

/// The first problem verify() reports, or "" when the options are fine.
std::string problemOf(const CleavePipelineOptions &options) {
  std::string message;
  if (succeeded(options.verify([&](const llvm::Twine &text) {
        message = text.str();
        return failure();
      })))
    return "";
  return message;
}

/// The textual pipeline that buildCleavePipeline makes of `options`.
std::string pipelineOf(const CleavePipelineOptions &options) {
  MLIRContext context;
  PassManager pm(&context);
  buildCleavePipeline(pm, options);
  std::string text;
  llvm::raw_string_ostream os(text);
  pm.printAsTextualPipeline(os);
  return text;
}

TEST(PipelineTest, OptionsSetFromCppCountAsGiven) {
  CleavePipelineOptions options;
  EXPECT_EQ(problemOf(options), "");
  options.lr = 0.1;
  EXPECT_EQ(problemOf(options), "optimizer options need --train");
  options.train = true;
  EXPECT_EQ(problemOf(options), "");
  options.momentum = 0.9;
  EXPECT_EQ(problemOf(options),
            "--momentum, --dampening and --nesterov apply to --optimizer sgd");
  options.optimizer = OptimizerKind::Sgd;
  EXPECT_EQ(problemOf(options), "");
  options.eps = 1e-6;
  EXPECT_EQ(problemOf(options),
            "--beta1, --beta2 and --eps apply to --optimizer adamw");
}

TEST(PipelineTest, RangesAndPrecisionOptionsAreChecked) {
  CleavePipelineOptions options;
  options.train = true;
  options.accumulate = 0;
  EXPECT_EQ(problemOf(options), "--accumulate must be >= 1");
  options.accumulate = 2;
  options.lossScale = std::numeric_limits<double>::infinity();
  EXPECT_EQ(problemOf(options), "--loss-scale must be finite and >= 0");
  options.lossScale = 8.0;
  options.lossScaleGrowthInterval = 0;
  EXPECT_EQ(problemOf(options), "--loss-scale-growth-interval must be >= 1");
  options.lossScaleGrowthInterval = 10;
  EXPECT_EQ(problemOf(options), "");
  options.routerF32 = false;
  EXPECT_EQ(problemOf(options),
            "--router-f32 and --keep-f32 apply to --precision bf16 and fp16");
  options.precision = Precision::BF16;
  EXPECT_EQ(problemOf(options), "");
}

TEST(PipelineTest, PassOptionsFollowTheMode) {
  // A loss alone: the gradients, whatever the optimizer options hold.
  CleavePipelineOptions gradients;
  EXPECT_FALSE(gradients.differentiates());
  gradients.loss = LossKind::Mse;
  EXPECT_TRUE(gradients.differentiates());
  AutodiffPassOptions autodiff = gradients.autodiffOptions();
  EXPECT_EQ(autodiff.loss, LossKind::Mse);
  EXPECT_EQ(autodiff.optimizer, OptimizerKind::None);

  // fp16 training scales the loss by 65536 unless a scale is given.
  CleavePipelineOptions fp16;
  fp16.train = true;
  fp16.precision = Precision::F16;
  std::vector<std::string> keep = {"softmax"};
  fp16.keepF32 = keep;
  autodiff = fp16.autodiffOptions();
  EXPECT_EQ(autodiff.optimizer, OptimizerKind::Adamw);
  EXPECT_EQ(autodiff.loss, LossKind::CrossEntropy);
  EXPECT_EQ(autodiff.lossScale, 65536.0);
  fp16.lossScale = 0.0;
  EXPECT_EQ(fp16.autodiffOptions().lossScale, 0.0);
  // The same, split over the three passes of the training step.
  fp16.lossScale = 1024.0;
  fp16.accumulate = 4;
  fp16.gradClip = 1.0;
  EXPECT_EQ(fp16.addLossOptions().accumulate, 4);
  EXPECT_EQ(fp16.differentiateOptions().lossScale, 1024.0);
  EXPECT_EQ(fp16.addOptimizerOptions().optimizer, OptimizerKind::Adamw);
  EXPECT_EQ(fp16.addOptimizerOptions().gradClip, 1.0);
  // The gradient program's backward is not scaled.
  EXPECT_EQ(gradients.differentiateOptions().lossScale, 0.0);
  EXPECT_EQ(gradients.addLossOptions().loss, LossKind::Mse);
  MixedPrecisionPassOptions mixed = fp16.mixedPrecisionOptions();
  EXPECT_EQ(mixed.precision, Precision::F16);
  ASSERT_EQ(mixed.keepF32.size(), 1u);
  EXPECT_EQ(mixed.keepF32[0], "softmax");
}

/// The names of the passes in a textual pipeline, in order.
std::vector<std::string> passNames(llvm::StringRef text) {
  std::vector<std::string> names;
  text.consume_front("any(");
  while (!text.empty()) {
    size_t end = text.find_first_of(",{)");
    if (end != 0)
      names.push_back(text.substr(0, end).str());
    if (end == llvm::StringRef::npos)
      break;
    if (text[end] == '{')
      end = text.find('}', end);
    text = text.drop_front(end + 1);
  }
  return names;
}

TEST(PipelineTest, PassesFollowTheOptions) {
  CleavePipelineOptions inference;
  EXPECT_EQ(passNames(pipelineOf(inference)),
            (std::vector<std::string>{
                "cleave-raise", "canonicalize", "cse",
                "cleave-normalize-collectives", "cleave-overlap-collectives",
                "cleave-fuse-linear",
                "cleave-plan-memory", "cleave-lower-to-runtime"}));

  CleavePipelineOptions training;
  training.train = true;
  training.precision = Precision::BF16;
  training.noFusion = true;
  std::string text = pipelineOf(training);
  EXPECT_EQ(passNames(text),
            (std::vector<std::string>{
                "cleave-raise", "cleave-mixed-precision", "canonicalize",
                "cleave-add-loss", "cleave-differentiate",
                "cleave-add-optimizer", "canonicalize", "cse",
                "cleave-normalize-collectives", "cleave-overlap-collectives",
                "cleave-plan-memory",
                "cleave-lower-to-runtime"}))
      << text;
  EXPECT_NE(text.find("precision=bf16 router-f32=true}"), std::string::npos)
      << text;
  EXPECT_NE(text.find("optimizer=adamw"), std::string::npos) << text;
}

TEST(PipelineTest, ToolFlagsParseIntoTheOptions) {
  // As cleave-compile binds them; the object outlives the parse.
  static CleavePipelineOptions options;
  static llvm::cl::OptionCategory category("pipeline");
  options.addToCommandLine(
      [](llvm::StringRef) -> llvm::cl::OptionCategory & { return category; });
  const char *argv[] = {"tool",
                        "--train",
                        "--optimizer",
                        "sgd",
                        "--lr",
                        "0.5",
                        "--nesterov",
                        "--keep-f32",
                        "softmax,layer_norm",
                        "--precision=bf16"};
  ASSERT_TRUE(llvm::cl::ParseCommandLineOptions(std::size(argv), argv, "",
                                                &llvm::errs()));
  EXPECT_TRUE(options.train);
  EXPECT_EQ(options.optimizer, OptimizerKind::Sgd);
  EXPECT_EQ(options.lr, 0.5);
  EXPECT_TRUE(options.nesterov);
  EXPECT_TRUE(options.lr.hasValue());
  EXPECT_FALSE(options.momentum.hasValue());
  ASSERT_EQ(options.keepF32.size(), 2u);
  EXPECT_EQ(options.keepF32[1], "layer_norm");
  EXPECT_EQ(options.precision, Precision::BF16);
  EXPECT_EQ(problemOf(options), "");
  // The same options still parse as a textual pipeline's.
  CleavePipelineOptions textual;
  ASSERT_TRUE(succeeded(textual.parseFromString("train optimizer=sgd lr=0.5")));
  EXPECT_EQ(textual.optimizer, OptimizerKind::Sgd);
  EXPECT_EQ(textual.lr, 0.5);
}

} // namespace
