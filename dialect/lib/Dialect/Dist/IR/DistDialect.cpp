//===- DistDialect.cpp - dist dialect and sharding attribute ------------===//
//
// Registration, the `#dist.sharding` attribute's syntax and checks, and the
// verification of shardings on function arguments and results.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Dist/IR/DistDialect.h"
#include "cleave/Dialect/Dist/IR/DistOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace cleave;
using namespace cleave::dist;

#include "cleave/Dialect/Dist/IR/DistDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "cleave/Dialect/Dist/IR/DistAttrs.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "cleave/Dialect/Dist/IR/DistOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "cleave/Dialect/Dist/IR/DistAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ShardingAttr
//===----------------------------------------------------------------------===//

/// Parses `{"a", "b"}` into string attributes.
static ParseResult parseAxisList(AsmParser &parser,
                                 SmallVectorImpl<Attribute> &axes) {
  return parser.parseCommaSeparatedList(
      AsmParser::Delimiter::Braces, [&]() -> ParseResult {
        std::string axis;
        if (parser.parseString(&axis))
          return failure();
        axes.push_back(parser.getBuilder().getStringAttr(axis));
        return success();
      });
}

static void printAxisList(AsmPrinter &printer, ArrayAttr axes) {
  printer << "{";
  llvm::interleaveComma(axes, printer, [&](Attribute a) {
    printer << '"' << cast<StringAttr>(a).getValue() << '"';
  });
  printer << "}";
}

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  SymbolRefAttr mesh;
  SmallVector<Attribute> dims;
  SmallVector<Attribute> partial;
  ReductionKind kind = ReductionKind::Sum;
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma())
    return {};
  auto flatMesh = dyn_cast<FlatSymbolRefAttr>(mesh);
  if (!flatMesh) {
    parser.emitError(parser.getNameLoc(), "expects a flat mesh symbol");
    return {};
  }
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            SmallVector<Attribute> axes;
            if (parseAxisList(parser, axes))
              return failure();
            dims.push_back(ArrayAttr::get(ctx, axes));
            return success();
          }))
    return {};
  if (succeeded(parser.parseOptionalComma())) {
    std::string kindName;
    SMLoc kindLoc;
    if (parser.parseKeyword("partial") ||
        (kindLoc = parser.getCurrentLocation(),
         parser.parseKeywordOrString(&kindName)))
      return {};
    auto parsedKind = symbolizeReductionKind(kindName);
    if (!parsedKind) {
      parser.emitError(kindLoc, "unknown reduction kind '")
          << kindName << "', expected sum, mean, max or min";
      return {};
    }
    kind = *parsedKind;
    if (parseAxisList(parser, partial))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ShardingAttr>(ctx, flatMesh,
                                         ArrayAttr::get(ctx, dims),
                                         ArrayAttr::get(ctx, partial), kind);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<" << getMesh() << ", [";
  llvm::interleaveComma(getDims(), printer, [&](Attribute d) {
    printAxisList(printer, cast<ArrayAttr>(d));
  });
  printer << "]";
  if (!getPartialAxes().empty()) {
    printer << ", partial " << stringifyReductionKind(getPartialKind()) << " ";
    printAxisList(printer, getPartialAxes());
  }
  printer << ">";
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh, ArrayAttr dims,
                                   ArrayAttr partialAxes, ReductionKind) {
  if (!mesh)
    return emitError() << "sharding needs a mesh";
  llvm::StringSet<> seen;
  auto check = [&](Attribute a) -> LogicalResult {
    auto axis = dyn_cast<StringAttr>(a);
    if (!axis)
      return emitError() << "sharding axes must be strings, got " << a;
    if (!seen.insert(axis.getValue()).second)
      return emitError() << "sharding uses mesh axis \"" << axis.getValue()
                         << "\" more than once";
    return success();
  };
  for (Attribute d : dims) {
    auto axes = dyn_cast<ArrayAttr>(d);
    if (!axes)
      return emitError() << "sharding dimensions must be axis lists, got "
                         << d;
    for (Attribute a : axes)
      if (failed(check(a)))
        return failure();
  }
  for (Attribute a : partialAxes)
    if (failed(check(a)))
      return failure();
  return success();
}

SmallVector<StringRef> ShardingAttr::getAxes(int64_t dim) const {
  SmallVector<StringRef> axes;
  for (Attribute a : cast<ArrayAttr>(getDims()[dim]))
    axes.push_back(cast<StringAttr>(a).getValue());
  return axes;
}

bool ShardingAttr::isFullyReplicated() const {
  if (!getPartialAxes().empty())
    return false;
  return llvm::all_of(getDims(), [](Attribute d) {
    return cast<ArrayAttr>(d).empty();
  });
}

//===----------------------------------------------------------------------===//
// Shardings on function arguments and results
//===----------------------------------------------------------------------===//

static LogicalResult verifyFunctionSharding(Operation *op, NamedAttribute attr,
                                            Type type, StringRef what,
                                            unsigned index) {
  std::string valueName = (what + " #" + Twine(index)).str();
  if (attr.getName() != DistDialect::getShardingAttrName())
    return op->emitOpError("unknown dist attribute '")
           << attr.getName().getValue() << "' on " << valueName;
  auto sharding = dyn_cast<ShardingAttr>(attr.getValue());
  if (!sharding)
    return op->emitOpError("'")
           << DistDialect::getShardingAttrName() << "' of " << valueName
           << " must be a #dist.sharding, got " << attr.getValue();
  return verifyShardingAt(
      op, sharding, type, [&]() { return op->emitOpError(); }, valueName);
}

LogicalResult DistDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  Type type;
  if (auto fn = dyn_cast<FunctionOpInterface>(op))
    type = fn.getArgumentTypes()[argIndex];
  else
    type = op->getRegion(regionIndex).getArgument(argIndex).getType();
  return verifyFunctionSharding(op, attr, type, "argument", argIndex);
}

LogicalResult DistDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn)
    return op->emitOpError("result shardings are only allowed on functions");
  return verifyFunctionSharding(op, attr, fn.getResultTypes()[resultIndex],
                                "result", resultIndex);
}
