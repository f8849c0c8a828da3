//===- GradientTest.cpp - the backward kernels ----------------------------===//
//
// Each backward kernel against float64 references on random inputs: the
// central finite differences (step 1e-6) of a float64 reimplementation of
// the forward kernel, loss = sum(forward(inputs) * R) for a random
// cotangent R, and for the norms and cross-entropy also an analytic float64
// gradient on shapes large enough to run in parallel. (attention_grad is in
// AttentionGradTest.cpp.) Tolerances (relative, absolute): unary_grad 1e-5,
// 1e-6; norms 1e-4, 1e-5 (1e-4 absolute for dscale and dbias summed over
// 3072 rows); gather and slice 1e-6, 1e-6; cross-entropy 1e-5, 1e-7 (1e-9
// over 1000 classes); bf16 operands 1/128 with 2e-3 absolute (2e-2 for
// sums over rows). Set CLEAVE_TEST_PRINT_ERRORS=1 to print the largest
// error of every comparison.
//
//===----------------------------------------------------------------------===//

#include "References.h"

#include <algorithm>

using namespace cleave::rt::test;

namespace {

using Values = std::vector<double>;

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

TEST(RuntimeGrad, GatherGradBlock) {
  // The transpose of gather_block: each block of a 40-row table's gradient
  // is that block of the whole table's gather_grad (indices outside a
  // block dropped), for random ids with repeats, along dim 1.
  for (int32_t indexType : {CLEAVE_I64, CLEAVE_I32}) {
    TestArena arena;
    Shape ds = {2, 40, 3}, is = {25};
    cleave_tensor idx = arena.add(indexType, is);
    cleave_tensor dy = arena.add(CLEAVE_F32, {2, 25, 3});
    cleave_tensor whole = arena.add(CLEAVE_F32, ds);
    Values iv = arena.fill(idx, 0, 40, 192);
    Values dyv = arena.fill(dy, -1, 1, 193);
    cleave_rt_gather_grad(arena.data(), &dy, &idx, &whole, 1);
    Values want = arena.values(whole);
    for (int64_t b = 0; b < 4; ++b) {
      cleave_tensor offset = arena.add(indexType, {});
      cleave_tensor out = arena.add(CLEAVE_F32, {2, 10, 3});
      arena.setValues(offset, {double(b * 10)});
      arena.fill(out, 7, 8, 194); // must be overwritten
      cleave_rt_gather_grad_block(arena.data(), &dy, &idx, &offset, &out, 1);
      Values got = arena.values(out);
      for (int64_t i = 0; i < 60; ++i) {
        int64_t o = i / 30, r = i / 3 % 10, c = i % 3;
        ASSERT_EQ(got[size_t(i)],
                  want[size_t((o * 40 + b * 10 + r) * 3 + c)])
            << "block " << b << " element " << i;
      }
    }
  }
  // A block no index falls in is all zeros.
  TestArena arena;
  cleave_tensor idx = arena.add(CLEAVE_I64, {3});
  cleave_tensor dy = arena.add(CLEAVE_F32, {3, 2});
  cleave_tensor offset = arena.add(CLEAVE_I64, {});
  cleave_tensor out = arena.add(CLEAVE_F32, {4, 2});
  arena.setValues(idx, {-1, 3, 8});
  arena.fill(dy, -1, 1, 195);
  arena.setValues(offset, {4});
  arena.fill(out, 7, 8, 196);
  cleave_rt_gather_grad_block(arena.data(), &dy, &idx, &offset, &out, 0);
  check(arena.values(out), Values(8, 0.0), 0, 0, "gather_grad_block empty");
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

void checkCrossEntropyGrad(int32_t labelType, bool hasIgnore, bool allIgnored,
                           const std::string &name, bool sum = false) {
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
  double kept = 0;
  for (double l : lv)
    kept += !(hasIgnore && l == double(ignore));
  // The sum is the mean times the positions kept.
  Forward f = [&](const std::vector<Values> &in) {
    return Values{refCrossEntropy(in[0], lv, c, hasIgnore, ignore) *
                  (sum ? kept : 1.0)};
  };
  cleave_rt_cross_entropy_grad(arena.data(), &logits, &labels, &dloss, &dlogits,
                               hasIgnore, ignore,
                               sum ? CLEAVE_SUM : CLEAVE_MEAN);
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
  checkCrossEntropyGrad(CLEAVE_I64, false, false, "cross_entropy_grad sum",
                        /*sum=*/true);
  checkCrossEntropyGrad(CLEAVE_I32, true, false,
                        "cross_entropy_grad sum ignore", /*sum=*/true);
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
                               0, 0, CLEAVE_MEAN);
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
                                              &dx, 0, 0, CLEAVE_MEAN),
                 "cleave_rt_cross_entropy_grad: label 8 at position 1 is out "
                 "of range \\[0, 8\\)");
}

} // namespace
