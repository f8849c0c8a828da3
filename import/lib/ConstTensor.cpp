//===- ConstTensor.cpp - folding of tensors known at import time --------===//
//
// Index arithmetic for the handful of ops that shape subgraphs use.
//
//===----------------------------------------------------------------------===//

#include "ConstTensor.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace cleave::onnx_import;

SmallVector<int64_t> ConstTensor::asInts() const {
  SmallVector<int64_t> ints;
  ints.reserve(values.size());
  for (double v : values) {
    if (v >= 9.2233720368547758e18)
      ints.push_back(std::numeric_limits<int64_t>::max());
    else if (v <= -9.2233720368547758e18)
      ints.push_back(std::numeric_limits<int64_t>::min());
    else
      ints.push_back(static_cast<int64_t>(v));
  }
  return ints;
}

void ConstTensor::normalize() {
  if (elementType.isInteger(1)) {
    for (double &v : values)
      v = v != 0.0 ? 1.0 : 0.0;
  } else if (elementType.isInteger()) {
    for (double &v : values)
      v = std::trunc(v);
  }
}

DenseElementsAttr ConstTensor::toAttr() const {
  RankedTensorType type = getType();
  if (elementType.isInteger(1)) {
    SmallVector<bool> bits;
    for (double v : values)
      bits.push_back(v != 0.0);
    return DenseElementsAttr::get(type, bits);
  }
  if (auto intType = dyn_cast<IntegerType>(elementType)) {
    SmallVector<APInt> ints;
    for (int64_t v : asInts())
      ints.push_back(APInt(intType.getWidth(), v, /*isSigned=*/true));
    return DenseElementsAttr::get(type, ints);
  }
  auto floatType = cast<FloatType>(elementType);
  SmallVector<APFloat> floats;
  for (double v : values) {
    APFloat f(v);
    bool lost;
    f.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
              &lost);
    floats.push_back(f);
  }
  return DenseElementsAttr::get(type, floats);
}

ConstTensor ConstTensor::scalarLike(Type elementType, double v) {
  ConstTensor t{elementType, {}, {v}};
  t.normalize();
  return t;
}

ConstTensor ConstTensor::fromInts(Type elementType, ArrayRef<int64_t> shape,
                                  ArrayRef<int64_t> values) {
  ConstTensor t{elementType, llvm::to_vector(shape), {}};
  for (int64_t v : values)
    t.values.push_back(static_cast<double>(v));
  return t;
}

std::optional<int64_t> cleave::onnx_import::elementCount(ArrayRef<int64_t> shape,
                                                        int64_t limit) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    if (d != 0 && n > limit / d)
      return std::nullopt;
    n *= d;
  }
  return n;
}

SmallVector<int64_t> cleave::onnx_import::stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

bool cleave::onnx_import::broadcastShape(ArrayRef<int64_t> a,
                                         ArrayRef<int64_t> b,
                                         SmallVectorImpl<int64_t> &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

/// The flat index into `shape` (broadcast into `outShape`) of the output
/// element with multi-index `idx`.
static int64_t broadcastIndex(ArrayRef<int64_t> shape,
                              ArrayRef<int64_t> outIdx) {
  int64_t offset = outIdx.size() - shape.size(), flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + (shape[d] == 1 ? 0 : outIdx[d + offset]);
  return flat;
}

static void unravel(int64_t flat, ArrayRef<int64_t> shape,
                    SmallVectorImpl<int64_t> &idx) {
  idx.assign(shape.size(), 0);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
}

static int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

ConstTensor cleave::onnx_import::foldElementwise(
    ArrayRef<const ConstTensor *> operands, Type resultType,
    function_ref<double(ArrayRef<double>)> fn) {
  SmallVector<int64_t> shape;
  for (const ConstTensor *t : operands) {
    SmallVector<int64_t> next;
    (void)broadcastShape(shape, t->shape, next);
    shape = next;
  }
  ConstTensor out{resultType, shape, {}};
  int64_t n = numElements(shape);
  out.values.reserve(n);
  SmallVector<int64_t> idx;
  SmallVector<double> args(operands.size());
  for (int64_t i = 0; i < n; ++i) {
    unravel(i, shape, idx);
    for (auto [k, t] : llvm::enumerate(operands))
      args[k] = t->values[broadcastIndex(t->shape, idx)];
    out.values.push_back(fn(args));
  }
  out.normalize();
  return out;
}

ConstTensor cleave::onnx_import::foldTranspose(const ConstTensor &in,
                                               ArrayRef<int64_t> perm) {
  ConstTensor out{in.elementType, {}, {}};
  for (int64_t p : perm)
    out.shape.push_back(in.shape[p]);
  SmallVector<int64_t> inStrides = stridesOf(in.shape), idx;
  int64_t n = in.size();
  for (int64_t i = 0; i < n; ++i) {
    unravel(i, out.shape, idx);
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      src += idx[d] * inStrides[perm[d]];
    out.values.push_back(in.values[src]);
  }
  return out;
}

ConstTensor cleave::onnx_import::foldSlice(const ConstTensor &in,
                                           ArrayRef<int64_t> start,
                                           ArrayRef<int64_t> limit,
                                           ArrayRef<int64_t> strides) {
  ConstTensor out{in.elementType, {}, {}};
  for (size_t d = 0; d < in.shape.size(); ++d)
    out.shape.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
  SmallVector<int64_t> inStrides = stridesOf(in.shape), idx;
  int64_t n = numElements(out.shape);
  for (int64_t i = 0; i < n; ++i) {
    unravel(i, out.shape, idx);
    int64_t src = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      src += (start[d] + idx[d] * strides[d]) * inStrides[d];
    out.values.push_back(in.values[src]);
  }
  return out;
}

ConstTensor cleave::onnx_import::foldGather(const ConstTensor &data,
                                            const ConstTensor &indices,
                                            int64_t axis) {
  ConstTensor out{data.elementType, {}, {}};
  ArrayRef<int64_t> ds = data.shape;
  out.shape.append(ds.begin(), ds.begin() + axis);
  out.shape.append(indices.shape.begin(), indices.shape.end());
  out.shape.append(ds.begin() + axis + 1, ds.end());
  int64_t outer = numElements(ds.take_front(axis));
  int64_t inner = numElements(ds.drop_front(axis + 1));
  SmallVector<int64_t> idx = indices.asInts();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : idx)
      for (int64_t k = 0; k < inner; ++k)
        out.values.push_back(data.values[(o * ds[axis] + i) * inner + k]);
  return out;
}

ConstTensor
cleave::onnx_import::foldConcat(ArrayRef<const ConstTensor *> inputs,
                                int64_t axis) {
  ConstTensor out{inputs.front()->elementType, inputs.front()->shape, {}};
  out.shape[axis] = 0;
  for (const ConstTensor *t : inputs)
    out.shape[axis] += t->shape[axis];
  int64_t outer = numElements(ArrayRef<int64_t>(out.shape).take_front(axis));
  for (int64_t o = 0; o < outer; ++o)
    for (const ConstTensor *t : inputs) {
      int64_t chunk = numElements(ArrayRef<int64_t>(t->shape).drop_front(axis));
      out.values.insert(out.values.end(), t->values.begin() + o * chunk,
                        t->values.begin() + (o + 1) * chunk);
    }
  return out;
}
