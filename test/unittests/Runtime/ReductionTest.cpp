//===- ReductionTest.cpp - reduce and topk --------------------------------===//
//
// reduce over every subset of the dims of a rank-4 tensor, kept or dropped,
// for each kind, in f32 (1e-5 relative) and i64 (exact); topk largest and
// smallest along inner and outer dims, with ties resolved to the lower
// index.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include <algorithm>
#include <numeric>

using namespace cleave::rt::test;

namespace {

/// Reference reduction of `x` (shape `xs`) over the dims in `mask`.
std::vector<double> refReduce(int kind, const Shape &xs,
                              const std::vector<double> &x,
                              const std::vector<bool> &mask) {
  Shape kept;
  for (size_t d = 0; d < xs.size(); ++d)
    kept.push_back(mask[d] ? 1 : xs[d]);
  int64_t n = product(kept);
  std::vector<double> acc(size_t(n), kind == CLEAVE_MAX_REDUCE   ? -INFINITY
                                     : kind == CLEAVE_MIN_REDUCE ? INFINITY
                                                                 : 0.0);
  std::vector<int64_t> count(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < int64_t(x.size()); ++i) {
    // The output index: x's coordinates with reduced ones set to 0.
    int64_t rest = i, o = 0, stride = 1;
    for (int d = int(xs.size()) - 1; d >= 0; --d) {
      int64_t c = rest % xs[size_t(d)];
      rest /= xs[size_t(d)];
      if (!mask[size_t(d)])
        o += c * stride;
      stride *= kept[size_t(d)];
    }
    double v = x[size_t(i)];
    double &a = acc[size_t(o)];
    a = kind == CLEAVE_MAX_REDUCE   ? std::max(a, v)
        : kind == CLEAVE_MIN_REDUCE ? std::min(a, v)
                                    : a + v;
    ++count[size_t(o)];
  }
  if (kind == CLEAVE_MEAN)
    for (int64_t o = 0; o < n; ++o)
      acc[size_t(o)] /= double(count[size_t(o)]);
  return acc;
}

TEST(RuntimeReduce, EveryDimSubsetF32) {
  Shape xs = {6, 5, 7, 40};
  unsigned seed = 1;
  for (int subset = 1; subset < 16; ++subset) {
    for (int kind = CLEAVE_SUM; kind <= CLEAVE_MIN_REDUCE; ++kind) {
      for (bool keep : {false, true}) {
        std::vector<bool> mask(4);
        std::vector<int64_t> dims;
        Shape outShape;
        for (int d = 0; d < 4; ++d) {
          mask[size_t(d)] = (subset >> d) & 1;
          if (mask[size_t(d)])
            dims.push_back(d);
          if (!mask[size_t(d)] || keep)
            outShape.push_back(mask[size_t(d)] ? 1 : xs[size_t(d)]);
        }
        TestArena arena;
        cleave_tensor x = arena.add(CLEAVE_F32, xs);
        cleave_tensor out = arena.add(CLEAVE_F32, outShape);
        std::vector<double> xv = arena.fill(x, -1, 1, seed++);
        cleave_rt_reduce(arena.data(), kind, &x, &out, dims.data(),
                         int64_t(dims.size()));
        // Sums of values of both signs: absolute tolerance for cancellation.
        expectClose(arena.values(out), refReduce(kind, xs, xv, mask), 1e-5,
                    1e-5,
                    "subset " + std::to_string(subset) + " kind " +
                        std::to_string(kind));
      }
    }
  }
}

TEST(RuntimeReduce, LargeRowsAndColumns) {
  // Above the parallel threshold, reducing the inner and the outer dim.
  TestArena arena(size_t(16) << 20);
  Shape xs = {300, 1000};
  cleave_tensor x = arena.add(CLEAVE_F32, xs);
  cleave_tensor rows = arena.add(CLEAVE_F32, {300});
  cleave_tensor cols = arena.add(CLEAVE_F32, {1000});
  std::vector<double> xv = arena.fill(x, 0.5, 1.5, 5);
  int64_t inner[] = {1}, outer[] = {0};
  cleave_rt_reduce(arena.data(), CLEAVE_SUM, &x, &rows, inner, 1);
  cleave_rt_reduce(arena.data(), CLEAVE_MEAN, &x, &cols, outer, 1);
  expectClose(arena.values(rows), refReduce(CLEAVE_SUM, xs, xv, {false, true}),
              1e-5);
  expectClose(arena.values(cols), refReduce(CLEAVE_MEAN, xs, xv, {true, false}),
              1e-5);
}

TEST(RuntimeReduce, I64AndBf16) {
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_I64, {4, 9, 3});
  cleave_tensor out = arena.add(CLEAVE_I64, {4, 3});
  std::vector<double> xv = arena.fill(x, -100, 100, 7);
  int64_t dims[] = {1};
  for (int kind : {CLEAVE_SUM, CLEAVE_MAX_REDUCE, CLEAVE_MIN_REDUCE}) {
    cleave_rt_reduce(arena.data(), kind, &x, &out, dims, 1);
    expectClose(arena.values(out),
                refReduce(kind, {4, 9, 3}, xv, {false, true, false}), 0);
  }
  cleave_tensor b = arena.add(CLEAVE_BF16, {4, 9, 3});
  cleave_tensor bo = arena.add(CLEAVE_BF16, {4, 1, 3});
  std::vector<double> bv = arena.fill(b, 0.5, 2, 8);
  cleave_rt_reduce(arena.data(), CLEAVE_MEAN, &b, &bo, dims, 1);
  expectClose(arena.values(bo),
              refReduce(CLEAVE_MEAN, {4, 9, 3}, bv, {false, true, false}),
              1.0 / 256);
}

