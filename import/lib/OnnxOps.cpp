//===- OnnxOps.cpp - ONNX op converters ---------------------------------===//
//
// One converter per ONNX op type (opsets 13 to 18). Each folds when all its
// inputs are known at import time (shape arithmetic), and otherwise emits
// `graph` ops whose result types are inferred.
//
//===----------------------------------------------------------------------===//

#include "Importer.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"

#include <cmath>

using namespace mlir;
using namespace cleave;
using namespace cleave::onnx_import;
using namespace cleave::graph;

namespace {

RankedTensorType withShape(RankedTensorType t, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, t.getElementType());
}

ConstTensor reshaped(const ConstTensor &c, ArrayRef<int64_t> shape) {
  ConstTensor out = c;
  out.shape.assign(shape.begin(), shape.end());
  return out;
}

/// Emits a reshape, or forwards the input when the shape does not change.
LogicalResult emitReshape(NodeContext &n, ArrayRef<int64_t> shape) {
  if (const ConstTensor *c = n.constant(0)) {
    n.set(0, reshaped(*c, shape));
    return success();
  }
  RankedTensorType in = n.type(0);
  if (in.getShape() == shape) {
    n.forward(0, 0);
    return success();
  }
  n.set(0, ReshapeOp::create(n.b, n.loc, withShape(in, shape), n.value(0)));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename OpTy>
LogicalResult unary(NodeContext &n, double (*fold)(double)) {
  if (const ConstTensor *c = n.constant(0); c && fold) {
    n.set(0, foldElementwise({c}, c->elementType,
                             [&](ArrayRef<double> v) { return fold(v[0]); }));
    return success();
  }
  Value x = n.value(0);
  n.set(0, OpTy::create(n.b, n.loc, x.getType(), x));
  return success();
}

template <typename OpTy, double (*Fold)(double)>
LogicalResult unaryOp(NodeContext &n) {
  return unary<OpTy>(n, Fold);
}

double neg(double x) { return -x; }
double reciprocal(double x) { return 1.0 / x; }
double relu(double x) { return x > 0 ? x : 0; }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double abs_(double x) { return std::fabs(x); }
double exp_(double x) { return std::exp(x); }
double log_(double x) { return std::log(x); }
double sqrt_(double x) { return std::sqrt(x); }
double tanh_(double x) { return std::tanh(x); }
double erf_(double x) { return std::erf(x); }
double sin_(double x) { return std::sin(x); }
double cos_(double x) { return std::cos(x); }

/// Binary ops: fold known operands, else emit the graph op. Operands of
/// different element types (Pow's exponent) are cast to the first's.
template <typename OpTy>
LogicalResult binary(NodeContext &n, double (*fold)(double, double)) {
  const ConstTensor *a = n.constant(0), *b = n.constant(1);
  if (a && b) {
    n.set(0, foldElementwise({a, b}, a->elementType, [&](ArrayRef<double> v) {
            return fold(v[0], v[1]);
          }));
    return success();
  }
  Value lhs = n.value(0), rhs = n.value(1);
  Type elem = n.type(0).getElementType();
  if (n.type(1).getElementType() != elem)
    rhs = CastOp::create(n.b, n.loc, n.type(1).clone(elem), rhs);
  OpTy op = n.create<OpTy>({lhs, rhs});
  if (!op)
    return failure();
  n.set(0, op.getResult());
  return success();
}

template <typename OpTy, double (*Fold)(double, double)>
LogicalResult binaryOp(NodeContext &n) {
  return binary<OpTy>(n, Fold);
}


double add(double a, double b) { return a + b; }
double sub(double a, double b) { return a - b; }
double mul(double a, double b) { return a * b; }
double div_(double a, double b) { return a / b; }
double pow_(double a, double b) { return std::pow(a, b); }
double max_(double a, double b) { return std::max(a, b); }
double min_(double a, double b) { return std::min(a, b); }

LogicalResult convertPow(NodeContext &n) {
  if (!n.allInputsConstant() && !isa<FloatType>(n.type(0).getElementType()))
    return n.error() << "Pow of " << n.type(0)
                     << ": unsupported element type (graph.pow is for floats)";
  return binary<PowOp>(n, pow_);
}

/// Max and Min take any number of inputs.
template <typename OpTy, double (*Fold)(double, double)>
LogicalResult variadic(NodeContext &n) {
  if (n.numInputs() == 1) {
    n.forward(0, 0);
    return success();
  }
  if (n.numInputs() == 2)
    return binary<OpTy>(n, Fold);
  if (n.allInputsConstant()) {
    ConstTensor acc = *n.constant(0);
    for (unsigned i = 1; i < n.numInputs(); ++i)
      acc = foldElementwise({&acc, n.constant(i)}, acc.elementType,
                            [](ArrayRef<double> v) { return Fold(v[0], v[1]); });
    n.set(0, acc);
    return success();
  }
  Value acc = n.value(0);
  for (unsigned i = 1; i < n.numInputs(); ++i) {
    OpTy op = n.create<OpTy>({acc, n.value(i)});
    if (!op)
      return failure();
    acc = op.getResult();
  }
  n.set(0, acc);
  return success();
}

template <CompareDirection Dir>
LogicalResult compare(NodeContext &n) {
  const ConstTensor *a = n.constant(0), *b = n.constant(1);
  if (a && b) {
    n.set(0, foldElementwise({a, b}, IntegerType::get(n.ctx, 1),
                             [](ArrayRef<double> v) -> double {
                               switch (Dir) {
                               case CompareDirection::EQ:
                                 return v[0] == v[1];
                               case CompareDirection::NE:
                                 return v[0] != v[1];
                               case CompareDirection::LT:
                                 return v[0] < v[1];
                               case CompareDirection::LE:
                                 return v[0] <= v[1];
                               case CompareDirection::GT:
                                 return v[0] > v[1];
                               case CompareDirection::GE:
                                 return v[0] >= v[1];
                               }
                               return 0;
                             }));
    return success();
  }
  CompareOp op = n.create<CompareOp>(
      {n.value(0), n.value(1)},
      {n.b.getNamedAttr("direction",
                        CompareDirectionAttr::get(n.ctx, Dir))});
  if (!op)
    return failure();
  n.set(0, op.getResult());
  return success();
}

/// A boolean constant shaped as a scalar.
Value boolScalar(NodeContext &n, bool v) {
  auto type = RankedTensorType::get({}, n.b.getI1Type());
  return ConstantOp::create(n.b, n.loc, type,
                            DenseElementsAttr::get(type, v));
}

LogicalResult emitWhere(NodeContext &n, Value c, Value x, Value y) {
  WhereOp op = n.create<WhereOp>({c, x, y});
  if (!op)
    return failure();
  n.set(0, op.getResult());
  return success();
}

LogicalResult convertWhere(NodeContext &n) {
  if (n.allInputsConstant()) {
    const ConstTensor *x = n.constant(1);
    n.set(0, foldElementwise({n.constant(0), x, n.constant(2)},
                             x->elementType, [](ArrayRef<double> v) {
                               return v[0] != 0 ? v[1] : v[2];
                             }));
    return success();
  }
  return emitWhere(n, n.value(0), n.value(1), n.value(2));
}

/// Not, And, Or, Xor on i1, as selects.
template <int Kind> // 0 not, 1 and, 2 or, 3 xor
LogicalResult logical(NodeContext &n) {
  if (n.allInputsConstant()) {
    SmallVector<const ConstTensor *> ins;
    for (unsigned i = 0; i < n.numInputs(); ++i)
      ins.push_back(n.constant(i));
    n.set(0, foldElementwise(ins, IntegerType::get(n.ctx, 1),
                             [](ArrayRef<double> v) -> double {
                               bool a = v[0] != 0;
                               if (Kind == 0)
                                 return !a;
                               bool b = v[1] != 0;
                               return Kind == 1 ? (a && b)
                                                : Kind == 2 ? (a || b) : a != b;
                             }));
    return success();
  }
  Value a = n.value(0);
  if (Kind == 0)
    return emitWhere(n, a, boolScalar(n, false), boolScalar(n, true));
  Value b = n.value(1);
  if (Kind == 1)
    return emitWhere(n, a, b, boolScalar(n, false));
  if (Kind == 2)
    return emitWhere(n, a, boolScalar(n, true), b);
  WhereOp notB = n.create<WhereOp>({b, boolScalar(n, false), boolScalar(n, true)});
  if (!notB)
    return failure();
  return emitWhere(n, a, notB, b);
}

LogicalResult convertCast(NodeContext &n) {
  Type to = convertElementType(n.getInt("to", 0), n.ctx);
  if (!to)
    return n.error() << "cannot cast to unsupported element type "
                     << onnxTypeName(n.getInt("to", 0));
  if (const ConstTensor *c = n.constant(0)) {
    ConstTensor out = *c;
    out.elementType = to;
    out.normalize();
    n.set(0, out);
    return success();
  }
  RankedTensorType in = n.type(0);
  if (in.getElementType() == to) {
    n.forward(0, 0);
    return success();
  }
  n.set(0, CastOp::create(n.b, n.loc, in.clone(to), n.value(0)));
  return success();
}

//===----------------------------------------------------------------------===//
// Constants and shapes
//===----------------------------------------------------------------------===//

FailureOr<ConstTensor> readTensorAttr(NodeContext &n,
                                      const onnx::TensorProto &t);

LogicalResult convertConstant(NodeContext &n) {
  Type f32 = n.b.getF32Type(), i64 = n.b.getI64Type();
  if (const onnx::AttributeProto *a = n.attr("value")) {
    auto c = readTensorAttr(n, a->t());
    if (failed(c))
      return failure();
    n.set(0, *c);
  } else if (const onnx::AttributeProto *a = n.attr("value_float")) {
    n.set(0, ConstTensor::scalarLike(f32, a->f()));
  } else if (const onnx::AttributeProto *a = n.attr("value_int")) {
    n.set(0, ConstTensor::scalarLike(i64, a->i()));
  } else if (const onnx::AttributeProto *a = n.attr("value_floats")) {
    ConstTensor c{f32, {a->floats_size()}, {}};
    c.values.assign(a->floats().begin(), a->floats().end());
    n.set(0, c);
  } else if (const onnx::AttributeProto *a = n.attr("value_ints")) {
    SmallVector<int64_t> ints(a->ints().begin(), a->ints().end());
    n.set(0, ConstTensor::fromInts(i64, {a->ints_size()}, ints));
  } else {
    return n.error() << "only tensor, float(s) and int(s) values are "
                        "supported (sparse and string constants are not)";
  }
  return success();
}

LogicalResult convertConstantOfShape(NodeContext &n) {
  auto shape = n.constInts(0, "shape");
  if (failed(shape))
    return failure();
  ConstTensor fill = ConstTensor::scalarLike(n.b.getF32Type(), 0.0);
  if (const onnx::AttributeProto *a = n.attr("value")) {
    auto c = readTensorAttr(n, a->t());
    if (failed(c))
      return failure();
    if (c->size() != 1)
      return n.error() << "value must have one element";
    fill = *c;
  }
  ConstTensor out{fill.elementType, *shape, {}};
  int64_t count = 1;
  for (int64_t d : *shape) {
    if (d < 0)
      return n.error() << "shape has negative dimension " << d;
    count *= d;
  }
  out.values.assign(count, fill.values[0]);
  n.set(0, out);
  return success();
}

LogicalResult convertShape(NodeContext &n) {
  ArrayRef<int64_t> shape = n.type(0).getShape();
  int64_t rank = shape.size();
  int64_t start = n.getInt("start", 0), end = n.getInt("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  SmallVector<int64_t> dims(shape.begin() + start,
                            shape.begin() + std::max(start, end));
  n.set(0, ConstTensor::fromInts(n.b.getI64Type(),
                                 {static_cast<int64_t>(dims.size())}, dims));
  return success();
}

LogicalResult convertSize(NodeContext &n) {
  n.set(0, ConstTensor::scalarLike(n.b.getI64Type(),
                                   n.type(0).getNumElements()));
  return success();
}

LogicalResult convertIdentity(NodeContext &n) {
  n.forward(0, 0);
  return success();
}

LogicalResult convertRange(NodeContext &n) {
  const ConstTensor *start = n.constant(0), *limit = n.constant(1),
                    *delta = n.constant(2);
  if (!start || !limit || !delta)
    return n.error() << "start, limit and delta must be known at import time";
  double s = start->values[0], l = limit->values[0], d = delta->values[0];
  if (d == 0)
    return n.error() << "delta must not be zero";
  int64_t count = std::max<int64_t>(
      static_cast<int64_t>(std::ceil((l - s) / d)), 0);
  ConstTensor out{start->elementType, {count}, {}};
  for (int64_t i = 0; i < count; ++i)
    out.values.push_back(s + i * d);
  n.set(0, out);
  return success();
}

LogicalResult convertReshape(NodeContext &n) {
  auto target = n.constInts(1, "shape");
  if (failed(target))
    return failure();
  ArrayRef<int64_t> in = n.type(0).getShape();
  bool allowZero = n.getInt("allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  int64_t known = 1, inferAt = -1;
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return n.error() << "shape entry " << i << " copies a dimension the "
                         << "input does not have";
      d = in[i];
    }
    if (d == -1) {
      if (inferAt >= 0)
        return n.error() << "shape has more than one -1";
      inferAt = i;
      shape.push_back(1);
      continue;
    }
    if (d < 0)
      return n.error() << "shape has invalid entry " << d;
    known *= d;
    shape.push_back(d);
  }
  int64_t total = n.type(0).getNumElements();
  if (inferAt >= 0) {
    if (known == 0 || total % known != 0)
      return n.error() << "cannot infer the -1 of the shape: " << total
                       << " elements do not divide by " << known;
    shape[inferAt] = total / known;
  } else if (known != total) {
    return n.error() << "cannot reshape " << n.type(0) << " (" << total
                     << " elements) into " << known << " elements";
  }
  return emitReshape(n, shape);
}

