//===- Compute.cpp - the time of a transformer layer's kernels ----------===//
//
// Compute time kernel by kernel: GEMMs by the roofline with wave
// quantization, memory-bound kernels by their bytes. What makes small
// models and small per-GPU slices run further below peak is stated here
// as physics (the last wave, the memory traffic of the attention scores
// and of the norms, which grows as h while the GEMMs grow as h^2), not as
// a per-model factor.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Estimate.h"

#include <algorithm>
#include <cmath>

namespace cleave::planner {

namespace {

/// cuBLAS's largest tensor-core tile on Ampere and Hopper, the one NVIDIA's
/// GEMM guide uses for its wave-quantization examples.
constexpr double kTileM = 256, kTileN = 128;

double peakFlops(const ClusterSpec &c, Precision precision) {
  // fp32 training runs on TF32 tensor cores, at half the 16-bit rate.
  return c.tflops * 1e12 * (precision == Precision::FP32 ? 0.5 : 1.0);
}

} // namespace

double memorySeconds(const ClusterSpec &c, double bytes) {
  return c.hbmBW > 0 ? bytes / (c.hbmBW * 1e9 * c.memEfficiency) : 0.0;
}

double gemmSeconds(const ClusterSpec &c, Precision precision, double m,
                   double n, double k, double batch) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0)
    return 0;
  const double flops = 2 * m * n * k * batch;
  double busy = 1;
  if (c.sms > 0) {
    const double tiles =
        std::ceil(m / kTileM) * std::ceil(n / kTileN) * std::ceil(batch);
    const double waves = std::ceil(tiles / double(c.sms));
    busy = tiles / (waves * double(c.sms));
  }
  const double compute =
      flops / (peakFlops(c, precision) * c.computeEfficiency * busy);
  const double e = double(activationBytes(precision));
  const double bytes = e * (m * k + k * n + m * n) * batch;
  return std::max(compute, memorySeconds(c, bytes));
}

LayerSeconds layerForwardSeconds(const ModelSpec &m, const ActivationShape &a,
                                 const ClusterSpec &c, Precision precision) {
  const double t = double(std::max<int64_t>(a.tp, 1));
  const double b = double(a.microBatch), s = double(a.seq);
  const double keys = double(a.keySeq ? a.keySeq : a.seq);
  const double tokens = b * s;
  const double h = double(m.hidden), heads = double(m.heads);
  const double kv = double(m.kvHeads ? m.kvHeads : m.heads);
  const double d = double(m.headDim());
  const double F = double(m.ffn);
  const double e = double(a.elementBytes);
  const double mask = m.dropout ? 1 : 0;
  const bool sp = a.sequenceParallel && a.tp > 1;
  auto gemm = [&](double rows, double cols, double inner, double batch = 1) {
    return gemmSeconds(c, precision, rows, cols, inner, batch);
  };

  LayerSeconds l;
  // Attention projections: Q, K and V in one GEMM, then the output.
  l.gemm += gemm(tokens, (h + 2 * kv * d) / t, h);
  l.gemm += gemm(tokens, h, h / t);
  // The MLP, or for a mixture of experts the router and each token's k
  // experts (grouped: k tokens' worth of rows through the expert weights).
  const double gate = m.gatedMlp ? 2 : 1;
  double rows = tokens;
  if (m.isMoE()) {
    l.gemm += gemm(tokens, double(m.experts), h);
    rows *= double(std::max<int64_t>(m.topK, 1));
  }
  l.gemm += gemm(rows, gate * F / t, h);
  l.gemm += gemm(rows, h, F / t);

  // The attention core: Q K^T and A V batched over microbatch and heads.
  const double groups = b * heads / t;
  if (a.fusedAttention) {
    // One kernel over the blocks below the causal diagonal, reading Q, K, V
    // and writing the output.
    const double flops = 0.5 * 4 * groups * s * keys * d;
    const double bytes =
        e * (2 * tokens * h + 2 * kv / heads * b * keys * h) / t;
    l.attention =
        std::max(flops / (peakFlops(c, precision) * c.computeEfficiency),
                 memorySeconds(c, bytes));
    l.attentionBackwardRatio = 2.5;
  } else {
    l.attention += gemm(s, keys, d, groups);
    l.attention += gemm(s, d, keys, groups);
    const double scores = groups * s * keys;
    const double softmaxBytes = 2 * e + (m.dropout ? 2 * e + mask : 0);
    l.attention += memorySeconds(c, softmaxBytes * scores);
  }

  double outside = (10 * e + 2 * mask) * tokens * h;
  double inside = (m.gatedMlp ? 3 : 2) * e * rows * F / t;
  if (!m.learnedPositions)
    inside += 2 * e * (1 + kv / heads) * tokens * h / t;
  if (m.isMoE()) // dispatch and combine copy each token's k rows
    outside += 4 * e * rows * h;
  l.memory = memorySeconds(c, (sp ? outside / t : outside) + inside);
  return l;
}

} // namespace cleave::planner
