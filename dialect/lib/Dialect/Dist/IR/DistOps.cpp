//===- DistOps.cpp - dist dialect ops -----------------------------------===//
//
// Mesh syntax and checks, sharding verification against a mesh, and the
// type rules of the collectives (which depend on the device group size, so
// they run with the symbol uses once the mesh is known).
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Dist/IR/DistOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace cleave;
using namespace cleave::dist;

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

ParseResult MeshOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  SmallVector<Attribute> axisNames;
  SmallVector<int64_t> axisSizes;
  if (parser.parseSymbolName(name))
    return failure();
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            std::string axis;
            int64_t size;
            if (parser.parseString(&axis) || parser.parseEqual() ||
                parser.parseInteger(size))
              return failure();
            axisNames.push_back(parser.getBuilder().getStringAttr(axis));
            axisSizes.push_back(size);
            return success();
          }))
    return failure();
  if (parser.parseOptionalAttrDict(result.attributes))
    return failure();
  Builder &b = parser.getBuilder();
  result.addAttribute(getSymNameAttrName(result.name), name);
  result.addAttribute(getAxisNamesAttrName(result.name),
                      b.getArrayAttr(axisNames));
  result.addAttribute(getAxisSizesAttrName(result.name),
                      b.getDenseI64ArrayAttr(axisSizes));
  return success();
}

void MeshOp::print(OpAsmPrinter &p) {
  p << " ";
  p.printSymbolName(getSymName());
  p << " [";
  llvm::interleaveComma(llvm::zip(getAxisNames(), getAxisSizes()), p,
                        [&](auto it) {
                          p << '"' << cast<StringAttr>(std::get<0>(it)).getValue()
                            << "\" = " << std::get<1>(it);
                        });
  p << "]";
  p.printOptionalAttrDict((*this)->getAttrs(),
                          {getSymNameAttrName(), getAxisNamesAttrName(),
                           getAxisSizesAttrName()});
}

LogicalResult MeshOp::verify() {
  ArrayAttr names = getAxisNames();
  ArrayRef<int64_t> sizes = getAxisSizes();
  if (names.empty())
    return emitOpError("expects at least one axis");
  if (names.size() != sizes.size())
    return emitOpError("has ") << names.size() << " axis names but "
                               << sizes.size() << " sizes";
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip(names, sizes)) {
    StringRef axis = cast<StringAttr>(name).getValue();
    if (axis.empty())
      return emitOpError("axis names must not be empty");
    if (!seen.insert(axis).second)
      return emitOpError("axis \"") << axis << "\" is declared twice";
    if (size < 1)
      return emitOpError("axis \"") << axis << "\" must have size >= 1, got "
                                    << size;
  }
  llvm::StringSet<> zigzag;
  for (Attribute name : getZigzagAxes() ? getZigzagAxes()->getValue()
                                        : ArrayRef<Attribute>{}) {
    StringRef axis = cast<StringAttr>(name).getValue();
    if (!seen.contains(axis))
      return emitOpError("zigzag axis \"") << axis << "\" is not an axis of "
                                           << "the mesh";
    if (!zigzag.insert(axis).second)
      return emitOpError("zigzag axis \"") << axis << "\" is named twice";
  }
  return success();
}

bool MeshOp::isZigzag(StringRef axis) {
  return getZigzagAxes() &&
         llvm::is_contained(getZigzagAxes()->getAsValueRange<StringAttr>(),
                            axis);
}

std::optional<int64_t> MeshOp::getAxisSize(StringRef axis) {
  for (auto [name, size] : llvm::zip(getAxisNames(), getAxisSizes()))
    if (cast<StringAttr>(name).getValue() == axis)
      return size;
  return std::nullopt;
}

int64_t MeshOp::getNumDevices() {
  int64_t n = 1;
  for (int64_t s : getAxisSizes())
    n *= s;
  return n;
}

//===----------------------------------------------------------------------===//
// Sharding verification
//===----------------------------------------------------------------------===//

