//===- DistStrategies.cpp - the mesh and the strategy passes --------------===//
//
// -dist-add-mesh adds the device mesh; -dist-data-parallel annotates the
// batch and, with ZeRO, the stored training state; -dist-expert-parallel
// the stacked experts and the batch (see DistPasses.td). The strategies
// only annotate: propagation and partitioning do the rest.
//
//===----------------------------------------------------------------------===//

#include "DistStrategies.h"
#include "ShardingLayout.h"
#include "TrainingStep.h"

#include "cleave/Dialect/Cleave/IR/CleaveDialect.h"
#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <cctype>

namespace cleave {
#define GEN_PASS_DEF_DISTADDMESHPASS
#define GEN_PASS_DEF_DISTDATAPARALLELPASS
#define GEN_PASS_DEF_DISTEXPERTPARALLELPASS
#define GEN_PASS_DEF_DISTCONTEXTPARALLELPASS
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
                   b.getDenseI64ArrayAttr(sizes), /*zigzag_axes=*/ArrayAttr());
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
  if (failed(splitBatch(module, mesh, axis, n, origin)))
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


//===----------------------------------------------------------------------===//
// -dist-expert-parallel
//===----------------------------------------------------------------------===//

struct DistExpertParallelPass
    : public cleave::impl::DistExpertParallelPassBase<DistExpertParallelPass> {
  using Base::Base;
  void runOnOperation() override;
};

void DistExpertParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto meshAxis = getMeshAxis(module, "-dist-expert-parallel", axis);
  if (failed(meshAxis))
    return signalPassFailure();
  MeshOp mesh = meshAxis->first;
  const int64_t n = meshAxis->second;

  // The stacked experts of the forward: the weights of its expert matmuls
  // and the per-expert values (biases) the ops between them combine with,
  // all split along their expert dimension, 0.
  llvm::SetVector<StringRef> stacked;
  llvm::DenseSet<Value> perExpert;
  int64_t numRouted = 0;
  bool failedOp = false;
  module.walk([&](Operation *op) {
    std::optional<graph::Phase> phase = phaseOf(op);
    if (phase && *phase != graph::Phase::Forward)
      return;
    if (auto dispatch = dyn_cast<graph::MoeDispatchOp>(op)) {
      ++numRouted;
      int64_t experts = dispatch.getNumExperts();
      if (experts < n) {
        dispatch.emitOpError("routes to ")
            << experts << " experts, fewer than the " << n
            << " devices of axis '" << axis
            << "' (each device holds at least one expert; give the other "
               "devices to dp)";
        failedOp = true;
      } else if (experts % n != 0) {
        dispatch.emitOpError("routes to ")
            << experts << " experts, which the " << n << " devices of axis '"
            << axis << "' do not divide (-dist-expert-parallel gives each "
            << "device the same number of experts)";
        failedOp = true;
      }
      if (dispatch.getGroups() % n != 0) {
        dispatch.emitOpError("routes its tokens in ")
            << dispatch.getGroups() << " groups, which the " << n
            << " devices of axis '" << axis
            << "' do not divide (each device routes whole groups; "
               "--moe-group-size sets their size)";
        failedOp = true;
      }
      return;
    }
    if (auto matmul = dyn_cast<graph::ExpertMatmulOp>(op)) {
      std::optional<ParamDim> weight = traceToParam(matmul.getWeight(), 0);
      if (!weight) {
        matmul.emitOpError("multiplies by expert weights that are not a "
                           "parameter's (-dist-expert-parallel splits the "
                           "stacked parameters [E, ...])");
        failedOp = true;
        return;
      }
      stacked.insert(weight->param);
      perExpert.insert(matmul.getResult());
      return;
    }
    if (isa<graph::MoeCombineOp>(op) || op->getNumResults() != 1 ||
        !llvm::any_of(op->getOperands(),
                      [&](Value v) { return perExpert.contains(v); }))
      return;
    Value result = op->getResult(0);
    auto type = dyn_cast<RankedTensorType>(result.getType());
    if (!type || type.getRank() < 2)
      return;
    perExpert.insert(result);
    for (Value v : op->getOperands()) {
      // A per-expert operand: [E, ...] like the result.
      auto operandType = cast<RankedTensorType>(v.getType());
      if (perExpert.contains(v) || operandType.getRank() != type.getRank() ||
          operandType.getDimSize(0) != type.getDimSize(0))
        continue;
      if (std::optional<ParamDim> p = traceToParam(v, 0))
        stacked.insert(p->param);
    }
  });
  if (failedOp)
    return signalPassFailure();
  if (numRouted == 0 || stacked.empty()) {
    module.emitError("-dist-expert-parallel found no routed experts "
                     "(graph.moe_dispatch and graph.expert_matmul) to split "
                     "on axis '")
        << axis << "'; a mixture of experts compiled with --moe-dense stays "
                   "dense, and a model without one has nothing to split";
    return signalPassFailure();
  }

  SymbolTable symbols(module);
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  StringAttr origin = StringAttr::get(&getContext(), "-dist-expert-parallel");
  StringRef axisName = StringAttr::get(&getContext(), axis).getValue();
  llvm::StringMap<ShardingAttr> shardings;
  for (StringRef name : stacked) {
    auto param = symbols.lookup<graph::ParamOp>(name);
    if (!param)
      continue;
    auto type = cast<RankedTensorType>(param.getType());
    Layout layout = Layout::replicated(type.getRank());
    if (ShardingAttr s = param.getShardingAttr()) {
      FailureOr<Layout> l =
          Layout::get(s, [&]() { return param.emitOpError(); });
      if (failed(l))
        return signalPassFailure();
      layout = *l;
    }
    if (layout.usesAxis(axis))
      continue;
    layout.dims[0].insert(layout.dims[0].begin(), axisName);
    ShardingAttr s = layout.toAttr(meshRef, ShardingPriority::Strategy, origin);
    param.setShardingAttr(s);
    shardings[name] = s;
  }
  shareWithState(module, shardings);
  // Each device routes the tokens of its own share of the batch.
  if (failed(splitBatch(module, mesh, axis, n, origin)))
    return signalPassFailure();
}

