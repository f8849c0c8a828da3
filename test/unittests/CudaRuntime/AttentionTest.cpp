//===- AttentionTest.cpp - CUDA attention and its gradient vs the CPU -----===//
//
// attention and attention_grad on the GPU against the CPU backend: plain
// and grouped-query heads, causal with Sq < Sk, Sq == Sk and Sq > Sk (top-
// left aligned), boolean and additive masks broadcast from [B, 1, 1, Sk]
// and [Sq, Sk] or full, fully masked rows (zeros, by the mask, a -inf
// float mask or both), head dims 8 to 128, sequences past one tile, f32,
// bf16 and f16, and gradients written over q, k and v. The blocks of ring
// attention: attention_block over three key blocks in ring order, merged
// (causal by position, zigzag-like positions, out and lse over their
// inputs), and attention_block_grad of each block with the final output
// and log-sum-exp, f32 and bf16.
//
// Most shapes run the fused kernels (FlashAttention.cu); the FusedKernel
// tests aim at their tiling (32 rows and keys: several tiles, partial last
// tiles, causal tiles skipped, every head dim bound), check that their
// backward gives the same bits twice, and that the materialized
// implementation still serves head dims past 128 and
// CLEAVE_CUDA_ATTENTION=materialized.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "References.h"

#include <cstdlib>

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

/// The tensors of a case in a DevicePair: seeded random inputs, and
/// outputs filled with values that every kernel must overwrite.
struct AttentionOperands {
  DevicePair p;
  cleave_tensor q, k, v, out, dout, dq, dk, dv, mask;
  const cleave_tensor *maskPtr = nullptr;
  double scale;

