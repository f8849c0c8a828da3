//===- Timeline.h - the trainer's measured pipeline timeline ----*- C++ -*-===//
//
// `--trace FILE` of a pipelined program: every rank records the first
// `--trace-steps` steps through the engine's timeline (cleave_comm.h: each
// run of the program, each schedule step its stage marks, each transfer),
// rank 0 gathers them and writes one Chrome trace (one row per rank, the
// format of cleave-compile --trace's planned schedule, so the two open side
// by side in Perfetto or chrome://tracing), and prints each stage's
// measured idle time against the schedule's bubble.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINER_TIMELINE_H
#define CLEAVE_RUNTIME_TRAINER_TIMELINE_H

#include "cleave/Runtime/cleave_comm.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::rt::trainer {

/// One rank's events, as the engine recorded them.
struct RankEvents {
  int64_t rank = 0, stage = 0;
  std::vector<cleave_comm_trace_event> events;
};

/// What the timeline says about the steps it covers.
struct TimelineSummary {
  int64_t firstStep = 0, lastStep = 0; ///< the steps measured
  int64_t stages = 0, microbatches = 0, chunks = 0;
  /// Over all ranks' time of the measured steps (each step's time from the
  /// first rank's start to the last rank's end): the share no rank
  /// computes (idle), and the share spent in point-to-point transfers (the
  /// time waiting for a peer included, so idle <= transfers unless a
  /// rank's step ends before another's).
  double idle = 0, transfers = 0;
  /// Per rank, the idle share of its own time over the measured steps.
  std::vector<double> rankIdle;
  /// The closed form of the schedule's bubble with equal stages,
  /// (p - 1) / (v m + p - 1).
  double closedForm = 0;
};

/// Summarizes `ranks` (one entry per rank). The first traced step is left
/// out of the figures when more than one was traced (it pays for warm-up).
TimelineSummary summarize(const std::vector<RankEvents> &ranks,
                          int64_t stages);

/// The Chrome trace JSON of `ranks`, times in microseconds, the summary
/// in "otherData".
std::string chromeTrace(const std::vector<RankEvents> &ranks,
                        const TimelineSummary &summary);

/// --trace FILE --trace-steps N on a pipelined program.
class RunTimeline {
public:
  RunTimeline(std::string path, int64_t steps)
      : path(std::move(path)), steps(steps) {}
  bool enabled() const { return !path.empty(); }
  /// Fails unless the program is pipelined and the file can be written.
  void check() const;
  /// Before the first step: the ranks meet, then the clocks start.
  void start();
  void beforeStep(int64_t step);
  void afterStep(int64_t step);
  /// After the last step: gathers the events to rank 0, which writes the
  /// file and, unless `quiet`, prints the summary.
  void finish(bool quiet);

private:
  std::string path;
  int64_t steps = 0, traced = 0;
  bool running = false;
};

} // namespace cleave::rt::trainer

#endif // CLEAVE_RUNTIME_TRAINER_TIMELINE_H
