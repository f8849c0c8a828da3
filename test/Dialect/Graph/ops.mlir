// Every graph op and attribute round-trips: custom form, then generic form.
// RUN: cleave-opt %s | cleave-opt | FileCheck %s
// RUN: cleave-opt %s --mlir-print-op-generic | cleave-opt | FileCheck %s

// CHECK: graph.param @w : tensor<2x3xf32> = dense<{{\[\[}}1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
graph.param @w : tensor<2x3xf32> = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
// CHECK: graph.param @frozen frozen : tensor<4xbf16> = dense<0.000000e+00> : tensor<4xbf16>
graph.param @frozen frozen : tensor<4xbf16> = dense<0.0> : tensor<4xbf16>
// CHECK: graph.param @blob : tensor<2xf32> = dense_resource<blob1> : tensor<2xf32>
graph.param @blob : tensor<2xf32> = dense_resource<blob1> : tensor<2xf32>
// CHECK: graph.param @ext : tensor<8x8xf16> = #graph.external<"weights.bin", offset = 256, size = 128>
graph.param @ext : tensor<8x8xf16> = #graph.external<"weights.bin", offset = 256, size = 128>
// CHECK: graph.param @uninit : tensor<3xi64>
graph.param @uninit : tensor<3xi64>

// CHECK-LABEL: func.func @params_and_constants
func.func @params_and_constants() -> (tensor<2x3xf32>, tensor<4xf32>, tensor<2x5xi64>) {
  // CHECK: %[[W:.*]] = graph.read_param @w : tensor<2x3xf32>
  %w = graph.read_param @w : tensor<2x3xf32>
  // CHECK: %[[C:.*]] = graph.constant dense<1.500000e+00> : tensor<4xf32>
  %c = graph.constant dense<1.5> : tensor<4xf32>
  // CHECK: %[[I:.*]] = graph.iota dim 1 : tensor<2x5xi64>
  %i = graph.iota dim 1 : tensor<2x5xi64>
  // CHECK: return %[[W]], %[[C]], %[[I]]
  return %w, %c, %i : tensor<2x3xf32>, tensor<4xf32>, tensor<2x5xi64>
}

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4x8xf32>, %n: tensor<4xi32>) {
  // CHECK: graph.neg %{{.*}} : tensor<4xi32>
  %0 = graph.neg %n : tensor<4xi32>
  // CHECK: graph.abs %{{.*}} : tensor<4x8xf32>
  %1 = graph.abs %x : tensor<4x8xf32>
  // CHECK: graph.relu
  %2 = graph.relu %x : tensor<4x8xf32>
  // CHECK: graph.exp
  %3 = graph.exp %x : tensor<4x8xf32>
  // CHECK: graph.log
  %4 = graph.log %x : tensor<4x8xf32>
  // CHECK: graph.sqrt
  %5 = graph.sqrt %x : tensor<4x8xf32>
  // CHECK: graph.rsqrt
  %6 = graph.rsqrt %x : tensor<4x8xf32>
  // CHECK: graph.reciprocal
  %7 = graph.reciprocal %x : tensor<4x8xf32>
  // CHECK: graph.tanh
  %8 = graph.tanh %x : tensor<4x8xf32>
  // CHECK: graph.erf
  %9 = graph.erf %x : tensor<4x8xf32>
  // CHECK: graph.sigmoid
  %10 = graph.sigmoid %x : tensor<4x8xf32>
  // CHECK: graph.silu
  %11 = graph.silu %x : tensor<4x8xf32>
  // CHECK: graph.sin
  %12 = graph.sin %x : tensor<4x8xf32>
  // CHECK: graph.cos
  %13 = graph.cos %x : tensor<4x8xf32>
  // CHECK: graph.gelu %{{.*}} : tensor<4x8xf32>
  %14 = graph.gelu %x : tensor<4x8xf32>
  // CHECK: graph.gelu %{{.*}} approximate tanh : tensor<4x8xf32>
  %15 = graph.gelu %x approximate tanh : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @binary
func.func @binary(%a: tensor<2x4x8xf32>, %b: tensor<8xf32>, %c: tensor<4x1xf32>,
                  %i: tensor<4xi64>, %j: tensor<1xi64>) -> tensor<2x4x8xf32> {
  // CHECK: %[[ADD:.*]] = graph.add %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8xf32>
  %0 = graph.add %a, %b : tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: graph.sub %[[ADD]], %{{.*}} : tensor<2x4x8xf32>, tensor<4x1xf32>
  %1 = graph.sub %0, %c : tensor<2x4x8xf32>, tensor<4x1xf32>
  // CHECK: graph.mul %{{.*}}, %{{.*}} : tensor<4x1xf32>, tensor<8xf32>
  %2 = graph.mul %c, %b : tensor<4x1xf32>, tensor<8xf32>
  // CHECK: graph.div
  %3 = graph.div %1, %2 : tensor<2x4x8xf32>, tensor<4x8xf32>
  // CHECK: graph.pow
  %4 = graph.pow %3, %b : tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: graph.max
  %5 = graph.max %4, %a : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  // CHECK: graph.min %{{.*}}, %{{.*}} : tensor<4xi64>, tensor<1xi64>
  %6 = graph.min %i, %j : tensor<4xi64>, tensor<1xi64>
  // CHECK: %[[CMP:.*]] = graph.compare lt %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8xf32>
  %7 = graph.compare lt %5, %b : tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: graph.compare ne %{{.*}}, %{{.*}} : tensor<4xi64>, tensor<1xi64>
  %8 = graph.compare ne %i, %j : tensor<4xi64>, tensor<1xi64>
  // CHECK: %[[SEL:.*]] = graph.where %[[CMP]], %{{.*}}, %{{.*}} : tensor<2x4x8xi1>, tensor<2x4x8xf32>, tensor<8xf32>
  %9 = graph.where %7, %5, %b : tensor<2x4x8xi1>, tensor<2x4x8xf32>, tensor<8xf32>
  // CHECK: graph.cast %[[SEL]] : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  %10 = graph.cast %9 : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  return %9 : tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @contractions
func.func @contractions(%x: tensor<2x16x64xf32>, %w: tensor<64x32xf32>,
                        %bx: tensor<3x1x4x8xf32>, %by: tensor<5x8x2xf32>) {
  // CHECK: graph.matmul %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<64x32xf32>
  %0 = graph.matmul %x, %w : tensor<2x16x64xf32>, tensor<64x32xf32>
  // CHECK: graph.matmul %{{.*}}, %{{.*}} : tensor<3x1x4x8xf32>, tensor<5x8x2xf32>
  %1 = graph.matmul %bx, %by : tensor<3x1x4x8xf32>, tensor<5x8x2xf32>
  // The broadcast batch gives 3x5x4x2.
  // CHECK: graph.reduce sum %{{.*}} dims [0, 1] : tensor<3x5x4x2xf32>
  %2 = graph.reduce sum %1 dims [0, 1] : tensor<3x5x4x2xf32>
  // CHECK: graph.reduce mean %{{.*}} dims [2] keepdim : tensor<2x16x32xf32>
  %3 = graph.reduce mean %0 dims [2] keepdim : tensor<2x16x32xf32>
  // CHECK: graph.reduce max
  %4 = graph.reduce max %0 dims [1] : tensor<2x16x32xf32>
  // CHECK: graph.reduce min
  %5 = graph.reduce min %0 dims [1] : tensor<2x16x32xf32>
  // CHECK: graph.softmax %{{.*}} dim 2 : tensor<2x16x32xf32>
  %6 = graph.softmax %0 dim 2 : tensor<2x16x32xf32>
  // CHECK: graph.log_softmax %{{.*}} dim 0 : tensor<2x16x32xf32>
  %7 = graph.log_softmax %0 dim 0 : tensor<2x16x32xf32>
  return
}

// CHECK-LABEL: func.func @norms
func.func @norms(%x: tensor<2x8x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>,
                 %g2: tensor<8x64xf32>) {
  // CHECK: graph.layer_norm %{{.*}}, %{{.*}}, %{{.*}} dim 2 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  %0 = graph.layer_norm %x, %g, %b dim 2 : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  // CHECK: graph.layer_norm %{{.*}}, %{{.*}} dim 1 eps 1.000000e-03 : tensor<2x8x64xf32>, tensor<8x64xf32>
  %1 = graph.layer_norm %x, %g2 dim 1 eps 1.0e-3 : tensor<2x8x64xf32>, tensor<8x64xf32>
  // CHECK: graph.rms_norm %{{.*}}, %{{.*}} dim 2 : tensor<2x8x64xf32>, tensor<64xf32>
  %2 = graph.rms_norm %x, %g dim 2 : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: graph.rms_norm %{{.*}}, %{{.*}} dim 2 eps 1.000000e-05 : tensor<2x8x64xf32>, tensor<64xf32>
  %3 = graph.rms_norm %x, %g dim 2 eps 1.0e-5 : tensor<2x8x64xf32>, tensor<64xf32>
  return
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<2x8x64xf32>, %v: tensor<8xf32>, %ids: tensor<2x8xi64>,
                  %table: tensor<100x64xf32>) {
  // CHECK: %[[R:.*]] = graph.reshape %{{.*}} : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %0 = graph.reshape %x : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  // CHECK: graph.transpose %[[R]] perm [0, 2, 1, 3] : tensor<2x8x4x16xf32>
  %1 = graph.transpose %0 perm [0, 2, 1, 3] : tensor<2x8x4x16xf32>
  // CHECK: graph.broadcast_in_dim %{{.*}} dims [1] : tensor<8xf32> -> tensor<4x8xf32>
  %2 = graph.broadcast_in_dim %v dims [1] : tensor<8xf32> -> tensor<4x8xf32>
  // CHECK: graph.slice %{{.*}} start [0, 2, 0] limit [2, 8, 64] strides [1, 3, 2] : tensor<2x8x64xf32>
  %3 = graph.slice %x start [0, 2, 0] limit [2, 8, 64] strides [1, 3, 2] : tensor<2x8x64xf32>
  // CHECK: graph.slice %{{.*}} start [0, 0, 0] limit [1, 8, 64] : tensor<2x8x64xf32>
  %4 = graph.slice %x start [0, 0, 0] limit [1, 8, 64] : tensor<2x8x64xf32>
  // CHECK: graph.concat %{{.*}}, %{{.*}} dim 0 : tensor<1x8x64xf32>, tensor<2x8x64xf32>
  %5 = graph.concat %4, %x dim 0 : tensor<1x8x64xf32>, tensor<2x8x64xf32>
  // CHECK: %{{.*}}:3 = graph.split %{{.*}} dim 2 sizes [16, 16, 32] : tensor<2x8x64xf32>
  %6:3 = graph.split %x dim 2 sizes [16, 16, 32] : tensor<2x8x64xf32>
  // CHECK: graph.gather %{{.*}}[%{{.*}}] dim 0 : tensor<100x64xf32>, tensor<2x8xi64>
  %7 = graph.gather %table[%ids] dim 0 : tensor<100x64xf32>, tensor<2x8xi64>
  // CHECK: graph.topk %{{.*}} k 3 dim 2 : tensor<2x8x64xf32>
  %8:2 = graph.topk %x k 3 dim 2 : tensor<2x8x64xf32>
  // CHECK: graph.topk %{{.*}} k 1 dim 0 smallest : tensor<2x8x64xf32>
  %9:2 = graph.topk %x k 1 dim 0 smallest : tensor<2x8x64xf32>
  return
}

// CHECK-LABEL: func.func @attention_and_losses
func.func @attention_and_losses(%q: tensor<2x8x16x32xf32>, %k: tensor<2x2x16x32xf32>,
                                %v: tensor<2x2x16x8xf32>, %m: tensor<16x16xi1>,
                                %am: tensor<2x1x16x16xf32>, %logits: tensor<2x16x100xf32>,
                                %labels: tensor<2x16xi64>, %p: tensor<4x2xf32>, %t: tensor<4x2xf32>)
    -> (tensor<2x8x16x8xf32>, tensor<f32>) {
  // CHECK: %[[A:.*]] = graph.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<2x8x16x32xf32>, tensor<2x2x16x32xf32>, tensor<2x2x16x8xf32>
  %0 = graph.attention %q, %k, %v causal : tensor<2x8x16x32xf32>, tensor<2x2x16x32xf32>, tensor<2x2x16x8xf32>
  // CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} scale 1.250000e-01 : tensor<2x8x16x32xf32>, tensor<2x2x16x32xf32>, tensor<2x2x16x8xf32>, tensor<16x16xi1>
  %1 = graph.attention %q, %k, %v mask %m scale 0.125 : tensor<2x8x16x32xf32>, tensor<2x2x16x32xf32>, tensor<2x2x16x8xf32>, tensor<16x16xi1>
  // CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} causal : {{.*}}, tensor<2x1x16x16xf32>
  %2 = graph.attention %q, %k, %v mask %am causal : tensor<2x8x16x32xf32>, tensor<2x2x16x32xf32>, tensor<2x2x16x8xf32>, tensor<2x1x16x16xf32>
  // CHECK: %[[L:.*]] = graph.cross_entropy %{{.*}}, %{{.*}} ignore_index -100 : tensor<2x16x100xf32>, tensor<2x16xi64>
  %3 = graph.cross_entropy %logits, %labels ignore_index -100 : tensor<2x16x100xf32>, tensor<2x16xi64>
  // CHECK: graph.cross_entropy %{{.*}}, %{{.*}} : tensor<2x16x100xf32>, tensor<2x16xi64>
  %4 = graph.cross_entropy %logits, %labels : tensor<2x16x100xf32>, tensor<2x16xi64>
  // CHECK: graph.mse %{{.*}}, %{{.*}} : tensor<4x2xf32>
  %5 = graph.mse %p, %t : tensor<4x2xf32>
  // CHECK: return %[[A]], %[[L]]
  return %0, %3 : tensor<2x8x16x8xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @moe
func.func @moe(%x: tensor<16x64xf32>, %router: tensor<16x8xf32>,
               %w1: tensor<8x64x256xf32>) -> tensor<16x256xf32> {
  // CHECK: %[[G:.*]], %[[E:.*]] = graph.router_topk %{{.*}} k 2 normalize : tensor<16x8xf32>
  %g, %e = graph.router_topk %router k 2 normalize : tensor<16x8xf32>
  // CHECK: %[[D:.*]] = graph.moe_dispatch %{{.*}}, %[[E]] experts 8 capacity 4 : tensor<16x64xf32>, tensor<16x2xi64>
  %d = graph.moe_dispatch %x, %e experts 8 capacity 4 : tensor<16x64xf32>, tensor<16x2xi64>
  // CHECK: %[[H:.*]] = graph.expert_matmul %[[D]], %{{.*}} : tensor<8x4x64xf32>, tensor<8x64x256xf32>
  %h = graph.expert_matmul %d, %w1 : tensor<8x4x64xf32>, tensor<8x64x256xf32>
  // CHECK: graph.moe_combine %[[H]], %[[G]], %[[E]] : tensor<8x4x256xf32>, tensor<16x2xf32>, tensor<16x2xi64>
  %y = graph.moe_combine %h, %g, %e : tensor<8x4x256xf32>, tensor<16x2xf32>, tensor<16x2xi64>
  // CHECK: graph.router_topk %{{.*}} k 1 : tensor<16x8xf32>
  %g1, %e1 = graph.router_topk %router k 1 : tensor<16x8xf32>
  return %y : tensor<16x256xf32>
}

// The backward ops that -cleave-autodiff creates.
// CHECK-LABEL: func.func @backward
func.func @backward(%x: tensor<2x8x64xf32>, %g: tensor<64xf32>,
                    %q: tensor<2x4x8x16xf32>, %kv: tensor<2x2x8x16xf32>,
                    %ids: tensor<2x8xi64>, %logits: tensor<2x8x100xf32>,
                    %l: tensor<f32>) {
  // CHECK: graph.gelu_grad %{{.*}}, %{{.*}} approximate tanh : tensor<2x8x64xf32>
  %0 = graph.gelu_grad %x, %x approximate tanh : tensor<2x8x64xf32>
  // CHECK: graph.silu_grad %{{.*}}, %{{.*}} : tensor<2x8x64xf32>
  %1 = graph.silu_grad %x, %x : tensor<2x8x64xf32>
  // CHECK: graph.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} dim 2 eps 1.000000e-05 : tensor<2x8x64xf32>, tensor<64xf32>
  %dx, %dg, %db = graph.layer_norm_grad %x, %g, %x dim 2 eps 1.0e-05 : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: graph.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} dim 2 eps 9.9999999999999995E-7 : tensor<2x8x64xf32>, tensor<64xf32>
  %rx, %rg = graph.rms_norm_grad %x, %g, %x dim 2 eps 1.0e-06 : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: graph.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale 2.500000e-01 : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>
  %dq, %dk, %dv = graph.attention_grad %q, %kv, %kv, %q causal scale 0.25 : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>
  // CHECK: %[[BO:.*]], %[[BL:.*]] = graph.attention_block %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}}, %{{.*}} causal scale 2.500000e-01 : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<8xi64>, tensor<8xi64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  %pos = graph.iota dim 0 : tensor<8xi64>
  %bo, %bl = graph.attention_block %q, %kv, %kv positions %pos, %pos causal scale 0.25 : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<8xi64>, tensor<8xi64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  // CHECK: graph.attention_block %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}}, %{{.*}} merge %[[BO]], %[[BL]] scale 2.500000e-01 :
  %mo, %ml = graph.attention_block %q, %kv, %kv positions %pos, %pos merge %bo, %bl scale 0.25 : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<8xi64>, tensor<8xi64>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  // CHECK: graph.attention_block_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[BO]], %[[BL]], %{{.*}} positions %{{.*}}, %{{.*}} causal scale 2.500000e-01 :
  %bq, %bk, %bv = graph.attention_block_grad %q, %kv, %kv, %bo, %bl, %q positions %pos, %pos causal scale 0.25 : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8x16xf32>, tensor<8xi64>, tensor<8xi64>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  // CHECK: graph.gather_grad %{{.*}}[%{{.*}}] dim 0 : tensor<2x8x64xf32>, tensor<2x8xi64> -> tensor<100x64xf32>
  %2 = graph.gather_grad %x[%ids] dim 0 : tensor<2x8x64xf32>, tensor<2x8xi64> -> tensor<100x64xf32>
  // CHECK: graph.slice_grad %{{.*}} start [0, 0, 0] strides [1, 2, 1] : tensor<2x8x64xf32> -> tensor<2x16x64xf32>
  %3 = graph.slice_grad %x start [0, 0, 0] strides [1, 2, 1] : tensor<2x8x64xf32> -> tensor<2x16x64xf32>
  // CHECK: graph.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} ignore_index -100 : tensor<2x8x100xf32>, tensor<2x8xi64>, tensor<f32>
  %4 = graph.cross_entropy_grad %logits, %ids, %l ignore_index -100 : tensor<2x8x100xf32>, tensor<2x8xi64>, tensor<f32>
  // CHECK: graph.cross_entropy %{{.*}}, %{{.*}} reduction sum : tensor<2x8x100xf32>, tensor<2x8xi64>
  %5 = graph.cross_entropy %logits, %ids reduction sum : tensor<2x8x100xf32>, tensor<2x8xi64>
  // CHECK: graph.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} ignore_index -100 reduction sum : tensor<2x8x100xf32>, tensor<2x8xi64>, tensor<f32>
  %6 = graph.cross_entropy_grad %logits, %ids, %l ignore_index -100 reduction sum : tensor<2x8x100xf32>, tensor<2x8xi64>, tensor<f32>
  // Training-step annotations.
  // CHECK: graph.neg %{{.*}} {graph.layer = 3 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>}
  %7 = graph.neg %l {graph.layer = 3 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>} : tensor<f32>
  return
}

// The optimizer: updates are values that graph.assign stores.
graph.param @opt.w : tensor<4x8xf32>
graph.param @opt.w.momentum frozen : tensor<4x8xf32>
graph.param @opt.w.m frozen : tensor<4x8xf32>
graph.param @opt.w.v frozen : tensor<4x8xf32>
graph.param @opt.step frozen : tensor<i64>
// CHECK-LABEL: func.func @optimizer
func.func @optimizer(%g: tensor<4x8xf32>, %s: tensor<i64>, %c: tensor<f32>) {
  // CHECK: graph.assign @opt.step, %{{.*}} : tensor<i64>
  graph.assign @opt.step, %s : tensor<i64>
  %p = graph.read_param @opt.w : tensor<4x8xf32>
  %b = graph.read_param @opt.w.momentum : tensor<4x8xf32>
  // CHECK: %[[P1:.*]], %[[B1:.*]] = graph.sgd %{{.*}}, %{{.*}}, %{{.*}} momentum_buffer %{{.*}} {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %p1, %b1 = graph.sgd %p, %g, %s momentum_buffer %b {lr = 0.1 : f64, momentum = 0.9 : f64, nesterov} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  // CHECK: graph.sgd %{{.*}}, %{{.*}}, %{{.*}} scale %{{.*}} {lr = 1.000000e-01 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>, tensor<f32>) -> tensor<4x8xf32>
  %p2 = graph.sgd %p, %g, %s scale %c {lr = 0.1 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>, tensor<f32>) -> tensor<4x8xf32>
  %m = graph.read_param @opt.w.m : tensor<4x8xf32>
  %v = graph.read_param @opt.w.v : tensor<4x8xf32>
  // CHECK: %[[P3:.*]], %{{.*}}, %{{.*}} = graph.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale %{{.*}} {lr = 1.000000e-03 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  %p3:3 = graph.adamw %p, %g, %m, %v, %s scale %c {lr = 1.0e-3 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  // CHECK: graph.assign @opt.w, %[[P3]] :
  graph.assign @opt.w, %p3#0 : tensor<4x8xf32>
  graph.assign @opt.w.m, %p3#1 : tensor<4x8xf32>
  graph.assign @opt.w.v, %p3#2 : tensor<4x8xf32>
  return
}

// Sharded parameters keep their global type; a partitioned program reads
// and assigns the local block.
dist.mesh @mesh ["dp" = 2, "tp" = 4]
// CHECK: graph.param @tp.w : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}]> = dense<1.000000e+00> : tensor<16x8xf32>
graph.param @tp.w : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}]> = dense<1.0> : tensor<16x8xf32>
// CHECK: graph.param @zero.m frozen : tensor<16x8xf32> sharding <@mesh, [{"dp", "tp"}, {}]>
graph.param @zero.m frozen : tensor<16x8xf32> sharding <@mesh, [{"dp", "tp"}, {}]>
// CHECK-LABEL: func.func @sharded_params
func.func @sharded_params(%x: tensor<4x8xf32>) {
  // CHECK: graph.read_param @tp.w : tensor<16x8xf32>
  %g = graph.read_param @tp.w : tensor<16x8xf32>
  // CHECK: graph.read_param @tp.w : tensor<4x8xf32>
  %l = graph.read_param @tp.w : tensor<4x8xf32>
  // CHECK: graph.read_param @zero.m : tensor<2x8xf32>
  %m = graph.read_param @zero.m : tensor<2x8xf32>
  // CHECK: graph.assign @tp.w, %{{.*}} : tensor<4x8xf32>
  graph.assign @tp.w, %x : tensor<4x8xf32>
  return
}


