//===- Normalization.cpp - softmax and norm CPU kernels -------------------===//
//
// softmax / log-softmax along one dim, layer_norm and rms_norm over the
// trailing dims. Rows run in parallel; row statistics accumulate in f64.
// Every kernel reads an element before it writes the same element, so out
// may be the same tensor as x.
//
//===----------------------------------------------------------------------===//

#include "FastMath.h"
#include "Tensor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace cleave::rt;

namespace {

/// Softmax of one contiguous row.
void softmaxRow(const float *x, float *out, int64_t n, bool log) {
  float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)
  for (int64_t i = 0; i < n; ++i)
    max = std::max(max, x[i]);
  float sum = 0.0f;
  if (log) {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i)
      sum += fastExp(x[i] - max);
    float shift = max + std::log(sum);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      out[i] = x[i] - shift;
    return;
  }
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    float e = fastExp(x[i] - max);
    out[i] = e;
    sum += e;
  }
  float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] *= inv;
}

/// Softmax along the middle dim of [outer, n, inner] for one outer index and
/// a strip [begin, begin + len) of inner, vectorized across the strip.
void softmaxStrip(const float *x, float *out, int64_t n, int64_t inner,
                  int64_t len, bool log, float *max, float *sum) {
  for (int64_t c = 0; c < len; ++c) {
    max[c] = -std::numeric_limits<float>::infinity();
    sum[c] = 0.0f;
  }
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < len; ++c)
      max[c] = std::max(max[c], x[j * inner + c]);
  for (int64_t j = 0; j < n; ++j) {
#pragma omp simd
    for (int64_t c = 0; c < len; ++c) {
      float e = fastExp(x[j * inner + c] - max[c]);
      sum[c] += e;
      if (!log)
        out[j * inner + c] = e;
    }
  }
  for (int64_t c = 0; c < len; ++c)
    sum[c] = log ? max[c] + std::log(sum[c]) : 1.0f / sum[c];
  for (int64_t j = 0; j < n; ++j) {
#pragma omp simd
    for (int64_t c = 0; c < len; ++c)
      out[j * inner + c] =
          log ? x[j * inner + c] - sum[c] : out[j * inner + c] * sum[c];
  }
}

/// scale or bias as N = prod(x.shape[dim:]) floats: the tensor itself when
/// it already has N elements (read in row-major order), else broadcast
/// NumPy-style to the trailing shape of x.
std::vector<float> trailingOperand(const char *kernel, char *arena,
                                   const cleave_tensor &t,
                                   const cleave_tensor &x, int64_t dim) {
  cleave_tensor trailing = {};
  trailing.dtype = CLEAVE_F32;
  trailing.rank = x.rank - int32_t(dim);
  for (int d = 0; d < trailing.rank; ++d)
    trailing.shape[d] = x.shape[dim + d];
  int64_t n = numElements(trailing);
  std::vector<float> result(static_cast<size_t>(n));
  Input<float> tv(arena, t);
  if (numElements(t) == n) {
    std::copy(tv.data(), tv.data() + n, result.begin());
    return result;
  }
  const cleave_tensor *ops[] = {&t};
  Broadcast bc(kernel, trailing, ops, 1);
  bc.forEachRun(
      [&](int64_t o, const int64_t *off, int64_t len, const int64_t *inner) {
        for (int64_t i = 0; i < len; ++i)
          result[size_t(o + i)] = tv[off[0] + i * inner[0]];
      });
  return result;
}

void checkNorm(const char *kernel, const cleave_tensor *x,
               const cleave_tensor *out, int64_t dim) {
  checkTensor(kernel, "x", x);
  checkTensor(kernel, "out", out);
  if (!sameShape(*x, *out))
    cleave_rt_fail("%s: x %s and out %s differ in shape", kernel,
                   shapeString(*x).c_str(), shapeString(*out).c_str());
  if (dim < 0 || dim >= x->rank)
    cleave_rt_fail("%s: dim %lld is out of range for rank %d", kernel,
                   (long long)dim, x->rank);
  if (!isFloatType(out->dtype))
    cleave_rt_fail("%s: unsupported dtype %s", kernel, dtypeName(out->dtype));
}

