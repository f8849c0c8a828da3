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
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "cleave/Dialect/Dist/IR/DistDialect.h"

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

} // namespace cleave::dist

#endif // CLEAVE_DIALECT_DIST_IR_DISTOPS_H
