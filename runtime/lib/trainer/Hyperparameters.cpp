//===- Hyperparameters.cpp - run-time hyperparameters and schedules -------===//
//
// See Hyperparameters.h.
//
//===----------------------------------------------------------------------===//

#include "Hyperparameters.h"

#include "Json.h"
#include "Program.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace cleave::rt::trainer;

namespace {

const char *scheduleName(LrSchedule s) {
  switch (s) {
  case LrSchedule::Constant:
    return "constant";
  case LrSchedule::Cosine:
    return "cosine";
  case LrSchedule::Linear:
    return "linear";
  case LrSchedule::Wsd:
    return "wsd";
  }
  return "?";
}

std::optional<LrSchedule> scheduleNamed(const std::string &name) {
  for (LrSchedule s : {LrSchedule::Constant, LrSchedule::Cosine,
                       LrSchedule::Linear, LrSchedule::Wsd})
    if (name == scheduleName(s))
      return s;
  return std::nullopt;
}

/// The flag of a slot: "--weight-decay" for "weight_decay".
std::string flagOf(int32_t slot) {
  std::string flag = std::string("--") + cleave_hyperparameter_name(slot);
  for (char &c : flag)
    if (c == '_')
      c = '-';
  return flag;
}

double parseReal(const std::string &flag, const std::string &text) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    fail(flag + " expects a finite number, got '" + text + "'");
  return v;
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string shortNumber(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

/// A number member of `object`, if present.
std::optional<double> realMember(const JsonValue &object,
                                 const std::string &key) {
  const JsonValue *v = object.find(key);
  if (!v || v->kind != JsonValue::Number)
    return std::nullopt;
  return std::strtod(v->text.c_str(), nullptr);
}

} // namespace

const char *const cleave::rt::trainer::kHyperparameterUsage =
    R"(hyperparameters (the program's compiled values are the defaults; a
resumed run keeps its checkpoint's unless given again):
  --lr X              the (peak) learning rate
  --weight-decay X    decoupled (AdamW) or L2 (SGD) weight decay
  --no-decay-1d       no weight decay for parameters of rank < 2 (biases,
                      normalisation weights: nanoGPT's and Megatron's
                      groups); the default decays all, as torch.optim
  --weight-decay-1d X their weight decay (default: --weight-decay)
  --beta1 X, --beta2 X, --eps X     AdamW's
  --momentum X, --dampening X       SGD's (momentum only in a program
                      compiled with momentum, which has its buffers)
  --grad-clip X       the global gradient norm clipped to (0: off; in a
                      program compiled with --grad-clip)
  --loss-scale-growth-interval K    fp16's dynamic loss scaling
  --lr-schedule S     constant (default), cosine, linear or wsd (warmup,
                      stable, decay), of the update number k = 1, 2, ...,
                      s = k - 1: warmup lr * (s+1)/W for s < W; then
                      cosine m + (lr - m)(1 + cos(pi t/(D - W)))/2 and
                      linear lr + (m - lr) t/(D - W), t = min(s - W, D - W)
                      (torch's LambdaLR warmup, CosineAnnealingLR, LinearLR);
                      wsd lr until s = D - C, then linear to m over C steps
  --warmup-steps W    (default 0)
  --min-lr m          the schedule's final learning rate (default 0)
  --decay-steps D     where the schedule reaches m (default: --steps; give
                      it when this run stops before the schedule's end, to
                      be resumed: the checkpoint keeps the schedule)
  --cooldown-steps C  wsd's decay (default: a fifth of D)
)";

bool HyperparameterFlags::parse(const std::string &flag,
                                const std::function<std::string()> &next) {
  for (int32_t slot = 0; slot < CLEAVE_NUM_HYPERPARAMETERS; ++slot)
    if (flag == flagOf(slot)) {
      if (values[size_t(slot)])
        fail(flag + " is given twice");
      values[size_t(slot)] = parseReal(flag, next());
      return true;
    }
  if (flag == "--no-decay-1d") {
    noDecay1d = true;
    return true;
  }
  if (flag == "--lr-schedule") {
    std::string name = next();
    schedule = scheduleNamed(name);
    if (!schedule)
      fail("--lr-schedule expects constant, cosine, linear or wsd, got '" +
           name + "'");
    return true;
  }
  if (flag == "--min-lr") {
    minLr = parseReal(flag, next());
    return true;
  }
  std::optional<int64_t> *steps = flag == "--warmup-steps"     ? &warmupSteps
                                  : flag == "--decay-steps"    ? &decaySteps
                                  : flag == "--cooldown-steps" ? &cooldownSteps
                                                               : nullptr;
  if (!steps)
    return false;
  *steps = parseCount(flag, next(), 0);
  return true;
}

