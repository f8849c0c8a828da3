//===- ShardingRule.h - Factor sharding rules of ops ------------*- C++ -*-===//
//
// A sharding rule relates the dimensions of an op's operands and results
// through shared factors (DESIGN.md §3). This header holds the rule itself, a
// builder for the common shapes of rules, and the op interface that returns it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_INTERFACES_SHARDINGRULE_H
#define CLEAVE_INTERFACES_SHARDINGRULE_H

#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

#include "cleave/Interfaces/CleaveEnums.h.inc"

namespace cleave {

/// What sharding a factor does to the tensors that carry it.
enum class FactorKind {
  /// Every tensor carrying the factor is split along it; no communication.
  Parallel,
  /// The factor is reduced away; sharding it makes the results partial.
  Reduction,
  /// The factor must stay whole (unless the op's partition hook handles it).
  NeedReplication,
};

/// One factor of a rule.
struct ShardingFactor {
  int64_t size = 1;
  FactorKind kind = FactorKind::Parallel;
  /// How partial results combine; meaningful for `Reduction` factors.
  ReductionKind reduction = ReductionKind::Sum;
  /// Sharding this factor is legal only through the op's partition hook
  /// (ring attention, vocabulary-parallel embedding, MoE all-to-all).
  bool needsHook = false;
};

/// Factor indices of one tensor dimension, major to minor. Empty for a
/// dimension of size 1, which is never sharded.
using DimFactors = llvm::SmallVector<int64_t, 2>;
/// The factors of every dimension of one tensor.
using TensorFactors = llvm::SmallVector<DimFactors, 4>;

/// The factor rule of one op.
class ShardingRule {
public:
  ShardingRule() = default;
  ShardingRule(unsigned numOperands, unsigned numResults);

  /// Adds a factor and returns its index.
  int64_t addFactor(int64_t size, FactorKind kind = FactorKind::Parallel,
                    ReductionKind reduction = ReductionKind::Sum,
                    bool needsHook = false);

  llvm::ArrayRef<ShardingFactor> getFactors() const { return factors; }
  const ShardingFactor &getFactor(int64_t i) const { return factors[i]; }
  llvm::ArrayRef<TensorFactors> getOperands() const { return operands; }
  llvm::ArrayRef<TensorFactors> getResults() const { return results; }
  TensorFactors &operand(unsigned i) { return operands[i]; }
  TensorFactors &result(unsigned i) { return results[i]; }

  /// Declares the op linear in `operands` jointly, the other operands held
  /// fixed: f(x + y) = f(x) + f(y) where x and y give values to all of
  /// `operands` (add is linear in {0, 1} jointly, mul in {0} and in {1}
  /// separately). A partitioner may then apply the op to values partial
  /// over some axes, and keep the result partial, exactly when the partial
  /// operands are one such group (all of its members partial, the others
  /// not), instead of reducing first.
  void addLinearGroup(llvm::ArrayRef<unsigned> operands);
  llvm::ArrayRef<llvm::SmallVector<unsigned, 2>> getLinearGroups() const {
    return linearGroups;
  }
  /// True when `partialOperands` (sorted) is one of the linear groups.
  bool isLinearIn(llvm::ArrayRef<unsigned> partialOperands) const;

  /// Indices of the factors of the given kind, ascending.
  llvm::SmallVector<int64_t> getFactorsOfKind(FactorKind kind) const;

  /// Checks that the rule describes the op's types: one entry per operand and
  /// result, one per dimension, and every dimension the product of its factors
  /// (size-1 dimensions have none). Emits an op error on violation.
  mlir::LogicalResult verifyAgainst(mlir::Operation *op) const;

  /// An einsum-like text, e.g. `([a, b], [b, c]) -> ([a, c]) {a=4, b=8
  /// reduction(sum), c=16} linear in (0), (1)`; compound dimensions print
  /// as `(a b)` and size-1 dimensions as `1`; the linear groups follow.
  std::string str() const;

private:
  llvm::SmallVector<ShardingFactor> factors;
  llvm::SmallVector<TensorFactors> operands;
  llvm::SmallVector<TensorFactors> results;
  llvm::SmallVector<llvm::SmallVector<unsigned, 2>> linearGroups;
};

/// Builds rules whose tensors are given by the op's types: each tensor starts
/// with one empty entry per dimension and factors are attached to dimensions.
class ShardingRuleBuilder {
public:
  explicit ShardingRuleBuilder(mlir::Operation *op);

  /// A (tensor, dimension) reference; `isResult` picks results over operands.
  struct DimRef {
    bool isResult;
    unsigned index;
    int64_t dim;
  };
  static DimRef operand(unsigned index, int64_t dim) {
    return {false, index, dim};
  }
  static DimRef result(unsigned index, int64_t dim) {
    return {true, index, dim};
  }

  /// Adds one factor of `size` to each of `dims` (appended as its most minor
  /// factor), skipping a factor of size 1. Returns its index or -1.
  int64_t addFactor(int64_t size, llvm::ArrayRef<DimRef> dims,
                    FactorKind kind = FactorKind::Parallel,
                    ReductionKind reduction = ReductionKind::Sum,
                    bool needsHook = false);

  /// Gives every dimension of every result that has no factor yet its own
  /// factor of the given kind (parallel by default).
  void addOwnFactorsToResults(FactorKind kind = FactorKind::Parallel);
  /// Same for operands.
  void addOwnFactorsToOperands(FactorKind kind);

  /// Numpy-style broadcasting: all results share one factor per result
  /// dimension with every operand dimension aligned to it from the right
  /// whose size equals the result's (size-1 operand dimensions broadcast).
  void addElementwiseFactors(llvm::ArrayRef<unsigned> operandIndices,
                             llvm::ArrayRef<int64_t> resultShape);

  /// Relates a reshape from `in` to `out`: dimensions are matched by
  /// splitting sizes that divide each other; runs of dimensions that cannot
  /// be matched that way (e.g. 6x4 -> 4x6) get independent factors that must
  /// be replicated.
  void addReshapeFactors(DimRef inBase, llvm::ArrayRef<int64_t> in,
                         DimRef outBase, llvm::ArrayRef<int64_t> out);

  int64_t getDimSize(DimRef ref) const;
  /// See ShardingRule::addLinearGroup.
  void addLinearGroup(llvm::ArrayRef<unsigned> operands) {
    rule.addLinearGroup(operands);
  }
  ShardingRule take() { return std::move(rule); }

private:
  DimFactors &factorsOf(DimRef ref);

  mlir::Operation *op;
  ShardingRule rule;
};

} // namespace cleave

#include "cleave/Interfaces/ShardingRuleOpInterface.h.inc"

#endif // CLEAVE_INTERFACES_SHARDINGRULE_H
