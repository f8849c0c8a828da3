//===- CostModelTest.cpp - step time against published training runs ----===//
//
// The planner's time model against the throughput that Megatron-LM
// measured: Narayanan et al. 2021, "Efficient Large-Scale Language Model
// Training on GPU Clusters Using Megatron-LM" (SC21), table 1, weak scaling
// of GPT models from 1.7B to 1T parameters on Selene (DGX A100 80GB, 8 HDR
// InfiniBand NICs per node), fp16, full recomputation. The micro-batch
// sizes and the interleaved schedule's layers per virtual stage are those
// of the paper's scripts (Megatron-LM examples/sc21/run_table_1.sh); the
// vocabulary is 51200 and the sequence 2048 (section 5.1). No per-row
// factor: one cluster preset, the default efficiencies.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Validate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

using namespace cleave::planner;

namespace {

struct Table1Row {
  double billions; ///< parameters, as the table gives them
  int64_t heads, hidden, layers, tp, pp, gpus, batch;
  int64_t microBatch;     ///< run_table_1.sh's MBS
  int64_t layersPerChunk; ///< --num-layers-per-virtual-pipeline-stage; 0: 1F1B
  double publishedTflops; ///< achieved teraFLOP/s per GPU
};

// Table 1 of Narayanan et al. 2021, with run_table_1.sh's MBS and virtual
// stages.
const Table1Row kTable1[] = {
    {1.7, 24, 2304, 24, 1, 1, 32, 512, 16, 0, 137},
    {3.6, 32, 3072, 30, 2, 1, 64, 512, 16, 0, 138},
    {7.5, 32, 4096, 36, 4, 1, 128, 512, 16, 0, 142},
    {18.4, 48, 6144, 40, 8, 1, 256, 1024, 8, 0, 135},
    {39.1, 64, 8192, 48, 8, 2, 512, 1536, 4, 0, 138},
    {76.1, 80, 10240, 60, 8, 4, 1024, 1792, 2, 5, 140},
    {145.6, 96, 12288, 80, 8, 8, 1536, 2304, 2, 5, 148},
    {310.1, 128, 16384, 96, 8, 16, 1920, 2160, 1, 3, 155},
    {529.6, 128, 20480, 105, 8, 35, 2520, 2520, 1, 1, 163},
    {1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 1, 0, 163},
};

constexpr int64_t kVocab = 51200, kSeq = 2048;

struct Table1Run {
  ModelSpec model;
  TrainingConfig training;
  ClusterSpec cluster;
  Layout layout;
};

Table1Run runOf(const Table1Row &r) {
  Table1Run s;
  s.model.applyArchDefaults(Arch::GPT);
  s.model.layers = r.layers;
  s.model.hidden = r.hidden;
  s.model.heads = r.heads;
  s.model.kvHeads = r.heads;
  s.model.ffn = 4 * r.hidden;
  s.model.vocab = kVocab;
  s.model.seq = kSeq;
  // fp16 with 16-bit gradients all-reduced, and no sequence parallelism
  // (it came with Korthikanti et al. 2022).
  s.training.globalBatch = r.batch;
  s.training.precision = Precision::FP16;
  s.training.f32Grads = false;
  s.training.sequenceParallel = false;
  s.cluster = findClusterPreset("a100-80g")->spec;
  s.cluster.gpus = r.gpus;
  Layout &l = s.layout;
  l.tp = r.tp;
  l.pp = r.pp;
  l.dp = r.gpus / (r.tp * r.pp);
  l.microbatches = r.batch / (l.dp * r.microBatch);
  l.recompute = Recompute::Full;
  if (r.layersPerChunk) {
    l.schedule = Schedule::Interleaved;
    l.virtualStages = r.layers / r.pp / r.layersPerChunk;
  }
  return s;
}

/// The FLOPs per step that the table's throughput counts, recomputation
/// included: F = 96 B s l h^2 (1 + s / 6h + V / 16 l h) (eq. 3).
double paperFlops(const Table1Row &r) {
  const double h = double(r.hidden), l = double(r.layers);
  return 96.0 * double(r.batch) * kSeq * l * h * h *
         (1 + kSeq / (6 * h) + kVocab / (16 * l * h));
}

TEST(CostModelTest, MegatronTable1) {
  for (const Table1Row &r : kTable1) {
    Table1Run s = runOf(r);
    ASSERT_FALSE(
        hasErrors(validateLayout(s.model, s.training, s.cluster, s.layout)))
        << r.billions << "B: " << s.layout.str();
    Estimate e = estimate(s.model, s.training, s.cluster, s.layout);
    const double predicted = paperFlops(r) / e.stepTime / double(r.gpus) / 1e12;
    const double error = predicted / r.publishedTflops - 1;
    std::printf("%7.1fB %-36s predicted %6.1f published %5.0f TFLOP/s per "
                "GPU (%+5.1f%%)\n",
                r.billions, s.layout.str().c_str(), predicted,
                r.publishedTflops, 100 * error);
    EXPECT_LT(std::abs(error), 0.10)
        << r.billions << "B: predicted " << predicted << ", published "
        << r.publishedTflops;
    // The planner counts the FLOPs the table counts, recomputation
    // included, but for the biases and norms (a few parts in 10^4).
    EXPECT_NEAR(e.hardwareFlopsPerStep / paperFlops(r), 1, 1e-3) << r.billions;
    EXPECT_NEAR(e.hardwareTflopsPerGpu, predicted, 1e-3 * predicted);
    // Each ran on 80 GB GPUs.
    EXPECT_TRUE(e.fits) << r.billions << "B: " << e.memory.total() / 1e9
                        << " GB";
    // The table's own parameter count (eq. 2), to 0.1 B: the shapes are
    // the table's.
    EXPECT_NEAR(double(s.model.params().total()) / 1e9, r.billions,
                0.05 + 1e-3 * r.billions)
        << r.billions;
  }
}

// What recomputation costs: Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models", abstract: the 530B GPT on
// 2240 A100 GPUs reaches a model FLOPs utilization of 54.2% with sequence
// parallelism and selective recomputation, "29% faster than the 42.1% we
// achieve using recomputation" (full). The layout is table 1's 530B (t = 8,
// p = 35, interleaved over 3 virtual stages; here dp = 8) with one sequence
// per microbatch; the global batch (2240 here) is not in the abstract, and
// the ratio hardly depends on it.
TEST(CostModelTest, SelectiveAgainstFullRecomputation) {
  Table1Run s = runOf(kTable1[8]);
  ASSERT_EQ(s.model.hidden, 20480);
  s.cluster.gpus = 2240;
  s.layout.dp = 8;
  s.training.globalBatch = 2240;
  s.training.sequenceParallel = true;
  s.layout.microbatches = 2240 / 8;
  s.layout.recompute = Recompute::Selective;
  Estimate selective = estimate(s.model, s.training, s.cluster, s.layout);
  s.layout.recompute = Recompute::Full;
  Estimate full = estimate(s.model, s.training, s.cluster, s.layout);
  EXPECT_TRUE(selective.fits);
  const double published = 54.2 / 42.1;
  const double predicted = full.stepTime / selective.stepTime;
  std::printf("530B selective over full recomputation: predicted %.3f, "
              "published %.3f; MFU %.1f%% and %.1f%% (published 54.2%% and "
              "42.1%%)\n",
              predicted, published, 100 * selective.mfu, 100 * full.mfu);
  EXPECT_NEAR(predicted / published, 1, 0.10);
  EXPECT_NEAR(selective.mfu / 0.542, 1, 0.10);
  EXPECT_NEAR(full.mfu / 0.421, 1, 0.10);
}

// A kernel-level check of the GEMM model: a GEMM of exactly one full wave
// of 256 x 128 tiles runs at the efficiency; one tile more takes a second
// wave (NVIDIA's "Matrix Multiplication Background" guide, "Wave
// Quantization": 108 SMs on the A100).
TEST(CostModelTest, WaveQuantization) {
  ClusterSpec c = findClusterPreset("a100-80g")->spec;
  ASSERT_EQ(c.sms, 108);
  const double k = 8192;
  // 108 tiles: 27 x 4 of 256 x 128.
  double full = gemmSeconds(c, Precision::BF16, 27 * 256, 4 * 128, k);
  double flops = 2.0 * 27 * 256 * 4 * 128 * k;
  EXPECT_NEAR(full, flops / (312e12 * c.computeEfficiency), 1e-12);
  // One more row of tiles: 112 tiles, two waves.
  double more = gemmSeconds(c, Precision::BF16, 28 * 256, 4 * 128, k);
  EXPECT_NEAR(more, 2 * full, 1e-12);
  // A short inner dimension is memory-bound: (2048 x 64) x (64 x 2048)
  // writes 8 MB for 0.5 GFLOP.
  double bmm = gemmSeconds(c, Precision::BF16, 2048, 2048, 64, 1024);
  double bytes = 2.0 * (2048 * 64 * 2 + 2048 * 2048) * 1024;
  EXPECT_NEAR(bmm, bytes / (2039e9 * c.memEfficiency), 1e-9);
}

// A fused attention core (FlashAttention) costs the FLOPs of its two GEMMs
// on the causal half of the blocks at the GEMM rate, with no traffic for
// the scores; the unfused core writes, softmaxes, drops out and reads them
// (Megatron-LM 2021), which at GPT-3's shapes (a = 96, s = 2048, h = 12288,
// t = 8) takes longer than the fused core's FLOPs.
TEST(CostModelTest, FusedAttention) {
  ModelSpec gpt3 = findModelPreset("gpt3-175b")->spec;
  ClusterSpec c = findClusterPreset("a100-80g")->spec;
  ActivationShape a;
  a.microBatch = 1;
  a.seq = a.keySeq = 2048;
  a.tp = 8;
  a.elementBytes = 2;
  LayerSeconds unfused = layerForwardSeconds(gpt3, a, c, Precision::BF16);
  a.fusedAttention = true;
  LayerSeconds fused = layerForwardSeconds(gpt3, a, c, Precision::BF16);
  const double flops = 0.5 * 4 * (96.0 / 8) * 2048 * 2048 * 128;
  EXPECT_NEAR(fused.attention, flops / (312e12 * c.computeEfficiency), 1e-12);
  EXPECT_EQ(fused.attentionBackwardRatio, 2.5);
  EXPECT_GT(unfused.attention, 2 * fused.attention);
  EXPECT_EQ(fused.gemm, unfused.gemm);
  EXPECT_EQ(fused.memory, unfused.memory);
}

} // namespace
