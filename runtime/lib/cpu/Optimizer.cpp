//===- Optimizer.cpp - optimizer update CPU kernels -----------------------===//
//
// sgd and adamw: in-place updates of f32 parameters and f32 state with the
// formulas of torch.optim.SGD and torch.optim.AdamW (their single-tensor
// implementations, which PyTorch uses for CPU tensors). The per-step
// scalars (bias corrections, step size) are computed in f64 as Python
// computes them and rounded to f32 once, as PyTorch passes them to its
// kernels; each element is then updated in f32, operation by operation in
// PyTorch's order. PyTorch's AVX2 kernels fuse the multiply-add of an add
// with alpha and of addcmul; so does this file when built for a machine
// with FMA (CLEAVE_RT_NATIVE), and then matches them bit for bit. The
// portable build rounds twice, as PyTorch's default (non-AVX) kernels do:
// at most one rounding apart per operation. A 16-bit gradient is converted
// in small blocks, so no full-size temporary is made.
//
//===----------------------------------------------------------------------===//

#include "KernelChecks.h"
#include "Tensor.h"

#include <algorithm>
#include <cmath>

using namespace cleave::rt;

namespace {

/// a * b + c the way PyTorch computes `c + alpha * b` (add with alpha) and
/// addcmul: one rounding where the build targets FMA, else two.
inline float mulAdd(float a, float b, float c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

/// a + b rounded once even where the compiler would fuse a product that
/// computed a into the addition (-ffp-contract=fast, GCC's default): with
/// FMA, an add that is itself an fma is not contracted further.
inline float addUnfused(float a, float b) {
#ifdef __FMA__
  return std::fma(a, 1.0f, b);
#else
  return a + b;
#endif
}

/// Runs `body(begin, length, grad)` over blocks of the gradient as f32 (the
/// tensor itself when f32, else a converted block), in parallel when large.
template <typename Body>
void forEachGradBlock(const char *grad, int32_t dtype, int64_t n, Body body) {
  constexpr int64_t kBlock = 2048;
  int64_t blocks = (n + kBlock - 1) / kBlock;
  size_t es = elementSize(dtype);
#pragma omp parallel if (n >= kParallelElements)
  {
    float converted[kBlock];
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t begin = b * kBlock, len = std::min(kBlock, n - begin);
      const float *g;
      if (dtype == CLEAVE_F32) {
        g = reinterpret_cast<const float *>(grad) + begin;
      } else {
        convertToF32(grad + begin * int64_t(es), dtype, converted, len);
        g = converted;
      }
      body(begin, len, g);
    }
  }
}

/// The 1-based step number, an i64 scalar.
int64_t readStep(const char *k, char *arena, const cleave_tensor *step) {
  checkStep(k, step);
  int64_t value = *reinterpret_cast<const int64_t *>(dataOf(arena, *step));
  if (value < 1)
    cleave_rt_fail("%s: step must be at least 1, got %lld", k,
                   (long long)value);
  return value;
}

/// The gradient's scale factor: an f32 scalar, 1 when absent.
float readGradScale(const char *k, char *arena, const cleave_tensor *scale) {
  if (!scale)
    return 1.0f;
  checkGradScale(k, scale);
  return *reinterpret_cast<const float *>(dataOf(arena, *scale));
}

/// SGD's scalars as PyTorch's kernels see them (f32).
struct SgdScalars {
  float gradScale, weightDecay, momentum, oneMinusDampening, negLr;
};

enum class Momentum { None, FirstStep, Later };

/// One block of the SGD update. torch.optim.SGD's single-tensor step:
///   d_p = d_p.add(param, alpha=weight_decay)      (if weight_decay != 0)
///   buf = clone(d_p) on the first step, else
///   buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
///   d_p = d_p.add(buf, alpha=momentum) if nesterov else buf
///   param.add_(d_p, alpha=-lr)
/// The flags are template parameters so that each variant is a plain loop
/// that vectorizes.
template <bool WeightDecay, Momentum Mom, bool Nesterov>
void sgdBlock(float *p, const float *grad, float *buf, int64_t n,
              const SgdScalars &c) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] * c.gradScale;
    if (WeightDecay)
      g = mulAdd(c.weightDecay, p[i], g);
    if (Mom != Momentum::None) {
      float b = Mom == Momentum::FirstStep
                    ? g
                    : mulAdd(c.oneMinusDampening, g, buf[i] * c.momentum);
      buf[i] = b;
      g = Nesterov ? mulAdd(c.momentum, b, g) : b;
    }
    p[i] = mulAdd(c.negLr, g, p[i]);
  }
}

template <bool WeightDecay, Momentum Mom, bool Nesterov>
void sgdLoop(float *p, const char *grad, int32_t gradType, float *buf,
             int64_t n, const SgdScalars &c) {
  forEachGradBlock(grad, gradType, n,
                   [&](int64_t begin, int64_t len, const float *g) {
                     sgdBlock<WeightDecay, Mom, Nesterov>(
                         p + begin, g, buf ? buf + begin : nullptr, len, c);
                   });
}

