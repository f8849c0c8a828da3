//===- DataMovementTest.cpp - shape and data movement kernels -------------===//
//
// copy, constant, iota, transpose, broadcast_in_dim, slice, concat and
// gather move elements without arithmetic, so every check is exact; each
// runs on several dtypes (the kernels work on bytes of any element size).
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

using namespace cleave::rt::test;

namespace {

/// Coordinates of linear index i in shape s.
std::vector<int64_t> coords(const Shape &s, int64_t i) {
  std::vector<int64_t> c(s.size());
  for (int d = int(s.size()) - 1; d >= 0; --d) {
    c[size_t(d)] = i % s[size_t(d)];
    i /= s[size_t(d)];
  }
  return c;
}

int64_t linear(const Shape &s, const std::vector<int64_t> &c) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d)
    i = i * s[d] + c[d];
  return i;
}

const int32_t kDtypes[] = {CLEAVE_F32, CLEAVE_F16, CLEAVE_I64, CLEAVE_I1};

TEST(RuntimeData, CopyConstantIota) {
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {2, 6});
  cleave_tensor y = arena.add(CLEAVE_F32, {3, 4}); // a reshape
  cleave_tensor h = arena.add(CLEAVE_F16, {12});   // a cast
  std::vector<double> xv = arena.fill(x, -5, 5, 1);
  cleave_rt_copy(arena.data(), &x, &y);
  expectClose(arena.values(y), xv, 0);
  cleave_rt_copy(arena.data(), &x, &h);
  expectClose(arena.values(h), xv, 1.0 / 2048);

  int64_t data[6] = {4, -3, 2, 9, 1 << 30, -7};
  cleave_tensor c = arena.add(CLEAVE_I64, {2, 3});
  cleave_rt_constant(arena.data(), &c, data);
  expectClose(arena.values(c), {4, -3, 2, 9, 1 << 30, -7}, 0);

  cleave_tensor io = arena.add(CLEAVE_I64, {2, 3, 4});
  cleave_rt_iota(arena.data(), &io, 1);
  cleave_tensor fo = arena.add(CLEAVE_F32, {2, 3, 4});
  cleave_rt_iota(arena.data(), &fo, 2);
  for (int64_t i = 0; i < 24; ++i) {
    std::vector<int64_t> at = coords({2, 3, 4}, i);
    EXPECT_EQ(arena.get(io, i), double(at[1]));
    EXPECT_EQ(arena.get(fo, i), double(at[2]));
  }
}

TEST(RuntimeData, Transpose) {
  Shape xs = {3, 4, 5, 6};
  int64_t perm[] = {2, 0, 3, 1};
  Shape os = {5, 3, 6, 4};
  for (int32_t dtype : kDtypes) {
    TestArena arena;
    cleave_tensor x = arena.add(dtype, xs);
    cleave_tensor out = arena.add(dtype, os);
    std::vector<double> xv = arena.fill(x, -50, 50, 2);
    cleave_rt_transpose(arena.data(), &x, &out, perm);
    for (int64_t i = 0; i < product(os); ++i) {
      std::vector<int64_t> oc = coords(os, i), xc(4);
      for (int d = 0; d < 4; ++d)
        xc[size_t(perm[d])] = oc[size_t(d)];
      ASSERT_EQ(arena.get(out, i), xv[size_t(linear(xs, xc))]);
    }
  }
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {3, 3});
  cleave_tensor out = arena.add(CLEAVE_F32, {3, 3});
  int64_t bad[] = {0, 0};
  EXPECT_RT_FAIL(cleave_rt_transpose(arena.data(), &x, &out, bad),
                 "cleave_rt_transpose: perm\\[1\\] = 0 is not a permutation");
}

TEST(RuntimeData, LargeTransposeInPlaceAlias) {
  // A square transpose whose output is its input exercises the aliasing
  // copy and the parallel path.
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, {300, 300});
  std::vector<double> xv = arena.fill(x, -1, 1, 3);
  int64_t perm[] = {1, 0};
  cleave_rt_transpose(arena.data(), &x, &x, perm);
  for (int64_t i = 0; i < 300; ++i)
    for (int64_t j = 0; j < 300; ++j)
      ASSERT_EQ(arena.get(x, i * 300 + j), xv[size_t(j * 300 + i)]);
}

