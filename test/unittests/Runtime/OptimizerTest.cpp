//===- OptimizerTest.cpp - sgd and adamw updates --------------------------===//
//
// Three consecutive steps of each optimizer against a float64
// reimplementation of the update formulas of torch.optim.SGD and
// torch.optim.AdamW, run alongside from the same initial values. The
// tolerance is 1e-6 relative to the magnitude of the summed terms (tracked
// by the reference), since a value that cancels, like m = beta1 m +
// (1 - beta1) g near zero, is only as accurate in f32 as its terms. Cases:
// SGD with momentum, dampening, weight decay, nesterov and a gradient scale
// (the first step initializes the momentum buffer whatever it holds),
// plain SGD without a buffer, AdamW with f32 and bf16 gradients and from a
// later step; then the fatal errors.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace cleave::rt::test;

namespace {

using Values = std::vector<double>;

/// Expects |got - want| <= rtol * bound for every element, where `bound`
/// tracks the magnitude of the terms that were summed: a value that
/// cancels (m = beta1 m + (1 - beta1) g near zero) is only as accurate as
/// its terms. With CLEAVE_TEST_PRINT_ERRORS set, prints the largest
/// relative error (to the bound).
void expectWithin(const Values &got, const Values &want, const Values &bound,
                  double rtol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(got[i] - want[i]);
    worst = std::max(worst, err / bound[i]);
    if (!(err <= rtol * bound[i]) && failures++ < 5)
      ADD_FAILURE() << what << " element " << i << ": got " << got[i]
                    << ", want " << want[i] << ", bound " << bound[i]
                    << " (rtol " << rtol << ")";
  }
  if (std::getenv("CLEAVE_TEST_PRINT_ERRORS"))
    std::printf("[ max error ] %s: %.2e relative to the terms\n", what.c_str(),
                worst);
}

struct SgdConfig {
  double lr, momentum, dampening, weightDecay;
  bool nesterov;
  double gradScale; // 0: grad_scale is NULL
};

/// A float64 SGD state: values and the magnitudes of their terms.
struct SgdState {
  Values p, buf, pMag, bufMag;
};

/// One step of torch.optim.SGD in float64.
void refSgd(SgdState &s, const Values &grad, int64_t step, const SgdConfig &c) {
  double scale = c.gradScale ? c.gradScale : 1.0;
  for (size_t i = 0; i < s.p.size(); ++i) {
    double g = grad[i] * scale + c.weightDecay * s.p[i];
    double gMag = std::fabs(grad[i] * scale) + c.weightDecay * s.pMag[i];
    if (c.momentum != 0) {
      bool first = step == 1;
      s.buf[i] = first ? g : c.momentum * s.buf[i] + (1 - c.dampening) * g;
      s.bufMag[i] =
          first ? gMag : c.momentum * s.bufMag[i] + (1 - c.dampening) * gMag;
      g = c.nesterov ? g + c.momentum * s.buf[i] : s.buf[i];
      gMag = c.nesterov ? gMag + c.momentum * s.bufMag[i] : s.bufMag[i];
    }
    s.p[i] -= c.lr * g;
    s.pMag[i] += c.lr * gMag;
  }
}

void runSgd(const SgdConfig &c, int64_t n, unsigned seed,
            const std::string &name) {
  TestArena arena;
  cleave_tensor param = arena.add(CLEAVE_F32, {n});
  cleave_tensor grad = arena.add(CLEAVE_F32, {n});
  cleave_tensor buf = arena.add(CLEAVE_F32, {n});
  cleave_tensor step = arena.add(CLEAVE_I64, {});
  cleave_tensor scale = arena.add(CLEAVE_F32, {});
  SgdState s;
  s.p = arena.fill(param, -1, 1, seed);
  // Garbage in the buffer: step 1 must not read it.
  s.buf = arena.fill(buf, 5, 6, seed + 1);
  s.pMag = s.p;
  for (double &v : s.pMag)
    v = std::fabs(v);
  s.bufMag.assign(size_t(n), 0.0);
  arena.setValues(scale, {c.gradScale});
  bool withBuf = c.momentum != 0;
  for (int64_t t = 1; t <= 3; ++t) {
    Values g = arena.fill(grad, -1, 1, seed + 10 * unsigned(t));
    arena.setValues(step, {double(t)});
    cleave_rt_sgd(arena.data(), &param, &grad, withBuf ? &buf : nullptr, &step,
                  c.gradScale ? &scale : nullptr, c.lr, c.momentum, c.dampening,
                  c.weightDecay, c.nesterov);
    refSgd(s, g, t, c);
    std::string at = name + " step " + std::to_string(t);
    expectWithin(arena.values(param), s.p, s.pMag, 1e-6, at + " param");
    if (withBuf)
      expectWithin(arena.values(buf), s.buf, s.bufMag, 1e-6, at + " momentum");
  }
}

