//===- LowerToRuntime.cpp - planned graph IR -> runtime calls in LLVM ----===//
//
// Turns the memory-planned entry function into `llvm.func
// @cleave_program_run(%arena, %context)`: one call of the runtime C ABI per op
// (runtime/include/cleave/Runtime/cleave_rt.h), each tensor a constant
// descriptor (offset, dtype, shape) and attribute arrays constant globals.
// It is a full dialect conversion with the LLVM dialect legal: this file has
// the driver and the function's patterns, LowerGraph.cpp those of the graph
// op families, LowerDist.cpp those of the dist ops of a partitioned program,
// so an op that no pattern lowers fails the conversion by name. The
// program's metadata is ProgramInfo.cpp's; the shared state
// RuntimeLowering.h's.
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

namespace cleave {
#define GEN_PASS_DEF_LOWERTORUNTIMEPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;
using namespace cleave::lowering;

namespace {

//===----------------------------------------------------------------------===//
// The function
//===----------------------------------------------------------------------===//

/// The entry function becomes cleave_program_run(%arena, %context): its
/// body moves into the new function, whose entry block takes the arena and
/// the program context in place of the tensors; each tensor argument
/// becomes the descriptor of its planned buffer.
struct FuncPattern : OpConversionPattern<func::FuncOp> {
  FuncPattern(const DescriptorConverter &converter, Lowering &state)
      : OpConversionPattern(converter, state.ctx), state(state) {}

  LogicalResult
  matchAndRewrite(func::FuncOp fn, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.setInsertionPointToEnd(state.module.getBody());
    auto runType = LLVM::LLVMFunctionType::get(
        LLVM::LLVMVoidType::get(state.ctx), {state.ptr, state.ptr});
    auto run = LLVM::LLVMFuncOp::create(
        rewriter, fn.getLoc(), state.runSymbol(), runType);
    rewriter.inlineRegionBefore(fn.getBody(), run.getBody(), run.end());

    Block *body = &run.getBody().front();
    TypeConverter::SignatureConversion signature(body->getNumArguments());
    signature.addInputs({state.ptr, state.ptr});
    rewriter.setInsertionPointToStart(body);
    RuntimeBuilder rt(state, rewriter, fn.getLoc());
    for (BlockArgument arg : body->getArguments())
      if (!arg.use_empty())
        signature.remapInput(arg.getArgNumber(), rt.descOf(arg));
    Block *entry = rewriter.applySignatureConversion(body, signature);
    state.arena = entry->getArgument(0);
    state.context = entry->getArgument(1);
    rewriter.eraseOp(fn);
    return success();
  }

private:
  Lowering &state;
};

/// The function's return: the outputs are where the plan put them, which
/// the metadata says.
struct ReturnPattern : OpConversionPattern<func::ReturnOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(func::ReturnOp ret, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    LLVM::ReturnOp::create(rewriter, ret->getParentOp()->getLoc(),
                           ValueRange());
    rewriter.eraseOp(ret);
    return success();
  }
};

} // namespace

