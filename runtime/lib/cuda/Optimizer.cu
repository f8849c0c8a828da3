//===- Optimizer.cu - optimizer update CUDA kernels -----------------------===//
//
// sgd and adamw: in-place updates of f32 parameters and f32 state with the
// formulas of torch.optim.SGD and torch.optim.AdamW, as the CPU kernels
// compute them (Optimizer.cpp). The step count and the gradient scale live
// in the arena: each block reads them on the device and computes the
// per-step scalars there (in f64, rounded to f32 once, as PyTorch passes
// them to its kernels), so the host never waits for the device. Every
// product and sum is rounded separately (__fmul_rn, __fadd_rn: no FMA
// contraction), as the CPU runtime's portable build computes them, so the
// two backends agree bit for bit on f32 gradients.
//
//===----------------------------------------------------------------------===//

#include "DeviceUtil.cuh"

#include "../cpu/KernelChecks.h"
#include "../cpu/Tensor.h"

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

/// a * b + c with two roundings (the CPU's mulAdd without FMA).
__device__ inline float mulAdd(float a, float b, float c) {
  return __fadd_rn(__fmul_rn(a, b), c);
}

/// The gradient's scale: the f32 scalar at `scale`, 1 when absent.
__device__ inline float gradScaleOf(const float *scale) {
  return scale ? *scale : 1.0f;
}

/// SGD's host-side scalars (f32, as PyTorch's kernels see them).
struct SgdScalars {
  float weightDecay, momentum, oneMinusDampening, negLr;
};

/// torch.optim.SGD's single-tensor step (see Optimizer.cpp):
///   d_p = d_p.add(param, alpha=weight_decay)      (if weight_decay != 0)
///   buf = clone(d_p) on the first step, else
///   buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
///   d_p = d_p.add(buf, alpha=momentum) if nesterov else buf
///   param.add_(d_p, alpha=-lr)
/// The first step is *step == 1, read on the device.
template <bool WeightDecay, bool Momentum, bool Nesterov>
__global__ void sgdKernel(float *p, const char *grad, int32_t gradType,
                          float *buf, int64_t n, const int64_t *step,
                          const float *gradScale, SgdScalars c) {
  float scale = gradScaleOf(gradScale);
  if (!isfinite(scale))
    return; // a step the loss scaler skips
  bool first = *step == 1;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float g = __fmul_rn(loadF32(grad, gradType, i), scale);
    float pi = p[i];
    if (WeightDecay)
      g = mulAdd(c.weightDecay, pi, g);
    if (Momentum) {
      float b =
          first ? g
                : mulAdd(c.oneMinusDampening, g, __fmul_rn(buf[i], c.momentum));
      buf[i] = b;
      g = Nesterov ? mulAdd(c.momentum, b, g) : b;
    }
    p[i] = mulAdd(c.negLr, g, pi);
  }
}

template <bool WeightDecay, bool Momentum, bool Nesterov>
void launchSgd(float *p, const char *grad, int32_t gradType, float *buf,
               int64_t n, const int64_t *step, const float *gradScale,
               const SgdScalars &c) {
  sgdKernel<WeightDecay, Momentum, Nesterov>
      <<<blocksFor(n), kThreads, 0, stream()>>>(p, grad, gradType, buf, n, step,
                                                gradScale, c);
}

/// AdamW's host-side scalars; the bias corrections depend on the step and
/// are computed on the device.
struct AdamScalars {
  double lr, beta1d, beta2d;
  float decay, beta1, oneMinusBeta1, beta2, oneMinusBeta2, eps;
};

