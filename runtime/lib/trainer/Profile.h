//===- Profile.h - the trainer's kernel profiler ----------------*- C++ -*-===//
//
// `--profile FILE`: a compiled program marks each of its ops
// (cleave_rt_profile_mark, cleave_rt.h), and while the profiler records,
// each mark is a backend marker, so an op's time is the time from its mark
// to the next: the host's clock on the CPU, the device's on the GPU. The
// chosen steps become one Chrome trace (Perfetto, chrome://tracing; one
// process per rank, a row for the ops, one for the collectives, one for the
// steps), and the summary lists the ops that took the most time with their
// share of the step and achieved GFLOP/s. Off, a mark is one test of a
// flag.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINER_PROFILE_H
#define CLEAVE_RUNTIME_TRAINER_PROFILE_H

#include "cleave/Runtime/cleave_rt.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::rt::trainer {

/// One op's run in a profiled step, in milliseconds from the first mark.
struct ProfileEvent {
  const cleave_rt_kernel_info *kernel = nullptr;
  int64_t step = 0;
  double start = 0, end = 0;
};

/// A profiled step, in milliseconds from the first mark.
struct ProfileStep {
  int64_t step = 0;
  double start = 0, end = 0;
};

/// Ops of one kind (op and shapes) over the profiled steps.
struct ProfileRow {
  std::string op, shapes, where; ///< where: the first op's location
  int64_t calls = 0;             ///< per step
  double ms = 0;                 ///< per step
  double flops = 0;              ///< per step
  double share = 0;              ///< of the step's time
};

/// The rows by time, most first; `stepMs` gets the mean step time and
/// `opMs` the time in ops per step.
std::vector<ProfileRow> profileRows(const std::vector<ProfileEvent> &events,
                                    const std::vector<ProfileStep> &steps,
                                    double &stepMs, double &opMs);

/// One rank's part of the Chrome trace: its events as JSON objects, each
/// followed by ",\n" (pid = rank).
std::string chromeTraceEvents(int64_t rank,
                              const std::vector<ProfileEvent> &events,
                              const std::vector<ProfileStep> &steps);

/// --profile FILE --profile-steps N --profile-start S (0: the default).
class Profiler {
public:
  Profiler(std::string path, int64_t start, int64_t steps)
      : path(std::move(path)), start(start), steps(steps) {}
  bool enabled() const { return !path.empty(); }
  /// Before any work, for a run of steps first..last: the file can be
  /// written, the steps are some of the run's (by default from the second
  /// step on, as the first pays for warm-up).
  void check(int64_t first, int64_t last);
  /// Records the ops of steps [start, start + steps) that the run reaches.
  void beforeStep(int64_t step);
  void afterStep(int64_t step);
  /// After the last step: rank 0 gathers the ranks' events, writes the
  /// file and, unless `quiet`, prints the summary of its own ops.
  void finish(bool quiet);

private:
  std::string path;
  int64_t start = 0, steps = 0;
};

} // namespace cleave::rt::trainer

#endif // CLEAVE_RUNTIME_TRAINER_PROFILE_H
