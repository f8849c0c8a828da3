//===- Moe.cu - mixture-of-experts and top-k CUDA kernels -----------------===//
//
// router_topk (softmax gates of the top k experts per token, one thread per
// token), moe_dispatch and moe_combine, and topk along any dim (one block
// per slice, k rounds of a block-wide arg-best). dispatch and combine share
// the slot assignment of cleave_rt.h: assignment (t, j) takes its expert's
// next free slot in (t, j) order, which one block per expert computes as a
// running prefix sum over the assignments, so a combine after a dispatch
// with the same experts reads the slots it wrote. (expert_matmul is in
// Matmul.cu.)
//
//===----------------------------------------------------------------------===//

#include "DeviceUtil.cuh"

#include "../cpu/KernelChecks.h"
#include "../cpu/Tensor.h"

#include <algorithm>
#include <cub/block/block_scan.cuh>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

/// "a comes first": larger (or smaller) value, NaN ranked above every
/// number, ties broken by the lower index (the order of cleave_rt_topk).
template <typename T>
__device__ inline bool ranksBefore(T va, int64_t ia, T vb, int64_t ib,
                                   bool smallest) {
  bool na = va != va, nb = vb != vb;
  if (na || nb) {
    if (na && nb)
      return ia < ib;
    return smallest ? nb : na;
  }
  if (va != vb)
    return smallest ? va < vb : va > vb;
  return ia < ib;
}

/// Element access in the compute type of topk (f32 or i64).
template <typename T>
__device__ T loadAs(const char *base, int32_t dtype, int64_t i);
template <>
__device__ float loadAs<float>(const char *base, int32_t dtype, int64_t i) {
  return loadF32(base, dtype, i);
}
template <>
__device__ int64_t loadAs<int64_t>(const char *base, int32_t dtype, int64_t i) {
  return loadI64(base, dtype, i);
}
__device__ inline void storeAs(char *base, int32_t dtype, int64_t i, float v) {
  storeF32(base, dtype, i, v);
}
__device__ inline void storeAs(char *base, int32_t dtype, int64_t i,
                               int64_t v) {
  storeI64(base, dtype, i, v);
}

//===----------------------------------------------------------------------===//
// router_topk
//===----------------------------------------------------------------------===//

/// The expert ranked right after (prevValue, prev) in row `row` of `e`
/// logits, or the first one when prev < 0 (softmax is monotonic: ranking
/// by logit, ties to the lower expert).
__device__ int64_t nextExpert(const char *logits, int32_t dtype, int64_t row,
                              int64_t e, float prevValue, int64_t prev,
                              float &value) {
  int64_t best = -1;
  float bestValue = 0.0f;
  for (int64_t x = 0; x < e; ++x) {
    float v = loadF32(logits, dtype, row + x);
    if (prev >= 0 && !ranksBefore(prevValue, prev, v, x, false))
      continue; // already taken
    if (best < 0 || ranksBefore(v, x, bestValue, best, false)) {
      best = x;
      bestValue = v;
    }
  }
  value = bestValue;
  return best;
}

/// One thread per token: the top k experts twice (once for the picked
/// sum, once to write), with exp(logit - max) in f64 as the CPU kernel.
__global__ void routerTopkKernel(const char *logits, int32_t dtype,
                                 int64_t tokens, int64_t e, int64_t k,
                                 bool normalize, char *gates, int32_t gatesType,
                                 char *experts, int32_t expertsType) {
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < tokens;
       t += int64_t(gridDim.x) * blockDim.x) {
    int64_t row = t * e;
    float max;
    int64_t prev = nextExpert(logits, dtype, row, e, 0.0f, -1, max);
    double sum = 0.0;
    for (int64_t x = 0; x < e; ++x)
      sum += exp(double(loadF32(logits, dtype, row + x) - max));
    double picked = 0.0;
    float value = max;
    for (int64_t j = 0; j < k; ++j) {
      if (j > 0)
        prev = nextExpert(logits, dtype, row, e, value, prev, value);
      picked += exp(double(value - max));
    }
    double denom = normalize ? picked : sum;
    value = max;
    prev = -1;
    for (int64_t j = 0; j < k; ++j) {
      prev = nextExpert(logits, dtype, row, e, value, prev, value);
      storeF32(gates, gatesType, t * k + j,
               float(exp(double(value - max)) / denom));
      storeI64(experts, expertsType, t * k + j, prev);
    }
  }
}