Hyperparameters Hyperparameters::resolve(const HyperparameterFlags &flags,
                                         const std::string &saved,
                                         int64_t steps) {
  Hyperparameters h;
  const cleave_program_info &p = program();
  JsonValue config;
  config.kind = JsonValue::Object;
  std::string error;
  if (p.training_config && (!parseJson(p.training_config, config, error) ||
                            config.kind != JsonValue::Object))
    fail("program metadata: the training config is not a JSON object");
  const JsonValue *optimizer = config.find("optimizer");
  bool adamw = optimizer && optimizer->text == "adamw";
  const JsonValue *runTime = config.find("run_time_hyperparameters");
  h.runTime_ = runTime && runTime->kind == JsonValue::Bool && runTime->boolean;
  const JsonValue *nesterovValue = config.find("nesterov");
  bool nesterov = nesterovValue && nesterovValue->boolean;
  bool scaled = config.find("loss_scale") != nullptr;

  // The program's values, then the checkpoint's, then the flags'.
  for (int32_t slot = 0; slot < CLEAVE_NUM_HYPERPARAMETERS; ++slot)
    if (auto v = realMember(config, cleave_hyperparameter_name(slot)))
      h.values[size_t(slot)] = *v;
  h.values[CLEAVE_HP_WEIGHT_DECAY_1D] = h.values[CLEAVE_HP_WEIGHT_DECAY];
  if (!scaled)
    h.values[CLEAVE_HP_LOSS_SCALE_GROWTH_INTERVAL] = 2000;
  const double compiledMomentum = h.values[CLEAVE_HP_MOMENTUM];
  const double compiledClip = h.values[CLEAVE_HP_GRAD_CLIP];
  std::optional<int64_t> decay, cooldown;
  if (!saved.empty()) {
    JsonValue record;
    if (!parseJson(saved, record, error) || record.kind != JsonValue::Object)
      fail("the checkpoint's hyperparameters are not a JSON object: " + error);
    for (int32_t slot = 0; slot < CLEAVE_NUM_HYPERPARAMETERS; ++slot)
      if (auto v = realMember(record, cleave_hyperparameter_name(slot)))
        h.values[size_t(slot)] = *v;
    if (const JsonValue *s = record.find("lr_schedule"))
      h.schedule = scheduleNamed(s->text).value_or(LrSchedule::Constant);
    int64_t n;
    if (const JsonValue *v = record.find("warmup_steps"); v && v->asInt64(n))
      h.warmup = n;
    if (const JsonValue *v = record.find("decay_steps"); v && v->asInt64(n))
      decay = n;
    if (const JsonValue *v = record.find("cooldown_steps"); v && v->asInt64(n))
      cooldown = n;
    if (auto v = realMember(record, "min_lr"))
      h.minLr = *v;
  }

  bool anyFlag = flags.noDecay1d || flags.schedule || flags.warmupSteps ||
                 flags.decaySteps || flags.cooldownSteps || flags.minLr;
  // The weight decay sets both groups unless the 1-D one is given, or the
  // checkpoint's record has a group of its own (a --no-decay-1d run
  // resumed with another --weight-decay keeps its no-decay group).
  const bool oneGroup =
      h.values[CLEAVE_HP_WEIGHT_DECAY_1D] == h.values[CLEAVE_HP_WEIGHT_DECAY];
  for (int32_t slot = 0; slot < CLEAVE_NUM_HYPERPARAMETERS; ++slot)
    if (const std::optional<double> &v = flags.values[size_t(slot)]) {
      anyFlag = true;
      h.values[size_t(slot)] = *v;
      if (slot == CLEAVE_HP_WEIGHT_DECAY &&
          !flags.values[CLEAVE_HP_WEIGHT_DECAY_1D] && oneGroup)
        h.values[CLEAVE_HP_WEIGHT_DECAY_1D] = *v;
    }
  if (anyFlag && !h.runTime_)
    fail("this program was compiled with fixed hyperparameters (an older "
         "cleave-compile): recompile it to set them at run time");
  if (flags.noDecay1d) {
    if (flags.values[CLEAVE_HP_WEIGHT_DECAY_1D])
      fail("--no-decay-1d and --weight-decay-1d are exclusive");
    h.values[CLEAVE_HP_WEIGHT_DECAY_1D] = 0;
  }
  if (flags.schedule)
    h.schedule = *flags.schedule;
  if (flags.warmupSteps)
    h.warmup = *flags.warmupSteps;
  if (flags.decaySteps)
    decay = flags.decaySteps;
  if (flags.cooldownSteps)
    cooldown = flags.cooldownSteps;
  if (flags.minLr)
    h.minLr = *flags.minLr;
  h.decay = decay.value_or(steps);
  h.cooldown = cooldown.value_or(std::max<int64_t>(1, h.decay / 5));

  // What this program can change, and sane values.
  auto given = [&](int32_t slot) {
    return flags.values[size_t(slot)].has_value();
  };
  const double *v = h.values.data();
  std::string optimizerName = adamw ? "AdamW" : "SGD";
  for (int32_t slot : {CLEAVE_HP_BETA1, CLEAVE_HP_BETA2, CLEAVE_HP_EPS})
    if (given(slot) && !adamw)
      fail(flagOf(slot) + " is AdamW's; this program's optimizer is SGD");
  for (int32_t slot : {CLEAVE_HP_MOMENTUM, CLEAVE_HP_DAMPENING})
    if (given(slot) && adamw)
      fail(flagOf(slot) + " is SGD's; this program's optimizer is AdamW");
  if (!(v[CLEAVE_HP_LR] >= 0))
    fail("--lr must be >= 0, got " + shortNumber(v[CLEAVE_HP_LR]));
  if (!(v[CLEAVE_HP_WEIGHT_DECAY] >= 0) || !(v[CLEAVE_HP_WEIGHT_DECAY_1D] >= 0))
    fail("--weight-decay must be >= 0");
  if (adamw) {
    for (int32_t slot : {CLEAVE_HP_BETA1, CLEAVE_HP_BETA2})
      if (!(v[slot] >= 0 && v[slot] < 1))
        fail(flagOf(slot) + " must be in [0, 1), got " + shortNumber(v[slot]));
    if (!(v[CLEAVE_HP_EPS] >= 0))
      fail("--eps must be >= 0, got " + shortNumber(v[CLEAVE_HP_EPS]));
  } else {
    if (v[CLEAVE_HP_MOMENTUM] != 0 && compiledMomentum == 0)
      fail("--momentum: this program was compiled without momentum, so it "
           "has no momentum buffers; compile it with --momentum to change "
           "it at run time");
    if (!(v[CLEAVE_HP_MOMENTUM] >= 0))
      fail("--momentum must be >= 0, got " +
           shortNumber(v[CLEAVE_HP_MOMENTUM]));
    if (nesterov && (v[CLEAVE_HP_MOMENTUM] <= 0 || v[CLEAVE_HP_DAMPENING] != 0))
      fail("this program uses Nesterov momentum, which needs momentum > 0 "
           "and dampening 0 (as torch.optim.SGD)");
  }
  if (given(CLEAVE_HP_GRAD_CLIP) && compiledClip == 0 &&
      v[CLEAVE_HP_GRAD_CLIP] != 0)
    fail("--grad-clip: this program was compiled without gradient clipping "
         "(it computes no gradient norm); compile it with --grad-clip to "
         "change the norm at run time");
  if (!(v[CLEAVE_HP_GRAD_CLIP] >= 0))
    fail("--grad-clip must be >= 0 (0: off), got " +
         shortNumber(v[CLEAVE_HP_GRAD_CLIP]));
  if (given(CLEAVE_HP_LOSS_SCALE_GROWTH_INTERVAL)) {
    double k = v[CLEAVE_HP_LOSS_SCALE_GROWTH_INTERVAL];
    if (!scaled)
      fail("--loss-scale-growth-interval: this program has no dynamic loss "
           "scaling (compile it with --precision fp16)");
    if (!(k >= 1) || k != std::floor(k) || k > 9.0e15)
      fail("--loss-scale-growth-interval expects an integer >= 1, got " +
           shortNumber(k));
  }
  double lr = v[CLEAVE_HP_LR];
  if (!(h.minLr >= 0) || h.minLr > lr)
    fail("--min-lr " + shortNumber(h.minLr) + " must be in [0, --lr " +
         shortNumber(lr) + "]");
  if (h.warmup > h.decay)
    fail("--warmup-steps " + std::to_string(h.warmup) +
         " is past the schedule's end, step " + std::to_string(h.decay) +
         " (--decay-steps, by default the run's --steps)");
  if (h.schedule != LrSchedule::Constant && h.decay <= h.warmup)
    fail("--decay-steps " + std::to_string(h.decay) +
         " must be after the warmup's " + std::to_string(h.warmup) +
         " steps (the " + scheduleName(h.schedule) +
         " schedule decays in between)");
  if (h.schedule == LrSchedule::Wsd &&
      (h.cooldown < 1 || h.cooldown > h.decay - h.warmup))
    fail("--cooldown-steps " + std::to_string(h.cooldown) + " must be in [1, " +
         std::to_string(h.decay - h.warmup) +
         "]: the steps between the warmup's " + std::to_string(h.warmup) +
         " and --decay-steps " + std::to_string(h.decay));
  return h;
}

