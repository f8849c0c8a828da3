//===- Backend.cu - the CUDA backend: device arena, stream, errors -------===//
//
// The backend functions of cleave_rt.h on one GPU: the arena is one device
// allocation, every kernel runs on one stream in call order, and arena reads
// and writes are stream-ordered copies. Kernels report bad data through a
// device error slot that the host checks whenever it synchronizes, so a step
// needs no synchronization before the trainer reads its loss. Markers are
// CUDA events, each with a page-locked copy of the error slot taken just
// before it, so that waiting for one checks the work before it without
// another copy; they are pooled, since a trainer records one per step.
// When the NCCL engine runs, collectives may still be running on the device
// when the host waits; every host wait here then polls, calling the
// engine's watchdog between polls (../cpu/WaitHook.h), so that a collective
// that never completes fails the job instead of hanging the wait.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"

#include "../cpu/Tensor.h"
#include "../cpu/WaitHook.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

struct State {
  bool ready = false;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  DeviceError *error = nullptr;
};

State &state() {
  static State s;
  return s;
}

const char *kernelName(int32_t id) {
  static const char *names[] = {"gather",     "gather_grad",
                                "cross_entropy", "cross_entropy_grad",
                                "moe_dispatch", "moe_combine",
                                "binary",     "topk",
                                "local_slice"};
  if (id >= 0 && id < int32_t(sizeof(names) / sizeof(names[0])))
    return names[id];
  return "kernel";
}

/// Reports (and ends the process on) the first error a kernel raised, as
/// copied out of the error slot into `e`.
void reportDeviceError(const DeviceError &e) {
  switch (e.code) {
  case kNoError:
    return;
  case kIndexOutOfRange:
    cleave_rt_fail("cleave_rt_%s: index %lld is out of range [-%lld, %lld)",
                   kernelName(e.kernel), (long long)e.value,
                   (long long)e.bound, (long long)e.bound);
  case kLabelOutOfRange:
    cleave_rt_fail("cleave_rt_%s: label %lld is out of range [0, %lld)",
                   kernelName(e.kernel), (long long)e.value,
                   (long long)e.bound);
  case kExpertOutOfRange:
    cleave_rt_fail("cleave_rt_%s: expert %lld is out of range [0, %lld)",
                   kernelName(e.kernel), (long long)e.value,
                   (long long)e.bound);
  case kBlockOutOfRange:
    cleave_rt_fail("cleave_rt_%s: block index %lld is out of range [0, %lld)",
                   kernelName(e.kernel), (long long)e.value,
                   (long long)e.bound);
  case kIntegerDivideByZero:
    cleave_rt_fail("cleave_rt_%s: integer division by zero",
                   kernelName(e.kernel));
  default:
    cleave_rt_fail("cleave_rt_%s: device error %d", kernelName(e.kernel),
                   int(e.code));
  }
}

/// With a wait hook installed, returns once `event` has completed: polls it,
/// calling the hook between polls, and sleeps between polls (20 us, then
/// 200 us) once the wait has lasted a thousand of them. Without one,
/// returns at once: the caller's synchronization blocks in CUDA.
void pollUntilDone(cudaEvent_t event, const char *what) {
  WaitHook hook = waitHook();
  if (!hook)
    return;
  for (unsigned polls = 0;; ++polls) {
    cudaError_t status = cudaEventQuery(event);
    if (status == cudaSuccess)
      return;
    if (status != cudaErrorNotReady)
      check(status, what);
    hook();
    if (polls >= 1000)
      std::this_thread::sleep_for(
          std::chrono::microseconds(polls < 2000 ? 20 : 200));
  }
}

/// Reads the error slot (after the stream has run) and reports its error.
void reportDeviceError() {
  DeviceError e;
  check(cudaMemcpy(&e, state().error, sizeof(e), cudaMemcpyDeviceToHost),
        "reading the device error slot");
  reportDeviceError(e);
}

/// A marker: an event, and the error slot as it was just before it.
struct Marker {
  cudaEvent_t event = nullptr;
  DeviceError *error = nullptr; // page-locked
  bool free = true;
};

std::vector<Marker> &markers() {
  static std::vector<Marker> pool;
  return pool;
}

Marker &markerOf(int64_t handle, const char *fn) {
  std::vector<Marker> &pool = markers();
  if (handle < 0 || size_t(handle) >= pool.size() || pool[size_t(handle)].free)
    cleave_rt_fail("%s: %lld is not a recorded marker", fn, (long long)handle);
  return pool[size_t(handle)];
}

} // namespace

