//===- DeviceUtil.cu - scratch, f32 staging, GEMM of the CUDA kernels ----===//
//
// The definitions behind DeviceUtil.cuh: stream-ordered scratch memory from
// the device's default pool (kept cached between calls), dtype conversions
// to and from f32 staging buffers, and the row-major strided-batched GEMM
// (the usual operand swap of a column-major cuBLAS).
//
//===----------------------------------------------------------------------===//

#include "DeviceUtil.cuh"

#include "../cpu/Tensor.h"

#include <climits>
#include <cstdint>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

/// Keeps freed scratch in the default pool instead of returning it to the
/// driver at every synchronization (the default release threshold is 0).
void keepPoolMemory() {
  static bool done = [] {
    int device = 0;
    check(cudaGetDevice(&device), "querying the device");
    cudaMemPool_t pool;
    check(cudaDeviceGetDefaultMemPool(&pool, device),
          "querying the memory pool");
    uint64_t threshold = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold,
                                  &threshold),
          "configuring the memory pool");
    return true;
  }();
  (void)done;
}

__global__ void toF32Kernel(const char *src, int32_t dtype, float *dst,
                            int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = loadF32(src, dtype, i);
}

__global__ void fromF32Kernel(const float *src, char *dst, int32_t dtype,
                              int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    storeF32(dst, dtype, i, src[i]);
}

/// C = beta C (0 when beta is 0, whatever C held) for the k = 0 GEMM.
template <typename T>
__global__ void scaleMatricesKernel(T *c, int64_t m, int64_t n, int64_t ldc,
                                    int64_t strideC, int64_t batches,
                                    float beta) {
  int64_t total = batches * m * n;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t batch = e / (m * n), i = e / n % m, j = e % n;
    T &x = c[batch * strideC + i * ldc + j];
    x = beta == 0.0f ? T(0.0f) : T(beta * float(x));
  }
}

int toInt(const char *kernel, int64_t value, const char *what) {
  if (value > INT_MAX)
    cleave_rt_fail("%s: GEMM %s %lld exceeds the cuBLAS limit", kernel, what,
                   (long long)value);
  return static_cast<int>(value);
}

} // namespace

cuda::ScratchBuffer::~ScratchBuffer() {
  // A failed free would only leak: no error path from a destructor.
  if (ptr)
    (void)cudaFreeAsync(ptr, stream());
}

void cuda::ScratchBuffer::allocate(size_t bytes, const char *kernel) {
  if (ptr)
    cleave_rt_fail("%s: scratch buffer allocated twice", kernel);
  keepPoolMemory();
  cudaError_t status = cudaMallocAsync(&ptr, bytes ? bytes : 1, stream());
  if (status != cudaSuccess)
    cleave_rt_fail("%s: cannot allocate %llu bytes of scratch on the GPU: %s",
                   kernel, (unsigned long long)bytes,
                   cudaGetErrorString(status));
}

void cuda::deviceToF32(const char *src, int32_t dtype, float *dst, int64_t n,
                       const char *kernel) {
  if (n <= 0)
    return;
  if (dtype == CLEAVE_F32) {
    check(cudaMemcpyAsync(dst, src, size_t(n) * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream()),
          "copying to scratch");
    return;
  }
  toF32Kernel<<<blocksFor(n), kThreads, 0, stream()>>>(src, dtype, dst, n);
  checkLaunchOf(kernel);
}

void cuda::deviceFromF32(const float *src, char *dst, int32_t dtype, int64_t n,
                         const char *kernel) {
  if (n <= 0)
    return;
  if (dtype == CLEAVE_F32) {
    check(cudaMemcpyAsync(dst, src, size_t(n) * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream()),
          "copying from scratch");
    return;
  }
  fromF32Kernel<<<blocksFor(n), kThreads, 0, stream()>>>(src, dst, dtype, n);
  checkLaunchOf(kernel);
}