TEST(RuntimeData, BroadcastInDim) {
  for (int32_t dtype : kDtypes) {
    TestArena arena;
    cleave_tensor x = arena.add(dtype, {3, 1});
    cleave_tensor out = arena.add(dtype, {3, 4, 5});
    std::vector<double> xv = arena.fill(x, -50, 50, 4);
    int64_t dims[] = {0, 2}; // x dim 0 -> out 0, x dim 1 (size 1) -> out 2
    cleave_rt_broadcast_in_dim(arena.data(), &x, &out, dims);
    for (int64_t i = 0; i < 60; ++i)
      ASSERT_EQ(arena.get(out, i), xv[size_t(coords({3, 4, 5}, i)[0])]);
    cleave_tensor y = arena.add(dtype, {5});
    cleave_tensor out2 = arena.add(dtype, {2, 5, 3});
    std::vector<double> yv = arena.fill(y, -50, 50, 5);
    int64_t dims2[] = {1};
    cleave_rt_broadcast_in_dim(arena.data(), &y, &out2, dims2);
    for (int64_t i = 0; i < 30; ++i)
      ASSERT_EQ(arena.get(out2, i), yv[size_t(coords({2, 5, 3}, i)[1])]);
  }
}

TEST(RuntimeData, SliceWithStrides) {
  Shape xs = {6, 10, 4};
  Shape os = {2, 4, 4};
  int64_t start[] = {1, 9, 0};
  int64_t strides[] = {3, -2, 1}; // negative stride reverses
  for (int32_t dtype : kDtypes) {
    TestArena arena;
    cleave_tensor x = arena.add(dtype, xs);
    cleave_tensor out = arena.add(dtype, os);
    std::vector<double> xv = arena.fill(x, -50, 50, 6);
    cleave_rt_slice(arena.data(), &x, &out, start, strides);
    for (int64_t i = 0; i < product(os); ++i) {
      std::vector<int64_t> c = coords(os, i);
      for (int d = 0; d < 3; ++d)
        c[size_t(d)] = start[d] + c[size_t(d)] * strides[d];
      ASSERT_EQ(arena.get(out, i), xv[size_t(linear(xs, c))]);
    }
  }
  TestArena arena;
  cleave_tensor x = arena.add(CLEAVE_F32, xs);
  cleave_tensor out = arena.add(CLEAVE_F32, os);
  int64_t badStart[] = {1, 9, 1};
  EXPECT_RT_FAIL(cleave_rt_slice(arena.data(), &x, &out, badStart, strides),
                 "cleave_rt_slice: dim 2 reads indices 1 to 4 of size 4");
}

TEST(RuntimeData, Concat) {
  for (int32_t dtype : kDtypes) {
    TestArena arena;
    cleave_tensor a = arena.add(dtype, {2, 3, 4});
    cleave_tensor b = arena.add(dtype, {2, 1, 4});
    cleave_tensor c = arena.add(dtype, {2, 5, 4});
    cleave_tensor out = arena.add(dtype, {2, 9, 4});
    std::vector<double> av = arena.fill(a, -50, 50, 7);
    std::vector<double> bv = arena.fill(b, -50, 50, 8);
    std::vector<double> cv = arena.fill(c, -50, 50, 9);
    const cleave_tensor *inputs[] = {&a, &b, &c};
    cleave_rt_concat(arena.data(), inputs, 3, &out, 1);
    for (int64_t i = 0; i < 72; ++i) {
      std::vector<int64_t> at = coords({2, 9, 4}, i);
      int64_t j = at[1];
      double want = j < 3 ? av[size_t(linear({2, 3, 4}, {at[0], j, at[2]}))]
                    : j < 4
                        ? bv[size_t(linear({2, 1, 4}, {at[0], 0, at[2]}))]
                        : cv[size_t(linear({2, 5, 4}, {at[0], j - 4, at[2]}))];
      ASSERT_EQ(arena.get(out, i), want);
    }
  }
}

