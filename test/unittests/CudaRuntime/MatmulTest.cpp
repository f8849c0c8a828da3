//===- MatmulTest.cpp - CUDA matmul and expert_matmul against the CPU -----===//
//
// matmul on the GPU against the CPU backend (OpenBLAS): plain and batched,
// broadcast batch dims, a shared operand, NumPy rank-1 operands, K = 0,
// GPT-2 small's layer shapes, f16/bf16, integer (exact, in i64) and mixed
// operand dtypes; expert_matmul; linear (bias and GELU epilogues) through
// cuBLASLt and through its unfused path, with and without the
// pre-activation. f32 results must stay within 1e-4: a backend that
// multiplied in TF32 would fail here.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include <cstdlib>

using namespace cleave::rt::test;

namespace {

using CudaMatmul = CudaTest;

struct MatmulCase {
  Shape a, b, out;
};

const MatmulCase kShapes[] = {
    {{17, 33}, {33, 9}, {17, 9}},
    {{3, 8, 16}, {3, 16, 5}, {3, 8, 5}},
    // Broadcast batches (pointer arrays): 16-bit C batches 56 bytes apart
    // go through f32 (cuBLAS's pointer-array alignment); 128 bytes apart
    // run in 16 bits.
    {{2, 1, 4, 6}, {3, 6, 7}, {2, 3, 4, 7}},
    {{2, 1, 8, 8}, {3, 8, 8}, {2, 3, 8, 8}},
    {{4, 10, 12}, {12, 20}, {4, 10, 20}},    // shared b
    {{12, 20}, {4, 20, 3}, {4, 12, 3}},      // shared a
    {{5}, {5, 3}, {3}},                      // rank-1 a
    {{2, 4, 5}, {5}, {2, 4}},                // rank-1 b
    {{5}, {5}, {}},                          // dot product
    {{3, 0}, {0, 4}, {3, 4}},                // K = 0: zeros
    {{1, 1}, {1, 1}, {1, 1}},
    {{130, 257}, {257, 190}, {130, 190}},                    // odd sizes
    {{512, 768}, {768, 2304}, {512, 2304}},                  // a qkv projection
    {{2, 12, 128, 64}, {2, 12, 64, 128}, {2, 12, 128, 128}}, // q k^T
    {{4, 96, 1024}, {1024, 96}, {4, 96, 96}},                // long K
};

TEST_F(CudaMatmul, FloatShapes) {
  unsigned seed = 1;
  for (const MatmulCase &c : kShapes)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16}) {
      DevicePair p(capacityFor({c.a, c.b, c.out}));
      cleave_tensor a = p.add(dtype, c.a);
      cleave_tensor b = p.add(dtype, c.b);
      cleave_tensor out = p.add(dtype, c.out);
      p.fill(a, -1, 1, seed++);
      p.fill(b, -1, 1, seed++);
      p.fill(out, 5, 6, seed++); // overwritten (also when K = 0)
      CUDA_AND_CPU(p, matmul, &a, &b, &out);
      std::string what = std::string("matmul ") + dtypeName(dtype) + " a " +
                         std::to_string(c.a.size()) + "-d [..., " +
                         std::to_string(c.a.empty() ? 0 : c.a.back()) + "] b " +
                         std::to_string(c.b.size()) + "-d [..., " +
                         std::to_string(c.b.empty() ? 0 : c.b.back()) + "]";
      p.expectMatch(out, what);
    }
}

/// cleave_rt_gemm in every transpose combination (a weight gradient's
/// dy^T x, a tied LM head's x W^T with folded rows), every float dtype and
/// a mixed one, against the CPU backend.
TEST_F(CudaMatmul, GemmTransposedOperands) {
  struct GemmCase {
    Shape a, b;
    int32_t ta, tb;
  };
  const GemmCase cases[] = {
      {{17, 33}, {33, 9}, 0, 0},
      {{33, 17}, {33, 9}, 1, 0},
      {{2, 8, 96}, {50, 96}, 0, 1},
      {{33, 17}, {9, 33}, 1, 1},
      {{1024, 768}, {1024, 256}, 1, 0}, // dy^T x, long K
      {{0, 5}, {0, 4}, 1, 0},           // K = 0: zeros
  };
  unsigned seed = 300;
  for (const GemmCase &c : cases)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16}) {
      int64_t n = c.tb ? c.b[0] : c.b[1];
      Shape outShape = c.ta ? Shape{c.a[1], n} : c.a;
      outShape.back() = n;
      // b in a's type or f32 (mixed); for 16-bit a, also out in f32 (the
      // f32 accumulators stored unrounded).
      for (auto [bType, outType] :
           {std::pair(dtype, dtype), std::pair(int32_t(CLEAVE_F32), dtype),
            std::pair(dtype, int32_t(CLEAVE_F32))}) {
        DevicePair p(capacityFor({c.a, c.b, outShape}));
        cleave_tensor a = p.add(dtype, c.a);
        cleave_tensor b = p.add(bType, c.b);
        cleave_tensor out = p.add(outType, outShape);
        p.fill(a, -1, 1, seed++);
        p.fill(b, -1, 1, seed++);
        p.fill(out, 5, 6, seed++); // overwritten (also when K = 0)
        CUDA_AND_CPU(p, gemm, &a, &b, &out, nullptr, c.ta, c.tb);
        p.expectMatch(out, std::string("gemm ") + dtypeName(dtype) + " b " +
                               dtypeName(bType) + " out " +
                               dtypeName(outType) + " case " +
                               std::to_string(&c - cases));
      }
    }
}

