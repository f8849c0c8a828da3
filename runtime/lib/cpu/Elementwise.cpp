//===- Elementwise.cpp - elementwise CPU kernels --------------------------===//
//
// unary, binary, compare, where and cast, with NumPy broadcasting from the
// operand shapes to the output shape, and unary_grad (the derivatives of the
// activations). Float outputs compute in f32, integer outputs in i64. Each
// kernel switches on the op once, outside the loops, so that the
// per-element body is a small inlined functor the compiler can vectorize on
// the contiguous runs.
//
//===----------------------------------------------------------------------===//

#include "FastMath.h"
#include "Tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace cleave::rt;

namespace {

const char *unaryName(int32_t op) {
  const char *name = cleave_unary_name(op);
  return name ? name : "unknown";
}

/// out[o + i] = f(x[x0 + i * sx]) over one run.
template <typename In, typename Out, typename F>
inline void unaryRun(const In *x, int64_t sx, Out *out, int64_t n, F f) {
  if (sx == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      out[i] = f(x[i]);
  } else {
    Out v = f(x[0]);
    for (int64_t i = 0; i < n; ++i)
      out[i] = v;
  }
}

/// out[i] = f(a[i * sa], b[i * sb]) with the three stride patterns
/// specialized so that each inner loop is a plain vectorizable loop.
template <typename In, typename Out, typename F>
inline void binaryRun(const In *a, int64_t sa, const In *b, int64_t sb,
                      Out *out, int64_t n, F f) {
  if (sa == 1 && sb == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      out[i] = f(a[i], b[i]);
  } else if (sa == 1) {
    In bv = b[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      out[i] = f(a[i], bv);
  } else if (sb == 1) {
    In av = a[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      out[i] = f(av, b[i]);
  } else {
    Out v = f(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i)
      out[i] = v;
  }
}

template <typename In, typename Out, typename F>
void mapUnary(const Broadcast &bc, const In *x, Out *out, F f) {
  bc.forEachRun(
      [&](int64_t o, const int64_t *off, int64_t n, const int64_t *inner) {
        unaryRun(x + off[0], inner[0], out + o, n, f);
      });
}

template <typename In, typename Out, typename F>
void mapBinary(const Broadcast &bc, const In *a, const In *b, Out *out, F f) {
  bc.forEachRun(
      [&](int64_t o, const int64_t *off, int64_t n, const int64_t *inner) {
        binaryRun(a + off[0], inner[0], b + off[1], inner[1], out + o, n, f);
      });
}

void unaryF32(int32_t op, const Broadcast &bc, const float *x, float *out) {
  switch (op) {
  case CLEAVE_NEG:
    return mapUnary(bc, x, out, [](float v) { return -v; });
  case CLEAVE_ABS:
    return mapUnary(bc, x, out, [](float v) { return std::fabs(v); });
  case CLEAVE_RELU:
    return mapUnary(bc, x, out, [](float v) { return v > 0.0f ? v : 0.0f; });
  case CLEAVE_EXP:
    return mapUnary(bc, x, out, [](float v) { return fastExp(v); });
  case CLEAVE_LOG:
    return mapUnary(bc, x, out, [](float v) { return std::log(v); });
  case CLEAVE_SQRT:
    return mapUnary(bc, x, out, [](float v) { return std::sqrt(v); });
  case CLEAVE_RSQRT:
    return mapUnary(bc, x, out, [](float v) { return 1.0f / std::sqrt(v); });
  case CLEAVE_RECIPROCAL:
    return mapUnary(bc, x, out, [](float v) { return 1.0f / v; });
  case CLEAVE_TANH:
    return mapUnary(bc, x, out, [](float v) { return fastTanh(v); });
  case CLEAVE_ERF:
    return mapUnary(bc, x, out, [](float v) { return std::erf(v); });
  case CLEAVE_SIGMOID:
    return mapUnary(bc, x, out, [](float v) { return fastSigmoid(v); });
  case CLEAVE_SILU:
    return mapUnary(bc, x, out, [](float v) { return v * fastSigmoid(v); });
  case CLEAVE_SIN:
    return mapUnary(bc, x, out, [](float v) { return std::sin(v); });
  case CLEAVE_COS:
    return mapUnary(bc, x, out, [](float v) { return std::cos(v); });
  case CLEAVE_GELU_ERF:
    return mapUnary(bc, x, out, [](float v) { return geluErf(v); });
  case CLEAVE_GELU_TANH:
    return mapUnary(bc, x, out, [](float v) { return geluTanh(v); });
  }
  cleave_rt_fail("cleave_rt_unary: unknown op %d", op);
}

void unaryI64(int32_t op, const Broadcast &bc, const int64_t *x, int64_t *out,
              int32_t dtype) {
  // Negation wraps (computed unsigned) instead of overflowing.
  switch (op) {
  case CLEAVE_NEG:
    return mapUnary(bc, x, out,
                    [](int64_t v) { return int64_t(0 - uint64_t(v)); });
  case CLEAVE_ABS:
    return mapUnary(bc, x, out, [](int64_t v) {
      return v < 0 ? int64_t(0 - uint64_t(v)) : v;
    });
  case CLEAVE_RELU:
    return mapUnary(bc, x, out, [](int64_t v) { return v > 0 ? v : 0; });
  }
  cleave_rt_fail("cleave_rt_unary: op %s (%d) is not defined for %s",
                 unaryName(op), op, dtypeName(dtype));
}

void binaryF32(int32_t op, const Broadcast &bc, const float *a, const float *b,
               float *out) {
  switch (op) {
  case CLEAVE_ADD:
    return mapBinary(bc, a, b, out, [](float x, float y) { return x + y; });
  case CLEAVE_SUB:
    return mapBinary(bc, a, b, out, [](float x, float y) { return x - y; });
  case CLEAVE_MUL:
    return mapBinary(bc, a, b, out, [](float x, float y) { return x * y; });
  case CLEAVE_DIV:
    return mapBinary(bc, a, b, out, [](float x, float y) { return x / y; });
  case CLEAVE_POW:
    return mapBinary(bc, a, b, out,
                     [](float x, float y) { return std::pow(x, y); });
  // max/min propagate NaN like NumPy's maximum/minimum.
  case CLEAVE_MAX:
    return mapBinary(bc, a, b, out, [](float x, float y) {
      return (x > y || x != x) ? x : y;
    });
  case CLEAVE_MIN:
    return mapBinary(bc, a, b, out, [](float x, float y) {
      return (x < y || x != x) ? x : y;
    });
  }
  cleave_rt_fail("cleave_rt_binary: unknown op %d", op);
}

/// Integer power by squaring; a negative exponent truncates 1/x^-e toward
/// zero (so only |x| == 1 gives a nonzero result).
int64_t intPow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1)
      return 1;
    if (base == -1)
      return (exp & 1) ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, b = uint64_t(base);
  while (exp) {
    if (exp & 1)
      result *= b;
    b *= b;
    exp >>= 1;
  }
  return int64_t(result);
}

void binaryI64(int32_t op, const Broadcast &bc, const int64_t *a,
               const int64_t *b, int64_t bCount, int64_t *out) {
  // add/sub/mul wrap on overflow (computed unsigned), as in two's complement.
  switch (op) {
  case CLEAVE_ADD:
    return mapBinary(bc, a, b, out, [](int64_t x, int64_t y) {
      return int64_t(uint64_t(x) + uint64_t(y));
    });
  case CLEAVE_SUB:
    return mapBinary(bc, a, b, out, [](int64_t x, int64_t y) {
      return int64_t(uint64_t(x) - uint64_t(y));
    });
  case CLEAVE_MUL:
    return mapBinary(bc, a, b, out, [](int64_t x, int64_t y) {
      return int64_t(uint64_t(x) * uint64_t(y));
    });
  case CLEAVE_DIV: {
    // Division truncates toward zero; a zero divisor is fatal. Broadcasting
    // reads every element of b, so scan b itself, before any worker thread
    // starts.
    for (int64_t i = 0; bc.total && i < bCount; ++i)
      if (b[i] == 0)
        cleave_rt_fail("cleave_rt_binary: integer division by zero (divisor "
                       "element %lld)",
                       (long long)i);
    return mapBinary(bc, a, b, out, [](int64_t x, int64_t y) {
      return (x == INT64_MIN && y == -1) ? INT64_MIN : x / y;
    });
  }
  case CLEAVE_POW:
    return mapBinary(bc, a, b, out, intPow);
  case CLEAVE_MAX:
    return mapBinary(bc, a, b, out,
                     [](int64_t x, int64_t y) { return x > y ? x : y; });
  case CLEAVE_MIN:
    return mapBinary(bc, a, b, out,
                     [](int64_t x, int64_t y) { return x < y ? x : y; });
  }
  cleave_rt_fail("cleave_rt_binary: unknown op %d", op);
}

template <typename T>
void compareTyped(int32_t dir, const Broadcast &bc, const T *a, const T *b,
                  uint8_t *out) {
  switch (dir) {
  case CLEAVE_EQ:
    return mapBinary(bc, a, b, out, [](T x, T y) { return uint8_t(x == y); });
  case CLEAVE_NE:
    return mapBinary(bc, a, b, out, [](T x, T y) { return uint8_t(x != y); });
  case CLEAVE_LT:
    return mapBinary(bc, a, b, out, [](T x, T y) { return uint8_t(x < y); });
  case CLEAVE_LE:
    return mapBinary(bc, a, b, out, [](T x, T y) { return uint8_t(x <= y); });
  case CLEAVE_GT:
    return mapBinary(bc, a, b, out, [](T x, T y) { return uint8_t(x > y); });
  case CLEAVE_GE:
    return mapBinary(bc, a, b, out, [](T x, T y) { return uint8_t(x >= y); });
  }
  cleave_rt_fail("cleave_rt_compare: unknown direction %d", dir);
}

/// dx[i] = f(x[i], dy[i]) over n elements. Element i is read before it is
/// written, so dx may be the same tensor as x or dy.
template <typename F>
void mapGrad(const float *x, const float *dy, float *dx, int64_t n, F f) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i)
    dx[i] = f(x[i], dy[i]);
}

