//===- MatmulTest.cpp - matmul, expert_matmul and linear ------------------===//
//
// Batched matmuls with broadcast batch dimensions, NumPy rank-1 operands,
// 16-bit and integer types, gemm (operands read transposed), and linear
// (matmul + bias + GELU in one kernel, with a transposed weight and the
// pre-activation output), against a
// float64 reference. Tolerance: 1e-4 relative plus 1e-4 * sqrt(K) absolute
// for f32 (sums of K products of values in [-1, 1]).
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

using namespace cleave::rt::test;

namespace {

/// Reference of a [..., m, k] x [..., k, n] matmul with broadcast batches;
/// rank-1 operands as NumPy treats them.
std::vector<double> refMatmul(const Shape &as, const std::vector<double> &a,
                              const Shape &bs, const std::vector<double> &b,
                              const Shape &outShape) {
  Shape a2 = as.size() == 1 ? Shape{1, as[0]} : as;
  Shape b2 = bs.size() == 1 ? Shape{bs[0], 1} : bs;
  int64_t m = a2[a2.size() - 2], k = a2.back(), n = b2.back();
  Shape aBatch(a2.begin(), a2.end() - 2), bBatch(b2.begin(), b2.end() - 2);
  Shape batch(outShape.begin(),
              outShape.begin() + std::max(aBatch.size(), bBatch.size()));
  int64_t batches = product(batch);
  std::vector<double> out(static_cast<size_t>(batches * m * n));
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t ab = broadcastIndex(batch, aBatch, bi);
    int64_t bb = broadcastIndex(batch, bBatch, bi);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < k; ++kk)
          s += a[size_t((ab * m + i) * k + kk)] *
               b[size_t((bb * k + kk) * n + j)];
        out[size_t((bi * m + i) * n + j)] = s;
      }
  }
  return out;
}

struct MatmulCase {
  Shape a, b, out;
};

TEST(RuntimeMatmul, F32Shapes) {
  const MatmulCase cases[] = {
      {{17, 33}, {33, 9}, {17, 9}},
      {{3, 8, 16}, {3, 16, 5}, {3, 8, 5}},
      {{2, 1, 4, 6}, {3, 6, 7}, {2, 3, 4, 7}}, // broadcast batches
      {{4, 10, 12}, {12, 20}, {4, 10, 20}},    // shared b: one folded sgemm
      {{12, 20}, {4, 20, 3}, {4, 12, 3}},      // shared a
      {{5}, {5, 3}, {3}},                      // rank-1 a
      {{2, 4, 5}, {5}, {2, 4}},                // rank-1 b
      {{5}, {5}, {}},                          // dot product
      {{3, 0}, {0, 4}, {3, 4}},                // K = 0: zeros
  };
  unsigned seed = 1;
  for (const MatmulCase &c : cases) {
    TestArena arena;
    cleave_tensor a = arena.add(CLEAVE_F32, c.a);
    cleave_tensor b = arena.add(CLEAVE_F32, c.b);
    cleave_tensor out = arena.add(CLEAVE_F32, c.out);
    arena.fill(out, 5, 6, 99); // must be overwritten
    std::vector<double> av = arena.fill(a, -1, 1, seed++);
    std::vector<double> bv = arena.fill(b, -1, 1, seed++);
    cleave_rt_matmul(arena.data(), &a, &b, &out);
    double k = double(c.a.back());
    expectClose(arena.values(out), refMatmul(c.a, av, c.b, bv, c.out), 1e-4,
                1e-4 * std::sqrt(k + 1));
  }
}

TEST(RuntimeMatmul, LargeF32ThreadSplits) {
  // Large enough to run on several threads: whole batches per thread, one
  // matrix split by rows, one split by columns, and a folded linear layer.
  const MatmulCase cases[] = {
      {{2, 130, 257}, {2, 257, 190}, {2, 130, 190}},
      {{700, 300}, {300, 64}, {700, 64}},
      {{64, 300}, {300, 700}, {64, 700}},
      {{3, 50, 200}, {200, 333}, {3, 50, 333}},
  };
  unsigned seed = 11;
  for (const MatmulCase &c : cases) {
    TestArena arena(size_t(16) << 20);
    cleave_tensor a = arena.add(CLEAVE_F32, c.a);
    cleave_tensor b = arena.add(CLEAVE_F32, c.b);
    cleave_tensor out = arena.add(CLEAVE_F32, c.out);
    std::vector<double> av = arena.fill(a, -1, 1, seed++);
    std::vector<double> bv = arena.fill(b, -1, 1, seed++);
    cleave_rt_matmul(arena.data(), &a, &b, &out);
    expectClose(arena.values(out), refMatmul(c.a, av, c.b, bv, c.out), 1e-4,
                1e-4 * std::sqrt(double(c.a.back())));
  }
}

