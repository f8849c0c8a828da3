//===- FakeCuda.cpp - fibers for CUDA threads, and the emulated API ------===//
//
// See FakeCuda.h. A block's threads are fibers switched by a round-robin
// scheduler on the launching OS thread. A fiber starts on its own stack
// through makecontext/swapcontext; after that, switches are _setjmp /
// _longjmp, which (unlike swapcontext) make no system call to save the
// signal mask. A fiber never returns: it jumps back to the scheduler when
// its kernel body ends. A fiber waiting at a barrier yields until the
// barrier's generation moves on; when a whole round passes with every live
// fiber waiting and none released, the threads diverged at a barrier (or
// one returned before it) and the run aborts.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"

#include "cpu/WaitHook.h"

#include <algorithm>
#include <chrono>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <ucontext.h>
#include <utility>
#include <vector>

namespace fake {

dim3 tIdx, bIdx, bDim, gDim;
char *dynSmem = nullptr;

namespace {

[[noreturn]] void die(const char *what) {
  std::fprintf(stderr, "fake CUDA: %s\n", what);
  std::abort();
}

/// Stack of one fiber: the kernels keep small register arrays.
constexpr size_t kStackBytes = size_t(256) << 10;

struct Fiber {
  ucontext_t start; // the first entry
  jmp_buf resume;   // where it yielded
  dim3 index;
  bool started = false;
  bool done = false;
  /// The barrier generation this fiber waits to see pass, or -1.
  long waitBlock = -1, waitWarp = -1;
};

/// The block being run.
struct Block {
  std::vector<Fiber> fibers;
  ucontext_t schedulerStart; // saved by the first entries only
  jmp_buf scheduler;
  int current = 0;
  const std::function<void()> *body = nullptr;
  long blockGeneration = 0;
  int blockArrived = 0;
  std::vector<long> warpGeneration;
  std::vector<int> warpArrived;
  std::vector<uint64_t> slots; // one per thread, for warp exchanges
  bool progress = false;
  dim3 grid;
  std::vector<char> *shared = nullptr;
  long endGeneration = 0; // blocks finished
  int endArrived = 0;
  bool gridDone = false;
};
Block *block = nullptr;

/// The fibers' stacks, kept from launch to launch (allocating them anew
/// made every launch fault their pages in again).
char *stackOf(unsigned t) {
  static std::vector<std::unique_ptr<char[]>> stacks;
  while (stacks.size() <= t)
    stacks.emplace_back(new char[kStackBytes]);
  return stacks[t].get();
}

int threads() { return int(block->fibers.size()); }
int warpOf(int t) { return t / 32; }
int warpSizeOf(int w) { return std::min(32, threads() - 32 * w); }

void yield() {
  Fiber &f = block->fibers[size_t(block->current)];
  if (!_setjmp(f.resume))
    _longjmp(block->scheduler, 1);
}

/// Waits for every thread to end the block's body; the last one moves the
/// grid on to the next block (its index, fresh NaN shared memory). Returns
/// whether there is one.
bool endOfBlock() {
  Block &b = *block;
  long generation = b.endGeneration;
  if (++b.endArrived < threads()) {
    while (b.endGeneration == generation)
      yield();
    return !b.gridDone;
  }
  b.endArrived = 0;
  if (b.blockArrived != 0)
    die("a block ended while some of its threads wait at __syncthreads");
  for (int arrived : b.warpArrived)
    if (arrived != 0)
      die("a block ended while some of its threads wait in a warp shuffle");
  dim3 &i = bIdx;
  if (++i.x == b.grid.x) {
    i.x = 0;
    if (++i.y == b.grid.y) {
      i.y = 0;
      if (++i.z == b.grid.z)
        b.gridDone = true;
    }
  }
  std::memset(b.shared->data(), 0xff, b.shared->size());
  ++b.endGeneration;
  b.progress = true;
  return !b.gridDone;
}

[[noreturn]] void trampoline() {
  do
    (*block->body)();
  while (endOfBlock());
  block->fibers[size_t(block->current)].done = true;
  block->progress = true;
  _longjmp(block->scheduler, 1);
}

/// Runs fiber t until it yields or ends. Not inlined: the _setjmp frame is
/// this function's alone, so no caller's locals can be clobbered.
__attribute__((noinline)) void resume(Block &b, unsigned t) {
  Fiber &f = b.fibers[t];
  if (_setjmp(b.scheduler))
    return;
  if (!f.started) {
    f.started = true;
    swapcontext(&b.schedulerStart, &f.start);
  }
  _longjmp(f.resume, 1);
}

void setCoordinates(const Fiber &f) { tIdx = f.index; }

} // namespace

int laneId() { return block->current % 32; }

void blockBarrier() {
  Fiber &f = block->fibers[size_t(block->current)];
  long generation = block->blockGeneration;
  if (++block->blockArrived == threads()) {
    block->blockArrived = 0;
    ++block->blockGeneration;
    block->progress = true;
    return;
  }
  f.waitBlock = generation;
  while (block->blockGeneration == generation)
    yield();
  f.waitBlock = -1;
}

void warpBarrier() {
  int t = block->current, w = warpOf(t), n = warpSizeOf(w);
  Fiber &f = block->fibers[size_t(t)];
  long generation = block->warpGeneration[size_t(w)];
  if (++block->warpArrived[size_t(w)] == n) {
    block->warpArrived[size_t(w)] = 0;
    ++block->warpGeneration[size_t(w)];
    block->progress = true;
    return;
  }
  f.waitWarp = generation;
  while (block->warpGeneration[size_t(w)] == generation)
    yield();
  f.waitWarp = -1;
}

uint64_t warpExchange(uint64_t bits, int src) {
  int t = block->current, w = warpOf(t), n = warpSizeOf(w);
  if (src < 0 || src >= n)
    die("a warp shuffle reads a lane outside the warp");
  block->slots[size_t(t)] = bits;
  warpBarrier(); // every lane has published
  uint64_t r = block->slots[size_t(32 * w + src)];
  warpBarrier(); // every lane has read
  return r;
}

namespace {
std::vector<std::pair<const void *, int>> &sharedLimits() {
  static std::vector<std::pair<const void *, int>> limits;
  return limits;
}
} // namespace

int sharedLimit(const void *kernel) {
  for (auto &[k, v] : sharedLimits())
    if (k == kernel)
      return v;
  return 48 << 10;
}
void setSharedLimit(const void *kernel, int bytes) {
  for (auto &[k, v] : sharedLimits())
    if (k == kernel) {
      v = bytes;
      return;
    }
  sharedLimits().push_back({kernel, bytes});
}
int sharedOptin() {
  static const int bytes = [] {
    const char *env = std::getenv("FAKE_SMEM_OPTIN");
    return env ? std::atoi(env) : 232448;
  }();
  return bytes;
}

} // namespace fake

