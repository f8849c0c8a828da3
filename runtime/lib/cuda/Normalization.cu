//===- Normalization.cu - layer_norm and rms_norm CUDA kernels ------------===//
//
// layer_norm and rms_norm over the trailing dims [dim, rank), and their
// gradients, on the GPU. The CPU kernels (runtime/lib/cpu/Normalization.cpp)
// are the reference: the same formulas, statistics in f32 with the
// reciprocal square root in f64, scale and bias given either as exactly
// prod(x.shape[dim:]) elements or broadcasting to those dims.
//
// Rows take a warp each (up to 1024 elements) or a block each. Every row
// is read whole before any element of it is written, so out may be x (and
// dx may be x or dy). The dscale and dbias sums over rows are deterministic:
// blocks of 32 columns x a chunk of rows write f64 partial sums, which a
// second kernel adds up in chunk order (and a third sums over the dims along
// which scale or bias broadcast).
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "KernelUtil.cuh"

#include "../cpu/KernelChecks.h"
#include "../cpu/Tensor.h"

#include <algorithm>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace cleave::rt::cuda {
namespace {

/// The normalized dims of x (x.shape[dim:]) as a descriptor.
cleave_tensor trailingShape(const cleave_tensor &x, int64_t dim) {
  cleave_tensor trailing = {};
  trailing.dtype = CLEAVE_F32;
  trailing.rank = x.rank - int32_t(dim);
  for (int d = 0; d < trailing.rank; ++d)
    trailing.shape[d] = x.shape[dim + d];
  return trailing;
}

struct ToF32Body {
  const char *t;
  int32_t type;
  float *dst;

