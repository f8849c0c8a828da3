//===- LossTest.cpp - cross_entropy and mse -------------------------------===//
//
// Against float64 references with 1e-5 relative tolerance: cross entropy
// over [B, S, C] logits with an ignore index, i32 labels, every position
// ignored (defined as 0), an out-of-range label (fatal); mean squared error.
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
    cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 1, -100);
    expectClose(arena.values(out), {refCrossEntropy(lv, yv, 100, true, -100)},
                1e-5);
    // Without ignore, -100 is out of range: fatal, naming the label.
    EXPECT_RT_FAIL(
        cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 0, 0),
        "error: cleave_rt_cross_entropy: label -100 at position 0 is out of "
        "range \\[0, 100\\)");
    // An ignore index inside [0, C) ignores that class.
    arena.setValues(labels, arena.fill(labels, 0, 100, 3));
    std::vector<double> yv2 = arena.values(labels);
    cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 1, 7);
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
  cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 1, -1);
  EXPECT_EQ(arena.get(out, 0), 0.0);
  arena.setValues(labels, {0, 9, 3, 3, -1, 5});
  cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 1, -1);
  expectClose(arena.values(out),
              {refCrossEntropy(lv, {0, 9, 3, 3, -1, 5}, 10, true, -1)}, 1e-5);
  arena.set(labels, 1, 10);
  EXPECT_RT_FAIL(
      cleave_rt_cross_entropy(arena.data(), &logits, &labels, &out, 1, -1),
      "label 10 at position 1 is out of range \\[0, 10\\)");
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
