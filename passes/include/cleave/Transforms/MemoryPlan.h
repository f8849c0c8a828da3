//===- MemoryPlan.h - the arena plan recorded on the IR ---------*- C++ -*-===//
//
// The helpers that -cleave-plan-memory and the lowering to the runtime
// share. The attributes through which the plan (and -cleave-autodiff's
// training metadata) is handed on are the cleave dialect's, declared and
// verified there.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_MEMORYPLAN_H
#define CLEAVE_TRANSFORMS_MEMORYPLAN_H

#include "cleave/Dialect/Cleave/IR/CleaveDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace cleave {

/// Bytes of a tensor of `type` (i1 takes one byte per element).
int64_t getTensorBytes(mlir::Type type);
int64_t alignTo(int64_t bytes, int64_t alignment);

/// The function named `name`, or the only function of the module.
mlir::func::FuncOp getEntryFunction(mlir::ModuleOp module,
                                    llvm::StringRef name);

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_MEMORYPLAN_H
