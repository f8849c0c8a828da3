//===- Memory.cpp - model states, activations and pipeline occupancy ----===//
//
// The memory formulas of ZeRO (model states) and Korthikanti et al. 2022
// (activations), and the pipeline quantities they depend on: the layers of
// each stage, the microbatches a stage holds, the bubble.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Estimate.h"

#include "cleave/Transforms/PipelineSchedule.h"

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
  if (a.fusedAttention)
    inside += 4 * heads * s * b; // the log-sum-exp of each query row
  else if (a.recompute != Recompute::Selective)
    inside += scores;
  return sp ? (outside + inside) / t : outside + inside / t;
}

namespace {

pipeline::ScheduleKind kindOf(Schedule schedule) {
  switch (schedule) {
  case Schedule::GPipe:
    return pipeline::ScheduleKind::GPipe;
  case Schedule::OneFOneB:
    return pipeline::ScheduleKind::OneFOneB;
  case Schedule::Interleaved:
    return pipeline::ScheduleKind::Interleaved;
  }
  return pipeline::ScheduleKind::OneFOneB;
}

/// The schedule of `l` unrolled and run with equal stages: fills `inFlight`
/// and `bubble` (left at m and 0 when validateSchedule() would reject it).
void runSchedule(const Layout &l, PipelineShape &shape) {
  const int64_t p = std::max<int64_t>(l.pp, 1), v = l.chunks();
  shape.inFlight.assign(p, double(std::max<int64_t>(l.microbatches, 1)));
  // Past 4,096 steps the simulation, run for every layout of a search, is
  // slow: the closed forms, which it equals with equal stages
  // (PipelineTest).
  if (l.microbatches > 0 && l.microbatches * v * p > (int64_t(1) << 12)) {
    const double m = double(l.microbatches), vd = double(v);
    shape.bubble = pipeline::closedFormBubble(kindOf(l.schedule), p,
                                              l.microbatches, v);
    for (int64_t s = 0; s < p; ++s)
      shape.inFlight[s] =
          l.schedule == Schedule::GPipe ? m
          : l.schedule == Schedule::OneFOneB
              ? std::min(m, double(p - s))
              : std::min(m, (double((p - s - 1) * 2 + (v - 1) * p) + 1) / vd);
    return;
  }
  pipeline::Orders orders;
  pipeline::Timeline timeline;
  if (!pipeline::unroll(kindOf(l.schedule), p, l.microbatches, v, orders)
           .empty() ||
      !pipeline::simulate(orders, v, l.microbatches, 1.0, 2.0, timeline)
           .empty())
    return;
  shape.bubble = timeline.bubble;
  for (int64_t s = 0; s < p; ++s)
    shape.inFlight[s] = double(timeline.peakInFlight[s]) / double(v);
}

} // namespace

std::vector<int64_t> splitLayers(int64_t layers, int64_t stages) {
  stages = std::max<int64_t>(stages, 1);
  std::vector<int64_t> split(stages, layers / stages);
  for (int64_t i = 0; i < layers % stages; ++i)
    ++split[i];
  return split;
}

std::vector<int64_t> balanceLayers(const ModelSpec &m, int64_t chunks) {
  chunks = std::clamp<int64_t>(chunks, 1, std::max<int64_t>(m.layers, 1));
  if (m.layers < 1)
    return {0};
  const ParamCounts P = m.params();
  const double h = double(m.hidden), V = double(m.vocab);
  const double layerParams =
      (double(P.layers) +
       (m.isMoE() ? double(P.experts) * double(m.topK) / double(m.experts)
                  : 0.0)) /
      double(m.layers);
  std::vector<double> cost(m.layers,
                           2 * layerParams + 4.0 * double(m.seq) * h);
  return pipeline::balance(cost, chunks, /*first=*/2 * h,
                           /*last=*/2 * V * h + 4 * V);
}

PipelineShape pipelineShape(const ModelSpec &m, const Layout &l) {
  PipelineShape shape;
  const int64_t p = std::max<int64_t>(l.pp, 1), v = l.chunks();
  if (!l.split.empty() && int64_t(l.split.size()) + 1 == p * v) {
    shape.chunkStarts = {0};
    shape.chunkStarts.insert(shape.chunkStarts.end(), l.split.begin(),
                             l.split.end());
  } else {
    shape.chunkStarts = balanceLayers(m, p * v);
  }
  shape.stageLayers.assign(p, 0);
  shape.chunkLayers.assign(shape.chunkStarts.size(), 0);
  for (size_t c = 0; c < shape.chunkStarts.size(); ++c) {
    int64_t end = c + 1 < shape.chunkStarts.size() ? shape.chunkStarts[c + 1]
                                                    : m.layers;
    shape.chunkLayers[c] = end - shape.chunkStarts[c];
    shape.stageLayers[c % p] += shape.chunkLayers[c];
  }
  runSchedule(l, shape);
  return shape;
}

double inFlightMicrobatches(Schedule schedule, int64_t pp, int64_t stage,
                            int64_t microbatches, int64_t virtualStages) {
  Layout l;
  l.pp = pp;
  l.schedule = schedule;
  l.microbatches = microbatches;
  l.virtualStages = virtualStages;
  PipelineShape shape;
  runSchedule(l, shape);
  return shape.inFlight.at(stage);
}

double bubbleFraction(Schedule schedule, int64_t pp, int64_t microbatches,
                      int64_t virtualStages) {
  return pipeline::closedFormBubble(kindOf(schedule), pp, microbatches,
                                    virtualStages);
}

} // namespace cleave::planner
