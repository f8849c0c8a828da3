//===- ActivationGrad.cu - activation derivative CUDA kernel --------------===//
//
// unary_grad: dx = dy * f'(x) for the float activations (relu, tanh,
// sigmoid, silu, gelu_erf, gelu_tanh), with the formulas of the CPU
// kernel (Elementwise.cpp) on CUDA's math functions, in f32. Element i is
// read before it is written by the same thread, so dx may be the same
// tensor as x or dy.
//
//===----------------------------------------------------------------------===//

#include "DeviceUtil.cuh"
#include "KernelUtil.cuh"

#include "../cpu/Tensor.h"

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

const char *unaryName(int32_t op) {
  const char *name = cleave_unary_name(op);
  return name ? name : "unknown";
}

/// f'(v) * g for the activation `Op`.
template <int32_t Op> __device__ inline float derivative(float v, float g);

// 0 at x = 0, as in PyTorch.
template <> __device__ inline float derivative<CLEAVE_RELU>(float v, float g) {
  return v > 0.0f ? g : 0.0f;
}
template <> __device__ inline float derivative<CLEAVE_TANH>(float v, float g) {
  float t = tanhf(v);
  return g * (1.0f - t * t);
}
template <>
__device__ inline float derivative<CLEAVE_SIGMOID>(float v, float g) {
  float s = sigmoidF32(v);
  return g * (s * (1.0f - s));
}
// d/dx x s(x) = s (1 + x (1 - s)).
template <> __device__ inline float derivative<CLEAVE_SILU>(float v, float g) {
  float s = sigmoidF32(v);
  return g * (s * (1.0f + v * (1.0f - s)));
}
template <>
__device__ inline float derivative<CLEAVE_GELU_ERF>(float v, float g) {
  return g * geluErfGradF32(v);
}
template <>
__device__ inline float derivative<CLEAVE_GELU_TANH>(float v, float g) {
  return g * geluTanhGradF32(v);
}

template <int32_t Op>
__global__ void unaryGradKernel(const char *x, int32_t xType, const char *dy,
                                int32_t dyType, char *dx, int32_t dxType,
                                int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    storeF32(dx, dxType, i,
             derivative<Op>(loadF32(x, xType, i), loadF32(dy, dyType, i)));
}

template <int32_t Op>
void launch(const char *x, int32_t xType, const char *dy, int32_t dyType,
            char *dx, int32_t dxType, int64_t n) {
  unaryGradKernel<Op><<<blocksFor(n), kThreads, 0, stream()>>>(
      x, xType, dy, dyType, dx, dxType, n);
}

} // namespace

extern "C" void cleave_rt_unary_grad(char *arena, int32_t op,
                                     const cleave_tensor *x,
                                     const cleave_tensor *dy,
                                     const cleave_tensor *dx) {
  const char *k = "cleave_rt_unary_grad";
  checkTensor(k, "x", x);
  checkTensor(k, "dy", dy);
  checkTensor(k, "dx", dx);
  if (!sameShape(*x, *dy) || !sameShape(*x, *dx))
    cleave_rt_fail("%s: x %s, dy %s and dx %s differ in shape", k,
                   shapeString(*x).c_str(), shapeString(*dy).c_str(),
                   shapeString(*dx).c_str());
  for (const cleave_tensor *t : {x, dy, dx})
    if (!isFloatType(t->dtype))
      cleave_rt_fail("%s: unsupported dtype %s", k, dtypeName(t->dtype));
  const char *xp = dataOf(arena, *x), *dyp = dataOf(arena, *dy);
  char *dxp = dataOf(arena, *dx);
  int64_t n = numElements(*x);
  auto run = [&](auto launcher) {
    if (n > 0) {
      launcher(xp, x->dtype, dyp, dy->dtype, dxp, dx->dtype, n);
      checkLaunchOf(k);
    }
  };
  switch (op) {
  case CLEAVE_RELU:
    return run(launch<CLEAVE_RELU>);
  case CLEAVE_TANH:
    return run(launch<CLEAVE_TANH>);
  case CLEAVE_SIGMOID:
    return run(launch<CLEAVE_SIGMOID>);
  case CLEAVE_SILU:
    return run(launch<CLEAVE_SILU>);
  case CLEAVE_GELU_ERF:
    return run(launch<CLEAVE_GELU_ERF>);
  case CLEAVE_GELU_TANH:
    return run(launch<CLEAVE_GELU_TANH>);
  }
  cleave_rt_fail("%s: op %s (%d) has no gradient kernel", k, unaryName(op), op);
}
