//===- CastTest.cpp - f16/bf16 conversions and the cast kernel ------------===//
//
// The 16-bit conversions exhaustively (every f16 and bf16 bit pattern) and
// against independent references on random f32 values: the compiler's own
// _Float16 conversion for f16, and a nearest-even search in float64 for
// bf16. Then cleave_rt_cast between every pair of dtypes.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

using namespace cleave::rt;
using namespace cleave::rt::test;

namespace {

/// bf16 reference: the nearer of the two bf16 neighbours, ties to even.
uint16_t refBf16(float f) {
  uint32_t u = floatBits(f);
  uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
  // Past the largest finite value, the next step up (2^128) is infinity.
  auto value = [](uint32_t bits) {
    float v = bitsToFloat(bits);
    return std::isinf(v) ? std::copysign(std::ldexp(1.0, 128), v) : double(v);
  };
  double dlo = std::fabs(value(lo) - f);
  double dhi = std::fabs(value(hi) - f);
  if (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1) == 0))
    return uint16_t(lo >> 16);
  return uint16_t(hi >> 16);
}

TEST(RuntimeFloat16, HalfRoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = halfToFloat(uint16_t(h));
    _Float16 ref;
    uint16_t bits = uint16_t(h);
    std::memcpy(&ref, &bits, 2);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(float(ref))) << h;
      ASSERT_TRUE(std::isnan(halfToFloat(floatToHalf(f)))) << h;
      continue;
    }
    ASSERT_EQ(f, float(ref)) << "pattern " << h;
    ASSERT_EQ(floatToHalf(f), uint16_t(h)) << "pattern " << h;
  }
}

TEST(RuntimeFloat16, HalfRoundsToNearestEven) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 1000000; ++i) {
    // Random bit patterns cover subnormals, overflow, inf and NaN; bias half
    // of them into the f16 range where rounding matters.
    uint32_t u = bits(gen);
    if (i & 1)
      u = (u & 0x807fffffu) | ((100u + (u >> 23) % 45u) << 23);
    float f = bitsToFloat(u);
    _Float16 ref = _Float16(f);
    uint16_t refBits;
    std::memcpy(&refBits, &ref, 2);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(halfToFloat(floatToHalf(f))));
      continue;
    }
    ASSERT_EQ(floatToHalf(f), refBits) << "f32 bits " << std::hex << u;
  }
}

TEST(RuntimeFloat16, Bf16RoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = bf16ToFloat(uint16_t(h));
    ASSERT_EQ(floatBits(f), h << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(floatToBf16(f), uint16_t(h));
    }
  }
  std::mt19937 gen(8);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 1000000; ++i) {
    float f = bitsToFloat(bits(gen));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16ToFloat(floatToBf16(f))));
      continue;
    }
    ASSERT_EQ(floatToBf16(f), refBf16(f)) << "f32 " << f;
  }
  // Exact ties: 1 + 2^-8 sits halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(floatToBf16(1.00390625f), 0x3f80);
  EXPECT_EQ(floatToBf16(1.01171875f), 0x3f82);
}

TEST(RuntimeCast, FloatFormats) {
  TestArena arena;
  Shape shape = {50000};
  cleave_tensor f32 = arena.add(CLEAVE_F32, shape);
  cleave_tensor f16 = arena.add(CLEAVE_F16, shape);
  cleave_tensor bf16 = arena.add(CLEAVE_BF16, shape);
  cleave_tensor back = arena.add(CLEAVE_F32, shape);
  std::vector<double> xs = arena.fill(f32, -1000, 1000, 3);
  cleave_rt_cast(arena.data(), &f32, &f16);
  cleave_rt_cast(arena.data(), &f32, &bf16);
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(arena.ptr<uint16_t>(f16)[i], floatToHalf(float(xs[i])));
    ASSERT_EQ(arena.ptr<uint16_t>(bf16)[i], floatToBf16(float(xs[i])));
  }
  cleave_rt_cast(arena.data(), &f16, &back);
  expectClose(arena.values(back), xs, 1.0 / 2048);
  cleave_rt_cast(arena.data(), &bf16, &back);
  expectClose(arena.values(back), xs, 1.0 / 256);
  // f16 -> bf16 goes through f32.
  cleave_rt_cast(arena.data(), &f16, &bf16);
  cleave_rt_cast(arena.data(), &bf16, &back);
  expectClose(arena.values(back), xs, 1.0 / 256 + 1.0 / 2048);
}

