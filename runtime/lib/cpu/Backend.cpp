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

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

extern "C" const char *cleave_rt_backend_name(void) { return "cpu"; }

extern "C" void cleave_rt_backend_init(void) {}

extern "C" char *cleave_rt_arena_alloc(int64_t bytes) {
  if (bytes < 0)
    cleave_rt_fail("arena size %lld is negative", (long long)bytes);
  // aligned_alloc needs a multiple of the alignment; a 0-byte arena gets
  // one line so that the pointer is valid.
  size_t size = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  if (size == 0)
    size = 64;
  void *arena = std::aligned_alloc(64, size);
  if (!arena)
    cleave_rt_fail("cannot allocate the %lld-byte arena", (long long)bytes);
  std::memset(arena, 0, size);
  return static_cast<char *>(arena);
}

extern "C" void cleave_rt_arena_free(char *arena) { std::free(arena); }

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
  if (bytes < 0)
    cleave_rt_fail("host buffer size %lld is negative", (long long)bytes);
  size_t size =
      std::max<size_t>(64, (static_cast<size_t>(bytes) + 63) / 64 * 64);
  void *p = std::aligned_alloc(64, size);
  if (!p)
    cleave_rt_fail("cannot allocate a %lld-byte host buffer", (long long)bytes);
  return p;
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
