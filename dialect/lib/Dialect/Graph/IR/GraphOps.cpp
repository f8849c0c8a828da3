//===- GraphOps.cpp - graph dialect ops ---------------------------------===//
//
// Verifiers, result type inference and folders of the `graph` ops. Checks
// that decide a result type live in `inferReturnTypes`, so that they run both
// when the custom form is parsed and when any op is verified.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Dialect/Cleave/IR/CleaveDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

#include <cmath>
#include <algorithm>

#include <limits>
#include <numeric>

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {
using OptLoc = std::optional<Location>;

/// The static ranked tensor type of `v`, or an error naming `what`.
FailureOr<RankedTensorType> getStaticTensor(OptLoc loc, Value v,
                                            StringRef what) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return emitOptionalError(loc, "expects ", what,
                             " to be a statically shaped tensor, got ",
                             v.getType());
  return type;
}

/// Checks that `dim` indexes a tensor of `rank`.
LogicalResult checkDim(OptLoc loc, int64_t dim, int64_t rank,
                       StringRef what = "dim") {
  if (dim < 0 || dim >= rank)
    return emitOptionalError(loc, what, " ", dim, " is out of range for rank ",
                             rank);
  return success();
}

/// NumPy broadcasting of several shapes into `result`.
LogicalResult broadcastShapes(OptLoc loc, ArrayRef<RankedTensorType> types,
                              SmallVectorImpl<int64_t> &result) {
  int64_t rank = 0;
  for (RankedTensorType t : types)
    rank = std::max(rank, t.getRank());
  result.assign(rank, 1);
  for (RankedTensorType t : types) {
    int64_t offset = rank - t.getRank();
    for (int64_t d = 0; d < t.getRank(); ++d) {
      int64_t size = t.getDimSize(d);
      int64_t &out = result[offset + d];
      if (size == out || size == 1)
        continue;
      if (out != 1)
        return emitOptionalError(
            loc, "operands are not broadcast-compatible: ", types.front(),
            " and ", t, " differ at result dimension ", offset + d, " (", out,
            " vs ", size, ")");
      out = size;
    }
  }
  return success();
}

LogicalResult checkSameElementType(OptLoc loc, Type a, Type b, StringRef what) {
  if (getElementTypeOrSelf(a) != getElementTypeOrSelf(b))
    return emitOptionalError(loc, "expects ", what,
                             " to have the same element type, got ", a,
                             " and ", b);
  return success();
}

/// Shared inference of the broadcasting elementwise ops: the result has the
/// broadcast shape and `elementType` (the lhs element type when null).
LogicalResult inferElementwise(OptLoc loc, ValueRange operands,
                               Type elementType,
                               SmallVectorImpl<Type> &inferred) {
  SmallVector<RankedTensorType> types;
  for (Value v : operands) {
    auto t = getStaticTensor(loc, v, "operands");
    if (failed(t))
      return failure();
    types.push_back(*t);
  }
  SmallVector<int64_t> shape;
  if (failed(broadcastShapes(loc, types, shape)))
    return failure();
  inferred.push_back(RankedTensorType::get(
      shape, elementType ? elementType : types.front().getElementType()));
  return success();
}

int64_t getNumBytes(RankedTensorType type) {
  int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  return type.getNumElements() * std::max<int64_t>(bits / 8, 1);
}

bool isIdentityPermutation(ArrayRef<int64_t> perm) {
  for (auto [i, p] : llvm::enumerate(perm))
    if (static_cast<int64_t>(i) != p)
      return false;
  return true;
}
} // namespace

//===----------------------------------------------------------------------===//
// ParamOp, ReadParamOp
//===----------------------------------------------------------------------===//

/// The type a parameter of `role` must have (the runtime reads these as
/// scalars), or null when any type will do.
static Type getRoleType(MLIRContext *ctx, cleave_param_role role) {
  switch (role) {
  case CLEAVE_PARAM_STEP_COUNTER:
  case CLEAVE_PARAM_GROWTH_TRACKER:
    return RankedTensorType::get({}, IntegerType::get(ctx, 64));
  case CLEAVE_PARAM_LOSS_SCALE:
    return RankedTensorType::get({}, Float32Type::get(ctx));
  case CLEAVE_PARAM_MODEL:
  case CLEAVE_PARAM_OPTIMIZER_STATE:
    return {};
  }
  return {};
}

