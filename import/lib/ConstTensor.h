//===- ConstTensor.h - tensors known at import time -------------*- C++ -*-===//
//
// Small tensors whose values the importer knows: integer initializers,
// Constant nodes, and everything computed from them (the Shape -> Gather ->
// Concat -> Reshape arithmetic that exporters emit). Folding them at import
// keeps every shape static; they become `graph.constant` only when a real op
// consumes them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IMPORT_CONSTTENSOR_H
#define CLEAVE_IMPORT_CONSTTENSOR_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <vector>

namespace cleave::onnx_import {

/// A tensor with known values. Integers are held as doubles (exact below
/// 2^53; the int64 extremes used as "to the end" in Slice are clamped back).
struct ConstTensor {
  mlir::Type elementType;
  llvm::SmallVector<int64_t> shape;
  std::vector<double> values;

  int64_t size() const { return static_cast<int64_t>(values.size()); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool isInteger() const { return elementType.isInteger(); }
  /// The values as integers (truncated toward zero, clamped to int64).
  llvm::SmallVector<int64_t> asInts() const;
  mlir::RankedTensorType getType() const {
    return mlir::RankedTensorType::get(shape, elementType);
  }
  /// The elements attribute of a `graph.constant`.
  mlir::DenseElementsAttr toAttr() const;
  /// Rounds values to what `elementType` can hold (ints truncate, i1 is 0/1).
  void normalize();

  static ConstTensor scalarLike(mlir::Type elementType, double v);
  static ConstTensor fromInts(mlir::Type elementType,
                              llvm::ArrayRef<int64_t> shape,
                              llvm::ArrayRef<int64_t> values);
};

/// The most elements a tensor of the imported model may have (2^40), and
/// the most a tensor folded at import may have (2^26): past these, shapes
/// from a corrupt or hostile file are errors rather than overflow or a huge
/// allocation.
constexpr int64_t kMaxElements = int64_t(1) << 40;
constexpr int64_t kMaxFoldedElements = int64_t(1) << 26;

/// The number of elements of `shape`, or nullopt when a dimension is
/// negative or the product exceeds `limit`.
std::optional<int64_t> elementCount(llvm::ArrayRef<int64_t> shape,
                                    int64_t limit = kMaxElements);

/// Row-major strides of `shape`.
llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape);

/// NumPy broadcasting of shapes; false when incompatible.
bool broadcastShape(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b,
                    llvm::SmallVectorImpl<int64_t> &out);

/// Elementwise over broadcast operands; the result has `resultType`.
ConstTensor foldElementwise(llvm::ArrayRef<const ConstTensor *> operands,
                            mlir::Type resultType,
                            llvm::function_ref<double(llvm::ArrayRef<double>)> fn);

/// out[i...] = in[perm...].
ConstTensor foldTranspose(const ConstTensor &in, llvm::ArrayRef<int64_t> perm);

/// Strided box with normalized, in-range starts and positive steps.
ConstTensor foldSlice(const ConstTensor &in, llvm::ArrayRef<int64_t> start,
                      llvm::ArrayRef<int64_t> limit,
                      llvm::ArrayRef<int64_t> strides);

/// ONNX Gather with non-negative indices.
ConstTensor foldGather(const ConstTensor &data, const ConstTensor &indices,
                       int64_t axis);

/// ONNX Concat.
ConstTensor foldConcat(llvm::ArrayRef<const ConstTensor *> inputs,
                       int64_t axis);

} // namespace cleave::onnx_import

#endif // CLEAVE_IMPORT_CONSTTENSOR_H