LogicalResult convertFlatten(NodeContext &n) {
  ArrayRef<int64_t> in = n.type(0).getShape();
  int64_t rank = in.size();
  int64_t axis = n.getInt("axis", 1);
  if (axis < -rank || axis > rank)
    return n.error() << "axis " << axis << " is out of range for rank "
                     << rank;
  if (axis < 0)
    axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? outer : inner) *= in[d];
  return emitReshape(n, {outer, inner});
}

/// Unsqueeze/Squeeze axes: an input since opset 13.
FailureOr<SmallVector<int64_t>> axesOf(NodeContext &n, unsigned input) {
  if (n.hasInput(input))
    return n.constInts(input, "axes");
  if (auto attr = n.getInts("axes"))
    return *attr;
  return SmallVector<int64_t>();
}

LogicalResult convertUnsqueeze(NodeContext &n) {
  auto axes = axesOf(n, 1);
  if (failed(axes))
    return failure();
  ArrayRef<int64_t> in = n.type(0).getShape();
  int64_t outRank = in.size() + axes->size();
  SmallVector<bool> inserted(outRank, false);
  for (int64_t a : *axes) {
    auto ax = n.axis(a, outRank, "axes entry");
    if (failed(ax))
      return failure();
    if (inserted[*ax])
      return n.error() << "axes has " << *ax << " twice";
    inserted[*ax] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0, i = 0; d < outRank; ++d)
    shape.push_back(inserted[d] ? 1 : in[i++]);
  return emitReshape(n, shape);
}