  AttentionOperands(const AttentionCase &c, int32_t dtype, unsigned seed,
                    MaskFill fill)
      : p(capacityFor({{c.b, c.h, c.sq, c.d},
                       {c.b, c.hkv, c.sk, c.d},
                       {c.b, c.hkv, c.sk, c.dv},
                       {c.b, c.h, c.sq, c.dv},
                       {c.b, c.h, c.sq, c.dv},
                       {c.b, c.h, c.sq, c.d},
                       {c.b, c.hkv, c.sk, c.d},
                       {c.b, c.hkv, c.sk, c.dv},
                       c.maskShape})),
        scale(1 / std::sqrt(double(c.d))) {
    Shape qs = {c.b, c.h, c.sq, c.d}, ks = {c.b, c.hkv, c.sk, c.d},
          vs = {c.b, c.hkv, c.sk, c.dv}, os = {c.b, c.h, c.sq, c.dv};
    q = p.add(dtype, qs);
    k = p.add(dtype, ks);
    v = p.add(dtype, vs);
    out = p.add(dtype, os);
    dout = p.add(dtype, os);
    dq = p.add(dtype, qs);
    dk = p.add(dtype, ks);
    dv = p.add(dtype, vs);
    p.fill(q, -1, 1, seed);
    p.fill(k, -1, 1, seed + 1);
    p.fill(v, -1, 1, seed + 2);
    p.fill(dout, -1, 1, seed + 3);
    p.fill(out, 7, 8, seed + 4); // overwritten
    p.fill(dq, 7, 8, seed + 5);
    p.fill(dk, 7, 8, seed + 6);
    p.fill(dv, 7, 8, seed + 7);
    if (c.maskType < 0)
      return;
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
};

/// Runs attention (and with `grad`, attention_grad) of `c` on both
/// backends and compares every output.
void runCase(const AttentionCase &c, int32_t dtype, unsigned seed, bool grad,
             MaskFill fill = MaskFill::Random, bool inPlace = false) {
  AttentionOperands o(c, dtype, seed, fill);
  DevicePair &p = o.p;
  std::string what = describe(c, dtype);
  CUDA_AND_CPU(p, attention, &o.q, &o.k, &o.v, o.maskPtr, &o.out,
               int32_t(c.causal), o.scale);
  p.expectMatch(o.out, "attention " + what);
  if (!grad)
    return;
  const cleave_tensor *gq = inPlace ? &o.q : &o.dq,
                      *gk = inPlace ? &o.k : &o.dk,
                      *gv = inPlace ? &o.v : &o.dv;
  CUDA_AND_CPU(p, attention_grad, &o.q, &o.k, &o.v, o.maskPtr, &o.dout, gq, gk,
               gv, int32_t(c.causal), o.scale);
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

// The fused kernels work on tiles of 32 query rows and 32 keys, with
// register tiles for head dims up to 32, 64 or 128.
TEST_F(CudaAttention, FusedKernelTiles) {
  const AttentionCase cases[] = {
      // Several tiles, both lengths past a multiple of the tile.
      {2, 3, 3, 70, 45, 16, 16, {}, -1, false},
      // Causal with Sq < Sk and Sq > Sk: key tiles past the query tile
      // skipped, and (Sq > Sk) key tiles that no query row sees.
      {2, 4, 2, 67, 100, 32, 32, {}, -1, true},
      {1, 2, 1, 100, 37, 8, 8, {}, -1, true},
      // Head dims at the bounds and across them (D != Dv).
      {1, 2, 1, 33, 65, 64, 64, {}, -1, false},
      {1, 2, 2, 40, 31, 128, 128, {}, -1, true},
      {1, 3, 1, 35, 64, 40, 72, {}, -1, false},
      {1, 2, 1, 31, 33, 128, 16, {}, -1, true},
      // Every mask kind and broadcast, GQA groups of 3 and 4.
      {2, 6, 2, 40, 50, 16, 16, {2, 6, 40, 50}, CLEAVE_I1, true},
      {2, 8, 2, 33, 70, 32, 32, {2, 1, 1, 70}, CLEAVE_I1, false},
      {1, 4, 1, 45, 45, 24, 24, {45, 45}, CLEAVE_F32, true},
      {2, 3, 1, 36, 40, 16, 8, {2, 1, 36, 40}, CLEAVE_BF16, false},
      {1, 2, 2, 34, 66, 16, 16, {1, 66}, CLEAVE_F16, true},
  };
  unsigned seed = 1100;
  for (const AttentionCase &c : cases)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16}) {
      runCase(c, dtype, seed, /*grad=*/true);
      seed += 10;
    }
}

TEST_F(CudaAttention, FusedKernelFullyMaskedRows) {
  // Row 1 of every head masked, in tiles that also hold live rows, with
  // causal tiles skipped around them.
  const AttentionCase cases[] = {
      {2, 4, 2, 40, 70, 32, 32, {2, 4, 40, 70}, CLEAVE_I1, true},
      {1, 2, 1, 35, 35, 64, 64, {35, 35}, CLEAVE_F32, false},
  };
  unsigned seed = 1300;
  for (const AttentionCase &c : cases)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_F16}) {
      runCase(c, dtype, seed, /*grad=*/true, MaskFill::FullyMaskedRow);
      seed += 10;
    }
}

TEST_F(CudaAttention, EmptySequences) {
  // No keys: zeros out and dq; no queries: zero dk and dv.
  runCase({1, 2, 1, 5, 0, 8, 8, {}, -1, false}, CLEAVE_F32, 1400, true);
  runCase({1, 2, 1, 0, 5, 8, 8, {}, -1, true}, CLEAVE_F32, 1410, true);
}

/// The device bytes of `t`.
std::vector<char> deviceBytes(DevicePair &p, const cleave_tensor &t) {
  std::vector<char> bytes(size_t(TestArena::numElements(t)) *
                          byteSize(t.dtype));
  cleave_rt_arena_read(p.deviceArena(), t.offset, bytes.data(),
                       int64_t(bytes.size()));
  return bytes;
}

