//===- Backend.cpp - the CPU backend: the arena in host memory -----------===//
//
// The backend functions of cleave_rt.h for the CPU: the arena is ordinary
// 64-byte aligned host memory, kernels run synchronously on the calling
// thread (and its OpenMP team), so reads and writes are plain copies, the
// asynchronous ones too, and a marker is the time it was recorded at (its
// work is done by then).
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/cleave_rt.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

extern "C" const char *cleave_rt_backend_name(void) { return "cpu"; }

extern "C" void cleave_rt_backend_init(void) {}

namespace {
/// What aligned_alloc gets for `bytes`: a multiple of the 64-byte alignment,
/// and one line for 0 bytes so that the pointer is valid.
size_t alignedSize(int64_t bytes) {
  return std::max<size_t>(64, (static_cast<size_t>(bytes) + 63) / 64 * 64);
}

/// `bytes` of 64-byte aligned host memory for the `noun` ("arena", "host
/// buffer"), or a clear error.
void *allocateAligned(int64_t bytes, const char *noun) {
  if (bytes < 0)
    cleave_rt_fail("%s size %lld is negative", noun, (long long)bytes);
  void *p = std::aligned_alloc(64, alignedSize(bytes));
  if (!p)
    cleave_rt_fail("cannot allocate the %lld-byte %s", (long long)bytes, noun);
  return p;
}
} // namespace

// The arena is mapped, not allocated and cleared: the kernel hands out
// zeroed pages as they are first touched, so a large arena costs nothing
// at start-up and pages the plan never touches are never backed. (A step
// that touches all of it pays the same page faults either way: the 6-layer
// GPT trains no faster. Transparent huge pages on it, MADV_HUGEPAGE, made
// its steps 8% slower.) Its size is kept in the page before it, for the
// unmapping.
constexpr size_t kArenaHeader = 4096;

extern "C" char *cleave_rt_arena_alloc(int64_t bytes) {
  if (bytes < 0)
    cleave_rt_fail("arena size %lld is negative", (long long)bytes);
  size_t size = kArenaHeader + alignedSize(bytes);
  void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    cleave_rt_fail("cannot map the %lld-byte arena: %s", (long long)bytes,
                   std::strerror(errno));
  *static_cast<size_t *>(p) = size;
  return static_cast<char *>(p) + kArenaHeader;
}

extern "C" void cleave_rt_arena_free(char *arena) {
  if (!arena)
    return;
  char *base = arena - kArenaHeader;
  munmap(base, *reinterpret_cast<size_t *>(base));
}

extern "C" void cleave_rt_arena_write(char *arena, int64_t offset,
                                      const void *src, int64_t bytes) {
  if (bytes > 0)
    std::memcpy(arena + offset, src, static_cast<size_t>(bytes));
}

extern "C" void cleave_rt_arena_read(const char *arena, int64_t offset,
                                     void *dst, int64_t bytes) {
  if (bytes > 0)
    std::memcpy(dst, arena + offset, static_cast<size_t>(bytes));
}

extern "C" void cleave_rt_synchronize(void) {}

extern "C" void *cleave_rt_host_alloc(int64_t bytes) {
  return allocateAligned(bytes, "host buffer");
}

extern "C" void cleave_rt_host_free(void *p) { std::free(p); }

extern "C" void cleave_rt_arena_write_async(char *arena, int64_t offset,
                                            const void *src, int64_t bytes) {
  cleave_rt_arena_write(arena, offset, src, bytes);
}

extern "C" void cleave_rt_arena_read_async(const char *arena, int64_t offset,
                                           void *dst, int64_t bytes) {
  cleave_rt_arena_read(arena, offset, dst, bytes);
}

/// The handle is the steady clock's reading in nanoseconds.
extern "C" int64_t cleave_rt_marker_record(void) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

extern "C" void cleave_rt_marker_wait(int64_t) {}

extern "C" double cleave_rt_marker_elapsed_ms(int64_t from, int64_t to) {
  return double(to - from) / 1e6;
}

extern "C" void cleave_rt_marker_free(int64_t) {}