LogicalResult convertSqueeze(NodeContext &n) {
  auto axes = axesOf(n, 1);
  if (failed(axes))
    return failure();
  ArrayRef<int64_t> in = n.type(0).getShape();
  int64_t rank = in.size();
  SmallVector<bool> drop(rank, axes->empty());
  if (axes->empty())
    for (int64_t d = 0; d < rank; ++d)
      drop[d] = in[d] == 1;
  for (int64_t a : *axes) {
    auto ax = n.axis(a, rank, "axes entry");
    if (failed(ax))
      return failure();
    if (in[*ax] != 1)
      return n.error() << "cannot squeeze dimension " << *ax << " of size "
                       << in[*ax];
    drop[*ax] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d)
    if (!drop[d])
      shape.push_back(in[d]);
  return emitReshape(n, shape);
}

LogicalResult convertTranspose(NodeContext &n) {
  int64_t rank = n.type(0).getRank();
  SmallVector<int64_t> perm;
  if (auto p = n.getInts("perm"))
    perm = *p;
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  if (const ConstTensor *c = n.constant(0)) {
    if (static_cast<int64_t>(perm.size()) != rank)
      return n.error() << "perm has " << perm.size() << " entries for rank "
                       << rank;
    for (int64_t p : perm)
      if (p < 0 || p >= rank)
        return n.error() << "perm entry " << p << " is out of range";
    n.set(0, foldTranspose(*c, perm));
    return success();
  }
  TransposeOp op = n.create<TransposeOp>(
      {n.value(0)}, {n.b.getNamedAttr("perm", n.b.getDenseI64ArrayAttr(perm))});
  if (!op)
    return failure();
  n.set(0, op.getResult());
  return success();
}

