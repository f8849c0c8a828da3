//===- OnnxOps.cpp - ONNX contraction, reduction and norm converters ----===//
//
// MatMul, Gemm, Softmax, the reductions, LayerNormalization, TopK and
// Dropout, and the table of every converter (default ONNX domain, opsets
// 13 to 18).
//
//===----------------------------------------------------------------------===//

#include "Converters.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"

#include <cmath>

using namespace mlir;
using namespace cleave;
using namespace cleave::onnx_import;
using namespace cleave::graph;

namespace {

//===----------------------------------------------------------------------===//
// Contractions, reductions, normalization
//===----------------------------------------------------------------------===//

LogicalResult convertMatMul(NodeContext &n) {
  Value lhs = n.value(0), rhs = n.value(1);
  RankedTensorType lt = n.type(0), rt = n.type(1);
  if (lt.getRank() == 0 || rt.getRank() == 0)
    return n.error() << "operands must not be scalars";
  // NumPy promotes 1-D operands to matrices and drops the added dimension.
  bool vecL = lt.getRank() == 1, vecR = rt.getRank() == 1;
  if (vecL)
    lhs = ReshapeOp::create(n.b, n.loc, withShape(lt, {1, lt.getDimSize(0)}),
                            lhs);
  if (vecR)
    rhs = ReshapeOp::create(n.b, n.loc, withShape(rt, {rt.getDimSize(0), 1}),
                            rhs);
  MatmulOp op = n.create<MatmulOp>({lhs, rhs});
  if (!op)
    return failure();
  Value result = op.getResult();
  if (vecL || vecR) {
    SmallVector<int64_t> shape(op.getType().getShape());
    if (vecR)
      shape.erase(shape.end() - 1);
    if (vecL)
      shape.erase(shape.end() - (vecR ? 1 : 2));
    result = ReshapeOp::create(n.b, n.loc, withShape(op.getType(), shape),
                               result);
  }
  n.set(0, result);
  return success();
}

Value scaleBy(NodeContext &n, Value v, float factor) {
  auto type = cast<RankedTensorType>(v.getType());
  auto scalar = RankedTensorType::get({}, type.getElementType());
  Value c = ConstantOp::create(
      n.b, n.loc, scalar,
      ConstTensor::scalarLike(type.getElementType(), factor).toAttr());
  return MulOp::create(n.b, n.loc, type, v, c);
}

LogicalResult convertGemm(NodeContext &n) {
  Value a = n.value(0), b = n.value(1);
  RankedTensorType at = n.type(0), bt = n.type(1);
  if (at.getRank() != 2 || bt.getRank() != 2)
    return n.error() << "expects matrices, got " << at << " and " << bt;
  auto transpose = [&](Value v) -> Value {
    return n.create<TransposeOp>(
        {v}, {n.b.getNamedAttr("perm", n.b.getDenseI64ArrayAttr({1, 0}))});
  };
  if (n.getInt("transA", 0))
    a = transpose(a);
  if (n.getInt("transB", 0))
    b = transpose(b);
  MatmulOp mm = n.create<MatmulOp>({a, b});
  if (!mm)
    return failure();
  Value y = mm.getResult();
  float alpha = n.getFloat("alpha", 1.0f), beta = n.getFloat("beta", 1.0f);
  if (alpha != 1.0f)
    y = scaleBy(n, y, alpha);
  if (n.hasInput(2) && beta != 0.0f) {
    Value c = n.value(2);
    if (beta != 1.0f)
      c = scaleBy(n, c, beta);
    AddOp add = n.create<AddOp>({y, c});
    if (!add)
      return failure();
    y = add.getResult();
  }
  n.set(0, y);
  return success();
}

template <typename OpTy>
LogicalResult softmaxLike(NodeContext &n) {
  RankedTensorType type = n.type(0);
  int64_t dflt = n.opset >= 13 ? -1 : 1;
  auto axis = n.axis(n.getInt("axis", dflt), type.getRank());
  if (failed(axis))
    return failure();
  n.set(0, OpTy::create(n.b, n.loc, type, n.value(0),
                        n.b.getI64IntegerAttr(*axis)));
  return success();
}

template <ReductionKind Kind>
LogicalResult reduce(NodeContext &n) {
  RankedTensorType type = n.type(0);
  int64_t rank = type.getRank();
  // Axes are an input for ReduceSum since opset 13 and for the others
  // since 18; before that, an attribute.
  bool axesAsInput = n.node.op_type() == "ReduceSum" || n.opset >= 18;
  SmallVector<int64_t> axes;
  if (axesAsInput && n.hasInput(1)) {
    auto a = n.constInts(1, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else if (auto a = n.getInts("axes")) {
    axes = *a;
  }
  if (axes.empty()) {
    if (n.getInt("noop_with_empty_axes", 0)) {
      n.forward(0, 0);
      return success();
    }
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  for (int64_t &a : axes) {
    auto ax = n.axis(a, rank, "axes entry");
    if (failed(ax))
      return failure();
    a = *ax;
  }
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  SmallVector<NamedAttribute> attrs = {
      n.b.getNamedAttr("kind", ReductionKindAttr::get(n.ctx, Kind)),
      n.b.getNamedAttr("dims", n.b.getDenseI64ArrayAttr(axes))};
  if (n.getInt("keepdims", 1))
    attrs.push_back(n.b.getNamedAttr("keepdim", n.b.getUnitAttr()));
  ReduceOp op = n.create<ReduceOp>({n.value(0)}, attrs);
  if (!op)
    return failure();
  n.set(0, op.getResult());
  return success();
}

LogicalResult convertLayerNorm(NodeContext &n) {
  RankedTensorType type = n.type(0);
  auto axis = n.axis(n.getInt("axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  Value bias = n.hasInput(2) ? n.value(2) : Value();
  float eps = n.getFloat("epsilon", 1e-5f);
  n.set(0, LayerNormOp::create(n.b, n.loc, type, n.value(0), n.value(1), bias,
                               n.b.getI64IntegerAttr(*axis),
                               n.b.getF64FloatAttr(eps)));
  if (!n.outputUsed(1) && !n.outputUsed(2))
    return success();
  // The optional statistics outputs: mean and 1/sqrt(var + eps), keepdim.
  SmallVector<int64_t> dims;
  for (int64_t d = *axis; d < type.getRank(); ++d)
    dims.push_back(d);
  SmallVector<NamedAttribute> attrs = {
      n.b.getNamedAttr("kind", ReductionKindAttr::get(n.ctx, ReductionKind::Mean)),
      n.b.getNamedAttr("dims", n.b.getDenseI64ArrayAttr(dims)),
      n.b.getNamedAttr("keepdim", n.b.getUnitAttr())};
  ReduceOp mean = n.create<ReduceOp>({n.value(0)}, attrs);
  if (!mean)
    return failure();
  n.set(1, mean.getResult());
  if (n.outputUsed(2)) {
    Value centered = n.create<SubOp>({n.value(0), mean});
    Value squared = n.create<MulOp>({centered, centered});
    ReduceOp var = n.create<ReduceOp>({squared}, attrs);
    auto scalar = RankedTensorType::get({}, type.getElementType());
    Value epsValue = ConstantOp::create(
        n.b, n.loc, scalar,
        ConstTensor::scalarLike(type.getElementType(), eps).toAttr());
    Value shifted = n.create<AddOp>({var, epsValue});
    n.set(2, RsqrtOp::create(n.b, n.loc, shifted.getType(), shifted));
  }
  return success();
}

LogicalResult convertTopK(NodeContext &n) {
  RankedTensorType type = n.type(0);
  auto axis = n.axis(n.getInt("axis", -1), type.getRank());
  auto k = n.constInts(1, "k");
  if (failed(axis) || failed(k))
    return failure();
  if (k->size() != 1)
    return n.error() << "k must have one element, got " << k->size();
  SmallVector<NamedAttribute> attrs = {
      n.b.getNamedAttr("k", n.b.getI64IntegerAttr((*k)[0])),
      n.b.getNamedAttr("dim", n.b.getI64IntegerAttr(*axis))};
  if (!n.getInt("largest", 1))
    attrs.push_back(n.b.getNamedAttr("smallest", n.b.getUnitAttr()));
  TopKOp op = n.create<TopKOp>({n.value(0)}, attrs);
  if (!op)
    return failure();
  n.set(0, op.getValues());
  n.set(1, op.getIndices());
  return success();
}

LogicalResult convertDropout(NodeContext &n) {
  // Inference semantics: training_mode must be off (or absent).
  if (n.hasInput(2)) {
    const ConstTensor *mode = n.constant(2);
    if (!mode || mode->values[0] != 0)
      return n.error() << "training-mode Dropout is not supported (export "
                          "the model in eval mode)";
  }
  n.forward(0, 0);
  if (n.outputUsed(1)) {
    // In inference nothing is dropped: the mask keeps every element.
    RankedTensorType type = n.type(0);
    ConstTensor mask{n.b.getI1Type(), llvm::to_vector(type.getShape()), {}};
    mask.values.assign(type.getNumElements(), 1.0);
    n.set(1, mask);
  }
  return success();
}

} // namespace

const llvm::StringMap<OpConverter> &cleave::onnx_import::getConverters() {
  static const llvm::StringMap<OpConverter> converters = [] {
    llvm::StringMap<OpConverter> table;
    addElementwiseConverters(table);
    addShapeConverters(table);
    table["Dropout"] = {convertDropout, 1};
    table["Gemm"] = {convertGemm, 2};
    table["LayerNormalization"] = {convertLayerNorm, 2};
    table["LogSoftmax"] = {softmaxLike<LogSoftmaxOp>, 1};
    table["MatMul"] = {convertMatMul, 2};
    table["ReduceMax"] = {reduce<ReductionKind::Max>, 1};
    table["ReduceMean"] = {reduce<ReductionKind::Mean>, 1};
    table["ReduceMin"] = {reduce<ReductionKind::Min>, 1};
    table["ReduceSum"] = {reduce<ReductionKind::Sum>, 1};
    table["Softmax"] = {softmaxLike<SoftmaxOp>, 1};
    table["TopK"] = {convertTopK, 2};
    return table;
  }();
  return converters;
}