/// A stream: its device and its queue of host work, in stream order.
struct CUstream_st {
  int device = 0;
  std::vector<std::function<bool()>> work;
  /// Set while its queue is polled: a wait on another stream that polls
  /// back into this one (through an event) only looks at it.
  bool polling = false;
};

namespace fake {

namespace {
/// Every stream created, and the legacy default stream (null) first.
std::vector<cudaStream_t> &streams() {
  static std::vector<cudaStream_t> all{new CUstream_st};
  return all;
}
cudaStream_t resolve(cudaStream_t s) { return s ? s : streams()[0]; }
} // namespace

/// Polls the host work of `s` in stream order; true when none is left.
bool pollHostWork(cudaStream_t s) {
  s = resolve(s);
  if (s->polling)
    return s->work.empty();
  s->polling = true;
  size_t done = 0;
  while (done < s->work.size() && s->work[done]())
    ++done;
  s->work.erase(s->work.begin(), s->work.begin() + std::ptrdiff_t(done));
  s->polling = false;
  return s->work.empty();
}

void enqueueHostWork(std::function<bool()> poll, cudaStream_t stream) {
  if (block)
    die("host work enqueued from a kernel");
  resolve(stream)->work.push_back(std::move(poll));
}

/// Between the polls of a host that waits for host work. Launches and
/// copies run when they are called, so here the host waits where a GPU's
/// would go on (behind a stuck collective, say): it calls the backend's
/// wait hook, as the CUDA backend's own waits do, so that the NCCL
/// engine's watchdog still ends such a wait with its error.
void pauseWaiting() {
  if (cleave::rt::WaitHook hook = cleave::rt::waitHook())
    hook();
  std::this_thread::yield();
}

void drainStream(cudaStream_t stream) {
  if (stream) {
    while (!pollHostWork(stream))
      pauseWaiting();
    return;
  }
  // The legacy default stream waits for every stream.
  for (;;) {
    bool empty = true;
    for (cudaStream_t s : streams())
      empty = pollHostWork(s) && empty;
    if (empty)
      return;
    pauseWaiting();
  }
}

void runGrid(dim3 grid, dim3 threadsDim, size_t sharedBytes, const void *kernel,
             cudaStream_t stream, const std::function<void()> &body) {
  if (block)
    die("a kernel launched from a kernel");
  drainStream(stream);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535)
    die("an invalid grid");
  unsigned nt = threadsDim.x * threadsDim.y * threadsDim.z;
  if (nt == 0 || nt > 1024 || threadsDim.z > 64)
    die("an invalid block");
  if (sharedBytes > size_t(sharedLimit(kernel)))
    die("more dynamic shared memory than the kernel's limit");