/// The derivatives of the float activations of unaryF32, times dy.
void unaryGradF32(int32_t op, const float *x, const float *dy, float *dx,
                  int64_t n) {
  switch (op) {
  // 0 at x = 0, as in PyTorch.
  case CLEAVE_RELU:
    return mapGrad(x, dy, dx, n,
                   [](float v, float g) { return v > 0.0f ? g : 0.0f; });
  case CLEAVE_TANH:
    return mapGrad(x, dy, dx, n, [](float v, float g) {
      float t = fastTanh(v);
      return g * (1.0f - t * t);
    });
  case CLEAVE_SIGMOID:
    return mapGrad(x, dy, dx, n, [](float v, float g) {
      float s = fastSigmoid(v);
      return g * (s * (1.0f - s));
    });
  // d/dx x s(x) = s (1 + x (1 - s)).
  case CLEAVE_SILU:
    return mapGrad(x, dy, dx, n, [](float v, float g) {
      float s = fastSigmoid(v);
      return g * (s * (1.0f + v * (1.0f - s)));
    });
  case CLEAVE_GELU_ERF:
    return mapGrad(x, dy, dx, n,
                   [](float v, float g) { return g * geluErfGrad(v); });
  case CLEAVE_GELU_TANH:
    return mapGrad(x, dy, dx, n,
                   [](float v, float g) { return g * geluTanhGrad(v); });
  }
  cleave_rt_fail("cleave_rt_unary_grad: op %s (%d) has no gradient kernel",
                 unaryName(op), op);
}

