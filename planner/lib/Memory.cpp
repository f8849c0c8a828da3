//===- Memory.cpp - model states, activations and pipeline occupancy ----===//
//
// The memory formulas of ZeRO (model states) and Korthikanti et al. 2022
// (activations), and the pipeline quantities they depend on: the layers of
// each stage, the microbatches a stage holds, the bubble.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Estimate.h"

#include <algorithm>

namespace cleave::planner {

ModelStates modelStates(double numParams, const StateBytes &bytes, int zero,
                        int64_t shards, bool offload) {
  const double n = double(std::max<int64_t>(shards, 1));
  ModelStates s;
  s.params = bytes.param * numParams / (zero >= 3 ? n : 1);
  s.grads = bytes.grad * numParams / (zero >= 2 ? n : 1);
  double optimizer = bytes.optimizer * numParams / (zero >= 1 ? n : 1);
  (offload ? s.offloaded : s.optimizer) = optimizer;
  return s;
}

double activationBytesPerLayer(const ModelSpec &m, const ActivationShape &a) {
  const double b = double(a.microBatch), s = double(a.seq);
  const double keys = double(a.keySeq ? a.keySeq : a.seq);
  const double h = double(m.hidden), heads = double(m.heads);
  const double e = double(a.elementBytes),
               t = double(std::max<int64_t>(a.tp, 1));
  const double d = m.dropout ? 1 : 0; // one-byte dropout masks
  const double g = double(m.kvHeads ? m.kvHeads : m.heads) / heads;
  const double sbh = s * b * h;
  const bool sp = a.sequenceParallel && a.tp > 1;

  // Full recomputation keeps only the input of each layer.
  if (a.recompute == Recompute::Full)
    return e * sbh / (sp ? t : 1);

  // Outside the two TP regions: the inputs of the two norms, of the QKV
  // projection and of the first MLP linear, and the two dropout masks after
  // attention and MLP. Replicated over TP ranks unless SP splits them.
  const double outside = 4 * e * sbh + 2 * d * sbh;

  // Inside attention, split by TP (heads): Q, K, V and the input of the
  // output projection.
  const double attention = e * (2 + 2 * g) * sbh;
  // Softmax output, its dropout mask and the dropout output (without dropout
  // the softmax output is also the AV matmul's input: kept once).
  const double scores = (e + d + d * e) * heads * s * keys * b;

  // Inside the MLP, split by TP: the activation's input and output (and the
  // gate of a gated MLP).
  const double mlpTensors = m.gatedMlp ? 3 : 2;
  double mlp;
  if (m.isMoE()) {
    // fp32 router logits, then for each of the k experts of a token: its
    // dispatched input, the expert MLP's tensors and its output.
    const double k = double(std::max<int64_t>(m.topK, 1));
    mlp = 4 * s * b * double(m.experts) +
          k * (2 * e * sbh + mlpTensors * e * s * b * double(m.ffn));
  } else {
    mlp = mlpTensors * e * s * b * double(m.ffn);
  }

  double inside = attention + mlp;
  if (a.recompute != Recompute::Selective)
    inside += scores;
  return sp ? (outside + inside) / t : outside + inside / t;
}

std::vector<int64_t> splitLayers(int64_t layers, int64_t stages) {
  stages = std::max<int64_t>(stages, 1);
  std::vector<int64_t> split(stages, layers / stages);
  for (int64_t i = 0; i < layers % stages; ++i)
    ++split[i];
  return split;
}

double inFlightMicrobatches(Schedule schedule, int64_t pp, int64_t stage,
                            int64_t microbatches, int64_t virtualStages) {
  const double m = double(microbatches);
  switch (schedule) {
  case Schedule::GPipe:
    return m;
  case Schedule::OneFOneB:
    return std::min(m, double(pp - stage));
  case Schedule::Interleaved: {
    // Megatron's interleaved warm-up: (p - i - 1) * 2 + (v - 1) * p model
    // chunks of L / (p v) layers each run forward before the first
    // backward, and one more is in flight in the steady state.
    const double v = double(std::max<int64_t>(virtualStages, 1));
    double chunks = double((pp - stage - 1) * 2) + (v - 1) * double(pp) + 1;
    return std::min(m, chunks / v);
  }
  }
  return m;
}

double bubbleFraction(Schedule schedule, int64_t pp, int64_t microbatches,
                      int64_t virtualStages) {
  if (pp <= 1 || microbatches <= 0)
    return 0;
  double v = schedule == Schedule::Interleaved
                 ? double(std::max<int64_t>(virtualStages, 1))
                 : 1.0;
  return double(pp - 1) / (v * double(microbatches));
}

} // namespace cleave::planner
