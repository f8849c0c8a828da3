//===- GraphTrainingOps.cpp - verifiers of the training-step ops ---------===//
//
// The backward ops and parameter updates that -cleave-autodiff creates
// (GraphTrainingOps.td): their verifiers and symbol checks. The op classes
// themselves are generated into GraphOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

/// The shapes the ring attention blocks share: q [B,H,Sq,D],
/// k [B,Hkv,Sk,D], v [B,Hkv,Sk,Dv] of one float type, H a multiple of Hkv,
/// positions [Sq] and [Sk] of i64, and a positive scale.
static LogicalResult verifyAttentionBlock(Operation *op, RankedTensorType q,
                                          RankedTensorType k,
                                          RankedTensorType v,
                                          RankedTensorType qPos,
                                          RankedTensorType kPos,
                                          double scale) {
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return op->emitOpError("expects query, key and value of rank 4 [batch, "
                           "heads, seq, head_dim], got ")
           << q << ", " << k << ", " << v;
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return op->emitOpError("expects query, key and value of one element "
                           "type, got ")
           << q << ", " << k << ", " << v;
  ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape(), vs = v.getShape();
  if (qs[0] != ks[0] || qs[0] != vs[0] || ks[1] < 1 || ks[1] != vs[1] ||
      qs[1] % ks[1] != 0 || ks[2] != vs[2] || qs[3] != ks[3])
    return op->emitOpError("query ")
           << q << ", key " << k << " and value " << v
           << " are not the operands of one attention";
  auto positions = [&](RankedTensorType t, int64_t size,
                       StringRef what) -> LogicalResult {
    if (t.getRank() == 1 && t.getDimSize(0) == size &&
        t.getElementType().isInteger(64))
      return success();
    return op->emitOpError(what)
           << " positions must be tensor<" << size << "xi64>, got " << t;
  };
  if (failed(positions(qPos, qs[2], "query")) ||
      failed(positions(kPos, ks[2], "key")))
    return failure();
  if (!(scale > 0.0))
    return op->emitOpError("scale must be positive, got ") << scale;
  return success();
}

/// [B, H, Sq, Dv] of q's element type and [B, H, Sq] f32: the output and
/// log-sum-exp of attention on q and v.
static std::pair<RankedTensorType, RankedTensorType>
blockResultTypes(RankedTensorType q, RankedTensorType v) {
  ArrayRef<int64_t> qs = q.getShape();
  return {RankedTensorType::get({qs[0], qs[1], qs[2], v.getDimSize(3)},
                                q.getElementType()),
          RankedTensorType::get({qs[0], qs[1], qs[2]},
                                Float32Type::get(q.getContext()))};
}

LogicalResult AttentionBlockOp::verify() {
  if (failed(verifyAttentionBlock(
          *this, getQuery().getType(), getKey().getType(),
          getValue().getType(), getQueryPositions().getType(),
          getKeyPositions().getType(), getScale().convertToDouble())))
    return failure();
  auto [out, lse] = blockResultTypes(getQuery().getType(), getValue().getType());
  if (getOut().getType() != out || getLse().getType() != lse)
    return emitOpError("results must be ")
           << out << " and " << lse << ", got " << getOut().getType()
           << " and " << getLse().getType();
  if (bool(getOutIn()) != bool(getLseIn()))
    return emitOpError("merges into an earlier output only with its "
                       "log-sum-exp: out_in and lse_in come together");
  if (getOutIn() && (getOutIn().getType() != out || getLseIn().getType() != lse))
    return emitOpError("merges into ")
           << getOutIn().getType() << " and " << getLseIn().getType()
           << ", which are not the types of its results";
  return success();
}

