// Shim: CUDA's WMMA API (nvcuda::wmma), emulated for the tensor-core
// attention kernel (see ../FakeCuda.h). A fragment holds its whole tile in
// every lane (the hardware spreads it over the warp in an undocumented
// layout, which code may only touch through this API), and every call is a
// warp-wide rendezvous, as the *_sync names say: a call that not every lane
// of the warp makes ends the run. Pointers must be 32-byte aligned and
// leading dimensions multiples of 16 bytes, as the CUDA programming guide
// requires. Products accumulate in f32 in the order of k.
#ifndef CLEAVE_TEST_CUDAEMULATION_MMA_H
#define CLEAVE_TEST_CUDAEMULATION_MMA_H

#include "../FakeCuda.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static constexpr int rows = std::is_same_v<Use, matrix_b> ? K : M;
  static constexpr int cols = std::is_same_v<Use, matrix_a> ? K : N;
  static constexpr int num_elements = rows * cols;
  T x[num_elements]; // row-major, whole tile
};

namespace detail {
inline void checkPointer(const void *p, unsigned ldm, size_t elementBytes) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0 || (ldm * elementBytes) % 16) {
    std::fprintf(stderr, "fake WMMA: a pointer not 32-byte aligned or a "
                         "leading dimension not a multiple of 16 bytes\n");
    std::abort();
  }
}
} // namespace detail

template <class Use, int M, int N, int K, class T, class Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout> &f, const T *p,
                      unsigned ldm) {
  fake::warpBarrier();
  detail::checkPointer(p, ldm, sizeof(T));
  using F = fragment<Use, M, N, K, T, Layout>;
  constexpr bool colMajor = std::is_same_v<Layout, col_major>;
  for (int i = 0; i < F::rows; ++i)
    for (int j = 0; j < F::cols; ++j)
      f.x[i * F::cols + j] = colMajor ? p[j * ldm + i] : p[i * ldm + j];
  fake::warpBarrier();
}

template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float> &f,
                      const float *p, unsigned ldm, layout_t layout) {
  fake::warpBarrier();
  detail::checkPointer(p, ldm, sizeof(float));
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      f.x[i * N + j] =
          layout == mem_row_major ? p[i * ldm + j] : p[j * ldm + i];
  fake::warpBarrier();
}

template <int M, int N, int K>
void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f,
                       unsigned ldm, layout_t layout) {
  fake::warpBarrier();
  detail::checkPointer(p, ldm, sizeof(float));
  // Lane 0 stores; the others wait, as the whole warp's store completes
  // before any lane goes on.
  if (fake::laneId() == 0)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        (layout == mem_row_major ? p[i * ldm + j] : p[j * ldm + i]) =
            f.x[i * N + j];
  fake::warpBarrier();
}

template <class Use, int M, int N, int K, class T, class Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout> &f, T value) {
  for (T &e : f.x)
    e = value;
}

template <int M, int N, int K, class T, class LA, class LB>
void mma_sync(fragment<accumulator, M, N, K, float> &d,
              const fragment<matrix_a, M, N, K, T, LA> &a,
              const fragment<matrix_b, M, N, K, T, LB> &b,
              const fragment<accumulator, M, N, K, float> &c) {
  fake::warpBarrier();
  float out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float acc = c.x[i * N + j];
      for (int l = 0; l < K; ++l)
        acc += float(a.x[i * K + l]) * float(b.x[l * N + j]);
      out[i * N + j] = acc;
    }
  for (int e = 0; e < M * N; ++e)
    d.x[e] = out[e];
  fake::warpBarrier();
}

} // namespace nvcuda::wmma

#endif
