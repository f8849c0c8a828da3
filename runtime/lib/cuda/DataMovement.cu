//===- DataMovement.cu - shape and data movement CUDA kernels -------------===//
//
// transpose, broadcast_in_dim, slice, concat and gather on the GPU, and the
// transposes of two of them for autodiff: slice_grad (a strided scatter into
// zeros) and gather_grad (a deterministic scatter-add in f32: the
// positions of each target row sorted stably by cub's radix sort, then
// summed in ascending order, as the CPU backend does). Except
// gather_grad they move bytes of any dtype without converting (input and
// output dtypes must match), as elements of up to 16 bytes: contiguous runs
// are moved in the widest unit that their length and alignment allow. A
// transpose that moves the contiguous dim of its source copies 32x32 tiles
// through shared memory, so that reads and writes both coalesce. Indices are
// checked on the device and reported at the next synchronization.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "KernelUtil.cuh"

#include "../cpu/KernelChecks.h"
#include "../cpu/Tensor.h"

#include <initializer_list>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace cleave::rt::cuda {
namespace {

/// The source bytes, copied aside when they overlap the output (these
/// kernels read elements in a different order than they write them).
const char *sourceBytes(char *arena, const cleave_tensor &x,
                        const cleave_tensor &out, ScratchBuffer &copy,
                        const char *kernel) {
  const char *src = dataOf(arena, x);
  if (!overlaps(x, out))
    return src;
  return copyToScratch(copy, src, size_t(numElements(x)) * elementSize(x.dtype),
                       kernel);
}

/// Unsigned integers of each element size that the kernels move.
template <int Bytes> struct Unit;
template <> struct Unit<1> { using type = uint8_t; };
template <> struct Unit<2> { using type = uint16_t; };
template <> struct Unit<4> { using type = uint32_t; };
template <> struct Unit<8> { using type = unsigned long long; };
template <> struct Unit<16> { using type = uint4; };

/// Calls `f(Unit<B>())` for the unit of `bytes` (1, 2, 4, 8 or 16).
template <typename F> void withUnit(size_t bytes, F &&f) {
  switch (bytes) {
  case 1:
    return f(Unit<1>());
  case 2:
    return f(Unit<2>());
  case 4:
    return f(Unit<4>());
  case 8:
    return f(Unit<8>());
  case 16:
    return f(Unit<16>());
  }
  cleave_rt_fail("data movement: unsupported element size %zu", bytes);
}

/// The largest unit (16 bytes at most) that divides every one of `values`.
size_t widestUnit(std::initializer_list<int64_t> values) {
  size_t unit = 16;
  for (int64_t v : values)
    while (unit > 1 && v % int64_t(unit) != 0)
      unit /= 2;
  return unit;
}

//===----------------------------------------------------------------------===//
// Strided copies and scatters
//===----------------------------------------------------------------------===//

/// The strided side of a move: element (i0, i1, ...) of the contiguous
/// `shape` is element `base + sum(ik * strides[k])` of the strided tensor
/// (strides in elements, possibly 0 or negative).
struct StridedPlan {
  int32_t rank;
  int64_t shape[CLEAVE_RT_MAX_RANK];
  int64_t strides[CLEAVE_RT_MAX_RANK];
  int64_t base;
};

/// Gather (dst[i] = src[strided(i)]) or, with Scatter, dst[strided(i)] =
/// src[i], over the `total` elements of the contiguous side.
template <bool Scatter, typename E, typename Index>
__global__ void __launch_bounds__(kThreads)
    stridedMoveKernel(const E *src, E *dst, StridedPlan p, Index total) {
  Index step = Index(gridDim.x) * Index(blockDim.x);
  for (Index i = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x);
       i < total; i += step) {
    Index rest = i;
    int64_t at = p.base;
    for (int d = p.rank - 1; d > 0; --d) {
      Index size = Index(p.shape[d]);
      Index next = rest / size;
      at += int64_t(rest - next * size) * p.strides[d];
      rest = next;
    }
    if (p.rank > 0) // the outermost index is what is left
      at += int64_t(rest) * p.strides[0];
    if constexpr (Scatter)
      dst[at] = src[i];
    else
      dst[i] = src[at];
  }
}

constexpr int kTile = 32;
constexpr int kTileRows = 8;

