// Shim: CUB's BlockScan, the one block primitive the backend uses (Moe.cu),
// on the emulation's barriers (see ../../../FakeCuda.h).
#ifndef CLEAVE_TEST_CUDAEMULATION_CUB_BLOCK_SCAN_CUH
#define CLEAVE_TEST_CUDAEMULATION_CUB_BLOCK_SCAN_CUH

#include "../../../FakeCuda.h"

namespace cub {

/// A prefix sum over the Threads threads of a 1-D block.
template <class T, int Threads> class BlockScan {
public:
  struct TempStorage {
    T values[Threads];
  };
  explicit BlockScan(TempStorage &temp) : temp(temp) {}

  /// out = the sum of the inputs of the threads before this one; total =
  /// the sum over the block. Every thread of the block must call.
  void ExclusiveSum(T input, T &out, T &total) {
    int t = int(threadIdx.x);
    temp.values[t] = input;
    __syncthreads();
    T sum = T(0);
    for (int i = 0; i < t; ++i)
      sum += temp.values[i];
    out = sum;
    for (int i = t; i < Threads; ++i)
      sum += temp.values[i];
    total = sum;
    __syncthreads();
  }

private:
  TempStorage &temp;
};

} // namespace cub

#endif