template <typename T>
void whereTyped(char *arena, const Broadcast &bc, const uint8_t *cond,
                const cleave_tensor &x, const cleave_tensor &y,
                const cleave_tensor &out) {
  Input<T> xv(arena, x), yv(arena, y);
  Output<T> ov(arena, out);
  const T *xp = xv.data(), *yp = yv.data();
  T *op = ov.data();
  bc.forEachRun(
      [&](int64_t o, const int64_t *off, int64_t n, const int64_t *inner) {
        const uint8_t *c = cond + off[0];
        const T *xr = xp + off[1], *yr = yp + off[2];
        int64_t sc = inner[0], sx = inner[1], sy = inner[2];
        for (int64_t i = 0; i < n; ++i)
          op[o + i] = c[i * sc] ? xr[i * sx] : yr[i * sy];
      });
  ov.commit();
}

} // namespace

extern "C" {

void cleave_rt_unary(char *arena, int32_t op, const cleave_tensor *x,
                     const cleave_tensor *out) {
  checkTensor("cleave_rt_unary", "x", x);
  checkTensor("cleave_rt_unary", "out", out);
  const cleave_tensor *ops[] = {x};
  Broadcast bc("cleave_rt_unary", *out, ops, 1);
  if (isFloatType(out->dtype)) {
    Input<float> xv(arena, *x);
    Output<float> ov(arena, *out);
    unaryF32(op, bc, xv.data(), ov.data());
    ov.commit();
    return;
  }
  Input<int64_t> xv(arena, *x);
  Output<int64_t> ov(arena, *out);
  unaryI64(op, bc, xv.data(), ov.data(), out->dtype);
  ov.commit();
}

void cleave_rt_unary_grad(char *arena, int32_t op, const cleave_tensor *x,
                          const cleave_tensor *dy, const cleave_tensor *dx) {
  const char *k = "cleave_rt_unary_grad";
  checkTensor(k, "x", x);
  checkTensor(k, "dy", dy);
  checkTensor(k, "dx", dx);
  if (!sameShape(*x, *dy) || !sameShape(*x, *dx))
    cleave_rt_fail("%s: x %s, dy %s and dx %s differ in shape", k,
                   shapeString(*x).c_str(), shapeString(*dy).c_str(),
                   shapeString(*dx).c_str());
  for (const cleave_tensor *t : {x, dy, dx})
    if (!isFloatType(t->dtype))
      cleave_rt_fail("%s: unsupported dtype %s", k, dtypeName(t->dtype));
  Input<float> xv(arena, *x), dyv(arena, *dy);
  Output<float> dxv(arena, *dx);
  unaryGradF32(op, xv.data(), dyv.data(), dxv.data(), numElements(*x));
  dxv.commit();
}

void cleave_rt_binary(char *arena, int32_t op, const cleave_tensor *a,
                      const cleave_tensor *b, const cleave_tensor *out) {
  checkTensor("cleave_rt_binary", "a", a);
  checkTensor("cleave_rt_binary", "b", b);
  checkTensor("cleave_rt_binary", "out", out);
  if (op < 0 || op >= CLEAVE_NUM_BINARY_KINDS)
    cleave_rt_fail("cleave_rt_binary: unknown op %d", op);
  const cleave_tensor *ops[] = {a, b};
  Broadcast bc("cleave_rt_binary", *out, ops, 2);
  if (isFloatType(out->dtype)) {
    Input<float> av(arena, *a), bv(arena, *b);
    Output<float> ov(arena, *out);
    binaryF32(op, bc, av.data(), bv.data(), ov.data());
    ov.commit();
    return;
  }
  Input<int64_t> av(arena, *a), bv(arena, *b);
  Output<int64_t> ov(arena, *out);
  binaryI64(op, bc, av.data(), bv.data(), numElements(*b), ov.data());
  ov.commit();
}

void cleave_rt_compare(char *arena, int32_t direction, const cleave_tensor *a,
                       const cleave_tensor *b, const cleave_tensor *out) {
  checkTensor("cleave_rt_compare", "a", a);
  checkTensor("cleave_rt_compare", "b", b);
  checkTensor("cleave_rt_compare", "out", out);
  if (out->dtype != CLEAVE_I1)
    cleave_rt_fail("cleave_rt_compare: out must be i1, got %s",
                   dtypeName(out->dtype));
  const cleave_tensor *ops[] = {a, b};
  Broadcast bc("cleave_rt_compare", *out, ops, 2);
  uint8_t *o = reinterpret_cast<uint8_t *>(dataOf(arena, *out));
  // Two integer operands compare exactly in i64; otherwise in f32.
  if (!isFloatType(a->dtype) && !isFloatType(b->dtype)) {
    Input<int64_t> av(arena, *a), bv(arena, *b);
    compareTyped(direction, bc, av.data(), bv.data(), o);
    return;
  }
  Input<float> av(arena, *a), bv(arena, *b);
  compareTyped(direction, bc, av.data(), bv.data(), o);
}

void cleave_rt_where(char *arena, const cleave_tensor *cond,
                     const cleave_tensor *x, const cleave_tensor *y,
                     const cleave_tensor *out) {
  checkTensor("cleave_rt_where", "cond", cond);
  checkTensor("cleave_rt_where", "x", x);
  checkTensor("cleave_rt_where", "y", y);
  checkTensor("cleave_rt_where", "out", out);
  const cleave_tensor *ops[] = {cond, x, y};
  Broadcast bc("cleave_rt_where", *out, ops, 3);
  Input<uint8_t> cv(arena, *cond);
  if (isFloatType(out->dtype))
    whereTyped<float>(arena, bc, cv.data(), *x, *y, *out);
  else
    whereTyped<int64_t>(arena, bc, cv.data(), *x, *y, *out);
}

void cleave_rt_cast(char *arena, const cleave_tensor *x,
                    const cleave_tensor *out) {
  checkTensor("cleave_rt_cast", "x", x);
  checkTensor("cleave_rt_cast", "out", out);
  int64_t n = numElements(*out);
  if (numElements(*x) != n)
    cleave_rt_fail("cleave_rt_cast: x %s and out %s differ in element count",
                   shapeString(*x).c_str(), shapeString(*out).c_str());
  const char *src = dataOf(arena, *x);
  char *dst = dataOf(arena, *out);
  if (x->dtype == out->dtype) {
    if (src != dst)
      std::memmove(dst, src, size_t(n) * elementSize(x->dtype));
    return;
  }
  // A bool is true for any nonzero value (0.5 and NaN included), as in
  // NumPy and ONNX, so it does not go through integer truncation.
  if (out->dtype == CLEAVE_I1)
    return convertToBool(src, x->dtype, reinterpret_cast<uint8_t *>(dst), n);
  // Convert in blocks through the compute type (f32 for a float out, else
  // i64, which truncates floats): no full-size temporary.
  constexpr int64_t kBlock = 1 << 16;
  size_t inSize = elementSize(x->dtype), outSize = elementSize(out->dtype);
  bool viaFloat = isFloatType(out->dtype);
  std::vector<float> f(viaFloat ? size_t(std::min(n, kBlock)) : 0);
  std::vector<int64_t> i64(viaFloat ? 0 : size_t(std::min(n, kBlock)));
  for (int64_t start = 0; start < n; start += kBlock) {
    int64_t len = std::min(kBlock, n - start);
    const char *in = src + start * int64_t(inSize);
    char *o = dst + start * int64_t(outSize);
    if (viaFloat) {
      convertToF32(in, x->dtype, f.data(), len);
      convertFromF32(f.data(), o, out->dtype, len);
    } else {
      convertToI64(in, x->dtype, i64.data(), len);
      convertFromI64(i64.data(), o, out->dtype, len);
    }
  }
}

} // extern "C"