TEST(RuntimeMatmul, F16AndBf16) {
  for (int32_t dtype : {CLEAVE_F16, CLEAVE_BF16}) {
    TestArena arena;
    cleave_tensor a = arena.add(dtype, {6, 32});
    cleave_tensor b = arena.add(dtype, {32, 10});
    cleave_tensor out = arena.add(dtype, {6, 10});
    std::vector<double> av = arena.fill(a, -1, 1, 21);
    std::vector<double> bv = arena.fill(b, -1, 1, 22);
    cleave_rt_matmul(arena.data(), &a, &b, &out);
    // f32 accumulation, one rounding of the result to the 16-bit type.
    double rtol = dtype == CLEAVE_F16 ? 1.0 / 2048 : 1.0 / 256;
    expectClose(arena.values(out),
                refMatmul({6, 32}, av, {32, 10}, bv, {6, 10}), rtol, 1e-3);
  }
}

TEST(RuntimeMatmul, I64) {
  TestArena arena;
  cleave_tensor a = arena.add(CLEAVE_I64, {2, 3, 4});
  cleave_tensor b = arena.add(CLEAVE_I64, {4, 5});
  cleave_tensor out = arena.add(CLEAVE_I64, {2, 3, 5});
  std::vector<double> av = arena.fill(a, -20, 20, 31);
  std::vector<double> bv = arena.fill(b, -20, 20, 32);
  cleave_rt_matmul(arena.data(), &a, &b, &out);
  expectClose(arena.values(out),
              refMatmul({2, 3, 4}, av, {4, 5}, bv, {2, 3, 5}), 0);
}

TEST(RuntimeMatmul, ExpertMatmul) {
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {4, 6, 8});
  cleave_tensor w = arena.add(CLEAVE_F32, {4, 8, 12});
  cleave_tensor out = arena.add(CLEAVE_F32, {4, 6, 12});
  std::vector<double> xv = arena.fill(x, -1, 1, 41);
  std::vector<double> wv = arena.fill(w, -1, 1, 42);
  cleave_rt_expert_matmul(arena.data(), &x, &w, &out);
  expectClose(arena.values(out),
              refMatmul({4, 6, 8}, xv, {4, 8, 12}, wv, {4, 6, 12}), 1e-4,
              1e-4 * 3);
  cleave_tensor bad = arena.add(CLEAVE_F32, {3, 8, 12});
  EXPECT_RT_FAIL(cleave_rt_expert_matmul(arena.data(), &x, &bad, &out),
                 "cleave_rt_expert_matmul: expects x \\[E,C,H\\]");
}

/// x [rows, k] W in float64, row-major; W is w ([k, n]) or w^T (w [n, k]).
std::vector<double> refRowsGemm(const Shape &xs, const std::vector<double> &x,
                                const Shape &ws, const std::vector<double> &w,
                                bool transposed) {
  int64_t k = xs.back(), n = transposed ? ws[0] : ws[1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < xs.size(); ++d)
    rows *= xs[d];
  std::vector<double> out(size_t(rows * n));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t kk = 0; kk < k; ++kk)
        out[size_t(i * n + j)] +=
            x[size_t(i * k + kk)] *
            w[size_t(transposed ? j * k + kk : kk * n + j)];
  return out;
}

/// out = act(x W + bias) in float64, and pre = x W + bias.
struct LinearRef {
  std::vector<double> out, pre;
};
LinearRef refLinear(const Shape &xs, const std::vector<double> &x,
                    const Shape &ws, const std::vector<double> &w,
                    const std::vector<double> &bias, bool transposed,
                    int32_t activation) {
  std::vector<double> product = refRowsGemm(xs, x, ws, w, transposed);
  size_t n = bias.size();
  LinearRef r;
  for (size_t i = 0; i < product.size(); ++i) {
    double v = product[i] + bias[i % n];
    r.pre.push_back(v);
      if (activation == CLEAVE_ACT_GELU_ERF)
        v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      else if (activation == CLEAVE_ACT_GELU_TANH)
        v = 0.5 * v *
            (1.0 + std::tanh(std::sqrt(2.0 / M_PI) *
                             (v + 0.044715 * v * v * v)));
    r.out.push_back(v);
  }
  return r;
}