TEST(RuntimeData, Gather) {
  for (int32_t indexType : {CLEAVE_I64, CLEAVE_I32}) {
    TestArena arena;
    Shape ds = {3, 7, 5};
    cleave_tensor data = arena.add(CLEAVE_F32, ds);
    cleave_tensor idx = arena.add(indexType, {2, 4});
    cleave_tensor out = arena.add(CLEAVE_F32, {3, 2, 4, 5});
    std::vector<double> dv = arena.fill(data, -5, 5, 10);
    std::vector<double> iv = arena.fill(idx, 0, 7, 11);
    cleave_rt_gather(arena.data(), &data, &idx, &out, 1);
    for (int64_t i = 0; i < product({3, 2, 4, 5}); ++i) {
      std::vector<int64_t> c = coords({3, 2, 4, 5}, i);
      int64_t k = int64_t(iv[size_t(c[1] * 4 + c[2])]);
      ASSERT_EQ(arena.get(out, i), dv[size_t(linear(ds, {c[0], k, c[3]}))]);
    }
  }
  // Embedding lookup: [V, H] by token ids [B, S].
  TestArena arena;
  cleave_tensor table = arena.add(CLEAVE_BF16, {50, 8});
  cleave_tensor ids = arena.add(CLEAVE_I64, {2, 3});
  cleave_tensor out = arena.add(CLEAVE_BF16, {2, 3, 8});
  std::vector<double> tv = arena.fill(table, -1, 1, 12);
  arena.setValues(ids, {49, 0, 7, 7, 3, 12});
  cleave_rt_gather(arena.data(), &table, &ids, &out, 0);
  std::vector<double> iv = arena.values(ids);
  for (int64_t i = 0; i < 48; ++i)
    ASSERT_EQ(arena.get(out, i), tv[size_t(iv[size_t(i / 8)] * 8 + i % 8)]);
  // Negative indices count from the end (ONNX Gather): -1 is row 49.
  arena.setValues(ids, {-1, -50, 7, 7, 3, 12});
  cleave_rt_gather(arena.data(), &table, &ids, &out, 0);
  for (int64_t i = 0; i < 8; ++i) {
    ASSERT_EQ(arena.get(out, i), tv[size_t(49 * 8 + i)]);
    ASSERT_EQ(arena.get(out, 8 + i), tv[size_t(i)]);
  }
  arena.set(ids, 4, 50);
  EXPECT_RT_FAIL(cleave_rt_gather(arena.data(), &table, &ids, &out, 0),
                 "error: cleave_rt_gather: index 50 at position 4 is out of "
                 "range \\[-50, 50\\) of dim 0");
  arena.set(ids, 4, -51);
  EXPECT_RT_FAIL(cleave_rt_gather(arena.data(), &table, &ids, &out, 0),
                 "cleave_rt_gather: index -51 at position 4");
}