  Block b;
  block = &b;
  b.body = &body;
  b.grid = grid;
  b.fibers.resize(nt);
  unsigned warps = (nt + 31) / 32;
  b.warpGeneration.assign(warps, 0);
  b.warpArrived.assign(warps, 0);
  b.slots.assign(nt, 0);
  // Aligned as generously as hardware places it (the kernels declare at
  // most 128-byte alignment).
  std::vector<char> shared(sharedBytes + 16 + 256);
  char *sharedBase = shared.data() + (256 - reinterpret_cast<uintptr_t>(
                                                shared.data()) % 256) % 256;
  b.shared = &shared;
  bDim = threadsDim;
  gDim = grid;
  dynSmem = sharedBase;
  bIdx = dim3(0, 0, 0);
  std::memset(shared.data(), 0xff, shared.size());
  // One fiber per thread for the whole grid: each runs the body once per
  // block, the blocks in turn (endOfBlock).
  for (unsigned t = 0; t < nt; ++t) {
    Fiber &f = b.fibers[t];
    f.index = dim3(t % threadsDim.x, (t / threadsDim.x) % threadsDim.y,
                   t / (threadsDim.x * threadsDim.y));
    getcontext(&f.start);
    f.start.uc_stack.ss_sp = stackOf(t);
    f.start.uc_stack.ss_size = kStackBytes;
    f.start.uc_link = nullptr; // trampoline never returns
    makecontext(&f.start, trampoline, 0);
  }
  for (unsigned live = nt; live > 0;) {
    b.progress = false;
    live = 0;
    for (unsigned t = 0; t < nt; ++t) {
      Fiber &f = b.fibers[t];
      if (f.done)
        continue;
      b.current = int(t);
      setCoordinates(f);
      resume(b, t);
      live += f.done ? 0 : 1;
    }
    if (live > 0 && !b.progress)
      die("threads of a block wait at a barrier that the others never "
          "reach (a divergent __syncthreads or shuffle, or a return "
          "before it)");
  }
  block = nullptr;
}

} // namespace fake