struct LinearCase {
  Shape x, w;
  bool transposed;
};

/// x and the stored weight w of a fused GEMM in `arena`, filled with values
/// in [-1, 1) from seeds `seed` and `seed + 1` (`seed` moves past them), and
/// the shape of the GEMM's result.
struct GemmOperands {
  cleave_tensor x, w;
  std::vector<double> xv, wv;
  Shape out;

  GemmOperands(TestArena &arena, int32_t dtype, const LinearCase &c,
               unsigned &seed)
      : x(arena.add(dtype, c.x)), w(arena.add(dtype, c.w)), out(c.x) {
    xv = arena.fill(x, -1, 1, seed++);
    wv = arena.fill(w, -1, 1, seed++);
    out.back() = c.transposed ? c.w[0] : c.w[1];
  }
  int64_t n() const { return out.back(); }
};

TEST(RuntimeLinear, F32ShapesAndActivations) {
  const LinearCase cases[] = {
      {{2, 3, 16}, {16, 24}, false},
      {{40, 33}, {20, 33}, true},     // a PyTorch Linear's [n, k] weight
      {{700, 300}, {64, 300}, true},  // threads split the rows
      {{64, 300}, {700, 300}, true},  // threads split the columns
      {{64, 300}, {300, 700}, false}, // the same, untransposed
      {{3, 0}, {0, 5}, false},        // K = 0: act(bias)
      {{1, 7}, {9, 7}, true},
  };
  unsigned seed = 60;
  for (const LinearCase &c : cases)
    for (int32_t act :
         {CLEAVE_ACT_NONE, CLEAVE_ACT_GELU_ERF, CLEAVE_ACT_GELU_TANH}) {
      TestArena arena(size_t(16) << 20);
      GemmOperands g(arena, CLEAVE_F32, c, seed);
      cleave_tensor bias = arena.add(CLEAVE_F32, {g.n()});
      cleave_tensor out = arena.add(CLEAVE_F32, g.out);
      cleave_tensor pre = arena.add(CLEAVE_F32, g.out);
      arena.fill(out, 5, 6, 99); // must be overwritten
      arena.fill(pre, 5, 6, 98);
      std::vector<double> bv = arena.fill(bias, -1, 1, seed++);
      bool withPre = act != CLEAVE_ACT_NONE;
      cleave_rt_linear(arena.data(), &g.x, &g.w, &bias, &out,
                       withPre ? &pre : nullptr, c.transposed, act);
      LinearRef ref = refLinear(c.x, g.xv, c.w, g.wv, bv, c.transposed, act);
      double atol = 1e-4 * std::sqrt(double(c.x.back()) + 1);
      SCOPED_TRACE("x [" + std::to_string(c.x.front()) + ", ..., " +
                   std::to_string(c.x.back()) + "] activation " +
                   std::to_string(act) +
                   (c.transposed ? " transposed" : ""));
      expectClose(arena.values(out), ref.out, 1e-4, atol);
      if (withPre)
        expectClose(arena.values(pre), ref.pre, 1e-4, atol);
    }
}

TEST(RuntimeLinear, WithoutPreLeavesItAlone) {
  TestArena arena;
  const LinearCase c = {{5, 8}, {8, 6}, false};
  unsigned seed = 70;
  GemmOperands g(arena, CLEAVE_F32, c, seed);
  cleave_tensor bias = arena.add(CLEAVE_F32, {6});
  cleave_tensor out = arena.add(CLEAVE_F32, g.out);
  std::vector<double> bv = arena.fill(bias, -1, 1, seed);
  cleave_rt_linear(arena.data(), &g.x, &g.w, &bias, &out, nullptr, 0,
                   CLEAVE_ACT_GELU_TANH);
  expectClose(
      arena.values(out),
      refLinear(c.x, g.xv, c.w, g.wv, bv, false, CLEAVE_ACT_GELU_TANH).out,
      1e-4, 1e-4 * 3);
}

