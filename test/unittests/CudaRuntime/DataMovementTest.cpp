//===- DataMovementTest.cpp - CUDA data movement against the CPU ----------===//
//
// transpose, broadcast_in_dim, slice, slice_grad, concat, gather and
// gather_grad (and their block forms) on the GPU against the CPU backend, for every element size
// (f32, bf16, i64, i1: they copy bytes, so exactly; gather_grad sums in
// the CPU's order, so exactly too), and the data errors
// found on the device: an index out of range is reported at the next
// cleave_rt_synchronize and ends the process.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

using namespace cleave::rt::test;

namespace {

using CudaDataMovement = CudaTest;

const int32_t kDtypes[] = {CLEAVE_F32, CLEAVE_BF16, CLEAVE_I64, CLEAVE_I1};

std::string with(const char *what, int32_t dtype) {
  return std::string(what) + " " + dtypeName(dtype);
}

TEST_F(CudaDataMovement, Transpose) {
  for (int32_t dtype : kDtypes) {
    DevicePair p(size_t(16) << 20);
    cleave_tensor x = p.add(dtype, {3, 4, 5, 6});
    cleave_tensor out = p.add(dtype, {5, 3, 6, 4});
    cleave_tensor big = p.add(dtype, {2, 300, 257});
    cleave_tensor bigOut = p.add(dtype, {2, 257, 300});
    cleave_tensor square = p.add(dtype, {129, 129});
    p.fill(x, -50, 50, 1);
    p.fill(big, -50, 50, 2);
    p.fill(square, -50, 50, 3);
    int64_t perm[] = {2, 0, 3, 1};
    int64_t last2[] = {0, 2, 1};
    int64_t swap[] = {1, 0};
    CUDA_AND_CPU(p, transpose, &x, &out, static_cast<const int64_t *>(perm));
    CUDA_AND_CPU(p, transpose, &big, &bigOut,
                 static_cast<const int64_t *>(last2));
    CUDA_AND_CPU(p, transpose, &square, &square,
                 static_cast<const int64_t *>(swap)); // in place
    p.expectMatch(out, with("transpose rank 4", dtype), {0, 0});
    p.expectMatch(bigOut, with("transpose last two dims", dtype), {0, 0});
    p.expectMatch(square, with("transpose in place", dtype), {0, 0});
  }
}

TEST_F(CudaDataMovement, BroadcastInDim) {
  for (int32_t dtype : kDtypes) {
    DevicePair p;
    cleave_tensor x = p.add(dtype, {3, 1});
    cleave_tensor out = p.add(dtype, {3, 4, 5});
    cleave_tensor y = p.add(dtype, {5});
    cleave_tensor out2 = p.add(dtype, {2, 5, 3});
    cleave_tensor s = p.add(dtype, {});
    cleave_tensor out3 = p.add(dtype, {64, 33});
    p.fill(x, -50, 50, 4);
    p.fill(y, -50, 50, 5);
    p.fill(s, -50, 50, 6);
    int64_t dims[] = {0, 2};
    int64_t dims2[] = {1};
    CUDA_AND_CPU(p, broadcast_in_dim, &x, &out,
                 static_cast<const int64_t *>(dims));
    CUDA_AND_CPU(p, broadcast_in_dim, &y, &out2,
                 static_cast<const int64_t *>(dims2));
    int64_t none[] = {0}; // a rank-0 x has no dims to map
    CUDA_AND_CPU(p, broadcast_in_dim, &s, &out3,
                 static_cast<const int64_t *>(none));
    p.expectMatch(out, with("broadcast_in_dim [3,1]", dtype), {0, 0});
    p.expectMatch(out2, with("broadcast_in_dim [5]", dtype), {0, 0});
    p.expectMatch(out3, with("broadcast_in_dim scalar", dtype), {0, 0});
  }
}

TEST_F(CudaDataMovement, SliceAndSliceGrad) {
  for (int32_t dtype : kDtypes) {
    DevicePair p;
    cleave_tensor x = p.add(dtype, {6, 10, 4});
    cleave_tensor out = p.add(dtype, {2, 4, 4});
    cleave_tensor back = p.add(dtype, {6, 10, 4});
    p.fill(x, -50, 50, 7);
    p.fill(back, 7, 8, 8); // slice_grad zeroes it first
    int64_t start[] = {1, 9, 0};
    int64_t strides[] = {3, -2, 1}; // a negative stride reverses
    CUDA_AND_CPU(p, slice, &x, &out, static_cast<const int64_t *>(start),
                 static_cast<const int64_t *>(strides));
    p.expectMatch(out, with("slice", dtype), {0, 0});
    CUDA_AND_CPU(p, slice_grad, &out, &back,
                 static_cast<const int64_t *>(start),
                 static_cast<const int64_t *>(strides));
    p.expectMatch(back, with("slice_grad", dtype), {0, 0});
  }
  // A stride of 0 along a size-1 dim, and a large slice.
  DevicePair p(size_t(16) << 20);
  cleave_tensor x = p.add(CLEAVE_F32, {1, 1000, 512});
  cleave_tensor out = p.add(CLEAVE_F32, {1, 500, 256});
  cleave_tensor back = p.add(CLEAVE_F32, {1, 1000, 512});
  p.fill(x, -1, 1, 9);
  int64_t start[] = {0, 999, 1};
  int64_t strides[] = {0, -2, 2};
  CUDA_AND_CPU(p, slice, &x, &out, static_cast<const int64_t *>(start),
               static_cast<const int64_t *>(strides));
  CUDA_AND_CPU(p, slice_grad, &out, &back, static_cast<const int64_t *>(start),
               static_cast<const int64_t *>(strides));
  p.expectMatch(out, "large slice", {0, 0});
  p.expectMatch(back, "large slice_grad", {0, 0});
}

TEST_F(CudaDataMovement, Concat) {
  for (int32_t dtype : kDtypes)
    for (int64_t dim = 0; dim < 3; ++dim) {
      DevicePair p;
      Shape sa = {2, 3, 4}, sb = {2, 3, 4}, sc = {2, 3, 4}, so = {2, 3, 4};
      sa[size_t(dim)] = 3;
      sb[size_t(dim)] = 1;
      sc[size_t(dim)] = 5;
      so[size_t(dim)] = 9;
      cleave_tensor a = p.add(dtype, sa);
      cleave_tensor b = p.add(dtype, sb);
      cleave_tensor c = p.add(dtype, sc);
      cleave_tensor out = p.add(dtype, so);
      p.fill(a, -50, 50, 10);
      p.fill(b, -50, 50, 11);
      p.fill(c, -50, 50, 12);
      const cleave_tensor *inputs[] = {&a, &b, &c};
      CUDA_AND_CPU(p, concat, static_cast<const cleave_tensor *const *>(inputs),
                   int64_t(3), &out, dim);
      p.expectMatch(out, with("concat dim", dtype) + " " + std::to_string(dim),
                    {0, 0});
    }
}

TEST_F(CudaDataMovement, Gather) {
  for (int32_t dtype : kDtypes)
    for (int32_t indexType : {CLEAVE_I64, CLEAVE_I32}) {
      DevicePair p;
      cleave_tensor data = p.add(dtype, {3, 7, 5});
      cleave_tensor idx = p.add(indexType, {2, 4});
      cleave_tensor out = p.add(dtype, {3, 2, 4, 5});
      cleave_tensor out0 = p.add(dtype, {2, 4, 7, 5});
      cleave_tensor idx0 = p.add(indexType, {2, 4});
      p.fill(data, -5, 5, 13);
      p.fill(idx, -7, 7, 14); // negative indices count from the end
      p.fill(idx0, -3, 3, 15);
      CUDA_AND_CPU(p, gather, &data, &idx, &out, int64_t(1));
      CUDA_AND_CPU(p, gather, &data, &idx0, &out0, int64_t(0));
      std::string what = with("gather", dtype) + " " + dtypeName(indexType);
      p.expectMatch(out, what + " dim 1", {0, 0});
      p.expectMatch(out0, what + " dim 0", {0, 0});
    }
  // An embedding lookup of GPT-2's size: [V, H] by ids [B, S].
  DevicePair p(size_t(64) << 20);
  cleave_tensor table = p.add(CLEAVE_F32, {50304, 128});
  cleave_tensor ids = p.add(CLEAVE_I64, {4, 256});
  cleave_tensor out = p.add(CLEAVE_F32, {4, 256, 128});
  p.fill(table, -1, 1, 16);
  p.fill(ids, 0, 50304, 17);
  CUDA_AND_CPU(p, gather, &table, &ids, &out, int64_t(0));
  p.expectMatch(out, "embedding gather", {0, 0});
}

TEST_F(CudaDataMovement, GatherGrad) {
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16})
    for (int32_t indexType : {CLEAVE_I64, CLEAVE_I32}) {
      DevicePair p;
      cleave_tensor dy = p.add(dtype, {3, 2, 6, 5});
      cleave_tensor idx = p.add(indexType, {2, 6});
      cleave_tensor out = p.add(dtype, {3, 7, 5});
      p.fill(dy, -1, 1, 20);
      // Repeated (row 4 five times) and negative indices, row 3 never.
      p.setValues(idx, {4, -3, 4, 0, -7, 4, 6, 4, 1, -1, 4, 2});
      p.fill(out, 7, 8, 21); // zeroed first
      CUDA_AND_CPU(p, gather_grad, &dy, &idx, &out, int64_t(1));
      // Both sum each row's positions in ascending order in f32: the same
      // bits, and every run the same.
      p.expectMatch(out,
                    with("gather_grad", dtype) + " " + dtypeName(indexType),
                    {0, 0});
    }
  // An embedding's gradient: 2048 positions into 1000 rows (many repeats).
  DevicePair p(size_t(32) << 20);
  cleave_tensor dy = p.add(CLEAVE_F32, {2048, 96});
  cleave_tensor idx = p.add(CLEAVE_I64, {2048});
  cleave_tensor out = p.add(CLEAVE_F32, {1000, 96});
  p.fill(dy, -1, 1, 22);
  p.fill(idx, -1000, 1000, 23);
  CUDA_AND_CPU(p, gather_grad, &dy, &idx, &out, int64_t(0));
  p.expectMatch(out, "embedding gather_grad", {0, 0});
}