LogicalResult AttentionBlockGradOp::verify() {
  if (failed(verifyAttentionBlock(
          *this, getQuery().getType(), getKey().getType(),
          getValue().getType(), getQueryPositions().getType(),
          getKeyPositions().getType(), getScale().convertToDouble())))
    return failure();
  auto [out, lse] = blockResultTypes(getQuery().getType(), getValue().getType());
  if (getOut().getType() != out || getGrad().getType() != out ||
      getLse().getType() != lse)
    return emitOpError("expects the forward's output and its gradient of ")
           << out << " and its log-sum-exp of " << lse << ", got "
           << getOut().getType() << ", " << getGrad().getType() << " and "
           << getLse().getType();
  return success();
}

LogicalResult GatherGradOp::verify() {
  RankedTensorType grad = getGrad().getType(), data = getType();
  RankedTensorType idx = getIndices().getType();
  int64_t dim = getDim();
  if (dim < 0 || dim >= data.getRank())
    return mlir::emitError(getLoc())
           << "dim " << dim << " is out of range for rank "
           << data.getRank();
  SmallVector<int64_t> shape(data.getShape().take_front(dim));
  llvm::append_range(shape, idx.getShape());
  llvm::append_range(shape, data.getShape().drop_front(dim + 1));
  if (grad.getShape() != ArrayRef<int64_t>(shape) ||
      grad.getElementType() != data.getElementType())
    return emitOpError("grad ")
           << grad << " is not the gather of " << data << " at " << idx
           << " along dim " << dim;
  return success();
}

LogicalResult SliceGradOp::verify() {
  RankedTensorType grad = getGrad().getType(), type = getType();
  int64_t rank = type.getRank();
  if (grad.getRank() != rank || grad.getElementType() != type.getElementType())
    return emitOpError("grad ") << grad << " and result " << type
                                << " differ in rank or element type";
  if (static_cast<int64_t>(getStart().size()) != rank ||
      static_cast<int64_t>(getStrides().size()) != rank)
    return emitOpError("expects start and strides of ")
           << rank << " entries each (the result rank)";
  for (int64_t d = 0; d < rank; ++d) {
    int64_t start = getStart()[d], stride = getStrides()[d];
    int64_t n = grad.getDimSize(d);
    if (start < 0 || stride < 1 ||
        (n > 0 && start + (n - 1) * stride >= type.getDimSize(d)))
      return emitOpError("dimension ")
             << d << ": " << n << " elements from " << start << " by "
             << stride << " do not fit in " << type.getDimSize(d);
  }
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  RankedTensorType logits = getLogits().getType();
  if (getLabels().getType().getShape() != logits.getShape().drop_back())
    return emitOpError("labels ") << getLabels().getType()
                                  << " must have the shape of logits "
                                  << logits << " without the class dim";
  if (getGrad().getType().getRank() != 0)
    return emitOpError("grad must be a scalar, got ") << getGrad().getType();
  if (getReduction() != ReductionKind::Mean &&
      getReduction() != ReductionKind::Sum)
    return emitOpError("reduction must be mean or sum, got ")
           << stringifyReductionKind(getReduction());
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (getReduction() != ReductionKind::Mean &&
      getReduction() != ReductionKind::Sum)
    return emitOpError("reduction must be mean or sum, got ")
           << stringifyReductionKind(getReduction());
  return success();
}

//===----------------------------------------------------------------------===//
// Parameter updates
//===----------------------------------------------------------------------===//

namespace {
LogicalResult checkUpdateScalars(Operation *op, Value step, Value scale,
                                 double lr) {
  if (cast<RankedTensorType>(step.getType()).getRank() != 0)
    return op->emitOpError("step must be a scalar, got ") << step.getType();
  if (scale && cast<RankedTensorType>(scale.getType()).getRank() != 0)
    return op->emitOpError("scale must be a scalar, got ") << scale.getType();
  if (!(lr >= 0.0))
    return op->emitOpError("lr must be >= 0, got ") << lr;
  return success();
}

/// Checks that an optimizer state operand has the parameter's type.
LogicalResult checkState(Operation *op, Value state, Type paramType,
                         StringRef what) {
  if (state.getType() != paramType)
    return op->emitOpError(what) << " has type " << state.getType()
                                 << ", expected the parameter's " << paramType;
  return success();
}

LogicalResult checkGrad(Operation *op, Value grad, Value param) {
  auto g = cast<RankedTensorType>(grad.getType());
  auto p = cast<RankedTensorType>(param.getType());
  if (g.getShape() != p.getShape())
    return op->emitOpError("grad ")
           << g << " must have the shape of the parameter " << p;
  return success();
}
} // namespace

