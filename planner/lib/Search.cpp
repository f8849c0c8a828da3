//===- Search.cpp - enumerate, estimate, rank ---------------------------===//
//
// The space is small enough to enumerate: meshes are factorizations of the
// GPU count, and per mesh the microbatch counts divide the per-replica
// batch. Each mesh is validated once; its configurations are estimated and
// the fastest that fits represents it in the ranking.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Search.h"

#include <algorithm>
#include <cstdio>

namespace cleave::planner {

namespace {

/// The divisors of n in increasing order, in O(sqrt n).
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t i = 1; i <= n / i; ++i)
    if (n % i == 0) {
      low.push_back(i);
      if (i != n / i)
        high.push_back(n / i);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

std::vector<int64_t> choices(const std::optional<int64_t> &fixed, int64_t n) {
  if (fixed)
    return n % *fixed == 0 ? std::vector<int64_t>{*fixed}
                           : std::vector<int64_t>{};
  return divisors(n);
}

/// Faster first; at equal time, less memory.
bool better(const Estimate &a, const Estimate &b) {
  double rel = (a.stepTime - b.stepTime) / std::max(b.stepTime, 1e-30);
  if (rel < -1e-9)
    return true;
  if (rel > 1e-9)
    return false;
  return a.memory.total() < b.memory.total();
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

/// Best configuration of one mesh (schedule, microbatches, ZeRO,
/// recomputation), updating the counters of `result`.
std::optional<Estimate> searchMesh(const ModelSpec &model,
                                   const TrainingConfig &training,
                                   const ClusterSpec &cluster,
                                   const SearchConstraints &k, Layout mesh,
                                   SearchResult &result) {
  const int64_t perReplica = training.globalBatch / mesh.denseDp();
  std::vector<Schedule> schedules;
  if (k.schedule)
    schedules = {*k.schedule};
  else if (mesh.pp > 1)
    schedules = {Schedule::OneFOneB, Schedule::Interleaved, Schedule::GPipe};
  else
    schedules = {Schedule::OneFOneB};
  std::vector<int> zeros;
  if (k.zero)
    zeros = {*k.zero};
  else if (mesh.denseDp() * mesh.cp > 1)
    zeros = {0, 1, 2, 3};
  else
    zeros = {0};
  std::vector<Recompute> recomputes =
      k.recompute ? std::vector<Recompute>{*k.recompute}
                  : std::vector<Recompute>{
                        Recompute::None, Recompute::Selective, Recompute::Full};

  std::optional<Estimate> best;
  for (Schedule schedule : schedules) {
    std::vector<int64_t> vs = {1};
    if (schedule == Schedule::Interleaved)
      vs = k.virtualStages ? std::vector<int64_t>{*k.virtualStages}
                           : std::vector<int64_t>{2, 4};
    for (int64_t v : vs)
      for (int64_t mb : choices(k.microbatches, perReplica))
        for (int zero : zeros)
          for (Recompute rc : recomputes) {
            Layout l = mesh;
            l.schedule = schedule;
            l.virtualStages = v;
            l.microbatches = mb;
            l.zero = zero;
            l.recompute = rc;
            l.split = k.split;
            if (hasErrors(validateSchedule(model, training, l)))
              continue;
            Estimate est = estimate(model, training, cluster, l);
            ++result.evaluated;
            if (!est.fits) {
              ++result.tooBig;
              if (!result.smallest ||
                  est.memory.total() < result.smallest->memory.total())
                result.smallest = est;
              continue;
            }
            if (!best || better(est, *best))
              best = est;
          }
  }
  return best;
}

} // namespace

SearchResult search(const ModelSpec &model, const TrainingConfig &training,
                    const ClusterSpec &cluster, const SearchConstraints &k) {
  SearchResult result;
  const int64_t n = cluster.gpus;
  for (int64_t tp : choices(k.tp, n))
    for (int64_t pp : choices(k.pp, n / tp))
      for (int64_t cp : choices(k.cp, n / (tp * pp))) {
        const int64_t rest = n / (tp * pp * cp);
        // Folded: ep splits dp. Separate axis: ep x dp = rest. A dense
        // model searches no ep, but a given one is validated (and refused).
        std::vector<int64_t> eps = model.isMoE()
                                       ? choices(k.ep, rest)
                                       : std::vector<int64_t>{k.ep.value_or(1)};
        std::vector<std::pair<int64_t, int64_t>> dpEp;
        for (int64_t ep : eps) {
          int64_t dp = k.foldEp ? rest : rest / ep;
          if (!k.foldEp && rest % ep)
            continue;
          if (k.dp && *k.dp != dp)
            continue;
          dpEp.push_back({dp, ep});
        }
        for (auto [dp, ep] : dpEp) {
          Layout mesh;
          mesh.tp = tp;
          mesh.pp = pp;
          mesh.cp = cp;
          mesh.dp = dp;
          mesh.ep = ep;
          mesh.foldEp = k.foldEp;
          ++result.meshes;
          std::vector<Diagnostic> diags =
              validateMesh(model, training, cluster, mesh);
          if (hasErrors(diags)) {
            ++result.invalidMeshes;
            for (const Diagnostic &d : diags)
              if (d.severity == Severity::Error) {
                result.meshErrors.push_back(d.message);
                break;
              }
            continue;
          }
          if (auto best = searchMesh(model, training, cluster, k, mesh, result))
            result.ranked.push_back({*best, ""});
        }
      }

  std::stable_sort(result.ranked.begin(), result.ranked.end(),
                   [](const RankedLayout &a, const RankedLayout &b) {
                     return better(a.estimate, b.estimate);
                   });
  for (size_t i = 0; i < result.ranked.size(); ++i)
    result.ranked[i].reason = i == 0 ? "best"
                                     : explainLoss(result.ranked[i].estimate,
                                                   result.ranked[0].estimate);
  return result;
}

std::string explainLoss(const Estimate &cand, const Estimate &best) {
  const double slower = cand.stepTime / best.stepTime - 1.0;
  if (slower < 1e-3) {
    double a = cand.memory.total() / 1e9, b = best.memory.total() / 1e9;
    if (a <= b)
      return "equivalent";
    return "same step time, more memory (" + fixed(a, 1) + " vs " +
           fixed(b, 1) + " GB)";
  }

  struct Part {
    double cand, best;
    std::string text;
  };
  auto secs = [](double a, double b) {
    return fixed(a, 2) + " s vs " + fixed(b, 2) + " s";
  };
  const TimeBreakdown &c = cand.time, &b = best.time;
  std::string tpWhere;
  if (cand.time.tp > 1.5 * cand.tpTimeIntraNode && cand.tpTimeIntraNode > 0)
    tpWhere = ", tp=" + std::to_string(cand.layout.tp) + " crosses nodes";
  std::vector<Part> parts = {
      {c.compute, b.compute,
       "more compute on the slowest stage (" + secs(c.compute, b.compute) +
           ")"},
      {c.recompute, b.recompute,
       std::string(recomputeName(cand.layout.recompute)) + " recomputation (" +
           secs(c.recompute, b.recompute) + ")"},
      {c.tp, b.tp,
       "tensor-parallel communication (" + secs(c.tp, b.tp) + tpWhere + ")"},
      {c.cp, b.cp, "context-parallel K/V exchange (" + secs(c.cp, b.cp) + ")"},
      {c.ep, b.ep, "expert all-to-all (" + secs(c.ep, b.ep) + ")"},
      {c.pp, b.pp, "pipeline transfers (" + secs(c.pp, b.pp) + ")"},
      {c.bubble, b.bubble,
       "pipeline bubble (" + fixed(cand.bubble, 3) + " vs " +
           fixed(best.bubble, 3) + ", " + secs(c.bubble, b.bubble) + ")"},
      {c.dp, b.dp,
       "exposed data-parallel sync (" + secs(c.dp, b.dp) +
           ", zero=" + std::to_string(cand.layout.zero) + ")"},
      {c.offload, b.offload,
       "optimizer offload transfers (" + secs(c.offload, b.offload) + ")"},
  };
  const Part *worst = &parts.front();
  for (const Part &p : parts)
    if (p.cand - p.best > worst->cand - worst->best)
      worst = &p;
  return "+" + fixed(100 * slower, 1) + "%: " + worst->text;
}

} // namespace cleave::planner
