//===- GradientTest.cpp - the backward kernels ----------------------------===//
//
// Each backward kernel against float64 references on random inputs: the
// central finite differences (step 1e-6) of a float64 reimplementation of
// the forward kernel, loss = sum(forward(inputs) * R) for a random
// cotangent R, and for the norms, attention and cross-entropy also an
// analytic float64 gradient on shapes large enough to run in parallel.
// Tolerances (relative, absolute): unary_grad 1e-5, 1e-6; norms 1e-4, 1e-5
// (1e-4 absolute for dscale and dbias summed over 3072 rows); attention
// 1e-4, 1e-5; gather and slice 1e-6, 1e-6; cross-entropy 1e-5, 1e-7 (1e-9
// over 1000 classes); bf16 operands 1/128 with 2e-3 absolute (2e-2 for
// sums over rows), f16 1/256, 1e-3. Set CLEAVE_TEST_PRINT_ERRORS=1 to print
// the largest error of every comparison.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <functional>

using namespace cleave::rt::test;

namespace {

using Values = std::vector<double>;
using Forward = std::function<Values(const std::vector<Values> &)>;

double dot(const Values &a, const Values &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

/// The gradient of sum(forward(inputs) * r) with respect to inputs[which],
/// by central differences.
Values numericVjp(const Forward &forward, std::vector<Values> inputs,
                  size_t which, const Values &r, double h = 1e-6) {
  Values grad(inputs[which].size());
  for (size_t i = 0; i < grad.size(); ++i) {
    double saved = inputs[which][i];
    inputs[which][i] = saved + h;
    double plus = dot(forward(inputs), r);
    inputs[which][i] = saved - h;
    double minus = dot(forward(inputs), r);
    inputs[which][i] = saved;
    grad[i] = (plus - minus) / (2 * h);
  }
  return grad;
}

/// expectClose, and with CLEAVE_TEST_PRINT_ERRORS set, a line with the
/// largest absolute error and the largest fraction of the tolerance used.
void check(const Values &got, const Values &want, double rtol, double atol,
           const std::string &what) {
  expectClose(got, want, rtol, atol, what);
  if (!std::getenv("CLEAVE_TEST_PRINT_ERRORS") || got.size() != want.size())
    return;
  double maxAbs = 0, maxFraction = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(got[i] - want[i]);
    if (std::isnan(err))
      continue;
    maxAbs = std::max(maxAbs, err);
    maxFraction =
        std::max(maxFraction, err / (atol + rtol * std::fabs(want[i])));
  }
  std::printf("[ max error ] %s: abs %.2e, %.1f%% of tolerance\n", what.c_str(),
              maxAbs, 100 * maxFraction);
}

/// Runs the test body with OpenMP limited to `threads` threads.
struct ScopedThreads {
  int saved;
  explicit ScopedThreads(int threads) : saved(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~ScopedThreads() { omp_set_num_threads(saved); }
};

//===----------------------------------------------------------------------===//
// unary_grad
//===----------------------------------------------------------------------===//

double refUnary(int32_t op, double x) {
  const double kPi = 3.14159265358979323846;
  switch (op) {
  case CLEAVE_RELU:
    return x > 0 ? x : 0;
  case CLEAVE_TANH:
    return std::tanh(x);
  case CLEAVE_SIGMOID:
    return 1 / (1 + std::exp(-x));
  case CLEAVE_SILU:
    return x / (1 + std::exp(-x));
  case CLEAVE_GELU_ERF:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case CLEAVE_GELU_TANH:
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
  }
  ADD_FAILURE() << "no reference for op " << op;
  return 0;
}

TEST(RuntimeGrad, UnaryEveryOp) {
  const int32_t ops[] = {CLEAVE_RELU, CLEAVE_TANH,     CLEAVE_SIGMOID,
                         CLEAVE_SILU, CLEAVE_GELU_ERF, CLEAVE_GELU_TANH};
  Shape xs = {64, 700}; // above the parallel threshold
  for (int32_t op : ops) {
    TestArena arena;
    cleave_tensor x = arena.add(CLEAVE_F32, xs);
    cleave_tensor dy = arena.add(CLEAVE_F32, xs);
    cleave_tensor dx = arena.add(CLEAVE_F32, xs);
    Values xv = arena.fill(x, -6, 6, unsigned(op) + 1);
    Values dyv = arena.fill(dy, -1, 1, unsigned(op) + 100);
    // The function is elementwise, so the differences run per element.
    Values want(xv.size());
    const double h = 1e-6;
    for (size_t i = 0; i < xv.size(); ++i)
      want[i] = dyv[i] * (refUnary(op, xv[i] + h) - refUnary(op, xv[i] - h)) /
                (2 * h);
    cleave_rt_unary_grad(arena.data(), op, &x, &dy, &dx);
    check(arena.values(dx), want, 1e-5, 1e-6, "unary op " + std::to_string(op));
    // In place over dy.
    cleave_rt_unary_grad(arena.data(), op, &x, &dy, &dy);
    check(arena.values(dy), want, 1e-5, 1e-6,
          "unary in place op " + std::to_string(op));
  }
}

TEST(RuntimeGrad, UnaryBf16) {
  TestArena arena;
  Shape xs = {8, 33};
  cleave_tensor x = arena.add(CLEAVE_BF16, xs);
  cleave_tensor dy = arena.add(CLEAVE_BF16, xs);
  cleave_tensor dx = arena.add(CLEAVE_BF16, xs);
  Values xv = arena.fill(x, -4, 4, 7);
  Values dyv = arena.fill(dy, -1, 1, 8);
  Values want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i)
    want[i] = dyv[i] *
              (refUnary(CLEAVE_GELU_TANH, xv[i] + 1e-6) -
               refUnary(CLEAVE_GELU_TANH, xv[i] - 1e-6)) /
              2e-6;
  cleave_rt_unary_grad(arena.data(), CLEAVE_GELU_TANH, &x, &dy, &dx);
  check(arena.values(dx), want, 1.0 / 128, 2e-3, "unary bf16 gelu_tanh");
}

//===----------------------------------------------------------------------===//
// layer_norm_grad and rms_norm_grad
//===----------------------------------------------------------------------===//

/// Normalizes rows of n = prod(xs[dim:]); scale and bias are given in their
/// own shapes and broadcast to xs[dim:] (or read flat when they have n
/// elements).
Values refNorm(const Shape &xs, int64_t dim, const Values &x, const Shape &ss,
               const Values &scale, const Values *bias, const Shape &bs,
               double eps, bool rms) {
  Shape trailing(xs.begin() + dim, xs.end());
  int64_t n = product(trailing), rows = int64_t(x.size()) / n;
  auto at = [&](const Values &v, const Shape &shape, int64_t i) {
    return int64_t(v.size()) == n
               ? v[size_t(i)]
               : v[size_t(broadcastIndex(trailing, shape, i))];
  };
  Values out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data() + r * n;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i)
      mean += row[i];
    mean = rms ? 0 : mean / double(n);
    for (int64_t i = 0; i < n; ++i)
      var += (row[i] - mean) * (row[i] - mean);
    double inv = 1 / std::sqrt(var / double(n) + eps);
    for (int64_t i = 0; i < n; ++i)
      out[size_t(r * n + i)] = (row[i] - mean) * inv * at(scale, ss, i) +
                               (bias ? at(*bias, bs, i) : 0.0);
  }
  return out;
}

