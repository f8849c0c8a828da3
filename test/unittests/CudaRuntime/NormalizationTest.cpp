//===- NormalizationTest.cpp - CUDA layer/RMS norm and grads vs the CPU ---===//
//
// layer_norm, rms_norm and their gradients on the GPU against the CPU
// backend: over the last dim and over the last two, with scale and bias of
// the trailing shape, broadcast to it, or flat with its element count; bias,
// dscale and dbias absent or present; hidden sizes up to GPT-2's 768 and
// beyond; f32, bf16 and f16, mixed dtypes, dx written over dy.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

using namespace cleave::rt::test;

namespace {

using CudaNorm = CudaTest;

/// A normalization case: x's shape, the first normalized dim, the shapes
/// of scale and bias.
struct NormCase {
  Shape x;
  int64_t dim;
  Shape scale, bias;
};

const NormCase kCases[] = {
    {{4, 9, 64}, 2, {64}, {64}},
    {{3, 5, 8}, 1, {8}, {5, 8}},  // scale broadcast over [5, 8]
    {{3, 5, 8}, 1, {40}, {1, 8}}, // flat scale, broadcast bias
    {{2, 7, 6, 4}, 2, {6, 4}, {4}},
    {{512, 768}, 1, {768}, {768}}, // GPT-2 small's hidden size
    {{16, 4100}, 1, {4100}, {4100}},
    {{1, 3}, 1, {3}, {3}},
};

TEST_F(CudaNorm, LayerNormAndRmsNorm) {
  unsigned seed = 1;
  for (const NormCase &c : kCases)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16}) {
      DevicePair p(capacityFor({c.x, c.x, c.x, c.scale, c.bias}));
      cleave_tensor x = p.add(dtype, c.x);
      cleave_tensor scale = p.add(dtype, c.scale);
      cleave_tensor bias = p.add(dtype, c.bias);
      cleave_tensor out = p.add(dtype, c.x);
      cleave_tensor wide = p.add(CLEAVE_F32, c.x);
      // An offset mean exercises the variance's cancellation.
      p.fill(x, 1, 5, seed++);
      p.fill(scale, 0.5, 1.5, seed++);
      p.fill(bias, -1, 1, seed++);
      std::string what = std::string(dtypeName(dtype)) + " x rank " +
                         std::to_string(c.x.size()) + " dim " +
                         std::to_string(c.dim) + " last " +
                         std::to_string(c.x.back());
      CUDA_AND_CPU(p, layer_norm, &x, &scale, &bias, &out, c.dim, 1e-5);
      p.expectMatch(out, "layer_norm " + what);
      CUDA_AND_CPU(p, layer_norm, &x, &scale,
                   static_cast<const cleave_tensor *>(nullptr), &wide, c.dim,
                   1e-5);
      p.expectMatch(wide, "layer_norm no bias, f32 out, " + what);
      CUDA_AND_CPU(p, rms_norm, &x, &scale, &out, c.dim, 1e-6);
      p.expectMatch(out, "rms_norm " + what);
      CUDA_AND_CPU(p, rms_norm, &x, &scale, &x, c.dim, 1e-6); // in place
      p.expectMatch(x, "rms_norm in place " + what);
    }
}

