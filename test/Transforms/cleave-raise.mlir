// RUN: cleave-opt %s --cleave-raise -canonicalize -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @gelu_erf
// CHECK-SAME: (%[[X:.*]]: tensor<8x32xf32>)
// CHECK-NEXT: %[[G:.*]] = graph.gelu %[[X]] : tensor<8x32xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_erf(%x: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %sqrt2 = graph.constant dense<1.41421354> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %0 = graph.div %x, %sqrt2 : tensor<8x32xf32>, tensor<f32>
  %1 = graph.erf %0 : tensor<8x32xf32>
  %2 = graph.add %1, %one : tensor<8x32xf32>, tensor<f32>
  %3 = graph.mul %x, %2 : tensor<8x32xf32>, tensor<8x32xf32>
  %4 = graph.mul %3, %half : tensor<8x32xf32>, tensor<f32>
  return %4 : tensor<8x32xf32>
}

// -----

// Another operand order, and multiplication by 1/sqrt(2).
// CHECK-LABEL: func.func @gelu_erf_reordered
// CHECK-NEXT: graph.gelu %{{.*}} : tensor<4xf32>
// CHECK-NEXT: return
func.func @gelu_erf_reordered(%x: tensor<4xf32>) -> tensor<4xf32> {
  %rsqrt2 = graph.constant dense<0.707106769> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %0 = graph.mul %rsqrt2, %x : tensor<f32>, tensor<4xf32>
  %1 = graph.erf %0 : tensor<4xf32>
  %2 = graph.add %one, %1 : tensor<f32>, tensor<4xf32>
  %3 = graph.mul %half, %x : tensor<f32>, tensor<4xf32>
  %4 = graph.mul %3, %2 : tensor<4xf32>, tensor<4xf32>
  return %4 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @gelu_tanh
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x128xf32>)
// CHECK-NEXT: %[[G:.*]] = graph.gelu %[[X]] approximate tanh : tensor<2x8x128xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_tanh(%x: tensor<2x8x128xf32>) -> tensor<2x8x128xf32> {
  %half = graph.constant dense<0.5> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %c = graph.constant dense<0.797884583> : tensor<f32>
  %k = graph.constant dense<4.471500e-02> : tensor<f32>
  %0 = graph.mul %half, %x : tensor<f32>, tensor<2x8x128xf32>
  %x2 = graph.mul %x, %x : tensor<2x8x128xf32>, tensor<2x8x128xf32>
  %x3 = graph.mul %x, %x2 : tensor<2x8x128xf32>, tensor<2x8x128xf32>
  %1 = graph.mul %k, %x3 : tensor<f32>, tensor<2x8x128xf32>
  %2 = graph.add %x, %1 : tensor<2x8x128xf32>, tensor<2x8x128xf32>
  %3 = graph.mul %c, %2 : tensor<f32>, tensor<2x8x128xf32>
  %4 = graph.tanh %3 : tensor<2x8x128xf32>
  %5 = graph.add %one, %4 : tensor<f32>, tensor<2x8x128xf32>
  %6 = graph.mul %0, %5 : tensor<2x8x128xf32>, tensor<2x8x128xf32>
  return %6 : tensor<2x8x128xf32>
}

// -----

// The cube written with pow.
// CHECK-LABEL: func.func @gelu_tanh_pow
// CHECK: graph.gelu %{{.*}} approximate tanh
// CHECK-NOT: graph.tanh
func.func @gelu_tanh_pow(%x: tensor<16xf32>) -> tensor<16xf32> {
  %half = graph.constant dense<0.5> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %three = graph.constant dense<3.0> : tensor<f32>
  %c = graph.constant dense<0.797884583> : tensor<f32>
  %k = graph.constant dense<4.471500e-02> : tensor<f32>
  %x3 = graph.pow %x, %three : tensor<16xf32>, tensor<f32>
  %1 = graph.mul %x3, %k : tensor<16xf32>, tensor<f32>
  %2 = graph.add %1, %x : tensor<16xf32>, tensor<16xf32>
  %3 = graph.mul %2, %c : tensor<16xf32>, tensor<f32>
  %4 = graph.tanh %3 : tensor<16xf32>
  %5 = graph.add %4, %one : tensor<16xf32>, tensor<f32>
  %6 = graph.mul %x, %5 : tensor<16xf32>, tensor<16xf32>
  %7 = graph.mul %6, %half : tensor<16xf32>, tensor<f32>
  return %7 : tensor<16xf32>
}

