// -dist-context-parallel splits the sequence, the dimension after the
// batch, of every input of the attentions' length on the axis.
// Partitioned in the ring form (the default), each device's queries meet
// the key/value block it holds, then the one passed on from the device
// before by collective_permute, merged by log-sum-exp; the positions
// (axis_index * 4 + [0, 4) for the queries, the holder's for the keys)
// carry the causal mask. In the gather form each device's queries attend
// to the keys and values gathered whole, under a causal mask at its
// offset: key position <= its query positions axis_index * 4 + [0, 4).
// In the zigzag layout (the default) device r of 2 holds chunks r and
// 3 - r of 4: the partitioner reorders a value's chunks (a gather by a
// constant order) before slicing it and after gathering it, inputs come
// whole along cp, and the positions are those of the two chunks.
// RUN: cleave-opt %s -split-input-file -dist-context-parallel | FileCheck %s
// RUN: cleave-opt %s -split-input-file -dist-context-parallel="layout=contiguous" | FileCheck %s --check-prefix=CONT
// RUN: cleave-opt %s -split-input-file -dist-context-parallel="form=gather layout=contiguous" -dist-propagate -dist-partition -canonicalize -cse | FileCheck %s --check-prefix=PART
// RUN: cleave-opt %s -split-input-file -dist-context-parallel="layout=contiguous" -dist-propagate -dist-partition -canonicalize -cse | FileCheck %s --check-prefix=RING
// RUN: cleave-opt %s -split-input-file -dist-context-parallel -dist-propagate -dist-partition -canonicalize -cse | FileCheck %s --check-prefix=ZIGZAG
// RUN: cleave-opt %s -split-input-file -dist-context-parallel="form=gather" -dist-propagate -dist-partition -canonicalize -cse | FileCheck %s --check-prefix=ZGATHER

// Only the inputs of the sequence's length along dimension 1 are split.
// CHECK: dist.mesh @mesh ["cp" = 2] {zigzag_axes = ["cp"]}
// CHECK-LABEL: func.func @attend
// CHECK-SAME: %arg0: tensor<2x8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"cp"}, {}], priority strategy, origin "-dist-context-parallel">}
// CHECK-SAME: %arg1: tensor<2x16xf32>)
// CHECK: graph.attention {{.*}} causal {dist.ring = "zigzag"}
// CONT: dist.mesh @mesh ["cp" = 2]{{$}}
// CONT: graph.attention {{.*}} causal {dist.ring = "contiguous"}

