//===- Passes.h - Cleave passes ---------------------------------*- C++ -*-===//
//
// Declarations and registration of every Cleave pass, and the enums of their
// enum-valued options.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_PASSES_H
#define CLEAVE_TRANSFORMS_PASSES_H

#include "cleave/Dialect/Graph/IR/GraphDialect.h"
#include "cleave/Transforms/EnumOptionParser.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/Pass.h"

namespace cleave {

/// The loss -cleave-add-loss (and -cleave-autodiff) puts on the model's
/// first output.
enum class LossKind {
  /// Softmax cross-entropy against integer labels, mean over positions.
  CrossEntropy,
  /// Mean squared error against float targets.
  Mse,
};

/// The optimizer -cleave-add-optimizer (and -cleave-autodiff) applies to
/// every trainable parameter.
enum class OptimizerKind {
  /// No update: the step returns the loss and the gradients (only
  /// -cleave-autodiff accepts it).
  None,
  Sgd,
  Adamw,
};

/// The type a program computes its activations in.
enum class Precision {
  /// The model's own types (no -cleave-mixed-precision).
  F32,
  BF16,
  F16,
};

/// The spellings the program's metadata records (the training configuration
/// and `cleave.precision`), which are those of the pass options.
inline llvm::StringRef stringifyLossKind(LossKind loss) {
  switch (loss) {
  case LossKind::CrossEntropy:
    return "cross-entropy";
  case LossKind::Mse:
    return "mse";
  }
  llvm_unreachable("unknown loss");
}
inline llvm::StringRef stringifyOptimizerKind(OptimizerKind optimizer) {
  switch (optimizer) {
  case OptimizerKind::None:
    return "none";
  case OptimizerKind::Sgd:
    return "sgd";
  case OptimizerKind::Adamw:
    return "adamw";
  }
  llvm_unreachable("unknown optimizer");
}
/// The element type's name: f32, bf16 or f16.
inline llvm::StringRef stringifyPrecision(Precision precision) {
  switch (precision) {
  case Precision::F32:
    return "f32";
  case Precision::BF16:
    return "bf16";
  case Precision::F16:
    return "f16";
  }
  llvm_unreachable("unknown precision");
}

} // namespace cleave

// A bad value of these options is an error that lists the accepted ones.
CLEAVE_ENUM_OPTION_PARSER(::cleave::LossKind)
CLEAVE_ENUM_OPTION_PARSER(::cleave::OptimizerKind)
CLEAVE_ENUM_OPTION_PARSER(::cleave::Precision)

namespace cleave {

#define GEN_PASS_DECL
#include "cleave/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Transforms/Passes.h.inc"

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_PASSES_H