namespace cleave::lowering {

Lowering::Lowering(ModuleOp module) : module(module), ctx(module.getContext()) {
  i8 = IntegerType::get(ctx, 8);
  i32 = IntegerType::get(ctx, 32);
  i64 = IntegerType::get(ctx, 64);
  f64 = Float64Type::get(ctx);
  ptr = LLVM::LLVMPointerType::get(ctx);
  descType = LLVM::LLVMArrayType::get(i64, kDescWords);
  // cleave_named_tensor: name, tensor, init_data, init_file, init_offset,
  // role, sharding.
  namedType = LLVM::LLVMStructType::getLiteral(
      ctx, {ptr, descType, ptr, ptr, i64, i32, ptr});
  for (auto m : module.getOps<dist::MeshOp>())
    meshes.push_back(m);
  for (auto param : module.getOps<ParamOp>())
    params[param.getSymName()] = param;
  if (auto stage = module->getAttrOfType<IntegerAttr>(kStageAttr))
    symbolPrefix = stageSymbolPrefix(stage.getInt());
}

LogicalResult Lowering::presetGroups() {
  auto preset = module->getAttrOfType<ArrayAttr>(kGroupsAttr);
  if (!preset)
    return success();
  dist::MeshOp m = mesh();
  if (!m)
    return module.emitOpError("has ") << kGroupsAttr << " but no dist.mesh";
  for (Attribute g : preset) {
    auto axes = dyn_cast<ArrayAttr>(g);
    if (!axes || failed(groupOf(module, FlatSymbolRefAttr::get(
                                            m.getSymNameAttr()),
                                axes)))
      return module.emitOpError("has a malformed ")
             << kGroupsAttr << " entry " << g;
  }
  return success();
}

FailureOr<SmallVector<int64_t>> Lowering::descWords(int64_t offset, Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return failure();
  FailureOr<int64_t> code = dtypeCode(tensor.getElementType());
  if (failed(code) || tensor.getRank() > CLEAVE_RT_MAX_RANK)
    return failure();
  SmallVector<int64_t> words(kDescWords, 0);
  words[0] = offset;
  words[1] = *code | (tensor.getRank() << 32);
  for (int64_t d = 0; d < tensor.getRank(); ++d)
    words[2 + d] = tensor.getDimSize(d);
  return words;
}

LogicalResult Lowering::readPlan(func::FuncOp fn) {
  for (BlockArgument arg : fn.getArguments())
    if (auto offset =
            fn.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kOffsetAttr))
      offsets[arg] = offset.getInt();
  for (Operation &op : fn.getBody().front()) {
    if (auto planned = op.getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr))
      for (auto [r, off] : llvm::zip(op.getResults(), planned.asArrayRef()))
        offsets[r] = off;
    if (isa<func::ReturnOp>(op))
      continue;
    for (Value v : llvm::concat<Value>(op.getOperands(), op.getResults())) {
      auto it = offsets.find(v);
      if (it == offsets.end())
        return op.emitOpError("has no planned offset; run "
                              "-cleave-plan-memory first");
      if (failed(descWords(it->second, v.getType())))
        return op.emitOpError("cannot describe ")
               << v.getType() << " to the runtime (element type or rank > "
               << CLEAVE_RT_MAX_RANK << ")";
    }
  }
  return success();
}

LogicalResult Lowering::run(func::FuncOp fn) {
  if (!fn->hasAttr(kArenaBytesAttr))
    return fn.emitOpError("has no memory plan; run -cleave-plan-memory first");
  // A nested module is another program, which a link pass takes in.
  for (Operation &op : module.getBody()->getOperations())
    if (!isa<func::FuncOp, ParamOp, dist::MeshOp, ModuleOp>(op))
      return op.emitOpError("cannot be lowered to the runtime");
  // The runtime numbers ranks on one mesh.
  if (meshes.size() > 1)
    return meshes[1].emitOpError("is a second mesh; a program runs on one "
                                 "dist.mesh (@")
           << meshes[0].getSymName() << ")";
  if (failed(presetGroups()) || failed(readPlan(fn)))
    return failure();
  // The metadata is read from the function, which the conversion replaces.
  Location loc = fn.getLoc();
  FailureOr<ProgramInfo> info = describeProgram(fn);
  if (failed(info))
    return failure();

  if (profile)
    insertProfileMarks(*this, fn);

  DescriptorConverter converter(ctx);
  ConversionTarget target(*ctx);
  target.addLegalDialect<LLVM::LLVMDialect>();
  target
      .addIllegalDialect<GraphDialect, dist::DistDialect, func::FuncDialect>();
  RewritePatternSet patterns(ctx);
  patterns.add<FuncPattern>(converter, *this);
  patterns.add<ReturnPattern>(converter, ctx);
  populateGraphToRuntimePatterns(patterns, converter, *this);
  populateDistToRuntimePatterns(patterns, converter, *this);
  // Folding would replace values by others that the plan did not place
  // where their uses expect them.
  ConversionConfig config;
  config.foldingMode = DialectConversionFoldingMode::Never;
  if (failed(applyFullConversion(fn, target, std::move(patterns), config)) ||
      reportedError)
    return failure();

  if (profile)
    finishProfileMarks(module.lookupSymbol<LLVM::LLVMFuncOp>(runSymbol()));
  OpBuilder b(ctx);
  RuntimeBuilder(*this, b, loc).programInfo(*info);
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
    Lowering lowering(module);
    if (!symbolPrefix.empty())
      lowering.symbolPrefix = symbolPrefix;
    lowering.profile = profile;
    if (failed(lowering.run(fn)) ||
        failed(splitRunFunction(lowering, chunkSize)))
      signalPassFailure();
  }
};
} // namespace