LogicalResult convertExpand(NodeContext &n) {
  auto target = n.constInts(1, "shape");
  if (failed(target))
    return failure();
  ArrayRef<int64_t> in = n.type(0).getShape();
  SmallVector<int64_t> shape;
  if (!broadcastShape(in, *target, shape))
    return n.error() << "cannot expand " << n.type(0) << " to the shape "
                     << "given";
  if (const ConstTensor *c = n.constant(0)) {
    ConstTensor zeros{c->elementType, shape, {}};
    zeros.values.assign(ShapedType::getNumElements(shape), 0.0);
    n.set(0, foldElementwise({c, &zeros}, c->elementType,
                             [](ArrayRef<double> v) { return v[0]; }));
    return success();
  }
  if (ArrayRef<int64_t>(shape) == in) {
    n.forward(0, 0);
    return success();
  }
  SmallVector<int64_t> dims;
  for (size_t i = 0; i < in.size(); ++i)
    dims.push_back(shape.size() - in.size() + i);
  n.set(0, BroadcastInDimOp::create(n.b, n.loc, withShape(n.type(0), shape),
                                    n.value(0),
                                    n.b.getDenseI64ArrayAttr(dims)));
  return success();
}

LogicalResult convertConcat(NodeContext &n) {
  if (n.numInputs() == 0)
    return n.error() << "needs at least one input";
  auto axis = n.axis(n.getInt("axis", 0), n.type(0).getRank());
  if (failed(axis))
    return failure();
  if (n.allInputsConstant()) {
    SmallVector<const ConstTensor *> ins;
    for (unsigned i = 0; i < n.numInputs(); ++i) {
      ins.push_back(n.constant(i));
      if (ins.back()->rank() != ins.front()->rank())
        return n.error() << "inputs have different ranks";
    }
    n.set(0, foldConcat(ins, *axis));
    return success();
  }
  SmallVector<Value> ins;
  for (unsigned i = 0; i < n.numInputs(); ++i)
    ins.push_back(n.value(i));
  ConcatOp op = n.create<ConcatOp>(
      ins, {n.b.getNamedAttr("dim", n.b.getI64IntegerAttr(*axis))});
  if (!op)
    return failure();
  n.set(0, op.getResult());
  return success();
}

