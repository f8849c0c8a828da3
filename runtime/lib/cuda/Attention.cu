//===- Attention.cu - scaled dot-product attention CUDA kernels -----------===//
//
// softmax(q k^T * scale + mask) v with grouped-query heads, an optional i1
// or additive float mask broadcast to [B, H, Sq, Sk], top-left aligned
// causal masking, and zeros for query rows whose keys are all masked (see
// cleave_rt.h).
//
// Two implementations. The fused tiled kernels of FlashAttention.cu run by
// default: they never store the scores, and their backward is
// deterministic. The materialized implementation below takes the shapes
// they do not (head dims past 128, or more shared memory than the device
// grants a block), and every shape when the environment variable
// CLEAVE_CUDA_ATTENTION is "materialized". It is read at each call: "fused"
// or unset is the default (on tensor cores where the operands allow, see
// TensorCoreAttention.cu), "fused-simt" keeps every fused kernel on the
// CUDA cores, and any other value is an error.
//
// The materialized implementation computes in f32 with the scores stored:
// per kv head, the query heads that share it are consecutive in q
// ([B, H, Sq, D] with h = hk * group + g), so they form one [group * Sq, D]
// matrix and every product is one strided batched GEMM over the kv heads.
// A row kernel masks the scores and takes the softmax in place. The kv
// heads are processed in chunks whose score buffers stay under
// kScoreBudget bytes. attention_grad recomputes P the same way, then
// dP = dO v^T, dS = P (dP - rowsum(P dP)), dq = scale dS k,
// dk = scale dS^T q and dv = P^T dO; in the stacked layout the last two
// sum over the query heads of a kv head inside the GEMM. When every tensor
// is 16-bit these GEMMs run in TF32 on the tensor cores: the 16-bit
// operands are exact in TF32, and only the f32 P and dS lose bits (2^-11
// relative), below the outputs' own rounding. The fused backward computes
// on the CUDA cores in f32, and so does the fused forward but for 16-bit
// operands; test/gpu/run-packed.sh times a 16-bit training step with each.
//
//===----------------------------------------------------------------------===//

#include "DeviceUtil.cuh"
#include "FlashAttention.cuh"

#include "../cpu/KernelChecks.h"
#include "../cpu/Tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

/// Bytes of one score buffer ([chunk kv heads, group * Sq, Sk] f32); a
/// single kv head's scores may exceed it.
constexpr int64_t kScoreBudget = int64_t(256) << 20;

/// The geometry the row kernels need to find (b, h, i) of a score row.
struct RowGeometry {
  int64_t H, Sq, Sk;
  int64_t firstRow; // global row (b * H + h) * Sq + i of the chunk's row 0
  bool causal;
};

/// Masks rows [0, rows) of the scores `s` ([rows, Sk], already scaled) in
/// place and replaces each with its softmax; a row whose keys are all
/// masked (max -inf) becomes zeros. NaN scores are skipped by the max, as
/// in the CPU kernel, and propagate through the sum.
__global__ void maskedSoftmaxKernel(float *s, int64_t rows, RowGeometry g,
                                    AttentionMask mask) {
  const float negInf = -INFINITY;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    float *sr = s + row * g.Sk;
    int64_t global = g.firstRow + row;
    int64_t i = global % g.Sq, bh = global / g.Sq;
    int64_t b = bh / g.H, h = bh % g.H;
    int64_t live = g.causal ? min(g.Sk, i + 1) : g.Sk;
    int64_t mOff =
        b * mask.strides[0] + h * mask.strides[1] + i * mask.strides[2];
    float max = negInf;
    for (int64_t j = threadIdx.x; j < g.Sk; j += blockDim.x) {
      float x = sr[j];
      if (j >= live) {
        x = negInf;
      } else if (mask.data) {
        int64_t at = mOff + j * mask.strides[3];
        if (mask.dtype == CLEAVE_I1)
          x = reinterpret_cast<const uint8_t *>(mask.data)[at] ? x : negInf;
        else
          x += loadF32(mask.data, mask.dtype, at);
      }
      sr[j] = x;
      max = x > max ? x : max;
    }
    max = blockReduce(max, negInf, MaxOp());
    if (max == negInf) {
      // Every key masked: p = 0, so the row of the output is zeros. The max
      // skips NaN: a NaN score among masked keys makes the row NaN, as any
      // NaN score does (the CPU backend's rule).
      for (int64_t j = threadIdx.x; j < g.Sk; j += blockDim.x)
        sr[j] = sr[j] != sr[j] ? sr[j] : 0.0f;
      continue;
    }
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < g.Sk; j += blockDim.x) {
      float e = expf(sr[j] - max);
      sr[j] = e;
      sum += e;
    }
    float inv = 1.0f / blockReduce(sum, 0.0f, SumOp());
    for (int64_t j = threadIdx.x; j < g.Sk; j += blockDim.x)
      sr[j] *= inv;
  }
}