LogicalResult ParamOp::verify() {
  RankedTensorType type = getTensorType();
  cleave_param_role role = cleave::getParamRole(*this);
  if (Type want = getRoleType(getContext(), role); want && type != want)
    return emitOpError("has role ")
           << cleave_param_role_name(role) << ", which needs " << want
           << ", got " << type;
  if (role != CLEAVE_PARAM_MODEL && !getFrozen())
    return emitOpError("has role ")
           << cleave_param_role_name(role)
           << " and must be frozen (the optimizer updates it, not training)";
  if (dist::ShardingAttr sharding = getShardingAttr();
      sharding && sharding.isPartial())
    return emitOpError("sharding of parameter @")
           << getSymName() << " must not be partial, got " << sharding;
  Attribute init = getInitialValueAttr();
  if (!init)
    return success();
  if (auto elements = dyn_cast<ElementsAttr>(init)) {
    if (elements.getType() != type)
      return emitOpError("initial value type ")
             << elements.getType() << " does not match parameter type "
             << type;
    return success();
  }
  if (auto external = dyn_cast<ExternalWeightsAttr>(init)) {
    if (external.getSize() != getNumBytes(type))
      return emitOpError("external weights hold ")
             << external.getSize() << " bytes but " << type << " needs "
             << getNumBytes(type);
    return success();
  }
  return emitOpError("initial value must be elements or #graph.external, got ")
         << init;
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  dist::ShardingAttr sharding = getShardingAttr();
  if (!sharding)
    return success();
  std::string name = ("parameter @" + getSymName()).str();
  auto mesh = symbolTable.lookupNearestSymbolFrom<dist::MeshOp>(
      *this, sharding.getMesh());
  if (!mesh)
    return emitOpError("sharding of ")
           << name << " names " << sharding.getMesh()
           << ", which is not a dist.mesh";
  return dist::verifySharding(
      sharding, getType(), mesh, [&]() { return emitOpError(); }, name);
}

/// The type of this device's block of `param`, or null when it is not
/// sharded (or its sharding does not verify).
static RankedTensorType localParamType(ParamOp param,
                                       SymbolTableCollection &symbolTable) {
  dist::ShardingAttr sharding = param.getShardingAttr();
  if (!sharding)
    return {};
  auto mesh = symbolTable.lookupNearestSymbolFrom<dist::MeshOp>(
      param, sharding.getMesh());
  if (!mesh)
    return {};
  return dist::getLocalType(sharding, param.getTensorType(), mesh);
}

LogicalResult
ReadParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param =
      symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, getParamAttr());
  if (!param)
    return emitOpError("'@") << getParam() << "' does not name a graph.param";
  if (param.getType() == getType())
    return success();
  if (RankedTensorType local = localParamType(param, symbolTable)) {
    if (local == getType())
      return success();
    return emitOpError("result type ")
           << getType() << " is neither the global type " << param.getType()
           << " nor the local type " << local << " of parameter @"
           << getParam();
  }
  return emitOpError("result type ")
         << getType() << " does not match the type " << param.getType()
         << " of parameter @" << getParam();
}

//===----------------------------------------------------------------------===//
// ConstantOp, IotaOp, CastOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

LogicalResult IotaOp::verify() {
  return checkDim(getLoc(), getDim(), getType().getRank());
}

LogicalResult CastOp::verify() {
  if (getOperand().getType().getShape() != getType().getShape())
    return emitOpError("expects the same shape, got ")
           << getOperand().getType() << " and " << getType();
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  return {};
}

//===----------------------------------------------------------------------===//
// Elementwise with broadcasting
//===----------------------------------------------------------------------===//

#define GRAPH_BINARY_INFER(OP)                                                 \
  LogicalResult OP::inferReturnTypes(MLIRContext *, OptLoc loc,                \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    if (failed(checkSameElementType(loc, adaptor.getLhs().getType(),           \
                                    adaptor.getRhs().getType(), "operands")))  \
      return failure();                                                        \
    return inferElementwise(loc, adaptor.getOperands(), Type(), inferred);     \
  }
GRAPH_BINARY_INFER(AddOp)
GRAPH_BINARY_INFER(SubOp)
GRAPH_BINARY_INFER(MulOp)
GRAPH_BINARY_INFER(DivOp)
GRAPH_BINARY_INFER(PowOp)
GRAPH_BINARY_INFER(MaxOp)
GRAPH_BINARY_INFER(MinOp)
#undef GRAPH_BINARY_INFER

