//===- Autodiff.cpp - reverse-mode gradients of the forward function ----===//
//
// Builds `@train_step` from `@forward`: the forward computation, a loss on
// its first output, and the reverse-mode backward pass that produces the
// gradient of the loss with respect to every trainable parameter. A value
// used several times (tied weights, residuals) accumulates its gradients.
//
// This first version returns the loss and the gradients; the optimizer
// update and the per-op rule interface are the next steps (issue 5). The
// rules below cover elementwise arithmetic and activations, matmul,
// transpose, reshape, softmax, sum/mean reductions, where and cross-entropy.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace cleave {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

class Differentiator {
public:
  Differentiator(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  /// The gradient flowing into `v` so far (null: none).
  Value gradOf(Value v) { return grads.lookup(v); }

  void accumulate(Value v, Value g) {
    if (!g)
      return;
    Value &slot = grads[v];
    slot = slot ? AddOp::create(b, loc, slot.getType(), slot, g).getResult()
                : g;
  }

  LogicalResult backward(Operation *op);

private:
  RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }

  Value scalar(Type elem, double v) {
    auto type = RankedTensorType::get({}, elem);
    return ConstantOp::create(b, loc, type,
                              DenseElementsAttr::get(
                                  type, b.getFloatAttr(elem, v)));
  }

  Value binary(StringRef kind, Value x, Value y) {
    auto type = broadcastType(typeOf(x), typeOf(y));
    if (kind == "add")
      return AddOp::create(b, loc, type, x, y);
    if (kind == "sub")
      return SubOp::create(b, loc, type, x, y);
    if (kind == "mul")
      return MulOp::create(b, loc, type, x, y);
    return DivOp::create(b, loc, type, x, y);
  }

  static RankedTensorType broadcastType(RankedTensorType x,
                                        RankedTensorType y) {
    int64_t rank = std::max(x.getRank(), y.getRank());
    SmallVector<int64_t> shape(rank, 1);
    for (int64_t d = 0; d < rank; ++d) {
      int64_t dx = d - (rank - x.getRank()), dy = d - (rank - y.getRank());
      int64_t sx = dx >= 0 ? x.getDimSize(dx) : 1;
      int64_t sy = dy >= 0 ? y.getDimSize(dy) : 1;
      shape[d] = std::max(sx, sy);
    }
    return RankedTensorType::get(shape, x.getElementType());
  }