TEST_F(CudaNorm, LayerNormGrad) {
  unsigned seed = 100;
  for (const NormCase &c : kCases)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16})
      for (int variant = 0; variant < 3; ++variant) {
        // 0: dscale and dbias; 1: dscale only; 2: dx only, written over dy.
        DevicePair p(capacityFor({c.x, c.x, c.x, c.scale, c.scale, c.bias}));
        cleave_tensor x = p.add(dtype, c.x);
        cleave_tensor scale = p.add(dtype, c.scale);
        cleave_tensor dy = p.add(dtype, c.x);
        cleave_tensor dx = p.add(dtype, c.x);
        cleave_tensor dscale = p.add(dtype, c.scale);
        cleave_tensor dbias = p.add(dtype, c.bias);
        p.fill(x, 1, 5, seed++);
        p.fill(scale, 0.5, 1.5, seed++);
        p.fill(dy, -1, 1, seed++);
        p.fill(dx, 7, 8, seed++); // overwritten
        p.fill(dscale, 7, 8, seed++);
        p.fill(dbias, 7, 8, seed++);
        const cleave_tensor *out = variant == 2 ? &dy : &dx;
        CUDA_AND_CPU(p, layer_norm_grad, &x, &scale, &dy, out,
                     variant < 2 ? &dscale : nullptr,
                     variant == 0 ? &dbias : nullptr, c.dim, 1e-5);
        std::string what = "layer_norm_grad variant " +
                           std::to_string(variant) + " " + dtypeName(dtype) +
                           " x rank " + std::to_string(c.x.size()) + " last " +
                           std::to_string(c.x.back());
        // dscale and dbias are sums over the rows.
        p.expectMatch(*out, what + " dx");
        if (variant < 2)
          p.expectMatch(dscale, what + " dscale");
        if (variant == 0)
          p.expectMatch(dbias, what + " dbias");
      }
}

TEST_F(CudaNorm, RmsNormGrad) {
  unsigned seed = 300;
  for (const NormCase &c : kCases)
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_F16})
      for (bool withScale : {true, false}) {
        DevicePair p(capacityFor({c.x, c.x, c.x, c.scale, c.scale, c.bias}));
        cleave_tensor x = p.add(dtype, c.x);
        cleave_tensor scale = p.add(dtype, c.scale);
        cleave_tensor dy = p.add(dtype, c.x);
        cleave_tensor dx = p.add(dtype, c.x);
        cleave_tensor dscale = p.add(dtype, c.scale);
        p.fill(x, -3, 3, seed++);
        p.fill(scale, 0.5, 1.5, seed++);
        p.fill(dy, -1, 1, seed++);
        p.fill(dx, 7, 8, seed++);
        CUDA_AND_CPU(p, rms_norm_grad, &x, &scale, &dy, &dx,
                     withScale ? &dscale : nullptr, c.dim, 1e-6);
        std::string what = std::string("rms_norm_grad ") + dtypeName(dtype) +
                           " x rank " + std::to_string(c.x.size()) + " last " +
                           std::to_string(c.x.back());
        p.expectMatch(dx, what + " dx");
        if (withScale)
          p.expectMatch(dscale, what + " dscale");
      }
}

TEST_F(CudaNorm, MixedDtypes) {
  // bf16 activations with f32 scale and bias, f32 gradients of them.
  DevicePair p;
  Shape xs = {64, 256};
  cleave_tensor x = p.add(CLEAVE_BF16, xs);
  cleave_tensor scale = p.add(CLEAVE_F32, {256});
  cleave_tensor bias = p.add(CLEAVE_F32, {256});
  cleave_tensor out = p.add(CLEAVE_BF16, xs);
  cleave_tensor dy = p.add(CLEAVE_BF16, xs);
  cleave_tensor dx = p.add(CLEAVE_BF16, xs);
  cleave_tensor dscale = p.add(CLEAVE_F32, {256});
  cleave_tensor dbias = p.add(CLEAVE_F32, {256});
  p.fill(x, -2, 2, 400);
  p.fill(scale, 0.5, 1.5, 401);
  p.fill(bias, -1, 1, 402);
  p.fill(dy, -1, 1, 403);
  CUDA_AND_CPU(p, layer_norm, &x, &scale, &bias, &out, int64_t(1), 1e-5);
  CUDA_AND_CPU(p, layer_norm_grad, &x, &scale, &dy, &dx, &dscale, &dbias,
               int64_t(1), 1e-5);
  p.expectMatch(out, "layer_norm bf16 x, f32 scale");
  p.expectMatch(dx, "layer_norm_grad bf16 dx");
  p.expectMatch(dscale, "layer_norm_grad f32 dscale of bf16 x", {1e-4, 1e-4});
  p.expectMatch(dbias, "layer_norm_grad f32 dbias of bf16 dy", {1e-4, 1e-4});
}

} // namespace
