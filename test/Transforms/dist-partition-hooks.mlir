// RUN: cleave-opt %s -split-input-file -dist-propagate -dist-partition -canonicalize -cse | FileCheck %s

// The partition hooks of the vocabulary-parallel ops. A gather from a
// table split by rows looks up, on each device, the ids of its block
// (shifted by axis_index * 8, out-of-block ids clamped to 0 and their rows
// zeroed): the rows are partial and all-reduced where a reader needs them
// whole.
// CHECK-LABEL: func.func @embedding
// CHECK: %[[T:.*]] = graph.read_param @table : tensor<8x8xf32>
// CHECK: %[[I:.*]] = dist.axis_index on @mesh ["tp"]
// CHECK: %[[OFF:.*]] = graph.mul %[[I]]
// CHECK: %[[L:.*]] = graph.sub %arg0, %[[OFF]]
// CHECK: %[[LO:.*]] = graph.compare ge %[[L]]
// CHECK: %[[HI:.*]] = graph.compare lt %[[L]]
// CHECK: %[[IN:.*]] = graph.where %[[LO]], %[[HI]], %[[LO]]
// CHECK: %[[C:.*]] = graph.where %[[IN]], %[[L]]
// CHECK: %[[R:.*]] = graph.gather %[[T]][%[[C]]] dim 0 : tensor<8x8xf32>, tensor<4xi64>
// CHECK: %[[M:.*]] = graph.cast %[[IN]] : tensor<4xi1> -> tensor<4xf32>
// CHECK: %[[M1:.*]] = graph.reshape %[[M]] : tensor<4xf32> -> tensor<4x1xf32>
// CHECK: %[[P:.*]] = graph.mul %[[R]], %[[M1]]
// CHECK: %[[S:.*]] = dist.all_reduce %[[P]] on @mesh ["tp"] sum : tensor<4x8xf32>
// CHECK: return %[[S]]
dist.mesh @mesh ["tp" = 2]
graph.param @table : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy>
func.func @embedding(%ids: tensor<4xi64>) -> tensor<4x8xf32> {
  %t = graph.read_param @table : tensor<16x8xf32>
  %e = graph.gather %t[%ids] dim 0 : tensor<16x8xf32>, tensor<4xi64>
  return %e : tensor<4x8xf32>
}

// -----

// A summed cross-entropy over split classes never gathers the logits: the
// row maxima (max) and the sums of exponentials (sum) are all-reduced, and
// the label's shifted logit, picked by a one-hot of this device's classes
// (iota + axis_index * 8), all-reduced; loss = sum(log(sum) - picked).
// CHECK-LABEL: func.func @loss
// CHECK-SAME: %arg0: tensor<4x8xf32>
// CHECK: %[[MX:.*]] = graph.reduce max %arg0 dims [1] keepdim : tensor<4x8xf32>
// CHECK: %[[GMX:.*]] = dist.all_reduce %[[MX]] on @mesh ["tp"] max : tensor<4x1xf32>
// CHECK: %[[Z:.*]] = graph.sub %arg0, %[[GMX]]
// CHECK: %[[E:.*]] = graph.exp %[[Z]]
// CHECK: %[[SE:.*]] = graph.reduce sum %[[E]] dims [1] keepdim
// CHECK: %[[GSE:.*]] = dist.all_reduce %[[SE]] on @mesh ["tp"] sum : tensor<4x1xf32>
// CHECK: %[[LSE:.*]] = graph.log %[[GSE]]
// CHECK: graph.iota dim 0 : tensor<8xi64>
// CHECK: %[[HIT:.*]] = graph.compare eq
// CHECK: %[[OH:.*]] = graph.cast %[[HIT]] : tensor<4x8xi1> -> tensor<4x8xf32>
// CHECK: %[[PICK:.*]] = graph.mul %[[Z]], %[[OH]]
// CHECK: %[[T:.*]] = graph.reduce sum %[[PICK]] dims [1] keepdim
// CHECK: %[[GT:.*]] = dist.all_reduce %[[T]] on @mesh ["tp"] sum : tensor<4x1xf32>
// CHECK: %[[D:.*]] = graph.sub %[[LSE]], %[[GT]]
// CHECK: %[[LOSS:.*]] = graph.reduce sum %[[D]] dims [0, 1] : tensor<4x1xf32>
// CHECK: return %[[LOSS]] : tensor<f32>
dist.mesh @mesh ["tp" = 2]
func.func @loss(%logits: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>}, %labels: tensor<4xi64>) -> tensor<f32> {
  %l = graph.cross_entropy %logits, %labels reduction sum : tensor<4x16xf32>, tensor<4xi64>
  return %l : tensor<f32>
}

// -----

// A mean cross-entropy has no hook: its classes are gathered.
// CHECK-LABEL: func.func @mean_loss
// CHECK: dist.all_gather %arg0 on @mesh ["tp"] dim 1 : tensor<4x8xf32> -> tensor<4x16xf32>
// CHECK: graph.cross_entropy
dist.mesh @mesh ["tp" = 2]
func.func @mean_loss(%logits: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"}]>}, %labels: tensor<4xi64>) -> tensor<f32> {
  %l = graph.cross_entropy %logits, %labels : tensor<4x16xf32>, tensor<4xi64>
  return %l : tensor<f32>
}
