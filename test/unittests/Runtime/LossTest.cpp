//===- LossTest.cpp - cross_entropy and mse -------------------------------===//
//
// Against float64 references with 1e-5 relative tolerance: cross entropy
// over [B, S, C] logits with an ignore index, i32 labels, every position
// ignored (defined as 0), an out-of-range label (fatal), the sum instead of
// the mean; mean squared error.
//
//===----------------------------------------------------------------------===//

#include "References.h"

using namespace cleave::rt::test;

namespace {

TEST(RuntimeLoss, CrossEntropyWithIgnoreIndex) {
  for (int32_t labelType : {CLEAVE_I64, CLEAVE_I32}) {
    TestArena arena;
    cleave_tensor logits = arena.add(CLEAVE_F32, {4, 64, 100});
    cleave_tensor labels = arena.add(labelType, {4, 64});
    cleave_tensor out = arena.add(CLEAVE_F32, {});
    std::vector<double> lv = arena.fill(logits, -5, 5, 1);
    std::vector<double> yv = arena.fill(labels, 0, 100, 2);
    for (size_t i = 0; i < yv.size(); i += 3)
      yv[i] = -100; // ignored positions, outside [0, C)
    arena.setValues(labels, yv);
    cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 1, -100, CLEAVE_MEAN);
    expectClose(arena.values(out), {refCrossEntropy(lv, yv, 100, true, -100)},
                1e-5);
    // Without ignore, -100 is out of range: fatal, naming the label.
    EXPECT_RT_FAIL(
        cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 0, 0, CLEAVE_MEAN),
        "error: cleave_rt_cross_entropy: label -100 at position 0 is out of "
        "range \\[0, 100\\)");
    // An ignore index inside [0, C) ignores that class.
    arena.setValues(labels, arena.fill(labels, 0, 100, 3));
    std::vector<double> yv2 = arena.values(labels);
    cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 1, 7, CLEAVE_MEAN);
    expectClose(arena.values(out), {refCrossEntropy(lv, yv2, 100, true, 7)},
                1e-5);
  }
}

TEST(RuntimeLoss, CrossEntropyAllIgnoredAndBf16) {
  TestArena arena;
  cleave_tensor logits = arena.add(CLEAVE_BF16, {6, 10});
  cleave_tensor labels = arena.add(CLEAVE_I64, {6});
  cleave_tensor out = arena.add(CLEAVE_F32, {});
  std::vector<double> lv = arena.fill(logits, -3, 3, 4);
  arena.setValues(labels, {-1, -1, -1, -1, -1, -1});
  cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 1, -1, CLEAVE_MEAN);
  EXPECT_EQ(arena.get(out, 0), 0.0);
  arena.setValues(labels, {0, 9, 3, 3, -1, 5});
  cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 1, -1, CLEAVE_MEAN);
  expectClose(arena.values(out),
              {refCrossEntropy(lv, {0, 9, 3, 3, -1, 5}, 10, true, -1)}, 1e-5);
  arena.set(labels, 1, 10);
  EXPECT_RT_FAIL(
      cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 1, -1, CLEAVE_MEAN),
      "label 10 at position 1 is out of range \\[0, 10\\)");
}

TEST(RuntimeLoss, CrossEntropySum) {
  // The sum over the positions not ignored: the mean times their count.
  TestArena arena;
  cleave_tensor logits = arena.add(CLEAVE_F32, {3, 16, 50});
  cleave_tensor labels = arena.add(CLEAVE_I64, {3, 16});
  cleave_tensor out = arena.add(CLEAVE_F32, {});
  std::vector<double> lv = arena.fill(logits, -4, 4, 5);
  std::vector<double> yv = arena.fill(labels, 0, 50, 6);
  int64_t kept = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    if (i % 4 == 2)
      yv[i] = -100;
    else
      ++kept;
  }
  arena.setValues(labels, yv);
  cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 1, -100,
                          CLEAVE_SUM);
  expectClose(arena.values(out),
              {refCrossEntropy(lv, yv, 50, true, -100) * double(kept)}, 1e-5);
  arena.setValues(labels, std::vector<double>(yv.size(), -100));
  cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 1, -100,
                          CLEAVE_SUM);
  EXPECT_EQ(arena.get(out, 0), 0.0);
  EXPECT_RT_FAIL(cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out,
                                         1, -100, CLEAVE_MAX_REDUCE),
                 "cleave_rt_cross_entropy: reduction must be mean \\(1\\) or "
                 "sum \\(0\\), got 2");
}

TEST(RuntimeLoss, Mse) {
  TestArena arena;
  cleave_tensor pred = arena.add(CLEAVE_F32, {300, 200});
  cleave_tensor target = arena.add(CLEAVE_F32, {300, 200});
  cleave_tensor out = arena.add(CLEAVE_F32, {});
  std::vector<double> pv = arena.fill(pred, -2, 2, 5);
  std::vector<double> tv = arena.fill(target, -2, 2, 6);
  cleave_rt_mse(arena.data(), &pred, &target, &out);
  double sum = 0;
  for (size_t i = 0; i < pv.size(); ++i)
    sum += (pv[i] - tv[i]) * (pv[i] - tv[i]);
  expectClose(arena.values(out), {sum / double(pv.size())}, 1e-5);
  cleave_tensor wrong = arena.add(CLEAVE_F32, {200, 300});
  EXPECT_RT_FAIL(cleave_rt_mse(arena.data(), &pred, &wrong, &out),
                 "cleave_rt_mse: expects pred and target of one shape");
}

} // namespace