//===----------------------------------------------------------------------===//
// Runtime API
//===----------------------------------------------------------------------===//

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal (emulated)";
  case cudaErrorNotReady:
    return "device not ready (emulated)";
  default:
    return "invalid argument (emulated)";
  }
}
const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
  case cudaSuccess:
    return "cudaSuccess";
  case cudaErrorInvalidDevice:
    return "cudaErrorInvalidDevice";
  case cudaErrorNotReady:
    return "cudaErrorNotReady";
  default:
    return "cudaErrorInvalidValue";
  }
}
namespace {
/// Calls that make the host wait for the device on a GPU, counted by name.
/// With $CLEAVE_EMULATED_HOST_WAITS set, the counts are written there as
/// one JSON object when the process exits, so that a test can check that a
/// training step waits only where the trainer reads from the device.
struct HostWaits {
  std::map<std::string, long long> counts;
  ~HostWaits() {
    const char *path = std::getenv("CLEAVE_EMULATED_HOST_WAITS");
    if (!path || !*path)
      return;
    std::FILE *f = std::fopen(path, "w");
    if (!f)
      return;
    const char *sep = "";
    std::fputc('{', f);
    for (const auto &[call, n] : counts) {
      std::fprintf(f, "%s\"%s\": %lld", sep, call.c_str(), n);
      sep = ", ";
    }
    std::fputs("}\n", f);
    std::fclose(f);
  }
};
HostWaits &hostWaitCounts() {
  static HostWaits waits;
  return waits;
}
void countHostWait(const char *call) { ++hostWaitCounts().counts[call]; }

void *allocate(size_t n) {
  void *p = std::aligned_alloc(256, (n + 255) / 256 * 256 + 256);
  if (p)
    std::memset(p, 0x7f, n);
  return p;
}
void copy(void *d, const void *s, size_t n, cudaStream_t stream = nullptr) {
  fake::drainStream(stream);
  const char *a = static_cast<const char *>(s);
  char *b = static_cast<char *>(d);
  if (n && a < b + n && b < a + n)
    fake::die("cudaMemcpy between overlapping ranges");
  std::memcpy(d, s, n);
}
void fill(void *p, int v, size_t n, cudaStream_t stream = nullptr) {
  fake::drainStream(stream);
  std::memset(p, v, n);
}
} // namespace

namespace {
/// Copies from page-locked memory run when they are called here, but on a
/// GPU later: the host must leave the source alone until it has waited for
/// an event recorded after the copy (or for the stream). Each such source
/// is checked then, by a hash of its bytes.
struct InFlightSource {
  const char *bytes;
  size_t size;
  uint64_t hash;
  uint64_t events; ///< events recorded before the copy
};
std::vector<InFlightSource> &inFlightSources() {
  static std::vector<InFlightSource> sources;
  return sources;
}
uint64_t eventsRecorded = 0;
uint64_t hashOf(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ uint8_t(p[i])) * 1099511628211ull;
  return h;
}
/// Checks and forgets the sources of the copies before event number
/// `order` (every copy for ~0).
void settleSources(uint64_t order) {
  std::vector<InFlightSource> &sources = inFlightSources();
  for (size_t i = 0; i < sources.size();) {
    const InFlightSource &src = sources[i];
    if (src.events >= order) {
      ++i;
      continue;
    }
    if (hashOf(src.bytes, src.size) != src.hash)
      fake::die("the host changed page-locked memory that an asynchronous "
                "copy to the device was still reading (it must wait for an "
                "event recorded after the copy first)");
    sources.erase(sources.begin() + std::ptrdiff_t(i));
  }
}
} // namespace

std::map<std::string, long long> fake::hostWaits() {
  return hostWaitCounts().counts;
}

namespace {
/// $CLEAVE_EMULATED_GPUS, default 8.
int deviceCount() {
  static int n = [] {
    const char *env = std::getenv("CLEAVE_EMULATED_GPUS");
    int v = env && *env ? std::atoi(env) : 8;
    if (v < 0)
      fake::die("CLEAVE_EMULATED_GPUS must be a count of devices");
    return v;
  }();
  return n;
}
int currentDevice = 0;
} // namespace