TEST(RuntimeLinear, F16AndBf16) {
  // A transposed 16-bit weight is converted while it is transposed; the
  // large one splits the transpose over threads.
  const LinearCase cases[] = {
      {{2, 6, 32}, {24, 32}, true},
      {{2, 6, 32}, {32, 24}, false},
      {{50, 300}, {700, 300}, true},
  };
  for (int32_t dtype : {CLEAVE_F16, CLEAVE_BF16})
    for (const LinearCase &c : cases) {
      TestArena arena(size_t(16) << 20);
      unsigned seed = 73;
      GemmOperands g(arena, dtype, c, seed);
      cleave_tensor bias = arena.add(dtype, {g.n()});
      cleave_tensor out = arena.add(dtype, g.out);
      cleave_tensor pre = arena.add(dtype, g.out);
      std::vector<double> bv = arena.fill(bias, -1, 1, seed);
      cleave_rt_linear(arena.data(), &g.x, &g.w, &bias, &out, &pre,
                       c.transposed, CLEAVE_ACT_GELU_TANH);
      // f32 accumulation, one rounding of each output to the 16-bit type.
      double rtol = dtype == CLEAVE_F16 ? 1.0 / 2048 : 1.0 / 256;
      double atol = std::max(1e-3, 1e-4 * std::sqrt(double(c.x.back()) + 1));
      LinearRef ref = refLinear(c.x, g.xv, c.w, g.wv, bv, c.transposed,
                                CLEAVE_ACT_GELU_TANH);
      SCOPED_TRACE(std::string(dtype == CLEAVE_F16 ? "f16" : "bf16") + " n " +
                   std::to_string(g.n()) + (c.transposed ? " transposed" : ""));
      expectClose(arena.values(out), ref.out, rtol, atol);
      expectClose(arena.values(pre), ref.pre, rtol, atol);
    }
}

TEST(RuntimeLinear, OutputMayAliasTheInput) {
  // out over x (k == n): the GEMM must read x before the result lands.
  TestArena arena;
  const LinearCase c = {{9, 16}, {16, 16}, true};
  unsigned seed = 76;
  GemmOperands g(arena, CLEAVE_F32, c, seed);
  cleave_tensor bias = arena.add(CLEAVE_F32, {16});
  std::vector<double> bv = arena.fill(bias, -1, 1, seed);
  cleave_rt_linear(arena.data(), &g.x, &g.w, &bias, &g.x, nullptr, 1,
                   CLEAVE_ACT_NONE);
  expectClose(arena.values(g.x),
              refLinear(c.x, g.xv, c.w, g.wv, bv, true, CLEAVE_ACT_NONE).out,
              1e-4, 1e-4 * 4);
}

TEST(RuntimeLinear, BadOperandsFail) {
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {4, 8});
  cleave_tensor w = arena.add(CLEAVE_F32, {6, 8});
  cleave_tensor bias = arena.add(CLEAVE_F32, {6});
  cleave_tensor badBias = arena.add(CLEAVE_F32, {8});
  cleave_tensor out = arena.add(CLEAVE_F32, {4, 6});
  cleave_tensor pre = arena.add(CLEAVE_F32, {4, 6});
  cleave_tensor ints = arena.add(CLEAVE_I64, {4, 8});
  char *a = arena.data();
  EXPECT_RT_FAIL(cleave_rt_linear(a, &x, &w, &badBias, &out, nullptr, 1, 0),
                 "cleave_rt_linear: expects x \\[..., k\\], w \\[n, k\\], "
                 "bias \\[n\\], out \\[..., n\\], got x \\[4, 8\\], w "
                 "\\[6, 8\\], bias \\[8\\], out \\[4, 6\\]");
  EXPECT_RT_FAIL(cleave_rt_linear(a, &x, &w, &bias, &out, nullptr, 0, 0),
                 "cleave_rt_linear: expects x \\[..., k\\], w \\[k, n\\]");
  EXPECT_RT_FAIL(cleave_rt_linear(a, &x, &w, &bias, &out, &pre, 1, 0),
                 "cleave_rt_linear: pre is only defined with an activation");
  EXPECT_RT_FAIL(cleave_rt_linear(a, &x, &w, &bias, &out, nullptr, 1, 7),
                 "cleave_rt_linear: unknown activation 7");
  EXPECT_RT_FAIL(cleave_rt_linear(a, &ints, &w, &bias, &out, nullptr, 1, 0),
                 "cleave_rt_linear: expects float operands, got i64");
}

