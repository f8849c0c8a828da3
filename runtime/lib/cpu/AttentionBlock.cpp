//===- AttentionBlock.cpp - the blocks of ring attention, CPU kernels -----===//
//
// Ring attention (context parallelism) computes a device's queries against
// one block of keys at a time and merges the blocks by their log-sum-exp.
//
// attention_block: for blocks of kRows query rows of one (batch, head), the
// scores s = scale q k^T of the block's keys (one sgemm), masked where a
// key's position is after the query's under causal; with m the larger of
// the row maximum and lse_in, p = exp(s - m), sum = rowsum(p) +
// exp(lse_in - m), the merged output is (p v + exp(lse_in - m) out_in) /
// sum and lse = m + log(sum). Under causal, keys after all of a block's
// queries are not computed: a block whose keys all come after its queries
// is skipped (the contiguous ring's idle steps), and with ascending key
// positions only the prefix of keys that can be live is (the later chunk
// of a zigzag block, a diagonal block's upper triangle).
//
// attention_block_grad: with the final lse, the block's probabilities are
// p = exp(s - lse) exactly, so dS = p (dP - D) with dP = dO v^T and
// D = rowsum(dO * O) (FlashAttention-2's form, Dao 2023), then
// dq = scale dS k, dk = scale dS^T q and dv = p^T dO. One task per kv head
// owns its dk and dv and runs its query heads' blocks.
//
//===----------------------------------------------------------------------===//

#include "FastMath.h"
#include "KernelChecks.h"
#include "Tensor.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

using namespace cleave::rt;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kRows = 64;

/// What both kernels share: the shape, the positions, the causal rule.
struct Geometry {
  Geometry(AttentionShape s, const int64_t *qPos, const int64_t *kPos,
           float scale, bool causal)
      : s(s), qPos(qPos), kPos(kPos), scale(scale), causal(causal),
        sortedKeys(std::is_sorted(kPos, kPos + s.Sk)) {}

  AttentionShape s;
  const int64_t *qPos, *kPos;
  float scale;
  bool causal;
  /// The keys' positions ascend (the ring's blocks, contiguous or two
  /// zigzag chunks).
  bool sortedKeys;

  int64_t rows(int64_t i0) const { return std::min(kRows, s.Sq - i0); }
  /// The keys [0, live) that can be live for queries [i0, i0 + rows): all,
  /// or under causal with ascending positions those not after the last
  /// query (the rest are masked for every row, so they are not computed:
  /// a zigzag block's later chunk, the upper triangle of a diagonal one).
  /// 0 when none is: there are none, or all come after the queries.
  int64_t liveKeys(int64_t i0) const {
    if (!causal || s.Sk == 0)
      return s.Sk;
    int64_t last = *std::max_element(qPos + i0, qPos + i0 + rows(i0));
    if (sortedKeys)
      return std::upper_bound(kPos, kPos + s.Sk, last) - kPos;
    return *std::min_element(kPos, kPos + s.Sk) > last ? 0 : s.Sk;
  }
  /// Masks the first `live` scores of query i in place: -inf after its
  /// position.
  void maskRow(float *sr, int64_t i, int64_t live) const {
    if (!causal)
      return;
    int64_t at = qPos[i];
    for (int64_t j = 0; j < live; ++j)
      sr[j] = kPos[j] > at ? kNegInf : sr[j];
  }
};

struct BlockProblem {
  Geometry g;
  const float *q, *k, *v, *outIn, *lseIn; // outIn, lseIn may be null
  float *out, *lse;

  void run() const;

private:
  void block(int64_t bh, int64_t i0, float *s, float *inv,
             float *carry) const;
};

