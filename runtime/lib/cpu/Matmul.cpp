//===- Matmul.cpp - matrix multiplication CPU kernels ---------------------===//
//
// matmul (batch dimensions broadcast NumPy-style), expert_matmul, gemm (a
// matmul reading its operands transposed), linear
// (a matmul with its bias and activation applied in one pass over the
// output) and matmul_gelu_grad (its backward: the GELU gradient and the
// bias gradient after the GEMM), all on OpenBLAS sgemm, run single-threaded
// per call and parallelized with the runtime's own OpenMP threads (over
// batches, or by splitting one matrix). A batch whose right operand is
// shared is folded into one sgemm with a taller M, the common case of a
// linear layer over [B, S, K]. Integer matmuls run a plain i64 loop.
//
//===----------------------------------------------------------------------===//

#include "FastMath.h"
#include "KernelChecks.h"
#include "Tensor.h"

#include "cleave/Runtime/Float16.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <optional>

using namespace cleave::rt;

namespace {

/// c = op(a) op(b) for one row-major matrix: op(a) [m, k], op(b) [k, n],
/// c [m, n] with leading dimension ldc.
void sgemmSerial(bool ta, bool tb, const float *a, const float *b, float *c,
                 int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                 int64_t ldc) {
  rowMajorGemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

void sgemmSerial(const float *a, const float *b, float *c, int64_t m, int64_t n,
                 int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  sgemmSerial(false, false, a, b, c, m, n, k, lda, ldb, ldc);
}

/// Below this many multiply-adds a matmul runs on one thread.
constexpr int64_t kParallelFlops = int64_t(1) << 18;

/// c = op(a) op(b) for one dense matrix (a [m, k] or [k, m], b [k, n] or
/// [n, k]), split over the OpenMP threads along its larger output
/// dimension.
void sgemm(bool ta, bool tb, const float *a, const float *b, float *c,
           int64_t m, int64_t n, int64_t k) {
  int64_t lda = ta ? m : k, ldb = tb ? k : n;
  int threads = omp_get_max_threads();
  if (threads == 1 || m * n * k < kParallelFlops || omp_in_parallel()) {
    sgemmSerial(ta, tb, a, b, c, m, n, k, lda, ldb, n);
    return;
  }
  bool splitRows = m >= n;
  int64_t size = splitRows ? m : n;
  // Chunks that are multiples of 16 keep OpenBLAS on full micro-tiles.
  int64_t chunk = ((size + threads - 1) / threads + 15) / 16 * 16;
  int64_t chunks = (size + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) num_threads(int(chunks))
  for (int64_t t = 0; t < chunks; ++t) {
    int64_t begin = t * chunk, len = std::min(chunk, size - begin);
    // Rows of c are rows of op(a): rows of a, or columns of a transposed;
    // columns of c are columns of op(b).
    if (splitRows)
      sgemmSerial(ta, tb, a + (ta ? begin : begin * lda), b, c + begin * n, len,
                  n, k, lda, ldb, n);
    else
      sgemmSerial(ta, tb, a, b + (tb ? begin * ldb : begin), c + begin, m, len,
                  k, lda, ldb, n);
  }
}

void sgemm(const float *a, const float *b, float *c, int64_t m, int64_t n,
           int64_t k) {
  sgemm(false, false, a, b, c, m, n, k);
}

void matmulF32(char *arena, const MatmulPlan &p, const cleave_tensor &a,
               const cleave_tensor &b, const cleave_tensor &out) {
  useSingleThreadedBlas();
  // sgemm must not write over its inputs: copy an input that aliases out.
  Input<float> av(arena, a, overlaps(a, out)), bv(arena, b, overlaps(b, out));
  Output<float> ov(arena, out);
  const float *ap = av.data(), *bp = bv.data();
  float *op = ov.data();
  if (p.bShared && p.aDense) {
    sgemm(ap, bp, op, p.batches * p.m, p.n, p.k);
  } else if (p.batches >= omp_get_max_threads() &&
             p.batches * p.m * p.n * p.k >= kParallelFlops) {
    // Enough batches to give each thread whole matrices.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < p.batches; ++i)
      sgemmSerial(ap + p.aOffset(i), bp + p.bOffset(i), op + i * p.m * p.n, p.m,
                  p.n, p.k, p.k, p.n, p.n);
  } else {
    for (int64_t i = 0; i < p.batches; ++i)
      sgemm(ap + p.aOffset(i), bp + p.bOffset(i), op + i * p.m * p.n, p.m, p.n,
            p.k);
  }
  ov.commit();
}

void matmulI64(char *arena, const MatmulPlan &p, const cleave_tensor &a,
               const cleave_tensor &b, const cleave_tensor &out) {
  Input<int64_t> av(arena, a, true), bv(arena, b, true);
  Output<int64_t> ov(arena, out);
  int64_t m = p.m, n = p.n, k = p.k;
  bool parallel = p.batches * m * n * k >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < p.batches * m; ++t) {
    int64_t batch = t / m, i = t % m;
    const int64_t *arow = av.data() + p.aOffset(batch) + i * k;
    const int64_t *bm = bv.data() + p.bOffset(batch);
    int64_t *crow = ov.data() + t * n;
    for (int64_t j = 0; j < n; ++j)
      crow[j] = 0;
    // Wrapping arithmetic, as in the elementwise integer kernels.
    for (int64_t kk = 0; kk < k; ++kk) {
      uint64_t av0 = uint64_t(arow[kk]);
      for (int64_t j = 0; j < n; ++j)
        crow[j] = int64_t(uint64_t(crow[j]) + av0 * uint64_t(bm[kk * n + j]));
    }
  }
  ov.commit();
}

void matmul(const char *kernel, char *arena, const cleave_tensor *a,
            const cleave_tensor *b, const cleave_tensor *out) {
  MatmulPlan p = planMatmul(kernel, a, b, out);
  bool isFloat = isFloatType(out->dtype);
  if (isFloat)
    matmulF32(arena, p, *a, *b, *out);
  else
    matmulI64(arena, p, *a, *b, *out);
}

/// The weight of a fused GEMM as a plain [k, n] f32 matrix. A weight read
/// as stored is its f32 view (`view`, converted from 16 bits there). A
/// transposed [n, k] weight is transposed in tiles into `buf`, converting
/// 16-bit elements on the way: one pass over it, where converting first and
/// transposing then took two (about 2% of a bf16 GPT step). OpenBLAS's
/// sgemm with CblasTrans ran about 5% slower on the Linear shapes of a GPT
/// step, more than this pass over the weight costs. The transpose reads the
/// whole weight before the GEMM writes anything, so an aliased weight needs
/// no copy.
const float *plainWeight(char *arena, const cleave_tensor &w, bool written,
                         const LinearPlan &p, std::optional<Input<float>> &view,
                         PooledBuffer &buf) {
  if (!p.transposed) {
    view.emplace(arena, w, written);
    return view->data();
  }
  int64_t n = p.n, k = p.k;
  float *t = static_cast<float *>(buf.allocate(size_t(n * k) * sizeof(float)));
  auto transpose = [&](auto load) {
    constexpr int64_t kTile = 32;
    int64_t tiles = (n + kTile - 1) / kTile;
    bool parallel = n * k >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t ti = 0; ti < tiles; ++ti)
      for (int64_t j0 = 0; j0 < k; j0 += kTile)
        for (int64_t i = ti * kTile; i < std::min(n, (ti + 1) * kTile); ++i)
          for (int64_t j = j0; j < std::min(k, j0 + kTile); ++j)
            t[j * n + i] = load(i * k + j);
  };
  const char *src = dataOf(arena, w);
  const uint16_t *bits = reinterpret_cast<const uint16_t *>(src);
  switch (w.dtype) {
  case CLEAVE_BF16:
    transpose([bits](int64_t e) { return bf16ToFloat(bits[e]); });
    break;
  case CLEAVE_F16:
    transpose([bits](int64_t e) { return halfToFloat(bits[e]); });
    break;
  default: {
    const float *f = reinterpret_cast<const float *>(src);
    transpose([f](int64_t e) { return f[e]; });
  }
  }
  return t;
}

