//===- Convert.cpp - element type conversions of the CPU kernels ----------===//
//
// Conversions between the stored dtypes and the compute types (f32, i64,
// bool bytes), and the Input/Output views built on them.
//
//===----------------------------------------------------------------------===//

#include "Tensor.h"

#include "cleave/Runtime/Float16.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CLEAVE_F16C_DISPATCH 1
#endif

using namespace cleave::rt;

//===----------------------------------------------------------------------===//
// Conversions
//===----------------------------------------------------------------------===//

namespace {

/// Loads element i of a stored dtype as T (the dtype is known valid).
template <typename T, typename Load>
void convertLoop(const void *src, T *dst, int64_t n, Load load) {
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i)
    dst[i] = load(src, i);
}

int64_t floatToI64(float f) {
  if (std::isnan(f))
    return 0;
  if (f >= 9.2233720368547758e18f)
    return INT64_MAX;
  if (f <= -9.2233720368547758e18f)
    return INT64_MIN;
  return int64_t(f);
}

void badDtype(const char *what, int32_t dtype) {
  cleave_rt_fail("%s: unsupported dtype %d", what, dtype);
}

#ifdef CLEAVE_F16C_DISPATCH
// f16 <-> f32 with the F16C instructions, 8 elements at a time, where the
// CPU has them (checked at run time: the runtime itself is built for plain
// x86-64). They round as floatToHalf does (to nearest even, inf on
// overflow, NaN kept quiet with its top mantissa bits), so the results are
// the same bits; ConvertTest checks every f16 and many f32 values. The
// scalar conversions, with their branches, do not vectorize: fp16 training
// steps spent a sixth of their time more than bf16 ones on the CPU.

bool haveF16c() {
  static const bool yes =
      __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return yes;
}

__attribute__((target("avx,f16c"))) void
halvesToFloatsF16c(const uint16_t *src, float *dst, int64_t n) {
  int64_t blocks = n / 8;
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t b = 0; b < blocks; ++b)
    _mm256_storeu_ps(dst + 8 * b,
                     _mm256_cvtph_ps(_mm_loadu_si128(
                         reinterpret_cast<const __m128i *>(src + 8 * b))));
  for (int64_t i = 8 * blocks; i < n; ++i)
    dst[i] = halfToFloat(src[i]);
}

__attribute__((target("avx,f16c"))) void
floatsToHalvesF16c(const float *src, uint16_t *dst, int64_t n) {
  int64_t blocks = n / 8;
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t b = 0; b < blocks; ++b)
    _mm_storeu_si128(
        reinterpret_cast<__m128i *>(dst + 8 * b),
        _mm256_cvtps_ph(_mm256_loadu_ps(src + 8 * b),
                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (int64_t i = 8 * blocks; i < n; ++i)
    dst[i] = floatToHalf(src[i]);
}
#endif

} // namespace

void cleave::rt::convertToF32(const void *src, int32_t dtype, float *dst,
                              int64_t n) {
  switch (dtype) {
  case CLEAVE_F32:
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  case CLEAVE_F16:
#ifdef CLEAVE_F16C_DISPATCH
    if (haveF16c())
      return halvesToFloatsF16c(static_cast<const uint16_t *>(src), dst, n);
#endif
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return halfToFloat(static_cast<const uint16_t *>(p)[i]);
    });
  case CLEAVE_BF16:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
    });
  case CLEAVE_I64:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return float(static_cast<const int64_t *>(p)[i]);
    });
  case CLEAVE_I32:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return float(static_cast<const int32_t *>(p)[i]);
    });
  case CLEAVE_I1:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return static_cast<const uint8_t *>(p)[i] ? 1.0f : 0.0f;
    });
  }
  badDtype("convert to f32", dtype);
}

