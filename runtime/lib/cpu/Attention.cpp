//===- Attention.cpp - scaled dot-product attention CPU kernel ------------===//
//
// softmax(q k^T * scale + mask) v per (batch, head), with grouped-query
// heads, an optional boolean or additive mask broadcast to [B, H, Sq, Sk],
// and top-left aligned causal masking. Work is split into blocks of query
// rows over all (batch, head) pairs so that a single head still uses every
// thread; a block materializes only its own [rows, Sk] scores. A query row
// whose keys are all masked yields zeros (see cleave_rt.h).
//
// attention_grad recomputes the probabilities P from q and k and applies
// the softmax backward dS = P (dP - rowsum(P dP)) with dP = dO v^T; then
// dq = scale dS k, dk = scale dS^T q and dv = P^T dO. dk and dv sum over the
// query heads of a kv head, so the work is split in one of two ways: by kv
// head (one task owns its dk, dv and its query heads' dq), or, when there
// are too few kv heads to keep the threads busy, in two passes: query
// blocks (dq and the row statistics), then key blocks (dk, dv), which
// recomputes the scores once more.
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

struct Mask {
  const uint8_t *keep = nullptr; // i1 mask
  const float *add = nullptr;    // additive float mask
  int64_t strides[4] = {0, 0, 0, 0};

  int64_t offset(int64_t b, int64_t h, int64_t i) const {
    return b * strides[0] + h * strides[1] + i * strides[2];
  }
};

/// The kernel proper, on f32 views. Work items are blocks of kRows query
/// rows of one (batch, head), spread over the OpenMP threads; each block
/// computes its scores with one sgemm (q k^T), masks them and takes the
/// softmax row by row in place, and multiplies the probabilities by v with
/// a second sgemm (OpenBLAS runs single-threaded inside each thread).
/// Under causal, a block only reads the keys up to its last query.
struct AttentionProblem {
  const float *q, *k, *v;
  float *out;
  Mask mask;
  int64_t B, H, Hkv, Sq, Sk, D, Dv;
  float scale;
  bool causal;

  static constexpr int64_t kRows = 64;

  void run() const;

private:
  void block(int64_t b, int64_t h, int64_t i0, float *scores, float *inv) const;
};

void AttentionProblem::run() const {
  useSingleThreadedBlas();
  int64_t blocks = (Sq + kRows - 1) / kRows;
  int64_t tasks = B * H * blocks;
  bool parallel = B * H * Sq * Sk * (D + Dv) >= kParallelElements;
#pragma omp parallel if (parallel)
  {
    std::vector<float> scores(static_cast<size_t>(kRows * Sk));
    std::vector<float> inv(static_cast<size_t>(kRows));
    // Dynamic: causal blocks near the end of a head cost more.
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tasks; ++t) {
      int64_t bh = t / blocks;
      block(bh / H, bh % H, (t % blocks) * kRows, scores.data(), inv.data());
    }
  }
}

