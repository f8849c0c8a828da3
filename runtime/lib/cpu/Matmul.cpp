//===- Matmul.cpp - matrix multiplication CPU kernels ---------------------===//
//
// matmul (batch dimensions broadcast NumPy-style) and expert_matmul, both on
// OpenBLAS sgemm, run single-threaded per call and parallelized with the
// runtime's own OpenMP threads (over batches, or by splitting one matrix).
// A batch whose right operand is shared is folded into one sgemm with a
// taller M, the common case of a linear layer over [B, S, K]. Integer
// matmuls run a plain i64 loop.
//
//===----------------------------------------------------------------------===//

#include "KernelChecks.h"
#include "Tensor.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

using namespace cleave::rt;

namespace {

void sgemmSerial(const float *a, const float *b, float *c, int64_t m, int64_t n,
                 int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      std::memset(c + i * ldc, 0, size_t(n) * sizeof(float));
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(m), blasint(n),
              blasint(k), 1.0f, a, blasint(lda), b, blasint(ldb), 0.0f, c,
              blasint(ldc));
}

/// Below this many multiply-adds a matmul runs on one thread.
constexpr int64_t kParallelFlops = int64_t(1) << 18;

/// c = a b for one matrix, split over the OpenMP threads along its larger
/// output dimension.
void sgemm(const float *a, const float *b, float *c, int64_t m, int64_t n,
           int64_t k) {
  int threads = omp_get_max_threads();
  if (threads == 1 || m * n * k < kParallelFlops || omp_in_parallel()) {
    sgemmSerial(a, b, c, m, n, k, k, n, n);
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
    if (splitRows)
      sgemmSerial(a + begin * k, b, c + begin * n, len, n, k, k, n, n);
    else
      sgemmSerial(a, b + begin, c + begin, m, len, k, k, n, n);
  }
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

extern "C" {

void cleave_rt_matmul(char *arena, const cleave_tensor *a,
                      const cleave_tensor *b, const cleave_tensor *out) {
  matmul("cleave_rt_matmul", arena, a, b, out);
}

void cleave_rt_expert_matmul(char *arena, const cleave_tensor *x,
                             const cleave_tensor *w, const cleave_tensor *out) {
  const char *k = "cleave_rt_expert_matmul";
  checkExpertMatmul(k, x, w, out);
  matmul(k, arena, x, w, out);
}

} // extern "C"
