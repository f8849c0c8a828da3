//===- ReductionTest.cpp - CUDA reduce, softmax and topk against the CPU --===//
//
// reduce (every kind over every subset of dims of a rank-4 tensor, kept or
// dropped, integer and 16-bit inputs, long rows, empty reductions), softmax
// and log-softmax along each dim (rows of -inf give NaN), and topk along
// each dim with ties (indices exactly) on the GPU against the CPU backend.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

using namespace cleave::rt::test;

namespace {

using CudaReduction = CudaTest;

TEST_F(CudaReduction, EveryKindEveryDimSubset) {
  Shape xs = {6, 5, 7, 40};
  unsigned seed = 1;
  for (int subset = 1; subset < 16; ++subset)
    for (bool keep : {false, true}) {
      std::vector<int64_t> dims;
      Shape outShape;
      for (int d = 0; d < 4; ++d) {
        bool reduced = (subset >> d) & 1;
        if (reduced)
          dims.push_back(d);
        if (!reduced || keep)
          outShape.push_back(reduced ? 1 : xs[size_t(d)]);
      }
      DevicePair p;
      cleave_tensor x = p.add(CLEAVE_F32, xs);
      cleave_tensor out = p.add(CLEAVE_F32, outShape);
      p.fill(x, -1, 1, seed++);
      for (int32_t kind = CLEAVE_SUM; kind <= CLEAVE_MIN_REDUCE; ++kind) {
        CUDA_AND_CPU(p, reduce, kind, &x, &out,
                     static_cast<const int64_t *>(dims.data()),
                     int64_t(dims.size()));
        p.expectMatch(out, "reduce kind " + std::to_string(kind) + " subset " +
                               std::to_string(subset) +
                               (keep ? " kept" : " dropped"));
      }
    }
}

TEST_F(CudaReduction, LongRowsAndColumns) {
  DevicePair p(size_t(32) << 20);
  cleave_tensor x = p.add(CLEAVE_F32, {300, 10000});
  cleave_tensor rows = p.add(CLEAVE_F32, {300});
  cleave_tensor cols = p.add(CLEAVE_F32, {10000});
  cleave_tensor all = p.add(CLEAVE_F32, {});
  p.fill(x, -1, 1, 50);
  int64_t inner[] = {1}, outer[] = {0}, both[] = {0, 1};
  for (int32_t kind = CLEAVE_SUM; kind <= CLEAVE_MIN_REDUCE; ++kind) {
    std::string what = "reduce kind " + std::to_string(kind);
    CUDA_AND_CPU(p, reduce, kind, &x, &rows,
                 static_cast<const int64_t *>(inner), int64_t(1));
    CUDA_AND_CPU(p, reduce, kind, &x, &cols,
                 static_cast<const int64_t *>(outer), int64_t(1));
    CUDA_AND_CPU(p, reduce, kind, &x, &all, static_cast<const int64_t *>(both),
                 int64_t(2));
    // A sum of 10^4 terms of both signs: as accurate as the sum of their
    // magnitudes, about 10^2 times the result.
    p.expectMatch(rows, what + " rows of 10000", {1e-4, 1e-4});
    p.expectMatch(cols, what + " columns of 300", {1e-4, 1e-5});
    p.expectMatch(all, what + " all 3e6", {1e-4, 1e-3});
  }
}

TEST_F(CudaReduction, IntegerAnd16Bit) {
  int64_t mid[] = {1};
  for (int32_t dtype :
       {CLEAVE_I64, CLEAVE_I32, CLEAVE_I1, CLEAVE_F16, CLEAVE_BF16}) {
    DevicePair p;
    cleave_tensor x = p.add(dtype, {4, 90, 3});
    cleave_tensor out = p.add(dtype, {4, 3});
    cleave_tensor kept = p.add(dtype, {4, 1, 3});
    cleave_tensor wide = p.add(CLEAVE_F32, {4, 3}); // f32 out of x's values
    p.fill(x, -1000, 1000, 60);
    for (int32_t kind = CLEAVE_SUM; kind <= CLEAVE_MIN_REDUCE; ++kind) {
      std::string what = std::string("reduce ") + dtypeName(dtype) + " kind " +
                         std::to_string(kind);
      CUDA_AND_CPU(p, reduce, kind, &x, &out, static_cast<const int64_t *>(mid),
                   int64_t(1));
      CUDA_AND_CPU(p, reduce, kind, &x, &kept,
                   static_cast<const int64_t *>(mid), int64_t(1));
      CUDA_AND_CPU(p, reduce, kind, &x, &wide,
                   static_cast<const int64_t *>(mid), int64_t(1));
      p.expectMatch(out, what);
      p.expectMatch(kept, what + " kept");
      p.expectMatch(wide, what + " -> f32");
    }
  }
}

TEST_F(CudaReduction, EmptyReduction) {
  // Reducing a dim of size 0: 0, NaN, -inf, +inf (lowest, largest for i64).
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_I64}) {
    DevicePair p;
    cleave_tensor x = p.add(dtype, {3, 0, 2});
    cleave_tensor out = p.add(dtype, {3, 2});
    p.fill(out, 5, 6, 70);
    int64_t mid[] = {1};
    for (int32_t kind = CLEAVE_SUM; kind <= CLEAVE_MIN_REDUCE; ++kind) {
      CUDA_AND_CPU(p, reduce, kind, &x, &out, static_cast<const int64_t *>(mid),
                   int64_t(1));
      p.expectMatch(out, std::string("empty reduce ") + dtypeName(dtype) +
                             " kind " + std::to_string(kind));
    }
  }
}

