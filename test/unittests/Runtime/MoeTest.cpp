//===- MoeTest.cpp - router_topk, moe_dispatch, moe_combine ---------------===//
//
// The router against a float64 softmax (1e-5 relative) with tied logits;
// dispatch against a slot-by-slot reference with capacity drops (exact);
// the dispatch -> expert_matmul -> combine round trip against a float64
// reference of the whole MoE layer (1e-4 relative).
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include <algorithm>
#include <numeric>

using namespace cleave::rt::test;

namespace {

TEST(RuntimeMoe, RouterTopkWithTies) {
  for (bool normalize : {false, true}) {
    TestArena arena;
    int64_t t = 40, e = 8, k = 2;
    cleave_tensor logits = arena.add(CLEAVE_F32, {t, e});
    cleave_tensor gates = arena.add(CLEAVE_F32, {t, k});
    cleave_tensor experts = arena.add(CLEAVE_I64, {t, k});
    std::vector<double> lv = arena.fill(logits, -2, 2, 1);
    // Token 0: experts 5 and 2 tie for first, 6 second: ties to lower index.
    for (int64_t j = 0; j < e; ++j)
      lv[size_t(j)] = j == 5 || j == 2 ? 1.5 : j == 6 ? 1.0 : 0.0;
    arena.setValues(logits, lv);
    cleave_rt_router_topk(arena.data(), &logits, &gates, &experts, k,
                          normalize);
    std::vector<double> gv = arena.values(gates), ev = arena.values(experts);
    EXPECT_EQ(ev[0], 2);
    EXPECT_EQ(ev[1], 5);
    for (int64_t i = 0; i < t; ++i) {
      const double *row = lv.data() + i * e;
      std::vector<int64_t> order(static_cast<size_t>(e));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return row[a] > row[b]; });
      double sum = 0, picked = 0;
      for (int64_t j = 0; j < e; ++j)
        sum += std::exp(row[j]);
      for (int64_t j = 0; j < k; ++j)
        picked += std::exp(row[order[size_t(j)]]);
      for (int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(ev[size_t(i * k + j)], double(order[size_t(j)]));
        double want =
            std::exp(row[order[size_t(j)]]) / (normalize ? picked : sum);
        EXPECT_NEAR(gv[size_t(i * k + j)], want, 1e-5 * want);
      }
    }
  }
}

/// Slots in (t, j) order, each group of `perGroup` picks with its own `c`
/// slots per expert (after those of the earlier groups); -1 when the expert
/// is full in the group.
std::vector<int64_t> refSlots(const std::vector<double> &experts, int64_t e,
                              int64_t c, size_t perGroup) {
  std::vector<int64_t> next(size_t(e), 0), slots;
  for (size_t a = 0; a < experts.size(); ++a) {
    if (a % perGroup == 0)
      next.assign(size_t(e), 0);
    int64_t &n = next[size_t(experts[a])];
    slots.push_back(n < c ? int64_t(a / perGroup) * c + n++ : -1);
  }
  return slots;
}