/// dS = P (dP - rowsum(P dP)) in place of dP, row by row ([rows, Sk]).
__global__ void softmaxBackwardKernel(const float *p, float *ds, int64_t rows,
                                      int64_t Sk) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float *pr = p + row * Sk;
    float *dr = ds + row * Sk;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < Sk; j += blockDim.x)
      dot += pr[j] * dr[j];
    dot = blockReduce(dot, 0.0f, SumOp());
    for (int64_t j = threadIdx.x; j < Sk; j += blockDim.x)
      dr[j] = pr[j] * (dr[j] - dot);
  }
}

/// The mask's strides broadcast against [B, H, Sq, Sk] (right-aligned,
/// size-1 dims broadcast), checked on the host.
AttentionMask maskArgs(const char *kn, char *arena, const cleave_tensor *mask,
                       const AttentionShape &s) {
  AttentionMask m;
  if (!mask)
    return m;
  checkAttentionMask(kn, s, mask, m.strides);
  m.data = dataOf(arena, *mask);
  m.dtype = mask->dtype;
  return m;
}

/// How many kv heads one chunk holds so that a score buffer stays within
/// kScoreBudget (at least one).
int64_t chunkHeads(const AttentionShape &s) {
  int64_t perHead = s.group() * s.Sq * s.Sk * int64_t(sizeof(float));
  int64_t heads = perHead > 0 ? kScoreBudget / perHead : s.B * s.Hkv;
  return std::max<int64_t>(1, std::min(heads, s.B * s.Hkv));
}

/// Computes the softmax probabilities of kv heads [c0, c0 + nb) into `p`
/// ([nb, group * Sq, Sk]): p = scale q k^T, masked, softmax per row.
void probabilities(const char *kn, const AttentionShape &s, const float *q,
                   const float *k, AttentionMask mask, bool causal, float scale,
                   int64_t c0, int64_t nb, float *p, bool tf32) {
  int64_t gq = s.group() * s.Sq;
  gemmF32(kn, false, true, gq, s.Sk, s.D, scale, q + c0 * gq * s.D, s.D,
          gq * s.D, k + c0 * s.Sk * s.D, s.D, s.Sk * s.D, 0.0f, p, s.Sk,
          gq * s.Sk, nb, tf32);
  int64_t rows = nb * gq;
  RowGeometry g{s.H, s.Sq, s.Sk, c0 * gq, causal};
  maskedSoftmaxKernel<<<rowBlocks(rows), rowThreads(s.Sk), 0, stream()>>>(
      p, rows, g, mask);
  checkLaunchOf(kn);
}

/// Whether the materialized path's GEMMs may use TF32: every tensor is
/// 16-bit, so the operands read from them are exact in TF32 and the f32
/// intermediates (probabilities, their gradients) lose less than the
/// 16-bit outputs round away.
bool tf32Applies(std::initializer_list<const cleave_tensor *> tensors) {
  for (const cleave_tensor *t : tensors)
    if (t->dtype != CLEAVE_BF16 && t->dtype != CLEAVE_F16)
      return false;
  return true;
}

/// CLEAVE_CUDA_ATTENTION (see the file comment). Read at each call, so
/// that a test or a benchmark can switch.
enum class Implementation { Fused, FusedSimt, Materialized };
Implementation implementation() {
  const char *env = std::getenv("CLEAVE_CUDA_ATTENTION");
  if (!env || !*env || std::strcmp(env, "fused") == 0)
    return Implementation::Fused;
  if (std::strcmp(env, "fused-simt") == 0)
    return Implementation::FusedSimt;
  if (std::strcmp(env, "materialized") == 0)
    return Implementation::Materialized;
  cleave_rt_fail("CLEAVE_CUDA_ATTENTION must be 'fused', 'fused-simt' or "
                 "'materialized', got '%s'",
                 env);
}