/// A gather whose contiguous source dim `a` is not the last dim of the
/// (contiguous) destination: 32x32 tiles of (a, last) are read along a and
/// written along the last dim through shared memory. `dstStrides` are the
/// destination's row-major strides; the other dims form the batch.
template <typename E>
__global__ void __launch_bounds__(kTile *kTileRows)
    transposeTilesKernel(const E *src, E *dst, StridedPlan p,
                         StridedPlan dstStrides, int a, int64_t tilesA,
                         int64_t tilesB, int64_t tiles) {
  __shared__ E tile[kTile][kTile + 1];
  int last = p.rank - 1;
  int64_t sizeA = p.shape[a], sizeB = p.shape[last];
  int64_t strideB = p.strides[last], dstStrideA = dstStrides.strides[a];
  int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    int64_t tb = t % tilesB, rest = t / tilesB;
    int64_t ta = rest % tilesA, batch = rest / tilesA;
    int64_t from = p.base, to = 0;
    for (int d = last - 1; d >= 0; --d) {
      if (d == a)
        continue;
      int64_t idx = batch % p.shape[d];
      batch /= p.shape[d];
      from += idx * p.strides[d];
      to += idx * dstStrides.strides[d];
    }
    int64_t a0 = ta * kTile, b0 = tb * kTile;
    for (int j = ty; j < kTile; j += kTileRows) {
      int64_t ai = a0 + tx, bi = b0 + j;
      if (ai < sizeA && bi < sizeB)
        tile[j][tx] = src[from + ai + bi * strideB];
    }
    __syncthreads();
    for (int j = ty; j < kTile; j += kTileRows) {
      int64_t ai = a0 + j, bi = b0 + tx;
      if (ai < sizeA && bi < sizeB)
        dst[to + ai * dstStrideA + bi] = tile[tx][j];
    }
    __syncthreads();
  }
}

/// Moves the elements of a contiguous `fullShape` to or from the strided
/// side (see StridedPlan): into contiguous dst from src (a gather) or, with
/// `scatter`, into strided dst from contiguous src. Drops dims of size 1 and
/// merges adjacent dims that the strided side walks contiguously, as the CPU
/// kernels do; the destinations of a scatter must be distinct. `kernel` is
/// the ABI function, for messages.
void stridedMove(const char *kernel, bool scatter, const char *src, char *dst,
                 size_t elemSize, int fullRank, const int64_t *fullShape,
                 const int64_t *fullStrides, int64_t base) {
  StridedPlan p{};
  p.base = base;
  int64_t total = 1;
  for (int d = 0; d < fullRank; ++d) {
    if (fullShape[d] == 0)
      return;
    total *= fullShape[d];
    if (fullShape[d] == 1)
      continue;
    if (p.rank > 0 && p.strides[p.rank - 1] == fullStrides[d] * fullShape[d]) {
      p.shape[p.rank - 1] *= fullShape[d];
      p.strides[p.rank - 1] = fullStrides[d];
      continue;
    }
    p.shape[p.rank] = fullShape[d];
    p.strides[p.rank] = fullStrides[d];
    ++p.rank;
  }
  int last = p.rank - 1;

  // A transpose that moves the source's contiguous dim: tiles.
  int a = -1;
  for (int d = 0; d < last; ++d)
    if (p.strides[d] == 1)
      a = d;
  if (!scatter && a >= 0 && p.strides[last] != 0 && p.strides[last] != 1) {
    StridedPlan dstStrides{};
    dstStrides.rank = p.rank;
    int64_t s = 1;
    for (int d = last; d >= 0; --d) {
      dstStrides.strides[d] = s;
      s *= p.shape[d];
    }
    int64_t tilesA = (p.shape[a] + kTile - 1) / kTile;
    int64_t tilesB = (p.shape[last] + kTile - 1) / kTile;
    int64_t tiles = total / (p.shape[a] * p.shape[last]) * tilesA * tilesB;
    unsigned blocks = unsigned(tiles < 65535 * 8 ? tiles : 65535 * 8);
    withUnit(elemSize, [&](auto unit) {
      using E = typename decltype(unit)::type;
      if constexpr (sizeof(E) <= 8)
        transposeTilesKernel<E>
            <<<blocks, dim3(kTile, kTileRows), 0, stream()>>>(
                reinterpret_cast<const E *>(src), reinterpret_cast<E *>(dst), p,
                dstStrides, a, tilesA, tilesB, tiles);
    });
    checkLaunchOf(kernel);
    return;
  }

  // A contiguous innermost run moves in wider units when its length, the
  // base and the other strides allow.
  if (p.rank > 0 && p.strides[last] == 1) {
    size_t maxFactor = 16 / elemSize;
    size_t factor = 1;
    while (factor < maxFactor) {
      int64_t f = int64_t(factor * 2);
      bool ok = p.shape[last] % f == 0 && p.base % f == 0;
      for (int d = 0; ok && d < last; ++d)
        ok = p.strides[d] % f == 0;
      if (!ok)
        break;
      factor *= 2;
    }
    if (factor > 1) {
      p.shape[last] /= int64_t(factor);
      for (int d = 0; d < last; ++d)
        p.strides[d] /= int64_t(factor);
      p.base /= int64_t(factor);
      total /= int64_t(factor);
      elemSize *= factor;
    }
  }
  unsigned blocks = blocksFor(total);
  withUnit(elemSize, [&](auto unit) {
    using E = typename decltype(unit)::type;
    const E *s = reinterpret_cast<const E *>(src);
    E *d = reinterpret_cast<E *>(dst);
    if (scatter) {
      if (total <= INT32_MAX)
        stridedMoveKernel<true, E, uint32_t>
            <<<blocks, kThreads, 0, stream()>>>(s, d, p, uint32_t(total));
      else
        stridedMoveKernel<true, E, int64_t>
            <<<blocks, kThreads, 0, stream()>>>(s, d, p, total);
    } else {
      if (total <= INT32_MAX)
        stridedMoveKernel<false, E, uint32_t>
            <<<blocks, kThreads, 0, stream()>>>(s, d, p, uint32_t(total));
      else
        stridedMoveKernel<false, E, int64_t>
            <<<blocks, kThreads, 0, stream()>>>(s, d, p, total);
    }
  });
  checkLaunchOf(kernel);
}

