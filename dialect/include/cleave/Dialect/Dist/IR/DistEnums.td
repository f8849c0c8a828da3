//===- DistEnums.td - Enums of the dist dialect -------------*- tablegen -*-===//
//
// Enums used only by the `dist` dialect.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_DIST_IR_DISTENUMS_TD
#define CLEAVE_DIALECT_DIST_IR_DISTENUMS_TD

include "mlir/IR/EnumAttr.td"

def Dist_ShardingPriority : I32EnumAttr<"ShardingPriority",
    "who decided a sharding, highest priority first", [
      I32EnumAttrCase<"User", 0, "user">,
      I32EnumAttrCase<"Strategy", 1, "strategy">,
      I32EnumAttrCase<"Propagated", 2, "propagated">
    ]> {
  let cppNamespace = "::cleave::dist";
}

#endif // CLEAVE_DIALECT_DIST_IR_DISTENUMS_TD
