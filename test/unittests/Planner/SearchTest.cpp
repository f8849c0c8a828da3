//===- SearchTest.cpp - ranking layouts ---------------------------------===//
//
// The search returns valid layouts that fit, fastest first, one per mesh,
// with a reason for each loser; constraints are honoured; when nothing fits
// it reports the smallest layout.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Search.h"

#include <gtest/gtest.h>

using namespace cleave::planner;

namespace {

class SearchTest : public ::testing::Test {
protected:
  ModelSpec model = findModelPreset("llama3-70b")->spec;
  TrainingConfig training;
  ClusterSpec cluster = findClusterPreset("h100")->spec;

  SearchTest() {
    training.globalBatch = 256;
    cluster.gpus = 64;
  }
};

TEST_F(SearchTest, RanksValidFittingLayouts) {
  SearchResult r = search(model, training, cluster, {});
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_EQ(r.ranked.front().reason, "best");
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const Estimate &e = r.ranked[i].estimate;
    EXPECT_EQ(e.layout.gpus(), 64);
    EXPECT_TRUE(e.fits);
    EXPECT_FALSE(hasErrors(validateLayout(model, training, cluster, e.layout)))
        << e.layout.str();
    if (i > 0) {
      EXPECT_GE(e.stepTime, r.ranked[i - 1].estimate.stepTime);
      EXPECT_FALSE(r.ranked[i].reason.empty());
    }
  }
  // One row per mesh.
  for (size_t i = 0; i < r.ranked.size(); ++i)
    for (size_t j = i + 1; j < r.ranked.size(); ++j) {
      const Layout &a = r.ranked[i].estimate.layout;
      const Layout &b = r.ranked[j].estimate.layout;
      EXPECT_FALSE(a.tp == b.tp && a.pp == b.pp && a.dp == b.dp &&
                   a.cp == b.cp && a.ep == b.ep);
    }
  // Without model parallelism 70B fits on 80 GB GPUs only with its
  // parameters sharded too: 16 x 70.6e9 / 64 = 17.6 GB of model state, but
  // 2 x 70.6e9 = 141 GB of parameters alone with ZeRO 2.
  for (const RankedLayout &row : r.ranked)
    if (row.estimate.layout.tp * row.estimate.layout.pp == 1) {
      EXPECT_EQ(row.estimate.layout.zero, 3) << row.estimate.layout.str();
    }
  EXPECT_GT(r.tooBig, 0);
}

TEST_F(SearchTest, HonoursConstraints) {
  SearchConstraints k;
  k.tp = 8;
  k.pp = 4;
  k.cp = 1;
  k.zero = 1;
  k.recompute = Recompute::Selective;
  SearchResult r = search(model, training, cluster, k);
  ASSERT_EQ(r.ranked.size(), 1u);
  const Layout &l = r.ranked.front().estimate.layout;
  EXPECT_EQ(l.tp, 8);
  EXPECT_EQ(l.pp, 4);
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(l.zero, 1);
  EXPECT_EQ(l.recompute, Recompute::Selective);
}

TEST_F(SearchTest, ReportsTheSmallestWhenNothingFits) {
  model = findModelPreset("llama3-405b")->spec;
  cluster.gpus = 8;
  SearchResult r = search(model, training, cluster, {});
  EXPECT_TRUE(r.ranked.empty());
  ASSERT_TRUE(r.smallest);
  EXPECT_FALSE(r.smallest->fits);
  // ZeRO-3 with full recomputation is the smallest.
  EXPECT_EQ(r.smallest->layout.recompute, Recompute::Full);
}

TEST_F(SearchTest, ExplainsTheLargestDifference) {
  Layout a;
  a.tp = 8;
  a.pp = 4;
  a.dp = 2;
  a.microbatches = 128;
  Layout b = a;
  b.microbatches = 8; // a larger bubble
  Estimate ea = estimate(model, training, cluster, a);
  Estimate eb = estimate(model, training, cluster, b);
  ASSERT_GT(eb.stepTime, ea.stepTime);
  std::string why = explainLoss(eb, ea);
  EXPECT_NE(why.find("pipeline bubble (0.273 vs 0.023"), std::string::npos)
      << why;
  EXPECT_EQ(explainLoss(ea, ea), "equivalent");
}

TEST_F(SearchTest, InvalidMeshesAreCounted) {
  SearchConstraints k;
  k.tp = 3; // 3 does not divide 64: no mesh at all
  SearchResult r = search(model, training, cluster, k);
  EXPECT_EQ(r.meshes, 0);
  k.tp = 64; // 64 > 64 heads is fine, but 8 kv heads are replicated...
  k.pp = 1;
  model.heads = 32; // ...and now tp no longer divides the heads
  r = search(model, training, cluster, k);
  EXPECT_EQ(r.meshes, 1);
  EXPECT_EQ(r.invalidMeshes, 1);
  ASSERT_EQ(r.meshErrors.size(), 1u);
  EXPECT_EQ(r.meshErrors.front(),
            "tp=64 does not divide the 32 attention heads");
}

// The interleaved schedule is searched where its chunks do not divide the
// layers: 30 layers in 4 x 2 chunks, cut by FLOPs as the compiler cuts them
// (the LM head's 2 V h per token, about two of Llama 3 8B's layers, leaves
// the last chunk fewer).
TEST_F(SearchTest, InterleavesLayersThatDoNotDivide) {
  model = findModelPreset("llama3-8b")->spec;
  model.layers = 30;
  cluster.gpus = 16;
  SearchConstraints k;
  k.tp = 2;
  k.pp = 4;
  k.cp = 1;
  k.schedule = Schedule::Interleaved;
  k.virtualStages = 2;
  SearchResult r = search(model, training, cluster, k);
  ASSERT_EQ(r.ranked.size(), 1u);
  const Estimate &e = r.ranked.front().estimate;
  EXPECT_EQ(e.layout.schedule, Schedule::Interleaved);
  ASSERT_EQ(e.pipeline.chunkLayers.size(), 8u);
  EXPECT_EQ(e.pipeline.chunkStarts, balanceLayers(model, 8));
  int64_t total = 0;
  for (int64_t n : e.pipeline.chunkLayers)
    total += n;
  EXPECT_EQ(total, 30);
  EXPECT_LT(e.pipeline.chunkLayers.back(), e.pipeline.chunkLayers.front());
}

// Mixture of experts: ep is searched, folded into dp.
TEST(SearchMoETest, SearchesExpertParallelism) {
  ModelSpec model = findModelPreset("mixtral-8x7b")->spec;
  model.seq = 4096;
  TrainingConfig training;
  training.globalBatch = 512;
  ClusterSpec cluster = findClusterPreset("h100")->spec;
  cluster.gpus = 32;
  SearchResult r = search(model, training, cluster, {});
  ASSERT_FALSE(r.ranked.empty());
  bool sawEp = false;
  for (const RankedLayout &l : r.ranked) {
    EXPECT_EQ(l.estimate.layout.dp % l.estimate.layout.ep, 0);
    sawEp |= l.estimate.layout.ep > 1;
  }
  EXPECT_TRUE(sawEp);
}

} // namespace
