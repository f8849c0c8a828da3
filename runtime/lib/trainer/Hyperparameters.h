//===- Hyperparameters.h - run-time hyperparameters and schedules -*- C++ -*-===//
//
// A training program reads its learning rate, weight decay, betas, eps,
// momentum, dampening, clipping norm and loss-scale growth interval at
// each step from the program context (cleave_rt_enums.h's
// CLEAVE_RT_HYPERPARAMETERS), so that one binary trains with other values:
// `--lr 3e-4 --weight-decay 0.1 --grad-clip 1.0`, a learning-rate schedule,
// a no-decay group. The values it was compiled with (its training config)
// are the defaults; a resumed run takes the checkpoint's record, so that it
// continues the same schedule, unless a flag says otherwise.
//
// The schedules, of the update number k = 1, 2, ... (s = k - 1 scheduler
// steps before it, as torch.optim.lr_scheduler counts; base the --lr, m the
// --min-lr, W the --warmup-steps, D the --decay-steps):
//   warmup (any schedule), s < W: base * (s + 1) / W
//   constant: base
//   cosine:   t = min(s - W, D - W):
//             m + (base - m) * (1 + cos(pi * t / (D - W))) / 2
//             (torch's CosineAnnealingLR with T_max = D - W, eta_min = m,
//             held at m after D)
//   linear:   base + (m - base) * min(s - W, D - W) / (D - W)
//             (torch's LinearLR from 1 to m / base over D - W steps)
//   wsd:      base until s = D - C, then
//             base + (m - base) * min(s - D + C, C) / C
//             (warmup, stable, decay: C the --cooldown-steps)
// D defaults to the run's --steps; a checkpoint records the resolved
// schedule, so a run resumed with more steps keeps it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINER_HYPERPARAMETERS_H
#define CLEAVE_RUNTIME_TRAINER_HYPERPARAMETERS_H

#include "cleave/Runtime/cleave_rt_enums.h"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace cleave::rt::trainer {

enum class LrSchedule { Constant, Cosine, Linear, Wsd };

/// What the command line says; unset members keep the checkpoint's or the
/// program's value.
struct HyperparameterFlags {
  std::array<std::optional<double>, CLEAVE_NUM_HYPERPARAMETERS> values;
  bool noDecay1d = false;
  std::optional<LrSchedule> schedule;
  std::optional<int64_t> warmupSteps, decaySteps, cooldownSteps;
  std::optional<double> minLr;

  /// Takes `flag` if it is one of the hyperparameter flags (reading its
  /// value with `next`); false if it is not.
  bool parse(const std::string &flag,
             const std::function<std::string()> &next);
};

/// The help text of the flags above.
extern const char *const kHyperparameterUsage;

/// The hyperparameters of a run.
class Hyperparameters {
public:
  /// The program's defaults (its training config), then the record of the
  /// checkpoint resumed from (`saved`, a JSON object; empty: none), then
  /// the flags; checked against the program (which values it can change)
  /// and the run's `steps`. Fails naming the flag on a bad value.
  static Hyperparameters resolve(const HyperparameterFlags &flags,
                                 const std::string &saved, int64_t steps);

  /// The values of update `k` (1-based): the schedule's learning rate, the
  /// rest as resolved. The pointer stays valid until the next call.
  const double *forStep(int64_t k);
  double lrAt(int64_t k) const;
  /// Whether the program reads them at all (false: a program compiled
  /// before they existed, whose values are fixed).
  bool runTime() const { return runTime_; }

  /// A JSON object of every value and the schedule: the checkpoint's
  /// record, read back by resolve.
  std::string toJson() const;
  /// One line for the banner: "lr 0.001 (cosine, warmup 100, ...)".
  std::string describe() const;

private:
  std::array<double, CLEAVE_NUM_HYPERPARAMETERS> values{};
  std::array<double, CLEAVE_NUM_HYPERPARAMETERS> current{};
  LrSchedule schedule = LrSchedule::Constant;
  int64_t warmup = 0, decay = 0, cooldown = 0;
  double minLr = 0;
  bool runTime_ = false;
};

} // namespace cleave::rt::trainer

#endif // CLEAVE_RUNTIME_TRAINER_HYPERPARAMETERS_H
