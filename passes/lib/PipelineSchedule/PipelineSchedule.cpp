//===- PipelineSchedule.cpp - pipeline schedules as data ------------------===//
//
// See PipelineSchedule.h. The orders follow the schedules' papers: GPipe
// (Huang et al., 2019) runs every forward, then every backward; 1F1B
// (PipeDream-Flush, Narayanan et al., 2021) lets stage s run p - 1 - s
// forwards before alternating one forward and one backward; the
// interleaved schedule (Narayanan et al., 2021) does the same over
// microbatch-chunks, taking p microbatches through one chunk before the
// next, with (p - 1 - s) * 2 + (v - 1) * p warm-up forwards.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/PipelineSchedule.h"

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

namespace cleave::pipeline {

std::string unroll(ScheduleKind kind, int64_t stages, int64_t microbatches,
                   int64_t virtualStages, Orders &orders) {
  orders.clear();
  const int64_t p = stages, m = microbatches;
  if (p < 1)
    return "a pipeline needs at least one stage, got " + std::to_string(p);
  if (m < 1)
    return "a pipeline needs at least one microbatch, got " +
           std::to_string(m);
  const int64_t v = kind == ScheduleKind::Interleaved ? virtualStages : 1;
  if (v < 1)
    return "the interleaved schedule needs at least one virtual stage, got " +
           std::to_string(v);
  if (kind == ScheduleKind::Interleaved && v > 1 && m % p != 0)
    return "the interleaved schedule takes the microbatches through each "
           "chunk in groups of the " +
           std::to_string(p) + " stages: " + std::to_string(m) +
           " microbatches are not a multiple of it";
  orders.assign(p, {});
  for (int64_t s = 0; s < p; ++s) {
    std::vector<Step> &order = orders[s];
    if (kind == ScheduleKind::GPipe) {
      for (int64_t i = 0; i < m; ++i)
        order.push_back({false, i, 0});
      for (int64_t i = 0; i < m; ++i)
        order.push_back({true, i, 0});
      continue;
    }
    // 1F1B over "virtual microbatches" k: with one chunk, k is the
    // microbatch; interleaved, groups of p microbatches go through chunk
    // after chunk (backwards through the chunks in reverse).
    const int64_t total = m * v;
    auto forward = [&](int64_t k) {
      return Step{false, (k / (p * v)) * p + k % p, (k / p) % v};
    };
    auto backward = [&](int64_t k) {
      return Step{true, (k / (p * v)) * p + k % p, v - 1 - (k / p) % v};
    };
    int64_t warmup = v == 1 ? std::min(p - 1 - s, m)
                            : std::min((p - 1 - s) * 2 + (v - 1) * p, total);
    for (int64_t k = 0; k < warmup; ++k)
      order.push_back(forward(k));
    for (int64_t k = 0; k < total - warmup; ++k) {
      order.push_back(forward(warmup + k));
      order.push_back(backward(k));
    }
    for (int64_t k = total - warmup; k < total; ++k)
      order.push_back(backward(k));
  }
  return "";
}

std::string simulate(const Orders &orders, int64_t virtualStages,
                     int64_t microbatches, double forward, double backward,
                     Timeline &timeline) {
  const size_t chunks = orders.size() * size_t(std::max<int64_t>(virtualStages, 1));
  return simulate(orders, virtualStages, microbatches,
                  std::vector<double>(chunks, forward),
                  forward > 0 ? backward / forward : 2.0, timeline);
}

std::string simulate(const Orders &orders, int64_t virtualStages,
                     int64_t microbatches,
                     const std::vector<double> &chunkForward,
                     double backwardRatio, Timeline &timeline) {
  timeline = Timeline();
  const int64_t p = orders.size(), v = virtualStages, m = microbatches;
  const int64_t chunks = p * v;
  if (int64_t(chunkForward.size()) != chunks)
    return "the forward times name " + std::to_string(chunkForward.size()) +
           " chunks; the schedule has " + std::to_string(chunks);
  // Every forward and backward of every microbatch-chunk exactly once.
  for (int64_t s = 0; s < p; ++s) {
    std::map<std::tuple<bool, int64_t, int64_t>, int> seen;
    for (const Step &step : orders[s]) {
      if (step.chunk < 0 || step.chunk >= v || step.microbatch < 0 ||
          step.microbatch >= m)
        return "stage " + std::to_string(s) + " has a step of microbatch " +
               std::to_string(step.microbatch) + ", chunk " +
               std::to_string(step.chunk) + ", outside the schedule";
      if (++seen[{step.backward, step.microbatch, step.chunk}] > 1)
        return "stage " + std::to_string(s) + " runs a step twice";
    }
    if (int64_t(seen.size()) != 2 * m * v)
      return "stage " + std::to_string(s) + " does not run every forward "
                                            "and backward";
  }

  // finish[backward][microbatch][global chunk], once placed.
  const double unknown = -1;
  std::vector<std::vector<std::vector<double>>> finish(
      2, std::vector<std::vector<double>>(m, std::vector<double>(chunks,
                                                                 unknown)));
  std::vector<size_t> next(p, 0);
  std::vector<double> freeAt(p, 0);
  timeline.stages.assign(p, {});
  size_t placed = 0, all = 0;
  for (const auto &order : orders)
    all += order.size();
  double busy = 0;
  while (placed < all) {
    bool progress = false;
    for (int64_t s = 0; s < p; ++s) {
      while (next[s] < orders[s].size()) {
        const Step &step = orders[s][next[s]];
        int64_t g = step.chunk * p + s;
        double ready = 0;
        if (!step.backward) {
          if (g > 0) {
            ready = finish[0][step.microbatch][g - 1];
            if (ready == unknown)
              break;
          }
        } else {
          ready = finish[0][step.microbatch][g];
          if (ready == unknown)
            break;
          if (g + 1 < chunks) {
            double after = finish[1][step.microbatch][g + 1];
            if (after == unknown)
              break;
            ready = std::max(ready, after);
          }
        }
        double start = std::max(ready, freeAt[s]);
        double length = chunkForward[size_t(g)] *
                        (step.backward ? backwardRatio : 1.0);
        freeAt[s] = start + length;
        finish[step.backward][step.microbatch][g] = freeAt[s];
        timeline.stages[s].push_back({step, start, freeAt[s]});
        busy += length;
        ++next[s];
        ++placed;
        progress = true;
      }
    }
    if (!progress)
      return "the schedule deadlocks: every stage waits on a step another "
             "stage runs later";
  }
  for (double t : freeAt)
    timeline.makespan = std::max(timeline.makespan, t);
  timeline.bubble =
      timeline.makespan > 0 ? 1.0 - busy / (double(p) * timeline.makespan) : 0;
  for (const auto &order : orders) {
    int64_t inFlight = 0, peak = 0;
    for (const Step &step : order) {
      inFlight += step.backward ? -1 : 1;
      peak = std::max(peak, inFlight);
    }
    timeline.peakInFlight.push_back(peak);
  }
  return "";
}

double closedFormBubble(ScheduleKind kind, int64_t stages,
                        int64_t microbatches, int64_t virtualStages) {
  const double p = double(stages), m = double(microbatches);
  const double v =
      kind == ScheduleKind::Interleaved ? double(std::max<int64_t>(virtualStages, 1)) : 1.0;
  if (stages <= 1 || microbatches <= 0)
    return 0;
  return (p - 1) / (v * m + p - 1);
}

std::vector<int64_t> balance(const std::vector<double> &cost, int64_t chunks,
                             double first, double last) {
  int64_t n = int64_t(cost.size());
  std::vector<double> prefix(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + cost[i];
  auto runCost = [&](int64_t c, int64_t from, int64_t to) {
    double x = prefix[to] - prefix[from];
    if (c == 0)
      x += first;
    if (c == chunks - 1)
      x += last;
    return x;
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[c][i]: the least largest cost of layers [0, i) in chunks [0, c].
  std::vector<std::vector<double>> best(chunks, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> from(chunks,
                                         std::vector<int64_t>(n + 1, 0));
  for (int64_t i = 1; i <= n; ++i)
    best[0][i] = runCost(0, 0, i);
  for (int64_t c = 1; c < chunks; ++c)
    for (int64_t i = c + 1; i <= n; ++i)
      for (int64_t j = c; j < i; ++j) {
        double x = std::max(best[c - 1][j], runCost(c, j, i));
        // Ties go to the earlier cut: the earlier chunks, which hold more
        // microbatches' activations under 1F1B, get fewer layers.
        if (x < best[c][i] * (1 - 1e-12)) {
          best[c][i] = x;
          from[c][i] = j;
        }
      }
  std::vector<int64_t> starts(chunks, 0);
  int64_t end = n;
  for (int64_t c = chunks - 1; c > 0; --c) {
    starts[c] = from[c][end];
    end = starts[c];
  }
  return starts;
}

std::string chromeTrace(const Timeline &timeline, double unit) {
  std::ostringstream os;
  os << "{\"traceEvents\": [";
  bool first = true;
  for (size_t s = 0; s < timeline.stages.size(); ++s) {
    os << (first ? "" : ",") << "\n  {\"name\": \"thread_name\", \"ph\": "
       << "\"M\", \"pid\": 0, \"tid\": " << s
       << ", \"args\": {\"name\": \"stage " << s << "\"}}";
    first = false;
    for (const Placed &p : timeline.stages[s])
      os << ",\n  {\"name\": \"" << (p.step.backward ? 'B' : 'F')
         << p.step.microbatch << "." << p.step.chunk
         << "\", \"cat\": \"" << (p.step.backward ? "backward" : "forward")
         << "\", \"ph\": \"X\", \"pid\": 0, \"tid\": " << s
         << ", \"ts\": " << p.start * unit << ", \"dur\": "
         << (p.end - p.start) * unit << "}";
  }
  os << "\n]}\n";
  return os.str();
}

} // namespace cleave::pipeline
