//===- OptimizerTest.cpp - CUDA sgd and adamw against the CPU -------------===//
//
// Three consecutive steps of sgd and adamw on the GPU against the CPU
// backend, from the same parameters and state, with new gradients each
// step, comparing the parameters and every state tensor after each step:
// SGD with momentum, dampening, weight decay, Nesterov and a gradient
// scale (step 1 initializes the momentum buffer whatever it holds), plain
// SGD without a buffer; AdamW from step 1 and from a later step, with and
// without a gradient scale; f32, bf16 and f16 gradients; a parameter of
// 12.6M elements.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include <cmath>

using namespace cleave::rt::test;

namespace {

using CudaOptimizer = CudaTest;

struct SgdConfig {
  double lr, momentum, dampening, weightDecay;
  int32_t nesterov;
  double gradScale; // 0: grad_scale is NULL
};

TEST_F(CudaOptimizer, SgdThreeSteps) {
  const SgdConfig configs[] = {
      {0.1, 0.9, 0.0, 0.0, 0, 0},
      {0.05, 0.9, 0.1, 0.01, 0, 0.5},
      {0.05, 0.8, 0.0, 0.02, 1, 0.25},
      {0.1, 0.0, 0.0, 0.01, 0, 0}, // no momentum buffer
  };
  unsigned seed = 1;
  for (const SgdConfig &c : configs)
    for (int32_t gradType : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16}) {
      int64_t n = 10007;
      DevicePair p;
      cleave_tensor param = p.add(CLEAVE_F32, {n});
      cleave_tensor grad = p.add(gradType, {n});
      cleave_tensor buf = p.add(CLEAVE_F32, {n});
      cleave_tensor step = p.add(CLEAVE_I64, {});
      cleave_tensor scale = p.add(CLEAVE_F32, {});
      p.fill(param, -1, 1, seed++);
      p.fill(buf, 7, 8, seed++); // step 1 must not read it
      p.setValues(scale, {c.gradScale});
      std::string what = "sgd momentum " + std::to_string(c.momentum) +
                         (c.nesterov ? " nesterov" : "") + " grad " +
                         dtypeName(gradType);
      for (int64_t k = 1; k <= 3; ++k) {
        p.fill(grad, -1, 1, seed++);
        p.setValues(step, {double(k)});
        CUDA_AND_CPU(p, sgd, &param, &grad, c.momentum ? &buf : nullptr, &step,
                     c.gradScale ? &scale : nullptr, c.lr, c.momentum,
                     c.dampening, c.weightDecay, c.nesterov);
        std::string at = what + " step " + std::to_string(k);
        p.expectMatch(param, at + " param");
        if (c.momentum)
          p.expectMatch(buf, at + " momentum");
      }
    }
}

struct AdamwConfig {
  double lr, beta1, beta2, eps, weightDecay;
  int64_t firstStep;
  double gradScale; // 0: grad_scale is NULL
};

TEST_F(CudaOptimizer, AdamwThreeSteps) {
  const AdamwConfig configs[] = {
      {1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 0},
      {1e-2, 0.8, 0.99, 1e-6, 0.1, 1, 0.3},
      {3e-4, 0.9, 0.95, 1e-8, 0.0, 1000, 0}, // resumed at step 1000
  };
  unsigned seed = 100;
  for (const AdamwConfig &c : configs)
    for (int32_t gradType : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16}) {
      int64_t n = 20011;
      DevicePair p;
      cleave_tensor param = p.add(CLEAVE_F32, {n});
      cleave_tensor grad = p.add(gradType, {n});
      cleave_tensor m = p.add(CLEAVE_F32, {n});
      cleave_tensor v = p.add(CLEAVE_F32, {n});
      cleave_tensor step = p.add(CLEAVE_I64, {});
      cleave_tensor scale = p.add(CLEAVE_F32, {});
      p.fill(param, -1, 1, seed++);
      if (c.firstStep > 1) { // state of earlier steps
        p.fill(m, -0.1, 0.1, seed++);
        p.fill(v, 0, 0.01, seed++);
      }
      p.setValues(scale, {c.gradScale});
      std::string what =
          "adamw lr " + std::to_string(c.lr) + " grad " + dtypeName(gradType);
      for (int64_t k = c.firstStep; k < c.firstStep + 3; ++k) {
        p.fill(grad, -1, 1, seed++);
        p.setValues(step, {double(k)});
        CUDA_AND_CPU(p, adamw, &param, &grad, &m, &v, &step,
                     c.gradScale ? &scale : nullptr, c.lr, c.beta1, c.beta2,
                     c.eps, c.weightDecay);
        std::string at = what + " step " + std::to_string(k);
        p.expectMatch(param, at + " param", {1e-5, 1e-6});
        p.expectMatch(m, at + " m");
        p.expectMatch(v, at + " v");
      }
    }
}

TEST_F(CudaOptimizer, AdamwLargeParameter) {
  // 16384 x 768 (a sixth of GPT-2's token embedding): many blocks.
  DevicePair p(size_t(256) << 20);
  cleave_tensor param = p.add(CLEAVE_F32, {16384, 768});
  cleave_tensor grad = p.add(CLEAVE_F32, {16384, 768});
  cleave_tensor m = p.add(CLEAVE_F32, {16384, 768});
  cleave_tensor v = p.add(CLEAVE_F32, {16384, 768});
  cleave_tensor step = p.add(CLEAVE_I64, {});
  p.fill(param, -0.1, 0.1, 200);
  for (int64_t k = 1; k <= 2; ++k) {
    p.fill(grad, -1e-3, 1e-3, 200 + unsigned(k));
    p.setValues(step, {double(k)});
    CUDA_AND_CPU(p, adamw, &param, &grad, &m, &v, &step,
                 static_cast<const cleave_tensor *>(nullptr), 6e-4, 0.9, 0.95,
                 1e-8, 0.1);
  }
  p.expectMatch(param, "adamw large param", {1e-5, 1e-6});
  p.expectMatch(m, "adamw large m");
  p.expectMatch(v, "adamw large v");
}

// A non-finite scale (loss scaling found an inf or NaN gradient), read on
// the device, skips the update: both backends leave every byte as it was.
TEST_F(CudaOptimizer, NonFiniteScaleSkipsTheUpdate) {
  for (double bad : {std::nan(""), HUGE_VAL}) {
    int64_t n = 20011;
    DevicePair p;
    cleave_tensor param = p.add(CLEAVE_F32, {n});
    cleave_tensor grad = p.add(CLEAVE_F16, {n});
    cleave_tensor m = p.add(CLEAVE_F32, {n});
    cleave_tensor v = p.add(CLEAVE_F32, {n});
    cleave_tensor step = p.add(CLEAVE_I64, {});
    cleave_tensor scale = p.add(CLEAVE_F32, {});
    p.fill(param, -1, 1, 300);
    p.fill(grad, -1, 1, 301);
    p.fill(m, -1, 1, 302);
    p.fill(v, 0.5, 1, 303);
    p.setValues(step, {4});
    p.setValues(scale, {bad});
    CUDA_AND_CPU(p, adamw, &param, &grad, &m, &v, &step, &scale, 1e-3, 0.9,
                 0.999, 1e-8, 0.01);
    CUDA_AND_CPU(p, sgd, &param, &grad, &m, &step, &scale, 0.1, 0.9, 0.0, 0.01,
                 0);
    std::string what = "scale " + std::to_string(bad);
    p.expectMatch(param, what + " param", {0, 0});
    p.expectMatch(m, what + " m", {0, 0});
    p.expectMatch(v, what + " v", {0, 0});
  }
}

} // namespace