TEST(RuntimeMoe, DispatchCombineRoundTripWithDrops) {
  // 48 picks into 28 slots; with 3 groups, 16 picks of each into 4 x 3.
  for (auto [groups, perGroupCapacity] : {std::pair<int64_t, int64_t>{1, 7},
                                          {3, 3}}) {
    SCOPED_TRACE("groups " + std::to_string(groups));
    int64_t t = 24, h = 16, f = 12, e = 4, k = 2;
    int64_t c = groups * perGroupCapacity;
    TestArena arena;
    cleave_tensor tokens = arena.add(CLEAVE_F32, {t, h});
    cleave_tensor logits = arena.add(CLEAVE_F32, {t, e});
    cleave_tensor gates = arena.add(CLEAVE_F32, {t, k});
    cleave_tensor experts = arena.add(CLEAVE_I64, {t, k});
    cleave_tensor dispatched = arena.add(CLEAVE_F32, {e, c, h});
    cleave_tensor w = arena.add(CLEAVE_F32, {e, h, f});
    cleave_tensor expertOut = arena.add(CLEAVE_F32, {e, c, f});
    cleave_tensor out = arena.add(CLEAVE_F32, {t, f});
    std::vector<double> xv = arena.fill(tokens, -1, 1, 2);
    arena.fill(logits, -1, 1, 3);
    std::vector<double> wv = arena.fill(w, -1, 1, 4);
    arena.fill(dispatched, 5, 6, 5); // garbage that empty slots must clear
    cleave_rt_router_topk(arena.data(), &logits, &gates, &experts, k, 1);
    cleave_rt_moe_dispatch(arena.data(), &tokens, &experts, &dispatched,
                           groups);
    cleave_rt_expert_matmul(arena.data(), &dispatched, &w, &expertOut);
    cleave_rt_moe_combine(arena.data(), &expertOut, &gates, &experts, &out,
                          groups);

    std::vector<double> ev = arena.values(experts), gv = arena.values(gates);
    std::vector<int64_t> slots =
        refSlots(ev, e, perGroupCapacity, size_t(t / groups * k));
    int64_t dropped = std::count(slots.begin(), slots.end(), -1);
    EXPECT_GT(dropped, 0) << "the case must exercise capacity drops";

    // Dispatch: each slot holds its token, empty slots are zero.
    std::vector<double> want(static_cast<size_t>(e * c * h), 0.0);
    for (int64_t a = 0; a < t * k; ++a)
      if (slots[size_t(a)] >= 0)
        for (int64_t d = 0; d < h; ++d)
          want[size_t((int64_t(ev[size_t(a)]) * c + slots[size_t(a)]) * h +
                      d)] = xv[size_t((a / k) * h + d)];
    expectClose(arena.values(dispatched), want, 0);

    // The whole layer: out[t] = sum over kept picks of gate * token @ w[e].
    std::vector<double> ref(static_cast<size_t>(t * f), 0.0);
    for (int64_t a = 0; a < t * k; ++a) {
      if (slots[size_t(a)] < 0)
        continue;
      int64_t ex = int64_t(ev[size_t(a)]), tok = a / k;
      for (int64_t j = 0; j < f; ++j) {
        double s = 0;
        for (int64_t d = 0; d < h; ++d)
          s += xv[size_t(tok * h + d)] * wv[size_t((ex * h + d) * f + j)];
        ref[size_t(tok * f + j)] += gv[size_t(a)] * s;
      }
    }
    expectClose(arena.values(out), ref, 1e-4, 1e-5);
  }
}

TEST(RuntimeMoe, GroupsThatDoNotDivideFail) {
  TestArena arena;
  cleave_tensor tokens = arena.add(CLEAVE_F32, {6, 4});
  cleave_tensor experts = arena.add(CLEAVE_I64, {6, 1});
  cleave_tensor out = arena.add(CLEAVE_F32, {3, 8, 4});
  arena.setValues(experts, {0, 1, 2, 0, 1, 2});
  EXPECT_RT_FAIL(
      cleave_rt_moe_dispatch(arena.data(), &tokens, &experts, &out, 4),
      "cleave_rt_moe_dispatch: 4 groups must be >= 1 and divide the 6 tokens "
      "and the 8 slots");
}

TEST(RuntimeMoe, ExpertOutOfRangeFails) {
  TestArena arena;
  cleave_tensor tokens = arena.add(CLEAVE_F32, {2, 4});
  cleave_tensor experts = arena.add(CLEAVE_I64, {2, 1});
  cleave_tensor out = arena.add(CLEAVE_F32, {3, 2, 4});
  arena.setValues(experts, {1, 3});
  EXPECT_RT_FAIL(cleave_rt_moe_dispatch(arena.data(), &tokens, &experts, &out, 1),
                 "cleave_rt_moe_dispatch: expert 3 of token 1 \\(choice 0\\) "
                 "is out of range \\[0, 3\\)");
}

} // namespace