LogicalResult cleave::dist::verifyReductionType(
    ReductionKind kind, Type elementType,
    function_ref<InFlightDiagnostic()> emitError) {
  if (kind == ReductionKind::Mean && !isa<FloatType>(elementType))
    return emitError() << "a mean needs a float element type, got "
                       << elementType;
  if (kind == ReductionKind::Sum && elementType.isInteger(1))
    return emitError() << "a sum of i1 values is not defined (use max or "
                          "min for or and and)";
  return success();
}

LogicalResult cleave::dist::verifySharding(
    ShardingAttr sharding, Type type, MeshOp mesh,
    function_ref<InFlightDiagnostic()> emitError, StringRef valueName) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return emitError() << "sharding of " << valueName
                       << " needs a ranked tensor, got " << type;
  if (static_cast<int64_t>(sharding.getDims().size()) != tensor.getRank())
    return emitError() << "sharding of " << valueName << " lists "
                       << sharding.getDims().size()
                       << (sharding.getDims().size() == 1 ? " dimension"
                                                          : " dimensions")
                       << " but " << tensor << " has rank "
                       << tensor.getRank();
  auto axisSize = [&](const AxisRef &axis) -> FailureOr<int64_t> {
    std::optional<int64_t> size = mesh.getAxisSize(axis.name);
    if (!size)
      return emitError() << "sharding of " << valueName << " uses axis \""
                         << axis.name << "\" that mesh @" << mesh.getSymName()
                         << " does not have";
    if (axis.isSubAxis() && *size % (axis.preSize * axis.size) != 0)
      return emitError() << "sharding of " << valueName << " uses sub-axis "
                         << axis.str() << ", but " << axis.preSize << " x "
                         << axis.size << " does not divide the size " << *size
                         << " of mesh axis \"" << axis.name << "\"";
    return axis.getSize(*size);
  };
  for (int64_t d = 0; d < tensor.getRank(); ++d) {
    int64_t devices = 1;
    std::string desc;
    for (const AxisRef &axis : sharding.getAxisRefs(d)) {
      FailureOr<int64_t> size = axisSize(axis);
      if (failed(size))
        return failure();
      devices *= *size;
      desc += (desc.empty() ? "" : " x ") +
              (axis.str() + " (" + Twine(*size) + ")").str();
    }
    if (tensor.getDimSize(d) % devices != 0)
      return emitError() << "cannot shard dimension " << d << " of "
                         << valueName << " (size " << tensor.getDimSize(d)
                         << ") over mesh axis " << desc
                         << ": the size is not divisible by " << devices;
  }
  for (const AxisRef &axis : sharding.getPartialAxisRefs())
    if (failed(axisSize(axis)))
      return failure();
  if (sharding.isPartial() &&
      failed(verifyReductionType(
          sharding.getPartialKind(), tensor.getElementType(), [&]() {
            return emitError() << "partial sharding of " << valueName << ": ";
          })))
    return failure();
  return success();
}

RankedTensorType
cleave::dist::getLocalType(ShardingAttr sharding, RankedTensorType type,
                           MeshOp mesh, function_ref<bool(StringRef)> select) {
  SmallVector<int64_t> shape = llvm::to_vector(type.getShape());
  for (int64_t d = 0; d < type.getRank(); ++d)
    for (const AxisRef &axis : sharding.getAxisRefs(d))
      if (!select || select(axis.name))
        shape[d] /= axis.getSize(mesh.getAxisSize(axis.name).value_or(1));
  return type.clone(shape);
}

RankedTensorType cleave::dist::getGlobalType(ShardingAttr sharding,
                                            RankedTensorType local,
                                            MeshOp mesh) {
  SmallVector<int64_t> shape = llvm::to_vector(local.getShape());
  for (int64_t d = 0; d < local.getRank(); ++d)
    for (const AxisRef &axis : sharding.getAxisRefs(d))
      shape[d] *= axis.getSize(mesh.getAxisSize(axis.name).value_or(1));
  return local.clone(shape);
}

