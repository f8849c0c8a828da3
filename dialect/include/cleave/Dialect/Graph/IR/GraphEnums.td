//===- GraphEnums.td - Enums of the graph dialect -----------*- tablegen -*-===//
//
// Enums used only by `graph` ops.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_GRAPH_IR_GRAPHENUMS_TD
#define CLEAVE_DIALECT_GRAPH_IR_GRAPHENUMS_TD

include "mlir/IR/EnumAttr.td"

def Graph_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu is computed", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Tanh", 1, "tanh">
    ]> {
  let cppNamespace = "::cleave::graph";
}

def Graph_Activation : I32EnumAttr<"Activation",
    "the activation a fused kernel applies to its result", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Gelu", 1, "gelu">,
      I32EnumAttrCase<"GeluTanh", 2, "gelu_tanh">
    ]> {
  let cppNamespace = "::cleave::graph";
}

def Graph_CompareDirection : I32EnumAttr<"CompareDirection",
    "elementwise comparison", [
      I32EnumAttrCase<"EQ", 0, "eq">,
      I32EnumAttrCase<"NE", 1, "ne">,
      I32EnumAttrCase<"LT", 2, "lt">,
      I32EnumAttrCase<"LE", 3, "le">,
      I32EnumAttrCase<"GT", 4, "gt">,
      I32EnumAttrCase<"GE", 5, "ge">
    ]> {
  let cppNamespace = "::cleave::graph";
}

def Graph_Phase : I32EnumAttr<"Phase",
    "the part of a training step an op belongs to", [
      I32EnumAttrCase<"Forward", 0, "forward">,
      I32EnumAttrCase<"Backward", 1, "backward">,
      I32EnumAttrCase<"Optimizer", 2, "optimizer">
    ]> {
  let cppNamespace = "::cleave::graph";
  let genSpecializedAttr = 0;
}

#endif // CLEAVE_DIALECT_GRAPH_IR_GRAPHENUMS_TD
