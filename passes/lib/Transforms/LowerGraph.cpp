//===- LowerGraph.cpp - graph ops -> runtime calls ------------------------===//
//
// The patterns of -cleave-lower-to-runtime for the graph ops, one per op
// family: each op is one call of the runtime C ABI
// (runtime/include/cleave/Runtime/cleave_rt.h) on its operands' and results'
// descriptors, with its attributes as constants and constant arrays. Views
// (read_param, a reshape in place) call nothing.
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include <cmath>

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;
using namespace cleave::lowering;

namespace {

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

/// Unary ops: cleave_rt_unary(arena, kind, x, y), the kind an enum
/// cleave_rt_unary.
template <typename Op> struct UnaryPattern : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;
  LogicalResult lower(Op op, ArrayRef<Value> in, ArrayRef<Value> out,
                      RuntimeBuilder &rt) const override {
    rt.call("cleave_rt_unary",
            {rt.arena(), rt.constI32(kind(op)), in[0], out[0]});
    return success();
  }

private:
  static int32_t kind(NegOp) { return CLEAVE_NEG; }
  static int32_t kind(AbsOp) { return CLEAVE_ABS; }
  static int32_t kind(ReluOp) { return CLEAVE_RELU; }
  static int32_t kind(ExpOp) { return CLEAVE_EXP; }
  static int32_t kind(LogOp) { return CLEAVE_LOG; }
  static int32_t kind(SqrtOp) { return CLEAVE_SQRT; }
  static int32_t kind(RsqrtOp) { return CLEAVE_RSQRT; }
  static int32_t kind(ReciprocalOp) { return CLEAVE_RECIPROCAL; }
  static int32_t kind(TanhOp) { return CLEAVE_TANH; }
  static int32_t kind(ErfOp) { return CLEAVE_ERF; }
  static int32_t kind(SigmoidOp) { return CLEAVE_SIGMOID; }
  static int32_t kind(SiluOp) { return CLEAVE_SILU; }
  static int32_t kind(SinOp) { return CLEAVE_SIN; }
  static int32_t kind(CosOp) { return CLEAVE_COS; }
  static int32_t kind(GeluOp g) { return geluKind(g.getApproximate()); }
};

/// The gradients of unary ops: cleave_rt_unary_grad(arena, kind, dy, x,
/// dx), the kind that of the forward op.
template <typename Op> struct UnaryGradPattern : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;
  LogicalResult lower(Op op, ArrayRef<Value> in, ArrayRef<Value> out,
                      RuntimeBuilder &rt) const override {
    rt.call("cleave_rt_unary_grad",
            {rt.arena(), rt.constI32(kind(op)), in[0], in[1], out[0]});
    return success();
  }

private:
  static int32_t kind(GeluGradOp g) { return geluKind(g.getApproximate()); }
  static int32_t kind(SiluGradOp) { return CLEAVE_SILU; }
};

/// Binary ops, with broadcasting: cleave_rt_binary(arena, kind, a, b, y),
/// the kind an enum cleave_rt_binary.
template <typename Op> struct BinaryPattern : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;
  LogicalResult lower(Op op, ArrayRef<Value> in, ArrayRef<Value> out,
                      RuntimeBuilder &rt) const override {
    rt.call("cleave_rt_binary",
            {rt.arena(), rt.constI32(kind(op)), in[0], in[1], out[0]});
    return success();
  }

private:
  static int32_t kind(AddOp) { return CLEAVE_ADD; }
  static int32_t kind(SubOp) { return CLEAVE_SUB; }
  static int32_t kind(MulOp) { return CLEAVE_MUL; }
  static int32_t kind(DivOp) { return CLEAVE_DIV; }
  static int32_t kind(PowOp) { return CLEAVE_POW; }
  static int32_t kind(MaxOp) { return CLEAVE_MAX; }
  static int32_t kind(MinOp) { return CLEAVE_MIN; }
};

/// Comparisons, selection and casts.
template <typename Op> struct SelectPattern : CallPattern<SelectPattern, Op> {
  using CallPattern<SelectPattern, Op>::CallPattern;

  static void build(CompareOp c, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_compare",
            {rt.arena(), rt.constI32(runtimeKind(c.getDirection())), in[0],
             in[1], out[0]});
  }
  static void build(WhereOp, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_where", {rt.arena(), in[0], in[1], in[2], out[0]});
  }
  static void build(CastOp, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_cast", {rt.arena(), in[0], out[0]});
  }
};

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

