//===- FakeCuda.h - the CUDA subset of the runtime, emulated on a CPU ----===//
//
// Lets the CUDA backend's own sources (runtime/lib/cuda, rewritten by
// emulate_cuda_source.py for the two constructs that are not C++: kernel
// launches and dynamic shared memory) compile as C++ and run on a machine
// without a GPU, so that the kernels' logic is tested in CI against the CPU
// backend. The shim headers (cuda_runtime.h, cuda_bf16.h, ...) include
// this file.
//
// Execution model (FakeCuda.cpp): each block of a launch runs as one fiber
// per CUDA thread on the calling OS thread; a fiber runs until it reaches
// __syncthreads or a warp shuffle, where it waits for the rest of its block
// or warp, or until it returns. Blocks run one after the other, every block
// of the grid. Dynamic shared memory is refilled with NaN bytes before each
// block, and device allocations with 0x7f bytes, so that reads of unwritten
// memory show. A barrier that not every thread of the block (or warp)
// reaches aborts with a message instead of hanging.
//
// What this does not check: timing, memory coalescing, bank conflicts,
// register limits, and warp-synchronous code without a *_sync intrinsic
// (lanes run in no fixed order between sync points, which is stricter than
// hardware). cuBLAS's GEMMs are plain loops with f32 accumulation, and
// cuBLASLt's matmuls follow its documentation (FakeCublasLt.cpp); CUB's
// BlockScan is a shim (shim/cub). NCCL is emulated over MPI (FakeNccl.cpp,
// a library of its own): its collectives are host work on a stream
// (fake::enqueueHostWork), which later launches, copies and synchronizations
// on that stream wait for, as stream order requires.
//
// Streams: each stream keeps its own queue of host work, and a kernel, copy
// or GEMM waits only for its own stream's (the legacy default stream, null,
// for every stream's). cudaStreamWaitEvent puts a wait on the queue that
// is done once the event's record has completed, moving the event's stream
// on as it polls: so work on a second stream (the NCCL engine's
// communication stream) runs while the first one computes, and joins it
// where the program makes it wait, as on a GPU. Kernels still run on the
// host when they are launched, after their stream's pending work.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_UNITTESTS_CUDAEMULATION_FAKECUDA_H
#define CLEAVE_TEST_UNITTESTS_CUDAEMULATION_FAKECUDA_H

#include "cleave/Runtime/Float16.h"

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <vector>
#include <math.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// Blocks run one at a time, so a function-local static is one block's
// shared array.
#define __shared__ static
#define __launch_bounds__(...)

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1)
      : x(x), y(y), z(z) {}
};
struct uint4 {
  unsigned x, y, z, w;
};
struct CUstream_st;
typedef CUstream_st *cudaStream_t;