TEST_F(CudaDataMovement, GatherBlock) {
  // A block of rows at an offset (read on the device): indices outside the
  // block, negative ones included, give zeros in the lookup and are
  // dropped from its gradient.
  for (int32_t indexType : {CLEAVE_I64, CLEAVE_I32}) {
    for (int32_t dtype : kDtypes) {
      DevicePair p;
      cleave_tensor data = p.add(dtype, {3, 7, 5});
      cleave_tensor idx = p.add(indexType, {2, 4});
      cleave_tensor offset = p.add(indexType, {});
      cleave_tensor out = p.add(dtype, {3, 2, 4, 5});
      p.fill(data, -5, 5, 24);
      p.fill(idx, -4, 20, 25);
      p.setValues(offset, {7});
      p.fill(out, 7, 8, 26); // every element is written
      CUDA_AND_CPU(p, gather_block, &data, &idx, &offset, &out, int64_t(1));
      p.expectMatch(out,
                    with("gather_block", dtype) + " " + dtypeName(indexType),
                    {0, 0});
    }
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16}) {
      DevicePair p;
      cleave_tensor dy = p.add(dtype, {3, 2, 6, 5});
      cleave_tensor idx = p.add(indexType, {2, 6});
      cleave_tensor offset = p.add(indexType, {});
      cleave_tensor out = p.add(dtype, {3, 7, 5});
      p.fill(dy, -1, 1, 27);
      // Row 1 (index 4) three times, rows outside the block [3, 10) and a
      // negative index dropped.
      p.setValues(idx, {4, 2, 4, 9, -1, 4, 12, 3, 10, 5, 0, 8});
      p.setValues(offset, {3});
      p.fill(out, 7, 8, 28);
      CUDA_AND_CPU(p, gather_grad_block, &dy, &idx, &offset, &out,
                   int64_t(1));
      p.expectMatch(out,
                    with("gather_grad_block", dtype) + " " +
                        dtypeName(indexType),
                    {0, 0});
    }
  }
  // The third of four blocks of GPT-2's vocabulary, and its gradient.
  DevicePair p(size_t(64) << 20);
  cleave_tensor table = p.add(CLEAVE_F32, {12576, 128});
  cleave_tensor ids = p.add(CLEAVE_I64, {4, 256});
  cleave_tensor offset = p.add(CLEAVE_I64, {});
  cleave_tensor out = p.add(CLEAVE_F32, {4, 256, 128});
  cleave_tensor grad = p.add(CLEAVE_F32, {12576, 128});
  p.fill(table, -1, 1, 29);
  p.fill(ids, 0, 50304, 30);
  p.setValues(offset, {25152});
  CUDA_AND_CPU(p, gather_block, &table, &ids, &offset, &out, int64_t(0));
  p.expectMatch(out, "vocabulary block gather", {0, 0});
  CUDA_AND_CPU(p, gather_grad_block, &out, &ids, &offset, &grad, int64_t(0));
  p.expectMatch(grad, "vocabulary block gather_grad", {0, 0});
}

