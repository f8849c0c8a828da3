//===- Matmul.cu - matrix multiplication CUDA kernels ---------------------===//
//
// matmul (batch dimensions broadcast NumPy-style) and expert_matmul on
// cuBLAS. Float operands of one dtype (f32, f16 or bf16) go straight to a
// GEMM that accumulates in f32; mixed float dtypes are staged as f32. A
// batch whose right operand is shared folds into one GEMM with a taller M;
// batches with uniform strides (0 for a broadcast operand) are one strided
// batched GEMM; any other broadcast pattern is a pointer-array batched GEMM
// whose pointers a small kernel computes. Integer matmuls run a plain i64
// kernel with wrapping arithmetic.
//
//===----------------------------------------------------------------------===//

#include "DeviceUtil.cuh"
#include "Linear.cuh"

#include "../cpu/KernelChecks.h"
#include "../cpu/Tensor.h"

#include <climits>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

/// Whether batch i of an operand with these strides starts at i * stride
/// for one `stride` (0 when the operand is broadcast over every batch).
bool uniformStride(const MatmulPlan &p, const int64_t *strides,
                   int64_t &stride) {
  stride = 0;
  bool found = false;
  int64_t expected = 0;
  for (int d = p.batchRank - 1; d >= 0; --d) {
    if (p.batchShape[d] == 1)
      continue; // never indexed past 0
    if (!found) {
      stride = strides[d];
      expected = stride;
      found = true;
    }
    if (strides[d] != expected)
      return false;
    expected *= p.batchShape[d];
  }
  return true;
}

/// The pointers of every batch for cublasGemmBatchedEx, in the swapped
/// (column-major) operand order: b's matrix first.
__global__ void batchPointersKernel(MatmulPlan p, const char *a, const char *b,
                                    char *c, int64_t elemSize, const void **pa,
                                    const void **pb, void **pc) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       i < p.batches; i += int64_t(gridDim.x) * blockDim.x) {
    pa[i] = a + p.aOffset(i) * elemSize;
    pb[i] = b + p.bOffset(i) * elemSize;
    pc[i] = c + i * p.m * p.n * elemSize;
  }
}

int toInt(const char *kernel, int64_t value) {
  if (value > INT_MAX)
    cleave_rt_fail("%s: GEMM size %lld exceeds the cuBLAS limit", kernel,
                   (long long)value);
  return static_cast<int>(value);
}

/// Whether the batches are rows of one taller GEMM (one matrix on the
/// right).
bool isTallGemm(const MatmulPlan &p) {
  return p.bShared && p.aDense && p.batches * p.m <= INT_MAX;
}

/// Whether matmulFloat needs pointer arrays: a broadcast pattern no single
/// stride describes.
bool needsPointerArrays(const MatmulPlan &p) {
  int64_t strideA, strideB;
  return !isTallGemm(p) && !(uniformStride(p, p.aStrides, strideA) &&
                             uniformStride(p, p.bStrides, strideB));
}

