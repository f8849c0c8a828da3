//===- FlashAttention.cu - fused tiled attention CUDA kernels -------------===//
//
// Attention without materialized scores (FlashAttention-2): on CUDA cores in
// f32 throughout, and for 16-bit operands on tensor cores
// (TensorCoreAttention.cu, with the same passes and the same deterministic
// order as the CUDA-core kernels here). Tiles are kTile query rows by kTile
// keys; a block of 128 threads is 8 row groups of 16 lanes, and a thread owns
// rows ty + 8 i and columns tx + 16 j of every tile it computes, so a score row
// lives in one half warp and its max and sum are shuffle reductions. Operands
// are staged in shared memory as f32 with an odd row stride (the 16 rows a half
// warp reads at one column fall in distinct banks). The kernels are compiled
// for head dims up to 32, 64 and 128 (a thread holds DMax / 16 accumulator
// columns per row; 92 to 168 registers, no spills on sm_80). Dynamic shared
// memory at D = Dv = 64 / 128: forward 29 / 53 KB, backward query pass 37 / 69
// KB, key pass 41 / 73 KB; past the default 48 KB the launch opts in (every
// sm_80+ device grants at least 99 KB).
//
// Forward (queryKernel): one block per (batch, head, query tile) streams
// the K and V tiles of its kv head through shared memory with the online
// softmax (running max m and sum l per row, the output rescaled by
// exp(m_old - m_new)), and stores out = O / l. Under causal, key tiles
// past the tile's last query are never loaded, and the heaviest query
// tiles get the lowest block indices (they start first).
//
// Backward: the ABI's attention_grad receives neither the output nor the
// forward's row statistics, so it recomputes them. queryKernel in its
// gradient form runs the forward recurrence per query tile, keeps O only
// in registers to form Delta = rowsum(dO * O) (= rowsum(P * dP)), writes
// (m, 1 / l, Delta) per row to stream-ordered scratch, then streams the K
// and V tiles a second time: P = exp(s - m) / l, dP = dO v^T,
// dS = P (dP - Delta), dq = scale dS k. keyKernel then gives one block per
// (batch, kv head, key tile) that keeps its K and V tiles in shared memory
// and walks the query tiles of every query head sharing the kv head,
// recomputing P and dS from the saved statistics and accumulating
// dv = P^T dO and dk = scale dS^T q in registers. Every output element is
// owned by one thread and summed in a fixed order (query heads of a group,
// then query tiles, then rows): no atomics, so the gradients are bitwise
// reproducible. The cost is the third pass over the scores (FlashAttention-2
// accumulates dq with atomics instead).
//
// A fully masked row has m = -inf: its probabilities are computed against
// 0 instead (exp(-inf) = 0, never exp(-inf + inf) = NaN), 1 / l is taken as
// 0, and the row's output and gradients are zeros, as the ABI specifies.
//
//===----------------------------------------------------------------------===//

#include "FlashAttentionKernels.cuh"

#include "DeviceUtil.cuh"

#include <climits>

using namespace cleave::rt;
using namespace cleave::rt::cuda;
using namespace cleave::rt::cuda::flash;

