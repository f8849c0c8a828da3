//===- HostStandIns.cpp - what the emulated build does not rewrite -------===//
//
// RowSort.cu's CUB sort and scan, as host loops (device memory is host
// memory in the emulation).
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

namespace cleave::rt::cuda {

void sortPositionsByRow(const int32_t *rows, int32_t *sortedRows,
                        const int32_t *positions, int32_t *sortedPositions,
                        int32_t n, int64_t numRows, const char *kernel) {
  std::vector<int32_t> order(size_t(n > 0 ? n : 0));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return rows[a] < rows[b]; });
  for (int32_t i = 0; i < n; ++i) {
    if (rows[order[size_t(i)]] < 0 || rows[order[size_t(i)]] >= numRows) {
      std::fprintf(stderr, "fake CUDA: %s: row %d outside [0, %lld)\n",
                   kernel, rows[order[size_t(i)]], (long long)numRows);
      std::abort();
    }
    sortedRows[i] = rows[order[size_t(i)]];
    sortedPositions[i] = positions[order[size_t(i)]];
  }
}

void exclusivePrefixSum(const int32_t *in, int32_t *out, int32_t n,
                        const char *) {
  int32_t sum = 0;
  for (int32_t i = 0; i < n; ++i) {
    int32_t v = in[i];
    out[i] = sum;
    sum += v;
  }
}

} // namespace cleave::rt::cuda
