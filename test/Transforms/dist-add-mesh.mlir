// -dist-add-mesh adds `dist.mesh @mesh` with the axes of its option, in the
// order given (major to minor), as the first op of the module; the rest of
// the module is left as it is.
// RUN: cleave-opt %s -dist-add-mesh="axes=dp=2,tp=2" | FileCheck %s
// RUN: cleave-opt %s -dist-add-mesh="axes=pp=2,dp=4,tp=8" | FileCheck %s --check-prefix=THREE
// RUN: cleave-opt %s -dist-add-mesh="axes=tp=1" | FileCheck %s --check-prefix=ONE
// RUN: cleave-opt %s -dist-add-mesh="axes=dp=2" -dist-data-parallel | FileCheck %s --check-prefix=USED

// Two axes, "tp" the minor one; nothing else changes.
// CHECK-LABEL: module
// CHECK-NEXT: dist.mesh @mesh ["dp" = 2, "tp" = 2]
// CHECK-NEXT: graph.param @w : tensor<16x8xf32>
// CHECK-NEXT: func.func @forward(%arg0: tensor<4x16xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: graph.read_param @w : tensor<16x8xf32>
// CHECK-NEXT: graph.matmul
// CHECK-NEXT: return
// CHECK-NOT: dist.

// The order of the option is kept: it is not sorted by name or size.
// THREE: dist.mesh @mesh ["pp" = 2, "dp" = 4, "tp" = 8]

// An axis of size 1 is kept (a strategy on it is a no-op).
// ONE: dist.mesh @mesh ["tp" = 1]

// The mesh it adds is the one the strategies find.
// USED: dist.mesh @mesh ["dp" = 2]
// USED: func.func @forward(%arg0: tensor<4x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {}], priority strategy, origin "-dist-data-parallel">})

graph.param @w : tensor<16x8xf32>
func.func @forward(%x: tensor<4x16xf32>) -> tensor<4x8xf32> {
  %w = graph.read_param @w : tensor<16x8xf32>
  %y = graph.matmul %x, %w : tensor<4x16xf32>, tensor<16x8xf32>
  return %y : tensor<4x8xf32>
}