/// Writes `out` from `x` read with `srcStrides` from element `base`, through
/// a copy when the two overlap.
void copyStrided(const char *kernel, char *arena, const cleave_tensor &x,
                 const cleave_tensor &out, const int64_t *srcStrides,
                 int64_t base) {
  ScratchBuffer copy;
  const char *src = sourceBytes(arena, x, out, copy, kernel);
  stridedMove(kernel, false, src, dataOf(arena, out), elementSize(x.dtype),
              out.rank, out.shape, srcStrides, base);
}

//===----------------------------------------------------------------------===//
// Concat and gather
//===----------------------------------------------------------------------===//

/// Copies `outer` rows of `row` units from src to dst rows of `outRow`
/// units, at unit `at` of each.
template <typename E, typename Index>
__global__ void __launch_bounds__(kThreads)
    concatKernel(const E *src, E *dst, Index row, Index outRow, Index at,
                 Index total) {
  Index step = Index(gridDim.x) * Index(blockDim.x);
  for (Index i = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x);
       i < total; i += step) {
    Index o = i / row;
    dst[int64_t(o) * outRow + at + (i - o * row)] = src[i];
  }
}

/// Index `i` of an i64 or i32 index tensor.
__device__ inline int64_t indexAt(const char *data, int32_t dtype, int64_t i) {
  if (dtype == CLEAVE_I64)
    return reinterpret_cast<const int64_t *>(data)[i];
  return reinterpret_cast<const int32_t *>(data)[i];
}

/// out[o, c] = x[o * blocks + b, c] over rows of `row` units, b the value
/// of the index scalar; a b outside [0, blocks) raises kBlockOutOfRange and
/// moves nothing.
template <typename E>
__global__ void localSliceKernel(const E *src, E *dst, const char *idx,
                                 int32_t idxType, int64_t blocks, int64_t row,
                                 int64_t total, DeviceError *slot) {
  int64_t b = indexAt(idx, idxType, 0);
  if (b < 0 || b >= blocks) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      raiseError(slot, kBlockOutOfRange, kLocalSlice, b, blocks);
    return;
  }
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t o = i / row, c = i - o * row;
    dst[i] = src[(o * blocks + b) * row + c];
  }
}

/// Writes `value` into the integer scalar at `dst` (dist.axis_index).
__global__ void setIndexKernel(char *dst, int32_t dtype, int64_t value) {
  if (dtype == CLEAVE_I64)
    *reinterpret_cast<int64_t *>(dst) = value;
  else
    *reinterpret_cast<int32_t *>(dst) = int32_t(value);
}

