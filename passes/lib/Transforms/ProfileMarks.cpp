//===- ProfileMarks.cpp - the profiler's marks in a lowered program -------===//
//
// -cleave-lower-to-runtime's `profile` option (on by default): every op of
// the entry function gets a constant cleave_rt_kernel_info (its name, its
// location, its operand and result types, its matrix-product FLOPs and the
// bytes it touches) and a call of cleave_rt_profile_mark with it before the
// op's runtime calls, so that the trainer's --profile can time each op from
// its mark to the next. The marks go in before the conversion, as LLVM ops
// (legal, so the conversion leaves them where they are, each before the
// calls its op lowers to); after it, the marks of ops that lowered to no
// call (views) are dropped, and each return gets a last mark (null) that
// ends the run's last op. A mark that is not profiling returns at once.
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include "llvm/Support/Path.h"

using namespace mlir;
using namespace cleave::lowering;

namespace {

constexpr StringLiteral kMark = "cleave_rt_profile_mark";

/// "f32[8,64]", "i64[]" for a scalar; other types as MLIR prints them.
std::string typeText(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor) {
    type.print(os);
    return text;
  }
  tensor.getElementType().print(os);
  os << "[";
  llvm::interleave(tensor.getShape(), os, ",");
  os << "]";
  return text;
}

/// The operand types, then "->" and the result types.
std::string shapesText(Operation *op) {
  std::string text;
  for (Value v : op->getOperands())
    text += typeText(v.getType()) + " ";
  text += "->";
  for (Value v : op->getResults())
    text += " " + typeText(v.getType());
  return text;
}

/// What a person finds the op by: the name of a NameLoc (the ONNX node's),
/// else file:line of the first file location, else "".
std::string whereText(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (llvm::sys::path::filename(file.getFilename().getValue()) + ":" +
            Twine(file.getLine()))
        .str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string text = whereText(inner); !text.empty())
        return text;
  if (auto call = dyn_cast<CallSiteLoc>(loc))
    return whereText(call.getCallee());
  return "";
}

/// Builds the globals of the marks: strings once per text, one
/// cleave_rt_kernel_info per op.
class MarkBuilder {
public:
  MarkBuilder(Lowering &state)
      : state(state), b(state.ctx),
        infoType(LLVM::LLVMStructType::getLiteral(
            state.ctx,
            {state.ptr, state.ptr, state.ptr, state.f64, state.i64})) {}

  /// Inserts the mark of `op` before it.
  void markBefore(Operation *op) {
    Location loc = op->getLoc();
    std::string name =
        state.symbolPrefix + "cleave.kernel." + std::to_string(kernels++);
    std::string opSym = string(op->getName().getStringRef(), loc);
    std::string whereSym = string(whereText(loc), loc);
    std::string shapesSym = string(shapesText(op), loc);
    int64_t bytes = 0;
    for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
      if (isa<RankedTensorType>(v.getType()))
        bytes += cleave::getTensorBytes(v.getType());
    double flops = matrixProductFlops(op);

    atGlobals();
    auto global =
        LLVM::GlobalOp::create(b, loc, infoType, /*isConstant=*/true,
                               LLVM::Linkage::Private, name, Attribute());
    lastGlobal = global;
    b.setInsertionPointToStart(b.createBlock(&global.getInitializerRegion()));
    Value info = LLVM::UndefOp::create(b, loc, infoType);
    int64_t field = 0;
    auto insert = [&](Value v) {
      info = LLVM::InsertValueOp::create(b, loc, info, v,
                                         ArrayRef<int64_t>{field++});
    };
    for (const std::string &sym : {opSym, whereSym, shapesSym})
      insert(LLVM::AddressOfOp::create(b, loc, state.ptr, sym));
    insert(
        LLVM::ConstantOp::create(b, loc, state.f64, b.getF64FloatAttr(flops)));
    insert(LLVM::ConstantOp::create(b, loc, state.i64,
                                    b.getI64IntegerAttr(bytes)));
    LLVM::ReturnOp::create(b, loc, info);

    b.setInsertionPoint(op);
    Value addr = LLVM::AddressOfOp::create(b, loc, global);
    LLVM::CallOp::create(b, loc, markFunction(loc), ValueRange{addr});
  }

private:
  /// Inserts the globals in the order they are made, at the module's
  /// start, so that they precede their uses.
  void atGlobals() {
    if (lastGlobal)
      b.setInsertionPointAfter(lastGlobal);
    else
      b.setInsertionPointToStart(state.module.getBody());
  }