void cleave::rt::cuda::check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    cleave_rt_fail("CUDA: %s: %s", what, cudaGetErrorString(status));
}

void cleave::rt::cuda::checkBlas(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    cleave_rt_fail("cuBLAS: %s: status %d", what, int(status));
}

void cleave::rt::cuda::checkLaunch(const char *kernel) {
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    cleave_rt_fail("cleave_rt_%s: kernel launch failed: %s", kernel,
                   cudaGetErrorString(status));
}

void cleave::rt::cuda::waitForStream(const char *what) {
  if (waitHook()) {
    // A private event after the work so far, to poll.
    static cudaEvent_t drained = nullptr;
    if (!drained)
      check(cudaEventCreateWithFlags(&drained, cudaEventDisableTiming), what);
    check(cudaEventRecord(drained, stream()), what);
    pollUntilDone(drained, what);
  }
  check(cudaStreamSynchronize(stream()), what);
}

cudaStream_t cleave::rt::cuda::stream() {
  cleave_rt_backend_init();
  return state().stream;
}

cublasHandle_t cleave::rt::cuda::cublas() {
  cleave_rt_backend_init();
  return state().blas;
}

DeviceError *cleave::rt::cuda::errorSlot() {
  cleave_rt_backend_init();
  return state().error;
}

cuda::Broadcast cleave::rt::cuda::makeBroadcast(const char *kernel,
                                          const cleave_tensor *const *operands,
                                          int numOperands,
                                          const cleave_tensor &out) {
  cuda::Broadcast b{};
  b.rank = out.rank;
  for (int d = 0; d < out.rank; ++d)
    b.shape[d] = out.shape[d];
  for (int k = 0; k < numOperands; ++k) {
    const cleave_tensor &t = *operands[k];
    if (t.rank > out.rank)
      cleave_rt_fail("cleave_rt_%s: operand %d %s does not broadcast to %s",
                     kernel, k, shapeString(t).c_str(),
                     shapeString(out).c_str());
    int64_t stride = 1;
    for (int d = out.rank - 1; d >= 0; --d) {
      int dt = d - (out.rank - t.rank);
      int64_t size = dt >= 0 ? t.shape[dt] : 1;
      if (size != 1 && size != out.shape[d])
        cleave_rt_fail("cleave_rt_%s: operand %d %s does not broadcast to %s",
                       kernel, k, shapeString(t).c_str(),
                       shapeString(out).c_str());
      b.strides[k][d] = size == 1 ? 0 : stride;
      stride *= size;
    }
  }
  return b;
}

extern "C" const char *cleave_rt_backend_name(void) { return "cuda"; }

