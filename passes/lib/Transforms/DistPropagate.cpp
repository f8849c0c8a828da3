//===- DistPropagate.cpp - every value gets a sharding --------------------===//
//
// -dist-propagate: from the annotated values through the ops' factor rules
// to every value, forward and backward until nothing changes (see
// Passes.td and ShardingLayout.h for the decision of one op).
//
//===----------------------------------------------------------------------===//

#include "ShardingLayout.h"

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace cleave {
#define GEN_PASS_DEF_DISTPROPAGATEPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::dist;

namespace {

struct Known {
  Layout layout;
  ShardingPriority priority;
  StringAttr origin;
};

/// The propagation over one function.
class Propagation {
public:
  Propagation(func::FuncOp fn, MeshOp mesh) : fn(fn), mesh(mesh) {}

  LogicalResult run();

private:
  LogicalResult seed();
  /// Decides `op` from what is known and gives the unknown results (and,
  /// when `backward`, the unknown operands) their layouts. True on change.
  /// While `deferring`, the forward sweep leaves the ops whose results have
  /// a factor of their own that only the op's hook splits to their readers.
  bool visit(Operation *op, bool backward, bool deferring);
  LogicalResult set(Value v, ShardingAttr sharding, Operation *at);
  void write();

  func::FuncOp fn;
  MeshOp mesh;
  llvm::DenseMap<Value, Known> known;
};

LogicalResult Propagation::set(Value v, ShardingAttr sharding, Operation *at) {
  FailureOr<Layout> l = Layout::get(sharding, [&]() { return at->emitOpError(); });
  if (failed(l))
    return failure();
  known[v] = {*l, sharding.getPriority(), sharding.getOrigin()};
  return success();
}

LogicalResult Propagation::seed() {
  SymbolTable symbols(fn->getParentOfType<ModuleOp>());
  for (BlockArgument arg : fn.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue;
    if (auto s = fn.getArgAttrOfType<ShardingAttr>(
            arg.getArgNumber(), DistDialect::getShardingAttrName())) {
      if (failed(set(arg, s, fn)))
        return failure();
    } else {
      known[arg] = {Layout::replicated(type.getRank()), ShardingPriority::User,
                    StringAttr()};
    }
  }
  WalkResult walk = fn.walk([&](Operation *op) {
    if (auto read = dyn_cast<graph::ReadParamOp>(op)) {
      auto param = symbols.lookup<graph::ParamOp>(read.getParam());
      if (param && param.getShardingAttr()) {
        if (failed(set(read.getResult(), param.getShardingAttr(), op)))
          return WalkResult::interrupt();
      } else {
        known[read.getResult()] = {Layout::replicated(read.getType().getRank()),
                                   ShardingPriority::User, StringAttr()};
      }
      return WalkResult::advance();
    }
    if (auto shard = dyn_cast<ShardOp>(op)) {
      // An open constraint is known once its input is (visit).
      if (hasOpenDims(shard.getSharding()))
        return WalkResult::advance();
      return failed(set(shard.getResult(), shard.getSharding(), op))
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    }
    // Results annotated before (by a strategy, or an earlier run).
    for (auto [i, r] : llvm::enumerate(op->getResults()))
      if (ShardingAttr s = getResultSharding(op, i))
        if (failed(set(r, s, op)))
          return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

/// Whether `v` is the result of an op the forward sweep defers (see
/// visit): a reader that wants it whole leaves it to the op, which may
/// rather leave it partial.
static bool isDeferred(Value v) {
  auto ruled = v.getDefiningOp<ShardingRuleOpInterface>();
  return ruled && resultOnlyHookFactor(ruled, ruled.getShardingRule()) >= 0;
}

bool Propagation::visit(Operation *op, bool backward, bool deferring) {
  auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
  if (auto shard = dyn_cast<ShardOp>(op)) {
    ShardingAttr sharding = shard.getSharding();
    if (!known.count(shard.getResult()) && known.count(shard.getInput())) {
      FailureOr<Layout> l =
          Layout::get(sharding, [&]() { return op->emitOpError(); });
      if (failed(l))
        return false;
      known[shard.getResult()] = {
          constrain(sharding, *l, known.lookup(shard.getInput()).layout),
          sharding.getPriority(), sharding.getOrigin()};
      return true;
    }
    if (hasOpenDims(sharding))
      return false;
    // A constraint also says how its input is best produced.
    if (backward && !known.count(shard.getInput()) &&
        !shard.getInput().getDefiningOp<graph::ConstantOp>()) {
      Known k = known.lookup(shard.getResult());
      k.priority = ShardingPriority::Propagated;
      known[shard.getInput()] = k;
      return true;
    }
    return false;
  }
  if (!ruled || isa<graph::ReadParamOp, graph::ConstantOp>(op))
    return false;
  auto unknown = [&](Value v) {
    return isa<RankedTensorType>(v.getType()) && !known.count(v);
  };
  bool anyKnown = llvm::any_of(op->getOperands(), [&](Value v) {
                    return known.count(v);
                  }) ||
                  llvm::any_of(op->getResults(),
                               [&](Value v) { return known.count(v); });
  bool wantResults = llvm::any_of(op->getResults(), unknown);
  bool wantOperands =
      backward && llvm::any_of(op->getOperands(), [&](Value v) {
        return unknown(v) && !v.getDefiningOp<graph::ConstantOp>();
      });
  if (!anyKnown || !(wantResults || wantOperands))
    return false;

  ShardingRule rule = ruled.getShardingRule();
  // gather_grad's table rows: its readers know best how the table is
  // split (the update of a vocabulary-parallel parameter wants the block),
  // where the forward sweep would settle them whole and slice the block.
  if (deferring && !backward && resultOnlyHookFactor(op, rule) >= 0)
    return false;
  auto knownOf = [&](Value v) {
    auto it = known.find(v);
    return it == known.end() ? KnownLayout{}
                             : KnownLayout{&it->second.layout,
                                           it->second.priority};
  };
  SmallVector<KnownLayout> operands, results;
  for (Value v : op->getOperands())
    operands.push_back(knownOf(v));
  for (Value v : op->getResults())
    results.push_back(knownOf(v));
  OpLayouts decided = decideLayouts(op, rule, operands, results, mesh);

  // A propagated layout keeps the origin of the annotation it came from.
  auto originOf = [&](int64_t tensor) {
    if (tensor < 0)
      return StringAttr();
    Value v = tensor < op->getNumOperands()
                  ? op->getOperand(tensor)
                  : op->getResult(tensor - op->getNumOperands());
    auto it = known.find(v);
    return it == known.end() ? StringAttr() : it->second.origin;
  };
  bool changed = false;
  for (auto [i, r] : llvm::enumerate(op->getResults()))
    if (unknown(r)) {
      SmallVector<StringAttr> origins;
      for (int64_t t : decided.sourcesOfResult(rule, i))
        origins.push_back(originOf(t));
      StringAttr origin = joinOrigins(op->getContext(), origins);
      known[r] = {decided.results[i], ShardingPriority::Propagated, origin};
      changed = true;
    }
  if (backward)
    for (auto [v, layout] : llvm::zip(op->getOperands(), decided.operands))
      if (unknown(v) && !v.getDefiningOp<graph::ConstantOp>() &&
          !(deferring && layout.withoutPartial().isReplicated() &&
            isDeferred(v))) {
        known[v] = {layout.withoutPartial(), ShardingPriority::Propagated,
                    StringAttr()};
        changed = true;
      }
  return changed;
}

void Propagation::write() {
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  fn.walk([&](Operation *op) {
    if (op->getNumResults() == 0 || isa<func::FuncOp>(op))
      return;
    SmallVector<ShardingAttr> shardings;
    for (Value r : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(r.getType());
      if (!type)
        return;
      auto it = known.find(r);
      Known k = it != known.end()
                    ? it->second
                    : Known{Layout::replicated(type.getRank()),
                            ShardingPriority::Propagated, StringAttr()};
      shardings.push_back(k.layout.toAttr(meshRef, k.priority, k.origin));
    }
    setResultShardings(op, shardings);
  });
}

LogicalResult Propagation::run() {
  if (!fn.getBody().hasOneBlock())
    return fn.emitOpError("-dist-propagate needs a function of one block");
  if (failed(seed()))
    return failure();
  Block &body = fn.getBody().front();
  // Each round visits every op at most twice; a value is set once, so the
  // rounds end after at most as many as there are values. The deferred ops
  // are decided forward once nothing else changes.
  for (bool changed = true, deferring = true; changed || deferring;) {
    if (!changed)
      deferring = false;
    changed = false;
    for (Operation &op : body)
      changed |= visit(&op, /*backward=*/false, deferring);
    for (Operation &op : llvm::reverse(body))
      changed |= visit(&op, /*backward=*/true, deferring);
  }
  write();
  return success();
}

struct DistPropagatePass
    : public cleave::impl::DistPropagatePassBase<DistPropagatePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<MeshOp> mesh = getTheMesh(module, "-dist-propagate");
    if (failed(mesh))
      return signalPassFailure();
    for (func::FuncOp fn : globalFunctions(module))
      if (failed(Propagation(fn, *mesh).run()))
        return signalPassFailure();
  }
};

} // namespace