TEST_F(CudaMatmul, IntegerAndMixed) {
  for (int32_t dtype : {CLEAVE_I64, CLEAVE_I32}) {
    DevicePair p;
    cleave_tensor a = p.add(dtype, {2, 3, 40});
    cleave_tensor b = p.add(CLEAVE_I64, {40, 5});
    cleave_tensor out = p.add(dtype, {2, 3, 5});
    p.fill(a, -20, 20, 50);
    p.fill(b, -20, 20, 51);
    CUDA_AND_CPU(p, matmul, &a, &b, &out);
    p.expectMatch(out, std::string("matmul ") + dtypeName(dtype));
  }
  // bf16 activations times f32 weights into f32 and into bf16.
  DevicePair p;
  cleave_tensor a = p.add(CLEAVE_BF16, {33, 64});
  cleave_tensor b = p.add(CLEAVE_F32, {64, 48});
  cleave_tensor out = p.add(CLEAVE_F32, {33, 48});
  cleave_tensor out16 = p.add(CLEAVE_BF16, {33, 48});
  p.fill(a, -1, 1, 52);
  p.fill(b, -1, 1, 53);
  CUDA_AND_CPU(p, matmul, &a, &b, &out);
  CUDA_AND_CPU(p, matmul, &a, &b, &out16);
  p.expectMatch(out, "matmul bf16 x f32 -> f32");
  p.expectMatch(out16, "matmul bf16 x f32 -> bf16");
}

TEST_F(CudaMatmul, OutAliasesOperand) {
  // A square product written over its left operand.
  DevicePair p;
  cleave_tensor a = p.add(CLEAVE_F32, {96, 96});
  cleave_tensor b = p.add(CLEAVE_F32, {96, 96});
  p.fill(a, -1, 1, 60);
  p.fill(b, -1, 1, 61);
  CUDA_AND_CPU(p, matmul, &a, &b, &a);
  p.expectMatch(a, "matmul in place");
}

TEST_F(CudaMatmul, ExpertMatmul) {
  unsigned seed = 70;
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16}) {
    for (const Shape &s : {Shape{4, 6, 8, 12}, Shape{8, 64, 256, 512}}) {
      int64_t e = s[0], c = s[1], h = s[2], f = s[3];
      DevicePair p(capacityFor({{e, c, h}, {e, h, f}, {e, c, f}}));
      cleave_tensor x = p.add(dtype, {e, c, h});
      cleave_tensor w = p.add(dtype, {e, h, f});
      cleave_tensor out = p.add(dtype, {e, c, f});
      p.fill(x, -1, 1, seed++);
      p.fill(w, -1, 1, seed++);
      CUDA_AND_CPU(p, expert_matmul, &x, &w, &out);
      p.expectMatch(out, std::string("expert_matmul ") + dtypeName(dtype) +
                             " E " + std::to_string(e) + " H " +
                             std::to_string(h));
    }
  }
}

/// Sets CLEAVE_CUDA_LINEAR for its lifetime.
class LinearImplementation {
public:
  explicit LinearImplementation(const char *value) {
    setenv("CLEAVE_CUDA_LINEAR", value, 1);
  }
  ~LinearImplementation() { unsetenv("CLEAVE_CUDA_LINEAR"); }
};

struct LinearCase {
  Shape x, w;
  bool transposed;
};

