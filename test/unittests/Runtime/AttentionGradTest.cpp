//===- AttentionGradTest.cpp - the attention backward kernel --------------===//
//
// cleave_rt_attention_grad against float64 references on random inputs, as
// in GradientTest.cpp: central differences (step 1e-6) of the float64
// attention for small cases with grouped-query heads, causal masks with
// Sq < Sk, Sq == Sk and Sq > Sk, boolean and float masks and fully masked
// rows; an analytic float64 gradient (itself checked against the
// differences to 1e-6, 1e-8) on shapes with several query and key blocks,
// with 1 and 8 threads, and with dq, dk and dv written over q, k and v.
// Tolerances (relative, absolute): f32 1e-4, 1e-5; f16 1/256, 1e-3. Set
// CLEAVE_TEST_PRINT_ERRORS=1 to print the largest error of every
// comparison.
//
//===----------------------------------------------------------------------===//

#include "References.h"

#include <omp.h>

using namespace cleave::rt::test;

namespace {

using Values = std::vector<double>;

/// Runs the test body with OpenMP limited to `threads` threads.
struct ScopedThreads {
  int saved;
  explicit ScopedThreads(int threads) : saved(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~ScopedThreads() { omp_set_num_threads(saved); }
};

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
        attentionScores(c, q, k, mask, scale, b, h, i, s, live);
        Values p = attentionProbs(s, live), dp(size_t(c.sk), 0.0);
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

TEST(RuntimeGrad, AttentionErrors) {
  TestArena arena;
  cleave_tensor q = arena.add(CLEAVE_F32, {1, 2, 4, 8});
  cleave_tensor dq = arena.add(CLEAVE_F32, {1, 2, 4, 4});
  EXPECT_RT_FAIL(cleave_rt_attention_grad(arena.data(), &q, &q, &q, nullptr, &q,
                                          &dq, &q, &q, 0, 1.0),
                 "cleave_rt_attention_grad: dq \\[1, 2, 4, 4\\], .* must have "
                 "the shapes of q \\[1, 2, 4, 8\\]");
}

} // namespace
