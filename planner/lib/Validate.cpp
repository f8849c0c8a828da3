//===- Validate.cpp - layout rules with the offending values ------------===//
//
// Each rule is one diagnostic that names the degree, the quantity it must
// divide or match, and both values, so that a user can fix the flag.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Validate.h"

#include <algorithm>
#include <cstdio>

namespace cleave::planner {

const char *severityName(Severity severity) {
  switch (severity) {
  case Severity::Error:
    return "error";
  case Severity::Warning:
    return "warning";
  case Severity::Note:
    return "note";
  }
  return "?";
}

bool hasErrors(const std::vector<Diagnostic> &diags) {
  return std::any_of(diags.begin(), diags.end(), [](const Diagnostic &d) {
    return d.severity == Severity::Error;
  });
}

namespace {

std::string str(int64_t v) { return std::to_string(v); }

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string gb(double bytes) { return fixed(bytes / 1e9, 1); }

} // namespace

std::vector<Diagnostic> validateMesh(const ModelSpec &m,
                                     const TrainingConfig &training,
                                     const ClusterSpec &cluster,
                                     const Layout &l) {
  std::vector<Diagnostic> d;
  auto error = [&](std::string msg) {
    d.push_back({Severity::Error, std::move(msg)});
  };
  auto note = [&](std::string msg) {
    d.push_back({Severity::Note, std::move(msg)});
  };

  for (auto [name, value] :
       {std::pair{"tp", l.tp}, std::pair{"pp", l.pp}, std::pair{"dp", l.dp},
        std::pair{"cp", l.cp}, std::pair{"ep", l.ep}})
    if (value < 1)
      error(std::string(name) + " must be at least 1, got " + str(value));
  if (hasErrors(d))
    return d;

  if (l.gpus() != cluster.gpus) {
    std::string names = "tp x pp x dp x cp",
                values = str(l.tp) + " x " + str(l.pp) + " x " + str(l.dp) +
                         " x " + str(l.cp);
    if (!l.foldEp) {
      names += " x ep";
      values += " x " + str(l.ep);
    }
    error(names + " = " + values + " = " + str(l.gpus()) + ", but there are " +
          str(cluster.gpus) + " GPUs (--gpus)");
  }

  const int64_t kv = m.kvHeads ? m.kvHeads : m.heads;
  if (m.heads % l.tp)
    error("tp=" + str(l.tp) + " does not divide the " + str(m.heads) +
          " attention heads");
  else if (kv % l.tp && l.tp % kv)
    error("tp=" + str(l.tp) + " neither divides nor is a multiple of the " +
          str(kv) + " key/value heads");
  else if (l.tp > kv)
    note("tp=" + str(l.tp) + " exceeds the " + str(kv) +
         " key/value heads: each is replicated on " + str(l.tp / kv) + " GPUs");
  if (m.ffn % l.tp)
    error("tp=" + str(l.tp) + " does not divide the FFN size " + str(m.ffn));
  if (m.vocab % l.tp) {
    int64_t padded = (m.vocab + l.tp - 1) / l.tp * l.tp;
    note("the vocabulary of " + str(m.vocab) + " is padded to " + str(padded) +
         " to split it over tp=" + str(l.tp));
  }

  if (l.pp > m.layers)
    error("pp=" + str(l.pp) + " is more than the " + str(m.layers) + " layers");
  if (m.seq % l.cp)
    error("cp=" + str(l.cp) + " does not divide the sequence length " +
          str(m.seq));

  if (l.ep > 1) {
    if (!m.isMoE())
      error("ep=" + str(l.ep) +
            " needs a mixture-of-experts model (--experts)");
    else if (m.experts % l.ep)
      error("ep=" + str(l.ep) + " does not divide the " + str(m.experts) +
            " experts");
    if (l.foldEp && l.dp % l.ep)
      error("ep=" + str(l.ep) + " does not divide dp=" + str(l.dp) +
            ": experts are split inside the data-parallel group "
            "(--fold-ep=false makes ep a separate axis)");
  }

  const int64_t replicas = l.denseDp();
  if (training.globalBatch <= 0)
    error("the global batch is unknown: give --global-batch");
  else if (training.globalBatch % replicas)
    error("the global batch of " + str(training.globalBatch) +
          " sequences is not a multiple of the " + str(replicas) +
          " data-parallel replicas");
  return d;
}

std::vector<Diagnostic> validateSplit(const ModelSpec &m, const Layout &l) {
  std::vector<Diagnostic> d;
  if (l.split.empty())
    return d;
  const int64_t chunks = l.pp * l.chunks();
  if (int64_t(l.split.size()) != chunks - 1) {
    d.push_back({Severity::Error, "--pipeline-split names " +
                                      str(int64_t(l.split.size())) +
                                      " first layers; pp x v = " + str(chunks) +
                                      " chunks need " + str(chunks - 1)});
    return d;
  }
  int64_t previous = 0;
  for (int64_t s : l.split)
    if (s <= previous || s >= m.layers) {
      d.push_back({Severity::Error,
                   "--pipeline-split: " + str(s) +
                       " is not a layer after the previous chunk's first "
                       "and before " +
                       str(m.layers)});
      return d;
    } else {
      previous = s;
    }
  return d;
}

std::vector<Diagnostic> validateSchedule(const ModelSpec &m,
                                         const TrainingConfig &training,
                                         const Layout &l) {
  std::vector<Diagnostic> d;
  auto error = [&](std::string msg) {
    d.push_back({Severity::Error, std::move(msg)});
  };

  if (l.zero < 0 || l.zero > 3)
    error("the ZeRO stage must be 0 to 3, got " + str(l.zero));
  const int64_t perReplica = training.globalBatch / l.denseDp();
  if (l.microbatches < 1)
    error("the microbatch count must be at least 1, got " +
          str(l.microbatches));
  else if (perReplica % l.microbatches)
    error(str(l.microbatches) + " microbatches do not divide the " +
          str(perReplica) + " sequences of each data-parallel replica");

  if (l.schedule == Schedule::Interleaved) {
    if (l.pp < 2)
      error("the interleaved schedule needs pp > 1");
    if (l.virtualStages < 2)
      error("the interleaved schedule needs at least 2 virtual stages, got " +
            str(l.virtualStages));
    else if (m.layers < l.pp * l.virtualStages)
      // Uneven chunks are cut as the compiler cuts them (pipelineShape).
      error("the interleaved schedule with pp=" + str(l.pp) + " and " +
            str(l.virtualStages) + " virtual stages needs at least " +
            str(l.pp * l.virtualStages) + " layers, the model has " +
            str(m.layers));
    if (l.microbatches >= 1 && l.pp > 1 && l.microbatches % l.pp)
      error("the interleaved schedule needs the microbatch count (" +
            str(l.microbatches) + ") to be a multiple of pp=" + str(l.pp));
  }
  for (Diagnostic &e : validateSplit(m, l))
    d.push_back(std::move(e));
  if (hasErrors(d))
    return d;

  if (l.pp > 1 && l.microbatches < l.pp)
    d.push_back({Severity::Warning,
                 str(l.microbatches) + " microbatches for " + str(l.pp) +
                     " pipeline stages: bubble " +
                     fixed(bubbleFraction(l.schedule, l.pp, l.microbatches,
                                          l.virtualStages),
                           2) +
                     " of the step"});
  if (l.zero > 0 && l.denseDp() * l.cp == 1)
    d.push_back({Severity::Note, "zero=" + std::to_string(l.zero) +
                                     " has no effect with one data-parallel "
                                     "rank"});
  return d;
}

std::vector<Diagnostic> validateLayout(const ModelSpec &m,
                                       const TrainingConfig &training,
                                       const ClusterSpec &cluster,
                                       const Layout &l) {
  std::vector<Diagnostic> d = validateMesh(m, training, cluster, l);
  if (hasErrors(d))
    return d;
  std::vector<Diagnostic> s = validateSchedule(m, training, l);
  d.insert(d.end(), s.begin(), s.end());
  if (hasErrors(d))
    return d;

  Estimate est = estimate(m, training, cluster, l);
  if (l.tp > cluster.gpusPerNode || cluster.gpusPerNode % l.tp) {
    int64_t nodes = (l.tp + cluster.gpusPerNode - 1) / cluster.gpusPerNode;
    std::string where =
        l.tp > cluster.gpusPerNode
            ? "spans " + str(std::max<int64_t>(nodes, 2)) + " nodes of " +
                  str(cluster.gpusPerNode) + " GPUs"
            : "does not divide the " + str(cluster.gpusPerNode) +
                  " GPUs of a node, so some groups span nodes";
    d.push_back({Severity::Warning,
                 "tp=" + str(l.tp) + " " + where +
                     ": its collectives cross the " +
                     fixed(cluster.interBW, 0) +
                     " GB/s inter-node links "
                     "instead of " +
                     fixed(cluster.intraBW, 0) + " GB/s inside a node, " +
                     fixed(est.time.tp, 2) + " s per step instead of " +
                     fixed(est.tpTimeIntraNode, 2) + " s"});
  }
  if (m.layers % l.pp) {
    const std::vector<int64_t> &layers = est.pipeline.stageLayers;
    int64_t most = *std::max_element(layers.begin(), layers.end());
    int64_t least = *std::min_element(layers.begin(), layers.end());
    double slower = double(most) * double(l.pp) / double(m.layers) - 1.0;
    d.push_back({Severity::Warning,
                 "pp=" + str(l.pp) + " does not divide the " + str(m.layers) +
                     " layers: stages hold " + str(most) + " or " + str(least) +
                     " layers, and the slowest sets the pace (" +
                     fixed(100 * slower, 1) + "% slower than an even split)"});
  }
  return d;
}

std::vector<Diagnostic> checkMemory(const Estimate &est,
                                    const ClusterSpec &cluster) {
  if (est.fits)
    return {};
  const MemoryEstimate &m = est.memory;
  return {{Severity::Error,
           "needs " + gb(m.total()) + " GB per GPU on pipeline stage " +
               str(m.stage) + " (params " + gb(m.params) + " + grads " +
               gb(m.grads) + " + optimizer " + gb(m.optimizer) +
               " + activations " + gb(m.activations) +
               (m.buffers > 0 ? " + ZeRO buffers " + gb(m.buffers) : "") +
               "), more than the " + gb(cluster.usableBytes()) +
               " GB usable of " + fixed(cluster.memGB, 0) + " GB (" +
               fixed(100 * cluster.memHeadroom, 0) + "% headroom)"}};
}

} // namespace cleave::planner
