//===- LossTest.cpp - CUDA cross_entropy, its gradient and mse vs the CPU -===//
//
// cross_entropy and cross_entropy_grad on the GPU against the CPU backend:
// i64 and i32 labels, ignore_index (-100, and a label value in range),
// every position ignored (loss 0, zero gradient), logits of rank 2 and 3 in
// f32, bf16 and f16, a GPT-2-sized vocabulary, dlogits written over the
// logits; mse in f32 and bf16.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

using namespace cleave::rt::test;

namespace {

using CudaLoss = CudaTest;

/// Which labels a case ignores.
enum class Ignore { None, Some, InRange, All };

void runCrossEntropy(const Shape &rows, int64_t c, int32_t dtype,
                     int32_t labelType, Ignore ignore, unsigned seed,
                     int32_t reduction = CLEAVE_MEAN) {
  Shape ls = rows;
  ls.push_back(c);
  DevicePair p(2 * size_t(product(ls)) * byteSize(dtype) + (size_t(1) << 20));
  cleave_tensor logits = p.add(dtype, ls);
  cleave_tensor labels = p.add(labelType, rows);
  cleave_tensor loss = p.add(CLEAVE_F32, {});
  cleave_tensor dloss = p.add(CLEAVE_F32, {});
  cleave_tensor dlogits = p.add(dtype, ls);
  p.fill(logits, -6, 6, seed);
  std::vector<double> lv = p.fill(labels, 0, double(c), seed + 1);
  int64_t ignoreIndex = ignore == Ignore::InRange ? 3 : -100;
  if (ignore == Ignore::Some || ignore == Ignore::All)
    for (size_t r = 0; r < lv.size(); ++r)
      if (ignore == Ignore::All || r % 3 == 1)
        lv[r] = double(ignoreIndex);
  p.setValues(labels, lv);
  p.setValues(dloss, {0.7});
  p.fill(dlogits, 7, 8, seed + 2); // overwritten
  int32_t hasIgnore = ignore != Ignore::None;
  std::string what = std::string(dtypeName(dtype)) + " logits rank " +
                     std::to_string(ls.size()) + " C " + std::to_string(c) +
                     " " + dtypeName(labelType) + " labels, ignore " +
                     std::to_string(int(ignore)) +
                     (reduction == CLEAVE_SUM ? ", sum" : ", mean");
  CUDA_AND_CPU(p, cross_entropy, &logits, &labels, &loss, hasIgnore,
               ignoreIndex, reduction);
  // The loss is a mean of f32 terms: 1e-4 for every logits dtype.
  p.expectMatch(loss, "cross_entropy " + what, {1e-4, 1e-6});
  CUDA_AND_CPU(p, cross_entropy_grad, &logits, &labels, &dloss, &dlogits,
               hasIgnore, ignoreIndex, reduction);
  p.expectMatch(dlogits, "cross_entropy_grad " + what,
                {defaultTolerance(dtype).rtol, 1e-6});
  // dlogits over the logits.
  CUDA_AND_CPU(p, cross_entropy_grad, &logits, &labels, &dloss, &logits,
               hasIgnore, ignoreIndex, reduction);
  p.expectMatch(logits, "cross_entropy_grad in place " + what,
                {defaultTolerance(dtype).rtol, 1e-6});
}

TEST_F(CudaLoss, CrossEntropyAndGrad) {
  unsigned seed = 1;
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16})
    for (int32_t labelType : {CLEAVE_I64, CLEAVE_I32})
      for (Ignore ignore :
           {Ignore::None, Ignore::Some, Ignore::InRange, Ignore::All}) {
        runCrossEntropy({4, 5}, 11, dtype, labelType, ignore, seed);
        runCrossEntropy({37}, 300, dtype, labelType, ignore, seed + 10);
        runCrossEntropy({4, 5}, 11, dtype, labelType, ignore, seed + 15,
                        CLEAVE_SUM);
        seed += 20;
      }
}

TEST_F(CudaLoss, CrossEntropyVocabularySized) {
  // GPT-2's padded vocabulary over 128 positions.
  runCrossEntropy({2, 64}, 50304, CLEAVE_F32, CLEAVE_I64, Ignore::Some, 500);
  runCrossEntropy({2, 64}, 50304, CLEAVE_BF16, CLEAVE_I64, Ignore::None, 510);
}

TEST_F(CudaLoss, Mse) {
  unsigned seed = 600;
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16})
    for (const Shape &s : {Shape{7}, Shape{300, 200}, Shape{4, 3, 1000}}) {
      DevicePair p;
      cleave_tensor pred = p.add(dtype, s);
      cleave_tensor target = p.add(dtype, s);
      cleave_tensor out = p.add(CLEAVE_F32, {});
      cleave_tensor out16 = p.add(dtype, {});
      p.fill(pred, -2, 2, seed++);
      p.fill(target, -2, 2, seed++);
      CUDA_AND_CPU(p, mse, &pred, &target, &out);
      CUDA_AND_CPU(p, mse, &pred, &target, &out16);
      std::string what = std::string("mse ") + dtypeName(dtype) + " of " +
                         std::to_string(product(s));
      p.expectMatch(out, what, {1e-4, 1e-6});
      p.expectMatch(out16, what + " into " + dtypeName(dtype));
    }
}

} // namespace
