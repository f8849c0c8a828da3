//===- FlashAttention.cu - fused tiled attention CUDA kernels -------------===//
//
// Attention without materialized scores (FlashAttention-2): on CUDA cores in
// f32 throughout, and on tensor cores for 16-bit operands (tcQueryKernel
// and tcKeyKernel, described there, with the same passes and the same
// deterministic order as the CUDA-core kernels below). Tiles are kTile query rows by kTile keys; a block of
// 128 threads is 8 row groups of 16 lanes, and a thread owns rows
// ty + 8 i and columns tx + 16 j of every tile it computes, so a score
// row lives in one half warp and its max and sum are shuffle reductions.
// Operands are staged in shared memory as f32 with an odd row stride (the
// 16 rows a half warp reads at one column fall in distinct banks). The
// kernels are compiled for head dims up to 32, 64 and 128 (a thread holds
// DMax / 16 accumulator columns per row; 92 to 168 registers, no spills on
// sm_80). Dynamic shared memory at D = Dv = 64 / 128: forward 29 / 53 KB,
// backward query pass 37 / 69 KB, key pass 41 / 73 KB; past the default
// 48 KB the launch opts in (every sm_80+ device grants at least 99 KB).
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

#include "FlashAttention.cuh"

#include "DeviceUtil.cuh"

#include <mma.h>

#include <algorithm>
#include <climits>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

/// Query rows and keys per tile.
constexpr int kTile = 32;
/// Threads per block: 8 row groups (ty) of 16 lanes (tx).
constexpr int kBlockThreads = 128;
/// A thread's share of a kTile x kTile score tile: rows ty + 8 i, columns
/// tx + 16 j.
constexpr int kRowsPerThread = kTile / 8;
constexpr int kColsPerThread = kTile / 16;
/// Row stride of the staged score tiles (odd, see paddedLd).
constexpr int kScoreLd = kTile + 1;
/// Dynamic shared memory a block gets without opting in.
constexpr size_t kDefaultSharedBytes = size_t(48) << 10;

/// The row stride of a staged tile of rows of n floats: odd, so that 16
/// rows read at one column hit 16 distinct banks.
__host__ __device__ inline int paddedLd(int n) { return n | 1; }

/// Everything the kernels read, by value.
struct Params {
  const char *q, *k, *v, *dout;
  int32_t qType, kType, vType, doutType;
  char *out; // attention's output, or dq in the backward
  char *dk, *dv;
  int32_t outType, dkType, dvType;
  AttentionMask mask;
  float *rowMax, *rowInv, *rowDot; // [B, H, Sq] each, backward only
  int64_t B, H, Hkv, Sq, Sk;
  int D, Dv;
  int64_t qTiles, kTiles;
  float scale;
  bool causal;
};

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