  /// Sums a broadcast gradient back to the shape of the operand it came from.
  Value reduceTo(Value g, RankedTensorType target) {
    RankedTensorType type = typeOf(g);
    if (type == target)
      return g;
    int64_t offset = type.getRank() - target.getRank();
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d < offset || (target.getDimSize(d - offset) == 1 &&
                         type.getDimSize(d) != 1))
        dims.push_back(d);
    if (!dims.empty()) {
      SmallVector<int64_t> kept;
      for (int64_t d = 0; d < type.getRank(); ++d)
        kept.push_back(llvm::is_contained(dims, d) ? 1 : type.getDimSize(d));
      g = ReduceOp::create(b, loc, RankedTensorType::get(kept,
                                                         type.getElementType()),
                           ReductionKindAttr::get(b.getContext(),
                                                  ReductionKind::Sum),
                           g, b.getDenseI64ArrayAttr(dims), b.getUnitAttr());
    }
    if (typeOf(g) != target)
      g = ReshapeOp::create(b, loc, target, g);
    return g;
  }

  /// sum(v, dim) with the dim kept as size 1.
  Value sumKeepdim(Value v, int64_t dim) {
    RankedTensorType type = typeOf(v);
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] = 1;
    return ReduceOp::create(
        b, loc, type.clone(shape),
        ReductionKindAttr::get(b.getContext(), ReductionKind::Sum), v,
        b.getDenseI64ArrayAttr({dim}), b.getUnitAttr());
  }

  /// Swaps the last two dimensions.
  Value transposeLast(Value v) {
    RankedTensorType type = typeOf(v);
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < type.getRank(); ++d)
      perm.push_back(d);
    std::swap(perm[type.getRank() - 1], perm[type.getRank() - 2]);
    SmallVector<int64_t> shape(type.getShape());
    std::swap(shape[type.getRank() - 1], shape[type.getRank() - 2]);
    return TransposeOp::create(b, loc, type.clone(shape), v,
                               b.getDenseI64ArrayAttr(perm));
  }

  Value matmul(Value x, Value y) {
    RankedTensorType tx = typeOf(x), ty = typeOf(y);
    RankedTensorType batch = broadcastType(
        RankedTensorType::get(tx.getShape().drop_back(2), tx.getElementType()),
        RankedTensorType::get(ty.getShape().drop_back(2), ty.getElementType()));
    SmallVector<int64_t> shape(batch.getShape());
    shape.push_back(tx.getDimSize(tx.getRank() - 2));
    shape.push_back(ty.getShape().back());
    return MatmulOp::create(b, loc, tx.clone(shape), x, y);
  }

  /// d gelu(x) / dx for the erf and tanh forms.
  Value geluDerivative(Value x, GeluApproximation approx) {
    Type elem = typeOf(x).getElementType();
    auto type = typeOf(x);
    Value half = scalar(elem, 0.5), one = scalar(elem, 1.0);
    if (approx == GeluApproximation::None) {
      // Phi(x) + x * phi(x)
      Value cdf = binary("mul", half,
                         binary("add", one,
                                ErfOp::create(b, loc, type,
                                              binary("mul", x,
                                                     scalar(elem, M_SQRT1_2)))));
      Value x2 = binary("mul", x, x);
      Value pdf = binary("mul", scalar(elem, 0.3989422804014327),
                         ExpOp::create(b, loc, type,
                                       binary("mul", scalar(elem, -0.5), x2)));
      return binary("add", cdf, binary("mul", x, pdf));
    }
    // u = c (x + k x^3); d = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2)
    double c = std::sqrt(2.0 / M_PI), k = 0.044715;
    Value x2 = binary("mul", x, x);
    Value u = binary("mul", scalar(elem, c),
                     binary("add", x,
                            binary("mul", scalar(elem, k),
                                   binary("mul", x2, x))));
    Value t = TanhOp::create(b, loc, type, u);
    Value left = binary("mul", half, binary("add", one, t));
    Value dt = binary("sub", one, binary("mul", t, t));
    Value du = binary("mul", scalar(elem, c),
                      binary("add", one, binary("mul", scalar(elem, 3 * k), x2)));
    Value right = binary("mul", binary("mul", half, x), binary("mul", dt, du));
    return binary("add", left, right);
  }

  OpBuilder &b;
  Location loc;
  DenseMap<Value, Value> grads;
};

