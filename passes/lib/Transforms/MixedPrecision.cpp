//===- MixedPrecision.cpp - compute in bf16 or f16 ----------------------===//
//
// Rewrites the model's functions to compute in a 16-bit float type while
// parameters stay f32. Run before -cleave-autodiff, it makes the training
// step mixed precision the way large-model trainers do it: 16-bit
// activations and activation gradients, f32 master weights, f32 parameter
// gradients and f32 optimizer state (the gradient of each parameter's cast
// is the cast back). Kernels accumulate in f32 whatever their operand types
// (cleave_rt.h), so only stored values are rounded. With `router-f32` the
// MoE routing decision stays f32: each top-k selection and the ops that only
// feed it (the router's weight, matmul and softmax).
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/MemoryPlan.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace cleave {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

bool isF32Tensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && tensor.getElementType().isF32();
}

/// The ops that keep computing in f32 with `router-f32`: each top-k
/// selection (graph.topk, graph.router_topk) and every op all of whose
/// results feed only such ops. In an MoE layer that is the router: its
/// weight read, matmul and softmax, but not the tokens it reads, which feed
/// the experts too. Logits rounded to 16 bits turn near ties into different
/// expert choices; Switch Transformer (Fedus et al. 2021, section 2.4) keeps
/// the router in float32 for stability and trainers followed.
llvm::DenseSet<Operation *> routingOps(Block &block) {
  llvm::DenseSet<Operation *> kept;
  for (Operation &op : llvm::reverse(block)) {
    if (isa<TopKOp, RouterTopKOp>(op)) {
      kept.insert(&op);
      continue;
    }
    bool used = false, onlyKept = true;
    for (Operation *user : op.getUsers()) {
      used = true;
      onlyKept &= kept.contains(user);
    }
    if (used && onlyKept)
      kept.insert(&op);
  }
  return kept;
}

struct MixedPrecisionPass
    : cleave::impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  using MixedPrecisionPassBase::MixedPrecisionPassBase;

  void runOnOperation() override;

private:
  LogicalResult rewrite(func::FuncOp func, FloatType low);
  /// The ops of `keep-f32`, checked against the registered graph ops.
  LogicalResult parseKeepF32(ModuleOp module);
  /// `v` cast to `elem` right after its definition, for every use but the
  /// ops in `keep`.
  Value castAfterDef(OpBuilder &b, Value v, Type elem,
                     const llvm::DenseSet<Operation *> &keep = {});
  /// Makes `op` read f32: a 16-bit operand that this pass cast from an f32
  /// value is read as that value, any other is cast up.
  void readF32(OpBuilder &b, Operation &op, FloatType low);
  /// The f32 value `v` is this pass's 16-bit cast of, or null.
  Value narrowedFrom(Value v) const;

  /// The f32 -> 16-bit casts this pass made.
  llvm::DenseSet<Operation *> narrowed;
  /// The op names of `keep-f32`.
  llvm::DenseSet<OperationName> keptNames;
};

LogicalResult MixedPrecisionPass::parseKeepF32(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  for (const std::string &name : keepF32) {
    StringRef mnemonic = StringRef(name).trim();
    mnemonic.consume_front("graph.");
    std::optional<RegisteredOperationName> op =
        RegisteredOperationName::lookup(("graph." + mnemonic).str(), ctx);
    if (!op)
      return module.emitError("keep-f32: '")
             << name << "' is not a graph op (give mnemonics such as "
             << "softmax, layer_norm)";
    keptNames.insert(*op);
  }
  return success();
}

Value MixedPrecisionPass::castAfterDef(OpBuilder &b, Value v, Type elem,
                                       const llvm::DenseSet<Operation *> &keep) {
  OpBuilder::InsertionGuard guard(b);
  if (Operation *def = v.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
  auto type = cast<RankedTensorType>(v.getType()).clone(elem);
  auto c = CastOp::create(b, v.getLoc(), type, v);
  v.replaceUsesWithIf(c, [&](OpOperand &use) {
    return use.getOwner() != c && !keep.contains(use.getOwner());
  });
  if (!elem.isF32())
    narrowed.insert(c);
  ++numCasts;
  return c;
}

Value MixedPrecisionPass::narrowedFrom(Value v) const {
  Operation *def = v.getDefiningOp();
  return def && narrowed.contains(def) ? def->getOperand(0) : Value();
}

void MixedPrecisionPass::readF32(OpBuilder &b, Operation &op, FloatType low) {
  b.setInsertionPoint(&op);
  for (OpOperand &operand : op.getOpOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.get().getType());
    if (!type || type.getElementType() != low)
      continue;
    if (Value f32 = narrowedFrom(operand.get())) {
      operand.set(f32);
      continue;
    }
    operand.set(CastOp::create(b, op.getLoc(), type.clone(b.getF32Type()),
                               operand.get()));
    ++numCasts;
  }
}

