//===- DistTensorParallel.cpp - Megatron's layout, found by pattern -------===//
//
// -dist-tensor-parallel: column-parallel projections whose features reach
// only row-parallel projections (see Passes.td). The pass follows the
// features of each projection's output through the ops between the two;
// what it finds it writes as parameter shardings, and propagation and
// partitioning derive the rest.
//
//===----------------------------------------------------------------------===//

#include "DistStrategies.h"
#include "ShardingLayout.h"
#include "TrainingStep.h"

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace cleave {
#define GEN_PASS_DEF_DISTSEQUENCEPARALLELPASS
#define GEN_PASS_DEF_DISTTENSORPARALLELPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::dist;

namespace {

int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }
int64_t sizeOf(Value v, int64_t d) {
  return cast<RankedTensorType>(v.getType()).getDimSize(d);
}

/// True for ops of the forward pass (untagged ones included).
bool isForward(Operation *op) {
  std::optional<graph::Phase> phase = phaseOf(op);
  return !phase || *phase == graph::Phase::Forward;
}

/// A projection: a matmul whose right operand is a parameter; `out` and
/// `in` are the parameter dimensions of its output and input features.
struct Projection {
  graph::MatmulOp op;
  ParamDim out, in;
};

std::optional<Projection> asProjection(Operation *op) {
  auto matmul = dyn_cast<graph::MatmulOp>(op);
  if (!matmul || !isForward(op))
    return std::nullopt;
  Value rhs = matmul.getRhs();
  int64_t rank = rankOf(rhs);
  if (rank < 2 || rankOf(matmul.getLhs()) < 2)
    return std::nullopt;
  std::optional<ParamDim> out = traceToParam(rhs, rank - 1);
  std::optional<ParamDim> in = traceToParam(rhs, rank - 2);
  if (!out || !in)
    return std::nullopt;
  return Projection{matmul, *out, *in};
}

/// The projection `v` is computed from by the ops a chain passes through
/// (the other factor of SwiGLU's product, a rotated query), if it reads
/// `input` as the chain's projection does: a projection of another input
/// (a residual stream, the output of a row-parallel projection) is whole.
Operation *partnerOf(Value v, Value input, llvm::DenseSet<Value> &seen) {
  if (!seen.insert(v).second)
    return nullptr;
  Operation *op = v.getDefiningOp();
  if (!op)
    return nullptr;
  if (std::optional<Projection> p = asProjection(op))
    return p->op.getLhs() == input ? op : nullptr;
  if (!isa<graph::ReluOp, graph::GeluOp, graph::SiluOp, graph::SigmoidOp,
           graph::TanhOp, graph::NegOp, graph::CastOp, graph::AddOp,
           graph::SubOp, graph::MulOp, graph::DivOp, graph::ReshapeOp,
           graph::TransposeOp, graph::SliceOp, graph::ConcatOp,
           graph::SplitOp>(op))
    return nullptr;
  for (Value o : op->getOperands())
    if (Operation *p = partnerOf(o, input, seen))
      return p;
  return nullptr;
}

/// The walk of one projection's output features to the projections that
/// contract them.
class Chain {
public:
  Chain(int64_t n, StringRef axis, Value input)
      : n(n), axis(axis), input(input) {}

  /// True when every forward use of `v`, whose dimension `f` holds the
  /// features, leads to the contracting dimension of a projection.
  bool walk(Value v, int64_t f);

  SmallVector<ParamDim> rows;   // weights split by input features
  SmallVector<ParamDim> biases; // split with the features
  /// Projections of the same input whose features combine with these
  /// (SwiGLU's gate and up projections): split together or not at all.
  llvm::SetVector<Operation *> partners;
  std::string why;              // the first reason for refusing
  bool indivisible = false;     // the reason is a size the axis does not divide

private:
  bool fail(Operation *op, const Twine &reason) {
    if (why.empty()) {
      std::string loc;
      llvm::raw_string_ostream os(loc);
      os << op->getLoc();
      why = (op->getName().getStringRef() + " at " + loc + " " + reason).str();
    }
    return false;
  }
  bool use(Value v, int64_t f, OpOperand &operand);
  bool elementwise(Operation *op, Value v, int64_t f);

  /// Whether `other` is split with the features: computed from a partner.
  bool splitWith(Value other) {
    llvm::DenseSet<Value> seen;
    Operation *partner = partnerOf(other, input, seen);
    if (partner)
      partners.insert(partner);
    return partner != nullptr;
  }

  int64_t n;
  StringRef axis;
  Value input; // what the chain's projection reads
  llvm::DenseSet<std::pair<Value, int64_t>> visited;
};

bool Chain::walk(Value v, int64_t f) {
  if (!visited.insert({v, f}).second)
    return true;
  for (OpOperand &operand : v.getUses())
    if (isForward(operand.getOwner()) && !use(v, f, operand))
      return false;
  return true;
}

bool Chain::elementwise(Operation *op, Value v, int64_t f) {
  Value result = op->getResult(0);
  int64_t rf = f + rankOf(result) - rankOf(v);
  for (Value other : op->getOperands()) {
    if (other == v)
      continue;
    int64_t of = rf - (rankOf(result) - rankOf(other));
    if (of < 0 || sizeOf(other, of) == 1)
      continue; // broadcast along the features
    if (std::optional<ParamDim> bias = traceToParam(other, of)) {
      biases.push_back(*bias);
      continue;
    }
    if (!splitWith(other))
      return fail(op, "combines the features with a value that is not "
                      "split with them (a residual, a norm's output)");
  }
  return walk(result, rf);
}

bool Chain::use(Value v, int64_t f, OpOperand &operand) {
  Operation *op = operand.getOwner();
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case([&](graph::MatmulOp matmul) {
        std::optional<Projection> p = asProjection(matmul);
        if (operand.getOperandNumber() != 0 || !p || f != rankOf(v) - 1)
          return fail(op, "uses the features other than as a projection's "
                          "input");
        rows.push_back(p->in);
        return true;
      })
      .Case<graph::ReluOp, graph::GeluOp, graph::SiluOp, graph::SigmoidOp,
            graph::TanhOp, graph::NegOp, graph::CastOp, graph::AddOp,
            graph::SubOp, graph::MulOp, graph::DivOp>(
          [&](Operation *) { return elementwise(op, v, f); })
      .Case([&](graph::TransposeOp t) {
        int64_t rf = llvm::find(t.getPerm(), f) - t.getPerm().begin();
        return walk(t.getResult(), rf);
      })
      .Case([&](graph::SliceOp slice) {
        if (slice.getStart()[f] != 0 || slice.getLimit()[f] != sizeOf(v, f))
          return fail(op, "slices the features");
        return walk(slice.getResult(), f);
      })
      .Case([&](graph::ConcatOp concat) {
        if (int64_t(concat.getDim()) == f)
          return fail(op, "concatenates along the features");
        for (Value other : concat.getInputs())
          if (other != v && !splitWith(other))
            return fail(op, "concatenates the features with other values");
        return walk(concat.getResult(), f);
      })
      .Case([&](graph::SplitOp split) {
        if (int64_t(split.getDim()) == f)
          return fail(op, "splits the features");
        return llvm::all_of(split.getResults(),
                            [&](Value r) { return walk(r, f); });
      })
      .Case([&](graph::ReshapeOp reshape) {
        ArrayRef<int64_t> in =
            cast<RankedTensorType>(v.getType()).getShape();
        ArrayRef<int64_t> out = reshape.getType().getShape();
        // The dimensions before f keep their product; f is the major
        // factor of the output dimension where it starts.
        int64_t before = 1;
        for (int64_t k = 0; k < f; ++k)
          before *= in[k];
        int64_t acc = 1, g = 0;
        while (g < int64_t(out.size()) && acc < before)
          acc *= out[g++];
        while (g < int64_t(out.size()) && out[g] == 1 && in[f] != 1)
          ++g;
        if (acc != before || g == int64_t(out.size()))
          return fail(op, "mixes the features with other dimensions");
        if (out[g] == in[f] || out[g] % in[f] == 0) // kept, or merged
          return walk(reshape.getResult(), g);    // with minor dimensions
        if (in[f] % out[g] != 0)
          return fail(op, "mixes the features with other dimensions");
        // Split into heads (major) and their features.
        if (out[g] % n != 0) {
          indivisible = true;
          return fail(op, "splits " + Twine(in[f]) + " features into " +
                              Twine(out[g]) + " heads, which the " + Twine(n) +
                              " devices of axis '" + axis +
                              "' do not divide");
        }
        return walk(reshape.getResult(), g);
      })
      .Case([&](graph::CrossEntropyOp loss) {
        // The vocabulary-parallel loss: the classes split, through the
        // cross-entropy's partition hook (summed, as the training step's).
        if (operand.getOperandNumber() != 0 || f != rankOf(v) - 1 ||
            loss.getReduction() != ReductionKind::Sum)
          return fail(op, "reads the features other than as the classes of "
                          "a summed loss");
        return true;
      })
      .Case([&](graph::AttentionOp attention) {
        unsigned i = operand.getOperandNumber();
        if (i > 2 || f != 1)
          return fail(op, "reads the features other than as heads of its "
                          "query, key or value");
        for (Value qkv : {attention.getQuery(), attention.getKey(),
                          attention.getValue()})
          if (sizeOf(qkv, 1) % n != 0) {
            indivisible = true;
            return fail(op, "has " + Twine(sizeOf(qkv, 1)) +
                                " heads, which the " + Twine(n) +
                                " devices of axis '" + axis +
                                "' do not divide");
          }
        return walk(attention.getResult(), 1);
      })
      .Default([&](Operation *) {
        return fail(op, "reads the features, which it needs whole");
      });
}

struct DistTensorParallelPass
    : public cleave::impl::DistTensorParallelPassBase<DistTensorParallelPass> {
  using Base::Base;
  void runOnOperation() override;
};

void DistTensorParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto meshAxis = getMeshAxis(module, "-dist-tensor-parallel", axis);
  if (failed(meshAxis))
    return signalPassFailure();
  MeshOp mesh = meshAxis->first;
  const int64_t n = meshAxis->second;
  if (n == 1)
    return;

  // Every projection's chain, in program order.
  struct Candidate {
    Projection projection;
    Chain chain;
    bool ok;
  };
  std::vector<Candidate> candidates;
  for (auto fn : module.getOps<func::FuncOp>())
    fn.walk([&](graph::MatmulOp matmul) {
      std::optional<Projection> p = asProjection(matmul);
      if (!p)
        return;
      Chain chain(n, axis, matmul.getLhs());
      bool ok = chain.walk(matmul.getResult(), rankOf(matmul) - 1);
      candidates.push_back({*p, std::move(chain), ok});
    });
  for (Candidate &c : candidates) {
    if (c.ok || !c.chain.indivisible)
      continue;
    c.projection.op->emitOpError("cannot be split on axis '")
        << axis << "': " << c.chain.why;
    return signalPassFailure();
  }
  for (Candidate &c : candidates) {
    int64_t features = sizeOf(c.projection.op.getResult(),
                              rankOf(c.projection.op) - 1);
    if (c.ok && features % n != 0) {
      c.projection.op->emitOpError("cannot be split on axis '")
          << axis << "': its " << features << " output features are not "
          << "divisible by the " << n << " devices of the axis";
      return signalPassFailure();
    }
  }

  // Keep the chains, in program order, whose partners are kept too and
  // whose projection is not a kept chain's row-parallel end; each
  // parameter dimension split once.
  llvm::DenseSet<Operation *> kept;
  llvm::StringMap<int64_t> split; // the kept chains' parameter dimensions
  for (bool changed = true; changed;) {
    changed = false;
    kept.clear();
    split.clear();
    SmallVector<ParamDim> rowEnds;
    for (Candidate &c : candidates) {
      if (!c.ok || llvm::is_contained(rowEnds, c.projection.in))
        continue;
      SmallVector<ParamDim> dims = {c.projection.out};
      llvm::append_range(dims, c.chain.biases);
      llvm::append_range(dims, c.chain.rows);
      llvm::StringMap<int64_t> mine;
      bool consistent = llvm::all_of(dims, [&](const ParamDim &pd) {
        auto it = split.find(pd.param);
        return (it == split.end() || it->second == pd.dim) &&
               mine.try_emplace(pd.param, pd.dim).first->second == pd.dim;
      });
      if (!consistent)
        continue;
      for (const ParamDim &pd : dims)
        split[pd.param] = pd.dim;
      llvm::append_range(rowEnds, c.chain.rows);
      kept.insert(c.projection.op);
    }
    for (Candidate &c : candidates)
      if (c.ok && kept.contains(c.projection.op) &&
          llvm::any_of(c.chain.partners,
                       [&](Operation *p) { return !kept.contains(p); })) {
        c.ok = false;
        c.chain.why = "its features combine with those of a projection "
                      "that stays whole";
        changed = true;
      }
  }
  // Embeddings by vocabulary (Megatron's vocabulary-parallel embedding):
  // a table looked up along dimension 0 by the data's ids, through the
  // gather's hook. A table read at fixed rows (positions) stays whole: it
  // would cost an all-reduce of the rows to save their storage.
  for (auto fn : module.getOps<func::FuncOp>())
    fn.walk([&](graph::GatherOp gather) {
      if (!isForward(gather) || gather.getDim() != 0 ||
          gather.getIndices().getDefiningOp<graph::ConstantOp>() ||
          gather.getIndices().getDefiningOp<graph::IotaOp>())
        return;
      std::optional<ParamDim> table = traceToParam(gather.getData(), 0);
      if (!table || sizeOf(gather.getData(), 0) % n != 0)
        return;
      auto it = split.find(table->param);
      if (it == split.end())
        split[table->param] = table->dim;
    });
  if (split.empty()) {
    std::string firstRefusal;
    for (Candidate &c : candidates)
      if (!c.ok && firstRefusal.empty())
        firstRefusal = c.chain.why;
    module.emitError("-dist-tensor-parallel found no pair of projections to "
                     "split on axis '")
        << axis << "' (" << n << " devices)"
        << (firstRefusal.empty() ? std::string()
                                 : "; the first projection: " + firstRefusal);
    return signalPassFailure();
  }

  // The parameters, then the optimizer state of each.
  SymbolTable symbols(module);
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  StringAttr origin = StringAttr::get(&getContext(), "-dist-tensor-parallel");
  StringRef axisName = StringAttr::get(&getContext(), axis).getValue();
  llvm::StringMap<ShardingAttr> shardings;
  for (auto &[name, dim] : split) {
    auto param = symbols.lookup<graph::ParamOp>(name);
    if (!param)
      continue;
    auto type = cast<RankedTensorType>(param.getType());
    Layout layout = Layout::replicated(type.getRank());
    layout.dims[dim].push_back(axisName);
    ShardingAttr s = layout.toAttr(meshRef, ShardingPriority::Strategy, origin);
    param.setShardingAttr(s);
    shardings[name] = s;
  }
  shareWithState(module, shardings);
}

