//===- GradientOpInterface.cpp - Vector-Jacobian rules of ops ------------===//
//
// The generated definitions of GradientOpInterface; the rules themselves
// live with the ops (e.g. dialect/lib/Dialect/Graph/IR/GraphGradients.cpp).
//
//===----------------------------------------------------------------------===//

#include "cleave/Interfaces/GradientOpInterface.h"

#include "cleave/Interfaces/GradientOpInterface.cpp.inc"