// PART-LABEL: func.func @attend
// PART-SAME: %arg0: tensor<2x4x16xf32>
// PART: %[[Q:.*]] = graph.transpose %{{.*}} perm [0, 2, 1, 3] : tensor<2x4x4x4xf32>
// PART: %[[K:.*]] = dist.all_gather %[[Q]] on @mesh ["cp"] dim 2 : tensor<2x4x4x4xf32> -> tensor<2x4x8x4xf32>
// PART: %[[I:.*]] = dist.axis_index on @mesh ["cp"]
// PART: %[[QPOS:.*]] = graph.iota dim 0 : tensor<4xi64>
// PART: %[[OFF:.*]] = graph.mul %[[I]], %{{.*}} : tensor<i64>, tensor<i64>
// PART: %[[QP:.*]] = graph.add %[[QPOS]], %[[OFF]]
// PART: %[[KPOS:.*]] = graph.iota dim 0 : tensor<8xi64>
// PART: %[[QR:.*]] = graph.reshape %[[QP]] : tensor<4xi64> -> tensor<4x1xi64>
// PART: %[[KR:.*]] = graph.reshape %[[KPOS]] : tensor<8xi64> -> tensor<1x8xi64>
// PART: %[[M:.*]] = graph.compare le %[[KR]], %[[QR]] : tensor<1x8xi64>, tensor<4x1xi64>
// PART: graph.attention %[[Q]], %[[K]], %[[K]] mask %[[M]] : tensor<2x4x4x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<4x8xi1>
// PART-NOT: causal
// RING-LABEL: func.func @attend
// RING: %[[Q:.*]] = graph.transpose %{{.*}} perm [0, 2, 1, 3] : tensor<2x4x4x4xf32>
// RING: %[[I:.*]] = dist.axis_index on @mesh ["cp"]
// RING: %[[IOTA:.*]] = graph.iota dim 0 : tensor<4xi64>
// RING: %[[OFF:.*]] = graph.mul %[[I]], %{{.*}} : tensor<i64>, tensor<i64>
// RING: %[[QP:.*]] = graph.add %[[IOTA]], %[[OFF]]
// The key and value block (one value here) passed on once.
// RING: %[[KV:.*]] = dist.collective_permute %[[Q]] on @mesh ["cp"] pairs {{\[\[}}0, 1], [1, 0]] : tensor<2x4x4x4xf32>
// RING-NOT: dist.collective_permute
// RING: %[[O0:.*]], %[[L0:.*]] = graph.attention_block %[[Q]], %[[Q]], %[[Q]] positions %[[QP]], %[[QP]] causal scale 5.000000e-01
// The holder of the block passed on: (axis_index - 1) mod 2.
// RING: %[[H:.*]] = graph.where
// RING: %[[HO:.*]] = graph.mul %[[H]], %{{.*}}
// RING: %[[KP:.*]] = graph.add %[[IOTA]], %[[HO]]
// RING: %[[O1:.*]], %{{.*}} = graph.attention_block %[[Q]], %[[KV]], %[[KV]] positions %[[QP]], %[[KP]] merge %[[O0]], %[[L0]] causal scale 5.000000e-01
// RING: graph.transpose %[[O1]]
// RING-NOT: graph.attention {{.*}}
// ZIGZAG-LABEL: func.func @attend
// The input comes whole along cp.
// ZIGZAG-SAME: %arg0: tensor<2x8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {}, {}]
// ZIGZAG-DAG: %[[BACK:.*]] = graph.constant dense<[0, 1, 4, 5, 6, 7, 2, 3]> : tensor<8xi64>
// ZIGZAG-DAG: %[[ORDER:.*]] = graph.constant dense<[0, 1, 6, 7, 2, 3, 4, 5]> : tensor<8xi64>
// ZIGZAG: %[[X:.*]] = graph.gather %arg0[%[[ORDER]]] dim 1
// ZIGZAG: %[[I:.*]] = dist.axis_index on @mesh ["cp"]
// ZIGZAG: dist.local_slice %[[X]][%[[I]]] dim 1 : tensor<2x8x16xf32> -> tensor<2x4x16xf32>
// ZIGZAG: %[[Q:.*]] = graph.transpose %{{.*}} perm [0, 2, 1, 3] : tensor<2x4x4x4xf32>
// This device's positions: chunk I, then chunk 3 - I, of 2 tokens each.
// ZIGZAG: %[[LATE:.*]] = graph.sub %{{.*}}, %[[I]]
// ZIGZAG: %[[IOTA:.*]] = graph.iota dim 0 : tensor<2xi64>
// ZIGZAG: %[[E:.*]] = graph.mul %[[I]], %{{.*}}
// ZIGZAG: %[[EP:.*]] = graph.add %[[IOTA]], %[[E]]
// ZIGZAG: %[[L:.*]] = graph.mul %[[LATE]], %{{.*}}
// ZIGZAG: %[[LP:.*]] = graph.add %[[IOTA]], %[[L]]
// ZIGZAG: %[[QP:.*]] = graph.concat %[[EP]], %[[LP]] dim 0 : tensor<2xi64>, tensor<2xi64>
// ZIGZAG: %[[KV:.*]] = dist.collective_permute %[[Q]]
// ZIGZAG: graph.attention_block %[[Q]], %[[Q]], %[[Q]] positions %[[QP]], %[[QP]] causal
// ZIGZAG: %[[KP:.*]] = graph.concat
// ZIGZAG: %[[O:.*]], %{{.*}} = graph.attention_block %[[Q]], %[[KV]], %[[KV]] positions %[[QP]], %[[KP]] merge
// The result, returned whole, gathered and put back in sequence order.
// ZIGZAG: %[[G:.*]] = dist.all_gather %{{.*}} on @mesh ["cp"] dim 1 : tensor<2x4x16xf32> -> tensor<2x8x16xf32>
// ZIGZAG: %[[R:.*]] = graph.gather %[[G]][%[[BACK]]] dim 1
// ZIGZAG: return %[[R]]
// The gather form's mask at the zigzag positions of the queries.
// ZGATHER-LABEL: func.func @attend
// ZGATHER: %[[QP:.*]] = graph.concat %{{.*}}, %{{.*}} dim 0 : tensor<2xi64>, tensor<2xi64>
// ZGATHER: %[[QR:.*]] = graph.reshape %[[QP]] : tensor<4xi64> -> tensor<4x1xi64>
// ZGATHER: %[[M:.*]] = graph.compare le %{{.*}}, %[[QR]] : tensor<1x8xi64>, tensor<4x1xi64>
// ZGATHER: graph.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[M]]
dist.mesh @mesh ["cp" = 2]
func.func @attend(%x: tensor<2x8x16xf32>, %w: tensor<2x16xf32>) -> tensor<2x8x16xf32> {
  %h = graph.reshape %x : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %q = graph.transpose %h perm [0, 2, 1, 3] : tensor<2x8x4x4xf32>
  %o = graph.attention %q, %q, %q causal : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>
  %t = graph.transpose %o perm [0, 2, 1, 3] : tensor<2x4x8x4xf32>
  %r = graph.reshape %t : tensor<2x8x4x4xf32> -> tensor<2x8x16xf32>
  return %r : tensor<2x8x16xf32>
}