double Hyperparameters::lrAt(int64_t k) const {
  const double base = values[CLEAVE_HP_LR], m = minLr;
  const int64_t s = k - 1;
  if (s < warmup)
    return base * double(s + 1) / double(warmup);
  switch (schedule) {
  case LrSchedule::Constant:
    return base;
  case LrSchedule::Cosine: {
    double span = double(decay - warmup);
    double t = double(std::min(s - warmup, decay - warmup));
    return m + (base - m) * (1 + std::cos(M_PI * t / span)) / 2;
  }
  case LrSchedule::Linear: {
    double span = double(decay - warmup);
    double t = double(std::min(s - warmup, decay - warmup));
    return base + (m - base) * t / span;
  }
  case LrSchedule::Wsd: {
    int64_t start = decay - cooldown;
    if (s < start)
      return base;
    return base + (m - base) * double(std::min(s - start, cooldown)) /
                      double(cooldown);
  }
  }
  return base;
}

const double *Hyperparameters::forStep(int64_t k) {
  current = values;
  current[CLEAVE_HP_LR] = lrAt(k);
  return current.data();
}

std::string Hyperparameters::toJson() const {
  std::string json = "{";
  for (int32_t slot = 0; slot < CLEAVE_NUM_HYPERPARAMETERS; ++slot)
    json += std::string(slot ? ", " : "") + "\"" +
            cleave_hyperparameter_name(slot) +
            "\": " + number(values[size_t(slot)]);
  json += std::string(", \"lr_schedule\": \"") + scheduleName(schedule) +
          "\", \"warmup_steps\": " + std::to_string(warmup) +
          ", \"decay_steps\": " + std::to_string(decay) +
          ", \"cooldown_steps\": " + std::to_string(cooldown) +
          ", \"min_lr\": " + number(minLr) + "}";
  return json;
}