namespace fake {

/// The running fiber's coordinates (set by the scheduler at each switch).
extern dim3 tIdx, bIdx, bDim, gDim;
/// The running block's dynamic shared memory.
extern char *dynSmem;

/// Waits for every thread of the block / of the warp.
void blockBarrier();
/// Waits for every lane of the running thread's warp.
void warpBarrier();
/// Publishes `bits` for the warp and returns lane `src`'s, all lanes of the
/// warp taking part.
uint64_t warpExchange(uint64_t bits, int src);
/// The running thread's lane.
int laneId();

/// Runs `body` on every thread of every block of the grid, once the host
/// work before it on `stream` is done.
void runGrid(dim3 grid, dim3 block, size_t sharedBytes, const void *kernel,
             cudaStream_t stream, const std::function<void()> &body);

/// The launch `kernel<<<grid, block, shared, stream>>>(args...)`, written
/// Launch(grid, block, shared, stream).run(key, [&] { kernel(args...); }) by
/// the rewrite; `key` is the kernel's address (null where the kernel is a
/// template deduced from the arguments).
struct Launch {
  dim3 grid, block;
  size_t shared;
  cudaStream_t stream;
  Launch(dim3 grid, dim3 block, size_t shared = 0,
         cudaStream_t stream = nullptr)
      : grid(grid), block(block), shared(shared), stream(stream) {}
  template <class F> void run(const void *key, const F &call) const {
    runGrid(grid, block, shared, key, stream, call);
  }
};
/// A kernel's address, where its name resolves to one function.
template <class R, class... P, class D>
const void *address(R (*kernel)(P...), D) {
  return reinterpret_cast<const void *>(kernel);
}

/// The dynamic shared memory limit of `kernel` (48 KB unless raised).
int sharedLimit(const void *kernel);
void setSharedLimit(const void *kernel, int bytes);
/// The device's opt-in limit: $FAKE_SMEM_OPTIN, default 227 KB (sm_90).
int sharedOptin();

/// Work on `stream` that the host carries out (the emulated NCCL's
/// collectives): `poll` makes progress and returns true once the work is
/// done. Kernels, copies, GEMMs and synchronizations issued on the stream
/// after it wait for it (stream order); cudaStreamQuery reports it as not
/// ready.
void enqueueHostWork(std::function<bool()> poll, cudaStream_t stream);
/// The calls that made the host wait for the device so far, by name, as
/// $CLEAVE_EMULATED_HOST_WAITS gets them at exit (FakeCuda.cpp).
std::map<std::string, long long> hostWaits();

/// Polls the host work of `stream` once, in order; true when none is left.
bool pollHostWork(cudaStream_t stream);
/// Waits until the host work of `stream` is done (null: of every stream),
/// calling the backend's wait hook (runtime/lib/cpu/WaitHook.h) between
/// polls.
void drainStream(cudaStream_t stream);
void pauseWaiting();

} // namespace fake

#define threadIdx fake::tIdx
#define blockIdx fake::bIdx
#define blockDim fake::bDim
#define gridDim fake::gDim
#define warpSize 32

inline void __syncthreads() { fake::blockBarrier(); }
inline void __syncwarp(unsigned = 0xffffffffu) { fake::warpBarrier(); }
template <class T> T __shfl_xor_sync(unsigned, T v, int offset) {
  static_assert(sizeof(T) <= 8, "shuffles of up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = fake::warpExchange(bits, fake::laneId() ^ offset);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}
// Fibers of one OS thread never run at once: plain read-modify-writes.
inline int atomicCAS(int *p, int cmp, int val) {
  int old = *p;
  if (old == cmp)
    *p = val;
  return old;
}
template <class T> T atomicAdd(T *p, T v) {
  T old = *p;
  *p = old + v;
  return old;
}
template <class T> T min(T a, T b) { return a < b ? a : b; }
template <class T> T max(T a, T b) { return a > b ? a : b; }
inline float normcdff(float x) {
  return 0.5f * std::erfc(-x * 0.70710678118654752f);
}
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
// Rounded separately, never contracted (the build has -ffp-contract=off).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }

struct __half {
  uint16_t bits;
  __half() = default;
  __half(float f) : bits(cleave::rt::floatToHalf(f)) {}
  operator float() const { return cleave::rt::halfToFloat(bits); }
};
struct __nv_bfloat16 {
  uint16_t bits;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : bits(cleave::rt::floatToBf16(f)) {}
  operator float() const { return cleave::rt::bf16ToFloat(bits); }
};
inline float __half2float(__half h) { return float(h); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }

//===----------------------------------------------------------------------===//
// Runtime API: $CLEAVE_EMULATED_GPUS devices (default 8) that share the host
// heap, one in-order stream
//===----------------------------------------------------------------------===//

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidDevice = 101,
  cudaErrorNotReady = 600
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost,
  cudaMemcpyHostToDevice,
  cudaMemcpyDeviceToHost,
  cudaMemcpyDeviceToDevice,
  cudaMemcpyDefault
};
#define cudaStreamNonBlocking 1
#define cudaEventDefault 0
#define cudaEventDisableTiming 2
typedef void *cudaMemPool_t;
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold };
enum cudaDataType_t { CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
/// Priorities mean nothing here: one range, [0, 0].
cudaError_t cudaDeviceGetStreamPriorityRange(int *lowest, int *highest);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags,
                                         int priority);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
