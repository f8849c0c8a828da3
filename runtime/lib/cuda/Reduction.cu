//===- Reduction.cu - reduce and softmax CUDA kernels ---------------------===//
//
// reduce over any sorted set of dims, and softmax / log-softmax along one
// dim. As on the CPU (runtime/lib/cpu/Reduction.cpp and Normalization.cpp,
// the reference), float reductions accumulate in f64 and integer ones in
// i64, max and min propagate NaN, and an empty reduction gives the identity.
//
// A reduction whose innermost dim is reduced takes a warp (short rows) or a
// block (long rows) per output element; one whose innermost dim is kept
// takes 32 adjacent outputs per block, with 8 rows of threads splitting the
// reduced elements, so that loads coalesce either way. When that leaves
// too few blocks to fill the GPU, the reduced elements are also split across
// blocks into partial results that a second kernel combines, always in the
// same order: results do not vary from run to run.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "KernelUtil.cuh"

#include "../cpu/KernelChecks.h"
#include "../cpu/Tensor.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace cleave::rt::cuda {
namespace {

//===----------------------------------------------------------------------===//
// reduce
//===----------------------------------------------------------------------===//

/// Dims of x as two lists, sizes and x strides in elements: the kept dims
/// (in out's element order; without x's innermost dim when that one is kept,
/// which reduceColumnsKernel walks itself) and the reduced dims.
struct ReducePlan {
  int32_t keptRank, reducedRank;
  int64_t keptShape[CLEAVE_RT_MAX_RANK], keptStrides[CLEAVE_RT_MAX_RANK];
  int64_t reducedShape[CLEAVE_RT_MAX_RANK], reducedStrides[CLEAVE_RT_MAX_RANK];

