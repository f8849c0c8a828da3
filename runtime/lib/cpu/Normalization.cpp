//===- Normalization.cpp - softmax and norm CPU kernels -------------------===//
//
// softmax / log-softmax along one dim, layer_norm and rms_norm over the
// trailing dims, and the gradients of the two norms. Rows run in parallel.
// The forward kernels accumulate row statistics in f64; the gradients, in
// fewer passes, in f32 (their statistics are a few ulp from the forward's)
// and their sums over rows in f32 blocks added up in f64. Every kernel
// reads an element before it writes the same element, so out may be the
// same tensor as x (and dx the same as x or dy).
//
//===----------------------------------------------------------------------===//

#include "FastMath.h"
#include "KernelChecks.h"
#include "Tensor.h"

#include <omp.h>

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
    max = x[i] > max ? x[i] : max; // vectorizes, unlike std::max
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
      max[c] = x[j * inner + c] > max[c] ? x[j * inner + c] : max[c];
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

/// Stores the gradient of a trailing operand `t` (scale or bias) from its
/// per-row-element sums `full` (N = prod(x.shape[dim:]) values): directly
/// when t has N elements, else summed over the dims along which t broadcasts
/// (the transpose of trailingOperand).
void storeTrailingGrad(const char *kernel, const char *what, char *arena,
                       const cleave_tensor &t, const cleave_tensor &x,
                       int64_t dim, const std::vector<double> &full) {
  int64_t n = int64_t(full.size()), count = numElements(t);
  std::vector<float> result(static_cast<size_t>(count), 0.0f);
  if (count == n) {
    for (int64_t i = 0; i < n; ++i)
      result[size_t(i)] = float(full[size_t(i)]);
  } else {
    int rank = x.rank - int(dim);
    int64_t strides[CLEAVE_RT_MAX_RANK];
    trailingStrides(kernel, what, t, x, dim, strides);
    std::vector<double> sums(static_cast<size_t>(count), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t rest = i, at = 0;
      for (int d = rank - 1; d >= 0; --d) {
        at += (rest % x.shape[dim + d]) * strides[d];
        rest /= x.shape[dim + d];
      }
      sums[size_t(at)] += full[size_t(i)];
    }
    for (int64_t i = 0; i < count; ++i)
      result[size_t(i)] = float(sums[size_t(i)]);
  }
  convertFromF32(result.data(), dataOf(arena, t), t.dtype, count);
}

/// One row of the layer_norm gradient, with xhat = (x - mean) rstd and
/// g = dy * scale:
///   dx = rstd (g - mean(g) - xhat mean(g xhat)),
///   ds += dy xhat, db += dy (the dscale and dbias terms; either may be
///   NULL).
/// Three f32 passes: the mean; the variance with sum(g) and
/// sum(g (x - mean)); then dx and the terms. (A function of plain pointers
/// rather than a lambda's captures, which GCC reloads inside the
/// reductions instead of vectorizing them.)
void layerNormGradRow(const float *x, const float *dy, const float *scale,
                      float *dx, int64_t n, double eps, float *ds, float *db) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += x[i];
  float m = sum / float(n);
  float var = 0.0f, sumG = 0.0f, sumGC = 0.0f;
#pragma omp simd reduction(+ : var, sumG, sumGC)
  for (int64_t i = 0; i < n; ++i) {
    float c = x[i] - m, g = dy[i] * scale[i];
    var += c * c;
    sumG += g;
    sumGC += g * c;
  }
  float rstd = float(1.0 / std::sqrt(double(var) / double(n) + eps));
  float meanG = sumG / float(n), meanGX = sumGC * rstd / float(n);
  if (ds) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      ds[i] += dy[i] * ((x[i] - m) * rstd);
  }
  if (db) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      db[i] += dy[i];
  }
  // Last, element by element: dx may be x or dy.
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float xhat = (x[i] - m) * rstd;
    dx[i] = rstd * (dy[i] * scale[i] - meanG - xhat * meanGX);
  }
}

/// One row of the rms_norm gradient, with r = 1 / sqrt(mean(x^2) + eps)
/// and g = dy * scale: dx = r (g - x r^2 mean(g x)), ds += dy x r (when not
/// NULL).
void rmsNormGradRow(const float *x, const float *dy, const float *scale,
                    float *dx, int64_t n, double eps, float *ds) {
  float sq = 0.0f, sumGX = 0.0f;
#pragma omp simd reduction(+ : sq, sumGX)
  for (int64_t i = 0; i < n; ++i) {
    sq += x[i] * x[i];
    sumGX += (dy[i] * scale[i]) * x[i];
  }
  double rrmsD = 1.0 / std::sqrt(double(sq) / double(n) + eps);
  float rrms = float(rrmsD);
  if (ds) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      ds[i] += dy[i] * (x[i] * rrms);
  }
  float c = float(rrmsD * rrmsD * double(sumGX) / double(n));
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dx[i] = rrms * (dy[i] * scale[i] - x[i] * c);
}

