//===- Loss.cu - loss CUDA kernels ----------------------------------------===//
//
// cross_entropy (mean negative log-likelihood of integer labels, with an
// optional ignore index), its gradient, and mse. The losses reduce in f64
// and deterministically: a fixed number of blocks (chosen from the sizes
// alone) each sums its share into a partial, then one block sums the
// partials in a fixed order and writes the scalar into the arena, so the
// host never waits for the result. A label out of range is reported through
// the device error slot (see CudaCommon.cuh).
//
//===----------------------------------------------------------------------===//

#include "DeviceUtil.cuh"

#include "../cpu/KernelChecks.h"
#include "../cpu/Tensor.h"

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

/// Blocks of the partial-sum kernels: fixed for a given size, so results
/// are reproducible run to run.
constexpr int64_t kPartials = 1024;
unsigned partialBlocks(int64_t work) {
  return static_cast<unsigned>(work < 1           ? 1
                               : work > kPartials ? kPartials
                                                  : work);
}

/// The labels and what the row kernels need to read them.
struct Labels {
  const char *data;
  int32_t dtype;
  bool hasIgnore;
  int64_t ignoreIndex;

  __device__ int64_t at(int64_t r) const { return loadI64(data, dtype, r); }
  __device__ bool ignored(int64_t label) const {
    return hasIgnore && label == ignoreIndex;
  }
};

/// The largest of the c logits from `base`, over the whole block (every
/// thread gets it). The max skips NaN, which then reaches the sum (as on
/// the CPU, the loss is NaN either way).
__device__ inline float rowMax(const char *logits, int32_t dtype,
                               int64_t base, int64_t c) {
  const float negInf = -INFINITY;
  float max = negInf;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    float x = loadF32(logits, dtype, base + j);
    max = x > max ? x : max;
  }
  return blockReduce(max, negInf, MaxOp());
}

/// One block per row at a time: partial[blockIdx] = sum over its rows of
/// max + log(sum exp(x - max)) - x[label] (f64), count[blockIdx] = rows
/// not ignored.
__global__ void crossEntropyRowsKernel(const char *logits, int32_t dtype,
                                       Labels labels, int64_t rows, int64_t c,
                                       double *partial, int64_t *count,
                                       DeviceError *error) {
  double total = 0.0;
  int64_t n = 0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t label = labels.at(r);
    if (labels.ignored(label))
      continue;
    if (label < 0 || label >= c) {
      if (threadIdx.x == 0)
        raiseError(error, kLabelOutOfRange, kCrossEntropy, label, c);
      continue;
    }
    int64_t base = r * c;
    float max = rowMax(logits, dtype, base, c);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      sum += double(expf(loadF32(logits, dtype, base + j) - max));
    sum = blockReduce(sum, 0.0, SumOp());
    total +=
        double(max) + log(sum) - double(loadF32(logits, dtype, base + label));
    ++n;
  }
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = total;
    count[blockIdx.x] = n;
  }
}

/// out = (sum of partials) / (sum of counts), 0 when the count is 0, or
/// the sum of partials when `sum`; one block.
__global__ void meanOfPartialsKernel(const double *partial,
                                     const int64_t *count, int64_t parts,
                                     char *out, int32_t outType, bool sum) {
  double total = 0.0;
  long long n = 0;
  for (int64_t i = threadIdx.x; i < parts; i += blockDim.x) {
    total += partial[i];
    n += count[i];
  }
  total = blockReduce(total, 0.0, SumOp());
  n = blockReduce(n, 0LL, SumOp());
  if (threadIdx.x == 0)
    storeF32(out, outType, 0,
             sum ? float(total) : (n ? float(total / double(n)) : 0.0f));
}

/// Adds the number of positions not ignored to *count (integer atomics:
/// exact, so the order does not matter).
__global__ void countKeptKernel(Labels labels, int64_t rows,
                                unsigned long long *count) {
  unsigned long long n = 0;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x)
    n += labels.ignored(labels.at(r)) ? 0 : 1;
  n = blockReduce(n, 0ULL, SumOp());
  if (threadIdx.x == 0 && n)
    atomicAdd(count, n);
}