/// The fused kernels' problem when they run for `s` (where they support
/// it, unless the materialized implementation is asked for), else none.
std::optional<FlashProblem> fusedProblem(const AttentionShape &s,
                                         AttentionMask mask, int32_t causal,
                                         double scale) {
  Implementation impl = implementation();
  if (impl == Implementation::Materialized || !flashAttentionSupports(s))
    return std::nullopt;
  return FlashProblem{s, mask, causal != 0, float(scale),
                      impl == Implementation::Fused};
}

void zeroF32(float *data, const cleave_tensor &t) {
  check(cudaMemsetAsync(data, 0, size_t(numElements(t)) * sizeof(float),
                        stream()),
        "zeroing the attention gradients");
}

} // namespace

extern "C" {

void cleave_rt_attention(char *arena, const cleave_tensor *q,
                         const cleave_tensor *k, const cleave_tensor *v,
                         const cleave_tensor *mask, const cleave_tensor *out,
                         int32_t causal, double scale) {
  const char *kn = "cleave_rt_attention";
  AttentionShape s = checkAttention(kn, q, k, v, out, "out");
  AttentionMask m = maskArgs(kn, arena, mask, s);
  if (numElements(*out) == 0)
    return;
  if (s.Sk == 0) {
    // No keys at all: every row is fully masked.
    check(cudaMemsetAsync(dataOf(arena, *out), 0,
                          size_t(numElements(*out)) * elementSize(out->dtype),
                          stream()),
          "zeroing the attention output");
    return;
  }
  if (std::optional<FlashProblem> fp = fusedProblem(s, m, causal, scale)) {
    // Inputs that out overwrites are read from copies (in their dtype).
    ScratchBuffer qBuf, kBuf, vBuf;
    FlashInput qi{bytesInput(arena, *q, overlaps(*q, *out), qBuf, kn),
                  q->dtype};
    FlashInput ki{bytesInput(arena, *k, overlaps(*k, *out), kBuf, kn),
                  k->dtype};
    FlashInput vi{bytesInput(arena, *v, overlaps(*v, *out), vBuf, kn),
                  v->dtype};
    flashAttention(kn, *fp, qi, ki, vi, {dataOf(arena, *out), out->dtype});
    return;
  }
  // Inputs that out overwrites are read from copies.
  ScratchBuffer qBuf, kBuf, vBuf, outBuf;
  const float *qp = f32Input(arena, *q, overlaps(*q, *out), qBuf, kn);
  const float *kp = f32Input(arena, *k, overlaps(*k, *out), kBuf, kn);
  const float *vp = f32Input(arena, *v, overlaps(*v, *out), vBuf, kn);
  float *op = f32Output(arena, *out, outBuf, kn);
  int64_t heads = s.B * s.Hkv, chunk = chunkHeads(s);
  int64_t gq = s.group() * s.Sq;
  bool tf32 = tf32Applies({q, k, v, out});
  ScratchBuffer scores(size_t(chunk * gq * s.Sk) * sizeof(float), kn);
  float *p = scores.as<float>();
  for (int64_t c0 = 0; c0 < heads; c0 += chunk) {
    int64_t nb = std::min(chunk, heads - c0);
    probabilities(kn, s, qp, kp, m, causal != 0, float(scale), c0, nb, p,
                  tf32);
    // out = P v, [group * Sq, Sk] x [Sk, Dv] per kv head.
    gemmF32(kn, false, false, gq, s.Dv, s.Sk, 1.0f, p, s.Sk, gq * s.Sk,
            vp + c0 * s.Sk * s.Dv, s.Dv, s.Sk * s.Dv, 0.0f, op + c0 * gq * s.Dv,
            s.Dv, gq * s.Dv, nb, tf32);
  }
  commitF32Output(arena, *out, op, kn);
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
  AttentionMask m = maskArgs(kn, arena, mask, s);
  // The gradients are written while every input is still being read.
  auto written = [&](const cleave_tensor &t) {
    return overlaps(t, *dq) || overlaps(t, *dk) || overlaps(t, *dv);
  };
  if (std::optional<FlashProblem> fp = fusedProblem(s, m, causal, scale)) {
    ScratchBuffer qBuf, kBuf, vBuf, doBuf;
    FlashInput qi{bytesInput(arena, *q, written(*q), qBuf, kn), q->dtype};
    FlashInput ki{bytesInput(arena, *k, written(*k), kBuf, kn), k->dtype};
    FlashInput vi{bytesInput(arena, *v, written(*v), vBuf, kn), v->dtype};
    FlashInput doi{bytesInput(arena, *dout, written(*dout), doBuf, kn),
                   dout->dtype};
    flashAttentionGrad(
        kn, *fp, qi, ki, vi, doi, {dataOf(arena, *dq), dq->dtype},
        {dataOf(arena, *dk), dk->dtype}, {dataOf(arena, *dv), dv->dtype});
    return;
  }
  ScratchBuffer qBuf, kBuf, vBuf, doBuf, dqBuf, dkBuf, dvBuf;
  const float *qp = f32Input(arena, *q, written(*q), qBuf, kn);
  const float *kp = f32Input(arena, *k, written(*k), kBuf, kn);
  const float *vp = f32Input(arena, *v, written(*v), vBuf, kn);
  const float *dop = f32Input(arena, *dout, written(*dout), doBuf, kn);
  float *dqp = f32Output(arena, *dq, dqBuf, kn);
  float *dkp = f32Output(arena, *dk, dkBuf, kn);
  float *dvp = f32Output(arena, *dv, dvBuf, kn);
  int64_t heads = s.B * s.Hkv, chunk = chunkHeads(s);
  int64_t gq = s.group() * s.Sq;
  int64_t D = s.D, Dv = s.Dv, Sk = s.Sk;
  float fscale = float(scale);
  bool tf32 = tf32Applies({q, k, v, dout, dq, dk, dv});
  if (gq * Sk == 0) {
    // No scores: dq is zeros (no keys) and dk, dv are zeros (no queries),
    // whichever of them has elements.
    zeroF32(dqp, *dq);
    zeroF32(dkp, *dk);
    zeroF32(dvp, *dv);
  } else {
    ScratchBuffer pBuf(size_t(chunk * gq * Sk) * sizeof(float), kn);
    ScratchBuffer dsBuf(size_t(chunk * gq * Sk) * sizeof(float), kn);
    float *p = pBuf.as<float>(), *ds = dsBuf.as<float>();
    for (int64_t c0 = 0; c0 < heads; c0 += chunk) {
      int64_t nb = std::min(chunk, heads - c0);
      const float *qc = qp + c0 * gq * D, *kc = kp + c0 * Sk * D;
      const float *vc = vp + c0 * Sk * Dv, *doc = dop + c0 * gq * Dv;
      probabilities(kn, s, qp, kp, m, causal != 0, fscale, c0, nb, p, tf32);
      // dP = dO v^T, then dS in place.
      gemmF32(kn, false, true, gq, Sk, Dv, 1.0f, doc, Dv, gq * Dv, vc, Dv,
              Sk * Dv, 0.0f, ds, Sk, gq * Sk, nb, tf32);
      int64_t rows = nb * gq;
      softmaxBackwardKernel<<<rowBlocks(rows), rowThreads(Sk), 0, stream()>>>(
          p, ds, rows, Sk);
      checkLaunchOf(kn);
      // dv = P^T dO and dk = scale dS^T q: the stacked query heads of a kv
      // head are the inner dimension, so the GEMM sums over them.
      gemmF32(kn, true, false, Sk, Dv, gq, 1.0f, p, Sk, gq * Sk, doc, Dv,
              gq * Dv, 0.0f, dvp + c0 * Sk * Dv, Dv, Sk * Dv, nb, tf32);
      gemmF32(kn, true, false, Sk, D, gq, fscale, ds, Sk, gq * Sk, qc, D,
              gq * D, 0.0f, dkp + c0 * Sk * D, D, Sk * D, nb, tf32);
      // dq = scale dS k.
      gemmF32(kn, false, false, gq, D, Sk, fscale, ds, Sk, gq * Sk, kc, D,
              Sk * D, 0.0f, dqp + c0 * gq * D, D, gq * D, nb, tf32);
    }
  }
  commitF32Output(arena, *dq, dqp, kn);
  commitF32Output(arena, *dk, dkp, kn);
  commitF32Output(arena, *dv, dvp, kn);
}

} // extern "C"
