//===- ShardingRule.cpp - Factor sharding rules of ops ------------------===//
//
// The rule data structure, its checks and printing, and the builder helpers
// shared by the ops' rule implementations.
//
//===----------------------------------------------------------------------===//

#include "cleave/Interfaces/ShardingRule.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace cleave;

#include "cleave/Interfaces/ShardingRuleOpInterface.cpp.inc"

//===----------------------------------------------------------------------===//
// ShardingRule
//===----------------------------------------------------------------------===//

ShardingRule::ShardingRule(unsigned numOperands, unsigned numResults)
    : operands(numOperands), results(numResults) {}

int64_t ShardingRule::addFactor(int64_t size, FactorKind kind,
                                ReductionKind reduction, bool needsHook) {
  factors.push_back({size, kind, reduction, needsHook});
  return static_cast<int64_t>(factors.size()) - 1;
}

SmallVector<int64_t> ShardingRule::getFactorsOfKind(FactorKind kind) const {
  SmallVector<int64_t> ids;
  for (auto [i, f] : llvm::enumerate(factors))
    if (f.kind == kind)
      ids.push_back(i);
  return ids;
}

static LogicalResult verifyTensor(Operation *op, Type type,
                                  const TensorFactors &tensor,
                                  ArrayRef<ShardingFactor> factors,
                                  StringRef what, unsigned index) {
  auto shaped = dyn_cast<RankedTensorType>(type);
  if (!shaped)
    return op->emitOpError("sharding rule covers non-tensor ")
           << what << " #" << index;
  if (static_cast<int64_t>(tensor.size()) != shaped.getRank())
    return op->emitOpError("sharding rule gives ")
           << tensor.size() << " dimensions to " << what << " #" << index
           << " of rank " << shaped.getRank();
  for (auto [dim, dimFactors] : llvm::enumerate(tensor)) {
    int64_t product = 1;
    for (int64_t f : dimFactors) {
      if (f < 0 || f >= static_cast<int64_t>(factors.size()))
        return op->emitOpError("sharding rule uses unknown factor ") << f;
      product *= factors[f].size;
    }
    if (product != shaped.getDimSize(dim))
      return op->emitOpError("sharding rule factors of ")
             << what << " #" << index << " dimension " << dim
             << " multiply to " << product << " but the dimension is "
             << shaped.getDimSize(dim);
  }
  return success();
}

LogicalResult ShardingRule::verifyAgainst(Operation *op) const {
  if (operands.size() != op->getNumOperands() ||
      results.size() != op->getNumResults())
    return op->emitOpError("sharding rule has ")
           << operands.size() << " operands and " << results.size()
           << " results";
  for (auto [i, t] : llvm::enumerate(operands))
    if (failed(verifyTensor(op, op->getOperand(i).getType(), t, factors,
                            "operand", i)))
      return failure();
  for (auto [i, t] : llvm::enumerate(results))
    if (failed(verifyTensor(op, op->getResult(i).getType(), t, factors,
                            "result", i)))
      return failure();
  for (const auto &group : linearGroups)
    for (unsigned i : group)
      if (i >= op->getNumOperands())
        return op->emitOpError("sharding rule is linear in operand #")
               << i << ", which the op does not have";
  return success();
}

static std::string factorName(int64_t i) {
  if (i < 26)
    return std::string(1, static_cast<char>('a' + i));
  return "f" + std::to_string(i);
}

static void printTensors(llvm::raw_ostream &os,
                         ArrayRef<TensorFactors> tensors) {
  os << "(";
  llvm::interleaveComma(tensors, os, [&](const TensorFactors &t) {
    os << "[";
    llvm::interleaveComma(t, os, [&](const DimFactors &d) {
      if (d.empty()) {
        os << "1";
        return;
      }
      if (d.size() > 1)
        os << "(";
      llvm::interleave(
          d, os, [&](int64_t f) { os << factorName(f); }, " ");
      if (d.size() > 1)
        os << ")";
    });
    os << "]";
  });
  os << ")";
}

void ShardingRule::addLinearGroup(ArrayRef<unsigned> group) {
  SmallVector<unsigned, 2> sorted(group.begin(), group.end());
  llvm::sort(sorted);
  linearGroups.push_back(std::move(sorted));
}

bool ShardingRule::isLinearIn(ArrayRef<unsigned> partialOperands) const {
  return llvm::any_of(linearGroups, [&](const SmallVector<unsigned, 2> &g) {
    return ArrayRef<unsigned>(g) == partialOperands;
  });
}

std::string ShardingRule::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  printTensors(os, operands);
  os << " -> ";
  printTensors(os, results);
  os << " {";
  llvm::interleaveComma(llvm::enumerate(factors), os, [&](auto it) {
    const ShardingFactor &f = it.value();
    os << factorName(it.index()) << "=" << f.size;
    if (f.kind == FactorKind::Reduction)
      os << " reduction(" << stringifyReductionKind(f.reduction) << ")";
    else if (f.kind == FactorKind::NeedReplication)
      os << " need_replication";
    if (f.needsHook)
      os << " hook";
  });
  os << "}";
  if (!linearGroups.empty()) {
    os << " linear in ";
    llvm::interleaveComma(linearGroups, os, [&](const auto &g) {
      os << "(";
      llvm::interleaveComma(g, os);
      os << ")";
    });
  }
  return s;
}