TEST_F(CudaDataMovement, SetScalar) {
  // The host's value stored on the device, as the CPU stores it.
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16, CLEAVE_I64,
                        CLEAVE_I32}) {
    DevicePair p;
    cleave_tensor out = p.add(dtype, {});
    p.fill(out, 7, 8, 31);
    CUDA_AND_CPU(p, set_scalar, &out, -2.75);
    p.expectMatch(out, with("set_scalar", dtype), {0, 0});
  }
}

/// The CUDA gather with index `bad` at position 3 of 6 into 50 rows:
/// the kernel returns, and the error is reported when the host waits.
void gatherOutOfRange(int64_t bad) {
  DevicePair p;
  cleave_tensor table = p.add(CLEAVE_F32, {50, 8});
  cleave_tensor ids = p.add(CLEAVE_I64, {2, 3});
  cleave_tensor out = p.add(CLEAVE_F32, {2, 3, 8});
  p.fill(table, -1, 1, 30);
  p.setValues(ids, {1, 2, 3, double(bad), 5, 6});
  cleave_rt_gather(p.deviceArena(), &table, &ids, &out, 0);
  cleave_rt_synchronize();
}

TEST_F(CudaDataMovement, GatherIndexOutOfRangeFailsAtSynchronize) {
  SKIP_IN_CPU_ONLY_MODE();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(gatherOutOfRange(50),
               "error: cleave_rt_gather: index 50 is out of range "
               "\\[-50, 50\\)");
  EXPECT_DEATH(gatherOutOfRange(-51), "error: cleave_rt_gather: index -51");
}

