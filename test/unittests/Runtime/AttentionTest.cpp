//===- AttentionTest.cpp - scaled dot-product attention -------------------===//
//
// Against a float64 reference (1e-4 relative, 1e-5 absolute): plain,
// grouped-query heads, boolean and additive masks broadcast from smaller
// shapes, causal with Sq != Sk (top-left aligned), fully masked rows
// (zeros), and 16-bit inputs.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

using namespace cleave::rt::test;

namespace {

struct AttentionCase {
  int64_t b, h, hkv, sq, sk, d, dv;
  Shape maskShape; // empty: no mask
  int32_t maskType;
  bool causal;
};

std::vector<double>
refAttention(const AttentionCase &c, const std::vector<double> &q,
             const std::vector<double> &k, const std::vector<double> &v,
             const std::vector<double> *mask, double scale) {
  std::vector<double> out(static_cast<size_t>(c.b * c.h * c.sq * c.dv), 0.0);
  Shape full = {c.b, c.h, c.sq, c.sk};
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h) {
      int64_t hk = h / (c.h / c.hkv);
      for (int64_t i = 0; i < c.sq; ++i) {
        std::vector<double> s(static_cast<size_t>(c.sk));
        std::vector<bool> live(static_cast<size_t>(c.sk), true);
        for (int64_t j = 0; j < c.sk; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.d; ++d)
            dot += q[size_t(((b * c.h + h) * c.sq + i) * c.d + d)] *
                   k[size_t(((b * c.hkv + hk) * c.sk + j) * c.d + d)];
          s[size_t(j)] = dot * scale;
          if (mask) {
            int64_t full_i = ((b * c.h + h) * c.sq + i) * c.sk + j;
            double m =
                (*mask)[size_t(broadcastIndex(full, c.maskShape, full_i))];
            if (c.maskType == CLEAVE_I1)
              live[size_t(j)] = live[size_t(j)] && m != 0;
            else
              s[size_t(j)] += m;
          }
          if (c.causal && j > i)
            live[size_t(j)] = false;
        }
        double max = -INFINITY, sum = 0;
        for (int64_t j = 0; j < c.sk; ++j)
          if (live[size_t(j)])
            max = std::max(max, s[size_t(j)]);
        if (max == -INFINITY)
          continue; // all masked: zeros
        for (int64_t j = 0; j < c.sk; ++j)
          if (live[size_t(j)])
            sum += std::exp(s[size_t(j)] - max);
        for (int64_t j = 0; j < c.sk; ++j) {
          if (!live[size_t(j)])
            continue;
          double p = std::exp(s[size_t(j)] - max) / sum;
          for (int64_t d = 0; d < c.dv; ++d)
            out[size_t(((b * c.h + h) * c.sq + i) * c.dv + d)] +=
                p * v[size_t(((b * c.hkv + hk) * c.sk + j) * c.dv + d)];
        }
      }
    }
  return out;
}

void runCase(const AttentionCase &c, int32_t dtype, unsigned seed,
             double rtol) {
  TestArena arena(size_t(32) << 20);
  cleave_tensor q = arena.add(dtype, {c.b, c.h, c.sq, c.d});
  cleave_tensor k = arena.add(dtype, {c.b, c.hkv, c.sk, c.d});
  cleave_tensor v = arena.add(dtype, {c.b, c.hkv, c.sk, c.dv});
  cleave_tensor out = arena.add(dtype, {c.b, c.h, c.sq, c.dv});
  std::vector<double> qv = arena.fill(q, -1, 1, seed);
  std::vector<double> kv = arena.fill(k, -1, 1, seed + 1);
  std::vector<double> vv = arena.fill(v, -1, 1, seed + 2);
  cleave_tensor mask;
  std::vector<double> mv;
  bool hasMask = !c.maskShape.empty() || c.maskType >= 0;
  if (hasMask) {
    mask = arena.add(c.maskType, c.maskShape);
    // A boolean mask keeps about 3/4 of the keys.
    mv = c.maskType == CLEAVE_I1 ? arena.fill(mask, -1, 3, seed + 3)
                                 : arena.fill(mask, -2, 1, seed + 3);
  }
  double scale = 1 / std::sqrt(double(c.d));
  cleave_rt_attention(arena.data(), &q, &k, &v, hasMask ? &mask : nullptr, &out,
                      c.causal, scale);
  expectClose(arena.values(out),
              refAttention(c, qv, kv, vv, hasMask ? &mv : nullptr, scale), rtol,
              1e-5);
}

TEST(RuntimeAttention, PlainAndGrouped) {
  runCase({2, 4, 4, 9, 11, 16, 16, {}, -1, false}, CLEAVE_F32, 1, 1e-4);
  runCase({2, 8, 2, 13, 13, 32, 24, {}, -1, false}, CLEAVE_F32, 2, 1e-4);
}

