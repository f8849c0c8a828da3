//===- ElementwiseTest.cpp - CUDA elementwise kernels against the CPU -----===//
//
// copy, constant, iota, every unary and binary op, compare, where, cast and
// unary_grad on the GPU against the CPU backend (CudaTestUtil.h has the
// tolerances): f32, f16 and bf16, integer and i1 paths, mixed operand
// dtypes, NumPy broadcasting (size-1 dims, missing leading dims, rank-0
// operands), in-place outputs, and the special values of casts (NaN, inf,
// saturation, i32 wrap-around).
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

using namespace cleave::rt::test;

namespace {

using CudaElementwise = CudaTest;

const int32_t kFloatTypes[] = {CLEAVE_F32, CLEAVE_F16, CLEAVE_BF16};

void expectElementwise(DevicePair &p, const cleave_tensor &t,
                       const std::string &what) {
  p.expectMatch(t, what, elementwiseTolerance(t.dtype));
}

TEST_F(CudaElementwise, CopyConstantIota) {
  DevicePair p;
  cleave_tensor x = p.add(CLEAVE_F32, {2, 6});
  cleave_tensor reshaped = p.add(CLEAVE_F32, {3, 4});
  cleave_tensor half = p.add(CLEAVE_F16, {12});
  cleave_tensor ints = p.add(CLEAVE_I32, {4, 3});
  p.fill(x, -5, 5, 1);
  p.fill(reshaped, 7, 8, 2); // must be overwritten
  CUDA_AND_CPU(p, copy, &x, &reshaped);
  CUDA_AND_CPU(p, copy, &x, &half);
  CUDA_AND_CPU(p, copy, &x, &ints);
  p.expectMatch(reshaped, "copy reshape");
  p.expectMatch(half, "copy f32 -> f16");
  p.expectMatch(ints, "copy f32 -> i32");

  int64_t data[6] = {4, -3, 2, 9, int64_t(1) << 40, -7};
  uint16_t bf[6] = {0x3f80, 0xbf00, 0x4049, 0x0000, 0x7f80, 0xc2c8};
  cleave_tensor c = p.add(CLEAVE_I64, {2, 3});
  cleave_tensor cb = p.add(CLEAVE_BF16, {3, 2});
  CUDA_AND_CPU(p, constant, &c, static_cast<const void *>(data));
  CUDA_AND_CPU(p, constant, &cb, static_cast<const void *>(bf));
  p.expectMatch(c, "constant i64");
  p.expectMatch(cb, "constant bf16", {0, 0});

  for (int64_t dim = 0; dim < 3; ++dim)
    for (int32_t dtype : {CLEAVE_I64, CLEAVE_I32, CLEAVE_F32, CLEAVE_BF16}) {
      cleave_tensor io = p.add(dtype, {3, 5, 70});
      CUDA_AND_CPU(p, iota, &io, dim);
      p.expectMatch(io,
                    "iota dim " + std::to_string(dim) + " " + dtypeName(dtype),
                    {0, 0});
    }
}

/// Inputs of a unary op that stay in its domain (log, sqrt: positive).
std::pair<double, double> unaryRange(int32_t op) {
  switch (op) {
  case CLEAVE_LOG:
  case CLEAVE_SQRT:
  case CLEAVE_RSQRT:
    return {0.05, 6};
  case CLEAVE_RECIPROCAL:
    return {0.2, 3};
  case CLEAVE_EXP:
    return {-6, 6};
  default:
    return {-4, 4};
  }
}

TEST_F(CudaElementwise, EveryUnaryOp) {
  for (int32_t op = CLEAVE_NEG; op <= CLEAVE_GELU_TANH; ++op)
    for (int32_t dtype : kFloatTypes) {
      DevicePair p;
      auto [lo, hi] = unaryRange(op);
      cleave_tensor x = p.add(dtype, {37, 53});
      cleave_tensor out = p.add(dtype, {37, 53});
      cleave_tensor wide = p.add(CLEAVE_F32, {5, 37, 53}); // broadcast
      p.fill(x, lo, hi, 10 + unsigned(op));
      CUDA_AND_CPU(p, unary, op, &x, &out);
      std::string what = "unary " + std::to_string(op) + " " + dtypeName(dtype);
      expectElementwise(p, out, what);
      CUDA_AND_CPU(p, unary, op, &x, &wide);
      expectElementwise(p, wide, what + " broadcast to f32 [5, 37, 53]");
      CUDA_AND_CPU(p, unary, op, &x, &x); // in place
      expectElementwise(p, x, what + " in place");
    }
}

TEST_F(CudaElementwise, UnaryOutOfDomainGivesNaN) {
  DevicePair p;
  cleave_tensor x = p.add(CLEAVE_F32, {64});
  cleave_tensor out = p.add(CLEAVE_F32, {64});
  p.fill(x, -3, 3, 30);
  for (int32_t op :
       {CLEAVE_LOG, CLEAVE_SQRT, CLEAVE_RSQRT, CLEAVE_RECIPROCAL}) {
    CUDA_AND_CPU(p, unary, op, &x, &out);
    expectElementwise(p, out, "unary " + std::to_string(op) + " on [-3, 3)");
  }
}

TEST_F(CudaElementwise, IntegerUnary) {
  for (int32_t dtype : {CLEAVE_I64, CLEAVE_I32}) {
    DevicePair p;
    cleave_tensor x = p.add(dtype, {9, 11});
    cleave_tensor out = p.add(dtype, {9, 11});
    p.fill(x, -1000, 1000, 31);
    for (int32_t op : {CLEAVE_NEG, CLEAVE_ABS, CLEAVE_RELU}) {
      CUDA_AND_CPU(p, unary, op, &x, &out);
      p.expectMatch(out, std::string("integer unary ") + std::to_string(op) +
                             " " + dtypeName(dtype));
    }
  }
  // Negating the lowest i64 wraps.
  DevicePair p;
  cleave_tensor x = p.add(CLEAVE_I64, {2});
  cleave_tensor out = p.add(CLEAVE_I64, {2});
  int64_t lowest[2] = {INT64_MIN, INT64_MAX};
  CUDA_AND_CPU(p, constant, &x, static_cast<const void *>(lowest));
  CUDA_AND_CPU(p, unary, CLEAVE_NEG, &x, &out);
  EXPECT_EQ(p.hostArena().ptr<int64_t>(out)[0], INT64_MIN);
  p.expectMatch(out, "neg of the i64 bounds");
}

/// Broadcasting shapes of the binary tests: a, b, out.
struct BroadcastCase {
  Shape a, b, out;
};
const BroadcastCase kBroadcasts[] = {
    {{6, 35}, {6, 35}, {6, 35}},
    {{4, 1, 6}, {5, 1}, {4, 5, 6}}, // both operands broadcast
    {{3, 4, 5}, {}, {3, 4, 5}},     // rank-0 b
    {{}, {2, 7}, {2, 7}},           // rank-0 a
    {{1, 9}, {8, 1}, {8, 9}},
    {{2, 3, 1, 4}, {3, 5, 4}, {2, 3, 5, 4}},
    {{517, 300}, {300}, {517, 300}}, // large: many blocks
};

std::pair<double, double> binaryRangeB(int32_t op) {
  switch (op) {
  case CLEAVE_DIV:
    return {0.25, 3};
  case CLEAVE_POW:
    return {-2.5, 2.5};
  default:
    return {-3, 3};
  }
}

TEST_F(CudaElementwise, EveryBinaryOpBroadcast) {
  unsigned seed = 100;
  for (int32_t op = CLEAVE_ADD; op <= CLEAVE_MIN; ++op)
    for (int32_t dtype : kFloatTypes)
      for (const BroadcastCase &c : kBroadcasts) {
        DevicePair p;
        cleave_tensor a = p.add(dtype, c.a);
        cleave_tensor b = p.add(dtype, c.b);
        cleave_tensor out = p.add(dtype, c.out);
        auto [lo, hi] = binaryRangeB(op);
        // pow: positive bases (negative ones with fractional exponents
        // are NaN, tested below).
        p.fill(a, op == CLEAVE_POW ? 0.1 : -3, 3, seed++);
        std::vector<double> bv = p.fill(b, lo, hi, seed++);
        if (op == CLEAVE_DIV) // divisors of both signs, away from zero
          for (size_t i = 0; i < bv.size(); i += 2)
            bv[i] = -bv[i];
        p.setValues(b, bv);
        p.fill(out, 9, 10, seed++);
        CUDA_AND_CPU(p, binary, op, &a, &b, &out);
        expectElementwise(p, out,
                          "binary " + std::to_string(op) + " " +
                              dtypeName(dtype) + " out " +
                              std::to_string(c.out.size()) + "-d");
      }
}

TEST_F(CudaElementwise, BinarySpecialValuesAndInPlace) {
  DevicePair p;
  cleave_tensor a = p.add(CLEAVE_F32, {12});
  cleave_tensor b = p.add(CLEAVE_F32, {12});
  cleave_tensor out = p.add(CLEAVE_F32, {12});
  // NaN propagation of max/min, negative bases, zero divisors, infinities.
  p.setValues(a, {NAN, 1, -2, 0, 0, INFINITY, -INFINITY, -8, 3, NAN, 2, -1});
  p.setValues(b,
              {1, NAN, 0.5, 0, -1, 2, INFINITY, 1.0 / 3, 0, NAN, -INFINITY, 3});
  for (int32_t op = CLEAVE_ADD; op <= CLEAVE_MIN; ++op) {
    CUDA_AND_CPU(p, binary, op, &a, &b, &out);
    expectElementwise(p, out, "binary special values " + std::to_string(op));
  }
  // out aliases a.
  cleave_tensor x = p.add(CLEAVE_F32, {40, 30});
  cleave_tensor y = p.add(CLEAVE_F32, {30});
  p.fill(x, -1, 1, 150);
  p.fill(y, -1, 1, 151);
  CUDA_AND_CPU(p, binary, CLEAVE_MUL, &x, &y, &x);
  expectElementwise(p, x, "binary mul in place");
}

TEST_F(CudaElementwise, IntegerAndMixedBinary) {
  unsigned seed = 200;
  for (int32_t op = CLEAVE_ADD; op <= CLEAVE_MIN; ++op) {
    DevicePair p;
    cleave_tensor a = p.add(CLEAVE_I64, {4, 1, 6});
    cleave_tensor b = p.add(CLEAVE_I32, {5, 1});
    cleave_tensor out = p.add(CLEAVE_I64, {4, 5, 6});
    cleave_tensor out32 = p.add(CLEAVE_I32, {4, 5, 6});
    cleave_tensor mixed = p.add(CLEAVE_F32, {4, 5, 6});
    cleave_tensor fa = p.add(CLEAVE_F32, {4, 1, 6});
    bool pow = op == CLEAVE_POW;
    p.fill(a, pow ? -4 : -1000, pow ? 5 : 1000, seed++);
    // Nonzero divisors of both signs (a zero one is fatal).
    std::vector<double> bv = p.fill(b, 1, pow ? 6 : 40, seed++);
    for (size_t i = 0; i < bv.size(); i += 2)
      bv[i] = pow ? -bv[i] + 3 : -bv[i];
    p.setValues(b, bv);
    p.fill(fa, -5, 5, seed++);
    std::string what = "binary " + std::to_string(op);
    CUDA_AND_CPU(p, binary, op, &a, &b, &out);
    p.expectMatch(out, what + " i64 x i32 -> i64");
    CUDA_AND_CPU(p, binary, op, &a, &b, &out32);
    p.expectMatch(out32, what + " i64 x i32 -> i32");
    // A float out computes in f32.
    CUDA_AND_CPU(p, binary, op, &fa, &b, &mixed);
    expectElementwise(p, mixed, what + " f32 x i32 -> f32");
  }
  // Wrapping: products past the i64 range.
  DevicePair p;
  cleave_tensor a = p.add(CLEAVE_I64, {3});
  cleave_tensor out = p.add(CLEAVE_I64, {3});
  int64_t big[3] = {INT64_MAX, INT64_MIN, int64_t(3) << 61};
  CUDA_AND_CPU(p, constant, &a, static_cast<const void *>(big));
  for (int32_t op : {CLEAVE_ADD, CLEAVE_MUL, CLEAVE_SUB}) {
    CUDA_AND_CPU(p, binary, op, &a, &a, &out);
    p.expectMatch(out, "i64 wrap-around " + std::to_string(op));
  }
}

TEST_F(CudaElementwise, BooleanPaths) {
  DevicePair p;
  cleave_tensor a = p.add(CLEAVE_I1, {3, 1, 7});
  cleave_tensor b = p.add(CLEAVE_I1, {4, 7});
  cleave_tensor out = p.add(CLEAVE_I1, {3, 4, 7});
  cleave_tensor f = p.add(CLEAVE_F32, {3, 4, 7});
  cleave_tensor prod = p.add(CLEAVE_F32, {3, 4, 7});
  p.fill(a, 0, 1, 300);
  p.fill(b, 0, 1, 301);
  p.fill(f, -2, 2, 302);
  for (int32_t op :
       {CLEAVE_ADD, CLEAVE_MUL, CLEAVE_MAX, CLEAVE_MIN, CLEAVE_SUB}) {
    CUDA_AND_CPU(p, binary, op, &a, &b, &out);
    p.expectMatch(out, "i1 binary " + std::to_string(op));
  }
  // A float times a boolean mask.
  CUDA_AND_CPU(p, binary, CLEAVE_MUL, &f, &a, &prod);
  expectElementwise(p, prod, "f32 * i1");
  // Casts to and from i1: nonzero is true (0.5 and NaN included).
  cleave_tensor special = p.add(CLEAVE_F32, {6});
  cleave_tensor bits = p.add(CLEAVE_I1, {6});
  cleave_tensor back = p.add(CLEAVE_BF16, {6});
  p.setValues(special, {0, 0.5, -0.0, NAN, -3, INFINITY});
  CUDA_AND_CPU(p, cast, &special, &bits);
  CUDA_AND_CPU(p, cast, &bits, &back);
  p.expectMatch(bits, "cast f32 -> i1");
  p.expectMatch(back, "cast i1 -> bf16");
}

TEST_F(CudaElementwise, CompareEveryDirection) {
  unsigned seed = 400;
  struct Operands {
    int32_t a, b;
  };
  const Operands types[] = {{CLEAVE_F32, CLEAVE_F32}, {CLEAVE_BF16, CLEAVE_F32},
                            {CLEAVE_F16, CLEAVE_F16}, {CLEAVE_I64, CLEAVE_I32},
                            {CLEAVE_I32, CLEAVE_F32}, {CLEAVE_I1, CLEAVE_I1}};
  for (int32_t dir = CLEAVE_EQ; dir <= CLEAVE_GE; ++dir)
    for (const Operands &t : types) {
      DevicePair p;
      cleave_tensor a = p.add(t.a, {5, 1, 9});
      cleave_tensor b = p.add(t.b, {4, 9});
      cleave_tensor out = p.add(CLEAVE_I1, {5, 4, 9});
      // Small integers, so that many pairs are equal.
      std::vector<double> av = p.fill(a, -3, 3, seed++);
      std::vector<double> bv = p.fill(b, -3, 3, seed++);
      for (double &v : av)
        v = t.a == CLEAVE_I1 ? v : std::round(v * 2) / 2;
      for (double &v : bv)
        v = t.b == CLEAVE_I1 ? v : std::round(v * 2) / 2;
      p.setValues(a, av);
      p.setValues(b, bv);
      CUDA_AND_CPU(p, compare, dir, &a, &b, &out);
      p.expectMatch(out, "compare " + std::to_string(dir) + " " +
                             dtypeName(t.a) + " " + dtypeName(t.b));
    }
  // NaN compares false except for ne.
  DevicePair p;
  cleave_tensor a = p.add(CLEAVE_F32, {4});
  cleave_tensor out = p.add(CLEAVE_I1, {4});
  p.setValues(a, {NAN, 1, -INFINITY, 0});
  for (int32_t dir = CLEAVE_EQ; dir <= CLEAVE_GE; ++dir) {
    CUDA_AND_CPU(p, compare, dir, &a, &a, &out);
    p.expectMatch(out, "compare NaN " + std::to_string(dir));
  }
}

TEST_F(CudaElementwise, WhereBroadcast) {
  unsigned seed = 500;
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_I64, CLEAVE_I1}) {
    DevicePair p;
    cleave_tensor cond = p.add(CLEAVE_I1, {4, 1, 6});
    cleave_tensor x = p.add(dtype, {5, 1});
    cleave_tensor y = p.add(dtype, {});
    cleave_tensor out = p.add(dtype, {4, 5, 6});
    p.fill(cond, 0, 1, seed++);
    p.fill(x, -9, 9, seed++);
    p.fill(y, -9, 9, seed++);
    CUDA_AND_CPU(p, where, &cond, &x, &y, &out);
    p.expectMatch(out, std::string("where ") + dtypeName(dtype));
  }
  // A float condition is "nonzero"; x and y of different dtypes.
  DevicePair p;
  cleave_tensor cond = p.add(CLEAVE_F32, {300, 17});
  cleave_tensor x = p.add(CLEAVE_F16, {17});
  cleave_tensor y = p.add(CLEAVE_F32, {300, 1});
  cleave_tensor out = p.add(CLEAVE_F32, {300, 17});
  std::vector<double> cv = p.fill(cond, -1, 1, 550);
  for (size_t i = 0; i < cv.size(); i += 3)
    cv[i] = 0;
  p.setValues(cond, cv);
  p.fill(x, -1, 1, 551);
  p.fill(y, -1, 1, 552);
  CUDA_AND_CPU(p, where, &cond, &x, &y, &out);
  p.expectMatch(out, "where f32 cond, f16 x, f32 y");
}