void crossEntropyLabelOutOfRange() {
  DevicePair p;
  cleave_tensor logits = p.add(CLEAVE_F32, {4, 10});
  cleave_tensor labels = p.add(CLEAVE_I64, {4});
  cleave_tensor loss = p.add(CLEAVE_F32, {});
  p.fill(logits, -1, 1, 31);
  p.setValues(labels, {1, 10, 3, 4});
  cleave_rt_cross_entropy(p.deviceArena(), &logits, &labels, &loss, 0, 0, CLEAVE_MEAN);
  cleave_rt_synchronize();
}

void moeExpertOutOfRange() {
  DevicePair p;
  cleave_tensor tokens = p.add(CLEAVE_F32, {2, 4});
  cleave_tensor experts = p.add(CLEAVE_I64, {2, 1});
  cleave_tensor out = p.add(CLEAVE_F32, {3, 2, 4});
  p.setValues(experts, {1, 3});
  cleave_rt_moe_dispatch(p.deviceArena(), &tokens, &experts, &out, 1);
  cleave_rt_synchronize();
}

TEST_F(CudaDataMovement, OtherDataErrorsFailAtSynchronize) {
  SKIP_IN_CPU_ONLY_MODE();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(crossEntropyLabelOutOfRange(),
               "error: cleave_rt_cross_entropy: label 10 is out of range "
               "\\[0, 10\\)");
  EXPECT_DEATH(moeExpertOutOfRange(),
               "error: cleave_rt_moe_dispatch: expert 3 is out of range "
               "\\[0, 3\\)");
}

} // namespace