TEST_F(CudaAttention, FusedGradientsAreDeterministic) {
  SKIP_IN_CPU_ONLY_MODE();
  // GQA (dk and dv sum 4 query heads), a mask and causal tiles.
  AttentionCase c{2, 8, 2, 75, 90, 64, 64, {2, 1, 75, 90}, CLEAVE_F32, true};
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16}) {
    AttentionOperands o(c, dtype, 1500, MaskFill::Random);
    std::vector<char> first[3];
    for (int run = 0; run < 2; ++run) {
      // Fresh stale values each time: any element left unwritten differs.
      o.p.fill(o.dq, 7, 8, 1510 + run);
      o.p.fill(o.dk, 7, 8, 1520 + run);
      o.p.fill(o.dv, 7, 8, 1530 + run);
      cleave_rt_attention_grad(o.p.deviceArena(), &o.q, &o.k, &o.v, o.maskPtr,
                               &o.dout, &o.dq, &o.dk, &o.dv, 1, o.scale);
      const cleave_tensor *grads[3] = {&o.dq, &o.dk, &o.dv};
      for (int g = 0; g < 3; ++g) {
        std::vector<char> bytes = deviceBytes(o.p, *grads[g]);
        if (run == 0)
          first[g] = bytes;
        else
          EXPECT_TRUE(bytes == first[g])
              << dtypeName(dtype) << " gradient " << g << " differs";
      }
    }
  }
}

/// Sets CLEAVE_CUDA_ATTENTION for its lifetime.
class AttentionImplementation {
public:
  explicit AttentionImplementation(const char *value) {
    setenv("CLEAVE_CUDA_ATTENTION", value, 1);
  }
  ~AttentionImplementation() { unsetenv("CLEAVE_CUDA_ATTENTION"); }
};

TEST_F(CudaAttention, MaterializedFallback) {
  {
    AttentionImplementation forced("materialized");
    runCase({2, 4, 2, 40, 50, 32, 32, {2, 1, 40, 50}, CLEAVE_I1, true},
            CLEAVE_F32, 1600, true);
    runCase({1, 4, 2, 33, 20, 16, 16, {33, 20}, CLEAVE_F32, false}, CLEAVE_BF16,
            1610, true, MaskFill::FullyMaskedRow);
  }
  {
    AttentionImplementation fused("fused");
    runCase({1, 2, 1, 20, 30, 16, 16, {}, -1, true}, CLEAVE_F16, 1620, true);
  }
  // Head dims past the fused kernels' 128 take the materialized path.
  runCase({1, 2, 1, 20, 37, 136, 160, {}, -1, true}, CLEAVE_F32, 1630, true);
}

// The tensor-core kernels (16-bit q, k, v; head dims multiples of 16 up to
// 128), forward and backward: partial 64-row query and key tiles, GQA,
// Dv != D, causal with Sq != Sk, both mask kinds, fully masked rows, in
// bf16 and f16; the same cases on the CUDA cores (fused-simt) as well.
TEST_F(CudaAttention, TensorCoreKernels) {
  const AttentionCase cases[] = {
      {2, 4, 2, 70, 100, 64, 64, {2, 1, 70, 100}, CLEAVE_I1, true},
      {1, 2, 1, 130, 65, 128, 128, {}, -1, false},
      {2, 3, 3, 20, 20, 16, 32, {1, 20}, CLEAVE_F32, false},
      {1, 4, 1, 64, 64, 32, 16, {}, -1, true},
  };
  unsigned seed = 1800;
  for (const char *implementation : {"fused", "fused-simt"}) {
    AttentionImplementation forced(implementation);
    SCOPED_TRACE(implementation);
    for (const AttentionCase &c : cases)
      for (int32_t dtype : {CLEAVE_BF16, CLEAVE_F16})
        runCase(c, dtype, seed++, true);
    runCase(cases[0], CLEAVE_BF16, seed++, true, MaskFill::FullyMaskedRow);
  }
}

