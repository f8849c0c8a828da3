//===- DataMovement.cpp - shape and data movement CPU kernels -------------===//
//
// copy, constant, iota, transpose, broadcast_in_dim, slice, concat and
// gather. These move elements without arithmetic, so they work on bytes of
// any dtype (input and output dtypes must match) and never convert. Their
// transposes for autodiff are here too: slice_grad (a strided scatter into
// zeros, still on bytes) and gather_grad (a scatter-add, in f32). The
// strided copy behind transpose, broadcast_in_dim and slice (stridedCopy,
// declared in Tensor.h) and the scatter are one routine, in two directions.
//
//===----------------------------------------------------------------------===//

#include "KernelChecks.h"
#include "Tensor.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace cleave::rt;

namespace {

/// The source bytes, copied aside when they overlap the output (these
/// kernels read elements in a different order than they write them).
const char *sourceBytes(char *arena, const cleave_tensor &x,
                        const cleave_tensor &out, std::vector<char> &copy) {
  const char *src = dataOf(arena, x);
  if (!overlaps(x, out))
    return src;
  size_t bytes = size_t(numElements(x)) * elementSize(x.dtype);
  copy.assign(src, src + bytes);
  return copy.data();
}

/// Writes `out` from `x` read with `srcStrides` from element `base`, through
/// a copy when the two overlap.
void copyStrided(char *arena, const cleave_tensor &x, const cleave_tensor &out,
                 const int64_t *srcStrides, int64_t base) {
  std::vector<char> copy;
  const char *src = sourceBytes(arena, x, out, copy);
  stridedCopy(src, dataOf(arena, out), elementSize(x.dtype), out.rank,
              out.shape, srcStrides, base);
}

/// Reads index `i` of an integer index tensor as i64.
int64_t indexAt(const char *data, int32_t dtype, int64_t i) {
  if (dtype == CLEAVE_I64)
    return reinterpret_cast<const int64_t *>(data)[i];
  return reinterpret_cast<const int32_t *>(data)[i];
}

/// Moves the elements of a contiguous `shape` to or from the strided side,
/// element (i0, i1, ...) of which is `base + sum(ik * strides[k])`: from it
/// into contiguous dst (stridedCopy) or, with `Scatter`, into it from
/// contiguous src (stridedScatter). Rows of the last dim run in parallel.
template <bool Scatter, typename E>
void stridedMoveTyped(const E *src, E *dst, int rank, const int64_t *shape,
                      const int64_t *strides, int64_t base) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d)
    total *= shape[d];
  int64_t inner = rank == 0 ? 1 : shape[rank - 1];
  int64_t innerStride = rank == 0 ? 0 : strides[rank - 1];
  if (!Scatter && rank >= 2 && innerStride != 1 && innerStride != 0) {
    // A transpose of the last two dims: copy square tiles so that both the
    // reads and the writes stay within a few cache lines.
    constexpr int64_t kTile = 32;
    int64_t rows = shape[rank - 2], rowStride = strides[rank - 2];
    int64_t outer = total / (rows * inner);
    int64_t tileRows = (rows + kTile - 1) / kTile;
    int64_t tileCols = (inner + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (total >= kParallelElements)
    for (int64_t t = 0; t < outer * tileRows * tileCols; ++t) {
      int64_t o = t / (tileRows * tileCols), rest = o;
      int64_t i0 = (t / tileCols) % tileRows * kTile, j0 = t % tileCols * kTile;
      int64_t off = base;
      for (int d = rank - 3; d >= 0; --d) {
        off += (rest % shape[d]) * strides[d];
        rest /= shape[d];
      }
      int64_t iEnd = std::min(rows, i0 + kTile);
      int64_t jEnd = std::min(inner, j0 + kTile);
      for (int64_t i = i0; i < iEnd; ++i) {
        E *out = dst + (o * rows + i) * inner;
        const E *in = src + off + i * rowStride;
        for (int64_t j = j0; j < jEnd; ++j)
          out[j] = in[j * innerStride];
      }
    }
    return;
  }
  int64_t rows = total / inner;
#pragma omp parallel for schedule(static) if (total >= kParallelElements)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t off = base, rest = row;
    for (int d = rank - 2; d >= 0; --d) {
      off += (rest % shape[d]) * strides[d];
      rest /= shape[d];
    }
    const E *in = src + (Scatter ? row * inner : off);
    E *out = dst + (Scatter ? off : row * inner);
    if (innerStride == 1) {
      std::memcpy(out, in, size_t(inner) * sizeof(E));
    } else if constexpr (Scatter) {
      for (int64_t i = 0; i < inner; ++i)
        out[i * innerStride] = in[i];
    } else {
      for (int64_t i = 0; i < inner; ++i)
        out[i] = in[i * innerStride];
    }
  }
}