void AttentionProblem::block(int64_t b, int64_t h, int64_t i0, float *s,
                             float *inv) const {
  const float negInf = -std::numeric_limits<float>::infinity();
  int64_t bh = b * H + h, bhk = b * Hkv + h / (H / Hkv);
  int64_t rows = std::min(kRows, Sq - i0);
  int64_t keys = causal ? std::min(Sk, i0 + rows) : Sk;
  float *o = out + (bh * Sq + i0) * Dv;
  if (keys == 0 || Dv == 0) {
    std::fill(o, o + rows * Dv, 0.0f);
    return;
  }
  // s = scale * q k^T, [rows, keys] with leading dimension `keys`.
  if (D == 0)
    std::fill(s, s + rows * keys, 0.0f);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(rows),
                blasint(keys), blasint(D), scale, q + (bh * Sq + i0) * D,
                blasint(D), k + bhk * Sk * D, blasint(D), 0.0f, s,
                blasint(keys));
  for (int64_t r = 0; r < rows; ++r) {
    float *sr = s + r * keys;
    int64_t i = i0 + r;
    int64_t live = causal ? std::min(keys, i + 1) : keys;
    int64_t mOff = mask.offset(b, h, i), ms = mask.strides[3];
    if (mask.keep) {
      for (int64_t j = 0; j < live; ++j)
        if (!mask.keep[mOff + j * ms])
          sr[j] = negInf;
    } else if (mask.add) {
      for (int64_t j = 0; j < live; ++j)
        sr[j] += mask.add[mOff + j * ms];
    }
    float max = negInf;
#pragma omp simd reduction(max : max)
    for (int64_t j = 0; j < live; ++j)
      max = sr[j] > max ? sr[j] : max;
    std::fill(sr + live, sr + keys, 0.0f); // causally masked: p = 0
    if (max == negInf) {
      // Every key masked: p = 0, a row of zeros. The max skips NaN, so a
      // NaN score among masked keys lands here too; it makes the row NaN,
      // as with any NaN score (an overflow must not turn into zeros).
      bool nan = std::any_of(sr, sr + live, [](float x) { return x != x; });
      std::fill(sr, sr + live, nan ? std::nanf("") : 0.0f);
      inv[r] = nan ? 1.0f : 0.0f;
      continue;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < live; ++j) {
      sr[j] = fastExp(sr[j] - max);
      sum += sr[j];
    }
    inv[r] = 1.0f / sum;
  }
  // out = (p v) / sum.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(rows),
              blasint(Dv), blasint(keys), 1.0f, s, blasint(keys),
              v + bhk * Sk * Dv, blasint(Dv), 0.0f, o, blasint(Dv));
  for (int64_t r = 0; r < rows; ++r) {
    float f = inv[r];
#pragma omp simd
    for (int64_t d = 0; d < Dv; ++d)
      o[r * Dv + d] *= f;
  }
}

/// The mask operand viewed as f32 (additive) or bytes (i1) with its strides
/// broadcast against [B, H, Sq, Sk].
struct MaskView {
  Mask m;
  std::optional<Input<uint8_t>> keepView;
  std::optional<Input<float>> addView;

  MaskView(const char *kn, char *arena, const cleave_tensor *mask,
           const AttentionShape &s) {
    if (!mask)
      return;
    checkAttentionMask(kn, s, mask, m.strides);
    if (mask->dtype == CLEAVE_I1)
      keepView.emplace(arena, *mask);
    else
      addView.emplace(arena, *mask);
    m.keep = keepView ? keepView->data() : nullptr;
    m.add = addView ? addView->data() : nullptr;
  }
};

/// The backward kernel on f32 views. Scores are computed for blocks of
/// kRows query rows (and, in the key pass, kCols keys).
struct AttentionGradProblem {
  const float *q, *k, *v, *dout;
  float *dq, *dk, *dv;
  Mask mask;
  AttentionShape s;
  float scale;
  bool causal;

  static constexpr int64_t kRows = 64;
  static constexpr int64_t kCols = 64;

  void run() const;

private:
  int64_t qOff(int64_t bh, int64_t i) const { return (bh * s.Sq + i) * s.D; }
  int64_t oOff(int64_t bh, int64_t i) const { return (bh * s.Sq + i) * s.Dv; }
  int64_t kOff(int64_t bhk, int64_t j) const { return (bhk * s.Sk + j) * s.D; }
  int64_t vOff(int64_t bhk, int64_t j) const { return (bhk * s.Sk + j) * s.Dv; }
  /// Adds the mask to scores row `sr` of query i for keys [j0, j0 + n):
  /// masked keys become -inf.
  void maskRow(float *sr, int64_t b, int64_t h, int64_t i, int64_t j0,
               int64_t n) const;
  void queryBlock(int64_t b, int64_t h, int64_t i0, bool accumulateKV, float *p,
                  float *ds, float *rowMax, float *rowInv, float *rowDot) const;
  void keyBlock(int64_t b, int64_t hk, int64_t j0, float *p, float *ds,
                const float *rowMax, const float *rowInv,
                const float *rowDot) const;
};