/// Stores the low `bytes` bytes of `bits` (little-endian) at dst.
__global__ void setBytesKernel(char *dst, uint64_t bits, int32_t bytes) {
  for (int32_t i = 0; i < bytes; ++i)
    dst[i] = char((bits >> (8 * i)) & 0xff);
}

/// Raises kIndexOutOfRange for every index outside [-size, size) (for the
/// calls with no element to move, which still check their indices).
__global__ void checkIndicesKernel(const char *idx, int32_t dtype, int64_t n,
                                   int64_t size, int32_t kernel,
                                   DeviceError *slot) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t v = indexAt(idx, dtype, i);
    if (v < -size || v >= size)
      raiseError(slot, kIndexOutOfRange, kernel, v, size);
  }
}

/// The offset of a block kernel's table (an integer scalar on the device),
/// or null for the whole table.
struct BlockOffset {
  const char *data;
  int32_t dtype;
};

/// out[o, j, c] = data[o, idx[j], c] over units c of a row of `inner`
/// units; an index outside [-size, size) raises kIndexOutOfRange and moves
/// nothing. With a block offset o, index i takes row i - o, and zeros when
/// that is outside the block.
template <typename E, typename Index>
__global__ void __launch_bounds__(kThreads)
    gatherKernel(const E *src, E *dst, const char *idx, int32_t idxType,
                 BlockOffset offset, Index numIdx, int64_t size, Index inner,
                 Index total, DeviceError *slot) {
  Index step = Index(gridDim.x) * Index(blockDim.x);
  int64_t shift = offset.data ? indexAt(offset.data, offset.dtype, 0) : 0;
  for (Index i = Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x);
       i < total; i += step) {
    Index t = i / inner, c = i - t * inner;
    Index o = t / numIdx, j = t - o * numIdx;
    int64_t v = indexAt(idx, idxType, j);
    if (offset.data) {
      v -= shift;
      dst[i] = v >= 0 && v < size
                   ? src[(int64_t(o) * size + v) * int64_t(inner) + c]
                   : E{};
      continue;
    }
    if (v < -size || v >= size) {
      raiseError(slot, kIndexOutOfRange, kGather, v, size);
      continue;
    }
    if (v < 0) // counted from the end, as ONNX Gather allows
      v += size;
    dst[i] = src[(int64_t(o) * size + v) * int64_t(inner) + c];
  }
}

/// gather_grad's first pass: the target row of each index (counted from
/// the end when negative), with the count of each row (integer atomics:
/// the counts do not depend on the order). A bad index is reported and
/// counted as row 0, so the pass completes. With a block offset, an index
/// outside the block goes to the extra row `size`, which is never summed.
__global__ void __launch_bounds__(kThreads)
    gatherGradRowsKernel(const char *idx, int32_t idxType, BlockOffset offset,
                         int32_t numIdx, int64_t size, int32_t *rows,
                         int32_t *positions, int32_t *counts,
                         DeviceError *slot) {
  int64_t shift = offset.data ? indexAt(offset.data, offset.dtype, 0) : 0;
  for (int32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < numIdx;
       j += gridDim.x * blockDim.x) {
    int64_t v = indexAt(idx, idxType, j);
    if (offset.data) {
      v -= shift;
      if (v < 0 || v >= size)
        v = size;
    } else if (v < -size || v >= size) {
      raiseError(slot, kIndexOutOfRange, kGatherGrad, v, size);
      v = 0;
    } else if (v < 0) {
      v += size;
    }
    rows[j] = int32_t(v);
    positions[j] = j;
    atomicAdd(counts + v, 1);
  }
}

/// out[o, v, c] = the sum of dy[o, j, c] over the positions j of row v in
/// ascending order (`positions` sorted by row, stably; `first` the exclusive
/// prefix sum of the counts), in f32 from 0: the CPU backend's order, so
/// the two agree bit for bit and every run gives the same bytes.
__global__ void __launch_bounds__(kThreads)
    gatherGradSumKernel(const char *dy, int32_t dyType, int64_t numIdx,
                        int64_t size, int64_t inner, int64_t total,
                        const int32_t *positions, const int32_t *first,
                        char *out, int32_t outType) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t c = i % inner, t = i / inner;
    int64_t v = t % size, o = t / size;
    float acc = 0.0f;
    int64_t base = o * numIdx * inner + c;
    for (int32_t p = first[v], end = first[v + 1]; p < end; ++p)
      acc = __fadd_rn(acc, loadF32(dy, dyType, base + positions[p] * inner));
    storeF32(out, outType, i, acc);
  }
}

