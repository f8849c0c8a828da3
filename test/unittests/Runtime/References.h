//===- References.h - float64 references of the runtime tests --*- C++ -*-===//
//
// Reimplementations in float64 that more than one test file checks kernels
// against: cross entropy, layer_norm / rms_norm, attention, and the
// vector-Jacobian product of any of them by central differences (the
// reference of the gradient tests).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_UNITTESTS_RUNTIME_REFERENCES_H
#define CLEAVE_TEST_UNITTESTS_RUNTIME_REFERENCES_H

#include "RuntimeTestUtil.h"

#include <algorithm>
#include <functional>

namespace cleave::rt::test {

/// A forward function of float64 inputs, for numericVjp.
using Forward = std::function<std::vector<double>(
    const std::vector<std::vector<double>> &)>;

/// The gradient of sum(forward(inputs) * r) with respect to inputs[which],
/// by central differences.
inline std::vector<double>
numericVjp(const Forward &forward, std::vector<std::vector<double>> inputs,
           size_t which, const std::vector<double> &r, double h = 1e-6) {
  auto dot = [&](const std::vector<double> &y) {
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i)
      s += y[i] * r[i];
    return s;
  };
  std::vector<double> grad(inputs[which].size());
  for (size_t i = 0; i < grad.size(); ++i) {
    double saved = inputs[which][i];
    inputs[which][i] = saved + h;
    double plus = dot(forward(inputs));
    inputs[which][i] = saved - h;
    double minus = dot(forward(inputs));
    inputs[which][i] = saved;
    grad[i] = (plus - minus) / (2 * h);
  }
  return grad;
}

/// Mean cross entropy of [rows, c] logits and integer labels; 0 when every
/// label is `ignore` (with hasIgnore).
inline double refCrossEntropy(const std::vector<double> &logits,
                              const std::vector<double> &labels, int64_t c,
                              bool hasIgnore, int64_t ignore) {
  double total = 0;
  int64_t count = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    int64_t label = int64_t(labels[r]);
    if (hasIgnore && label == ignore)
      continue;
    const double *row = logits.data() + r * size_t(c);
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < c; ++j)
      max = std::max(max, row[j]);
    for (int64_t j = 0; j < c; ++j)
      sum += std::exp(row[j] - max);
    total += max + std::log(sum) - row[label];
    ++count;
  }
  return count ? total / double(count) : 0.0;
}

/// layer_norm (or rms_norm, `rms`) of the rows of n = prod(xs[dim:]); scale
/// and bias (NULL: none) are given in their own shapes and broadcast to
/// xs[dim:], or read flat when they have n elements.
inline std::vector<double> refNorm(const Shape &xs, int64_t dim,
                                   const std::vector<double> &x,
                                   const Shape &ss,
                                   const std::vector<double> &scale,
                                   const std::vector<double> *bias,
                                   const Shape &bs, double eps, bool rms) {
  Shape trailing(xs.begin() + dim, xs.end());
  int64_t n = product(trailing), rows = int64_t(x.size()) / n;
  auto at = [&](const std::vector<double> &v, const Shape &shape, int64_t i) {
    return int64_t(v.size()) == n
               ? v[size_t(i)]
               : v[size_t(broadcastIndex(trailing, shape, i))];
  };
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data() + r * n;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i)
      mean += row[i];
    mean = rms ? 0 : mean / double(n);
    for (int64_t i = 0; i < n; ++i)
      var += (row[i] - mean) * (row[i] - mean);
    double inv = 1 / std::sqrt(var / double(n) + eps);
    for (int64_t i = 0; i < n; ++i)
      out[size_t(r * n + i)] = (row[i] - mean) * inv * at(scale, ss, i) +
                               (bias ? at(*bias, bs, i) : 0.0);
  }
  return out;
}

/// The shapes of an attention call: q [b, h, sq, d], k [b, hkv, sk, d],
/// v [b, hkv, sk, dv], and a mask of maskType broadcast to [b, h, sq, sk].
struct AttentionCase {
  int64_t b, h, hkv, sq, sk, d, dv;
  Shape maskShape; // with maskType -1, empty: no mask
  int32_t maskType;
  bool causal;
};

/// For query row (b, h, i): the scores with the mask added and whether each
/// key is live.
inline void attentionScores(const AttentionCase &c,
                            const std::vector<double> &q,
                            const std::vector<double> &k,
                            const std::vector<double> *mask, double scale,
                            int64_t b, int64_t h, int64_t i,
                            std::vector<double> &s, std::vector<bool> &live) {
  int64_t hk = h / (c.h / c.hkv);
  Shape full = {c.b, c.h, c.sq, c.sk};
  s.assign(size_t(c.sk), 0);
  live.assign(size_t(c.sk), true);
  for (int64_t j = 0; j < c.sk; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < c.d; ++d)
      dot += q[size_t(((b * c.h + h) * c.sq + i) * c.d + d)] *
             k[size_t(((b * c.hkv + hk) * c.sk + j) * c.d + d)];
    s[size_t(j)] = dot * scale;
    if (mask) {
      int64_t fi = ((b * c.h + h) * c.sq + i) * c.sk + j;
      double m = (*mask)[size_t(broadcastIndex(full, c.maskShape, fi))];
      if (c.maskType == CLEAVE_I1)
        live[size_t(j)] = m != 0;
      else
        s[size_t(j)] += m;
    }
    if (c.causal && j > i)
      live[size_t(j)] = false;
    if (s[size_t(j)] == -INFINITY)
      live[size_t(j)] = false;
  }
}

/// The softmax probabilities of one row; all zero when every key is masked.
inline std::vector<double> attentionProbs(const std::vector<double> &s,
                                          const std::vector<bool> &live) {
  double max = -INFINITY, sum = 0;
  for (size_t j = 0; j < s.size(); ++j)
    if (live[j])
      max = std::max(max, s[j]);
  std::vector<double> p(s.size(), 0.0);
  if (max == -INFINITY)
    return p;
  for (size_t j = 0; j < s.size(); ++j)
    if (live[j])
      sum += p[j] = std::exp(s[j] - max);
  for (double &v : p)
    v /= sum;
  return p;
}

/// Scaled dot-product attention, grouped-query (head h reads kv head
/// h / (h / hkv)), causal top-left aligned; fully masked rows are zeros.
inline std::vector<double>
refAttention(const AttentionCase &c, const std::vector<double> &q,
             const std::vector<double> &k, const std::vector<double> &v,
             const std::vector<double> *mask, double scale) {
  std::vector<double> out(size_t(c.b * c.h * c.sq * c.dv), 0.0), s;
  std::vector<bool> live;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t i = 0; i < c.sq; ++i) {
        int64_t hk = h / (c.h / c.hkv);
        attentionScores(c, q, k, mask, scale, b, h, i, s, live);
        std::vector<double> p = attentionProbs(s, live);
        for (int64_t j = 0; j < c.sk; ++j)
          for (int64_t d = 0; d < c.dv; ++d)
            out[size_t(((b * c.h + h) * c.sq + i) * c.dv + d)] +=
                p[size_t(j)] *
                v[size_t(((b * c.hkv + hk) * c.sk + j) * c.dv + d)];
      }
  return out;
}

} // namespace cleave::rt::test

#endif // CLEAVE_TEST_UNITTESTS_RUNTIME_REFERENCES_H
