//===- FuseLinear.cpp - matmul + bias + GELU into graph.linear ----------===//
//
// A linear layer arrives from ONNX, and leaves -cleave-autodiff, as three or
// four kernels: a transpose of the stored [n, k] weight, the matmul, the
// bias add and the activation, each a pass over memory. This pass rewrites
// them into one graph.linear, which the runtime computes as one GEMM with
// the bias and activation applied to its output while it is still in
// registers or cache (cuBLASLt epilogues on the GPU).
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
  int64_t linear = 0, activations = 0, transposes = 0;
};

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
      Value weight = matmul.getRhs();
      bool transposed = false;
      if (auto t = weight.getDefiningOp<TransposeOp>();
          t && t.getPerm() == ArrayRef<int64_t>{1, 0}) {
        weight = t.getOperand();
        transposed = true;
      }
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

struct FuseLinearPass : cleave::impl::FuseLinearPassBase<FuseLinearPass> {
  void runOnOperation() override {
    FusionCounts counts;
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseBiasedMatmul, FuseActivation>(&getContext(), counts);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    numLinear += counts.linear;
    numActivations += counts.activations;
    numTransposes += counts.transposes;
  }
};

} // namespace
