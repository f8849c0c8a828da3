//===- NormalizationTest.cpp - softmax, layer_norm, rms_norm --------------===//
//
// Against float64 references with 1e-4 relative (+1e-6 absolute)
// tolerance: softmax and log-softmax along inner, middle and outer dims,
// layer_norm with and without bias over one and two trailing dims with a
// broadcast scale, rms_norm, and a bf16 round.
//
//===----------------------------------------------------------------------===//

#include "References.h"

using namespace cleave::rt::test;

namespace {

std::vector<double> refSoftmax(const Shape &xs, const std::vector<double> &x,
                               int64_t dim, bool log) {
  int64_t outer = product(Shape(xs.begin(), xs.begin() + dim));
  int64_t inner = product(Shape(xs.begin() + dim + 1, xs.end()));
  int64_t n = xs[size_t(dim)];
  std::vector<double> out(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return size_t((o * n + j) * inner + i); };
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j)
        max = std::max(max, x[at(j)]);
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(x[at(j)] - max);
      for (int64_t j = 0; j < n; ++j)
        out[at(j)] = log ? x[at(j)] - max - std::log(sum)
                         : std::exp(x[at(j)] - max) / sum;
    }
  return out;
}

TEST(RuntimeSoftmax, EveryDimAndLog) {
  const Shape shapes[] = {{4, 7, 33}, {64, 600}, {2, 300, 70}};
  unsigned seed = 1;
  for (const Shape &xs : shapes) {
    for (int64_t dim = 0; dim < int64_t(xs.size()); ++dim) {
      for (bool log : {false, true}) {
        TestArena arena;
        cleave_tensor x = arena.add(CLEAVE_F32, xs);
        cleave_tensor out = arena.add(CLEAVE_F32, xs);
        std::vector<double> xv = arena.fill(x, -8, 8, seed++);
        cleave_rt_softmax(arena.data(), &x, &out, dim, log);
        expectClose(arena.values(out), refSoftmax(xs, xv, dim, log), 1e-4, 1e-6,
                    "dim " + std::to_string(dim));
        // In place.
        cleave_rt_softmax(arena.data(), &x, &x, dim, log);
        expectClose(arena.values(x), refSoftmax(xs, xv, dim, log), 1e-4, 1e-6);
      }
    }
  }
}

TEST(RuntimeSoftmax, MaskedEntries) {
  // -inf entries get probability 0; a row of -inf is NaN (as in PyTorch).
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {2, 4});
  cleave_tensor out = arena.add(CLEAVE_F32, {2, 4});
  arena.setValues(x, {1, -INFINITY, 1, -INFINITY, -INFINITY, -INFINITY,
                      -INFINITY, -INFINITY});
  cleave_rt_softmax(arena.data(), &x, &out, 1, 0);
  expectClose(arena.values(out), {0.5, 0, 0.5, 0, NAN, NAN, NAN, NAN}, 1e-6);
  cleave_rt_softmax(arena.data(), &x, &out, 1, 1);
  std::vector<double> got = arena.values(out);
  EXPECT_NEAR(got[0], -std::log(2.0), 1e-6);
  EXPECT_EQ(got[1], -INFINITY);
}

TEST(RuntimeNorm, LayerNormLastDim) {
  TestArena arena;
  Shape xs = {64, 48, 96}; // above the parallel threshold
  cleave_tensor x = arena.add(CLEAVE_F32, xs);
  cleave_tensor scale = arena.add(CLEAVE_F32, {96});
  cleave_tensor bias = arena.add(CLEAVE_F32, {96});
  cleave_tensor out = arena.add(CLEAVE_F32, xs);
  // An offset mean tests the two-pass variance.
  std::vector<double> xv = arena.fill(x, 2, 6, 1);
  std::vector<double> sv = arena.fill(scale, 0.5, 1.5, 2);
  std::vector<double> bv = arena.fill(bias, -1, 1, 3);
  cleave_rt_layer_norm(arena.data(), &x, &scale, &bias, &out, 2, 1e-5);
  expectClose(arena.values(out),
              refNorm(xs, 2, xv, {96}, sv, &bv, {96}, 1e-5, false), 1e-4, 1e-5);
  cleave_rt_layer_norm(arena.data(), &x, &scale, nullptr, &out, 2, 1e-5);
  expectClose(arena.values(out),
              refNorm(xs, 2, xv, {96}, sv, nullptr, {}, 1e-5, false), 1e-4,
              1e-5);
}

TEST(RuntimeNorm, LayerNormTwoDimsBroadcastScale) {
  TestArena arena;
  Shape xs = {3, 5, 8};
  cleave_tensor x = arena.add(CLEAVE_F32, xs);
  cleave_tensor scale = arena.add(CLEAVE_F32, {8}); // broadcast over [5, 8]
  cleave_tensor bias = arena.add(CLEAVE_F32, {5, 8});
  cleave_tensor out = arena.add(CLEAVE_F32, xs);
  std::vector<double> xv = arena.fill(x, -2, 2, 4);
  std::vector<double> sv = arena.fill(scale, 0.5, 1.5, 5);
  std::vector<double> bv = arena.fill(bias, -1, 1, 6);
  cleave_rt_layer_norm(arena.data(), &x, &scale, &bias, &out, 1, 1e-3);
  expectClose(arena.values(out),
              refNorm(xs, 1, xv, {8}, sv, &bv, {5, 8}, 1e-3, false), 1e-4,
              1e-5);
}

TEST(RuntimeNorm, RmsNormF32AndBf16) {
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16}) {
    TestArena arena;
    Shape xs = {10, 64};
    cleave_tensor x = arena.add(dtype, xs);
    cleave_tensor scale = arena.add(dtype, {64});
    cleave_tensor out = arena.add(dtype, xs);
    std::vector<double> xv = arena.fill(x, -3, 3, 7);
    std::vector<double> sv = arena.fill(scale, 0.5, 1.5, 8);
    cleave_rt_rms_norm(arena.data(), &x, &scale, &out, 1, 1e-6);
    double rtol = dtype == CLEAVE_F32 ? 1e-4 : 1.0 / 128;
    expectClose(arena.values(out),
                refNorm(xs, 1, xv, {64}, sv, nullptr, {}, 1e-6, true), rtol,
                1e-5);
  }
}

TEST(RuntimeNorm, Errors) {
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {3, 8});
  cleave_tensor scale = arena.add(CLEAVE_F32, {5});
  cleave_tensor out = arena.add(CLEAVE_F32, {3, 8});
  EXPECT_RT_FAIL(
      cleave_rt_layer_norm(arena.data(), &x, &scale, nullptr, &out, 1, 1e-5),
      "cleave_rt_layer_norm: operand 0 of shape \\[5\\] does not broadcast to "
      "\\[8\\]");
  EXPECT_RT_FAIL(cleave_rt_softmax(arena.data(), &x, &out, 2, 0),
                 "cleave_rt_softmax: dim 2 is out of range for rank 2");
}

} // namespace