/// out = act(x W + bias) and pre = x W + bias: one sgemm into out's f32
/// view, then one pass over it while each row is still in cache.
void linear(char *arena, const LinearPlan &p, const cleave_tensor &x,
            const cleave_tensor &w, const cleave_tensor &bias,
            const cleave_tensor &out, const cleave_tensor *pre) {
  useSingleThreadedBlas();
  auto written = [&](const cleave_tensor &t) {
    return overlaps(t, out) || (pre && overlaps(t, *pre));
  };
  Input<float> xv(arena, x, written(x)), bv(arena, bias, written(bias));
  std::optional<Input<float>> wv;
  Output<float> ov(arena, out);
  std::optional<Output<float>> pv;
  if (pre)
    pv.emplace(arena, *pre);
  float *op = ov.data(), *pp = pv ? pv->data() : nullptr;
  const float *bp = bv.data();
  PooledBuffer plain;
  sgemm(xv.data(), plainWeight(arena, w, written(w), p, wv, plain), op, p.rows,
        p.n, p.k);
  int64_t n = p.n;
  // One plain loop per case, so that each vectorizes (a store under a
  // condition in the loop would not).
  auto epilogue = [&](auto act) {
    bool parallel = p.rows * n >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < p.rows; ++r) {
      float *row = op + r * n;
      if (pp) {
        float *preRow = pp + r * n;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) {
          float v = row[j] + bp[j];
          preRow[j] = v;
          row[j] = act(v);
        }
      } else {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j)
          row[j] = act(row[j] + bp[j]);
      }
    }
  };
  switch (p.activation) {
  case CLEAVE_ACT_NONE:
    epilogue([](float v) { return v; });
    break;
  case CLEAVE_ACT_GELU_ERF:
    epilogue([](float v) { return geluErf(v); });
    break;
  case CLEAVE_ACT_GELU_TANH:
    epilogue([](float v) { return geluTanh(v); });
    break;
  }
  ov.commit();
  if (pv)
    pv->commit();
}