/// The analytic float64 gradients of a norm with a full-size scale [n]:
/// dx, dscale and dbias.
void refNormGrad(int64_t n, const Values &x, const Values &scale,
                 const Values &dy, double eps, bool rms, Values &dx,
                 Values &dscale, Values &dbias) {
  int64_t rows = int64_t(x.size()) / n;
  dx.assign(x.size(), 0);
  dscale.assign(size_t(n), 0);
  dbias.assign(size_t(n), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = x.data() + r * n, *dyr = dy.data() + r * n;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i)
      mean += xr[i];
    mean = rms ? 0 : mean / double(n);
    for (int64_t i = 0; i < n; ++i)
      var += (xr[i] - mean) * (xr[i] - mean);
    double inv = 1 / std::sqrt(var / double(n) + eps);
    double meanG = 0, meanGX = 0;
    for (int64_t i = 0; i < n; ++i) {
      double g = dyr[i] * scale[size_t(i)], xhat = (xr[i] - mean) * inv;
      meanG += g / double(n);
      meanGX += g * xhat / double(n);
      dscale[size_t(i)] += dyr[i] * xhat;
      dbias[size_t(i)] += dyr[i];
    }
    for (int64_t i = 0; i < n; ++i) {
      double g = dyr[i] * scale[size_t(i)], xhat = (xr[i] - mean) * inv;
      dx[size_t(r * n + i)] = inv * (g - (rms ? 0 : meanG) - xhat * meanGX);
    }
  }
}

TEST(RuntimeGrad, LayerNormFiniteDifferences) {
  // Normalized over [4, 6] with scale broadcast from [6] and bias [4, 6];
  // in variant 3, a flat scale [24] and a bias broadcast from [1, 6].
  Shape xs = {3, 4, 6};
  const double eps = 1e-5;
  for (int variant = 0; variant < 4; ++variant) {
    // 0, 3: dscale and dbias; 1: forward without bias, dbias NULL; 2: only
    // dx.
    bool withBias = variant == 0 || variant == 3, wantScale = variant != 2;
    Shape ss = variant == 3 ? Shape{24} : Shape{6};
    Shape bs = variant == 3 ? Shape{1, 6} : Shape{4, 6};
    TestArena arena;
    cleave_tensor x = arena.add(CLEAVE_F32, xs);
    cleave_tensor scale = arena.add(CLEAVE_F32, ss);
    cleave_tensor bias = arena.add(CLEAVE_F32, bs);
    cleave_tensor dy = arena.add(CLEAVE_F32, xs);
    cleave_tensor dx = arena.add(CLEAVE_F32, xs);
    cleave_tensor dscale = arena.add(CLEAVE_F32, ss);
    cleave_tensor dbias = arena.add(CLEAVE_F32, bs);
    Values xv = arena.fill(x, 1, 4, 10 + variant);
    Values sv = arena.fill(scale, 0.5, 1.5, 20 + variant);
    Values bv = arena.fill(bias, -1, 1, 30 + variant);
    Values dyv = arena.fill(dy, -1, 1, 40 + variant);
    Forward f = [&](const std::vector<Values> &in) {
      return refNorm(xs, 1, in[0], ss, in[1], withBias ? &in[2] : nullptr, bs,
                     eps, false);
    };
    std::vector<Values> inputs = {xv, sv, bv};
    cleave_rt_layer_norm_grad(arena.data(), &x, &scale, &dy, &dx,
                              wantScale ? &dscale : nullptr,
                              withBias ? &dbias : nullptr, 1, eps);
    std::string name = "layer_norm variant " + std::to_string(variant);
    check(arena.values(dx), numericVjp(f, inputs, 0, dyv), 1e-4, 1e-5,
          name + " dx");
    if (wantScale)
      check(arena.values(dscale), numericVjp(f, inputs, 1, dyv), 1e-4, 1e-5,
            name + " dscale");
    if (withBias)
      check(arena.values(dbias), numericVjp(f, inputs, 2, dyv), 1e-4, 1e-5,
            name + " dbias");
  }
}