  /// The x element where kept index `o` starts.
  __device__ int64_t keptOffset(int64_t o) const {
    int64_t at = 0;
    for (int d = keptRank - 1; d >= 0; --d) {
      int64_t next = o / keptShape[d];
      at += (o - next * keptShape[d]) * keptStrides[d];
      o = next;
    }
    return at;
  }
  /// The offset of reduced index `r` from the start of its output.
  __device__ int64_t reducedOffset(int64_t r) const {
    if (reducedRank == 1)
      return r * reducedStrides[0];
    int64_t at = 0;
    for (int d = reducedRank - 1; d >= 0; --d) {
      int64_t next = r / reducedShape[d];
      at += (r - next * reducedShape[d]) * reducedStrides[d];
      r = next;
    }
    return at;
  }
};

/// f64 accumulation for float outputs, i64 for integer ones.
template <typename Acc>
__device__ inline Acc loadAcc(const char *x, int32_t t, int64_t i) {
  if constexpr (std::is_floating_point_v<Acc>)
    return Acc(loadF32(x, t, i));
  else
    return loadI64(x, t, i);
}

/// The value of an empty reduction: -inf or the lowest integer (max), +inf
/// or the largest integer (min), 0 (sum).
template <int Kind, typename Acc> __device__ inline Acc identityOf() {
  constexpr bool isFloat = std::is_floating_point_v<Acc>;
  if constexpr (Kind == CLEAVE_MAX_REDUCE && isFloat)
    return Acc(-INFINITY);
  else if constexpr (Kind == CLEAVE_MAX_REDUCE)
    return Acc(INT64_MIN);
  else if constexpr (Kind == CLEAVE_MIN_REDUCE && isFloat)
    return Acc(INFINITY);
  else if constexpr (Kind == CLEAVE_MIN_REDUCE)
    return Acc(INT64_MAX);
  else
    return Acc(0);
}

/// Combines with NaN propagation for max and min (v != v only for NaN).
template <int Kind> struct CombineOp {
  template <typename T> __device__ T operator()(T acc, T v) const {
    if constexpr (Kind == CLEAVE_MAX_REDUCE)
      return (v > acc || v != v) ? v : acc;
    else if constexpr (Kind == CLEAVE_MIN_REDUCE)
      return (v < acc || v != v) ? v : acc;
    else
      return acc + v;
  }
};

/// Stores the reduction `v` of `count` (> 0) elements as out element o.
template <int Kind, typename Acc>
__device__ inline void storeResult(Acc v, int64_t count, char *out,
                                   int32_t outType, int64_t o) {
  if constexpr (std::is_floating_point_v<Acc>) {
    if (Kind == CLEAVE_MEAN)
      v = v / Acc(count);
    storeF32(out, outType, o, float(v));
  } else {
    if (Kind == CLEAVE_MEAN)
      v = v / count; // truncates, as integer mean does
    storeI64(out, outType, o, v);
  }
}

/// Where a reduction kernel's results go: with `partial`, partial[o *
/// splits + s] for split s of output o, else out directly.
template <typename Acc> struct ReduceTarget {
  Acc *partial;
  int64_t splits, perSplit, count;
  char *out;
  int32_t outType;
};

/// Innermost dim reduced: a warp or block per (output, split).
template <int Kind, typename Acc, bool Warp>
__global__ void reduceRowsKernel(const char *x, int32_t xType, ReducePlan p,
                                 int64_t numOut, int64_t r,
                                 ReduceTarget<Acc> t) {
  RowGroup<Warp> g;
  CombineOp<Kind> op;
  Acc identity = identityOf<Kind, Acc>();
  for (int64_t task = g.first; task < numOut * t.splits; task += g.step) {
    int64_t o = task / t.splits, s = task - o * t.splits;
    int64_t base = p.keptOffset(o);
    int64_t begin = s * t.perSplit, end = min(r, begin + t.perSplit);
    Acc acc = identity;
    for (int64_t i = begin + g.lane; i < end; i += g.width)
      acc = op(acc, loadAcc<Acc>(x, xType, base + p.reducedOffset(i)));
    acc = groupReduce<Warp>(acc, identity, op);
    if (g.lane == 0) {
      if (t.partial)
        t.partial[task] = acc;
      else
        storeResult<Kind>(acc, t.count, t.out, t.outType, o);
    }
  }
}

constexpr int kColumns = 32, kColumnRows = 8;

/// Innermost dim kept (`inner` elements, stride 1): a block of 32 x 8
/// threads per (outer index, 32 inner outputs, split); the 8 rows of
/// threads split the reduced elements and are combined in a fixed order.
template <int Kind, typename Acc>
__global__ void __launch_bounds__(kColumns *kColumnRows)
    reduceColumnsKernel(const char *x, int32_t xType, ReducePlan p,
                        int64_t outer, int64_t inner, int64_t r,
                        ReduceTarget<Acc> t) {
  __shared__ Acc partial[kColumnRows][kColumns + 1];
  CombineOp<Kind> op;
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t tiles = (inner + kColumns - 1) / kColumns;
  int64_t tasks = outer * tiles * t.splits;
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    int64_t s = task % t.splits, rest = task / t.splits;
    int64_t tile = rest % tiles, ob = rest / tiles;
    int64_t c = tile * kColumns + tx;
    int64_t begin = s * t.perSplit, end = min(r, begin + t.perSplit);
    Acc acc = identityOf<Kind, Acc>();
    if (c < inner) {
      int64_t base = p.keptOffset(ob) + c;
      for (int64_t i = begin + ty; i < end; i += kColumnRows)
        acc = op(acc, loadAcc<Acc>(x, xType, base + p.reducedOffset(i)));
    }
    partial[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && c < inner) {
      for (int j = 1; j < kColumnRows; ++j)
        acc = op(acc, partial[j][tx]);
      int64_t o = ob * inner + c;
      if (t.partial)
        t.partial[o * t.splits + s] = acc;
      else
        storeResult<Kind>(acc, t.count, t.out, t.outType, o);
    }
    __syncthreads();
  }
}

/// Combines the splits of each output in order and stores the result.
template <int Kind, typename Acc>
__global__ void reduceSplitsKernel(int64_t numOut, ReduceTarget<Acc> t) {
  CombineOp<Kind> op;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < numOut;
       o += int64_t(gridDim.x) * blockDim.x) {
    Acc acc = t.partial[o * t.splits];
    for (int64_t s = 1; s < t.splits; ++s)
      acc = op(acc, t.partial[o * t.splits + s]);
    storeResult<Kind>(acc, t.count, t.out, t.outType, o);
  }
}