/// Values made from attributes: a constant's bytes, an iota.
template <typename Op> struct ConstantPattern : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;
  LogicalResult lower(Op op, ArrayRef<Value> in, ArrayRef<Value> out,
                      RuntimeBuilder &rt) const override {
    return build(op, out, rt);
  }

private:
  static LogicalResult build(ConstantOp c, ArrayRef<Value> out,
                             RuntimeBuilder &rt) {
    FailureOr<std::string> bytes = elementBytes(c.getValue());
    if (failed(bytes))
      return c.emitOpError("has a value the runtime cannot hold");
    rt.call("cleave_rt_constant",
            {rt.arena(), out[0], rt.bytesGlobal("cleave.const", *bytes)});
    return success();
  }
  static LogicalResult build(IotaOp o, ArrayRef<Value> out,
                             RuntimeBuilder &rt) {
    rt.call("cleave_rt_iota", {rt.arena(), out[0], rt.constI64(o.getDim())});
    return success();
  }
  // Constant during a call: the value this step runs with.
  static LogicalResult build(HyperparameterOp h, ArrayRef<Value> out,
                             RuntimeBuilder &rt) {
    rt.call("cleave_rt_set_scalar",
            {rt.arena(), out[0],
             rt.loadHyperparameter(hyperparameterSlot(h.getName()),
                                   h.getDefaultValue().convertToDouble())});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Reshapes, transposes, broadcasts, slices, concatenations and gathers,
/// with the gradients of slices and gathers. A reshape is a view: it
/// copies only where the plan gave its result a buffer of its own.
template <typename Op>
struct DataMovementPattern : CallPattern<DataMovementPattern, Op> {
  using CallPattern<DataMovementPattern, Op>::CallPattern;

  static void build(ReshapeOp r, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.copyUnlessAliased(r.getOperand(), r.getResult(), in[0], out[0]);
  }
  static void build(TransposeOp t, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_transpose",
            {rt.arena(), in[0], out[0], rt.int64s(t.getPerm())});
  }
  static void build(BroadcastInDimOp bc, ArrayRef<Value> in,
                    ArrayRef<Value> out, RuntimeBuilder &rt) {
    rt.call("cleave_rt_broadcast_in_dim",
            {rt.arena(), in[0], out[0], rt.int64s(bc.getDims())});
  }
  static void build(SliceOp s, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_slice",
            {rt.arena(), in[0], out[0], rt.int64s(s.getStart()),
             rt.int64s(s.getStridesOrOnes())});
  }
  static void build(SliceGradOp s, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_slice_grad",
            {rt.arena(), in[0], out[0], rt.int64s(s.getStart()),
             rt.int64s(s.getStrides())});
  }
  // Each part is a slice of the operand.
  static void build(SplitOp s, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    int64_t rank = s.getOperand().getType().getRank();
    SmallVector<int64_t> start(rank, 0), ones(rank, 1);
    for (auto [i, size] : llvm::enumerate(s.getSizes())) {
      rt.call("cleave_rt_slice",
              {rt.arena(), in[0], out[i], rt.int64s(start), rt.int64s(ones)});
      start[s.getDim()] += size;
    }
  }
  // The inputs are passed as a constant array of their descriptors.
  static void build(ConcatOp c, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    Value list = rt.addressList("cleave.list", in);
    rt.call("cleave_rt_concat", {rt.arena(), list, rt.constI64(in.size()),
                                 out[0], rt.constI64(c.getDim())});
  }
  // With an offset, the block forms (the vocabulary-parallel lookup).
  static void build(GatherOp g, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    if (g.getOffset())
      rt.call("cleave_rt_gather_block", {rt.arena(), in[0], in[1], in[2],
                                         out[0], rt.constI64(g.getDim())});
    else
      rt.call("cleave_rt_gather",
              {rt.arena(), in[0], in[1], out[0], rt.constI64(g.getDim())});
  }
  static void build(GatherGradOp g, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    if (g.getOffset())
      rt.call("cleave_rt_gather_grad_block", {rt.arena(), in[0], in[1], in[2],
                                              out[0], rt.constI64(g.getDim())});
    else
      rt.call("cleave_rt_gather_grad",
              {rt.arena(), in[0], in[1], out[0], rt.constI64(g.getDim())});
  }
};

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// Matmuls and their fused forms: a linear layer (bias, activation, the
/// pre-activation when training keeps it), a gemm with transposed operands
/// (and the bias gradient), and the backward of a GELU layer.
template <typename Op> struct MatmulPattern : CallPattern<MatmulPattern, Op> {
  using CallPattern<MatmulPattern, Op>::CallPattern;

  static void build(MatmulOp, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_matmul", {rt.arena(), in[0], in[1], out[0]});
  }
  static void build(LinearOp l, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    Value pre = l.getPreactivation() ? out[1] : rt.null();
    rt.call("cleave_rt_linear", {rt.arena(), in[0], in[1], in[2], out[0], pre,
                                 rt.constI32(l.getTransposeWeight() ? 1 : 0),
                                 rt.constI32(runtimeKind(l.getActivation()))});
  }
  static void build(GemmOp g, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    Value dbias = g.getBiasGrad() ? out[1] : rt.null();
    rt.call("cleave_rt_gemm", {rt.arena(), in[0], in[1], out[0], dbias,
                               rt.constI32(g.getTransposeLhs() ? 1 : 0),
                               rt.constI32(g.getTransposeRhs() ? 1 : 0)});
  }
  static void build(MatmulGeluGradOp g, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    Value dbias = g.getBiasGrad() ? out[1] : rt.null();
    int32_t activation = g.getApproximate() == GeluApproximation::Tanh
                             ? CLEAVE_ACT_GELU_TANH
                             : CLEAVE_ACT_GELU_ERF;
    rt.call("cleave_rt_matmul_gelu_grad",
            {rt.arena(), in[0], in[1], in[2], out[0], dbias,
             rt.constI32(g.getTransposeWeight() ? 1 : 0),
             rt.constI32(activation)});
  }
};

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Ops along dimensions: reductions, (log-)softmax, top-k.
template <typename Op>
struct ReductionPattern : CallPattern<ReductionPattern, Op> {
  using CallPattern<ReductionPattern, Op>::CallPattern;