cudaError_t cudaGetDeviceCount(int *n) {
  *n = deviceCount();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= deviceCount())
    return cudaErrorInvalidDevice;
  currentDevice = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
  *device = currentDevice;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
  *s = new CUstream_st;
  (*s)->device = currentDevice;
  fake::streams().push_back(*s);
  return cudaSuccess;
}
cudaError_t cudaDeviceGetStreamPriorityRange(int *lowest, int *highest) {
  *lowest = *highest = 0;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags,
                                         int) {
  return cudaStreamCreateWithFlags(s, flags);
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  std::vector<cudaStream_t> &all = fake::streams();
  auto it = std::find(all.begin() + 1, all.end(), s);
  if (!s || it == all.end())
    return cudaErrorInvalidValue;
  // As in CUDA, work still on the stream completes first.
  fake::drainStream(s);
  all.erase(it);
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  countHostWait("cudaStreamSynchronize");
  fake::drainStream(s);
  settleSources(~uint64_t(0));
  return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
  // Not a wait by itself, but a host asks whether a whole stream has run
  // only while it waits for it (the NCCL engine polled it until each
  // collective had completed): counted, so that such waits show.
  countHostWait("cudaStreamQuery");
  return fake::pollHostWork(s) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaStreamGetDevice(cudaStream_t s, int *device) {
  if (!s)
    return cudaErrorInvalidValue;
  *device = s->device;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int device) {
  if (device < 0 || device >= deviceCount() || len <= 0)
    return device < 0 || device >= deviceCount() ? cudaErrorInvalidDevice
                                                 : cudaErrorInvalidValue;
  // One bus per device, as on a node: ranks of one machine that select the
  // same device index see the same id.
  std::snprintf(id, size_t(len), "00000000:%02X:00.0", 0x10 + device);
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return cudaSuccess; }
cudaError_t cudaMallocBytes(void **p, size_t n) {
  countHostWait("cudaMalloc");
  *p = allocate(n);
  return *p ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaFree(void *p) {
  countHostWait("cudaFree");
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t) {
  *p = allocate(n);
  return *p ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n) {
  countHostWait("cudaMemset");
  fill(p, v, n);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
  fill(p, v, n, s);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) {
  countHostWait("cudaMemcpy");
  copy(d, s, n);
  return cudaSuccess;
}
namespace {
/// The page-locked allocations: start -> size.
std::map<const char *, size_t> &pinned() {
  static std::map<const char *, size_t> ranges;
  return ranges;
}
bool isPinned(const void *p) {
  const char *c = static_cast<const char *>(p);
  auto it = pinned().upper_bound(c);
  if (it == pinned().begin())
    return false;
  --it;
  return c < it->first + it->second;
}
} // namespace

cudaError_t cudaMallocHost(void **p, size_t n) {
  countHostWait("cudaMallocHost");
  *p = allocate(n);
  if (!*p)
    return cudaErrorInvalidValue;
  pinned()[static_cast<const char *>(*p)] = n;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) {
  countHostWait("cudaFreeHost");
  if (p && !pinned().erase(static_cast<const char *>(p)))
    fake::die("cudaFreeHost of memory that cudaMallocHost did not return");
  // (Freeing synchronizes the device.)
  settleSources(~uint64_t(0));
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n,
                            cudaMemcpyKind k, cudaStream_t stream) {
  // From or to pageable host memory, an async copy makes the host wait.
  if (k == cudaMemcpyHostToDevice && !isPinned(s))
    countHostWait("cudaMemcpyAsync from pageable memory");
  if (k == cudaMemcpyHostToDevice && isPinned(s))
    inFlightSources().push_back({static_cast<const char *>(s), n,
                                 hashOf(static_cast<const char *>(s), n),
                                 eventsRecorded});
  if (k == cudaMemcpyDeviceToHost && !isPinned(d))
    countHostWait("cudaMemcpyAsync to pageable memory");
  copy(d, s, n, stream);
  return cudaSuccess;
}

struct CUevent_st {
  /// The number of its last record among all records (0: never recorded),
  /// and of the last one that completed.
  uint64_t order = 0, doneOrder = 0;
  cudaStream_t stream = nullptr;
  std::chrono::steady_clock::time_point at;
};
cudaError_t cudaEventCreate(cudaEvent_t *e) {
  *e = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
  return cudaEventCreate(e);
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  // Kernels ran when they were launched; the event completes after the
  // stream's host work, in stream order.
  // Polling at once stamps the time now when nothing is pending.
  uint64_t order = ++eventsRecorded;
  e->order = order;
  e->stream = s;
  fake::enqueueHostWork(
      [e, order] {
        if (e->order == order)
          e->at = std::chrono::steady_clock::now();
        e->doneOrder = std::max(e->doneOrder, order);
        return true;
      },
      s);
  fake::pollHostWork(s);
  return cudaSuccess;
}
namespace {
bool eventDone(cudaEvent_t e, uint64_t order) {
  if (e->doneOrder >= order)
    return true;
  fake::pollHostWork(e->stream);
  return e->doneOrder >= order;
}
} // namespace
cudaError_t cudaEventQuery(cudaEvent_t e) {
  return eventDone(e, e->order) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  countHostWait("cudaEventSynchronize");
  while (!eventDone(e, e->order))
    fake::pauseWaiting();
  settleSources(e->order);
  return e->order ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  uint64_t order = e->order;
  if (order == 0)
    return cudaSuccess;
  fake::enqueueHostWork([e, order] { return eventDone(e, order); }, s);
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t from, cudaEvent_t to) {
  if (!from->order || from->doneOrder < from->order || !to->order ||
      to->doneOrder < to->order)
    return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(to->at - from->at).count();
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  // Its pending record names it: it completes first.
  while (e->doneOrder < e->order)
    fake::drainStream(e->stream);
  delete e;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *p, int) {
  *p = nullptr;
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void *) {
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int) {
  if (a != cudaDevAttrMaxSharedMemoryPerBlockOptin)
    return cudaErrorInvalidValue;
  *v = fake::sharedOptin();
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// cuBLAS
//===----------------------------------------------------------------------===//

cublasStatus_t cublasCreate(cublasHandle_t *h) {
  static char handle;
  *h = &handle;
  return CUBLAS_STATUS_SUCCESS;
}
namespace {
cudaStream_t blasStream = nullptr;
} // namespace
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t s) {
  blasStream = s;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) {
  return CUBLAS_STATUS_SUCCESS;
}
const char *cublasGetStatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? "success" : "not supported (emulated)";
}

float fake::loadElement(const void *p, cudaDataType_t t, long long i, bool tf32) {
  switch (t) {
  case CUDA_R_16F:
    return cleave::rt::halfToFloat(static_cast<const uint16_t *>(p)[i]);
  case CUDA_R_16BF:
    return cleave::rt::bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  default:
    break;
  }
  float v = static_cast<const float *>(p)[i];
  if (!tf32 || !std::isfinite(v))
    return v;
  // TF32 keeps 10 bits of mantissa: round to nearest, ties to even.
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0xfffu + ((bits >> 13) & 1u);
  bits &= ~0x1fffu;
  std::memcpy(&v, &bits, 4);
  return v;
}
void fake::storeElement(void *p, cudaDataType_t t, long long i, float v) {
  switch (t) {
  case CUDA_R_16F:
    static_cast<uint16_t *>(p)[i] = cleave::rt::floatToHalf(v);
    return;
  case CUDA_R_16BF:
    static_cast<uint16_t *>(p)[i] = cleave::rt::floatToBf16(v);
    return;
  default:
    static_cast<float *>(p)[i] = v;
  }
}

namespace {
/// Column-major C = alpha op(A) op(B) + beta C for one batch.
void gemmOne(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
             float alpha, const void *A, cudaDataType_t at, int lda,
             const void *B, cudaDataType_t bt, int ldb, float beta, void *C,
             cudaDataType_t ct, int ldc, bool tf32) {
  fake::drainStream(blasStream);
  std::vector<float> p = fake::products(
      m, n, k,
      [&](int64_t i, int64_t l) {
        return fake::loadElement(A, at, ta == CUBLAS_OP_N ? i + l * lda
                                                          : l + i * lda,
                                 tf32);
      },
      [&](int64_t l, int64_t j) {
        return fake::loadElement(B, bt, tb == CUBLAS_OP_N ? l + j * ldb
                                                          : j + l * ldb,
                                 tf32);
      });
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      long long ci = i + (long long)j * ldc;
      float v = alpha * p[size_t(i) * size_t(n) + size_t(j)];
      if (beta != 0.0f)
        v += beta * fake::loadElement(C, ct, ci, false);
      fake::storeElement(C, ct, ci, v);
    }
}

size_t bytesOf(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }
} // namespace