/// Score `s` (already scaled) of query i and key j of head (b, h) with the
/// mask applied: -inf for masked keys, for keys after a causal query, and
/// for the padding rows and keys of partial tiles (which read no mask).
__device__ inline float maskedScore(const Params &p, float s, int64_t b,
                                    int64_t h, int64_t i, int64_t j) {
  if (i >= p.Sq || j >= p.Sk || (p.causal && j > i))
    return -INFINITY;
  const AttentionMask &m = p.mask;
  if (!m.data)
    return s;
  int64_t at =
      b * m.strides[0] + h * m.strides[1] + i * m.strides[2] + j * m.strides[3];
  if (m.dtype == CLEAVE_I1)
    return reinterpret_cast<const uint8_t *>(m.data)[at] ? s : -INFINITY;
  return s + loadF32(m.data, m.dtype, at);
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
      if (threadIdx.x < kTile) {
        // Padding rows: P = exp(-inf - 0) * 0 = 0.
        bool live = threadIdx.x < rows;
        int64_t row = firstRow + threadIdx.x;
        sMax[threadIdx.x] = live ? p.rowMax[row] : 0.0f;
        sInv[threadIdx.x] = live ? p.rowInv[row] : 0.0f;
        sDot[threadIdx.x] = live ? p.rowDot[row] : 0.0f;
      }
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
// The forward on tensor cores (WMMA), for 16-bit q, k and v
//===----------------------------------------------------------------------===//

namespace wmma = nvcuda::wmma;

/// Query rows per block (16 per warp) and keys per tile.
constexpr int kTcRows = 64;
constexpr int kTcKeys = 64;
/// Row strides of the f32 score tile and the 16-bit probability tile:
/// multiples of 4 and 8 elements (WMMA's rule), off the 32-bank period.
constexpr int kTcScoreLd = kTcKeys + 4;
constexpr int kTcProbLd = kTcKeys + 8;

/// Where tcQueryKernel's tiles lie in its dynamic shared memory (each
/// region 128-byte aligned, every 16-row block of a tile 32-byte aligned
/// as WMMA's loads and stores need): Q, K, V as stored (16-bit, rows padded
/// by 8), the scores S (f32), the probabilities P (16-bit) and the output
/// accumulator O (f32).
struct TcLayout {
  int ldq, ldv, ldo;
  size_t q, k, v, s, p, o, dout, dp, bytes;
};
__host__ __device__ inline size_t roundUp128(size_t n) {
  return (n + 127) / 128 * 128;
}
/// With `grad` (tcQueryKernel<T, true>) also dO (16-bit) and dP (f32).
__host__ __device__ inline TcLayout tcLayout(int D, int Dv, bool grad) {
  TcLayout l;
  l.ldq = D + 8;
  l.ldv = Dv + 8;
  l.ldo = Dv + 4;
  size_t at = 0;
  l.q = at, at += roundUp128(size_t(kTcRows) * l.ldq * 2);
  l.k = at, at += roundUp128(size_t(kTcKeys) * l.ldq * 2);
  l.v = at, at += roundUp128(size_t(kTcKeys) * l.ldv * 2);
  l.s = at, at += roundUp128(size_t(kTcRows) * kTcScoreLd * 4);
  l.p = at, at += roundUp128(size_t(kTcRows) * kTcProbLd * 2);
  l.o = at, at += roundUp128(size_t(kTcRows) * l.ldo * 4);
  l.dout = l.dp = 0;
  if (grad) {
    l.dout = at, at += roundUp128(size_t(kTcRows) * l.ldv * 2);
    l.dp = at, at += roundUp128(size_t(kTcRows) * kTcScoreLd * 4);
  }
  l.bytes = at;
  return l;
}

/// tcKeyKernel's shared memory: its K and V tiles, one query tile's Q and
/// dO (16-bit), the transposed scores S^T and dP^T (f32), P^T and dS^T
/// (16-bit), and the tile's row statistics.
struct TcKeyLayout {
  int ldq, ldv;
  size_t k, v, q, dout, s, dp, p, ds, stats, bytes;
};
__host__ __device__ inline TcKeyLayout tcKeyLayout(int D, int Dv) {
  TcKeyLayout l;
  l.ldq = D + 8;
  l.ldv = Dv + 8;
  size_t at = 0;
  l.k = at, at += roundUp128(size_t(kTcKeys) * l.ldq * 2);
  l.v = at, at += roundUp128(size_t(kTcKeys) * l.ldv * 2);
  l.q = at, at += roundUp128(size_t(kTcRows) * l.ldq * 2);
  l.dout = at, at += roundUp128(size_t(kTcRows) * l.ldv * 2);
  l.s = at, at += roundUp128(size_t(kTcKeys) * kTcScoreLd * 4);
  l.dp = at, at += roundUp128(size_t(kTcKeys) * kTcScoreLd * 4);
  l.p = at, at += roundUp128(size_t(kTcKeys) * kTcProbLd * 2);
  l.ds = at, at += roundUp128(size_t(kTcKeys) * kTcProbLd * 2);
  l.stats = at, at += roundUp128(size_t(3 * kTcRows) * 4);
  l.bytes = at;
  return l;
}

/// dst [16 x 64] (f32, stride kTcScoreLd) = a [16 x n] times the
/// transpose of the 64 rows of b [64 x n] (both 16-bit, row-major, strides
/// lda and ldb): one warp's WMMA products.
template <typename T>
__device__ inline void tcRowsTimesRowsT(float *dst, const T *a, int lda,
                                        const T *b, int ldb, int n) {
  for (int c = 0; c < kTcKeys; c += 16) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int d = 0; d < n; d += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, a + d, lda);
      wmma::load_matrix_sync(fb, b + c * ldb + d, ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(dst + c, acc, kTcScoreLd, wmma::mem_row_major);
  }
}