TEST(RuntimeData, GatherBlock) {
  // A block of rows [4, 8) of a 12-row table along dim 1: an index i takes
  // row i - 4, and any index outside the block (negative ones included,
  // which never count from the end here) a row of zeros.
  for (int32_t indexType : {CLEAVE_I64, CLEAVE_I32}) {
    TestArena arena;
    Shape ts = {3, 12, 5}, bs = {3, 4, 5}, os = {3, 2, 4, 5};
    cleave_tensor data = arena.add(CLEAVE_F32, bs);
    cleave_tensor idx = arena.add(indexType, {2, 4});
    cleave_tensor offset = arena.add(indexType, {});
    cleave_tensor out = arena.add(CLEAVE_F32, os);
    std::vector<double> table(size_t(product(ts)));
    for (size_t i = 0; i < table.size(); ++i)
      table[i] = std::cos(double(i)) * 3;
    std::vector<double> block(size_t(product(bs)));
    for (int64_t i = 0; i < product(bs); ++i) {
      std::vector<int64_t> c = coords(bs, i);
      block[size_t(i)] = table[size_t(linear(ts, {c[0], c[1] + 4, c[2]}))];
    }
    arena.setValues(data, block);
    block = arena.values(data); // as stored, in f32
    arena.setValues(idx, {4, 7, 3, 8, 0, -2, 5, 11});
    arena.setValues(offset, {4});
    arena.fill(out, 7, 8, 13); // every element is written
    cleave_rt_gather_block(arena.data(), &data, &idx, &offset, &out, 1);
    std::vector<double> iv = arena.values(idx);
    for (int64_t i = 0; i < product(os); ++i) {
      std::vector<int64_t> c = coords(os, i);
      int64_t k = int64_t(iv[size_t(c[1] * 4 + c[2])]);
      double want =
          k >= 4 && k < 8 ? block[size_t(linear(bs, {c[0], k - 4, c[3]}))]
                          : 0.0;
      ASSERT_EQ(arena.get(out, i), want) << "element " << i;
    }
  }
  // The vocabulary-parallel lookup: the blocks' lookups of random ids over
  // a 48-row table (bf16, four blocks of 12) add up to the whole table's.
  TestArena arena;
  cleave_tensor table = arena.add(CLEAVE_BF16, {48, 8});
  cleave_tensor ids = arena.add(CLEAVE_I64, {3, 5});
  cleave_tensor whole = arena.add(CLEAVE_BF16, {3, 5, 8});
  std::vector<double> tv = arena.fill(table, -1, 1, 14);
  arena.fill(ids, 0, 48, 15);
  cleave_rt_gather(arena.data(), &table, &ids, &whole, 0);
  std::vector<double> sum(size_t(3 * 5 * 8), 0.0);
  for (int64_t b = 0; b < 4; ++b) {
    cleave_tensor block = arena.add(CLEAVE_BF16, {12, 8});
    cleave_tensor offset = arena.add(CLEAVE_I64, {});
    cleave_tensor out = arena.add(CLEAVE_BF16, {3, 5, 8});
    arena.setValues(block, std::vector<double>(tv.begin() + b * 96,
                                               tv.begin() + (b + 1) * 96));
    arena.setValues(offset, {double(b * 12)});
    cleave_rt_gather_block(arena.data(), &block, &ids, &offset, &out, 0);
    std::vector<double> part = arena.values(out);
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += part[i];
  }
  expectClose(sum, arena.values(whole), 0);
  cleave_tensor bad = arena.add(CLEAVE_F32, {2});
  cleave_tensor block = arena.add(CLEAVE_BF16, {12, 8});
  cleave_tensor out = arena.add(CLEAVE_BF16, {3, 5, 8});
  EXPECT_RT_FAIL(
      cleave_rt_gather_block(arena.data(), &block, &ids, &bad, &out, 0),
      "cleave_rt_gather_block: offset is f32 \\[2\\], not an i64 or i32 "
      "scalar");
}


TEST(RuntimeData, SetScalar) {
  // A run-time hyperparameter into a scalar of each dtype: floats rounded
  // to nearest, integers toward zero.
  TestArena arena;
  cleave_tensor f = arena.add(CLEAVE_F32, {});
  cleave_tensor h = arena.add(CLEAVE_BF16, {});
  cleave_tensor l = arena.add(CLEAVE_I64, {});
  cleave_tensor i = arena.add(CLEAVE_I32, {});
  cleave_rt_set_scalar(arena.data(), &f, 0.1);
  EXPECT_EQ(arena.get(f, 0), double(0.1f));
  cleave_rt_set_scalar(arena.data(), &h, 3.0);
  EXPECT_EQ(arena.get(h, 0), 3.0);
  cleave_rt_set_scalar(arena.data(), &l, 2000.0);
  EXPECT_EQ(arena.get(l, 0), 2000.0);
  cleave_rt_set_scalar(arena.data(), &i, -7.9);
  EXPECT_EQ(arena.get(i, 0), -7.0);
  cleave_tensor v = arena.add(CLEAVE_F32, {2});
  EXPECT_RT_FAIL(cleave_rt_set_scalar(arena.data(), &v, 1.0),
                 "cleave_rt_set_scalar: out is f32 \\[2\\], not a scalar");
}

} // namespace
