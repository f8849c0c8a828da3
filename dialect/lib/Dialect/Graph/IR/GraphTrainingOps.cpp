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
  return success();
}

//===----------------------------------------------------------------------===//
// Parameter updates
//===----------------------------------------------------------------------===//

namespace {
/// The graph.param that `ref` names, checked to have `type` (and f32
/// elements when `needF32`).
FailureOr<ParamOp> lookupParam(Operation *op, SymbolTableCollection &table,
                               FlatSymbolRefAttr ref, RankedTensorType shape,
                               StringRef what, bool needF32) {
  auto param = table.lookupNearestSymbolFrom<ParamOp>(op, ref);
  if (!param)
    return op->emitOpError("'") << ref << "' (" << what
                                << ") does not name a graph.param";
  auto type = cast<RankedTensorType>(param.getType());
  if (type.getShape() != shape.getShape() ||
      (needF32 && !type.getElementType().isF32()) ||
      (!needF32 && type != shape))
    return op->emitOpError(what)
           << " " << ref << " has type " << type << ", expected "
           << (needF32 ? "f32 elements and the shape of " : "")
           << shape;
  return param;
}

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
} // namespace

LogicalResult AssignOp::verifySymbolUses(SymbolTableCollection &table) {
  return lookupParam(*this, table, getParamAttr(), getValue().getType(),
                     "parameter", /*needF32=*/false);
}

LogicalResult SgdUpdateOp::verify() {
  if (failed(checkUpdateScalars(*this, getStep(), getGradScale(),
                                getLr().convertToDouble())))
    return failure();
  double momentum = getMomentum().convertToDouble();
  if (momentum < 0.0 || getWeightDecay().convertToDouble() < 0.0)
    return emitOpError("momentum and weight_decay must be >= 0");
  if ((momentum != 0.0) != static_cast<bool>(getMomentumBufferAttr()))
    return emitOpError("needs a momentum_buffer exactly when momentum != 0");
  if (getNesterov() &&
      (momentum <= 0.0 || getDampening().convertToDouble() != 0.0))
    return emitOpError("nesterov needs momentum > 0 and zero dampening");
  return success();
}

LogicalResult SgdUpdateOp::verifySymbolUses(SymbolTableCollection &table) {
  RankedTensorType grad = getGrad().getType();
  if (failed(lookupParam(*this, table, getParamAttr(), grad, "parameter",
                         true)))
    return failure();
  if (auto buf = getMomentumBufferAttr())
    if (failed(lookupParam(*this, table, buf, grad, "momentum_buffer", true)))
      return failure();
  return success();
}

LogicalResult AdamwUpdateOp::verify() {
  if (failed(checkUpdateScalars(*this, getStep(), getGradScale(),
                                getLr().convertToDouble())))
    return failure();
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(b1 >= 0.0 && b1 < 1.0 && b2 >= 0.0 && b2 < 1.0))
    return emitOpError("betas must be in [0, 1), got ") << b1 << ", " << b2;
  if (!(getEps().convertToDouble() >= 0.0) ||
      !(getWeightDecay().convertToDouble() >= 0.0))
    return emitOpError("eps and weight_decay must be >= 0");
  return success();
}

LogicalResult AdamwUpdateOp::verifySymbolUses(SymbolTableCollection &table) {
  RankedTensorType grad = getGrad().getType();
  if (failed(lookupParam(*this, table, getParamAttr(), grad, "parameter",
                         true)) ||
      failed(lookupParam(*this, table, getFirstMomentAttr(), grad,
                         "first moment", true)) ||
      failed(lookupParam(*this, table, getSecondMomentAttr(), grad,
                         "second moment", true)))
    return failure();
  return success();
}
