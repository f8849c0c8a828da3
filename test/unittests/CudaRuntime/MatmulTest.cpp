//===- MatmulTest.cpp - CUDA matmul and expert_matmul against the CPU -----===//
//
// matmul on the GPU against the CPU backend (OpenBLAS): plain and batched,
// broadcast batch dims, a shared operand, NumPy rank-1 operands, K = 0,
// GPT-2 small's layer shapes, f16/bf16, integer (exact, in i64) and mixed
// operand dtypes; expert_matmul. f32 results must stay within 1e-4: a
// backend that multiplied in TF32 would fail here.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

using namespace cleave::rt::test;

namespace {

using CudaMatmul = CudaTest;

struct MatmulCase {
  Shape a, b, out;
};

const MatmulCase kShapes[] = {
    {{17, 33}, {33, 9}, {17, 9}},
    {{3, 8, 16}, {3, 16, 5}, {3, 8, 5}},
    {{2, 1, 4, 6}, {3, 6, 7}, {2, 3, 4, 7}}, // broadcast batches
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

} // namespace