//===----------------------------------------------------------------------===//
// -dist-sequence-parallel
//===----------------------------------------------------------------------===//

struct DistSequenceParallelPass
    : public cleave::impl::DistSequenceParallelPassBase<
          DistSequenceParallelPass> {
  using Base::Base;
  void runOnOperation() override;
};

void DistSequenceParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto meshAxis = getMeshAxis(module, "-dist-sequence-parallel", axis);
  if (failed(meshAxis))
    return signalPassFailure();
  MeshOp mesh = meshAxis->first;
  const int64_t n = meshAxis->second;
  if (n == 1)
    return;
  // Whether a parameter dimension is split on the axis.
  SymbolTable symbols(module);
  auto splitOn = [&](const ParamDim &pd) {
    auto param = symbols.lookup<graph::ParamOp>(pd.param);
    if (!param || !param.getShardingAttr())
      return false;
    FailureOr<Layout> l = Layout::get(param.getShardingAttr(),
                                      [&]() { return param.emitOpError(); });
    return succeeded(l) && llvm::is_contained(l->dims[pd.dim], axis);
  };
  SmallVector<std::pair<graph::MatmulOp, int64_t>> rows;
  bool failedSize = false;
  module.walk([&](graph::MatmulOp matmul) {
    std::optional<Projection> p = asProjection(matmul);
    if (!p || !splitOn(p->in))
      return;
    int64_t rank = rankOf(matmul);
    int64_t tokens = rank - 2;
    if (tokens < 0)
      return;
    int64_t count = sizeOf(matmul.getResult(), tokens);
    if (count % n != 0) {
      matmul.emitOpError("cannot split its ")
          << count << " tokens on the " << n << " devices of axis '" << axis
          << "' (-dist-sequence-parallel)";
      failedSize = true;
      return;
    }
    rows.push_back({matmul, tokens});
  });
  if (failedSize)
    return signalPassFailure();
  if (rows.empty()) {
    module.emitError("-dist-sequence-parallel found no row-parallel "
                     "projection split on axis '")
        << axis << "' (run -dist-tensor-parallel first)";
    return signalPassFailure();
  }
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  StringAttr origin =
      StringAttr::get(&getContext(), "-dist-sequence-parallel");
  StringRef axisName = StringAttr::get(&getContext(), axis).getValue();
  // A constraint on `v` before `use` (after `at`, its producer, when
  // null): the tokens split on the axis, or whole on it; the other
  // dimensions open, so that the batch keeps its data-parallel split.
  auto constrainTokens = [&](Value v, int64_t tokens, bool split,
                             Operation *at, OpOperand *use) {
    int64_t rank = rankOf(v);
    Layout layout = Layout::replicated(rank);
    if (split)
      layout.dims[tokens].push_back(axisName);
    SmallVector<int64_t> open;
    for (int64_t d = 0; d < rank; ++d)
      if (d != tokens)
        open.push_back(d);
    ShardingAttr plain =
        layout.toAttr(meshRef, ShardingPriority::Propagated, origin);
    auto sharding = ShardingAttr::get(
        &getContext(), plain.getMesh(), plain.getDims(), plain.getPartialAxes(),
        plain.getPartialKind(), open, plain.getPriority(), plain.getOrigin());
    OpBuilder b(at);
    if (!use)
      b.setInsertionPointAfter(at);
    auto shard = ShardOp::create(b, at->getLoc(), v.getType(), v, sharding);
    copyStepAnnotations(at, shard);
    if (use)
      use->set(shard.getResult());
    else
      v.replaceAllUsesExcept(shard.getResult(), shard);
  };
  // Between the regions, the tokens are split...
  for (auto [matmul, tokens] : rows)
    constrainTokens(matmul.getResult(), tokens, /*split=*/true, matmul,
                    nullptr);
  // ...but not in what the layers' regions do not cover: the projections
  // tensor parallelism left whole (the language-model head) read all the
  // tokens, and so do the embeddings' gradients (a table's gradient from a
  // shard of the tokens would be partial, and all-reduced whole).
  SmallVector<std::pair<OpOperand *, int64_t>> whole;
  module.walk([&](Operation *op) {
    if (auto matmul = dyn_cast<graph::MatmulOp>(op)) {
      std::optional<Projection> p = asProjection(matmul);
      if (p && !splitOn(p->in) && !splitOn(p->out) &&
          rankOf(matmul.getLhs()) >= 2)
        whole.push_back({&matmul->getOpOperand(0),
                         rankOf(matmul.getLhs()) - 2});
    }
    if (auto gatherGrad = dyn_cast<graph::GatherGradOp>(op)) {
      int64_t indexRank = rankOf(gatherGrad.getIndices());
      if (indexRank >= 1)
        whole.push_back({&gatherGrad->getOpOperand(0),
                         int64_t(gatherGrad.getDim()) + indexRank - 1});
    }
  });
  for (auto [use, tokens] : whole)
    constrainTokens(use->get(), tokens, /*split=*/false, use->getOwner(), use);
}

} // namespace