//===----------------------------------------------------------------------===//
// -dist-context-parallel
//===----------------------------------------------------------------------===//

/// `v` = reshape(x) merging x's [B, S] (S = `sequence`) into the rows of a
/// matrix and the rest of x's dimensions into its columns: x, else null.
Value unmergedRows(Value v, int64_t sequence) {
  auto reshape = v.getDefiningOp<graph::ReshapeOp>();
  if (!reshape)
    return {};
  auto in = cast<RankedTensorType>(reshape.getOperand().getType());
  ArrayRef<int64_t> out = reshape.getType().getShape();
  if (in.getRank() < 3 || out.size() != 2 || in.getDimSize(1) != sequence ||
      out[0] != in.getDimSize(0) * sequence)
    return {};
  return reshape.getOperand();
}

/// x [B, S, ...] as [B, S, F].
Value asRank3(OpBuilder &b, Location loc, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  if (type.getRank() == 3)
    return x;
  ArrayRef<int64_t> shape = type.getShape();
  int64_t features = 1;
  for (int64_t d : shape.drop_front(2))
    features *= d;
  return graph::ReshapeOp::create(
      b, loc, type.clone({shape[0], shape[1], features}), x);
}

/// Rewrites each weight gradient that contracts the merged batch and
/// sequence rows, matmul(transpose(reshape(x, [B S, K])), reshape(dy,
/// [B S, N])), into a batched matmul over the batch, transpose(x) [B, K, S]
/// times dy [B, S, N], summed over B (a view for B = 1): the merged rows
/// cannot be split on the sequence (it is their minor factor), so the
/// partitioner would gather x and dy whole; unmerged, the contraction over
/// the split sequence is partial and reduced like any other.
void contractOverTheSequence(ModuleOp module, int64_t sequence) {
  struct Found {
    graph::MatmulOp mm;
    graph::TransposeOp lhs;
    Value x, dy;
  };
  SmallVector<Found> found;
  module.walk([&](graph::MatmulOp mm) {
    auto lhs = mm.getLhs().getDefiningOp<graph::TransposeOp>();
    if (!lhs || lhs.getPerm() != ArrayRef<int64_t>{1, 0})
      return;
    Value x = unmergedRows(lhs.getOperand(), sequence);
    Value dy = unmergedRows(mm.getRhs(), sequence);
    if (x && dy &&
        cast<RankedTensorType>(x.getType()).getDimSize(0) ==
            cast<RankedTensorType>(dy.getType()).getDimSize(0))
      found.push_back({mm, lhs, x, dy});
  });
  for (auto &[mm, lhs, x, dy] : found) {
    OpBuilder b(mm);
    Location loc = mm.getLoc();
    SmallVector<Operation *> made;
    for (Value *v : {&x, &dy})
      if (Value r = asRank3(b, loc, *v); r != *v) {
        made.push_back(r.getDefiningOp());
        *v = r;
      }
    auto xt = cast<RankedTensorType>(x.getType());
    auto dyt = cast<RankedTensorType>(dy.getType());
    int64_t batch = xt.getDimSize(0), k = xt.getDimSize(2),
            n = dyt.getDimSize(2);
    auto transposed = graph::TransposeOp::create(
        b, loc, RankedTensorType::get({batch, k, sequence}, xt.getElementType()),
        x, b.getDenseI64ArrayAttr({0, 2, 1}));
    auto batched = graph::MatmulOp::create(
        b, loc, RankedTensorType::get({batch, k, n}, mm.getType().getElementType()),
        transposed, dy);
    made.append({transposed, batched});
    Value dw;
    if (batch == 1) {
      dw = graph::ReshapeOp::create(b, loc, mm.getType(), batched);
    } else {
      auto sum = ReductionKindAttr::get(b.getContext(), ReductionKind::Sum);
      dw = graph::ReduceOp::create(b, loc, mm.getType(), sum, batched,
                                   b.getDenseI64ArrayAttr({0}), UnitAttr());
    }
    made.push_back(dw.getDefiningOp());
    for (Operation *op : made)
      copyStepAnnotations(mm, op);
    Value rhs = mm.getRhs();
    mm.replaceAllUsesWith(dw);
    mm.erase();
    // The merging reshapes and the transpose, unless something else reads
    // them (left, they would be partitioned, and gathered, all the same).
    for (Value dead :
         SmallVector<Value, 3>{lhs.getResult(), lhs.getOperand(), rhs})
      if (Operation *def = dead.getDefiningOp(); def && def->use_empty())
        def->erase();
  }
}

