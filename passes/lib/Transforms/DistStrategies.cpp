//===- DistStrategies.cpp - the mesh and the strategy passes --------------===//
//
// -dist-add-mesh adds the device mesh; -dist-data-parallel annotates the
// batch and, with ZeRO, the stored training state (see Passes.td). The
// strategies only annotate: propagation and partitioning do the rest.
//
//===----------------------------------------------------------------------===//

#include "ShardingLayout.h"
#include "TrainingStep.h"

#include "cleave/Dialect/Cleave/IR/CleaveDialect.h"
#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

#include <cctype>

namespace cleave {
#define GEN_PASS_DEF_DISTADDMESHPASS
#define GEN_PASS_DEF_DISTDATAPARALLELPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::dist;

namespace {

struct DistAddMeshPass
    : public cleave::impl::DistAddMeshPassBase<DistAddMeshPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module.getOps<MeshOp>().empty()) {
      module.emitError("-dist-add-mesh: the module already has a dist.mesh");
      return signalPassFailure();
    }
    if (axes.empty()) {
      module.emitError("-dist-add-mesh needs axes, e.g. axes=dp=2,tp=2");
      return signalPassFailure();
    }
    SmallVector<StringRef> names;
    SmallVector<int64_t> sizes;
    llvm::StringSet<> seen;
    for (const std::string &axis : axes) {
      auto [name, sizeText] = StringRef(axis).split('=');
      int64_t size = 0;
      bool identifier =
          !name.empty() && (std::isalpha(name[0]) || name[0] == '_') &&
          llvm::all_of(name, [](char c) { return std::isalnum(c) || c == '_'; });
      if (!identifier || sizeText.getAsInteger(10, size) || size < 1) {
        module.emitError("-dist-add-mesh: '")
            << axis
            << "' is not an axis name=size (a name of letters, digits and "
               "'_', a size >= 1)";
        return signalPassFailure();
      }
      if (!seen.insert(name).second) {
        module.emitError("-dist-add-mesh: axis '")
            << name << "' appears twice";
        return signalPassFailure();
      }
      names.push_back(name);
      sizes.push_back(size);
    }
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    MeshOp::create(b, module.getLoc(), "mesh", b.getStrArrayAttr(names),
                   b.getDenseI64ArrayAttr(sizes));
  }
};

/// A trainable parameter of the model (not state, not frozen).
bool isTrainable(graph::ParamOp param) {
  return !param.getFrozen() && getParamRole(param) == CLEAVE_PARAM_MODEL;
}

struct DistDataParallelPass
    : public cleave::impl::DistDataParallelPassBase<DistDataParallelPass> {
  using Base::Base;

  void runOnOperation() override;

private:
  /// Splits one more dimension of `param`'s layout on the axis: the first
  /// that the axis still divides. Returns false when none does.
  bool shardParam(graph::ParamOp param, MeshOp mesh, int64_t n,
                  StringRef origin);
  /// ZeRO-2 with several microbatches: each microbatch's gradient is
  /// reduce-scattered into the block the update reads before they are
  /// summed (a `dist.shard` to the state's layout on each term of the sum),
  /// so that no rank accumulates whole gradients.
  void reduceEachMicrobatch(func::FuncOp fn, MeshOp mesh);
  /// ZeRO-3: each use of a stored block in the forward and backward reads
  /// the parameter anew and gathers it, right before the use.
  void gatherBeforeUses(func::FuncOp fn, graph::ParamOp param, MeshOp mesh);
};

