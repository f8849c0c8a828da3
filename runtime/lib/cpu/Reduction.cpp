//===- Reduction.cpp - reduce and topk CPU kernels ------------------------===//
//
// reduce over any sorted set of dims, and topk along one dim. A reduction
// over several non-adjacent dims runs as a sequence of single-run reductions
// of the shape [K1, R, K2], the last reduced run first; float sums
// accumulate in f64 so that long reductions keep f32 accuracy.
//
//===----------------------------------------------------------------------===//

#include "KernelChecks.h"
#include "Tensor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace cleave::rt;

namespace {

/// f64 accumulation for float inputs, i64 for integer ones.
template <typename T> struct Accumulator;
template <> struct Accumulator<float> { using type = double; };
template <> struct Accumulator<int64_t> { using type = int64_t; };

template <typename Acc> Acc identity(int32_t kind) {
  if (kind == CLEAVE_MAX_REDUCE)
    return std::numeric_limits<Acc>::has_infinity
               ? -std::numeric_limits<Acc>::infinity()
               : std::numeric_limits<Acc>::lowest();
  if (kind == CLEAVE_MIN_REDUCE)
    return std::numeric_limits<Acc>::has_infinity
               ? std::numeric_limits<Acc>::infinity()
               : std::numeric_limits<Acc>::max();
  return Acc(0);
}

/// Combines with NaN propagation for max and min (v != v only for NaN).
template <typename Acc> inline Acc combine(int32_t kind, Acc acc, Acc v) {
  if (kind == CLEAVE_MAX_REDUCE)
    return (v > acc || v != v) ? v : acc;
  if (kind == CLEAVE_MIN_REDUCE)
    return (v < acc || v != v) ? v : acc;
  return acc + v;
}

/// out[k1, k2] = reduce over r of in[k1, r, k2].
template <typename In, typename Acc>
void reduceRun(const In *in, Acc *out, int64_t k1, int64_t r, int64_t k2,
               int32_t kind) {
  bool sum = kind == CLEAVE_SUM || kind == CLEAVE_MEAN;
  bool parallel = k1 * r * k2 >= kParallelElements;
  if (k2 == 1) {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t i = 0; i < k1; ++i) {
      const In *row = in + i * r;
      Acc acc = identity<Acc>(kind);
      if (sum) {
#pragma omp simd reduction(+ : acc)
        for (int64_t j = 0; j < r; ++j)
          acc += Acc(row[j]);
      } else {
        for (int64_t j = 0; j < r; ++j)
          acc = combine(kind, acc, Acc(row[j]));
      }
      out[i] = acc;
    }
    return;
  }
  // Reduce rows onto a strip of out, keeping the inner loop contiguous.
  constexpr int64_t kStrip = 512;
  int64_t strips = (k2 + kStrip - 1) / kStrip;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < k1 * strips; ++t) {
    int64_t i = t / strips, begin = (t % strips) * kStrip;
    int64_t len = std::min(kStrip, k2 - begin);
    Acc *o = out + i * k2 + begin;
    for (int64_t c = 0; c < len; ++c)
      o[c] = identity<Acc>(kind);
    for (int64_t j = 0; j < r; ++j) {
      const In *row = in + (i * r + j) * k2 + begin;
      if (sum) {
#pragma omp simd
        for (int64_t c = 0; c < len; ++c)
          o[c] += Acc(row[c]);
      } else {
        for (int64_t c = 0; c < len; ++c)
          o[c] = combine(kind, o[c], Acc(row[c]));
      }
    }
  }
}

