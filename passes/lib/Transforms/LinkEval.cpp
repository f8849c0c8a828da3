//===- LinkEval.cpp - the evaluation program inside the training one -----===//
//
// -cleave-link-eval: after the lowering of the training step and of its
// evaluation program (a nested module, its symbols prefixed cleave_eval_),
// the evaluation program's code and data move into the outer module, and
// the training program's metadata points at it (cleave_rt.h, ABI 7).
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include "cleave/Dialect/Cleave/IR/CleaveDialect.h"

namespace cleave {
#define GEN_PASS_DEF_LINKEVALPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::lowering;

namespace {

struct LinkEvalPass : cleave::impl::LinkEvalPassBase<LinkEvalPass> {
  using LinkEvalPassBase::LinkEvalPassBase;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    SmallVector<ModuleOp> evals;
    for (auto sub : top.getOps<ModuleOp>())
      if (sub->hasAttr(kEvalProgramAttr))
        evals.push_back(sub);
    if (evals.empty())
      return;
    if (evals.size() > 1) {
      evals[1].emitOpError("is a second evaluation program");
      return signalPassFailure();
    }
    ModuleOp eval = evals.front();
    std::string infoName = (kEvalSymbolPrefix + "program").str();
    std::string runName = (kEvalSymbolPrefix + "run").str();
    if (!eval.lookupSymbol<LLVM::GlobalOp>(infoName) ||
        !eval.lookupSymbol<LLVM::LLVMFuncOp>(runName)) {
      eval.emitOpError("is not lowered with symbol-prefix=")
          << kEvalSymbolPrefix << "; run -cleave-lower-to-runtime on it first";
      return signalPassFailure();
    }
    auto program = top.lookupSymbol<LLVM::GlobalOp>("cleave_program");
    if (!program || program.getInitializerRegion().empty()) {
      top.emitOpError("has no lowered cleave_program to link the "
                      "evaluation program into");
      return signalPassFailure();
    }
    llvm::StringSet<> names = symbolNames(top);
    if (failed(takeInProgram(top, eval, names)))
      return signalPassFailure();

    // The initializer builds the struct field by field and returns it: the
    // two fields are set just before the return.
    Block &init = program.getInitializerRegion().front();
    auto ret = cast<LLVM::ReturnOp>(init.getTerminator());
    OpBuilder b(ret);
    Location loc = program.getLoc();
    Type ptr = LLVM::LLVMPointerType::get(&getContext());
    Value s = ret.getArg();
    for (auto [field, name] :
         {std::pair<int64_t, StringRef>(kEvalInfoField, infoName),
          {kEvalRunField, runName}}) {
      Value address = LLVM::AddressOfOp::create(b, loc, ptr, name);
      s = LLVM::InsertValueOp::create(b, loc, s, address,
                                      ArrayRef<int64_t>{field});
    }
    ret->setOperand(0, s);
  }
};

} // namespace
