//===- GraphBuilders.h - small graph IR constructions passes share -*- C++ -*-===//
//
// Constructions that more than one pass writes the same way.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_GRAPHBUILDERS_H
#define CLEAVE_TRANSFORMS_GRAPHBUILDERS_H

#include "cleave/Dialect/Graph/IR/GraphOps.h"

namespace cleave {

/// Entry `i` of the leading dimension of `v` (`[n, d...]`), as `[d...]`: a
/// slice of one row followed by a reshape that drops the dimension (a
/// microbatch of accumulated inputs, a block of a split projection).
inline mlir::Value buildLeadingEntry(mlir::OpBuilder &b, mlir::Location loc,
                                     mlir::Value v, int64_t i) {
  auto type = llvm::cast<mlir::RankedTensorType>(v.getType());
  llvm::SmallVector<int64_t> start(type.getRank(), 0);
  llvm::SmallVector<int64_t> limit(type.getShape());
  start[0] = i;
  limit[0] = i + 1;
  llvm::SmallVector<int64_t> one(type.getShape());
  one[0] = 1;
  mlir::Value row = graph::SliceOp::create(
      b, loc, type.clone(one), v, b.getDenseI64ArrayAttr(start),
      b.getDenseI64ArrayAttr(limit), mlir::DenseI64ArrayAttr());
  return graph::ReshapeOp::create(
      b, loc, type.clone(type.getShape().drop_front()), row);
}

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_GRAPHBUILDERS_H
