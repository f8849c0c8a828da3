//===- KernelUtil.cuh - helpers of the data-parallel kernels ---*- CUDA -*-===//
//
// What the elementwise, data movement, reduction and normalization kernels
// share beyond CudaCommon.cuh and DeviceUtil.cuh (scratch buffers, warp and
// block reductions): the "nonzero" load of i1 semantics, broadcast plans
// with merged dimensions and 32-bit index math where the sizes allow, and
// row groups (a warp or a block per row) with multi-value sums.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_CUDA_KERNELUTIL_CUH
#define CLEAVE_RUNTIME_LIB_CUDA_KERNELUTIL_CUH

#include "CudaCommon.cuh"
#include "DeviceUtil.cuh"

#include <cstddef>
#include <cstdint>

namespace cleave::rt::cuda {

/// The `bytes` at `src` copied into `scratch` (stream-ordered).
inline const char *copyToScratch(ScratchBuffer &scratch, const char *src,
                                 size_t bytes, const char *kernel) {
  scratch.allocate(bytes, kernel);
  if (bytes)
    check(cudaMemcpyAsync(scratch.as<char>(), src, bytes,
                          cudaMemcpyDeviceToDevice, stream()),
          "copying to scratch");
  return scratch.as<char>();
}

//===----------------------------------------------------------------------===//
// Activations (graph.gelu and linear's epilogue share them)
//===----------------------------------------------------------------------===//

__device__ inline float sigmoidF32(float v) { return 1.0f / (1.0f + expf(-v)); }

/// x Phi(x) with Phi = 0.5 erfc(-x / sqrt 2): erfc avoids 1 + erf's
/// cancellation for negative x.
__device__ inline float geluErfF32(float v) {
  return 0.5f * v * erfcf(-v * 0.70710678118654752f);
}

/// The tanh form; 0.5 (1 + tanh(u)) = sigmoid(2u), again without the
/// cancellation.
__device__ inline float geluTanhF32(float v) {
  float u = 0.79788456080286536f * (v + 0.044715f * v * v * v);
  return v * sigmoidF32(2.0f * u);
}

/// gelu'(x) of the exact form: Phi(x) + x phi(x), with phi the normal
/// density.
__device__ inline float geluErfGradF32(float v) {
  float pdf = 0.39894228040143268f * expf(-0.5f * v * v);
  return normcdff(v) + v * pdf;
}

/// gelu'(x) of the tanh form. With s = sigmoid(2u) = (1 + tanh u) / 2 and
/// 1 - tanh^2 u = 4 s (1 - s): d/dx x s = s + 2 x s (1 - s) u'.
__device__ inline float geluTanhGradF32(float v) {
  float v2 = v * v;
  float u = 0.79788456080286536f * (v + 0.044715f * v2 * v);
  float du = 0.79788456080286536f * (1.0f + 3.0f * 0.044715f * v2);
  float s = sigmoidF32(2.0f * u);
  return s + 2.0f * v * s * (1.0f - s) * du;
}

//===----------------------------------------------------------------------===//
// Element access
//===----------------------------------------------------------------------===//

/// Element i as a bool: nonzero, so 0.5 and NaN are true and -0 is false.
__device__ inline bool loadBool(const char *base, int32_t dtype, int64_t i) {
  switch (dtype) {
  case CLEAVE_I1:
    return reinterpret_cast<const uint8_t *>(base)[i] != 0;
  case CLEAVE_I64:
    return reinterpret_cast<const int64_t *>(base)[i] != 0;
  case CLEAVE_I32:
    return reinterpret_cast<const int32_t *>(base)[i] != 0;
  case CLEAVE_F32:
    return reinterpret_cast<const float *>(base)[i] != 0.0f;
  default: // f16, bf16: any bit pattern but +-0
    return (reinterpret_cast<const uint16_t *>(base)[i] & 0x7fffu) != 0;
  }
}

//===----------------------------------------------------------------------===//
// Broadcast plans
//===----------------------------------------------------------------------===//

/// Drops the size-1 dims of `b` and merges adjacent dims that every one of
/// the first `numOperands` operands walks as one, as the CPU's Broadcast
/// does. Returns true when every operand is read contiguously (output
/// element i reads element i of each operand).
inline bool simplifyBroadcast(Broadcast &b, int numOperands) {
  Broadcast m{};
  m.rank = 0;
  for (int d = 0; d < b.rank; ++d) {
    int64_t size = b.shape[d];
    if (size == 1)
      continue;
    bool merge = m.rank > 0;
    for (int k = 0; merge && k < numOperands; ++k)
      merge = m.strides[k][m.rank - 1] == b.strides[k][d] * size;
    if (merge) {
      m.shape[m.rank - 1] *= size;
      for (int k = 0; k < numOperands; ++k)
        m.strides[k][m.rank - 1] = b.strides[k][d];
      continue;
    }
    m.shape[m.rank] = size;
    for (int k = 0; k < numOperands; ++k)
      m.strides[k][m.rank] = b.strides[k][d];
    ++m.rank;
  }
  b = m;
  if (b.rank > 1)
    return false;
  for (int k = 0; k < numOperands; ++k)
    if (b.rank == 1 && b.strides[k][0] != 1)
      return false;
  return true;
}

/// The element of each of the first N operands that output element `linear`
/// reads, dividing in Index (uint32_t when every count fits in 31 bits).
template <int N, typename Index>
__device__ inline void broadcastOffsets(const Broadcast &b, Index linear,
                                        Index (&offsets)[N]) {
  for (int k = 0; k < N; ++k)
    offsets[k] = 0;
  // The outermost index is what is left: no division for it.
  for (int d = b.rank - 1; d >= 0; --d) {
    Index idx = linear;
    if (d > 0) {
      Index size = Index(b.shape[d]);
      linear = idx / size;
      idx -= linear * size;
    }
    for (int k = 0; k < N; ++k)
      offsets[k] += idx * Index(b.strides[k][d]);
  }
}

/// Runs `f(o, offsets)` for every output element o of a broadcast over N
/// operands (offsets[k]: operand k's element), grid-stride.
template <int N, typename Index, bool Contiguous, typename F>
__global__ void __launch_bounds__(kThreads)
    broadcastKernel(Broadcast b, Index n, F f) {
  Index step = Index(gridDim.x) * Index(blockDim.x);
  for (Index i = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x);
       i < n; i += step) {
    Index offsets[N];
    if constexpr (Contiguous) {
      for (int k = 0; k < N; ++k)
        offsets[k] = i;
    } else {
      broadcastOffsets<N, Index>(b, i, offsets);
    }
    f(int64_t(i), offsets);
  }
}