LogicalResult cleave::dist::verifyShardingAt(
    Operation *from, ShardingAttr sharding, Type type,
    function_ref<InFlightDiagnostic()> emitError, StringRef valueName) {
  auto mesh =
      SymbolTable::lookupNearestSymbolFrom<MeshOp>(from, sharding.getMesh());
  if (!mesh)
    return emitError() << "sharding of " << valueName << " names "
                       << sharding.getMesh() << ", which is not a dist.mesh";
  return verifySharding(sharding, type, mesh, emitError, valueName);
}

//===----------------------------------------------------------------------===//
// ShardOp
//===----------------------------------------------------------------------===//

LogicalResult ShardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(
      *this, getSharding().getMesh());
  if (!mesh)
    return emitOpError("sharding names ")
           << getSharding().getMesh() << ", which is not a dist.mesh";
  return verifySharding(
      getSharding(), getType(), mesh, [&]() { return emitOpError(); },
      "the result");
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// Resolves the mesh and axes of a collective into its device group size.
static FailureOr<int64_t> getGroupSize(Operation *op,
                                       SymbolTableCollection &symbolTable,
                                       FlatSymbolRefAttr meshRef,
                                       ArrayAttr axes) {
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(op, meshRef);
  if (!mesh)
    return op->emitOpError("'")
           << meshRef << "' does not name a dist.mesh";
  if (axes.empty())
    return op->emitOpError("expects at least one mesh axis");
  llvm::StringSet<> seen;
  int64_t n = 1;
  for (Attribute a : axes) {
    StringRef axis = cast<StringAttr>(a).getValue();
    std::optional<int64_t> size = mesh.getAxisSize(axis);
    if (!size)
      return op->emitOpError("mesh @")
             << mesh.getSymName() << " has no axis \"" << axis << "\"";
    if (!seen.insert(axis).second)
      return op->emitOpError("axis \"") << axis << "\" is listed twice";
    n *= *size;
  }
  return n;
}

#define DIST_COLLECTIVE_SYMBOL_USES(OP)                                        \
  LogicalResult OP::verifySymbolUses(SymbolTableCollection &symbolTable) {     \
    FailureOr<int64_t> n =                                                     \
        getGroupSize(*this, symbolTable, getMeshAttr(), getAxes());            \
    if (failed(n))                                                             \
      return failure();                                                        \
    return verifyGroupSize(*n);                                                \
  }
DIST_COLLECTIVE_SYMBOL_USES(AllReduceOp)
DIST_COLLECTIVE_SYMBOL_USES(AllReduceBucketOp)
DIST_COLLECTIVE_SYMBOL_USES(AllGatherOp)
DIST_COLLECTIVE_SYMBOL_USES(ReduceScatterOp)
DIST_COLLECTIVE_SYMBOL_USES(AllToAllOp)
DIST_COLLECTIVE_SYMBOL_USES(CollectivePermuteOp)
DIST_COLLECTIVE_SYMBOL_USES(BroadcastOp)
DIST_COLLECTIVE_SYMBOL_USES(SendOp)
DIST_COLLECTIVE_SYMBOL_USES(RecvOp)
DIST_COLLECTIVE_SYMBOL_USES(SendRecvOp)
#undef DIST_COLLECTIVE_SYMBOL_USES

/// Checks a result type that equals the input's except at `dims`, where the
/// given sizes are expected.
static LogicalResult
verifyResizedResult(Operation *op, RankedTensorType in, RankedTensorType out,
                    ArrayRef<std::pair<int64_t, int64_t>> expectedAt) {
  SmallVector<int64_t> expected = llvm::to_vector(in.getShape());
  for (auto [dim, size] : expectedAt)
    expected[dim] = size;
  auto expectedType = RankedTensorType::get(expected, in.getElementType());
  if (out != expectedType)
    return op->emitOpError("expects result type ")
           << expectedType << ", got " << out;
  return success();
}

static LogicalResult checkCollectiveDim(Operation *op, StringRef what,
                                        int64_t dim, RankedTensorType type) {
  if (dim < 0 || dim >= type.getRank())
    return op->emitOpError(what) << " " << dim << " is out of range for "
                                 << type;
  return success();
}