namespace {

/// Query rows and keys per tile.
constexpr int kTile = 32;
/// A thread's share of a kTile x kTile score tile: rows ty + 8 i, columns
/// tx + 16 j.
constexpr int kRowsPerThread = kTile / 8;
constexpr int kColsPerThread = kTile / 16;
/// Row stride of the staged score tiles (odd, see paddedLd).
constexpr int kScoreLd = kTile + 1;

/// The row stride of a staged tile of rows of n floats: odd, so that 16
/// rows read at one column hit 16 distinct banks.
__host__ __device__ inline int paddedLd(int n) { return n | 1; }

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// The max and the sum over the 16 lanes of a row group (xor shuffles stay
/// within the half warp), in every lane. Every lane of the warp must call.
__device__ inline float rowMax16(float v) {
  for (int offset = 8; offset > 0; offset >>= 1) {
    float w = __shfl_xor_sync(0xffffffffu, v, offset);
    v = w > v ? w : v;
  }
  return v;
}
__device__ inline float rowSum16(float v) {
  for (int offset = 8; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// Stages kTile rows of a row-major [*, cols] operand, from element
/// `first`, as f32 into `dst` (row stride ld). Rows from `valid` on are
/// zeros, so products over them vanish. Coalesced along the rows.
__device__ inline void loadTile(float *dst, int ld, const char *src,
                                int32_t dtype, int64_t first, int64_t valid,
                                int cols) {
  for (int e = threadIdx.x; e < kTile * cols; e += kBlockThreads) {
    int r = e / cols, c = e - r * cols;
    dst[r * ld + c] =
        r < valid ? loadF32(src, dtype, first + int64_t(r) * cols + c) : 0.0f;
  }
}

/// acc[i][j] = (row ty + 8 i of a) . (row tx + 16 j of b) over n columns of
/// two staged tiles.
__device__ inline void dotTile(float (&acc)[kRowsPerThread][kColsPerThread],
                               const float *a, int lda, const float *b, int ldb,
                               int n) {
  int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j)
      acc[i][j] = 0.0f;
  for (int d = 0; d < n; ++d) {
    float av[kRowsPerThread], bv[kColsPerThread];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i)
      av[i] = a[(ty + 8 * i) * lda + d];
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j)
      bv[j] = b[(tx + 16 * j) * ldb + d];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i)
#pragma unroll
      for (int j = 0; j < kColsPerThread; ++j)
        acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
  }
}

/// acc[i][jj] += sum over keys c of s[row ty + 8 i][c] * m[c][tx + 16 jj]:
/// this thread's rows of (staged score tile) x (staged [key, width] tile),
/// columns past `width` read as 0 (O += P V, dq += dS K).
template <int NJ>
__device__ inline void accumulateScoreProduct(
    float (&acc)[kRowsPerThread][NJ], const float *s, const float *m, int ld,
    int width, int64_t keys) {
  int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  for (int c = 0; c < keys; ++c) {
    float mc[NJ];
#pragma unroll
    for (int jj = 0; jj < NJ; ++jj) {
      int d = tx + 16 * jj;
      mc[jj] = d < width ? m[c * ld + d] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      float sc = s[(ty + 8 * i) * kScoreLd + c];
#pragma unroll
      for (int jj = 0; jj < NJ; ++jj)
        acc[i][jj] = fmaf(sc, mc[jj], acc[i][jj]);
    }
  }
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Stores rows ty + 8 i < rows of `acc` times factor[i], columns
/// tx + 16 jj < cols, as rows firstRow + r of a row-major [*, cols] output.
template <int NJ>
__device__ inline void storeRows(char *dst, int32_t dtype, int64_t firstRow,
                                 int64_t rows, int cols,
                                 const float (&acc)[kRowsPerThread][NJ],
                                 const float (&factor)[kRowsPerThread]) {
  int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    int r = ty + 8 * i;
    if (r >= rows)
      continue;
    int64_t at = (firstRow + r) * cols;
#pragma unroll
    for (int jj = 0; jj < NJ; ++jj) {
      int d = tx + 16 * jj;
      if (d < cols)
        storeF32(dst, dtype, at + d, acc[i][jj] * factor[i]);
    }
  }
}

/// Stages keys [k0, k0 + kTile) of kv head bhk: K into sK, V into sV.
__device__ inline void loadKeys(const Params &p, float *sK, int ldd, float *sV,
                                int ldv, int64_t bhk, int64_t k0) {
  int64_t keys = min(int64_t(kTile), p.Sk - k0);
  loadTile(sK, ldd, p.k, p.kType, (bhk * p.Sk + k0) * p.D, keys, p.D);
  loadTile(sV, ldv, p.v, p.vType, (bhk * p.Sk + k0) * p.Dv, keys, p.Dv);
}

/// The query tile of a queryKernel block and its shared memory.
struct QueryTile {
  int64_t b, h, bhk;
  int64_t q0, rows; // tile rows [q0, q0 + rows) of the head
  int64_t firstRow; // the row of q0 in [B * H * Sq]
  int64_t keyEnd;   // keys [0, keyEnd) are read (fewer under causal)
  float *q, *k, *v; // staged tiles, row strides ldd (q, k) and ldv (v)
  float *s, *dout;  // scores (stride kScoreLd) and dO (stride ldv)
  int ldd, ldv;
};

