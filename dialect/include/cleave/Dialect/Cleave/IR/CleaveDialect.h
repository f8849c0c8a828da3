//===- CleaveDialect.h - the cleave dialect: pipeline metadata --*- C++ -*-===//
//
// The `cleave` dialect, the names of the `cleave.*` attributes it verifies,
// and helpers for the parameter roles and the training configuration.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_CLEAVE_IR_CLEAVEDIALECT_H
#define CLEAVE_DIALECT_CLEAVE_IR_CLEAVEDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Diagnostics.h"

#include "cleave/Runtime/cleave_rt_enums.h"

#include "cleave/Dialect/Cleave/IR/CleaveDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "cleave/Dialect/Cleave/IR/CleaveAttrs.h.inc"

namespace cleave {

/// On graph.param and entry function arguments: the byte offset.
constexpr llvm::StringLiteral kOffsetAttr("cleave.offset");
/// On every op with results: the byte offset of each result.
constexpr llvm::StringLiteral kOffsetsAttr("cleave.offsets");
/// On graph.param, set by the memory plan when a partitioned program keeps
/// this device's block of it: the stored (block) type.
constexpr llvm::StringLiteral kStoredTypeAttr("cleave.stored_type");
/// On the entry function: the region sizes and the peak.
constexpr llvm::StringLiteral kParamBytesAttr("cleave.param_bytes");
constexpr llvm::StringLiteral kPersistentBytesAttr("cleave.persistent_bytes");
constexpr llvm::StringLiteral kArenaBytesAttr("cleave.arena_bytes");
constexpr llvm::StringLiteral kPeakBytesAttr("cleave.peak_bytes");
/// On graph.param: what it holds (a ParamRoleAttr); absent: a model
/// parameter.
constexpr llvm::StringLiteral kRoleAttr("cleave.role");
/// On the training function: its loss and optimizer (a DictionaryAttr, see
/// verifyTrainingConfig).
constexpr llvm::StringLiteral kTrainingConfigAttr("cleave.training_config");
/// On the training function, from -cleave-add-loss until
/// -cleave-add-optimizer: its loss, as the loss keys of the training
/// configuration (a DictionaryAttr, see verifyLossConfig).
constexpr llvm::StringLiteral kLossAttr("cleave.loss");
/// On the op whose result #0 is one microbatch's loss, from -cleave-add-loss
/// until -cleave-differentiate seeds its backward there: unit.
constexpr llvm::StringLiteral kMicrobatchLossAttr("cleave.microbatch_loss");
/// On a result of the training function, from -cleave-differentiate until
/// -cleave-add-optimizer consumes it: the parameter whose gradient the
/// result is (a FlatSymbolRefAttr).
constexpr llvm::StringLiteral kGradientAttr("cleave.gradient");
/// On the module: the absolute path of the ONNX model it was imported from.
constexpr llvm::StringLiteral kSourceModelAttr("cleave.source_model");
/// On the module: the compute precision -cleave-mixed-precision chose
/// ("bf16" or "f16"); absent: the model's own types.
constexpr llvm::StringLiteral kPrecisionAttr("cleave.precision");
/// On a module nested in the training program's: it is the lowered
/// evaluation program, which -cleave-link-eval takes in (unit).
constexpr llvm::StringLiteral kEvalProgramAttr("cleave.eval_program");
/// On any op: it keeps computing in f32 under -cleave-mixed-precision.
constexpr llvm::StringLiteral kKeepF32Attr("cleave.keep_f32");

/// The role of a parameter op: its `cleave.role`, else CLEAVE_PARAM_MODEL.
cleave_param_role getParamRole(mlir::Operation *param);
/// Sets the role of a parameter op.
void setParamRole(mlir::Operation *param, cleave_param_role role);

/// Checks a training configuration: a dictionary of known keys with values
/// of their types (strings, f64 floats, i64 integers, booleans), its
/// required keys and the keys of its optimizer only.
mlir::LogicalResult
verifyTrainingConfig(mlir::DictionaryAttr config,
                     llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// Checks the loss of a training step (`cleave.loss`): the training
/// configuration's keys that -cleave-add-loss and -cleave-differentiate
/// decide (`loss`, `ignore_index`, `accumulate`, `loss_scale`), with their
/// types and ranges; `loss` and `accumulate` are required.
mlir::LogicalResult
verifyLossConfig(mlir::DictionaryAttr config,
                 llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// The training configuration as the JSON object of the program metadata
/// (cleave_program_info.training_config), its members in a fixed order:
/// {"loss":"cross-entropy","optimizer":"adamw","lr":0.001,...}. Floats are
/// written as the shortest text that reads back as the same double.
std::string getTrainingConfigJson(mlir::DictionaryAttr config);

} // namespace cleave

#endif // CLEAVE_DIALECT_CLEAVE_IR_CLEAVEDIALECT_H