// -----

// Near miss: 0.4 instead of 0.5 is not GELU.
// CHECK-LABEL: func.func @not_gelu_wrong_constant
// CHECK-NOT: graph.gelu
// CHECK: graph.erf
func.func @not_gelu_wrong_constant(%x: tensor<4xf32>) -> tensor<4xf32> {
  %sqrt2 = graph.constant dense<1.41421354> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %c = graph.constant dense<0.4> : tensor<f32>
  %0 = graph.div %x, %sqrt2 : tensor<4xf32>, tensor<f32>
  %1 = graph.erf %0 : tensor<4xf32>
  %2 = graph.add %1, %one : tensor<4xf32>, tensor<f32>
  %3 = graph.mul %x, %2 : tensor<4xf32>, tensor<4xf32>
  %4 = graph.mul %3, %c : tensor<4xf32>, tensor<f32>
  return %4 : tensor<4xf32>
}

// -----

// Near miss: the erf argument is another value.
// CHECK-LABEL: func.func @not_gelu_other_input
// CHECK-NOT: graph.gelu
func.func @not_gelu_other_input(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %sqrt2 = graph.constant dense<1.41421354> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %0 = graph.div %y, %sqrt2 : tensor<4xf32>, tensor<f32>
  %1 = graph.erf %0 : tensor<4xf32>
  %2 = graph.add %1, %one : tensor<4xf32>, tensor<f32>
  %3 = graph.mul %x, %2 : tensor<4xf32>, tensor<4xf32>
  %4 = graph.mul %3, %half : tensor<4xf32>, tensor<f32>
  return %4 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[S:.*]] = graph.silu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: return %[[S]]
func.func @silu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = graph.sigmoid %x : tensor<4x8xf32>
  %1 = graph.mul %0, %x : tensor<4x8xf32>, tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// Near miss: x * sigmoid(y) is a gate, not SiLU.
// CHECK-LABEL: func.func @not_silu
// CHECK-NOT: graph.silu
// CHECK: graph.sigmoid
func.func @not_silu(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.sigmoid %y : tensor<4xf32>
  %1 = graph.mul %x, %0 : tensor<4xf32>, tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x32xf32>, %[[G:.*]]: tensor<32xf32>, %[[B:.*]]: tensor<32xf32>)
