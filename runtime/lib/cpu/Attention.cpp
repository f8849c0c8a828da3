//===- Attention.cpp - scaled dot-product attention CPU kernel ------------===//
//
// softmax(q k^T * scale + mask) v per (batch, head), with grouped-query
// heads, an optional boolean or additive mask broadcast to [B, H, Sq, Sk],
// and top-left aligned causal masking. Work is split into blocks of query
// rows over all (batch, head) pairs so that a single head still uses every
// thread; a block materializes only its own [rows, Sk] scores. A query row
// whose keys are all masked yields zeros (see cleave_rt.h).
//
//===----------------------------------------------------------------------===//

#include "FastMath.h"
#include "Tensor.h"

#include <cblas.h>

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
      max = std::max(max, sr[j]);
    std::fill(sr + live, sr + keys, 0.0f); // causally masked: p = 0
    if (max == negInf) {
      // Every key masked: p = 0, a row of zeros.
      std::fill(sr, sr + live, 0.0f);
      inv[r] = 0.0f;
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

[[noreturn]] void shapeError(const cleave_tensor &q, const cleave_tensor &k,
                             const cleave_tensor &v, const cleave_tensor &out) {
  cleave_rt_fail("cleave_rt_attention: expects q [B,H,Sq,D], k [B,Hkv,Sk,D], "
                 "v [B,Hkv,Sk,Dv], out [B,H,Sq,Dv] with H a multiple of Hkv, "
                 "got q %s, k %s, v %s, out %s",
                 shapeString(q).c_str(), shapeString(k).c_str(),
                 shapeString(v).c_str(), shapeString(out).c_str());
  __builtin_unreachable();
}

} // namespace

extern "C" void
cleave_rt_attention(char *arena, const cleave_tensor *q, const cleave_tensor *k,
                    const cleave_tensor *v, const cleave_tensor *mask,
                    const cleave_tensor *out, int32_t causal, double scale) {
  const char *kn = "cleave_rt_attention";
  checkTensor(kn, "q", q);
  checkTensor(kn, "k", k);
  checkTensor(kn, "v", v);
  checkTensor(kn, "out", out);
  if (q->rank != 4 || k->rank != 4 || v->rank != 4 || out->rank != 4)
    shapeError(*q, *k, *v, *out);
  int64_t B = q->shape[0], H = q->shape[1], Sq = q->shape[2], D = q->shape[3];
  int64_t Hkv = k->shape[1], Sk = k->shape[2], Dv = v->shape[3];
  if (k->shape[0] != B || v->shape[0] != B || k->shape[3] != D ||
      v->shape[1] != Hkv || v->shape[2] != Sk || out->shape[0] != B ||
      out->shape[1] != H || out->shape[2] != Sq || out->shape[3] != Dv ||
      Hkv == 0 || H % Hkv != 0)
    shapeError(*q, *k, *v, *out);
  for (const cleave_tensor *t : {q, k, v, out})
    if (!isFloatType(t->dtype))
      cleave_rt_fail("%s: unsupported dtype %s", kn, dtypeName(t->dtype));

  // The output is written row by row while inputs are still being read.
  Input<float> qv(arena, *q, overlaps(*q, *out));
  Input<float> kv(arena, *k, overlaps(*k, *out));
  Input<float> vv(arena, *v, overlaps(*v, *out));
  Mask m;
  std::optional<Input<uint8_t>> keepView;
  std::optional<Input<float>> addView;
  if (mask) {
    checkTensor(kn, "mask", mask);
    // Right-align the mask against [B, H, Sq, Sk]; size-1 dims broadcast.
    int64_t full[4] = {B, H, Sq, Sk};
    bool ok = mask->rank <= 4;
    int64_t stride = 1;
    for (int d = 3; ok && d >= 0; --d) {
      int md = d - (4 - mask->rank);
      if (md < 0)
        continue;
      int64_t size = mask->shape[md];
      ok = size == full[d] || size == 1;
      m.strides[d] = size == 1 ? 0 : stride;
      stride *= size;
    }
    if (!ok)
      cleave_rt_fail("%s: mask %s does not broadcast to [%lld, %lld, %lld, "
                     "%lld]",
                     kn, shapeString(*mask).c_str(), (long long)B, (long long)H,
                     (long long)Sq, (long long)Sk);
    if (mask->dtype == CLEAVE_I1)
      keepView.emplace(arena, *mask);
    else if (isFloatType(mask->dtype))
      addView.emplace(arena, *mask);
    else
      cleave_rt_fail("%s: mask must be i1 or float, got %s", kn,
                     dtypeName(mask->dtype));
    m.keep = keepView ? keepView->data() : nullptr;
    m.add = addView ? addView->data() : nullptr;
  }
  Output<float> ov(arena, *out);
  AttentionProblem p{qv.data(), kv.data(), vv.data(),    ov.data(),  m,
                     B,         H,         Hkv,          Sq,         Sk,
                     D,         Dv,        float(scale), causal != 0};
  p.run();
  ov.commit();
}