/// dz = gelu'(pre) * (dy W) and its column sums, in float64.
LinearRef refGeluGrad(const Shape &dys, const std::vector<double> &dy,
                      const Shape &ws, const std::vector<double> &w,
                      const std::vector<double> &pre, bool transposed,
                      int32_t activation) {
  std::vector<double> product = refRowsGemm(dys, dy, ws, w, transposed);
  size_t n = size_t(transposed ? ws[0] : ws[1]);
  LinearRef r; // out: dz; pre: the column sums
  r.pre.assign(n, 0.0);
  for (size_t i = 0; i < product.size(); ++i) {
    double g = product[i], v = pre[i], d;
    if (activation == CLEAVE_ACT_GELU_ERF) {
      d = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0))) +
          v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI);
    } else {
      double c = std::sqrt(2.0 / M_PI), u = c * (v + 0.044715 * v * v * v);
      double t = std::tanh(u);
      d = 0.5 * (1.0 + t) +
          0.5 * v * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * v * v);
    }
    r.out.push_back(g * d);
    r.pre[i % n] += g * d;
  }
  return r;
}

TEST(RuntimeLinear, MatmulGeluGrad) {
  const LinearCase cases[] = {
      {{2, 8, 32}, {128, 32}, true}, // GPT-2's MLP shape, scaled down
      {{40, 33}, {33, 20}, false},
      {{700, 64}, {300, 64}, true}, // threads split the rows and columns
      {{3, 0}, {5, 0}, true},       // K = 0: zeros
  };
  unsigned seed = 100;
  for (const LinearCase &c : cases)
    for (int32_t act : {CLEAVE_ACT_GELU_ERF, CLEAVE_ACT_GELU_TANH})
      for (bool keepdim : {false, true}) {
        TestArena arena(size_t(16) << 20);
        GemmOperands g(arena, CLEAVE_F32, c, seed); // x is dy
        int64_t n = g.n();
        Shape dbShape(g.out.size(), 1);
        dbShape.back() = n;
        if (!keepdim)
          dbShape = {n};
        cleave_tensor pre = arena.add(CLEAVE_F32, g.out);
        cleave_tensor dz = arena.add(CLEAVE_F32, g.out);
        cleave_tensor db = arena.add(CLEAVE_F32, dbShape);
        arena.fill(dz, 5, 6, 99);
        arena.fill(db, 5, 6, 98);
        std::vector<double> pv = arena.fill(pre, -3, 3, seed++);
        cleave_rt_matmul_gelu_grad(arena.data(), &g.x, &g.w, &pre, &dz, &db,
                                   c.transposed, act);
        LinearRef ref =
            refGeluGrad(c.x, g.xv, c.w, g.wv, pv, c.transposed, act);
        SCOPED_TRACE("dy [" + std::to_string(c.x.front()) + ", ..., " +
                     std::to_string(c.x.back()) + "] activation " +
                     std::to_string(act));
        // gelu' is at most 1.13 in magnitude.
        double atol = 2e-4 * std::sqrt(double(c.x.back()) + 1);
        expectClose(arena.values(dz), ref.out, 1e-4, atol);
        int64_t rows = product(g.out) / std::max<int64_t>(n, 1);
        expectClose(arena.values(db), ref.pre, 1e-4,
                    atol * std::sqrt(double(rows)));
      }
}

TEST(RuntimeLinear, MatmulGeluGradBf16WithoutBiasGrad) {
  TestArena arena;
  const LinearCase c = {{4, 6, 16}, {16, 24}, false};
  unsigned seed = 110;
  GemmOperands g(arena, CLEAVE_BF16, c, seed); // x is dy
  cleave_tensor pre = arena.add(CLEAVE_BF16, g.out);
  cleave_tensor dz = arena.add(CLEAVE_BF16, g.out);
  std::vector<double> pv = arena.fill(pre, -3, 3, seed);
  cleave_rt_matmul_gelu_grad(arena.data(), &g.x, &g.w, &pre, &dz, nullptr, 0,
                             CLEAVE_ACT_GELU_TANH);
  expectClose(
      arena.values(dz),
      refGeluGrad(c.x, g.xv, c.w, g.wv, pv, false, CLEAVE_ACT_GELU_TANH).out,
      1.0 / 256, 2e-3);
}

