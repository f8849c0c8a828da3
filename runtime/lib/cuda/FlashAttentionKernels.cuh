//===- FlashAttentionKernels.cuh - what the fused kernels share -*- CUDA
//-*-===//
//
// The parameters, the masking and the launch of the fused attention kernels,
// shared by the CUDA-core kernels (FlashAttention.cu) and the tensor-core
// kernels (TensorCoreAttention.cu).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_CUDA_FLASHATTENTIONKERNELS_CUH
#define CLEAVE_RUNTIME_LIB_CUDA_FLASHATTENTIONKERNELS_CUH

#include "FlashAttention.cuh"

#include <cstddef>
#include <cstdint>

namespace cleave::rt::cuda::flash {

/// Threads per block of every fused kernel.
constexpr int kBlockThreads = 128;

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

/// Stages the saved row statistics (max, 1 / sum, Delta) of query rows
/// firstRow .. firstRow + tileRows - 1, for the key pass of a backward;
/// rows from `rows` on (padding) get 0, so that their P = exp(s - 0) * 0 = 0.
__device__ inline void loadRowStats(const Params &p, float *sMax, float *sInv,
                                    float *sDot, int64_t firstRow,
                                    int64_t rows, int tileRows) {
  if (int(threadIdx.x) < tileRows) {
    bool live = threadIdx.x < rows;
    int64_t row = firstRow + threadIdx.x;
    sMax[threadIdx.x] = live ? p.rowMax[row] : 0.0f;
    sInv[threadIdx.x] = live ? p.rowInv[row] : 0.0f;
    sDot[threadIdx.x] = live ? p.rowDot[row] : 0.0f;
  }
}

using KernelFn = void (*)(Params);

/// The most dynamic shared memory the device grants a block that opts in
/// (99 KB on sm_86/sm_89, 163 KB on sm_80, 227 KB on sm_90).
size_t deviceSharedLimit();

/// Launches `kernel` on `blocks` blocks (none: nothing to do) with `shared`
/// bytes of dynamic shared memory, opting in past the default 48 KB.
void launch(const char *kn, KernelFn kernel, int64_t blocks, size_t shared,
            const Params &p);

/// Whether the tensor-core kernels take the problem (see flashAttention's
/// comment); `dout` is the backward's dtype, or -1 for the forward.
bool tensorCoresApply(const FlashProblem &fp, FlashInput q, FlashInput k,
                      FlashInput v, int32_t dout);
/// The forward (p.out set) and the backward (p.dout, the gradients and
/// the row statistics set) on the tensor cores, for operands of `dtype`.
void tensorCoreForward(const char *kn, Params p, int32_t dtype);
void tensorCoreBackward(const char *kn, Params p, int32_t dtype);

} // namespace cleave::rt::cuda::flash

#endif // CLEAVE_RUNTIME_LIB_CUDA_FLASHATTENTIONKERNELS_CUH