//===----------------------------------------------------------------------===//
// ShardingRuleBuilder
//===----------------------------------------------------------------------===//

static TensorFactors emptyFactorsFor(Type type) {
  if (auto shaped = dyn_cast<RankedTensorType>(type))
    return TensorFactors(shaped.getRank());
  return {};
}

ShardingRuleBuilder::ShardingRuleBuilder(Operation *op)
    : op(op), rule(op->getNumOperands(), op->getNumResults()) {
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    rule.operand(i) = emptyFactorsFor(v.getType());
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    rule.result(i) = emptyFactorsFor(v.getType());
}

DimFactors &ShardingRuleBuilder::factorsOf(DimRef ref) {
  TensorFactors &t =
      ref.isResult ? rule.result(ref.index) : rule.operand(ref.index);
  return t[ref.dim];
}

int64_t ShardingRuleBuilder::getDimSize(DimRef ref) const {
  Value v = ref.isResult ? op->getResult(ref.index) : op->getOperand(ref.index);
  return cast<RankedTensorType>(v.getType()).getDimSize(ref.dim);
}

int64_t ShardingRuleBuilder::addFactor(int64_t size, ArrayRef<DimRef> dims,
                                       FactorKind kind,
                                       ReductionKind reduction,
                                       bool needsHook) {
  if (size == 1)
    return -1;
  int64_t id = rule.addFactor(size, kind, reduction, needsHook);
  for (DimRef d : dims)
    factorsOf(d).push_back(id);
  return id;
}

void ShardingRuleBuilder::addOwnFactorsToResults(FactorKind kind) {
  for (unsigned r = 0, e = op->getNumResults(); r < e; ++r)
    for (auto [d, dimFactors] : llvm::enumerate(rule.result(r)))
      if (dimFactors.empty())
        addFactor(getDimSize(result(r, d)), {result(r, d)}, kind);
}

void ShardingRuleBuilder::addOwnFactorsToOperands(FactorKind kind) {
  for (unsigned o = 0, e = op->getNumOperands(); o < e; ++o)
    for (auto [d, dimFactors] : llvm::enumerate(rule.operand(o)))
      if (dimFactors.empty())
        addFactor(getDimSize(operand(o, d)), {operand(o, d)}, kind);
}

void ShardingRuleBuilder::addElementwiseFactors(
    ArrayRef<unsigned> operandIndices, ArrayRef<int64_t> resultShape) {
  int64_t rank = resultShape.size();
  for (int64_t d = 0; d < rank; ++d) {
    SmallVector<DimRef> dims;
    for (unsigned r = 0, e = op->getNumResults(); r < e; ++r)
      dims.push_back(result(r, d));
    for (unsigned o : operandIndices) {
      auto type = cast<RankedTensorType>(op->getOperand(o).getType());
      int64_t od = d - (rank - type.getRank());
      if (od >= 0 && type.getDimSize(od) == resultShape[d])
        dims.push_back(operand(o, od));
    }
    addFactor(resultShape[d], dims);
  }
}

void ShardingRuleBuilder::addReshapeFactors(DimRef inBase, ArrayRef<int64_t> in,
                                            DimRef outBase,
                                            ArrayRef<int64_t> out) {
  auto inRef = [&](size_t d) {
    return DimRef{inBase.isResult, inBase.index, static_cast<int64_t>(d)};
  };
  auto outRef = [&](size_t d) {
    return DimRef{outBase.isResult, outBase.index, static_cast<int64_t>(d)};
  };
  size_t i = 0, j = 0;
  int64_t remIn = in.empty() ? 1 : in[0];
  int64_t remOut = out.empty() ? 1 : out[0];
  while (true) {
    while (i < in.size() && remIn == 1)
      remIn = ++i < in.size() ? in[i] : 1;
    while (j < out.size() && remOut == 1)
      remOut = ++j < out.size() ? out[j] : 1;
    if (i == in.size() || j == out.size())
      break;
    if (remIn % remOut == 0 || remOut % remIn == 0) {
      int64_t g = std::min(remIn, remOut);
      addFactor(g, {inRef(i), outRef(j)});
      remIn /= g;
      remOut /= g;
      continue;
    }
    // Neither size divides the other: find the shortest runs of dimensions
    // from here whose products agree; their elements are interleaved
    // differently on each side, so none of them can be split in step.
    size_t ii = i, jj = j;
    int64_t pIn = remIn, pOut = remOut;
    while (pIn != pOut) {
      if (pIn < pOut)
        pIn *= in[++ii];
      else
        pOut *= out[++jj];
    }
    addFactor(remIn, {inRef(i)}, FactorKind::NeedReplication);
    for (size_t k = i + 1; k <= ii; ++k)
      addFactor(in[k], {inRef(k)}, FactorKind::NeedReplication);
    addFactor(remOut, {outRef(j)}, FactorKind::NeedReplication);
    for (size_t k = j + 1; k <= jj; ++k)
      addFactor(out[k], {outRef(k)}, FactorKind::NeedReplication);
    i = ii + 1;
    j = jj + 1;
    remIn = i < in.size() ? in[i] : 1;
    remOut = j < out.size() ? out[j] : 1;
  }
}