// The fused kernels of -cleave-fuse-linear.
// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<2x8x32xf32>, %w: tensor<128x32xf32>, %b: tensor<128xf32>, %wk: tensor<32x128xf32>) -> (tensor<2x8x128xf32>, tensor<2x8x128xf32>, tensor<2x8x128xf32>) {
  // CHECK: graph.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x32xf32>, tensor<32x128xf32>, tensor<128xf32> -> tensor<2x8x128xf32>
  %0 = graph.linear %x, %wk, %b : tensor<2x8x32xf32>, tensor<32x128xf32>, tensor<128xf32> -> tensor<2x8x128xf32>
  // CHECK: %{{.*}}, %{{.*}} = graph.linear %{{.*}}, %{{.*}}, %{{.*}} transpose_weight activation gelu_tanh : tensor<2x8x32xf32>, tensor<128x32xf32>, tensor<128xf32> -> tensor<2x8x128xf32>, tensor<2x8x128xf32>
  %1:2 = graph.linear %x, %w, %b transpose_weight activation gelu_tanh : tensor<2x8x32xf32>, tensor<128x32xf32>, tensor<128xf32> -> tensor<2x8x128xf32>, tensor<2x8x128xf32>
  return %0, %1#0, %1#1 : tensor<2x8x128xf32>, tensor<2x8x128xf32>, tensor<2x8x128xf32>
}