  template <typename Index>
  __device__ void operator()(int64_t o, const Index (&off)[1]) const {
    dst[o] = loadF32(t, type, off[0]);
  }
};

/// scale or bias as N = prod(x.shape[dim:]) f32 values: the tensor itself
/// when it is f32 with N elements (read in row-major order), else a
/// converted copy in `buffer`, broadcast NumPy-style to x.shape[dim:] when
/// it has another element count.
const float *trailingOperand(const char *kernel, char *arena,
                             const cleave_tensor &t, const cleave_tensor &x,
                             int64_t dim, ScratchBuffer &buffer) {
  cleave_tensor trailing = trailingShape(x, dim);
  int64_t n = numElements(trailing);
  const char *data = dataOf(arena, t);
  if (numElements(t) == n && t.dtype == CLEAVE_F32)
    return reinterpret_cast<const float *>(data);
  buffer.allocate(size_t(n) * sizeof(float), kernel);
  float *dst = buffer.as<float>();
  if (numElements(t) == n) {
    deviceToF32(data, t.dtype, dst, n, kernel);
    return dst;
  }
  // makeBroadcast and launchBroadcast name the kernel without the prefix.
  const char *name = kernel + sizeof("cleave_rt_") - 1;
  const cleave_tensor *ops[] = {&t};
  auto b = makeBroadcast(name, ops, 1, trailing);
  launchBroadcast<1>(name, b, n, ToF32Body{data, t.dtype, dst});
  return dst;
}

/// How a trailing operand of another element count than N broadcasts to
/// the normalized dims: their sizes, and which of them it broadcasts along
/// (its size is 1 there and x's is not).
struct TrailingMap {
  int32_t rank;
  int64_t size[CLEAVE_RT_MAX_RANK];
  bool broadcast[CLEAVE_RT_MAX_RANK];
};

/// The map of `t` right-aligned against x.shape[dim:]; fails naming `what`
/// unless it broadcasts.
TrailingMap trailingMap(const char *kernel, const char *what,
                        const cleave_tensor &t, const cleave_tensor &x,
                        int64_t dim) {
  int64_t strides[CLEAVE_RT_MAX_RANK];
  trailingStrides(kernel, what, t, x, dim, strides);
  TrailingMap m{};
  m.rank = x.rank - int32_t(dim);
  for (int d = 0; d < m.rank; ++d) {
    m.size[d] = x.shape[dim + d];
    m.broadcast[d] = strides[d] == 0 && m.size[d] != 1;
  }
  return m;
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// layer_norm (or, with Rms, rms_norm) of rows of `n` elements: a warp or a
/// block per row. bias may be NULL.
template <bool Warp, bool Rms>
__global__ void normRowsKernel(const char *x, int32_t xType, const float *scale,
                               const float *bias, char *out, int32_t outType,
                               int64_t rows, int64_t n, double eps) {
  RowGroup<Warp> g;
  for (int64_t row = g.first; row < rows; row += g.step) {
    int64_t base = row * n;
    if constexpr (Rms) {
      float sq[1] = {0.0f};
      for (int64_t i = g.lane; i < n; i += g.width) {
        float v = loadF32(x, xType, base + i);
        sq[0] += v * v;
      }
      groupSum<Warp>(sq);
      float rrms = float(1.0 / sqrt(double(sq[0]) / double(n) + eps));
      for (int64_t i = g.lane; i < n; i += g.width)
        storeF32(out, outType, base + i,
                 loadF32(x, xType, base + i) * rrms * scale[i]);
    } else {
      float sum[1] = {0.0f};
      for (int64_t i = g.lane; i < n; i += g.width)
        sum[0] += loadF32(x, xType, base + i);
      groupSum<Warp>(sum);
      float mean = sum[0] / float(n);
      float var[1] = {0.0f};
      for (int64_t i = g.lane; i < n; i += g.width) {
        float c = loadF32(x, xType, base + i) - mean;
        var[0] += c * c;
      }
      groupSum<Warp>(var);
      float rstd = float(1.0 / sqrt(double(var[0]) / double(n) + eps));
      for (int64_t i = g.lane; i < n; i += g.width) {
        float v = (loadF32(x, xType, base + i) - mean) * rstd * scale[i];
        storeF32(out, outType, base + i, bias ? v + bias[i] : v);
      }
    }
  }
}

template <bool Rms>
void launchNormRows(const char *x, int32_t xType, const float *scale,
                    const float *bias, char *out, int32_t outType, int64_t rows,
                    int64_t n, double eps) {
  if (n <= kWarpRowLimit)
    normRowsKernel<true, Rms>
        <<<rowGroupBlocks(rows, true), kThreads, 0, stream()>>>(
            x, xType, scale, bias, out, outType, rows, n, eps);
  else
    normRowsKernel<false, Rms>
        <<<rowGroupBlocks(rows, false), rowBlockThreads(n), 0, stream()>>>(
            x, xType, scale, bias, out, outType, rows, n, eps);
  checkLaunch(Rms ? "rms_norm" : "layer_norm");
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

/// Per-row statistics that the dscale / dbias sums need: mean and rstd
/// (layer_norm), or 1 / rms.
template <bool Rms> constexpr int kStats = Rms ? 1 : 2;

/// The row part of the gradients, with g = dy * scale. layer_norm, with
/// xhat = (x - mean) rstd: dx = rstd (g - mean(g) - xhat mean(g xhat));
/// rms_norm, with r = 1 / sqrt(mean(x^2) + eps): dx = r (g - x r^2
/// mean(g x)). Writes dx when `writeDx` and the row statistics when `stats`
/// is not NULL.
template <bool Warp, bool Rms>
__global__ void normGradRowsKernel(const char *x, int32_t xType, const char *dy,
                                   int32_t dyType, const float *scale, char *dx,
                                   int32_t dxType, int64_t rows, int64_t n,
                                   double eps, float *stats, bool writeDx) {
  RowGroup<Warp> g;
  for (int64_t row = g.first; row < rows; row += g.step) {
    int64_t base = row * n;
    if constexpr (Rms) {
      float sums[2] = {0.0f, 0.0f}; // sum(x^2), sum(g x)
      for (int64_t i = g.lane; i < n; i += g.width) {
        float xv = loadF32(x, xType, base + i);
        sums[0] += xv * xv;
        sums[1] += (loadF32(dy, dyType, base + i) * scale[i]) * xv;
      }
      groupSum<Warp>(sums);
      double rrmsD = 1.0 / sqrt(double(sums[0]) / double(n) + eps);
      float rrms = float(rrmsD);
      float c = float(rrmsD * rrmsD * double(sums[1]) / double(n));
      if (stats && g.lane == 0)
        stats[row] = rrms;
      if (writeDx)
        for (int64_t i = g.lane; i < n; i += g.width) {
          float xv = loadF32(x, xType, base + i);
          float dyv = loadF32(dy, dyType, base + i);
          storeF32(dx, dxType, base + i, rrms * (dyv * scale[i] - xv * c));
        }
    } else {
      float sum[1] = {0.0f};
      for (int64_t i = g.lane; i < n; i += g.width)
        sum[0] += loadF32(x, xType, base + i);
      groupSum<Warp>(sum);
      float m = sum[0] / float(n);
      float sums[3] = {0.0f, 0.0f, 0.0f}; // var, sum(g), sum(g (x - mean))
      for (int64_t i = g.lane; i < n; i += g.width) {
        float c = loadF32(x, xType, base + i) - m;
        float gv = loadF32(dy, dyType, base + i) * scale[i];
        sums[0] += c * c;
        sums[1] += gv;
        sums[2] += gv * c;
      }
      groupSum<Warp>(sums);
      float rstd = float(1.0 / sqrt(double(sums[0]) / double(n) + eps));
      float meanG = sums[1] / float(n), meanGX = sums[2] * rstd / float(n);
      if (stats && g.lane == 0) {
        stats[2 * row] = m;
        stats[2 * row + 1] = rstd;
      }
      if (writeDx)
        for (int64_t i = g.lane; i < n; i += g.width) {
          float xhat = (loadF32(x, xType, base + i) - m) * rstd;
          float dyv = loadF32(dy, dyType, base + i);
          storeF32(dx, dxType, base + i,
                   rstd * (dyv * scale[i] - meanG - xhat * meanGX));
        }
    }
  }
}

template <bool Rms>
void launchNormGradRows(const char *x, int32_t xType, const char *dy,
                        int32_t dyType, const float *scale, char *dx,
                        int32_t dxType, int64_t rows, int64_t n, double eps,
                        float *stats, bool writeDx) {
  if (n <= kWarpRowLimit)
    normGradRowsKernel<true, Rms>
        <<<rowGroupBlocks(rows, true), kThreads, 0, stream()>>>(
            x, xType, dy, dyType, scale, dx, dxType, rows, n, eps, stats,
            writeDx);
  else
    normGradRowsKernel<false, Rms>
        <<<rowGroupBlocks(rows, false), rowBlockThreads(n), 0, stream()>>>(
            x, xType, dy, dyType, scale, dx, dxType, rows, n, eps, stats,
            writeDx);
  checkLaunch(Rms ? "rms_norm_grad" : "layer_norm_grad");
}

constexpr int kColumns = 32, kColumnRows = 8;

/// Partial sums over a chunk of rows of the dscale terms (dy xhat, or
/// dy x / rms) and, for layer_norm when `dbPartial` is not NULL, of the
/// dbias terms (dy): a block of 32 columns x 8 rows of threads per (column
/// tile, chunk), the 8 thread rows combined in order. dsPartial (may be
/// NULL) and dbPartial are [chunks, n].
template <bool Rms>
__global__ void __launch_bounds__(kColumns *kColumnRows)
    normGradColumnsKernel(const char *x, int32_t xType, const char *dy,
                          int32_t dyType, const float *stats, int64_t rows,
                          int64_t n, int64_t rowsPerChunk, int64_t chunks,
                          double *dsPartial, double *dbPartial) {
  __shared__ double shared[2][kColumnRows][kColumns + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t tiles = (n + kColumns - 1) / kColumns;
  for (int64_t task = blockIdx.x; task < tiles * chunks; task += gridDim.x) {
    int64_t tile = task % tiles, chunk = task / tiles;
    int64_t j = tile * kColumns + tx;
    int64_t begin = chunk * rowsPerChunk;
    int64_t end = min(rows, begin + rowsPerChunk);
    double ds = 0.0, db = 0.0;
    if (j < n)
      for (int64_t r = begin + ty; r < end; r += kColumnRows) {
        float xv = loadF32(x, xType, r * n + j);
        float dyv = loadF32(dy, dyType, r * n + j);
        if constexpr (Rms) {
          ds += double(dyv * (xv * stats[r]));
        } else {
          ds += double(dyv * ((xv - stats[2 * r]) * stats[2 * r + 1]));
          db += double(dyv);
        }
      }
    shared[0][ty][tx] = ds;
    shared[1][ty][tx] = db;
    __syncthreads();
    if (ty == 0 && j < n) {
      for (int k = 1; k < kColumnRows; ++k) {
        ds += shared[0][k][tx];
        db += shared[1][k][tx];
      }
      if (dsPartial)
        dsPartial[chunk * n + j] = ds;
      if (dbPartial)
        dbPartial[chunk * n + j] = db;
    }
    __syncthreads();
  }
}

/// Sums the chunks of `partial` [chunks, n] in order: into `full` (f64)
/// when it is not NULL, else stored into `out` (N elements).
__global__ void sumChunksKernel(const double *partial, int64_t chunks,
                                int64_t n, double *full, char *out,
                                int32_t outType) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n;
       j += int64_t(gridDim.x) * blockDim.x) {
    double s = 0.0;
    for (int64_t c = 0; c < chunks; ++c)
      s += partial[c * n + j];
    if (full)
      full[j] = s;
    else
      storeF32(out, outType, j, float(s));
  }
}

/// Out element `at` of a broadcasting trailing operand's gradient: the sum
/// of the `per` elements of `full` (over the normalized dims) that read it.
__global__ void trailingGradKernel(const double *full, TrailingMap m,
                                   int64_t count, int64_t per, char *out,
                                   int32_t outType) {
  for (int64_t at = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; at < count;
       at += int64_t(gridDim.x) * blockDim.x) {
    // The coordinates of `at` along the dims it does not broadcast along.
    int64_t coord[CLEAVE_RT_MAX_RANK];
    int64_t rest = at;
    for (int d = m.rank - 1; d >= 0; --d) {
      coord[d] = 0;
      if (!m.broadcast[d]) {
        coord[d] = rest % m.size[d];
        rest /= m.size[d];
      }
    }
    double s = 0.0;
    for (int64_t k = 0; k < per; ++k) {
      int64_t kr = k, i = 0, stride = 1;
      for (int d = m.rank - 1; d >= 0; --d) {
        int64_t c = coord[d];
        if (m.broadcast[d]) {
          c = kr % m.size[d];
          kr /= m.size[d];
        }
        i += c * stride;
        stride *= m.size[d];
      }
      s += full[i];
    }
    storeF32(out, outType, at, float(s));
  }
}

/// Stores the gradient of a trailing operand `t` (dscale or dbias) from the
/// partial sums [chunks, n]: directly when t has n elements, else summed
/// over the dims along which it broadcasts.
void storeTrailingGrad(const char *kernel, const char *what, char *arena,
                       const cleave_tensor &t, const cleave_tensor &x,
                       int64_t dim, const double *partial, int64_t chunks,
                       int64_t n) {
  int64_t count = numElements(t);
  char *out = dataOf(arena, t);
  if (count == n) {
    if (n)
      sumChunksKernel<<<blocksFor(n), kThreads, 0, stream()>>>(
          partial, chunks, n, nullptr, out, t.dtype);
    checkLaunchOf(kernel);
    return;
  }
  TrailingMap m = trailingMap(kernel, what, t, x, dim);
  if (count == 0)
    return;
  ScratchBuffer full(size_t(n) * sizeof(double), kernel);
  if (n)
    sumChunksKernel<<<blocksFor(n), kThreads, 0, stream()>>>(
        partial, chunks, n, full.as<double>(), nullptr, 0);
  trailingGradKernel<<<blocksFor(count), kThreads, 0, stream()>>>(
      full.as<double>(), m, count, n / count, out, t.dtype);
  checkLaunchOf(kernel);
}

/// layer_norm_grad and, with Rms, rms_norm_grad (dbias NULL).
template <bool Rms>
void normGrad(const char *k, char *arena, const cleave_tensor *x,
              const cleave_tensor *scale, const cleave_tensor *dy,
              const cleave_tensor *dx, const cleave_tensor *dscale,
              const cleave_tensor *dbias, int64_t dim, double eps) {
  checkNormGrad(k, x, scale, dy, dx, dscale, dbias, dim);
  ScratchBuffer scaleBuffer;
  const float *s = trailingOperand(k, arena, *scale, *x, dim, scaleBuffer);
  int64_t rows, n;
  rowsOf(*x, dim, rows, n);
  const char *xd = dataOf(arena, *x), *dyd = dataOf(arena, *dy);
  char *dxd = dataOf(arena, *dx);
  bool hasRows = rows > 0 && n > 0;
  if (!dscale && !dbias) {
    if (hasRows)
      launchNormGradRows<Rms>(xd, x->dtype, dyd, dy->dtype, s, dxd, dx->dtype,
                              rows, n, eps, nullptr, true);
    return;
  }
  // The row statistics first; dx with them unless dx overwrites x or dy,
  // which the column sums still read: then dx comes last.
  bool dxLast = overlaps(*dx, *x) || overlaps(*dx, *dy);
  ScratchBuffer stats(size_t(rows) * kStats<Rms> * sizeof(float), k);
  if (hasRows)
    launchNormGradRows<Rms>(xd, x->dtype, dyd, dy->dtype, s, dxd, dx->dtype,
                            rows, n, eps, stats.as<float>(), !dxLast);
  // Chunks of rows such that about 1024 blocks run, each with 8 rows or
  // more (one chunk when there are no rows: the sums are then zeros).
  int64_t tiles = (n + kColumns - 1) / kColumns;
  int64_t chunks = std::max<int64_t>(
      1, std::min<int64_t>({(1024 + tiles - 1) / std::max<int64_t>(tiles, 1),
                            (rows + kColumnRows - 1) / kColumnRows, 1024}));
  int64_t rowsPerChunk = (rows + chunks - 1) / chunks;
  if (rowsPerChunk > 0)
    chunks = (rows + rowsPerChunk - 1) / rowsPerChunk;
  ScratchBuffer dsPartial, dbPartial;
  size_t partialBytes = size_t(chunks * n) * sizeof(double);
  if (dscale)
    dsPartial.allocate(partialBytes, k);
  if (dbias)
    dbPartial.allocate(partialBytes, k);
  if (n > 0) {
    int64_t blocks = std::min<int64_t>(tiles * chunks, 65535 * 8);
    normGradColumnsKernel<Rms>
        <<<unsigned(blocks), dim3(kColumns, kColumnRows), 0, stream()>>>(
            xd, x->dtype, dyd, dy->dtype, stats.as<float>(), rows, n,
            rowsPerChunk, chunks, dsPartial.as<double>(),
            dbPartial.as<double>());
    checkLaunchOf(k);
  }
  if (dscale)
    storeTrailingGrad(k, "dscale", arena, *dscale, *x, dim,
                      dsPartial.as<double>(), chunks, n);
  if (dbias)
    storeTrailingGrad(k, "dbias", arena, *dbias, *x, dim,
                      dbPartial.as<double>(), chunks, n);
  if (dxLast && hasRows)
    launchNormGradRows<Rms>(xd, x->dtype, dyd, dy->dtype, s, dxd, dx->dtype,
                            rows, n, eps, nullptr, true);
}

} // namespace
} // namespace cleave::rt::cuda

