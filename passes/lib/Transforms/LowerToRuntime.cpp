//===- LowerToRuntime.cpp - planned graph IR -> runtime calls in LLVM ----===//
//
// Turns the memory-planned entry function into `llvm.func
// @cleave_program_run(%arena, %context)`: one call of the runtime C ABI per op
// (runtime/include/cleave/Runtime/cleave_rt.h), each tensor a constant
// descriptor (offset, dtype, shape) and attribute arrays constant globals.
// Views (reshape, read_param) emit nothing. The dist ops of a partitioned
// program are LowerDist.cpp's, the program's metadata ProgramInfo.cpp's;
// the shared state is RuntimeLowering.h.
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace cleave {
#define GEN_PASS_DEF_LOWERTORUNTIMEPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;
using namespace cleave::lowering;

namespace cleave::lowering {

LogicalResult Lowering::lowerOp(Operation *op) {
  auto operands = tensors(op, op->getOperands());
  if (failed(operands))
    return failure();
  auto results = tensors(op, op->getResults());
  if (failed(results))
    return failure();
  SmallVector<Value> in = *operands, out = *results;

  auto unary = [&](int64_t kind) {
    call("cleave_rt_unary", {arena, constI32(kind), in[0], out[0]});
    return success();
  };
  auto binary = [&](int64_t kind) {
    call("cleave_rt_binary", {arena, constI32(kind), in[0], in[1], out[0]});
    return success();
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ReadParamOp>([](auto) { return success(); })
      .Case<ReshapeOp>([&](ReshapeOp r) {
        if (offsets[r.getOperand()] != offsets[r.getResult()])
          call("cleave_rt_copy", {arena, in[0], out[0]});
        return success();
      })
      .Case<ConstantOp>([&](ConstantOp c) -> LogicalResult {
        FailureOr<std::string> bytes = elementBytes(c.getValue());
        if (failed(bytes))
          return c.emitOpError("has a value the runtime cannot hold");
        call("cleave_rt_constant",
             {arena, out[0], bytesGlobal("cleave.const", *bytes)});
        return success();
      })
      .Case<IotaOp>([&](IotaOp o) {
        call("cleave_rt_iota", {arena, out[0], constI64(o.getDim())});
        return success();
      })
      .Case<NegOp>([&](auto) { return unary(CLEAVE_NEG); })
      .Case<AbsOp>([&](auto) { return unary(CLEAVE_ABS); })
      .Case<ReluOp>([&](auto) { return unary(CLEAVE_RELU); })
      .Case<ExpOp>([&](auto) { return unary(CLEAVE_EXP); })
      .Case<LogOp>([&](auto) { return unary(CLEAVE_LOG); })
      .Case<SqrtOp>([&](auto) { return unary(CLEAVE_SQRT); })
      .Case<RsqrtOp>([&](auto) { return unary(CLEAVE_RSQRT); })
      .Case<ReciprocalOp>([&](auto) { return unary(CLEAVE_RECIPROCAL); })
      .Case<TanhOp>([&](auto) { return unary(CLEAVE_TANH); })
      .Case<ErfOp>([&](auto) { return unary(CLEAVE_ERF); })
      .Case<SigmoidOp>([&](auto) { return unary(CLEAVE_SIGMOID); })
      .Case<SiluOp>([&](auto) { return unary(CLEAVE_SILU); })
      .Case<SinOp>([&](auto) { return unary(CLEAVE_SIN); })
      .Case<CosOp>([&](auto) { return unary(CLEAVE_COS); })
      .Case<GeluOp>(
          [&](GeluOp g) { return unary(geluKind(g.getApproximate())); })
      .Case<AddOp>([&](auto) { return binary(CLEAVE_ADD); })
      .Case<SubOp>([&](auto) { return binary(CLEAVE_SUB); })
      .Case<MulOp>([&](auto) { return binary(CLEAVE_MUL); })
      .Case<DivOp>([&](auto) { return binary(CLEAVE_DIV); })
      .Case<PowOp>([&](auto) { return binary(CLEAVE_POW); })
      .Case<MaxOp>([&](auto) { return binary(CLEAVE_MAX); })
      .Case<MinOp>([&](auto) { return binary(CLEAVE_MIN); })
      .Case<CompareOp>([&](CompareOp c) {
        call("cleave_rt_compare",
             {arena, constI32(runtimeKind(c.getDirection())), in[0], in[1],
              out[0]});
        return success();
      })
      .Case<WhereOp>([&](auto) {
        call("cleave_rt_where", {arena, in[0], in[1], in[2], out[0]});
        return success();
      })
      .Case<CastOp>([&](auto) {
        call("cleave_rt_cast", {arena, in[0], out[0]});
        return success();
      })
      .Case<MatmulOp>([&](auto) {
        call("cleave_rt_matmul", {arena, in[0], in[1], out[0]});
        return success();
      })
      .Case<LinearOp>([&](LinearOp l) {
        Value pre = l.getPreactivation() ? out[1] : null();
        call("cleave_rt_linear",
             {arena, in[0], in[1], in[2], out[0], pre,
              constI32(l.getTransposeWeight() ? 1 : 0),
              constI32(runtimeKind(l.getActivation()))});
        return success();
      })
      .Case<GemmOp>([&](GemmOp g) {
        Value dbias = g.getBiasGrad() ? out[1] : null();
        call("cleave_rt_gemm", {arena, in[0], in[1], out[0], dbias,
                                constI32(g.getTransposeLhs() ? 1 : 0),
                                constI32(g.getTransposeRhs() ? 1 : 0)});
        return success();
      })
      .Case<MatmulGeluGradOp>([&](MatmulGeluGradOp g) {
        Value dbias = g.getBiasGrad() ? out[1] : null();
        int32_t activation = g.getApproximate() == GeluApproximation::Tanh
                                 ? CLEAVE_ACT_GELU_TANH
                                 : CLEAVE_ACT_GELU_ERF;
        call("cleave_rt_matmul_gelu_grad",
             {arena, in[0], in[1], in[2], out[0], dbias,
              constI32(g.getTransposeWeight() ? 1 : 0), constI32(activation)});
        return success();
      })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto s) {
        call("cleave_rt_softmax",
             {arena, in[0], out[0], constI64(s.getDim()),
              constI32(isa<LogSoftmaxOp>(s.getOperation()) ? 1 : 0)});
        return success();
      })
      .Case<ReduceOp>([&](ReduceOp r) {
        call("cleave_rt_reduce",
             {arena, constI32(runtimeKind(r.getKind())), in[0], out[0],
              int64s(r.getDims()), constI64(r.getDims().size())});
        return success();
      })
      .Case<LayerNormOp>([&](LayerNormOp l) {
        Value bias = l.getBias() ? in[2] : null();
        call("cleave_rt_layer_norm",
             {arena, in[0], in[1], bias, out[0], constI64(l.getDim()),
              constF64(l.getEpsilon().convertToDouble())});
        return success();
      })
      .Case<RmsNormOp>([&](RmsNormOp r) {
        call("cleave_rt_rms_norm",
             {arena, in[0], in[1], out[0], constI64(r.getDim()),
              constF64(r.getEpsilon().convertToDouble())});
        return success();
      })
      .Case<TransposeOp>([&](TransposeOp t) {
        call("cleave_rt_transpose", {arena, in[0], out[0], int64s(t.getPerm())});
        return success();
      })
      .Case<BroadcastInDimOp>([&](BroadcastInDimOp bc) {
        call("cleave_rt_broadcast_in_dim",
             {arena, in[0], out[0], int64s(bc.getDims())});
        return success();
      })
      .Case<SliceOp>([&](SliceOp s) {
        call("cleave_rt_slice", {arena, in[0], out[0], int64s(s.getStart()),
                                 int64s(s.getStridesOrOnes())});
        return success();
      })
      .Case<SplitOp>([&](SplitOp s) {
        int64_t rank = s.getOperand().getType().getRank();
        SmallVector<int64_t> start(rank, 0), ones(rank, 1);
        for (auto [i, size] : llvm::enumerate(s.getSizes())) {
          call("cleave_rt_slice",
               {arena, in[0], out[i], int64s(start), int64s(ones)});
          start[s.getDim()] += size;
        }
        return success();
      })
      .Case<ConcatOp>([&](ConcatOp c) {
        // A constant array of the input descriptors' addresses.
        auto arrayType = LLVM::LLVMArrayType::get(ptr, in.size());
        auto global = atModuleStart([&] {
          auto g = LLVM::GlobalOp::create(b, loc, arrayType, true,
                                          LLVM::Linkage::Private,
                                          uniqueName("cleave.list"),
                                          Attribute());
          Block *block = b.createBlock(&g.getInitializerRegion());
          b.setInsertionPointToStart(block);
          Value list = LLVM::UndefOp::create(b, loc, arrayType);
          for (auto [i, d] : llvm::enumerate(in)) {
            auto addr = cast<LLVM::AddressOfOp>(d.getDefiningOp());
            Value a = LLVM::AddressOfOp::create(b, loc, ptr,
                                                addr.getGlobalName());
            list = LLVM::InsertValueOp::create(b, loc, list, a,
                                               ArrayRef<int64_t>{int64_t(i)});
          }
          LLVM::ReturnOp::create(b, loc, list);
          return g;
        });
        Value list = LLVM::AddressOfOp::create(b, loc, global);
        call("cleave_rt_concat", {arena, list, constI64(in.size()), out[0],
                                  constI64(c.getDim())});
        return success();
      })
      .Case<GatherOp>([&](GatherOp g) {
        call("cleave_rt_gather",
             {arena, in[0], in[1], out[0], constI64(g.getDim())});
        return success();
      })
      .Case<TopKOp>([&](TopKOp t) {
        call("cleave_rt_topk",
             {arena, in[0], out[0], out[1], constI64(t.getK()),
              constI64(t.getDim()), constI32(t.getSmallest() ? 1 : 0)});
        return success();
      })
      .Case<AttentionOp>([&](AttentionOp a) {
        double scale = a.getScale()
                           ? a.getScale()->convertToDouble()
                           : 1.0 / std::sqrt(static_cast<double>(
                                 a.getQuery().getType().getDimSize(3)));
        Value mask = a.getMask() ? in[3] : null();
        call("cleave_rt_attention",
             {arena, in[0], in[1], in[2], mask, out[0],
              constI32(a.getCausal() ? 1 : 0), constF64(scale)});
        return success();
      })
      .Case<CrossEntropyOp>([&](CrossEntropyOp c) {
        std::optional<int64_t> ignore = c.getIgnoreIndex();
        call("cleave_rt_cross_entropy",
             {arena, in[0], in[1], out[0], constI32(ignore ? 1 : 0),
              constI64(ignore.value_or(0)),
              constI32(runtimeKind(c.getReduction()))});
        return success();
      })
      .Case<MseOp>([&](auto) {
        call("cleave_rt_mse", {arena, in[0], in[1], out[0]});
        return success();
      })
      .Case<RouterTopKOp>([&](RouterTopKOp r) {
        call("cleave_rt_router_topk",
             {arena, in[0], out[0], out[1], constI64(r.getK()),
              constI32(r.getNormalize() ? 1 : 0)});
        return success();
      })
      .Case<MoeDispatchOp>([&](auto) {
        call("cleave_rt_moe_dispatch", {arena, in[0], in[1], out[0]});
        return success();
      })
      .Case<ExpertMatmulOp>([&](auto) {
        call("cleave_rt_expert_matmul", {arena, in[0], in[1], out[0]});
        return success();
      })
      .Case<MoeCombineOp>([&](auto) {
        call("cleave_rt_moe_combine", {arena, in[0], in[1], in[2], out[0]});
        return success();
      })
      .Case<GeluGradOp>([&](GeluGradOp g) {
        call("cleave_rt_unary_grad",
             {arena, constI32(geluKind(g.getApproximate())), in[0], in[1],
              out[0]});
        return success();
      })
      .Case<SiluGradOp>([&](auto) {
        call("cleave_rt_unary_grad",
             {arena, constI32(CLEAVE_SILU), in[0], in[1], out[0]});
        return success();
      })
      .Case<LayerNormGradOp>([&](LayerNormGradOp l) {
        // The bias gradient is skipped when nothing reads it.
        Value dbias = l.getBiasGrad().use_empty() ? null() : out[2];
        call("cleave_rt_layer_norm_grad",
             {arena, in[0], in[1], in[2], out[0], out[1], dbias,
              constI64(l.getDim()),
              constF64(l.getEpsilon().convertToDouble())});
        return success();
      })
      .Case<RmsNormGradOp>([&](RmsNormGradOp r) {
        call("cleave_rt_rms_norm_grad",
             {arena, in[0], in[1], in[2], out[0], out[1],
              constI64(r.getDim()),
              constF64(r.getEpsilon().convertToDouble())});
        return success();
      })
      .Case<AttentionGradOp>([&](AttentionGradOp a) {
        Value mask = a.getMask() ? in[4] : null();
        call("cleave_rt_attention_grad",
             {arena, in[0], in[1], in[2], mask, in[3], out[0], out[1], out[2],
              constI32(a.getCausal() ? 1 : 0),
              constF64(a.getScale().convertToDouble())});
        return success();
      })
      .Case<GatherGradOp>([&](GatherGradOp g) {
        call("cleave_rt_gather_grad",
             {arena, in[0], in[1], out[0], constI64(g.getDim())});
        return success();
      })
      .Case<SliceGradOp>([&](SliceGradOp s) {
        call("cleave_rt_slice_grad", {arena, in[0], out[0],
                                      int64s(s.getStart()),
                                      int64s(s.getStrides())});
        return success();
      })
      .Case<CrossEntropyGradOp>([&](CrossEntropyGradOp c) {
        std::optional<int64_t> ignore = c.getIgnoreIndex();
        call("cleave_rt_cross_entropy_grad",
             {arena, in[0], in[1], in[2], out[0], constI32(ignore ? 1 : 0),
              constI64(ignore.value_or(0)),
              constI32(runtimeKind(c.getReduction()))});
        return success();
      })
      .Case<AssignOp>([&](AssignOp a) -> LogicalResult {
        auto param = module.lookupSymbol<ParamOp>(a.getParamAttr());
        if (param && param->hasAttr(kOffsetAttr) &&
            cast<IntegerAttr>(param->getAttr(kOffsetAttr)).getInt() ==
                offsets.lookup(a.getValue()))
          return success(); // computed in the parameter's storage
        FailureOr<Value> desc = paramDesc(a.getParamAttr(), a);
        if (failed(desc))
          return failure();
        call("cleave_rt_copy", {arena, in[0], *desc});
        return success();
      })
      .Case<SgdOp>([&](SgdOp u) -> LogicalResult {
        // The kernel updates in place: the results start as the operands.
        copyUnlessAliased(u.getParam(), u.getNewParam(), in[0], out[0]);
        Value buf = null();
        if (Value b = u.getMomentumBuffer()) {
          unsigned i = u.getGradScale() ? 4 : 3;
          copyUnlessAliased(b, u.getNewMomentumBuffer(), in[i], out[1]);
          buf = out[1];
        }
        Value scale = u.getGradScale() ? in[3] : null();
        call("cleave_rt_sgd",
             {arena, out[0], in[1], buf, in[2], scale,
              constF64(u.getLr().convertToDouble()),
              constF64(u.getMomentum().convertToDouble()),
              constF64(u.getDampening().convertToDouble()),
              constF64(u.getWeightDecay().convertToDouble()),
              constI32(u.getNesterov() ? 1 : 0)});
        return success();
      })
      .Case<AdamwOp>([&](AdamwOp u) -> LogicalResult {
        copyUnlessAliased(u.getParam(), u.getNewParam(), in[0], out[0]);
        copyUnlessAliased(u.getFirstMoment(), u.getNewFirstMoment(), in[2],
                          out[1]);
        copyUnlessAliased(u.getSecondMoment(), u.getNewSecondMoment(), in[3],
                          out[2]);
        Value scale = u.getGradScale() ? in[5] : null();
        call("cleave_rt_adamw",
             {arena, out[0], in[1], out[1], out[2], in[4], scale,
              constF64(u.getLr().convertToDouble()),
              constF64(u.getBeta1().convertToDouble()),
              constF64(u.getBeta2().convertToDouble()),
              constF64(u.getEps().convertToDouble()),
              constF64(u.getWeightDecay().convertToDouble())});
        return success();
      })
      .Default([&](Operation *op) -> LogicalResult {
        if (isa<dist::DistDialect>(op->getDialect()))
          return lowerDistOp(op, in, out);
        return op->emitOpError("cannot be lowered to the runtime");
      });
}

LogicalResult Lowering::run(func::FuncOp fn) {
  if (!fn->hasAttr(kArenaBytesAttr))
    return fn.emitOpError("has no memory plan; run -cleave-plan-memory first");
  for (Operation &op : module.getBody()->getOperations())
    if (!isa<func::FuncOp, ParamOp, dist::MeshOp>(op))
      return op.emitOpError("cannot be lowered to the runtime");
  // The runtime numbers ranks on one mesh.
  if (meshes.size() > 1)
    return meshes[1].emitOpError("is a second mesh; a program runs on one "
                                 "dist.mesh (@")
           << meshes[0].getSymName() << ")";
  Block &body = fn.getBody().front();
  for (BlockArgument arg : fn.getArguments())
    offsets[arg] =
        cast<IntegerAttr>(fn.getArgAttr(arg.getArgNumber(), kOffsetAttr))
            .getInt();
  for (Operation &op : body)
    if (auto planned = op.getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr))
      for (auto [r, off] : llvm::zip(op.getResults(), planned.asArrayRef()))
        offsets[r] = off;

  b.setInsertionPointToEnd(module.getBody());
  // cleave_program_run(arena, context).
  auto runType = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                             {ptr, ptr});
  auto run = LLVM::LLVMFuncOp::create(b, fn.getLoc(), "cleave_program_run",
                                      runType);
  Block *entry = run.addEntryBlock(b);
  arena = entry->getArgument(0);
  context = entry->getArgument(1);
  b.setInsertionPointToStart(entry);
  for (Operation &op : body) {
    if (isa<func::ReturnOp>(op))
      continue;
    loc = op.getLoc();
    if (failed(lowerOp(&op)))
      return failure();
  }
  loc = fn.getLoc();
  LLVM::ReturnOp::create(b, loc, ValueRange());
  if (failed(emitProgramInfo(fn)))
    return failure();

  fn.erase();
  for (auto param : llvm::make_early_inc_range(module.getOps<ParamOp>()))
    param.erase();
  for (dist::MeshOp m : meshes)
    m.erase();
  meshes.clear();
  return success();
}

} // namespace cleave::lowering

namespace {
struct LowerToRuntimePass
    : cleave::impl::LowerToRuntimePassBase<LowerToRuntimePass> {
  using LowerToRuntimePassBase::LowerToRuntimePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp fn = getEntryFunction(module, entry);
    if (!fn) {
      module.emitError("no entry function '")
          << entry << "' (and not exactly one function) to lower";
      return signalPassFailure();
    }
    if (failed(Lowering(module).run(fn)))
      signalPassFailure();
  }
};
} // namespace
