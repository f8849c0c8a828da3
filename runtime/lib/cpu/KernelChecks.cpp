//===- KernelChecks.cpp - descriptor checks both backends share -----------===//
//
// See KernelChecks.h: the checks of matmul, data movement and reductions
// (LayerChecks.cpp has those of the layer kernels).
//
//===----------------------------------------------------------------------===//

#include "KernelChecks.h"

#include "cleave/Runtime/Float16.h"

#include <cstring>

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
  checkIndexScalar(k, "index", index);
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

void checkIndexScalar(const char *k, const char *name,
                      const cleave_tensor *t) {
  checkTensor(k, name, t);
  if (t->rank != 0 || (t->dtype != CLEAVE_I64 && t->dtype != CLEAVE_I32))
    cleave_rt_fail("%s: %s is %s %s, not an i64 or i32 scalar", k, name,
                   dtypeName(t->dtype), shapeString(*t).c_str());
}

uint64_t encodeScalar(const char *k, const cleave_tensor *out,
                      double value) {
  checkTensor(k, "out", out);
  if (out->rank != 0)
    cleave_rt_fail("%s: out is %s %s, not a scalar", k,
                   dtypeName(out->dtype), shapeString(*out).c_str());
  uint64_t bits = 0;
  switch (out->dtype) {
  case CLEAVE_F32: {
    uint32_t u = floatBits(float(value));
    std::memcpy(&bits, &u, sizeof(u));
    return bits;
  }
  case CLEAVE_F16:
    return floatToHalf(float(value));
  case CLEAVE_BF16:
    return floatToBf16(float(value));
  case CLEAVE_I64: {
    int64_t v = int64_t(value);
    std::memcpy(&bits, &v, sizeof(v));
    return bits;
  }
  case CLEAVE_I32: {
    int32_t v = int32_t(value);
    uint32_t u;
    std::memcpy(&u, &v, sizeof(v));
    return u;
  }
  default:
    cleave_rt_fail("%s: out is %s, not a float or integer type", k,
                   dtypeName(out->dtype));
  }
}

void checkSetIndex(const char *k, const cleave_tensor *out) {
  checkIndexScalar(k, "out", out);
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
