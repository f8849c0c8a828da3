//===- RaiseMoe.h - dense mixtures of experts -> routed experts -*- C++ -*-===//
//
// Part of -cleave-raise (Raise.cpp): the mixture-of-experts rewrite, which
// needs options and can fail with an error, so it runs as a walk after the
// greedy patterns rather than as one of them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_RAISEMOE_H
#define CLEAVE_TRANSFORMS_RAISEMOE_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>

namespace cleave {

struct RaiseMoeOptions {
  /// Slots per expert and group: ceil(f * k * group / E); 0 is dropless.
  double capacityFactor = 0.0;
  /// Tokens per routing group; 0 groups each sequence's tokens.
  int64_t groupSize = 0;
};

/// Rewrites every dense mixture of experts under `root` (see the pass's
/// description) into router_topk, moe_dispatch, expert_matmul and
/// moe_combine, and erases the dense ops left dead. Fails, with an error on
/// the mixture, when the options do not fit it.
mlir::LogicalResult raiseMixturesOfExperts(mlir::Operation *root,
                                           const RaiseMoeOptions &options);

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_RAISEMOE_H
