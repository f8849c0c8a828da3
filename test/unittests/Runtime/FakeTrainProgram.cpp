//===- FakeTrainProgram.cpp - hand-written stand-ins for training programs ===//
//
// Defines what a compiled training object defines (cleave_program of kind
// CLEAVE_PROGRAM_TRAINING and cleave_program_run), in plain C++ so that the
// trainer is tested independently of the compiler and the backward kernels.
// Linked with cleave_rt_main into three executables that TrainerTest runs,
// chosen by CLEAVE_FAKE_TRAIN_VARIANT:
//   0  linear regression: x [4, 3] f32, targets [4] f32; pred = x . w + b,
//      loss = mean((pred - targets)^2); torch.optim.SGD(lr=0.1,
//      momentum=0.5) on w [3] and b [] with state w.momentum, b.momentum
//      and optimizer.step; source_model "fake_train_model.onnx" (relative:
//      the test creates it in the working directory)
//   1  the same with b of shape [1]: "another model" for --resume
//   2  a bigram language model: idx [2, 4] i64, labels [2, 4] i64; logits
//      are rows of table [8, 8]; mean cross-entropy; SGD(lr=0.5)
//   3  variant 0 with a dynamic loss scaler whose state has names of its
//      own ("counter", "scaler/scale" from 1024, "scaler/tracker"): a step
//      whose gradients are not finite updates nothing and halves the scale,
//      two finite steps in a row double it. The trainer finds the scaler by
//      role; CLEAVE_FAKE_ROLE_DEFECT (read at start-up) spoils the roles
//      for the metadata checks: unknown, model-in-state, state-in-model,
//      two-counters, scale-as-tracker, no-counter.
// When the environment names a file in CLEAVE_FAKE_TRACE, every run appends
// the bytes of all inputs to it, so that tests see exactly what each step
// read.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/cleave_rt.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#ifndef CLEAVE_FAKE_TRAIN_VARIANT
#define CLEAVE_FAKE_TRAIN_VARIANT 0
#endif