  static void build(ReduceOp r, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_reduce",
            {rt.arena(), rt.constI32(runtimeKind(r.getKind())), in[0], out[0],
             rt.int64s(r.getDims()), rt.constI64(r.getDims().size())});
  }
  template <typename SoftmaxLike>
  static void buildSoftmax(SoftmaxLike s, bool log, ArrayRef<Value> in,
                           ArrayRef<Value> out, RuntimeBuilder &rt) {
    rt.call("cleave_rt_softmax",
            {rt.arena(), in[0], out[0], rt.constI64(s.getDim()),
             rt.constI32(log ? 1 : 0)});
  }
  static void build(SoftmaxOp s, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    buildSoftmax(s, /*log=*/false, in, out, rt);
  }
  static void build(LogSoftmaxOp s, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    buildSoftmax(s, /*log=*/true, in, out, rt);
  }
  static void build(TopKOp t, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_topk",
            {rt.arena(), in[0], out[0], out[1], rt.constI64(t.getK()),
             rt.constI64(t.getDim()), rt.constI32(t.getSmallest() ? 1 : 0)});
  }
};

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

/// Layer and RMS normalization over one dimension, and their gradients.
template <typename Op>
struct NormalizationPattern : CallPattern<NormalizationPattern, Op> {
  using CallPattern<NormalizationPattern, Op>::CallPattern;

  static void build(LayerNormOp l, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    Value bias = l.getBias() ? in[2] : rt.null();
    rt.call("cleave_rt_layer_norm",
            {rt.arena(), in[0], in[1], bias, out[0], rt.constI64(l.getDim()),
             rt.constF64(l.getEpsilon().convertToDouble())});
  }
  static void build(RmsNormOp r, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_rms_norm",
            {rt.arena(), in[0], in[1], out[0], rt.constI64(r.getDim()),
             rt.constF64(r.getEpsilon().convertToDouble())});
  }
  static void build(LayerNormGradOp l, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    // The bias gradient is skipped when nothing reads it.
    Value dbias = l.getBiasGrad().use_empty() ? rt.null() : out[2];
    rt.call("cleave_rt_layer_norm_grad",
            {rt.arena(), in[0], in[1], in[2], out[0], out[1], dbias,
             rt.constI64(l.getDim()),
             rt.constF64(l.getEpsilon().convertToDouble())});
  }
  static void build(RmsNormGradOp r, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_rms_norm_grad",
            {rt.arena(), in[0], in[1], in[2], out[0], out[1],
             rt.constI64(r.getDim()),
             rt.constF64(r.getEpsilon().convertToDouble())});
  }
};

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Scaled dot-product attention (an optional mask, causal or not) and its
/// gradient; the blocks of ring attention and their gradients.
template <typename Op>
struct AttentionPattern : CallPattern<AttentionPattern, Op> {
  using CallPattern<AttentionPattern, Op>::CallPattern;