/// dbias [n] = the column sums of x [rows, n]. Each strip of columns is
/// summed over the rows in order by one thread, in f64 (as the reduce
/// kernel does): the same bits whatever the thread count.
void sumColumns(char *arena, const float *x, int64_t rows, int64_t n,
                const cleave_tensor &dbias) {
  constexpr int64_t kBlock = 512;
  Output<float> bv(arena, dbias);
  int64_t blocks = (n + kBlock - 1) / kBlock;
  bool parallel = rows * n >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t j0 = b * kBlock, len = std::min(kBlock, n - j0);
    double sums[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = x + r * n + j0;
#pragma omp simd
      for (int64_t j = 0; j < len; ++j)
        sums[j] += row[j];
    }
    for (int64_t j = 0; j < len; ++j)
      bv.data()[j0 + j] = float(sums[j]);
  }
  bv.commit();
}

/// dz = gelu'(pre) * (dy W), and dbias = the column sums of dz: one sgemm
/// into dz's f32 view, one pass over it, and one over its columns.
void matmulGeluGrad(char *arena, const LinearPlan &p, const cleave_tensor &dy,
                    const cleave_tensor &w, const cleave_tensor &pre,
                    const cleave_tensor &dz, const cleave_tensor *dbias) {
  useSingleThreadedBlas();
  auto written = [&](const cleave_tensor &t) {
    return overlaps(t, dz) || (dbias && overlaps(t, *dbias));
  };
  Input<float> dyv(arena, dy, written(dy)), prev(arena, pre, written(pre));
  std::optional<Input<float>> wv;
  Output<float> ov(arena, dz);
  float *op = ov.data();
  const float *pp = prev.data();
  PooledBuffer plain;
  sgemm(dyv.data(), plainWeight(arena, w, written(w), p, wv, plain), op, p.rows,
        p.n, p.k);
  int64_t total = p.rows * p.n, n = p.n;
  // A plain simd loop per row (a combined `parallel for simd` over the
  // whole tensor stayed scalar, at the cost of the GEMM itself).
  auto apply = [&](auto grad) {
    bool parallel = total >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < p.rows; ++r) {
      float *row = op + r * n;
      const float *preRow = pp + r * n;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        row[j] *= grad(preRow[j]);
    }
  };
  if (p.activation == CLEAVE_ACT_GELU_ERF)
    apply([](float v) { return geluErfGrad(v); });
  else
    apply([](float v) { return geluTanhGrad(v); });
  if (dbias)
    sumColumns(arena, op, p.rows, n, *dbias);
  ov.commit();
}

} // namespace