/// torch.optim.AdamW's single-tensor step (see Optimizer.cpp):
///   param.mul_(1 - lr * weight_decay)
///   exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
///   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
///   denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
///   param.addcdiv_(exp_avg, denom, value=-step_size)
/// with bias_correction = 1 - beta ** step in f64 (Python floats).
__global__ void adamwKernel(float *p, const char *grad, int32_t gradType,
                            float *m, float *v, int64_t n, const int64_t *step,
                            const float *gradScale, AdamScalars c) {
  __shared__ float negStepSize, biasCorrection2Sqrt;
  if (threadIdx.x == 0) {
    double t = double(*step);
    double biasCorrection1 = 1.0 - pow(c.beta1d, t);
    double biasCorrection2 = 1.0 - pow(c.beta2d, t);
    negStepSize = float(-(c.lr / biasCorrection1));
    biasCorrection2Sqrt = float(sqrt(biasCorrection2));
  }
  __syncthreads();
  float scale = gradScaleOf(gradScale);
  if (!isfinite(scale))
    return; // a step the loss scaler skips
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float g = __fmul_rn(loadF32(grad, gradType, i), scale);
    float pi = __fmul_rn(p[i], c.decay);
    float mi = mulAdd(c.oneMinusBeta1, g, __fmul_rn(m[i], c.beta1));
    float vi =
        mulAdd(__fmul_rn(c.oneMinusBeta2, g), g, __fmul_rn(v[i], c.beta2));
    float denom =
        __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), biasCorrection2Sqrt), c.eps);
    m[i] = mi;
    v[i] = vi;
    // param.mul_ rounds before addcdiv adds.
    p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(negStepSize, mi), denom));
  }
}

/// The step counter (an i64 scalar) on the device. Its value (at least 1)
/// is not checked: that would need the host to wait for the device.
const int64_t *stepOf(const char *k, char *arena, const cleave_tensor *step) {
  checkStep(k, step);
  return reinterpret_cast<const int64_t *>(dataOf(arena, *step));
}

/// The gradient scale (an f32 scalar) on the device, or NULL.
const float *gradScaleOf(const char *k, char *arena,
                         const cleave_tensor *scale) {
  if (!scale)
    return nullptr;
  checkGradScale(k, scale);
  return reinterpret_cast<const float *>(dataOf(arena, *scale));
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
  const int64_t *t = stepOf(k, arena, step);
  float *buf = nullptr;
  if (momentum != 0.0) {
    if (!momentum_buf)
      cleave_rt_fail("%s: momentum_buf is NULL with momentum %g", k, momentum);
    checkState(k, "momentum_buf", momentum_buf, param);
    buf = reinterpret_cast<float *>(dataOf(arena, *momentum_buf));
  }
  const float *scale = gradScaleOf(k, arena, grad_scale);
  SgdScalars c{float(weight_decay), float(momentum), float(1.0 - dampening),
               float(-lr)};
  float *p = reinterpret_cast<float *>(dataOf(arena, *param));
  const char *g = dataOf(arena, *grad);
  int64_t n = numElements(*param);
  if (n == 0)
    return;
  bool wd = weight_decay != 0.0, mom = momentum != 0.0, nest = nesterov != 0;
  // The flags are template parameters: each variant is a plain loop.
  if (wd) {
    if (!mom)
      launchSgd<true, false, false>(p, g, grad->dtype, buf, n, t, scale, c);
    else if (nest)
      launchSgd<true, true, true>(p, g, grad->dtype, buf, n, t, scale, c);
    else
      launchSgd<true, true, false>(p, g, grad->dtype, buf, n, t, scale, c);
  } else {
    if (!mom)
      launchSgd<false, false, false>(p, g, grad->dtype, buf, n, t, scale, c);
    else if (nest)
      launchSgd<false, true, true>(p, g, grad->dtype, buf, n, t, scale, c);
    else
      launchSgd<false, true, false>(p, g, grad->dtype, buf, n, t, scale, c);
  }
  checkLaunchOf(k);
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
  const int64_t *t = stepOf(k, arena, step);
  const float *scale = gradScaleOf(k, arena, grad_scale);
  AdamScalars c{lr,           beta1,
                beta2,        float(1.0 - lr * weight_decay),
                float(beta1), float(1.0 - beta1),
                float(beta2), float(1.0 - beta2),
                float(eps)};
  int64_t n = numElements(*param);
  if (n == 0)
    return;
  adamwKernel<<<blocksFor(n), kThreads, 0, stream()>>>(
      reinterpret_cast<float *>(dataOf(arena, *param)), dataOf(arena, *grad),
      grad->dtype, reinterpret_cast<float *>(dataOf(arena, *m)),
      reinterpret_cast<float *>(dataOf(arena, *v)), n, t, scale, c);
  checkLaunchOf(k);
}

} // extern "C"
