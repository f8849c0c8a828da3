//===- DistDialect.h - dist dialect and sharding attribute ------*- C++ -*-===//
//
// The `dist` dialect class, its enums, the axis references of shardings and
// the `#dist.sharding` attribute.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_DIST_IR_DISTDIALECT_H
#define CLEAVE_DIALECT_DIST_IR_DISTDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include <string>

#include "cleave/Interfaces/ShardingRule.h"

#include "cleave/Dialect/Dist/IR/DistEnums.h.inc"

#include "cleave/Dialect/Dist/IR/DistDialect.h.inc"

namespace cleave::dist {
/// One mesh axis of a sharding: the whole axis `name`, or the sub-axis of
/// `size` devices `preSize` apart (`size == 0` for the whole axis).
struct AxisRef {
  llvm::StringRef name;
  int64_t preSize = 1;
  int64_t size = 0;

  bool isSubAxis() const { return size != 0; }
  /// The number of devices along this axis, given the whole axis's size.
  int64_t getSize(int64_t axisSize) const { return size ? size : axisSize; }
  /// True when the two refer to overlapping devices of one axis.
  bool overlaps(const AxisRef &other) const;
  /// `"tp"` or `"tp":(2)2`.
  std::string str() const;
  bool operator==(const AxisRef &o) const {
    return name == o.name && preSize == o.preSize && size == o.size;
  }
};
} // namespace cleave::dist

#define GET_ATTRDEF_CLASSES
#include "cleave/Dialect/Dist/IR/DistAttrs.h.inc"

#endif // CLEAVE_DIALECT_DIST_IR_DISTDIALECT_H