struct DistContextParallelPass
    : public cleave::impl::DistContextParallelPassBase<
          DistContextParallelPass> {
  using Base::Base;
  void runOnOperation() override;
};

void DistContextParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto meshAxis = getMeshAxis(module, "-dist-context-parallel", axis);
  if (failed(meshAxis))
    return signalPassFailure();
  MeshOp mesh = meshAxis->first;
  const int64_t n = meshAxis->second;
  if (form != "ring" && form != "gather") {
    module.emitError("-dist-context-parallel: form must be 'ring' or "
                     "'gather', got '")
        << form << "'";
    return signalPassFailure();
  }
  if (layout != "zigzag" && layout != "contiguous") {
    module.emitError("-dist-context-parallel: layout must be 'zigzag' or "
                     "'contiguous', got '")
        << layout << "'";
    return signalPassFailure();
  }
  const bool zigzag = layout == "zigzag";
  // Chunks of the sequence: two per device under zigzag.
  const int64_t chunks = zigzag ? 2 * n : n;

  // The sequence: the query length of the forward's self-attentions.
  std::optional<int64_t> sequence;
  bool failedOp = false;
  module.walk([&](graph::AttentionOp attention) {
    std::optional<graph::Phase> phase = phaseOf(attention);
    if (phase && *phase != graph::Phase::Forward)
      return;
    int64_t q = attention.getQuery().getType().getDimSize(2);
    int64_t k = attention.getKey().getType().getDimSize(2);
    if (q != k || (sequence && *sequence != q)) {
      attention.emitOpError("attends ")
          << q << " queries to " << k << " keys"
          << (sequence ? " in a model of sequence " + std::to_string(*sequence)
                       : std::string())
          << ": -dist-context-parallel splits one sequence of self-attention";
      failedOp = true;
      return;
    }
    sequence = q;
    if (q % chunks != 0) {
      attention.emitOpError("attends over a sequence of ")
          << q << " tokens, which the " << n << " devices of axis '" << axis
          << "' do not divide"
          << (zigzag && q % n == 0
                  ? " into " + std::to_string(chunks) +
                        " chunks, two per device (the zigzag layout; "
                        "layout=contiguous takes it)"
                  : std::string());
      failedOp = true;
    }
  });
  if (failedOp)
    return signalPassFailure();
  if (!sequence) {
    module.emitError("-dist-context-parallel found no attention "
                     "(graph.attention) whose sequence to split on axis '")
        << axis << "'";
    return signalPassFailure();
  }
  StringAttr origin = StringAttr::get(&getContext(), "-dist-context-parallel");
  contractOverTheSequence(module, *sequence);
  if (failed(splitSequence(module, mesh, axis, n, *sequence, origin)))
    return signalPassFailure();
  if (zigzag) {
    SmallVector<Attribute> axes;
    if (ArrayAttr old = mesh.getZigzagAxesAttr())
      llvm::append_range(axes, old.getValue());
    if (!mesh.isZigzag(axis))
      axes.push_back(StringAttr::get(&getContext(), axis));
    mesh.setZigzagAxesAttr(ArrayAttr::get(&getContext(), axes));
  }
  if (form == "gather")
    return;
  // The ring: every attention and attention gradient passes its blocks.
  module.walk([&](Operation *op) {
    if (!isa<graph::AttentionOp, graph::AttentionGradOp>(op))
      return;
    bool masked = op->getNumOperands() > (isa<graph::AttentionOp>(op) ? 3u : 4u);
    if (masked) {
      op->emitOpError("has a mask operand, which the ring form of context "
                      "parallelism does not take (causal masking it does; "
                      "form=gather takes masks)");
      failedOp = true;
    }
    op->setAttr(dist::DistDialect::getRingAttrName(),
                StringAttr::get(&getContext(), layout));
  });
  if (failedOp)
    return signalPassFailure();
}

} // namespace