/// stridedCopy and, with `Scatter`, stridedScatter: drops dims of size 1,
/// merges adjacent dims that the strided side walks contiguously, and moves
/// the elements as unsigned integers of `elemSize` bytes.
template <bool Scatter>
void stridedMove(const char *src, char *dst, size_t elemSize, int fullRank,
                 const int64_t *fullShape, const int64_t *fullStrides,
                 int64_t base) {
  int64_t shape[CLEAVE_RT_MAX_RANK], strides[CLEAVE_RT_MAX_RANK];
  int rank = 0;
  for (int d = 0; d < fullRank; ++d) {
    if (fullShape[d] == 0)
      return;
    if (fullShape[d] == 1)
      continue;
    if (rank > 0 && strides[rank - 1] == fullStrides[d] * fullShape[d]) {
      shape[rank - 1] *= fullShape[d];
      strides[rank - 1] = fullStrides[d];
      continue;
    }
    shape[rank] = fullShape[d];
    strides[rank] = fullStrides[d];
    ++rank;
  }
  switch (elemSize) {
  case 1:
    return stridedMoveTyped<Scatter>(reinterpret_cast<const uint8_t *>(src),
                                     reinterpret_cast<uint8_t *>(dst), rank,
                                     shape, strides, base);
  case 2:
    return stridedMoveTyped<Scatter>(reinterpret_cast<const uint16_t *>(src),
                                     reinterpret_cast<uint16_t *>(dst), rank,
                                     shape, strides, base);
  case 4:
    return stridedMoveTyped<Scatter>(reinterpret_cast<const uint32_t *>(src),
                                     reinterpret_cast<uint32_t *>(dst), rank,
                                     shape, strides, base);
  case 8:
    return stridedMoveTyped<Scatter>(reinterpret_cast<const uint64_t *>(src),
                                     reinterpret_cast<uint64_t *>(dst), rank,
                                     shape, strides, base);
  }
  cleave_rt_fail("strided %s: unsupported element size %zu",
                 Scatter ? "scatter" : "copy", elemSize);
}

/// The inverse of stridedCopy: src element (i0, i1, ...) of the contiguous
/// `shape` goes to dst element `base + sum(ik * dstStrides[k])`. The
/// destinations must be distinct (no zero stride along a dim of size > 1).
void stridedScatter(const char *src, char *dst, size_t elemSize, int srcRank,
                    const int64_t *srcShape, const int64_t *dstStrides,
                    int64_t base) {
  stridedMove<true>(src, dst, elemSize, srcRank, srcShape, dstStrides, base);
}

/// Fails naming the first index outside [-size, size).
void checkGatherIndices(const char *kernel, const char *idx, int32_t dtype,
                        int64_t numIdx, int64_t size, int64_t dim) {
  for (int64_t i = 0; i < numIdx; ++i) {
    int64_t v = indexAt(idx, dtype, i);
    if (v < -size || v >= size)
      cleave_rt_fail("%s: index %lld at position %lld is out of range [-%lld, "
                     "%lld) of dim %lld",
                     kernel, (long long)v, (long long)i, (long long)size,
                     (long long)size, (long long)dim);
  }
}

/// The row of table index `v`: counted from the end when negative (ONNX
/// Gather), or, in a block at `offset` (the block kernels), shifted by it
/// and -1 when outside.
struct RowOf {
  int64_t size;
  const int64_t *offset; // null: the whole table

  int64_t operator()(int64_t v) const {
    if (offset) {
      v -= *offset;
      return v >= 0 && v < size ? v : -1;
    }
    return v < 0 ? v + size : v;
  }
};