/// out = a b for float operands already in `type` (a, b, c device
/// pointers with the plan's batch layout, c dense).
void matmulFloat(const char *kernel, const MatmulPlan &p, cudaDataType_t type,
                 size_t elemSize, const void *a, const void *b, void *c) {
  int64_t m = p.m, n = p.n, k = p.k;
  if (isTallGemm(p)) {
    gemm(kernel, type, false, false, p.batches * m, n, k, 1.0f, a, k, 0, b, n,
         0, 0.0f, c, n, 0, 1);
    return;
  }
  int64_t strideA, strideB;
  if (uniformStride(p, p.aStrides, strideA) &&
      uniformStride(p, p.bStrides, strideB)) {
    gemm(kernel, type, false, false, m, n, k, 1.0f, a, k, strideA, b, n,
         strideB, 0.0f, c, n, m * n, p.batches);
    return;
  }
  // A broadcast pattern no single stride describes: pointer arrays.
  ScratchBuffer pointers(size_t(3 * p.batches) * sizeof(void *), kernel);
  const void **pa = pointers.as<const void *>();
  const void **pb = pa + p.batches;
  void **pc = const_cast<void **>(pb + p.batches);
  batchPointersKernel<<<blocksFor(p.batches), kThreads, 0, stream()>>>(
      p, static_cast<const char *>(a), static_cast<const char *>(b),
      static_cast<char *>(c), int64_t(elemSize), pa, pb, pc);
  checkLaunchOf(kernel);
  float alpha = 1.0f, beta = 0.0f;
  // Row-major C = A B is column-major C^T = B^T A^T.
  checkBlas(
      cublasGemmBatchedEx(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, toInt(kernel, n),
                          toInt(kernel, m), toInt(kernel, k), &alpha, pb, type,
                          toInt(kernel, n), pa, type, toInt(kernel, k), &beta,
                          pc, type, toInt(kernel, n), toInt(kernel, p.batches),
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      kernel);
}

/// Whether a and b share one 16-bit type, which cuBLAS reads as stored.
bool sixteenBitOperands(const cleave_tensor &a, const cleave_tensor &b) {
  return a.dtype == b.dtype &&
         (a.dtype == CLEAVE_F16 || a.dtype == CLEAVE_BF16);
}

/// Calls `gemm(abType, cType, a, b, c)` on device pointers: with `direct`,
/// the 16-bit operands as stored and out in its own type (theirs or f32);
/// otherwise f32 copies of a and b and an f32 view of out. cuBLAS must not
/// write over its inputs, so an input that out overlaps is read from a
/// copy.
template <typename Gemm>
void runFloatGemm(const char *kernel, char *arena, const cleave_tensor &a,
                  const cleave_tensor &b, const cleave_tensor &out,
                  bool direct, Gemm gemm) {
  bool aAliased = overlaps(a, out), bAliased = overlaps(b, out);
  if (direct) {
    ScratchBuffer aCopy, bCopy;
    cudaDataType_t type = a.dtype == CLEAVE_F16 ? CUDA_R_16F : CUDA_R_16BF;
    gemm(type, out.dtype == CLEAVE_F32 ? CUDA_R_32F : type,
         bytesInput(arena, a, aAliased, aCopy, kernel),
         bytesInput(arena, b, bAliased, bCopy, kernel), dataOf(arena, out));
    return;
  }
  ScratchBuffer aBuf, bBuf, outBuf;
  const float *ap = f32Input(arena, a, aAliased, aBuf, kernel);
  const float *bp = f32Input(arena, b, bAliased, bBuf, kernel);
  float *op = f32Output(arena, out, outBuf, kernel);
  gemm(CUDA_R_32F, CUDA_R_32F, ap, bp, op);
  commitF32Output(arena, out, op, kernel);
}

void matmulF32(const char *kernel, char *arena, const MatmulPlan &p,
               const cleave_tensor &a, const cleave_tensor &b,
               const cleave_tensor &out) {
  // cuBLAS needs 16-bit matrices in pointer arrays aligned to 16 bytes
  // (its alignment rule for the pointer-array GEMMs): a batch stride that
  // breaks it goes through f32 buffers.
  size_t elem = elementSize(out.dtype);
  bool aligned = !needsPointerArrays(p) ||
                 (p.m * p.k * elem % 16 == 0 && p.k * p.n * elem % 16 == 0 &&
                  p.m * p.n * elem % 16 == 0);
  // One 16-bit type read and written as stored, accumulating in f32.
  bool direct = sixteenBitOperands(a, b) && out.dtype == a.dtype && aligned;
  runFloatGemm(kernel, arena, a, b, out, direct,
               [&](cudaDataType_t type, cudaDataType_t, const void *ap,
                   const void *bp, void *cp) {
                 matmulFloat(kernel, p, type,
                             type == CUDA_R_32F ? sizeof(float) : 2, ap, bp,
                             cp);
               });
}

/// One output element per thread, accumulated in i64 with wrapping
/// arithmetic (as the elementwise integer kernels).
__global__ void matmulI64Kernel(MatmulPlan p, const char *a, int32_t aType,
                                const char *b, int32_t bType, char *out,
                                int32_t outType) {
  int64_t m = p.m, n = p.n, k = p.k;
  int64_t total = p.batches * m * n;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t batch = e / (m * n), i = e / n % m, j = e % n;
    int64_t aRow = p.aOffset(batch) + i * k, bCol = p.bOffset(batch) + j;
    uint64_t sum = 0;
    for (int64_t kk = 0; kk < k; ++kk)
      sum += uint64_t(loadI64(a, aType, aRow + kk)) *
             uint64_t(loadI64(b, bType, bCol + kk * n));
    storeI64(out, outType, e, int64_t(sum));
  }
}

