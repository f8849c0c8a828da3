//===- AttentionTest.cpp - CUDA attention and its gradient vs the CPU -----===//
//
// attention and attention_grad on the GPU against the CPU backend: plain
// and grouped-query heads, causal with Sq < Sk, Sq == Sk and Sq > Sk (top-
// left aligned), boolean and additive masks broadcast from [B, 1, 1, Sk]
// and [Sq, Sk] or full, fully masked rows (zeros, by the mask, a -inf
// float mask or both), head dims 8 to 128, sequences past one tile, f32,
// bf16 and f16, and gradients written over q, k and v.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "References.h"

using namespace cleave::rt::test;

namespace {

using CudaAttention = CudaTest;

std::string describe(const AttentionCase &c, int32_t dtype) {
  std::string s = std::string(dtypeName(dtype)) + " B" + std::to_string(c.b) +
                  " H" + std::to_string(c.h) + "/" + std::to_string(c.hkv) +
                  " Sq" + std::to_string(c.sq) + " Sk" + std::to_string(c.sk) +
                  " D" + std::to_string(c.d) + "/" + std::to_string(c.dv);
  if (c.causal)
    s += " causal";
  if (c.maskType >= 0)
    s += std::string(" ") + dtypeName(c.maskType) + " mask rank " +
         std::to_string(c.maskShape.size());
  return s;
}

/// How a case's mask is filled: random, or with query row 1 (of every
/// batch and head the mask has) fully masked.
enum class MaskFill { Random, FullyMaskedRow };

/// Runs attention (and with `grad`, attention_grad) of `c` on both
/// backends and compares every output.
void runCase(const AttentionCase &c, int32_t dtype, unsigned seed, bool grad,
             MaskFill fill = MaskFill::Random, bool inPlace = false) {
  Shape qs = {c.b, c.h, c.sq, c.d}, ks = {c.b, c.hkv, c.sk, c.d},
        vs = {c.b, c.hkv, c.sk, c.dv}, os = {c.b, c.h, c.sq, c.dv};
  DevicePair p(capacityFor({qs, ks, vs, os, os, qs, ks, vs, c.maskShape}));
  cleave_tensor q = p.add(dtype, qs);
  cleave_tensor k = p.add(dtype, ks);
  cleave_tensor v = p.add(dtype, vs);
  cleave_tensor out = p.add(dtype, os);
  cleave_tensor dout = p.add(dtype, os);
  cleave_tensor dq = p.add(dtype, qs);
  cleave_tensor dk = p.add(dtype, ks);
  cleave_tensor dv = p.add(dtype, vs);
  p.fill(q, -1, 1, seed);
  p.fill(k, -1, 1, seed + 1);
  p.fill(v, -1, 1, seed + 2);
  p.fill(dout, -1, 1, seed + 3);
  p.fill(out, 7, 8, seed + 4); // overwritten
  p.fill(dq, 7, 8, seed + 5);
  p.fill(dk, 7, 8, seed + 6);
  p.fill(dv, 7, 8, seed + 7);
  cleave_tensor mask;
  const cleave_tensor *maskPtr = nullptr;
  if (c.maskType >= 0) {
    mask = p.add(c.maskType, c.maskShape);
    maskPtr = &mask;
    // A boolean mask keeps about 3/4 of the keys.
    std::vector<double> mv = c.maskType == CLEAVE_I1
                                 ? p.fill(mask, -1, 3, seed + 8)
                                 : p.fill(mask, -2, 1, seed + 8);
    if (fill == MaskFill::FullyMaskedRow) {
      int64_t sk = c.maskShape.back();
      int64_t rows = product(c.maskShape) / sk;
      int64_t sq =
          c.maskShape.size() >= 2 ? c.maskShape[c.maskShape.size() - 2] : 1;
      for (int64_t r = 0; r < rows; ++r)
        if (r % sq == 1 % sq)
          for (int64_t j = 0; j < sk; ++j)
            mv[size_t(r * sk + j)] = c.maskType == CLEAVE_I1 ? 0 : -INFINITY;
      p.setValues(mask, mv);
    }
  }
  double scale = 1 / std::sqrt(double(c.d));
  std::string what = describe(c, dtype);
  CUDA_AND_CPU(p, attention, &q, &k, &v, maskPtr, &out, int32_t(c.causal),
               scale);
  p.expectMatch(out, "attention " + what);
  if (!grad)
    return;
  const cleave_tensor *gq = inPlace ? &q : &dq, *gk = inPlace ? &k : &dk,
                      *gv = inPlace ? &v : &dv;
  CUDA_AND_CPU(p, attention_grad, &q, &k, &v, maskPtr, &dout, gq, gk, gv,
               int32_t(c.causal), scale);
  what = "attention_grad " + what + (inPlace ? " in place" : "");
  p.expectMatch(*gq, what + " dq");
  p.expectMatch(*gk, what + " dk");
  p.expectMatch(*gv, what + " dv");
}

const AttentionCase kSmall[] = {
    {2, 4, 4, 9, 11, 16, 16, {}, -1, false},
    {2, 8, 2, 13, 13, 32, 24, {}, -1, false}, // GQA, Dv != D
    {1, 4, 1, 16, 16, 8, 8, {}, -1, true},    // multi-query, causal
    {2, 2, 1, 7, 12, 8, 8, {}, -1, true},     // causal, Sq < Sk
    {2, 2, 1, 12, 5, 8, 8, {}, -1, true},     // causal, Sq > Sk
    {3, 6, 2, 10, 10, 16, 16, {3, 1, 1, 10}, CLEAVE_I1, true}, // padding
    {2, 4, 4, 6, 9, 8, 8, {2, 4, 6, 9}, CLEAVE_I1, false},     // full i1
    {2, 4, 2, 6, 9, 8, 12, {6, 9}, CLEAVE_F32, false},         // additive
    {2, 4, 2, 6, 9, 8, 8, {2, 1, 6, 9}, CLEAVE_BF16, true},
};

TEST_F(CudaAttention, SmallCases) {
  unsigned seed = 1;
  for (const AttentionCase &c : kSmall)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16}) {
      runCase(c, dtype, seed, /*grad=*/true);
      seed += 10;
    }
}