TEST(RuntimeLinear, MatmulGeluGradBadOperandsFail) {
  TestArena arena;
  cleave_tensor dy = arena.add(CLEAVE_F32, {4, 8});
  cleave_tensor w = arena.add(CLEAVE_F32, {8, 6});
  cleave_tensor pre = arena.add(CLEAVE_F32, {4, 6});
  cleave_tensor badPre = arena.add(CLEAVE_F32, {4, 5});
  cleave_tensor dz = arena.add(CLEAVE_F32, {4, 6});
  cleave_tensor db = arena.add(CLEAVE_F32, {5});
  char *a = arena.data();
  EXPECT_RT_FAIL(
      cleave_rt_matmul_gelu_grad(a, &dy, &w, &badPre, &dz, nullptr, 0, 1),
      "cleave_rt_matmul_gelu_grad: expects dy \\[..., k\\], w \\[k, "
      "n\\], pre and dz \\[..., n\\], got dy \\[4, 8\\], w \\[8, "
      "6\\], pre \\[4, 5\\], dz \\[4, 6\\]");
  EXPECT_RT_FAIL(cleave_rt_matmul_gelu_grad(a, &dy, &w, &pre, &dz, &db, 0, 1),
                 "cleave_rt_matmul_gelu_grad: expects dbias with 6 elements "
                 "along its last dimension, got \\[5\\]");
  EXPECT_RT_FAIL(
      cleave_rt_matmul_gelu_grad(a, &dy, &w, &pre, &dz, nullptr, 0, 0),
      "cleave_rt_matmul_gelu_grad: expects a GELU activation, got 0");
}

/// op(a) op(b) in float64, from a stored as [..., m, k] (or [k, m] with
/// ta) and b as [k, n] (or [n, k] with tb): refRowsGemm on a, transposed
/// first with ta.
std::vector<double> refGemm(const Shape &as, const std::vector<double> &a,
                            const Shape &bs, const std::vector<double> &b,
                            bool ta, bool tb) {
  if (!ta)
    return refRowsGemm(as, a, bs, b, tb);
  int64_t k = as[0], m = as[1];
  std::vector<double> at(a.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t kk = 0; kk < k; ++kk)
      at[size_t(i * k + kk)] = a[size_t(kk * m + i)];
  return refRowsGemm({m, k}, at, bs, b, tb);
}

struct GemmCase {
  Shape a, b;
  bool ta, tb;
};

/// cleave_rt_gemm in every transpose combination, over shapes that split
/// the rows or the columns over the threads, with folded rows and K = 0;
/// f32 within the matmul tolerance, f16 and bf16 within one rounding (as
/// RuntimeLinear.F16AndBf16).
TEST(RuntimeGemm, TransposedOperands) {
  const GemmCase cases[] = {
      {{17, 33}, {33, 9}, false, false},
      {{33, 17}, {33, 9}, true, false},
      {{17, 33}, {9, 33}, false, true},
      {{33, 17}, {9, 33}, true, true},
      {{2, 3, 16}, {24, 16}, false, true}, // rows folded: a tied LM head
      {{512, 96}, {512, 80}, true, false}, // a weight gradient dy^T x
      {{96, 512}, {700, 512}, false, true}, // threads split the columns
      {{300, 700}, {300, 64}, true, false}, // threads split the rows
      {{0, 5}, {0, 4}, true, false},        // K = 0: zeros
  };
  unsigned seed = 200;
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_F16, CLEAVE_BF16})
    for (const GemmCase &c : cases) {
      TestArena arena(size_t(16) << 20);
      cleave_tensor a = arena.add(dtype, c.a), b = arena.add(dtype, c.b);
      int64_t n = c.tb ? c.b[0] : c.b[1];
      Shape outShape = c.ta ? Shape{c.a[1], n} : c.a;
      outShape.back() = n;
      cleave_tensor out = arena.add(dtype, outShape);
      arena.fill(out, 5, 6, 99); // must be overwritten
      std::vector<double> av = arena.fill(a, -1, 1, seed++);
      std::vector<double> bv = arena.fill(b, -1, 1, seed++);
      cleave_rt_gemm(arena.data(), &a, &b, &out, nullptr, c.ta, c.tb);
      double k = double(c.ta ? c.a[0] : c.a.back());
      std::vector<double> want = refGemm(c.a, av, c.b, bv, c.ta, c.tb);
      SCOPED_TRACE(::testing::Message()
                   << "case " << (&c - cases) << " ta " << c.ta << " tb "
                   << c.tb << " dtype " << dtype);
      if (dtype == CLEAVE_F32)
        expectClose(arena.values(out), want, 1e-4, 1e-4 * std::sqrt(k + 1));
      else // f32 accumulation, one rounding to the 16-bit type
        expectClose(arena.values(out), want,
                    dtype == CLEAVE_F16 ? 1.0 / 2048 : 1.0 / 256,
                    std::max(1e-3, 1e-4 * std::sqrt(k + 1)));
    }
}