// CHECK-LABEL: func.func @fused_backward
func.func @fused_backward(%dy: tensor<2x8x32xf32>, %w: tensor<128x32xf32>, %pre: tensor<2x8x128xf32>) -> (tensor<2x8x128xf32>, tensor<128xf32>, tensor<2x8x128xf32>) {
  // CHECK: %{{.*}}, %{{.*}} = graph.matmul_gelu_grad %{{.*}}, %{{.*}}, %{{.*}} transpose_weight approximate tanh : tensor<2x8x32xf32>, tensor<128x32xf32>, tensor<2x8x128xf32> -> tensor<2x8x128xf32>, tensor<128xf32>
  %0:2 = graph.matmul_gelu_grad %dy, %w, %pre transpose_weight approximate tanh : tensor<2x8x32xf32>, tensor<128x32xf32>, tensor<2x8x128xf32> -> tensor<2x8x128xf32>, tensor<128xf32>
  // CHECK: graph.matmul_gelu_grad %{{.*}}, %{{.*}}, %{{.*}} transpose_weight : tensor<2x8x32xf32>, tensor<128x32xf32>, tensor<2x8x128xf32> -> tensor<2x8x128xf32>
  %1 = graph.matmul_gelu_grad %dy, %w, %pre transpose_weight : tensor<2x8x32xf32>, tensor<128x32xf32>, tensor<2x8x128xf32> -> tensor<2x8x128xf32>
  return %0#0, %0#1, %1 : tensor<2x8x128xf32>, tensor<128xf32>, tensor<2x8x128xf32>
}

