//===- DistStrategies.h - what the strategy passes share -------*- C++ -*-===//
//
// The strategy passes (-dist-data-parallel, -dist-tensor-parallel,
// -dist-expert-parallel) only annotate: the batch of the inputs, the
// dimensions of the parameters, the optimizer state like its parameter.
// What more than one of them does is here.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_DISTSTRATEGIES_H
#define CLEAVE_TRANSFORMS_DISTSTRATEGIES_H

#include "cleave/Dialect/Dist/IR/DistOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

namespace cleave::dist {

/// A dimension of a parameter.
struct ParamDim {
  llvm::StringRef param;
  int64_t dim;
  bool operator==(const ParamDim &o) const {
    return param == o.param && dim == o.dim;
  }
};

/// The parameter dimension that dimension `d` of `v` is: through reads,
/// casts, transposes, size-1 reshapes and slices that keep `d` whole.
std::optional<ParamDim> traceToParam(mlir::Value v, int64_t d);

/// Splits the batch dimension of every tensor argument of every function
/// on `axis` (`n` devices): dimension 0, or 1 in a training step with
/// `accumulate` > 1. The axis goes among the axes already splitting the
/// batch in the mesh's order (major to minor), so that the layout does not
/// depend on the order the strategies run in. A layout the user wrote is
/// kept; a batch the axis does not divide is an error naming the argument.
mlir::LogicalResult splitBatch(mlir::ModuleOp module, MeshOp mesh,
                               llvm::StringRef axis, int64_t n,
                               mlir::StringAttr origin);

/// Splits the sequence dimension, the one after the batch, of every tensor
/// argument whose size there is `sequence` on `axis`, as splitBatch splits
/// the batch (the same order, the same errors).
mlir::LogicalResult splitSequence(mlir::ModuleOp module, MeshOp mesh,
                                  llvm::StringRef axis, int64_t n,
                                  int64_t sequence, mlir::StringAttr origin);

/// Gives the optimizer state of each parameter in `shardings` (Adam's
/// moments, SGD's momentum: the state the updates read beside it) the
/// parameter's sharding.
void shareWithState(mlir::ModuleOp module,
                    const llvm::StringMap<ShardingAttr> &shardings);

} // namespace cleave::dist

#endif // CLEAVE_TRANSFORMS_DISTSTRATEGIES_H