/// The value of an empty reduction, in every element of out.
__global__ void fillKernel(char *out, int32_t outType, int64_t n, bool isFloat,
                           float f, int64_t i64) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (isFloat)
      storeF32(out, outType, i, f);
    else
      storeI64(out, outType, i, i64);
  }
}

/// Blocks for `tasks` independent tasks of one block each.
unsigned taskBlocks(int64_t tasks) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(tasks, 65535 * 8)));
}

/// Splits of `r` reduced elements so that about kTargetBlocks blocks run:
/// at most `maxSplits`, each with at least `minPerSplit` elements.
constexpr int64_t kTargetBlocks = 1024;
int64_t splitsFor(int64_t blocks, int64_t r, int64_t minPerSplit) {
  int64_t want = (kTargetBlocks + blocks - 1) / blocks;
  int64_t most = (r + minPerSplit - 1) / minPerSplit;
  return std::max<int64_t>(1, std::min<int64_t>({want, most, 1024}));
}

template <int Kind, typename Acc>
void reduceLaunch(const char *x, int32_t xType, const ReducePlan &p,
                  bool columns, int64_t numOut, int64_t inner, int64_t r,
                  int64_t count, char *out, int32_t outType) {
  const char *k = "cleave_rt_reduce";
  ReduceTarget<Acc> t{nullptr, 1, r, count, out, outType};
  ScratchBuffer partials;
  auto split = [&](int64_t splits) {
    if (splits <= 1)
      return;
    t.splits = splits;
    t.perSplit = (r + splits - 1) / splits;
    partials.allocate(size_t(numOut * splits) * sizeof(Acc), k);
    t.partial = partials.as<Acc>();
  };
  if (columns) {
    int64_t outer = numOut / inner;
    int64_t blocks = outer * ((inner + kColumns - 1) / kColumns);
    split(splitsFor(blocks, r, 64));
    reduceColumnsKernel<Kind, Acc>
        <<<taskBlocks(blocks * t.splits), dim3(kColumns, kColumnRows), 0,
           stream()>>>(x, xType, p, outer, inner, r, t);
  } else if (r <= kWarpRowLimit) {
    reduceRowsKernel<Kind, Acc, true>
        <<<rowGroupBlocks(numOut, true), kThreads, 0, stream()>>>(x, xType, p,
                                                                  numOut, r, t);
  } else {
    split(splitsFor(numOut, r, 4096));
    reduceRowsKernel<Kind, Acc, false>
        <<<taskBlocks(numOut * t.splits), kThreads, 0, stream()>>>(
            x, xType, p, numOut, r, t);
  }
  checkLaunch("reduce");
  if (t.partial) {
    reduceSplitsKernel<Kind, Acc>
        <<<blocksFor(numOut), kThreads, 0, stream()>>>(numOut, t);
    checkLaunch("reduce");
  }
}

template <typename Acc>
void reduceTyped(int32_t kind, const char *x, int32_t xType,
                 const ReducePlan &p, bool columns, int64_t numOut,
                 int64_t inner, int64_t r, int64_t count, char *out,
                 int32_t outType) {
  switch (kind) {
  case CLEAVE_SUM:
    return reduceLaunch<CLEAVE_SUM, Acc>(x, xType, p, columns, numOut, inner, r,
                                         count, out, outType);
  case CLEAVE_MEAN:
    return reduceLaunch<CLEAVE_MEAN, Acc>(x, xType, p, columns, numOut, inner,
                                          r, count, out, outType);
  case CLEAVE_MAX_REDUCE:
    return reduceLaunch<CLEAVE_MAX_REDUCE, Acc>(x, xType, p, columns, numOut,
                                                inner, r, count, out, outType);
  default:
    return reduceLaunch<CLEAVE_MIN_REDUCE, Acc>(x, xType, p, columns, numOut,
                                                inner, r, count, out, outType);
  }
}

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