/// 16-bit operands into an f32 out (a weight gradient for the optimizer):
/// the f32 accumulators, unrounded, within the f32 tolerance.
TEST(RuntimeGemm, SixteenBitOperandsIntoF32) {
  for (int32_t dtype : {CLEAVE_BF16, CLEAVE_F16}) {
    TestArena arena;
    cleave_tensor a = arena.add(dtype, {96, 40}), b = arena.add(dtype, {96, 24});
    cleave_tensor out = arena.add(CLEAVE_F32, {40, 24});
    std::vector<double> av = arena.fill(a, -1, 1, 220);
    std::vector<double> bv = arena.fill(b, -1, 1, 221);
    cleave_rt_gemm(arena.data(), &a, &b, &out, nullptr, 1, 0);
    expectClose(arena.values(out), refGemm({96, 40}, av, {96, 24}, bv, true, false),
                1e-4, 1e-4 * std::sqrt(97.0));
  }
}

/// out may be an input: it is read from a copy.
TEST(RuntimeGemm, OutputMayAliasAnInput) {
  TestArena arena;
  cleave_tensor a = arena.add(CLEAVE_F32, {6, 6}), b = arena.add(CLEAVE_F32, {6, 6});
  std::vector<double> av = arena.fill(a, -1, 1, 210);
  std::vector<double> bv = arena.fill(b, -1, 1, 211);
  cleave_rt_gemm(arena.data(), &a, &b, &a, nullptr, 1, 0);
  expectClose(arena.values(a), refGemm({6, 6}, av, {6, 6}, bv, true, false),
              1e-5, 1e-5);
}

/// The sums of a's k rows (a weight gradient's bias gradient), beside the
/// GEMM: for f32, f16 and bf16 operands, a product in their type or f32
/// and the sums in either, as [m] or [1, 1, m]; K = 0 gives zeros and
/// N = 0 still sums. Within f32 tolerance, or one rounding for 16-bit
/// sums.
TEST(RuntimeGemm, BiasGradient) {
  struct Case {
    Shape a, b, dbias;
    bool tb;
  };
  const Case cases[] = {
      {{33, 17}, {33, 9}, {17}, false},
      {{33, 17}, {9, 33}, {1, 1, 17}, true},
      {{700, 96}, {700, 40}, {96}, false}, // threads split the sums
      {{0, 5}, {0, 4}, {5}, false},        // K = 0: zero sums
      {{6, 5}, {6, 0}, {5}, false},        // N = 0: sums, no product
  };
  unsigned seed = 230;
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_F16, CLEAVE_BF16})
    for (int32_t outType : {dtype, int32_t(CLEAVE_F32)})
      for (int32_t sumType : {dtype, outType})
        for (const Case &c : cases) {
          TestArena arena(size_t(8) << 20);
          cleave_tensor a = arena.add(dtype, c.a), b = arena.add(dtype, c.b);
          int64_t n = c.tb ? c.b[0] : c.b[1];
          cleave_tensor out = arena.add(outType, {c.a[1], n});
          cleave_tensor dbias = arena.add(sumType, c.dbias);
          arena.fill(dbias, 5, 6, 98); // must be overwritten
          std::vector<double> av = arena.fill(a, -1, 1, seed++);
          std::vector<double> bv = arena.fill(b, -1, 1, seed++);
          cleave_rt_gemm(arena.data(), &a, &b, &out, &dbias, 1, c.tb);
          SCOPED_TRACE(::testing::Message()
                       << "case " << (&c - cases) << " dtypes " << dtype << " "
                       << outType << " " << sumType);
          double k = double(c.a[0]);
          std::vector<double> sums(size_t(c.a[1]), 0.0);
          for (int64_t r = 0; r < c.a[0]; ++r)
            for (int64_t j = 0; j < c.a[1]; ++j)
              sums[size_t(j)] += av[size_t(r * c.a[1] + j)];
          double rel = sumType == CLEAVE_F32   ? 1e-5
                       : sumType == CLEAVE_F16 ? 1.0 / 2048
                                               : 1.0 / 256;
          expectClose(arena.values(dbias), sums, rel,
                      std::max(1e-5, 1e-6 * std::sqrt(k + 1)));
          double outRel = outType == CLEAVE_F32   ? 1e-4
                          : outType == CLEAVE_F16 ? 1.0 / 2048
                                                  : 1.0 / 256;
          expectClose(arena.values(out), refGemm(c.a, av, c.b, bv, true, c.tb),
                      outRel, std::max(1e-3, 1e-4 * std::sqrt(k + 1)));
        }
}

