//===- ShardingLayout.cpp - layouts and the factor decision of an op ------===//
//
// See ShardingLayout.h.
//
//===----------------------------------------------------------------------===//

#include "ShardingLayout.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace cleave::dist {

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

bool Layout::isReplicated() const {
  return partial.empty() &&
         llvm::all_of(dims, [](const auto &axes) { return axes.empty(); });
}

bool Layout::usesAxis(StringRef axis) const {
  return llvm::is_contained(partial, axis) ||
         llvm::any_of(dims, [&](const auto &axes) {
           return llvm::is_contained(axes, axis);
         });
}

Layout Layout::withoutPartial() const {
  Layout l = *this;
  l.partial.clear();
  l.partialKind = ReductionKind::Sum;
  return l;
}

static void printAxes(llvm::raw_ostream &os, ArrayRef<StringRef> axes) {
  os << "{";
  llvm::interleaveComma(axes, os,
                        [&](StringRef a) { os << "\"" << a << "\""; });
  os << "}";
}

std::string Layout::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(dims, os, [&](const auto &axes) { printAxes(os, axes); });
  os << "]";
  if (!partial.empty()) {
    os << " partial " << stringifyReductionKind(partialKind) << " ";
    printAxes(os, partial);
  }
  return s;
}

/// The whole axes of one axis list of a sharding, or failure at a sub-axis.
static FailureOr<SmallVector<StringRef, 2>> wholeAxes(ArrayAttr list) {
  SmallVector<StringRef, 2> axes;
  for (Attribute a : list) {
    auto name = dyn_cast<StringAttr>(a);
    if (!name)
      return failure();
    axes.push_back(name.getValue());
  }
  return axes;
}

FailureOr<Layout>
Layout::get(ShardingAttr sharding,
            function_ref<InFlightDiagnostic()> emitError) {
  Layout l;
  auto fail = [&]() -> FailureOr<Layout> {
    emitError() << "uses the sub-axes of " << sharding
                << "; the partitioner splits values along whole mesh axes";
    return failure();
  };
  for (Attribute dim : sharding.getDims()) {
    FailureOr<SmallVector<StringRef, 2>> axes =
        wholeAxes(cast<ArrayAttr>(dim));
    if (failed(axes))
      return fail();
    l.dims.push_back(*axes);
  }
  FailureOr<SmallVector<StringRef, 2>> partial =
      wholeAxes(sharding.getPartialAxes());
  if (failed(partial))
    return fail();
  l.partial = *partial;
  l.partialKind = sharding.getPartialKind();
  return l;
}

ShardingAttr Layout::toAttr(FlatSymbolRefAttr mesh, ShardingPriority priority,
                            StringAttr origin) const {
  MLIRContext *ctx = mesh.getContext();
  auto list = [&](ArrayRef<StringRef> axes) {
    SmallVector<Attribute> names;
    for (StringRef a : axes)
      names.push_back(StringAttr::get(ctx, a));
    return ArrayAttr::get(ctx, names);
  };
  SmallVector<Attribute> dimAttrs;
  for (const auto &axes : dims)
    dimAttrs.push_back(list(axes));
  return ShardingAttr::get(ctx, mesh, ArrayAttr::get(ctx, dimAttrs),
                           list(partial), partialKind, ArrayRef<int64_t>(),
                           priority, origin);
}

Layout constrain(ShardingAttr sharding, const Layout &constraint,
                 const Layout &input) {
  if (!hasOpenDims(sharding))
    return constraint;
  Layout out = constraint.withoutPartial();
  llvm::SmallSet<StringRef, 4> closed;
  for (auto [d, axes] : llvm::enumerate(out.dims))
    if (!sharding.isOpen(d))
      for (StringRef a : axes)
        closed.insert(a);
  for (auto [d, axes] : llvm::enumerate(out.dims)) {
    if (!sharding.isOpen(d) || d >= input.dims.size())
      continue;
    for (StringRef a : input.dims[d])
      if (!closed.contains(a) && !llvm::is_contained(axes, a))
        axes.push_back(a);
  }
  return out;
}