/// The gradient half of queryKernel: from the tile's forward results (o
/// unnormalized, the running max m, inv = 1 / l), writes the row
/// statistics and then streams the keys again for dq = scale dS K with
/// dS = P (dO V^T - Delta).
template <int DMax>
__device__ inline void queryGrad(const Params &p, const QueryTile &t,
                                 const float (&o)[kRowsPerThread][DMax / 16],
                                 const float (&m)[kRowsPerThread],
                                 const float (&inv)[kRowsPerThread]) {
  constexpr int R = kRowsPerThread, C = kColsPerThread, NJ = DMax / 16;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  // The max (0 for a fully masked row, whose scores are all -inf, so that
  // P = exp(-inf - 0) * 0 = 0 below), 1 / sum and Delta = rowsum(dO * O).
  float mRow[R], delta[R];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    int r = ty + 8 * i;
    float part = 0.0f;
#pragma unroll
    for (int jj = 0; jj < NJ; ++jj) {
      int d = tx + 16 * jj;
      if (d < p.Dv)
        part += t.dout[r * t.ldv + d] * (o[i][jj] * inv[i]);
    }
    delta[i] = rowSum16(part);
    mRow[i] = m[i] == -INFINITY ? 0.0f : m[i];
    if (tx == 0 && r < t.rows) {
      p.rowMax[t.firstRow + r] = mRow[i];
      p.rowInv[t.firstRow + r] = inv[i];
      p.rowDot[t.firstRow + r] = delta[i];
    }
  }

  float g[R][NJ]; // dq / scale
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int jj = 0; jj < NJ; ++jj)
      g[i][jj] = 0.0f;
  for (int64_t k0 = 0; k0 < t.keyEnd; k0 += kTile) {
    __syncthreads(); // the previous readers of t.k, t.v and t.s are done
    loadKeys(p, t.k, t.ldd, t.v, t.ldv, t.bhk, k0);
    __syncthreads();
    float s[R][C], dp[R][C];
    dotTile(s, t.q, t.ldd, t.k, t.ldd, p.D);
    dotTile(dp, t.dout, t.ldv, t.v, t.ldv, p.Dv);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      int r = ty + 8 * i;
#pragma unroll
      for (int j = 0; j < C; ++j) {
        int c = tx + 16 * j;
        float sc =
            maskedScore(p, p.scale * s[i][j], t.b, t.h, t.q0 + r, k0 + c);
        float pr = expf(sc - mRow[i]) * inv[i];
        t.s[r * kScoreLd + c] = pr * (dp[i][j] - delta[i]);
      }
    }
    __syncthreads();
    accumulateScoreProduct(g, t.s, t.k, t.ldd, p.D,
                           min(int64_t(kTile), p.Sk - k0));
  }
  float scale[R];
#pragma unroll
  for (int i = 0; i < R; ++i)
    scale[i] = p.scale;
  storeRows(p.out, p.outType, t.firstRow, t.rows, p.D, g, scale);
}