TEST(RuntimeGemm, BadOperandsFail) {
  TestArena arena;
  cleave_tensor a = arena.add(CLEAVE_F32, {8, 4}), b = arena.add(CLEAVE_F32, {8, 6});
  cleave_tensor out = arena.add(CLEAVE_F32, {4, 6});
  cleave_tensor a3 = arena.add(CLEAVE_F32, {2, 8, 4});
  cleave_tensor i = arena.add(CLEAVE_I64, {8, 4});
  char *d = arena.data();
  EXPECT_RT_FAIL(cleave_rt_gemm(d, &a, &b, &out, nullptr, 0, 0),
                 "cleave_rt_gemm: expects a \\[\\.\\.\\., m, k\\], b "
                 "\\[k, n\\], out \\[\\.\\.\\., m, n\\], got a "
                 "\\[8, 4\\], b \\[8, 6\\], out \\[4, 6\\]");
  EXPECT_RT_FAIL(cleave_rt_gemm(d, &a3, &b, &out, nullptr, 1, 0),
                 "cleave_rt_gemm: expects a \\[k, m\\], b \\[k, n\\]");
  EXPECT_RT_FAIL(cleave_rt_gemm(d, &a, &b, &out, nullptr, 1, 1),
                 "cleave_rt_gemm: expects a \\[k, m\\], b \\[n, k\\]");
  EXPECT_RT_FAIL(cleave_rt_gemm(d, &i, &b, &out, nullptr, 1, 0),
                 "cleave_rt_gemm: expects float operands, got i64");
  cleave_tensor db = arena.add(CLEAVE_F32, {4}),
                db6 = arena.add(CLEAVE_F32, {6});
  cleave_tensor rows = arena.add(CLEAVE_F32, {4, 8});
  EXPECT_RT_FAIL(cleave_rt_gemm(d, &rows, &b, &out, &db, 0, 0),
                 "cleave_rt_gemm: dbias \\(the sum of a's rows\\) needs "
                 "transpose_a");
  EXPECT_RT_FAIL(cleave_rt_gemm(d, &a, &b, &out, &db6, 1, 0),
                 "cleave_rt_gemm: expects dbias with 4 elements along its "
                 "last dimension, got \\[6\\]");
  cleave_tensor dbi = arena.add(CLEAVE_I64, {4});
  EXPECT_RT_FAIL(cleave_rt_gemm(d, &a, &b, &out, &dbi, 1, 0),
                 "cleave_rt_gemm: expects float operands, got i64");
}

TEST(RuntimeMatmul, ShapeMismatchFails) {
  TestArena arena;
  cleave_tensor a = arena.add(CLEAVE_F32, {3, 4});
  cleave_tensor b = arena.add(CLEAVE_F32, {5, 6});
  cleave_tensor out = arena.add(CLEAVE_F32, {3, 6});
  EXPECT_RT_FAIL(cleave_rt_matmul(arena.data(), &a, &b, &out),
                 "error: cleave_rt_matmul: cannot multiply a \\[3, 4\\] by b "
                 "\\[5, 6\\] into out \\[3, 6\\]");
}

} // namespace