LogicalResult convertSplit(NodeContext &n) {
  RankedTensorType in = n.type(0);
  auto axis = n.axis(n.getInt("axis", 0), in.getRank());
  if (failed(axis))
    return failure();
  int64_t size = in.getDimSize(*axis);
  SmallVector<int64_t> sizes;
  if (n.hasInput(1)) {
    auto s = n.constInts(1, "split");
    if (failed(s))
      return failure();
    sizes = *s;
  } else if (auto s = n.getInts("split")) {
    sizes = *s;
  } else {
    int64_t parts = n.getInt("num_outputs", n.numOutputs());
    if (parts < 1)
      return n.error() << "num_outputs must be >= 1";
    int64_t chunk = (size + parts - 1) / parts;
    for (int64_t i = 0, left = size; i < parts; ++i, left -= chunk)
      sizes.push_back(std::min(chunk, left));
  }
  if (static_cast<int64_t>(sizes.size()) != n.numOutputs())
    return n.error() << "has " << n.numOutputs() << " outputs but "
                     << sizes.size() << " split sizes";
  if (const ConstTensor *c = n.constant(0)) {
    SmallVector<int64_t> start(in.getRank(), 0);
    SmallVector<int64_t> limit(in.getShape());
    SmallVector<int64_t> strides(in.getRank(), 1);
    for (auto [i, s] : llvm::enumerate(sizes)) {
      limit[*axis] = start[*axis] + s;
      n.set(i, foldSlice(*c, start, limit, strides));
      start[*axis] += s;
    }
    return success();
  }
  SplitOp op = n.create<SplitOp>(
      {n.value(0)}, {n.b.getNamedAttr("dim", n.b.getI64IntegerAttr(*axis)),
                     n.b.getNamedAttr("sizes", n.b.getDenseI64ArrayAttr(sizes))});
  if (!op)
    return failure();
  for (auto [i, r] : llvm::enumerate(op.getResults()))
    n.set(i, r);
  return success();
}