/// max that skips NaN, as the CPU's row max does (a NaN then makes the sum,
/// and so every output of the row, NaN).
struct MaxSkipNaN {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

/// Softmax along contiguous rows of `n`: a warp or a block per row. Every
/// element of a row is read before any is written, so out may be x.
template <bool Warp>
__global__ void softmaxRowsKernel(const char *x, int32_t xType, char *out,
                                  int32_t outType, int64_t rows, int64_t n,
                                  bool log) {
  RowGroup<Warp> g;
  for (int64_t row = g.first; row < rows; row += g.step) {
    int64_t base = row * n;
    float max = -INFINITY;
    for (int64_t i = g.lane; i < n; i += g.width) {
      float v = loadF32(x, xType, base + i);
      max = v > max ? v : max;
    }
    max = groupReduce<Warp>(max, -INFINITY, MaxSkipNaN());
    float sum[1] = {0.0f};
    for (int64_t i = g.lane; i < n; i += g.width)
      sum[0] += expf(loadF32(x, xType, base + i) - max);
    groupSum<Warp>(sum);
    if (log) {
      float shift = max + logf(sum[0]);
      for (int64_t i = g.lane; i < n; i += g.width)
        storeF32(out, outType, base + i, loadF32(x, xType, base + i) - shift);
    } else {
      float inv = 1.0f / sum[0];
      for (int64_t i = g.lane; i < n; i += g.width)
        storeF32(out, outType, base + i,
                 expf(loadF32(x, xType, base + i) - max) * inv);
    }
  }
}

/// Softmax along the middle dim of [outer, n, inner]: a thread per (outer,
/// inner) column, adjacent threads on adjacent columns.
__global__ void softmaxColumnsKernel(const char *x, int32_t xType, char *out,
                                     int32_t outType, int64_t outer, int64_t n,
                                     int64_t inner, bool log) {
  for (int64_t col = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       col < outer * inner; col += int64_t(gridDim.x) * blockDim.x) {
    int64_t o = col / inner, c = col - o * inner;
    int64_t base = o * n * inner + c;
    float max = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      float v = loadF32(x, xType, base + j * inner);
      max = v > max ? v : max;
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j)
      sum += expf(loadF32(x, xType, base + j * inner) - max);
    float shift = max + logf(sum), inv = 1.0f / sum;
    for (int64_t j = 0; j < n; ++j) {
      float v = loadF32(x, xType, base + j * inner);
      storeF32(out, outType, base + j * inner,
               log ? v - shift : expf(v - max) * inv);
    }
  }
}

} // namespace
} // namespace cleave::rt::cuda