  static void build(AttentionOp a, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    double scale = a.getScaleOrDefault();
    Value mask = a.getMask() ? in[3] : rt.null();
    rt.call("cleave_rt_attention",
            {rt.arena(), in[0], in[1], in[2], mask, out[0],
             rt.constI32(a.getCausal() ? 1 : 0), rt.constF64(scale)});
  }
  static void build(AttentionGradOp a, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    Value mask = a.getMask() ? in[4] : rt.null();
    rt.call("cleave_rt_attention_grad",
            {rt.arena(), in[0], in[1], in[2], mask, in[3], out[0], out[1],
             out[2], rt.constI32(a.getCausal() ? 1 : 0),
             rt.constF64(a.getScale().convertToDouble())});
  }
  static void build(AttentionBlockOp a, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    bool merge = bool(a.getOutIn());
    rt.call("cleave_rt_attention_block",
            {rt.arena(), in[0], in[1], in[2], merge ? in[5] : rt.null(),
             merge ? in[6] : rt.null(), in[3], in[4], out[0], out[1],
             rt.constI32(a.getCausal() ? 1 : 0),
             rt.constF64(a.getScale().convertToDouble())});
  }
  static void build(AttentionBlockGradOp a, ArrayRef<Value> in,
                    ArrayRef<Value> out, RuntimeBuilder &rt) {
    rt.call("cleave_rt_attention_block_grad",
            {rt.arena(), in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7],
             out[0], out[1], out[2], rt.constI32(a.getCausal() ? 1 : 0),
             rt.constF64(a.getScale().convertToDouble())});
  }
};

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Cross-entropy (an optional ignored label, a reduction), its gradient,
/// and the mean squared error.
template <typename Op> struct LossPattern : CallPattern<LossPattern, Op> {
  using CallPattern<LossPattern, Op>::CallPattern;

  static void build(CrossEntropyOp c, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    std::optional<int64_t> ignore = c.getIgnoreIndex();
    rt.call("cleave_rt_cross_entropy",
            {rt.arena(), in[0], in[1], out[0], rt.constI32(ignore ? 1 : 0),
             rt.constI64(ignore.value_or(0)),
             rt.constI32(runtimeKind(c.getReduction()))});
  }
  static void build(CrossEntropyGradOp c, ArrayRef<Value> in,
                    ArrayRef<Value> out, RuntimeBuilder &rt) {
    std::optional<int64_t> ignore = c.getIgnoreIndex();
    rt.call("cleave_rt_cross_entropy_grad",
            {rt.arena(), in[0], in[1], in[2], out[0],
             rt.constI32(ignore ? 1 : 0), rt.constI64(ignore.value_or(0)),
             rt.constI32(runtimeKind(c.getReduction()))});
  }
  static void build(MseOp, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_mse", {rt.arena(), in[0], in[1], out[0]});
  }
};

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

/// The router's top-k, the dispatch of tokens to experts, the experts'
/// matmuls and the weighted combination.
template <typename Op> struct MoePattern : CallPattern<MoePattern, Op> {
  using CallPattern<MoePattern, Op>::CallPattern;

  static void build(RouterTopKOp r, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_router_topk",
            {rt.arena(), in[0], out[0], out[1], rt.constI64(r.getK()),
             rt.constI32(r.getNormalize() ? 1 : 0)});
  }
  static void build(MoeDispatchOp d, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_moe_dispatch",
            {rt.arena(), in[0], in[1], out[0], rt.constI64(d.getGroups())});
  }
  static void build(ExpertMatmulOp, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_expert_matmul", {rt.arena(), in[0], in[1], out[0]});
  }
  static void build(MoeCombineOp c, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.call("cleave_rt_moe_combine", {rt.arena(), in[0], in[1], in[2], out[0],
                                      rt.constI64(c.getGroups())});
  }
};

//===----------------------------------------------------------------------===//
// Parameters and their updates
//===----------------------------------------------------------------------===//

