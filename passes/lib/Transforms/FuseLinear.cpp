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
// The rank-2 transposes left around matmuls (the weight gradients' x^T dy,
// a tied LM head's x W^T) are then folded into graph.gemm, which reads its
// operands transposed as BLAS does.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <optional>

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
          biasGrads = 0, gemmTransposes = 0;
};

/// A matmul that a fused op may absorb: its product has no other use, and
/// its right operand is a rank-2 weight, taken as stored or, for
/// `transpose(V)` with perm [1, 0], as V read transposed.
struct AbsorbedMatmul {
  MatmulOp matmul;
  Value weight;
  UnitAttr transposed; // the fused op's transpose_weight

  static std::optional<AbsorbedMatmul> match(Value product) {
    auto matmul = product.getDefiningOp<MatmulOp>();
    if (!matmul || !matmul->hasOneUse() ||
        matmul.getRhs().getType().getRank() != 2)
      return std::nullopt;
    AbsorbedMatmul m{matmul, matmul.getRhs(), UnitAttr()};
    if (auto t = m.weight.getDefiningOp<TransposeOp>();
        t && t.getPerm() == ArrayRef<int64_t>{1, 0}) {
      m.weight = t.getOperand();
      m.transposed = UnitAttr::get(matmul.getContext());
    }
    return m;
  }
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
      std::optional<AbsorbedMatmul> m = AbsorbedMatmul::match(product);
      if (!m || product.getType() != add.getType())
        continue;
      RankedTensorType w = m->matmul.getRhs().getType(),
                       b = cast<RankedTensorType>(bias.getType());
      if (b.getRank() != 1 || b.getDimSize(0) != w.getDimSize(1) ||
          b.getElementType() != w.getElementType())
        continue;
      auto linear = LinearOp::create(
          rewriter, add.getLoc(), add.getType(), /*preactivation=*/Type(),
          m->matmul.getLhs(), m->weight, bias, m->transposed,
          ActivationAttr::get(getContext(), Activation::None));
      rewriter.replaceOp(add, linear.getResult());
      rewriter.eraseOp(m->matmul);
      ++counts.linear;
      counts.transposes += bool(m->transposed);
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
    std::optional<AbsorbedMatmul> m = AbsorbedMatmul::match(op.getGrad());
    if (!m || m->matmul.getType() != op.getType())
      return failure();
    RankedTensorType type = op.getType();
    ReduceOp biasGrad;
    auto rows = llvm::seq<int64_t>(0, type.getRank() - 1);
    for (Operation *user : op->getUsers()) {
      auto reduce = dyn_cast<ReduceOp>(user);
      if (reduce && reduce.getKind() == ReductionKind::Sum &&
          llvm::equal(reduce.getDims(), rows)) {
        biasGrad = reduce;
        break;
      }
    }
    auto fused = MatmulGeluGradOp::create(
        rewriter, op.getLoc(), type, biasGrad ? biasGrad.getType() : Type(),
        m->matmul.getLhs(), m->weight, op.getOperand(), m->transposed,
        op.getApproximateAttr());
    rewriter.replaceOp(op, fused.getResult());
    if (biasGrad) {
      rewriter.replaceOp(biasGrad, fused.getBiasGrad());
      ++counts.biasGrads;
    }
    rewriter.eraseOp(m->matmul);
    ++counts.geluGrads;
    counts.transposes += bool(m->transposed);
    return success();
  }

  FusionCounts &counts;
};

/// The operand of a rank-2 `transpose` with perm [1, 0].
Value transposedFrom(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  return t && t.getPerm() == ArrayRef<int64_t>{1, 0} ? t.getOperand()
                                                     : Value();
}

