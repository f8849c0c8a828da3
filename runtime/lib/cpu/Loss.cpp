//===- Loss.cpp - loss CPU kernels ----------------------------------------===//
//
// cross_entropy (mean negative log-likelihood of integer labels, with an
// optional ignore index) and mse (mean squared error). Both reduce to a
// scalar, accumulating in f64. cross_entropy_grad is the gradient of the
// first with respect to the logits.
//
//===----------------------------------------------------------------------===//

#include "FastMath.h"
#include "KernelChecks.h"
#include "Tensor.h"

#include <algorithm>
#include <cmath>

using namespace cleave::rt;

namespace {

void storeScalar(char *arena, const cleave_tensor &out, double value) {
  float v = float(value);
  convertFromF32(&v, dataOf(arena, out), out.dtype, 1);
}

/// The largest of the `c` >= 1 logits of a row, the shift that keeps the
/// exponentials of cross_entropy and of its gradient finite. (A select on
/// values, not std::max, vectorizes.)
float rowMax(const float *row, int64_t c) {
  float max = row[0];
#pragma omp simd reduction(max : max)
  for (int64_t j = 1; j < c; ++j)
    max = row[j] > max ? row[j] : max;
  return max;
}

/// Checks every label that is not ignored against [0, C) and returns C and
/// the number of rows (shapes already checked).
void checkCrossEntropy(const char *k, const cleave_tensor *logits,
                       const cleave_tensor *labels, const int64_t *lp,
                       int32_t hasIgnore, int64_t ignoreIndex, int64_t &c,
                       int64_t &rows) {
  c = logits->shape[logits->rank - 1];
  rows = numElements(*labels);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = lp[r];
    if (hasIgnore && label == ignoreIndex)
      continue;
    if (label < 0 || label >= c)
      cleave_rt_fail("%s: label %lld at position %lld is out of range [0, "
                     "%lld)",
                     k, (long long)label, (long long)r, (long long)c);
  }
}

} // namespace

extern "C" {

void cleave_rt_cross_entropy(char *arena, const cleave_tensor *logits,
                             const cleave_tensor *labels,
                             const cleave_tensor *out, int32_t has_ignore,
                             int64_t ignore_index, int32_t reduction) {
  const char *k = "cleave_rt_cross_entropy";
  checkCrossEntropyArgs(k, logits, labels, out);
  checkLossReduction(k, reduction);
  Input<int64_t> lv(arena, *labels);
  const int64_t *lp = lv.data();
  int64_t c, rows;
  checkCrossEntropy(k, logits, labels, lp, has_ignore, ignore_index, c, rows);
  Input<float> xv(arena, *logits);
  const float *xp = xv.data();
  double total = 0.0;
  int64_t count = 0;
  bool parallel = rows * c >= kParallelElements;
#pragma omp parallel for schedule(static) reduction(+ : total, count)          \
    if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = lp[r];
    if (has_ignore && label == ignore_index)
      continue;
    const float *row = xp + r * c;
    float max = rowMax(row, c);
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < c; ++j)
      sum += double(std::exp(row[j] - max));
    total += double(max) + std::log(sum) - double(row[label]);
    ++count;
  }
  // Every position ignored: a loss of zero rather than 0 / 0.
  if (reduction == CLEAVE_SUM)
    storeScalar(arena, *out, total);
  else
    storeScalar(arena, *out, count ? total / double(count) : 0.0);
}

void cleave_rt_cross_entropy_grad(char *arena, const cleave_tensor *logits,
                                  const cleave_tensor *labels,
                                  const cleave_tensor *dloss,
                                  const cleave_tensor *dlogits,
                                  int32_t has_ignore, int64_t ignore_index,
                                  int32_t reduction) {
  const char *k = "cleave_rt_cross_entropy_grad";
  checkCrossEntropyGradArgs(k, logits, labels, dloss, dlogits);
  checkLossReduction(k, reduction);
  Input<int64_t> lv(arena, *labels);
  const int64_t *lp = lv.data();
  int64_t c, rows;
  checkCrossEntropy(k, logits, labels, lp, has_ignore, ignore_index, c, rows);
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r)
    count += !(has_ignore && lp[r] == ignore_index);
  float dl;
  convertToF32(dataOf(arena, *dloss), dloss->dtype, &dl, 1);
  // Every position ignored: the loss is the constant 0, so zeros.
  float factor = reduction == CLEAVE_SUM
                     ? dl
                     : (count ? float(double(dl) / double(count)) : 0.0f);
  // Row by row, each element read before it is written: dlogits may be the
  // same tensor as logits.
  Input<float> xv(arena, *logits);
  Output<float> ov(arena, *dlogits);
  const float *xp = xv.data();
  float *op = ov.data();
  bool parallel = rows * c >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = lp[r];
    const float *row = xp + r * c;
    float *o = op + r * c;
    if (has_ignore && label == ignore_index) {
      std::fill(o, o + c, 0.0f);
      continue;
    }
    float max = rowMax(row, c);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < c; ++j) {
      float e = fastExp(row[j] - max);
      o[j] = e;
      sum += e;
    }
    float scale = factor / sum;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j)
      o[j] *= scale;
    o[label] -= factor;
  }
  ov.commit();
}

void cleave_rt_mse(char *arena, const cleave_tensor *pred,
                   const cleave_tensor *target, const cleave_tensor *out) {
  const char *k = "cleave_rt_mse";
  checkMse(k, pred, target, out);
  int64_t n = numElements(*pred);
  Input<float> pv(arena, *pred), tv(arena, *target);
  const float *pp = pv.data(), *tp = tv.data();
  double total = 0.0;
  bool parallel = n >= kParallelElements;
#pragma omp parallel for simd schedule(static) reduction(+ : total)            \
    if (parallel)
  for (int64_t i = 0; i < n; ++i) {
    double d = double(pp[i]) - double(tp[i]);
    total += d * d;
  }
  storeScalar(arena, *out, n ? total / double(n) : 0.0);
}

} // extern "C"