TEST_F(CudaReduction, SoftmaxAlongEachDim) {
  unsigned seed = 80;
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16})
    for (int64_t dim = 0; dim < 3; ++dim)
      for (int32_t log : {0, 1}) {
        DevicePair p;
        cleave_tensor x = p.add(dtype, {7, 33, 45});
        cleave_tensor out = p.add(dtype, {7, 33, 45});
        p.fill(x, -8, 8, seed++);
        std::string what = std::string(log ? "log_softmax " : "softmax ") +
                           dtypeName(dtype) + " dim " + std::to_string(dim);
        CUDA_AND_CPU(p, softmax, &x, &out, dim, log);
        p.expectMatch(out, what);
        CUDA_AND_CPU(p, softmax, &x, &x, dim, log); // in place
        p.expectMatch(x, what + " in place");
      }
  // Long rows (a vocabulary), a row of -inf (NaN) and one with a single
  // finite value.
  DevicePair p(size_t(32) << 20);
  cleave_tensor x = p.add(CLEAVE_F32, {16, 50304});
  cleave_tensor out = p.add(CLEAVE_F32, {16, 50304});
  std::vector<double> xv = p.fill(x, -10, 10, 90);
  for (size_t j = 0; j < 50304; ++j) {
    xv[j] = -INFINITY;
    xv[50304 + j] = j == 77 ? 1.0 : -INFINITY;
  }
  p.setValues(x, xv);
  for (int32_t log : {0, 1}) {
    CUDA_AND_CPU(p, softmax, &x, &out, int64_t(1), log);
    p.expectMatch(out, log ? "log_softmax of 50304" : "softmax of 50304",
                  {1e-4, 1e-7});
  }
}

TEST_F(CudaReduction, TopkAlongEachDimWithTies) {
  Shape xs = {3, 40, 6};
  unsigned seed = 100;
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_I64})
    for (int64_t dim = 0; dim < 3; ++dim)
      for (int32_t smallest : {0, 1}) {
        int64_t k = dim == 1 ? 7 : 2;
        Shape ks = xs;
        ks[size_t(dim)] = k;
        DevicePair p;
        cleave_tensor x = p.add(dtype, xs);
        cleave_tensor values = p.add(dtype, ks);
        cleave_tensor indices = p.add(CLEAVE_I64, ks);
        // Values from a small set: many ties (to the lower index).
        std::vector<double> xv = p.fill(x, 0, 5, seed++);
        for (double &v : xv)
          v = std::floor(v);
        p.setValues(x, xv);
        CUDA_AND_CPU(p, topk, &x, &values, &indices, k, dim, smallest);
        std::string what = std::string("topk ") + dtypeName(dtype) + " dim " +
                           std::to_string(dim) +
                           (smallest ? " smallest" : " largest");
        p.expectMatch(values, what + " values", {0, 0});
        p.expectMatch(indices, what + " indices");
      }
  // NaN ranks above every number; a long row; k = the whole row.
  DevicePair p(size_t(16) << 20);
  cleave_tensor x = p.add(CLEAVE_F32, {8, 50304});
  cleave_tensor values = p.add(CLEAVE_F32, {8, 50});
  cleave_tensor indices = p.add(CLEAVE_I64, {8, 50});
  cleave_tensor small = p.add(CLEAVE_F32, {5});
  cleave_tensor allValues = p.add(CLEAVE_F32, {5});
  cleave_tensor allIndices = p.add(CLEAVE_I64, {5});
  std::vector<double> xv = p.fill(x, -10, 10, 120);
  xv[3] = NAN;
  xv[50304 + 9] = NAN;
  xv[50304 + 10] = NAN;
  p.setValues(x, xv);
  p.setValues(small, {2, NAN, -1, 2, INFINITY});
  for (int32_t smallest : {0, 1}) {
    std::string what = smallest ? "smallest" : "largest";
    CUDA_AND_CPU(p, topk, &x, &values, &indices, int64_t(50), int64_t(1),
                 smallest);
    p.expectMatch(values, "topk 50 of 50304 " + what, {0, 0});
    p.expectMatch(indices, "topk 50 of 50304 indices " + what);
    CUDA_AND_CPU(p, topk, &small, &allValues, &allIndices, int64_t(5),
                 int64_t(0), smallest);
    p.expectMatch(allValues, "topk whole row " + what, {0, 0});
    p.expectMatch(allIndices, "topk whole row indices " + what);
  }
}

} // namespace