static LogicalResult checkDivisible(Operation *op, RankedTensorType type,
                                    int64_t dim, int64_t n) {
  if (type.getDimSize(dim) % n != 0)
    return op->emitOpError("dimension ")
           << dim << " of " << type << " (size " << type.getDimSize(dim)
           << ") is not divisible by the group size " << n;
  return success();
}

/// Checks a group index (root, source, target, permutation entry).
static LogicalResult checkGroupIndex(Operation *op, StringRef what,
                                     int64_t index, int64_t n) {
  if (index < 0 || index >= n)
    return op->emitOpError(what) << " " << index
                                 << " is outside the group of " << n;
  return success();
}

/// A started (`async`) collective's result is read only by its wait.
static LogicalResult verifyAsync(Operation *op, bool async) {
  if (!async)
    return success();
  Value result = op->getResult(0);
  if (!result.hasOneUse() || !isa<WaitOp>(*result.getUsers().begin()))
    return op->emitOpError("is async: its result must have one use, a "
                           "dist.wait");
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (failed(verifyAsync(*this, getAsync())))
    return failure();
  return verifyReductionType(getKind(), getType().getElementType(),
                             [&]() { return emitOpError(); });
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyAsync(*this, getAsync())))
    return failure();
  return verifyReductionType(getKind(), getType().getElementType(),
                             [&]() { return emitOpError(); });
}

LogicalResult AllGatherOp::verify() { return verifyAsync(*this, getAsync()); }

LogicalResult AllReduceBucketOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  if (getAsync())
    for (Value r : getResults())
      if (!r.hasOneUse() || !isa<WaitOp>(*r.getUsers().begin()))
        return emitOpError("is async: each result must have one use, a "
                           "dist.wait");
  if (getInputs().getTypes() != getResults().getTypes())
    return emitOpError("results must have the inputs' types");
  Type elem = cast<RankedTensorType>(getInputs()[0].getType()).getElementType();
  for (Value v : getInputs())
    if (cast<RankedTensorType>(v.getType()).getElementType() != elem)
      return emitOpError("inputs must share one element type, got ")
             << elem << " and "
             << cast<RankedTensorType>(v.getType()).getElementType();
  return verifyReductionType(getKind(), elem, [&]() { return emitOpError(); });
}

LogicalResult AllReduceBucketOp::verifyGroupSize(int64_t) { return success(); }

LogicalResult AllToAllOp::verify() { return verifyAsync(*this, getAsync()); }

LogicalResult WaitOp::verify() {
  Operation *start = getInput().getDefiningOp();
  bool started =
      start && llvm::TypeSwitch<Operation *, bool>(start)
                   .Case<AllReduceOp, AllReduceBucketOp, AllGatherOp,
                         ReduceScatterOp, AllToAllOp, CollectivePermuteOp,
                         RecvOp>([](auto c) { return c.getAsync(); })
                   .Default([](Operation *) { return false; });
  if (!started)
    return emitOpError("waits for a value that no async collective started");
  return success();
}

LogicalResult AllReduceOp::verifyGroupSize(int64_t) { return success(); }

LogicalResult AllGatherOp::verifyGroupSize(int64_t n) {
  RankedTensorType in = getInput().getType();
  int64_t dim = getDim();
  if (failed(checkCollectiveDim(*this, "dim", dim, in)))
    return failure();
  return verifyResizedResult(*this, in, getType(),
                             {{dim, in.getDimSize(dim) * n}});
}

LogicalResult ReduceScatterOp::verifyGroupSize(int64_t n) {
  RankedTensorType in = getInput().getType();
  int64_t dim = getDim();
  if (failed(checkCollectiveDim(*this, "dim", dim, in)) ||
      failed(checkDivisible(*this, in, dim, n)))
    return failure();
  return verifyResizedResult(*this, in, getType(),
                             {{dim, in.getDimSize(dim) / n}});
}

LogicalResult AllToAllOp::verifyGroupSize(int64_t n) {
  RankedTensorType in = getInput().getType();
  int64_t split = getSplitDim(), concat = getConcatDim();
  if (failed(checkCollectiveDim(*this, "split dim", split, in)) ||
      failed(checkCollectiveDim(*this, "concat dim", concat, in)) ||
      failed(checkDivisible(*this, in, split, n)))
    return failure();
  if (split == concat)
    return verifyResizedResult(*this, in, getType(), {});
  return verifyResizedResult(*this, in, getType(),
                             {{split, in.getDimSize(split) / n},
                              {concat, in.getDimSize(concat) * n}});
}

