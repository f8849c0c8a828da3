//===- RowSort.cu - stable sort of positions by row, and prefix sums ------===//
//
// The device-wide primitives of the deterministic scatter-add behind
// gather_grad (DataMovement.cu), on cub's radix sort and scan. They live in
// their own file because cub's headers and the host code nvcc generates
// refer to the global `::cuda` namespace, which the kernel files' `using
// namespace cleave::rt::cuda` would make ambiguous.
//
//===----------------------------------------------------------------------===//

#include "DeviceUtil.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

namespace cleave::rt::cuda {

void sortPositionsByRow(const int32_t *rows, int32_t *sortedRows,
                        const int32_t *positions, int32_t *sortedPositions,
                        int32_t n, int64_t numRows, const char *kernel) {
  if (n == 0)
    return;
  // Only the bits a row index can have take a pass.
  int endBit = 1;
  while (endBit < 31 && (int64_t(1) << endBit) < numRows)
    ++endBit;
  size_t bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, rows, sortedRows,
                                        positions, sortedPositions, n, 0,
                                        endBit, stream()),
        kernel);
  ScratchBuffer scratch(bytes, kernel);
  check(cub::DeviceRadixSort::SortPairs(scratch.as<void>(), bytes, rows,
                                        sortedRows, positions, sortedPositions,
                                        n, 0, endBit, stream()),
        kernel);
}

void exclusivePrefixSum(const int32_t *in, int32_t *out, int32_t n,
                        const char *kernel) {
  if (n == 0)
    return;
  size_t bytes = 0;
  check(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, n, stream()),
        kernel);
  ScratchBuffer scratch(bytes, kernel);
  check(cub::DeviceScan::ExclusiveSum(scratch.as<void>(), bytes, in, out, n,
                                      stream()),
        kernel);
}

} // namespace cleave::rt::cuda