void AttentionGradProblem::maskRow(float *sr, int64_t b, int64_t h, int64_t i,
                                   int64_t j0, int64_t n) const {
  const float negInf = -std::numeric_limits<float>::infinity();
  int64_t mOff = mask.offset(b, h, i) + j0 * mask.strides[3];
  int64_t ms = mask.strides[3];
  // Local pointers and selects, so that the loops vectorize.
  if (const uint8_t *keep = mask.keep ? mask.keep + mOff : nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      sr[j] = keep[j * ms] ? sr[j] : negInf;
  } else if (const float *add = mask.add ? mask.add + mOff : nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      sr[j] += add[j * ms];
  }
  if (causal)
    for (int64_t j = std::max<int64_t>(0, i + 1 - j0); j < n; ++j)
      sr[j] = negInf;
}

/// Query rows [i0, i0 + kRows) of head (b, h) against all their keys: P,
/// dS = P (dP - rowsum(P dP)) and dq. With accumulateKV the block also adds
/// its dk and dv contributions (the caller owns the kv head); otherwise it
/// records each row's max, 1 / sum and rowsum(P dP) for keyBlock, indexed
/// by the row within the head.
void AttentionGradProblem::queryBlock(int64_t b, int64_t h, int64_t i0,
                                      bool accumulateKV, float *p, float *ds,
                                      float *rowMax, float *rowInv,
                                      float *rowDot) const {
  const float negInf = -std::numeric_limits<float>::infinity();
  int64_t bh = b * s.H + h, bhk = b * s.Hkv + h / (s.H / s.Hkv);
  int64_t rows = std::min(kRows, s.Sq - i0);
  int64_t keys = causal ? std::min(s.Sk, i0 + rows) : s.Sk;
  // p = scale q k^T and dP = dO v^T, both [rows, keys].
  rowMajorGemm(false, true, rows, keys, s.D, scale, q + qOff(bh, i0), s.D,
       k + kOff(bhk, 0), s.D, 0.0f, p, keys);
  rowMajorGemm(false, true, rows, keys, s.Dv, 1.0f, dout + oOff(bh, i0), s.Dv,
       v + vOff(bhk, 0), s.Dv, 0.0f, ds, keys);
  for (int64_t r = 0; r < rows; ++r) {
    float *pr = p + r * keys, *dsr = ds + r * keys;
    maskRow(pr, b, h, i0 + r, 0, keys);
    float max = negInf;
    // A select on values, not std::max (a select on references), so that
    // GCC vectorizes the reduction. NaN is skipped either way.
#pragma omp simd reduction(max : max)
    for (int64_t j = 0; j < keys; ++j)
      max = pr[j] > max ? pr[j] : max;
    float inv = 0.0f, dot = 0.0f;
    if (max == negInf) {
      // Every key masked: the output row is constant zero.
      max = 0.0f;
      std::fill(pr, pr + keys, 0.0f);
    } else {
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < keys; ++j) {
        pr[j] = fastExp(pr[j] - max);
        sum += pr[j];
      }
      inv = 1.0f / sum;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j < keys; ++j) {
        pr[j] *= inv;
        dot += pr[j] * dsr[j];
      }
    }
#pragma omp simd
    for (int64_t j = 0; j < keys; ++j)
      dsr[j] = pr[j] * (dsr[j] - dot);
    if (!accumulateKV) {
      rowMax[i0 + r] = max;
      rowInv[i0 + r] = inv;
      rowDot[i0 + r] = dot;
    }
  }
  // dq = scale dS k.
  rowMajorGemm(false, false, rows, s.D, keys, scale, ds, keys, k + kOff(bhk, 0), s.D,
       0.0f, dq + qOff(bh, i0), s.D);
  if (!accumulateKV)
    return;
  // dk += scale dS^T q, dv += P^T dO.
  rowMajorGemm(true, false, keys, s.D, rows, scale, ds, keys, q + qOff(bh, i0), s.D,
       1.0f, dk + kOff(bhk, 0), s.D);
  rowMajorGemm(true, false, keys, s.Dv, rows, 1.0f, p, keys, dout + oOff(bh, i0), s.Dv,
       1.0f, dv + vOff(bhk, 0), s.Dv);
}

