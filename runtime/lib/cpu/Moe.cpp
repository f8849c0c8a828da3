//===- Moe.cpp - mixture-of-experts CPU kernels ---------------------------===//
//
// router_topk (softmax gates of the top k experts per token), moe_dispatch
// (tokens into per-expert slots of capacity C, overflow dropped) and
// moe_combine (the gate-weighted sum of each token's expert outputs).
// dispatch and combine derive the slots from the same (t, j) order, so a
// combine after a dispatch with the same experts reads the slots it wrote.
// (expert_matmul is in Matmul.cpp.)
//
//===----------------------------------------------------------------------===//

#include "KernelChecks.h"
#include "Tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

using namespace cleave::rt;

namespace {

/// The slot of each assignment (t, j) in its expert's buffer of
/// `groups * capacity` slots, or -1 when the expert was already full in the
/// token's group: group g holds tokens [g T/G, (g+1) T/G) and slots
/// [g C, (g+1) C). Fails on an expert index out of range.
std::vector<int64_t> assignSlots(const char *kernel, const int64_t *experts,
                                 int64_t tokens, int64_t k, int64_t numExperts,
                                 int64_t capacity, int64_t groups) {
  std::vector<int64_t> next(size_t(numExperts), 0);
  std::vector<int64_t> slots(static_cast<size_t>(tokens * k));
  int64_t perGroup = tokens / groups * k;
  for (int64_t a = 0; a < tokens * k; ++a) {
    if (a % perGroup == 0)
      std::fill(next.begin(), next.end(), 0);
    int64_t e = experts[a];
    if (e < 0 || e >= numExperts)
      cleave_rt_fail("%s: expert %lld of token %lld (choice %lld) is out of "
                     "range [0, %lld)",
                     kernel, (long long)e, (long long)(a / k),
                     (long long)(a % k), (long long)numExperts);
    int64_t &n = next[size_t(e)];
    slots[size_t(a)] = n < capacity ? (a / perGroup) * capacity + n++ : -1;
  }
  return slots;
}

} // namespace

extern "C" {

void cleave_rt_router_topk(char *arena, const cleave_tensor *logits,
                           const cleave_tensor *gates,
                           const cleave_tensor *experts, int64_t k,
                           int32_t normalize) {
  const char *kn = "cleave_rt_router_topk";
  checkRouterTopk(kn, logits, gates, experts, k);
  int64_t tokens = logits->shape[0], e = logits->shape[1];
  if (k == 0 || tokens == 0)
    return;
  Input<float> lv(arena, *logits);
  Output<float> gv(arena, *gates);
  Output<int64_t> ev(arena, *experts);
  const float *lp = lv.data();
  float *gp = gv.data();
  int64_t *ep = ev.data();
#pragma omp parallel if (tokens * e >= kParallelElements)
  {
    std::vector<int64_t> order(static_cast<size_t>(e));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
      const float *row = lp + t * e;
      for (int64_t j = 0; j < e; ++j)
        order[size_t(j)] = j;
      // Softmax is monotonic: rank by logit, ties to the lower expert.
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int64_t a, int64_t b) {
                          return row[a] > row[b] || (row[a] == row[b] && a < b);
                        });
      float max = row[order[0]];
      double sum = 0.0;
      for (int64_t j = 0; j < e; ++j)
        sum += std::exp(double(row[j] - max));
      double picked = 0.0;
      for (int64_t j = 0; j < k; ++j)
        picked += std::exp(double(row[order[size_t(j)]] - max));
      double denom = normalize ? picked : sum;
      for (int64_t j = 0; j < k; ++j) {
        int64_t x = order[size_t(j)];
        gp[t * k + j] = float(std::exp(double(row[x] - max)) / denom);
        ep[t * k + j] = x;
      }
    }
  }
  gv.commit();
  ev.commit();
}

void cleave_rt_moe_dispatch(char *arena, const cleave_tensor *tokens,
                            const cleave_tensor *experts,
                            const cleave_tensor *out, int64_t groups) {
  const char *kn = "cleave_rt_moe_dispatch";
  checkMoeDispatch(kn, tokens, experts, out, groups);
  int64_t t = tokens->shape[0], h = tokens->shape[1];
  int64_t k = experts->shape[1], e = out->shape[0], c = out->shape[1];
  Input<int64_t> xv(arena, *experts);
  std::vector<int64_t> slots =
      assignSlots(kn, xv.data(), t, k, e, c / groups, groups);
  size_t row = size_t(h) * elementSize(out->dtype);
  const char *src = dataOf(arena, *tokens);
  char *dst = dataOf(arena, *out);
  std::memset(dst, 0, size_t(e * c) * row);
#pragma omp parallel for schedule(static) if (t * k * h >= kParallelElements)
  for (int64_t a = 0; a < t * k; ++a) {
    int64_t slot = slots[size_t(a)];
    if (slot >= 0)
      std::memcpy(dst + size_t(xv[a] * c + slot) * row,
                  src + size_t(a / k) * row, row);
  }
}

void cleave_rt_moe_combine(char *arena, const cleave_tensor *expert_out,
                           const cleave_tensor *gates,
                           const cleave_tensor *experts,
                           const cleave_tensor *out, int64_t groups) {
  const char *kn = "cleave_rt_moe_combine";
  checkMoeCombine(kn, expert_out, gates, experts, out, groups);
  int64_t t = out->shape[0], h = out->shape[1];
  int64_t k = experts->shape[1], e = expert_out->shape[0];
  int64_t c = expert_out->shape[1];
  Input<int64_t> xv(arena, *experts);
  std::vector<int64_t> slots =
      assignSlots(kn, xv.data(), t, k, e, c / groups, groups);
  Input<float> yv(arena, *expert_out), gv(arena, *gates);
  Output<float> ov(arena, *out);
  const float *yp = yv.data(), *gp = gv.data();
  float *op = ov.data();
#pragma omp parallel for schedule(static) if (t * k * h >= kParallelElements)
  for (int64_t i = 0; i < t; ++i) {
    float *o = op + i * h;
    for (int64_t d = 0; d < h; ++d)
      o[d] = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      int64_t slot = slots[size_t(i * k + j)];
      if (slot < 0)
        continue; // dropped: contributes nothing
      float g = gp[i * k + j];
      const float *y = yp + (xv[i * k + j] * c + slot) * h;
#pragma omp simd
      for (int64_t d = 0; d < h; ++d)
        o[d] += g * y[d];
    }
  }
  ov.commit();
}

} // extern "C"