void cleave::rt::convertToI64(const void *src, int32_t dtype, int64_t *dst,
                              int64_t n) {
  switch (dtype) {
  case CLEAVE_I64:
    std::memcpy(dst, src, size_t(n) * 8);
    return;
  case CLEAVE_I32:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return int64_t(static_cast<const int32_t *>(p)[i]);
    });
  case CLEAVE_I1:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return int64_t(static_cast<const uint8_t *>(p)[i] != 0);
    });
  case CLEAVE_F32:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return floatToI64(static_cast<const float *>(p)[i]);
    });
  case CLEAVE_F16:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return floatToI64(halfToFloat(static_cast<const uint16_t *>(p)[i]));
    });
  case CLEAVE_BF16:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return floatToI64(bf16ToFloat(static_cast<const uint16_t *>(p)[i]));
    });
  }
  badDtype("convert to i64", dtype);
}

void cleave::rt::convertToBool(const void *src, int32_t dtype, uint8_t *dst,
                               int64_t n) {
  switch (dtype) {
  case CLEAVE_I1:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return uint8_t(static_cast<const uint8_t *>(p)[i] != 0);
    });
  case CLEAVE_I64:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return uint8_t(static_cast<const int64_t *>(p)[i] != 0);
    });
  case CLEAVE_I32:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return uint8_t(static_cast<const int32_t *>(p)[i] != 0);
    });
  case CLEAVE_F32:
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return uint8_t(static_cast<const float *>(p)[i] != 0.0f);
    });
  case CLEAVE_F16:
  case CLEAVE_BF16:
    // Any bit pattern other than +0 and -0 is nonzero (NaN included).
    return convertLoop(src, dst, n, [](const void *p, int64_t i) {
      return uint8_t((static_cast<const uint16_t *>(p)[i] & 0x7fffu) != 0);
    });
  }
  badDtype("convert to i1", dtype);
}

void cleave::rt::convertFromF32(const float *src, void *dst, int32_t dtype,
                                int64_t n) {
  switch (dtype) {
  case CLEAVE_F32:
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  case CLEAVE_F16: {
    auto *out = static_cast<uint16_t *>(dst);
#ifdef CLEAVE_F16C_DISPATCH
    if (haveF16c())
      return floatsToHalvesF16c(src, out, n);
#endif
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i)
      out[i] = floatToHalf(src[i]);
    return;
  }
  case CLEAVE_BF16: {
    auto *out = static_cast<uint16_t *>(dst);
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i)
      out[i] = floatToBf16(src[i]);
    return;
  }
  case CLEAVE_I64:
  case CLEAVE_I32: {
    std::vector<int64_t> tmp(static_cast<size_t>(n));
    convertToI64(src, CLEAVE_F32, tmp.data(), n);
    convertFromI64(tmp.data(), dst, dtype, n);
    return;
  }
  case CLEAVE_I1:
    convertToBool(src, CLEAVE_F32, static_cast<uint8_t *>(dst), n);
    return;
  }
  badDtype("convert from f32", dtype);
}

void cleave::rt::convertFromI64(const int64_t *src, void *dst, int32_t dtype,
                                int64_t n) {
  switch (dtype) {
  case CLEAVE_I64:
    std::memcpy(dst, src, size_t(n) * 8);
    return;
  case CLEAVE_I32: {
    auto *out = static_cast<int32_t *>(dst);
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i)
      out[i] = int32_t(uint32_t(uint64_t(src[i])));
    return;
  }
  case CLEAVE_I1:
    convertToBool(src, CLEAVE_I64, static_cast<uint8_t *>(dst), n);
    return;
  case CLEAVE_F32:
  case CLEAVE_F16:
  case CLEAVE_BF16: {
    std::vector<float> tmp(static_cast<size_t>(n));
    convertToF32(src, CLEAVE_I64, tmp.data(), n);
    convertFromF32(tmp.data(), dst, dtype, n);
    return;
  }
  }
  badDtype("convert from i64", dtype);
}

//===----------------------------------------------------------------------===//
// Views
//===----------------------------------------------------------------------===//