TEST_F(CudaAttention, FullyMaskedRowsAreZero) {
  const AttentionCase cases[] = {
      {1, 2, 2, 3, 5, 4, 4, {3, 5}, CLEAVE_I1, false},
      {1, 2, 2, 3, 5, 4, 4, {3, 5}, CLEAVE_F32, false},
      {2, 4, 2, 8, 8, 16, 16, {2, 1, 8, 8}, CLEAVE_I1, true},
      {2, 4, 2, 70, 70, 32, 32, {2, 4, 70, 70}, CLEAVE_F32, true},
  };
  unsigned seed = 500;
  for (const AttentionCase &c : cases)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16}) {
      runCase(c, dtype, seed, /*grad=*/true, MaskFill::FullyMaskedRow);
      seed += 10;
    }
}

TEST_F(CudaAttention, LongSequencesAndHeadDims) {
  // Past one tile in both sequence dims, lengths that are not multiples of
  // a tile, head dims of GPT-2 (64) and Llama (128).
  const AttentionCase cases[] = {
      {2, 12, 4, 256, 256, 64, 64, {}, -1, true},
      {1, 8, 8, 129, 300, 128, 128, {}, -1, false},
      {1, 4, 2, 200, 200, 64, 64, {1, 1, 1, 200}, CLEAVE_I1, true},
      {1, 2, 1, 333, 97, 80, 48, {333, 97}, CLEAVE_F32, false},
  };
  unsigned seed = 700;
  for (const AttentionCase &c : cases)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16}) {
      runCase(c, dtype, seed, /*grad=*/true);
      seed += 10;
    }
}

TEST_F(CudaAttention, GradientsOverInputs) {
  runCase({2, 4, 2, 33, 33, 16, 16, {}, -1, true}, CLEAVE_F32, 900, true,
          MaskFill::Random, /*inPlace=*/true);
  runCase({1, 4, 4, 64, 80, 64, 64, {64, 80}, CLEAVE_I1, false}, CLEAVE_BF16,
          910, true, MaskFill::Random, /*inPlace=*/true);
}

} // namespace
