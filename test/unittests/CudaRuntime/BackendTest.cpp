//===- BackendTest.cpp - the CUDA backend's arena and synchronization -----===//
//
// The backend functions of cleave_rt.h on the GPU: the names of both
// backends linked here, idempotent initialization, a zeroed arena, host
// <-> arena copies at offsets (a read sees the kernels called before it),
// synchronize, and free; the CPU reference's arena functions beside them;
// the asynchronous copies through page-locked memory and the markers that
// order them, which report a device error when waited for.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include <cmath>
#include <cstring>

using namespace cleave::rt::test;

namespace {

using CudaBackend = CudaTest;

TEST_F(CudaBackend, NamesAndInit) {
  SKIP_IN_CPU_ONLY_MODE();
  EXPECT_STREQ(cleave_rt_backend_name(), "cuda");
  EXPECT_STREQ(cleave_cpu_ref_backend_name(), "cpu");
  cleave_rt_backend_init();
  cleave_rt_backend_init(); // idempotent
  cleave_cpu_ref_backend_init();
  cleave_rt_synchronize();
}

TEST_F(CudaBackend, ArenaZeroedAndRoundTrip) {
  SKIP_IN_CPU_ONLY_MODE();
  const int64_t bytes = (int64_t(3) << 20) + 17;
  char *arena = cleave_rt_arena_alloc(bytes);
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arena) % 64, 0u);
  std::vector<char> back(size_t(bytes), 1);
  cleave_rt_arena_read(arena, 0, back.data(), bytes);
  EXPECT_EQ(std::count(back.begin(), back.end(), 0), bytes) << "not zeroed";

  std::vector<char> data(100000);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = char(i * 7 + 3);
  cleave_rt_arena_write(arena, 12345, data.data(), int64_t(data.size()));
  std::vector<char> got(data.size());
  cleave_rt_arena_read(arena, 12345, got.data(), int64_t(got.size()));
  EXPECT_EQ(got, data);
  // Zero-byte copies are no-ops.
  cleave_rt_arena_write(arena, 0, data.data(), 0);
  cleave_rt_arena_read(arena, 0, got.data(), 0);
  cleave_rt_arena_free(arena);
  cleave_rt_arena_free(nullptr);

  char *host = cleave_cpu_ref_arena_alloc(1000);
  cleave_cpu_ref_arena_write(host, 10, data.data(), 100);
  cleave_cpu_ref_arena_read(host, 10, got.data(), 100);
  EXPECT_EQ(std::memcmp(got.data(), data.data(), 100), 0);
  cleave_cpu_ref_synchronize();
  cleave_cpu_ref_arena_free(host);
}

TEST_F(CudaBackend, ReadSeesEarlierKernels) {
  // A long chain of kernels, then a read without an explicit synchronize.
  DevicePair p(size_t(64) << 20);
  cleave_tensor x = p.add(CLEAVE_F32, {4096, 1024});
  cleave_tensor y = p.add(CLEAVE_F32, {4096, 1024});
  p.fill(x, -1, 1, 1);
  for (int i = 0; i < 20; ++i) {
    CUDA_AND_CPU(p, unary, CLEAVE_TANH, &x, &y);
    CUDA_AND_CPU(p, binary, CLEAVE_ADD, &x, &y, &x);
  }
  p.expectMatch(x, "20 tanh/add rounds", {1e-4, 1e-5});
  p.expectMatch(y, "20 tanh/add rounds, tanh", {1e-4, 1e-5});
}

TEST_F(CudaBackend, TwoArenas) {
  // Two device arenas at once (the trainer keeps one; tests make many).
  DevicePair a, b;
  cleave_tensor x = a.add(CLEAVE_F32, {1000});
  cleave_tensor y = b.add(CLEAVE_F32, {1000});
  a.fill(x, -1, 1, 2);
  b.fill(y, -1, 1, 3);
  CUDA_AND_CPU(a, unary, CLEAVE_EXP, &x, &x);
  CUDA_AND_CPU(b, unary, CLEAVE_SIN, &y, &y);
  a.expectMatch(x, "exp in arena a", elementwiseTolerance(CLEAVE_F32));
  b.expectMatch(y, "sin in arena b", elementwiseTolerance(CLEAVE_F32));
}

TEST_F(CudaBackend, AsyncCopiesAndMarkers) {
  SKIP_IN_CPU_ONLY_MODE();
  // Data up through page-locked memory, a chain of kernels, the result
  // back, then one marker: the result is there once the marker is waited.
  DevicePair p(size_t(16) << 20);
  cleave_tensor x = p.add(CLEAVE_F32, {1000, 256});
  const int64_t bytes = 1000 * 256 * 4;
  float *up = static_cast<float *>(cleave_rt_host_alloc(bytes));
  float *down = static_cast<float *>(cleave_rt_host_alloc(bytes));
  ASSERT_TRUE(up && down);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(up) % 64, 0u);
  for (int64_t i = 0; i < 1000 * 256; ++i)
    up[i] = float(i % 97) / 97.0f;
  int64_t before = cleave_rt_marker_record();
  cleave_rt_arena_write_async(p.deviceArena(), x.offset, up, bytes);
  for (int i = 0; i < 5; ++i)
    cleave_rt_unary(p.deviceArena(), CLEAVE_EXP, &x, &x);
  cleave_rt_arena_read_async(p.deviceArena(), x.offset, down, bytes);
  int64_t after = cleave_rt_marker_record();
  EXPECT_NE(before, after);
  cleave_rt_marker_wait(before);
  cleave_rt_marker_wait(after);
  EXPECT_GE(cleave_rt_marker_elapsed_ms(before, after), 0.0);
  int64_t bad = 0;
  for (int64_t i = 0; i < 1000 * 256; ++i) {
    double expect = up[i];
    for (int k = 0; k < 5; ++k)
      expect = std::exp(expect);
    bad += std::abs(down[i] - expect) > 1e-4 * std::abs(expect);
  }
  EXPECT_EQ(bad, 0) << "five exps after an asynchronous upload";
  cleave_rt_marker_free(before);
  cleave_rt_marker_free(after);
  // Freed markers are reused.
  int64_t again = cleave_rt_marker_record();
  EXPECT_TRUE(again == before || again == after);
  cleave_rt_marker_wait(again);
  cleave_rt_marker_free(again);
  cleave_rt_host_free(up);
  cleave_rt_host_free(down);
  cleave_rt_host_free(nullptr);
}

/// A gather with an index out of range, then a marker: waiting for the
/// marker reports the error.
void gatherOutOfRangeThenMarker() {
  DevicePair p;
  cleave_tensor table = p.add(CLEAVE_F32, {50, 8});
  cleave_tensor ids = p.add(CLEAVE_I64, {3});
  cleave_tensor out = p.add(CLEAVE_F32, {3, 8});
  p.fill(table, -1, 1, 31);
  p.setValues(ids, {1, 60, 2});
  cleave_rt_gather(p.deviceArena(), &table, &ids, &out, 0);
  cleave_rt_marker_wait(cleave_rt_marker_record());
}

TEST_F(CudaBackend, MarkerWaitReportsDeviceErrors) {
  SKIP_IN_CPU_ONLY_MODE();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(gatherOutOfRangeThenMarker(),
               "error: cleave_rt_gather: index 60 is out of range");
  EXPECT_DEATH(cleave_rt_marker_wait(12345),
               "cleave_rt_marker_wait: 12345 is not a recorded marker");
}

} // namespace