/// One block per (batch, head, query tile); head dims up to DMax (a thread
/// holds DMax / 16 output columns per row). Runs the online softmax over
/// the key tiles; then without kGrad stores out (the forward), with kGrad
/// goes on with queryGrad. Shared memory: Q, K, V and score tiles, plus dO
/// with kGrad (queryShared).
template <int DMax, bool kGrad>
__global__ void __launch_bounds__(kBlockThreads) queryKernel(Params p) {
  constexpr int R = kRowsPerThread, C = kColsPerThread, NJ = DMax / 16;
  extern __shared__ float smem[];
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  QueryTile t;
  t.ldd = paddedLd(p.D), t.ldv = paddedLd(p.Dv);
  t.q = smem, t.k = t.q + kTile * t.ldd, t.v = t.k + kTile * t.ldd;
  t.s = t.v + kTile * t.ldv, t.dout = t.s + kTile * kScoreLd;
  int64_t bh = blockIdx.x / p.qTiles;
  t.b = bh / p.H, t.h = bh % p.H;
  t.bhk = t.b * p.Hkv + t.h / (p.H / p.Hkv);
  t.q0 = (p.qTiles - 1 - blockIdx.x % p.qTiles) * kTile;
  t.rows = min(int64_t(kTile), p.Sq - t.q0);
  t.firstRow = bh * p.Sq + t.q0;
  // Under causal the tile's last query sees keys [0, q0 + rows).
  t.keyEnd = p.causal ? min(p.Sk, t.q0 + t.rows) : p.Sk;
  loadTile(t.q, t.ldd, p.q, p.qType, t.firstRow * p.D, t.rows, p.D);
  if (kGrad)
    loadTile(t.dout, t.ldv, p.dout, p.doutType, t.firstRow * p.Dv, t.rows,
             p.Dv);

  float m[R], l[R], o[R][NJ];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int jj = 0; jj < NJ; ++jj)
      o[i][jj] = 0.0f;
  }
  for (int64_t k0 = 0; k0 < t.keyEnd; k0 += kTile) {
    __syncthreads(); // the previous tile's readers are done
    loadKeys(p, t.k, t.ldd, t.v, t.ldv, t.bhk, k0);
    __syncthreads();
    float s[R][C];
    dotTile(s, t.q, t.ldd, t.k, t.ldd, p.D);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      int r = ty + 8 * i;
      float tileMax = -INFINITY; // NaN scores are skipped, as on the CPU
#pragma unroll
      for (int j = 0; j < C; ++j) {
        s[i][j] = maskedScore(p, p.scale * s[i][j], t.b, t.h, t.q0 + r,
                              k0 + tx + 16 * j);
        tileMax = s[i][j] > tileMax ? s[i][j] : tileMax;
      }
      tileMax = rowMax16(tileMax);
      float mNew = tileMax > m[i] ? tileMax : m[i];
      // While every key so far is masked, exponents are taken against 0.
      float base = mNew == -INFINITY ? 0.0f : mNew;
      float alpha = expf(m[i] - base), sum = 0.0f;
#pragma unroll
      for (int j = 0; j < C; ++j) {
        float e = expf(s[i][j] - base);
        t.s[r * kScoreLd + tx + 16 * j] = e;
        sum += e;
      }
      l[i] = l[i] * alpha + rowSum16(sum);
      m[i] = mNew;
#pragma unroll
      for (int jj = 0; jj < NJ; ++jj)
        o[i][jj] *= alpha;
    }
    __syncthreads();
    // O += P V over the tile's keys.
    accumulateScoreProduct(o, t.s, t.v, t.ldv, p.Dv,
                           min(int64_t(kTile), p.Sk - k0));
  }
  float inv[R];
#pragma unroll
  for (int i = 0; i < R; ++i)
    inv[i] = m[i] == -INFINITY ? 0.0f : 1.0f / l[i];
  if constexpr (kGrad) {
    __syncthreads(); // dO is staged (when no key tile synchronized)
    queryGrad<DMax>(p, t, o, m, inv);
  } else {
    storeRows(p.out, p.outType, t.firstRow, t.rows, p.Dv, o, inv);
  }
}