TEST_F(CudaAttention, RingBlocks) {
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16})
    for (bool causal : {true, false}) {
      int64_t b = 2, h = 4, hkv = 2, sq = 40, len = 40, d = 32, blocks = 3;
      DevicePair p(capacityFor({{b, h, sq, d}, {b, h, sq, d}, {b, h, sq, d},
                                {b, h, sq, d}, {b, hkv, len * blocks, d},
                                {b, hkv, len * blocks, d}}));
      cleave_tensor q = p.add(dtype, {b, h, sq, d});
      cleave_tensor dout = p.add(dtype, {b, h, sq, d});
      cleave_tensor dq = p.add(dtype, {b, h, sq, d});
      cleave_tensor out = p.add(dtype, {b, h, sq, d});
      cleave_tensor lse = p.add(CLEAVE_F32, {b, h, sq});
      cleave_tensor qPos = p.add(CLEAVE_I64, {sq});
      p.fill(q, -2, 2, 1900);
      p.fill(dout, -1, 1, 1901);
      // This device holds chunks 1 and 4 of 6 chunks of 20 (zigzag-like).
      std::vector<double> qp;
      for (int64_t i = 0; i < sq; ++i)
        qp.push_back(double(i < 20 ? 20 + i : 80 + i - 20));
      p.setValues(qPos, qp);
      struct Block {
        cleave_tensor k, v, pos, dk, dv;
      };
      std::vector<Block> ring;
      for (int64_t n = 0; n < blocks; ++n) {
        Block blk{p.add(dtype, {b, hkv, len, d}), p.add(dtype, {b, hkv, len, d}),
                  p.add(CLEAVE_I64, {len}), p.add(dtype, {b, hkv, len, d}),
                  p.add(dtype, {b, hkv, len, d})};
        p.fill(blk.k, -2, 2, 1910 + unsigned(n));
        p.fill(blk.v, -1, 1, 1920 + unsigned(n));
        std::vector<double> kp;
        for (int64_t j = 0; j < len; ++j)
          kp.push_back(double(j < 20 ? 20 * n + j : 20 * (5 - n) + j - 20));
        p.setValues(blk.pos, kp);
        ring.push_back(blk);
      }
      std::string what = std::string("ring blocks ") + dtypeName(dtype) +
                         (causal ? " causal" : "");
      for (int64_t n = 0; n < blocks; ++n)
        CUDA_AND_CPU(p, attention_block, &q, &ring[size_t(n)].k,
                     &ring[size_t(n)].v, n ? &out : nullptr,
                     n ? &lse : nullptr, &qPos, &ring[size_t(n)].pos, &out,
                     &lse, int32_t(causal), 0.2);
      p.expectMatch(out, what + " out");
      p.expectMatch(lse, what + " lse");
      for (int64_t n = 0; n < blocks; ++n) {
        const Block &blk = ring[size_t(n)];
        CUDA_AND_CPU(p, attention_block_grad, &q, &blk.k, &blk.v, &out, &lse,
                     &dout, &qPos, &blk.pos, &dq, &blk.dk, &blk.dv,
                     int32_t(causal), 0.2);
        std::string step = what + " block " + std::to_string(n);
        p.expectMatch(dq, step + " dq");
        p.expectMatch(blk.dk, step + " dk");
        p.expectMatch(blk.dv, step + " dv");
      }
    }
}

void attentionWithBadImplementation() {
  AttentionImplementation bad("flash");
  runCase({1, 1, 1, 2, 2, 4, 4, {}, -1, false}, CLEAVE_F32, 1700, false);
}

TEST_F(CudaAttention, UnknownImplementationFails) {
  SKIP_IN_CPU_ONLY_MODE();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(attentionWithBadImplementation(),
               "CLEAVE_CUDA_ATTENTION must be 'fused', 'fused-simt' or "
               "'materialized', got 'flash'");
}

} // namespace