/// matmul(transpose(A), B) and matmul(A, transpose(B)) -> gemm reading A
/// or B transposed (A rank 2 to be read transposed; B rank 2).
struct FuseTransposedOperands : OpRewritePattern<MatmulOp> {
  FuseTransposedOperands(MLIRContext *ctx, FusionCounts &counts)
      : OpRewritePattern(ctx), counts(counts) {}

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType lhs = op.getLhs().getType(), rhs = op.getRhs().getType();
    if (rhs.getRank() != 2 || !isa<FloatType>(rhs.getElementType()))
      return failure();
    Value a = op.getLhs(), b = op.getRhs();
    Value ta = lhs.getRank() == 2 ? transposedFrom(a) : Value();
    Value tb = transposedFrom(b);
    if (!ta && !tb)
      return failure();
    UnitAttr unit = rewriter.getUnitAttr();
    rewriter.replaceOpWithNewOp<GemmOp>(op, op.getType(), ta ? ta : a,
                                        tb ? tb : b, ta ? unit : UnitAttr(),
                                        tb ? unit : UnitAttr());
    counts.gemmTransposes += bool(ta) + bool(tb);
    return success();
  }

  FusionCounts &counts;
};

/// gemm(transpose(A), ...) and gemm(..., transpose(B)) -> the gemm reading
/// A or B with its transpose flag flipped (rank-2 operands).
struct FoldGemmTransposes : OpRewritePattern<GemmOp> {
  FoldGemmTransposes(MLIRContext *ctx, FusionCounts &counts)
      : OpRewritePattern(ctx), counts(counts) {}

  LogicalResult matchAndRewrite(GemmOp op,
                                PatternRewriter &rewriter) const override {
    Value ta = op.getLhs().getType().getRank() == 2
                   ? transposedFrom(op.getLhs())
                   : Value();
    Value tb = transposedFrom(op.getRhs());
    if (!ta && !tb)
      return failure();
    UnitAttr unit = rewriter.getUnitAttr();
    bool transposeLhs = op.getTransposeLhs() != bool(ta),
         transposeRhs = op.getTransposeRhs() != bool(tb);
    rewriter.replaceOpWithNewOp<GemmOp>(
        op, op.getType(), ta ? ta : op.getLhs(), tb ? tb : op.getRhs(),
        transposeLhs ? unit : UnitAttr(), transposeRhs ? unit : UnitAttr());
    counts.gemmTransposes += bool(ta) + bool(tb);
    return success();
  }

  FusionCounts &counts;
};

/// transpose(op(A) op(B)) for a rank-2 product with no other use ->
/// op(B)^T op(A)^T as one gemm.
struct FuseTransposedResult : OpRewritePattern<TransposeOp> {
  FuseTransposedResult(MLIRContext *ctx, FusionCounts &counts)
      : OpRewritePattern(ctx), counts(counts) {}

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getPerm() != ArrayRef<int64_t>{1, 0})
      return failure();
    Operation *product = op.getOperand().getDefiningOp();
    if (!product || !product->hasOneUse())
      return failure();
    Value a, b;
    bool ta = false, tb = false;
    if (auto gemm = dyn_cast<GemmOp>(product)) {
      a = gemm.getLhs();
      b = gemm.getRhs();
      ta = gemm.getTransposeLhs();
      tb = gemm.getTransposeRhs();
    } else if (auto matmul = dyn_cast<MatmulOp>(product)) {
      a = matmul.getLhs();
      b = matmul.getRhs();
    } else {
      return failure();
    }
    auto at = cast<RankedTensorType>(a.getType());
    auto bt = cast<RankedTensorType>(b.getType());
    if (at.getRank() != 2 || bt.getRank() != 2 ||
        !isa<FloatType>(at.getElementType()))
      return failure();
    UnitAttr unit = rewriter.getUnitAttr();
    rewriter.replaceOpWithNewOp<GemmOp>(op, op.getType(), b, a,
                                        tb ? UnitAttr() : unit,
                                        ta ? UnitAttr() : unit);
    rewriter.eraseOp(product);
    ++counts.gemmTransposes;
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
    // Then the transposes the fused ops did not absorb (after them, so that
    // a linear's weight transpose goes into the linear).
    RewritePatternSet gemmPatterns(&getContext());
    gemmPatterns.add<FuseTransposedOperands, FoldGemmTransposes,
                     FuseTransposedResult>(&getContext(), counts);
    if (failed(applyPatternsGreedily(getOperation(), std::move(gemmPatterns))))
      return signalPassFailure();
    numGemmTransposes += counts.gemmTransposes;
    numLinear += counts.linear;
    numActivations += counts.activations;
    numTransposes += counts.transposes;
    numGeluGrads += counts.geluGrads;
    numBiasGrads += counts.biasGrads;
  }
};

} // namespace
