//===- CleaveDialect.cpp - the cleave dialect: pipeline metadata --------===//
//
// Registration, the `#cleave.role` attribute, and the verification of every
// `cleave.*` discardable attribute where it appears: each check names what
// the attribute must be (test/Dialect/Cleave/invalid.mlir has a case for
// each).
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Cleave/IR/CleaveDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace cleave;

#include "cleave/Dialect/Cleave/IR/CleaveDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "cleave/Dialect/Cleave/IR/CleaveAttrs.cpp.inc"

void CleaveDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "cleave/Dialect/Cleave/IR/CleaveAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ParamRoleAttr
//===----------------------------------------------------------------------===//

Attribute ParamRoleAttr::parse(AsmParser &parser, Type) {
  std::string keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeywordOrString(&keyword))
    return {};
#define CLEAVE_ROLE_CASE(NAME, VALUE, MNEMONIC)                                \
  if (keyword == MNEMONIC)                                                     \
    return parser.parseGreater() ? Attribute()                                 \
                                 : get(parser.getContext(), CLEAVE_##NAME);
  CLEAVE_RT_PARAM_ROLES(CLEAVE_ROLE_CASE)
#undef CLEAVE_ROLE_CASE
  std::string known;
#define CLEAVE_ROLE_NAME(NAME, VALUE, MNEMONIC)                                \
  known += (known.empty() ? "" : ", ") + std::string(MNEMONIC);
  CLEAVE_RT_PARAM_ROLES(CLEAVE_ROLE_NAME)
#undef CLEAVE_ROLE_NAME
  parser.emitError(loc, "unknown parameter role '")
      << keyword << "' (available: " << known << ")";
  return {};
}

void ParamRoleAttr::print(AsmPrinter &printer) const {
  printer << '<' << cleave_param_role_name(getValue()) << '>';
}

cleave_param_role cleave::getParamRole(Operation *param) {
  if (auto role = param->getAttrOfType<ParamRoleAttr>(kRoleAttr))
    return role.getValue();
  return CLEAVE_PARAM_MODEL;
}

void cleave::setParamRole(Operation *param, cleave_param_role role) {
  param->setAttr(kRoleAttr, ParamRoleAttr::get(param->getContext(), role));
}

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

namespace {

/// An offset or a byte count: an i64 integer >= 0 and, for offsets, a
/// multiple of the runtime's alignment.
bool isByteValue(Attribute value, bool offset) {
  auto integer = dyn_cast<IntegerAttr>(value);
  if (!integer || !integer.getType().isInteger(64))
    return false;
  int64_t v = integer.getInt();
  return v >= 0 && (!offset || v % CLEAVE_RT_ALIGNMENT == 0);
}

LogicalResult checkOffset(Operation *op, StringRef name, Attribute value) {
  if (!isByteValue(value, /*offset=*/true))
    return op->emitOpError("expects '")
           << name << "' to be an i64 >= 0 and a multiple of "
           << CLEAVE_RT_ALIGNMENT << ", got " << value;
  return success();
}

/// Whether `op` is a parameter: a symbol without regions (graph.param).
bool isParameter(Operation *op) {
  return isa<SymbolOpInterface>(op) && op->getNumRegions() == 0;
}

/// The four sizes of a memory plan on a function.
LogicalResult checkPlanBytes(Operation *op, StringRef name, Attribute value) {
  if (!isa<FunctionOpInterface>(op))
    return op->emitOpError("expects '") << name << "' only on a function";
  if (!isByteValue(value, /*offset=*/false))
    return op->emitOpError("expects '")
           << name << "' to be an i64 >= 0, got " << value;
  // The regions nest: parameters < persistent (+ inputs) <= peak <= arena.
  auto bytes = [&](StringRef other) -> std::optional<int64_t> {
    auto attr = op->getAttrOfType<IntegerAttr>(other);
    if (!attr || !isByteValue(attr, /*offset=*/false))
      return std::nullopt;
    return attr.getInt();
  };
  auto atMost = [&](StringRef small, StringRef large) -> LogicalResult {
    std::optional<int64_t> s = bytes(small), l = bytes(large);
    if (s && l && *s > *l)
      return op->emitOpError("expects '")
             << small << "' (" << *s << ") to be at most '" << large << "' ("
             << *l << ")";
    return success();
  };
  if (name == kPersistentBytesAttr)
    return atMost(kParamBytesAttr, kPersistentBytesAttr);
  if (name == kPeakBytesAttr)
    return atMost(kPersistentBytesAttr, kPeakBytesAttr);
  if (name == kArenaBytesAttr)
    return success(succeeded(atMost(kPersistentBytesAttr, kArenaBytesAttr)) &&
                   succeeded(atMost(kPeakBytesAttr, kArenaBytesAttr)));
  return success();
}

} // namespace