LogicalResult CompareOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  if (failed(checkSameElementType(loc, adaptor.getLhs().getType(),
                                  adaptor.getRhs().getType(), "operands")))
    return failure();
  return inferElementwise(loc, {adaptor.getLhs(), adaptor.getRhs()},
                          IntegerType::get(ctx, 1), inferred);
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  if (failed(checkSameElementType(loc, adaptor.getOnTrue().getType(),
                                  adaptor.getOnFalse().getType(),
                                  "on_true and on_false")))
    return failure();
  return inferElementwise(loc, adaptor.getOperands(),
                          getElementTypeOrSelf(adaptor.getOnTrue().getType()),
                          inferred);
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto lhs = getStaticTensor(loc, adaptor.getLhs(), "lhs");
  auto rhs = getStaticTensor(loc, adaptor.getRhs(), "rhs");
  if (failed(lhs) || failed(rhs))
    return failure();
  if (lhs->getRank() < 2 || rhs->getRank() < 2)
    return emitOptionalError(loc, "expects operands of rank >= 2, got ", *lhs,
                             " and ", *rhs);
  if (failed(checkSameElementType(loc, *lhs, *rhs, "operands")))
    return failure();
  int64_t k = lhs->getShape().back();
  int64_t rk = rhs->getShape()[rhs->getRank() - 2];
  if (k != rk)
    return emitOptionalError(loc, "contracting dimensions differ: lhs ", *lhs,
                             " has ", k, " columns, rhs ", *rhs, " has ", rk,
                             " rows");
  auto batchOf = [](RankedTensorType t) {
    return RankedTensorType::get(t.getShape().drop_back(2),
                                 t.getElementType());
  };
  SmallVector<int64_t> shape;
  if (failed(broadcastShapes(loc, {batchOf(*lhs), batchOf(*rhs)}, shape)))
    return failure();
  shape.push_back(lhs->getShape()[lhs->getRank() - 2]);
  shape.push_back(rhs->getShape().back());
  inferred.push_back(RankedTensorType::get(shape, lhs->getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax, reductions, norms
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  return checkDim(getLoc(), getDim(), getType().getRank());
}

LogicalResult LogSoftmaxOp::verify() {
  return checkDim(getLoc(), getDim(), getType().getRank());
}

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto type = getStaticTensor(loc, adaptor.getOperand(), "operand");
  if (failed(type))
    return failure();
  ArrayRef<int64_t> dims = adaptor.getDims();
  if (dims.empty())
    return emitOptionalError(loc, "expects at least one dimension to reduce");
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (failed(checkDim(loc, d, type->getRank())))
      return failure();
    if (i > 0 && dims[i - 1] >= d)
      return emitOptionalError(
          loc, "expects reduced dims in increasing order without repeats");
  }
  if (adaptor.getKind() == ReductionKind::Mean &&
      !isa<FloatType>(type->getElementType()))
    return emitOptionalError(loc, "mean reduction needs a float tensor, got ",
                             *type);
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type->getRank(); ++d) {
    bool reduced = llvm::is_contained(dims, d);
    if (!reduced)
      shape.push_back(type->getDimSize(d));
    else if (adaptor.getKeepdim())
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, type->getElementType()));
  return success();
}

/// The checks shared by layer_norm and rms_norm: `dim` is in range and each
/// affine operand has the normalized shape and the input's element type.
static LogicalResult verifyNorm(Operation *op, RankedTensorType input,
                                int64_t dim, ValueRange affine) {
  if (failed(checkDim(op->getLoc(), dim, input.getRank())))
    return failure();
  ArrayRef<int64_t> normalized = input.getShape().drop_front(dim);
  for (Value v : affine) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getShape() != normalized ||
        type.getElementType() != input.getElementType())
      return op->emitOpError("expects scale and bias of type ")
             << RankedTensorType::get(normalized, input.getElementType())
             << " (the normalized dimensions of " << input << "), got "
             << type;
  }
  return success();
}

LogicalResult LayerNormOp::verify() {
  SmallVector<Value> affine = {getScale()};
  if (getBias())
    affine.push_back(getBias());
  return verifyNorm(*this, getInput().getType(), getDim(), affine);
}

