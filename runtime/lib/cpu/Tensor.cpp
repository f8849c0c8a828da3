//===- Tensor.cpp - shared helpers of the CPU kernels ---------------------===//
//
// Descriptor checks, broadcasting plans, the strided copy behind the data
// movement kernels, and cleave_rt_fail. (Conversions are in Convert.cpp.)
//
//===----------------------------------------------------------------------===//

#include "Tensor.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace cleave::rt;

extern "C" void cleave_rt_fail(const char *format, ...) {
  std::fflush(stdout);
  std::fputs("error: ", stderr);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  std::exit(1);
}

void cleave::rt::checkTensor(const char *kernel, const char *what,
                             const cleave_tensor *t) {
  if (!t)
    cleave_rt_fail("%s: %s is NULL", kernel, what);
  if (elementSize(t->dtype) == 0)
    cleave_rt_fail("%s: %s has unknown dtype %d", kernel, what, t->dtype);
  if (t->rank < 0 || t->rank > CLEAVE_RT_MAX_RANK)
    cleave_rt_fail("%s: %s has rank %d, expected 0 to %d", kernel, what,
                   t->rank, CLEAVE_RT_MAX_RANK);
  for (int d = 0; d < t->rank; ++d)
    if (t->shape[d] < 0)
      cleave_rt_fail("%s: %s has negative size %lld in dim %d", kernel, what,
                     (long long)t->shape[d], d);
  if (t->offset < 0)
    cleave_rt_fail("%s: %s has negative offset %lld", kernel, what,
                   (long long)t->offset);
}

int64_t cleave::rt::numElements(const cleave_tensor &t) {
  int64_t n = 1;
  for (int d = 0; d < t.rank; ++d)
    n *= t.shape[d];
  return n;
}

void cleave::rt::checkIndexTensor(const char *kernel, const char *what,
                                  const cleave_tensor &t) {
  if (t.dtype != CLEAVE_I64 && t.dtype != CLEAVE_I32)
    cleave_rt_fail("%s: %s must be i64 or i32, got %s", kernel, what,
                   dtypeName(t.dtype));
}

size_t cleave::rt::elementSize(int32_t dtype) {
  switch (dtype) {
  case CLEAVE_F32:
  case CLEAVE_I32:
    return 4;
  case CLEAVE_F16:
  case CLEAVE_BF16:
    return 2;
  case CLEAVE_I64:
    return 8;
  case CLEAVE_I1:
    return 1;
  default:
    return 0;
  }
}

bool cleave::rt::isFloatType(int32_t dtype) {
  return dtype == CLEAVE_F32 || dtype == CLEAVE_F16 || dtype == CLEAVE_BF16;
}

const char *cleave::rt::dtypeName(int32_t dtype) {
  switch (dtype) {
  case CLEAVE_F32:
    return "f32";
  case CLEAVE_F16:
    return "f16";
  case CLEAVE_BF16:
    return "bf16";
  case CLEAVE_I64:
    return "i64";
  case CLEAVE_I32:
    return "i32";
  case CLEAVE_I1:
    return "i1";
  default:
    return "unknown dtype";
  }
}

std::string cleave::rt::shapeString(const cleave_tensor &t) {
  std::string s = "[";
  for (int d = 0; d < t.rank; ++d) {
    if (d)
      s += ", ";
    s += std::to_string(t.shape[d]);
  }
  return s + "]";
}

bool cleave::rt::sameShape(const cleave_tensor &a, const cleave_tensor &b) {
  if (a.rank != b.rank)
    return false;
  for (int d = 0; d < a.rank; ++d)
    if (a.shape[d] != b.shape[d])
      return false;
  return true;
}

bool cleave::rt::overlaps(const cleave_tensor &a, const cleave_tensor &b) {
  int64_t aEnd = a.offset + numElements(a) * int64_t(elementSize(a.dtype));
  int64_t bEnd = b.offset + numElements(b) * int64_t(elementSize(b.dtype));
  return a.offset < bEnd && b.offset < aEnd;
}

void cleave::rt::contiguousStrides(const cleave_tensor &t, int64_t *strides) {
  int64_t s = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= t.shape[d];
  }
}

//===----------------------------------------------------------------------===//
// Broadcasting and strided copies
//===----------------------------------------------------------------------===//