TEST(RuntimeReduce, BadDimsFail) {
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {4, 5});
  cleave_tensor out = arena.add(CLEAVE_F32, {4});
  int64_t dims[] = {2};
  EXPECT_RT_FAIL(cleave_rt_reduce(arena.data(), CLEAVE_SUM, &x, &out, dims, 1),
                 "cleave_rt_reduce: dims must be sorted, unique and in \\[0, "
                 "2\\), got 2");
  int64_t wrong[] = {0};
  EXPECT_RT_FAIL(cleave_rt_reduce(arena.data(), CLEAVE_SUM, &x, &out, wrong, 1),
                 "cleave_rt_reduce: out \\[4\\] does not match x \\[4, 5\\]");
}

/// Reference topk of one slice: indices sorted by value (descending unless
/// smallest), ties to the lower index.
std::vector<int64_t> refTopk(const std::vector<double> &v, int64_t k,
                             bool smallest) {
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    return smallest ? v[size_t(a)] < v[size_t(b)] : v[size_t(a)] > v[size_t(b)];
  });
  idx.resize(size_t(k));
  return idx;
}

TEST(RuntimeTopk, AlongEachDimWithTies) {
  Shape xs = {3, 12, 4};
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (bool smallest : {false, true}) {
      int64_t k = dim == 1 ? 5 : 2;
      Shape ks = xs;
      ks[size_t(dim)] = k;
      TestArena arena;
      cleave_tensor x = arena.add(CLEAVE_F32, xs);
      cleave_tensor values = arena.add(CLEAVE_F32, ks);
      cleave_tensor indices = arena.add(CLEAVE_I64, ks);
      // Values from a small set: many ties.
      std::vector<double> xv = arena.fill(x, 0, 4, unsigned(10 + dim));
      for (double &v : xv)
        v = std::floor(v);
      arena.setValues(x, xv);
      cleave_rt_topk(arena.data(), &x, &values, &indices, k, dim, smallest);
      std::vector<double> gotV = arena.values(values);
      std::vector<double> gotI = arena.values(indices);
      int64_t outer = product(Shape(xs.begin(), xs.begin() + dim));
      int64_t inner = product(Shape(xs.begin() + dim + 1, xs.end()));
      int64_t size = xs[size_t(dim)];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          std::vector<double> slice(static_cast<size_t>(size));
          for (int64_t j = 0; j < size; ++j)
            slice[size_t(j)] = xv[size_t((o * size + j) * inner + i)];
          std::vector<int64_t> want = refTopk(slice, k, smallest);
          for (int64_t j = 0; j < k; ++j) {
            size_t at = size_t((o * k + j) * inner + i);
            EXPECT_EQ(gotI[at], double(want[size_t(j)]))
                << "dim " << dim << " smallest " << smallest;
            EXPECT_EQ(gotV[at], slice[size_t(want[size_t(j)])]);
          }
        }
    }
  }
}

TEST(RuntimeTopk, IntegerAndErrors) {
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_I64, {6});
  cleave_tensor values = arena.add(CLEAVE_I64, {3});
  cleave_tensor indices = arena.add(CLEAVE_I64, {3});
  arena.setValues(x, {5, -1, 7, 7, 2, 5});
  cleave_rt_topk(arena.data(), &x, &values, &indices, 3, 0, 0);
  expectClose(arena.values(values), {7, 7, 5}, 0);
  expectClose(arena.values(indices), {2, 3, 0}, 0);
  EXPECT_RT_FAIL(cleave_rt_topk(arena.data(), &x, &values, &indices, 7, 0, 0),
                 "cleave_rt_topk: k = 7 is out of range \\[0, 6\\]");
}

} // namespace
