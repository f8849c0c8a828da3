//===- ValidateTest.cpp - layout errors and warnings --------------------===//
//
// One test per rule: the diagnostic fires, names the values, and the valid
// neighbour of the layout passes.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Validate.h"

#include <gtest/gtest.h>

using namespace cleave::planner;

namespace {

class ValidateTest : public ::testing::Test {
protected:
  ModelSpec model = findModelPreset("llama3-70b")->spec; // 64 heads, 8 kv
  TrainingConfig training;
  ClusterSpec cluster = findClusterPreset("h100")->spec;

  ValidateTest() {
    training.globalBatch = 1024;
    cluster.gpus = 64;
  }

  Layout layout(int64_t tp, int64_t pp, int64_t dp, int64_t cp = 1) {
    Layout l;
    l.tp = tp;
    l.pp = pp;
    l.dp = dp;
    l.cp = cp;
    l.microbatches = 16;
    return l;
  }

  /// The messages of `severity` for `l`.
  std::vector<std::string> messages(const Layout &l,
                                    Severity severity = Severity::Error) {
    std::vector<std::string> out;
    for (const Diagnostic &d : validateLayout(model, training, cluster, l))
      if (d.severity == severity)
        out.push_back(d.message);
    return out;
  }
};

TEST_F(ValidateTest, ValidLayout) {
  EXPECT_TRUE(messages(layout(8, 4, 2)).empty());
  EXPECT_TRUE(messages(layout(8, 4, 2), Severity::Warning).empty());
}

TEST_F(ValidateTest, ProductMustEqualTheGpuCount) {
  EXPECT_EQ(messages(layout(8, 4, 4)),
            std::vector<std::string>{"tp x pp x dp x cp = 8 x 4 x 4 x 1 = "
                                     "128, but there are 64 GPUs (--gpus)"});
  // With ep as its own axis, it counts too.
  model = findModelPreset("mixtral-8x7b")->spec;
  Layout l = layout(4, 2, 4);
  l.ep = 2;
  l.foldEp = false;
  EXPECT_TRUE(messages(l).empty());
  l.dp = 8;
  EXPECT_EQ(messages(l),
            std::vector<std::string>{"tp x pp x dp x cp x ep = 4 x 2 x 8 x 1 "
                                     "x 2 = 128, but there are 64 GPUs "
                                     "(--gpus)"});
}

TEST_F(ValidateTest, TensorParallelMustDivideTheHeads) {
  cluster.gpus = 48;
  EXPECT_EQ(messages(layout(3, 4, 4)).front(),
            "tp=3 does not divide the 64 attention heads");
}

TEST_F(ValidateTest, KeyValueHeads) {
  // 16 GPUs of tensor parallelism over 8 kv heads: each is replicated.
  cluster.gpus = 64;
  std::vector<std::string> notes = messages(layout(16, 4, 1), Severity::Note);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes.front(), "tp=16 exceeds the 8 key/value heads: each is "
                           "replicated on 2 GPUs");
  model.heads = 48;
  model.kvHeads = 12;
  model.hidden = 48 * 128;
  cluster.gpus = 32;
  EXPECT_EQ(messages(layout(8, 4, 1)).front(),
            "tp=8 neither divides nor is a multiple of the 12 key/value heads");
}

TEST_F(ValidateTest, TensorParallelAcrossNodesWarns) {
  std::vector<std::string> warnings =
      messages(layout(16, 4, 1), Severity::Warning);
  ASSERT_EQ(warnings.size(), 1u);
  const std::string &w = warnings.front();
  EXPECT_EQ(w.rfind("tp=16 spans 2 nodes of 8 GPUs: its collectives cross the "
                    "50 GB/s inter-node links instead of 450 GB/s inside a "
                    "node, ",
                    0),
            0u)
      << w;
  EXPECT_NE(w.find(" s per step instead of "), std::string::npos);
  EXPECT_TRUE(messages(layout(16, 4, 1)).empty()); // a warning, not an error
}

TEST_F(ValidateTest, UnevenStagesWarn) {
  cluster.gpus = 48;
  std::vector<std::string> warnings =
      messages(layout(8, 3, 2), Severity::Warning);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings.front(),
            "pp=3 does not divide the 80 layers: stages hold 27 or 26 layers, "
            "and the slowest sets the pace (1.2% slower than an even split)");
}

TEST_F(ValidateTest, PipelineDeeperThanTheModel) {
  model.layers = 2;
  cluster.gpus = 32;
  EXPECT_EQ(messages(layout(8, 4, 1)).front(),
            "pp=4 is more than the 2 layers");
}

TEST_F(ValidateTest, ContextParallelMustDivideTheSequence) {
  model.seq = 1000;
  cluster.gpus = 48;
  EXPECT_EQ(messages(layout(8, 2, 1, 3)).front(),
            "cp=3 does not divide the sequence length 1000");
}