/// Every activation, with and without pre, in every float dtype: n = 96
/// takes cuBLASLt's epilogues (n % 8 == 0 allows the aux output), n = 90
/// keeps them only without pre, K = 0 and erf GELU take the unfused path.
void runLinearCases(const char *implementation) {
  const LinearCase cases[] = {
      {{2, 8, 32}, {96, 32}, true},
      {{40, 33}, {33, 90}, false},
      {{512, 768}, {3072, 768}, true}, // GPT-2 small's MLP
      {{3, 0}, {0, 16}, false},
  };
  unsigned seed = 80;
  for (const LinearCase &c : cases)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16})
      for (int32_t act :
           {CLEAVE_ACT_NONE, CLEAVE_ACT_GELU_ERF, CLEAVE_ACT_GELU_TANH})
        for (bool withPre : {false, true}) {
          if (withPre && act == CLEAVE_ACT_NONE)
            continue;
          int64_t n = c.transposed ? c.w[0] : c.w[1];
          Shape outShape(c.x);
          outShape.back() = n;
          DevicePair p(capacityFor({c.x, c.w, {n}, outShape, outShape}));
          cleave_tensor x = p.add(dtype, c.x);
          cleave_tensor w = p.add(dtype, c.w);
          cleave_tensor bias = p.add(dtype, {n});
          cleave_tensor out = p.add(dtype, outShape);
          cleave_tensor pre = p.add(dtype, outShape);
          p.fill(x, -1, 1, seed++);
          p.fill(w, -1, 1, seed++);
          p.fill(bias, -1, 1, seed++);
          p.fill(out, 5, 6, seed++);
          CUDA_AND_CPU(p, linear, &x, &w, &bias, &out,
                       withPre ? &pre : nullptr, c.transposed ? 1 : 0, act);
          std::string what = std::string("linear ") + implementation + " " +
                             dtypeName(dtype) + " k " +
                             std::to_string(c.x.back()) + " n " +
                             std::to_string(n) + " activation " +
                             std::to_string(act) + (withPre ? " pre" : "");
          p.expectMatch(out, what);
          if (withPre)
            p.expectMatch(pre, what + " (pre)");
        }
}

/// matmul_gelu_grad with and without the bias gradient (as [n] and kept
/// [1, ..., n]), both GELU forms, every float dtype.
void runGeluGradCases(const char *implementation) {
  const LinearCase cases[] = {
      {{2, 8, 32}, {128, 32}, true},   // DGELU_BGRAD
      {{40, 33}, {33, 90}, false},     // n % 8 != 0: unfused
      {{512, 3072}, {768, 3072}, true}, // GPT-2 small's MLP, backward
      {{2, 700, 24}, {24, 72}, false}, // 1400 rows: 3 splits of the bias sum
      {{3, 0}, {0, 16}, false},
  };
  unsigned seed = 120;
  for (const LinearCase &c : cases)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16})
      for (int32_t act : {CLEAVE_ACT_GELU_ERF, CLEAVE_ACT_GELU_TANH})
        for (int biasGrad : {0, 1, 2}) { // none, [n], kept dims
          int64_t n = c.transposed ? c.w[0] : c.w[1];
          Shape outShape(c.x);
          outShape.back() = n;
          Shape dbShape = {n};
          if (biasGrad == 2) {
            dbShape.assign(outShape.size(), 1);
            dbShape.back() = n;
          }
          DevicePair p(capacityFor({c.x, c.w, outShape, outShape, {n}}));
          cleave_tensor dy = p.add(dtype, c.x);
          cleave_tensor w = p.add(dtype, c.w);
          cleave_tensor pre = p.add(dtype, outShape);
          cleave_tensor dz = p.add(dtype, outShape);
          cleave_tensor db = p.add(dtype, dbShape);
          p.fill(dy, -1, 1, seed++);
          p.fill(w, -1, 1, seed++);
          p.fill(pre, -3, 3, seed++);
          p.fill(dz, 5, 6, seed++);
          CUDA_AND_CPU(p, matmul_gelu_grad, &dy, &w, &pre, &dz,
                       biasGrad ? &db : nullptr, c.transposed ? 1 : 0, act);
          std::string what = std::string("matmul_gelu_grad ") +
                             implementation + " " + dtypeName(dtype) + " k " +
                             std::to_string(c.x.back()) + " n " +
                             std::to_string(n) + " activation " +
                             std::to_string(act) + " bias grad " +
                             std::to_string(biasGrad);
          p.expectMatch(dz, what);
          if (biasGrad)
            p.expectMatch(db, what + " (bias grad)");
        }
}