int64_t groupSize(MeshOp mesh, ArrayRef<StringRef> axes) {
  int64_t n = 1;
  for (StringRef a : axes)
    n *= mesh.getAxisSize(a).value_or(1);
  return n;
}

RankedTensorType Layout::localType(RankedTensorType type, MeshOp mesh) const {
  SmallVector<int64_t> shape(type.getShape());
  for (auto [d, axes] : llvm::enumerate(dims))
    shape[d] /= groupSize(mesh, axes);
  return type.clone(shape);
}

FailureOr<MeshOp> getTheMesh(ModuleOp module, StringRef pass) {
  auto meshes = llvm::to_vector(module.getOps<MeshOp>());
  if (meshes.size() == 1)
    return meshes.front();
  if (meshes.empty())
    return module.emitError(pass)
           << " needs a dist.mesh in the module (cleave-compile --mesh, or "
              "-dist-add-mesh, adds one)";
  return module.emitError(pass)
         << " needs exactly one dist.mesh, found " << meshes.size();
}

FailureOr<std::pair<MeshOp, int64_t>>
getMeshAxis(ModuleOp module, StringRef pass, StringRef axis) {
  FailureOr<MeshOp> mesh = getTheMesh(module, pass);
  if (failed(mesh))
    return failure();
  std::optional<int64_t> size = mesh->getAxisSize(axis);
  if (!size)
    return module.emitError(pass)
           << ": the mesh has no axis '" << axis << "'";
  return std::pair{*mesh, *size};
}

SmallVector<func::FuncOp> globalFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> fns;
  for (auto fn : module.getOps<func::FuncOp>())
    if (!fn.isExternal() &&
        !fn->hasAttr(DistDialect::getPartitionedAttrName()))
      fns.push_back(fn);
  return fns;
}

//===----------------------------------------------------------------------===//
// The decision of an op
//===----------------------------------------------------------------------===//

namespace {

struct Proposal {
  int64_t tensor;
  int64_t factor;
  ArrayRef<StringRef> axes;
  ShardingPriority priority;
  int64_t elements;
};

int64_t numElements(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type ? type.getNumElements() : 1;
}

} // namespace

namespace {
/// The place of `axis` among the mesh's axes.
int64_t axisIndex(MeshOp mesh, StringRef axis) {
  ArrayRef<Attribute> names = mesh.getAxisNames().getValue();
  return llvm::find(names, StringAttr::get(mesh.getContext(), axis)) -
         names.begin();
}
} // namespace

