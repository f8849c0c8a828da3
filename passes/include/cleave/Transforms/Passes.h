//===- Passes.h - Cleave passes ---------------------------------*- C++ -*-===//
//
// Declarations and registration of every Cleave pass.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_PASSES_H
#define CLEAVE_TRANSFORMS_PASSES_H

#include "cleave/Dialect/Graph/IR/GraphDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/Pass.h"

namespace cleave {

#define GEN_PASS_DECL
#include "cleave/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Transforms/Passes.h.inc"

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_PASSES_H
