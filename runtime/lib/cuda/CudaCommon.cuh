//===- CudaCommon.cuh - shared helpers of the CUDA kernels ------*- CUDA -*-===//
//
// What every CUDA kernel file uses: the backend's one stream and cuBLAS
// handle, error checks that end the process through cleave_rt_fail, the
// device error slot through which kernels report bad data (an index out of
// range) without a host synchronization, element loads and stores of every
// runtime dtype, and launch sizes. Descriptors (cleave_tensor) live in host
// memory: kernels receive the fields they need by value.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_CUDA_CUDACOMMON_CUH
#define CLEAVE_RUNTIME_LIB_CUDA_CUDACOMMON_CUH

#include "cleave/Runtime/cleave_rt.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace cleave::rt::cuda {

/// The stream every kernel runs on, in call order.
cudaStream_t stream();
/// The cuBLAS handle bound to stream().
cublasHandle_t cublas();

/// Fails with "<what>: <CUDA error>" unless `status` is cudaSuccess.
void check(cudaError_t status, const char *what);
void checkBlas(cublasStatus_t status, const char *what);
/// Checks the launch of the kernel named `kernel` (cudaGetLastError).
void checkLaunch(const char *kernel);
/// Waits on the host until the stream has run everything called so far
/// (cudaStreamSynchronize), polling the communication engine's watchdog
/// meanwhile when one is installed (../cpu/WaitHook.h).
void waitForStream(const char *what);

/// Data errors found on the device. The first one raised is kept; the host
/// reports it at the next cleave_rt_synchronize or arena read.
enum DeviceErrorCode : int32_t {
  kNoError = 0,
  kIndexOutOfRange = 1, ///< value outside [-bound, bound) (gather)
  kLabelOutOfRange = 2, ///< value outside [0, bound) (cross-entropy)
  kExpertOutOfRange = 3, ///< value outside [0, bound) (MoE)
  kIntegerDivideByZero = 4,
  kBlockOutOfRange = 5, ///< value outside [0, bound) (local_slice)
};
struct DeviceError {
  int32_t code;
  int32_t kernel; ///< which kernel: an index into kernelNames()
  int64_t value;
  int64_t bound;
};
/// The device slot kernels write errors to (allocated by the backend).
DeviceError *errorSlot();
/// Kernel ids for messages; keep in step with the table in Backend.cu.
enum KernelId : int32_t {
  kGather = 0, kGatherGrad, kCrossEntropy, kCrossEntropyGrad, kMoeDispatch,
  kMoeCombine, kBinary, kTopK, kLocalSlice,
};

__device__ inline void raiseError(DeviceError *slot, int32_t code,
                                  int32_t kernel, int64_t value,
                                  int64_t bound) {
  if (atomicCAS(&slot->code, 0, code) == 0) {
    slot->kernel = kernel;
    slot->value = value;
    slot->bound = bound;
  }
}

/// Element access by runtime dtype, computing in float or int64_t.
__device__ inline float loadF32(const char *base, int32_t dtype, int64_t i) {
  switch (dtype) {
  case CLEAVE_F32:
    return reinterpret_cast<const float *>(base)[i];
  case CLEAVE_F16:
    return __half2float(reinterpret_cast<const __half *>(base)[i]);
  case CLEAVE_BF16:
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(base)[i]);
  case CLEAVE_I64:
    return float(reinterpret_cast<const int64_t *>(base)[i]);
  case CLEAVE_I32:
    return float(reinterpret_cast<const int32_t *>(base)[i]);
  default:
    return reinterpret_cast<const uint8_t *>(base)[i] ? 1.0f : 0.0f;
  }
}

__device__ inline int64_t loadI64(const char *base, int32_t dtype, int64_t i) {
  switch (dtype) {
  case CLEAVE_I64:
    return reinterpret_cast<const int64_t *>(base)[i];
  case CLEAVE_I32:
    return reinterpret_cast<const int32_t *>(base)[i];
  case CLEAVE_I1:
    return reinterpret_cast<const uint8_t *>(base)[i] ? 1 : 0;
  default: {
    // Float to integer truncates toward zero; NaN gives 0; saturates.
    float v = loadF32(base, dtype, i);
    if (v != v)
      return 0;
    if (v >= 9.2233720368547758e18f)
      return INT64_MAX;
    if (v <= -9.2233720368547758e18f)
      return INT64_MIN;
    return static_cast<int64_t>(v);
  }
  }
}

__device__ inline void storeF32(char *base, int32_t dtype, int64_t i,
                                float v) {
  switch (dtype) {
  case CLEAVE_F32:
    reinterpret_cast<float *>(base)[i] = v;
    return;
  case CLEAVE_F16:
    reinterpret_cast<__half *>(base)[i] = __float2half_rn(v);
    return;
  case CLEAVE_BF16:
    reinterpret_cast<__nv_bfloat16 *>(base)[i] = __float2bfloat16_rn(v);
    return;
  case CLEAVE_I64:
  case CLEAVE_I32: {
    int64_t x = v != v ? 0
                : v >= 9.2233720368547758e18f ? INT64_MAX
                : v <= -9.2233720368547758e18f ? INT64_MIN
                                                : static_cast<int64_t>(v);
    if (dtype == CLEAVE_I64)
      reinterpret_cast<int64_t *>(base)[i] = x;
    else
      reinterpret_cast<int32_t *>(base)[i] = static_cast<int32_t>(x);
    return;
  }
  default:
    reinterpret_cast<uint8_t *>(base)[i] = v != 0.0f ? 1 : 0;
  }
}

__device__ inline void storeI64(char *base, int32_t dtype, int64_t i,
                                int64_t v) {
  switch (dtype) {
  case CLEAVE_I64:
    reinterpret_cast<int64_t *>(base)[i] = v;
    return;
  case CLEAVE_I32:
    reinterpret_cast<int32_t *>(base)[i] = static_cast<int32_t>(v);
    return;
  case CLEAVE_I1:
    reinterpret_cast<uint8_t *>(base)[i] = v != 0 ? 1 : 0;
    return;
  default:
    storeF32(base, dtype, i, static_cast<float>(v));
  }
}

/// Threads per block of the elementwise kernels, and a grid that covers `n`
/// elements with grid-stride loops (capped; the loops do the rest).
constexpr int kThreads = 256;
inline unsigned blocksFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks < 1)
    blocks = 1;
  return static_cast<unsigned>(blocks > 65535 * 8 ? 65535 * 8 : blocks);
}

/// NumPy broadcasting from up to three operands to an output shape, passed
/// to kernels by value: the output's shape and each operand's strides in
/// elements (0 along broadcast dimensions).
struct Broadcast {
  int32_t rank;
  int64_t shape[CLEAVE_RT_MAX_RANK];
  int64_t strides[3][CLEAVE_RT_MAX_RANK];

  /// The element of operand `k` that output element `linear` reads.
  __device__ int64_t operandIndex(int k, int64_t linear) const {
    int64_t index = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t size = shape[d];
      index += (linear % size) * strides[k][d];
      linear /= size;
    }
    return index;
  }
};
/// Builds the broadcast of `operands` (up to 3) to `out`; fails naming
/// `kernel` when a shape does not broadcast.
Broadcast makeBroadcast(const char *kernel, const cleave_tensor *const *operands,
                        int numOperands, const cleave_tensor &out);

} // namespace cleave::rt::cuda

#endif // CLEAVE_RUNTIME_LIB_CUDA_CUDACOMMON_CUH
