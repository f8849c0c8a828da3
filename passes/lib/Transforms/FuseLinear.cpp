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
// operands transposed as BLAS does. Last, the bias gradient of a linear
// without GELU, a sum of dy, joins its weight gradient's gemm, which reads
// dy anyway (cuBLASLt's BGRADB).
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
          biasGrads = 0, gemmTransposes = 0, gemmCasts = 0, gemmBiasGrads = 0;
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
    // A partitioned program's partial product (a row-parallel layer before
    // its reduction) must not get the bias: each device would add it.
    if (dist::ShardingAttr s = dist::getResultSharding(matmul, 0);
        s && s.isPartial())
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
      op, op->getResult(0).getType(), /*bias_grad=*/Type(),
      fromLhs ? fromLhs : lhs, fromRhs ? fromRhs : rhs,
      tl != bool(fromLhs) ? unit : UnitAttr(),
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
    if (op.getBiasGrad()) // it sums lhs as stored
      return failure();
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
      if (gemm.getBiasGrad())
        return failure();
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
    rewriter.replaceOpWithNewOp<GemmOp>(op, op.getType(), /*bias_grad=*/Type(),
                                        b, a, tb ? UnitAttr() : unit,
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
    if (!gemm || gemm.getBiasGrad() || !gemm->hasOneUse() || !to ||
        !to.getElementType().isF32() ||
        gemm.getResult().getType().getElementType().getIntOrFloatBitWidth() !=
            16)
      return failure();
    rewriter.replaceOpWithNewOp<GemmOp>(
        op, to, /*bias_grad=*/Type(), gemm.getLhs(), gemm.getRhs(),
        gemm.getTransposeLhsAttr(), gemm.getTransposeRhsAttr());
    rewriter.eraseOp(gemm);
    ++counts.gemmCasts;
    return success();
  }
};

/// Whether `type` holds a bias vector of `n` elements: [n] or [1, ..., 1, n].
bool isBiasVector(RankedTensorType type, int64_t n) {
  return type.getRank() >= 1 && type.getShape().back() == n &&
         llvm::all_of(type.getShape().drop_back(),
                      [](int64_t d) { return d == 1; });
}

/// The gemm that reads `sum`'s operand D as its transposed lhs (D itself,
/// rank 2, or D reshaped to [rows, m]), for `sum` the sum of D over every
/// dimension but the last: the weight gradient dy^T x beside its bias
/// gradient.
GemmOp weightGradientOf(ReduceOp sum) {
  Value d = sum.getOperand();
  auto type = cast<RankedTensorType>(d.getType());
  int64_t rank = type.getRank();
  if (sum.getKind() != ReductionKind::Sum || rank < 2 ||
      !isa<FloatType>(type.getElementType()) ||
      !llvm::equal(sum.getDims(), llvm::seq<int64_t>(0, rank - 1)))
    return {};
  auto readsAsLhs = [&](Value lhs) -> GemmOp {
    for (Operation *user : lhs.getUsers())
      if (auto gemm = dyn_cast<GemmOp>(user); gemm && gemm.getLhs() == lhs &&
                                              gemm.getTransposeLhs() &&
                                              !gemm.getBiasGrad())
        return gemm;
    return {};
  };
  if (rank == 2)
    return readsAsLhs(d);
  for (Operation *user : d.getUsers()) {
    auto reshape = dyn_cast<ReshapeOp>(user);
    if (!reshape)
      continue;
    RankedTensorType to = reshape.getType();
    if (to.getRank() == 2 && to.getDimSize(1) == type.getShape().back())
      if (GemmOp gemm = readsAsLhs(reshape))
        return gemm;
  }
  return {};
}

/// Moves the ops between `from` and `fused` (in one block) that use the
/// results of `fused`, directly or through each other, to just after it,
/// in their order: the uses that `fused`'s results took over from an op
/// before it.
void moveUsersAfter(Operation *from, Operation *fused) {
  llvm::SmallPtrSet<Operation *, 8> users = {fused};
  SmallVector<Operation *> moved;
  for (Operation *op = from->getNextNode(); op != fused; op = op->getNextNode())
    if (llvm::any_of(op->getOperands(), [&](Value v) {
          return users.contains(v.getDefiningOp());
        })) {
      users.insert(op);
      moved.push_back(op);
    }
  Operation *point = fused;
  for (Operation *op : moved) {
    op->moveAfter(point);
    point = op;
  }
}

/// Makes `sum` the bias_grad result of its weight gradient's gemm (see
/// weightGradientOf). A 16-bit sum whose one use, through at most one
/// reshape, is a cast to f32 is stored in f32 instead when the gemm stores
/// f32 (the optimizer's master gradient): the cast goes too. The new gemm
/// takes the later place of the two, and the uses of the earlier one that
/// came before it move after it.
void fuseBiasGradIntoGemm(ReduceOp sum, GemmOp gemm) {
  Operation *replaced = sum;
  SmallVector<Operation *, 2> dead;
  RankedTensorType dbType = sum.getType();
  if (gemm.getResult().getType().getElementType().isF32() &&
      !dbType.getElementType().isF32()) {
    Operation *user = replaced->hasOneUse() ? *replaced->user_begin() : nullptr;
    if (isa_and_nonnull<ReshapeOp>(user) && user->hasOneUse()) {
      dead.push_back(replaced);
      replaced = user;
      user = *user->user_begin();
    }
    auto cast = dyn_cast_or_null<CastOp>(user);
    auto castType =
        cast ? dyn_cast<RankedTensorType>(cast.getType()) : RankedTensorType();
    if (castType && castType.getElementType().isF32() &&
        isBiasVector(castType, dbType.getShape().back())) {
      dead.push_back(replaced);
      replaced = cast;
      dbType = castType;
    } else {
      dead.clear();
      replaced = sum;
    }
  }
  bool gemmFirst = gemm->isBeforeInBlock(replaced);
  OpBuilder builder(gemmFirst ? replaced : gemm.getOperation());
  auto fused = GemmOp::create(
      builder, gemm.getLoc(), gemm.getResult().getType(), dbType, gemm.getLhs(),
      gemm.getRhs(), gemm.getTransposeLhsAttr(), gemm.getTransposeRhsAttr());
  gemm.getResult().replaceAllUsesWith(fused.getResult());
  replaced->getResult(0).replaceAllUsesWith(fused.getBiasGrad());
  moveUsersAfter(gemmFirst ? gemm.getOperation() : replaced, fused);
  gemm.erase();
  replaced->erase();
  for (Operation *op : llvm::reverse(dead))
    op->erase();
}

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
    // Then the bias gradients, beside the gemms those patterns made.
    SmallVector<std::pair<ReduceOp, GemmOp>> pairs;
    getOperation()->walk([&](ReduceOp sum) {
      if (GemmOp gemm = weightGradientOf(sum);
          gemm && sum->getBlock() == gemm->getBlock() &&
          llvm::none_of(pairs, [&](auto &p) { return p.second == gemm; }))
        pairs.emplace_back(sum, gemm);
    });
    for (auto [sum, gemm] : pairs)
      fuseBiasGradIntoGemm(sum, gemm);
    counts.gemmBiasGrads += pairs.size();
    numGemmBiasGrads += counts.gemmBiasGrads;
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