TEST(RuntimeGrad, LayerNormLargeAnalytic) {
  TestArena arena(size_t(32) << 20);
  Shape xs = {64, 48, 96}; // above the parallel threshold
  cleave_tensor x = arena.add(CLEAVE_F32, xs);
  cleave_tensor scale = arena.add(CLEAVE_F32, {96});
  cleave_tensor dy = arena.add(CLEAVE_F32, xs);
  cleave_tensor dx = arena.add(CLEAVE_F32, xs);
  cleave_tensor dscale = arena.add(CLEAVE_F32, {96});
  cleave_tensor dbias = arena.add(CLEAVE_F32, {96});
  // An offset mean, as in the forward test.
  Values xv = arena.fill(x, 2, 6, 50);
  Values sv = arena.fill(scale, 0.5, 1.5, 51);
  Values dyv = arena.fill(dy, -1, 1, 52);
  Values wdx, wds, wdb;
  refNormGrad(96, xv, sv, dyv, 1e-5, false, wdx, wds, wdb);
  cleave_rt_layer_norm_grad(arena.data(), &x, &scale, &dy, &dx, &dscale, &dbias,
                            2, 1e-5);
  check(arena.values(dx), wdx, 1e-4, 1e-5, "layer_norm large dx");
  // Sums over 3072 rows: the absolute tolerance scales with them.
  check(arena.values(dscale), wds, 1e-4, 1e-4, "layer_norm large dscale");
  check(arena.values(dbias), wdb, 1e-4, 1e-4, "layer_norm large dbias");
  // dx in place over dy.
  cleave_rt_layer_norm_grad(arena.data(), &x, &scale, &dy, &dy, nullptr,
                            nullptr, 2, 1e-5);
  check(arena.values(dy), wdx, 1e-4, 1e-5, "layer_norm large dx in place");
}

TEST(RuntimeGrad, RmsNormFiniteDifferences) {
  Shape xs = {5, 3, 8}, ss = {3, 8};
  const double eps = 1e-6;
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, xs);
  cleave_tensor scale = arena.add(CLEAVE_F32, ss);
  cleave_tensor dy = arena.add(CLEAVE_F32, xs);
  cleave_tensor dx = arena.add(CLEAVE_F32, xs);
  cleave_tensor dscale = arena.add(CLEAVE_F32, ss);
  Values xv = arena.fill(x, -2, 2, 60);
  Values sv = arena.fill(scale, 0.5, 1.5, 61);
  Values dyv = arena.fill(dy, -1, 1, 62);
  Forward f = [&](const std::vector<Values> &in) {
    return refNorm(xs, 1, in[0], ss, in[1], nullptr, {}, eps, true);
  };
  std::vector<Values> inputs = {xv, sv};
  cleave_rt_rms_norm_grad(arena.data(), &x, &scale, &dy, &dx, &dscale, 1, eps);
  check(arena.values(dx), numericVjp(f, inputs, 0, dyv), 1e-4, 1e-5,
        "rms_norm dx");
  check(arena.values(dscale), numericVjp(f, inputs, 1, dyv), 1e-4, 1e-5,
        "rms_norm dscale");
  // Without dscale.
  arena.fill(dx, 5, 6, 63); // must be overwritten
  cleave_rt_rms_norm_grad(arena.data(), &x, &scale, &dy, &dx, nullptr, 1, eps);
  check(arena.values(dx), numericVjp(f, inputs, 0, dyv), 1e-4, 1e-5,
        "rms_norm dx only");
}

TEST(RuntimeGrad, RmsNormLargeAnalyticAndBf16) {
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16}) {
    TestArena arena(size_t(32) << 20);
    Shape xs = {300, 256};
    cleave_tensor x = arena.add(dtype, xs);
    cleave_tensor scale = arena.add(dtype, {256});
    cleave_tensor dy = arena.add(dtype, xs);
    cleave_tensor dx = arena.add(dtype, xs);
    cleave_tensor dscale = arena.add(dtype, {256});
    // Reference values are the stored (rounded) ones.
    Values xv = arena.fill(x, -3, 3, 70);
    Values sv = arena.fill(scale, 0.5, 1.5, 71);
    Values dyv = arena.fill(dy, -1, 1, 72);
    Values wdx, wds, wdb;
    refNormGrad(256, xv, sv, dyv, 1e-6, true, wdx, wds, wdb);
    cleave_rt_rms_norm_grad(arena.data(), &x, &scale, &dy, &dx, &dscale, 1,
                            1e-6);
    bool f32 = dtype == CLEAVE_F32;
    std::string name = f32 ? "rms_norm large" : "rms_norm bf16";
    check(arena.values(dx), wdx, f32 ? 1e-4 : 1.0 / 128, f32 ? 1e-5 : 2e-3,
          name + " dx");
    check(arena.values(dscale), wds, f32 ? 1e-4 : 1.0 / 128, f32 ? 1e-4 : 2e-2,
          name + " dscale");
  }
}

//===----------------------------------------------------------------------===//
// attention_grad
//===----------------------------------------------------------------------===//

struct AttentionCase {
  int64_t b, h, hkv, sq, sk, d, dv;
  Shape maskShape; // empty: no mask
  int32_t maskType;
  bool causal;
};

