//===- GraphDialect.cpp - graph dialect registration --------------------===//
//
// Registers the `graph` ops and attributes and materializes folded constants.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphDialect.h"
#include "cleave/Dialect/Cleave/IR/CleaveDialect.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

#include "cleave/Dialect/Graph/IR/GraphDialect.cpp.inc"
#include "cleave/Dialect/Graph/IR/GraphEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "cleave/Dialect/Graph/IR/GraphAttrs.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "cleave/Dialect/Graph/IR/GraphOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "cleave/Dialect/Graph/IR/GraphAttrs.cpp.inc"
      >();
}

Operation *GraphDialect::materializeConstant(OpBuilder &builder,
                                             Attribute value, Type type,
                                             Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}

LogicalResult
ExternalWeightsAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                            StringRef path, int64_t offset, int64_t size) {
  if (path.empty())
    return emitError() << "external weights need a file path";
  if (offset < 0)
    return emitError() << "external weights offset must be >= 0, got "
                       << offset;
  if (size <= 0)
    return emitError() << "external weights size must be > 0, got " << size;
  return success();
}

//===----------------------------------------------------------------------===//
// Training-step annotations
//===----------------------------------------------------------------------===//

LogicalResult GraphDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == getPhaseAttrName()) {
    if (!isa<PhaseAttr>(attr.getValue()))
      return op->emitOpError("'")
             << name << "' must be a #graph<phase ...>, got "
             << attr.getValue();
    return success();
  }
  if (name == getMicrobatchAttrName() || name == getLayerAttrName()) {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    if (!value || !value.getType().isInteger(64) || value.getInt() < 0)
      return op->emitOpError("'")
             << name << "' must be a non-negative i64, got " << attr.getValue();
    return success();
  }
  return op->emitOpError("unknown graph attribute '") << name << "'";
}