/// gemm with the bias gradient (the sums of a's rows) of a weight gradient
/// dy^T x: every float dtype, the product in it or f32 and the sums in the
/// product's type (BGRADB) or the operands' (unfused), as [m] and kept
/// [1, 1, m]; K = 0 (zero sums) and N = 0 (sums alone).
void runGemmBiasGradCases(const char *implementation) {
  struct Case {
    Shape a, b;
    int32_t tb;
  };
  const Case cases[] = {
      {{33, 17}, {33, 9}, 0},
      {{520, 128}, {520, 64}, 0},  // 2 splits of the unfused sum
      {{1400, 24}, {72, 1400}, 1}, // 3 splits, b read transposed
      {{0, 5}, {0, 4}, 0},
      {{6, 5}, {6, 0}, 0},
  };
  unsigned seed = 340;
  for (const Case &c : cases)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16})
      for (int32_t outType : {dtype, int32_t(CLEAVE_F32)})
        for (int32_t sumType : {outType, dtype})
          for (bool kept : {false, true}) {
            int64_t m = c.a[1], n = c.tb ? c.b[0] : c.b[1];
            Shape dbShape = kept ? Shape{1, 1, m} : Shape{m};
            DevicePair p(capacityFor({c.a, c.b, {m, n}, {m}}));
            cleave_tensor a = p.add(dtype, c.a);
            cleave_tensor b = p.add(dtype, c.b);
            cleave_tensor out = p.add(outType, {m, n});
            cleave_tensor db = p.add(sumType, dbShape);
            p.fill(a, -1, 1, seed++);
            p.fill(b, -1, 1, seed++);
            p.fill(out, 5, 6, seed++);
            p.fill(db, 5, 6, seed++); // overwritten (also when K = 0)
            CUDA_AND_CPU(p, gemm, &a, &b, &out, &db, 1, c.tb);
            std::string what =
                std::string("gemm bias grad ") + implementation + " " +
                dtypeName(dtype) + " out " + dtypeName(outType) + " sums " +
                dtypeName(sumType) + " case " + std::to_string(&c - cases);
            p.expectMatch(out, what);
            p.expectMatch(db, what + " (bias grad)");
          }
}

TEST_F(CudaMatmul, LinearFused) {
  runLinearCases("fused");
  runGeluGradCases("fused");
  runGemmBiasGradCases("fused");
}

TEST_F(CudaMatmul, LinearUnfused) {
  LinearImplementation forced("unfused");
  runLinearCases("unfused");
  runGeluGradCases("unfused");
  runGemmBiasGradCases("unfused");
}

TEST_F(CudaMatmul, LinearMixedDtypesAndAliasing) {
  // bf16 activations with an f32 weight and bias (the unfused path).
  {
    DevicePair p;
    cleave_tensor x = p.add(CLEAVE_BF16, {33, 64});
    cleave_tensor w = p.add(CLEAVE_F32, {48, 64});
    cleave_tensor bias = p.add(CLEAVE_F32, {48});
    cleave_tensor out = p.add(CLEAVE_BF16, {33, 48});
    cleave_tensor pre = p.add(CLEAVE_F32, {33, 48});
    p.fill(x, -1, 1, 90);
    p.fill(w, -1, 1, 91);
    p.fill(bias, -1, 1, 92);
    CUDA_AND_CPU(p, linear, &x, &w, &bias, &out, &pre, 1,
                 CLEAVE_ACT_GELU_TANH);
    p.expectMatch(out, "linear mixed dtypes");
    p.expectMatch(pre, "linear mixed dtypes (pre)");
  }
  // out written over x (k == n).
  DevicePair p;
  cleave_tensor x = p.add(CLEAVE_F32, {64, 64});
  cleave_tensor w = p.add(CLEAVE_F32, {64, 64});
  cleave_tensor bias = p.add(CLEAVE_F32, {64});
  p.fill(x, -1, 1, 93);
  p.fill(w, -1, 1, 94);
  p.fill(bias, -1, 1, 95);
  CUDA_AND_CPU(p, linear, &x, &w, &bias, &x, nullptr, 0, CLEAVE_ACT_NONE);
  p.expectMatch(x, "linear in place");
}

TEST_F(CudaMatmul, LinearBadImplementationFails) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        LinearImplementation bad("cublas");
        DevicePair p;
        cleave_tensor x = p.add(CLEAVE_F32, {4, 8});
        cleave_tensor w = p.add(CLEAVE_F32, {8, 8});
        cleave_tensor bias = p.add(CLEAVE_F32, {8});
        cleave_tensor out = p.add(CLEAVE_F32, {4, 8});
        CUDA_AND_CPU(p, linear, &x, &w, &bias, &out, nullptr, 0,
                     CLEAVE_ACT_NONE);
      },
      "CLEAVE_CUDA_LINEAR must be 'fused' or 'unfused', got 'cublas'");
}

} // namespace