/// dlogits = (softmax(logits) - onehot(label)) * dloss / count per row (or
/// without the division when `sum`); ignored rows are zeros. Each element is read before it is written by
/// the same thread, and the row's max and sum are reduced before any write:
/// dlogits may be the same tensor as logits.
__global__ void crossEntropyGradKernel(const char *logits, int32_t dtype,
                                       Labels labels, int64_t rows, int64_t c,
                                       const char *dloss, int32_t dlossType,
                                       const unsigned long long *count,
                                       bool sum, char *dlogits,
                                       int32_t outType, DeviceError *error) {
  unsigned long long kept = *count;
  float dl = loadF32(dloss, dlossType, 0);
  float factor = sum ? dl : (kept ? float(double(dl) / double(kept)) : 0.0f);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t label = labels.at(r);
    int64_t base = r * c;
    if (labels.ignored(label) || label < 0 || label >= c) {
      if (!labels.ignored(label) && threadIdx.x == 0)
        raiseError(error, kLabelOutOfRange, kCrossEntropyGrad, label, c);
      for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
        storeF32(dlogits, outType, base + j, 0.0f);
      continue;
    }
    float max = rowMax(logits, dtype, base, c);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      sum += expf(loadF32(logits, dtype, base + j) - max);
    float scale = factor / blockReduce(sum, 0.0f, SumOp());
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      float g = expf(loadF32(logits, dtype, base + j) - max) * scale;
      storeF32(dlogits, outType, base + j, j == label ? g - factor : g);
    }
  }
}

/// partial[blockIdx] = sum of (pred - target)^2 over a grid-stride share
/// (f64).
__global__ void squaredErrorKernel(const char *pred, int32_t predType,
                                   const char *target, int32_t targetType,
                                   int64_t n, double *partial) {
  double total = 0.0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    double d = double(loadF32(pred, predType, i)) -
               double(loadF32(target, targetType, i));
    total += d * d;
  }
  total = blockReduce(total, 0.0, SumOp());
  if (threadIdx.x == 0)
    partial[blockIdx.x] = total;
}

/// out = sum of partials / n (0 when n is 0); one block.
__global__ void msePartialsKernel(const double *partial, int64_t parts,
                                  int64_t n, char *out, int32_t outType) {
  double total = 0.0;
  for (int64_t i = threadIdx.x; i < parts; i += blockDim.x)
    total += partial[i];
  total = blockReduce(total, 0.0, SumOp());
  if (threadIdx.x == 0)
    storeF32(out, outType, 0, n ? float(total / double(n)) : 0.0f);
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
  int64_t c = logits->shape[logits->rank - 1];
  int64_t rows = numElements(*labels);
  Labels lv{dataOf(arena, *labels), labels->dtype, has_ignore != 0,
            ignore_index};
  unsigned parts = partialBlocks(rows);
  ScratchBuffer scratch(parts * (sizeof(double) + sizeof(int64_t)), k);
  double *partial = scratch.as<double>();
  int64_t *count = reinterpret_cast<int64_t *>(partial + parts);
  crossEntropyRowsKernel<<<parts, rowThreads(c), 0, stream()>>>(
      dataOf(arena, *logits), logits->dtype, lv, rows, c, partial, count,
      errorSlot());
  checkLaunchOf(k);
  meanOfPartialsKernel<<<1, kThreads, 0, stream()>>>(
      partial, count, parts, dataOf(arena, *out), out->dtype,
      reduction == CLEAVE_SUM);
  checkLaunchOf(k);
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
  int64_t c = logits->shape[logits->rank - 1];
  int64_t rows = numElements(*labels);
  if (rows == 0)
    return; // dlogits is empty
  Labels lv{dataOf(arena, *labels), labels->dtype, has_ignore != 0,
            ignore_index};
  ScratchBuffer scratch(sizeof(unsigned long long), k);
  auto *count = scratch.as<unsigned long long>();
  check(cudaMemsetAsync(count, 0, sizeof(*count), stream()),
        "clearing the cross-entropy count");
  countKeptKernel<<<blocksFor(rows), kThreads, 0, stream()>>>(lv, rows, count);
  checkLaunchOf(k);
  crossEntropyGradKernel<<<rowBlocks(rows), rowThreads(c), 0, stream()>>>(
      dataOf(arena, *logits), logits->dtype, lv, rows, c, dataOf(arena, *dloss),
      dloss->dtype, count, reduction == CLEAVE_SUM, dataOf(arena, *dlogits),
      dlogits->dtype, errorSlot());
  checkLaunchOf(k);
}

void cleave_rt_mse(char *arena, const cleave_tensor *pred,
                   const cleave_tensor *target, const cleave_tensor *out) {
  const char *k = "cleave_rt_mse";
  checkMse(k, pred, target, out);
  int64_t n = numElements(*pred);
  unsigned parts = partialBlocks((n + kThreads - 1) / kThreads);
  ScratchBuffer scratch(parts * sizeof(double), k);
  double *partial = scratch.as<double>();
  squaredErrorKernel<<<parts, kThreads, 0, stream()>>>(
      dataOf(arena, *pred), pred->dtype, dataOf(arena, *target), target->dtype,
      n, partial);
  checkLaunchOf(k);
  msePartialsKernel<<<1, kThreads, 0, stream()>>>(
      partial, parts, n, dataOf(arena, *out), out->dtype);
  checkLaunchOf(k);
}

} // extern "C"