/// Keys [j0, j0 + kCols) of kv head (b, hk): dk and dv from every query row
/// of the heads that share it, with P recomputed from the row statistics of
/// queryBlock (indexed by b * H + h, then row).
void AttentionGradProblem::keyBlock(int64_t b, int64_t hk, int64_t j0, float *p,
                                    float *ds, const float *rowMax,
                                    const float *rowInv,
                                    const float *rowDot) const {
  int64_t bhk = b * s.Hkv + hk, group = s.H / s.Hkv;
  int64_t cols = std::min(kCols, s.Sk - j0);
  float *dkb = dk + kOff(bhk, j0), *dvb = dv + vOff(bhk, j0);
  std::fill(dkb, dkb + cols * s.D, 0.0f);
  std::fill(dvb, dvb + cols * s.Dv, 0.0f);
  // Under causal, query rows before j0 see none of these keys.
  int64_t first = causal ? std::min(j0, s.Sq) : 0;
  for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    int64_t bh = b * s.H + h;
    for (int64_t i0 = first; i0 < s.Sq; i0 += kRows) {
      int64_t rows = std::min(kRows, s.Sq - i0);
      rowMajorGemm(false, true, rows, cols, s.D, scale, q + qOff(bh, i0), s.D,
           k + kOff(bhk, j0), s.D, 0.0f, p, cols);
      rowMajorGemm(false, true, rows, cols, s.Dv, 1.0f, dout + oOff(bh, i0), s.Dv,
           v + vOff(bhk, j0), s.Dv, 0.0f, ds, cols);
      for (int64_t r = 0; r < rows; ++r) {
        int64_t row = bh * s.Sq + i0 + r;
        float *pr = p + r * cols, *dsr = ds + r * cols;
        maskRow(pr, b, h, i0 + r, j0, cols);
        // A fully masked row has max 0 and inv 0: p = 0 (exp(-inf) = 0).
        float max = rowMax[row], inv = rowInv[row], dot = rowDot[row];
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) {
          pr[j] = fastExp(pr[j] - max) * inv;
          dsr[j] = pr[j] * (dsr[j] - dot);
        }
      }
      rowMajorGemm(true, false, cols, s.D, rows, scale, ds, cols, q + qOff(bh, i0), s.D,
           1.0f, dkb, s.D);
      rowMajorGemm(true, false, cols, s.Dv, rows, 1.0f, p, cols, dout + oOff(bh, i0),
           s.Dv, 1.0f, dvb, s.Dv);
    }
  }
}

