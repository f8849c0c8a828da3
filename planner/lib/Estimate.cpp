//===- Estimate.cpp - communication and time of a layout ----------------===//
//
// Evaluates every pipeline stage of a layout: its memory (model states and
// activations), its compute per microbatch, and the bytes its collectives
// move over each link class, then combines the slowest stage into a step
// time with the pipeline bubble and the exposed data-parallel sync.
//
// Collectives are costed as hierarchical algorithms on a group with k members
// per node over N nodes: an all-reduce of B bytes moves 2 (k-1)/k B inside
// nodes and 2 (N-1)/N B/k between them; all-gather and reduce-scatter half
// of that; an all-to-all (k-1)/n B and (n-k)/n B. The two phases do not
// overlap. Times use the cluster's bandwidths times its comm efficiency.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Estimate.h"

#include <algorithm>

namespace cleave::planner {

LinkBytes CommEstimate::total() const {
  LinkBytes all;
  all += tp;
  all += cp;
  all += ep;
  all += pp;
  all += dp;
  return all;
}

std::vector<int64_t> Estimate::stagesOver() const {
  std::vector<int64_t> over;
  for (const MemoryEstimate &s : stageMemory)
    if (s.total() > usableBytes)
      over.push_back(s.stage);
  return over;
}

double zeroBufferBytes(double layerParams, const StateBytes &bytes, int zero,
                       int64_t shards) {
  if (zero < 2 || shards <= 1)
    return 0;
  double buffers = bytes.grad * layerParams;
  if (zero >= 3)
    buffers += 2 * bytes.param * layerParams;
  return buffers;
}

double modelFlopsPerToken(const ModelSpec &m) {
  const ParamCounts p = m.params();
  const double layerParams =
      double(p.layers) +
      (m.isMoE() && m.experts
           ? double(p.experts) * double(m.topK) / double(m.experts)
           : double(p.experts));
  const double attention = 4.0 * double(m.seq) * double(m.hidden);
  const double head = 2.0 * double(m.vocab) * double(m.hidden);
  const double forward =
      2.0 * layerParams + double(m.layers) * attention + head;
  return 3.0 * forward;
}

namespace {

/// A communication group: `size` ranks `stride` apart in rank order.
struct Group {
  int64_t size = 1;
  int64_t perNode = 1; ///< members sharing a node
  int64_t nodes = 1;   ///< nodes the group spans
};

Group place(int64_t stride, int64_t size, int64_t gpusPerNode) {
  Group g;
  g.size = std::max<int64_t>(size, 1);
  if (g.size == 1)
    return g;
  const int64_t span = stride * g.size;
  if (stride >= gpusPerNode || (span < gpusPerNode && gpusPerNode % span)) {
    // Members on different nodes, or a group that fits in a node but whose
    // neighbours straddle a node boundary: the slowest group crosses the
    // network, and its ring runs at the inter-node bandwidth.
    g.perNode = 1;
  } else {
    g.perNode = std::min(g.size, std::max<int64_t>(1, gpusPerNode / stride));
  }
  g.nodes = (g.size + g.perNode - 1) / g.perNode;
  return g;
}

LinkBytes allReduce(const Group &g, double bytes) {
  if (g.size <= 1)
    return {};
  const double k = double(g.perNode), n = double(g.nodes);
  return {2 * (k - 1) / k * bytes, 2 * (n - 1) / n * bytes / k};
}

/// All-gather (or reduce-scatter) of a `bytes` buffer.
LinkBytes allGather(const Group &g, double bytes) {
  LinkBytes v = allReduce(g, bytes);
  return {v.intra / 2, v.inter / 2};
}

/// All-to-all where each rank sends `bytes` in total.
LinkBytes allToAll(const Group &g, double bytes) {
  if (g.size <= 1)
    return {};
  const double n = double(g.size), k = double(g.perNode);
  return {(k - 1) / n * bytes, (n - k) / n * bytes};
}

LinkBytes pointToPoint(bool interNode, double bytes) {
  return interNode ? LinkBytes{0, bytes} : LinkBytes{bytes, 0};
}

LinkBytes scaled(LinkBytes v, double f) { return {v.intra * f, v.inter * f}; }

/// The time that communication of `comm` seconds adds when it overlaps
/// `window` seconds of compute.
double exposed(double comm, double window, const ClusterSpec &c) {
  return std::max(0.0, comm - window) + c.overlapCost * std::min(comm, window);
}

double seconds(const LinkBytes &v, const ClusterSpec &c) {
  const double eff = c.commEfficiency;
  double t = 0;
  if (v.intra > 0)
    t += v.intra / (c.intraBW * 1e9 * eff);
  if (v.inter > 0)
    t += v.inter / (c.interBW * 1e9 * eff);
  return t;
}

/// One pipeline stage, per microbatch unless said otherwise.
struct StageCost {
  MemoryEstimate memory;
  // Parameters on each GPU.
  double denseParams = 0, expertParams = 0;
  // Seconds of compute; attentionCore is the forward and backward of the
  // attention scores, which hides the context-parallel ring.
  double forward = 0, backward = 0, recompute = 0, attentionCore = 0;
  LinkBytes tp, cp, ep, pp;
  double tpTime = 0, tpTimeIntra = 0, cpExposed = 0, epTime = 0, ppTime = 0;
  double perMicrobatch() const {
    return forward + backward + recompute + tpTime + cpExposed + epTime +
           ppTime;
  }
};

} // namespace

Estimate estimate(const ModelSpec &m, const TrainingConfig &training,
                  const ClusterSpec &cluster, const Layout &layout) {
  Estimate est;
  est.layout = layout;
  const int64_t t = layout.tp, p = layout.pp, c = layout.cp, e = layout.ep;
  const int64_t D = layout.denseDp(), mb = layout.microbatches;
  const int64_t v = layout.chunks(), G = cluster.gpusPerNode;
  const double b = double(training.globalBatch) / double(D * mb);
  est.microBatch = training.globalBatch / (D * mb);
  const int64_t seq = m.seq, localSeq = seq / c;
  const int64_t eb = activationBytes(training.precision);
  const bool sp = training.sequenceParallel && t > 1;
  const bool fullRecompute = layout.recompute == Recompute::Full;
  const ParamCounts P = m.params();
  const StateBytes bytes = stateBytes(training);
  est.pipeline = pipelineShape(m, layout);

  // Groups, with ranks ordered tp, cp, [ep,] dp, pp from the innermost.
  const int64_t denseShards = c * D;
  const int64_t expertShards = std::max<int64_t>(1, c * D / e);
  const Group tpGroup = place(1, t, G);
  const Group tpIntra = place(1, t, t);
  const Group epGroup = place(t * c, e, G);
  const Group denseGroup = place(t, denseShards, G);
  const Group expertGroup = place(t * c * e, expertShards, G);
  const bool cpInter = place(t, c, G).nodes > 1;
  const bool ppInter = p > 1 && t * c * D * p > G;

  const double peak = cluster.tflops * 1e12 *
                      (training.precision == Precision::FP32 ? 0.5 : 1.0);
  const double h = double(m.hidden);
  const double tokens = b * double(localSeq); // per microbatch per GPU
  const double kvShare =
      double(m.kvHeads ? m.kvHeads : m.heads) / double(m.heads);
  const bool tiedCopy = P.head == 0 && P.tokenEmbedding > 0 && p > 1;

  ActivationShape shape;
  shape.microBatch = est.microBatch;
  shape.seq = localSeq;
  shape.keySeq = seq;
  shape.tp = t;
  shape.sequenceParallel = training.sequenceParallel;
  shape.fusedAttention = training.fusedAttention;
  shape.recompute = layout.recompute;
  shape.elementBytes = eb;
  const double perLayer = activationBytesPerLayer(m, shape);
  ActivationShape working = shape;
  working.recompute = Recompute::None;
  const double workingLayer = activationBytesPerLayer(m, working);
  const LayerSeconds layer =
      layerForwardSeconds(m, shape, cluster, training.precision);

  std::vector<StageCost> stages(p);
  for (int64_t i = 0; i < p; ++i) {
    StageCost &s = stages[i];
    const int64_t layers = est.pipeline.stageLayers[i];
    const double frac = double(layers) / double(m.layers);
    const bool first = i == 0, last = i == p - 1;

    // Model states. Norm and bias parameters are replicated by TP but
    // counted as split: a few parts in 10^4 for realistic hidden sizes.
    s.denseParams = double(P.layers) * frac / double(t);
    if (first)
      s.denseParams += double(P.embedding) / double(t);
    if (last)
      s.denseParams += double(P.head) / double(t) + double(P.final);
    if (last && tiedCopy)
      s.denseParams += double(P.tokenEmbedding) / double(t);
    s.expertParams = double(P.experts) * frac / double(t * e);
    // A tied embedding is stored on the first and the last stage and
    // updated on the last, where its two gradients meet (the first sends
    // its gradient and receives the updated table): the first stage holds
    // the table's parameters only.
    const double tiedOnly =
        first && tiedCopy ? double(P.tokenEmbedding) / double(t) : 0.0;
    ModelStates dense = modelStates(s.denseParams - tiedOnly, bytes,
                                    layout.zero, denseShards,
                                    training.offload);
    dense.params += modelStates(tiedOnly, bytes, layout.zero, denseShards,
                                training.offload)
                        .params;
    ModelStates experts = modelStates(s.expertParams, bytes, layout.zero,
                                      expertShards, training.offload);
    s.memory.stage = i;
    s.memory.params = dense.params + experts.params;
    if (first)
      s.memory.params += bytes.param * double(P.frozen) / double(t);
    s.memory.grads = dense.grads + experts.grads;
    s.memory.optimizer = dense.optimizer + experts.optimizer;
    s.memory.offloaded = dense.offloaded + experts.offloaded;
    // The largest layer this stage gathers or reduce-scatters whole.
    double largest = 0;
    if (layers > 0)
      largest = double(P.layers) / double(m.layers) / double(t) +
                double(P.experts) / double(m.layers) / double(t * e);
    if (first)
      largest = std::max(largest, double(P.embedding) / double(t));
    if (last && (P.head || tiedCopy))
      largest = std::max(largest, double(P.head ? P.head : P.tokenEmbedding) /
                                      double(t));
    s.memory.buffers =
        zeroBufferBytes(largest, bytes, layout.zero, denseShards);

    // Activations of the microbatches in flight, plus under full
    // recomputation the one layer being recomputed.
    double inFlight = est.pipeline.inFlight[i];
    double acts = inFlight * double(layers) * perLayer;
    if (fullRecompute && layers > 0)
      acts += workingLayer;
    const double sbh = tokens * h;
    if (first && m.dropout) // embedding dropout mask
      acts += inFlight * sbh / (sp ? double(t) : 1.0);
    if (last) {
      // Final norm and LM head inputs, fp32 logits for the loss: one
      // microbatch at a time except in GPipe.
      double held = layout.schedule == Schedule::GPipe ? double(mb) : 1.0;
      acts += held * (2.0 * double(eb) * sbh + 4.0 * tokens * double(m.vocab)) /
              double(t);
    }
    s.memory.activations = acts;

    // Compute, kernel by kernel: the layers; the embedding lookup on the
    // first stage (it reads and writes h per token); on the last, the LM
    // head's GEMM and the loss, which reads the 16-bit logits, writes them
    // in fp32 and reads and writes them twice more (max, then exp and sum).
    // The backward is twice the forward; recomputation reruns the layers'
    // forward (full) or their attention core (selective), not the head.
    double forward = double(layers) * layer.forward();
    if (first)
      forward += memorySeconds(cluster, 2.0 * double(eb) * tokens * h);
    if (last) {
      const double logits = tokens * double(m.vocab) / double(t);
      forward += gemmSeconds(cluster, training.precision, tokens,
                             double(m.vocab) / double(t), h) +
                 memorySeconds(cluster, (double(eb) + 20.0) * logits);
    }
    s.forward = forward;
    s.backward = 2 * (forward - double(layers) * layer.forward()) +
                 double(layers) * layer.backward();
    s.attentionCore =
        (1 + layer.attentionBackwardRatio) * double(layers) * layer.attention;
    // A fused core recomputes its scores in its own backward: selective
    // recomputation adds nothing to it.
    if (fullRecompute)
      s.recompute = double(layers) * layer.forward();
    else if (layout.recompute == Recompute::Selective &&
             !training.fusedAttention)
      s.recompute = double(layers) * layer.attention;

    // Tensor parallelism: two collectives forward and two backward per layer
    // (two more when full recomputation reruns the forward), one for the
    // vocabulary-parallel embedding and one for the LM head.
    const double actBytes = double(eb) * sbh;
    double collectives = double(layers) * (fullRecompute ? 6 : 4);
    collectives += (first ? 1 : 0) + (last ? 1 : 0);
    s.tp = scaled(allReduce(tpGroup, actBytes), collectives);
    s.tpTime = seconds(s.tp, cluster);
    s.tpTimeIntra =
        seconds(scaled(allReduce(tpIntra, actBytes), collectives), cluster);

    // Context parallelism: the ring passes its K/V block on c - 1 times in
    // the forward (twice with the forward recomputed) and in the backward,
    // and their gradients c times (the last pass brings them home), as the
    // compiler's ring does. Attention compute hides it.
    if (c > 1) {
      double kv = 2.0 * kvShare * actBytes / double(t);
      double passes =
          double(c - 1) * (fullRecompute ? 3 : 2) + double(c);
      s.cp = pointToPoint(cpInter, passes * kv * double(layers));
      s.cpExposed = exposed(seconds(s.cp, cluster), s.attentionCore, cluster);
    }

    // Expert parallelism: dispatch and combine all-to-alls forward and
    // backward of each token's k copies.
    if (m.isMoE() && e > 1) {
      double sent = double(m.topK) * actBytes / (sp ? double(t) : 1.0);
      double count = double(layers) * (fullRecompute ? 6 : 4);
      s.ep = scaled(allToAll(epGroup, sent), count);
      s.epTime = seconds(s.ep, cluster);
    }

    // Pipeline: the activation forward and its gradient backward, at each
    // of the v chunk boundaries. Each tp rank sends its 1/t of the boundary
    // over its own link: the sequence-parallel slice, or without sequence
    // parallelism Megatron's scatter/gather (Narayanan et al. 2021, section
    // 4.1), whose receivers all-gather the slices inside the node. The
    // transfers wait on each send and receive: not overlapped.
    if (p > 1) {
      double boundary = actBytes / double(t);
      s.pp = pointToPoint(ppInter, 2.0 * double(v) * boundary);
      if (!sp && t > 1)
        s.pp += scaled(allGather(tpGroup, actBytes), 2.0 * double(v));
      s.ppTime = seconds(s.pp, cluster);
    }
  }

  // Memory: the stage that needs the most. Time: the slowest stage.
  size_t memStage = 0, slowStage = 0;
  for (size_t i = 1; i < stages.size(); ++i) {
    if (stages[i].memory.total() > stages[memStage].memory.total())
      memStage = i;
    if (stages[i].perMicrobatch() > stages[slowStage].perMicrobatch())
      slowStage = i;
  }
  est.memory = stages[memStage].memory;
  for (const StageCost &stage : stages)
    est.stageMemory.push_back(stage.memory);
  const StageCost &s = stages[slowStage];
  const double nmb = double(mb);

  // Data parallelism, once per step (ZeRO 0/1) or per microbatch (ZeRO 2
  // reduce-scatters each microbatch's gradients into its shard; ZeRO 3 also
  // gathers the parameters for each forward and backward). It overlaps the
  // backward of the last microbatch (ZeRO 0/1), of every microbatch (2), or
  // all compute (3), at the cluster's overlap cost.
  LinkBytes dp;
  for (auto [params, group] : {std::pair{s.denseParams, denseGroup},
                               std::pair{s.expertParams, expertGroup}}) {
    double grads = bytes.grad * params, weights = bytes.param * params;
    switch (layout.zero) {
    case 0:
      dp += allReduce(group, grads);
      break;
    case 1:
      dp += allGather(group, grads);
      dp += allGather(group, weights);
      break;
    case 2:
      dp += scaled(allGather(group, grads), nmb);
      dp += allGather(group, weights);
      break;
    default:
      dp += scaled(allGather(group, grads), nmb);
      dp += scaled(allGather(group, weights), 2 * nmb);
      break;
    }
  }
  double window = layout.zero <= 1   ? s.backward
                  : layout.zero == 2 ? nmb * s.backward
                                     : nmb * (s.forward + s.backward);
  est.time.dp = exposed(seconds(dp, cluster), window, cluster);

  if (training.offload) {
    // Gradients to the host and updated parameters back, for the shard
    // this GPU's optimizer owns.
    double shardParams =
        s.denseParams / (layout.zero >= 1 ? double(denseShards) : 1.0) +
        s.expertParams / (layout.zero >= 1 ? double(expertShards) : 1.0);
    est.time.offload = (bytes.grad + bytes.param) * shardParams /
                       (cluster.pcieBW * 1e9 * cluster.commEfficiency);
  }

  est.comm.tp = scaled(s.tp, nmb);
  est.comm.cp = scaled(s.cp, nmb);
  est.comm.ep = scaled(s.ep, nmb);
  est.comm.pp = scaled(s.pp, nmb);
  est.comm.dp = dp;

  est.time.compute = nmb * (s.forward + s.backward);
  est.time.recompute = nmb * s.recompute;
  est.time.tp = nmb * s.tpTime;
  est.time.cp = nmb * s.cpExposed;
  est.time.ep = nmb * s.epTime;
  est.time.pp = nmb * s.ppTime;
  est.bubble = est.pipeline.bubble;
  // Fill and drain: each microbatch passes every stage once, the slowest
  // m times in the steady state, so the step is m t_max plus the other
  // stages' times over v (with equal stages the (p - 1) / v microbatch
  // times of Narayanan et al. 2021, section 2.2).
  double others = -s.perMicrobatch();
  for (const StageCost &stage : stages)
    others += stage.perMicrobatch();
  est.time.bubble = others / double(v);
  est.tpTimeIntraNode = nmb * s.tpTimeIntra;

  est.stepTime = est.time.step();
  const double tokensPerStep = double(training.globalBatch) * double(seq);
  est.tokensPerSecond = tokensPerStep / est.stepTime;
  est.modelFlopsPerStep = modelFlopsPerToken(m) * tokensPerStep;
  est.tflopsPerGpu =
      est.modelFlopsPerStep / est.stepTime / double(layout.gpus()) / 1e12;
  est.mfu = est.tflopsPerGpu * 1e12 / peak;
  // The recomputed forward: every layer's (not the LM head's) or the
  // attention scores' (which a fused core recomputes in its backward,
  // counted as model FLOPs).
  double recomputed = 0;
  if (fullRecompute)
    recomputed = modelFlopsPerToken(m) / 3 - 2.0 * double(m.vocab) * h;
  else if (layout.recompute == Recompute::Selective && !training.fusedAttention)
    recomputed = double(m.layers) * 4.0 * double(seq) * h;
  est.hardwareFlopsPerStep = est.modelFlopsPerStep + recomputed * tokensPerStep;
  est.hardwareTflopsPerGpu =
      est.hardwareFlopsPerStep / est.stepTime / double(layout.gpus()) / 1e12;
  est.usableBytes = cluster.usableBytes();
  est.fits = est.memory.total() <= est.usableBytes;
  // The GPUs of a node hold one pipeline stage (pp is the outermost axis)
  // unless the stage has fewer GPUs than a node.
  double offloaded = 0;
  for (const MemoryEstimate &stage : est.stageMemory)
    offloaded = std::max(offloaded, stage.offloaded);
  est.hostBytesPerNode =
      offloaded * double(std::min<int64_t>(G, layout.gpus()));
  return est;
}

} // namespace cleave::planner