/// The row loop shared by the two norm gradients. Rows run in blocks of
/// kRowBlock; `body(r, ds, db)` handles row r and adds that row's dscale
/// and dbias contributions (N values each) into ds and db (NULL when not
/// wanted): f32 sums over one block, which are then added into the calling
/// thread's f64 partial sums, which are summed in thread order at the end.
/// With the static schedule the result does not vary from run to run.
template <typename Body>
void normGradRows(int64_t rows, int64_t n, bool wantScale, bool wantBias,
                  std::vector<double> &dscale, std::vector<double> &dbias,
                  Body &&body) {
  constexpr int64_t kRowBlock = 16;
  bool parallel = rows * n >= kParallelElements;
  int threads = parallel ? omp_get_max_threads() : 1;
  size_t len = static_cast<size_t>(n);
  std::vector<double> ds(wantScale ? len * size_t(threads) : 0);
  std::vector<double> db(wantBias ? len * size_t(threads) : 0);
  int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
#pragma omp parallel num_threads(threads) if (parallel)
  {
    int t = omp_get_thread_num();
    double *dsp = wantScale ? ds.data() + size_t(t) * len : nullptr;
    double *dbp = wantBias ? db.data() + size_t(t) * len : nullptr;
    std::vector<float> dsBlock(wantScale ? len : 0),
        dbBlock(wantBias ? len : 0);
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      std::fill(dsBlock.begin(), dsBlock.end(), 0.0f);
      std::fill(dbBlock.begin(), dbBlock.end(), 0.0f);
      int64_t end = std::min(rows, (blk + 1) * kRowBlock);
      for (int64_t r = blk * kRowBlock; r < end; ++r)
        body(r, wantScale ? dsBlock.data() : nullptr,
             wantBias ? dbBlock.data() : nullptr);
      if (wantScale) {
#pragma omp simd
        for (size_t i = 0; i < len; ++i)
          dsp[i] += dsBlock[i];
      }
      if (wantBias) {
#pragma omp simd
        for (size_t i = 0; i < len; ++i)
          dbp[i] += dbBlock[i];
      }
    }
  }
  dscale.assign(wantScale ? len : 0, 0.0);
  dbias.assign(wantBias ? len : 0, 0.0);
  for (int t = 0; t < threads; ++t)
    for (size_t i = 0; i < len; ++i) {
      if (wantScale)
        dscale[i] += ds[size_t(t) * len + i];
      if (wantBias)
        dbias[i] += db[size_t(t) * len + i];
    }
}

/// The body of layer_norm_grad and of rms_norm_grad (dbias NULL): checks,
/// loads scale over the normalized dims, runs `rowGrad(x, dy, scale, dx, n,
/// ds, db)` on every row through normGradRows and stores dx, dscale and
/// dbias.
template <typename RowGrad>
void normGrad(const char *k, char *arena, const cleave_tensor *x,
              const cleave_tensor *scale, const cleave_tensor *dy,
              const cleave_tensor *dx, const cleave_tensor *dscale,
              const cleave_tensor *dbias, int64_t dim, RowGrad rowGrad) {
  checkNormGrad(k, x, scale, dy, dx, dscale, dbias, dim);
  std::vector<float> s = trailingOperand(k, arena, *scale, *x, dim);
  int64_t rows, n;
  rowsOf(*x, dim, rows, n);
  Input<float> xv(arena, *x), dyv(arena, *dy);
  Output<float> dxv(arena, *dx);
  const float *xp = xv.data(), *dyp = dyv.data(), *sp = s.data();
  float *dxp = dxv.data();
  auto row = [&](int64_t r, float *ds, float *db) {
    rowGrad(xp + r * n, dyp + r * n, sp, dxp + r * n, n, ds, db);
  };
  std::vector<double> dsFull, dbFull;
  normGradRows(rows, n, dscale != nullptr, dbias != nullptr, dsFull, dbFull,
               row);
  dxv.commit();
  if (dscale)
    storeTrailingGrad(k, "dscale", arena, *dscale, *x, dim, dsFull);
  if (dbias)
    storeTrailingGrad(k, "dbias", arena, *dbias, *x, dim, dbFull);
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

void cleave_rt_layer_norm_grad(char *arena, const cleave_tensor *x,
                               const cleave_tensor *scale,
                               const cleave_tensor *dy, const cleave_tensor *dx,
                               const cleave_tensor *dscale,
                               const cleave_tensor *dbias, int64_t dim,
                               double eps) {
  normGrad("cleave_rt_layer_norm_grad", arena, x, scale, dy, dx, dscale, dbias,
           dim,
           [eps](const float *xr, const float *dyr, const float *s, float *dxr,
                 int64_t n, float *ds, float *db) {
             layerNormGradRow(xr, dyr, s, dxr, n, eps, ds, db);
           });
}

void cleave_rt_rms_norm_grad(char *arena, const cleave_tensor *x,
                             const cleave_tensor *scale,
                             const cleave_tensor *dy, const cleave_tensor *dx,
                             const cleave_tensor *dscale, int64_t dim,
                             double eps) {
  normGrad("cleave_rt_rms_norm_grad", arena, x, scale, dy, dx, dscale, nullptr,
           dim,
           [eps](const float *xr, const float *dyr, const float *s, float *dxr,
                 int64_t n, float *ds,
                 float *) { rmsNormGradRow(xr, dyr, s, dxr, n, eps, ds); });
}

} // extern "C"
