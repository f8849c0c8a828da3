//===- Layout.cpp - training configuration and layouts ------------------===//
//
// Names of the enumerations and the bytes of model state per parameter.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Layout.h"

namespace cleave::planner {

const char *precisionName(Precision p) {
  switch (p) {
  case Precision::FP32:
    return "fp32";
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  }
  return "?";
}

const char *optimizerName(Optimizer o) {
  return o == Optimizer::Adam ? "adam" : "sgd";
}

const char *scheduleName(Schedule s) {
  switch (s) {
  case Schedule::GPipe:
    return "gpipe";
  case Schedule::OneFOneB:
    return "1f1b";
  case Schedule::Interleaved:
    return "interleaved";
  }
  return "?";
}

const char *recomputeName(Recompute r) {
  switch (r) {
  case Recompute::None:
    return "none";
  case Recompute::Selective:
    return "selective";
  case Recompute::Full:
    return "full";
  }
  return "?";
}

std::optional<Precision> parsePrecision(std::string_view name) {
  if (name == "fp32")
    return Precision::FP32;
  if (name == "bf16")
    return Precision::BF16;
  if (name == "fp16")
    return Precision::FP16;
  return std::nullopt;
}

std::optional<Optimizer> parseOptimizer(std::string_view name) {
  if (name == "adam" || name == "adamw")
    return Optimizer::Adam;
  if (name == "sgd")
    return Optimizer::SGD;
  return std::nullopt;
}

std::optional<Schedule> parseSchedule(std::string_view name) {
  if (name == "gpipe")
    return Schedule::GPipe;
  if (name == "1f1b")
    return Schedule::OneFOneB;
  if (name == "interleaved")
    return Schedule::Interleaved;
  return std::nullopt;
}

std::optional<Recompute> parseRecompute(std::string_view name) {
  if (name == "none")
    return Recompute::None;
  if (name == "selective")
    return Recompute::Selective;
  if (name == "full")
    return Recompute::Full;
  return std::nullopt;
}

StateBytes stateBytes(const TrainingConfig &t) {
  StateBytes b;
  bool fp32 = t.precision == Precision::FP32;
  b.param = fp32 ? 4 : 2;
  b.grad = (fp32 || t.f32Grads) ? 4 : 2;
  // An fp32 master copy only exists for 16-bit weights.
  double master = (!fp32 && t.masterWeights) ? 4 : 0;
  double moments = t.optimizer == Optimizer::Adam ? 8 : 0;
  b.optimizer = master + moments;
  return b;
}

int64_t activationBytes(Precision precision) {
  return precision == Precision::FP32 ? 4 : 2;
}

std::string Layout::str() const {
  std::string s = "tp=" + std::to_string(tp) + " pp=" + std::to_string(pp) +
                  " dp=" + std::to_string(dp) + " cp=" + std::to_string(cp) +
                  " ep=" + std::to_string(ep) +
                  " microbatches=" + std::to_string(microbatches) + " " +
                  scheduleName(schedule);
  if (schedule == Schedule::Interleaved)
    s += "(v=" + std::to_string(virtualStages) + ")";
  s += " zero=" + std::to_string(zero) + " " + recomputeName(recompute);
  return s;
}

} // namespace cleave::planner