LogicalResult CleaveDialect::verifyOperationAttribute(Operation *op,
                                                      NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  if (name == kOffsetAttr) {
    if (!isParameter(op))
      return op->emitOpError("expects '")
             << name << "' only on a parameter or a function argument";
    return checkOffset(op, name, value);
  }
  if (name == kOffsetsAttr) {
    auto offsets = dyn_cast<DenseI64ArrayAttr>(value);
    if (!offsets || offsets.size() != int64_t(op->getNumResults()))
      return op->emitOpError("expects '")
             << name << "' to be an array<i64> of " << op->getNumResults()
             << " offsets (one per result), got " << value;
    for (auto [i, offset] : llvm::enumerate(offsets.asArrayRef()))
      if (offset < 0 || offset % CLEAVE_RT_ALIGNMENT != 0)
        return op->emitOpError("expects the offset of result #")
               << i << " to be >= 0 and a multiple of " << CLEAVE_RT_ALIGNMENT
               << ", got " << offset;
    return success();
  }
  if (name == kParamBytesAttr || name == kPersistentBytesAttr ||
      name == kArenaBytesAttr || name == kPeakBytesAttr)
    return checkPlanBytes(op, name, value);
  if (name == kStoredTypeAttr) {
    if (!isParameter(op))
      return op->emitOpError("expects '") << name << "' only on a parameter";
    auto stored = dyn_cast<TypeAttr>(value);
    if (!stored || !isa<RankedTensorType>(stored.getValue()))
      return op->emitOpError("expects '")
             << name << "' to be a tensor type, got " << value;
    return success();
  }
  if (name == kRoleAttr) {
    if (!isParameter(op))
      return op->emitOpError("expects '") << name << "' only on a parameter";
    if (!isa<ParamRoleAttr>(value))
      return op->emitOpError("expects '")
             << name << "' to be a #cleave.role, got " << value;
    return success();
  }
  if (name == kTrainingConfigAttr) {
    if (!isa<FunctionOpInterface>(op))
      return op->emitOpError("expects '") << name << "' only on a function";
    auto config = dyn_cast<DictionaryAttr>(value);
    if (!config)
      return op->emitOpError("expects '")
             << name << "' to be a dictionary, got " << value;
    return verifyTrainingConfig(config, [&] {
      return op->emitOpError("has an invalid '") << name << "': ";
    });
  }
  if (name == kLossAttr) {
    if (!isa<FunctionOpInterface>(op))
      return op->emitOpError("expects '") << name << "' only on a function";
    auto config = dyn_cast<DictionaryAttr>(value);
    if (!config)
      return op->emitOpError("expects '")
             << name << "' to be a dictionary, got " << value;
    return verifyLossConfig(config, [&] {
      return op->emitOpError("has an invalid '") << name << "': ";
    });
  }
  if (name == kMicrobatchLossAttr) {
    if (!isa<UnitAttr>(value))
      return op->emitOpError("expects '")
             << name << "' to be a unit attribute, got " << value;
    // The seed of a backward pass: a float scalar.
    Type type = op->getNumResults() > 0 ? op->getResult(0).getType() : Type();
    auto tensor = dyn_cast_or_null<RankedTensorType>(type);
    if (!tensor || tensor.getRank() != 0 ||
        !isa<FloatType>(tensor.getElementType())) {
      InFlightDiagnostic diag =
          op->emitOpError("expects '")
          << name << "' on an op whose result #0 is a float scalar, got ";
      if (type)
        diag << type;
      else
        diag << "no result";
      return diag;
    }
    return success();
  }
  if (name == kSourceModelAttr) {
    auto path = dyn_cast<StringAttr>(value);
    if (!isa<ModuleOp>(op))
      return op->emitOpError("expects '") << name << "' only on a module";
    if (!path || !llvm::sys::path::is_absolute(path.getValue()))
      return op->emitOpError("expects '")
             << name << "' to be an absolute path, got " << value;
    return success();
  }
  if (name == kPrecisionAttr) {
    auto precision = dyn_cast<StringAttr>(value);
    if (!isa<ModuleOp>(op))
      return op->emitOpError("expects '") << name << "' only on a module";
    if (!precision ||
        (precision.getValue() != "bf16" && precision.getValue() != "f16"))
      return op->emitOpError("expects '")
             << name << "' to be \"bf16\" or \"f16\", got " << value;
    return success();
  }
  if (name == kEvalProgramAttr) {
    if (!isa<UnitAttr>(value))
      return op->emitOpError("expects '")
             << name << "' to be a unit attribute, got " << value;
    if (!isa<ModuleOp>(op) || !op->getParentOfType<ModuleOp>())
      return op->emitOpError("expects '")
             << name << "' only on a module nested in another";
    return success();
  }
  if (name == kKeepF32Attr) {
    if (!isa<UnitAttr>(value))
      return op->emitOpError("expects '")
             << name << "' to be a unit attribute, got " << value;
    return success();
  }
  return op->emitOpError("has unknown attribute '") << name << "'";
}

LogicalResult CleaveDialect::verifyRegionResultAttribute(Operation *op,
                                                         unsigned,
                                                         unsigned resultIndex,
                                                         NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name != kGradientAttr)
    return op->emitOpError("expects no '")
           << name << "' on result #" << resultIndex;
  auto param = dyn_cast<FlatSymbolRefAttr>(attr.getValue());
  if (!param)
    return op->emitOpError("expects '")
           << name << "' of result #" << resultIndex
           << " to be a parameter's symbol, got " << attr.getValue();
  Operation *target = SymbolTable::lookupNearestSymbolFrom(op, param);
  if (!target || !isParameter(target))
    return op->emitOpError("expects '")
           << name << "' of result #" << resultIndex
           << " to name a parameter, got " << param;
  return success();
}

LogicalResult CleaveDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                      unsigned argIndex,
                                                      NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name != kOffsetAttr)
    return op->emitOpError("expects no '")
           << name << "' on argument #" << argIndex;
  if (!isByteValue(attr.getValue(), /*offset=*/true))
    return op->emitOpError("expects '")
           << name << "' of argument #" << argIndex
           << " to be an i64 >= 0 and a multiple of " << CLEAVE_RT_ALIGNMENT
           << ", got " << attr.getValue();
  return success();
}