LogicalResult AssignOp::verifySymbolUses(SymbolTableCollection &table) {
  auto param = table.lookupNearestSymbolFrom<ParamOp>(*this, getParamAttr());
  if (!param)
    return emitOpError("'")
           << getParamAttr() << "' (parameter) does not name a graph.param";
  Type type = getValue().getType();
  if (type == param.getType())
    return success();
  if (dist::ShardingAttr sharding = param.getShardingAttr())
    if (auto mesh = table.lookupNearestSymbolFrom<dist::MeshOp>(
            param, sharding.getMesh()))
      if (type == dist::getLocalType(sharding, param.getTensorType(), mesh))
        return success();
  return emitOpError("parameter ")
         << getParamAttr() << " has type " << param.getType()
         << ", which the assigned " << type << " is not (globally or locally)";
}

LogicalResult SgdOp::verify() {
  if (failed(checkUpdateScalars(*this, getStep(), getGradScale(),
                                getLr().convertToDouble())) ||
      failed(checkGrad(*this, getGrad(), getParam())))
    return failure();
  double momentum = getMomentum().convertToDouble();
  if (momentum < 0.0 || getWeightDecay().convertToDouble() < 0.0)
    return emitOpError("momentum and weight_decay must be >= 0");
  if ((momentum != 0.0) != static_cast<bool>(getMomentumBuffer()))
    return emitOpError("needs a momentum_buffer exactly when momentum != 0");
  if (static_cast<bool>(getMomentumBuffer()) !=
      static_cast<bool>(getNewMomentumBuffer()))
    return emitOpError("returns a new momentum buffer exactly when it takes "
                       "one");
  if (Value buf = getMomentumBuffer())
    if (failed(
            checkState(*this, buf, getParam().getType(), "momentum_buffer")) ||
        failed(checkState(*this, getNewMomentumBuffer(), getParam().getType(),
                          "the new momentum buffer")))
      return failure();
  if (getNesterov() &&
      (momentum <= 0.0 || getDampening().convertToDouble() != 0.0))
    return emitOpError("nesterov needs momentum > 0 and zero dampening");
  return success();
}

LogicalResult AdamwOp::verify() {
  if (failed(checkUpdateScalars(*this, getStep(), getGradScale(),
                                getLr().convertToDouble())) ||
      failed(checkGrad(*this, getGrad(), getParam())) ||
      failed(checkState(*this, getFirstMoment(), getParam().getType(),
                        "first moment")) ||
      failed(checkState(*this, getSecondMoment(), getParam().getType(),
                        "second moment")))
    return failure();
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(b1 >= 0.0 && b1 < 1.0 && b2 >= 0.0 && b2 < 1.0))
    return emitOpError("betas must be in [0, 1), got ") << b1 << ", " << b2;
  if (!(getEps().convertToDouble() >= 0.0) ||
      !(getWeightDecay().convertToDouble() >= 0.0))
    return emitOpError("eps and weight_decay must be >= 0");
  return success();
}

LogicalResult HyperparameterOp::verify() {
  if (hyperparameterSlot(getName()) >= 0)
    return success();
  std::string known;
  for (int32_t slot = 0; slot < CLEAVE_NUM_HYPERPARAMETERS; ++slot)
    known += std::string(slot ? ", " : "") + cleave_hyperparameter_name(slot);
  return emitOpError("names no hyperparameter: '")
         << getName() << "' (known: " << known << ")";
}

int32_t cleave::graph::hyperparameterSlot(StringRef name) {
  for (int32_t slot = 0; slot < CLEAVE_NUM_HYPERPARAMETERS; ++slot)
    if (name == cleave_hyperparameter_name(slot))
      return slot;
  return -1;
}