/// Reading a parameter is a view of its storage (no call); assigning one
/// copies into it, unless the value was computed in place.
template <typename Op> struct ParamPattern : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;
  LogicalResult lower(Op op, ArrayRef<Value> in, ArrayRef<Value> out,
                      RuntimeBuilder &rt) const override {
    return build(op, in, rt);
  }

private:
  static LogicalResult build(ReadParamOp, ArrayRef<Value>, RuntimeBuilder &) {
    return success();
  }
  LogicalResult build(AssignOp a, ArrayRef<Value> in,
                      RuntimeBuilder &rt) const {
    ParamOp param = this->state.lookupParam(a.getParamAttr());
    if (param && param->hasAttr(kOffsetAttr) &&
        cast<IntegerAttr>(param->getAttr(kOffsetAttr)).getInt() ==
            this->state.offsets.lookup(a.getValue()))
      return success(); // computed in the parameter's storage
    FailureOr<Value> desc = rt.paramDesc(a.getParamAttr(), a);
    if (failed(desc))
      return failure();
    rt.call("cleave_rt_copy", {rt.arena(), in[0], *desc});
    return success();
  }
};

/// A hyperparameter of the update: the run-time slot's value when the op
/// reads them, else the attribute's.
Value hyperparameter(RuntimeBuilder &rt, Operation *update, int32_t slot,
                     FloatAttr value) {
  double fallback = value.getValueAsDouble();
  return update->hasAttr("run_time_hyperparameters")
             ? rt.loadHyperparameter(slot, fallback)
             : rt.constF64(fallback);
}

/// The weight decay's slot of an update of `param`: parameters of rank < 2
/// (biases, normalisation weights) have their own.
int32_t weightDecaySlot(Value param) {
  return cast<RankedTensorType>(param.getType()).getRank() >= 2
             ? CLEAVE_HP_WEIGHT_DECAY
             : CLEAVE_HP_WEIGHT_DECAY_1D;
}

/// The fused optimizer updates. The kernels update in place: each result
/// starts as its operand, copied unless the plan placed them together.
template <typename Op>
struct OptimizerPattern : CallPattern<OptimizerPattern, Op> {
  using CallPattern<OptimizerPattern, Op>::CallPattern;

  static void build(SgdOp u, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.copyUnlessAliased(u.getParam(), u.getNewParam(), in[0], out[0]);
    Value buf = rt.null();
    if (Value b = u.getMomentumBuffer()) {
      unsigned i = u.getGradScale() ? 4 : 3;
      rt.copyUnlessAliased(b, u.getNewMomentumBuffer(), in[i], out[1]);
      buf = out[1];
    }
    Value scale = u.getGradScale() ? in[3] : rt.null();
    auto hp = [&](int32_t slot, FloatAttr value) {
      return hyperparameter(rt, u, slot, value);
    };
    rt.call("cleave_rt_sgd",
            {rt.arena(), out[0], in[1], buf, in[2], scale,
             hp(CLEAVE_HP_LR, u.getLrAttr()),
             hp(CLEAVE_HP_MOMENTUM, u.getMomentumAttr()),
             hp(CLEAVE_HP_DAMPENING, u.getDampeningAttr()),
             hp(weightDecaySlot(u.getParam()), u.getWeightDecayAttr()),
             rt.constI32(u.getNesterov() ? 1 : 0)});
  }
  static void build(AdamwOp u, ArrayRef<Value> in, ArrayRef<Value> out,
                    RuntimeBuilder &rt) {
    rt.copyUnlessAliased(u.getParam(), u.getNewParam(), in[0], out[0]);
    rt.copyUnlessAliased(u.getFirstMoment(), u.getNewFirstMoment(), in[2],
                         out[1]);
    rt.copyUnlessAliased(u.getSecondMoment(), u.getNewSecondMoment(), in[3],
                         out[2]);
    Value scale = u.getGradScale() ? in[5] : rt.null();
    auto hp = [&](int32_t slot, FloatAttr value) {
      return hyperparameter(rt, u, slot, value);
    };
    rt.call("cleave_rt_adamw",
            {rt.arena(), out[0], in[1], out[1], out[2], in[4], scale,
             hp(CLEAVE_HP_LR, u.getLrAttr()),
             hp(CLEAVE_HP_BETA1, u.getBeta1Attr()),
             hp(CLEAVE_HP_BETA2, u.getBeta2Attr()),
             hp(CLEAVE_HP_EPS, u.getEpsAttr()),
             hp(weightDecaySlot(u.getParam()), u.getWeightDecayAttr())});
  }
};

} // namespace