namespace {

constexpr cleave_tensor tensor(int64_t offset, int32_t dtype, int32_t rank,
                               int64_t d0 = 0, int64_t d1 = 0) {
  return cleave_tensor{offset, dtype, rank, {d0, d1}};
}

/// Appends the bytes of every input to $CLEAVE_FAKE_TRACE, if set.
void trace(const char *arena, const cleave_named_tensor *inputs, int count,
           const int64_t *bytes) {
  const char *path = std::getenv("CLEAVE_FAKE_TRACE");
  if (!path || !*path)
    return;
  FILE *f = std::fopen(path, "ab");
  if (!f)
    cleave_rt_fail("fake program: cannot open the trace %s", path);
  for (int i = 0; i < count; ++i)
    std::fwrite(arena + inputs[i].tensor.offset, 1, size_t(bytes[i]), f);
  std::fclose(f);
}

template <typename T> T *at(char *arena, const cleave_tensor &t) {
  return reinterpret_cast<T *>(arena + t.offset);
}

#if CLEAVE_FAKE_TRAIN_VARIANT != 2

constexpr int kBatch = 4, kFeatures = 3;
constexpr float kLr = 0.1f, kMomentum = 0.5f;

const cleave_tensor kX = tensor(0, CLEAVE_F32, 2, kBatch, kFeatures);
const cleave_tensor kTargets = tensor(64, CLEAVE_F32, 1, kBatch);
const cleave_tensor kW = tensor(128, CLEAVE_F32, 1, kFeatures);
#if CLEAVE_FAKE_TRAIN_VARIANT != 1
const cleave_tensor kB = tensor(192, CLEAVE_F32, 0);
const cleave_tensor kBMomentum = tensor(320, CLEAVE_F32, 0);
#else
const cleave_tensor kB = tensor(192, CLEAVE_F32, 1, 1);
const cleave_tensor kBMomentum = tensor(320, CLEAVE_F32, 1, 1);
#endif
const cleave_tensor kWMomentum = tensor(256, CLEAVE_F32, 1, kFeatures);
const cleave_tensor kStep = tensor(384, CLEAVE_I64, 0);
const cleave_tensor kLoss = tensor(448, CLEAVE_F32, 0);

const float kWInit[kFeatures] = {0.1f, -0.2f, 0.3f};

#if CLEAVE_FAKE_TRAIN_VARIANT != 3
const cleave_named_tensor kParams[] = {
    {"w", kW, kWInit, nullptr, 0, CLEAVE_PARAM_MODEL},
    {"b", kB, nullptr, nullptr, 0, CLEAVE_PARAM_MODEL},
    {"w.momentum", kWMomentum, nullptr, nullptr, 0,
     CLEAVE_PARAM_OPTIMIZER_STATE},
    {"b.momentum", kBMomentum, nullptr, nullptr, 0,
     CLEAVE_PARAM_OPTIMIZER_STATE},
    {"optimizer.step", kStep, nullptr, nullptr, 0, CLEAVE_PARAM_STEP_COUNTER},
};
#else
const cleave_tensor kScale = tensor(512, CLEAVE_F32, 0);
const cleave_tensor kTracker = tensor(576, CLEAVE_I64, 0);
const float kScaleInit = 1024.0f;

// Not const: spoilRoles() edits the roles before main.
cleave_named_tensor kParams[] = {
    {"w", kW, kWInit, nullptr, 0, CLEAVE_PARAM_MODEL},
    {"b", kB, nullptr, nullptr, 0, CLEAVE_PARAM_MODEL},
    {"w.momentum", kWMomentum, nullptr, nullptr, 0,
     CLEAVE_PARAM_OPTIMIZER_STATE},
    {"b.momentum", kBMomentum, nullptr, nullptr, 0,
     CLEAVE_PARAM_OPTIMIZER_STATE},
    {"counter", kStep, nullptr, nullptr, 0, CLEAVE_PARAM_STEP_COUNTER},
    {"scaler/scale", kScale, &kScaleInit, nullptr, 0, CLEAVE_PARAM_LOSS_SCALE},
    {"scaler/tracker", kTracker, nullptr, nullptr, 0,
     CLEAVE_PARAM_GROWTH_TRACKER},
};

/// Applies $CLEAVE_FAKE_ROLE_DEFECT to the roles.
[[maybe_unused]] const bool kSpoiled = [] {
  const char *defect = std::getenv("CLEAVE_FAKE_ROLE_DEFECT");
  if (!defect)
    return false;
  std::string d = defect;
  if (d == "unknown")
    kParams[4].role = 7;
  else if (d == "model-in-state")
    kParams[2].role = CLEAVE_PARAM_MODEL;
  else if (d == "state-in-model")
    kParams[1].role = CLEAVE_PARAM_OPTIMIZER_STATE;
  else if (d == "two-counters")
    kParams[6].role = CLEAVE_PARAM_STEP_COUNTER;
  else if (d == "scale-as-tracker") {
    kParams[5].role = CLEAVE_PARAM_GROWTH_TRACKER;
    kParams[6].role = CLEAVE_PARAM_LOSS_SCALE;
  } else if (d == "no-counter")
    kParams[4].role = CLEAVE_PARAM_OPTIMIZER_STATE;
  return true;
}();
#endif
const cleave_named_tensor kInputs[] = {
    {"x", kX, nullptr, nullptr, 0, 0},
    {"targets", kTargets, nullptr, nullptr, 0, 0},
};
const cleave_named_tensor kOutputs[] = {
    {"loss", kLoss, nullptr, nullptr, 0, 0},
};
const int64_t kInputBytes[] = {kBatch * kFeatures * 4, kBatch * 4};

#else // the bigram language model

constexpr int kBatch = 2, kSeq = 4, kVocab = 8;
constexpr float kLr = 0.5f;

const cleave_tensor kIdx = tensor(0, CLEAVE_I64, 2, kBatch, kSeq);
const cleave_tensor kLabels = tensor(64, CLEAVE_I64, 2, kBatch, kSeq);
const cleave_tensor kTable = tensor(128, CLEAVE_F32, 2, kVocab, kVocab);
const cleave_tensor kStep = tensor(384, CLEAVE_I64, 0);
const cleave_tensor kLoss = tensor(448, CLEAVE_F32, 0);

const cleave_named_tensor kParams[] = {
    {"table", kTable, nullptr, nullptr, 0, CLEAVE_PARAM_MODEL},
    {"optimizer.step", kStep, nullptr, nullptr, 0, CLEAVE_PARAM_STEP_COUNTER},
};
const cleave_named_tensor kInputs[] = {
    {"idx", kIdx, nullptr, nullptr, 0, 0},
    {"labels", kLabels, nullptr, nullptr, 0, 0},
};
const cleave_named_tensor kOutputs[] = {
    {"loss", kLoss, nullptr, nullptr, 0, 0},
};
const int64_t kInputBytes[] = {kBatch * kSeq * 8, kBatch *kSeq * 8};

#endif

} // namespace

