// RUN: cleave-opt %s -split-input-file -dist-propagate -dist-partition -canonicalize -cse | FileCheck %s

// The partition hooks of the vocabulary-parallel ops. A gather from a
// table split by rows looks up, on each device, the ids of its block: one
// gather at the block's offset (axis_index * 8) whose ids outside the block
// give zero rows (no shift, compare, select or mask around it): the rows
// are partial and all-reduced where a reader needs them whole.
// CHECK-LABEL: func.func @embedding
// CHECK: %[[T:.*]] = graph.read_param @table : tensor<8x8xf32>
// CHECK: %[[I:.*]] = dist.axis_index on @mesh ["tp"]
// CHECK: %[[OFF:.*]] = graph.mul %[[I]]
// CHECK-NOT: graph.where
// CHECK: %[[R:.*]] = graph.gather %[[T]][%arg0] dim 0 offset %[[OFF]] : tensor<8x8xf32>, tensor<4xi64>
// CHECK-NOT: graph.mul
// CHECK: %[[S:.*]] = dist.all_reduce %[[R]] on @mesh ["tp"] sum : tensor<4x8xf32>
// CHECK: return %[[S]]
dist.mesh @mesh ["tp" = 2]
graph.param @table : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy>
func.func @embedding(%ids: tensor<4xi64>) -> tensor<4x8xf32> {
  %t = graph.read_param @table : tensor<16x8xf32>
  %e = graph.gather %t[%ids] dim 0 : tensor<16x8xf32>, tensor<4xi64>
  return %e : tensor<4x8xf32>
}

// -----

// Its gradient into the split table scatters, on each device, the rows of
// the ids in its block into it: one gather_grad at the block's offset. The
// table's layout comes from the gradient's reader (the update of the split
// parameter), propagated backward: the gradient is never computed whole.
// CHECK-LABEL: func.func @embedding_grad
// CHECK: %[[T:.*]] = graph.read_param @table : tensor<8x8xf32>
// CHECK: %[[I:.*]] = dist.axis_index on @mesh ["tp"]
// CHECK: %[[OFF:.*]] = graph.mul %[[I]]
// CHECK: %[[G:.*]] = graph.gather_grad %arg0[%arg1] dim 0 offset %[[OFF]] : tensor<4x8xf32>, tensor<4xi32> -> tensor<8x8xf32>
// CHECK-NOT: dist.local_slice
// CHECK: %[[N:.*]] = graph.sub %[[T]], %[[G]] : tensor<8x8xf32>, tensor<8x8xf32>
// CHECK: graph.assign @table, %[[N]] : tensor<8x8xf32>
dist.mesh @mesh ["tp" = 2]
graph.param @table : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy>
func.func @embedding_grad(%dy: tensor<4x8xf32>, %ids: tensor<4xi32>) {
  %t = graph.read_param @table : tensor<16x8xf32>
  %g = graph.gather_grad %dy[%ids] dim 0 : tensor<4x8xf32>, tensor<4xi32> -> tensor<16x8xf32>
  %n = graph.sub %t, %g : tensor<16x8xf32>, tensor<16x8xf32>
  graph.assign @table, %n : tensor<16x8xf32>
  return
}

// -----

// A gather that already has an offset (a table that is itself a block)
// adds the device's offset to it.
// CHECK-LABEL: func.func @block_of_a_block
// CHECK: %[[I:.*]] = dist.axis_index on @mesh ["tp"]
// CHECK: %[[OFF:.*]] = graph.mul %[[I]]
// CHECK: %[[SUM:.*]] = graph.add %arg1, %[[OFF]] : tensor<i64>, tensor<i64>
// CHECK: graph.gather %{{.*}}[%arg0] dim 0 offset %[[SUM]]
dist.mesh @mesh ["tp" = 2]
graph.param @table : tensor<16x8xf32> sharding <@mesh, [{"tp"}, {}], priority strategy>
func.func @block_of_a_block(%ids: tensor<4xi64>, %base: tensor<i64>) -> tensor<4x8xf32> {
  %t = graph.read_param @table : tensor<16x8xf32>
  %e = graph.gather %t[%ids] dim 0 offset %base : tensor<16x8xf32>, tensor<4xi64>
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
