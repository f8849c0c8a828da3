//===- TensorReader.h - ONNX tensors as constants, parameters -*- C++ -*-===//
//-*-===//
//
// Reads the initializers and Constant values of an ONNX graph: their
// element types and shapes, their bytes (raw, typed or external data,
// confined to the model's folder), as known constants or as the initial
// values of parameters. OnnxTensors.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IMPORT_LIB_TENSORREADER_H
#define CLEAVE_IMPORT_LIB_TENSORREADER_H

#include "Importer.h"

#include "cleave/Import/OnnxImporter.h"

namespace cleave::onnx_import {

/// Reads initializers and Constant values: into a ConstTensor (integers,
/// scalars) or into a parameter attribute (float weights).
class TensorReader {
public:
  TensorReader(mlir::MLIRContext *ctx, const cleave::OnnxImportOptions &options)
      : ctx(ctx), options(options) {}

  /// The element type and shape; errors name the tensor.
  mlir::FailureOr<mlir::RankedTensorType>
  typeOf(const onnx::TensorProto &t, mlir::Location loc, llvm::StringRef what);

  /// Where an external initializer's bytes are, checked against the file.
  /// The location is confined to the model's folder, as ONNX Runtime and
  /// the onnx package confine it (CVE-2022-25882, CVE-2024-27318): a
  /// relative path without `..` whose real path, symbolic links resolved,
  /// is a regular file inside the folder's. The offset and length are
  /// decimal integers >= 0 that stay inside the file.
  struct ExternalRef {
    std::string path;
    int64_t offset = 0, length = -1;
  };
  mlir::FailureOr<ExternalRef> resolveExternal(const onnx::TensorProto &t,
                                               mlir::Location loc);

  /// The element bytes of a tensor in memory order (raw, typed or external).
  mlir::FailureOr<std::string> bytesOf(const onnx::TensorProto &t,
                                       mlir::RankedTensorType type,
                                       mlir::Location loc);

  /// All values of a tensor as a ConstTensor.
  mlir::FailureOr<ConstTensor> readConstant(const onnx::TensorProto &t,
                                            mlir::Location loc);

  /// The initial value of a float parameter.
  mlir::FailureOr<mlir::Attribute> readParameter(const onnx::TensorProto &t,
                                                 mlir::RankedTensorType type,
                                                 mlir::Location loc);

private:
  mlir::MLIRContext *ctx;
  const cleave::OnnxImportOptions &options;
};

} // namespace cleave::onnx_import

#endif // CLEAVE_IMPORT_LIB_TENSORREADER_H