LogicalResult MixedPrecisionPass::rewrite(func::FuncOp func, FloatType low) {
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("-cleave-mixed-precision needs single-block "
                            "functions");
  OpBuilder b(func.getContext());
  Block &entry = func.front();
  llvm::DenseSet<Operation *> keep;
  if (routerF32)
    keep = routingOps(entry);
  for (Operation &op : entry)
    if (keptNames.contains(op.getName()) || op.hasAttr(kKeepF32Attr))
      keep.insert(&op);
  auto usedOutside = [&](Value v) {
    return llvm::any_of(v.getUsers(),
                        [&](Operation *user) { return !keep.contains(user); });
  };
  for (BlockArgument arg : entry.getArguments())
    if (isF32Tensor(arg.getType()) && usedOutside(arg))
      castAfterDef(b, arg, low, keep);

  FunctionType fnType = func.getFunctionType();
  for (Operation &op : llvm::make_early_inc_range(entry)) {
    if (isa<SgdOp, AdamwOp, AssignOp>(op))
      return op.emitOpError("updates a parameter: run -cleave-mixed-precision "
                            "before -cleave-autodiff");
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      // The signature stays: results go back to their declared type.
      b.setInsertionPoint(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        Type declared = fnType.getResult(operand.getOperandNumber());
        // A value this pass narrowed is returned as it was.
        if (Value f32 = narrowedFrom(operand.get());
            f32 && f32.getType() == declared) {
          operand.set(f32);
          continue;
        }
        if (operand.get().getType() != declared) {
          operand.set(CastOp::create(b, ret.getLoc(), declared, operand.get()));
          ++numCasts;
        }
      }
      continue;
    }
    if (keep.contains(&op)) {
      // Routing and keep-f32: reads f32, computes f32; the other uses
      // read its results in 16 bits.
      readF32(b, op, low);
      for (Value result : op.getResults())
        if (isF32Tensor(result.getType()) && usedOutside(result))
          castAfterDef(b, result, low, keep);
      ++numKept;
      continue;
    }
    if (isa<ReadParamOp>(op)) {
      // The master weight stays f32; computation reads a 16-bit copy.
      if (isF32Tensor(op.getResult(0).getType()))
        castAfterDef(b, op.getResult(0), low);
      continue;
    }
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      if (!isF32Tensor(constant.getType()))
        continue;
      auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
      if (!dense) {
        castAfterDef(b, constant.getResult(), low);
        continue;
      }
      const llvm::fltSemantics &semantics = low.getFloatSemantics();
      auto converted = dense.mapValues(low, [&](const APFloat &v) {
        APFloat c = v;
        bool losesInfo;
        c.convert(semantics, APFloat::rmNearestTiesToEven, &losesInfo);
        return c.bitcastToAPInt();
      });
      b.setInsertionPoint(constant);
      Value replacement = ConstantOp::create(
          b, constant.getLoc(), cast<RankedTensorType>(converted.getType()),
          converted);
      constant.replaceAllUsesWith(replacement);
      constant.erase();
      ++numRetyped;
      continue;
    }
    if (isa<CrossEntropyOp>(op))
      continue; // reads 16-bit logits into f32; its result is f32
    if (isa<MseOp>(op)) {
      // An mse inside the model is computed in f32 (its result has its
      // operands' type), as the loss that -cleave-autodiff adds.
      readF32(b, op, low);
      continue;
    }
    for (Value result : op.getResults())
      if (isF32Tensor(result.getType())) {
        result.setType(cast<RankedTensorType>(result.getType()).clone(low));
        ++numRetyped;
      }
  }
  return success();
}

void MixedPrecisionPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = module.getContext();
  // The option parser accepts bf16 and f16 only; f32 can come from C++.
  if (precision == Precision::F32) {
    module.emitError("-cleave-mixed-precision computes in bf16 or f16, got "
                     "f32");
    return signalPassFailure();
  }
  FloatType low = precision == Precision::F16 ? FloatType(Float16Type::get(ctx))
                                              : BFloat16Type::get(ctx);
  if (auto existing = module->getAttrOfType<StringAttr>(kPrecisionAttr)) {
    module.emitError("the module already computes in ")
        << existing.getValue() << " (-cleave-mixed-precision ran before)";
    return signalPassFailure();
  }
  if (failed(parseKeepF32(module)))
    return signalPassFailure();
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal() && failed(rewrite(func, low)))
      return signalPassFailure();
  module->setAttr(kPrecisionAttr,
                  StringAttr::get(ctx, stringifyPrecision(precision)));
}

} // namespace
