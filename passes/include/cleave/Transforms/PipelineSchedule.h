//===- PipelineSchedule.h - pipeline schedules as data ----------*- C++ -*-===//
//
// The microbatch schedules of pipeline parallelism (GPipe, 1F1B, interleaved
// 1F1B), unrolled into each stage's order of forward and backward steps, and
// their timeline under given step times: the bubble, the activations each
// stage holds at most, and a Chrome-trace view, all before anything runs;
// and the balance of layers over the stages. Plain C++ (library
// CleavePipelineSchedule), shared by -dist-pipeline-parallel and the
// planner, so that cleave-plan and cleave-compile report the same split,
// bubble and activations for a layout.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_PIPELINESCHEDULE_H
#define CLEAVE_TRANSFORMS_PIPELINESCHEDULE_H

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::pipeline {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved };

/// One step of one stage: the forward or backward of a microbatch through
/// one of the stage's model chunks (0 ..< virtual stages; chunk c of stage
/// s holds the layers of global chunk c * stages + s).
struct Step {
  bool backward = false;
  int64_t microbatch = 0;
  int64_t chunk = 0;
};

/// Each stage's steps, in the order it runs them.
using Orders = std::vector<std::vector<Step>>;

/// Unrolls `kind` for `stages` stages, `microbatches` microbatches and (for
/// the interleaved schedule) `virtualStages` chunks per stage. Returns an
/// error message naming the problem instead (no stage, microbatches the
/// interleaved schedule cannot group by stages, ...), with `orders` empty.
std::string unroll(ScheduleKind kind, int64_t stages, int64_t microbatches,
                   int64_t virtualStages, Orders &orders);

/// One step placed in time.
struct Placed {
  Step step;
  double start = 0, end = 0;
};

struct Timeline {
  std::vector<std::vector<Placed>> stages;
  double makespan = 0;
  /// Idle time over all stages' time: 1 - busy / (stages * makespan).
  double bubble = 0;
  /// The most microbatch-chunks whose forward has run and backward not yet,
  /// per stage: the activations the stage holds at most.
  std::vector<int64_t> peakInFlight;
};

/// Runs `orders` with the forward of one chunk taking `forward` and its
/// backward `backward` (seconds, or any unit), transfers free: each step
/// starts when its stage is free and its inputs are ready (the forward of
/// the chunk before, the backward of the chunk after). Returns an error
/// message when the orders deadlock or are not a schedule of every
/// forward and backward once.
std::string simulate(const Orders &orders, int64_t virtualStages,
                     int64_t microbatches, double forward, double backward,
                     Timeline &timeline);
/// The same with each global chunk's own forward time (chunk c = local
/// chunk * stages + stage) and the backward `backwardRatio` times it: the
/// bubble of stages of unequal cost.
std::string simulate(const Orders &orders, int64_t virtualStages,
                     int64_t microbatches,
                     const std::vector<double> &chunkForward,
                     double backwardRatio, Timeline &timeline);

/// The bubble of `kind` with equal stages, as a fraction of the step:
/// (p - 1) / (m + p - 1) for GPipe and 1F1B, (p - 1) / (v m + p - 1)
/// interleaved (Narayanan et al., 2021, section 2.2, whose (p - 1) / m is
/// the same idle time relative to the busy time instead).
double closedFormBubble(ScheduleKind kind, int64_t stages,
                        int64_t microbatches, int64_t virtualStages);

/// Splits `cost` (one per layer) into `chunks` runs of consecutive layers,
/// each at least one layer, minimizing the largest run's cost with `first`
/// added to the first run (the embedding) and `last` to the last (the head
/// and the loss). A tie goes to the earlier cut, so that the earlier
/// stages, which hold more microbatches under 1F1B, get fewer layers.
/// Returns the first layer of each run; needs 1 <= chunks <= cost.size().
std::vector<int64_t> balance(const std::vector<double> &cost, int64_t chunks,
                             double first, double last);

/// The timeline as Chrome trace JSON (one row per stage; opens in
/// Perfetto or chrome://tracing), times in microseconds of `unit` each.
std::string chromeTrace(const Timeline &timeline, double unit = 1.0);

} // namespace cleave::pipeline

#endif // CLEAVE_TRANSFORMS_PIPELINESCHEDULE_H
