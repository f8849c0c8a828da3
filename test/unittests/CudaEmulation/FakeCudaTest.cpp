//===- FakeCudaTest.cpp - the emulator's own behaviour --------------------===//
//
// The CUDA emulation runs kernels the way the hardware's rules allow:
// barriers order shared memory, shuffles exchange within a warp, every
// block of the grid runs with its own coordinates, and a barrier that some
// threads never reach is an error, not a hang. Host work on the stream (the
// emulated NCCL's) runs in stream order.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace {

/// out[blockIdx.x] = the sum of in[block's 64 elements], through shared
/// memory and barriers (a tree reduction).
void blockSum(const int *in, int *out) {
  __shared__ int partial[64];
  unsigned t = threadIdx.x;
  partial[t] = in[blockIdx.x * 64 + t];
  __syncthreads();
  for (unsigned half = 32; half > 0; half >>= 1) {
    if (t < half)
      partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0)
    out[blockIdx.x] = partial[0];
}

TEST(FakeCuda, BarriersOrderSharedMemory) {
  std::vector<int> in(64 * 5), out(5, -1);
  std::iota(in.begin(), in.end(), 1);
  fake::Launch(5, 64).run(nullptr, [&] { blockSum(in.data(), out.data()); });
  for (int b = 0; b < 5; ++b) {
    int expect = 0;
    for (int i = 0; i < 64; ++i)
      expect += in[size_t(b * 64 + i)];
    EXPECT_EQ(out[size_t(b)], expect) << "block " << b;
  }
}

/// Each lane's value after a butterfly sum: the sum over its warp.
void warpSum(int *values) {
  int v = values[threadIdx.x];
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  values[threadIdx.x] = v;
}

TEST(FakeCuda, ShufflesStayInTheWarp) {
  std::vector<int> values(96);
  std::iota(values.begin(), values.end(), 0);
  fake::Launch(1, 96).run(nullptr, [&] { warpSum(values.data()); });
  for (int t = 0; t < 96; ++t) {
    int w = t / 32, expect = 0;
    for (int i = 32 * w; i < 32 * w + 32; ++i)
      expect += i;
    EXPECT_EQ(values[size_t(t)], expect) << "thread " << t;
  }
}

TEST(FakeCuda, EveryBlockOfA3dGridWithDynamicSharedMemory) {
  std::vector<int> seen(2 * 3 * 4, 0);
  fake::Launch(dim3(2, 3, 4), dim3(4, 2), 64).run(nullptr, [&] {
    // Shared memory starts as NaN bytes in every block.
    EXPECT_EQ(static_cast<unsigned char>(fake::dynSmem[0]), 0xffu);
    __syncthreads();
    if (threadIdx.x == 3 && threadIdx.y == 1)
      fake::dynSmem[0] = 1;
    unsigned b = blockIdx.x + 2 * (blockIdx.y + 3 * blockIdx.z);
    if (threadIdx.x == 0 && threadIdx.y == 0)
      ++seen[b];
    EXPECT_EQ(blockDim.x * blockDim.y, 8u);
  });
  for (int count : seen)
    EXPECT_EQ(count, 1);
}

/// Host work (the emulated NCCL's collectives) keeps stream order: the
/// stream is not ready while it is pending, and a later kernel waits for it.
TEST(FakeCuda, HostWorkRunsInStreamOrder) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  int value = 0, polls = 0;
  fake::enqueueHostWork(
      [&] {
        if (++polls < 3)
          return false;
        value = 7;
        return true;
      },
      stream);
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady);
  EXPECT_EQ(value, 0);
  int seen = -1;
  fake::Launch(1, 1, 0, stream).run(nullptr, [&] { seen = value; });
  EXPECT_EQ(seen, 7);
  EXPECT_EQ(polls, 3);
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

/// Two streams: a kernel on one does not wait for the other's host work
/// until the program makes it (cudaStreamWaitEvent), and the wait is for
/// the event's record before it, not a later one.
TEST(FakeCuda, StreamsWaitOnlyForTheirEvents) {
  cudaStream_t compute, comm;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking),
            cudaSuccess);
  cudaEvent_t done;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
            cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess); // never recorded
  bool release = false;
  int value = 0;
  fake::enqueueHostWork(
      [&] {
        if (!release)
          return false;
        value = 5;
        return true;
      },
      comm);
  ASSERT_EQ(cudaEventRecord(done, comm), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  int seen = -1;
  // The compute stream runs on while the communication stream is stuck.
  fake::Launch(1, 1, 0, compute).run(nullptr, [&] { seen = value; });
  EXPECT_EQ(seen, 0);
  ASSERT_EQ(cudaStreamWaitEvent(compute, done, 0), cudaSuccess);
  // A later record of the same event is not what the compute stream waits
  // for.
  bool later = false;
  fake::enqueueHostWork([&] { return later; }, comm);
  ASSERT_EQ(cudaEventRecord(done, comm), cudaSuccess);
  EXPECT_FALSE(fake::pollHostWork(compute));
  release = true;
  EXPECT_TRUE(fake::pollHostWork(compute));
  fake::Launch(1, 1, 0, compute).run(nullptr, [&] { seen = value; });
  EXPECT_EQ(seen, 5);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  later = true;
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(done), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(comm), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(compute), cudaSuccess);
}

TEST(FakeCudaDeathTest, DivergentBarrierIsAnError) {
  EXPECT_DEATH(fake::Launch(1, 64).run(nullptr,
                                       [&] {
                                         if (threadIdx.x < 32)
                                           __syncthreads();
                                       }),
               "never reach");
}

TEST(FakeCudaDeathTest, SharedMemoryOverTheLimitIsAnError) {
  static int marker;
  EXPECT_DEATH(fake::Launch(1, 32, 64 << 10).run(&marker, [] {}),
               "dynamic shared memory");
  fake::setSharedLimit(&marker, 64 << 10);
  fake::Launch(1, 32, 64 << 10).run(&marker, [] {});
}

} // namespace