OpLayouts decideLayouts(Operation *op, const ShardingRule &rule,
                        ArrayRef<KnownLayout> operands,
                        ArrayRef<KnownLayout> results, MeshOp mesh) {
  const int64_t numFactors = rule.getFactors().size();
  auto tensors = [&](auto fn) {
    for (auto [i, tf] : llvm::enumerate(rule.getOperands()))
      fn(tf, operands[i], op->getOperand(i), /*isResult=*/false, unsigned(i));
    for (auto [i, tf] : llvm::enumerate(rule.getResults()))
      fn(tf, results[i], op->getResult(i), /*isResult=*/true, unsigned(i));
  };

  // A factor may be split when nothing keeps it whole and it is the major
  // factor of every dimension it is part of: only then is each device's
  // piece of those dimensions one contiguous block.
  SmallVector<bool> splittable(numFactors, true);
  const int64_t hooked = hookFactor(op, rule);
  for (auto [f, factor] : llvm::enumerate(rule.getFactors()))
    if ((factor.kind == FactorKind::NeedReplication || factor.needsHook) &&
        int64_t(f) != hooked)
      splittable[f] = false;
  tensors([&](const TensorFactors &tf, const KnownLayout &, Value, bool,
              unsigned) {
    for (const DimFactors &dim : tf)
      for (size_t k = 1; k < dim.size(); ++k)
        splittable[dim[k]] = false;
  });

  // Operands that stay partial: exactly one linear group, all partial over
  // the same axes with the same reduction.
  SmallVector<unsigned> partialOperands;
  for (auto [i, known] : llvm::enumerate(operands))
    if (known.layout && known.layout->isPartial())
      partialOperands.push_back(i);
  const Layout *keptPartial = nullptr;
  // Only sums (and means) pass through a linear op: the max of a sum is
  // not the sum of the maxima.
  auto additive = [&](unsigned i) {
    ReductionKind kind = operands[i].layout->partialKind;
    return kind == ReductionKind::Sum || kind == ReductionKind::Mean;
  };
  if (!partialOperands.empty() && rule.isLinearIn(partialOperands) &&
      llvm::all_of(partialOperands, additive)) {
    const Layout *first = operands[partialOperands.front()].layout;
    auto sameAxes = [&](const Layout *l) {
      return llvm::to_vector(l->partial) == llvm::to_vector(first->partial) &&
             l->partialKind == first->partialKind;
    };
    // Reducing the results instead of the operands must not cost more:
    // a sum of partial gradients is reduced once, but a norm's backward
    // (whose scale and bias gradients come on top of the input's) reduces
    // its input.
    int64_t operandElements = 0, resultElements = 0;
    for (unsigned i : partialOperands)
      operandElements += numElements(op->getOperand(i));
    for (Value r : op->getResults())
      resultElements += numElements(r);
    if (resultElements <= operandElements &&
        llvm::all_of(partialOperands,
                     [&](unsigned i) { return sameAxes(operands[i].layout); }))
      keptPartial = first;
  }

  // Proposals: each sharded dimension of a known tensor proposes its axes
  // for the dimension's major factor.
  SmallVector<Proposal> proposals;
  tensors([&](const TensorFactors &tf, const KnownLayout &known, Value v,
              bool isResult, unsigned index) {
    if (!known.layout)
      return;
    int64_t tensor = isResult ? op->getNumOperands() + index : index;
    for (auto [d, dim] : llvm::enumerate(tf)) {
      if (dim.empty() || d >= known.layout->dims.size())
        continue;
      ArrayRef<StringRef> axes = known.layout->dims[d];
      int64_t f = dim.front();
      if (axes.empty() || !splittable[f] ||
          rule.getFactor(f).size % groupSize(mesh, axes) != 0)
        continue;
      proposals.push_back({tensor, f, axes, known.priority, numElements(v)});
    }
  });
  // A hook factor of the results alone takes the axes the operands'
  // factors leave: splitting gather_grad's table rows on the axis its ids
  // are split on would gather the ids where ZeRO reduce-scatters the
  // table's partial gradient; on an axis the ids are whole on (tp), the
  // hook computes the block.
  const int64_t resultOnly = resultOnlyHookFactor(op, rule);
  llvm::stable_sort(proposals, [&](const Proposal &a, const Proposal &b) {
    bool lastA = a.factor == resultOnly, lastB = b.factor == resultOnly;
    if (lastA != lastB)
      return lastB;
    if (a.priority != b.priority)
      return a.priority < b.priority;
    return a.elements > b.elements;
  });

  OpLayouts out;
  out.factorAxes.resize(numFactors);
  out.factorSource.assign(numFactors, -1);
  llvm::SmallSet<StringRef, 4> used;
  if (keptPartial)
    for (StringRef a : keptPartial->partial)
      used.insert(a);
  for (const Proposal &p : proposals) {
    SmallVector<StringRef, 2> &axes = out.factorAxes[p.factor];
    // A later proposal may still extend the chosen axes with minor ones
    // (ZeRO's dp after tp's on an optimizer state): the chosen layout
    // stays, and the tensor that asks for the finer split gets it.
    ArrayRef<StringRef> extra = p.axes;
    if (!axes.empty()) {
      if (p.axes.size() <= axes.size() ||
          ArrayRef<StringRef>(p.axes).take_front(axes.size()) !=
              ArrayRef<StringRef>(axes))
        continue;
      extra = p.axes.drop_front(axes.size());
    }
    // Axes another factor took end the proposal: the factor keeps the major
    // axes before them (a dispatch's slots split [dp, ep] feed an expert
    // matmul whose experts took ep: its slots stay split on dp).
    extra = extra.take_while([&](StringRef a) { return !used.contains(a); });
    if (extra.empty())
      continue;
    if (axes.empty())
      out.factorSource[p.factor] = p.tensor;
    axes.append(extra.begin(), extra.end());
    for (StringRef a : extra)
      used.insert(a);
  }

  // A ring attention's keys travel around the devices of its queries.
  if (int64_t tied = hookTiedFactor(op, rule);
      tied >= 0 && hooked >= 0 && !out.factorAxes[hooked].empty())
    out.factorAxes[tied] = out.factorAxes[hooked];

  // Split reduction factors leave the results that do not carry them
  // partial; they must agree on the reduction (and with the partial
  // operands kept), else the later ones stay whole.
  std::optional<ReductionKind> kind;
  if (keptPartial)
    kind = keptPartial->partialKind;
  for (auto [f, factor] : llvm::enumerate(rule.getFactors())) {
    if (factor.kind != FactorKind::Reduction || out.factorAxes[f].empty())
      continue;
    if (kind && *kind != factor.reduction) {
      out.factorAxes[f].clear();
      out.factorSource[f] = -1;
    }
    else
      kind = factor.reduction;
  }

  auto layoutOf = [&](const TensorFactors &tf) {
    Layout l = Layout::replicated(tf.size());
    for (auto [d, dim] : llvm::enumerate(tf))
      if (!dim.empty())
        l.dims[d] = out.factorAxes[dim.front()];
    return l;
  };
  for (auto [i, tf] : llvm::enumerate(rule.getOperands())) {
    Layout l = layoutOf(tf);
    if (keptPartial && llvm::is_contained(partialOperands, unsigned(i))) {
      l.partial = keptPartial->partial;
      l.partialKind = keptPartial->partialKind;
    }
    out.operands.push_back(std::move(l));
  }
  for (const TensorFactors &tf : rule.getResults()) {
    Layout l = layoutOf(tf);
    if (keptPartial)
      l.partial = keptPartial->partial;
    for (auto [f, factor] : llvm::enumerate(rule.getFactors())) {
      if (factor.kind != FactorKind::Reduction || out.factorAxes[f].empty())
        continue;
      bool carried = llvm::any_of(
          tf, [&](const DimFactors &dim) { return llvm::is_contained(dim, f); });
      // A result split on the axes already (a ring attention's key
      // gradients, tied to the split queries) holds its own block whole.
      if (carried)
        continue;
      for (StringRef a : out.factorAxes[f])
        if (!l.usesAxis(a))
          l.partial.push_back(a);
    }
    // In the mesh's order: partial over {cp, dp} and over {dp, cp} are the
    // same layout (a sum of the two stays partial, reduced once).
    llvm::stable_sort(l.partial, [&](StringRef x, StringRef y) {
      return axisIndex(mesh, x) < axisIndex(mesh, y);
    });
    if (l.isPartial())
      l.partialKind = *kind;
    out.results.push_back(std::move(l));
  }
  return out;
}

