//===- AttentionTest.cpp - scaled dot-product attention -------------------===//
//
// Against a float64 reference (1e-4 relative, 1e-5 absolute): plain,
// grouped-query heads, boolean and additive masks broadcast from smaller
// shapes, causal with Sq != Sk (top-left aligned), fully masked rows
// (zeros), and 16-bit inputs.
//
//===----------------------------------------------------------------------===//

#include "References.h"

using namespace cleave::rt::test;

namespace {

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

// A NaN score makes its row NaN, also when every other key is masked (the
// row max skips NaN): an overflow upstream must reach the loss, not turn
// into a row of zeros.
TEST(RuntimeAttention, NaNScoresMakeTheRowNaN) {
  TestArena arena;
  cleave_tensor q = arena.add(CLEAVE_F32, {1, 1, 3, 4});
  cleave_tensor k = arena.add(CLEAVE_F32, {1, 1, 5, 4});
  cleave_tensor v = arena.add(CLEAVE_F32, {1, 1, 5, 4});
  cleave_tensor mask = arena.add(CLEAVE_I1, {3, 5});
  cleave_tensor out = arena.add(CLEAVE_F32, {1, 1, 3, 4});
  arena.fill(k, -1, 1, 15);
  arena.fill(v, -1, 1, 16);
  // Row 0: a NaN query; row 1: one live key, whose score is NaN (a NaN in
  // k's key 2 would touch every row, so the NaN comes from q); row 2: finite.
  std::vector<double> qv(12, 0.25);
  for (int d = 0; d < 4; ++d)
    qv[size_t(d)] = NAN;
  qv[4] = NAN;
  arena.setValues(q, qv);
  arena.setValues(mask, {1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 1, 1, 1, 1, 1});
  cleave_rt_attention(arena.data(), &q, &k, &v, &mask, &out, 0, 0.5);
  std::vector<double> got = arena.values(out);
  for (int d = 0; d < 4; ++d) {
    EXPECT_TRUE(std::isnan(got[size_t(d)])) << d;
    EXPECT_TRUE(std::isnan(got[size_t(4 + d)])) << d;
    EXPECT_FALSE(std::isnan(got[size_t(8 + d)])) << d;
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