/// For query row (b, h, i): the scores with the mask added and whether each
/// key is live.
void scoresOf(const AttentionCase &c, const Values &q, const Values &k,
              const Values *mask, double scale, int64_t b, int64_t h, int64_t i,
              Values &s, std::vector<bool> &live) {
  int64_t hk = h / (c.h / c.hkv);
  Shape full = {c.b, c.h, c.sq, c.sk};
  s.assign(size_t(c.sk), 0);
  live.assign(size_t(c.sk), true);
  for (int64_t j = 0; j < c.sk; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < c.d; ++d)
      dot += q[size_t(((b * c.h + h) * c.sq + i) * c.d + d)] *
             k[size_t(((b * c.hkv + hk) * c.sk + j) * c.d + d)];
    s[size_t(j)] = dot * scale;
    if (mask) {
      int64_t fi = ((b * c.h + h) * c.sq + i) * c.sk + j;
      double m = (*mask)[size_t(broadcastIndex(full, c.maskShape, fi))];
      if (c.maskType == CLEAVE_I1)
        live[size_t(j)] = m != 0;
      else
        s[size_t(j)] += m;
    }
    if (c.causal && j > i)
      live[size_t(j)] = false;
    if (s[size_t(j)] == -INFINITY)
      live[size_t(j)] = false;
  }
}

/// The softmax probabilities of one row; all zero when every key is masked.
Values probsOf(const Values &s, const std::vector<bool> &live) {
  double max = -INFINITY, sum = 0;
  for (size_t j = 0; j < s.size(); ++j)
    if (live[j])
      max = std::max(max, s[j]);
  Values p(s.size(), 0.0);
  if (max == -INFINITY)
    return p;
  for (size_t j = 0; j < s.size(); ++j)
    if (live[j])
      sum += p[j] = std::exp(s[j] - max);
  for (double &v : p)
    v /= sum;
  return p;
}

Values refAttention(const AttentionCase &c, const Values &q, const Values &k,
                    const Values &v, const Values *mask, double scale) {
  Values out(size_t(c.b * c.h * c.sq * c.dv), 0.0), s;
  std::vector<bool> live;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t i = 0; i < c.sq; ++i) {
        int64_t hk = h / (c.h / c.hkv);
        scoresOf(c, q, k, mask, scale, b, h, i, s, live);
        Values p = probsOf(s, live);
        for (int64_t j = 0; j < c.sk; ++j)
          for (int64_t d = 0; d < c.dv; ++d)
            out[size_t(((b * c.h + h) * c.sq + i) * c.dv + d)] +=
                p[size_t(j)] *
                v[size_t(((b * c.hkv + hk) * c.sk + j) * c.dv + d)];
      }
  return out;
}

/// The analytic float64 gradients: dS = P (dP - rowsum(P dP)), dP = dO v^T.
void refAttentionGrad(const AttentionCase &c, const Values &q, const Values &k,
                      const Values &v, const Values *mask, const Values &dout,
                      double scale, Values &dq, Values &dk, Values &dv) {
  dq.assign(q.size(), 0);
  dk.assign(k.size(), 0);
  dv.assign(v.size(), 0);
  Values s;
  std::vector<bool> live;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t i = 0; i < c.sq; ++i) {
        int64_t hk = h / (c.h / c.hkv);
        int64_t qi = ((b * c.h + h) * c.sq + i);
        scoresOf(c, q, k, mask, scale, b, h, i, s, live);
        Values p = probsOf(s, live), dp(size_t(c.sk), 0.0);
        double rowDot = 0;
        for (int64_t j = 0; j < c.sk; ++j) {
          int64_t kj = (b * c.hkv + hk) * c.sk + j;
          for (int64_t d = 0; d < c.dv; ++d)
            dp[size_t(j)] +=
                dout[size_t(qi * c.dv + d)] * v[size_t(kj * c.dv + d)];
          rowDot += p[size_t(j)] * dp[size_t(j)];
        }
        for (int64_t j = 0; j < c.sk; ++j) {
          int64_t kj = (b * c.hkv + hk) * c.sk + j;
          double ds = p[size_t(j)] * (dp[size_t(j)] - rowDot);
          for (int64_t d = 0; d < c.d; ++d) {
            dq[size_t(qi * c.d + d)] += scale * ds * k[size_t(kj * c.d + d)];
            dk[size_t(kj * c.d + d)] += scale * ds * q[size_t(qi * c.d + d)];
          }
          for (int64_t d = 0; d < c.dv; ++d)
            dv[size_t(kj * c.dv + d)] +=
                p[size_t(j)] * dout[size_t(qi * c.dv + d)];
        }
      }
}

struct AttentionData {
  cleave_tensor q, k, v, mask, dout, dq, dk, dv;
  Values qv, kv, vv, mv, dov;
  bool hasMask;
};