namespace {
void convertTo(const void *src, int32_t dtype, float *dst, int64_t n) {
  convertToF32(src, dtype, dst, n);
}
void convertTo(const void *src, int32_t dtype, int64_t *dst, int64_t n) {
  convertToI64(src, dtype, dst, n);
}
void convertTo(const void *src, int32_t dtype, uint8_t *dst, int64_t n) {
  convertToBool(src, dtype, dst, n);
}
void convertFrom(const float *src, void *dst, int32_t dtype, int64_t n) {
  convertFromF32(src, dst, dtype, n);
}
void convertFrom(const int64_t *src, void *dst, int32_t dtype, int64_t n) {
  convertFromI64(src, dst, dtype, n);
}
void convertFrom(const uint8_t *src, void *dst, int32_t dtype, int64_t n) {
  std::vector<int64_t> tmp(static_cast<size_t>(n));
  convertToI64(src, CLEAVE_I1, tmp.data(), n);
  convertFromI64(tmp.data(), dst, dtype, n);
}
} // namespace

namespace {
/// Free conversion buffers by capacity. Retained memory is bounded: past
/// kPoolLimit bytes, returned buffers are freed instead.
class BufferPool {
public:
  static BufferPool &get() {
    static BufferPool *pool = new BufferPool; // never destroyed: used at exit
    return *pool;
  }
  void *take(size_t bytes, size_t &capacity) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      // The smallest free buffer that fits, unless it is over twice the size.
      auto it = free.lower_bound(bytes);
      if (it != free.end() && it->first <= 2 * bytes) {
        capacity = it->first;
        void *p = it->second;
        retained -= it->first;
        free.erase(it);
        return p;
      }
    }
    capacity = (bytes + 63) / 64 * 64;
    void *p = std::aligned_alloc(64, capacity);
    if (!p)
      cleave_rt_fail("out of host memory: a conversion buffer of %zu bytes",
                     capacity);
    return p;
  }
  void give(void *p, size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex);
    if (retained + capacity > kPoolLimit) {
      std::free(p);
      return;
    }
    retained += capacity;
    free.emplace(capacity, p);
  }

private:
  static constexpr size_t kPoolLimit = size_t(4) << 30;
  std::mutex mutex;
  std::multimap<size_t, void *> free;
  size_t retained = 0;
};
} // namespace

PooledBuffer::~PooledBuffer() {
  if (ptr)
    BufferPool::get().give(ptr, capacity);
}

void *PooledBuffer::allocate(size_t bytes) {
  ptr = BufferPool::get().take(bytes ? bytes : 1, capacity);
  return ptr;
}

template <typename T>
Input<T>::Input(char *arena, const cleave_tensor &t, bool copy) {
  const char *src = dataOf(arena, t);
  int64_t n = numElements(t);
  if (t.dtype == ComputeType<T>::dtype && !copy) {
    ptr = reinterpret_cast<const T *>(src);
    return;
  }
  T *buffer = static_cast<T *>(storage.allocate(size_t(n) * sizeof(T)));
  convertTo(src, t.dtype, buffer, n);
  ptr = buffer;
}

template <typename T>
Output<T>::Output(char *arena, const cleave_tensor &t)
    : dest(dataOf(arena, t)), dtype(t.dtype), count(numElements(t)) {
  if (dtype == ComputeType<T>::dtype) {
    ptr = static_cast<T *>(dest);
    return;
  }
  ptr = static_cast<T *>(storage.allocate(size_t(count) * sizeof(T)));
}

template <typename T> void Output<T>::commit() {
  if (dtype != ComputeType<T>::dtype)
    convertFrom(ptr, dest, dtype, count);
}

namespace cleave::rt {
template class Input<float>;
template class Input<int64_t>;
template class Input<uint8_t>;
template class Output<float>;
template class Output<int64_t>;
template class Output<uint8_t>;
} // namespace cleave::rt