void matmulI64(const char *kernel, char *arena, const MatmulPlan &p,
               const cleave_tensor &a, const cleave_tensor &b,
               const cleave_tensor &out) {
  // Threads write out while others still read a and b.
  ScratchBuffer aCopy, bCopy;
  const char *ap = bytesInput(arena, a, overlaps(a, out), aCopy, kernel);
  const char *bp = bytesInput(arena, b, overlaps(b, out), bCopy, kernel);
  int64_t total = p.batches * p.m * p.n;
  matmulI64Kernel<<<blocksFor(total), kThreads, 0, stream()>>>(
      p, ap, a.dtype, bp, b.dtype, dataOf(arena, out), out.dtype);
  checkLaunchOf(kernel);
}

void matmul(const char *kernel, char *arena, const cleave_tensor *a,
            const cleave_tensor *b, const cleave_tensor *out) {
  MatmulPlan p = planMatmul(kernel, a, b, out);
  bool isFloat = isFloatType(out->dtype);
  if (p.batches == 0 || p.m == 0 || p.n == 0)
    return;
  if (p.k == 0) {
    // Empty sums: zeros (all-zero bytes in every dtype).
    check(cudaMemsetAsync(dataOf(arena, *out), 0,
                          size_t(numElements(*out)) * elementSize(out->dtype),
                          stream()),
          "zeroing the matmul output");
    return;
  }
  if (isFloat)
    matmulF32(kernel, arena, p, *a, *b, *out);
  else
    matmulI64(kernel, arena, p, *a, *b, *out);
}

/// out = op(a) op(b) on cuBLAS: 16-bit operands as stored, out in their
/// type or f32 (the accumulators unrounded); other dtypes staged as f32.
void plainGemm(const char *k, char *arena, const GemmPlan &p,
               const cleave_tensor &a, const cleave_tensor &b,
               const cleave_tensor &out) {
  int64_t lda = p.transposeA ? p.m : p.k, ldb = p.transposeB ? p.k : p.n;
  bool direct = sixteenBitOperands(a, b) &&
                (out.dtype == a.dtype || out.dtype == CLEAVE_F32);
  runFloatGemm(k, arena, a, b, out, direct,
               [&](cudaDataType_t abType, cudaDataType_t cType, const void *ap,
                   const void *bp, void *cp) {
                 gemmInto(k, abType, cType, p.transposeA, p.transposeB, p.m,
                          p.n, p.k, 1.0f, ap, lda, 0, bp, ldb, 0, 0.0f, cp, p.n,
                          0, 1);
               });
}

} // namespace

extern "C" {

void cleave_rt_matmul(char *arena, const cleave_tensor *a,
                      const cleave_tensor *b, const cleave_tensor *out) {
  matmul("cleave_rt_matmul", arena, a, b, out);
}

void cleave_rt_gemm(char *arena, const cleave_tensor *a, const cleave_tensor *b,
                    const cleave_tensor *out, const cleave_tensor *dbias,
                    int32_t transpose_a, int32_t transpose_b) {
  const char *k = "cleave_rt_gemm";
  GemmPlan p = planGemm(k, a, b, out, dbias, transpose_a, transpose_b);
  if (p.m == 0 || (dbias && gemmBiasGradLt(arena, p, *a, *b, *out, *dbias)))
    return;
  // Unfused, the bias gradient sums a's rows (a is [k, m]) after the GEMM,
  // from an f32 view taken before it (the GEMM may write over a).
  ScratchBuffer aCopy;
  const float *af = dbias && p.k > 0
                        ? f32Input(arena, *a, overlaps(*a, *out), aCopy, k)
                        : nullptr;
  if (p.n > 0)
    plainGemm(k, arena, p, *a, *b, *out);
  if (af)
    sumColumns(k, af, p.k, p.m, *dbias, arena);
  else if (dbias)
    check(cudaMemsetAsync(dataOf(arena, *dbias), 0,
                          size_t(p.m) * elementSize(dbias->dtype), stream()),
          "clearing the bias gradient (an empty sum)");
}

void cleave_rt_expert_matmul(char *arena, const cleave_tensor *x,
                             const cleave_tensor *w, const cleave_tensor *out) {
  const char *k = "cleave_rt_expert_matmul";
  checkExpertMatmul(k, x, w, out);
  // [E] batches of [C,H] x [H,F]: one strided batched GEMM.
  matmul(k, arena, x, w, out);
}

} // extern "C"
