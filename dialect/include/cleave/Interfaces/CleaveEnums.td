//===- CleaveEnums.td - Enums shared by the Cleave dialects -*- tablegen -*-===//
//
// Enums that more than one dialect (and the sharding rules) speak of. Each dialect
// wraps them in its own EnumAttr.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_INTERFACES_CLEAVEENUMS_TD
#define CLEAVE_INTERFACES_CLEAVEENUMS_TD

include "mlir/IR/EnumAttr.td"

def Cleave_ReductionKind : I32EnumAttr<"ReductionKind",
    "how values are combined by a reduction or a collective", [
      I32EnumAttrCase<"Sum", 0, "sum">,
      I32EnumAttrCase<"Mean", 1, "mean">,
      I32EnumAttrCase<"Max", 2, "max">,
      I32EnumAttrCase<"Min", 3, "min">
    ]> {
  let cppNamespace = "::cleave";
}

#endif // CLEAVE_INTERFACES_CLEAVEENUMS_TD