const float *cuda::f32Input(char *arena, const cleave_tensor &t, bool copy,
                            ScratchBuffer &buf, const char *kernel) {
  const char *data = dataOf(arena, t);
  if (t.dtype == CLEAVE_F32 && !copy)
    return reinterpret_cast<const float *>(data);
  int64_t n = numElements(t);
  buf.allocate(size_t(n) * sizeof(float), kernel);
  deviceToF32(data, t.dtype, buf.as<float>(), n, kernel);
  return buf.as<float>();
}

float *cuda::f32Output(char *arena, const cleave_tensor &t, ScratchBuffer &buf,
                       const char *kernel) {
  if (t.dtype == CLEAVE_F32)
    return reinterpret_cast<float *>(dataOf(arena, t));
  buf.allocate(size_t(numElements(t)) * sizeof(float), kernel);
  return buf.as<float>();
}

void cuda::commitF32Output(char *arena, const cleave_tensor &t,
                           const float *data, const char *kernel) {
  char *dst = dataOf(arena, t);
  if (reinterpret_cast<const char *>(data) == dst)
    return;
  deviceFromF32(data, dst, t.dtype, numElements(t), kernel);
}

const char *cuda::bytesInput(char *arena, const cleave_tensor &t, bool copy,
                             ScratchBuffer &buf, const char *kernel) {
  const char *data = dataOf(arena, t);
  if (!copy)
    return data;
  size_t bytes = size_t(numElements(t)) * elementSize(t.dtype);
  buf.allocate(bytes, kernel);
  if (bytes)
    check(cudaMemcpyAsync(buf.as<char>(), data, bytes, cudaMemcpyDeviceToDevice,
                          stream()),
          "copying to scratch");
  return buf.as<char>();
}

void cuda::gemm(const char *kernel, cudaDataType_t type, bool transA,
                bool transB, int64_t m, int64_t n, int64_t k, float alpha,
                const void *a, int64_t lda, int64_t strideA, const void *b,
                int64_t ldb, int64_t strideB, float beta, void *c, int64_t ldc,
                int64_t strideC, int64_t batches, bool tf32) {
  gemmInto(kernel, type, type, transA, transB, m, n, k, alpha, a, lda,
           strideA, b, ldb, strideB, beta, c, ldc, strideC, batches, tf32);
}

void cuda::gemmInto(const char *kernel, cudaDataType_t type,
                    cudaDataType_t cType, bool transA, bool transB, int64_t m,
                    int64_t n, int64_t k, float alpha, const void *a,
                    int64_t lda, int64_t strideA, const void *b, int64_t ldb,
                    int64_t strideB, float beta, void *c, int64_t ldc,
                    int64_t strideC, int64_t batches, bool tf32) {
  if (m <= 0 || n <= 0 || batches <= 0)
    return;
  if (k <= 0) {
    // cuBLAS rejects the leading dimension 0 of an empty operand.
    int64_t total = batches * m * n;
    switch (cType) {
    case CUDA_R_16F:
      scaleMatricesKernel<__half><<<blocksFor(total), kThreads, 0, stream()>>>(
          static_cast<__half *>(c), m, n, ldc, strideC, batches, beta);
      break;
    case CUDA_R_16BF:
      scaleMatricesKernel<__nv_bfloat16><<<blocksFor(total), kThreads, 0, stream()>>>(
          static_cast<__nv_bfloat16 *>(c), m, n, ldc, strideC, batches, beta);
      break;
    default:
      scaleMatricesKernel<float><<<blocksFor(total), kThreads, 0, stream()>>>(
          static_cast<float *>(c), m, n, ldc, strideC, batches, beta);
    }
    checkLaunchOf(kernel);
    return;
  }
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
  // row-major buffers read as column-major are the transposes, so swap the
  // operands and keep each one's transpose flag.
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  checkBlas(cublasGemmStridedBatchedEx(
                cublas(), opB, opA, toInt(kernel, n, "n"),
                toInt(kernel, m, "m"), toInt(kernel, k, "k"), &alpha, b, type,
                toInt(kernel, ldb, "ldb"), strideB, a, type,
                toInt(kernel, lda, "lda"), strideA, &beta, c, cType,
                toInt(kernel, ldc, "ldc"), strideC,
                toInt(kernel, batches, "batch count"),
                tf32 && type == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32
                                           : CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT),
            kernel);
}