/// One block per (batch, kv head, key tile): dk and dv of the tile's keys
/// from every query row of the query heads that share the kv head, with P
/// and dS recomputed from queryKernel<_, true>'s row statistics. The tile's
/// keys are the rows of the transposed score tiles (ty + 8 i) and of the
/// accumulators. Shared memory: K, V, Q, dO, P^T, dS^T and the statistics
/// of one query tile (keyShared).
template <int DMax>
__global__ void __launch_bounds__(kBlockThreads) keyKernel(Params p) {
  constexpr int R = kRowsPerThread, C = kColsPerThread, NJ = DMax / 16;
  extern __shared__ float smem[];
  const int D = p.D, Dv = p.Dv, ldd = paddedLd(D), ldv = paddedLd(Dv);
  float *sK = smem, *sV = sK + kTile * ldd, *sQ = sV + kTile * ldv;
  float *sDO = sQ + kTile * ldd, *sP = sDO + kTile * ldv;
  float *sDS = sP + kTile * kScoreLd, *sMax = sDS + kTile * kScoreLd;
  float *sInv = sMax + kTile, *sDot = sInv + kTile;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;

  int64_t bhk = blockIdx.x / p.kTiles;
  int64_t k0 = (blockIdx.x % p.kTiles) * kTile;
  int64_t b = bhk / p.Hkv, hk = bhk % p.Hkv, group = p.H / p.Hkv;
  loadKeys(p, sK, ldd, sV, ldv, bhk, k0);

  float gk[R][NJ], gv[R][NJ];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int jj = 0; jj < NJ; ++jj)
      gk[i][jj] = gv[i][jj] = 0.0f;
  // Under causal, queries before k0 see none of these keys.
  int64_t qStart = p.causal ? k0 : 0;
  // The query heads of the group, then their tiles, in a fixed order.
  for (int64_t g = 0; g < group; ++g) {
    int64_t h = hk * group + g, bh = b * p.H + h;
    for (int64_t q0 = qStart; q0 < p.Sq; q0 += kTile) {
      int64_t rows = min(int64_t(kTile), p.Sq - q0);
      int64_t firstRow = bh * p.Sq + q0;
      __syncthreads(); // the previous tile's readers are done
      loadTile(sQ, ldd, p.q, p.qType, firstRow * D, rows, D);
      loadTile(sDO, ldv, p.dout, p.doutType, firstRow * Dv, rows, Dv);
      loadRowStats(p, sMax, sInv, sDot, firstRow, rows, kTile);
      __syncthreads();
      float s[R][C], dp[R][C];
      dotTile(s, sK, ldd, sQ, ldd, D);
      dotTile(dp, sV, ldv, sDO, ldv, Dv);
#pragma unroll
      for (int i = 0; i < R; ++i) {
        int c = ty + 8 * i;
#pragma unroll
        for (int j = 0; j < C; ++j) {
          int r = tx + 16 * j;
          float sc = maskedScore(p, p.scale * s[i][j], b, h, q0 + r, k0 + c);
          float pr = expf(sc - sMax[r]) * sInv[r];
          sP[c * kScoreLd + r] = pr;
          sDS[c * kScoreLd + r] = pr * (dp[i][j] - sDot[r]);
        }
      }
      __syncthreads();
      // dv += P^T dO and dk += dS^T Q over the tile's query rows.
      for (int r = 0; r < rows; ++r) {
        float doR[NJ], qR[NJ];
#pragma unroll
        for (int jj = 0; jj < NJ; ++jj) {
          int d = tx + 16 * jj;
          doR[jj] = d < Dv ? sDO[r * ldv + d] : 0.0f;
          qR[jj] = d < D ? sQ[r * ldd + d] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < R; ++i) {
          int c = ty + 8 * i;
          float pr = sP[c * kScoreLd + r], ds = sDS[c * kScoreLd + r];
#pragma unroll
          for (int jj = 0; jj < NJ; ++jj) {
            gv[i][jj] = fmaf(pr, doR[jj], gv[i][jj]);
            gk[i][jj] = fmaf(ds, qR[jj], gk[i][jj]);
          }
        }
      }
    }
  }
  float scale[R], one[R];
#pragma unroll
  for (int i = 0; i < R; ++i)
    scale[i] = p.scale, one[i] = 1.0f;
  int64_t keys = min(int64_t(kTile), p.Sk - k0);
  storeRows(p.dk, p.dkType, bhk * p.Sk + k0, keys, D, gk, scale);
  storeRows(p.dv, p.dvType, bhk * p.Sk + k0, keys, Dv, gv, one);
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

/// The compile-time head dim bound (32, 64 or 128) for max(D, Dv); 0 when
/// the fused kernels do not take it.
int headDimBound(const AttentionShape &s) {
  int64_t d = s.D > s.Dv ? s.D : s.Dv;
  return d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 0;
}

/// Dynamic shared memory of queryKernel and keyKernel (see their layouts).
size_t queryShared(const AttentionShape &s, bool grad) {
  int ldd = paddedLd(int(s.D)), ldv = paddedLd(int(s.Dv));
  int floats = kTile * (2 * ldd + (grad ? 2 : 1) * ldv) + kTile * kScoreLd;
  return size_t(floats) * sizeof(float);
}
size_t keyShared(const AttentionShape &s) {
  int ldd = paddedLd(int(s.D)), ldv = paddedLd(int(s.Dv));
  int floats = kTile * (2 * ldd + 2 * ldv) + 2 * kTile * kScoreLd + 3 * kTile;
  return size_t(floats) * sizeof(float);
}

int64_t tilesOf(int64_t n) { return (n + kTile - 1) / kTile; }

KernelFn queryKernelFor(int bound, bool grad) {
  switch (bound) {
  case 32:
    return grad ? queryKernel<32, true> : queryKernel<32, false>;
  case 64:
    return grad ? queryKernel<64, true> : queryKernel<64, false>;
  default:
    return grad ? queryKernel<128, true> : queryKernel<128, false>;
  }
}

