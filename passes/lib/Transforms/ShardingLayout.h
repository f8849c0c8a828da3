//===- ShardingLayout.h - shardings as the partitioner reasons about them -===//
//
// The layout of a value over whole mesh axes (a `#dist.sharding` without
// the attribute's bookkeeping), and the one decision that sharding
// propagation and partitioning share: given what is known of an op's
// operands and results, how its factors are split and so in which layout
// it reads its operands and writes its results (DESIGN.md §3).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_SHARDINGLAYOUT_H
#define CLEAVE_TRANSFORMS_SHARDINGLAYOUT_H

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Interfaces/ShardingRule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include <optional>
#include <vector>
#include <string>

namespace cleave::dist {

/// A value's layout: the axes splitting each dimension (major to minor)
/// and the axes over which it is partial.
struct Layout {
  llvm::SmallVector<llvm::SmallVector<llvm::StringRef, 2>, 4> dims;
  llvm::SmallVector<llvm::StringRef, 2> partial;
  ReductionKind partialKind = ReductionKind::Sum;

  static Layout replicated(int64_t rank) {
    Layout l;
    l.dims.resize(rank);
    return l;
  }
  bool isPartial() const { return !partial.empty(); }
  bool isReplicated() const;
  /// True when some dimension is split along `axis` or the value is
  /// partial over it.
  bool usesAxis(llvm::StringRef axis) const;
  /// The same layout, not partial.
  Layout withoutPartial() const;
  bool operator==(const Layout &o) const {
    return dims == o.dims && partial == o.partial &&
           (partial.empty() || partialKind == o.partialKind);
  }
  bool operator!=(const Layout &o) const { return !(*this == o); }
  /// `[{"dp"}, {}] partial sum {"tp"}`.
  std::string str() const;

  /// The layout of `sharding`, or a diagnostic through `emitError` when it
  /// uses sub-axes, which the partitioner does not split by yet.
  static mlir::FailureOr<Layout>
  get(ShardingAttr sharding,
      llvm::function_ref<mlir::InFlightDiagnostic()> emitError);
  ShardingAttr toAttr(mlir::FlatSymbolRefAttr mesh, ShardingPriority priority,
                      mlir::StringAttr origin) const;
  /// This device's block of a value of `type`.
  mlir::RankedTensorType localType(mlir::RankedTensorType type,
                                   MeshOp mesh) const;
};

/// The layout a constraint (`dist.shard`) gives `input`: its closed
/// dimensions as written, its open ones (`{..., ?}`) the axes `input`
/// splits them on that the closed ones do not use; never partial.
Layout constrain(ShardingAttr sharding, const Layout &constraint,
                 const Layout &input);
/// True when the constraint has open dimensions, so that its layout
/// depends on its input's.
inline bool hasOpenDims(ShardingAttr sharding) {
  return !sharding.getOpenDims().empty();
}

/// The product of the sizes of `axes` on `mesh`.
int64_t groupSize(MeshOp mesh, llvm::ArrayRef<llvm::StringRef> axes);

/// What is known of one operand or result when deciding an op's layouts:
/// its layout and who decided it (null layout: not known yet).
struct KnownLayout {
  const Layout *layout = nullptr;
  ShardingPriority priority = ShardingPriority::Propagated;
};

/// The layouts in which an op reads its operands and writes its results.
struct OpLayouts {
  std::vector<Layout> operands;
  std::vector<Layout> results;
  /// The axes each factor of the rule is split along.
  llvm::SmallVector<llvm::SmallVector<llvm::StringRef, 2>> factorAxes;
  /// For each split factor, the tensor whose layout proposed its axes:
  /// operand i is i, result j is the number of operands + j; -1 if whole.
  llvm::SmallVector<int64_t> factorSource;

