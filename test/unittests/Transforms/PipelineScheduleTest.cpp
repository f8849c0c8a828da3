//===- PipelineScheduleTest.cpp - the unrolled pipeline schedules ---------===//
//
// GPipe, 1F1B and interleaved 1F1B unrolled and run with uniform step
// times (a backward twice a forward, transfers free): their bubble against
// the closed forms of the papers, the activations each stage holds, and
// the errors.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/PipelineSchedule.h"

#include <gtest/gtest.h>

using namespace cleave::pipeline;

namespace {

Timeline run(ScheduleKind kind, int64_t p, int64_t m, int64_t v = 1) {
  Orders orders;
  EXPECT_EQ(unroll(kind, p, m, v, orders), "");
  Timeline t;
  // A chunk is 1/v of a stage's layers.
  EXPECT_EQ(simulate(orders, v, m, 1.0 / double(v), 2.0 / double(v), t), "");
  return t;
}

TEST(PipelineSchedule, GPipeBubbleAndMemory) {
  for (int64_t p : {2, 4})
    for (int64_t m : {1, 4, 8}) {
      Timeline t = run(ScheduleKind::GPipe, p, m);
      // (p - 1) / (m + p - 1) of all stages' time is idle.
      EXPECT_NEAR(t.bubble, double(p - 1) / double(m + p - 1), 1e-12)
          << "p=" << p << " m=" << m;
      // Every stage holds all m microbatches' activations.
      for (int64_t peak : t.peakInFlight)
        EXPECT_EQ(peak, m);
      EXPECT_NEAR(t.makespan, 3.0 * double(m + p - 1), 1e-12);
    }
}

TEST(PipelineSchedule, OneFOneBSameBubbleLessMemory) {
  for (int64_t p : {2, 4})
    for (int64_t m : {4, 8, 16}) {
      Timeline t = run(ScheduleKind::OneFOneB, p, m);
      EXPECT_NEAR(t.bubble, double(p - 1) / double(m + p - 1), 1e-12)
          << "p=" << p << " m=" << m;
      // Stage s holds at most p - s microbatches: the first stage p.
      for (int64_t s = 0; s < p; ++s)
        EXPECT_EQ(t.peakInFlight[s], std::min(p - s, m)) << "stage " << s;
    }
}

TEST(PipelineSchedule, InterleavedShrinksTheBubble) {
  for (int64_t p : {2, 4})
    for (int64_t v : {2, 3}) {
      int64_t m = 2 * p;
      Timeline one = run(ScheduleKind::OneFOneB, p, m);
      Timeline t = run(ScheduleKind::Interleaved, p, m, v);
      // Megatron-LM's figure: the bubble is (p - 1) / v of a microbatch's
      // time per stage, against m of work: (p - 1) / (v m + p - 1).
      EXPECT_NEAR(t.bubble, double(p - 1) / double(v * m + p - 1), 1e-12)
          << "p=" << p << " v=" << v;
      EXPECT_LT(t.bubble, one.bubble);
    }
}

// Stages of unequal cost: GPipe over two stages whose forward takes 1 and
// 2 (backward twice that). The second stage is the bottleneck: its
// forwards end at 1 + 2m, its backwards 4m later, and the first stage's
// last backward 2 after that: a makespan of 3 + 6m, busy 3m + 6m.
TEST(PipelineSchedule, UnequalStages) {
  for (int64_t m : {1, 4}) {
    Orders orders;
    ASSERT_EQ(unroll(ScheduleKind::GPipe, 2, m, 1, orders), "");
    Timeline t;
    ASSERT_EQ(simulate(orders, 1, m, std::vector<double>{1.0, 2.0}, 2.0, t),
              "");
    EXPECT_NEAR(t.makespan, 3.0 + 6.0 * double(m), 1e-12) << "m=" << m;
    EXPECT_NEAR(t.bubble, 1.0 - 9.0 * double(m) / (2.0 * (3.0 + 6.0 * m)),
                1e-12)
        << "m=" << m;
  }
  Orders orders;
  ASSERT_EQ(unroll(ScheduleKind::OneFOneB, 2, 4, 1, orders), "");
  Timeline t;
  EXPECT_NE(simulate(orders, 1, 4, std::vector<double>{1.0}, 2.0, t), "");
}

TEST(PipelineSchedule, OneStageHasNoBubble) {
  Timeline t = run(ScheduleKind::OneFOneB, 1, 4);
  EXPECT_NEAR(t.bubble, 0.0, 1e-12);
  EXPECT_EQ(t.peakInFlight[0], 1);
}

TEST(PipelineSchedule, Errors) {
  Orders orders;
  EXPECT_EQ(unroll(ScheduleKind::GPipe, 0, 4, 1, orders),
            "a pipeline needs at least one stage, got 0");
  EXPECT_EQ(unroll(ScheduleKind::OneFOneB, 2, 0, 1, orders),
            "a pipeline needs at least one microbatch, got 0");
  EXPECT_EQ(unroll(ScheduleKind::Interleaved, 4, 6, 2, orders),
            "the interleaved schedule takes the microbatches through each "
            "chunk in groups of the 4 stages: 6 microbatches are not a "
            "multiple of it");
  EXPECT_TRUE(orders.empty());

  // A last stage that runs a backward before its forward deadlocks.
  ASSERT_EQ(unroll(ScheduleKind::GPipe, 2, 2, 1, orders), "");
  std::swap(orders[1][0], orders[1][2]);
  Timeline t;
  EXPECT_EQ(simulate(orders, 1, 2, 1, 2, t),
            "the schedule deadlocks: every stage waits on a step another "
            "stage runs later");
  // A step run twice is not a schedule.
  ASSERT_EQ(unroll(ScheduleKind::GPipe, 2, 2, 1, orders), "");
  orders[0][1] = orders[0][0];
  EXPECT_EQ(simulate(orders, 1, 2, 1, 2, t), "stage 0 runs a step twice");
}

TEST(PipelineSchedule, ChromeTrace) {
  Timeline t = run(ScheduleKind::OneFOneB, 2, 2);
  std::string trace = chromeTrace(t, 1000.0);
  // One "X" event per step (2 stages x 2 microbatches x forward and
  // backward) and one name per stage row.
  size_t events = 0;
  for (size_t at = 0; (at = trace.find("\"ph\": \"X\"", at)) != std::string::npos;
       ++at)
    ++events;
  EXPECT_EQ(events, 8u);
  EXPECT_NE(trace.find("\"name\": \"stage 1\""), std::string::npos);
  EXPECT_NE(trace.find("\"name\": \"B1.0\""), std::string::npos);
  EXPECT_EQ(trace.rfind("{\"traceEvents\": [", 0), 0u);
}

} // namespace