TEST_F(CudaElementwise, CastEveryPair) {
  const int32_t all[] = {CLEAVE_F32, CLEAVE_F16, CLEAVE_BF16,
                         CLEAVE_I64, CLEAVE_I32, CLEAVE_I1};
  unsigned seed = 600;
  for (int32_t from : all)
    for (int32_t to : all) {
      DevicePair p;
      cleave_tensor x = p.add(from, {7, 45});
      cleave_tensor out = p.add(to, {45, 7});
      p.fill(x, -300, 300, seed++);
      CUDA_AND_CPU(p, cast, &x, &out);
      // One rounding to the target type: the same on both sides.
      p.expectMatch(
          out, std::string("cast ") + dtypeName(from) + " -> " + dtypeName(to),
          {0, 0});
    }
  // Truncation toward zero, NaN -> 0, saturation at the i64 bounds, and
  // narrowing to i32 wraps.
  DevicePair p;
  cleave_tensor x = p.add(CLEAVE_F32, {12});
  cleave_tensor i64 = p.add(CLEAVE_I64, {12});
  cleave_tensor i32 = p.add(CLEAVE_I32, {12});
  cleave_tensor wide = p.add(CLEAVE_I64, {12});
  cleave_tensor narrow = p.add(CLEAVE_I32, {12});
  p.setValues(x, {2.7, -2.7, 0.5, -0.5, NAN, INFINITY, -INFINITY, 1e20, -1e20,
                  3e9, -3e9, 65504});
  CUDA_AND_CPU(p, cast, &x, &i64);
  CUDA_AND_CPU(p, cast, &x, &i32);
  p.expectMatch(i64, "cast special f32 -> i64");
  p.expectMatch(i32, "cast special f32 -> i32");
  int64_t big[12] = {int64_t(1) << 33,
                     -(int64_t(1) << 33) - 5,
                     INT64_MAX,
                     INT64_MIN,
                     4294967295,
                     2147483648,
                     -2147483649,
                     0,
                     1,
                     -1,
                     123456789012345,
                     -7};
  CUDA_AND_CPU(p, constant, &wide, static_cast<const void *>(big));
  CUDA_AND_CPU(p, cast, &wide, &narrow);
  p.expectMatch(narrow, "cast i64 -> i32 wraps");
}

