//===- BackendTest.cpp - the CUDA backend's arena and synchronization -----===//
//
// The backend functions of cleave_rt.h on the GPU: the names of both
// backends linked here, idempotent initialization, a zeroed arena, host
// <-> arena copies at offsets (a read sees the kernels called before it),
// synchronize, and free; the CPU reference's arena functions beside them.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

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

} // namespace
