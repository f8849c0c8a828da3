//===- FuseLinear.cpp - matmul + bias + GELU into graph.linear ----------===//
//
// A linear layer arrives from ONNX, and leaves -cleave-autodiff, as three or
// four kernels: a transpose of the stored [n, k] weight, the matmul, the
// bias add and the activation, each a pass over memory. This pass rewrites
// them into one graph.linear, which the runtime computes as one GEMM with
// the bias and activation applied to its output while it is still in
// registers or cache (cuBLASLt epilogues on the GPU). In the backward, the
// GEMM that produces a GELU's incoming gradient, the gelu_grad and the bias
// gradient's sum become one graph.matmul_gelu_grad (cuBLASLt's DGELU_BGRAD).
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace cleave {
#define GEN_PASS_DEF_FUSELINEARPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

/// Counters the patterns update (the pass's statistics).
struct FusionCounts {
  int64_t linear = 0, activations = 0, transposes = 0, geluGrads = 0,
          biasGrads = 0;
};

/// The stored weight behind a matmul's right operand: `transpose(V)` with
/// perm [1, 0] is V read transposed.
Value storedWeight(Value w, bool &transposed) {
  transposed = false;
  if (auto t = w.getDefiningOp<TransposeOp>();
      t && t.getPerm() == ArrayRef<int64_t>{1, 0}) {
    transposed = true;
    return t.getOperand();
  }
  return w;
}

/// add(matmul(x, W), bias) -> linear(x, W, bias), with W = transpose(V)
/// read as V transposed.
struct FuseBiasedMatmul : OpRewritePattern<AddOp> {
  FuseBiasedMatmul(MLIRContext *ctx, FusionCounts &counts)
      : OpRewritePattern(ctx), counts(counts) {}

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    for (auto [product, bias] : {std::pair(add.getLhs(), add.getRhs()),
                                 std::pair(add.getRhs(), add.getLhs())}) {
      auto matmul = product.getDefiningOp<MatmulOp>();
      // The matmul's own result must not be needed elsewhere.
      if (!matmul || !matmul->hasOneUse() || product.getType() != add.getType())
        continue;
      RankedTensorType w = matmul.getRhs().getType(),
                       b = cast<RankedTensorType>(bias.getType());
      if (w.getRank() != 2 || b.getRank() != 1 ||
          b.getDimSize(0) != w.getDimSize(1) ||
          b.getElementType() != w.getElementType())
        continue;
      bool transposed;
      Value weight = storedWeight(matmul.getRhs(), transposed);
      auto linear = LinearOp::create(
          rewriter, add.getLoc(), add.getType(), /*preactivation=*/Type(),
          matmul.getLhs(), weight, bias,
          transposed ? rewriter.getUnitAttr() : UnitAttr(),
          ActivationAttr::get(getContext(), Activation::None));
      rewriter.replaceOp(add, linear.getResult());
      rewriter.eraseOp(matmul);
      ++counts.linear;
      counts.transposes += transposed;
      return success();
    }
    return failure();
  }

  FusionCounts &counts;
};

/// gelu(linear(...)) -> linear(...) with the activation; the linear's
/// other users (gelu_grad) read its new preactivation result.
struct FuseActivation : OpRewritePattern<GeluOp> {
  FuseActivation(MLIRContext *ctx, FusionCounts &counts)
      : OpRewritePattern(ctx), counts(counts) {}

  LogicalResult matchAndRewrite(GeluOp gelu,
                                PatternRewriter &rewriter) const override {
    auto linear = gelu.getOperand().getDefiningOp<LinearOp>();
    if (!linear || linear.getActivation() != Activation::None)
      return failure();
    bool keepPre = !linear.getResult().hasOneUse();
    Activation activation = gelu.getApproximate() == GeluApproximation::Tanh
                                ? Activation::GeluTanh
                                : Activation::Gelu;
    rewriter.setInsertionPoint(linear);
    auto fused = LinearOp::create(
        rewriter, linear.getLoc(), gelu.getType(),
        keepPre ? linear.getResult().getType() : Type(), linear.getInput(),
        linear.getWeight(), linear.getBias(), linear.getTransposeWeightAttr(),
        ActivationAttr::get(getContext(), activation));
    rewriter.replaceOp(gelu, fused.getResult());
    if (keepPre)
      rewriter.replaceOp(linear, fused.getPreactivation());
    else
      rewriter.eraseOp(linear);
    ++counts.activations;
    return success();
  }

  FusionCounts &counts;
};

/// gelu_grad(pre, matmul(dy, W)) and the sum of that over every dimension
/// but the last (the bias gradient) -> matmul_gelu_grad(dy, W, pre).
struct FuseGeluGrad : OpRewritePattern<GeluGradOp> {
  FuseGeluGrad(MLIRContext *ctx, FusionCounts &counts)
      : OpRewritePattern(ctx), counts(counts) {}

  LogicalResult matchAndRewrite(GeluGradOp op,
                                PatternRewriter &rewriter) const override {
    auto matmul = op.getGrad().getDefiningOp<MatmulOp>();
    if (!matmul || !matmul->hasOneUse() ||
        matmul.getRhs().getType().getRank() != 2 ||
        matmul.getType() != op.getType())
      return failure();
    RankedTensorType type = op.getType();
    ReduceOp biasGrad;
    for (Operation *user : op->getUsers()) {
      auto reduce = dyn_cast<ReduceOp>(user);
      if (reduce && reduce.getKind() == ReductionKind::Sum &&
          llvm::equal(reduce.getDims(), llvm::seq<int64_t>(0, type.getRank() -
                                                                  1))) {
        biasGrad = reduce;
        break;
      }
    }
    bool transposed;
    Value weight = storedWeight(matmul.getRhs(), transposed);
    auto fused = MatmulGeluGradOp::create(
        rewriter, op.getLoc(), type, biasGrad ? biasGrad.getType() : Type(),
        matmul.getLhs(), weight, op.getOperand(),
        transposed ? rewriter.getUnitAttr() : UnitAttr(),
        op.getApproximateAttr());
    rewriter.replaceOp(op, fused.getResult());
    if (biasGrad) {
      rewriter.replaceOp(biasGrad, fused.getBiasGrad());
      ++counts.biasGrads;
    }
    rewriter.eraseOp(matmul);
    ++counts.geluGrads;
    counts.transposes += transposed;
    return success();
  }

  FusionCounts &counts;
};

struct FuseLinearPass : cleave::impl::FuseLinearPassBase<FuseLinearPass> {
  void runOnOperation() override {
    FusionCounts counts;
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseBiasedMatmul, FuseActivation, FuseGeluGrad>(
        &getContext(), counts);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    numLinear += counts.linear;
    numActivations += counts.activations;
    numTransposes += counts.transposes;
    numGeluGrads += counts.geluGrads;
    numBiasGrads += counts.biasGrads;
  }
};

} // namespace