// CHECK-NEXT: %[[L:.*]] = graph.layer_norm %[[X]], %[[G]], %[[B]] dim 2 eps 9.9999997473787516E-6 : tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>
// CHECK-NEXT: return %[[L]]
func.func @layer_norm(%x: tensor<2x8x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<2x8x32xf32> {
  %two = graph.constant dense<2.0> : tensor<f32>
  %eps = graph.constant dense<1.0e-5> : tensor<f32>
  %mean = graph.reduce mean %x dims [2] keepdim : tensor<2x8x32xf32>
  %d = graph.sub %x, %mean : tensor<2x8x32xf32>, tensor<2x8x1xf32>
  %sq = graph.pow %d, %two : tensor<2x8x32xf32>, tensor<f32>
  %var = graph.reduce mean %sq dims [2] keepdim : tensor<2x8x32xf32>
  %ve = graph.add %var, %eps : tensor<2x8x1xf32>, tensor<f32>
  %std = graph.sqrt %ve : tensor<2x8x1xf32>
  %n = graph.div %d, %std : tensor<2x8x32xf32>, tensor<2x8x1xf32>
  %s = graph.mul %n, %g : tensor<2x8x32xf32>, tensor<32xf32>
  %y = graph.add %s, %b : tensor<2x8x32xf32>, tensor<32xf32>
  return %y : tensor<2x8x32xf32>
}

// -----

// Over the last two dims, variance as d * d, no affine part.
// CHECK-LABEL: func.func @layer_norm_two_dims
// CHECK: %[[ONES:.*]] = graph.constant dense<1.000000e+00> : tensor<4x8xf32>
// CHECK: graph.layer_norm %{{.*}}, %[[ONES]] dim 1 eps 0.0010000000474974513 : tensor<2x4x8xf32>, tensor<4x8xf32>
// CHECK-NOT: graph.reduce
func.func @layer_norm_two_dims(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %eps32 = graph.constant dense<1.0e-3> : tensor<f32>
  %mean = graph.reduce mean %x dims [1, 2] keepdim : tensor<2x4x8xf32>
  %d = graph.sub %x, %mean : tensor<2x4x8xf32>, tensor<2x1x1xf32>
  %sq = graph.mul %d, %d : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %var = graph.reduce mean %sq dims [1, 2] keepdim : tensor<2x4x8xf32>
  %ve = graph.add %eps32, %var : tensor<f32>, tensor<2x1x1xf32>
  %std = graph.sqrt %ve : tensor<2x1x1xf32>
  %n = graph.div %d, %std : tensor<2x4x8xf32>, tensor<2x1x1xf32>
  return %n : tensor<2x4x8xf32>
}

// -----

// Near miss: the variance is taken over other dimensions than the mean, so
// this is no layer norm. It still is, exactly, the RMS norm over all
// dimensions of the centered input, and is raised as that.
// CHECK-LABEL: func.func @not_layer_norm_axes
// CHECK-NOT: graph.layer_norm
// CHECK: %[[D:.*]] = graph.sub
// CHECK: graph.rms_norm %[[D]], %{{.*}} dim 0
func.func @not_layer_norm_axes(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %eps = graph.constant dense<1.0e-5> : tensor<f32>
  %mean = graph.reduce mean %x dims [1] keepdim : tensor<4x8xf32>
  %d = graph.sub %x, %mean : tensor<4x8xf32>, tensor<4x1xf32>
  %sq = graph.mul %d, %d : tensor<4x8xf32>, tensor<4x8xf32>
  %var = graph.reduce mean %sq dims [0, 1] keepdim : tensor<4x8xf32>
  %ve = graph.add %var, %eps : tensor<1x1xf32>, tensor<f32>
  %std = graph.sqrt %ve : tensor<1x1xf32>
  %n = graph.div %d, %std : tensor<4x8xf32>, tensor<1x1xf32>
  return %n : tensor<4x8xf32>
}

// -----

// As Llama exports it: x * (1 / sqrt(mean(x^2) + eps)) * w.
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x32xf32>, %[[W:.*]]: tensor<32xf32>)
// CHECK-NEXT: %[[R:.*]] = graph.rms_norm %[[X]], %[[W]] dim 2 eps 9.9999999747524271E-7 : tensor<2x8x32xf32>, tensor<32xf32>
// CHECK-NEXT: return %[[R]]
func.func @rms_norm(%x: tensor<2x8x32xf32>, %w: tensor<32xf32>) -> tensor<2x8x32xf32> {
  %two = graph.constant dense<2.0> : tensor<f32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %eps = graph.constant dense<1.0e-6> : tensor<f32>
  %sq = graph.pow %x, %two : tensor<2x8x32xf32>, tensor<f32>
  %ms = graph.reduce mean %sq dims [2] keepdim : tensor<2x8x32xf32>
  %a = graph.add %ms, %eps : tensor<2x8x1xf32>, tensor<f32>
  %s = graph.sqrt %a : tensor<2x8x1xf32>
  %r = graph.div %one, %s : tensor<f32>, tensor<2x8x1xf32>
  %n = graph.mul %x, %r : tensor<2x8x32xf32>, tensor<2x8x1xf32>
  %y = graph.mul %n, %w : tensor<2x8x32xf32>, tensor<32xf32>
  return %y : tensor<2x8x32xf32>
}