/// The block kernels' offset, checked and read.
int64_t readOffset(const char *k, char *arena, const cleave_tensor *offset) {
  checkIndexScalar(k, "offset", offset);
  return indexAt(dataOf(arena, *offset), offset->dtype, 0);
}

/// The indices of a gather or its gradient into `size` rows, checked
/// (without an offset: a block's ids need no check), and the row of each.
struct IndexedRows {
  const char *idx;
  int32_t dtype;
  int64_t count;
  RowOf rowOf;

  IndexedRows(const char *k, char *arena, const cleave_tensor *indices,
              int64_t size, const int64_t *offset, int64_t dim)
      : idx(dataOf(arena, *indices)), dtype(indices->dtype),
        count(numElements(*indices)), rowOf{size, offset} {
    if (!offset)
      checkGatherIndices(k, idx, dtype, count, size, dim);
  }
  /// The row of index position i: -1 outside a block.
  int64_t row(int64_t i) const { return rowOf(indexAt(idx, dtype, i)); }
};

void gather(const char *k, char *arena, const cleave_tensor *data,
            const cleave_tensor *indices, const int64_t *offset,
            const cleave_tensor *out, int64_t dim) {
  GatherPlan g = checkGather(k, data, indices, out, dim);
  int64_t outer = g.outer, inner = g.inner, size = g.size;
  IndexedRows rows(k, arena, indices, size, offset, dim);
  int64_t numIdx = rows.count;
  std::vector<char> copy;
  const char *src = sourceBytes(arena, *data, *out, copy);
  char *dst = dataOf(arena, *out);
  size_t block = size_t(inner) * elementSize(data->dtype);
  bool parallel = outer * numIdx * inner >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < outer * numIdx; ++t) {
    int64_t o = t / numIdx, i = t % numIdx;
    int64_t v = rows.row(i);
    if (v < 0)
      std::memset(dst + size_t(t) * block, 0, block);
    else
      std::memcpy(dst + size_t(t) * block, src + size_t(o * size + v) * block,
                  block);
  }
}

void gatherGrad(const char *k, char *arena, const cleave_tensor *dy,
                const cleave_tensor *indices, const int64_t *offset,
                const cleave_tensor *out, int64_t dim) {
  GatherPlan g = checkGatherGrad(k, dy, indices, out, dim);
  int64_t outer = g.outer, inner = g.inner, size = g.size;
  IndexedRows rows(k, arena, indices, size, offset, dim);
  int64_t numIdx = rows.count;
  // Positions grouped by target row (counting sort, ascending within a
  // row), so that each out row is owned by one thread and sums its
  // contributions in index order: parallel without atomics, deterministic.
  // A position outside a block goes to the extra row `size`, never summed.
  auto target = [&](int64_t i) {
    int64_t v = rows.row(i);
    return v < 0 ? size : v;
  };
  std::vector<int64_t> first(static_cast<size_t>(size + 2), 0);
  std::vector<int64_t> positions(static_cast<size_t>(numIdx));
  for (int64_t i = 0; i < numIdx; ++i)
    ++first[size_t(target(i) + 1)];
  for (int64_t v = 0; v <= size; ++v)
    first[size_t(v + 1)] += first[size_t(v)];
  {
    std::vector<int64_t> next(first.begin(), first.end() - 1);
    for (int64_t i = 0; i < numIdx; ++i)
      positions[size_t(next[size_t(target(i))]++)] = i;
  }
  Input<float> dyv(arena, *dy, overlaps(*dy, *out));
  Output<float> ov(arena, *out);
  const float *dyp = dyv.data();
  float *op = ov.data();
  bool parallel = outer * (size + numIdx) * inner >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < outer * size; ++t) {
    int64_t o = t / size, v = t % size;
    float *row = op + t * inner;
    std::fill(row, row + inner, 0.0f);
    for (int64_t p = first[size_t(v)]; p < first[size_t(v + 1)]; ++p) {
      const float *src = dyp + (o * numIdx + positions[size_t(p)]) * inner;
#pragma omp simd
      for (int64_t c = 0; c < inner; ++c)
        row[c] += src[c];
    }
  }
  ov.commit();
}

} // namespace

