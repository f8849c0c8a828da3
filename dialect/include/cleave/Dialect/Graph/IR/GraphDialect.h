//===- GraphDialect.h - graph dialect and attributes ------------*- C++ -*-===//
//
// The `graph` dialect class, its enums and attributes.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_GRAPH_IR_GRAPHDIALECT_H
#define CLEAVE_DIALECT_GRAPH_IR_GRAPHDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "cleave/Interfaces/ShardingRule.h"

#include "cleave/Dialect/Graph/IR/GraphEnums.h.inc"

#include "cleave/Dialect/Graph/IR/GraphDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "cleave/Dialect/Graph/IR/GraphAttrs.h.inc"

#endif // CLEAVE_DIALECT_GRAPH_IR_GRAPHDIALECT_H