void AttentionGradProblem::run() const {
  useSingleThreadedBlas();
  int64_t qBlocks = (s.Sq + kRows - 1) / kRows;
  int64_t kvHeads = s.B * s.Hkv;
  bool parallel = s.B * s.H * s.Sq * s.Sk * (s.D + s.Dv) >= kParallelElements;
  int threads = parallel ? omp_get_max_threads() : 1;
  // One task per kv head does 5 matrix products per block; the two passes
  // do 7 but have more, smaller tasks. Take one task per kv head when the
  // last round of tasks still keeps most threads busy.
  int64_t rounds = (kvHeads + threads - 1) / threads;
  bool byKvHead = threads == 1 || kvHeads * 10 >= rounds * threads * 7;
  if (byKvHead) {
    int team = int(std::min<int64_t>(threads, kvHeads));
#pragma omp parallel num_threads(team) if (parallel)
    {
      std::vector<float> p(static_cast<size_t>(kRows * s.Sk));
      std::vector<float> ds(static_cast<size_t>(kRows * s.Sk));
#pragma omp for schedule(dynamic)
      for (int64_t t = 0; t < kvHeads; ++t) {
        int64_t b = t / s.Hkv, hk = t % s.Hkv, group = s.H / s.Hkv;
        std::fill(dk + kOff(t, 0), dk + kOff(t + 1, 0), 0.0f);
        std::fill(dv + vOff(t, 0), dv + vOff(t + 1, 0), 0.0f);
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
          for (int64_t i0 = 0; i0 < s.Sq; i0 += kRows)
            queryBlock(b, h, i0, true, p.data(), ds.data(), nullptr, nullptr,
                       nullptr);
      }
    }
    return;
  }
  size_t statRows = static_cast<size_t>(s.B * s.H * s.Sq);
  std::vector<float> rowMax(statRows), rowInv(statRows), rowDot(statRows);
  int64_t kBlocks = (s.Sk + kCols - 1) / kCols;
#pragma omp parallel
  {
    std::vector<float> p(static_cast<size_t>(kRows * s.Sk));
    std::vector<float> ds(static_cast<size_t>(kRows * s.Sk));
    // Dynamic: causal blocks differ in cost.
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < s.B * s.H * qBlocks; ++t) {
      int64_t bh = t / qBlocks;
      int64_t off = bh * s.Sq;
      queryBlock(bh / s.H, bh % s.H, (t % qBlocks) * kRows, false, p.data(),
                 ds.data(), rowMax.data() + off, rowInv.data() + off,
                 rowDot.data() + off);
    }
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < kvHeads * kBlocks; ++t) {
      int64_t bhk = t / kBlocks;
      keyBlock(bhk / s.Hkv, bhk % s.Hkv, (t % kBlocks) * kCols, p.data(),
               ds.data(), rowMax.data(), rowInv.data(), rowDot.data());
    }
  }
}

} // namespace

extern "C" {

void cleave_rt_attention(char *arena, const cleave_tensor *q,
                         const cleave_tensor *k, const cleave_tensor *v,
                         const cleave_tensor *mask, const cleave_tensor *out,
                         int32_t causal, double scale) {
  const char *kn = "cleave_rt_attention";
  AttentionShape s = checkAttention(kn, q, k, v, out, "out");
  // The output is written row by row while inputs are still being read.
  Input<float> qv(arena, *q, overlaps(*q, *out));
  Input<float> kv(arena, *k, overlaps(*k, *out));
  Input<float> vv(arena, *v, overlaps(*v, *out));
  MaskView m(kn, arena, mask, s);
  Output<float> ov(arena, *out);
  AttentionProblem p{qv.data(), kv.data(), vv.data(),    ov.data(),  m.m,
                     s.B,       s.H,       s.Hkv,        s.Sq,       s.Sk,
                     s.D,       s.Dv,      float(scale), causal != 0};
  p.run();
  ov.commit();
}

void cleave_rt_attention_grad(char *arena, const cleave_tensor *q,
                              const cleave_tensor *k, const cleave_tensor *v,
                              const cleave_tensor *mask,
                              const cleave_tensor *dout,
                              const cleave_tensor *dq, const cleave_tensor *dk,
                              const cleave_tensor *dv, int32_t causal,
                              double scale) {
  const char *kn = "cleave_rt_attention_grad";
  AttentionShape s = checkAttentionGrad(kn, q, k, v, dout, dq, dk, dv);
  // The gradients are written while every input is still being read.
  auto written = [&](const cleave_tensor &t) {
    return overlaps(t, *dq) || overlaps(t, *dk) || overlaps(t, *dv);
  };
  Input<float> qv(arena, *q, written(*q));
  Input<float> kv(arena, *k, written(*k));
  Input<float> vv(arena, *v, written(*v));
  Input<float> dov(arena, *dout, written(*dout));
  MaskView m(kn, arena, mask, s);
  Output<float> dqv(arena, *dq), dkv(arena, *dk), dvv(arena, *dv);
  AttentionGradProblem p{qv.data(),  kv.data(),    vv.data(),  dov.data(),
                         dqv.data(), dkv.data(),   dvv.data(), m.m,
                         s,          float(scale), causal != 0};
  p.run();
  dqv.commit();
  dkv.commit();
  dvv.commit();
}

} // extern "C"