LogicalResult Differentiator::backward(Operation *op) {
  if (op->getNumResults() == 0)
    return success();
  SmallVector<Value> gs;
  bool any = false;
  for (Value r : op->getResults()) {
    gs.push_back(gradOf(r));
    any |= static_cast<bool>(gs.back());
  }
  if (!any)
    return success();
  loc = op->getLoc();
  Value g = gs[0];
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ReadParamOp, ConstantOp, IotaOp>([](auto) { return success(); })
      .Case<AddOp>([&](AddOp a) {
        accumulate(a.getLhs(), reduceTo(g, a.getLhs().getType()));
        accumulate(a.getRhs(), reduceTo(g, a.getRhs().getType()));
        return success();
      })
      .Case<SubOp>([&](SubOp s) {
        accumulate(s.getLhs(), reduceTo(g, s.getLhs().getType()));
        Value neg = NegOp::create(b, loc, g.getType(), g);
        accumulate(s.getRhs(), reduceTo(neg, s.getRhs().getType()));
        return success();
      })
      .Case<MulOp>([&](MulOp m) {
        accumulate(m.getLhs(), reduceTo(binary("mul", g, m.getRhs()),
                                        m.getLhs().getType()));
        accumulate(m.getRhs(), reduceTo(binary("mul", g, m.getLhs()),
                                        m.getRhs().getType()));
        return success();
      })
      .Case<MatmulOp>([&](MatmulOp m) -> LogicalResult {
        Value lhs = m.getLhs(), rhs = m.getRhs();
        // d lhs = g rhs^T; d rhs = lhs^T g, summed over broadcast batches.
        accumulate(lhs, reduceTo(matmul(g, transposeLast(rhs)),
                                 m.getLhs().getType()));
        RankedTensorType rt = m.getRhs().getType();
        Value gr = matmul(transposeLast(lhs), g);
        accumulate(rhs, reduceTo(gr, rt));
        return success();
      })
      .Case<TransposeOp>([&](TransposeOp t) {
        SmallVector<int64_t> inverse(t.getPerm().size());
        for (auto [i, p] : llvm::enumerate(t.getPerm()))
          inverse[p] = i;
        accumulate(t.getOperand(),
                   TransposeOp::create(b, loc, t.getOperand().getType(), g,
                                       b.getDenseI64ArrayAttr(inverse)));
        return success();
      })
      .Case<ReshapeOp>([&](ReshapeOp r) {
        accumulate(r.getOperand(),
                   ReshapeOp::create(b, loc, r.getOperand().getType(), g));
        return success();
      })
      .Case<ReluOp>([&](ReluOp r) {
        Value x = r.getOperand();
        Type elem = typeOf(x).getElementType();
        Value zero = scalar(elem, 0.0);
        Value positive = CompareOp::create(
            b, loc, typeOf(x).clone(b.getI1Type()),
            CompareDirectionAttr::get(b.getContext(), CompareDirection::GT), x,
            zero);
        accumulate(x, WhereOp::create(b, loc, typeOf(x), positive, g, zero));
        return success();
      })
      .Case<NegOp>([&](NegOp n) {
        accumulate(n.getOperand(), NegOp::create(b, loc, g.getType(), g));
        return success();
      })
      .Case<DivOp>([&](DivOp d) {
        // d lhs = g / rhs; d rhs = -g * lhs / rhs^2 = -(g * result) / rhs
        Value gl = binary("div", g, d.getRhs());
        accumulate(d.getLhs(), reduceTo(gl, d.getLhs().getType()));
        Value gr = NegOp::create(b, loc, g.getType(),
                                 binary("mul", gl, d.getResult()));
        accumulate(d.getRhs(), reduceTo(gr, d.getRhs().getType()));
        return success();
      })
      .Case<ExpOp>([&](ExpOp e) {
        accumulate(e.getOperand(), binary("mul", g, e.getResult()));
        return success();
      })
      .Case<LogOp>([&](LogOp l) {
        accumulate(l.getOperand(), binary("div", g, l.getOperand()));
        return success();
      })
      .Case<TanhOp>([&](TanhOp t) {
        Type elem = typeOf(t.getOperand()).getElementType();
        Value y = t.getResult();
        accumulate(t.getOperand(),
                   binary("mul", g,
                          binary("sub", scalar(elem, 1.0),
                                 binary("mul", y, y))));
        return success();
      })
      .Case<SigmoidOp>([&](SigmoidOp sg) {
        Type elem = typeOf(sg.getOperand()).getElementType();
        Value y = sg.getResult();
        accumulate(sg.getOperand(),
                   binary("mul", g,
                          binary("mul", y,
                                 binary("sub", scalar(elem, 1.0), y))));
        return success();
      })
      .Case<SiluOp>([&](SiluOp si) {
        // d/dx x s(x) = s(x) (1 + x (1 - s(x)))
        Value x = si.getOperand();
        Type elem = typeOf(x).getElementType();
        Value sig = SigmoidOp::create(b, loc, typeOf(x), x);
        Value one = scalar(elem, 1.0);
        Value d = binary("mul", sig,
                         binary("add", one,
                                binary("mul", x, binary("sub", one, sig))));
        accumulate(x, binary("mul", g, d));
        return success();
      })
      .Case<SoftmaxOp>([&](SoftmaxOp sm) {
        // dx = y * (g - sum(g * y, dim))
        Value y = sm.getResult();
        Value gy = binary("mul", g, y);
        Value sum = sumKeepdim(gy, sm.getDim());
        accumulate(sm.getOperand(), binary("mul", y, binary("sub", g, sum)));
        return success();
      })
      .Case<LogSoftmaxOp>([&](LogSoftmaxOp ls) {
        // dx = g - softmax(x) * sum(g, dim)
        Value p = ExpOp::create(b, loc, ls.getType(), ls.getResult());
        Value sum = sumKeepdim(g, ls.getDim());
        accumulate(ls.getOperand(), binary("sub", g, binary("mul", p, sum)));
        return success();
      })
      .Case<ReduceOp>([&](ReduceOp r) -> LogicalResult {
        if (r.getKind() != ReductionKind::Sum &&
            r.getKind() != ReductionKind::Mean)
          return r.emitOpError("has no gradient rule yet for ")
                 << stringifyReductionKind(r.getKind());
        // Broadcast g back over the reduced dims (as size 1 first).
        RankedTensorType in = r.getOperand().getType();
        SmallVector<int64_t> kept;
        int64_t count = 1;
        for (int64_t d = 0; d < in.getRank(); ++d) {
          bool reduced = llvm::is_contained(r.getDims(), d);
          kept.push_back(reduced ? 1 : in.getDimSize(d));
          if (reduced)
            count *= in.getDimSize(d);
        }
        Value gk = g;
        if (typeOf(g).getShape() != ArrayRef<int64_t>(kept))
          gk = ReshapeOp::create(b, loc, in.clone(kept), g);
        if (r.getKind() == ReductionKind::Mean)
          gk = binary("div", gk,
                      scalar(in.getElementType(), static_cast<double>(count)));
        SmallVector<int64_t> dims;
        for (int64_t d = 0; d < in.getRank(); ++d)
          dims.push_back(d);
        accumulate(r.getOperand(),
                   BroadcastInDimOp::create(b, loc, in, gk,
                                            b.getDenseI64ArrayAttr(dims)));
        return success();
      })
      .Case<WhereOp>([&](WhereOp w) {
        Type elem = typeOf(g).getElementType();
        Value zero = scalar(elem, 0.0);
        auto sel = [&](Value onTrue, Value onFalse) {
          return WhereOp::create(b, loc, typeOf(g), w.getCondition(), onTrue,
                                 onFalse)
              .getResult();
        };
        accumulate(w.getOnTrue(),
                   reduceTo(sel(g, zero), w.getOnTrue().getType()));
        accumulate(w.getOnFalse(),
                   reduceTo(sel(zero, g), w.getOnFalse().getType()));
        return success();
      })
      .Case<GeluOp>([&](GeluOp gelu) {
        Value x = gelu.getOperand();
        accumulate(x, binary("mul", g,
                             geluDerivative(x, gelu.getApproximate())));
        return success();
      })
      .Case<CrossEntropyOp>([&](CrossEntropyOp ce) -> LogicalResult {
        if (ce.getIgnoreIndex())
          return ce.emitOpError("gradient with ignore_index is not "
                                "supported yet");
        // (softmax(logits) - onehot(labels)) * g / positions
        Value logits = ce.getLogits(), labels = ce.getLabels();
        RankedTensorType lt = ce.getLogits().getType();
        int64_t rank = lt.getRank();
        Value probs = SoftmaxOp::create(b, loc, lt, logits,
                                        b.getI64IntegerAttr(rank - 1));
        auto idxType = lt.clone(ce.getLabels().getType().getElementType());
        Value classes =
            IotaOp::create(b, loc, idxType, b.getI64IntegerAttr(rank - 1));
        SmallVector<int64_t> labelShape(ce.getLabels().getType().getShape());
        labelShape.push_back(1);
        Value col = ReshapeOp::create(
            b, loc, ce.getLabels().getType().clone(labelShape), labels);
        Value hit = CompareOp::create(
            b, loc, lt.clone(b.getI1Type()),
            CompareDirectionAttr::get(b.getContext(), CompareDirection::EQ),
            classes, col);
        Value onehot = CastOp::create(b, loc, lt, hit);
        int64_t positions = lt.getNumElements() / lt.getShape().back();
        Value scale = binary("div", g,
                             scalar(lt.getElementType(),
                                    static_cast<double>(positions)));
        accumulate(logits,
                   binary("mul", binary("sub", probs, onehot), scale));
        return success();
      })
      .Default([](Operation *op) {
        return op->emitOpError("has no gradient rule yet");
      });
}

