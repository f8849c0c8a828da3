//===- KernelChecks.cpp - descriptor checks both backends share -----------===//
//
// See KernelChecks.h.
//
//===----------------------------------------------------------------------===//

#include "KernelChecks.h"

namespace cleave::rt {

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

namespace {

[[noreturn]] void matmulShapeError(const char *kernel, const cleave_tensor &a,
                                   const cleave_tensor &b,
                                   const cleave_tensor &out) {
  cleave_rt_fail("%s: cannot multiply a %s by b %s into out %s", kernel,
                 shapeString(a).c_str(), shapeString(b).c_str(),
                 shapeString(out).c_str());
  __builtin_unreachable();
}

} // namespace

namespace {

MatmulPlan planMatmulShapes(const char *kernel, const cleave_tensor &a,
                            const cleave_tensor &b, const cleave_tensor &out) {
  if (a.rank < 1 || b.rank < 1)
    matmulShapeError(kernel, a, b, out);
  MatmulPlan p;
  int aBatchRank = a.rank >= 2 ? a.rank - 2 : 0;
  int bBatchRank = b.rank >= 2 ? b.rank - 2 : 0;
  p.m = a.rank >= 2 ? a.shape[a.rank - 2] : 1;
  p.k = a.shape[a.rank - 1];
  int64_t bk = b.rank >= 2 ? b.shape[b.rank - 2] : b.shape[0];
  p.n = b.rank >= 2 ? b.shape[b.rank - 1] : 1;
  if (bk != p.k)
    matmulShapeError(kernel, a, b, out);
  p.batchRank = aBatchRank > bBatchRank ? aBatchRank : bBatchRank;
  int matrixDims = (a.rank >= 2) + (b.rank >= 2);
  if (out.rank != p.batchRank + matrixDims)
    matmulShapeError(kernel, a, b, out);
  if (a.rank >= 2 && out.shape[p.batchRank] != p.m)
    matmulShapeError(kernel, a, b, out);
  if (b.rank >= 2 && out.shape[out.rank - 1] != p.n)
    matmulShapeError(kernel, a, b, out);
  // Broadcast the batch dims, right-aligned, with stride 0 where size 1.
  int64_t aStride = p.m * p.k, bStride = p.k * p.n;
  for (int d = p.batchRank - 1; d >= 0; --d) {
    int ad = d - (p.batchRank - aBatchRank);
    int bd = d - (p.batchRank - bBatchRank);
    int64_t as = ad >= 0 ? a.shape[ad] : 1, bs = bd >= 0 ? b.shape[bd] : 1;
    int64_t size = out.shape[d];
    if ((as != size && as != 1) || (bs != size && bs != 1))
      matmulShapeError(kernel, a, b, out);
    p.batchShape[d] = size;
    p.aStrides[d] = as == 1 ? 0 : aStride;
    p.bStrides[d] = bs == 1 ? 0 : bStride;
    if (as == 1 && size != 1)
      p.aDense = false;
    if (bs != 1)
      p.bShared = false;
    aStride *= as;
    bStride *= bs;
    p.batches *= size;
  }
  return p;
}

} // namespace

MatmulPlan planMatmul(const char *kernel, const cleave_tensor *a,
                      const cleave_tensor *b, const cleave_tensor *out) {
  checkTensor(kernel, "a", a);
  checkTensor(kernel, "b", b);
  checkTensor(kernel, "out", out);
  MatmulPlan p = planMatmulShapes(kernel, *a, *b, *out);
  bool isFloat = isFloatType(out->dtype);
  if (isFloat != isFloatType(a->dtype) || isFloat != isFloatType(b->dtype))
    cleave_rt_fail("%s: mixed float and integer operands (%s x %s -> %s)",
                   kernel, dtypeName(a->dtype), dtypeName(b->dtype),
                   dtypeName(out->dtype));
  if (out->dtype == CLEAVE_I1)
    cleave_rt_fail("%s: unsupported dtype i1", kernel);
  return p;
}

namespace {

using NamedOperands =
    std::initializer_list<std::pair<const char *, const cleave_tensor *>>;

/// Checks the descriptors of a GEMM's operands (null ones skipped) and that
/// they are float.
void checkFloatOperands(const char *k, NamedOperands operands) {
  for (auto [name, t] : operands)
    if (t)
      checkTensor(k, name, t);
  for (auto [name, t] : operands)
    if (t && !isFloatType(t->dtype))
      cleave_rt_fail("%s: expects float operands, got %s", k,
                     dtypeName(t->dtype));
}

/// Checks the descriptors of a fused GEMM and that they are float, and
/// plans out [rows, n] = x [rows, k] W for the stored weight w (shapes
/// unchecked: `ok` says whether x, w and out fit).
LinearPlan planRowsGemm(const char *k, NamedOperands operands,
                        const cleave_tensor &x, const cleave_tensor &w,
                        const cleave_tensor &out, int32_t transposeW,
                        int32_t activation, bool &ok) {
  checkFloatOperands(k, operands);
  LinearPlan p;
  p.transposed = transposeW != 0;
  p.activation = activation;
  ok = x.rank >= 1 && w.rank == 2;
  if (!ok)
    return p;
  p.k = w.shape[p.transposed ? 1 : 0];
  p.n = w.shape[p.transposed ? 0 : 1];
  ok = x.shape[x.rank - 1] == p.k && out.rank == x.rank &&
       out.shape[out.rank - 1] == p.n;
  p.rows = 1;
  for (int d = 0; ok && d + 1 < x.rank; ++d) {
    ok = out.shape[d] == x.shape[d];
    p.rows *= x.shape[d];
  }
  return p;
}

/// Checks that a bias gradient has n elements along its last dimension.
void checkBiasGrad(const char *k, const cleave_tensor *dbias, int64_t n) {
  if (dbias && (numElements(*dbias) != n || dbias->rank < 1 ||
                dbias->shape[dbias->rank - 1] != n))
    cleave_rt_fail("%s: expects dbias with %lld elements along its last "
                   "dimension, got %s",
                   k, (long long)n, shapeString(*dbias).c_str());
}

} // namespace

GemmPlan planGemm(const char *k, const cleave_tensor *a, const cleave_tensor *b,
                  const cleave_tensor *out, const cleave_tensor *dbias,
                  int32_t transposeA, int32_t transposeB) {
  GemmPlan p;
  p.transposeA = transposeA != 0;
  p.transposeB = transposeB != 0;
  bool ok;
  if (!p.transposeA) {
    if (dbias)
      cleave_rt_fail("%s: dbias (the sum of a's rows) needs transpose_a", k);
    // a [..., m, k]: the rows of a linear without bias.
    LinearPlan rows = planRowsGemm(k, {{"a", a}, {"b", b}, {"out", out}}, *a,
                                   *b, *out, transposeB, CLEAVE_ACT_NONE, ok);
    p.m = rows.rows;
    p.k = rows.k;
    p.n = rows.n;
  } else {
    checkFloatOperands(k, {{"a", a}, {"b", b}, {"out", out}, {"dbias", dbias}});
    ok = a->rank == 2 && b->rank == 2 && out->rank == 2;
    if (ok) {
      p.k = a->shape[0];
      p.m = a->shape[1];
      p.n = b->shape[p.transposeB ? 0 : 1];
      ok = b->shape[p.transposeB ? 1 : 0] == p.k && out->shape[0] == p.m &&
           out->shape[1] == p.n;
    }
  }
  if (!ok)
    cleave_rt_fail("%s: expects a %s, b %s, out [..., m, n], got a %s, b %s, "
                   "out %s",
                   k, p.transposeA ? "[k, m]" : "[..., m, k]",
                   p.transposeB ? "[n, k]" : "[k, n]", shapeString(*a).c_str(),
                   shapeString(*b).c_str(), shapeString(*out).c_str());
  checkBiasGrad(k, dbias, p.m);
  return p;
}

LinearPlan planLinear(const char *k, const cleave_tensor *x,
                      const cleave_tensor *w, const cleave_tensor *bias,
                      const cleave_tensor *out, const cleave_tensor *pre,
                      int32_t transposeW, int32_t activation) {
  bool ok;
  LinearPlan p = planRowsGemm(
      k, {{"x", x}, {"w", w}, {"bias", bias}, {"out", out}, {"pre", pre}},
      *x, *w, *out, transposeW, activation, ok);
  if (activation < 0 || activation >= CLEAVE_NUM_ACTIVATIONS)
    cleave_rt_fail("%s: unknown activation %d", k, activation);
  if (pre && activation == CLEAVE_ACT_NONE)
    cleave_rt_fail("%s: pre is only defined with an activation", k);
  if (!ok || bias->rank != 1 || bias->shape[0] != p.n)
    cleave_rt_fail("%s: expects x [..., k], w %s, bias [n], out [..., n], got "
                   "x %s, w %s, bias %s, out %s",
                   k, p.transposed ? "[n, k]" : "[k, n]",
                   shapeString(*x).c_str(), shapeString(*w).c_str(),
                   shapeString(*bias).c_str(), shapeString(*out).c_str());
  if (pre && !sameShape(*pre, *out))
    cleave_rt_fail("%s: pre %s does not have out's shape %s", k,
                   shapeString(*pre).c_str(), shapeString(*out).c_str());
  return p;
}

LinearPlan planMatmulGeluGrad(const char *k, const cleave_tensor *dy,
                              const cleave_tensor *w, const cleave_tensor *pre,
                              const cleave_tensor *dz,
                              const cleave_tensor *dbias, int32_t transposeW,
                              int32_t activation) {
  bool ok;
  LinearPlan p = planRowsGemm(
      k, {{"dy", dy}, {"w", w}, {"pre", pre}, {"dz", dz}, {"dbias", dbias}},
      *dy, *w, *dz, transposeW, activation, ok);
  if (activation != CLEAVE_ACT_GELU_ERF && activation != CLEAVE_ACT_GELU_TANH)
    cleave_rt_fail("%s: expects a GELU activation, got %d", k, activation);
  if (!ok || !sameShape(*pre, *dz))
    cleave_rt_fail("%s: expects dy [..., k], w %s, pre and dz [..., n], got "
                   "dy %s, w %s, pre %s, dz %s",
                   k, p.transposed ? "[n, k]" : "[k, n]",
                   shapeString(*dy).c_str(), shapeString(*w).c_str(),
                   shapeString(*pre).c_str(), shapeString(*dz).c_str());
  checkBiasGrad(k, dbias, p.n);
  return p;
}

void checkExpertMatmul(const char *k, const cleave_tensor *x,
                       const cleave_tensor *w, const cleave_tensor *out) {
  checkTensor(k, "x", x);
  checkTensor(k, "w", w);
  checkTensor(k, "out", out);
  if (x->rank != 3 || w->rank != 3 || out->rank != 3 ||
      x->shape[0] != w->shape[0] || out->shape[0] != x->shape[0])
    cleave_rt_fail("%s: expects x [E,C,H], w [E,H,F], out [E,C,F], got x %s, "
                   "w %s, out %s",
                   k, shapeString(*x).c_str(), shapeString(*w).c_str(),
                   shapeString(*out).c_str());
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

void checkSameDtype(const char *kernel, const cleave_tensor &x,
                    const cleave_tensor &out) {
  if (x.dtype != out.dtype)
    cleave_rt_fail("%s: x is %s but out is %s", kernel, dtypeName(x.dtype),
                   dtypeName(out.dtype));
}

namespace {

/// Fails unless `out` is `data` gathered along `dim` by `indices`:
/// data[:dim] + indices + data[dim+1:]; `outName` names out in the message.
void checkGatherShape(const char *kernel, const cleave_tensor &data,
                      const cleave_tensor &indices, const cleave_tensor &out,
                      int64_t dim, const char *outName, const char *dataName) {
  if (dim < 0 || dim >= data.rank)
    cleave_rt_fail("%s: dim %lld is out of range for rank %d", kernel,
                   (long long)dim, data.rank);
  bool ok = out.rank == data.rank - 1 + indices.rank;
  for (int d = 0; ok && d < out.rank; ++d) {
    int64_t want = d < dim                  ? data.shape[d]
                   : d < dim + indices.rank ? indices.shape[d - dim]
                                            : data.shape[d - indices.rank + 1];
    ok = out.shape[d] == want;
  }
  if (!ok)
    cleave_rt_fail("%s: %s %s does not match %s %s gathered along dim %lld "
                   "by indices %s",
                   kernel, outName, shapeString(out).c_str(), dataName,
                   shapeString(data).c_str(), (long long)dim,
                   shapeString(indices).c_str());
}

GatherPlan gatherPlan(const cleave_tensor &data, int64_t dim) {
  GatherPlan g{1, 1, data.shape[dim]};
  for (int d = 0; d < dim; ++d)
    g.outer *= data.shape[d];
  for (int d = int(dim) + 1; d < data.rank; ++d)
    g.inner *= data.shape[d];
  return g;
}

} // namespace

GatherPlan checkGather(const char *k, const cleave_tensor *data,
                       const cleave_tensor *indices, const cleave_tensor *out,
                       int64_t dim) {
  checkTensor(k, "data", data);
  checkTensor(k, "indices", indices);
  checkTensor(k, "out", out);
  checkSameDtype(k, *data, *out);
  checkIndexTensor(k, "indices", *indices);
  checkGatherShape(k, *data, *indices, *out, dim, "out", "data");
  return gatherPlan(*data, dim);
}

GatherPlan checkGatherGrad(const char *k, const cleave_tensor *dy,
                           const cleave_tensor *indices,
                           const cleave_tensor *out, int64_t dim) {
  checkTensor(k, "dy", dy);
  checkTensor(k, "indices", indices);
  checkTensor(k, "out", out);
  checkIndexTensor(k, "indices", *indices);
  if (!isFloatType(dy->dtype) || !isFloatType(out->dtype))
    cleave_rt_fail("%s: dy and out must be float, got %s and %s", k,
                   dtypeName(dy->dtype), dtypeName(out->dtype));
  checkGatherShape(k, *out, *indices, *dy, dim, "dy", "out");
  return gatherPlan(*out, dim);
}

namespace {
/// What transpose, broadcast_in_dim and slice check first: both descriptors,
/// one dtype (they move bytes) and, with `sameRank`, one rank.
void checkMoveOperands(const char *k, const cleave_tensor *x,
                       const cleave_tensor *out, bool sameRank) {
  checkTensor(k, "x", x);
  checkTensor(k, "out", out);
  checkSameDtype(k, *x, *out);
  if (sameRank && x->rank != out->rank)
    cleave_rt_fail("%s: x has rank %d but out has rank %d", k, x->rank,
                   out->rank);
}
} // namespace

void planTranspose(const char *k, const cleave_tensor *x,
                   const cleave_tensor *out, const int64_t *perm,
                   int64_t *srcStrides) {
  checkMoveOperands(k, x, out, /*sameRank=*/true);
  int64_t xStrides[CLEAVE_RT_MAX_RANK];
  contiguousStrides(*x, xStrides);
  bool seen[CLEAVE_RT_MAX_RANK] = {};
  for (int d = 0; d < out->rank; ++d) {
    int64_t p = perm[d];
    if (p < 0 || p >= x->rank || seen[p])
      cleave_rt_fail("%s: perm[%d] = %lld is not a permutation of rank %d", k,
                     d, (long long)p, x->rank);
    seen[p] = true;
    if (x->shape[p] != out->shape[d])
      cleave_rt_fail("%s: out dim %d is %lld but x dim %lld is %lld", k, d,
                     (long long)out->shape[d], (long long)p,
                     (long long)x->shape[p]);
    srcStrides[d] = xStrides[p];
  }
}

void planBroadcastInDim(const char *k, const cleave_tensor *x,
                        const cleave_tensor *out, const int64_t *dims,
                        int64_t *srcStrides) {
  checkMoveOperands(k, x, out, /*sameRank=*/false);
  int64_t xStrides[CLEAVE_RT_MAX_RANK];
  contiguousStrides(*x, xStrides);
  for (int d = 0; d < CLEAVE_RT_MAX_RANK; ++d)
    srcStrides[d] = 0;
  for (int d = 0; d < x->rank; ++d) {
    int64_t o = dims[d];
    if (o < 0 || o >= out->rank)
      cleave_rt_fail("%s: dims[%d] = %lld is out of range for out rank %d", k,
                     d, (long long)o, out->rank);
    if (x->shape[d] != 1 && x->shape[d] != out->shape[o])
      cleave_rt_fail("%s: x dim %d of size %lld does not broadcast to out dim "
                     "%lld of size %lld",
                     k, d, (long long)x->shape[d], (long long)o,
                     (long long)out->shape[o]);
    if (x->shape[d] != 1)
      srcStrides[o] = xStrides[d];
  }
}

namespace {
/// The strided window of slice (read) and slice_grad (`written`): `window`
/// is the elements start + i * strides of `full`. Sets the element strides
/// in `full` of each window dim and the first element's offset. Every index
/// the window touches, first and last, must lie in [0, size); a written
/// window may not repeat an element (stride 0). False when it is empty.
bool planWindow(const char *k, const cleave_tensor *full,
                const cleave_tensor *window, bool written, const int64_t *start,
                const int64_t *strides, int64_t *fullStridesOut,
                int64_t &base) {
  int64_t fullStrides[CLEAVE_RT_MAX_RANK];
  contiguousStrides(*full, fullStrides);
  base = 0;
  bool empty = numElements(*window) == 0;
  for (int d = 0; d < window->rank; ++d) {
    int64_t first = start[d];
    int64_t last = first + (window->shape[d] - 1) * strides[d];
    if (!empty && (first < 0 || first >= full->shape[d] || last < 0 ||
                   last >= full->shape[d]))
      cleave_rt_fail("%s: dim %d %s indices %lld to %lld of size %lld", k, d,
                     written ? "writes" : "reads", (long long)first,
                     (long long)last, (long long)full->shape[d]);
    if (written && !empty && strides[d] == 0 && window->shape[d] > 1)
      cleave_rt_fail("%s: dim %d has stride 0 over %lld elements", k, d,
                     (long long)window->shape[d]);
    base += first * fullStrides[d];
    fullStridesOut[d] = strides[d] * fullStrides[d];
  }
  return !empty;
}
} // namespace

bool planSlice(const char *k, const cleave_tensor *x, const cleave_tensor *out,
               const int64_t *start, const int64_t *strides,
               int64_t *srcStrides, int64_t &base) {
  checkMoveOperands(k, x, out, /*sameRank=*/true);
  return planWindow(k, x, out, /*written=*/false, start, strides, srcStrides,
                    base);
}

bool planSliceGrad(const char *k, const cleave_tensor *dy,
                   const cleave_tensor *out, const int64_t *start,
                   const int64_t *strides, int64_t *dstStrides, int64_t &base) {
  checkTensor(k, "dy", dy);
  checkTensor(k, "out", out);
  if (dy->dtype != out->dtype)
    cleave_rt_fail("%s: dy is %s but out is %s", k, dtypeName(dy->dtype),
                   dtypeName(out->dtype));
  if (dy->rank != out->rank)
    cleave_rt_fail("%s: dy has rank %d but out has rank %d", k, dy->rank,
                   out->rank);
  return planWindow(k, out, dy, /*written=*/true, start, strides, dstStrides,
                    base);
}

int64_t checkLocalSlice(const char *k, const cleave_tensor *x,
                        const cleave_tensor *index, const cleave_tensor *out,
                        int64_t dim) {
  checkMoveOperands(k, x, out, /*sameRank=*/true);
  checkTensor(k, "index", index);
  if (index->rank != 0 ||
      (index->dtype != CLEAVE_I64 && index->dtype != CLEAVE_I32))
    cleave_rt_fail("%s: index is %s %s, not an i64 or i32 scalar", k,
                   dtypeName(index->dtype), shapeString(*index).c_str());
  if (dim < 0 || dim >= x->rank)
    cleave_rt_fail("%s: dim %lld is out of range for rank %d", k,
                   (long long)dim, x->rank);
  bool ok = out->shape[dim] > 0 && x->shape[dim] % out->shape[dim] == 0;
  for (int d = 0; ok && d < x->rank; ++d)
    ok = d == dim || x->shape[d] == out->shape[d];
  if (!ok)
    cleave_rt_fail("%s: out %s is not a block of x %s along dim %lld", k,
                   shapeString(*out).c_str(), shapeString(*x).c_str(),
                   (long long)dim);
  if (overlaps(*x, *out))
    cleave_rt_fail("%s: x overlaps out", k);
  return x->shape[dim] / out->shape[dim];
}

void checkSetIndex(const char *k, const cleave_tensor *out) {
  checkTensor(k, "out", out);
  if (out->rank != 0 || (out->dtype != CLEAVE_I64 && out->dtype != CLEAVE_I32))
    cleave_rt_fail("%s: out is %s %s, not an i64 or i32 scalar", k,
                   dtypeName(out->dtype), shapeString(*out).c_str());
}

void checkConcat(const char *k, const cleave_tensor *const *inputs,
                 int64_t numInputs, const cleave_tensor *out, int64_t dim,
                 int64_t &outer, int64_t &inner) {
  checkTensor(k, "out", out);
  if (dim < 0 || dim >= out->rank)
    cleave_rt_fail("%s: dim %lld is out of range for rank %d", k,
                   (long long)dim, out->rank);
  int64_t total = 0;
  outer = 1;
  inner = 1;
  for (int d = 0; d < dim; ++d)
    outer *= out->shape[d];
  for (int d = int(dim) + 1; d < out->rank; ++d)
    inner *= out->shape[d];
  for (int64_t i = 0; i < numInputs; ++i) {
    const cleave_tensor *in = inputs[i];
    checkTensor(k, "input", in);
    checkSameDtype(k, *in, *out);
    bool ok = in->rank == out->rank;
    for (int d = 0; ok && d < out->rank; ++d)
      ok = d == dim || in->shape[d] == out->shape[d];
    if (!ok)
      cleave_rt_fail("%s: input %lld of shape %s does not match out %s "
                     "outside dim %lld",
                     k, (long long)i, shapeString(*in).c_str(),
                     shapeString(*out).c_str(), (long long)dim);
    if (overlaps(*in, *out))
      cleave_rt_fail("%s: input %lld overlaps out", k, (long long)i);
    total += in->shape[dim];
  }
  if (total != out->shape[dim])
    cleave_rt_fail("%s: inputs sum to %lld along dim %lld but out has %lld", k,
                   (long long)total, (long long)dim,
                   (long long)out->shape[dim]);
}

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

void checkMoeDispatch(const char *kn, const cleave_tensor *tokens,
                      const cleave_tensor *experts, const cleave_tensor *out) {
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
}

void checkMoeCombine(const char *kn, const cleave_tensor *expert_out,
                     const cleave_tensor *gates, const cleave_tensor *experts,
                     const cleave_tensor *out) {
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

//===----------------------------------------------------------------------===//
// Reduction
//===----------------------------------------------------------------------===//

void checkReduce(const char *k, int32_t kind, const cleave_tensor *x,
                 const cleave_tensor *out, const int64_t *dims, int64_t numDims,
                 bool *reduced) {
  checkTensor(k, "x", x);
  checkTensor(k, "out", out);
  if (kind < 0 || kind >= CLEAVE_NUM_REDUCTION_KINDS)
    cleave_rt_fail("%s: unknown kind %d", k, kind);
  for (int64_t i = 0; i < numDims; ++i) {
    if (dims[i] < 0 || dims[i] >= x->rank || (i && dims[i] <= dims[i - 1]))
      cleave_rt_fail("%s: dims must be sorted, unique and in [0, %d), got "
                     "%lld at position %lld",
                     k, x->rank, (long long)dims[i], (long long)i);
    reduced[dims[i]] = true;
  }
  // out keeps the reduced dims as size 1, or drops them.
  bool keep = out->rank == x->rank, ok = keep || out->rank == x->rank - numDims;
  for (int d = 0, o = 0; ok && d < x->rank; ++d) {
    if (reduced[d] && !keep)
      continue;
    ok = out->shape[o++] == (reduced[d] ? 1 : x->shape[d]);
  }
  if (!ok)
    cleave_rt_fail("%s: out %s does not match x %s reduced over %lld dims", k,
                   shapeString(*out).c_str(), shapeString(*x).c_str(),
                   (long long)numDims);
  if (overlaps(*x, *out) && x->offset != out->offset)
    cleave_rt_fail("%s: out partially overlaps x", k);
}

void checkTopk(const char *kn, const cleave_tensor *x,
               const cleave_tensor *values, const cleave_tensor *indices,
               int64_t k, int64_t dim) {
  checkTensor(kn, "x", x);
  checkTensor(kn, "values", values);
  checkTensor(kn, "indices", indices);
  if (dim < 0 || dim >= x->rank)
    cleave_rt_fail("%s: dim %lld is out of range for rank %d", kn,
                   (long long)dim, x->rank);
  if (k < 0 || k > x->shape[dim])
    cleave_rt_fail("%s: k = %lld is out of range [0, %lld]", kn, (long long)k,
                   (long long)x->shape[dim]);
  checkIndexTensor(kn, "indices", *indices);
  bool ok = sameShape(*values, *indices) && values->rank == x->rank;
  for (int d = 0; ok && d < x->rank; ++d)
    ok = values->shape[d] == (d == dim ? k : x->shape[d]);
  if (!ok)
    cleave_rt_fail("%s: values %s and indices %s do not match x %s with k = "
                   "%lld along dim %lld",
                   kn, shapeString(*values).c_str(),
                   shapeString(*indices).c_str(), shapeString(*x).c_str(),
                   (long long)k, (long long)dim);
}

} // namespace cleave::rt
