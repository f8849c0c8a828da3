//===- GradientOpInterface.td - Vector-Jacobian rules ------*- tablegen -*-===//
//
// The op interface through which every differentiable `graph` op builds its
// own reverse-mode rule, next to its definition (DESIGN.md §1, the
// -cleave-differentiate pass only walks the ops in reverse and sums).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_INTERFACES_GRADIENTOPINTERFACE_TD
#define CLEAVE_INTERFACES_GRADIENTOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::cleave";
  let description = [{
    Builds the vector-Jacobian product of the op: given the gradient flowing
    into each result (null where none flows), creates the ops that compute
    the gradient flowing into each operand, at the builder's insertion point.
    `operandGrads` arrives with one null entry per operand; entries left null
    receive no gradient (integer operands, masks, indices). A rule that
    cannot differentiate the op for its attributes returns failure after
    emitting an error that names the reason.
  }];

  let methods = [
    InterfaceMethod<
      "Builds the gradients of the operands from those of the results.",
      "::mlir::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // CLEAVE_INTERFACES_GRADIENTOPINTERFACE_TD