Value RuntimeBuilder::loadHyperparameter(int32_t slot, double fallback) {
  // context && context->hyperparameters ? context->hyperparameters[slot]
  //                                     : fallback
  // The array (a zeroed global in the null cases, so that no load reads
  // null) and whether it is the context's are found once per function, at
  // its entry; each use loads its slot.
  auto &[safe, none] = state.hyperparameters[state.context];
  if (!safe) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(state.context.getParentBlock());
    auto isNull = [&](Value p) {
      return LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, p, null());
    };
    if (!state.noContext) {
      auto type = LLVM::LLVMArrayType::get(i64, CLEAVE_NUM_HYPERPARAMETERS);
      state.noContext = atModuleStart([&] {
        return LLVM::GlobalOp::create(
            b, loc, type, /*isConstant=*/true, LLVM::Linkage::Private,
            uniqueName("cleave.no_context"),
            i64Array(SmallVector<int64_t>(CLEAVE_NUM_HYPERPARAMETERS, 0)));
      });
    }
    Value zeros = LLVM::AddressOfOp::create(b, loc, state.noContext);
    Value context = LLVM::SelectOp::create(b, loc, isNull(state.context),
                                           zeros, state.context);
    Value field = LLVM::GEPOp::create(b, loc, ptr, ptr, context,
                                      ArrayRef<LLVM::GEPArg>{3});
    Value values = LLVM::LoadOp::create(b, loc, ptr, field);
    none = isNull(values);
    safe = LLVM::SelectOp::create(b, loc, none, zeros, values);
  }
  Value at =
      LLVM::GEPOp::create(b, loc, ptr, f64, safe, ArrayRef<LLVM::GEPArg>{slot});
  Value loaded = LLVM::LoadOp::create(b, loc, f64, at);
  return LLVM::SelectOp::create(b, loc, none, constF64(fallback), loaded);
}

namespace cleave::lowering {

void populateGraphToRuntimePatterns(RewritePatternSet &patterns,
                                    const DescriptorConverter &converter,
                                    Lowering &state) {
  addFamily<UnaryPattern, NegOp, AbsOp, ReluOp, ExpOp, LogOp, SqrtOp, RsqrtOp,
            ReciprocalOp, TanhOp, ErfOp, SigmoidOp, SiluOp, SinOp, CosOp,
            GeluOp>(patterns, converter, state);
  addFamily<UnaryGradPattern, GeluGradOp, SiluGradOp>(patterns, converter,
                                                      state);
  addFamily<BinaryPattern, AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp>(
      patterns, converter, state);
  addFamily<SelectPattern, CompareOp, WhereOp, CastOp>(patterns, converter,
                                                       state);
  addFamily<ConstantPattern, ConstantOp, IotaOp, HyperparameterOp>(
      patterns, converter, state);
  addFamily<DataMovementPattern, ReshapeOp, TransposeOp, BroadcastInDimOp,
            SliceOp, SliceGradOp, SplitOp, ConcatOp, GatherOp, GatherGradOp>(
      patterns, converter, state);
  addFamily<MatmulPattern, MatmulOp, LinearOp, GemmOp, MatmulGeluGradOp>(
      patterns, converter, state);
  addFamily<ReductionPattern, ReduceOp, SoftmaxOp, LogSoftmaxOp, TopKOp>(
      patterns, converter, state);
  addFamily<NormalizationPattern, LayerNormOp, RmsNormOp, LayerNormGradOp,
            RmsNormGradOp>(patterns, converter, state);
  addFamily<AttentionPattern, AttentionOp, AttentionGradOp, AttentionBlockOp,
            AttentionBlockGradOp>(patterns, converter, state);
  addFamily<LossPattern, CrossEntropyOp, CrossEntropyGradOp, MseOp>(
      patterns, converter, state);
  addFamily<MoePattern, RouterTopKOp, MoeDispatchOp, ExpertMatmulOp,
            MoeCombineOp>(patterns, converter, state);
  addFamily<ParamPattern, ReadParamOp, AssignOp>(patterns, converter, state);
  addFamily<OptimizerPattern, SgdOp, AdamwOp>(patterns, converter, state);
}

} // namespace cleave::lowering