/// Launches broadcastKernel over the `n` elements of the output with the
/// cheapest index math the plan allows, then checks the launch naming
/// `kernel`. `f` is a functor with a templated
/// `__device__ void operator()(int64_t o, const Index (&offsets)[N]) const`.
template <int N, typename F>
void launchBroadcast(const char *kernel, Broadcast b, int64_t n, const F &f) {
  if (n <= 0)
    return;
  bool contiguous = simplifyBroadcast(b, N);
  unsigned blocks = blocksFor(n);
  if (n <= INT32_MAX) {
    if (contiguous)
      broadcastKernel<N, uint32_t, true>
          <<<blocks, kThreads, 0, stream()>>>(b, uint32_t(n), f);
    else
      broadcastKernel<N, uint32_t, false>
          <<<blocks, kThreads, 0, stream()>>>(b, uint32_t(n), f);
  } else {
    if (contiguous)
      broadcastKernel<N, int64_t, true>
          <<<blocks, kThreads, 0, stream()>>>(b, n, f);
    else
      broadcastKernel<N, int64_t, false>
          <<<blocks, kThreads, 0, stream()>>>(b, n, f);
  }
  checkLaunch(kernel);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Sums K floats at once over a warp (Warp) or the whole block.
template <bool Warp, int K> __device__ inline void groupSum(float (&v)[K]) {
  for (int offset = 16; offset > 0; offset >>= 1)
    for (int k = 0; k < K; ++k)
      v[k] += __shfl_xor_sync(0xffffffffu, v[k], offset);
  if constexpr (!Warp) {
    __shared__ float shared[K][32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int warps = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0)
      for (int k = 0; k < K; ++k)
        shared[k][warp] = v[k];
    __syncthreads();
    for (int k = 0; k < K; ++k) {
      float r = shared[k][0];
      for (int w = 1; w < warps; ++w)
        r += shared[k][w];
      v[k] = r;
    }
  }
}

/// Combines one value per thread over a warp (Warp) or the whole block;
/// every thread gets the result.
template <bool Warp, typename T, typename Op>
__device__ inline T groupReduce(T v, T identity, Op op) {
  if constexpr (Warp)
    return warpReduce(v, op);
  else
    return blockReduce(v, identity, op);
}

/// The rows handled by one row group: a warp (Warp; blockDim.x / 32 rows
/// per block) or the whole block. `first` and `step` drive a grid-stride
/// loop over rows; `lane` and `width` over a row's elements.
template <bool Warp> struct RowGroup {
  int64_t first, step;
  int lane, width;
  __device__ RowGroup() {
    if constexpr (Warp) {
      int warps = blockDim.x >> 5;
      first = int64_t(blockIdx.x) * warps + (threadIdx.x >> 5);
      step = int64_t(gridDim.x) * warps;
      lane = threadIdx.x & 31;
      width = 32;
    } else {
      first = blockIdx.x;
      step = gridDim.x;
      lane = threadIdx.x;
      width = blockDim.x;
    }
  }
};

/// Row kernels take a warp per row up to this length, a block beyond.
constexpr int64_t kWarpRowLimit = 1024;
/// Threads of a block-per-row kernel for rows of `n` elements.
inline int rowBlockThreads(int64_t n) { return n <= 8192 ? 256 : 512; }
/// Blocks of a row kernel over `rows` rows (grid-stride beyond).
inline unsigned rowGroupBlocks(int64_t rows, bool warp) {
  int64_t blocks = warp ? (rows + kThreads / 32 - 1) / (kThreads / 32) : rows;
  if (blocks < 1)
    blocks = 1;
  return unsigned(blocks > 65535 * 8 ? 65535 * 8 : blocks);
}

} // namespace cleave::rt::cuda

#endif // CLEAVE_RUNTIME_LIB_CUDA_KERNELUTIL_CUH
