//===- DeviceUtil.cuh - scratch, staging, GEMM, reductions -----*- CUDA -*-===//
//
// What the GEMM-based and row-wise CUDA kernels (matmul, attention, losses,
// MoE, top-k) share: stream-ordered scratch buffers, f32 copies of tensors
// stored in another dtype (or that an output overwrites), a row-major
// strided-batched GEMM on cuBLAS, and deterministic block reductions.
// Everything here is enqueued on stream(); nothing synchronizes the host.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_CUDA_DEVICEUTIL_CUH
#define CLEAVE_RUNTIME_LIB_CUDA_DEVICEUTIL_CUH

#include "CudaCommon.cuh"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cleave::rt::cuda {

/// checkLaunch for a kernel named by its ABI function ("cleave_rt_matmul"):
/// the message names it once.
inline void checkLaunchOf(const char *function) {
  constexpr char kPrefix[] = "cleave_rt_";
  constexpr size_t kLength = sizeof(kPrefix) - 1;
  checkLaunch(std::strncmp(function, kPrefix, kLength) == 0 ? function + kLength
                                                            : function);
}

/// Device memory for one kernel call, allocated and freed in stream order
/// (cudaMallocAsync / cudaFreeAsync on stream()), so the free in the
/// destructor takes effect only after the kernels enqueued before it. The
/// pool keeps freed memory cached, so repeated calls do not go to the
/// driver.
class ScratchBuffer {
public:
  ScratchBuffer() = default;
  ScratchBuffer(size_t bytes, const char *kernel) { allocate(bytes, kernel); }
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer &) = delete;
  ScratchBuffer &operator=(const ScratchBuffer &) = delete;

  /// Allocates `bytes` (at least 1); only once per buffer.
  void allocate(size_t bytes, const char *kernel);
  template <typename T> T *as() const { return static_cast<T *>(ptr); }

private:
  void *ptr = nullptr;
};

/// Sorts the `n` pairs (rows[i], positions[i]) by row, stably (a radix
/// sort over the bits of a row index below `numRows`), into the `sorted*`
/// arrays (RowSort.cu).
void sortPositionsByRow(const int32_t *rows, int32_t *sortedRows,
                        const int32_t *positions, int32_t *sortedPositions,
                        int32_t n, int64_t numRows, const char *kernel);
/// out[i] = in[0] + ... + in[i - 1] for i < n (RowSort.cu).
void exclusivePrefixSum(const int32_t *in, int32_t *out, int32_t n,
                        const char *kernel);

/// Converts `n` elements of dtype `dtype` at `src` to f32 at `dst`.
void deviceToF32(const char *src, int32_t dtype, float *dst, int64_t n,
                 const char *kernel);
/// Converts `n` f32 elements at `src` to dtype `dtype` at `dst`.
void deviceFromF32(const float *src, char *dst, int32_t dtype, int64_t n,
                   const char *kernel);

/// `t` as f32: its arena bytes when it is f32 and `copy` is false, else a
/// converted (or plain) copy in `buf`. `copy` is for inputs that an output
/// of the same call overwrites.
const float *f32Input(char *arena, const cleave_tensor &t, bool copy,
                      ScratchBuffer &buf, const char *kernel);
/// Where an output is computed as f32: its arena bytes when it is f32, else
/// `buf`; commitF32Output then stores `buf` into the tensor.
float *f32Output(char *arena, const cleave_tensor &t, ScratchBuffer &buf,
                 const char *kernel);
void commitF32Output(char *arena, const cleave_tensor &t, const float *data,
                     const char *kernel);

/// A copy of the bytes of `t` in `buf` when `copy` (an input an output
/// overwrites), else its arena bytes.
const char *bytesInput(char *arena, const cleave_tensor &t, bool copy,
                       ScratchBuffer &buf, const char *kernel);

/// C = alpha op(A) op(B) + beta C for `batches` row-major matrices, with
/// op(A) [m, k], op(B) [k, n], C [m, n], leading dimensions in elements and
/// batch strides in elements (0 for a shared matrix). `type` is CUDA_R_32F,
/// CUDA_R_16F or CUDA_R_16BF for A, B and C alike; products accumulate in
/// f32 (CUBLAS_COMPUTE_32F: no TF32, unless `tf32`, which lets f32 operands
/// be read with a 10-bit mantissa on the tensor cores: exact for values
/// that came from bf16 or f16, whose mantissas fit in TF32's 10 bits).
/// An empty inner dimension (k = 0) gives C = beta C.
void gemm(const char *kernel, cudaDataType_t type, bool transA, bool transB,
          int64_t m, int64_t n, int64_t k, float alpha, const void *a,
          int64_t lda, int64_t strideA, const void *b, int64_t ldb,
          int64_t strideB, float beta, void *c, int64_t ldc, int64_t strideC,
          int64_t batches, bool tf32 = false);
/// gemm with C in its own type: CUDA_R_32F C from 16-bit A and B stores the
/// f32 accumulators unrounded.
void gemmInto(const char *kernel, cudaDataType_t abType, cudaDataType_t cType,
              bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              float alpha, const void *a, int64_t lda, int64_t strideA,
              const void *b, int64_t ldb, int64_t strideB, float beta, void *c,
              int64_t ldc, int64_t strideC, int64_t batches, bool tf32 = false);
inline void gemmF32(const char *kernel, bool transA, bool transB, int64_t m,
                    int64_t n, int64_t k, float alpha, const float *a,
                    int64_t lda, int64_t strideA, const float *b, int64_t ldb,
                    int64_t strideB, float beta, float *c, int64_t ldc,
                    int64_t strideC, int64_t batches, bool tf32 = false) {
  gemm(kernel, CUDA_R_32F, transA, transB, m, n, k, alpha, a, lda, strideA, b,
       ldb, strideB, beta, c, ldc, strideC, batches, tf32);
}

/// Grids of at most this many blocks for the row-per-block kernels (which
/// loop over the rest).
constexpr int64_t kMaxRowBlocks = 65535 * 8;
inline unsigned rowBlocks(int64_t rows) {
  return static_cast<unsigned>(rows < 1               ? 1
                               : rows > kMaxRowBlocks ? kMaxRowBlocks
                                                      : rows);
}

/// Threads for a block that walks a row of `n` elements: a multiple of 32
/// up to kThreads.
inline int rowThreads(int64_t n) {
  int64_t t = (n + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : t > kThreads ? kThreads : t);
}

/// The reduction of `v` over the warp with `op`, in a fixed order (the
/// result is in every lane).
template <typename T, typename Op> __device__ inline T warpReduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// The reduction of `v` over the block (blockDim.x a multiple of 32, at
/// most 1024) with `op`, returned to every thread. Deterministic for a
/// given block size. Every thread of the block must call it.
template <typename T, typename Op>
__device__ inline T blockReduce(T v, T identity, Op op) {
  __shared__ T partial[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpReduce(v, op);
  __syncthreads(); // the previous call's readers of `partial` are done
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) >> 5;
  return warpReduce(lane < warps ? partial[lane] : identity, op);
}

struct MaxOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};
struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

} // namespace cleave::rt::cuda

#endif // CLEAVE_RUNTIME_LIB_CUDA_DEVICEUTIL_CUH
