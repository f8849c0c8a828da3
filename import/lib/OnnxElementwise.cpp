//===- OnnxElementwise.cpp - ONNX elementwise op converters -------------===//
//
// Unary and binary arithmetic, comparisons, logic, Where and Cast. Known
// operands fold at import; the rest become broadcasting `graph` ops.
//
//===----------------------------------------------------------------------===//

#include "Converters.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"

#include <cmath>

using namespace mlir;
using namespace cleave;
using namespace cleave::onnx_import;
using namespace cleave::graph;

LogicalResult cleave::onnx_import::emitWhere(NodeContext &n, Value c, Value x,
                                             Value y) {
  WhereOp op = n.create<WhereOp>({c, x, y});
  if (!op)
    return failure();
  n.set(0, op.getResult());
  return success();
}

namespace {

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

} // namespace

void cleave::onnx_import::addElementwiseConverters(llvm::StringMap<OpConverter> &converters) {
  converters["Abs"] = {unaryOp<AbsOp, abs_>, 1};
  converters["Add"] = {binaryOp<AddOp, add>, 2};
  converters["And"] = {logical<1>, 2};
  converters["Cast"] = {convertCast, 1};
  converters["Cos"] = {unaryOp<CosOp, cos_>, 1};
  converters["Div"] = {binaryOp<DivOp, div_>, 2};
  converters["Equal"] = {compare<CompareDirection::EQ>, 2};
  converters["Erf"] = {unaryOp<ErfOp, erf_>, 1};
  converters["Exp"] = {unaryOp<ExpOp, exp_>, 1};
  converters["Greater"] = {compare<CompareDirection::GT>, 2};
  converters["GreaterOrEqual"] = {compare<CompareDirection::GE>, 2};
  converters["Less"] = {compare<CompareDirection::LT>, 2};
  converters["LessOrEqual"] = {compare<CompareDirection::LE>, 2};
  converters["Log"] = {unaryOp<LogOp, log_>, 1};
  converters["Max"] = {variadic<MaxOp, max_>, 1};
  converters["Min"] = {variadic<MinOp, min_>, 1};
  converters["Mul"] = {binaryOp<MulOp, mul>, 2};
  converters["Neg"] = {unaryOp<NegOp, neg>, 1};
  converters["Not"] = {logical<0>, 1};
  converters["Or"] = {logical<2>, 2};
  converters["Pow"] = {convertPow, 2};
  converters["Reciprocal"] = {unaryOp<ReciprocalOp, reciprocal>, 1};
  converters["Relu"] = {unaryOp<ReluOp, relu>, 1};
  converters["Sigmoid"] = {unaryOp<SigmoidOp, sigmoid>, 1};
  converters["Sin"] = {unaryOp<SinOp, sin_>, 1};
  converters["Sqrt"] = {unaryOp<SqrtOp, sqrt_>, 1};
  converters["Sub"] = {binaryOp<SubOp, sub>, 2};
  converters["Tanh"] = {unaryOp<TanhOp, tanh_>, 1};
  converters["Where"] = {convertWhere, 3};
  converters["Xor"] = {logical<3>, 2};
}
