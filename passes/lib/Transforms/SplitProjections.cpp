//===- SplitProjections.cpp - a fused projection as one per block ---------===//
//
// Exporters write attention's query, key and value projections as one
// linear layer whose output is split in equal parts (GPT-2's `c_attn`,
// `qkv`). Its weight's rows are three blocks, and the split's rule keeps
// the split dimension whole, so tensor parallelism could not shard the
// heads. This pass gives the parameter a leading block dimension
// (`[n * h, k]` becomes `[n, h, k]`, the same bytes in the same order) and
// computes each part as its own projection of its block, so that the `h`
// dimension of every block can be sharded like any linear layer's output.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/GraphBuilders.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

namespace cleave {
#define GEN_PASS_DEF_SPLITPROJECTIONSPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A fused projection `split(add(matmul(x, transpose(W)), b))` (the bias
/// optional, on either side of the add) whose parts are equal.
struct FusedProjection {
  SplitOp split;
  MatmulOp matmul;
  TransposeOp transpose;
  ReadParamOp weight;
  ReadParamOp bias; // or null
  AddOp add;        // or null
  bool biasFirst = false;
  int64_t parts = 0, block = 0;
};

/// The reads of each parameter in the module.
using ReadsOf = llvm::StringMap<SmallVector<ReadParamOp>>;

std::optional<FusedProjection> match(SplitOp split, const ReadsOf &reads) {
  FusedProjection p;
  p.split = split;
  RankedTensorType in = typeOf(split.getOperand());
  ArrayRef<int64_t> sizes = split.getSizes();
  if (static_cast<int64_t>(split.getDim()) != in.getRank() - 1 ||
      sizes.size() < 2 ||
      llvm::any_of(sizes, [&](int64_t s) { return s != sizes.front(); }))
    return std::nullopt;
  p.parts = sizes.size();
  p.block = sizes.front();
  Value product = split.getOperand();
  if (auto add = product.getDefiningOp<AddOp>()) {
    if (!add->hasOneUse())
      return std::nullopt;
    for (int side = 0; side < 2 && !p.bias; ++side) {
      auto bias = add->getOperand(side).getDefiningOp<ReadParamOp>();
      if (bias && typeOf(bias).getRank() == 1 &&
          add->getOperand(1 - side).getDefiningOp<MatmulOp>()) {
        p.bias = bias;
        p.add = add;
        p.biasFirst = side == 0;
        product = add->getOperand(1 - side);
      }
    }
    if (!p.bias)
      return std::nullopt;
  }
  p.matmul = product.getDefiningOp<MatmulOp>();
  if (!p.matmul || !p.matmul->hasOneUse())
    return std::nullopt;
  p.transpose = p.matmul.getRhs().getDefiningOp<TransposeOp>();
  if (!p.transpose || !p.transpose->hasOneUse() ||
      p.transpose.getPerm() != ArrayRef<int64_t>{1, 0})
    return std::nullopt;
  p.weight = p.transpose.getOperand().getDefiningOp<ReadParamOp>();
  if (!p.weight || !p.weight->hasOneUse() ||
      typeOf(p.weight).getDimSize(0) != p.parts * p.block)
    return std::nullopt;
  // Only the parameters' one read each: reshaping a parameter changes it
  // for every reader.
  auto onlyRead = [&](ReadParamOp read) {
    auto it = reads.find(read.getParam());
    return it != reads.end() && it->second.size() == 1;
  };
  if (!onlyRead(p.weight) ||
      (p.bias && (!onlyRead(p.bias) || !p.bias->hasOneUse())))
    return std::nullopt;
  return p;
}

/// The initial value of a parameter of a new type with the same bytes.
FailureOr<Attribute> reshapedInit(Attribute init, RankedTensorType type) {
  if (!init || isa<ExternalWeightsAttr>(init))
    return init;
  if (auto dense = dyn_cast<DenseElementsAttr>(init))
    return Attribute(dense.reshape(type));
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(init))
    return Attribute(
        DenseResourceElementsAttr::get(type, resource.getRawHandle()));
  return failure();
}

/// Gives `param` the type `type` (same elements, same order).
LogicalResult reshapeParam(ParamOp param, RankedTensorType type) {
  if (param.getShardingAttr())
    return param.emitOpError("is sharded already; split fused projections "
                             "before choosing shardings");
  FailureOr<Attribute> init = reshapedInit(param.getInitialValueAttr(), type);
  if (failed(init))
    return param.emitOpError("has an initial value that cannot be reshaped");
  param.setType(type);
  if (*init)
    param.setInitialValueAttr(*init);
  return success();
}

struct SplitProjectionsPass
    : cleave::impl::SplitProjectionsPassBase<SplitProjectionsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    ReadsOf reads;
    module.walk(
        [&](ReadParamOp read) { reads[read.getParam()].push_back(read); });
    SmallVector<FusedProjection> found;
    module.walk([&](SplitOp split) {
      if (std::optional<FusedProjection> p = match(split, reads))
        found.push_back(*p);
    });
    for (FusedProjection &p : found)
      if (failed(rewrite(module, p)))
        return signalPassFailure();
  }

  LogicalResult rewrite(ModuleOp module, FusedProjection &p) {
    auto weightParam = module.lookupSymbol<ParamOp>(p.weight.getParamAttr());
    ParamOp biasParam =
        p.bias ? module.lookupSymbol<ParamOp>(p.bias.getParamAttr())
               : ParamOp();
    if (!weightParam || (p.bias && !biasParam))
      return p.split.emitOpError("reads a parameter that is not declared");
    RankedTensorType w = weightParam.getTensorType();
    auto weight3 = w.clone({p.parts, p.block, w.getDimSize(1)});
    if (failed(reshapeParam(weightParam, weight3)))
      return failure();
    RankedTensorType bias2;
    if (biasParam) {
      bias2 = biasParam.getTensorType().clone({p.parts, p.block});
      if (failed(reshapeParam(biasParam, bias2)))
        return failure();
    }

    OpBuilder b(p.split);
    Value weights =
        ReadParamOp::create(b, p.weight.getLoc(), weight3, p.weight.getParam());
    Value biases = biasParam ? ReadParamOp::create(b, p.bias.getLoc(), bias2,
                                                   p.bias.getParam())
                                   .getResult()
                             : Value();
    Value x = p.matmul.getLhs();
    for (int64_t i = 0; i < p.parts; ++i) {
      Value wi = buildLeadingEntry(b, p.weight.getLoc(), weights, i);
      RankedTensorType wt = typeOf(wi);
      Value t =
          TransposeOp::create(b, p.transpose.getLoc(),
                              wt.clone({wt.getDimSize(1), wt.getDimSize(0)}),
                              wi, b.getDenseI64ArrayAttr({1, 0}));
      Value part = MatmulOp::create(b, p.matmul.getLoc(),
                                    typeOf(p.split.getResult(i)), x, t);
      if (biases) {
        Value bi = buildLeadingEntry(b, p.bias.getLoc(), biases, i);
        part = p.biasFirst
                   ? AddOp::create(b, p.add.getLoc(), part.getType(), bi, part)
                         .getResult()
                   : AddOp::create(b, p.add.getLoc(), part.getType(), part, bi)
                         .getResult();
      }
      p.split.getResult(i).replaceAllUsesWith(part);
    }
    p.split.erase();
    if (p.add)
      p.add.erase();
    p.matmul.erase();
    p.transpose.erase();
    p.weight.erase();
    if (p.bias)
      p.bias.erase();
    ++numSplit;
    return success();
  }
};
} // namespace