/// Rows and row length when normalizing over dims [dim, rank).
void rowsOf(const cleave_tensor &x, int64_t dim, int64_t &rows, int64_t &n) {
  rows = 1;
  n = 1;
  for (int d = 0; d < x.rank; ++d)
    (d < dim ? rows : n) *= x.shape[d];
}

} // namespace

extern "C" {

void cleave_rt_softmax(char *arena, const cleave_tensor *x,
                       const cleave_tensor *out, int64_t dim, int32_t log) {
  const char *k = "cleave_rt_softmax";
  checkNorm(k, x, out, dim);
  int64_t outer = 1, inner = 1, n = x->shape[dim];
  for (int d = 0; d < dim; ++d)
    outer *= x->shape[d];
  for (int d = int(dim) + 1; d < x->rank; ++d)
    inner *= x->shape[d];
  Input<float> xv(arena, *x);
  Output<float> ov(arena, *out);
  const float *xp = xv.data();
  float *op = ov.data();
  bool parallel = outer * n * inner >= kParallelElements;
  if (inner == 1) {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t o = 0; o < outer; ++o)
      softmaxRow(xp + o * n, op + o * n, n, log != 0);
  } else {
    constexpr int64_t kStrip = 256;
    int64_t strips = (inner + kStrip - 1) / kStrip;
#pragma omp parallel if (parallel)
    {
      float max[kStrip], sum[kStrip];
#pragma omp for schedule(static)
      for (int64_t t = 0; t < outer * strips; ++t) {
        int64_t o = t / strips, begin = (t % strips) * kStrip;
        int64_t at = o * n * inner + begin;
        softmaxStrip(xp + at, op + at, n, inner,
                     std::min(kStrip, inner - begin), log != 0, max, sum);
      }
    }
  }
  ov.commit();
}

void cleave_rt_layer_norm(char *arena, const cleave_tensor *x,
                          const cleave_tensor *scale, const cleave_tensor *bias,
                          const cleave_tensor *out, int64_t dim, double eps) {
  const char *k = "cleave_rt_layer_norm";
  checkNorm(k, x, out, dim);
  checkTensor(k, "scale", scale);
  if (bias)
    checkTensor(k, "bias", bias);
  std::vector<float> s = trailingOperand(k, arena, *scale, *x, dim);
  std::vector<float> b;
  if (bias)
    b = trailingOperand(k, arena, *bias, *x, dim);
  int64_t rows, n;
  rowsOf(*x, dim, rows, n);
  Input<float> xv(arena, *x);
  Output<float> ov(arena, *out);
  const float *xp = xv.data(), *sp = s.data(), *bp = bias ? b.data() : nullptr;
  float *op = ov.data();
#pragma omp parallel for schedule(static) if (rows * n >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = xp + r * n;
    float *o = op + r * n;
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i)
      sum += row[i];
    double mean = sum / double(n), var = 0.0;
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < n; ++i) {
      double c = row[i] - mean;
      var += c * c;
    }
    float rstd = float(1.0 / std::sqrt(var / double(n) + eps));
    float m = float(mean);
    if (bp) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i)
        o[i] = (row[i] - m) * rstd * sp[i] + bp[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i)
        o[i] = (row[i] - m) * rstd * sp[i];
    }
  }
  ov.commit();
}

void cleave_rt_rms_norm(char *arena, const cleave_tensor *x,
                        const cleave_tensor *scale, const cleave_tensor *out,
                        int64_t dim, double eps) {
  const char *k = "cleave_rt_rms_norm";
  checkNorm(k, x, out, dim);
  checkTensor(k, "scale", scale);
  std::vector<float> s = trailingOperand(k, arena, *scale, *x, dim);
  int64_t rows, n;
  rowsOf(*x, dim, rows, n);
  Input<float> xv(arena, *x);
  Output<float> ov(arena, *out);
  const float *xp = xv.data(), *sp = s.data();
  float *op = ov.data();
#pragma omp parallel for schedule(static) if (rows * n >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = xp + r * n;
    float *o = op + r * n;
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int64_t i = 0; i < n; ++i)
      sq += double(row[i]) * row[i];
    float rrms = float(1.0 / std::sqrt(sq / double(n) + eps));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      o[i] = row[i] * rrms * sp[i];
  }
  ov.commit();
}

} // extern "C"