extern "C" {

const cleave_program_info cleave_program = {
    CLEAVE_RT_ABI_VERSION,
    CLEAVE_PROGRAM_TRAINING,
    /*arena_bytes=*/CLEAVE_FAKE_TRAIN_VARIANT == 3 ? 640 : 512,
    /*num_params=*/sizeof(kParams) / sizeof(kParams[0]),
    /*num_model_params=*/CLEAVE_FAKE_TRAIN_VARIANT == 2 ? 1 : 2,
    kParams,
    /*num_inputs=*/2,
    kInputs,
    /*num_outputs=*/1,
    kOutputs,
#if CLEAVE_FAKE_TRAIN_VARIANT == 2
    /*source_model=*/nullptr,
    /*training_config=*/
    "{\"loss\":\"cross-entropy\",\"optimizer\":\"sgd\",\"lr\":0.5}",
#else
    /*source_model=*/"fake_train_model.onnx",
    /*training_config=*/
    "{\"loss\":\"mse\",\"optimizer\":\"sgd\",\"lr\":0.1,\"momentum\":0.5}",
#endif
};

void cleave_program_run(char *arena, const cleave_program_context *) {
  trace(arena, kInputs, 2, kInputBytes);
  int64_t &step = *at<int64_t>(arena, kStep);
#if CLEAVE_FAKE_TRAIN_VARIANT != 3
  ++step;
#endif
#if CLEAVE_FAKE_TRAIN_VARIANT != 2
  const float *x = at<float>(arena, kX);
  const float *t = at<float>(arena, kTargets);
  float *w = at<float>(arena, kW), *b = at<float>(arena, kB);
  float *wm = at<float>(arena, kWMomentum), *bm = at<float>(arena, kBMomentum);
  float dpred[kBatch], loss = 0;
  for (int i = 0; i < kBatch; ++i) {
    float pred = *b;
    for (int j = 0; j < kFeatures; ++j)
      pred += x[i * kFeatures + j] * w[j];
    float r = pred - t[i];
    loss += r * r;
    dpred[i] = 2 * r / kBatch;
  }
  *at<float>(arena, kLoss) = loss / kBatch;
  float gb = 0;
  for (int i = 0; i < kBatch; ++i)
    gb += dpred[i];
#if CLEAVE_FAKE_TRAIN_VARIANT == 3
  // The scaler: a non-finite step updates nothing and halves the scale; the
  // second finite step in a row doubles it.
  float &scale = *at<float>(arena, kScale);
  int64_t &tracker = *at<int64_t>(arena, kTracker);
  if (!std::isfinite(gb)) {
    scale *= 0.5f;
    tracker = 0;
    return;
  }
  if (++tracker == 2) {
    scale *= 2.0f;
    tracker = 0;
  }
  ++step;
#endif
  // torch.optim.SGD with momentum: buf = g on the first step, then
  // buf = momentum * buf + g; p -= lr * buf.
  auto update = [&](float &p, float &buf, float g) {
    buf = step == 1 ? g : kMomentum * buf + g;
    p -= kLr * buf;
  };
  for (int j = 0; j < kFeatures; ++j) {
    float g = 0;
    for (int i = 0; i < kBatch; ++i)
      g += x[i * kFeatures + j] * dpred[i];
    update(w[j], wm[j], g);
  }
  update(*b, *bm, gb);
#else
  const int64_t *idx = at<int64_t>(arena, kIdx);
  const int64_t *labels = at<int64_t>(arena, kLabels);
  float *table = at<float>(arena, kTable);
  float grad[kVocab * kVocab] = {};
  double loss = 0;
  constexpr int kPositions = kBatch * kSeq;
  for (int p = 0; p < kPositions; ++p) {
    if (idx[p] < 0 || idx[p] >= kVocab || labels[p] < 0 || labels[p] >= kVocab)
      cleave_rt_fail("fake program: token %lld or label %lld out of range",
                     (long long)idx[p], (long long)labels[p]);
    const float *row = table + idx[p] * kVocab;
    float max = row[0];
    for (int c = 1; c < kVocab; ++c)
      max = row[c] > max ? row[c] : max;
    float sum = 0;
    for (int c = 0; c < kVocab; ++c)
      sum += std::exp(row[c] - max);
    loss += std::log(sum) + max - row[labels[p]];
    for (int c = 0; c < kVocab; ++c)
      grad[idx[p] * kVocab + c] +=
          (std::exp(row[c] - max) / sum - (c == labels[p] ? 1 : 0)) /
          kPositions;
  }
  *at<float>(arena, kLoss) = float(loss / kPositions);
  for (int i = 0; i < kVocab * kVocab; ++i)
    table[i] -= kLr * grad[i];
#endif
}

} // extern "C"