// CHECK-LABEL: func.func @gemm
func.func @gemm(%x: tensor<2x8x32xf32>, %w: tensor<64x32xf32>, %dy: tensor<16x64xf32>, %x2: tensor<16x32xf32>) -> (tensor<2x8x64xf32>, tensor<64x32xf32>, tensor<32x16xf32>) {
  // CHECK: graph.gemm %{{.*}}, %{{.*}} transpose_rhs : tensor<2x8x32xf32>, tensor<64x32xf32> -> tensor<2x8x64xf32>
  %0 = graph.gemm %x, %w transpose_rhs : tensor<2x8x32xf32>, tensor<64x32xf32> -> tensor<2x8x64xf32>
  // CHECK: graph.gemm %{{.*}}, %{{.*}} transpose_lhs : tensor<16x64xf32>, tensor<16x32xf32> -> tensor<64x32xf32>
  %1 = graph.gemm %dy, %x2 transpose_lhs : tensor<16x64xf32>, tensor<16x32xf32> -> tensor<64x32xf32>
  // CHECK: graph.gemm %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : tensor<64x32xf32>, tensor<16x64xf32> -> tensor<32x16xf32>
  %2 = graph.gemm %w, %dy transpose_lhs transpose_rhs : tensor<64x32xf32>, tensor<16x64xf32> -> tensor<32x16xf32>
  return %0, %1, %2 : tensor<2x8x64xf32>, tensor<64x32xf32>, tensor<32x16xf32>
}

