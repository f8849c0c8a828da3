//===- ActivationTest.cpp - activation memory per layer and per stage ---===//
//
// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models": the per-layer formulas of table 2 on GPT-3 175B
// (a = 96, h = 12288, s = 2048, b = 1, 16-bit activations with dropout), and
// the first pipeline stage's total (section 4.2.3).
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Estimate.h"

#include <gtest/gtest.h>

using namespace cleave::planner;

namespace {

class ActivationTest : public ::testing::Test {
protected:
  ModelSpec gpt3 = findModelPreset("gpt3-175b")->spec;
  const double sbh = 2048.0 * 1 * 12288; // s b h

  double perLayer(int64_t tp, bool sp, Recompute rc, bool fused = false) {
    ActivationShape a;
    a.fusedAttention = fused;
    a.microBatch = 1;
    a.seq = 2048;
    a.keySeq = 2048;
    a.tp = tp;
    a.sequenceParallel = sp;
    a.recompute = rc;
    a.elementBytes = 2;
    return activationBytesPerLayer(gpt3, a);
  }
};

// For GPT-3, 5 a s / h = 5 * 96 * 2048 / 12288 = 80.
TEST_F(ActivationTest, NoParallelism) {
  // sbh (34 + 5 a s / h)
  EXPECT_DOUBLE_EQ(perLayer(1, false, Recompute::None), sbh * (34 + 80));
  EXPECT_DOUBLE_EQ(perLayer(1, false, Recompute::None), 2868903936.0);
}

TEST_F(ActivationTest, TensorParallel) {
  // sbh (10 + 24 / t + 5 a s / h t), t = 8
  EXPECT_DOUBLE_EQ(perLayer(8, false, Recompute::None),
                   sbh * (10 + 24.0 / 8 + 80.0 / 8));
}

TEST_F(ActivationTest, TensorAndSequenceParallel) {
  // sbh (34 / t + 5 a s / h t)
  EXPECT_DOUBLE_EQ(perLayer(8, true, Recompute::None),
                   sbh * (34.0 / 8 + 80.0 / 8));
  EXPECT_DOUBLE_EQ(perLayer(8, true, Recompute::None), 358612992.0);
}

TEST_F(ActivationTest, SelectiveRecomputation) {
  // sbh (10 + 24 / t) with TP; sbh 34 / t with TP and SP.
  EXPECT_DOUBLE_EQ(perLayer(8, false, Recompute::Selective),
                   sbh * (10 + 24.0 / 8));
  EXPECT_DOUBLE_EQ(perLayer(8, true, Recompute::Selective), sbh * 34 / 8);
  // Section 5: "for GPT-3 ... selective activation recomputation reduces the
  // activation memory by 70%": 80 of 114.
  double saved = 1 - perLayer(1, false, Recompute::Selective) /
                         perLayer(1, false, Recompute::None);
  EXPECT_NEAR(saved, 0.70, 0.005);
}

// A fused attention kernel (FlashAttention, Dao et al. 2022) stores no
// scores, as selective recomputation, but the fp32 log-sum-exp of each of
// the a s b / t query rows.
TEST_F(ActivationTest, FusedAttention) {
  const double rows = 96.0 * 2048 * 1 / 8;
  EXPECT_DOUBLE_EQ(perLayer(8, true, Recompute::None, true),
                   sbh * 34 / 8 + 4 * rows);
  EXPECT_DOUBLE_EQ(perLayer(8, true, Recompute::Selective, true),
                   sbh * 34 / 8 + 4 * rows);
}

TEST_F(ActivationTest, FullRecomputation) {
  // sbh 2: only the layer input; split by t under sequence parallelism.
  EXPECT_DOUBLE_EQ(perLayer(8, false, Recompute::Full), 2 * sbh);
  EXPECT_DOUBLE_EQ(perLayer(8, true, Recompute::Full), 2 * sbh / 8);
}

// Section 4.2.3: with 1F1B the first stage holds p microbatches of L / p
// layers, sbhL/t (34 + 5as/h) in all whatever p, plus the embedding dropout
// mask sbhp/t. GPT-3 on t = 8, p = 8 with 64 microbatches of one sequence.
TEST_F(ActivationTest, FirstPipelineStage) {
  TrainingConfig training;
  training.globalBatch = 64;
  training.precision = Precision::BF16;
  ClusterSpec cluster = findClusterPreset("a100-80g")->spec;
  cluster.gpus = 64;
  Layout l;
  l.tp = 8;
  l.pp = 8;
  l.microbatches = 64;
  l.schedule = Schedule::OneFOneB;
  Estimate e = estimate(gpt3, training, cluster, l);
  ASSERT_EQ(e.microBatch, 1);
  const double t = 8, p = 8, L = 96;
  double expected = sbh * L / t * (34 + 80) + sbh * p / t;
  // Stage 0 needs the most memory (its activations; the last stage adds the
  // logits but holds one microbatch).
  EXPECT_EQ(e.memory.stage, 0);
  EXPECT_DOUBLE_EQ(e.memory.activations, expected);

  // Interleaved with v = 2: the factor 1 + (p - 1) / (p v).
  l.schedule = Schedule::Interleaved;
  l.virtualStages = 2;
  e = estimate(gpt3, training, cluster, l);
  EXPECT_DOUBLE_EQ(e.memory.activations,
                   sbh * L / t * (34 + 80) * (1 + (p - 1) / (p * 2)) +
                       sbh * (p + (p - 1) / 2) / t);
}

// The generalization to other shapes, derived term by term as in section 4:
// Llama 3 8B (no dropout, 8 of 32 key/value heads, gated FFN of 14336) keeps
// per layer 8 sbh outside the TP regions (two norm inputs, QKV and MLP
// inputs), e(2 + 2g) = 5 sbh of Q, K, V and projection input, 3 e sbF =
// 21 sbh in the MLP, and e a s^2 b = 128 sbh of attention scores.
TEST(ActivationGeneralTest, LlamaShapes) {
  ModelSpec llama = findModelPreset("llama3-8b")->spec;
  ActivationShape a;
  a.microBatch = 1;
  a.seq = 8192;
  a.keySeq = 8192;
  a.elementBytes = 2;
  const double sbh = 8192.0 * 4096;
  EXPECT_DOUBLE_EQ(activationBytesPerLayer(llama, a), sbh * (8 + 5 + 21 + 128));
  a.recompute = Recompute::Selective;
  EXPECT_DOUBLE_EQ(activationBytesPerLayer(llama, a), sbh * (8 + 5 + 21));
}

// fp32 activations double every 2-byte term; dropout masks stay 1 byte:
// (16 e + 2) sbh + (2 e + 1) a s^2 b.
TEST(ActivationGeneralTest, Fp32Activations) {
  ModelSpec gpt3 = findModelPreset("gpt3-175b")->spec;
  ActivationShape a;
  a.microBatch = 1;
  a.seq = 2048;
  a.keySeq = 2048;
  a.elementBytes = 4;
  const double sbh = 2048.0 * 12288, quadratic = 96.0 * 2048 / 12288;
  EXPECT_DOUBLE_EQ(activationBytesPerLayer(gpt3, a),
                   sbh * (66 + 9 * quadratic));
}

// Context parallelism: each GPU keeps s / cp tokens; its queries still see
// all s keys.
TEST(ActivationGeneralTest, ContextParallel) {
  ModelSpec gpt3 = findModelPreset("gpt3-175b")->spec;
  ActivationShape a;
  a.microBatch = 1;
  a.seq = 1024;
  a.keySeq = 2048;
  a.elementBytes = 2;
  const double sbh = 1024.0 * 12288, scores = 5.0 * 96 * 1024 * 2048;
  EXPECT_DOUBLE_EQ(activationBytesPerLayer(gpt3, a), sbh * 34 + scores);
}

} // namespace