//===----------------------------------------------------------------------===//
// What the strategies share (DistStrategies.h)
//===----------------------------------------------------------------------===//

namespace {

int64_t sizeOf(Value v, int64_t d) {
  return cast<RankedTensorType>(v.getType()).getDimSize(d);
}

/// The dimension of `in` that dimension `d` of a reshape's `out` is, when
/// the reshape only adds or drops size-1 dimensions around it.
std::optional<int64_t> throughUnitReshape(ArrayRef<int64_t> out,
                                          ArrayRef<int64_t> in, int64_t d) {
  if (out[d] == 1)
    return std::nullopt;
  int64_t rank = llvm::count_if(out.take_front(d), [](int64_t s) {
    return s != 1;
  });
  SmallVector<int64_t> outSizes, inSizes;
  for (int64_t s : out)
    if (s != 1)
      outSizes.push_back(s);
  for (int64_t s : in)
    if (s != 1)
      inSizes.push_back(s);
  if (outSizes != inSizes)
    return std::nullopt;
  for (int64_t k = 0, seen = 0; k < int64_t(in.size()); ++k)
    if (in[k] != 1 && seen++ == rank)
      return k;
  return std::nullopt;
}

} // namespace

std::optional<ParamDim> cleave::dist::traceToParam(Value v, int64_t d) {
  while (Operation *op = v.getDefiningOp()) {
    if (auto read = dyn_cast<graph::ReadParamOp>(op))
      return ParamDim{read.getParam(), d};
    if (auto widen = dyn_cast<graph::CastOp>(op)) {
      v = widen.getOperand();
    } else if (auto t = dyn_cast<graph::TransposeOp>(op)) {
      d = t.getPerm()[d];
      v = t.getOperand();
    } else if (auto slice = dyn_cast<graph::SliceOp>(op)) {
      if (slice.getStart()[d] != 0 ||
          slice.getLimit()[d] != sizeOf(slice.getOperand(), d) ||
          slice.getStridesOrOnes()[d] != 1)
        return std::nullopt;
      v = slice.getOperand();
    } else if (auto reshape = dyn_cast<graph::ReshapeOp>(op)) {
      std::optional<int64_t> in = throughUnitReshape(
          reshape.getType().getShape(),
          cast<RankedTensorType>(reshape.getOperand().getType()).getShape(),
          d);
      if (!in)
        return std::nullopt;
      d = *in;
      v = reshape.getOperand();
    } else {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

namespace {

/// Splits dimension `offset` after the batch of every tensor argument on
/// `axis` (only where its size is `size`, when given): splitBatch and
/// splitSequence.
LogicalResult splitInputs(ModuleOp module, MeshOp mesh, StringRef axis,
                          int64_t n, StringAttr origin, int64_t offset,
                          std::optional<int64_t> size, StringRef what) {
  MLIRContext *ctx = module.getContext();
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  ArrayRef<Attribute> meshAxes = mesh.getAxisNames().getValue();
  auto meshIndex = [&](StringRef a) {
    return llvm::find(meshAxes, StringAttr::get(ctx, a)) - meshAxes.begin();
  };
  StringRef axisName = StringAttr::get(ctx, axis).getValue();
  bool failedArg = false;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    int64_t dim = offset;
    // Microbatches [K, B, ...]: the batch is dimension 1, in a training
    // step and in its evaluation program (which has only its loss's keys).
    auto config = fn->getAttrOfType<DictionaryAttr>(kTrainingConfigAttr);
    if (!config)
      config = fn->getAttrOfType<DictionaryAttr>(kLossAttr);
    if (config)
      if (auto k = config.getAs<IntegerAttr>("accumulate"))
        dim += k.getInt() > 1 ? 1 : 0;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      auto type = dyn_cast<RankedTensorType>(fn.getArgumentTypes()[i]);
      if (!type || type.getRank() <= dim ||
          (size && type.getDimSize(dim) != *size))
        continue;
      Layout layout = Layout::replicated(type.getRank());
      if (auto s = fn.getArgAttrOfType<ShardingAttr>(
              i, DistDialect::getShardingAttrName())) {
        FailureOr<Layout> l = Layout::get(s, [&]() { return fn.emitOpError(); });
        if (failed(l))
          return failure();
        // A layout the user wrote is kept as written.
        if (s.getPriority() == ShardingPriority::User)
          continue;
        layout = *l;
      }
      if (layout.usesAxis(axis))
        continue;
      int64_t local = type.getDimSize(dim) / groupSize(mesh, layout.dims[dim]);
      if (local % n != 0) {
        fn.emitOpError("argument #")
            << i << " (" << type << ") has a " << what << " of " << local
            << " along dimension " << dim << ", which the " << n
            << " devices of axis '" << axis << "' do not divide";
        failedArg = true;
        continue;
      }
      auto &axes = layout.dims[dim];
      auto *at = llvm::find_if(axes, [&](StringRef a) {
        return meshIndex(a) > meshIndex(axisName);
      });
      axes.insert(at, axisName);
      fn.setArgAttr(i, DistDialect::getShardingAttrName(),
                    layout.toAttr(meshRef, ShardingPriority::Strategy, origin));
    }
  }
  return failure(failedArg);
}

} // namespace

LogicalResult cleave::dist::splitBatch(ModuleOp module, MeshOp mesh,
                                       StringRef axis, int64_t n,
                                       StringAttr origin) {
  return splitInputs(module, mesh, axis, n, origin, 0, std::nullopt, "batch");
}

LogicalResult cleave::dist::splitSequence(ModuleOp module, MeshOp mesh,
                                          StringRef axis, int64_t n,
                                          int64_t sequence, StringAttr origin) {
  return splitInputs(module, mesh, axis, n, origin, 1, sequence, "sequence");
}

void cleave::dist::shareWithState(
    ModuleOp module, const llvm::StringMap<ShardingAttr> &shardings) {
  SymbolTable symbols(module);
  auto share = [&](Value param, ArrayRef<Value> state) {
    auto read = param.getDefiningOp<graph::ReadParamOp>();
    auto it = read ? shardings.find(read.getParam()) : shardings.end();
    if (it == shardings.end())
      return;
    for (Value v : state)
      if (auto stateRead = v ? v.getDefiningOp<graph::ReadParamOp>() : nullptr)
        if (auto p = symbols.lookup<graph::ParamOp>(stateRead.getParam()))
          p.setShardingAttr(it->second);
  };
  module.walk([&](Operation *op) {
    if (auto adamw = dyn_cast<graph::AdamwOp>(op))
      share(adamw.getParam(), {adamw.getFirstMoment(), adamw.getSecondMoment()});
    if (auto sgd = dyn_cast<graph::SgdOp>(op))
      share(sgd.getParam(), {sgd.getMomentumBuffer()});
  });
}