//===----------------------------------------------------------------------===//
// Slots of moe_dispatch and moe_combine
//===----------------------------------------------------------------------===//

constexpr int kScanThreads = 1024;

/// Block (e, g) walks the n / G assignments of group g in order, a chunk
/// of kScanThreads at a time, and gives each one of expert e the next slot
/// of the group (an exclusive prefix sum of the matches plus the slots
/// already taken): row[a] = e * G * capacity + g * capacity + slot, or -1
/// when the expert is full in the group. Blocks (0, g) also report experts
/// outside [0, E) (their row is -1).
__global__ void __launch_bounds__(kScanThreads)
    assignSlotsKernel(const char *experts, int32_t dtype, int64_t n,
                      int64_t numExperts, int64_t capacity, int64_t groups,
                      int64_t *row, int32_t kernelId, DeviceError *error) {
  using Scan = cub::BlockScan<int, kScanThreads>;
  __shared__ typename Scan::TempStorage temp;
  int64_t e = blockIdx.x, perGroup = n / groups;
  bool owner = e < numExperts;
  for (int64_t g = blockIdx.y; g < groups; g += gridDim.y) {
    int64_t begin = g * perGroup, end = begin + perGroup, taken = 0;
    for (int64_t chunk = begin; chunk < end; chunk += kScanThreads) {
      int64_t a = chunk + threadIdx.x;
      int64_t x = a < end ? loadI64(experts, dtype, a) : -1;
      if (blockIdx.x == 0 && a < end && (x < 0 || x >= numExperts)) {
        raiseError(error, kExpertOutOfRange, kernelId, x, numExperts);
        row[a] = -1;
      }
      int match = owner && a < end && x == e ? 1 : 0;
      int before, total;
      Scan(temp).ExclusiveSum(match, before, total);
      if (match) {
        int64_t slot = taken + before;
        row[a] = slot < capacity ? (e * groups + g) * capacity + slot : -1;
      }
      taken += total;
      __syncthreads(); // temp is reused by the next chunk's scan
    }
  }
}

/// The [E * G * C] row of each of the n assignments (see
/// assignSlotsKernel), in `rows`; `capacity` is per group.
void assignSlots(const char *kn, int32_t kernelId, const char *experts,
                 int32_t dtype, int64_t n, int64_t numExperts, int64_t capacity,
                 int64_t groups, ScratchBuffer &rows) {
  rows.allocate(size_t(n) * sizeof(int64_t), kn);
  if (n == 0)
    return;
  dim3 blocks(static_cast<unsigned>(numExperts > 0 ? numExperts : 1),
              static_cast<unsigned>(std::min<int64_t>(groups, 65535)));
  assignSlotsKernel<<<blocks, kScanThreads, 0, stream()>>>(
      experts, dtype, n, numExperts, capacity, groups, rows.as<int64_t>(),
      kernelId, errorSlot());
  checkLaunchOf(kn);
}

/// out[row[a]] = tokens[a / k], row by row (element bytes of `elemSize`).
template <typename Word>
__global__ void dispatchKernel(const Word *tokens, const int64_t *row,
                               int64_t n, int64_t k, int64_t h, Word *out) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n * h;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t a = e / h, d = e % h, r = row[a];
    if (r >= 0)
      out[r * h + d] = tokens[(a / k) * h + d];
  }
}

template <typename Word>
void launchDispatch(const char *tokens, const int64_t *row, int64_t n,
                    int64_t k, int64_t h, char *out) {
  dispatchKernel<<<blocksFor(n * h), kThreads, 0, stream()>>>(
      reinterpret_cast<const Word *>(tokens), row, n, k, h,
      reinterpret_cast<Word *>(out));
}

