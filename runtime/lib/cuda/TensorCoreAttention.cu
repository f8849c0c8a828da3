//===- TensorCoreAttention.cu - fused attention on tensor cores ----------===//
//
// The fused attention kernels of FlashAttention.cu for 16-bit q, k, v (and
// dO) with head dims that are multiples of 16 up to 128, on the tensor
// cores with WMMA (bf16 or f16 inputs, f32 accumulation): the forward, and
// the backward's query and key passes, in the same order as the CUDA-core
// kernels. P and dS are rounded to the input type before their products,
// as FlashAttention-2 rounds them.
//
//===----------------------------------------------------------------------===//

#include "FlashAttentionKernels.cuh"

#include <mma.h>

#include <algorithm>
#include <climits>

using namespace cleave::rt;
using namespace cleave::rt::cuda;
using namespace cleave::rt::cuda::flash;

namespace {

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

/// The two products of a backward pass for the warp's 16 rows, then a warp
/// barrier: s = a b^T over `n` columns and dp = c d^T over `nv` (the query
/// pass: Q K^T and dO V^T; the key pass: K Q^T and V dO^T).
template <typename T>
__device__ inline void
tcScoreAndGradTiles(float *s, float *dp, const T *a, const T *b, int ld, int n,
                    const T *c, const T *d, int ldv, int nv) {
  tcRowsTimesRowsT(s, a, ld, b, ld, n);
  tcRowsTimesRowsT(dp, c, ldv, d, ldv, nv);
  __syncwarp();
}

/// acc[j] += a [16 x 64] (16-bit, stride kTcProbLd) times columns
/// 16 j .. 16 j + 15 of b [64 x width] (16-bit, row-major, stride ldb).
template <typename T, int N>
__device__ inline void
tcAccumulate(wmma::fragment<wmma::accumulator, 16, 16, 16, float> (&acc)[N],
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
  loadTcTile(sK, ldk, reinterpret_cast<const T *>(p.k), (bhk * p.Sk + k0) * p.D,
             keys, kTcKeys, p.D);
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
  loadTcTile(sQ, L.ldq, reinterpret_cast<const T *>(p.q), firstRow * p.D, rows,
             kTcRows, p.D);
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
      wmma::store_matrix_sync(sS + warp * 16 * kTcScoreLd + n, acc, kTcScoreLd,
                              wmma::mem_row_major);
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
        wmma::load_matrix_sync(pa, sP + warp * 16 * kTcProbLd + kk, kTcProbLd);
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
    tcScoreAndGradTiles(sS + warp * 16 * kTcScoreLd,
                        sDP + warp * 16 * kTcScoreLd, sQ + warp * 16 * L.ldq,
                        sK, L.ldq, p.D, sDO + warp * 16 * L.ldv, sV, L.ldv,
                        p.Dv);
    for (int j = 0; j < kTcKeys / 2; ++j) {
      int c = half * (kTcKeys / 2) + j;
      float sc = maskedScore(p, p.scale * sS[r * kTcScoreLd + c], b, h, q0 + r,
                             k0 + c);
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
      loadRowStats(p, sMax, sInv, sDot, firstRow, rows, kTcRows);
      __syncthreads();
      tcScoreAndGradTiles(sS + warp * 16 * kTcScoreLd,
                          sDP + warp * 16 * kTcScoreLd, sK + warp * 16 * L.ldq,
                          sQ, L.ldq, p.D, sV + warp * 16 * L.ldv, sDO, L.ldv,
                          p.Dv);
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

} // namespace

bool flash::tensorCoresApply(const FlashProblem &fp, FlashInput q, FlashInput k,
                             FlashInput v, int32_t dout) {
  const AttentionShape &s = fp.shape;
  bool grad = dout >= 0;
  bool sixteenBit = q.dtype == CLEAVE_BF16 || q.dtype == CLEAVE_F16;
  size_t shared = tcLayout(int(s.D), int(s.Dv), grad).bytes;
  if (grad)
    shared = std::max(shared, tcKeyLayout(int(s.D), int(s.Dv)).bytes);
  return fp.tensorCores && sixteenBit && k.dtype == q.dtype &&
         v.dtype == q.dtype && (!grad || dout == q.dtype) && s.D % 16 == 0 &&
         s.Dv % 16 == 0 && s.D <= 128 && s.Dv <= 128 &&
         shared <= deviceSharedLimit() &&
         s.B * s.H * ((s.Sq + kTcRows - 1) / kTcRows) <= INT_MAX &&
         s.B * s.Hkv * ((s.Sk + kTcKeys - 1) / kTcKeys) <= INT_MAX;
}

void flash::tensorCoreForward(const char *kn, Params p, int32_t dtype) {
  p.qTiles = (p.Sq + kTcRows - 1) / kTcRows;
  launch(kn,
         dtype == CLEAVE_BF16 ? tcQueryKernel<__nv_bfloat16, false>
                              : tcQueryKernel<__half, false>,
         p.B * p.H * p.qTiles, tcLayout(p.D, p.Dv, false).bytes, p);
}

void flash::tensorCoreBackward(const char *kn, Params p, int32_t dtype) {
  p.qTiles = (p.Sq + kTcRows - 1) / kTcRows;
  p.kTiles = (p.Sk + kTcKeys - 1) / kTcKeys;
  bool bf16 = dtype == CLEAVE_BF16;
  launch(kn,
         bf16 ? tcQueryKernel<__nv_bfloat16, true>
              : tcQueryKernel<__half, true>,
         p.B * p.H * p.qTiles, tcLayout(p.D, p.Dv, true).bytes, p);
  launch(kn, bf16 ? tcKeyKernel<__nv_bfloat16> : tcKeyKernel<__half>,
         p.B * p.Hkv * p.kTiles, tcKeyLayout(p.D, p.Dv).bytes, p);
}
