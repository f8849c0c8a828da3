//===- AttentionBlock.cu - the blocks of ring attention, CUDA kernels -----===//
//
// attention_block and attention_block_grad (see cleave_rt.h and the CPU
// kernels' AttentionBlock.cpp for the arithmetic), computed in f32 with the
// scores stored, as Attention.cu's materialized implementation: the query
// heads of a kv head are consecutive in q, so per kv head they form one
// [group * Sq, D] matrix and every product is one strided batched GEMM
// over the kv heads of a chunk; row kernels mask by position and take the
// merged softmax (forward) or the softmax backward with the final
// log-sum-exp (backward) in place.
//
//===----------------------------------------------------------------------===//

#include "DeviceUtil.cuh"

#include "../cpu/KernelChecks.h"
#include "../cpu/Tensor.h"

#include <algorithm>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

/// Bytes of one score buffer ([chunk kv heads, group * Sq, Sk] f32).
constexpr int64_t kScoreBudget = int64_t(256) << 20;

/// How many kv heads one chunk holds (at least one).
int64_t chunkHeads(const AttentionShape &s) {
  int64_t perHead = s.group() * s.Sq * s.Sk * int64_t(sizeof(float));
  int64_t heads = perHead > 0 ? kScoreBudget / perHead : s.B * s.Hkv;
  return std::max<int64_t>(1, std::min(heads, s.B * s.Hkv));
}

/// What a row kernel needs to find a score row's query and keys.
struct BlockRows {
  int64_t Sq, Sk;
  int64_t firstRow; // global row (b * H + h) * Sq + i of the chunk's row 0
  const int64_t *qPos, *kPos;
  bool causal;

  __device__ bool masked(int64_t i, int64_t j) const {
    return causal && kPos[j] > qPos[i];
  }
};

/// Forward: row `row` of the scores `s` ([rows, Sk], scaled) becomes its
/// probabilities normalized over this block and the blocks before (whose
/// log-sum-exp is lseIn, or none), lse gets the merged log-sum-exp and
/// carry the factor of the earlier output.
__global__ void mergedSoftmaxKernel(float *s, int64_t rows, BlockRows g,
                                    const float *lseIn, float *lse,
                                    float *carry) {
  const float negInf = -INFINITY;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    float *sr = s + row * g.Sk;
    int64_t global = g.firstRow + row, i = global % g.Sq;
    float before = lseIn ? lseIn[global] : negInf;
    float max = before;
    for (int64_t j = threadIdx.x; j < g.Sk; j += blockDim.x) {
      float x = g.masked(i, j) ? negInf : sr[j];
      sr[j] = x;
      max = x > max ? x : max;
    }
    max = blockReduce(max, negInf, MaxOp());
    if (max == negInf) {
      // No live key so far: zeros (a NaN score keeps the row NaN).
      for (int64_t j = threadIdx.x; j < g.Sk; j += blockDim.x)
        sr[j] = sr[j] != sr[j] ? sr[j] : 0.0f;
      if (threadIdx.x == 0) {
        lse[global] = negInf;
        carry[row] = 0.0f;
      }
      continue;
    }
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < g.Sk; j += blockDim.x) {
      float e = expf(sr[j] - max);
      sr[j] = e;
      sum += e;
    }
    float kept = before == negInf ? 0.0f : expf(before - max);
    sum = blockReduce(sum, 0.0f, SumOp()) + kept;
    float inv = 1.0f / sum;
    for (int64_t j = threadIdx.x; j < g.Sk; j += blockDim.x)
      sr[j] *= inv;
    if (threadIdx.x == 0) {
      lse[global] = max + logf(sum);
      carry[row] = kept * inv;
    }
  }
}

/// out[row] += carry[row] * outIn[row] over [rows, Dv].
__global__ void carryKernel(float *out, const float *outIn,
                            const float *carry, int64_t rows, int64_t Dv) {
  int64_t n = rows * Dv;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    out[e] += carry[e / Dv] * outIn[e];
}

