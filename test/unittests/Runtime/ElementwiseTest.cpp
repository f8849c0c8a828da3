//===- ElementwiseTest.cpp - unary, binary, compare, where ----------------===//
//
// Each kernel against a float64 reference on seeded random inputs, with
// NumPy broadcasting. Tolerances: 1e-5 relative for f32 (plus 1e-6 absolute
// where the result crosses zero), one f16/bf16 rounding for 16-bit types,
// exact for integers and booleans.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include <functional>

using namespace cleave::rt::test;

namespace {

double refUnary(int op, double x) {
  switch (op) {
  case CLEAVE_NEG:
    return -x;
  case CLEAVE_ABS:
    return std::fabs(x);
  case CLEAVE_RELU:
    return x > 0 ? x : 0;
  case CLEAVE_EXP:
    return std::exp(x);
  case CLEAVE_LOG:
    return std::log(x);
  case CLEAVE_SQRT:
    return std::sqrt(x);
  case CLEAVE_RSQRT:
    return 1 / std::sqrt(x);
  case CLEAVE_RECIPROCAL:
    return 1 / x;
  case CLEAVE_TANH:
    return std::tanh(x);
  case CLEAVE_ERF:
    return std::erf(x);
  case CLEAVE_SIGMOID:
    return 1 / (1 + std::exp(-x));
  case CLEAVE_SILU:
    return x / (1 + std::exp(-x));
  case CLEAVE_SIN:
    return std::sin(x);
  case CLEAVE_COS:
    return std::cos(x);
  case CLEAVE_GELU_ERF:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case CLEAVE_GELU_TANH:
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return NAN;
}

double refBinary(int op, double a, double b) {
  switch (op) {
  case CLEAVE_ADD:
    return a + b;
  case CLEAVE_SUB:
    return a - b;
  case CLEAVE_MUL:
    return a * b;
  case CLEAVE_DIV:
    return a / b;
  case CLEAVE_POW:
    return std::pow(a, b);
  case CLEAVE_MAX:
    return std::max(a, b);
  case CLEAVE_MIN:
    return std::min(a, b);
  }
  return NAN;
}

bool refCompare(int dir, double a, double b) {
  switch (dir) {
  case CLEAVE_EQ:
    return a == b;
  case CLEAVE_NE:
    return a != b;
  case CLEAVE_LT:
    return a < b;
  case CLEAVE_LE:
    return a <= b;
  case CLEAVE_GT:
    return a > b;
  default:
    return a >= b;
  }
}

/// out = ref(a[bcast], b[bcast]) over the out shape.
std::vector<double>
refBroadcast(const Shape &out, const Shape &as, const std::vector<double> &a,
             const Shape &bs, const std::vector<double> &b,
             const std::function<double(double, double)> &f) {
  std::vector<double> r(size_t(product(out)));
  for (int64_t i = 0; i < int64_t(r.size()); ++i)
    r[size_t(i)] = f(a[size_t(broadcastIndex(out, as, i))],
                     b[size_t(broadcastIndex(out, bs, i))]);
  return r;
}

TEST(RuntimeElementwise, UnaryF32AllOps) {
  for (int op = CLEAVE_NEG; op <= CLEAVE_GELU_TANH; ++op) {
    TestArena arena;
    Shape shape = {3, 50000}; // above the parallel threshold
    cleave_tensor x = arena.add(CLEAVE_F32, shape);
    cleave_tensor out = arena.add(CLEAVE_F32, shape);
    bool positive = op == CLEAVE_LOG || op == CLEAVE_SQRT ||
                    op == CLEAVE_RSQRT || op == CLEAVE_RECIPROCAL;
    std::vector<double> xs =
        arena.fill(x, positive ? 0.1 : -4.0, 4.0, 100 + op);
    cleave_rt_unary(arena.data(), op, &x, &out);
    std::vector<double> want(xs.size());
    for (size_t i = 0; i < xs.size(); ++i)
      want[i] = refUnary(op, xs[i]);
    expectClose(arena.values(out), want, 1e-5, 1e-6,
                "op " + std::to_string(op));
  }
}

TEST(RuntimeElementwise, UnaryWideRangeAndSpecialValues) {
  // exp over nearly its whole f32 range (results >= FLT_MIN), then the
  // special values of exp, tanh, sigmoid, silu and gelu.
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {100000});
  cleave_tensor out = arena.add(CLEAVE_F32, {100000});
  std::vector<double> xs = arena.fill(x, -87, 88.7, 7);
  cleave_rt_unary(arena.data(), CLEAVE_EXP, &x, &out);
  std::vector<double> want(xs.size());
  for (size_t i = 0; i < xs.size(); ++i)
    want[i] = std::exp(xs[i]);
  expectClose(arena.values(out), want, 3e-7);

  const double inf = INFINITY;
  std::vector<double> special = {-inf,  -200, -104, 0,   -0.0,
                                 1e-30, 90,   200,  inf, NAN};
  cleave_tensor s = arena.add(CLEAVE_F32, {10});
  cleave_tensor so = arena.add(CLEAVE_F32, {10});
  arena.setValues(s, special);
  struct Expect {
    int op;
    std::vector<double> values;
  };
  const Expect expects[] = {
      {CLEAVE_EXP, {0, 0, std::exp(-104.0), 1, 1, 1, inf, inf, inf, NAN}},
      {CLEAVE_TANH, {-1, -1, -1, 0, 0, 1e-30, 1, 1, 1, NAN}},
      {CLEAVE_SIGMOID, {0, 0, std::exp(-104.0), 0.5, 0.5, 0.5, 1, 1, 1, NAN}},
      {CLEAVE_SILU,
       {NAN, 0, -104 * std::exp(-104.0), 0, 0, 5e-31, 90, 200, inf, NAN}},
      {CLEAVE_GELU_TANH, {NAN, 0, 0, 0, 0, 5e-31, 90, 200, inf, NAN}},
      {CLEAVE_GELU_ERF, {NAN, 0, 0, 0, 0, 5e-31, 90, 200, inf, NAN}},
  };
  for (const Expect &e : expects) {
    cleave_rt_unary(arena.data(), e.op, &s, &so);
    // Results below FLT_MIN (around exp(-104)) may flush to zero.
    expectClose(arena.values(so), e.values, 1e-6, 1.2e-38,
                "op " + std::to_string(e.op));
  }
}

TEST(RuntimeElementwise, UnaryBroadcastAndInPlace) {
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {3, 1});
  cleave_tensor out = arena.add(CLEAVE_F32, {2, 3, 4});
  std::vector<double> xs = arena.fill(x, -2, 2, 1);
  cleave_rt_unary(arena.data(), CLEAVE_EXP, &x, &out);
  std::vector<double> want(24);
  for (int64_t i = 0; i < 24; ++i)
    want[size_t(i)] =
        std::exp(xs[size_t(broadcastIndex({2, 3, 4}, {3, 1}, i))]);
  expectClose(arena.values(out), want, 1e-5);
  // out may be x itself.
  cleave_rt_unary(arena.data(), CLEAVE_NEG, &out, &out);
  for (double &w : want)
    w = -w;
  expectClose(arena.values(out), want, 1e-5);
}

