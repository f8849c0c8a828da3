//===- PipelineTest.cpp - stages, in-flight microbatches, bubble --------===//
//
// Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on
// GPU Clusters Using Megatron-LM", sections 2.2.1 and 2.2.2: the bubble
// fraction (p - 1) / m of GPipe and 1F1B, (p - 1) / (v m) interleaved; and
// how many microbatches each stage keeps in flight.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Estimate.h"

#include <gtest/gtest.h>

using namespace cleave::planner;

namespace {

TEST(PipelineTest, BubbleFraction) {
  EXPECT_DOUBLE_EQ(bubbleFraction(Schedule::GPipe, 8, 64, 1), 7.0 / 64);
  EXPECT_DOUBLE_EQ(bubbleFraction(Schedule::OneFOneB, 8, 64, 1), 7.0 / 64);
  EXPECT_DOUBLE_EQ(bubbleFraction(Schedule::Interleaved, 8, 64, 2), 7.0 / 128);
  EXPECT_DOUBLE_EQ(bubbleFraction(Schedule::Interleaved, 4, 8, 4), 3.0 / 32);
  EXPECT_EQ(bubbleFraction(Schedule::OneFOneB, 1, 16, 1), 0);
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
  EXPECT_DOUBLE_EQ(e.bubble, 3.0 / 32);
  double perMicrobatch = e.time.bubble / 3;
  EXPECT_NEAR(e.time.compute + e.time.pp, 32 * perMicrobatch,
              1e-9 * e.stepTime);
}

} // namespace
