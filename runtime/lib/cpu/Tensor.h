//===- Tensor.h - shared helpers of the CPU kernels -------------*- C++ -*-===//
//
// Descriptor queries, element type conversions, typed views of arena tensors
// (converted copies when the stored type is not the compute type) and the
// NumPy broadcasting iteration that the elementwise kernels share.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_CPU_TENSOR_H
#define CLEAVE_RUNTIME_LIB_CPU_TENSOR_H

#include "cleave/Runtime/cleave_rt.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cleave::rt {

/// Element counts above this run OpenMP loops in parallel; below it the
/// fork/join costs more than it saves.
constexpr int64_t kParallelElements = 1 << 15;

/// Checks that `t` is a well-formed descriptor (known dtype, rank in
/// [0, CLEAVE_RT_MAX_RANK], non-negative sizes); fails naming `kernel`.
void checkTensor(const char *kernel, const char *what, const cleave_tensor *t);

int64_t numElements(const cleave_tensor &t);
/// Fails unless `t` holds integer indices (i64 or i32).
void checkIndexTensor(const char *kernel, const char *what,
                      const cleave_tensor &t);
/// Bytes per element; 0 for an unknown dtype.
size_t elementSize(int32_t dtype);
bool isFloatType(int32_t dtype);
/// "f32", "i64", ... or "dtype(<n>)" for an unknown one.
const char *dtypeName(int32_t dtype);
/// "[2, 3, 4]".
std::string shapeString(const cleave_tensor &t);
bool sameShape(const cleave_tensor &a, const cleave_tensor &b);
/// True when the byte ranges of the two tensors intersect.
bool overlaps(const cleave_tensor &a, const cleave_tensor &b);

inline char *dataOf(char *arena, const cleave_tensor &t) {
  return arena + t.offset;
}

/// Conversions of `n` elements between a stored dtype and a compute type:
/// float (f32), int64_t (i64) or uint8_t (i1, any nonzero is true). Float to
/// integer truncates toward zero; NaN gives 0 and values beyond the int64
/// range saturate; narrowing to i32 wraps like a C cast.
void convertToF32(const void *src, int32_t dtype, float *dst, int64_t n);
void convertToI64(const void *src, int32_t dtype, int64_t *dst, int64_t n);
void convertToBool(const void *src, int32_t dtype, uint8_t *dst, int64_t n);
void convertFromF32(const float *src, void *dst, int32_t dtype, int64_t n);
void convertFromI64(const int64_t *src, void *dst, int32_t dtype, int64_t n);

template <typename T> struct ComputeType;
template <> struct ComputeType<float> {
  static constexpr int32_t dtype = CLEAVE_F32;
};
template <> struct ComputeType<int64_t> {
  static constexpr int32_t dtype = CLEAVE_I64;
};
template <> struct ComputeType<uint8_t> {
  static constexpr int32_t dtype = CLEAVE_I1;
};

/// Uninitialized host memory for a converted copy of a tensor, taken from
/// and returned to a process-wide pool: a kernel call on 16-bit tensors
/// converts its operands to f32, and a fresh large allocation per call
/// would cost a zero fill and a page fault per 4 KiB (the allocator returns
/// large blocks to the system on free), more than the conversion itself.
class PooledBuffer {
public:
  PooledBuffer() = default;
  ~PooledBuffer();
  PooledBuffer(const PooledBuffer &) = delete;
  PooledBuffer &operator=(const PooledBuffer &) = delete;
  /// At least `bytes` bytes, 64-byte aligned; once per buffer.
  void *allocate(size_t bytes);

private:
  void *ptr = nullptr;
  size_t capacity = 0;
};

/// A read-only view of an arena tensor as T: the arena bytes themselves when
/// the dtype is T's, else a converted copy. `copy` forces a copy, for kernels
/// whose output may alias this input.
template <typename T> class Input {
public:
  Input(char *arena, const cleave_tensor &t, bool copy = false);
  Input(const Input &) = delete; // ptr may point into storage
  Input &operator=(const Input &) = delete;
  const T *data() const { return ptr; }
  const T &operator[](int64_t i) const { return ptr[i]; }

private:
  const T *ptr;
  PooledBuffer storage;
};