LogicalResult convertSlice(NodeContext &n) {
  RankedTensorType in = n.type(0);
  int64_t rank = in.getRank();
  auto starts = n.constInts(1, "starts");
  auto ends = n.constInts(2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps(starts->size(), 1);
  if (n.hasInput(3)) {
    auto a = n.constInts(3, "axes");
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (n.hasInput(4)) {
    auto s = n.constInts(4, "steps");
    if (failed(s))
      return failure();
    steps = *s;
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return n.error() << "starts, ends, axes and steps differ in length";
  SmallVector<int64_t> start(rank, 0), limit(in.getShape()), stride(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto ax = n.axis(axes[i], rank, "axes entry");
    if (failed(ax))
      return failure();
    int64_t dim = in.getDimSize(*ax);
    if (steps[i] <= 0)
      return n.error() << "step " << steps[i] << " on axis " << *ax
                       << " is not supported (only positive steps)";
    auto clampIndex = [&](int64_t v) {
      if (v < 0)
        v += dim;
      return std::clamp<int64_t>(v, 0, dim);
    };
    start[*ax] = clampIndex((*starts)[i]);
    limit[*ax] = clampIndex((*ends)[i]);
    stride[*ax] = steps[i];
    limit[*ax] = std::max(limit[*ax], start[*ax]);
  }
  // Shape arithmetic may slice known tensors down to nothing; real tensors
  // may not be empty.
  if (const ConstTensor *c = n.constant(0)) {
    n.set(0, foldSlice(*c, start, limit, stride));
    return success();
  }
  for (int64_t d = 0; d < rank; ++d)
    if (limit[d] == start[d])
      return n.error() << "slice of axis " << d
                       << " is empty; empty tensors are not supported";
  bool full = true, unitStrides = true;
  for (int64_t d = 0; d < rank; ++d) {
    full &= start[d] == 0 && limit[d] == in.getDimSize(d) && stride[d] == 1;
    unitStrides &= stride[d] == 1;
  }
  if (full) {
    n.forward(0, 0);
    return success();
  }
  SmallVector<NamedAttribute> attrs = {
      n.b.getNamedAttr("start", n.b.getDenseI64ArrayAttr(start)),
      n.b.getNamedAttr("limit", n.b.getDenseI64ArrayAttr(limit))};
  if (!unitStrides)
    attrs.push_back(
        n.b.getNamedAttr("strides", n.b.getDenseI64ArrayAttr(stride)));
  SliceOp op = n.create<SliceOp>({n.value(0)}, attrs);
  if (!op)
    return failure();
  n.set(0, op.getResult());
  return success();
}

LogicalResult convertGather(NodeContext &n) {
  RankedTensorType data = n.type(0);
  auto axis = n.axis(n.getInt("axis", 0), data.getRank());
  if (failed(axis))
    return failure();
  Value indices;
  if (const ConstTensor *idx = n.constant(1)) {
    // Known indices: bring negatives into range, as ONNX allows.
    ConstTensor fixed = *idx;
    int64_t dim = data.getDimSize(*axis);
    for (double &v : fixed.values) {
      if (v < -dim || v >= dim)
        return n.error() << "index " << static_cast<int64_t>(v)
                         << " is out of range for axis "
                         << *axis << " of size " << dim;
      if (v < 0)
        v += dim;
    }
    if (const ConstTensor *c = n.constant(0)) {
      n.set(0, foldGather(*c, fixed, *axis));
      return success();
    }
    indices = ConstantOp::create(n.b, n.loc, fixed.getType(), fixed.toAttr());
  } else {
    indices = n.value(1);
  }
  GatherOp op = n.create<GatherOp>(
      {n.value(0), indices},
      {n.b.getNamedAttr("dim", n.b.getI64IntegerAttr(*axis))});
  if (!op)
    return failure();
  n.set(0, op.getResult());
  return success();
}

LogicalResult convertTrilu(NodeContext &n) {
  RankedTensorType type = n.type(0);
  int64_t rank = type.getRank();
  if (rank < 2)
    return n.error() << "input must have rank >= 2, got " << type;
  int64_t k = 0;
  if (n.hasInput(1)) {
    auto kv = n.constInts(1, "k");
    if (failed(kv))
      return failure();
    if (kv->size() != 1)
      return n.error() << "k must have one element, got " << kv->size();
    k = (*kv)[0];
  }
  bool upper = n.getInt("upper", 1) != 0;
  int64_t rows = type.getDimSize(rank - 2), cols = type.getDimSize(rank - 1);
  auto keep = [&](int64_t r, int64_t c) {
    return upper ? c - r >= k : c - r <= k;
  };
  if (const ConstTensor *c = n.constant(0)) {
    ConstTensor out = *c;
    for (int64_t i = 0; i < out.size(); ++i) {
      int64_t col = i % cols, row = (i / cols) % rows;
      if (!keep(row, col))
        out.values[i] = 0;
    }
    n.set(0, out);
    return success();
  }
  // Keep x where (col - row) compared with k holds, else zero.
  auto i64 = n.b.getI64Type();
  auto matrix = RankedTensorType::get({rows, cols}, i64);
  Value row = IotaOp::create(n.b, n.loc, matrix, n.b.getI64IntegerAttr(0));
  Value col = IotaOp::create(n.b, n.loc, matrix, n.b.getI64IntegerAttr(1));
  Value diff = n.create<SubOp>({col, row});
  auto scalar = RankedTensorType::get({}, i64);
  Value kc = ConstantOp::create(n.b, n.loc, scalar,
                                DenseElementsAttr::get(scalar, k));
  Value mask = n.create<CompareOp>(
      {diff, kc},
      {n.b.getNamedAttr("direction",
                        CompareDirectionAttr::get(
                            n.ctx, upper ? CompareDirection::GE
                                         : CompareDirection::LE))});
  auto zeroType = RankedTensorType::get({}, type.getElementType());
  Value zero = ConstantOp::create(
      n.b, n.loc, zeroType,
      ConstTensor::scalarLike(type.getElementType(), 0).toAttr());
  return emitWhere(n, mask, n.value(0), zero);
}

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

FailureOr<ConstTensor> readTensorAttr(NodeContext &n,
                                      const onnx::TensorProto &t) {
  Type elem = convertElementType(t.data_type(), n.ctx);
  if (!elem)
    return n.error() << "tensor value has unsupported element type "
                     << t.data_type();
  ConstTensor c{elem, SmallVector<int64_t>(t.dims().begin(), t.dims().end()),
                {}};
  int64_t count = ShapedType::getNumElements(c.shape);
  if (t.has_raw_data()) {
    const std::string &raw = t.raw_data();
    auto read = [&](auto dummy) {
      using T = decltype(dummy);
      if (raw.size() != count * sizeof(T))
        return false;
      for (int64_t i = 0; i < count; ++i) {
        T v;
        std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
        c.values.push_back(static_cast<double>(v));
      }
      return true;
    };
    bool ok = false;
    switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      ok = read(float());
      break;
    case onnx::TensorProto::DOUBLE:
      ok = read(double());
      break;
    case onnx::TensorProto::INT64:
      ok = read(int64_t());
      break;
    case onnx::TensorProto::INT32:
      ok = read(int32_t());
      break;
    case onnx::TensorProto::BOOL:
      ok = read(uint8_t());
      break;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: {
      ok = raw.size() == count * 2u;
      for (int64_t i = 0; ok && i < count; ++i) {
        uint16_t bits;
        std::memcpy(&bits, raw.data() + 2 * i, 2);
        const llvm::fltSemantics &sem =
            t.data_type() == onnx::TensorProto::FLOAT16
                ? llvm::APFloat::IEEEhalf()
                : llvm::APFloat::BFloat();
        c.values.push_back(APFloat(sem, APInt(16, bits)).convertToDouble());
      }
      break;
    }
    default:
      break;
    }
    if (!ok)
      return n.error() << "tensor value has " << raw.size()
                       << " bytes, which does not match its shape";
    return c;
  }
  for (float v : t.float_data())
    c.values.push_back(v);
  for (double v : t.double_data())
    c.values.push_back(v);
  for (int64_t v : t.int64_data())
    c.values.push_back(static_cast<double>(v));
  if (t.data_type() == onnx::TensorProto::FLOAT16 ||
      t.data_type() == onnx::TensorProto::BFLOAT16) {
    for (int32_t v : t.int32_data()) {
      const llvm::fltSemantics &sem =
          t.data_type() == onnx::TensorProto::FLOAT16
              ? llvm::APFloat::IEEEhalf()
              : llvm::APFloat::BFloat();
      c.values.push_back(
          APFloat(sem, APInt(16, static_cast<uint16_t>(v))).convertToDouble());
    }
  } else {
    for (int32_t v : t.int32_data())
      c.values.push_back(v);
  }
  if (c.size() != count)
    return n.error() << "tensor value has " << c.size()
                     << " elements but its shape needs " << count;
  c.normalize();
  return c;
}
} // namespace

const llvm::StringMap<OpConverter> &cleave::onnx_import::getConverters() {
  // Each op type with its converter and number of required inputs.
  static const llvm::StringMap<OpConverter> converters = {
      {"Abs", {unaryOp<AbsOp, abs_>, 1}},
      {"Add", {binaryOp<AddOp, add>, 2}},
      {"And", {logical<1>, 2}},
      {"Cast", {convertCast, 1}},
      {"Concat", {convertConcat, 1}},
      {"Constant", {convertConstant, 0}},
      {"ConstantOfShape", {convertConstantOfShape, 1}},
      {"Cos", {unaryOp<CosOp, cos_>, 1}},
      {"Div", {binaryOp<DivOp, div_>, 2}},
      {"Dropout", {convertDropout, 1}},
      {"Equal", {compare<CompareDirection::EQ>, 2}},
      {"Erf", {unaryOp<ErfOp, erf_>, 1}},
      {"Exp", {unaryOp<ExpOp, exp_>, 1}},
      {"Expand", {convertExpand, 2}},
      {"Flatten", {convertFlatten, 1}},
      {"Gather", {convertGather, 2}},
      {"Gemm", {convertGemm, 2}},
      {"Greater", {compare<CompareDirection::GT>, 2}},
      {"GreaterOrEqual", {compare<CompareDirection::GE>, 2}},
      {"Identity", {convertIdentity, 1}},
      {"LayerNormalization", {convertLayerNorm, 2}},
      {"Less", {compare<CompareDirection::LT>, 2}},
      {"LessOrEqual", {compare<CompareDirection::LE>, 2}},
      {"Log", {unaryOp<LogOp, log_>, 1}},
      {"LogSoftmax", {softmaxLike<LogSoftmaxOp>, 1}},
      {"MatMul", {convertMatMul, 2}},
      {"Max", {variadic<MaxOp, max_>, 1}},
      {"Min", {variadic<MinOp, min_>, 1}},
      {"Mul", {binaryOp<MulOp, mul>, 2}},
      {"Neg", {unaryOp<NegOp, neg>, 1}},
      {"Not", {logical<0>, 1}},
      {"Or", {logical<2>, 2}},
      {"Pow", {convertPow, 2}},
      {"Range", {convertRange, 3}},
      {"Reciprocal", {unaryOp<ReciprocalOp, reciprocal>, 1}},
      {"ReduceMax", {reduce<ReductionKind::Max>, 1}},
      {"ReduceMean", {reduce<ReductionKind::Mean>, 1}},
      {"ReduceMin", {reduce<ReductionKind::Min>, 1}},
      {"ReduceSum", {reduce<ReductionKind::Sum>, 1}},
      {"Relu", {unaryOp<ReluOp, relu>, 1}},
      {"Reshape", {convertReshape, 2}},
      {"Shape", {convertShape, 1}},
      {"Sigmoid", {unaryOp<SigmoidOp, sigmoid>, 1}},
      {"Sin", {unaryOp<SinOp, sin_>, 1}},
      {"Size", {convertSize, 1}},
      {"Slice", {convertSlice, 3}},
      {"Softmax", {softmaxLike<SoftmaxOp>, 1}},
      {"Split", {convertSplit, 1}},
      {"Sqrt", {unaryOp<SqrtOp, sqrt_>, 1}},
      {"Squeeze", {convertSqueeze, 1}},
      {"Sub", {binaryOp<SubOp, sub>, 2}},
      {"Tanh", {unaryOp<TanhOp, tanh_>, 1}},
      {"TopK", {convertTopK, 2}},
      {"Transpose", {convertTranspose, 1}},
      {"Trilu", {convertTrilu, 1}},
      {"Unsqueeze", {convertUnsqueeze, 2}},
      {"Where", {convertWhere, 3}},
      {"Xor", {logical<3>, 2}},
  };
  return converters;
}