/// acc[j] += a [16 x 64] (16-bit, stride kTcProbLd) times columns
/// 16 j .. 16 j + 15 of b [64 x width] (16-bit, row-major, stride ldb).
template <typename T, int N>
__device__ inline void tcAccumulate(
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> (&acc)[N],
    const T *a, const T *b, int ldb, int width) {
  for (int kk = 0; kk < kTcKeys; kk += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, a + kk, kTcProbLd);
    for (int j = 0; j < N; ++j) {
      if (16 * j >= width)
        break;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
      wmma::load_matrix_sync(fb, b + kk * ldb + 16 * j, ldb);
      wmma::mma_sync(acc[j], fa, fb, acc[j]);
    }
  }
}

/// Stores the warp's 16 rows of `acc` (columns < width) times `factor` as
/// rows firstRow .. of a row-major [*, width] output, rows < rows only,
/// through the warp's f32 staging tile (16 x 16 at a time).
template <int N>
__device__ inline void tcStoreRows(
    char *dst, int32_t dtype, int64_t firstRow, int64_t rows, int width,
    const wmma::fragment<wmma::accumulator, 16, 16, 16, float> (&acc)[N],
    float factor, float *stage) {
  const int lane = threadIdx.x % 32;
  for (int j = 0; j < N && 16 * j < width; ++j) {
    wmma::store_matrix_sync(stage, acc[j], kTcScoreLd, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      int r = e / 16, c = e % 16;
      if (r < rows)
        storeF32(dst, dtype, (firstRow + r) * width + 16 * j + c,
                 stage[r * kTcScoreLd + c] * factor);
    }
    __syncwarp();
  }
}

/// Stages `rows` rows of a row-major [*, cols] 16-bit operand from element
/// `first` into dst (row stride ld), as stored; rows from `valid` on are
/// zeros.
template <typename T>
__device__ inline void loadTcTile(T *dst, int ld, const T *src, int64_t first,
                                  int64_t valid, int rows, int cols) {
  for (int e = threadIdx.x; e < rows * cols; e += kBlockThreads) {
    int r = e / cols, c = e - r * cols;
    dst[r * ld + c] = r < valid ? src[first + int64_t(r) * cols + c] : T(0.0f);
  }
}

/// Stages keys [k0, k0 + kTcKeys) of kv head bhk of the 16-bit K and V
/// (rows past Sk are zeros).
template <typename T>
__device__ inline void loadTcKeys(const Params &p, T *sK, int ldk, T *sV,
                                  int ldv, int64_t bhk, int64_t k0) {
  int64_t keys = min(int64_t(kTcKeys), p.Sk - k0);
  loadTcTile(sK, ldk, reinterpret_cast<const T *>(p.k),
             (bhk * p.Sk + k0) * p.D, keys, kTcKeys, p.D);
  loadTcTile(sV, ldv, reinterpret_cast<const T *>(p.v),
             (bhk * p.Sk + k0) * p.Dv, keys, kTcKeys, p.Dv);
}