/// Checks the indices on the device when no element moves (so that an
/// empty gather still reports a bad index, as the CPU kernel does).
void checkIndicesOnly(const char *idx, const cleave_tensor &indices,
                      int64_t size, int32_t kernelId, const char *kernel) {
  int64_t n = numElements(indices);
  if (n == 0)
    return;
  checkIndicesKernel<<<blocksFor(n), kThreads, 0, stream()>>>(
      idx, indices.dtype, n, size, kernelId, errorSlot());
  checkLaunch(kernel);
}

} // namespace
} // namespace cleave::rt::cuda

extern "C" {

void cleave_rt_transpose(char *arena, const cleave_tensor *x,
                         const cleave_tensor *out, const int64_t *perm) {
  const char *k = "cleave_rt_transpose";
  int64_t srcStrides[CLEAVE_RT_MAX_RANK];
  planTranspose(k, x, out, perm, srcStrides);
  copyStrided(k, arena, *x, *out, srcStrides, 0);
}

void cleave_rt_broadcast_in_dim(char *arena, const cleave_tensor *x,
                                const cleave_tensor *out, const int64_t *dims) {
  const char *k = "cleave_rt_broadcast_in_dim";
  int64_t srcStrides[CLEAVE_RT_MAX_RANK];
  planBroadcastInDim(k, x, out, dims, srcStrides);
  copyStrided(k, arena, *x, *out, srcStrides, 0);
}

void cleave_rt_slice(char *arena, const cleave_tensor *x,
                     const cleave_tensor *out, const int64_t *start,
                     const int64_t *strides) {
  const char *k = "cleave_rt_slice";
  int64_t srcStrides[CLEAVE_RT_MAX_RANK], base;
  if (!planSlice(k, x, out, start, strides, srcStrides, base))
    return;
  copyStrided(k, arena, *x, *out, srcStrides, base);
}

void cleave_rt_local_slice(char *arena, const cleave_tensor *x,
                           const cleave_tensor *index,
                           const cleave_tensor *out, int64_t dim) {
  const char *k = "cleave_rt_local_slice";
  int64_t blocks = checkLocalSlice(k, x, index, out, dim);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d)
    outer *= out->shape[d];
  for (int d = int(dim) + 1; d < out->rank; ++d)
    inner *= out->shape[d];
  int64_t rowBytes = out->shape[dim] * inner * int64_t(elementSize(x->dtype));
  // The index lives on the device: the kernel reads it (and reports one out
  // of range) there, so that the host never waits for it.
  size_t unit = widestUnit({rowBytes});
  withUnit(unit, [&](auto u) {
    using E = typename decltype(u)::type;
    int64_t row = rowBytes / int64_t(unit);
    localSliceKernel<E><<<blocksFor(outer * row), kThreads, 0, stream()>>>(
        reinterpret_cast<const E *>(dataOf(arena, *x)),
        reinterpret_cast<E *>(dataOf(arena, *out)), dataOf(arena, *index),
        index->dtype, blocks, row, outer * row, errorSlot());
  });
  checkLaunch("local_slice");
}

void cleave_rt_set_index(char *arena, const cleave_tensor *out,
                         int64_t value) {
  checkSetIndex("cleave_rt_set_index", out);
  setIndexKernel<<<1, 1, 0, stream()>>>(dataOf(arena, *out), out->dtype,
                                        value);
  checkLaunch("set_index");
}

void cleave_rt_set_scalar(char *arena, const cleave_tensor *out,
                          double value) {
  // The value is the host's (the program context's): encoded here, stored
  // by the device in stream order.
  uint64_t bits = encodeScalar("cleave_rt_set_scalar", out, value);
  setBytesKernel<<<1, 1, 0, stream()>>>(dataOf(arena, *out), bits,
                                        int32_t(elementSize(out->dtype)));
  checkLaunch("set_scalar");
}

