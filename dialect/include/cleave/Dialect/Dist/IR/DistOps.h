//===- DistOps.h - dist dialect ops -----------------------------*- C++ -*-===//
//
// Meshes, sharding constraints and collectives, and the check of a sharding
// against a tensor type and a mesh.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_DIST_IR_DISTOPS_H
#define CLEAVE_DIALECT_DIST_IR_DISTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "cleave/Dialect/Dist/IR/DistDialect.h"

namespace cleave::dist {
/// The communicators of a mesh, as a side-effect resource: collectives read
/// and write it (DistOps.td).
struct CommResource : public mlir::SideEffects::Resource::Base<CommResource> {
  llvm::StringRef getName() final { return "dist.comm"; }
};
} // namespace cleave::dist

#define GET_OP_CLASSES
#include "cleave/Dialect/Dist/IR/DistOps.h.inc"

namespace cleave::dist {

/// Checks `sharding` for a value of `type` on `mesh`: the ranks agree, every
/// axis exists, and each dimension is divisible by the product of its axis
/// sizes. `valueName` says which value the diagnostics speak of.
mlir::LogicalResult
verifySharding(ShardingAttr sharding, mlir::Type type, MeshOp mesh,
               llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
               llvm::StringRef valueName);

/// Looks up the mesh `sharding` names from `from`, then verifies as above;
/// a missing mesh is an error.
mlir::LogicalResult
verifyShardingAt(mlir::Operation *from, ShardingAttr sharding, mlir::Type type,
                 llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                 llvm::StringRef valueName);

/// The type of this device's block of a value of `type` sharded as
/// `sharding` on `mesh`, counting only the axes `select` accepts (all axes
/// when it is null). The sharding must have been verified.
mlir::RankedTensorType
getLocalType(ShardingAttr sharding, mlir::RankedTensorType type, MeshOp mesh,
             llvm::function_ref<bool(llvm::StringRef)> select = nullptr);

/// The global type of which `local` is one device's block under
/// `sharding` on `mesh` (the inverse of getLocalType over all axes). The
/// sharding's axes must exist.
mlir::RankedTensorType getGlobalType(ShardingAttr sharding,
                                     mlir::RankedTensorType local,
                                     MeshOp mesh);

/// The sharding of result `i` of `op` (its `dist.sharding` attribute), or
/// null.
ShardingAttr getResultSharding(mlir::Operation *op, unsigned i);
/// Sets the `dist.sharding` attribute of `op`, one sharding per result.
void setResultShardings(mlir::Operation *op,
                        llvm::ArrayRef<ShardingAttr> shardings);

/// Checks that a reduction of `kind` is defined on `elementType`: `mean`
/// needs floats, `sum` anything but i1.
mlir::LogicalResult
verifyReductionType(ReductionKind kind, mlir::Type elementType,
                    llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

} // namespace cleave::dist

#endif // CLEAVE_DIALECT_DIST_IR_DISTOPS_H