struct CUevent_st;
typedef CUevent_st *cudaEvent_t;
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
/// cudaSuccess once the event's last record has completed (or when it was
/// never recorded), else cudaErrorNotReady; moves its stream on.
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
/// Later work on `s` waits until the record of `e` made before this call
/// has completed (recording `e` again afterwards does not change that).
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e,
                                unsigned flags = 0);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t from, cudaEvent_t to);
cudaError_t cudaEventDestroy(cudaEvent_t e);
/// Page-locked host memory: copies from and to it do not wait.
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaStreamGetDevice(cudaStream_t s, int *device);
cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int device);
cudaError_t cudaGetLastError();
cudaError_t cudaMallocBytes(void **p, size_t n);
template <class T> cudaError_t cudaMalloc(T **p, size_t n) {
  return cudaMallocBytes(reinterpret_cast<void **>(p), n);
}
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s);
cudaError_t cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t cudaMemset(void *p, int v, size_t n);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s);
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n,
                            cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *p, int device);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t p, cudaMemPoolAttr a,
                                    void *v);
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int device);
template <class T>
cudaError_t cudaFuncSetAttribute(T *kernel, cudaFuncAttribute a, int v) {
  if (a != cudaFuncAttributeMaxDynamicSharedMemorySize ||
      v > fake::sharedOptin())
    return cudaErrorInvalidValue;
  fake::setSharedLimit(reinterpret_cast<const void *>(kernel), v);
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// cuBLAS: the strided batched GEMM the materialized attention calls
//===----------------------------------------------------------------------===//

typedef void *cublasHandle_t;
enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15
};
enum cublasOperation_t { CUBLAS_OP_N, CUBLAS_OP_T };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16 };
cublasStatus_t cublasCreate(cublasHandle_t *h);
/// GEMMs wait for the host work of the stream set here.
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode);
const char *cublasGetStatusString(cublasStatus_t s);
/// Column-major C = alpha op(A) op(B) + beta C per batch, f32 accumulation.
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
    int k, const void *alpha, const void *A, cudaDataType_t at, int lda,
    long long sa, const void *B, cudaDataType_t bt, int ldb, long long sb,
    const void *beta, void *C, cudaDataType_t ct, int ldc, long long sc,
    int batches, cublasComputeType_t compute, cublasGemmAlgo_t algo);
namespace fake {
/// Element i of a cuBLAS operand as f32 (rounded to TF32 with `tf32`), and
/// the store of one.
float loadElement(const void *p, cudaDataType_t t, long long i, bool tf32);
void storeElement(void *p, cudaDataType_t t, long long i, float v);
/// The f32 products P[i][j] = sum over l of a(i, l) b(l, j), each summed in
/// the order of l, as [m x n] row-major (the operands packed first, the
/// loops ordered to vectorize over j).
std::vector<float> products(int64_t m, int64_t n, int64_t k,
                            const std::function<float(int64_t, int64_t)> &a,
                            const std::function<float(int64_t, int64_t)> &b);
} // namespace fake
/// One GEMM (cublasGemmStridedBatchedEx with one batch).
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
                            cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A,
                            cudaDataType_t at, int lda, const void *B,
                            cudaDataType_t bt, int ldb, const void *beta,
                            void *C, cudaDataType_t ct, int ldc,
                            cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);
/// The same with an array of matrix pointers per operand.
cublasStatus_t cublasGemmBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
    int k, const void *alpha, const void *const A[], cudaDataType_t at,
    int lda, const void *const B[], cudaDataType_t bt, int ldb,
    const void *beta, void *const C[], cudaDataType_t ct, int ldc,
    int batches, cublasComputeType_t compute, cublasGemmAlgo_t algo);

#endif // CLEAVE_TEST_UNITTESTS_CUDAEMULATION_FAKECUDA_H
