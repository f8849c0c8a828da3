//===- FastMath.h - vectorizable exp, tanh and normal CDF -------*- C++ -*-===//
//
// glibc's expf, tanhf and erfcf are scalar calls, so loops over them do not
// vectorize (its vector variants need -ffast-math, which would also change
// NaN and infinity semantics everywhere). These inline versions are plain
// arithmetic and integer bit operations that GCC vectorizes under
// `#pragma omp simd` (with -fno-trapping-math, which lets it turn the
// clamps into selects). Accuracy, measured against float64: relative error
// below 1.5e-7 for exp over its normal range, tanh and sigmoid (Cephes
// polynomials); absolute error below 3e-7 for the normal CDF. exp
// overflows to inf and underflows through subnormals to 0; NaN stays NaN.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_CPU_FASTMATH_H
#define CLEAVE_RUNTIME_LIB_CPU_FASTMATH_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace cleave::rt {

/// 2^n for integer n in [-126, 127], built from the exponent bits.
inline float pow2i(int32_t n) {
  uint32_t bits = uint32_t(n + 127) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// exp(x) = 2^n * exp(r) with r = x - n ln2 in [-ln2/2, ln2/2].
inline float fastExp(float x) {
  // NaN is computed as 0 and restored at the end (converting NaN to an
  // integer is undefined). The clamp keeps n within the two half-scales
  // below; beyond it the result is inf or 0 anyway.
  bool nan = x != x;
  float c = nan ? 0.0f : x;
  c = c < -105.0f ? -105.0f : c;
  c = c > 89.0f ? 89.0f : c;
  // Round to nearest by adding and subtracting 1.5 * 2^23.
  const float kRound = 12582912.0f;
  float n = (c * 1.44269504088896341f + kRound) - kRound;
  // Cody-Waite: ln2 in two parts so that n * C1 is exact.
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n as two normal halves: n is in [-152, 129], beyond one exponent.
  int32_t ni = int32_t(n);
  int32_t half = ni / 2;
  float result = p * pow2i(half) * pow2i(ni - half);
  return nan ? x : result;
}

/// tanh: an odd polynomial near 0, 1 - 2 / (exp(2|x|) + 1) elsewhere.
inline float fastTanh(float x) {
  float ax = x < 0.0f ? -x : x;
  float z = x * x;
  float small =
      ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) *
            z +
        1.33314422036e-1f) *
           z -
       3.33332819422e-1f) *
          z * x +
      x;
  float large = 1.0f - 2.0f / (fastExp(2.0f * ax) + 1.0f);
  large = x < 0.0f ? -large : large;
  // NaN fails both tests and takes the polynomial, which keeps it NaN.
  return ax < 0.625f || ax != ax ? small : large;
}

/// 1 / (1 + exp(-x)), exact at the tails (0 and 1).
inline float fastSigmoid(float x) { return 1.0f / (1.0f + fastExp(-x)); }

/// The standard normal CDF, 0.5 erfc(-x / sqrt 2), with erfc of |x| / sqrt 2
/// from Abramowitz & Stegun 7.1.26 (the formula of PyTorch's vectorized
/// erf, 7e-8 in exact arithmetic): no cancellation for negative x.
inline float fastNormalCdf(float x) {
  float a = (x < 0.0f ? -x : x) * 0.70710678118654752f;
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float poly = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t -
                 0.284496736f) *
                    t +
                0.254829592f) *
               t;
  float half = 0.5f * poly * fastExp(-a * a); // 0.5 erfc(a)
  return x < 0.0f ? half : 1.0f - half;
}

/// The forward of graph.gelu and of linear's GELU epilogue. The exact form
/// is x Phi(x) with Phi = 0.5 erfc(-x / sqrt 2), which avoids 1 + erf's
/// cancellation for negative x; Phi is fastNormalCdf, the form the
/// gradient uses, so that the loops vectorize (libm's erfcf is a scalar
/// call).
inline float geluErf(float v) { return v * fastNormalCdf(v); }
/// The tanh form: 0.5 (1 + tanh(u)) = sigmoid(2u), again without the
/// cancellation.
inline float geluTanh(float v) {
  float u = 0.79788456080286536f * (v + 0.044715f * v * v * v);
  return v * fastSigmoid(2.0f * u);
}

/// gelu'(x) of the exact form: Phi(x) + x phi(x), with phi the normal
/// density.
inline float geluErfGrad(float v) {
  float pdf = 0.39894228040143268f * fastExp(-0.5f * v * v);
  return fastNormalCdf(v) + v * pdf;
}
/// gelu'(x) of the tanh form. With s = sigmoid(2u) = (1 + tanh u) / 2 and
/// 1 - tanh^2 u = 4 s (1 - s): d/dx x s = s + 2 x s (1 - s) u'.
inline float geluTanhGrad(float v) {
  float v2 = v * v;
  float u = 0.79788456080286536f * (v + 0.044715f * v2 * v);
  float du = 0.79788456080286536f * (1.0f + 3.0f * 0.044715f * v2);
  float s = fastSigmoid(2.0f * u);
  return s + 2.0f * v * s * (1.0f - s) * du;
}

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_LIB_CPU_FASTMATH_H