/// Fills q, k, v, dout and the mask with random values; `maskRow` >= 0
/// masks every key of that query row (in every batch and head the mask
/// reaches).
AttentionData makeAttention(TestArena &arena, const AttentionCase &c,
                            int32_t dtype, unsigned seed,
                            int64_t maskRow = -1) {
  AttentionData a;
  a.q = arena.add(dtype, {c.b, c.h, c.sq, c.d});
  a.k = arena.add(dtype, {c.b, c.hkv, c.sk, c.d});
  a.v = arena.add(dtype, {c.b, c.hkv, c.sk, c.dv});
  a.dout = arena.add(dtype, {c.b, c.h, c.sq, c.dv});
  a.dq = arena.add(dtype, {c.b, c.h, c.sq, c.d});
  a.dk = arena.add(dtype, {c.b, c.hkv, c.sk, c.d});
  a.dv = arena.add(dtype, {c.b, c.hkv, c.sk, c.dv});
  a.qv = arena.fill(a.q, -1, 1, seed);
  a.kv = arena.fill(a.k, -1, 1, seed + 1);
  a.vv = arena.fill(a.v, -1, 1, seed + 2);
  a.dov = arena.fill(a.dout, -1, 1, seed + 3);
  // Outputs start as garbage: the kernel must overwrite them.
  arena.fill(a.dq, 7, 8, seed + 4);
  arena.fill(a.dk, 7, 8, seed + 5);
  arena.fill(a.dv, 7, 8, seed + 6);
  a.hasMask = !c.maskShape.empty();
  if (a.hasMask) {
    a.mask = arena.add(c.maskType, c.maskShape);
    // A boolean mask keeps about 3/4 of the keys; a float one adds [-2, 1)
    // with a few -inf.
    a.mv = c.maskType == CLEAVE_I1 ? arena.fill(a.mask, -1, 3, seed + 7)
                                   : arena.fill(a.mask, -2, 1, seed + 7);
    const Shape &ms = c.maskShape;
    int64_t sk = ms.back(), rows = int64_t(a.mv.size()) / sk;
    int64_t sqDim = ms.size() >= 2 ? ms[ms.size() - 2] : 1;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < sk; ++j) {
        bool masked = r % sqDim == maskRow ||
                      (c.maskType != CLEAVE_I1 && (r * 7 + j) % 11 == 0);
        if (masked)
          a.mv[size_t(r * sk + j)] = c.maskType == CLEAVE_I1 ? 0 : -INFINITY;
      }
    arena.setValues(a.mask, a.mv);
  }
  return a;
}

void runAttentionGrad(TestArena &arena, const AttentionCase &c,
                      AttentionData &a, double scale) {
  cleave_rt_attention_grad(arena.data(), &a.q, &a.k, &a.v,
                           a.hasMask ? &a.mask : nullptr, &a.dout, &a.dq, &a.dk,
                           &a.dv, c.causal, scale);
}

/// Small cases against finite differences and the analytic gradient.
void checkAttentionFiniteDifferences(const AttentionCase &c, unsigned seed,
                                     int64_t maskRow, const std::string &name) {
  TestArena arena;
  AttentionData a = makeAttention(arena, c, CLEAVE_F32, seed, maskRow);
  double scale = 1 / std::sqrt(double(c.d));
  const Values *mask = a.hasMask ? &a.mv : nullptr;
  Forward f = [&](const std::vector<Values> &in) {
    return refAttention(c, in[0], in[1], in[2], mask, scale);
  };
  std::vector<Values> inputs = {a.qv, a.kv, a.vv};
  Values dq, dk, dv;
  refAttentionGrad(c, a.qv, a.kv, a.vv, mask, a.dov, scale, dq, dk, dv);
  Values nq = numericVjp(f, inputs, 0, a.dov);
  Values nk = numericVjp(f, inputs, 1, a.dov);
  Values nv = numericVjp(f, inputs, 2, a.dov);
  // The analytic reference agrees with the differences.
  expectClose(dq, nq, 1e-6, 1e-8, name + " reference dq");
  expectClose(dk, nk, 1e-6, 1e-8, name + " reference dk");
  expectClose(dv, nv, 1e-6, 1e-8, name + " reference dv");
  runAttentionGrad(arena, c, a, scale);
  check(arena.values(a.dq), nq, 1e-4, 1e-5, name + " dq");
  check(arena.values(a.dk), nk, 1e-4, 1e-5, name + " dk");
  check(arena.values(a.dv), nv, 1e-4, 1e-5, name + " dv");
}

TEST(RuntimeGrad, AttentionGroupedQuery) {
  checkAttentionFiniteDifferences({2, 4, 2, 5, 7, 4, 3, {}, -1, false}, 80, -1,
                                  "attention gqa");
}

TEST(RuntimeGrad, AttentionGradientsOverInputs) {
  // dq, dk and dv written over q, k and v (the same tensors).
  AttentionCase c = {2, 4, 2, 70, 40, 8, 8, {}, -1, true};
  TestArena arena;
  AttentionData a = makeAttention(arena, c, CLEAVE_F32, 85);
  Values dq, dk, dv;
  refAttentionGrad(c, a.qv, a.kv, a.vv, nullptr, a.dov, 0.3, dq, dk, dv);
  for (int threads : {1, 8}) {
    ScopedThreads scoped(threads);
    arena.setValues(a.q, a.qv);
    arena.setValues(a.k, a.kv);
    arena.setValues(a.v, a.vv);
    cleave_rt_attention_grad(arena.data(), &a.q, &a.k, &a.v, nullptr, &a.dout,
                             &a.q, &a.k, &a.v, 1, 0.3);
    std::string n = "attention in place threads " + std::to_string(threads);
    check(arena.values(a.q), dq, 1e-4, 1e-5, n + " dq");
    check(arena.values(a.k), dk, 1e-4, 1e-5, n + " dk");
    check(arena.values(a.v), dv, 1e-4, 1e-5, n + " dv");
  }
}

TEST(RuntimeGrad, AttentionCausal) {
  // Sq < Sk, Sq == Sk and Sq > Sk (rows past Sk see every key).
  checkAttentionFiniteDifferences({1, 4, 2, 4, 7, 4, 4, {}, -1, true}, 90, -1,
                                  "attention causal 4x7");
  checkAttentionFiniteDifferences({1, 2, 2, 6, 6, 4, 4, {}, -1, true}, 91, -1,
                                  "attention causal 6x6");
  checkAttentionFiniteDifferences({2, 2, 1, 7, 5, 4, 4, {}, -1, true}, 92, -1,
                                  "attention causal 7x5");
}