TEST_F(ValidateTest, ExpertParallelism) {
  Layout l = layout(8, 4, 2);
  l.ep = 2;
  EXPECT_EQ(messages(l).front(),
            "ep=2 needs a mixture-of-experts model (--experts)");
  model = findModelPreset("mixtral-8x7b")->spec; // 8 experts
  l.ep = 3;
  l.dp = 6;
  cluster.gpus = 192;
  training.globalBatch = 1152;
  EXPECT_EQ(messages(l).front(), "ep=3 does not divide the 8 experts");
  l.ep = 4;
  l.dp = 2;
  cluster.gpus = 64;
  EXPECT_EQ(messages(l).front(),
            "ep=4 does not divide dp=2: experts are split inside the "
            "data-parallel group (--fold-ep=false makes ep a separate axis)");
  l.ep = 2;
  EXPECT_TRUE(messages(l).empty());
}

TEST_F(ValidateTest, BatchAndMicrobatches) {
  training.globalBatch = 1000;
  cluster.gpus = 96;
  EXPECT_EQ(messages(layout(8, 4, 3)).front(),
            "the global batch of 1000 sequences is not a multiple of the 3 "
            "data-parallel replicas");
  training.globalBatch = 96;
  Layout l = layout(8, 4, 3);
  l.microbatches = 5;
  EXPECT_EQ(messages(l).front(),
            "5 microbatches do not divide the 32 sequences of each "
            "data-parallel replica");
}

TEST_F(ValidateTest, InterleavedSchedule) {
  Layout l = layout(8, 4, 2);
  l.schedule = Schedule::Interleaved;
  // Chunks need not divide the layers (80 in 12 chunks of 7 or 6 layers,
  // as -dist-pipeline-parallel cuts them), but each needs one.
  l.virtualStages = 3;
  EXPECT_TRUE(messages(l).empty());
  l.virtualStages = 32;
  EXPECT_EQ(messages(l).front(),
            "the interleaved schedule with pp=4 and 32 virtual stages needs "
            "at least 128 layers, the model has 80");
  l.virtualStages = 2;
  l.microbatches = 2;
  EXPECT_EQ(messages(l).front(), "the interleaved schedule needs the "
                                 "microbatch count (2) to be a multiple of "
                                 "pp=4");
  l.microbatches = 16;
  EXPECT_TRUE(messages(l).empty());
  l.pp = 1;
  l.dp = 8;
  EXPECT_EQ(messages(l).front(), "the interleaved schedule needs pp > 1");
}

TEST_F(ValidateTest, GivenSplit) {
  Layout l = layout(8, 4, 2);
  l.split = {20, 40, 60};
  EXPECT_TRUE(messages(l).empty());
  l.split = {20, 40};
  EXPECT_EQ(messages(l).front(), "--pipeline-split names 2 first layers; pp "
                                 "x v = 4 chunks need 3");
  l.split = {20, 20, 60};
  EXPECT_EQ(messages(l).front(),
            "--pipeline-split: 20 is not a layer after the previous chunk's "
            "first and before 80");
  l.split = {20, 40, 80};
  EXPECT_EQ(messages(l).front(),
            "--pipeline-split: 80 is not a layer after the previous chunk's "
            "first and before 80");
}

TEST_F(ValidateTest, FewMicrobatchesWarn) {
  Layout l = layout(8, 4, 2);
  l.microbatches = 2;
  std::vector<std::string> warnings = messages(l, Severity::Warning);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings.front(),
            "2 microbatches for 4 pipeline stages: bubble 0.60 of the "
            "step");
}

TEST_F(ValidateTest, MemoryMustFit) {
  // Llama 3 70B on 8 GPUs of tensor parallelism only: about 1.1 TB of model
  // state over 8 GPUs.
  cluster.gpus = 8;
  Layout l = layout(8, 1, 1);
  ASSERT_TRUE(messages(l).empty());
  Estimate e = estimate(model, training, cluster, l);
  std::vector<Diagnostic> d = checkMemory(e, cluster);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.front().severity, Severity::Error);
  EXPECT_EQ(d.front().message.rfind("needs ", 0), 0u);
  EXPECT_NE(d.front().message.find(
                "more than the 72.0 GB usable of 80 GB (10% headroom)"),
            std::string::npos)
      << d.front().message;
  // Params: 70.55e9 * 2 / 8 = 17.6 GB; fp32 grads twice that; optimizer
  // 70.55e9 * 12 / 8 = 105.8 GB.
  EXPECT_NE(d.front().message.find("(params 17.6 + grads 35.3 + optimizer "
                                   "105.8 + activations "),
            std::string::npos)
      << d.front().message;
  // The estimate says by how much: over the 72 GB usable of 80 GB, on its
  // one stage.
  EXPECT_FALSE(e.fits);
  EXPECT_DOUBLE_EQ(e.usableBytes, 72e9);
  EXPECT_DOUBLE_EQ(e.overBytes(), e.memory.total() - 72e9);
  EXPECT_EQ(e.stagesOver(), std::vector<int64_t>{0});
}

} // namespace