std::string Hyperparameters::describe() const {
  std::string s = "lr " + shortNumber(values[CLEAVE_HP_LR]);
  if (schedule != LrSchedule::Constant || warmup > 0) {
    s += std::string(" (") + scheduleName(schedule);
    if (warmup > 0)
      s += ", warmup " + std::to_string(warmup);
    if (schedule == LrSchedule::Cosine || schedule == LrSchedule::Linear)
      s += ", to " + shortNumber(minLr) + " at step " + std::to_string(decay);
    if (schedule == LrSchedule::Wsd)
      s += ", to " + shortNumber(minLr) + " over the " +
           std::to_string(cooldown) + " steps before step " +
           std::to_string(decay);
    s += ")";
  }
  s += ", weight decay " + shortNumber(values[CLEAVE_HP_WEIGHT_DECAY]);
  if (values[CLEAVE_HP_WEIGHT_DECAY_1D] != values[CLEAVE_HP_WEIGHT_DECAY])
    s += " (rank < 2: " + shortNumber(values[CLEAVE_HP_WEIGHT_DECAY_1D]) + ")";
  if (values[CLEAVE_HP_GRAD_CLIP] > 0)
    s += ", grad clip " + shortNumber(values[CLEAVE_HP_GRAD_CLIP]);
  return s;
}