/// Backward: p = exp(s - lse) of the scores `p` in place (zero where
/// masked or where lse is -inf), and dS = p (dP - rowsum(dO * O)) in place
/// of dP; `o` and `dout` are the chunk's rows of the output and of its
/// gradient ([rows, Dv]).
__global__ void blockSoftmaxBackwardKernel(float *p, float *ds, int64_t rows,
                                           BlockRows g, const float *lse,
                                           const float *o, const float *dout,
                                           int64_t Dv) {
  const float negInf = -INFINITY;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    int64_t global = g.firstRow + row, i = global % g.Sq;
    float dot = 0.0f;
    for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x)
      dot += dout[row * Dv + d] * o[row * Dv + d];
    dot = blockReduce(dot, 0.0f, SumOp());
    float l = lse[global];
    float *pr = p + row * g.Sk, *dr = ds + row * g.Sk;
    for (int64_t j = threadIdx.x; j < g.Sk; j += blockDim.x) {
      float x = l == negInf || g.masked(i, j) ? 0.0f : expf(pr[j] - l);
      pr[j] = x;
      dr[j] = x * (dr[j] - dot);
    }
  }
}

unsigned elementBlocks(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65535));
}

const int64_t *positions(char *arena, const cleave_tensor *t) {
  return reinterpret_cast<const int64_t *>(dataOf(arena, *t));
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
  if (numElements(*lse) == 0)
    return;
  auto written = [&](const cleave_tensor &t) {
    return overlaps(t, *out) || overlaps(t, *lse);
  };
  ScratchBuffer qBuf, kBuf, vBuf, inBuf, lseInBuf, outBuf;
  const float *qp = f32Input(arena, *q, written(*q), qBuf, kn);
  const float *kp = f32Input(arena, *k, written(*k), kBuf, kn);
  const float *vp = f32Input(arena, *v, written(*v), vBuf, kn);
  const float *ip =
      out_in ? f32Input(arena, *out_in, written(*out_in), inBuf, kn) : nullptr;
  const float *lip =
      lse_in ? f32Input(arena, *lse_in, written(*lse_in), lseInBuf, kn)
             : nullptr;
  float *op = f32Output(arena, *out, outBuf, kn);
  float *lp = reinterpret_cast<float *>(dataOf(arena, *lse));
  int64_t heads = s.B * s.Hkv, chunk = chunkHeads(s);
  int64_t gq = s.group() * s.Sq;
  ScratchBuffer scores(size_t(std::max<int64_t>(1, chunk * gq * s.Sk)) *
                           sizeof(float),
                       kn);
  ScratchBuffer carryBuf(size_t(chunk * gq) * sizeof(float), kn);
  float *p = scores.as<float>(), *carry = carryBuf.as<float>();
  for (int64_t c0 = 0; c0 < heads; c0 += chunk) {
    int64_t nb = std::min(chunk, heads - c0), rows = nb * gq;
    gemmF32(kn, false, true, gq, s.Sk, s.D, float(scale), qp + c0 * gq * s.D,
            s.D, gq * s.D, kp + c0 * s.Sk * s.D, s.D, s.Sk * s.D, 0.0f, p,
            s.Sk, gq * s.Sk, nb);
    BlockRows g{s.Sq, s.Sk, c0 * gq, positions(arena, q_pos),
                positions(arena, k_pos), causal != 0};
    mergedSoftmaxKernel<<<rowBlocks(rows), rowThreads(s.Sk), 0, stream()>>>(
        p, rows, g, lip, lp, carry);
    checkLaunchOf(kn);
    // out = P v per kv head, then the earlier blocks' share.
    float *oc = op + c0 * gq * s.Dv;
    gemmF32(kn, false, false, gq, s.Dv, s.Sk, 1.0f, p, s.Sk, gq * s.Sk,
            vp + c0 * s.Sk * s.Dv, s.Dv, s.Sk * s.Dv, 0.0f, oc, s.Dv,
            gq * s.Dv, nb);
    if (ip) {
      carryKernel<<<elementBlocks(rows * s.Dv), kThreads, 0, stream()>>>(
          oc, ip + c0 * gq * s.Dv, carry, rows, s.Dv);
      checkLaunchOf(kn);
    }
  }
  commitF32Output(arena, *out, op, kn);
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
  ScratchBuffer qBuf, kBuf, vBuf, oBuf, lBuf, doBuf, dqBuf, dkBuf, dvBuf;
  const float *qp = f32Input(arena, *q, written(*q), qBuf, kn);
  const float *kp = f32Input(arena, *k, written(*k), kBuf, kn);
  const float *vp = f32Input(arena, *v, written(*v), vBuf, kn);
  const float *op = f32Input(arena, *out, written(*out), oBuf, kn);
  const float *lp = f32Input(arena, *lse, written(*lse), lBuf, kn);
  const float *dop = f32Input(arena, *dout, written(*dout), doBuf, kn);
  float *dqp = f32Output(arena, *dq, dqBuf, kn);
  float *dkp = f32Output(arena, *dk, dkBuf, kn);
  float *dvp = f32Output(arena, *dv, dvBuf, kn);
  int64_t heads = s.B * s.Hkv, chunk = chunkHeads(s);
  int64_t gq = s.group() * s.Sq, D = s.D, Dv = s.Dv, Sk = s.Sk;
  float fscale = float(scale);
  size_t scoreBytes =
      size_t(std::max<int64_t>(1, chunk * gq * Sk)) * sizeof(float);
  ScratchBuffer pBuf(scoreBytes, kn), dsBuf(scoreBytes, kn);
  float *p = pBuf.as<float>(), *ds = dsBuf.as<float>();
  for (int64_t c0 = 0; c0 < heads; c0 += chunk) {
    int64_t nb = std::min(chunk, heads - c0), rows = nb * gq;
    const float *qc = qp + c0 * gq * D, *kc = kp + c0 * Sk * D;
    const float *vc = vp + c0 * Sk * Dv, *doc = dop + c0 * gq * Dv;
    // The scores and dP = dO v^T, then p and dS in place.
    gemmF32(kn, false, true, gq, Sk, D, fscale, qc, D, gq * D, kc, D, Sk * D,
            0.0f, p, Sk, gq * Sk, nb);
    gemmF32(kn, false, true, gq, Sk, Dv, 1.0f, doc, Dv, gq * Dv, vc, Dv,
            Sk * Dv, 0.0f, ds, Sk, gq * Sk, nb);
    BlockRows g{s.Sq, Sk, c0 * gq, positions(arena, q_pos),
                positions(arena, k_pos), causal != 0};
    blockSoftmaxBackwardKernel<<<rowBlocks(rows), rowThreads(std::max(Sk, Dv)),
                                 0, stream()>>>(p, ds, rows, g, lp,
                                                op + c0 * gq * Dv, doc, Dv);
    checkLaunchOf(kn);
    // dv = P^T dO and dk = scale dS^T q (summed over the stacked query
    // heads of a kv head), dq = scale dS k.
    gemmF32(kn, true, false, Sk, Dv, gq, 1.0f, p, Sk, gq * Sk, doc, Dv,
            gq * Dv, 0.0f, dvp + c0 * Sk * Dv, Dv, Sk * Dv, nb);
    gemmF32(kn, true, false, Sk, D, gq, fscale, ds, Sk, gq * Sk, qc, D,
            gq * D, 0.0f, dkp + c0 * Sk * D, D, Sk * D, nb);
    gemmF32(kn, false, false, gq, D, Sk, fscale, ds, Sk, gq * Sk, kc, D,
            Sk * D, 0.0f, dqp + c0 * gq * D, D, gq * D, nb);
  }
  commitF32Output(arena, *dq, dqp, kn);
  commitF32Output(arena, *dk, dkp, kn);
  commitF32Output(arena, *dv, dvp, kn);
}

} // extern "C"