  /// The symbol of a constant C string holding `text`, made on first use.
  std::string string(StringRef text, Location loc) {
    auto [it, inserted] = strings.try_emplace(text, "");
    if (!inserted)
      return it->second;
    it->second = state.symbolPrefix + "cleave.kstr." +
                 std::to_string(strings.size() - 1);
    std::string bytes = text.str();
    bytes.push_back('\0');
    atGlobals();
    lastGlobal = LLVM::GlobalOp::create(
        b, loc, LLVM::LLVMArrayType::get(state.i8, bytes.size()),
        /*isConstant=*/true, LLVM::Linkage::Private, it->second,
        b.getStringAttr(bytes));
    return it->second;
  }

  LLVM::LLVMFuncOp markFunction(Location loc) {
    return state.lookupOrDeclare<LLVM::LLVMFuncOp>(kMark, [&] {
      OpBuilder::InsertionGuard guard(b);
      atGlobals();
      auto type = LLVM::LLVMFunctionType::get(
          LLVM::LLVMVoidType::get(state.ctx), {state.ptr});
      auto fn = LLVM::LLVMFuncOp::create(b, loc, kMark, type);
      lastGlobal = fn;
      return fn;
    });
  }

  Lowering &state;
  OpBuilder b;
  Type infoType;
  llvm::StringMap<std::string> strings;
  Operation *lastGlobal = nullptr;
  int64_t kernels = 0;
};

bool isMark(Operation &op) {
  auto call = dyn_cast<LLVM::CallOp>(op);
  return call && call.getCallee() == kMark;
}

} // namespace

namespace cleave::lowering {

void insertProfileMarks(Lowering &state, func::FuncOp fn) {
  MarkBuilder marks(state);
  for (Operation &op : llvm::make_early_inc_range(fn.getBody().front()))
    if (!isa<func::ReturnOp>(op))
      marks.markBefore(&op);
}

void finishProfileMarks(LLVM::LLVMFuncOp run) {
  FlatSymbolRefAttr mark;
  SymbolTable symbols(run->getParentOp());
  // A dropped mark's info goes too: nothing else uses it.
  auto drop = [&](Operation *call) {
    auto addr = call->getOperand(0).getDefiningOp<LLVM::AddressOfOp>();
    call->erase();
    if (!addr || !addr->use_empty())
      return;
    if (Operation *info = symbols.lookup(addr.getGlobalName()))
      symbols.erase(info);
    addr->erase();
  };
  for (Block &block : run.getBody()) {
    // The mark whose op has made no call yet.
    Operation *open = nullptr;
    for (Operation &op : llvm::make_early_inc_range(block)) {
      bool isMarkCall = isMark(op);
      if (isMarkCall && !mark)
        mark = cast<LLVM::CallOp>(op).getCalleeAttr();
      if (open && (isMarkCall || isa<LLVM::ReturnOp>(op)))
        drop(open);
      if (isMarkCall)
        open = &op;
      else if (isa<LLVM::CallOp>(op))
        open = nullptr;
    }
  }
  if (!mark)
    return;
  // Every return ends the run's last op.
  run.walk([&](LLVM::ReturnOp ret) {
    OpBuilder b(ret);
    Value null = LLVM::ZeroOp::create(
        b, ret.getLoc(), LLVM::LLVMPointerType::get(b.getContext()));
    LLVM::CallOp::create(b, ret.getLoc(), TypeRange(), mark, ValueRange{null});
  });
}

} // namespace cleave::lowering
