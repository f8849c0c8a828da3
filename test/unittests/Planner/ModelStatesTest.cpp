//===- ModelStatesTest.cpp - ZeRO model-state memory --------------------===//
//
// Parameter, gradient and optimizer bytes per GPU against the numbers the
// ZeRO paper and the seed article publish.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Estimate.h"

#include <gtest/gtest.h>

using namespace cleave::planner;

namespace {

/// Mixed-precision Adam as the ZeRO paper and the seed article count it:
/// 16-bit gradients.
TrainingConfig mixedPrecisionAdam() {
  TrainingConfig t;
  t.precision = Precision::FP16;
  t.masterWeights = true;
  t.f32Grads = false;
  t.optimizer = Optimizer::Adam;
  return t;
}

// Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", section 3.1: mixed-precision Adam keeps 2 bytes
// of fp16 parameters, 2 of gradients and K = 12 of optimizer state (fp32
// parameters, momentum and variance).
TEST(ModelStatesTest, MixedPrecisionAdamIsSixteenBytes) {
  StateBytes b = stateBytes(mixedPrecisionAdam());
  EXPECT_EQ(b.param, 2);
  EXPECT_EQ(b.grad, 2);
  EXPECT_EQ(b.optimizer, 12);
  EXPECT_EQ(b.total(), 16);
}

// Cleave's default is what cleave-compile emits: fp32 weight gradients.
// Megatron-LM's distributed-optimizer guide ("float16 param, fp32 grads")
// gives 18 bytes per parameter, and 6 + 12/d with the optimizer state (fp32
// master weights and moments) distributed over d data-parallel ranks, which
// is ZeRO stage 1.
TEST(ModelStatesTest, CompiledMixedPrecisionIsEighteenBytes) {
  TrainingConfig t;
  t.precision = Precision::BF16;
  ASSERT_TRUE(t.f32Grads && t.masterWeights);
  StateBytes b = stateBytes(t);
  EXPECT_EQ(b.param, 2);
  EXPECT_EQ(b.grad, 4);
  EXPECT_EQ(b.optimizer, 12);
  EXPECT_EQ(b.total(), 18);
  for (int d : {2, 8, 64})
    EXPECT_DOUBLE_EQ(modelStates(1, b, 1, d, false).total(), 6 + 12.0 / d)
        << d;
  // ZeRO-2 also shards the fp32 gradients.
  EXPECT_DOUBLE_EQ(modelStates(1, b, 2, 8, false).total(), 2 + 16.0 / 8);
  t.precision = Precision::FP32; // the flag is meaningless in fp32
  t.f32Grads = false;
  EXPECT_EQ(stateBytes(t).grad, 4);
}

// ZeRO, figure 1: Psi = 7.5B parameters, Nd = 64 data-parallel GPUs, K = 12:
// baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB per GPU
// (the figure rounds to one decimal; GB = 1e9 bytes).
TEST(ModelStatesTest, ZeroPaperFigure1) {
  const double psi = 7.5e9;
  StateBytes b = stateBytes(mixedPrecisionAdam());
  auto gb = [&](int zero) {
    return modelStates(psi, b, zero, 64, /*offload=*/false).total() / 1e9;
  };
  EXPECT_NEAR(gb(0), 120.0, 0.05);
  EXPECT_NEAR(gb(1), 31.4, 0.05);
  EXPECT_NEAR(gb(2), 16.6, 0.05);
  EXPECT_NEAR(gb(3), 1.9, 0.05);
  // The unrounded values: (2 + 2 + 12/64), (2 + 14/64), 16/64 bytes per param.
  EXPECT_DOUBLE_EQ(gb(1), 31.40625);
  EXPECT_DOUBLE_EQ(gb(2), 16.640625);
  EXPECT_DOUBLE_EQ(gb(3), 1.875);
}

/// The ZeRO paper's model: 7.5B measured layer parameters, the rest of the
/// model negligible (one small layer's shapes).
ModelSpec zeroPaperModel() {
  ModelSpec m;
  m.applyArchDefaults(Arch::GPT);
  m.layers = 1;
  m.hidden = 64;
  m.heads = 1;
  m.kvHeads = 1;
  m.ffn = 256;
  m.vocab = 64;
  m.seq = 64;
  ParamCounts counts;
  counts.layers = 7'500'000'000;
  m.measured = counts;
  return m;
}

// The same figures through the whole estimator: a model with 7.5B measured
// layer parameters on 64 data-parallel GPUs.
TEST(ModelStatesTest, ZeroPaperFigure1ThroughEstimate) {
  ModelSpec m = zeroPaperModel();

  TrainingConfig t = mixedPrecisionAdam();
  t.globalBatch = 64;
  ClusterSpec c = findClusterPreset("a100-80g")->spec;
  c.gpus = 64;
  Layout l;
  l.dp = 64;
  const double expected[] = {120.0, 31.40625, 16.640625, 1.875};
  for (int zero = 0; zero <= 3; ++zero) {
    l.zero = zero;
    Estimate e = estimate(m, t, c, l);
    double states = e.memory.params + e.memory.grads + e.memory.optimizer;
    EXPECT_NEAR(states / 1e9, expected[zero], 1e-9) << "zero=" << zero;
  }
}

// The seed article: Adam needs 16 bytes of model state per parameter with
// fp32 master weights and 12 without, so a 10B-parameter model needs 120 GB
// without them (and 160 GB with them) before any sharding.
TEST(ModelStatesTest, SeedTenBillionModel) {
  TrainingConfig t = mixedPrecisionAdam();
  t.masterWeights = false;
  StateBytes b = stateBytes(t);
  EXPECT_EQ(b.total(), 12);
  EXPECT_DOUBLE_EQ(modelStates(10e9, b, 0, 1, false).total() / 1e9, 120.0);

  t.masterWeights = true;
  EXPECT_DOUBLE_EQ(modelStates(10e9, stateBytes(t), 0, 1, false).total() / 1e9,
                   160.0);
}

TEST(ModelStatesTest, OtherPrecisionsAndOptimizers) {
  TrainingConfig t;
  t.precision = Precision::FP32; // no separate master copy
  StateBytes fp32 = stateBytes(t);
  EXPECT_EQ(fp32.param, 4);
  EXPECT_EQ(fp32.grad, 4);
  EXPECT_EQ(fp32.optimizer, 8);

  t.optimizer = Optimizer::SGD;
  EXPECT_EQ(stateBytes(t).optimizer, 0);
  t.precision = Precision::BF16;
  EXPECT_EQ(stateBytes(t).optimizer, 4); // the master weights only
}

TEST(ModelStatesTest, OffloadMovesOptimizerStateToTheHost) {
  StateBytes b = stateBytes(mixedPrecisionAdam());
  ModelStates s = modelStates(1e9, b, 1, 4, /*offload=*/true);
  EXPECT_EQ(s.optimizer, 0);
  EXPECT_DOUBLE_EQ(s.offloaded, 12e9 / 4);
  EXPECT_DOUBLE_EQ(s.total(), 4e9);
}

// ZeRO-3 holds a layer's gathered parameters while it runs and prefetches
// the next: DeepSpeed's estimate_zero3_model_states_mem_needs counts
// `largest_layer_memory = 4 * largest_layer_params` (16-bit, twice). ZeRO-2
// and 3 also hold a layer's whole gradient until its reduce-scatter.
TEST(ModelStatesTest, ZeroGatherAndReduceScatterBuffers) {
  StateBytes b = stateBytes(mixedPrecisionAdam());
  EXPECT_DOUBLE_EQ(zeroBufferBytes(1e9, b, 3, 64), 4e9 + 2e9);
  EXPECT_DOUBLE_EQ(zeroBufferBytes(1e9, b, 2, 64), 2e9);
  EXPECT_EQ(zeroBufferBytes(1e9, b, 1, 64), 0);
  EXPECT_EQ(zeroBufferBytes(1e9, b, 3, 1), 0); // nothing is sharded

  // Through the estimate, on Narayanan et al. 2021's 7.5B GPT (table 1)
  // over 64 data-parallel GPUs: the largest layer is the embedding,
  // (V + s) h = (51200 + 2048) x 4096 parameters, larger than a layer's
  // 12 h^2 + 13 h.
  ModelSpec m;
  m.applyArchDefaults(Arch::GPT);
  m.layers = 36;
  m.hidden = 4096;
  m.heads = 32;
  m.kvHeads = 32;
  m.ffn = 4 * 4096;
  m.vocab = 51200;
  m.seq = 2048;
  TrainingConfig t = mixedPrecisionAdam();
  t.globalBatch = 64;
  ClusterSpec c = findClusterPreset("a100-80g")->spec;
  c.gpus = 64;
  Layout l;
  l.dp = 64;
  l.zero = 3;
  l.recompute = Recompute::Full;
  Estimate e = estimate(m, t, c, l);
  const double embedding = (51200.0 + 2048) * 4096;
  EXPECT_DOUBLE_EQ(e.memory.buffers, 6 * embedding);
  EXPECT_DOUBLE_EQ(e.memory.total(),
                   e.memory.params + e.memory.grads + e.memory.optimizer +
                       e.memory.activations + e.memory.buffers);
  l.zero = 1;
  EXPECT_EQ(estimate(m, t, c, l).memory.buffers, 0);
}

// Offloaded optimizer state (ZeRO-Offload, Ren et al. 2021: the fp32
// master weights and moments, 12 bytes per parameter, on the host) shards
// like the GPU's with ZeRO >= 1: a node of 8 of the 64 data-parallel GPUs
// holds 8 / 64 of it.
TEST(ModelStatesTest, OffloadedBytesPerNode) {
  ModelSpec m = zeroPaperModel();
  TrainingConfig t = mixedPrecisionAdam();
  t.globalBatch = 64;
  t.offload = true;
  ClusterSpec c = findClusterPreset("a100-80g")->spec;
  c.gpus = 64;
  Layout l;
  l.dp = 64;
  l.zero = 1;
  Estimate e = estimate(m, t, c, l);
  EXPECT_DOUBLE_EQ(e.memory.offloaded, 12 * 7.5e9 / 64);
  EXPECT_DOUBLE_EQ(e.hostBytesPerNode, 8 * 12 * 7.5e9 / 64);
  EXPECT_EQ(e.memory.optimizer, 0);
}

} // namespace