void cleave_rt_concat(char *arena, const cleave_tensor *const *inputs,
                      int64_t num_inputs, const cleave_tensor *out,
                      int64_t dim) {
  const char *k = "cleave_rt_concat";
  int64_t outer, inner;
  checkConcat(k, inputs, num_inputs, out, dim, outer, inner);
  int64_t es = int64_t(elementSize(out->dtype));
  int64_t outRow = out->shape[dim] * inner * es;
  char *dst = dataOf(arena, *out);
  int64_t at = 0;
  for (int64_t i = 0; i < num_inputs; ++i) {
    int64_t row = inputs[i]->shape[dim] * inner * es;
    const char *src = dataOf(arena, *inputs[i]);
    if (row == 0 || outer == 0) {
      at += row;
      continue;
    }
    // Rows, out rows and the offset in bytes, moved in the widest unit
    // that divides all three (the tensors are 64-byte aligned).
    int64_t unit = int64_t(widestUnit({row, outRow, at}));
    int64_t n = outer * (row / unit);
    withUnit(size_t(unit), [&](auto u) {
      using E = typename decltype(u)::type;
      const E *s = reinterpret_cast<const E *>(src);
      E *d = reinterpret_cast<E *>(dst);
      if (n <= INT32_MAX && outer * (outRow / unit) <= INT32_MAX)
        concatKernel<E, uint32_t><<<blocksFor(n), kThreads, 0, stream()>>>(
            s, d, uint32_t(row / unit), uint32_t(outRow / unit),
            uint32_t(at / unit), uint32_t(n));
      else
        concatKernel<E, int64_t><<<blocksFor(n), kThreads, 0, stream()>>>(
            s, d, row / unit, outRow / unit, at / unit, n);
    });
    checkLaunch("concat");
    at += row;
  }
}

} // extern "C"

namespace {

/// The block offset of a block kernel, checked (null for the others).
BlockOffset blockOffset(const char *k, char *arena,
                        const cleave_tensor *offset) {
  if (!offset)
    return {nullptr, 0};
  checkIndexScalar(k, "offset", offset);
  return {dataOf(arena, *offset), offset->dtype};
}

void gather(const char *k, char *arena, const cleave_tensor *data,
            const cleave_tensor *indices, const cleave_tensor *offsetTensor,
            const cleave_tensor *out, int64_t dim) {
  BlockOffset offset = blockOffset(k, arena, offsetTensor);
  GatherPlan g = checkGather(k, data, indices, out, dim);
  int64_t outer = g.outer, inner = g.inner, size = g.size;
  int64_t numIdx = numElements(*indices);
  const char *idx = dataOf(arena, *indices);
  int64_t total = outer * numIdx * inner;
  if (total == 0) {
    if (!offset.data) // a block's indices need no check
      checkIndicesOnly(idx, *indices, size, kGather, "gather");
    return;
  }
  ScratchBuffer copy;
  const char *src = sourceBytes(arena, *data, *out, copy, k);
  // Rows of `inner` elements move in the widest unit that divides them.
  int64_t es = int64_t(elementSize(data->dtype));
  int64_t unit = int64_t(widestUnit({inner * es}));
  int64_t innerUnits = inner * es / unit, n = total * es / unit;
  withUnit(size_t(unit), [&](auto u) {
    using E = typename decltype(u)::type;
    const E *s = reinterpret_cast<const E *>(src);
    E *d = reinterpret_cast<E *>(dataOf(arena, *out));
    if (n <= INT32_MAX)
      gatherKernel<E, uint32_t><<<blocksFor(n), kThreads, 0, stream()>>>(
          s, d, idx, indices->dtype, offset, uint32_t(numIdx), size,
          uint32_t(innerUnits), uint32_t(n), errorSlot());
    else
      gatherKernel<E, int64_t><<<blocksFor(n), kThreads, 0, stream()>>>(
          s, d, idx, indices->dtype, offset, numIdx, size, innerUnits, n,
          errorSlot());
  });
  checkLaunch("gather");
}

void gatherGrad(const char *k, char *arena, const cleave_tensor *dy,
                const cleave_tensor *indices,
                const cleave_tensor *offsetTensor, const cleave_tensor *out,
                int64_t dim) {
  BlockOffset offset = blockOffset(k, arena, offsetTensor);
  GatherPlan g = checkGatherGrad(k, dy, indices, out, dim);
  int64_t inner = g.inner, size = g.size;
  int64_t numIdx = numElements(*indices), count = numElements(*out);
  const char *idx = dataOf(arena, *indices);
  if (numIdx > INT32_MAX || size >= INT32_MAX)
    cleave_rt_fail("%s: %lld indices into %lld rows: the CUDA backend sorts "
                   "at most 2^31 - 1 of either",
                   k, (long long)numIdx, (long long)size);
  // A deterministic scatter-add (DataMovement's header): the positions of
  // each row in ascending order, by a stable radix sort on the row, then
  // one thread per output element sums its row's positions in that order.
  ScratchBuffer rowsBuffer, positionsBuffer, countsBuffer, sortedBuffer;
  int32_t *rows = nullptr, *positions = nullptr, *first = nullptr,
          *sorted = nullptr;
  int32_t n = int32_t(numIdx);
  if (n > 0) {
    rowsBuffer.allocate(2 * size_t(n) * sizeof(int32_t), k);
    positionsBuffer.allocate(2 * size_t(n) * sizeof(int32_t), k);
    rows = rowsBuffer.as<int32_t>();
    positions = positionsBuffer.as<int32_t>();
    sorted = positions + n;
  }
  countsBuffer.allocate(2 * (size_t(size) + 1) * sizeof(int32_t), k);
  int32_t *counts = countsBuffer.as<int32_t>();
  first = counts + size + 1;
  check(cudaMemsetAsync(counts, 0, (size_t(size) + 1) * sizeof(int32_t),
                        stream()),
        k);
  if (n > 0) {
    gatherGradRowsKernel<<<blocksFor(n), kThreads, 0, stream()>>>(
        idx, indices->dtype, offset, n, size, rows, positions, counts,
        errorSlot());
    checkLaunch("gather_grad");
    // A block's dropped positions sort last, into the extra row `size`.
    sortPositionsByRow(rows, rows + n, positions, sorted, n,
                       offset.data ? size + 1 : size, k);
  } else if (!offset.data) {
    checkIndicesOnly(idx, *indices, size, kGatherGrad, "gather_grad");
  }
  exclusivePrefixSum(counts, first, int32_t(size + 1), k);
  if (count == 0)
    return;
  // dy is read while out is written: a copy when they share bytes.
  ScratchBuffer dyCopy;
  const char *dyBytes =
      bytesInput(arena, *dy, overlaps(*dy, *out), dyCopy, k);
  gatherGradSumKernel<<<blocksFor(count), kThreads, 0, stream()>>>(
      dyBytes, dy->dtype, numIdx, size, inner, count, sorted, first,
      dataOf(arena, *out), out->dtype);
  checkLaunch("gather_grad");
}

} // namespace

