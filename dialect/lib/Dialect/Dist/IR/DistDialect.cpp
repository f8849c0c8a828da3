//===- DistDialect.cpp - dist dialect and sharding attribute ------------===//
//
// Registration, the `#dist.sharding` attribute's syntax and checks (axes,
// sub-axes, open dimensions, priority and origin), and the verification of
// shardings on function arguments and results and on op results.
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

#include "cleave/Dialect/Dist/IR/DistEnums.cpp.inc"

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
// AxisRef and SubAxisAttr
//===----------------------------------------------------------------------===//

bool AxisRef::overlaps(const AxisRef &other) const {
  if (name != other.name)
    return false;
  if (!isSubAxis() || !other.isSubAxis())
    return true;
  // Sub-axes cover the multiplicative ranges [preSize, preSize * size).
  return preSize < other.preSize * other.size && other.preSize < preSize * size;
}

std::string AxisRef::str() const {
  std::string s = ("\"" + name + "\"").str();
  if (isSubAxis())
    s += (":(" + Twine(preSize) + ")" + Twine(size)).str();
  return s;
}

LogicalResult SubAxisAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  StringAttr name, int64_t preSize,
                                  int64_t size) {
  if (!name || name.getValue().empty())
    return emitError() << "sub-axis needs an axis name";
  if (preSize < 1 || size < 2)
    return emitError() << "sub-axis \"" << name.getValue()
                       << "\" needs pre-size >= 1 and size >= 2, got ("
                       << preSize << ")" << size;
  return success();
}

/// The axis an element of a sharding's axis list refers to, or failure
/// when it is neither a string nor a #dist.sub_axis.
static FailureOr<AxisRef> toAxisRef(Attribute a) {
  if (auto name = dyn_cast<StringAttr>(a))
    return AxisRef{name.getValue(), 1, 0};
  if (auto sub = dyn_cast<SubAxisAttr>(a))
    return AxisRef{sub.getName().getValue(), sub.getPreSize(), sub.getSize()};
  return failure();
}

static SmallVector<AxisRef> toAxisRefs(ArrayAttr axes) {
  SmallVector<AxisRef> refs;
  for (Attribute a : axes)
    refs.push_back(*toAxisRef(a));
  return refs;
}

//===----------------------------------------------------------------------===//
// ShardingAttr
//===----------------------------------------------------------------------===//

/// Parses `"a"` or `"a":(pre)size`.
static ParseResult parseAxis(AsmParser &parser, Attribute &axis) {
  std::string name;
  if (parser.parseString(&name))
    return failure();
  MLIRContext *ctx = parser.getContext();
  auto nameAttr = StringAttr::get(ctx, name);
  if (failed(parser.parseOptionalColon())) {
    axis = nameAttr;
    return success();
  }
  int64_t preSize, size;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLParen() || parser.parseInteger(preSize) ||
      parser.parseRParen() || parser.parseInteger(size))
    return failure();
  axis = SubAxisAttr::getChecked([&]() { return parser.emitError(loc); }, ctx,
                                 nameAttr, preSize, size);
  return success(static_cast<bool>(axis));
}

/// Parses `{"a", "b":(1)2}`, and with `open` set `{"a", ?}` (the `?` last).
static ParseResult parseAxisList(AsmParser &parser,
                                 SmallVectorImpl<Attribute> &axes,
                                 bool *open = nullptr) {
  return parser.parseCommaSeparatedList(
      AsmParser::Delimiter::Braces, [&]() -> ParseResult {
        SMLoc loc = parser.getCurrentLocation();
        if (open && succeeded(parser.parseOptionalQuestion())) {
          if (*open)
            return parser.emitError(loc, "'?' appears twice in a dimension");
          *open = true;
          return success();
        }
        if (open && *open)
          return parser.emitError(loc, "'?' must end a dimension's axes");
        Attribute axis;
        if (parseAxis(parser, axis))
          return failure();
        axes.push_back(axis);
        return success();
      });
}

