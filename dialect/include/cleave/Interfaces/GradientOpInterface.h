//===- GradientOpInterface.h - Vector-Jacobian rules of ops -----*- C++ -*-===//
//
// The op interface that -cleave-differentiate (and so -cleave-autodiff)
// calls to differentiate each op.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_INTERFACES_GRADIENTOPINTERFACE_H
#define CLEAVE_INTERFACES_GRADIENTOPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Support/LLVM.h"

#include "cleave/Interfaces/GradientOpInterface.h.inc"

#endif // CLEAVE_INTERFACES_GRADIENTOPINTERFACE_H