void BlockProblem::block(int64_t bh, int64_t i0, float *s, float *inv,
                         float *carry) const {
  const AttentionShape &sh = g.s;
  int64_t bhk = (bh / sh.H) * sh.Hkv + (bh % sh.H) / sh.group();
  // Scores are [rows, live] with a row stride of Sk.
  int64_t rows = g.rows(i0), Sk = sh.Sk, live = g.liveKeys(i0), Dv = sh.Dv;
  float *o = out + (bh * sh.Sq + i0) * Dv;
  float *l = lse + bh * sh.Sq + i0;
  const float *oi = outIn ? outIn + (bh * sh.Sq + i0) * Dv : nullptr;
  const float *li = lseIn ? lseIn + bh * sh.Sq + i0 : nullptr;
  if (live == 0) {
    // No live key: the earlier result stands.
    for (int64_t r = 0; r < rows; ++r) {
      l[r] = li ? li[r] : kNegInf;
      for (int64_t d = 0; d < Dv; ++d)
        o[r * Dv + d] = oi ? oi[r * Dv + d] : 0.0f;
    }
    return;
  }
  rowMajorGemm(false, true, rows, live, sh.D, g.scale, q + (bh * sh.Sq + i0) * sh.D,
       sh.D, k + bhk * Sk * sh.D, sh.D, 0.0f, s, Sk);
  for (int64_t r = 0; r < rows; ++r) {
    float *sr = s + r * Sk;
    g.maskRow(sr, i0 + r, live);
    float before = li ? li[r] : kNegInf;
    float max = before;
#pragma omp simd reduction(max : max)
    for (int64_t j = 0; j < live; ++j)
      max = sr[j] > max ? sr[j] : max;
    if (max == kNegInf) {
      // No live key so far: zeros, unless a NaN score makes the row NaN
      // (the max skips NaN), as attention's rule is.
      bool nan = std::any_of(sr, sr + live, [](float x) { return x != x; });
      std::fill(sr, sr + live, nan ? std::nanf("") : 0.0f);
      inv[r] = nan ? 1.0f : 0.0f;
      carry[r] = 0.0f;
      l[r] = nan ? std::nanf("") : kNegInf;
      continue;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < live; ++j) {
      sr[j] = fastExp(sr[j] - max);
      sum += sr[j];
    }
    float kept = before == kNegInf ? 0.0f : std::exp(before - max);
    sum += kept;
    inv[r] = 1.0f / sum;
    carry[r] = kept / sum;
    l[r] = max + std::log(sum);
  }
  // out = (p v) / sum + carry out_in.
  rowMajorGemm(false, false, rows, Dv, live, 1.0f, s, Sk, v + bhk * Sk * Dv, Dv, 0.0f,
       o, Dv);
  for (int64_t r = 0; r < rows; ++r) {
    float f = inv[r], c = carry[r];
    float *orow = o + r * Dv;
    if (oi && c != 0.0f) {
      const float *irow = oi + r * Dv;
#pragma omp simd
      for (int64_t d = 0; d < Dv; ++d)
        orow[d] = orow[d] * f + c * irow[d];
    } else {
#pragma omp simd
      for (int64_t d = 0; d < Dv; ++d)
        orow[d] *= f;
    }
  }
}

void BlockProblem::run() const {
  useSingleThreadedBlas();
  const AttentionShape &sh = g.s;
  int64_t blocks = (sh.Sq + kRows - 1) / kRows;
  int64_t tasks = sh.B * sh.H * blocks;
  bool parallel = sh.B * sh.H * sh.Sq * sh.Sk * (sh.D + sh.Dv) >=
                  kParallelElements;
#pragma omp parallel if (parallel)
  {
    std::vector<float> scores(static_cast<size_t>(kRows * sh.Sk));
    std::vector<float> inv(kRows), carry(kRows);
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tasks; ++t)
      block(t / blocks, (t % blocks) * kRows, scores.data(), inv.data(),
            carry.data());
  }
}

struct BlockGradProblem {
  Geometry g;
  const float *q, *k, *v, *out, *lse, *dout;
  float *dq, *dk, *dv;

  void run() const;

private:
  void block(int64_t b, int64_t h, int64_t i0, float *p, float *ds) const;
};

/// Query rows [i0, i0 + kRows) of head (b, h): their dq, and their share
/// of the kv head's dk and dv (added).
void BlockGradProblem::block(int64_t b, int64_t h, int64_t i0, float *p,
                             float *ds) const {
  const AttentionShape &sh = g.s;
  int64_t bh = b * sh.H + h, bhk = b * sh.Hkv + h / sh.group();
  // p and dS are [rows, live] with a row stride of Sk.
  int64_t rows = g.rows(i0), Sk = sh.Sk, live = g.liveKeys(i0), D = sh.D,
          Dv = sh.Dv;
  const float *qb = q + (bh * sh.Sq + i0) * D;
  const float *ob = out + (bh * sh.Sq + i0) * Dv;
  const float *dob = dout + (bh * sh.Sq + i0) * Dv;
  const float *kb = k + bhk * Sk * D, *vb = v + bhk * Sk * Dv;
  float *dqb = dq + (bh * sh.Sq + i0) * D;
  if (live == 0) {
    std::fill(dqb, dqb + rows * D, 0.0f);
    return;
  }
  // p = scale q k^T and dP = dO v^T.
  rowMajorGemm(false, true, rows, live, D, g.scale, qb, D, kb, D, 0.0f, p, Sk);
  rowMajorGemm(false, true, rows, live, Dv, 1.0f, dob, Dv, vb, Dv, 0.0f, ds, Sk);
  for (int64_t r = 0; r < rows; ++r) {
    float *pr = p + r * Sk, *dsr = ds + r * Sk;
    g.maskRow(pr, i0 + r, live);
    float l = lse[bh * sh.Sq + i0 + r];
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t d = 0; d < Dv; ++d)
      dot += dob[r * Dv + d] * ob[r * Dv + d];
    if (l == kNegInf) {
      // No live key anywhere: the output row is constant zero.
      std::fill(pr, pr + live, 0.0f);
      std::fill(dsr, dsr + live, 0.0f);
      continue;
    }
#pragma omp simd
    for (int64_t j = 0; j < live; ++j) {
      pr[j] = fastExp(pr[j] - l);
      dsr[j] = pr[j] * (dsr[j] - dot);
    }
  }
  // dq = scale dS k; dk += scale dS^T q; dv += p^T dO.
  rowMajorGemm(false, false, rows, D, live, g.scale, ds, Sk, kb, D, 0.0f, dqb, D);
  rowMajorGemm(true, false, live, D, rows, g.scale, ds, Sk, qb, D, 1.0f,
       dk + bhk * Sk * D, D);
  rowMajorGemm(true, false, live, Dv, rows, 1.0f, p, Sk, dob, Dv, 1.0f,
       dv + bhk * Sk * Dv, Dv);
}

