//===- ArenaTest.cpp - the CPU backend's arena ----------------------------===//
//
// The arena is mapped lazily zeroed: aligned, zero everywhere, writable to
// its last byte, and a large one costs no memory until it is touched.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/cleave_rt.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>

namespace {

/// This process's resident memory in bytes (/proc/self/statm).
int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

TEST(Arena, ZeroedAlignedAndWritableToItsEnd) {
  for (int64_t bytes :
       {int64_t(0), int64_t(1), int64_t(100), int64_t(1) << 20}) {
    char *arena = cleave_rt_arena_alloc(bytes);
    ASSERT_NE(arena, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(arena) % CLEAVE_RT_ALIGNMENT, 0u);
    for (int64_t i = 0; i < bytes; ++i)
      ASSERT_EQ(arena[i], 0) << "byte " << i << " of " << bytes;
    if (bytes > 0) {
      arena[bytes - 1] = 7;
      EXPECT_EQ(arena[bytes - 1], 7);
    }
    cleave_rt_arena_free(arena);
  }
  cleave_rt_arena_free(nullptr);
}

TEST(Arena, LargeArenaIsBackedOnlyWhereTouched) {
  const int64_t bytes = int64_t(4) << 30;
  int64_t before = residentBytes();
  char *arena = cleave_rt_arena_alloc(bytes);
  // One byte in each 64 MiB: 64 pages.
  for (int64_t i = 0; i < bytes; i += int64_t(64) << 20) {
    ASSERT_EQ(arena[i], 0);
    arena[i] = 1;
  }
  EXPECT_EQ(arena[bytes - 1], 0);
  int64_t grown = residentBytes() - before;
  EXPECT_LT(grown, int64_t(64) << 20)
      << "a 4 GiB arena made " << grown << " bytes resident";
  cleave_rt_arena_free(arena);
}

} // namespace
