//===- MoeTest.cpp - CUDA router_topk, moe_dispatch, moe_combine vs CPU ---===//
//
// The mixture-of-experts kernels on the GPU against the CPU backend, each
// on the same inputs (and then chained as one layer):
// router_topk with and without normalization, k = 1, 2, 4, tied logits
// (experts exactly); moe_dispatch with capacity drops, in (t, j) order, and
// zeroed empty slots (exactly); moe_combine; i64 and i32 expert indices,
// f32 and bf16 tokens.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

using namespace cleave::rt::test;

namespace {

using CudaMoe = CudaTest;

TEST_F(CudaMoe, RouterTopk) {
  unsigned seed = 1;
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16})
    for (int64_t k : {1, 2, 4})
      for (int32_t normalize : {0, 1}) {
        int64_t t = 300, e = 16;
        DevicePair p;
        cleave_tensor logits = p.add(dtype, {t, e});
        cleave_tensor gates = p.add(CLEAVE_F32, {t, k});
        cleave_tensor experts = p.add(CLEAVE_I64, {t, k});
        std::vector<double> lv = p.fill(logits, -3, 3, seed++);
        // Ties in the first rows (to the lower index), from a small set in
        // the next ones.
        for (int64_t j = 0; j < e; ++j) {
          lv[size_t(j)] = j == 5 || j == 2 ? 1.5 : j == 6 ? 1.0 : 0.0;
          lv[size_t(e + j)] = 0.25;
        }
        for (size_t i = size_t(2 * e); i < size_t(10 * e); ++i)
          lv[i] = std::floor(lv[i]);
        p.setValues(logits, lv);
        CUDA_AND_CPU(p, router_topk, &logits, &gates, &experts, k, normalize);
        std::string what = std::string("router_topk ") + dtypeName(dtype) +
                           " k " + std::to_string(k) +
                           (normalize ? " normalized" : "");
        p.expectMatch(experts, what + " experts");
        p.expectMatch(gates, what + " gates");
      }
}

TEST_F(CudaMoe, DispatchAndCombineWithDrops) {
  unsigned seed = 100;
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16})
    for (int32_t indexType : {CLEAVE_I64, CLEAVE_I32})
      for (int64_t groups : {int64_t(1), int64_t(4)}) {
        // 512 picks into 8 x 40 slots: drops.
        int64_t t = 256, h = 64, e = 8, k = 2, c = 40;
        DevicePair p;
        cleave_tensor tokens = p.add(dtype, {t, h});
        cleave_tensor experts = p.add(indexType, {t, k});
        cleave_tensor gates = p.add(CLEAVE_F32, {t, k});
        cleave_tensor dispatched = p.add(dtype, {e, c, h});
        cleave_tensor expertOut = p.add(dtype, {e, c, h});
        cleave_tensor out = p.add(dtype, {t, h});
        p.fill(tokens, -1, 1, seed++);
        // Skewed choices: expert 0 and 1 overflow.
        std::vector<double> ev = p.fill(experts, 0, double(e), seed++);
        for (size_t i = 0; i < ev.size(); i += 3)
          ev[i] = double(i % 2);
        p.setValues(experts, ev);
        p.fill(gates, 0, 1, seed++);
        p.fill(dispatched, 5, 6, seed++); // empty slots must be zeroed
        p.fill(expertOut, -1, 1, seed++);
        p.fill(out, 5, 6, seed++);
        std::string what = std::string(dtypeName(dtype)) + " " +
                           dtypeName(indexType) + " experts, " +
                           std::to_string(groups) + " groups";
        CUDA_AND_CPU(p, moe_dispatch, &tokens, &experts, &dispatched, groups);
        p.expectMatch(dispatched, "moe_dispatch " + what, {0, 0});
        CUDA_AND_CPU(p, moe_combine, &expertOut, &gates, &experts, &out,
                     groups);
        p.expectMatch(out, "moe_combine " + what);
      }
}

TEST_F(CudaMoe, WholeLayer) {
  // router -> dispatch -> expert_matmul -> combine, each backend on its
  // own results.
  int64_t t = 128, h = 32, f = 48, e = 4, k = 2, c = 50;
  DevicePair p;
  cleave_tensor tokens = p.add(CLEAVE_F32, {t, h});
  cleave_tensor logits = p.add(CLEAVE_F32, {t, e});
  cleave_tensor gates = p.add(CLEAVE_F32, {t, k});
  cleave_tensor experts = p.add(CLEAVE_I64, {t, k});
  cleave_tensor dispatched = p.add(CLEAVE_F32, {e, c, h});
  cleave_tensor w = p.add(CLEAVE_F32, {e, h, f});
  cleave_tensor expertOut = p.add(CLEAVE_F32, {e, c, f});
  cleave_tensor out = p.add(CLEAVE_F32, {t, f});
  p.fill(tokens, -1, 1, 200);
  p.fill(logits, -2, 2, 201);
  p.fill(w, -1, 1, 202);
  CUDA_AND_CPU(p, router_topk, &logits, &gates, &experts, k, int32_t(1));
  CUDA_AND_CPU(p, moe_dispatch, &tokens, &experts, &dispatched, int64_t(1));
  CUDA_AND_CPU(p, expert_matmul, &dispatched, &w, &expertOut);
  CUDA_AND_CPU(p, moe_combine, &expertOut, &gates, &experts, &out, int64_t(1));
  p.expectMatch(experts, "moe layer experts");
  p.expectMatch(dispatched, "moe layer dispatched", {0, 0});
  p.expectMatch(expertOut, "moe layer expert outputs");
  p.expectMatch(out, "moe layer output");
}

} // namespace