TEST_F(CudaElementwise, UnaryGrad) {
  const int32_t ops[] = {CLEAVE_RELU, CLEAVE_TANH,     CLEAVE_SIGMOID,
                         CLEAVE_SILU, CLEAVE_GELU_ERF, CLEAVE_GELU_TANH};
  unsigned seed = 700;
  for (int32_t op : ops)
    for (int32_t dtype : kFloatTypes) {
      DevicePair p;
      cleave_tensor x = p.add(dtype, {33, 65});
      cleave_tensor dy = p.add(dtype, {33, 65});
      cleave_tensor dx = p.add(dtype, {33, 65});
      p.fill(x, -5, 5, seed++);
      p.fill(dy, -1, 1, seed++);
      p.fill(dx, 7, 8, seed++); // overwritten
      std::string what =
          "unary_grad " + std::to_string(op) + " " + dtypeName(dtype);
      CUDA_AND_CPU(p, unary_grad, op, &x, &dy, &dx);
      expectElementwise(p, dx, what);
      CUDA_AND_CPU(p, unary_grad, op, &x, &dy, &dy); // dx aliases dy
      expectElementwise(p, dy, what + " in place");
    }
  // Mixed: f32 x, bf16 dy, f32 dx.
  DevicePair p;
  cleave_tensor x = p.add(CLEAVE_F32, {1000});
  cleave_tensor dy = p.add(CLEAVE_BF16, {1000});
  cleave_tensor dx = p.add(CLEAVE_F32, {1000});
  p.fill(x, -5, 5, 790);
  p.fill(dy, -1, 1, 791);
  CUDA_AND_CPU(p, unary_grad, CLEAVE_GELU_TANH, &x, &dy, &dx);
  expectElementwise(p, dx, "unary_grad gelu_tanh mixed dtypes");
}

} // namespace