bool DistDataParallelPass::shardParam(graph::ParamOp param, MeshOp mesh,
                                      int64_t n, StringRef origin) {
  auto type = cast<RankedTensorType>(param.getType());
  Layout layout = Layout::replicated(type.getRank());
  if (ShardingAttr s = param.getShardingAttr()) {
    FailureOr<Layout> l =
        Layout::get(s, [&]() { return param.emitOpError(); });
    if (failed(l))
      return false;
    layout = *l;
  }
  if (layout.usesAxis(axis))
    return true;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    int64_t local = type.getDimSize(d) / groupSize(mesh, layout.dims[d]);
    if (local % n != 0)
      continue;
    layout.dims[d].push_back(StringAttr::get(&getContext(), axis).getValue());
    param.setShardingAttr(layout.toAttr(
        FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
        ShardingPriority::Strategy, StringAttr::get(&getContext(), origin)));
    return true;
  }
  return false;
}

void DistDataParallelPass::gatherBeforeUses(func::FuncOp fn,
                                            graph::ParamOp param,
                                            MeshOp mesh) {
  FailureOr<Layout> stored = Layout::get(
      param.getShardingAttr(), [&]() { return param.emitOpError(); });
  if (failed(stored) || !stored->usesAxis(axis))
    return;
  Layout used = *stored;
  for (auto &axes : used.dims)
    llvm::erase(axes, StringRef(axis));
  ShardingAttr usedAttr =
      used.toAttr(FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                  ShardingPriority::User,
                  StringAttr::get(&getContext(), "-dist-data-parallel zero=3"));
  SmallVector<graph::ReadParamOp> reads;
  fn.walk([&](graph::ReadParamOp read) {
    if (read.getParam() == param.getSymName())
      reads.push_back(read);
  });
  auto isUpdate = [](Operation *user) {
    return isa<graph::SgdOp, graph::AdamwOp, graph::AssignOp>(user);
  };
  for (graph::ReadParamOp read : reads) {
    for (OpOperand &use : llvm::make_early_inc_range(read->getUses())) {
      Operation *user = use.getOwner();
      if (isUpdate(user))
        continue;
      OpBuilder b(user);
      auto fresh = cast<graph::ReadParamOp>(b.clone(*read));
      auto gathered =
          ShardOp::create(b, read.getLoc(), fresh.getType(),
                                      fresh.getResult(), usedAttr);
      use.set(gathered.getResult());
    }
    if (read->use_empty())
      read->erase();
  }
}

void DistDataParallelPass::reduceEachMicrobatch(func::FuncOp fn,
                                                MeshOp mesh) {
  auto config = fn->getAttrOfType<DictionaryAttr>("cleave.training_config");
  auto k = config ? config.getAs<IntegerAttr>("accumulate") : IntegerAttr();
  if (!k || k.getInt() < 2)
    return; // one microbatch: ZeRO-1 and ZeRO-2 are one program
  auto module = fn->getParentOfType<ModuleOp>();
  SymbolTable symbols(module);
  SmallVector<std::pair<Value, Value>> updates; // (gradient, state read)
  fn.walk([&](Operation *op) {
    if (auto adamw = dyn_cast<graph::AdamwOp>(op))
      updates.push_back({adamw.getGrad(), adamw.getFirstMoment()});
    if (auto sgd = dyn_cast<graph::SgdOp>(op))
      if (sgd.getMomentumBuffer())
        updates.push_back({sgd.getGrad(), sgd.getMomentumBuffer()});
  });
  auto isBackwardSum = [](Operation *op) {
    return isa_and_nonnull<graph::AddOp>(op) &&
           phaseOf(op) == graph::Phase::Backward;
  };
  for (auto [grad, state] : updates) {
    auto read = state.getDefiningOp<graph::ReadParamOp>();
    auto param = read ? symbols.lookup<graph::ParamOp>(read.getParam())
                      : graph::ParamOp();
    if (!param || !param.getShardingAttr() || !isBackwardSum(grad.getDefiningOp()))
      continue;
    ShardingAttr layout = param.getShardingAttr().withOrigin(
        ShardingPriority::Strategy,
        StringAttr::get(&getContext(), "-dist-data-parallel zero=2"));
    // The terms of the sum of microbatch gradients.
    SmallVector<OpOperand *> terms;
    SmallVector<Operation *> sums = {grad.getDefiningOp()};
    while (!sums.empty()) {
      Operation *sum = sums.pop_back_val();
      for (OpOperand &operand : sum->getOpOperands()) {
        Operation *def = operand.get().getDefiningOp();
        if (isBackwardSum(def) && def->hasOneUse())
          sums.push_back(def);
        else
          terms.push_back(&operand);
      }
    }
    for (OpOperand *term : terms) {
      OpBuilder b(term->getOwner());
      auto shard = ShardOp::create(b, term->getOwner()->getLoc(),
                                   term->get().getType(), term->get(), layout);
      shard->setDiscardableAttrs(
          term->getOwner()->getDiscardableAttrDictionary());
      term->set(shard.getResult());
    }
  }
}

void DistDataParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto meshAxis = getMeshAxis(module, "-dist-data-parallel", axis);
  if (failed(meshAxis))
    return signalPassFailure();
  MeshOp mesh = meshAxis->first;
  const int64_t n = meshAxis->second;
  if (zero < 0 || zero > 3) {
    module.emitError("-dist-data-parallel: zero must be 0, 1, 2 or 3, got ")
        << static_cast<int64_t>(zero);
    return signalPassFailure();
  }
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  StringAttr origin = StringAttr::get(&getContext(), "-dist-data-parallel");

  // The batch of every input.
  bool failedArg = false;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    int64_t batchDim = 0;
    if (auto config = fn->getAttrOfType<DictionaryAttr>(
            "cleave.training_config"))
      if (auto k = config.getAs<IntegerAttr>("accumulate"))
        batchDim = k.getInt() > 1 ? 1 : 0;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      auto type = dyn_cast<RankedTensorType>(fn.getArgumentTypes()[i]);
      if (!type || type.getRank() <= batchDim)
        continue;
      Layout layout = Layout::replicated(type.getRank());
      if (auto s = fn.getArgAttrOfType<ShardingAttr>(
              i, DistDialect::getShardingAttrName())) {
        FailureOr<Layout> l = Layout::get(s, [&]() { return fn.emitOpError(); });
        if (failed(l))
          return signalPassFailure();
        // A layout the user wrote is kept as written.
        if (s.getPriority() == ShardingPriority::User)
          continue;
        layout = *l;
      }
      if (layout.usesAxis(axis))
        continue;
      int64_t local =
          type.getDimSize(batchDim) / groupSize(mesh, layout.dims[batchDim]);
      if (local % n != 0) {
        fn.emitOpError("argument #")
            << i << " (" << type << ") has a batch of " << local
            << " along dimension " << batchDim << ", which the " << n
            << " devices of axis '" << axis << "' do not divide";
        failedArg = true;
        continue;
      }
      layout.dims[batchDim].push_back(StringAttr::get(&getContext(), axis).getValue());
      fn.setArgAttr(i, DistDialect::getShardingAttrName(),
                    layout.toAttr(meshRef, ShardingPriority::Strategy, origin));
    }
  }
  if (failedArg)
    return signalPassFailure();
  if (zero == 0)
    return;

  // ZeRO: the stored state, split on the axis.
  std::string zeroOrigin = "-dist-data-parallel zero=" + std::to_string(zero);
  for (auto param : module.getOps<graph::ParamOp>()) {
    bool state = getParamRole(param) == CLEAVE_PARAM_OPTIMIZER_STATE;
    if (state || (zero == 3 && isTrainable(param)))
      shardParam(param, mesh, n, zeroOrigin);
  }
  if (zero == 2)
    for (auto fn : module.getOps<func::FuncOp>())
      reduceEachMicrobatch(fn, mesh);
  if (zero < 3)
    return;
  for (auto param : module.getOps<graph::ParamOp>()) {
    if (!isTrainable(param) || !param.getShardingAttr())
      continue;
    for (auto fn : module.getOps<func::FuncOp>())
      gatherBeforeUses(fn, param, mesh);
  }
}

} // namespace