struct AutodiffPass : cleave::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || !forward.getBody().hasOneBlock()) {
      module.emitError("-cleave-autodiff needs a single-block @forward");
      return signalPassFailure();
    }
    if (loss != "cross-entropy") {
      module.emitError("unknown --loss '") << loss
                                           << "' (available: cross-entropy)";
      return signalPassFailure();
    }
    auto logitsType = dyn_cast<RankedTensorType>(
        forward.getFunctionType().getNumResults() > 0
            ? forward.getFunctionType().getResult(0)
            : Type());
    if (!logitsType || logitsType.getRank() < 1 ||
        !isa<FloatType>(logitsType.getElementType())) {
      forward.emitOpError("first result must be float logits for the "
                          "cross-entropy loss");
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    Location loc = forward.getLoc();
    auto labelsType = RankedTensorType::get(
        logitsType.getShape().drop_back(), b.getI64Type());

    // @train_step(inputs..., labels) -> (loss, grads of the trained params)
    SmallVector<Type> argTypes(forward.getArgumentTypes());
    argTypes.push_back(labelsType);
    b.setInsertionPointAfter(forward);
    auto step = func::FuncOp::create(b, loc, "train_step",
                                     b.getFunctionType(argTypes, {}));
    Block *entry = step.addEntryBlock();
    for (unsigned i = 0; i < forward.getNumArguments(); ++i)
      if (DictionaryAttr attrs = forward.getArgAttrDict(i))
        step.setArgAttrs(i, attrs);
    step.setArgAttr(forward.getNumArguments(), "onnx.name",
                    b.getStringAttr("labels"));
    b.setInsertionPointToStart(entry);
    IRMapping map;
    for (auto [from, to] :
         llvm::zip(forward.getArguments(), entry->getArguments()))
      map.map(from, to);
    SmallVector<Operation *> cloned;
    Value logits;
    for (Operation &op : forward.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        logits = map.lookup(ret.getOperand(0));
        break;
      }
      cloned.push_back(b.clone(op, map));
    }
    auto lossOp = CrossEntropyOp::create(
        b, loc, RankedTensorType::get({}, logitsType.getElementType()),
        logits, entry->getArguments().back(), IntegerAttr());

    Differentiator diff(b, loc);
    diff.accumulate(lossOp.getResult(),
                    ConstantOp::create(
                        b, loc, lossOp.getType(),
                        DenseElementsAttr::get(
                            lossOp.getType(),
                            b.getFloatAttr(logitsType.getElementType(), 1.0))));
    if (failed(diff.backward(lossOp)))
      return signalPassFailure();
    for (Operation *op : llvm::reverse(cloned))
      if (failed(diff.backward(op)))
        return signalPassFailure();

    // Gradients of each parameter, summed over its reads.
    SmallVector<Value> results = {lossOp.getResult()};
    SmallVector<std::string> names = {"loss"};
    llvm::StringMap<Value> paramGrads;
    SmallVector<StringRef> order;
    for (Operation *op : cloned)
      if (auto read = dyn_cast<ReadParamOp>(op)) {
        Value g = diff.gradOf(read.getResult());
        if (!g)
          continue;
        Value &slot = paramGrads[read.getParam()];
        if (!slot)
          order.push_back(read.getParam());
        slot = slot ? AddOp::create(b, loc, g.getType(), slot, g).getResult()
                    : g;
      }
    for (StringRef name : order) {
      auto param = module.lookupSymbol<ParamOp>(name);
      if (param && param.getFrozen())
        continue;
      results.push_back(paramGrads[name]);
      names.push_back(("grad." + name).str());
    }
    func::ReturnOp::create(b, loc, results);
    step.setType(b.getFunctionType(argTypes, ValueRange(results).getTypes()));
    for (auto [i, name] : llvm::enumerate(names))
      step.setResultAttr(i, "onnx.name", b.getStringAttr(name));
    forward.erase();
  }
};
} // namespace