/// out[t, d] = sum over j of gates[t, j] * expert_out[row[t k + j], d], in
/// j order and f32, with the product and the sum rounded separately as in
/// the CPU kernel; dropped assignments add nothing.
__global__ void combineKernel(const char *y, int32_t yType, const char *gates,
                              int32_t gatesType, const int64_t *row,
                              int64_t tokens, int64_t k, int64_t h, char *out,
                              int32_t outType) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       e < tokens * h; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t t = e / h, d = e % h;
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      int64_t r = row[t * k + j];
      if (r < 0)
        continue;
      float g = loadF32(gates, gatesType, t * k + j);
      acc = __fadd_rn(acc, __fmul_rn(g, loadF32(y, yType, r * h + d)));
    }
    storeF32(out, outType, e, acc);
  }
}

//===----------------------------------------------------------------------===//
// topk
//===----------------------------------------------------------------------===//

/// The block-wide best of (value, index) candidates (index -1: none), in
/// every thread.
template <typename T>
__device__ void blockBest(T &value, int64_t &index, bool smallest) {
  __shared__ T values[32];
  __shared__ int64_t indices[32];
  auto warpBest = [&] {
    for (int offset = 16; offset > 0; offset >>= 1) {
      T v = __shfl_xor_sync(0xffffffffu, value, offset);
      int64_t i = __shfl_xor_sync(0xffffffffu, index, offset);
      if (i >= 0 && (index < 0 || ranksBefore(v, i, value, index, smallest))) {
        value = v;
        index = i;
      }
    }
  };
  warpBest();
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); // the previous call's readers are done
  if (lane == 0) {
    values[warp] = value;
    indices[warp] = index;
  }
  __syncthreads();
  int warps = (blockDim.x + 31) >> 5;
  value = lane < warps ? values[lane] : T(0);
  index = lane < warps ? indices[lane] : -1;
  warpBest();
}

/// One block per slice (the `size` elements along dim, `inner` apart): k
/// rounds, each picking the best element ranked after the previous pick.
template <typename T>
__global__ void topkKernel(const char *x, int32_t xType, int64_t outer,
                           int64_t size, int64_t inner, int64_t k,
                           bool smallest, char *values, int32_t valuesType,
                           char *indices, int32_t indicesType) {
  for (int64_t s = blockIdx.x; s < outer * inner; s += gridDim.x) {
    int64_t o = s / inner, i = s % inner;
    int64_t base = o * size * inner + i;
    T prevValue = T(0);
    int64_t prev = -1;
    for (int64_t j = 0; j < k; ++j) {
      T best = T(0);
      int64_t bestIndex = -1;
      for (int64_t a = threadIdx.x; a < size; a += blockDim.x) {
        T v = loadAs<T>(x, xType, base + a * inner);
        if (prev >= 0 && !ranksBefore(prevValue, prev, v, a, smallest))
          continue; // already picked
        if (bestIndex < 0 || ranksBefore(v, a, best, bestIndex, smallest)) {
          best = v;
          bestIndex = a;
        }
      }
      blockBest(best, bestIndex, smallest);
      if (threadIdx.x == 0) {
        int64_t at = (o * k + j) * inner + i;
        storeAs(values, valuesType, at, best);
        storeI64(indices, indicesType, at, bestIndex);
      }
      prevValue = best;
      prev = bestIndex;
    }
  }
}

} // namespace