void cleave::rt::stridedCopy(const char *src, char *dst, size_t elemSize,
                             int outRank, const int64_t *outShape,
                             const int64_t *srcStrides, int64_t base) {
  stridedMove<false>(src, dst, elemSize, outRank, outShape, srcStrides, base);
}

extern "C" {

void cleave_rt_copy(char *arena, const cleave_tensor *src,
                    const cleave_tensor *dst) {
  checkTensor("cleave_rt_copy", "src", src);
  checkTensor("cleave_rt_copy", "dst", dst);
  if (numElements(*src) != numElements(*dst))
    cleave_rt_fail("cleave_rt_copy: src %s and dst %s differ in element count",
                   shapeString(*src).c_str(), shapeString(*dst).c_str());
  // A copy between dtypes is a cast; shapes may differ (a reshape).
  if (src->dtype != dst->dtype)
    return cleave_rt_cast(arena, src, dst);
  size_t bytes = size_t(numElements(*src)) * elementSize(src->dtype);
  if (src->offset != dst->offset)
    std::memmove(dataOf(arena, *dst), dataOf(arena, *src), bytes);
}

void cleave_rt_constant(char *arena, const cleave_tensor *out,
                        const void *data) {
  checkTensor("cleave_rt_constant", "out", out);
  size_t bytes = size_t(numElements(*out)) * elementSize(out->dtype);
  if (bytes && !data)
    cleave_rt_fail("cleave_rt_constant: data is NULL for out %s",
                   shapeString(*out).c_str());
  if (bytes)
    std::memcpy(dataOf(arena, *out), data, bytes);
}

void cleave_rt_iota(char *arena, const cleave_tensor *out, int64_t dim) {
  checkTensor("cleave_rt_iota", "out", out);
  if (dim < 0 || dim >= out->rank)
    cleave_rt_fail("cleave_rt_iota: dim %lld is out of range for rank %d",
                   (long long)dim, out->rank);
  int64_t outer = 1, inner = 1, size = out->shape[dim];
  for (int d = 0; d < dim; ++d)
    outer *= out->shape[d];
  for (int d = int(dim) + 1; d < out->rank; ++d)
    inner *= out->shape[d];
  // One row of the pattern [0, 0, .., 1, 1, .., size-1] in the out dtype,
  // then repeated `outer` times.
  std::vector<int64_t> row(static_cast<size_t>(size * inner));
  for (int64_t i = 0; i < size; ++i)
    for (int64_t j = 0; j < inner; ++j)
      row[size_t(i * inner + j)] = i;
  size_t rowBytes = row.size() * elementSize(out->dtype);
  char *dst = dataOf(arena, *out);
  if (rowBytes == 0)
    return;
  convertFromI64(row.data(), dst, out->dtype, int64_t(row.size()));
  for (int64_t o = 1; o < outer; ++o)
    std::memcpy(dst + o * int64_t(rowBytes), dst, rowBytes);
}

void cleave_rt_transpose(char *arena, const cleave_tensor *x,
                         const cleave_tensor *out, const int64_t *perm) {
  const char *k = "cleave_rt_transpose";
  int64_t srcStrides[CLEAVE_RT_MAX_RANK];
  planTranspose(k, x, out, perm, srcStrides);
  copyStrided(arena, *x, *out, srcStrides, 0);
}

void cleave_rt_broadcast_in_dim(char *arena, const cleave_tensor *x,
                                const cleave_tensor *out, const int64_t *dims) {
  const char *k = "cleave_rt_broadcast_in_dim";
  int64_t srcStrides[CLEAVE_RT_MAX_RANK];
  planBroadcastInDim(k, x, out, dims, srcStrides);
  copyStrided(arena, *x, *out, srcStrides, 0);
}

void cleave_rt_slice(char *arena, const cleave_tensor *x,
                     const cleave_tensor *out, const int64_t *start,
                     const int64_t *strides) {
  const char *k = "cleave_rt_slice";
  int64_t srcStrides[CLEAVE_RT_MAX_RANK], base;
  if (!planSlice(k, x, out, start, strides, srcStrides, base))
    return;
  copyStrided(arena, *x, *out, srcStrides, base);
}

void cleave_rt_local_slice(char *arena, const cleave_tensor *x,
                           const cleave_tensor *index,
                           const cleave_tensor *out, int64_t dim) {
  const char *k = "cleave_rt_local_slice";
  int64_t blocks = checkLocalSlice(k, x, index, out, dim);
  int64_t i = indexAt(dataOf(arena, *index), index->dtype, 0);
  if (i < 0 || i >= blocks)
    cleave_rt_fail("%s: block index %lld is out of range [0, %lld)", k,
                   (long long)i, (long long)blocks);
  int64_t start[CLEAVE_RT_MAX_RANK] = {}, ones[CLEAVE_RT_MAX_RANK];
  for (int d = 0; d < CLEAVE_RT_MAX_RANK; ++d)
    ones[d] = 1;
  start[dim] = i * out->shape[dim];
  cleave_rt_slice(arena, x, out, start, ones);
}

void cleave_rt_set_index(char *arena, const cleave_tensor *out,
                         int64_t value) {
  checkSetIndex("cleave_rt_set_index", out);
  char *dst = dataOf(arena, *out);
  if (out->dtype == CLEAVE_I64) {
    std::memcpy(dst, &value, sizeof(value));
    return;
  }
  int32_t narrow = int32_t(value);
  std::memcpy(dst, &narrow, sizeof(narrow));
}

void cleave_rt_set_scalar(char *arena, const cleave_tensor *out, double value) {
  uint64_t bits = encodeScalar("cleave_rt_set_scalar", out, value);
  std::memcpy(dataOf(arena, *out), &bits, elementSize(out->dtype));
}

void cleave_rt_concat(char *arena, const cleave_tensor *const *inputs,
                      int64_t num_inputs, const cleave_tensor *out,
                      int64_t dim) {
  const char *k = "cleave_rt_concat";
  int64_t outer, inner;
  checkConcat(k, inputs, num_inputs, out, dim, outer, inner);
  size_t es = elementSize(out->dtype);
  size_t outRow = size_t(out->shape[dim] * inner) * es;
  char *dst = dataOf(arena, *out);
  size_t at = 0;
  for (int64_t i = 0; i < num_inputs; ++i) {
    size_t row = size_t(inputs[i]->shape[dim] * inner) * es;
    const char *src = dataOf(arena, *inputs[i]);
    if (row == 0)
      continue;
    bool parallel = outer * int64_t(row) >= kParallelElements * 4;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + size_t(o) * outRow + at, src + size_t(o) * row, row);
    at += row;
  }
}