TEST(RuntimeGrad, AttentionMasksAndFullyMaskedRow) {
  // A boolean padding-style mask [B, 1, Sq, Sk] with GQA, row 2 fully
  // masked; a float mask [B, H, Sq, Sk] with -inf entries and row 1 all
  // -inf; a float mask [Sq, Sk] with causal.
  checkAttentionFiniteDifferences(
      {2, 4, 2, 5, 6, 4, 4, {2, 1, 5, 6}, CLEAVE_I1, false}, 100, 2,
      "attention bool mask");
  checkAttentionFiniteDifferences(
      {2, 4, 2, 5, 6, 4, 4, {2, 4, 5, 6}, CLEAVE_F32, false}, 110, 1,
      "attention float mask");
  checkAttentionFiniteDifferences(
      {1, 2, 1, 6, 6, 4, 4, {6, 6}, CLEAVE_F32, true}, 120, -1,
      "attention float mask causal");

  // The fully masked row's dq is exactly zero.
  AttentionCase c = {1, 2, 1, 4, 5, 4, 4, {4, 5}, CLEAVE_I1, false};
  TestArena arena;
  AttentionData a = makeAttention(arena, c, CLEAVE_F32, 130, 3);
  runAttentionGrad(arena, c, a, 0.5);
  Values dq = arena.values(a.dq);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t d = 0; d < 4; ++d) {
      EXPECT_EQ(dq[size_t((h * 4 + 3) * 4 + d)], 0.0);
      EXPECT_NE(dq[size_t((h * 4 + 0) * 4 + d)], 0.0);
    }
}

/// Shapes with several query and key blocks, checked against the analytic
/// reference with 1 thread (one task per kv head) and 8 threads (the
/// two-pass split, as there are fewer kv heads than threads).
void checkAttentionLarge(const AttentionCase &c, unsigned seed, int64_t maskRow,
                         const std::string &name) {
  TestArena arena(size_t(32) << 20);
  AttentionData a = makeAttention(arena, c, CLEAVE_F32, seed, maskRow);
  double scale = 1 / std::sqrt(double(c.d));
  Values dq, dk, dv;
  refAttentionGrad(c, a.qv, a.kv, a.vv, a.hasMask ? &a.mv : nullptr, a.dov,
                   scale, dq, dk, dv);
  for (int threads : {1, 8}) {
    ScopedThreads scoped(threads);
    arena.fill(a.dq, 7, 8, 1);
    arena.fill(a.dk, 7, 8, 2);
    arena.fill(a.dv, 7, 8, 3);
    runAttentionGrad(arena, c, a, scale);
    std::string n = name + " threads " + std::to_string(threads);
    check(arena.values(a.dq), dq, 1e-4, 1e-5, n + " dq");
    check(arena.values(a.dk), dk, 1e-4, 1e-5, n + " dk");
    check(arena.values(a.dv), dv, 1e-4, 1e-5, n + " dv");
  }
}

TEST(RuntimeGrad, AttentionLargeBothSplits) {
  checkAttentionLarge({1, 4, 2, 80, 80, 16, 16, {80, 80}, CLEAVE_I1, true}, 140,
                      70, "attention large causal bool");
  checkAttentionLarge(
      {1, 4, 2, 70, 130, 16, 24, {1, 4, 70, 130}, CLEAVE_F32, false}, 150, 3,
      "attention large float mask");
  checkAttentionLarge({2, 2, 1, 150, 90, 32, 16, {}, -1, true}, 160, -1,
                      "attention large causal Sq > Sk");
}

TEST(RuntimeGrad, AttentionF16) {
  AttentionCase c = {1, 4, 2, 8, 8, 16, 16, {}, -1, true};
  TestArena arena;
  AttentionData a = makeAttention(arena, c, CLEAVE_F16, 170);
  double scale = 0.25;
  Values dq, dk, dv;
  refAttentionGrad(c, a.qv, a.kv, a.vv, nullptr, a.dov, scale, dq, dk, dv);
  runAttentionGrad(arena, c, a, scale);
  check(arena.values(a.dq), dq, 1.0 / 256, 1e-3, "attention f16 dq");
  check(arena.values(a.dk), dk, 1.0 / 256, 1e-3, "attention f16 dk");
  check(arena.values(a.dv), dv, 1.0 / 256, 1e-3, "attention f16 dv");
}

//===----------------------------------------------------------------------===//
// gather_grad and slice_grad
//===----------------------------------------------------------------------===//

Values refGather(const Shape &ds, const Values &data, const Values &idx,
                 int64_t dim) {
  int64_t outer = product(Shape(ds.begin(), ds.begin() + dim));
  int64_t inner = product(Shape(ds.begin() + dim + 1, ds.end()));
  int64_t size = ds[size_t(dim)], n = int64_t(idx.size());
  Values out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = int64_t(idx[size_t(i)]);
      v = v < 0 ? v + size : v;
      for (int64_t c = 0; c < inner; ++c)
        out.push_back(data[size_t((o * size + v) * inner + c)]);
    }
  return out;
}

void checkGatherGrad(const Shape &ds, const Shape &is, int64_t dim,
                     int32_t indexType, const Values &indices,
                     const std::string &name) {
  Shape ys(ds.begin(), ds.begin() + dim);
  ys.insert(ys.end(), is.begin(), is.end());
  ys.insert(ys.end(), ds.begin() + dim + 1, ds.end());
  TestArena arena;
  cleave_tensor idx = arena.add(indexType, is);
  cleave_tensor dy = arena.add(CLEAVE_F32, ys);
  cleave_tensor out = arena.add(CLEAVE_F32, ds);
  arena.setValues(idx, indices);
  Values dyv = arena.fill(dy, -1, 1, 180);
  arena.fill(out, 7, 8, 181); // must be overwritten
  // The forward is linear: the point of differentiation is arbitrary.
  Values data(size_t(product(ds)));
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = std::sin(double(i));
  Forward f = [&](const std::vector<Values> &in) {
    return refGather(ds, in[0], indices, dim);
  };
  cleave_rt_gather_grad(arena.data(), &dy, &idx, &out, dim);
  check(arena.values(out), numericVjp(f, {data}, 0, dyv), 1e-6, 1e-6, name);
}

