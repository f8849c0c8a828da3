//===- CleaveEnums.cpp - Enums shared by the Cleave dialects ------------===//
//
// Generated string conversions of the shared enums.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include "cleave/Interfaces/CleaveEnums.h.inc"

#include "cleave/Interfaces/CleaveEnums.cpp.inc"