/// The forward of queryKernel on tensor cores: one block per (batch, head,
/// 64-row query tile), warp w owning rows 16 w .. 16 w + 15. Per key tile,
/// each warp forms S = Q K^T for its rows with WMMA into shared memory;
/// lane pairs (one row, 32 keys each) run the online softmax, store P
/// rounded to T and rescale the row's O; then the warp accumulates
/// O += P V with WMMA, reading and writing O in shared memory (the
/// accumulator fragments' layout is opaque, so the per-row rescale cannot
/// happen in registers). Masking, fully masked rows and NaN scores behave
/// as in queryKernel.
template <typename T, bool kGrad>
__global__ void __launch_bounds__(kBlockThreads) tcQueryKernel(Params p) {
  // WMMA needs 32-byte aligned tiles; the regions are offsets from here.
  extern __shared__ __align__(128) char tcSmem[];
  char *base = tcSmem;
  const TcLayout L = tcLayout(p.D, p.Dv, kGrad);
  T *sQ = reinterpret_cast<T *>(base + L.q);
  T *sK = reinterpret_cast<T *>(base + L.k);
  T *sV = reinterpret_cast<T *>(base + L.v);
  T *sP = reinterpret_cast<T *>(base + L.p);
  float *sS = reinterpret_cast<float *>(base + L.s);
  float *sO = reinterpret_cast<float *>(base + L.o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  int64_t bh = blockIdx.x / p.qTiles;
  int64_t b = bh / p.H, h = bh % p.H;
  int64_t bhk = b * p.Hkv + h / (p.H / p.Hkv);
  int64_t q0 = (p.qTiles - 1 - blockIdx.x % p.qTiles) * kTcRows;
  int64_t rows = min(int64_t(kTcRows), p.Sq - q0);
  int64_t firstRow = bh * p.Sq + q0;
  int64_t keyEnd = p.causal ? min(p.Sk, q0 + rows) : p.Sk;
  loadTcTile(sQ, L.ldq, reinterpret_cast<const T *>(p.q), firstRow * p.D,
             rows, kTcRows, p.D);
  for (int e = threadIdx.x; e < kTcRows * p.Dv; e += kBlockThreads)
    sO[(e / p.Dv) * L.ldo + e % p.Dv] = 0.0f;

  // This lane's row of the tile and its half of the keys and columns.
  const int r = warp * 16 + lane / 2, half = lane % 2;
  float m = -INFINITY, l = 0.0f;
  for (int64_t k0 = 0; k0 < keyEnd; k0 += kTcKeys) {
    __syncthreads(); // the previous tile's readers are done
    loadTcKeys(p, sK, L.ldq, sV, L.ldv, bhk, k0);
    __syncthreads();

    // S = Q K^T for the warp's 16 rows.
    for (int n = 0; n < kTcKeys; n += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int d = 0; d < p.D; d += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kt;
        wmma::load_matrix_sync(a, sQ + warp * 16 * L.ldq + d, L.ldq);
        wmma::load_matrix_sync(kt, sK + n * L.ldq + d, L.ldq);
        wmma::mma_sync(acc, a, kt, acc);
      }
      wmma::store_matrix_sync(sS + warp * 16 * kTcScoreLd + n, acc,
                              kTcScoreLd, wmma::mem_row_major);
    }
    __syncwarp();

    // The online softmax of row r over this tile's keys.
    float s[kTcKeys / 2];
    float tileMax = -INFINITY; // NaN scores are skipped, as on the CPU
    for (int j = 0; j < kTcKeys / 2; ++j) {
      int c = half * (kTcKeys / 2) + j;
      s[j] = maskedScore(p, p.scale * sS[r * kTcScoreLd + c], b, h, q0 + r,
                         k0 + c);
      tileMax = s[j] > tileMax ? s[j] : tileMax;
    }
    float other = __shfl_xor_sync(0xffffffffu, tileMax, 1);
    tileMax = other > tileMax ? other : tileMax;
    float mNew = tileMax > m ? tileMax : m;
    // While every key so far is masked, exponents are taken against 0.
    float baseM = mNew == -INFINITY ? 0.0f : mNew;
    float alpha = expf(m - baseM), sum = 0.0f;
    for (int j = 0; j < kTcKeys / 2; ++j) {
      float e = expf(s[j] - baseM);
      sP[r * kTcProbLd + half * (kTcKeys / 2) + j] = T(e);
      sum += e;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    m = mNew;
    for (int c = half; c < p.Dv; c += 2)
      sO[r * L.ldo + c] *= alpha;
    __syncwarp();

    // O += P V for the warp's 16 rows.
    for (int j = 0; j < p.Dv; j += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> o;
      wmma::load_matrix_sync(o, sO + warp * 16 * L.ldo + j, L.ldo,
                             wmma::mem_row_major);
      for (int kk = 0; kk < kTcKeys; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> pa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vb;
        wmma::load_matrix_sync(pa, sP + warp * 16 * kTcProbLd + kk,
                               kTcProbLd);
        wmma::load_matrix_sync(vb, sV + kk * L.ldv + j, L.ldv);
        wmma::mma_sync(o, pa, vb, o);
      }
      wmma::store_matrix_sync(sO + warp * 16 * L.ldo + j, o, L.ldo,
                              wmma::mem_row_major);
    }
    __syncwarp();
  }
  float inv = m == -INFINITY ? 0.0f : 1.0f / l;
  if constexpr (!kGrad) {
    if (r < rows)
      for (int c = half; c < p.Dv; c += 2)
        storeF32(p.out, p.outType, (firstRow + r) * p.Dv + c,
                 sO[r * L.ldo + c] * inv);
    return;
  }

  // The gradient half (queryGrad's, on tensor cores): the row statistics,
  // then dq = scale dS K over the key tiles, dS = P (dO V^T - Delta).
  T *sDO = reinterpret_cast<T *>(base + L.dout);
  float *sDP = reinterpret_cast<float *>(base + L.dp);
  const T *dout = reinterpret_cast<const T *>(p.dout);
  __syncthreads(); // every warp's O is final
  loadTcTile(sDO, L.ldv, dout, firstRow * p.Dv, rows, kTcRows, p.Dv);
  __syncthreads();
  float part = 0.0f;
  for (int c = half; c < p.Dv; c += 2)
    part += float(sDO[r * L.ldv + c]) * (sO[r * L.ldo + c] * inv);
  float delta = part + __shfl_xor_sync(0xffffffffu, part, 1);
  // The max (0 for a fully masked row, so that P = exp(-inf - 0) * 0 = 0).
  float mRow = m == -INFINITY ? 0.0f : m;
  if (half == 0 && r < rows) {
    p.rowMax[firstRow + r] = mRow;
    p.rowInv[firstRow + r] = inv;
    p.rowDot[firstRow + r] = delta;
  }
  constexpr int kMaxD = 128 / 16;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> dq[kMaxD];
  for (int j = 0; j < kMaxD; ++j)
    wmma::fill_fragment(dq[j], 0.0f);
  for (int64_t k0 = 0; k0 < keyEnd; k0 += kTcKeys) {
    __syncthreads();
    loadTcKeys(p, sK, L.ldq, sV, L.ldv, bhk, k0);
    __syncthreads();
    tcRowsTimesRowsT(sS + warp * 16 * kTcScoreLd, sQ + warp * 16 * L.ldq,
                     L.ldq, sK, L.ldq, p.D);
    tcRowsTimesRowsT(sDP + warp * 16 * kTcScoreLd, sDO + warp * 16 * L.ldv,
                     L.ldv, sV, L.ldv, p.Dv);
    __syncwarp();
    for (int j = 0; j < kTcKeys / 2; ++j) {
      int c = half * (kTcKeys / 2) + j;
      float sc = maskedScore(p, p.scale * sS[r * kTcScoreLd + c], b, h,
                             q0 + r, k0 + c);
      float pr = expf(sc - mRow) * inv;
      sP[r * kTcProbLd + c] = T(pr * (sDP[r * kTcScoreLd + c] - delta));
    }
    __syncwarp();
    tcAccumulate(dq, sP + warp * 16 * kTcProbLd, sK, L.ldq, p.D);
  }
  tcStoreRows(p.out, p.outType, firstRow + warp * 16,
              min(int64_t(16), rows - warp * 16), p.D, dq, p.scale,
              sS + warp * 16 * kTcScoreLd);
}

/// keyKernel on tensor cores: one block per (batch, kv head, 64-key tile),
/// warp w owning keys 16 w .. 16 w + 15, dk and dv accumulated in WMMA
/// fragments over the query tiles of every query head of the group (in a
/// fixed order: deterministic). Per query tile: S^T = K Q^T and
/// dP^T = V dO^T with WMMA, then lane pairs (one key, 32 queries each) form
/// P^T and dS^T = P^T (dP^T - Delta) from the saved row statistics, rounded
/// to T, and dv += P^T dO, dk += dS^T Q.
template <typename T>
__global__ void __launch_bounds__(kBlockThreads) tcKeyKernel(Params p) {
  extern __shared__ __align__(128) char tcKeySmem[];
  char *base = tcKeySmem;
  const TcKeyLayout L = tcKeyLayout(p.D, p.Dv);
  T *sK = reinterpret_cast<T *>(base + L.k);
  T *sV = reinterpret_cast<T *>(base + L.v);
  T *sQ = reinterpret_cast<T *>(base + L.q);
  T *sDO = reinterpret_cast<T *>(base + L.dout);
  T *sP = reinterpret_cast<T *>(base + L.p);
  T *sDS = reinterpret_cast<T *>(base + L.ds);
  float *sS = reinterpret_cast<float *>(base + L.s);
  float *sDP = reinterpret_cast<float *>(base + L.dp);
  float *sMax = reinterpret_cast<float *>(base + L.stats);
  float *sInv = sMax + kTcRows, *sDot = sInv + kTcRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c = warp * 16 + lane / 2, half = lane % 2; // this lane's key

  int64_t bhk = blockIdx.x / p.kTiles;
  int64_t k0 = (blockIdx.x % p.kTiles) * kTcKeys;
  int64_t b = bhk / p.Hkv, hk = bhk % p.Hkv, group = p.H / p.Hkv;
  int64_t keys = min(int64_t(kTcKeys), p.Sk - k0);
  const T *q = reinterpret_cast<const T *>(p.q);
  const T *dout = reinterpret_cast<const T *>(p.dout);
  loadTcKeys(p, sK, L.ldq, sV, L.ldv, bhk, k0);

  constexpr int kMaxD = 128 / 16;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> dk[kMaxD], dv[kMaxD];
  for (int j = 0; j < kMaxD; ++j) {
    wmma::fill_fragment(dk[j], 0.0f);
    wmma::fill_fragment(dv[j], 0.0f);
  }
  // Under causal, queries before k0 see none of these keys.
  int64_t qStart = p.causal ? k0 / kTcRows * kTcRows : 0;
  for (int64_t g = 0; g < group; ++g) {
    int64_t h = hk * group + g, bh = b * p.H + h;
    for (int64_t q0 = qStart; q0 < p.Sq; q0 += kTcRows) {
      int64_t rows = min(int64_t(kTcRows), p.Sq - q0);
      int64_t firstRow = bh * p.Sq + q0;
      __syncthreads(); // the previous tile's readers are done
      loadTcTile(sQ, L.ldq, q, firstRow * p.D, rows, kTcRows, p.D);
      loadTcTile(sDO, L.ldv, dout, firstRow * p.Dv, rows, kTcRows, p.Dv);
      if (threadIdx.x < kTcRows) {
        // Padding rows: P = exp(s - 0) * 0 = 0.
        bool live = threadIdx.x < rows;
        int64_t row = firstRow + threadIdx.x;
        sMax[threadIdx.x] = live ? p.rowMax[row] : 0.0f;
        sInv[threadIdx.x] = live ? p.rowInv[row] : 0.0f;
        sDot[threadIdx.x] = live ? p.rowDot[row] : 0.0f;
      }
      __syncthreads();
      tcRowsTimesRowsT(sS + warp * 16 * kTcScoreLd, sK + warp * 16 * L.ldq,
                       L.ldq, sQ, L.ldq, p.D);
      tcRowsTimesRowsT(sDP + warp * 16 * kTcScoreLd, sV + warp * 16 * L.ldv,
                       L.ldv, sDO, L.ldv, p.Dv);
      __syncwarp();
      for (int j = 0; j < kTcRows / 2; ++j) {
        int r = half * (kTcRows / 2) + j;
        float sc = maskedScore(p, p.scale * sS[c * kTcScoreLd + r], b, h,
                               q0 + r, k0 + c);
        float pr = expf(sc - sMax[r]) * sInv[r];
        sP[c * kTcProbLd + r] = T(pr);
        sDS[c * kTcProbLd + r] = T(pr * (sDP[c * kTcScoreLd + r] - sDot[r]));
      }
      __syncwarp();
      tcAccumulate(dv, sP + warp * 16 * kTcProbLd, sDO, L.ldv, p.Dv);
      tcAccumulate(dk, sDS + warp * 16 * kTcProbLd, sQ, L.ldq, p.D);
    }
  }
  int64_t mine = min(int64_t(16), keys - warp * 16);
  int64_t first = bhk * p.Sk + k0 + warp * 16;
  tcStoreRows(p.dk, p.dkType, first, mine, p.D, dk, p.scale,
              sS + warp * 16 * kTcScoreLd);
  tcStoreRows(p.dv, p.dvType, first, mine, p.Dv, dv, 1.0f,
              sS + warp * 16 * kTcScoreLd);
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

using KernelFn = void (*)(Params);

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

/// The most dynamic shared memory the device grants a block that opts in
/// (99 KB on sm_86/sm_89, 163 KB on sm_80, 227 KB on sm_90).
size_t deviceSharedLimit() {
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

/// Launches `kernel` on `blocks` blocks (none: nothing to do) with `shared`
/// bytes of dynamic shared memory, opting in past the default 48 KB.
void launch(const char *kn, KernelFn kernel, int64_t blocks, size_t shared,
            const Params &p) {
  if (blocks == 0)
    return;
  if (shared > kDefaultSharedBytes)
    check(cudaFuncSetAttribute(
              kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)),
          "raising the attention kernel's shared memory limit");
  kernel<<<unsigned(blocks), kBlockThreads, shared, stream()>>>(p);
  checkLaunchOf(kn);
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

/// Whether the tensor-core kernels take the problem (see flashAttention's
/// comment); `dout` is the backward's, or -1.
static bool tensorCoresApply(const FlashProblem &fp, FlashInput q,
                             FlashInput k, FlashInput v, int32_t dout) {
  const AttentionShape &s = fp.shape;
  bool grad = dout >= 0;
  bool sixteenBit = q.dtype == CLEAVE_BF16 || q.dtype == CLEAVE_F16;
  size_t shared = tcLayout(int(s.D), int(s.Dv), grad).bytes;
  if (grad)
    shared = std::max(shared, tcKeyLayout(int(s.D), int(s.Dv)).bytes);
  return fp.tensorCores && sixteenBit && k.dtype == q.dtype &&
         v.dtype == q.dtype && (!grad || dout == q.dtype) &&
         s.D % 16 == 0 && s.Dv % 16 == 0 && s.D <= 128 && s.Dv <= 128 &&
         shared <= deviceSharedLimit() &&
         s.B * s.H * ((s.Sq + kTcRows - 1) / kTcRows) <= INT_MAX &&
         s.B * s.Hkv * ((s.Sk + kTcKeys - 1) / kTcKeys) <= INT_MAX;
}

void cuda::flashAttention(const char *kn, const FlashProblem &fp, FlashInput q,
                          FlashInput k, FlashInput v, FlashOutput out) {
  const AttentionShape &s = fp.shape;
  Params p = makeParams(fp, q, k, v);
  p.out = out.data, p.outType = out.dtype;
  if (tensorCoresApply(fp, q, k, v, -1)) {
    p.qTiles = (s.Sq + kTcRows - 1) / kTcRows;
    KernelFn kernel = q.dtype == CLEAVE_BF16
                          ? tcQueryKernel<__nv_bfloat16, false>
                          : tcQueryKernel<__half, false>;
    launch(kn, kernel, s.B * s.H * p.qTiles,
           tcLayout(int(s.D), int(s.Dv), false).bytes, p);
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
    p.qTiles = (s.Sq + kTcRows - 1) / kTcRows;
    p.kTiles = (s.Sk + kTcKeys - 1) / kTcKeys;
    bool bf16 = q.dtype == CLEAVE_BF16;
    launch(kn,
           bf16 ? tcQueryKernel<__nv_bfloat16, true>
                : tcQueryKernel<__half, true>,
           s.B * s.H * p.qTiles, tcLayout(int(s.D), int(s.Dv), true).bytes,
           p);
    launch(kn, bf16 ? tcKeyKernel<__nv_bfloat16> : tcKeyKernel<__half>,
           s.B * s.Hkv * p.kTiles, tcKeyLayout(int(s.D), int(s.Dv)).bytes, p);
    return;
  }
  int bound = headDimBound(s);
  launch(kn, queryKernelFor(bound, true), s.B * s.H * p.qTiles,
         queryShared(s, true), p);
  launch(kn, keyKernelFor(bound), s.B * s.Hkv * p.kTiles, keyShared(s), p);
}
