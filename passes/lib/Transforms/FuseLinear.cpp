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
          biasGrads = 0, gemmTransposes = 0, gemmCasts = 0;
};

/// A rewrite pattern of this pass: it counts what it fuses.
template <typename OpT> struct FusionPattern : OpRewritePattern<OpT> {
  FusionPattern(MLIRContext *ctx, FusionCounts &counts)
      : OpRewritePattern<OpT>(ctx), counts(counts) {}

  FusionCounts &counts;
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
struct FuseBiasedMatmul : FusionPattern<AddOp> {
  using FusionPattern::FusionPattern;

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
};

/// gelu(linear(...)) -> linear(...) with the activation; the linear's
/// other users (gelu_grad) read its new preactivation result.
struct FuseActivation : FusionPattern<GeluOp> {
  using FusionPattern::FusionPattern;

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
};

/// gelu_grad(pre, matmul(dy, W)) and the sum of that over every dimension
/// but the last (the bias gradient) -> matmul_gelu_grad(dy, W, pre).
struct FuseGeluGrad : FusionPattern<GeluGradOp> {
  using FusionPattern::FusionPattern;

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
};

/// The operand of a rank-2 `transpose` with perm [1, 0].
Value transposedFrom(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  return t && t.getPerm() == ArrayRef<int64_t>{1, 0} ? t.getOperand()
                                                     : Value();
}

/// Replaces `op`, the product op(lhs) op(rhs) with transpose flags `tl` and
/// `tr`, by a gemm that reads the source of a rank-2 transposed operand
/// with that operand's flag flipped. Fails when neither operand is one.
LogicalResult foldOperandTransposes(Operation *op, Value lhs, Value rhs,
                                    bool tl, bool tr,
                                    PatternRewriter &rewriter,
                                    FusionCounts &counts) {
  Value fromLhs = cast<RankedTensorType>(lhs.getType()).getRank() == 2
                      ? transposedFrom(lhs)
                      : Value();
  Value fromRhs = transposedFrom(rhs);
  if (!fromLhs && !fromRhs)
    return failure();
  UnitAttr unit = rewriter.getUnitAttr();
  rewriter.replaceOpWithNewOp<GemmOp>(
      op, op->getResult(0).getType(), fromLhs ? fromLhs : lhs,
      fromRhs ? fromRhs : rhs, tl != bool(fromLhs) ? unit : UnitAttr(),
      tr != bool(fromRhs) ? unit : UnitAttr());
  counts.gemmTransposes += bool(fromLhs) + bool(fromRhs);
  return success();
}

/// matmul(transpose(A), B) and matmul(A, transpose(B)) -> gemm reading A
/// or B transposed (A rank 2 to be read transposed; B rank 2).
struct FuseTransposedOperands : FusionPattern<MatmulOp> {
  using FusionPattern::FusionPattern;

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType rhs = op.getRhs().getType();
    if (rhs.getRank() != 2 || !isa<FloatType>(rhs.getElementType()))
      return failure();
    return foldOperandTransposes(op, op.getLhs(), op.getRhs(), false, false,
                                 rewriter, counts);
  }
};

/// gemm(transpose(A), ...) and gemm(..., transpose(B)) -> the gemm reading
/// A or B with its transpose flag flipped (rank-2 operands).
struct FoldGemmTransposes : FusionPattern<GemmOp> {
  using FusionPattern::FusionPattern;

  LogicalResult matchAndRewrite(GemmOp op,
                                PatternRewriter &rewriter) const override {
    return foldOperandTransposes(op, op.getLhs(), op.getRhs(),
                                 op.getTransposeLhs(), op.getTransposeRhs(),
                                 rewriter, counts);
  }
};

/// transpose(op(A) op(B)) for a rank-2 product with no other use ->
/// op(B)^T op(A)^T as one gemm.
struct FuseTransposedResult : FusionPattern<TransposeOp> {
  using FusionPattern::FusionPattern;

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
};

/// cast(gemm(a, b)) from a 16-bit product to f32 -> the gemm storing its
/// f32 accumulators: a weight gradient under mixed precision, which the
/// optimizer reads in f32, is then rounded never instead of once.
struct FuseGemmCast : FusionPattern<CastOp> {
  using FusionPattern::FusionPattern;

  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    auto gemm = op.getOperand().getDefiningOp<GemmOp>();
    auto to = dyn_cast<RankedTensorType>(op.getType());
    if (!gemm || !gemm->hasOneUse() || !to || !to.getElementType().isF32() ||
        gemm.getType().getElementType().getIntOrFloatBitWidth() != 16)
      return failure();
    rewriter.replaceOpWithNewOp<GemmOp>(
        op, to, gemm.getLhs(), gemm.getRhs(), gemm.getTransposeLhsAttr(),
        gemm.getTransposeRhsAttr());
    rewriter.eraseOp(gemm);
    ++counts.gemmCasts;
    return success();
  }
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
                     FuseTransposedResult, FuseGemmCast>(&getContext(), counts);
    if (failed(applyPatternsGreedily(getOperation(), std::move(gemmPatterns))))
      return signalPassFailure();
    numGemmTransposes += counts.gemmTransposes;
    numGemmCasts += counts.gemmCasts;
    numLinear += counts.linear;
    numActivations += counts.activations;
    numTransposes += counts.transposes;
    numGeluGrads += counts.geluGrads;
    numBiasGrads += counts.biasGrads;
  }
};

} // namespace