LogicalResult CollectivePermuteOp::verify() {
  if (failed(verifyAsync(*this, getAsync())))
    return failure();
  if (getFlatPairs().size() % 2 != 0)
    return emitOpError("expects source-target pairs, got ")
           << getFlatPairs().size() << " indices";
  llvm::SmallSet<int64_t, 8> sources, targets;
  for (auto [source, target] : getPairs()) {
    if (!sources.insert(source).second)
      return emitOpError("group index ") << source << " is a source twice";
    if (!targets.insert(target).second)
      return emitOpError("group index ") << target << " is a target twice";
  }
  return success();
}

LogicalResult CollectivePermuteOp::verifyGroupSize(int64_t n) {
  for (auto [source, target] : getPairs())
    if (failed(checkGroupIndex(*this, "source", source, n)) ||
        failed(checkGroupIndex(*this, "target", target, n)))
      return failure();
  return success();
}

SmallVector<std::pair<int64_t, int64_t>> CollectivePermuteOp::getPairs() {
  SmallVector<std::pair<int64_t, int64_t>> pairs;
  ArrayAttr flat = getFlatPairs();
  for (size_t i = 0; i + 1 < flat.size(); i += 2)
    pairs.push_back({cast<IntegerAttr>(flat[i]).getInt(),
                     cast<IntegerAttr>(flat[i + 1]).getInt()});
  return pairs;
}

LogicalResult BroadcastOp::verifyGroupSize(int64_t n) {
  return checkGroupIndex(*this, "root", getRoot(), n);
}

LogicalResult SendOp::verifyGroupSize(int64_t n) {
  return checkGroupIndex(*this, "target", getTarget(), n);
}

LogicalResult RecvOp::verifyGroupSize(int64_t n) {
  return checkGroupIndex(*this, "source", getSource(), n);
}

LogicalResult SendRecvOp::verifyGroupSize(int64_t n) {
  if (failed(checkGroupIndex(*this, "target", getTarget(), n)))
    return failure();
  return checkGroupIndex(*this, "source", getSource(), n);
}

//===----------------------------------------------------------------------===//
// PipelineStepOp
//===----------------------------------------------------------------------===//

LogicalResult PipelineStepOp::verify() {
  StringRef phase = getPhase();
  if (phase != "forward" && phase != "backward" && phase != "optimizer")
    return emitOpError("expects phase forward, backward or optimizer, got '")
           << phase << "'";
  int64_t microbatch = getMicrobatchAttr().getInt(),
          chunk = getChunkAttr().getInt();
  if (microbatch < 0 || chunk < 0)
    return emitOpError("expects a microbatch and a chunk >= 0, got ")
           << microbatch << " and " << chunk;
  if (phase == "optimizer" && (microbatch != 0 || chunk != 0))
    return emitOpError("marks the optimizer step, which has no microbatch "
                       "or chunk");
  return success();
}

//===----------------------------------------------------------------------===//
// AxisIndexOp, LocalSliceOp
//===----------------------------------------------------------------------===//

LogicalResult
AxisIndexOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return getGroupSize(*this, symbolTable, getMeshAttr(), getAxes());
}

LogicalResult LocalSliceOp::verify() {
  RankedTensorType in = getInput().getType(), out = getType();
  int64_t dim = getDim();
  if (failed(checkCollectiveDim(*this, "dim", dim, in)))
    return failure();
  if (in.getElementType() != out.getElementType() ||
      in.getRank() != out.getRank())
    return emitOpError("expects a result of the input's element type and "
                       "rank, got ")
           << out;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (d == dim)
      continue;
    if (in.getDimSize(d) != out.getDimSize(d))
      return emitOpError("expects the input's size ")
             << in.getDimSize(d) << " in dimension " << d << ", got "
             << out.getDimSize(d);
  }
  if (out.getDimSize(dim) == 0 || in.getDimSize(dim) % out.getDimSize(dim))
    return emitOpError("result size ")
           << out.getDimSize(dim) << " in dimension " << dim
           << " does not divide the input's " << in.getDimSize(dim);
  return success();
}