static void printAxisList(AsmPrinter &printer, ArrayAttr axes,
                          bool open = false) {
  printer << "{";
  llvm::interleaveComma(axes, printer,
                        [&](Attribute a) { printer << toAxisRef(a)->str(); });
  if (open)
    printer << (axes.empty() ? "?" : ", ?");
  printer << "}";
}

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  SymbolRefAttr mesh;
  SmallVector<Attribute> dims;
  SmallVector<Attribute> partial;
  SmallVector<int64_t> openDims;
  ReductionKind kind = ReductionKind::Sum;
  ShardingPriority priority = ShardingPriority::User;
  StringAttr origin;
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
            bool open = false;
            if (parseAxisList(parser, axes, &open))
              return failure();
            if (open)
              openDims.push_back(dims.size());
            dims.push_back(ArrayAttr::get(ctx, axes));
            return success();
          }))
    return {};
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc loc = parser.getCurrentLocation();
    std::string word;
    if (parser.parseKeywordOrString(&word))
      return {};
    if (word == "partial") {
      std::string kindName;
      SMLoc kindLoc = parser.getCurrentLocation();
      if (parser.parseKeywordOrString(&kindName))
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
    } else if (word == "priority") {
      std::string name;
      SMLoc nameLoc = parser.getCurrentLocation();
      if (parser.parseKeywordOrString(&name))
        return {};
      auto parsed = symbolizeShardingPriority(name);
      if (!parsed) {
        parser.emitError(nameLoc, "unknown sharding priority '")
            << name << "', expected user, strategy or propagated";
        return {};
      }
      priority = *parsed;
    } else if (word == "origin") {
      std::string text;
      if (parser.parseString(&text))
        return {};
      origin = StringAttr::get(ctx, text);
    } else {
      parser.emitError(loc, "expected 'partial', 'priority' or 'origin', got '")
          << word << "'";
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ShardingAttr>(
      ctx, flatMesh, ArrayAttr::get(ctx, dims), ArrayAttr::get(ctx, partial),
      kind, openDims, priority, origin);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<" << getMesh() << ", [";
  llvm::interleaveComma(llvm::enumerate(getDims()), printer, [&](auto it) {
    printAxisList(printer, cast<ArrayAttr>(it.value()), isOpen(it.index()));
  });
  printer << "]";
  if (!getPartialAxes().empty()) {
    printer << ", partial " << stringifyReductionKind(getPartialKind()) << " ";
    printAxisList(printer, getPartialAxes());
  }
  if (getPriority() != ShardingPriority::User)
    printer << ", priority " << stringifyShardingPriority(getPriority());
  if (getOrigin())
    printer << ", origin \"" << getOrigin().getValue() << "\"";
  printer << ">";
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh, ArrayAttr dims,
                                   ArrayAttr partialAxes, ReductionKind,
                                   ArrayRef<int64_t> openDims, ShardingPriority,
                                   StringAttr) {
  if (!mesh)
    return emitError() << "sharding needs a mesh";
  SmallVector<AxisRef> seen;
  auto check = [&](Attribute a) -> LogicalResult {
    FailureOr<AxisRef> axis = toAxisRef(a);
    if (failed(axis))
      return emitError() << "sharding axes must be strings or sub-axes, got "
                         << a;
    for (const AxisRef &other : seen)
      if (axis->overlaps(other)) {
        if (*axis == other || !axis->isSubAxis() || !other.isSubAxis())
          return emitError() << "sharding uses mesh axis \"" << axis->name
                             << "\" more than once";
        return emitError() << "sharding uses overlapping parts " << other.str()
                           << " and " << axis->str() << " of mesh axis \""
                           << axis->name << "\"";
      }
    seen.push_back(*axis);
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
  for (auto [i, d] : llvm::enumerate(openDims))
    if (d < 0 || d >= static_cast<int64_t>(dims.size()) ||
        (i > 0 && openDims[i - 1] >= d))
      return emitError() << "open dimensions must be increasing indices "
                            "below the rank "
                         << dims.size();
  return success();
}

SmallVector<StringRef> ShardingAttr::getAxes(int64_t dim) const {
  SmallVector<StringRef> axes;
  for (const AxisRef &axis : getAxisRefs(dim))
    axes.push_back(axis.name);
  return axes;
}

SmallVector<AxisRef> ShardingAttr::getAxisRefs(int64_t dim) const {
  return toAxisRefs(cast<ArrayAttr>(getDims()[dim]));
}

SmallVector<AxisRef> ShardingAttr::getPartialAxisRefs() const {
  return toAxisRefs(getPartialAxes());
}

bool ShardingAttr::isOpen(int64_t dim) const {
  return llvm::is_contained(getOpenDims(), dim);
}

bool ShardingAttr::isFullyReplicated() const {
  if (!getPartialAxes().empty())
    return false;
  return llvm::all_of(getDims(), [](Attribute d) {
    return cast<ArrayAttr>(d).empty();
  });
}

ShardingAttr ShardingAttr::withOrigin(ShardingPriority priority,
                                      StringAttr origin) const {
  return ShardingAttr::get(getContext(), getMesh(), getDims(), getPartialAxes(),
                           getPartialKind(), getOpenDims(), priority, origin);
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
  // One device's program: the type is the block, the check is of the
  // global value it is a block of (the axes must exist to tell its size).
  if (op->hasAttr(DistDialect::getPartitionedAttrName()))
    if (auto local = dyn_cast<RankedTensorType>(type))
      if (auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(
              op, sharding.getMesh()))
        if (int64_t(sharding.getDims().size()) == local.getRank() &&
            llvm::all_of(llvm::seq<int64_t>(0, local.getRank()),
                         [&](int64_t d) {
                           return llvm::all_of(
                               sharding.getAxes(d), [&](StringRef axis) {
                                 return mesh.getAxisSize(axis).has_value();
                               });
                         }))
          type = getGlobalType(sharding, local, mesh);
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

//===----------------------------------------------------------------------===//
// Shardings of op results
//===----------------------------------------------------------------------===//

LogicalResult DistDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() == getPartitionedAttrName()) {
    if (!isa<FunctionOpInterface>(op))
      return op->emitOpError("'")
             << getPartitionedAttrName() << "' belongs on a function";
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError("'")
             << getPartitionedAttrName() << "' is a unit attribute, got "
             << attr.getValue();
    return success();
  }
  if (attr.getName() == getStageAttrName() ||
      attr.getName() == getStageAxisAttrName()) {
    auto index = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !index || index.getInt() < 0)
      return op->emitOpError("'")
             << attr.getName().getValue()
             << "' is an index >= 0 on a pipeline stage's module";
    return success();
  }
  if (attr.getName() == getGroupsAttrName()) {
    auto groups = dyn_cast<ArrayAttr>(attr.getValue());
    bool ok = groups && isa<ModuleOp>(op);
    for (Attribute g : ok ? groups.getValue() : ArrayRef<Attribute>{}) {
      auto axes = dyn_cast<ArrayAttr>(g);
      ok = ok && axes && !axes.empty() &&
           llvm::all_of(axes, [](Attribute a) { return isa<StringAttr>(a); });
    }
    if (!ok)
      return op->emitOpError("'")
             << getGroupsAttrName()
             << "' is a list of mesh axis name lists on a module";
    return success();
  }
  if (attr.getName() == getRingAttrName()) {
    StringRef name = op->getName().getStringRef();
    if (name != "graph.attention" && name != "graph.attention_grad")
      return op->emitOpError("'")
             << getRingAttrName()
             << "' belongs on a graph.attention or graph.attention_grad";
    auto layout = dyn_cast<StringAttr>(attr.getValue());
    if (!layout || (layout.getValue() != "contiguous" &&
                    layout.getValue() != "zigzag"))
      return op->emitOpError("'")
             << getRingAttrName()
             << "' is the sequence's layout over the ring, \"contiguous\" "
                "(device r holds chunk r) or \"zigzag\" (chunks r and "
                "2n - 1 - r of 2n), got "
             << attr.getValue();
    return success();
  }
  if (attr.getName() != getShardingAttrName())
    return op->emitOpError("unknown dist attribute '")
           << attr.getName().getValue() << "'";
  if (isa<FunctionOpInterface>(op))
    return op->emitOpError("'")
           << getShardingAttrName()
           << "' belongs on a function's arguments and results, not on the "
              "function";
  unsigned n = op->getNumResults();
  SmallVector<ShardingAttr> shardings;
  if (auto single = dyn_cast<ShardingAttr>(attr.getValue())) {
    shardings.push_back(single);
  } else if (auto list = dyn_cast<ArrayAttr>(attr.getValue())) {
    for (Attribute a : list) {
      auto s = dyn_cast<ShardingAttr>(a);
      if (!s)
        return op->emitOpError("'")
               << getShardingAttrName()
               << "' must list #dist.sharding attributes, got " << a;
      shardings.push_back(s);
    }
  } else {
    return op->emitOpError("'")
           << getShardingAttrName()
           << "' must be a #dist.sharding or an array of them, got "
           << attr.getValue();
  }
  if (shardings.size() != n)
    return op->emitOpError("has ")
           << n << (n == 1 ? " result" : " results") << " but '"
           << getShardingAttrName() << "' lists " << shardings.size()
           << (shardings.size() == 1 ? " sharding" : " shardings");
  for (auto [i, s] : llvm::enumerate(shardings)) {
    std::string name = ("result #" + Twine(i)).str();
    if (failed(verifyShardingAt(
            op, s, op->getResult(i).getType(),
            [&]() { return op->emitOpError(); }, name)))
      return failure();
  }
  return success();
}

ShardingAttr cleave::dist::getResultSharding(Operation *op, unsigned i) {
  Attribute attr = op->getAttr(DistDialect::getShardingAttrName());
  if (auto single = dyn_cast_or_null<ShardingAttr>(attr))
    return i == 0 ? single : ShardingAttr();
  if (auto list = dyn_cast_or_null<ArrayAttr>(attr))
    return i < list.size() ? dyn_cast<ShardingAttr>(list[i]) : ShardingAttr();
  return {};
}

void cleave::dist::setResultShardings(Operation *op,
                                      ArrayRef<ShardingAttr> shardings) {
  if (shardings.size() == 1) {
    op->setAttr(DistDialect::getShardingAttrName(), shardings.front());
    return;
  }
  SmallVector<Attribute> attrs(shardings.begin(), shardings.end());
  op->setAttr(DistDialect::getShardingAttrName(),
              ArrayAttr::get(op->getContext(), attrs));
}