extern "C" {

void cleave_rt_gather(char *arena, const cleave_tensor *data,
                      const cleave_tensor *indices, const cleave_tensor *out,
                      int64_t dim) {
  gather("cleave_rt_gather", arena, data, indices, nullptr, out, dim);
}

void cleave_rt_gather_block(char *arena, const cleave_tensor *data,
                            const cleave_tensor *indices,
                            const cleave_tensor *offset,
                            const cleave_tensor *out, int64_t dim) {
  gather("cleave_rt_gather_block", arena, data, indices, offset, out, dim);
}

void cleave_rt_gather_grad(char *arena, const cleave_tensor *dy,
                           const cleave_tensor *indices,
                           const cleave_tensor *out, int64_t dim) {
  gatherGrad("cleave_rt_gather_grad", arena, dy, indices, nullptr, out, dim);
}

void cleave_rt_gather_grad_block(char *arena, const cleave_tensor *dy,
                                 const cleave_tensor *indices,
                                 const cleave_tensor *offset,
                                 const cleave_tensor *out, int64_t dim) {
  gatherGrad("cleave_rt_gather_grad_block", arena, dy, indices, offset, out,
             dim);
}

void cleave_rt_slice_grad(char *arena, const cleave_tensor *dy,
                          const cleave_tensor *out, const int64_t *start,
                          const int64_t *strides) {
  const char *k = "cleave_rt_slice_grad";
  int64_t dstStrides[CLEAVE_RT_MAX_RANK], base;
  bool empty = !planSliceGrad(k, dy, out, start, strides, dstStrides, base);
  // dy is read after out is zeroed: copy it aside first if they overlap.
  ScratchBuffer copy;
  const char *src = sourceBytes(arena, *dy, *out, copy, k);
  char *dst = dataOf(arena, *out);
  size_t es = elementSize(out->dtype);
  size_t bytes = size_t(numElements(*out)) * es;
  if (bytes)
    check(cudaMemsetAsync(dst, 0, bytes, stream()), "cleave_rt_slice_grad");
  if (empty)
    return;
  stridedMove(k, true, src, dst, es, dy->rank, dy->shape, dstStrides, base);
}

} // extern "C"