extern "C" {

void cleave_rt_router_topk(char *arena, const cleave_tensor *logits,
                           const cleave_tensor *gates,
                           const cleave_tensor *experts, int64_t k,
                           int32_t normalize) {
  const char *kn = "cleave_rt_router_topk";
  checkRouterTopk(kn, logits, gates, experts, k);
  int64_t tokens = logits->shape[0], e = logits->shape[1];
  if (k == 0 || tokens == 0)
    return;
  // Each thread writes its token's gates while others read their logits.
  ScratchBuffer copy;
  const char *lp = bytesInput(
      arena, *logits, overlaps(*logits, *gates) || overlaps(*logits, *experts),
      copy, kn);
  routerTopkKernel<<<blocksFor(tokens), kThreads, 0, stream()>>>(
      lp, logits->dtype, tokens, e, k, normalize != 0, dataOf(arena, *gates),
      gates->dtype, dataOf(arena, *experts), experts->dtype);
  checkLaunchOf(kn);
}

void cleave_rt_moe_dispatch(char *arena, const cleave_tensor *tokens,
                            const cleave_tensor *experts,
                            const cleave_tensor *out, int64_t groups) {
  const char *kn = "cleave_rt_moe_dispatch";
  checkMoeDispatch(kn, tokens, experts, out, groups);
  int64_t t = tokens->shape[0], h = tokens->shape[1];
  int64_t k = experts->shape[1], e = out->shape[0], c = out->shape[1];
  ScratchBuffer rows, copy;
  assignSlots(kn, kMoeDispatch, dataOf(arena, *experts), experts->dtype, t * k,
              e, c / groups, groups, rows);
  // out is zeroed before the tokens are copied in.
  const char *src =
      bytesInput(arena, *tokens, overlaps(*tokens, *out), copy, kn);
  char *dst = dataOf(arena, *out);
  size_t elemSize = elementSize(out->dtype);
  check(cudaMemsetAsync(dst, 0, size_t(e * c * h) * elemSize, stream()),
        "zeroing the dispatch output");
  if (t * k * h == 0)
    return;
  const int64_t *row = rows.as<int64_t>();
  switch (elemSize) {
  case 1:
    launchDispatch<uint8_t>(src, row, t * k, k, h, dst);
    break;
  case 2:
    launchDispatch<uint16_t>(src, row, t * k, k, h, dst);
    break;
  case 4:
    launchDispatch<uint32_t>(src, row, t * k, k, h, dst);
    break;
  default:
    launchDispatch<uint64_t>(src, row, t * k, k, h, dst);
  }
  checkLaunchOf(kn);
}

void cleave_rt_moe_combine(char *arena, const cleave_tensor *expert_out,
                           const cleave_tensor *gates,
                           const cleave_tensor *experts,
                           const cleave_tensor *out, int64_t groups) {
  const char *kn = "cleave_rt_moe_combine";
  checkMoeCombine(kn, expert_out, gates, experts, out, groups);
  int64_t t = out->shape[0], h = out->shape[1];
  int64_t k = experts->shape[1], e = expert_out->shape[0];
  int64_t c = expert_out->shape[1];
  ScratchBuffer rows, yCopy, gatesCopy;
  assignSlots(kn, kMoeCombine, dataOf(arena, *experts), experts->dtype, t * k,
              e, c / groups, groups, rows);
  if (t * h == 0)
    return;
  // Threads write out while others still read expert_out and gates.
  const char *yp =
      bytesInput(arena, *expert_out, overlaps(*expert_out, *out), yCopy, kn);
  const char *gp =
      bytesInput(arena, *gates, overlaps(*gates, *out), gatesCopy, kn);
  combineKernel<<<blocksFor(t * h), kThreads, 0, stream()>>>(
      yp, expert_out->dtype, gp, gates->dtype, rows.as<int64_t>(), t, k, h,
      dataOf(arena, *out), out->dtype);
  checkLaunchOf(kn);
}

void cleave_rt_topk(char *arena, const cleave_tensor *x,
                    const cleave_tensor *values, const cleave_tensor *indices,
                    int64_t k, int64_t dim, int32_t smallest) {
  const char *kn = "cleave_rt_topk";
  checkTopk(kn, x, values, indices, k, dim);
  int64_t outer = 1, inner = 1, size = x->shape[dim];
  for (int d = 0; d < dim; ++d)
    outer *= x->shape[d];
  for (int d = int(dim) + 1; d < x->rank; ++d)
    inner *= x->shape[d];
  if (k == 0 || outer * inner == 0)
    return;
  // Slices are written while other blocks still read theirs.
  ScratchBuffer copy;
  const char *xp = bytesInput(
      arena, *x, overlaps(*x, *values) || overlaps(*x, *indices), copy, kn);
  unsigned blocks = rowBlocks(outer * inner);
  int threads = rowThreads(size);
  if (isFloatType(x->dtype))
    topkKernel<float><<<blocks, threads, 0, stream()>>>(
        xp, x->dtype, outer, size, inner, k, smallest != 0,
        dataOf(arena, *values), values->dtype, dataOf(arena, *indices),
        indices->dtype);
  else
    topkKernel<int64_t><<<blocks, threads, 0, stream()>>>(
        xp, x->dtype, outer, size, inner, k, smallest != 0,
        dataOf(arena, *values), values->dtype, dataOf(arena, *indices),
        indices->dtype);
  checkLaunchOf(kn);
}

} // extern "C"
