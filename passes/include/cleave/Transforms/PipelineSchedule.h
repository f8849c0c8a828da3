//===- PipelineSchedule.h - pipeline schedules as data ----------*- C++ -*-===//
//
// The microbatch schedules of pipeline parallelism (GPipe, 1F1B, interleaved
// 1F1B), unrolled into each stage's order of forward and backward steps, and
// their timeline under given step times: the bubble, the activations each
// stage holds at most, and a Chrome-trace view, all before anything runs.
// The first piece of pipeline parallelism (issue 20); the stage split that
// will run these orders is to come.
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

/// The timeline as Chrome trace JSON (one row per stage; opens in
/// Perfetto or chrome://tracing), times in microseconds of `unit` each.
std::string chromeTrace(const Timeline &timeline, double unit = 1.0);

} // namespace cleave::pipeline

#endif // CLEAVE_TRANSFORMS_PIPELINESCHEDULE_H