void BlockGradProblem::run() const {
  useSingleThreadedBlas();
  const AttentionShape &sh = g.s;
  int64_t kvHeads = sh.B * sh.Hkv, group = sh.group();
  bool parallel = sh.B * sh.H * sh.Sq * sh.Sk * (sh.D + sh.Dv) >=
                  kParallelElements;
#pragma omp parallel if (parallel)
  {
    std::vector<float> p(static_cast<size_t>(kRows * sh.Sk));
    std::vector<float> ds(static_cast<size_t>(kRows * sh.Sk));
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < kvHeads; ++t) {
      std::fill(dk + t * sh.Sk * sh.D, dk + (t + 1) * sh.Sk * sh.D, 0.0f);
      std::fill(dv + t * sh.Sk * sh.Dv, dv + (t + 1) * sh.Sk * sh.Dv, 0.0f);
      int64_t b = t / sh.Hkv, hk = t % sh.Hkv;
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
        for (int64_t i0 = 0; i0 < sh.Sq; i0 += kRows)
          block(b, h, i0, p.data(), ds.data());
    }
  }
}

} // namespace

extern "C" {

void cleave_rt_attention_block(char *arena, const cleave_tensor *q,
                               const cleave_tensor *k, const cleave_tensor *v,
                               const cleave_tensor *out_in,
                               const cleave_tensor *lse_in,
                               const cleave_tensor *q_pos,
                               const cleave_tensor *k_pos,
                               const cleave_tensor *out,
                               const cleave_tensor *lse, int32_t causal,
                               double scale) {
  const char *kn = "cleave_rt_attention_block";
  AttentionShape s = checkAttentionBlock(kn, q, k, v, out_in, lse_in, q_pos,
                                         k_pos, out, lse);
  // The results are written while the inputs are still being read.
  auto written = [&](const cleave_tensor &t) {
    return overlaps(t, *out) || overlaps(t, *lse);
  };
  Input<float> qv(arena, *q, written(*q)), kv(arena, *k, written(*k));
  Input<float> vv(arena, *v, written(*v));
  std::optional<Input<float>> oi, li;
  if (out_in) {
    oi.emplace(arena, *out_in, written(*out_in));
    li.emplace(arena, *lse_in, written(*lse_in));
  }
  Input<int64_t> qp(arena, *q_pos), kp(arena, *k_pos);
  Output<float> ov(arena, *out), lv(arena, *lse);
  BlockProblem p{{s, qp.data(), kp.data(), float(scale), causal != 0},
                 qv.data(),
                 kv.data(),
                 vv.data(),
                 oi ? oi->data() : nullptr,
                 li ? li->data() : nullptr,
                 ov.data(),
                 lv.data()};
  p.run();
  ov.commit();
  lv.commit();
}

void cleave_rt_attention_block_grad(
    char *arena, const cleave_tensor *q, const cleave_tensor *k,
    const cleave_tensor *v, const cleave_tensor *out, const cleave_tensor *lse,
    const cleave_tensor *dout, const cleave_tensor *q_pos,
    const cleave_tensor *k_pos, const cleave_tensor *dq,
    const cleave_tensor *dk, const cleave_tensor *dv, int32_t causal,
    double scale) {
  const char *kn = "cleave_rt_attention_block_grad";
  AttentionShape s = checkAttentionBlockGrad(kn, q, k, v, out, lse, dout,
                                             q_pos, k_pos, dq, dk, dv);
  auto written = [&](const cleave_tensor &t) {
    return overlaps(t, *dq) || overlaps(t, *dk) || overlaps(t, *dv);
  };
  Input<float> qv(arena, *q, written(*q)), kv(arena, *k, written(*k));
  Input<float> vv(arena, *v, written(*v)), ov(arena, *out, written(*out));
  Input<float> lv(arena, *lse, written(*lse));
  Input<float> dov(arena, *dout, written(*dout));
  Input<int64_t> qp(arena, *q_pos), kp(arena, *k_pos);
  Output<float> dqv(arena, *dq), dkv(arena, *dk), dvv(arena, *dv);
  BlockGradProblem p{{s, qp.data(), kp.data(), float(scale), causal != 0},
                     qv.data(),
                     kv.data(),
                     vv.data(),
                     ov.data(),
                     lv.data(),
                     dov.data(),
                     dqv.data(),
                     dkv.data(),
                     dvv.data()};
  p.run();
  dqv.commit();
  dkv.commit();
  dvv.commit();
}

} // extern "C"
