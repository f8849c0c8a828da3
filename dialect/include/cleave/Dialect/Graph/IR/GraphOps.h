//===- GraphOps.h - graph dialect ops ---------------------------*- C++ -*-===//
//
// The ops of the `graph` dialect.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_GRAPH_IR_GRAPHOPS_H
#define CLEAVE_DIALECT_GRAPH_IR_GRAPHOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphDialect.h"
#include "cleave/Interfaces/GradientOpInterface.h"
#include "cleave/Interfaces/ShardingRule.h"

#include "cleave/Runtime/cleave_rt_enums.h"

#define GET_OP_CLASSES
#include "cleave/Dialect/Graph/IR/GraphOps.h.inc"

namespace cleave::graph {
/// The slot of run-time hyperparameter `name` (enum cleave_hyperparameter),
/// or -1 when there is none of that name.
int32_t hyperparameterSlot(llvm::StringRef name);
} // namespace cleave::graph

#endif // CLEAVE_DIALECT_GRAPH_IR_GRAPHOPS_H
