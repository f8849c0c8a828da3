//===- FlashAttention.cuh - fused tiled attention kernels ------*- CUDA -*-===//
//
// The fused (FlashAttention-style) attention forward and backward that
// Attention.cu dispatches to: scores are computed tile by tile in shared
// memory and never stored, so the memory beyond the operands is O(rows)
// rather than O(Sq * Sk). The operands are read in their own dtype and the
// outputs stored in theirs; everything in between is f32.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_CUDA_FLASHATTENTION_CUH
#define CLEAVE_RUNTIME_LIB_CUDA_FLASHATTENTION_CUH

#include "CudaCommon.cuh"

#include "../cpu/KernelChecks.h"

#include <cstdint>

namespace cleave::rt::cuda {

/// The attention mask as the kernels read it: i1 (keep where true) or an
/// additive float of `dtype`, with element strides broadcast against
/// [B, H, Sq, Sk] (checkAttentionMask's). No mask when `data` is null.
struct AttentionMask {
  const char *data = nullptr;
  int32_t dtype = CLEAVE_F32;
  int64_t strides[4] = {0, 0, 0, 0};
};

/// A row-major operand of the fused kernels in device memory.
struct FlashInput {
  const char *data;
  int32_t dtype;
};
struct FlashOutput {
  char *data;
  int32_t dtype;
};

/// What the fused kernels share besides the tensors.
struct FlashProblem {
  AttentionShape shape;
  AttentionMask mask;
  bool causal;
  float scale;
  /// The forward may run on the tensor cores (flashAttention says where).
  bool tensorCores = true;
};

/// Whether the fused kernels take `s`: head dims up to 128 (the register
/// tiles are sized at compile time), the shared memory this needs within
/// what the device grants a block, and grids within CUDA's limits.
bool flashAttentionSupports(const AttentionShape &s);

/// out = softmax(q k^T * scale + mask) v. `out` must not overlap the
/// inputs (the caller passes copies of those it overwrites). With
/// p.tensorCores, q, k and v of one 16-bit dtype, head dims that are
/// multiples of 16 up to 128, and the shared memory this needs within the
/// device's grant, it runs on the tensor cores (WMMA), with the
/// probabilities rounded to that dtype for the product with v as
/// FlashAttention-2 rounds them; else on the CUDA cores in f32.
void flashAttention(const char *kernel, const FlashProblem &p, FlashInput q,
                    FlashInput k, FlashInput v, FlashOutput out);

/// The gradients of flashAttention; the outputs must not overlap the
/// inputs. Deterministic: the same inputs give the same bits. On the
/// tensor cores where flashAttention would be, with dout of the inputs'
/// dtype and the key pass's shared memory granted too; P and dS are then
/// rounded to that dtype before their products.
void flashAttentionGrad(const char *kernel, const FlashProblem &p, FlashInput q,
                        FlashInput k, FlashInput v, FlashInput dout,
                        FlashOutput dq, FlashOutput dk, FlashOutput dv);

} // namespace cleave::rt::cuda

#endif // CLEAVE_RUNTIME_LIB_CUDA_FLASHATTENTION_CUH
