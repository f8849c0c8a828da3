//===- TrainingStep.cpp - what the training-step passes share -----------===//
//
// The helpers of -cleave-add-loss, -cleave-differentiate and
// -cleave-add-optimizer (TrainingStep.h): the tagging of the ops they
// insert, the layers named by parameters and node paths, scalar constants,
// state parameters, dead-code removal and the lookup of the step.
//
//===----------------------------------------------------------------------===//

#include "TrainingStep.h"

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

void StepTagger::notifyOperationInserted(Operation *op,
                                         OpBuilder::InsertPoint) {
  if (!op->getParentOfType<func::FuncOp>() || isa<func::ReturnOp>(op))
    return;
  Builder b(ctx);
  op->setAttr(GraphDialect::getPhaseAttrName(), PhaseAttr::get(ctx, phase));
  auto set = [&](StringRef name, std::optional<int64_t> v) {
    if (v)
      op->setAttr(name, b.getI64IntegerAttr(*v));
    else
      op->removeAttr(name);
  };
  set(GraphDialect::getMicrobatchAttrName(), microbatch);
  set(GraphDialect::getLayerAttrName(), layer);
}

std::optional<int64_t> cleave::layerOf(Operation *op) {
  if (auto attr =
          op->getAttrOfType<IntegerAttr>(GraphDialect::getLayerAttrName()))
    return attr.getInt();
  return std::nullopt;
}

std::optional<int64_t> cleave::microbatchOf(Operation *op) {
  if (auto attr = op->getAttrOfType<IntegerAttr>(
          GraphDialect::getMicrobatchAttrName()))
    return attr.getInt();
  return std::nullopt;
}

std::optional<Phase> cleave::phaseOf(Operation *op) {
  if (auto attr = op->getAttrOfType<PhaseAttr>(GraphDialect::getPhaseAttrName()))
    return attr.getValue();
  return std::nullopt;
}

void cleave::copyStepAnnotations(Operation *from, Operation *to) {
  for (StringRef name : {GraphDialect::getPhaseAttrName(),
                         GraphDialect::getMicrobatchAttrName(),
                         GraphDialect::getLayerAttrName()})
    if (Attribute a = from->getAttr(name))
      to->setAttr(name, a);
}

std::optional<int64_t> cleave::layerInLoc(Location loc) {
  std::optional<int64_t> found;
  loc->walk([&](Location l) {
    if (auto named = dyn_cast<NameLoc>(l))
      if ((found = layerInName(named.getName().getValue())))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return found;
}

std::optional<int64_t> cleave::layerInName(StringRef name) {
  static const char *kStacks[] = {"blocks", "layers", "layer", "block", "h"};
  for (size_t pos = 0; pos < name.size(); ++pos) {
    if (pos > 0 && !StringRef("/._").contains(name[pos - 1]))
      continue;
    for (StringRef stack : kStacks) {
      StringRef rest = name.drop_front(pos);
      if (!rest.consume_front(stack) || rest.empty() ||
          !StringRef("._").contains(rest.front()))
        continue;
      rest = rest.drop_front();
      size_t digits = rest.find_first_not_of("0123456789");
      StringRef number = rest.take_front(digits);
      rest = rest.drop_front(number.size());
      int64_t n;
      if (!number.empty() && !number.getAsInteger(10, n) &&
          (rest.empty() || StringRef("/._").contains(rest.front())))
        return n;
    }
  }
  return std::nullopt;
}

llvm::StringMap<std::optional<int64_t>>
cleave::parameterLayers(func::FuncOp step) {
  llvm::StringMap<std::optional<int64_t>> layers;
  step.walk([&](ReadParamOp read) {
    auto phase =
        read->getAttrOfType<PhaseAttr>(GraphDialect::getPhaseAttrName());
    if (!phase || phase.getValue() != Phase::Forward)
      return;
    std::optional<int64_t> &slot = layers[read.getParam()];
    if (std::optional<int64_t> named = layerInName(read.getParam()))
      slot = named;
    else if (std::optional<int64_t> layer = layerOf(read); layer && !slot)
      slot = layer;
  });
  return layers;
}

Value cleave::scalarConstant(OpBuilder &b, Location loc, Type elem, double v) {
  auto type = RankedTensorType::get({}, elem);
  Attribute value = isa<FloatType>(elem)
                        ? Attribute(b.getFloatAttr(elem, v))
                        : Attribute(b.getIntegerAttr(elem, int64_t(v)));
  return ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, value));
}

Value cleave::sumAll(OpBuilder &b, Location loc, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() == 0)
    return v;
  SmallVector<int64_t> all =
      llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
  return ReduceOp::create(
             b, loc, RankedTensorType::get({}, type.getElementType()),
             ReductionKindAttr::get(b.getContext(), ReductionKind::Sum), v,
             b.getDenseI64ArrayAttr(all), UnitAttr())
      .getResult();
}

FailureOr<ParamOp> cleave::addStateParam(OpBuilder &b, ModuleOp module,
                                         Operation *after, StringRef name,
                                         RankedTensorType type,
                                         cleave_param_role role,
                                         Attribute initial) {
  if (Operation *existing = module.lookupSymbol(name))
    return existing->emitOpError("is named '")
           << name << "', which the optimizer state needs";
  OpBuilder::InsertionGuard guard(b);
  if (after)
    b.setInsertionPointAfter(after);
  else
    b.setInsertionPointToStart(module.getBody());
  auto param = ParamOp::create(b, module.getLoc(), name, type, initial,
                               /*frozen=*/true);
  setParamRole(param, role);
  return param;
}

void cleave::eraseDeadOps(func::FuncOp step) {
  // Users follow their operands in the one block: one reverse sweep erases
  // whole dead chains.
  for (Operation &op :
       llvm::make_early_inc_range(llvm::reverse(step.getBody().front())))
    if (isOpTriviallyDead(&op))
      op.erase();
}

FailureOr<func::FuncOp> cleave::lookupLossStep(ModuleOp module, StringRef pass,
                                               StringRef needs,
                                               StringRef runFirst) {
  func::FuncOp found;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (!fn->hasAttr(kLossAttr))
      continue;
    if (found)
      return fn.emitOpError("carries '")
             << kLossAttr << "' as @" << found.getSymName() << " does: " << pass
             << " expects one training step";
    found = fn;
  }
  if (!found)
    return module.emitError()
           << pass << " needs " << needs << ": no function carries '"
           << kLossAttr << "' (run " << runFirst << " first)";
  if (!found.getBody().hasOneBlock())
    return found.emitOpError("expects a single block (the step that "
                             "-cleave-add-loss builds), got ")
           << found.getBody().getBlocks().size();
  return found;
}
