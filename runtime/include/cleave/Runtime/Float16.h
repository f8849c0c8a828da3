//===- Float16.h - f16 and bf16 conversions of the runtime ------*- C++ -*-===//
//
// Scalar conversions between f32 and the two 16-bit float formats the
// runtime stores: IEEE binary16 (f16) and bfloat16 (the top half of an f32).
// Both narrowing conversions round to nearest, ties to even, and keep NaN a
// (quiet) NaN; widening an f16 NaN quiets it too. Header-only so that kernels
// and tests share one definition.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_FLOAT16_H
#define CLEAVE_RUNTIME_FLOAT16_H

#include <cstdint>
#include <cstring>

namespace cleave::rt {

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

/// bf16 -> f32 is exact: the bf16 bits are the top half of the f32.
inline float bf16ToFloat(uint16_t h) { return bitsToFloat(uint32_t(h) << 16); }

/// f32 -> bf16, round to nearest even.
inline uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep the sign, force quiet
    return uint16_t((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

/// f16 -> f32 is exact, subnormals included; a NaN keeps its payload and
/// comes out quiet, as the F16C instruction (vcvtph2ps) makes it.
inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) // inf or NaN
    return bitsToFloat(sign | 0x7f800000u | (mant ? 0x400000u : 0u) |
                       (mant << 13));
  if (exp == 0) {
    if (mant == 0)
      return bitsToFloat(sign);
    // Subnormal: value = mant * 2^-24, exactly representable in f32.
    float v = float(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

/// f32 -> f16, round to nearest even; overflow gives inf.
inline uint16_t floatToHalf(float f) {
  uint32_t u = floatBits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t absBits = u & 0x7fffffffu;
  if (absBits > 0x7f800000u) // NaN: keep the top mantissa bits, force quiet
    return uint16_t(sign | 0x7e00u | ((absBits >> 13) & 0x3ffu));
  if (absBits >= 0x477ff000u) // rounds to >= 65520: inf
    return uint16_t(sign | 0x7c00u);
  if (absBits < 0x38800000u) {
    // Below the smallest normal f16 (2^-14): the result is subnormal or zero.
    // Adding 0.5 shifts the mantissa into the low bits of a float whose
    // exponent makes one ulp equal to 2^-24; the FPU rounds to nearest even.
    float v = bitsToFloat(absBits) + 0.5f;
    return uint16_t(sign | uint16_t(floatBits(v) - floatBits(0.5f)));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits.
  uint32_t mantOdd = (absBits >> 13) & 1u;
  absBits += 0xc8000fffu + mantOdd; // (15 - 127) << 23, plus rounding
  return uint16_t(sign | uint16_t(absBits >> 13));
}

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_FLOAT16_H
