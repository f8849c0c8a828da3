//===- LinkStages.cpp - one program of lowered pipeline stages ------------===//
//
// -cleave-link-stages: after -dist-pipeline-parallel and the lowering of
// each stage module, the stages' code and data move into the outer module
// (the lowering named each stage's symbols after it, so only the shared
// external declarations meet), and the program's own metadata lists the
// stages (cleave_rt.h, ABI 5) with a cleave_program_run that runs the
// stage of context->stage.
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

namespace cleave {
#define GEN_PASS_DEF_LINKSTAGESPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::lowering;

/// A function or global that another object defines.
static bool isDeclaration(Operation *op) {
  if (auto fn = dyn_cast<LLVM::LLVMFuncOp>(op))
    return fn.isExternal();
  if (auto global = dyn_cast<LLVM::GlobalOp>(op))
    return global.getInitializerRegion().empty() && !global.getValueOrNull();
  return false;
}

LogicalResult cleave::lowering::takeInProgram(ModuleOp top, ModuleOp sub,
                                              llvm::StringSet<> &names) {
  for (Operation &op : llvm::make_early_inc_range(*sub.getBody())) {
    auto name = op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName());
    if (name && names.contains(name.getValue())) {
      if (isDeclaration(&op))
        continue; // erased with the module
      return op.emitOpError("defines @")
             << name.getValue() << ", which another program defines too";
    }
    if (name)
      names.insert(name.getValue());
    op.moveBefore(top.getBody(), top.getBody()->end());
  }
  sub.erase();
  return success();
}

llvm::StringSet<> cleave::lowering::symbolNames(ModuleOp module) {
  llvm::StringSet<> names;
  for (Operation &op : *module.getBody())
    if (auto name =
            op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
      names.insert(name.getValue());
  return names;
}

namespace {

struct LinkStagesPass : cleave::impl::LinkStagesPassBase<LinkStagesPass> {
  using LinkStagesPassBase::LinkStagesPassBase;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    SmallVector<ModuleOp> stages;
    for (auto sub : top.getOps<ModuleOp>())
      if (sub->hasAttr(kStageAttr))
        stages.push_back(sub);
    if (stages.empty())
      return; // not pipelined
    llvm::sort(stages, [](ModuleOp a, ModuleOp b) {
      return a->getAttrOfType<IntegerAttr>(kStageAttr).getInt() <
             b->getAttrOfType<IntegerAttr>(kStageAttr).getInt();
    });
    auto stageAxis = stages.front()->getAttrOfType<IntegerAttr>(
        dist::DistDialect::getStageAxisAttrName());
    for (auto [i, sub] : llvm::enumerate(stages)) {
      if (sub->getAttrOfType<IntegerAttr>(kStageAttr).getInt() !=
          int64_t(i)) {
        sub.emitOpError("is stage ")
            << sub->getAttr(kStageAttr) << "; the stages must be 0 ..< "
            << stages.size();
        return signalPassFailure();
      }
      if (!sub.lookupSymbol(stageSymbolPrefix(i) + "run")) {
        sub.emitOpError("is not lowered; run -cleave-lower-to-runtime on "
                        "each stage module first");
        return signalPassFailure();
      }
    }
    if (!stageAxis) {
      stages.front().emitOpError("has no dist.stage_axis");
      return signalPassFailure();
    }

    // Move the stages' symbols out; external declarations once.
    for (Operation &op : llvm::make_early_inc_range(*top.getBody()))
      if (isa<dist::MeshOp>(op))
        op.erase();
    llvm::StringSet<> names = symbolNames(top);
    for (ModuleOp sub : stages)
      if (failed(takeInProgram(top, sub, names)))
        return signalPassFailure();

    MLIRContext *ctx = &getContext();
    Location loc = top.getLoc();
    OpBuilder b = OpBuilder::atBlockEnd(top.getBody());
    Type i32 = b.getI32Type(), i64 = b.getI64Type();
    Type ptr = LLVM::LLVMPointerType::get(ctx);
    int64_t n = int64_t(stages.size());
    auto table = [&](StringRef name, StringRef suffix) {
      auto type = LLVM::LLVMArrayType::get(ptr, n);
      auto g = LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true,
                                      LLVM::Linkage::Private, name,
                                      Attribute());
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(b.createBlock(&g.getInitializerRegion()));
      Value array = LLVM::UndefOp::create(b, loc, type);
      for (int64_t s = 0; s < n; ++s) {
        Value address = LLVM::AddressOfOp::create(
            b, loc, ptr, stageSymbolPrefix(s) + suffix.str());
        array = LLVM::InsertValueOp::create(b, loc, array, address,
                                            ArrayRef<int64_t>{s});
      }
      LLVM::ReturnOp::create(b, loc, array);
      return g;
    };
    LLVM::GlobalOp infos = table("cleave_stages", "program");
    LLVM::GlobalOp runs = table("cleave_stage_runs", "run");

    // The program: the ABI version, the kind and the stages.
    LLVM::LLVMStructType infoType = programInfoType(ctx);
    auto info = LLVM::GlobalOp::create(b, loc, infoType, /*isConstant=*/true,
                                       LLVM::Linkage::External,
                                       "cleave_program", Attribute());
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(b.createBlock(&info.getInitializerRegion()));
      Value s = LLVM::ZeroOp::create(b, loc, infoType);
      auto field = [&](Value v, int64_t i) {
        s = LLVM::InsertValueOp::create(b, loc, s, v, ArrayRef<int64_t>{i});
      };
      auto constant = [&](Type t, int64_t v) -> Value {
        return LLVM::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, v));
      };
      field(constant(i32, CLEAVE_RT_ABI_VERSION), 0);
      field(constant(i32, CLEAVE_PROGRAM_TRAINING), 1);
      field(constant(i64, n), 18);
      field(constant(i64, stageAxis.getInt()), 19);
      field(LLVM::AddressOfOp::create(b, loc, infos), 20);
      field(LLVM::AddressOfOp::create(b, loc, runs), 21);
      LLVM::ReturnOp::create(b, loc, s);
    }

    // cleave_program_run(arena, context): stage_runs[context->stage].
    auto runType = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                               {ptr, ptr});
    auto run =
        LLVM::LLVMFuncOp::create(b, loc, "cleave_program_run", runType);
    Block *entry = run.addEntryBlock(b);
    OpBuilder rb = OpBuilder::atBlockEnd(entry);
    Value arena = entry->getArgument(0), context = entry->getArgument(1);
    auto contextType = LLVM::LLVMStructType::getLiteral(ctx, {ptr, ptr, i64});
    Value stageField = LLVM::GEPOp::create(rb, loc, ptr, contextType, context,
                                           ArrayRef<LLVM::GEPArg>{0, 2});
    Value stage = LLVM::LoadOp::create(rb, loc, i64, stageField);
    Value runTable = LLVM::AddressOfOp::create(rb, loc, runs);
    Value slot = LLVM::GEPOp::create(rb, loc, ptr, ptr, runTable,
                                     ArrayRef<LLVM::GEPArg>{stage});
    Value fn = LLVM::LoadOp::create(rb, loc, ptr, slot);
    LLVM::CallOp::create(rb, loc, runType, ValueRange{fn, arena, context});
    LLVM::ReturnOp::create(rb, loc, ValueRange());
  }
};

} // namespace