void cleave_rt_gather(char *arena, const cleave_tensor *data,
                      const cleave_tensor *indices, const cleave_tensor *out,
                      int64_t dim) {
  gather("cleave_rt_gather", arena, data, indices, nullptr, out, dim);
}

void cleave_rt_gather_block(char *arena, const cleave_tensor *data,
                            const cleave_tensor *indices,
                            const cleave_tensor *offset,
                            const cleave_tensor *out, int64_t dim) {
  const char *k = "cleave_rt_gather_block";
  int64_t o = readOffset(k, arena, offset);
  gather(k, arena, data, indices, &o, out, dim);
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
  const char *k = "cleave_rt_gather_grad_block";
  int64_t o = readOffset(k, arena, offset);
  gatherGrad(k, arena, dy, indices, &o, out, dim);
}

void cleave_rt_slice_grad(char *arena, const cleave_tensor *dy,
                          const cleave_tensor *out, const int64_t *start,
                          const int64_t *strides) {
  const char *k = "cleave_rt_slice_grad";
  int64_t dstStrides[CLEAVE_RT_MAX_RANK], base;
  bool empty = !planSliceGrad(k, dy, out, start, strides, dstStrides, base);
  std::vector<char> copy;
  const char *src = sourceBytes(arena, *dy, *out, copy);
  char *dst = dataOf(arena, *out);
  size_t es = elementSize(out->dtype);
  std::memset(dst, 0, size_t(numElements(*out)) * es);
  if (empty)
    return;
  stridedScatter(src, dst, es, dy->rank, dy->shape, dstStrides, base);
}

} // extern "C"
