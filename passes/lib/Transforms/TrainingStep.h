//===- TrainingStep.h - the passes that build the training step -*- C++ -*-===//
//
// The training step is built by three passes that run alone or in sequence:
// -cleave-add-loss (AddLoss.cpp), -cleave-differentiate (Differentiate.cpp)
// and -cleave-add-optimizer (AddOptimizer.cpp); -cleave-autodiff
// (Autodiff.cpp) runs all three. Each is a function here, which its pass and
// -cleave-autodiff call, so that both write the same IR and the same
// diagnostics (named after the pass that runs). The step goes from one to
// the next through verified attributes (CleaveDialect.h): `cleave.loss` on
// the function, `cleave.microbatch_loss` on the ops where the backward
// starts, `cleave.gradient` on the results that hold gradients. The helpers
// they share are here as well: the tagging of new ops with their phase,
// microbatch and layer, the layers of parameters, scalar constants, state
// parameters.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_TRAININGSTEP_H
#define CLEAVE_TRANSFORMS_TRAININGSTEP_H

#include "cleave/Dialect/Cleave/IR/CleaveDialect.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace cleave {

//===----------------------------------------------------------------------===//
// The three stages
//===----------------------------------------------------------------------===//

/// -cleave-add-loss: replaces @forward with @train_step, the forward of each
/// microbatch and its loss, marked for the backward pass. `pass` (the flag
/// that runs, e.g. "-cleave-autodiff") names it in diagnostics.
mlir::LogicalResult buildLossStep(mlir::ModuleOp module,
                                  const AddLossPassOptions &options,
                                  llvm::StringRef pass);

/// -cleave-differentiate: appends the backward pass of each microbatch to
/// the step that carries `cleave.loss` and returns the gradients;
/// `numRules` counts the gradient rules applied.
mlir::LogicalResult differentiateStep(mlir::ModuleOp module,
                                      const DifferentiatePassOptions &options,
                                      llvm::StringRef pass, int64_t &numRules);

/// -cleave-add-optimizer: replaces the gradient results of the step with
/// the updates of their parameters and sets the training configuration.
mlir::LogicalResult addOptimizerUpdates(mlir::ModuleOp module,
                                        const AddOptimizerPassOptions &options,
                                        llvm::StringRef pass);

/// The function that carries `cleave.loss` (the training step being built),
/// or failure with a diagnostic when none or several do: one that says that
/// `pass` needs `needs` and to run the passes `runFirst` first.
mlir::FailureOr<mlir::func::FuncOp> lookupLossStep(mlir::ModuleOp module,
                                                   llvm::StringRef pass,
                                                   llvm::StringRef needs,
                                                   llvm::StringRef runFirst);

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Tags every op the passes insert into the training step with its phase,
/// microbatch and layer (GraphDialect's training-step annotations), so that
/// stage assignment and recomputation can find them.
class StepTagger : public mlir::OpBuilder::Listener {
public:
  explicit StepTagger(mlir::MLIRContext *ctx) : ctx(ctx) {}

  graph::Phase phase = graph::Phase::Forward;
  std::optional<int64_t> microbatch;
  std::optional<int64_t> layer;

  void notifyOperationInserted(mlir::Operation *op,
                               mlir::OpBuilder::InsertPoint) override;

private:
  mlir::MLIRContext *ctx;
};

/// The layer of an op: its `graph.layer`, once tagged.
std::optional<int64_t> layerOf(mlir::Operation *op);
/// The microbatch of an op: its `graph.microbatch`, once tagged.
std::optional<int64_t> microbatchOf(mlir::Operation *op);
/// The phase of an op: its `graph.phase`, once tagged.
std::optional<graph::Phase> phaseOf(mlir::Operation *op);
/// Gives `to` the training-step annotations (phase, microbatch, layer)
/// that `from` has: an op inserted for another belongs to its place.
void copyStepAnnotations(mlir::Operation *from, mlir::Operation *to);

/// The layer index a name speaks of: `blocks.3.attn.qkv.weight`,
/// `/blocks.3/attn/MatMul`, `layers.3`, `h.3` (the PyTorch and ONNX
/// spellings of a stack of layers).
std::optional<int64_t> layerInName(llvm::StringRef name);
/// The layer a location names (the ONNX node path of an imported op).
std::optional<int64_t> layerInLoc(mlir::Location loc);

/// The layer of each parameter the step's forward ops read: its name's,
/// else that of the (tagged) reads of it.
llvm::StringMap<std::optional<int64_t>>
parameterLayers(mlir::func::FuncOp step);

/// A rank-0 constant of `elem` (float or integer).
mlir::Value scalarConstant(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Type elem, double v);

/// The sum of all elements of `v` as a scalar of its element type.
mlir::Value sumAll(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v);

/// Adds a frozen state parameter of `role` after `after` (at the start of
/// the module when null), zero-initialized unless `initial` is given; an
/// existing symbol of that name is an error.
mlir::FailureOr<graph::ParamOp>
addStateParam(mlir::OpBuilder &b, mlir::ModuleOp module, mlir::Operation *after,
              llvm::StringRef name, mlir::RankedTensorType type,
              cleave_param_role role, mlir::Attribute initial = {});

/// Erases the ops of `step` whose results nobody needs (gradients of
/// constants and frozen parameters, forward values off the loss's path).
void eraseDeadOps(mlir::func::FuncOp step);

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_TRAININGSTEP_H
