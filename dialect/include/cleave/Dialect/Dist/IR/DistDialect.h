//===- DistDialect.h - dist dialect and sharding attribute ------*- C++ -*-===//
//
// The `dist` dialect class and the `#dist.sharding` attribute.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_DIST_IR_DISTDIALECT_H
#define CLEAVE_DIALECT_DIST_IR_DISTDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "cleave/Interfaces/ShardingRule.h"

#include "cleave/Dialect/Dist/IR/DistDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "cleave/Dialect/Dist/IR/DistAttrs.h.inc"

#endif // CLEAVE_DIALECT_DIST_IR_DISTDIALECT_H