TEST(RuntimeOptimizer, SgdMomentumDampeningWeightDecay) {
  runSgd({0.1, 0.9, 0.1, 0.01, false, 0.5}, 5000, 1, "sgd momentum");
  // Above the parallel threshold, with a partial last block.
  runSgd({0.05, 0.8, 0.0, 0.0, false, 0.0}, 70001, 2, "sgd large");
}

TEST(RuntimeOptimizer, SgdNesterov) {
  runSgd({0.1, 0.9, 0.0, 0.05, true, 0.25}, 3000, 3, "sgd nesterov");
}

TEST(RuntimeOptimizer, SgdWithoutMomentum) {
  // momentum 0: no buffer at all.
  runSgd({0.2, 0.0, 0.0, 0.1, false, 2.0}, 1000, 4, "sgd plain");
  runSgd({0.2, 0.0, 0.0, 0.0, false, 0.0}, 1000, 5, "sgd plain no decay");
}

struct AdamConfig {
  double lr, beta1, beta2, eps, weightDecay;
  double gradScale; // 0: grad_scale is NULL
};

/// A float64 AdamW state: values and the magnitudes of their terms (v has
/// no cancellation: its terms are positive).
struct AdamState {
  Values p, m, v, pMag, mMag;
};

/// One step of torch.optim.AdamW in float64.
void refAdamw(AdamState &s, const Values &grad, int64_t step,
              const AdamConfig &c) {
  double bc1 = 1 - std::pow(c.beta1, double(step));
  double bc2 = 1 - std::pow(c.beta2, double(step));
  double scale = c.gradScale ? c.gradScale : 1.0;
  double decay = 1 - c.lr * c.weightDecay;
  for (size_t i = 0; i < s.p.size(); ++i) {
    double g = grad[i] * scale;
    s.m[i] = c.beta1 * s.m[i] + (1 - c.beta1) * g;
    s.mMag[i] = c.beta1 * s.mMag[i] + (1 - c.beta1) * std::fabs(g);
    s.v[i] = c.beta2 * s.v[i] + (1 - c.beta2) * g * g;
    double denom = std::sqrt(s.v[i]) / std::sqrt(bc2) + c.eps;
    s.p[i] = s.p[i] * decay - c.lr / bc1 * s.m[i] / denom;
    s.pMag[i] = s.pMag[i] * decay + c.lr / bc1 * s.mMag[i] / denom;
  }
}

/// Three steps from `firstStep`; the state starts at zero on step 1, else
/// at random moments.
void runAdamw(const AdamConfig &c, int32_t gradType, int64_t n,
              int64_t firstStep, unsigned seed, const std::string &name) {
  TestArena arena;
  cleave_tensor param = arena.add(CLEAVE_F32, {n});
  cleave_tensor grad = arena.add(gradType, {n});
  cleave_tensor m = arena.add(CLEAVE_F32, {n});
  cleave_tensor v = arena.add(CLEAVE_F32, {n});
  cleave_tensor step = arena.add(CLEAVE_I64, {1});
  cleave_tensor scale = arena.add(CLEAVE_F32, {1});
  AdamState s;
  s.p = arena.fill(param, -1, 1, seed);
  s.m.assign(size_t(n), 0.0);
  s.v.assign(size_t(n), 0.0);
  if (firstStep > 1) {
    s.m = arena.fill(m, -0.1, 0.1, seed + 1);
    s.v = arena.fill(v, 0, 0.01, seed + 2);
  }
  s.pMag = s.p;
  for (double &x : s.pMag)
    x = std::fabs(x);
  s.mMag = s.m;
  for (double &x : s.mMag)
    x = std::fabs(x);
  arena.setValues(scale, {c.gradScale});
  for (int64_t t = firstStep; t < firstStep + 3; ++t) {
    // The reference takes the gradient as stored (rounded for bf16).
    Values g = arena.fill(grad, -1, 1, seed + 10 * unsigned(t));
    arena.setValues(step, {double(t)});
    cleave_rt_adamw(arena.data(), &param, &grad, &m, &v, &step,
                    c.gradScale ? &scale : nullptr, c.lr, c.beta1, c.beta2,
                    c.eps, c.weightDecay);
    refAdamw(s, g, t, c);
    std::string at = name + " step " + std::to_string(t);
    expectWithin(arena.values(param), s.p, s.pMag, 1e-6, at + " param");
    expectWithin(arena.values(m), s.m, s.mMag, 1e-6, at + " m");
    expectWithin(arena.values(v), s.v, s.v, 1e-6, at + " v");
  }
}

TEST(RuntimeOptimizer, Adamw) {
  runAdamw({1e-3, 0.9, 0.999, 1e-8, 0.01, 0.8}, CLEAVE_F32, 70001, 1, 20,
           "adamw");
  runAdamw({3e-4, 0.9, 0.95, 1e-6, 0.1, 0.0}, CLEAVE_F32, 4000, 1, 21,
           "adamw no scale");
}

