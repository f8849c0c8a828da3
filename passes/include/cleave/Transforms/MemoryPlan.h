//===- MemoryPlan.h - the arena plan recorded on the IR ---------*- C++ -*-===//
//
// The attributes through which -cleave-plan-memory hands its plan to the
// lowering to the runtime (and -cleave-autodiff its training metadata), and
// helpers shared by them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_MEMORYPLAN_H
#define CLEAVE_TRANSFORMS_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace cleave {

/// On graph.param and entry function arguments: the byte offset.
constexpr llvm::StringLiteral kOffsetAttr("cleave.offset");
/// On every op with results: the byte offset of each result.
constexpr llvm::StringLiteral kOffsetsAttr("cleave.offsets");
/// On the entry function: the region sizes and the peak.
constexpr llvm::StringLiteral kParamBytesAttr("cleave.param_bytes");
constexpr llvm::StringLiteral kPersistentBytesAttr("cleave.persistent_bytes");
constexpr llvm::StringLiteral kArenaBytesAttr("cleave.arena_bytes");
constexpr llvm::StringLiteral kPeakBytesAttr("cleave.peak_bytes");

/// On graph.param: state that an optimizer added (not a model parameter).
constexpr llvm::StringLiteral kOptimizerStateAttr("cleave.optimizer_state");
/// On the training function: its loss and optimizer as a JSON object.
constexpr llvm::StringLiteral kTrainingConfigAttr("cleave.training_config");
/// On the module: the absolute path of the ONNX model it was imported from.
constexpr llvm::StringLiteral kSourceModelAttr("cleave.source_model");
/// On the module: the compute precision -cleave-mixed-precision chose
/// ("bf16" or "f16"); absent: the model's own types.
constexpr llvm::StringLiteral kPrecisionAttr("cleave.precision");

/// Bytes of a tensor of `type` (i1 takes one byte per element).
int64_t getTensorBytes(mlir::Type type);
int64_t alignTo(int64_t bytes, int64_t alignment);

/// The function named `name`, or the only function of the module.
mlir::func::FuncOp getEntryFunction(mlir::ModuleOp module,
                                    llvm::StringRef name);

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_MEMORYPLAN_H