TEST(RuntimeElementwise, UnaryI64) {
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_I64, {100});
  cleave_tensor out = arena.add(CLEAVE_I64, {100});
  std::vector<double> xs = arena.fill(x, -50, 50, 2);
  for (int op : {CLEAVE_NEG, CLEAVE_ABS, CLEAVE_RELU}) {
    cleave_rt_unary(arena.data(), op, &x, &out);
    std::vector<double> want(xs.size());
    for (size_t i = 0; i < xs.size(); ++i)
      want[i] = refUnary(op, xs[i]);
    expectClose(arena.values(out), want, 0);
  }
  EXPECT_RT_FAIL(cleave_rt_unary(arena.data(), CLEAVE_EXP, &x, &out),
                 "error: cleave_rt_unary: op exp \\(3\\) is not defined for "
                 "i64");
}

struct BroadcastCase {
  Shape a, b, out;
};

const BroadcastCase kBroadcastCases[] = {
    {{37, 1000}, {37, 1000}, {37, 1000}},
    {{4, 1, 5}, {3, 1}, {4, 3, 5}},
    {{}, {6, 7}, {6, 7}},
    {{2, 3, 1}, {1, 1, 4}, {2, 3, 4}},
    {{64, 1024}, {1024}, {64, 1024}},
    {{5, 1, 3, 1}, {1, 4, 1, 2}, {5, 4, 3, 2}},
};