Broadcast::Broadcast(const char *kernel, const cleave_tensor &out,
                     const cleave_tensor *const *operands, int numOps)
    : numOperands(numOps) {
  // Right-align each operand against the output and zero the strides of its
  // broadcast dimensions.
  int64_t full[kMaxOperands][CLEAVE_RT_MAX_RANK];
  for (int i = 0; i < numOps; ++i) {
    const cleave_tensor &op = *operands[i];
    int shift = out.rank - op.rank;
    bool ok = shift >= 0;
    int64_t stride = 1;
    for (int d = out.rank - 1; ok && d >= 0; --d) {
      int od = d - shift;
      if (od < 0) {
        full[i][d] = 0;
        continue;
      }
      if (op.shape[od] == out.shape[d]) {
        full[i][d] = out.shape[d] == 1 ? 0 : stride;
      } else if (op.shape[od] == 1) {
        full[i][d] = 0;
      } else {
        ok = false;
      }
      stride *= op.shape[od];
    }
    if (!ok)
      cleave_rt_fail("%s: operand %d of shape %s does not broadcast to %s",
                     kernel, i, shapeString(op).c_str(),
                     shapeString(out).c_str());
  }
  // Drop size-1 dims, then merge dim d into the run before it when every
  // operand steps through both as one (stride[d-1] == stride[d] * size[d]).
  rank = 0;
  for (int d = 0; d < out.rank; ++d) {
    total *= out.shape[d];
    if (out.shape[d] == 1)
      continue;
    bool merge = rank > 0;
    for (int i = 0; merge && i < numOps; ++i)
      merge = strides[i][rank - 1] == full[i][d] * out.shape[d];
    if (merge) {
      shape[rank - 1] *= out.shape[d];
      for (int i = 0; i < numOps; ++i)
        strides[i][rank - 1] = full[i][d];
      continue;
    }
    shape[rank] = out.shape[d];
    for (int i = 0; i < numOps; ++i)
      strides[i][rank] = full[i][d];
    ++rank;
  }
}

namespace {
template <typename E>
void stridedCopyTyped(const E *src, E *dst, int rank, const int64_t *shape,
                      const int64_t *strides, int64_t base) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d)
    total *= shape[d];
  if (total == 0)
    return;
  int64_t inner = rank == 0 ? 1 : shape[rank - 1];
  int64_t innerStride = rank == 0 ? 0 : strides[rank - 1];
  if (rank >= 2 && innerStride != 1 && innerStride != 0) {
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
    E *out = dst + row * inner;
    const E *in = src + off;
    if (innerStride == 1) {
      std::memcpy(out, in, size_t(inner) * sizeof(E));
    } else {
      for (int64_t i = 0; i < inner; ++i)
        out[i] = in[i * innerStride];
    }
  }
}
} // namespace

void cleave::rt::stridedCopy(const char *src, char *dst, size_t elemSize,
                             int outRank, const int64_t *outShape,
                             const int64_t *srcStrides, int64_t base) {
  // Merge adjacent dims that the source walks contiguously, drop size 1.
  int64_t shape[CLEAVE_RT_MAX_RANK], strides[CLEAVE_RT_MAX_RANK];
  int rank = 0;
  for (int d = 0; d < outRank; ++d) {
    if (outShape[d] == 1)
      continue;
    if (rank > 0 && strides[rank - 1] == srcStrides[d] * outShape[d]) {
      shape[rank - 1] *= outShape[d];
      strides[rank - 1] = srcStrides[d];
      continue;
    }
    shape[rank] = outShape[d];
    strides[rank] = srcStrides[d];
    ++rank;
  }
  for (int d = 0; d < outRank; ++d)
    if (outShape[d] == 0)
      return;
  switch (elemSize) {
  case 1:
    return stridedCopyTyped(reinterpret_cast<const uint8_t *>(src),
                            reinterpret_cast<uint8_t *>(dst), rank, shape,
                            strides, base);
  case 2:
    return stridedCopyTyped(reinterpret_cast<const uint16_t *>(src),
                            reinterpret_cast<uint16_t *>(dst), rank, shape,
                            strides, base);
  case 4:
    return stridedCopyTyped(reinterpret_cast<const uint32_t *>(src),
                            reinterpret_cast<uint32_t *>(dst), rank, shape,
                            strides, base);
  case 8:
    return stridedCopyTyped(reinterpret_cast<const uint64_t *>(src),
                            reinterpret_cast<uint64_t *>(dst), rank, shape,
                            strides, base);
  }
  cleave_rt_fail("strided copy: unsupported element size %zu", elemSize);
}