LogicalResult RmsNormOp::verify() {
  return verifyNorm(*this, getInput().getType(), getDim(), {getScale()});
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = getOperand().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("expects the same element type, got ")
           << in << " and " << out;
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << in << " (" << in.getNumElements() << " elements) into " << out
           << " (" << out.getNumElements() << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  if (auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getOperand()))
    return dense.reshape(getType());
  // reshape(reshape(x)) only depends on x's elements, which keep their order.
  if (auto inner = getOperand().getDefiningOp<ReshapeOp>()) {
    getOperandMutable().assign(inner.getOperand());
    return getResult();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto type = getStaticTensor(loc, adaptor.getOperand(), "operand");
  if (failed(type))
    return failure();
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (static_cast<int64_t>(perm.size()) != type->getRank())
    return emitOptionalError(loc, "expects a permutation of ",
                             type->getRank(), " dimensions, got ",
                             perm.size());
  llvm::SmallSet<int64_t, 8> seen;
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= type->getRank() || !seen.insert(p).second)
      return emitOptionalError(loc, "perm is not a permutation of [0, ",
                               type->getRank(), ")");
    shape.push_back(type->getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, type->getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  if (isIdentityPermutation(getPerm()))
    return getOperand();
  if (auto splat = dyn_cast_if_present<SplatElementsAttr>(adaptor.getOperand()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  // transpose(transpose(x, p), q) == transpose(x, p o q).
  if (auto inner = getOperand().getDefiningOp<TransposeOp>()) {
    SmallVector<int64_t> composed;
    for (int64_t q : getPerm())
      composed.push_back(inner.getPerm()[q]);
    if (isIdentityPermutation(composed))
      return inner.getOperand();
    getOperandMutable().assign(inner.getOperand());
    setPerm(composed);
    return getResult();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// BroadcastInDimOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::verify() {
  RankedTensorType in = getOperand().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("expects the same element type, got ")
           << in << " and " << out;
  ArrayRef<int64_t> dims = getDims();
  if (static_cast<int64_t>(dims.size()) != in.getRank())
    return emitOpError("expects one entry in dims per operand dimension (")
           << in.getRank() << "), got " << dims.size();
  llvm::SmallSet<int64_t, 8> seen;
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d < 0 || d >= out.getRank())
      return emitOpError("dims[") << i << "] = " << d
                                  << " is out of range for result rank "
                                  << out.getRank();
    if (!seen.insert(d).second)
      return emitOpError("dims has result dimension ") << d << " twice";
    int64_t size = in.getDimSize(i);
    if (size != 1 && size != out.getDimSize(d))
      return emitOpError("operand dimension ")
             << i << " of size " << size << " cannot broadcast to result "
             << "dimension " << d << " of size " << out.getDimSize(d);
  }
  return success();
}

OpFoldResult BroadcastInDimOp::fold(FoldAdaptor adaptor) {
  if (getOperand().getType() == getType() && isIdentityPermutation(getDims()))
    return getOperand();
  if (auto splat = dyn_cast_if_present<SplatElementsAttr>(adaptor.getOperand()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
}

//===----------------------------------------------------------------------===//
// SliceOp, ConcatOp, SplitOp
//===----------------------------------------------------------------------===//

SmallVector<int64_t> SliceOp::getStridesOrOnes() {
  if (auto strides = getStrides())
    return llvm::to_vector(*strides);
  return SmallVector<int64_t>(getStart().size(), 1);
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto type = getStaticTensor(loc, adaptor.getOperand(), "operand");
  if (failed(type))
    return failure();
  int64_t rank = type->getRank();
  ArrayRef<int64_t> start = adaptor.getStart(), limit = adaptor.getLimit();
  SmallVector<int64_t> strides(rank, 1);
  if (auto s = adaptor.getStrides())
    strides.assign(s->begin(), s->end());
  if (static_cast<int64_t>(start.size()) != rank ||
      static_cast<int64_t>(limit.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return emitOptionalError(loc, "expects start, limit and strides of ",
                             rank, " entries each (the operand rank)");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (start[d] < 0 || start[d] >= limit[d] ||
        limit[d] > type->getDimSize(d))
      return emitOptionalError(loc, "dimension ", d, " range [", start[d],
                               ", ", limit[d],
                               ") is empty or outside [0, ",
                               type->getDimSize(d), ")");
    if (strides[d] < 1)
      return emitOptionalError(loc, "dimension ", d,
                               " stride must be >= 1, got ", strides[d]);
    shape.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
  }
  inferred.push_back(RankedTensorType::get(shape, type->getElementType()));
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  return {};
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "expects at least one input");
  auto first = getStaticTensor(loc, adaptor.getInputs().front(), "inputs");
  if (failed(first))
    return failure();
  int64_t dim = adaptor.getDim();
  if (failed(checkDim(loc, dim, first->getRank())))
    return failure();
  SmallVector<int64_t> shape = llvm::to_vector(first->getShape());
  for (Value v : adaptor.getInputs().drop_front()) {
    auto type = getStaticTensor(loc, v, "inputs");
    if (failed(type))
      return failure();
    if (failed(checkSameElementType(loc, *first, *type, "inputs")))
      return failure();
    bool compatible = type->getRank() == first->getRank();
    for (int64_t d = 0; compatible && d < first->getRank(); ++d)
      compatible = d == dim || type->getDimSize(d) == first->getDimSize(d);
    if (!compatible)
      return emitOptionalError(loc, "inputs ", *first, " and ", *type,
                               " differ outside the concatenated dim ", dim);
    if (type->getDimSize(dim) >
        std::numeric_limits<int64_t>::max() - shape[dim])
      return emitOptionalError(loc, "the concatenated dim ", dim,
                               " overflows int64");
    shape[dim] += type->getDimSize(dim);
  }
  inferred.push_back(RankedTensorType::get(shape, first->getElementType()));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto type = getStaticTensor(loc, adaptor.getOperand(), "operand");
  if (failed(type))
    return failure();
  int64_t dim = adaptor.getDim();
  if (failed(checkDim(loc, dim, type->getRank())))
    return failure();
  ArrayRef<int64_t> sizes = adaptor.getSizes();
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 1)
      return emitOptionalError(loc, "split sizes must be >= 1, got ", s);
    // Sizes past the dimension's are an error before they can overflow.
    if (s > type->getDimSize(dim) - total)
      return emitOptionalError(loc,
                               "split sizes add up to more than dimension ",
                               dim, "'s size ", type->getDimSize(dim));
    total += s;
  }
  if (sizes.empty() || total != type->getDimSize(dim))
    return emitOptionalError(loc, "split sizes add up to ", total,
                             " but dimension ", dim, " has size ",
                             type->getDimSize(dim));
  for (int64_t s : sizes) {
    SmallVector<int64_t> shape = llvm::to_vector(type->getShape());
    shape[dim] = s;
    inferred.push_back(RankedTensorType::get(shape, type->getElementType()));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// GatherOp, TopKOp
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto data = getStaticTensor(loc, adaptor.getData(), "data");
  auto indices = getStaticTensor(loc, adaptor.getIndices(), "indices");
  if (failed(data) || failed(indices))
    return failure();
  int64_t dim = adaptor.getDim();
  if (failed(checkDim(loc, dim, data->getRank())))
    return failure();
  SmallVector<int64_t> shape(data->getShape().take_front(dim));
  llvm::append_range(shape, indices->getShape());
  llvm::append_range(shape, data->getShape().drop_front(dim + 1));
  inferred.push_back(RankedTensorType::get(shape, data->getElementType()));
  return success();
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto type = getStaticTensor(loc, adaptor.getOperand(), "operand");
  if (failed(type))
    return failure();
  int64_t dim = adaptor.getDim(), k = adaptor.getK();
  if (failed(checkDim(loc, dim, type->getRank())))
    return failure();
  if (k < 1 || k > type->getDimSize(dim))
    return emitOptionalError(loc, "k = ", k, " must be in [1, ",
                             type->getDimSize(dim), "]");
  SmallVector<int64_t> shape = llvm::to_vector(type->getShape());
  shape[dim] = k;
  inferred.push_back(RankedTensorType::get(shape, type->getElementType()));
  inferred.push_back(RankedTensorType::get(shape, IntegerType::get(ctx, 64)));
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp, losses
//===----------------------------------------------------------------------===//

double AttentionOp::getScaleOrDefault() {
  return getScale() ? getScale()->convertToDouble()
                    : 1.0 / std::sqrt(static_cast<double>(
                                getQuery().getType().getShape().back()));
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto q = getStaticTensor(loc, adaptor.getQuery(), "query");
  auto k = getStaticTensor(loc, adaptor.getKey(), "key");
  auto v = getStaticTensor(loc, adaptor.getValue(), "value");
  if (failed(q) || failed(k) || failed(v))
    return failure();
  if (q->getRank() != 4 || k->getRank() != 4 || v->getRank() != 4)
    return emitOptionalError(
        loc, "expects query, key and value of rank 4 [batch, heads, seq, "
             "head_dim], got ",
        *q, ", ", *k, ", ", *v);
  if (failed(checkSameElementType(loc, *q, *k, "query and key")) ||
      failed(checkSameElementType(loc, *q, *v, "query and value")))
    return failure();
  ArrayRef<int64_t> qs = q->getShape(), ks = k->getShape(), vs = v->getShape();
  if (qs[0] != ks[0] || qs[0] != vs[0])
    return emitOptionalError(loc, "batch sizes differ: ", qs[0], ", ", ks[0],
                             ", ", vs[0]);
  if (ks[1] < 1 || vs[1] < 1)
    return emitOptionalError(loc, "needs at least one key/value head, got ",
                             ks[1], " and ", vs[1]);
  if (ks[1] != vs[1] || qs[1] % ks[1] != 0)
    return emitOptionalError(loc, "query heads (", qs[1],
                             ") must be a multiple of the key/value heads (",
                             ks[1], ", ", vs[1], ") and those equal");
  if (ks[2] != vs[2])
    return emitOptionalError(loc, "key and value sequence lengths differ: ",
                             ks[2], " vs ", vs[2]);
  if (qs[3] != ks[3])
    return emitOptionalError(loc, "query and key head dims differ: ", qs[3],
                             " vs ", ks[3]);
  if (Value mask = adaptor.getMask()) {
    auto m = getStaticTensor(loc, mask, "mask");
    if (failed(m))
      return failure();
    Type me = m->getElementType();
    if (!me.isInteger(1) && me != q->getElementType())
      return emitOptionalError(loc, "mask must be i1 or ",
                               q->getElementType(), ", got ", *m);
    auto scores =
        RankedTensorType::get({qs[0], qs[1], qs[2], ks[2]}, me);
    SmallVector<int64_t> shape;
    if (m->getRank() > 4 ||
        failed(broadcastShapes(std::nullopt, {scores, *m}, shape)) ||
        ArrayRef<int64_t>(shape) != scores.getShape())
      return emitOptionalError(loc, "mask ", *m,
                               " does not broadcast to the scores shape ",
                               scores);
  }
  if (auto scale = adaptor.getScale(); scale && !(scale->convertToDouble() > 0.0))
    return emitOptionalError(loc, "scale must be positive, got ",
                             scale->convertToDouble());
  inferred.push_back(RankedTensorType::get({qs[0], qs[1], qs[2], vs[3]},
                                           q->getElementType()));
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &inferred) {
  auto logits = getStaticTensor(loc, adaptor.getLogits(), "logits");
  auto labels = getStaticTensor(loc, adaptor.getLabels(), "labels");
  if (failed(logits) || failed(labels))
    return failure();
  if (logits->getRank() < 1 ||
      labels->getShape() != logits->getShape().drop_back())
    return emitOptionalError(loc, "labels ", *labels,
                             " must have the shape of logits ", *logits,
                             " without the class dimension");
  inferred.push_back(
      RankedTensorType::get({}, Float32Type::get(logits->getContext())));
  return success();
}

LogicalResult MseOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  auto pred = getStaticTensor(loc, adaptor.getPrediction(), "prediction");
  if (failed(pred))
    return failure();
  inferred.push_back(RankedTensorType::get({}, pred->getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

LogicalResult RouterTopKOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  auto logits = getStaticTensor(loc, adaptor.getLogits(), "logits");
  if (failed(logits))
    return failure();
  if (logits->getRank() != 2)
    return emitOptionalError(loc, "expects logits [tokens, experts], got ",
                             *logits);
  int64_t k = adaptor.getK(), experts = logits->getDimSize(1);
  if (k < 1 || k > experts)
    return emitOptionalError(loc, "k = ", k, " must be in [1, ", experts,
                             "] (the number of experts)");
  int64_t tokens = logits->getDimSize(0);
  inferred.push_back(
      RankedTensorType::get({tokens, k}, logits->getElementType()));
  inferred.push_back(
      RankedTensorType::get({tokens, k}, IntegerType::get(ctx, 64)));
  return success();
}

LogicalResult MoeDispatchOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  auto tokens = getStaticTensor(loc, adaptor.getTokens(), "tokens");
  auto experts = getStaticTensor(loc, adaptor.getExperts(), "experts");
  if (failed(tokens) || failed(experts))
    return failure();
  if (tokens->getRank() != 2 || experts->getRank() != 2 ||
      tokens->getDimSize(0) != experts->getDimSize(0))
    return emitOptionalError(loc, "expects tokens [T, H] and experts [T, k], "
                                  "got ",
                             *tokens, " and ", *experts);
  int64_t numExperts = adaptor.getNumExperts(), capacity = adaptor.getCapacity();
  // The parser infers before it fills in default-valued attributes.
  IntegerAttr groupsAttr = adaptor.getGroupsAttr();
  int64_t groups = groupsAttr ? groupsAttr.getInt() : 1;
  if (numExperts < 1 || capacity < 1 || groups < 1)
    return emitOptionalError(loc, "experts (", numExperts, "), capacity (",
                             capacity, ") and groups (", groups,
                             ") must be >= 1");
  if (tokens->getDimSize(0) % groups != 0)
    return emitOptionalError(loc, "the ", groups, " groups do not divide the ",
                             tokens->getDimSize(0), " tokens");
  // The buffer's element count must stay far from overflow (its bytes are
  // planned in int64).
  int64_t h = std::max<int64_t>(tokens->getDimSize(1), 1);
  constexpr int64_t kMaxElements = int64_t(1) << 58;
  if (numExperts > kMaxElements / groups ||
      capacity > kMaxElements / (numExperts * groups) ||
      h > kMaxElements / (numExperts * groups * capacity))
    return emitOptionalError(loc, "a dispatch buffer of ", numExperts,
                             " experts x ", groups, " groups x ", capacity,
                             " slots x ", h, " features is too large");
  inferred.push_back(RankedTensorType::get(
      {numExperts, groups * capacity, tokens->getDimSize(1)},
      tokens->getElementType()));
  return success();
}

LogicalResult ExpertMatmulOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &inferred) {
  auto in = getStaticTensor(loc, adaptor.getInput(), "input");
  auto w = getStaticTensor(loc, adaptor.getWeight(), "weight");
  if (failed(in) || failed(w))
    return failure();
  if (failed(checkSameElementType(loc, *in, *w, "input and weight")))
    return failure();
  if (in->getRank() != 3 || w->getRank() != 3 ||
      in->getDimSize(0) != w->getDimSize(0) ||
      in->getDimSize(2) != w->getDimSize(1))
    return emitOptionalError(loc, "expects input [E, C, H] and weight "
                                  "[E, H, F], got ",
                             *in, " and ", *w);
  inferred.push_back(RankedTensorType::get(
      {in->getDimSize(0), in->getDimSize(1), w->getDimSize(2)},
      in->getElementType()));
  return success();
}

LogicalResult MoeCombineOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  auto out = getStaticTensor(loc, adaptor.getExpertOut(), "expert_out");
  auto gates = getStaticTensor(loc, adaptor.getGates(), "gates");
  auto experts = getStaticTensor(loc, adaptor.getExperts(), "experts");
  if (failed(out) || failed(gates) || failed(experts))
    return failure();
  if (failed(checkSameElementType(loc, *out, *gates, "expert_out and gates")))
    return failure();
  if (out->getRank() != 3 || gates->getRank() != 2 ||
      gates->getShape() != experts->getShape())
    return emitOptionalError(loc, "expects expert_out [E, C, H] and gates and "
                                  "experts [T, k], got ",
                             *out, ", ", *gates, ", ", *experts);
  // The parser infers before it fills in default-valued attributes.
  IntegerAttr groupsAttr = adaptor.getGroupsAttr();
  int64_t groups = groupsAttr ? groupsAttr.getInt() : 1;
  if (groups < 1 || gates->getDimSize(0) % groups != 0 ||
      out->getDimSize(1) % groups != 0)
    return emitOptionalError(loc, "groups (", groups, ") must be >= 1 and "
                             "divide the ", gates->getDimSize(0),
                             " tokens and the ", out->getDimSize(1), " slots");
  inferred.push_back(RankedTensorType::get(
      {gates->getDimSize(0), out->getDimSize(2)}, out->getElementType()));
  return success();
}

#define GET_OP_CLASSES
#include "cleave/Dialect/Graph/IR/GraphOps.cpp.inc"