KernelFn keyKernelFor(int bound) {
  switch (bound) {
  case 32:
    return keyKernel<32>;
  case 64:
    return keyKernel<64>;
  default:
    return keyKernel<128>;
  }
}

Params makeParams(const FlashProblem &fp, FlashInput q, FlashInput k,
                  FlashInput v) {
  const AttentionShape &s = fp.shape;
  Params p{};
  p.q = q.data, p.k = k.data, p.v = v.data;
  p.qType = q.dtype, p.kType = k.dtype, p.vType = v.dtype;
  p.mask = fp.mask;
  p.B = s.B, p.H = s.H, p.Hkv = s.Hkv, p.Sq = s.Sq, p.Sk = s.Sk;
  p.D = int(s.D), p.Dv = int(s.Dv);
  p.qTiles = tilesOf(s.Sq), p.kTiles = tilesOf(s.Sk);
  p.scale = fp.scale;
  p.causal = fp.causal;
  return p;
}

} // namespace

/// Dynamic shared memory a block gets without opting in.
static constexpr size_t kDefaultSharedBytes = size_t(48) << 10;

size_t flash::deviceSharedLimit() {
  static const size_t limit = [] {
    int device = 0, bytes = 0;
    check(cudaGetDevice(&device), "querying the device");
    check(cudaDeviceGetAttribute(
              &bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
          "querying the shared memory per block");
    return size_t(bytes);
  }();
  return limit;
}

void flash::launch(const char *kn, KernelFn kernel, int64_t blocks,
                   size_t shared, const Params &p) {
  if (blocks == 0)
    return;
  if (shared > kDefaultSharedBytes)
    check(cudaFuncSetAttribute(
              kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)),
          "raising the attention kernel's shared memory limit");
  kernel<<<unsigned(blocks), kBlockThreads, shared, stream()>>>(p);
  checkLaunchOf(kn);
}

bool cuda::flashAttentionSupports(const AttentionShape &s) {
  if (headDimBound(s) == 0)
    return false;
  // keyKernel's shared memory is the largest of the three kernels'.
  if (keyShared(s) > deviceSharedLimit())
    return false;
  // One-dimensional grids of at most 2^31 - 1 blocks.
  return s.B * s.H * tilesOf(s.Sq) <= INT_MAX &&
         s.B * s.Hkv * tilesOf(s.Sk) <= INT_MAX;
}

void cuda::flashAttention(const char *kn, const FlashProblem &fp, FlashInput q,
                          FlashInput k, FlashInput v, FlashOutput out) {
  const AttentionShape &s = fp.shape;
  Params p = makeParams(fp, q, k, v);
  p.out = out.data, p.outType = out.dtype;
  if (tensorCoresApply(fp, q, k, v, -1)) {
    tensorCoreForward(kn, p, q.dtype);
    return;
  }
  launch(kn, queryKernelFor(headDimBound(s), false), s.B * s.H * p.qTiles,
         queryShared(s, false), p);
}

void cuda::flashAttentionGrad(const char *kn, const FlashProblem &fp,
                              FlashInput q, FlashInput k, FlashInput v,
                              FlashInput dout, FlashOutput dq, FlashOutput dk,
                              FlashOutput dv) {
  const AttentionShape &s = fp.shape;
  Params p = makeParams(fp, q, k, v);
  p.dout = dout.data, p.doutType = dout.dtype;
  p.out = dq.data, p.outType = dq.dtype;
  p.dk = dk.data, p.dkType = dk.dtype;
  p.dv = dv.data, p.dvType = dv.dtype;
  // The row statistics: 12 bytes per query row, freed in stream order
  // after keyKernel.
  int64_t rows = s.B * s.H * s.Sq;
  ScratchBuffer stats(size_t(3 * rows) * sizeof(float), kn);
  p.rowMax = stats.as<float>();
  p.rowInv = p.rowMax + rows;
  p.rowDot = p.rowInv + rows;
  if (tensorCoresApply(fp, q, k, v, dout.dtype)) {
    tensorCoreBackward(kn, p, q.dtype);
    return;
  }
  int bound = headDimBound(s);
  launch(kn, queryKernelFor(bound, true), s.B * s.H * p.qTiles,
         queryShared(s, true), p);
  launch(kn, keyKernelFor(bound), s.B * s.Hkv * p.kTiles, keyShared(s), p);
}