TEST(RuntimeAttention, CausalTopLeftAligned) {
  runCase({1, 4, 2, 16, 16, 8, 8, {}, -1, true}, CLEAVE_F32, 3, 1e-4);
  runCase({2, 2, 1, 7, 12, 8, 8, {}, -1, true}, CLEAVE_F32, 4, 1e-4);
  runCase({2, 2, 1, 12, 5, 8, 8, {}, -1, true}, CLEAVE_F32, 5, 1e-4);
}

TEST(RuntimeAttention, MasksBroadcast) {
  // i1 padding mask [B, 1, 1, Sk], with GQA and causal together.
  runCase({3, 6, 2, 10, 10, 16, 16, {3, 1, 1, 10}, CLEAVE_I1, true}, CLEAVE_F32,
          6, 1e-4);
  // Full i1 mask [B, H, Sq, Sk] and a rank-2 additive float mask [Sq, Sk].
  runCase({2, 4, 4, 6, 9, 8, 8, {2, 4, 6, 9}, CLEAVE_I1, false}, CLEAVE_F32, 7,
          1e-4);
  runCase({2, 4, 2, 6, 9, 8, 12, {6, 9}, CLEAVE_F32, false}, CLEAVE_F32, 8,
          1e-4);
}

TEST(RuntimeAttention, FullyMaskedRowsAreZero) {
  TestArena arena;
  cleave_tensor q = arena.add(CLEAVE_F32, {1, 2, 3, 4});
  cleave_tensor k = arena.add(CLEAVE_F32, {1, 2, 5, 4});
  cleave_tensor v = arena.add(CLEAVE_F32, {1, 2, 5, 4});
  cleave_tensor mask = arena.add(CLEAVE_I1, {3, 5});
  cleave_tensor fmask = arena.add(CLEAVE_F32, {3, 5});
  cleave_tensor out = arena.add(CLEAVE_F32, {1, 2, 3, 4});
  arena.fill(q, -1, 1, 9);
  arena.fill(k, -1, 1, 10);
  arena.fill(v, -1, 1, 11);
  // Query row 1 has every key masked.
  arena.setValues(mask, {1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1});
  std::vector<double> neg(15, 0.0);
  for (int j = 5; j < 10; ++j)
    neg[size_t(j)] = -INFINITY;
  arena.setValues(fmask, neg);
  for (const cleave_tensor *m : {&mask, &fmask}) {
    arena.fill(out, 3, 4, 12); // must be overwritten
    cleave_rt_attention(arena.data(), &q, &k, &v, m, &out, 0, 0.5);
    std::vector<double> got = arena.values(out);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < 4; ++d) {
        EXPECT_EQ(got[size_t((h * 3 + 1) * 4 + d)], 0.0);
        EXPECT_NE(got[size_t((h * 3 + 0) * 4 + d)], 0.0);
        EXPECT_FALSE(std::isnan(got[size_t((h * 3 + 2) * 4 + d)]));
      }
  }
}

TEST(RuntimeAttention, LargerParallel) {
  runCase({2, 8, 4, 128, 128, 64, 64, {}, -1, true}, CLEAVE_F32, 13, 1e-4);
}

TEST(RuntimeAttention, Bf16AndF16) {
  runCase({1, 4, 2, 8, 8, 16, 16, {}, -1, true}, CLEAVE_F16, 14, 1.0 / 512);
  runCase({1, 4, 2, 8, 8, 16, 16, {}, -1, false}, CLEAVE_BF16, 15, 1.0 / 64);
}

TEST(RuntimeAttention, BadShapesFail) {
  TestArena arena;
  cleave_tensor q = arena.add(CLEAVE_F32, {1, 3, 4, 8});
  cleave_tensor k = arena.add(CLEAVE_F32, {1, 2, 4, 8});
  cleave_tensor out = arena.add(CLEAVE_F32, {1, 3, 4, 8});
  EXPECT_RT_FAIL(
      cleave_rt_attention(arena.data(), &q, &k, &k, nullptr, &out, 0, 1.0),
      "cleave_rt_attention: expects q \\[B,H,Sq,D\\].* got q \\[1, 3, 4, 8\\]");
  cleave_tensor q2 = arena.add(CLEAVE_F32, {1, 2, 4, 8});
  cleave_tensor out2 = arena.add(CLEAVE_F32, {1, 2, 4, 8});
  cleave_tensor mask = arena.add(CLEAVE_I1, {3, 4});
  EXPECT_RT_FAIL(
      cleave_rt_attention(arena.data(), &q2, &k, &k, &mask, &out2, 0, 1.0),
      "cleave_rt_attention: mask \\[3, 4\\] does not broadcast to \\[1, 2, 4, "
      "4\\]");
}

} // namespace
