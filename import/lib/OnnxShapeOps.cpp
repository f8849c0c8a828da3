//===- OnnxShapeOps.cpp - ONNX constant and shape op converters ---------===//
//
// Constants, shape queries and data movement (Reshape, Transpose, Slice,
// Gather, Concat, Split, ...). Shape arithmetic on known tensors folds at
// import, so every emitted `graph` op has static shapes.
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
  std::optional<int64_t> count = elementCount(*shape, kMaxFoldedElements);
  if (!count)
    return n.error() << "shape must have non-negative dimensions and at most "
                     << kMaxFoldedElements << " elements";
  out.values.assign(*count, fill.values[0]);
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
  double steps = std::ceil((l - s) / d);
  if (!(steps < static_cast<double>(kMaxFoldedElements)))
    return n.error() << "the range has more than " << kMaxFoldedElements
                     << " elements";
  int64_t count = std::max<int64_t>(static_cast<int64_t>(steps), 0);
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
    if (d != 0 && known > kMaxElements / d)
      return n.error() << "shape has more than " << kMaxElements
                       << " elements";
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
  if (!broadcastShape(in, *target, shape) || !elementCount(shape))
    return n.error() << "cannot expand " << n.type(0) << " to the shape "
                     << "given";
  if (const ConstTensor *c = n.constant(0)) {
    if (!elementCount(shape, kMaxFoldedElements))
      return n.error() << "expanding a known tensor to more than "
                       << kMaxFoldedElements << " elements";
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
      ok = raw.size() == static_cast<size_t>(count) * 2;
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

void cleave::onnx_import::addShapeConverters(llvm::StringMap<OpConverter> &converters) {
  converters["Concat"] = {convertConcat, 1};
  converters["Constant"] = {convertConstant, 0};
  converters["ConstantOfShape"] = {convertConstantOfShape, 1};
  converters["Expand"] = {convertExpand, 2};
  converters["Flatten"] = {convertFlatten, 1};
  converters["Gather"] = {convertGather, 2};
  converters["Identity"] = {convertIdentity, 1};
  converters["Range"] = {convertRange, 3};
  converters["Reshape"] = {convertReshape, 2};
  converters["Shape"] = {convertShape, 1};
  converters["Size"] = {convertSize, 1};
  converters["Slice"] = {convertSlice, 3};
  converters["Split"] = {convertSplit, 1};
  converters["Squeeze"] = {convertSqueeze, 1};
  converters["Transpose"] = {convertTranspose, 1};
  converters["Trilu"] = {convertTrilu, 1};
  converters["Unsqueeze"] = {convertUnsqueeze, 2};
}
