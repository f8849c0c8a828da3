//===- PipelineTest.cpp - stages, in-flight microbatches, bubble --------===//
//
// Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on
// GPU Clusters Using Megatron-LM", sections 2.2.1 and 2.2.2: the bubble
// (p - 1) / m of GPipe and 1F1B, (p - 1) / (v m) interleaved, relative to
// the busy time, which the planner reports as the compiler does, as a
// fraction of the step: (p - 1) / (m + p - 1), (p - 1) / (v m + p - 1); how
// many microbatches each stage keeps in flight; and the stages' layers,
// balanced as -dist-pipeline-parallel balances them.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Estimate.h"
#include "cleave/Transforms/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <tuple>

using namespace cleave::planner;

namespace {

TEST(PipelineTest, BubbleFraction) {
  EXPECT_DOUBLE_EQ(bubbleFraction(Schedule::GPipe, 8, 64, 1), 7.0 / 71);
  EXPECT_DOUBLE_EQ(bubbleFraction(Schedule::OneFOneB, 8, 64, 1), 7.0 / 71);
  EXPECT_DOUBLE_EQ(bubbleFraction(Schedule::Interleaved, 8, 64, 2), 7.0 / 135);
  EXPECT_DOUBLE_EQ(bubbleFraction(Schedule::Interleaved, 4, 8, 4), 3.0 / 35);
  EXPECT_EQ(bubbleFraction(Schedule::OneFOneB, 1, 16, 1), 0);
}

// The estimate's bubble is the schedule's simulated with equal stages (the
// compiler's report), which the closed form matches.
TEST(PipelineTest, SimulatedBubbleIsTheClosedForm) {
  for (auto [schedule, p, m, v] :
       {std::tuple{Schedule::GPipe, 4, 8, 1}, {Schedule::OneFOneB, 4, 8, 1},
        {Schedule::OneFOneB, 2, 3, 1}, {Schedule::Interleaved, 4, 8, 2},
        {Schedule::Interleaved, 2, 4, 3}}) {
    ModelSpec model = findModelPreset("llama3-8b")->spec;
    Layout l;
    l.pp = p;
    l.microbatches = m;
    l.schedule = schedule;
    l.virtualStages = v;
    EXPECT_NEAR(pipelineShape(model, l).bubble,
                bubbleFraction(schedule, p, m, v), 1e-12)
        << p << " stages, " << m << " microbatches, " << v << " chunks";
  }
}

TEST(PipelineTest, InFlightMicrobatches) {
  // GPipe runs all forwards first.
  EXPECT_EQ(inFlightMicrobatches(Schedule::GPipe, 4, 0, 16, 1), 16);
  // 1F1B: p - i on stage i, never more than m.
  EXPECT_EQ(inFlightMicrobatches(Schedule::OneFOneB, 4, 0, 16, 1), 4);
  EXPECT_EQ(inFlightMicrobatches(Schedule::OneFOneB, 4, 3, 16, 1), 1);
  EXPECT_EQ(inFlightMicrobatches(Schedule::OneFOneB, 4, 0, 2, 1), 2);
  // Interleaved, first stage: p + (p - 1) / v stage-equivalents.
  EXPECT_DOUBLE_EQ(inFlightMicrobatches(Schedule::Interleaved, 8, 0, 64, 2),
                   8 + 7.0 / 2);
  EXPECT_DOUBLE_EQ(inFlightMicrobatches(Schedule::Interleaved, 8, 7, 64, 2),
                   (0 + 8 + 1) / 2.0);
}

// Balanced by FLOPs: Llama 3 8B's LM head (2 V h per token, about 1.8
// layers) makes the last of three stages hold fewer layers; where the
// costs tie, the earlier stage gets the fewer layers.
TEST(PipelineTest, BalanceLayers) {
  ModelSpec llama = findModelPreset("llama3-8b")->spec;
  Layout l;
  l.pp = 3;
  l.microbatches = 6;
  PipelineShape shape = pipelineShape(llama, l);
  EXPECT_EQ(shape.stageLayers, (std::vector<int64_t>{11, 11, 10}));
  EXPECT_EQ(shape.chunkStarts, (std::vector<int64_t>{0, 11, 22}));

  // Three layers on two stages: the head, however light, is more than the
  // embedding, so the first stage takes two.
  ModelSpec small = llama;
  small.layers = 3;
  small.vocab = 8;
  EXPECT_EQ(balanceLayers(small, 2), (std::vector<int64_t>{0, 2}));
  // Equal costs tie; the earlier cut wins.
  EXPECT_EQ(cleave::pipeline::balance({1, 1, 1}, 2, 0, 0),
            (std::vector<int64_t>{0, 1}));

  // Interleaved: chunk c on stage c mod p.
  l.pp = 2;
  l.schedule = Schedule::Interleaved;
  l.virtualStages = 2;
  l.microbatches = 4;
  shape = pipelineShape(llama, l);
  ASSERT_EQ(shape.chunkLayers.size(), 4u);
  EXPECT_EQ(shape.stageLayers[0], shape.chunkLayers[0] + shape.chunkLayers[2]);
  EXPECT_EQ(shape.stageLayers[1], shape.chunkLayers[1] + shape.chunkLayers[3]);
}

// A given split replaces the balance: Llama 3 405B's 126 layers over 16
// stages with one layer fewer on the first and the last stage (Llama Team
// 2024, "The Llama 3 Herd of Models", section 3.3.2, on balancing the
// pipeline), 7 + 14 x 8 + 7.
TEST(PipelineTest, GivenSplit) {
  ModelSpec llama = findModelPreset("llama3-405b")->spec;
  Layout l;
  l.pp = 16;
  l.microbatches = 16;
  for (int64_t first = 7; first < 126; first += 8)
    l.split.push_back(first);
  ASSERT_EQ(l.split.size(), 15u);
  PipelineShape shape = pipelineShape(llama, l);
  std::vector<int64_t> expected(16, 8);
  expected.front() = expected.back() = 7;
  EXPECT_EQ(shape.stageLayers, expected);
  EXPECT_EQ(shape.chunkStarts.front(), 0);
  EXPECT_EQ(shape.chunkStarts.back(), 119);

  // Interleaved: 32 chunks of 126 layers, uneven (4 or 3 each) by the
  // balance when no split is given.
  l.split.clear();
  l.schedule = Schedule::Interleaved;
  l.virtualStages = 2;
  shape = pipelineShape(llama, l);
  ASSERT_EQ(shape.chunkLayers.size(), 32u);
  for (int64_t n : shape.chunkLayers)
    EXPECT_TRUE(n == 3 || n == 4) << n;
  int64_t total = 0;
  for (int64_t n : shape.stageLayers)
    total += n;
  EXPECT_EQ(total, 126);
}

TEST(PipelineTest, SplitLayers) {
  EXPECT_EQ(splitLayers(80, 4), (std::vector<int64_t>{20, 20, 20, 20}));
  EXPECT_EQ(splitLayers(80, 3), (std::vector<int64_t>{27, 27, 26}));
  EXPECT_EQ(splitLayers(2, 1), (std::vector<int64_t>{2}));
}

// The estimate's step time grows by the bubble: (p - 1) / v microbatch
// times on top of m.
TEST(PipelineTest, StepTimeIncludesTheBubble) {
  ModelSpec m = findModelPreset("llama3-8b")->spec;
  TrainingConfig t;
  t.globalBatch = 32;
  ClusterSpec c = findClusterPreset("h100")->spec;
  c.gpus = 4;
  Layout l;
  l.pp = 4;
  l.microbatches = 32;
  Estimate e = estimate(m, t, c, l);
  EXPECT_DOUBLE_EQ(e.bubble, 3.0 / 35);
  // The slowest stage's microbatch time; the fill and drain are the other
  // three stages' (balanced by FLOPs, 7 to 9 layers: within 15% of it).
  double slowest = (e.time.compute + e.time.pp) / 32;
  EXPECT_LE(e.time.bubble, 3 * slowest * (1 + 1e-12));
  EXPECT_GT(e.time.bubble, 0.85 * 3 * slowest);
  EXPECT_NEAR(e.stepTime, e.time.compute + e.time.pp + e.time.bubble,
              1e-9 * e.stepTime);

  // The balance's split given explicitly gives the same step; an uneven
  // one leaves 11 layers and the head on the last stage, which then sets
  // the pace.
  Layout light = l;
  light.split = {4, 12, 21}; // 4, 8, 9, 11 layers
  Estimate f = estimate(m, t, c, light);
  l.split = {8, 16, 25}; // 8, 8, 9, 7: the balance
  Estimate g = estimate(m, t, c, l);
  EXPECT_DOUBLE_EQ(g.stepTime, e.stepTime);
  EXPECT_GT(f.time.compute, g.time.compute); // 11 layers and the head
}

} // namespace