// -----

// The backward ring reads the forward's output and log-sum-exp, passes the
// key and value blocks as the forward does, and their gradients beside
// them; after the last block one more pass brings them home (2 passes of
// dk and dv on 2 devices).
// RING-LABEL: func.func @step
// RING: %[[K:.*]] = graph.neg %[[Q:.*]] : tensor<1x2x4x4xf32>
// RING: %[[O:.*]], %[[L:.*]] = graph.attention_block %[[Q]], %{{.*}} merge
// RING: %[[DY:.*]] = dist.local_slice %arg1
// RING: %[[K1:.*]] = dist.collective_permute %[[K]]
// RING: %[[V1:.*]] = dist.collective_permute %[[Q]]
// RING: %[[DQ0:.*]], %[[DK0:.*]], %[[DV0:.*]] = graph.attention_block_grad %[[Q]], %[[K]], %[[Q]], %[[O]], %[[L]], %[[DY]] positions
// RING: %[[DKP:.*]] = dist.collective_permute %[[DK0]]
// RING: %[[DVP:.*]] = dist.collective_permute %[[DV0]]
// RING: %[[DQ1:.*]], %[[DK1:.*]], %[[DV1:.*]] = graph.attention_block_grad %[[Q]], %[[K1]], %[[V1]], %[[O]], %[[L]], %[[DY]] positions
// RING: %[[DQ:.*]] = graph.add %[[DQ0]], %[[DQ1]]
// RING: %[[DK:.*]] = graph.add %[[DKP]], %[[DK1]]
// RING: %[[DV:.*]] = graph.add %[[DVP]], %[[DV1]]
// RING: %[[DKH:.*]] = dist.collective_permute %[[DK]]
// RING: %[[DVH:.*]] = dist.collective_permute %[[DV]]
// RING: dist.all_gather %[[DQ]]
// RING: dist.all_gather %[[DKH]]
// RING: dist.all_gather %[[DVH]]
// ZIGZAG-LABEL: func.func @step
// An operand read split, sliced from its zigzag order.
// ZIGZAG: %[[DY:.*]] = graph.gather %arg1[%{{.*}}] dim 2
// ZIGZAG: dist.local_slice %[[DY]][%{{.*}}] dim 2 : tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
// ZIGZAG-COUNT-2: graph.attention_block_grad
// ZIGZAG: dist.all_gather
// ZIGZAG-NEXT: graph.gather
// ZIGZAG-NEXT: dist.all_gather
// ZIGZAG-NEXT: graph.gather
// ZIGZAG-NEXT: dist.all_gather
// ZIGZAG-NEXT: graph.gather
// ZIGZAG-NEXT: dist.all_gather
// ZIGZAG-NEXT: graph.gather
// ZIGZAG-NEXT: return
dist.mesh @mesh ["cp" = 2]
func.func @step(%x: tensor<1x8x8xf32>, %dy: tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) {
  %h = graph.reshape %x : tensor<1x8x8xf32> -> tensor<1x8x2x4xf32>
  %q = graph.transpose %h perm [0, 2, 1, 3] : tensor<1x8x2x4xf32>
  %k = graph.neg %q : tensor<1x2x8x4xf32>
  %o = graph.attention %q, %k, %q causal : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
  %dq, %dk, %dv = graph.attention_grad %q, %k, %q, %dy causal scale 0.5 : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
  return %o, %dq, %dk, %dv : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// A weight gradient contracting the merged batch and sequence rows is
// contracted per batch row instead: the merged rows cannot be split on the
// sequence (their minor factor), the batched matmul's contraction can, and
// is partial over cp (reduced, not gathered).
// CHECK-LABEL: func.func @weight_gradient
// CHECK: %[[XT:.*]] = graph.transpose %{{.*}} perm [0, 2, 1] : tensor<2x8x16xf32>
// CHECK: %[[B:.*]] = graph.matmul %[[XT]], %arg1 : tensor<2x16x8xf32>, tensor<2x8x4xf32>
// CHECK: %[[W:.*]] = graph.reduce sum %[[B]] dims [0] : tensor<2x16x4xf32>
// CHECK: return %{{.*}}, %[[W]]
// CHECK-LABEL: func.func @weight_gradient_one_row
// CHECK: %[[B1:.*]] = graph.matmul %{{.*}}, %arg1 : tensor<1x16x8xf32>, tensor<1x8x4xf32>
// CHECK: graph.reshape %[[B1]] : tensor<1x16x4xf32> -> tensor<16x4xf32>
// RING-LABEL: func.func @weight_gradient(
// RING-NOT: dist.all_gather
// RING: dist.all_reduce %{{.*}} on @mesh ["cp"] sum : tensor<16x4xf32>
dist.mesh @mesh ["cp" = 2]
func.func @weight_gradient(%x: tensor<2x8x16xf32>, %dy: tensor<2x8x4xf32>) -> (tensor<2x8x16xf32>, tensor<16x4xf32>) {
  %h = graph.reshape %x : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
  %q = graph.transpose %h perm [0, 2, 1, 3] : tensor<2x8x4x4xf32>
  %o = graph.attention %q, %q, %q causal : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>
  %t = graph.transpose %o perm [0, 2, 1, 3] : tensor<2x4x8x4xf32>
  %r = graph.reshape %t : tensor<2x8x4x4xf32> -> tensor<2x8x16xf32>
  %xm = graph.reshape %r : tensor<2x8x16xf32> -> tensor<16x16xf32>
  %dym = graph.reshape %dy : tensor<2x8x4xf32> -> tensor<16x4xf32>
  %xt = graph.transpose %xm perm [1, 0] : tensor<16x16xf32>
  %dw = graph.matmul %xt, %dym : tensor<16x16xf32>, tensor<16x4xf32>
  return %r, %dw : tensor<2x8x16xf32>, tensor<16x4xf32>
}
func.func @weight_gradient_one_row(%x: tensor<1x8x16xf32>, %dy: tensor<1x8x4xf32>) -> tensor<16x4xf32> {
  %h = graph.reshape %x : tensor<1x8x16xf32> -> tensor<1x8x4x4xf32>
  %q = graph.transpose %h perm [0, 2, 1, 3] : tensor<1x8x4x4xf32>
  %o = graph.attention %q, %q, %q causal : tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>
  %t = graph.transpose %o perm [0, 2, 1, 3] : tensor<1x4x8x4xf32>
  %r = graph.reshape %t : tensor<1x8x4x4xf32> -> tensor<1x8x16xf32>
  %xm = graph.reshape %r : tensor<1x8x16xf32> -> tensor<8x16xf32>
  %dym = graph.reshape %dy : tensor<1x8x4xf32> -> tensor<8x4xf32>
  %xt = graph.transpose %xm perm [1, 0] : tensor<8x16xf32>
  %dw = graph.matmul %xt, %dym : tensor<16x8xf32>, tensor<8x4xf32>
  return %dw : tensor<16x4xf32>
}