std::vector<float>
fake::products(int64_t m, int64_t n, int64_t k,
               const std::function<float(int64_t, int64_t)> &a,
               const std::function<float(int64_t, int64_t)> &b) {
  std::vector<float> pa(size_t(m * k)), pb(size_t(k * n)), out(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t l = 0; l < k; ++l)
      pa[size_t(i * k + l)] = a(i, l);
  for (int64_t l = 0; l < k; ++l)
    for (int64_t j = 0; j < n; ++j)
      pb[size_t(l * n + j)] = b(l, j);
  for (int64_t i = 0; i < m; ++i) {
    float *row = out.data() + i * n;
    for (int64_t l = 0; l < k; ++l) {
      float x = pa[size_t(i * k + l)];
      const float *brow = pb.data() + l * n;
      for (int64_t j = 0; j < n; ++j)
        row[j] += x * brow[j];
    }
  }
  return out;
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
    int k, const void *alpha, const void *A, cudaDataType_t at, int lda,
    long long sa, const void *B, cudaDataType_t bt, int ldb, long long sb,
    const void *beta, void *C, cudaDataType_t ct, int ldc, long long sc,
    int batches, cublasComputeType_t compute, cublasGemmAlgo_t) {
  for (int bi = 0; bi < batches; ++bi)
    gemmOne(ta, tb, m, n, k, *static_cast<const float *>(alpha),
            static_cast<const char *>(A) + bi * sa * bytesOf(at), at, lda,
            static_cast<const char *>(B) + bi * sb * bytesOf(bt), bt, ldb,
            *static_cast<const float *>(beta),
            static_cast<char *>(C) + bi * sc * bytesOf(ct), ct, ldc,
            compute == CUBLAS_COMPUTE_32F_FAST_TF32);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
                            cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A,
                            cudaDataType_t at, int lda, const void *B,
                            cudaDataType_t bt, int ldb, const void *beta,
                            void *C, cudaDataType_t ct, int ldc,
                            cublasComputeType_t compute,
                            cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0,
                                    B, bt, ldb, 0, beta, C, ct, ldc, 0, 1,
                                    compute, algo);
}