TEST(RuntimeGrad, GatherRepeatedAndNegativeIndices) {
  // Row 4 is hit three times (4, 4, -1), row 0 twice (0, -5), row 3 never.
  checkGatherGrad({5, 6}, {2, 3}, 0, CLEAVE_I64, {0, -1, 4, 4, -5, 2},
                  "gather_grad dim 0");
  checkGatherGrad({3, 7, 4}, {5}, 1, CLEAVE_I32, {6, -1, 2, 2, -7},
                  "gather_grad dim 1 i32");
  // An embedding-sized case, in parallel.
  TestArena arena(size_t(16) << 20);
  Shape ds = {1000, 64};
  cleave_tensor idx = arena.add(CLEAVE_I64, {600});
  cleave_tensor dy = arena.add(CLEAVE_F32, {600, 64});
  cleave_tensor out = arena.add(CLEAVE_F32, ds);
  Values iv = arena.fill(idx, -1000, 1000, 190);
  Values dyv = arena.fill(dy, -1, 1, 191);
  Values want(size_t(product(ds)), 0.0);
  for (size_t i = 0; i < iv.size(); ++i) {
    int64_t v = int64_t(iv[i]) < 0 ? int64_t(iv[i]) + 1000 : int64_t(iv[i]);
    for (size_t c = 0; c < 64; ++c)
      want[size_t(v) * 64 + c] += dyv[i * 64 + c];
  }
  cleave_rt_gather_grad(arena.data(), &dy, &idx, &out, 0);
  check(arena.values(out), want, 1e-6, 1e-6, "gather_grad large");
}

TEST(RuntimeGrad, SliceNegativeStride) {
  // out [6, 9] <- dy [3, 4] at rows 5, 3, 1 and columns 1, 3, 5, 7.
  Shape xs = {6, 9}, ys = {3, 4};
  int64_t start[] = {5, 1}, strides[] = {-2, 2};
  TestArena arena;
  cleave_tensor dy = arena.add(CLEAVE_F32, ys);
  cleave_tensor out = arena.add(CLEAVE_F32, xs);
  Values dyv = arena.fill(dy, -1, 1, 200);
  arena.fill(out, 7, 8, 201); // must be zeroed
  Forward f = [&](const std::vector<Values> &in) {
    Values y;
    for (int64_t i = 0; i < ys[0]; ++i)
      for (int64_t j = 0; j < ys[1]; ++j)
        y.push_back(in[0][size_t((start[0] + i * strides[0]) * xs[1] +
                                 start[1] + j * strides[1])]);
    return y;
  };
  Values x(size_t(product(xs)));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::cos(double(i));
  cleave_rt_slice_grad(arena.data(), &dy, &out, start, strides);
  check(arena.values(out), numericVjp(f, {x}, 0, dyv), 1e-6, 1e-6,
        "slice_grad negative stride");
  // bf16 moves bytes: the same values, exactly, and a reversed 3-d slice.
  cleave_tensor dy16 = arena.add(CLEAVE_BF16, {2, 3, 4});
  cleave_tensor out16 = arena.add(CLEAVE_BF16, {2, 5, 4});
  Values d16 = arena.fill(dy16, -1, 1, 202);
  int64_t start3[] = {1, 4, 0}, strides3[] = {-1, -2, 1};
  cleave_rt_slice_grad(arena.data(), &dy16, &out16, start3, strides3);
  Values want(40, 0.0);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c)
        want[size_t(((1 - a) * 5 + 4 - 2 * b) * 4 + c)] =
            d16[size_t((a * 3 + b) * 4 + c)];
  EXPECT_EQ(arena.values(out16), want);
}

//===----------------------------------------------------------------------===//
// cross_entropy_grad
//===----------------------------------------------------------------------===//

double refCrossEntropy(const Values &logits, const Values &labels, int64_t c,
                       bool hasIgnore, int64_t ignore) {
  double total = 0;
  int64_t count = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    int64_t label = int64_t(labels[r]);
    if (hasIgnore && label == ignore)
      continue;
    const double *row = logits.data() + r * size_t(c);
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < c; ++j)
      max = std::max(max, row[j]);
    for (int64_t j = 0; j < c; ++j)
      sum += std::exp(row[j] - max);
    total += max + std::log(sum) - row[label];
    ++count;
  }
  return count ? total / double(count) : 0.0;
}