SmallVector<int64_t> OpLayouts::sourcesOfResult(const ShardingRule &rule,
                                                unsigned r) const {
  SmallVector<int64_t> sources;
  auto add = [&](int64_t f) {
    if (factorSource[f] >= 0 && !llvm::is_contained(sources, factorSource[f]))
      sources.push_back(factorSource[f]);
  };
  const TensorFactors &tf = rule.getResults()[r];
  for (const DimFactors &dim : tf)
    if (!dim.empty())
      add(dim.front());
  for (auto [f, factor] : llvm::enumerate(rule.getFactors()))
    if (factor.kind == FactorKind::Reduction &&
        llvm::none_of(tf, [&](const DimFactors &dim) {
          return llvm::is_contained(dim, int64_t(f));
        }))
      add(f);
  return sources;
}

StringAttr joinOrigins(MLIRContext *ctx, ArrayRef<StringAttr> origins) {
  SmallVector<StringRef> parts;
  for (StringAttr o : origins) {
    if (!o)
      continue;
    SmallVector<StringRef> pieces;
    o.getValue().split(pieces, ", ");
    for (StringRef p : pieces)
      if (!llvm::is_contained(parts, p))
        parts.push_back(p);
  }
  if (parts.empty())
    return {};
  return StringAttr::get(ctx, llvm::join(parts, ", "));
}

} // namespace cleave::dist