cublasStatus_t cublasGemmBatchedEx(
    cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
    int k, const void *alpha, const void *const A[], cudaDataType_t at,
    int lda, const void *const B[], cudaDataType_t bt, int ldb,
    const void *beta, void *const C[], cudaDataType_t ct, int ldc,
    int batches, cublasComputeType_t compute, cublasGemmAlgo_t) {
  for (int bi = 0; bi < batches; ++bi) {
    // cuBLAS's rule for the pointer arrays of 16-bit types: each matrix
    // 16-byte aligned (the backend sends other cases through f32).
    for (auto [p, t] : {std::pair<const void *, cudaDataType_t>{A[bi], at},
                        {B[bi], bt},
                        {C[bi], ct}})
      if (t != CUDA_R_32F && reinterpret_cast<uintptr_t>(p) % 16 != 0)
        fake::die("cublasGemmBatchedEx: a 16-bit matrix not 16-byte aligned");
    gemmOne(ta, tb, m, n, k, *static_cast<const float *>(alpha), A[bi], at,
            lda, B[bi], bt, ldb, *static_cast<const float *>(beta), C[bi], ct,
            ldc, compute == CUBLAS_COMPUTE_32F_FAST_TF32);
  }
  return CUBLAS_STATUS_SUCCESS;
}