//===----------------------------------------------------------------------===//
// ManualComputationOp
//===----------------------------------------------------------------------===//

LogicalResult ManualComputationOp::verify() {
  if (getInShardings().size() != getInputs().size())
    return emitOpError("has ") << getInputs().size() << " inputs but "
                               << getInShardings().size() << " in_shardings";
  if (getOutShardings().size() != getResults().size())
    return emitOpError("has ") << getResults().size() << " results but "
                               << getOutShardings().size() << " out_shardings";
  for (ArrayAttr list : {getInShardings(), getOutShardings()})
    for (Attribute a : list) {
      auto s = dyn_cast<ShardingAttr>(a);
      if (!s)
        return emitOpError("shardings must be #dist.sharding, got ") << a;
      if (s.getMesh() != getMeshAttr())
        return emitOpError("sharding ")
               << s << " is not on the op's mesh " << getMeshAttr();
    }
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body takes ")
           << body.getNumArguments() << " arguments for " << getInputs().size()
           << " inputs";
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().size() != getResults().size())
    return emitOpError("body must yield one value per result");
  return success();
}

LogicalResult
ManualComputationOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<int64_t> n =
      getGroupSize(*this, symbolTable, getMeshAttr(), getManualAxes());
  if (failed(n))
    return failure();
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(*this, getMeshAttr());
  llvm::StringSet<> manual;
  for (Attribute a : getManualAxes())
    manual.insert(cast<StringAttr>(a).getValue());
  auto isManual = [&](StringRef axis) { return manual.contains(axis); };
  Block &body = getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  auto check = [&](ArrayAttr shardings, TypeRange globals, TypeRange locals,
                   StringRef what) -> LogicalResult {
    for (auto [i, a, global, local] :
         llvm::enumerate(shardings, globals, locals)) {
      auto s = cast<ShardingAttr>(a);
      std::string name = (what + " #" + Twine(i)).str();
      auto type = cast<RankedTensorType>(global);
      if (failed(verifySharding(
              s, type, mesh, [&]() { return emitOpError(); }, name)))
        return failure();
      RankedTensorType expected = getLocalType(s, type, mesh, isManual);
      if (expected != local)
        return emitOpError("expects the local type ")
               << expected << " of " << name << " in the body, got " << local;
    }
    return success();
  };
  if (failed(check(getInShardings(), getInputs().getTypes(),
                   body.getArgumentTypes(), "input")) ||
      failed(check(getOutShardings(), getResultTypes(),
                   yield.getValues().getTypes(), "result")))
    return failure();
  return success();
}

/// `[[0, 1], [1, 2]]` <-> the flat list [0, 1, 1, 2].
static ParseResult parsePairs(OpAsmParser &parser, ArrayAttr &flatPairs) {
  SmallVector<Attribute> flat;
  Builder &b = parser.getBuilder();
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            int64_t source, target;
            if (parser.parseLSquare() || parser.parseInteger(source) ||
                parser.parseComma() || parser.parseInteger(target) ||
                parser.parseRSquare())
              return failure();
            flat.push_back(b.getI64IntegerAttr(source));
            flat.push_back(b.getI64IntegerAttr(target));
            return success();
          }))
    return failure();
  flatPairs = b.getArrayAttr(flat);
  return success();
}

static void printPairs(OpAsmPrinter &p, Operation *, ArrayAttr flatPairs) {
  p << "[";
  for (size_t i = 0; i + 1 < flatPairs.size(); i += 2) {
    if (i)
      p << ", ";
    p << "[" << cast<IntegerAttr>(flatPairs[i]).getInt() << ", "
      << cast<IntegerAttr>(flatPairs[i + 1]).getInt() << "]";
  }
  p << "]";
}

#define GET_OP_CLASSES
#include "cleave/Dialect/Dist/IR/DistOps.cpp.inc"