/// The cast kernel's f16 conversions (8 at a time with F16C where the CPU
/// has it) give the scalar conversions' bits: every f16 pattern to f32, and
/// random f32 bit patterns (subnormals, overflow, inf and NaN among them)
/// to f16, over lengths that leave a tail of 5.
TEST(RuntimeCast, F16BulkConversionsMatchTheScalarOnes) {
  TestArena arena(size_t(16) << 20);
  const int64_t n = 0x10000 + 5;
  cleave_tensor f16 = arena.add(CLEAVE_F16, {n});
  cleave_tensor f32 = arena.add(CLEAVE_F32, {n});
  uint16_t *h = arena.ptr<uint16_t>(f16);
  for (int64_t i = 0; i < n; ++i)
    h[i] = uint16_t(i * 40503u); // every pattern once, then 5 more
  cleave_rt_cast(arena.data(), &f16, &f32);
  const float *f = arena.ptr<float>(f32);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(floatBits(f[i]), floatBits(halfToFloat(h[i])))
        << "f16 pattern " << std::hex << h[i];

  std::mt19937 gen(9);
  std::uniform_int_distribution<uint32_t> bits;
  float *g = arena.ptr<float>(f32);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u = bits(gen);
    if (i & 1) // half of them in the range where f16 rounding matters
      u = (u & 0x807fffffu) | ((100u + (u >> 23) % 45u) << 23);
    g[i] = bitsToFloat(u);
  }
  g[0] = 65520.0f;                 // rounds to inf
  g[1] = 65519.99f;                // rounds to the largest finite f16
  g[2] = 5.9604645e-8f;            // the smallest subnormal f16
  g[3] = 2.9802322e-8f;            // a tie between 0 and it: to even, 0
  g[4] = bitsToFloat(0x7f800001u); // a signalling NaN
  cleave_rt_cast(arena.data(), &f32, &f16);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(h[i], floatToHalf(g[i]))
        << "f32 bits " << std::hex << floatBits(g[i]);
}

TEST(RuntimeCast, FloatToIntTruncatesAndSaturates) {
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {8});
  cleave_tensor i64 = arena.add(CLEAVE_I64, {8});
  cleave_tensor i32 = arena.add(CLEAVE_I32, {8});
  cleave_tensor i1 = arena.add(CLEAVE_I1, {8});
  arena.setValues(x, {2.9, -2.9, 0.5, -0.0, 1e20, -1e20, NAN, 7});
  cleave_rt_cast(arena.data(), &x, &i64);
  int64_t *v = arena.ptr<int64_t>(i64);
  EXPECT_EQ(v[0], 2);
  EXPECT_EQ(v[1], -2);
  EXPECT_EQ(v[2], 0);
  EXPECT_EQ(v[3], 0);
  EXPECT_EQ(v[4], INT64_MAX);
  EXPECT_EQ(v[5], INT64_MIN);
  EXPECT_EQ(v[6], 0);
  EXPECT_EQ(v[7], 7);
  cleave_rt_cast(arena.data(), &x, &i32);
  EXPECT_EQ(arena.ptr<int32_t>(i32)[1], -2);
  EXPECT_EQ(arena.ptr<int32_t>(i32)[7], 7);
  cleave_rt_cast(arena.data(), &x, &i1);
  expectClose(arena.values(i1), {1, 1, 1, 0, 1, 1, 1, 1}, 0);
}

TEST(RuntimeCast, IntegerAndBool) {
  TestArena arena;
  cleave_tensor i64 = arena.add(CLEAVE_I64, {6});
  cleave_tensor i32 = arena.add(CLEAVE_I32, {6});
  cleave_tensor f32 = arena.add(CLEAVE_F32, {6});
  cleave_tensor i1 = arena.add(CLEAVE_I1, {6});
  cleave_tensor back = arena.add(CLEAVE_I64, {6});
  int64_t values[6] = {0, 1, -5, 1 << 20, (int64_t(1) << 32) + 3, -7};
  std::memcpy(arena.ptr<int64_t>(i64), values, sizeof(values));
  cleave_rt_cast(arena.data(), &i64, &i32);
  expectClose(arena.values(i32), {0, 1, -5, 1 << 20, 3, -7}, 0); // wraps
  cleave_rt_cast(arena.data(), &i64, &f32);
  expectClose(arena.values(f32), {0, 1, -5, 1 << 20, 4294967299.0, -7}, 1e-7);
  cleave_rt_cast(arena.data(), &i64, &i1);
  expectClose(arena.values(i1), {0, 1, 1, 1, 1, 1}, 0);
  cleave_rt_cast(arena.data(), &i1, &back);
  expectClose(arena.values(back), {0, 1, 1, 1, 1, 1}, 0);
  cleave_rt_cast(arena.data(), &i32, &back);
  expectClose(arena.values(back), {0, 1, -5, 1 << 20, 3, -7}, 0);
}

TEST(RuntimeCast, CountMismatchFails) {
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {4});
  cleave_tensor out = arena.add(CLEAVE_F16, {5});
  EXPECT_RT_FAIL(cleave_rt_cast(arena.data(), &x, &out),
                 "cleave_rt_cast: x \\[4\\] and out \\[5\\] differ in element "
                 "count");
}

} // namespace
