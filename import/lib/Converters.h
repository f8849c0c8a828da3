//===- Converters.h - the ONNX op converters, by file ------------*- C++ -*-===//
//
// Helpers shared by the converter files and the functions that add each
// file's converters to the table.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IMPORT_CONVERTERS_H
#define CLEAVE_IMPORT_CONVERTERS_H

#include "Importer.h"

namespace cleave::onnx_import {

inline mlir::RankedTensorType withShape(mlir::RankedTensorType t,
                                        llvm::ArrayRef<int64_t> shape) {
  return mlir::RankedTensorType::get(shape, t.getElementType());
}

/// Sets output 0 to `where(c, x, y)`.
mlir::LogicalResult emitWhere(NodeContext &n, mlir::Value c, mlir::Value x,
                              mlir::Value y);

void addElementwiseConverters(llvm::StringMap<OpConverter> &converters);
void addShapeConverters(llvm::StringMap<OpConverter> &converters);

} // namespace cleave::onnx_import

#endif // CLEAVE_IMPORT_CONVERTERS_H