TEST(RuntimeElementwise, BinaryF32Broadcast) {
  unsigned seed = 10;
  for (const BroadcastCase &c : kBroadcastCases) {
    for (int op = CLEAVE_ADD; op <= CLEAVE_MIN; ++op) {
      TestArena arena;
      cleave_tensor a = arena.add(CLEAVE_F32, c.a);
      cleave_tensor b = arena.add(CLEAVE_F32, c.b);
      cleave_tensor out = arena.add(CLEAVE_F32, c.out);
      bool positive = op == CLEAVE_POW;
      std::vector<double> as = arena.fill(a, positive ? 0.5 : -3, 3, seed++);
      std::vector<double> bs = op == CLEAVE_DIV || op == CLEAVE_POW
                                   ? arena.fill(b, 0.5, 2, seed++)
                                   : arena.fill(b, -3, 3, seed++);
      cleave_rt_binary(arena.data(), op, &a, &b, &out);
      expectClose(arena.values(out),
                  refBroadcast(
                      c.out, c.a, as, c.b, bs,
                      [op](double x, double y) { return refBinary(op, x, y); }),
                  1e-5, 1e-6, "op " + std::to_string(op));
    }
  }
}

TEST(RuntimeElementwise, BinaryF16AndBf16) {
  for (int32_t dtype : {CLEAVE_F16, CLEAVE_BF16}) {
    TestArena arena;
    cleave_tensor a = arena.add(dtype, {8, 33});
    cleave_tensor b = arena.add(dtype, {33});
    cleave_tensor out = arena.add(dtype, {8, 33});
    std::vector<double> as = arena.fill(a, -3, 3, 20);
    std::vector<double> bs = arena.fill(b, 0.5, 3, 21);
    cleave_rt_binary(arena.data(), CLEAVE_DIV, &a, &b, &out);
    // One rounding to the 16-bit type: half an ulp, relative.
    double rtol = dtype == CLEAVE_F16 ? 1.0 / 2048 : 1.0 / 256;
    expectClose(arena.values(out),
                refBroadcast({8, 33}, {8, 33}, as, {33}, bs,
                             [](double x, double y) { return x / y; }),
                rtol);
  }
}

TEST(RuntimeElementwise, BinaryI64) {
  TestArena arena;
  cleave_tensor a = arena.add(CLEAVE_I64, {4, 6});
  cleave_tensor b = arena.add(CLEAVE_I64, {6});
  cleave_tensor out = arena.add(CLEAVE_I64, {4, 6});
  std::vector<double> as = arena.fill(a, -100, 100, 30);
  std::vector<double> bs = arena.fill(b, 1, 9, 31);
  for (int op : {CLEAVE_ADD, CLEAVE_SUB, CLEAVE_MUL, CLEAVE_MAX, CLEAVE_MIN}) {
    cleave_rt_binary(arena.data(), op, &a, &b, &out);
    expectClose(
        arena.values(out),
        refBroadcast({4, 6}, {4, 6}, as, {6}, bs,
                     [op](double x, double y) { return refBinary(op, x, y); }),
        0);
  }
  // Division truncates toward zero.
  cleave_rt_binary(arena.data(), CLEAVE_DIV, &a, &b, &out);
  expectClose(
      arena.values(out),
      refBroadcast({4, 6}, {4, 6}, as, {6}, bs,
                   [](double x, double y) { return std::trunc(x / y); }),
      0);
}