template <typename T>
void reduceTyped(char *arena, int32_t kind, const cleave_tensor &x,
                 const cleave_tensor &out, const bool *reduced) {
  using Acc = typename Accumulator<T>::type;
  // Runs of adjacent dims of one kind (size-1 dims dropped).
  std::vector<int64_t> sizes;
  std::vector<bool> isReduced;
  int64_t count = 1;
  for (int d = 0; d < x.rank; ++d) {
    if (reduced[d])
      count *= x.shape[d];
    if (x.shape[d] == 1)
      continue;
    if (!sizes.empty() && isReduced.back() == reduced[d]) {
      sizes.back() *= x.shape[d];
      continue;
    }
    sizes.push_back(x.shape[d]);
    isReduced.push_back(reduced[d]);
  }
  Input<T> xv(arena, x);
  Output<T> ov(arena, out);
  int64_t outCount = numElements(out);
  std::vector<Acc> cur, next;
  bool first = true;
  for (int g = int(sizes.size()) - 1; g >= 0; --g) {
    if (!isReduced[g])
      continue;
    int64_t k1 = 1, k2 = 1;
    for (int h = 0; h < g; ++h)
      k1 *= sizes[h];
    for (size_t h = g + 1; h < sizes.size(); ++h)
      k2 *= sizes[h];
    next.assign(size_t(k1 * k2), Acc(0));
    if (first)
      reduceRun(xv.data(), next.data(), k1, sizes[g], k2, kind);
    else
      reduceRun(cur.data(), next.data(), k1, sizes[g], k2, kind);
    first = false;
    cur.swap(next);
    sizes.erase(sizes.begin() + g);
    isReduced.erase(isReduced.begin() + g);
  }
  T *o = ov.data();
  if (first) {
    // Only size-1 (or no) dims are reduced: a copy, unless x is empty.
    for (int64_t i = 0; i < outCount; ++i)
      o[i] = count == 0 ? T(identity<Acc>(kind)) : xv[i];
  } else {
    for (int64_t i = 0; i < outCount; ++i) {
      Acc v = cur[size_t(i)];
      if (kind == CLEAVE_MEAN)
        v = count ? v / Acc(count)
                  : (std::numeric_limits<Acc>::has_quiet_NaN
                         ? std::numeric_limits<Acc>::quiet_NaN()
                         : Acc(0));
      o[i] = T(v);
    }
  }
  ov.commit();
}

/// "a comes first": larger (or smaller) value, NaN ranked above every
/// number, ties broken by the lower index.
template <typename T>
inline bool ranksBefore(T va, int64_t ia, T vb, int64_t ib, bool smallest) {
  bool na = va != va, nb = vb != vb;
  if (na || nb) {
    if (na && nb)
      return ia < ib;
    return smallest ? nb : na;
  }
  if (va != vb)
    return smallest ? va < vb : va > vb;
  return ia < ib;
}

template <typename T>
void topkTyped(char *arena, const cleave_tensor &x, const cleave_tensor &values,
               const cleave_tensor &indices, int64_t k, int64_t dim,
               bool smallest) {
  int64_t outer = 1, inner = 1, size = x.shape[dim];
  for (int d = 0; d < dim; ++d)
    outer *= x.shape[d];
  for (int d = int(dim) + 1; d < x.rank; ++d)
    inner *= x.shape[d];
  Input<T> xv(arena, x, overlaps(x, values) || overlaps(x, indices));
  Output<T> vv(arena, values);
  Output<int64_t> iv(arena, indices);
  const T *xp = xv.data();
  T *vp = vv.data();
  int64_t *ip = iv.data();
  int64_t slices = outer * inner;
#pragma omp parallel if (slices * size >= kParallelElements)
  {
    std::vector<int64_t> order(static_cast<size_t>(size));
#pragma omp for schedule(static)
    for (int64_t s = 0; s < slices; ++s) {
      int64_t o = s / inner, i = s % inner;
      const T *base = xp + o * size * inner + i;
      for (int64_t j = 0; j < size; ++j)
        order[size_t(j)] = j;
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int64_t a, int64_t b) {
                          return ranksBefore(base[a * inner], a,
                                             base[b * inner], b, smallest);
                        });
      for (int64_t j = 0; j < k; ++j) {
        int64_t at = (o * k + j) * inner + i;
        vp[at] = base[order[size_t(j)] * inner];
        ip[at] = order[size_t(j)];
      }
    }
  }
  vv.commit();
  iv.commit();
}

} // namespace

extern "C" {

void cleave_rt_reduce(char *arena, int32_t kind, const cleave_tensor *x,
                      const cleave_tensor *out, const int64_t *dims,
                      int64_t num_dims) {
  const char *k = "cleave_rt_reduce";
  bool reduced[CLEAVE_RT_MAX_RANK] = {};
  checkReduce(k, kind, x, out, dims, num_dims, reduced);
  if (isFloatType(out->dtype))
    reduceTyped<float>(arena, kind, *x, *out, reduced);
  else
    reduceTyped<int64_t>(arena, kind, *x, *out, reduced);
}

void cleave_rt_topk(char *arena, const cleave_tensor *x,
                    const cleave_tensor *values, const cleave_tensor *indices,
                    int64_t k, int64_t dim, int32_t smallest) {
  const char *kn = "cleave_rt_topk";
  checkTopk(kn, x, values, indices, k, dim);
  if (k == 0)
    return;
  if (isFloatType(x->dtype))
    topkTyped<float>(arena, *x, *values, *indices, k, dim, smallest != 0);
  else
    topkTyped<int64_t>(arena, *x, *values, *indices, k, dim, smallest != 0);
}

} // extern "C"
