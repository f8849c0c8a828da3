//===- Backend.cpp - the CPU backend: the arena in host memory -----------===//
//
// The backend functions of cleave_rt.h for the CPU: the arena is ordinary
// 64-byte aligned host memory, kernels run synchronously on the calling
// thread (and its OpenMP team), so reads and writes are plain copies.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/cleave_rt.h"

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