TEST(RuntimeElementwise, BinaryI64PowAndDivByZero) {
  TestArena arena;
  cleave_tensor a = arena.add(CLEAVE_I64, {5});
  cleave_tensor b = arena.add(CLEAVE_I64, {5});
  cleave_tensor out = arena.add(CLEAVE_I64, {5});
  arena.setValues(a, {3, 2, -1, -2, 7});
  arena.setValues(b, {4, -1, -3, 3, 0});
  cleave_rt_binary(arena.data(), CLEAVE_POW, &a, &b, &out);
  expectClose(arena.values(out), {81, 0, -1, -8, 1}, 0);
  EXPECT_RT_FAIL(cleave_rt_binary(arena.data(), CLEAVE_DIV, &a, &b, &out),
                 "error: cleave_rt_binary: integer division by zero");
}

TEST(RuntimeElementwise, BinaryShapeErrors) {
  TestArena arena;
  cleave_tensor a = arena.add(CLEAVE_F32, {3, 4});
  cleave_tensor b = arena.add(CLEAVE_F32, {5});
  cleave_tensor out = arena.add(CLEAVE_F32, {3, 4});
  arena.fill(a, 1, 2, 1);
  arena.fill(b, 1, 2, 2);
  EXPECT_RT_FAIL(cleave_rt_binary(arena.data(), CLEAVE_ADD, &a, &b, &out),
                 "cleave_rt_binary: operand 1 of shape \\[5\\] does not "
                 "broadcast to \\[3, 4\\]");
  EXPECT_RT_FAIL(cleave_rt_binary(arena.data(), 42, &a, &a, &out),
                 "cleave_rt_binary: unknown op 42");
}

TEST(RuntimeElementwise, CompareFloatAndInt) {
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_I64}) {
    for (int dir = CLEAVE_EQ; dir <= CLEAVE_GE; ++dir) {
      TestArena arena;
      cleave_tensor a = arena.add(dtype, {4, 1, 6});
      cleave_tensor b =
          arena.add(dtype == CLEAVE_I64 ? CLEAVE_I32 : dtype, {3, 1});
      cleave_tensor out = arena.add(CLEAVE_I1, {4, 3, 6});
      // Few distinct values so that equality happens.
      std::vector<double> as = arena.fill(a, 0, 4, 40 + dir);
      std::vector<double> bs = arena.fill(b, 0, 4, 50 + dir);
      if (dtype == CLEAVE_F32) {
        for (double &v : as)
          v = std::floor(v);
        for (double &v : bs)
          v = std::floor(v);
        arena.setValues(a, as);
        arena.setValues(b, bs);
      }
      cleave_rt_compare(arena.data(), dir, &a, &b, &out);
      expectClose(arena.values(out),
                  refBroadcast({4, 3, 6}, {4, 1, 6}, as, {3, 1}, bs,
                               [dir](double x, double y) {
                                 return double(refCompare(dir, x, y));
                               }),
                  0, 0, "dir " + std::to_string(dir));
    }
  }
}

TEST(RuntimeElementwise, Where) {
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_I64, CLEAVE_BF16}) {
    TestArena arena;
    cleave_tensor cond = arena.add(CLEAVE_I1, {4, 1});
    cleave_tensor x = arena.add(dtype, {4, 5});
    cleave_tensor y = arena.add(dtype, {});
    cleave_tensor out = arena.add(dtype, {4, 5});
    arena.setValues(cond, {1, 0, 0, 1});
    std::vector<double> xs = arena.fill(x, -10, 10, 60);
    std::vector<double> ys = arena.fill(y, -10, 10, 61);
    cleave_rt_where(arena.data(), &cond, &x, &y, &out);
    std::vector<double> want(20);
    for (int i = 0; i < 20; ++i)
      want[size_t(i)] = (i / 5 == 0 || i / 5 == 3) ? xs[size_t(i)] : ys[0];
    expectClose(arena.values(out), want, 0);
  }
}

} // namespace