// CHECK-LABEL: func.func @gemm_bias_grad
func.func @gemm_bias_grad(%dy: tensor<16x64xbf16>, %x: tensor<16x32xbf16>) -> (tensor<64xbf16>, tensor<1x1x64xf32>) {
  // CHECK: %{{.*}}, %{{.*}} = graph.gemm %{{.*}}, %{{.*}} transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xbf16>, tensor<64xbf16>
  %0:2 = graph.gemm %dy, %x transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xbf16>, tensor<64xbf16>
  // CHECK: %{{.*}}, %{{.*}} = graph.gemm %{{.*}}, %{{.*}} transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xf32>, tensor<1x1x64xf32>
  %1:2 = graph.gemm %dy, %x transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xf32>, tensor<1x1x64xf32>
  return %0#1, %1#1 : tensor<64xbf16>, tensor<1x1x64xf32>
}

// CHECK-LABEL: func.func @gemm_f32_result
func.func @gemm_f32_result(%dy: tensor<16x64xbf16>, %x: tensor<16x32xbf16>) -> tensor<64x32xf32> {
  // CHECK: graph.gemm %{{.*}}, %{{.*}} transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xf32>
  %0 = graph.gemm %dy, %x transpose_lhs : tensor<16x64xbf16>, tensor<16x32xbf16> -> tensor<64x32xf32>
  return %0 : tensor<64x32xf32>
}

