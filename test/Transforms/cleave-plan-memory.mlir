// RUN: cleave-opt %s --cleave-plan-memory -split-input-file | FileCheck %s
// RUN: cleave-opt %s --cleave-plan-memory=report=true -split-input-file -mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Parameters first, then inputs, then temporaries; everything 64-aligned.
// CHECK-LABEL: graph.param @w
// CHECK-SAME: cleave.offset = 0
// CHECK: graph.param @b
// CHECK-SAME: cleave.offset = 64
// CHECK: func.func @forward(%{{.*}}: tensor<4x4xf32> {cleave.offset = 128 : i64})
// CHECK-SAME: cleave.arena_bytes = 320
// CHECK-SAME: cleave.param_bytes = 128
// CHECK-SAME: cleave.peak_bytes = 320
// CHECK-SAME: cleave.persistent_bytes = 192
// The parameter read is a view of the parameter.
// CHECK: graph.read_param @w {cleave.offsets = array<i64: 0>}
// CHECK: graph.matmul {{.*}} {cleave.offsets = array<i64: 192>}
// CHECK: graph.read_param @b {cleave.offsets = array<i64: 64>}
// An elementwise op whose operand dies writes in place.
// CHECK: graph.add {{.*}} {cleave.offsets = array<i64: 192>}
// CHECK: graph.exp {{.*}} {cleave.offsets = array<i64: 192>}
// %2 is returned, so it lives to the end: the matmul needs a new buffer,
// which tanh then overwrites in place.
// CHECK: graph.matmul {{.*}} {cleave.offsets = array<i64: 256>}
// CHECK: graph.tanh {{.*}} {cleave.offsets = array<i64: 256>}
// REPORT: remark: memory plan: arena 320 bytes (parameters 128, inputs 64, temporaries 128), peak 320 bytes
graph.param @w : tensor<4x4xf32>
graph.param @b : tensor<4xf32>
func.func @forward(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %w = graph.read_param @w : tensor<4x4xf32>
  %0 = graph.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32>
  %b = graph.read_param @b : tensor<4xf32>
  %1 = graph.add %0, %b : tensor<4x4xf32>, tensor<4xf32>
  %2 = graph.exp %1 : tensor<4x4xf32>
  %3 = graph.matmul %2, %2 : tensor<4x4xf32>, tensor<4x4xf32>
  %4 = graph.tanh %3 : tensor<4x4xf32>
  return %2, %4 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Buffers whose lifetimes do not overlap share bytes. The unused broadcast
// dies at once, so the constant takes its place; each transpose needs its
// operand live, so they alternate between two 4 KiB buffers, and the peak
// is those two.
// CHECK-LABEL: func.func @reuse
// CHECK-SAME: cleave.arena_bytes = 8256
// CHECK-SAME: cleave.peak_bytes = 8256
// CHECK: graph.broadcast_in_dim {{.*}} {cleave.offsets = array<i64: 64>}
// CHECK: graph.constant {cleave.offsets = array<i64: 64>}
// CHECK: graph.transpose {{.*}} {cleave.offsets = array<i64: 4160>}
// CHECK: graph.transpose {{.*}} {cleave.offsets = array<i64: 64>}
// CHECK: graph.transpose {{.*}} {cleave.offsets = array<i64: 4160>}
// A reshape is a view of its operand.
// CHECK: graph.reshape {{.*}} {cleave.offsets = array<i64: 4160>}
// REPORT: remark: memory plan: arena 8256 bytes (parameters 0, inputs 64, temporaries 8192), peak 8256 bytes
func.func @reuse(%x: tensor<4x4xf32>) -> tensor<1024xf32> {
  %big = graph.broadcast_in_dim %x dims [0, 1] : tensor<4x4xf32> -> tensor<4x4xf32>
  %c = graph.constant dense<1.0> : tensor<32x32xf32>
  %0 = graph.transpose %c perm [1, 0] : tensor<32x32xf32>
  %1 = graph.transpose %0 perm [1, 0] : tensor<32x32xf32>
  %2 = graph.transpose %1 perm [1, 0] : tensor<32x32xf32>
  %3 = graph.reshape %2 : tensor<32x32xf32> -> tensor<1024xf32>
  return %3 : tensor<1024xf32>
}

// -----

// An optimizer update whose results are only assigned back is computed in
// the parameters' storage: its results get the offsets of @w (0) and @w.m
// (64) and @w.v (128).
// CHECK-LABEL: func.func @update_in_place
// CHECK: graph.adamw {{.*}} {cleave.offsets = array<i64: 0, 64, 128>
graph.param @w : tensor<4xf32>
graph.param @w.m : tensor<4xf32>
graph.param @w.v : tensor<4xf32>
func.func @update_in_place(%g: tensor<4xf32>, %s: tensor<i64>) {
  %p = graph.read_param @w : tensor<4xf32>
  %m = graph.read_param @w.m : tensor<4xf32>
  %v = graph.read_param @w.v : tensor<4xf32>
  %p1, %m1, %v1 = graph.adamw %p, %g, %m, %v, %s {lr = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  graph.assign @w, %p1 : tensor<4xf32>
  graph.assign @w.m, %m1 : tensor<4xf32>
  graph.assign @w.v, %v1 : tensor<4xf32>
  return
}

// -----

// The old parameter is still used after the update (and returned), so the
// new one gets its own buffer (after the persistent region: the parameter
// at 0, the arguments at 64 and 128) and the assignment copies it.
// CHECK-LABEL: func.func @update_copied
// CHECK: graph.sgd {{.*}} {cleave.offsets = array<i64: 192>
graph.param @w : tensor<4xf32>
func.func @update_copied(%g: tensor<4xf32>, %s: tensor<i64>) -> tensor<4xf32> {
  %p = graph.read_param @w : tensor<4xf32>
  %p1 = graph.sgd %p, %g, %s {lr = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  %d = graph.sub %p1, %p : tensor<4xf32>, tensor<4xf32>
  graph.assign @w, %p1 : tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

// The engine reduces in place: an all_reduce whose operand dies there
// reuses its buffer; one whose operand lives on (returned) gets its own,
// and an argument's storage is never written.
// CHECK-LABEL: func.func @all_reduce_in_place
// CHECK: graph.mul %arg0, %arg0 {cleave.offsets = array<i64: 64>}
// CHECK: dist.all_reduce %{{.*}} {cleave.offsets = array<i64: 64>}
// CHECK: graph.mul {{.*}} {cleave.offsets = array<i64: 128>}
// CHECK: dist.all_reduce %{{.*}} {cleave.offsets = array<i64: 192>}
// CHECK: dist.all_reduce %arg0 {{.*}} {cleave.offsets = array<i64: 256>}
dist.mesh @mesh ["dp" = 2]
func.func @all_reduce_in_place(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %p = graph.mul %x, %x : tensor<16xf32>, tensor<16xf32>
  %r = dist.all_reduce %p on @mesh ["dp"] sum : tensor<16xf32>
  %q = graph.mul %r, %x : tensor<16xf32>, tensor<16xf32>
  %s = dist.all_reduce %q on @mesh ["dp"] sum : tensor<16xf32>
  %t = dist.all_reduce %x on @mesh ["dp"] sum : tensor<16xf32>
  return %r, %s, %q, %t : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// A started collective reads its input until its wait: the neg between
// them may not take the input's buffer (it would, were the all_reduce
// blocking), and the wait's result is the started one's buffer.
// CHECK-LABEL: func.func @started_collective
// CHECK: graph.mul %arg0, %arg0 {cleave.offsets = array<i64: 64>}
// CHECK: dist.all_reduce async %{{.*}} {cleave.offsets = array<i64: 128>}
// CHECK: graph.neg %arg0 {cleave.offsets = array<i64: 192>}
// CHECK: dist.wait %{{.*}} {cleave.offsets = array<i64: 128>}
dist.mesh @mesh ["dp" = 2]
func.func @started_collective(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %p = graph.mul %x, %x : tensor<16xf32>, tensor<16xf32>
  %s = dist.all_reduce async %p on @mesh ["dp"] sum : tensor<16xf32>
  %q = graph.neg %x : tensor<16xf32>
  %r = dist.wait %s : tensor<16xf32>
  return %r, %q : tensor<16xf32>, tensor<16xf32>
}
