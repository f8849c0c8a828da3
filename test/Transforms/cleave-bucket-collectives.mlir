// RUN: cleave-opt %s --cleave-bucket-collectives | FileCheck %s
// RUN: cleave-opt %s --cleave-bucket-collectives=bucket-bytes=128 | FileCheck %s --check-prefix=SMALL
// RUN: cleave-opt %s --cleave-bucket-collectives --cleave-plan-memory | FileCheck %s --check-prefix=PLAN
// RUN: cleave-opt %s --cleave-bucket-collectives --cleave-plan-memory --cleave-lower-to-runtime | FileCheck %s --check-prefix=LOWER
// RUN: cleave-opt %s --cleave-bucket-collectives --cleave-overlap-collectives | FileCheck %s --check-prefix=STARTED
// RUN: cleave-opt %s --cleave-bucket-collectives --cleave-overlap-collectives --cleave-plan-memory --cleave-lower-to-runtime | FileCheck %s --check-prefix=STARTLOWER

// Three gradients' all-reduces become one bucket, placed before the first
// reader of one of them; the all-reduce of an argument (not a temporary)
// and the max stay alone.
// CHECK-LABEL: func.func @step
// CHECK: %[[G0:.*]] = graph.mul
// CHECK: %[[G1:.*]] = graph.neg
// CHECK: %[[G2:.*]] = graph.add
// CHECK: dist.all_reduce %arg0 on @mesh ["dp"] sum
// CHECK: dist.all_reduce %{{.*}} on @mesh ["dp"] max
// CHECK: %[[B:.*]]:3 = dist.all_reduce_bucket %[[G0]], %[[G1]], %[[G2]] on @mesh ["dp"] sum : tensor<16xf32>, tensor<4xf32>, tensor<8xf32> -> tensor<16xf32>, tensor<4xf32>, tensor<8xf32>
// CHECK-NEXT: graph.sub %[[B]]#0

// At most 128 bytes (each member 64-byte aligned): two buckets.
// SMALL: dist.all_reduce_bucket %{{.*}}, %{{.*}} on
// SMALL-NOT: dist.all_reduce_bucket
// SMALL: dist.all_reduce %{{.*}} on @mesh ["dp"] sum : tensor<8xf32>

// The members one after another in one buffer, in place (after the
// arguments at 0, 64 and 128).
// PLAN: dist.all_reduce_bucket {{.*}} {cleave.offsets = array<i64: 192, 256, 320>}

// One collective of the whole buffer: 3 x 64 bytes, 48 floats.
// LOWER: llvm.mlir.global private constant @[[D:cleave.desc.[0-9]+]](dense<[{{[0-9]+}}, 4294967296, 48, 0,
// LOWER-LABEL: llvm.func @cleave_program_run
// LOWER: %[[W:.*]] = llvm.mlir.addressof @[[D]]
// LOWER: llvm.call @cleave_comm_all_reduce(%{{.*}}, %{{.*}}, %{{.*}}, %[[W]], %[[W]])
// Started (-cleave-overlap-collectives): each result waited for before its
// first reader; in the lowering one started all-reduce of the buffer and
// one wait, at the first of the bucket's waits (3 waits: the bucket's, the
// argument's and the max's).
// STARTED: %[[S:.*]]:3 = dist.all_reduce_bucket async
// STARTED: %[[W0:.*]] = dist.wait %[[S]]#0 : tensor<16xf32>
// STARTED-NEXT: graph.sub %[[W0]]
// STARTED-DAG: dist.wait %[[S]]#1 : tensor<4xf32>
// STARTED-DAG: dist.wait %[[S]]#2 : tensor<8xf32>
// STARTLOWER-LABEL: llvm.func @cleave_program_run
// STARTLOWER: llvm.call @cleave_comm_all_reduce_start(%{{[0-9]+}}, %arg0, %{{[0-9]+}}, %[[W:[0-9]+]], %[[W]])
// STARTLOWER-COUNT-3: llvm.call @cleave_comm_wait(
// STARTLOWER-NOT: llvm.call @cleave_comm_wait(
// STARTLOWER: llvm.return
dist.mesh @mesh ["dp" = 2]
func.func @step(%x: tensor<16xf32>, %y: tensor<4xf32>, %z: tensor<8xf32>) -> (tensor<16xf32>, tensor<4xf32>, tensor<8xf32>, tensor<16xf32>, tensor<4xf32>) {
  %g0 = graph.mul %x, %x : tensor<16xf32>, tensor<16xf32>
  %r0 = dist.all_reduce %g0 on @mesh ["dp"] sum : tensor<16xf32>
  %g1 = graph.neg %y : tensor<4xf32>
  %r1 = dist.all_reduce %g1 on @mesh ["dp"] sum : tensor<4xf32>
  %g2 = graph.add %z, %z : tensor<8xf32>, tensor<8xf32>
  %r2 = dist.all_reduce %g2 on @mesh ["dp"] sum : tensor<8xf32>
  %a = dist.all_reduce %x on @mesh ["dp"] sum : tensor<16xf32>
  %n = graph.neg %y : tensor<4xf32>
  %m = dist.all_reduce %n on @mesh ["dp"] max : tensor<4xf32>
  %u = graph.sub %r0, %x : tensor<16xf32>, tensor<16xf32>
  return %u, %r1, %r2, %a, %m : tensor<16xf32>, tensor<4xf32>, tensor<8xf32>, tensor<16xf32>, tensor<4xf32>
}