/// OpenBLAS runs single-threaded inside the runtime's OpenMP threads: with
/// its own pthreads pool as well, the two sets of threads spin against each
/// other between kernels (measured: 2x slower matmuls in a sequence of
/// kernels). Concurrent single-threaded calls are supported by OpenBLAS.
void cleave::rt::useSingleThreadedBlas() {
  static bool done = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)done;
}

void cleave::rt::rowMajorGemm(bool transA, bool transB, int64_t m, int64_t n,
                              int64_t k, float alpha, const float *a,
                              int64_t lda, const float *b, int64_t ldb,
                              float beta, float *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, blasint(m), blasint(n),
              blasint(k), alpha, a, blasint(lda), b, blasint(ldb), beta, c,
              blasint(ldc));
}

extern "C" {

void cleave_rt_matmul(char *arena, const cleave_tensor *a,
                      const cleave_tensor *b, const cleave_tensor *out) {
  matmul("cleave_rt_matmul", arena, a, b, out);
}

void cleave_rt_gemm(char *arena, const cleave_tensor *a, const cleave_tensor *b,
                    const cleave_tensor *out, const cleave_tensor *dbias,
                    int32_t transpose_a, int32_t transpose_b) {
  GemmPlan p =
      planGemm("cleave_rt_gemm", a, b, out, dbias, transpose_a, transpose_b);
  useSingleThreadedBlas();
  // sgemm must not write over its inputs: copy an input that an output
  // overlaps.
  auto written = [&](const cleave_tensor &t) {
    return overlaps(t, *out) || (dbias && overlaps(t, *dbias));
  };
  Input<float> av(arena, *a, written(*a)), bv(arena, *b, written(*b));
  Output<float> ov(arena, *out);
  sgemm(p.transposeA, p.transposeB, av.data(), bv.data(), ov.data(), p.m, p.n,
        p.k);
  // a is [k, m] here (planGemm): its column sums.
  if (dbias)
    sumColumns(arena, av.data(), p.k, p.m, *dbias);
  ov.commit();
}

void cleave_rt_linear(char *arena, const cleave_tensor *x,
                      const cleave_tensor *w, const cleave_tensor *bias,
                      const cleave_tensor *out, const cleave_tensor *pre,
                      int32_t transpose_w, int32_t activation) {
  LinearPlan p = planLinear("cleave_rt_linear", x, w, bias, out, pre,
                            transpose_w, activation);
  linear(arena, p, *x, *w, *bias, *out, pre);
}

void cleave_rt_matmul_gelu_grad(char *arena, const cleave_tensor *dy,
                                const cleave_tensor *w,
                                const cleave_tensor *pre,
                                const cleave_tensor *dz,
                                const cleave_tensor *dbias, int32_t transpose_w,
                                int32_t activation) {
  LinearPlan p = planMatmulGeluGrad("cleave_rt_matmul_gelu_grad", dy, w, pre,
                                    dz, dbias, transpose_w, activation);
  matmulGeluGrad(arena, p, *dy, *w, *pre, *dz, dbias);
}

void cleave_rt_expert_matmul(char *arena, const cleave_tensor *x,
                             const cleave_tensor *w, const cleave_tensor *out) {
  const char *k = "cleave_rt_expert_matmul";
  checkExpertMatmul(k, x, w, out);
  matmul(k, arena, x, w, out);
}

} // extern "C"