void checkCrossEntropyGrad(int32_t labelType, bool hasIgnore, bool allIgnored,
                           const std::string &name) {
  const int64_t ignore = -100, c = 11;
  TestArena arena;
  cleave_tensor logits = arena.add(CLEAVE_F32, {4, 5, c});
  cleave_tensor labels = arena.add(labelType, {4, 5});
  cleave_tensor dloss = arena.add(CLEAVE_F32, {});
  cleave_tensor dlogits = arena.add(CLEAVE_F32, {4, 5, c});
  Values xv = arena.fill(logits, -4, 4, 210);
  Values lv = arena.fill(labels, 0, double(c), 211);
  for (size_t r = 0; r < lv.size(); ++r)
    if (hasIgnore && (allIgnored || r % 3 == 1))
      lv[r] = double(ignore);
  arena.setValues(labels, lv);
  arena.setValues(dloss, {0.7});
  arena.fill(dlogits, 7, 8, 212); // must be overwritten
  Forward f = [&](const std::vector<Values> &in) {
    return Values{refCrossEntropy(in[0], lv, c, hasIgnore, ignore)};
  };
  cleave_rt_cross_entropy_grad(arena.data(), &logits, &labels, &dloss, &dlogits,
                               hasIgnore, ignore);
  Values want = numericVjp(f, {xv}, 0, {0.7});
  check(arena.values(dlogits), want, 1e-5, 1e-7, name);
  if (allIgnored) {
    EXPECT_EQ(arena.values(dlogits), Values(want.size(), 0.0));
  }
}

TEST(RuntimeGrad, CrossEntropy) {
  checkCrossEntropyGrad(CLEAVE_I64, false, false, "cross_entropy_grad");
  checkCrossEntropyGrad(CLEAVE_I64, true, false, "cross_entropy_grad ignore");
  checkCrossEntropyGrad(CLEAVE_I32, true, false, "cross_entropy_grad i32");
  checkCrossEntropyGrad(CLEAVE_I64, true, true,
                        "cross_entropy_grad all ignored");
}

TEST(RuntimeGrad, CrossEntropyLargeInPlace) {
  // Above the parallel threshold, dlogits written over logits.
  const int64_t rows = 64, c = 1000;
  TestArena arena;
  cleave_tensor logits = arena.add(CLEAVE_F32, {rows, c});
  cleave_tensor labels = arena.add(CLEAVE_I64, {rows});
  cleave_tensor dloss = arena.add(CLEAVE_F32, {1});
  Values xv = arena.fill(logits, -8, 8, 220);
  Values lv = arena.fill(labels, 0, double(c), 221);
  arena.setValues(dloss, {1.5});
  Values want(xv.size());
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < c; ++j)
      max = std::max(max, xv[size_t(r * c + j)]);
    for (int64_t j = 0; j < c; ++j)
      sum += std::exp(xv[size_t(r * c + j)] - max);
    for (int64_t j = 0; j < c; ++j)
      want[size_t(r * c + j)] = (std::exp(xv[size_t(r * c + j)] - max) / sum -
                                 (j == int64_t(lv[size_t(r)]) ? 1 : 0)) *
                                1.5 / double(rows);
  }
  cleave_rt_cross_entropy_grad(arena.data(), &logits, &labels, &dloss, &logits,
                               0, 0);
  check(arena.values(logits), want, 1e-5, 1e-9, "cross_entropy_grad large");
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(RuntimeGrad, Errors) {
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {3, 8});
  cleave_tensor scale = arena.add(CLEAVE_F32, {8});
  cleave_tensor dy = arena.add(CLEAVE_F32, {3, 7});
  cleave_tensor dx = arena.add(CLEAVE_F32, {3, 8});
  cleave_tensor ds = arena.add(CLEAVE_F32, {4});
  EXPECT_RT_FAIL(cleave_rt_layer_norm_grad(arena.data(), &x, &scale, &dy, &dx,
                                           nullptr, nullptr, 1, 1e-5),
                 "cleave_rt_layer_norm_grad: x \\[3, 8\\] and dy \\[3, 7\\] "
                 "differ in shape");
  EXPECT_RT_FAIL(
      cleave_rt_rms_norm_grad(arena.data(), &x, &scale, &dx, &dx, &ds, 1, 1e-5),
      "cleave_rt_rms_norm_grad: dscale \\[4\\] and scale \\[8\\] "
      "differ in shape");
  EXPECT_RT_FAIL(cleave_rt_unary_grad(arena.data(), CLEAVE_EXP, &x, &dx, &dx),
                 "cleave_rt_unary_grad: op exp \\(3\\) has no gradient kernel");
  cleave_tensor q = arena.add(CLEAVE_F32, {1, 2, 4, 8});
  cleave_tensor dq = arena.add(CLEAVE_F32, {1, 2, 4, 4});
  EXPECT_RT_FAIL(cleave_rt_attention_grad(arena.data(), &q, &q, &q, nullptr, &q,
                                          &dq, &q, &q, 0, 1.0),
                 "cleave_rt_attention_grad: dq \\[1, 2, 4, 4\\], .* must have "
                 "the shapes of q \\[1, 2, 4, 8\\]");
  cleave_tensor idx = arena.add(CLEAVE_I64, {2});
  cleave_tensor gy = arena.add(CLEAVE_F32, {2, 8});
  arena.setValues(idx, {1, 3});
  EXPECT_RT_FAIL(cleave_rt_gather_grad(arena.data(), &gy, &idx, &x, 0),
                 "cleave_rt_gather_grad: index 3 at position 1 is out of range "
                 "\\[-3, 3\\)");
  int64_t start[] = {0, 0}, zero[] = {0, 1};
  EXPECT_RT_FAIL(cleave_rt_slice_grad(arena.data(), &gy, &x, start, zero),
                 "cleave_rt_slice_grad: dim 0 has stride 0 over 2 elements");
  cleave_tensor labels = arena.add(CLEAVE_I64, {3});
  cleave_tensor dloss = arena.add(CLEAVE_F32, {});
  arena.setValues(labels, {0, 8, 1});
  EXPECT_RT_FAIL(cleave_rt_cross_entropy_grad(arena.data(), &x, &labels, &dloss,
                                              &dx, 0, 0),
                 "cleave_rt_cross_entropy_grad: label 8 at position 1 is out "
                 "of range \\[0, 8\\)");
}

} // namespace