TEST(RuntimeOptimizer, AdamwBf16GradAndLaterStep) {
  runAdamw({1e-3, 0.9, 0.999, 1e-8, 0.01, 0.5}, CLEAVE_BF16, 5000, 1, 30,
           "adamw bf16 grad");
  runAdamw({1e-3, 0.9, 0.999, 1e-8, 0.01, 0.0}, CLEAVE_F32, 5000, 1000, 31,
           "adamw step 1000");
}

// A non-finite grad_scale (the loss scaler found an inf or NaN gradient)
// skips the update: parameter and state keep their bytes, whatever the
// gradient holds.
TEST(RuntimeOptimizer, NonFiniteScaleSkipsTheUpdate) {
  const int64_t n = 70001; // above the parallel threshold
  for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    TestArena arena;
    cleave_tensor p = arena.add(CLEAVE_F32, {n});
    cleave_tensor g = arena.add(CLEAVE_F16, {n});
    cleave_tensor m = arena.add(CLEAVE_F32, {n});
    cleave_tensor v = arena.add(CLEAVE_F32, {n});
    cleave_tensor step = arena.add(CLEAVE_I64, {});
    cleave_tensor scale = arena.add(CLEAVE_F32, {});
    Values p0 = arena.fill(p, -1, 1, 40);
    arena.fill(g, -1, 1, 41);
    Values m0 = arena.fill(m, -1, 1, 42);
    Values v0 = arena.fill(v, 0.5, 1, 43);
    arena.setValues(step, {3});
    arena.setValues(scale, {bad});
    cleave_rt_adamw(arena.data(), &p, &g, &m, &v, &step, &scale, 1e-3, 0.9,
                    0.999, 1e-8, 0.01);
    EXPECT_EQ(arena.values(p), p0) << "adamw, scale " << bad;
    EXPECT_EQ(arena.values(m), m0) << "adamw, scale " << bad;
    EXPECT_EQ(arena.values(v), v0) << "adamw, scale " << bad;
    cleave_rt_sgd(arena.data(), &p, &g, &m, &step, &scale, 0.1, 0.9, 0.0, 0.01,
                  0);
    EXPECT_EQ(arena.values(p), p0) << "sgd, scale " << bad;
    EXPECT_EQ(arena.values(m), m0) << "sgd, scale " << bad;
    // The same call with a finite scale does update.
    arena.setValues(scale, {0.5});
    cleave_rt_sgd(arena.data(), &p, &g, &m, &step, &scale, 0.1, 0.9, 0.0, 0.01,
                  0);
    EXPECT_NE(arena.values(p), p0) << "sgd, scale 0.5";
  }
}

TEST(RuntimeOptimizer, Errors) {
  TestArena arena;
  cleave_tensor p = arena.add(CLEAVE_F32, {8});
  cleave_tensor p16 = arena.add(CLEAVE_BF16, {8});
  cleave_tensor g = arena.add(CLEAVE_F32, {8});
  cleave_tensor m = arena.add(CLEAVE_F32, {8});
  cleave_tensor v = arena.add(CLEAVE_F32, {8});
  cleave_tensor small = arena.add(CLEAVE_F32, {4});
  cleave_tensor step = arena.add(CLEAVE_I64, {});
  cleave_tensor step32 = arena.add(CLEAVE_I32, {});
  arena.setValues(step, {1});
  arena.setValues(step32, {1});
  EXPECT_RT_FAIL(cleave_rt_adamw(arena.data(), &p16, &g, &m, &v, &step, nullptr,
                                 1e-3, 0.9, 0.999, 1e-8, 0.0),
                 "cleave_rt_adamw: param must be f32, got bf16");
  EXPECT_RT_FAIL(cleave_rt_adamw(arena.data(), &p, &g, &m, &small, &step,
                                 nullptr, 1e-3, 0.9, 0.999, 1e-8, 0.0),
                 "cleave_rt_adamw: v \\[4\\] and param \\[8\\] differ in "
                 "shape");
  EXPECT_RT_FAIL(cleave_rt_adamw(arena.data(), &p, &g, &m, &v, &step32, nullptr,
                                 1e-3, 0.9, 0.999, 1e-8, 0.0),
                 "cleave_rt_adamw: step must be an i64 scalar, got i32 \\[\\]");
  EXPECT_RT_FAIL(cleave_rt_sgd(arena.data(), &p, &g, nullptr, &step, nullptr,
                               0.1, 0.9, 0.0, 0.0, 0),
                 "cleave_rt_sgd: momentum_buf is NULL with momentum 0.9");
  EXPECT_RT_FAIL(cleave_rt_sgd(arena.data(), &p, &small, nullptr, &step,
                               nullptr, 0.1, 0.0, 0.0, 0.0, 0),
                 "cleave_rt_sgd: param \\[8\\] and grad \\[4\\] differ in "
                 "shape");
  arena.setValues(step, {0});
  EXPECT_RT_FAIL(cleave_rt_sgd(arena.data(), &p, &g, nullptr, &step, nullptr,
                               0.1, 0.0, 0.0, 0.0, 0),
                 "cleave_rt_sgd: step must be at least 1, got 0");
}

} // namespace
