// Every op of the training step says where it belongs: its phase, its
// microbatch (forward and backward) and its layer, from the `blocks.N` of
// the parameters it reads or of its ONNX node path (a NameLoc), inherited
// by the ops after a layer; gradients take their forward op's layer and
// the optimizer's updates their parameter's (its name's, else its reads').
// RUN: cleave-opt %s --cleave-autodiff="optimizer=sgd accumulate=2" | FileCheck %s --enable-var-scope

// Forward of microbatch 0: the embedding before the first layer has no
// layer; blocks.0's matmul is layer 0, blocks.1's (named by its node path,
// its weight is not named) layer 1, the head after it inherits layer 1.
// CHECK-LABEL: func.func @train_step
// CHECK: graph.gather {{.*}}{graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>}
// CHECK: graph.matmul {{.*}}{graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>}
// CHECK: graph.matmul {{.*}}{graph.layer = 1 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>}
// CHECK: graph.matmul {{.*}}{graph.layer = 1 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>}
// CHECK: graph.cross_entropy {{.*}}{graph.layer = 1 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase forward>}
// Its backward, layer by layer in reverse.
// CHECK: graph.cross_entropy_grad {{.*}}{graph.layer = 1 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>}
// CHECK: graph.matmul {{.*}}{graph.layer = 0 : i64, graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>}
// CHECK: graph.gather_grad {{.*}}{graph.microbatch = 0 : i64, graph.phase = #graph<phase backward>}
// The second microbatch.
// CHECK: graph.matmul {{.*}}{graph.layer = 0 : i64, graph.microbatch = 1 : i64, graph.phase = #graph<phase forward>}
// CHECK: graph.gather_grad {{.*}}{graph.microbatch = 1 : i64, graph.phase = #graph<phase backward>}
// The updates.
// CHECK: graph.sgd {{.*}}{graph.phase = #graph<phase optimizer>, lr
// CHECK: graph.sgd {{.*}}{graph.layer = 0 : i64, graph.phase = #graph<phase optimizer>, lr
// CHECK: graph.assign @blocks.0.w, {{.*}}{graph.layer = 0 : i64, graph.phase = #graph<phase optimizer>}
// @w1 has no layer in its name; its read's node path names layer 1.
// CHECK: graph.sgd {{.*}}{graph.layer = 1 : i64, graph.phase = #graph<phase optimizer>, lr
// CHECK: graph.assign @head, {{.*}}{graph.phase = #graph<phase optimizer>}

graph.param @emb : tensor<10x8xf32>
graph.param @blocks.0.w : tensor<8x8xf32>
graph.param @w1 : tensor<8x8xf32>
graph.param @head : tensor<8x10xf32>
func.func @forward(%ids: tensor<4xi64>) -> tensor<4x10xf32> {
  %e = graph.read_param @emb : tensor<10x8xf32>
  %x = graph.gather %e[%ids] dim 0 : tensor<10x8xf32>, tensor<4xi64>
  %w0 = graph.read_param @blocks.0.w : tensor<8x8xf32>
  %h0 = graph.matmul %x, %w0 : tensor<4x8xf32>, tensor<8x8xf32>
  %w1 = graph.read_param @w1 : tensor<8x8xf32> loc("blocks.1.w"(unknown))
  %h1 = graph.matmul %h0, %w1 : tensor<4x8xf32>, tensor<8x8xf32> loc("/blocks.1/mlp/MatMul"(unknown))
  %wh = graph.read_param @head : tensor<8x10xf32>
  %y = graph.matmul %h1, %wh : tensor<4x8xf32>, tensor<8x10xf32>
  return %y : tensor<4x10xf32>
}
