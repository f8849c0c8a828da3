//===- OnnxLibrary.h - The ONNX library's checker, converter, inference -*-===//
//
// What the importer takes from libonnx: the checker
// (onnx::checker::check_model) and the version converter
// (onnx::version_conversion::ConvertVersion) before the import, shape
// inference (onnx::shape_inference::InferShapes) before the converter and
// after the import. libonnx reports problems by throwing;
// OnnxLibrary.cpp, the one file of the importer built with exceptions, turns
// each into a LibraryError so that nothing is thrown past it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IMPORT_LIB_ONNXLIBRARY_H
#define CLEAVE_IMPORT_LIB_ONNXLIBRARY_H

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>

namespace cleave::onnx_import {

/// A problem libonnx reported: its message on one line without a trailing
/// period, and the node it names (empty when it names none).
struct LibraryError {
  std::string message;
  std::string nodeName;
  std::string nodeOpType;
};

/// The newest opset of the default domain that the linked libonnx knows.
int64_t libraryMaxOpset();

/// The newest IR version that the linked libonnx knows.
int64_t libraryIrVersion();

/// onnx::checker::check_model with `modelDir` as the folder that external
/// data locations are relative to (as the path overload of check_model
/// sets it).
std::optional<LibraryError> checkModel(const onnx::ModelProto &model,
                                       const std::string &modelDir);

/// onnx::version_conversion::ConvertVersion of the default domain to
/// `targetOpset`, into `converted`.
std::optional<LibraryError> convertVersion(const onnx::ModelProto &model,
                                           int64_t targetOpset,
                                           onnx::ModelProto &converted);

/// onnx::shape_inference::InferShapes: fills the graph's value_info and the
/// types of its outputs. Node-level inference failures are left to the
/// importer; a contradiction with a type the model declares is an error.
std::optional<LibraryError> inferShapes(onnx::ModelProto &model);

} // namespace cleave::onnx_import

#endif // CLEAVE_IMPORT_LIB_ONNXLIBRARY_H
