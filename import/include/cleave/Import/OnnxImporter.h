//===- OnnxImporter.h - ONNX models into the graph dialect ------*- C++ -*-===//
//
// The front door: reads an ONNX ModelProto (with external data) and builds a
// module of `graph.param`s and one `func.func @forward` in the graph dialect
// with static shapes. Shape arithmetic is folded at import.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IMPORT_ONNXIMPORTER_H
#define CLEAVE_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace cleave {

struct OnnxImportOptions {
  /// Static shapes for model inputs, overriding or completing the model's
  /// (`--input-shape idx=2x8`).
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// The folder that external data paths are relative to (the model's).
  std::string baseDir;
  /// The name used for the model file in diagnostics.
  std::string fileName = "model.onnx";
};

/// Parses `--input-shape` values such as `idx=2x8` or `x=1x3x224x224`.
/// Returns an error message, or the empty string on success.
std::string parseInputShape(llvm::StringRef spec, OnnxImportOptions &options);

/// Imports the serialized ONNX model in `bytes`. On failure, reports an error
/// through the context's diagnostics and returns null.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxModel(llvm::StringRef bytes,
                                                  const OnnxImportOptions &options,
                                                  mlir::MLIRContext *context);

/// The ONNX op types the importer converts, sorted.
llvm::SmallVector<llvm::StringRef> getSupportedOnnxOps();

/// Registers the `--import-onnx` translation and its options with
/// mlir-translate's registry.
void registerOnnxImportTranslation();

} // namespace cleave

#endif // CLEAVE_IMPORT_ONNXIMPORTER_H