extern "C" {

void cleave_rt_layer_norm(char *arena, const cleave_tensor *x,
                          const cleave_tensor *scale, const cleave_tensor *bias,
                          const cleave_tensor *out, int64_t dim, double eps) {
  const char *k = "cleave_rt_layer_norm";
  checkNorm(k, x, out, dim);
  checkTensor(k, "scale", scale);
  if (bias)
    checkTensor(k, "bias", bias);
  ScratchBuffer scaleBuffer, biasBuffer;
  const float *s = trailingOperand(k, arena, *scale, *x, dim, scaleBuffer);
  const float *b =
      bias ? trailingOperand(k, arena, *bias, *x, dim, biasBuffer) : nullptr;
  int64_t rows, n;
  rowsOf(*x, dim, rows, n);
  if (rows == 0 || n == 0)
    return;
  launchNormRows<false>(dataOf(arena, *x), x->dtype, s, b, dataOf(arena, *out),
                        out->dtype, rows, n, eps);
}

void cleave_rt_rms_norm(char *arena, const cleave_tensor *x,
                        const cleave_tensor *scale, const cleave_tensor *out,
                        int64_t dim, double eps) {
  const char *k = "cleave_rt_rms_norm";
  checkNorm(k, x, out, dim);
  checkTensor(k, "scale", scale);
  ScratchBuffer scaleBuffer;
  const float *s = trailingOperand(k, arena, *scale, *x, dim, scaleBuffer);
  int64_t rows, n;
  rowsOf(*x, dim, rows, n);
  if (rows == 0 || n == 0)
    return;
  launchNormRows<true>(dataOf(arena, *x), x->dtype, s, nullptr,
                       dataOf(arena, *out), out->dtype, rows, n, eps);
}

void cleave_rt_layer_norm_grad(char *arena, const cleave_tensor *x,
                               const cleave_tensor *scale,
                               const cleave_tensor *dy, const cleave_tensor *dx,
                               const cleave_tensor *dscale,
                               const cleave_tensor *dbias, int64_t dim,
                               double eps) {
  normGrad<false>("cleave_rt_layer_norm_grad", arena, x, scale, dy, dx, dscale,
                  dbias, dim, eps);
}

void cleave_rt_rms_norm_grad(char *arena, const cleave_tensor *x,
                             const cleave_tensor *scale,
                             const cleave_tensor *dy, const cleave_tensor *dx,
                             const cleave_tensor *dscale, int64_t dim,
                             double eps) {
  normGrad<true>("cleave_rt_rms_norm_grad", arena, x, scale, dy, dx, dscale,
                 nullptr, dim, eps);
}

} // extern "C"