// CHECK-LABEL: func.func @hyperparameters
// CHECK: graph.hyperparameter "grad_clip" default 1.000000e+00 : tensor<f32>
// CHECK: graph.hyperparameter "loss_scale_growth_interval" default 2.000000e+03 : tensor<i64>
// CHECK: graph.adamw {{.*}}run_time_hyperparameters
func.func @hyperparameters(%p: tensor<4xf32>, %g: tensor<4xf32>, %step: tensor<i64>) {
  %0 = graph.hyperparameter "grad_clip" default 1.0 : tensor<f32>
  %1 = graph.hyperparameter "loss_scale_growth_interval" default 2000.0 : tensor<i64>
  %2:3 = graph.adamw %p, %g, %p, %p, %step {lr = 1.0e-03 : f64, run_time_hyperparameters} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// CHECK-LABEL: func.func @gather_block
// CHECK: graph.gather %{{.*}}[%{{.*}}] dim 0 offset %{{.*}} : tensor<50x64xf32>, tensor<2x8xi32>
// CHECK: graph.gather_grad %{{.*}}[%{{.*}}] dim 0 offset %{{.*}} : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<50x64xf32>
func.func @gather_block(%block: tensor<50x64xf32>, %ids: tensor<2x8xi32>, %o: tensor<i64>) {
  %0 = graph.gather %block[%ids] dim 0 offset %o : tensor<50x64xf32>, tensor<2x8xi32>
  %1 = graph.gather_grad %0[%ids] dim 0 offset %o : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<50x64xf32>
  return
}

{-#
  dialect_resources: {
    builtin: {
      blob1: "0x040000000000803F00000040"
    }
  }
#-}