  /// The tensors whose layouts decided result `r`'s: the proposers of its
  /// split factors and of the split reduction factors it is partial over.
  llvm::SmallVector<int64_t> sourcesOfResult(const ShardingRule &rule,
                                             unsigned r) const;
};

/// Decides how `op` (whose rule is `rule`) splits its factors from the
/// known layouts of its operands and results: every sharded dimension of a
/// known tensor proposes axes for the factor that is major in it, and each
/// factor takes the proposal of the highest priority (then of the largest
/// tensor) whose axes no other factor took; a lower proposal that extends
/// the chosen axes with minor ones refines them. Factors that must stay whole,
/// or that only a partition hook may split, are not split. Operands are
/// read in the layout the factors give them, not partial, except where the
/// op is linear in its partial operands (ShardingRule::addLinearGroup) and
/// those stay partial (sums and means only) and so do the results, when
/// reducing the results costs no more than reducing the operands. A
/// result is partial over the
/// axes of the split reduction factors it does not carry.
OpLayouts decideLayouts(mlir::Operation *op, const ShardingRule &rule,
                        llvm::ArrayRef<KnownLayout> operands,
                        llvm::ArrayRef<KnownLayout> results, MeshOp mesh);

/// The origins of several layouts as one: the distinct ones, joined by
/// ", " in order; null when none has one.
mlir::StringAttr joinOrigins(mlir::MLIRContext *ctx,
                             llvm::ArrayRef<mlir::StringAttr> origins);

/// The factor of `op`'s rule that the op's partition hook splits (the
/// vocabulary of a gather along dimension 0 or of its gradient, the classes
/// of a summed cross-entropy or of its gradient, the queries of a causal
/// or ring attention or of its gradient), or -1 (DistHooks.cpp).
int64_t hookFactor(mlir::Operation *op, const ShardingRule &rule);

/// The hook factor of `op` when only its results carry it (gather_grad's
/// table rows), or -1. Its operands cannot propose its axes: the forward
/// sweep of -dist-propagate leaves such an op to its readers, and the
/// factor takes only the axes its operands' factors leave (DistHooks.cpp).
int64_t resultOnlyHookFactor(mlir::Operation *op, const ShardingRule &rule);

/// The factor of `op`'s rule that its hook takes split on the same axes as
/// the hook factor, or -1: the keys of a ring attention (`dist.ring`),
/// whose blocks travel around the ring of the queries' devices.
int64_t hookTiedFactor(mlir::Operation *op, const ShardingRule &rule);

/// What the partition hooks of one function share: the output and
/// log-sum-exp of each ring attention (by the original graph.attention),
/// which the ring of its gradient reads.
struct HookState {
  llvm::DenseMap<mlir::Operation *, std::pair<mlir::Value, mlir::Value>>
      ringResults;
};

/// The local computation of `op` with its hook factor split along `axes`:
/// `operands` are this device's blocks in the decided layouts,
/// `resultTypes` the local types of the results; `localTypeOf` gives an
/// operand's local type (the partitioner's arguments keep their global
/// types until it ends).
mlir::FailureOr<llvm::SmallVector<mlir::Value>> partitionWithHook(
    mlir::OpBuilder &b, mlir::Operation *op,
    llvm::ArrayRef<mlir::Value> operands,
    llvm::ArrayRef<mlir::RankedTensorType> resultTypes,
    llvm::ArrayRef<llvm::StringRef> axes, MeshOp mesh,
    llvm::function_ref<mlir::RankedTensorType(mlir::Value)> localTypeOf,
    HookState &state);

/// The single `dist.mesh` of `module`, or a diagnostic on `module` naming
/// `pass` when there is none or more than one.
mlir::FailureOr<MeshOp> getTheMesh(mlir::ModuleOp module,
                                   llvm::StringRef pass);

/// The single mesh (as getTheMesh) and the size of its axis `axis`, or a
/// diagnostic naming `pass` when the mesh lacks it.
mlir::FailureOr<std::pair<MeshOp, int64_t>>
getMeshAxis(mlir::ModuleOp module, llvm::StringRef pass, llvm::StringRef axis);

/// The functions of `module` a distribution pass works on: those with a
/// body that are not one device's program already.
llvm::SmallVector<mlir::func::FuncOp> globalFunctions(mlir::ModuleOp module);

} // namespace cleave::dist

#endif // CLEAVE_TRANSFORMS_SHARDINGLAYOUT_H
