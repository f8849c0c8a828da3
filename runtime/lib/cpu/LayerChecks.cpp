//===- LayerChecks.cpp - descriptor checks of the layer kernels ----------===//
//
// See KernelChecks.h: the checks of normalization, the losses, attention,
// the mixture-of-experts kernels and the optimizer updates, which both
// backends share. KernelChecks.cpp has those of matmul, data movement and
// reductions.
//
//===----------------------------------------------------------------------===//

#include "KernelChecks.h"

#include <tuple>

namespace cleave::rt {
//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

void checkNorm(const char *kernel, const cleave_tensor *x,
               const cleave_tensor *out, int64_t dim) {
  checkTensor(kernel, "x", x);
  checkTensor(kernel, "out", out);
  if (!sameShape(*x, *out))
    cleave_rt_fail("%s: x %s and out %s differ in shape", kernel,
                   shapeString(*x).c_str(), shapeString(*out).c_str());
  if (dim < 0 || dim >= x->rank)
    cleave_rt_fail("%s: dim %lld is out of range for rank %d", kernel,
                   (long long)dim, x->rank);
  if (!isFloatType(out->dtype))
    cleave_rt_fail("%s: unsupported dtype %s", kernel, dtypeName(out->dtype));
}

void rowsOf(const cleave_tensor &x, int64_t dim, int64_t &rows, int64_t &n) {
  rows = 1;
  n = 1;
  for (int d = 0; d < x.rank; ++d)
    (d < dim ? rows : n) *= x.shape[d];
}

void trailingStrides(const char *kernel, const char *what,
                     const cleave_tensor &t, const cleave_tensor &x,
                     int64_t dim, int64_t *strides) {
  int rank = x.rank - int(dim), shift = rank - t.rank;
  bool ok = shift >= 0;
  int64_t stride = 1;
  for (int d = rank - 1; ok && d >= 0; --d) {
    int td = d - shift;
    int64_t size = td >= 0 ? t.shape[td] : 1;
    ok = size == 1 || size == x.shape[dim + d];
    strides[d] = size == 1 ? 0 : stride;
    stride *= size;
  }
  if (!ok)
    cleave_rt_fail("%s: %s %s does not broadcast to the normalized dims of x "
                   "%s",
                   kernel, what, shapeString(t).c_str(),
                   shapeString(x).c_str());
}

void checkNormGrad(const char *kernel, const cleave_tensor *x,
                   const cleave_tensor *scale, const cleave_tensor *dy,
                   const cleave_tensor *dx, const cleave_tensor *dscale,
                   const cleave_tensor *dbias, int64_t dim) {
  checkNorm(kernel, x, dx, dim);
  checkTensor(kernel, "scale", scale);
  checkTensor(kernel, "dy", dy);
  if (!sameShape(*x, *dy))
    cleave_rt_fail("%s: x %s and dy %s differ in shape", kernel,
                   shapeString(*x).c_str(), shapeString(*dy).c_str());
  if (!isFloatType(x->dtype) || !isFloatType(dy->dtype))
    cleave_rt_fail("%s: unsupported dtype %s", kernel,
                   dtypeName(isFloatType(x->dtype) ? dy->dtype : x->dtype));
  // dscale has scale's shape; dbias has the forward bias's, which need not
  // be scale's: N elements, or a shape that broadcasts to x's normalized
  // dims.
  if (dscale) {
    checkTensor(kernel, "dscale", dscale);
    if (!sameShape(*dscale, *scale))
      cleave_rt_fail("%s: dscale %s and scale %s differ in shape", kernel,
                     shapeString(*dscale).c_str(), shapeString(*scale).c_str());
  }
  if (dbias) {
    checkTensor(kernel, "dbias", dbias);
    int64_t rows, n, strides[CLEAVE_RT_MAX_RANK];
    rowsOf(*x, dim, rows, n);
    if (numElements(*dbias) != n)
      trailingStrides(kernel, "dbias", *dbias, *x, dim, strides);
  }
  for (const cleave_tensor *t : {dscale, dbias})
    if (t && !isFloatType(t->dtype))
      cleave_rt_fail("%s: unsupported dtype %s", kernel, dtypeName(t->dtype));
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

void checkCrossEntropyShapes(const char *k, const cleave_tensor *logits,
                             const cleave_tensor *labels,
                             const cleave_tensor *scalar,
                             const char *scalarName) {
  checkIndexTensor(k, "labels", *labels);
  bool ok = logits->rank >= 1 && labels->rank == logits->rank - 1 &&
            numElements(*scalar) == 1;
  for (int d = 0; ok && d < labels->rank; ++d)
    ok = labels->shape[d] == logits->shape[d];
  if (!ok)
    cleave_rt_fail("%s: expects logits [..., C], labels [...] and a scalar "
                   "%s, got logits %s, labels %s, %s %s",
                   k, scalarName, shapeString(*logits).c_str(),
                   shapeString(*labels).c_str(), scalarName,
                   shapeString(*scalar).c_str());
}

void checkLossReduction(const char *k, int32_t reduction) {
  if (reduction != CLEAVE_MEAN && reduction != CLEAVE_SUM)
    cleave_rt_fail("%s: reduction must be mean (%d) or sum (%d), got %d", k,
                   int(CLEAVE_MEAN), int(CLEAVE_SUM), int(reduction));
}

void checkCrossEntropyArgs(const char *k, const cleave_tensor *logits,
                           const cleave_tensor *labels,
                           const cleave_tensor *out) {
  checkTensor(k, "logits", logits);
  checkTensor(k, "labels", labels);
  checkTensor(k, "out", out);
  if (!isFloatType(logits->dtype) || !isFloatType(out->dtype))
    cleave_rt_fail("%s: logits and out must be float, got %s and %s", k,
                   dtypeName(logits->dtype), dtypeName(out->dtype));
  checkCrossEntropyShapes(k, logits, labels, out, "out");
}

void checkCrossEntropyGradArgs(const char *k, const cleave_tensor *logits,
                               const cleave_tensor *labels,
                               const cleave_tensor *dloss,
                               const cleave_tensor *dlogits) {
  checkTensor(k, "logits", logits);
  checkTensor(k, "labels", labels);
  checkTensor(k, "dloss", dloss);
  checkTensor(k, "dlogits", dlogits);
  if (!isFloatType(logits->dtype) || !isFloatType(dloss->dtype) ||
      !isFloatType(dlogits->dtype))
    cleave_rt_fail("%s: logits, dloss and dlogits must be float, got %s, %s "
                   "and %s",
                   k, dtypeName(logits->dtype), dtypeName(dloss->dtype),
                   dtypeName(dlogits->dtype));
  checkCrossEntropyShapes(k, logits, labels, dloss, "dloss");
  if (!sameShape(*logits, *dlogits))
    cleave_rt_fail("%s: logits %s and dlogits %s differ in shape", k,
                   shapeString(*logits).c_str(), shapeString(*dlogits).c_str());
}

void checkMse(const char *k, const cleave_tensor *pred,
              const cleave_tensor *target, const cleave_tensor *out) {
  checkTensor(k, "pred", pred);
  checkTensor(k, "target", target);
  checkTensor(k, "out", out);
  if (!isFloatType(out->dtype))
    cleave_rt_fail("%s: out must be float, got %s", k, dtypeName(out->dtype));
  if (!sameShape(*pred, *target) || numElements(*out) != 1)
    cleave_rt_fail("%s: expects pred and target of one shape and a scalar out, "
                   "got pred %s, target %s, out %s",
                   k, shapeString(*pred).c_str(), shapeString(*target).c_str(),
                   shapeString(*out).c_str());
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {

[[noreturn]] void attentionShapeError(const char *kernel,
                                      const cleave_tensor &q,
                                      const cleave_tensor &k,
                                      const cleave_tensor &v,
                                      const cleave_tensor &out) {
  cleave_rt_fail("%s: expects q [B,H,Sq,D], k [B,Hkv,Sk,D], v [B,Hkv,Sk,Dv], "
                 "out [B,H,Sq,Dv] with H a multiple of Hkv, got q %s, k %s, "
                 "v %s, out %s",
                 kernel, shapeString(q).c_str(), shapeString(k).c_str(),
                 shapeString(v).c_str(), shapeString(out).c_str());
  __builtin_unreachable();
}

} // namespace

AttentionShape checkAttention(const char *kn, const cleave_tensor *q,
                              const cleave_tensor *k, const cleave_tensor *v,
                              const cleave_tensor *out, const char *outName) {
  checkTensor(kn, "q", q);
  checkTensor(kn, "k", k);
  checkTensor(kn, "v", v);
  checkTensor(kn, outName, out);
  if (q->rank != 4 || k->rank != 4 || v->rank != 4 || out->rank != 4)
    attentionShapeError(kn, *q, *k, *v, *out);
  AttentionShape s;
  s.B = q->shape[0], s.H = q->shape[1], s.Sq = q->shape[2], s.D = q->shape[3];
  s.Hkv = k->shape[1], s.Sk = k->shape[2], s.Dv = v->shape[3];
  if (k->shape[0] != s.B || v->shape[0] != s.B || k->shape[3] != s.D ||
      v->shape[1] != s.Hkv || v->shape[2] != s.Sk || out->shape[0] != s.B ||
      out->shape[1] != s.H || out->shape[2] != s.Sq || out->shape[3] != s.Dv ||
      s.Hkv == 0 || s.H % s.Hkv != 0)
    attentionShapeError(kn, *q, *k, *v, *out);
  for (const cleave_tensor *t : {q, k, v, out})
    if (!isFloatType(t->dtype))
      cleave_rt_fail("%s: unsupported dtype %s", kn, dtypeName(t->dtype));
  return s;
}

AttentionShape
checkAttentionGrad(const char *kn, const cleave_tensor *q,
                   const cleave_tensor *k, const cleave_tensor *v,
                   const cleave_tensor *dout, const cleave_tensor *dq,
                   const cleave_tensor *dk, const cleave_tensor *dv) {
  AttentionShape s = checkAttention(kn, q, k, v, dout, "dout");
  checkTensor(kn, "dq", dq);
  checkTensor(kn, "dk", dk);
  checkTensor(kn, "dv", dv);
  if (!sameShape(*dq, *q) || !sameShape(*dk, *k) || !sameShape(*dv, *v))
    cleave_rt_fail("%s: dq %s, dk %s and dv %s must have the shapes of q %s, "
                   "k %s and v %s",
                   kn, shapeString(*dq).c_str(), shapeString(*dk).c_str(),
                   shapeString(*dv).c_str(), shapeString(*q).c_str(),
                   shapeString(*k).c_str(), shapeString(*v).c_str());
  for (const cleave_tensor *t : {dq, dk, dv})
    if (!isFloatType(t->dtype))
      cleave_rt_fail("%s: unsupported dtype %s", kn, dtypeName(t->dtype));
  return s;
}

namespace {

/// lse (named `what`) f32 [B, H, Sq].
void checkLse(const char *kn, const char *what, const cleave_tensor *lse,
              const AttentionShape &s) {
  checkTensor(kn, what, lse);
  if (lse->dtype != CLEAVE_F32 || lse->rank != 3 || lse->shape[0] != s.B ||
      lse->shape[1] != s.H || lse->shape[2] != s.Sq)
    cleave_rt_fail("%s: %s must be f32 [%lld, %lld, %lld], got %s %s", kn,
                   what, (long long)s.B, (long long)s.H, (long long)s.Sq,
                   dtypeName(lse->dtype), shapeString(*lse).c_str());
}

/// The positions of the queries and of the keys: i64 [Sq] and [Sk].
void checkPositions(const char *kn, const cleave_tensor *q_pos,
                    const cleave_tensor *k_pos, const AttentionShape &s) {
  checkTensor(kn, "q_pos", q_pos);
  checkTensor(kn, "k_pos", k_pos);
  for (auto [t, size, what] : {std::tuple{q_pos, s.Sq, "q_pos"},
                               std::tuple{k_pos, s.Sk, "k_pos"}})
    if (t->dtype != CLEAVE_I64 || t->rank != 1 || t->shape[0] != size)
      cleave_rt_fail("%s: %s must be i64 [%lld], got %s %s", kn, what,
                     (long long)size, dtypeName(t->dtype),
                     shapeString(*t).c_str());
}

} // namespace

AttentionShape checkAttentionBlock(const char *kn, const cleave_tensor *q,
                                   const cleave_tensor *k,
                                   const cleave_tensor *v,
                                   const cleave_tensor *out_in,
                                   const cleave_tensor *lse_in,
                                   const cleave_tensor *q_pos,
                                   const cleave_tensor *k_pos,
                                   const cleave_tensor *out,
                                   const cleave_tensor *lse) {
  AttentionShape s = checkAttention(kn, q, k, v, out, "out");
  checkLse(kn, "lse", lse, s);
  if ((out_in == nullptr) != (lse_in == nullptr))
    cleave_rt_fail("%s: out_in and lse_in must be given together", kn);
  if (out_in) {
    checkTensor(kn, "out_in", out_in);
    if (!sameShape(*out_in, *out) || !isFloatType(out_in->dtype))
      cleave_rt_fail("%s: out_in %s must be float of out's shape %s", kn,
                     shapeString(*out_in).c_str(), shapeString(*out).c_str());
    checkLse(kn, "lse_in", lse_in, s);
  }
  checkPositions(kn, q_pos, k_pos, s);
  return s;
}

AttentionShape checkAttentionBlockGrad(
    const char *kn, const cleave_tensor *q, const cleave_tensor *k,
    const cleave_tensor *v, const cleave_tensor *out, const cleave_tensor *lse,
    const cleave_tensor *dout, const cleave_tensor *q_pos,
    const cleave_tensor *k_pos, const cleave_tensor *dq,
    const cleave_tensor *dk, const cleave_tensor *dv) {
  AttentionShape s = checkAttentionGrad(kn, q, k, v, dout, dq, dk, dv);
  checkTensor(kn, "out", out);
  if (!sameShape(*out, *dout) || !isFloatType(out->dtype))
    cleave_rt_fail("%s: out %s must be float of dout's shape %s", kn,
                   shapeString(*out).c_str(), shapeString(*dout).c_str());
  checkLse(kn, "lse", lse, s);
  checkPositions(kn, q_pos, k_pos, s);
  return s;
}

void checkAttentionMask(const char *kn, const AttentionShape &s,
                        const cleave_tensor *mask, int64_t strides[4]) {
  checkTensor(kn, "mask", mask);
  int64_t full[4] = {s.B, s.H, s.Sq, s.Sk};
  bool ok = mask->rank <= 4;
  int64_t stride = 1;
  for (int d = 3; ok && d >= 0; --d) {
    strides[d] = 0;
    int md = d - (4 - mask->rank);
    if (md < 0)
      continue;
    int64_t size = mask->shape[md];
    ok = size == full[d] || size == 1;
    strides[d] = size == 1 ? 0 : stride;
    stride *= size;
  }
  if (!ok)
    cleave_rt_fail("%s: mask %s does not broadcast to [%lld, %lld, %lld, "
                   "%lld]",
                   kn, shapeString(*mask).c_str(), (long long)s.B,
                   (long long)s.H, (long long)s.Sq, (long long)s.Sk);
  if (mask->dtype != CLEAVE_I1 && !isFloatType(mask->dtype))
    cleave_rt_fail("%s: mask must be i1 or float, got %s", kn,
                   dtypeName(mask->dtype));
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

void checkExperts(const char *kernel, const cleave_tensor *experts) {
  checkTensor(kernel, "experts", experts);
  if (experts->rank != 2)
    cleave_rt_fail("%s: experts must be [T, k], got %s", kernel,
                   shapeString(*experts).c_str());
  checkIndexTensor(kernel, "experts", *experts);
}

void checkRouterTopk(const char *kn, const cleave_tensor *logits,
                     const cleave_tensor *gates, const cleave_tensor *experts,
                     int64_t k) {
  checkTensor(kn, "logits", logits);
  checkTensor(kn, "gates", gates);
  checkExperts(kn, experts);
  if (!isFloatType(logits->dtype) || !isFloatType(gates->dtype))
    cleave_rt_fail("%s: logits and gates must be float, got %s and %s", kn,
                   dtypeName(logits->dtype), dtypeName(gates->dtype));
  if (logits->rank != 2 || gates->rank != 2 || !sameShape(*gates, *experts) ||
      gates->shape[0] != logits->shape[0] || gates->shape[1] != k || k < 0 ||
      k > logits->shape[1])
    cleave_rt_fail("%s: expects logits [T, E], gates and experts [T, k] with "
                   "k <= E, got logits %s, gates %s, experts %s, k = %lld",
                   kn, shapeString(*logits).c_str(),
                   shapeString(*gates).c_str(), shapeString(*experts).c_str(),
                   (long long)k);
}

/// `groups` divides the tokens and the slots.
void checkGroups(const char *kn, int64_t groups, int64_t tokens,
                 int64_t slots) {
  if (groups < 1 || tokens % groups != 0 || slots % groups != 0)
    cleave_rt_fail("%s: %lld groups must be >= 1 and divide the %lld tokens "
                   "and the %lld slots",
                   kn, (long long)groups, (long long)tokens, (long long)slots);
}

void checkMoeDispatch(const char *kn, const cleave_tensor *tokens,
                      const cleave_tensor *experts, const cleave_tensor *out,
                      int64_t groups) {
  checkTensor(kn, "tokens", tokens);
  checkExperts(kn, experts);
  checkTensor(kn, "out", out);
  if (tokens->rank != 2 || out->rank != 3 ||
      experts->shape[0] != tokens->shape[0] ||
      out->shape[2] != tokens->shape[1])
    cleave_rt_fail("%s: expects tokens [T, H], experts [T, k], out [E, C, H], "
                   "got tokens %s, experts %s, out %s",
                   kn, shapeString(*tokens).c_str(),
                   shapeString(*experts).c_str(), shapeString(*out).c_str());
  if (tokens->dtype != out->dtype)
    cleave_rt_fail("%s: tokens are %s but out is %s", kn,
                   dtypeName(tokens->dtype), dtypeName(out->dtype));
  checkGroups(kn, groups, tokens->shape[0], out->shape[1]);
}

void checkMoeCombine(const char *kn, const cleave_tensor *expert_out,
                     const cleave_tensor *gates, const cleave_tensor *experts,
                     const cleave_tensor *out, int64_t groups) {
  checkTensor(kn, "expert_out", expert_out);
  checkTensor(kn, "gates", gates);
  checkExperts(kn, experts);
  checkTensor(kn, "out", out);
  if (expert_out->rank != 3 || out->rank != 2 || !sameShape(*gates, *experts) ||
      out->shape[0] != experts->shape[0] ||
      out->shape[1] != expert_out->shape[2])
    cleave_rt_fail("%s: expects expert_out [E, C, H], gates and experts "
                   "[T, k], out [T, H], got expert_out %s, gates %s, "
                   "experts %s, out %s",
                   kn, shapeString(*expert_out).c_str(),
                   shapeString(*gates).c_str(), shapeString(*experts).c_str(),
                   shapeString(*out).c_str());
  for (const cleave_tensor *x : {expert_out, gates, out})
    if (!isFloatType(x->dtype))
      cleave_rt_fail("%s: unsupported dtype %s", kn, dtypeName(x->dtype));
  checkGroups(kn, groups, out->shape[0], expert_out->shape[1]);
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

void checkParam(const char *k, const cleave_tensor *param,
                const cleave_tensor *grad) {
  checkTensor(k, "param", param);
  checkTensor(k, "grad", grad);
  if (param->dtype != CLEAVE_F32)
    cleave_rt_fail("%s: param must be f32, got %s", k, dtypeName(param->dtype));
  if (!isFloatType(grad->dtype))
    cleave_rt_fail("%s: grad must be f32, f16 or bf16, got %s", k,
                   dtypeName(grad->dtype));
  if (!sameShape(*param, *grad))
    cleave_rt_fail("%s: param %s and grad %s differ in shape", k,
                   shapeString(*param).c_str(), shapeString(*grad).c_str());
}

void checkState(const char *k, const char *what, const cleave_tensor *state,
                const cleave_tensor *param) {
  checkTensor(k, what, state);
  if (state->dtype != CLEAVE_F32)
    cleave_rt_fail("%s: %s must be f32, got %s", k, what,
                   dtypeName(state->dtype));
  if (!sameShape(*state, *param))
    cleave_rt_fail("%s: %s %s and param %s differ in shape", k, what,
                   shapeString(*state).c_str(), shapeString(*param).c_str());
}

void checkStep(const char *k, const cleave_tensor *step) {
  checkTensor(k, "step", step);
  if (step->dtype != CLEAVE_I64 || numElements(*step) != 1)
    cleave_rt_fail("%s: step must be an i64 scalar, got %s %s", k,
                   dtypeName(step->dtype), shapeString(*step).c_str());
}

void checkGradScale(const char *k, const cleave_tensor *scale) {
  checkTensor(k, "grad_scale", scale);
  if (scale->dtype != CLEAVE_F32 || numElements(*scale) != 1)
    cleave_rt_fail("%s: grad_scale must be an f32 scalar, got %s %s", k,
                   dtypeName(scale->dtype), shapeString(*scale).c_str());
}

} // namespace cleave::rt