template <bool WeightDecay>
void sgdDispatch(Momentum mom, bool nesterov, float *p, const char *grad,
                 int32_t gradType, float *buf, int64_t n, const SgdScalars &c) {
  switch (mom) {
  case Momentum::None:
    return sgdLoop<WeightDecay, Momentum::None, false>(p, grad, gradType, buf,
                                                       n, c);
  case Momentum::FirstStep:
    return nesterov ? sgdLoop<WeightDecay, Momentum::FirstStep, true>(
                          p, grad, gradType, buf, n, c)
                    : sgdLoop<WeightDecay, Momentum::FirstStep, false>(
                          p, grad, gradType, buf, n, c);
  case Momentum::Later:
    return nesterov
               ? sgdLoop<WeightDecay, Momentum::Later, true>(p, grad, gradType,
                                                             buf, n, c)
               : sgdLoop<WeightDecay, Momentum::Later, false>(p, grad, gradType,
                                                              buf, n, c);
  }
}

/// AdamW's scalars as PyTorch's kernels see them (f32).
struct AdamScalars {
  float gradScale, decay, beta1, oneMinusBeta1, beta2, oneMinusBeta2,
      biasCorrection2Sqrt, eps, negStepSize;
};

/// One block of torch.optim.AdamW's single-tensor step:
///   param.mul_(1 - lr * weight_decay)
///   exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
///   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
///   denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
///   param.addcdiv_(exp_avg, denom, value=-step_size)
/// addcmul computes self + value * t1 * t2 and addcdiv self + value * t1 /
/// t2, left to right.
void adamwBlock(float *p, const float *grad, float *m, float *v, int64_t n,
                const AdamScalars &c) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] * c.gradScale;
    float pi = p[i] * c.decay;
    float mi = mulAdd(c.oneMinusBeta1, g, m[i] * c.beta1);
    float vi = mulAdd(c.oneMinusBeta2 * g, g, v[i] * c.beta2);
    float denom = std::sqrt(vi) / c.biasCorrection2Sqrt + c.eps;
    m[i] = mi;
    v[i] = vi;
    // param.mul_ rounds before addcdiv adds.
    p[i] = addUnfused(pi, c.negStepSize * mi / denom);
  }
}

} // namespace

extern "C" {

void cleave_rt_sgd(char *arena, const cleave_tensor *param,
                   const cleave_tensor *grad, const cleave_tensor *momentum_buf,
                   const cleave_tensor *step, const cleave_tensor *grad_scale,
                   double lr, double momentum, double dampening,
                   double weight_decay, int32_t nesterov) {
  const char *k = "cleave_rt_sgd";
  checkParam(k, param, grad);
  int64_t t = readStep(k, arena, step);
  float *buf = nullptr;
  if (momentum != 0.0) {
    if (!momentum_buf)
      cleave_rt_fail("%s: momentum_buf is NULL with momentum %g", k, momentum);
    checkState(k, "momentum_buf", momentum_buf, param);
    buf = reinterpret_cast<float *>(dataOf(arena, *momentum_buf));
  }
  float scale = readGradScale(k, arena, grad_scale);
  if (!std::isfinite(scale))
    return; // a step the loss scaler skips
  SgdScalars c{scale, float(weight_decay),
               float(momentum), float(1.0 - dampening), float(-lr)};
  Momentum mom = momentum == 0.0 ? Momentum::None
                 : t == 1        ? Momentum::FirstStep
                                 : Momentum::Later;
  float *p = reinterpret_cast<float *>(dataOf(arena, *param));
  const char *g = dataOf(arena, *grad);
  int64_t n = numElements(*param);
  if (weight_decay != 0.0)
    sgdDispatch<true>(mom, nesterov != 0, p, g, grad->dtype, buf, n, c);
  else
    sgdDispatch<false>(mom, nesterov != 0, p, g, grad->dtype, buf, n, c);
}

void cleave_rt_adamw(char *arena, const cleave_tensor *param,
                     const cleave_tensor *grad, const cleave_tensor *m,
                     const cleave_tensor *v, const cleave_tensor *step,
                     const cleave_tensor *grad_scale, double lr, double beta1,
                     double beta2, double eps, double weight_decay) {
  const char *k = "cleave_rt_adamw";
  checkParam(k, param, grad);
  checkState(k, "m", m, param);
  checkState(k, "v", v, param);
  int64_t t = readStep(k, arena, step);
  float scale = readGradScale(k, arena, grad_scale);
  if (!std::isfinite(scale))
    return; // a step the loss scaler skips
  // Python floats: beta ** step with step a float, as PyTorch reads it.
  double biasCorrection1 = 1.0 - std::pow(beta1, double(t));
  double biasCorrection2 = 1.0 - std::pow(beta2, double(t));
  double stepSize = lr / biasCorrection1;
  AdamScalars c{scale,
                float(1.0 - lr * weight_decay),
                float(beta1),
                float(1.0 - beta1),
                float(beta2),
                float(1.0 - beta2),
                float(std::sqrt(biasCorrection2)),
                float(eps),
                float(-stepSize)};
  float *p = reinterpret_cast<float *>(dataOf(arena, *param));
  float *mp = reinterpret_cast<float *>(dataOf(arena, *m));
  float *vp = reinterpret_cast<float *>(dataOf(arena, *v));
  forEachGradBlock(dataOf(arena, *grad), grad->dtype, numElements(*param),
                   [&](int64_t begin, int64_t len, const float *g) {
                     adamwBlock(p + begin, g, mp + begin, vp + begin, len, c);
                   });
}

} // extern "C"