// -----

// CHECK-LABEL: func.func @rms_norm_rsqrt
// CHECK: graph.rms_norm %{{.*}}, %{{.*}} dim 1 eps 9.9999997473787516E-6 : tensor<4x8xf32>, tensor<8xf32>
func.func @rms_norm_rsqrt(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %eps = graph.constant dense<1.0e-5> : tensor<f32>
  %sq = graph.mul %x, %x : tensor<4x8xf32>, tensor<4x8xf32>
  %ms = graph.reduce mean %sq dims [1] keepdim : tensor<4x8xf32>
  %a = graph.add %ms, %eps : tensor<4x1xf32>, tensor<f32>
  %r = graph.rsqrt %a : tensor<4x1xf32>
  %n = graph.mul %r, %x : tensor<4x1xf32>, tensor<4x8xf32>
  %y = graph.mul %w, %n : tensor<8xf32>, tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Near miss: the mean of squares is of another tensor.
// CHECK-LABEL: func.func @not_rms_norm
// CHECK-NOT: graph.rms_norm
func.func @not_rms_norm(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %eps = graph.constant dense<1.0e-5> : tensor<f32>
  %sq = graph.mul %z, %z : tensor<4x8xf32>, tensor<4x8xf32>
  %ms = graph.reduce mean %sq dims [1] keepdim : tensor<4x8xf32>
  %a = graph.add %ms, %eps : tensor<4x1xf32>, tensor<f32>
  %r = graph.rsqrt %a : tensor<4x1xf32>
  %n = graph.mul %x, %r : tensor<4x8xf32>, tensor<4x1xf32>
  return %n : tensor<4x8xf32>
}

// -----

// Causal attention as GPT-2 exports it: k^T by transpose, scale by division,
// a constant strict-upper mask selecting -inf.
// CHECK-LABEL: func.func @causal_attention
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x4x8xf32>, %[[K:.*]]: tensor<2x4x4x8xf32>, %[[V:.*]]: tensor<2x4x4x8xf32>)
// CHECK-NEXT: %[[A:.*]] = graph.attention %[[Q]], %[[K]], %[[V]] causal scale 0.35355339664408242 : tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>
// CHECK-NEXT: return %[[A]]
func.func @causal_attention(%q: tensor<2x4x4x8xf32>, %k: tensor<2x4x4x8xf32>, %v: tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32> {
  %kt = graph.transpose %k perm [0, 1, 3, 2] : tensor<2x4x4x8xf32>
  %s = graph.matmul %q, %kt : tensor<2x4x4x8xf32>, tensor<2x4x8x4xf32>
  %c = graph.constant dense<2.82842708> : tensor<f32>
  %ss = graph.div %s, %c : tensor<2x4x4x4xf32>, tensor<f32>
  %mask = graph.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %m = graph.where %mask, %ninf, %ss : tensor<4x4xi1>, tensor<f32>, tensor<2x4x4x4xf32>
  %p = graph.softmax %m dim 3 : tensor<2x4x4x4xf32>
  %o = graph.matmul %p, %v : tensor<2x4x4x4xf32>, tensor<2x4x4x8xf32>
  return %o : tensor<2x4x4x8xf32>
}

// -----

// An additive causal mask and a multiplicative scale.
// CHECK-LABEL: func.func @additive_causal_attention
// CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}} causal scale 2.500000e-01
// CHECK-NOT: graph.softmax
func.func @additive_causal_attention(%q: tensor<1x2x3x16xf32>, %kt: tensor<1x2x16x3xf32>, %v: tensor<1x2x3x16xf32>) -> tensor<1x2x3x16xf32> {
  %s = graph.matmul %q, %kt : tensor<1x2x3x16xf32>, tensor<1x2x16x3xf32>
  %c = graph.constant dense<0.25> : tensor<f32>
  %ss = graph.mul %c, %s : tensor<f32>, tensor<1x2x3x3xf32>
  %mask = graph.constant dense<[[0.0, -1.0e9, -1.0e9], [0.0, 0.0, -1.0e9], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %m = graph.add %ss, %mask : tensor<1x2x3x3xf32>, tensor<3x3xf32>
  %p = graph.softmax %m dim 3 : tensor<1x2x3x3xf32>
  %o = graph.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x16xf32>
  return %o : tensor<1x2x3x16xf32>
}

// -----

// A padding mask passed in at run time stays a mask operand; no scale op
// means scale 1.
// CHECK-LABEL: func.func @masked_attention
// CHECK-SAME: %[[MASK:[a-z0-9]+]]: tensor<2x1x1x4xf32>
// CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[MASK]] scale 1.000000e+00
func.func @masked_attention(%q: tensor<2x4x4x8xf32>, %kt: tensor<2x4x8x4xf32>, %v: tensor<2x4x4x8xf32>, %mask: tensor<2x1x1x4xf32>) -> tensor<2x4x4x8xf32> {
  %s = graph.matmul %q, %kt : tensor<2x4x4x8xf32>, tensor<2x4x8x4xf32>
  %m = graph.add %s, %mask : tensor<2x4x4x4xf32>, tensor<2x1x1x4xf32>
  %p = graph.softmax %m dim 3 : tensor<2x4x4x4xf32>
  %o = graph.matmul %p, %v : tensor<2x4x4x4xf32>, tensor<2x4x4x8xf32>
  return %o : tensor<2x4x4x8xf32>
}

// -----

// Near miss: a mask that is not triangular is kept as a (negated) mask.
// CHECK-LABEL: func.func @non_causal_constant_mask
// CHECK-NOT: causal
// CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}} mask
func.func @non_causal_constant_mask(%q: tensor<1x1x2x4xf32>, %kt: tensor<1x1x4x2xf32>, %v: tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32> {
  %s = graph.matmul %q, %kt : tensor<1x1x2x4xf32>, tensor<1x1x4x2xf32>
  %mask = graph.constant dense<[[true, false], [false, false]]> : tensor<2x2xi1>
  %ninf = graph.constant dense<0xFF800000> : tensor<f32>
  %m = graph.where %mask, %ninf, %s : tensor<2x2xi1>, tensor<f32>, tensor<1x1x2x2xf32>
  %p = graph.softmax %m dim 3 : tensor<1x1x2x2xf32>
  %o = graph.matmul %p, %v : tensor<1x1x2x2xf32>, tensor<1x1x2x4xf32>
  return %o : tensor<1x1x2x4xf32>
}

// -----

// Near miss: softmax over the query axis is not attention.
// CHECK-LABEL: func.func @not_attention_softmax_axis
// CHECK-NOT: graph.attention
func.func @not_attention_softmax_axis(%q: tensor<2x4x4x8xf32>, %kt: tensor<2x4x8x4xf32>, %v: tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32> {
  %s = graph.matmul %q, %kt : tensor<2x4x4x8xf32>, tensor<2x4x8x4xf32>
  %p = graph.softmax %s dim 2 : tensor<2x4x4x4xf32>
  %o = graph.matmul %p, %v : tensor<2x4x4x4xf32>, tensor<2x4x4x8xf32>
  return %o : tensor<2x4x4x8xf32>
}

// -----

// Near miss: rank-3 [B*H, S, D] attention is not raised (graph.attention
// needs separate batch and head dims).
// CHECK-LABEL: func.func @not_attention_rank3
// CHECK-NOT: graph.attention
func.func @not_attention_rank3(%q: tensor<8x4x8xf32>, %kt: tensor<8x8x4xf32>, %v: tensor<8x4x8xf32>) -> tensor<8x4x8xf32> {
  %s = graph.matmul %q, %kt : tensor<8x4x8xf32>, tensor<8x8x4xf32>
  %p = graph.softmax %s dim 2 : tensor<8x4x4xf32>
  %o = graph.matmul %p, %v : tensor<8x4x4xf32>, tensor<8x4x8xf32>
  return %o : tensor<8x4x8xf32>
}