/// A writable view of an arena tensor as T; `commit` stores a converted copy
/// back when the dtype is not T's.
template <typename T> class Output {
public:
  Output(char *arena, const cleave_tensor &t);
  Output(const Output &) = delete; // ptr may point into storage
  Output &operator=(const Output &) = delete;
  T *data() { return ptr; }
  T &operator[](int64_t i) { return ptr[i]; }
  void commit();

private:
  void *dest;
  int32_t dtype;
  int64_t count;
  T *ptr;
  PooledBuffer storage;
};

/// NumPy broadcasting of up to three operands to an output shape, with
/// adjacent dimensions merged where every operand allows it. Strides are in
/// elements; a broadcast dimension has stride 0.
struct Broadcast {
  static constexpr int kMaxOperands = 3;
  int rank = 0;
  int numOperands = 0;
  int64_t shape[CLEAVE_RT_MAX_RANK];
  int64_t strides[kMaxOperands][CLEAVE_RT_MAX_RANK];
  int64_t total = 1;

  /// Fails naming `kernel` when an operand does not broadcast to `out`.
  Broadcast(const char *kernel, const cleave_tensor &out,
            const cleave_tensor *const *operands, int numOperands);

  /// Runs `body(outOffset, offsets, length, innerStrides)` over contiguous
  /// runs of the output (parallel when large); `offsets[i]` is operand i's
  /// element offset at the run start and `innerStrides[i]` (0 or 1) its
  /// stride along the run.
  template <typename Body> void forEachRun(Body &&body) const;
};

template <typename Body> void Broadcast::forEachRun(Body &&body) const {
  if (total == 0)
    return;
  int64_t inner = rank == 0 ? 1 : shape[rank - 1];
  int64_t rows = total / inner;
  // Split long rows so that a single huge run still spreads over threads.
  constexpr int64_t kChunk = 1 << 14;
  int64_t chunks = (inner + kChunk - 1) / kChunk;
  int64_t tasks = rows * chunks;
  int64_t innerStrides[kMaxOperands] = {0, 0, 0};
  for (int i = 0; i < numOperands; ++i)
    innerStrides[i] = rank == 0 ? 0 : strides[i][rank - 1];
#pragma omp parallel for schedule(static) if (total >= kParallelElements)
  for (int64_t task = 0; task < tasks; ++task) {
    int64_t row = task / chunks, chunk = task % chunks;
    int64_t offsets[kMaxOperands] = {0, 0, 0};
    int64_t rest = row;
    for (int d = rank - 2; d >= 0; --d) {
      int64_t idx = rest % shape[d];
      rest /= shape[d];
      for (int i = 0; i < numOperands; ++i)
        offsets[i] += idx * strides[i][d];
    }
    int64_t begin = chunk * kChunk;
    int64_t length = inner - begin < kChunk ? inner - begin : kChunk;
    for (int i = 0; i < numOperands; ++i)
      offsets[i] += begin * innerStrides[i];
    body(row * inner + begin, offsets, length, innerStrides);
  }
}

/// Copies an `outRank` tensor element by element from `src`, where out
/// index (i0, i1, ...) reads src element `base + sum(ik * srcStrides[k])`
/// (strides in elements, possibly 0 or negative). Shared by transpose,
/// broadcast_in_dim and slice.
void stridedCopy(const char *src, char *dst, size_t elemSize, int outRank,
                 const int64_t *outShape, const int64_t *srcStrides,
                 int64_t base);

/// Makes OpenBLAS run each call on the calling thread (Matmul.cpp): the
/// kernels parallelize with OpenMP, and a second pool of BLAS threads would
/// spin against it.
void useSingleThreadedBlas();

/// C = alpha op(A) op(B) + beta C, row-major, on the calling thread's BLAS;
/// unlike cblas_sgemm it accepts an empty inner dimension (C = beta C).
void rowMajorGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  float alpha, const float *a, int64_t lda, const float *b,
                  int64_t ldb, float beta, float *c, int64_t ldc);

/// Row-major strides of `t` in elements.
void contiguousStrides(const cleave_tensor &t, int64_t *strides);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_LIB_CPU_TENSOR_H