extern "C" void cleave_rt_backend_init(void) {
  State &s = state();
  if (s.ready)
    return;
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0)
    cleave_rt_fail("no CUDA device is available (%s); this program was "
                   "compiled with --target cuda",
                   status != cudaSuccess ? cudaGetErrorString(status)
                                         : "0 devices");
  // The current device: 0, unless the NCCL communication engine selected
  // this rank's device first (cleave_comm_init).
  int device = 0;
  check(cudaGetDevice(&device), "querying the current device");
  check(cudaSetDevice(device), "selecting the device");
  check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking),
        "creating the stream");
  checkBlas(cublasCreate(&s.blas), "creating the handle");
  checkBlas(cublasSetStream(s.blas, s.stream), "binding the stream");
  // Split-K partial sums in the compute type (f32), never in a 16-bit
  // output type: the ABI's kernels accumulate in f32 and round once.
  checkBlas(cublasSetMathMode(s.blas,
                              cublasMath_t(CUBLAS_DEFAULT_MATH |
                                           CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
            "setting the math mode");
  check(cudaMalloc(&s.error, sizeof(DeviceError)), "allocating the error slot");
  check(cudaMemset(s.error, 0, sizeof(DeviceError)),
        "clearing the error slot");
  s.ready = true;
}

extern "C" char *cleave_rt_arena_alloc(int64_t bytes) {
  cleave_rt_backend_init();
  if (bytes < 0)
    cleave_rt_fail("arena size %lld is negative", (long long)bytes);
  size_t size = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  if (size == 0)
    size = 64;
  void *arena = nullptr;
  cudaError_t status = cudaMalloc(&arena, size);
  if (status != cudaSuccess)
    cleave_rt_fail("cannot allocate the %lld-byte arena on the GPU: %s",
                   (long long)bytes, cudaGetErrorString(status));
  check(cudaMemsetAsync(arena, 0, size, state().stream), "zeroing the arena");
  return static_cast<char *>(arena);
}

extern "C" void cleave_rt_arena_free(char *arena) {
  if (arena) {
    cleave_rt_synchronize();
    cudaFree(arena);
  }
}

extern "C" void cleave_rt_arena_write(char *arena, int64_t offset,
                                      const void *src, int64_t bytes) {
  if (bytes <= 0)
    return;
  // From pageable host memory: the copy is complete when this returns.
  check(cudaMemcpyAsync(arena + offset, src, size_t(bytes),
                        cudaMemcpyHostToDevice, stream()),
        "copying to the arena");
  waitForStream("copying to the arena");
}

extern "C" void cleave_rt_arena_read(const char *arena, int64_t offset,
                                     void *dst, int64_t bytes) {
  if (bytes <= 0)
    return;
  check(cudaMemcpyAsync(dst, arena + offset, size_t(bytes),
                        cudaMemcpyDeviceToHost, stream()),
        "copying from the arena");
  cleave_rt_synchronize();
}

extern "C" void cleave_rt_synchronize(void) {
  waitForStream("running the step");
  reportDeviceError();
}

extern "C" void *cleave_rt_host_alloc(int64_t bytes) {
  cleave_rt_backend_init();
  if (bytes < 0)
    cleave_rt_fail("host buffer size %lld is negative", (long long)bytes);
  void *p = nullptr;
  cudaError_t status =
      cudaMallocHost(&p, std::max<size_t>(64, static_cast<size_t>(bytes)));
  if (status != cudaSuccess)
    cleave_rt_fail("cannot allocate a %lld-byte page-locked host buffer: %s",
                   (long long)bytes, cudaGetErrorString(status));
  return p;
}

extern "C" void cleave_rt_host_free(void *p) {
  if (p)
    cudaFreeHost(p);
}

extern "C" void cleave_rt_arena_write_async(char *arena, int64_t offset,
                                            const void *src, int64_t bytes) {
  if (bytes > 0)
    check(cudaMemcpyAsync(arena + offset, src, size_t(bytes),
                          cudaMemcpyHostToDevice, stream()),
          "copying to the arena");
}

extern "C" void cleave_rt_arena_read_async(const char *arena, int64_t offset,
                                           void *dst, int64_t bytes) {
  if (bytes > 0)
    check(cudaMemcpyAsync(dst, arena + offset, size_t(bytes),
                          cudaMemcpyDeviceToHost, stream()),
          "copying from the arena");
}

extern "C" int64_t cleave_rt_marker_record(void) {
  std::vector<Marker> &pool = markers();
  size_t i = 0;
  while (i < pool.size() && !pool[i].free)
    ++i;
  if (i == pool.size()) {
    Marker m;
    check(cudaEventCreate(&m.event), "creating a marker's event");
    check(cudaMallocHost(reinterpret_cast<void **>(&m.error),
                         sizeof(DeviceError)),
          "allocating a marker's error copy");
    pool.push_back(m);
  }
  Marker &m = pool[i];
  check(cudaMemcpyAsync(m.error, errorSlot(), sizeof(DeviceError),
                        cudaMemcpyDeviceToHost, stream()),
        "copying the error slot for a marker");
  check(cudaEventRecord(m.event, stream()), "recording a marker");
  m.free = false;
  return int64_t(i);
}

extern "C" void cleave_rt_marker_wait(int64_t marker) {
  Marker &m = markerOf(marker, "cleave_rt_marker_wait");
  pollUntilDone(m.event, "running the step");
  check(cudaEventSynchronize(m.event), "running the step");
  reportDeviceError(*m.error);
}

extern "C" double cleave_rt_marker_elapsed_ms(int64_t from, int64_t to) {
  const char *fn = "cleave_rt_marker_elapsed_ms";
  float ms = 0;
  check(cudaEventElapsedTime(&ms, markerOf(from, fn).event,
                             markerOf(to, fn).event),
        "timing between markers");
  return double(ms);
}

extern "C" void cleave_rt_marker_free(int64_t marker) {
  markerOf(marker, "cleave_rt_marker_free").free = true;
}