extern "C" {

void cleave_rt_reduce(char *arena, int32_t kind, const cleave_tensor *x,
                      const cleave_tensor *out, const int64_t *dims,
                      int64_t num_dims) {
  const char *k = "cleave_rt_reduce";
  bool reduced[CLEAVE_RT_MAX_RANK] = {};
  checkReduce(k, kind, x, out, dims, num_dims, reduced);
  int64_t numOut = numElements(*out);
  if (numOut == 0)
    return;
  bool isFloat = isFloatType(out->dtype);
  int64_t count = 1;
  for (int d = 0; d < x->rank; ++d)
    if (reduced[d])
      count *= x->shape[d];
  char *outData = dataOf(arena, *out);
  if (count == 0) {
    // Empty: 0 (sum), NaN (float mean; integer mean 0), -inf or the lowest
    // integer (max), +inf or the largest integer (min).
    float f = kind == CLEAVE_MEAN         ? NAN
              : kind == CLEAVE_MAX_REDUCE ? -INFINITY
              : kind == CLEAVE_MIN_REDUCE ? INFINITY
                                          : 0.0f;
    int64_t i = kind == CLEAVE_MAX_REDUCE   ? INT64_MIN
                : kind == CLEAVE_MIN_REDUCE ? INT64_MAX
                                            : 0;
    fillKernel<<<blocksFor(numOut), kThreads, 0, stream()>>>(
        outData, out->dtype, numOut, isFloat, f, i);
    checkLaunch("reduce");
    return;
  }

  // Runs of adjacent dims of one kind (size-1 dims dropped), with their
  // strides in x.
  std::vector<int64_t> sizes;
  std::vector<bool> isReduced;
  for (int d = 0; d < x->rank; ++d) {
    if (x->shape[d] == 1)
      continue;
    if (!sizes.empty() && isReduced.back() == reduced[d]) {
      sizes.back() *= x->shape[d];
      continue;
    }
    sizes.push_back(x->shape[d]);
    isReduced.push_back(reduced[d]);
  }
  int groups = int(sizes.size());
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (int g = groups - 1; g >= 0; --g) {
    strides[size_t(g)] = stride;
    stride *= sizes[size_t(g)];
  }
  // With the innermost run kept, outputs are read as columns and that run
  // is not part of the kept dims that locate an output's start.
  bool columns = groups > 0 && !isReduced.back();
  int64_t inner = columns ? sizes.back() : 1;
  ReducePlan p{};
  int64_t r = 1;
  for (int g = 0; g < groups - (columns ? 1 : 0); ++g) {
    if (isReduced[size_t(g)]) {
      p.reducedShape[p.reducedRank] = sizes[size_t(g)];
      p.reducedStrides[p.reducedRank++] = strides[size_t(g)];
      r *= sizes[size_t(g)];
    } else {
      p.keptShape[p.keptRank] = sizes[size_t(g)];
      p.keptStrides[p.keptRank++] = strides[size_t(g)];
    }
  }
  // out may be x itself (a reduction over size-1 dims): work on a copy.
  ScratchBuffer copy;
  const char *xData = dataOf(arena, *x);
  if (overlaps(*x, *out))
    xData = copyToScratch(copy, xData,
                          size_t(numElements(*x)) * elementSize(x->dtype), k);
  if (isFloat)
    reduceTyped<double>(kind, xData, x->dtype, p, columns, numOut, inner, r,
                        count, outData, out->dtype);
  else
    reduceTyped<int64_t>(kind, xData, x->dtype, p, columns, numOut, inner, r,
                         count, outData, out->dtype);
}

void cleave_rt_softmax(char *arena, const cleave_tensor *x,
                       const cleave_tensor *out, int64_t dim, int32_t log) {
  const char *k = "cleave_rt_softmax";
  checkTensor(k, "x", x);
  checkTensor(k, "out", out);
  if (!sameShape(*x, *out))
    cleave_rt_fail("%s: x %s and out %s differ in shape", k,
                   shapeString(*x).c_str(), shapeString(*out).c_str());
  if (dim < 0 || dim >= x->rank)
    cleave_rt_fail("%s: dim %lld is out of range for rank %d", k,
                   (long long)dim, x->rank);
  if (!isFloatType(out->dtype))
    cleave_rt_fail("%s: unsupported dtype %s", k, dtypeName(out->dtype));
  int64_t outer = 1, inner = 1, n = x->shape[dim];
  for (int d = 0; d < dim; ++d)
    outer *= x->shape[d];
  for (int d = int(dim) + 1; d < x->rank; ++d)
    inner *= x->shape[d];
  if (outer * n * inner == 0)
    return;
  // Each row (or column) is read whole before it is written, and rows do not
  // overlap one another, so out may be x; any other overlap gets a copy.
  ScratchBuffer copy;
  const char *xData = dataOf(arena, *x);
  if (overlaps(*x, *out) &&
      !(x->offset == out->offset && x->dtype == out->dtype))
    xData = copyToScratch(copy, xData,
                          size_t(numElements(*x)) * elementSize(x->dtype), k);
  char *outData = dataOf(arena, *out);
  if (inner > 1) {
    softmaxColumnsKernel<<<blocksFor(outer * inner), kThreads, 0, stream()>>>(
        xData, x->dtype, outData, out->dtype, outer, n, inner, log != 0);
  } else if (n <= kWarpRowLimit) {
    softmaxRowsKernel<true>
        <<<rowGroupBlocks(outer, true), kThreads, 0, stream()>>>(
            xData, x->dtype, outData, out->dtype, outer, n, log != 0);
  } else {
    softmaxRowsKernel<false>
        <<<rowGroupBlocks(outer, false), rowBlockThreads(n), 0, stream()>>>(
            xData, x->dtype, outData, out->dtype, outer, n, log != 0);
  }
  checkLaunch("softmax");
}

} // extern "C"
