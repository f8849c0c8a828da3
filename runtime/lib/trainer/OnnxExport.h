//===- OnnxExport.h - trained parameters into the ONNX model ---*- C++ -*-===//
//
// --export-onnx: the ONNX model the program was compiled from, with every
// initializer that is a model parameter replaced by its trained value.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINER_ONNXEXPORT_H
#define CLEAVE_RUNTIME_TRAINER_ONNXEXPORT_H

#include "cleave/Runtime/cleave_rt.h"

#include <functional>
#include <string>
#include <vector>

namespace cleave::rt::trainer {

class Arena;

/// The source model's path as the exporter will open it; fails when the
/// program has none or the file does not exist (checked before training).
std::string onnxSourceModel();

/// Writes `out` (atomically): the source model with each initializer named
/// like one of params[0, num_model_params) replaced by the value in
/// `arena`, stored inline as raw_data in the initializer's own data type;
/// every other initializer held as external data is made inline too, so
/// that the file stands alone. Every model parameter must be an initializer
/// with its element count.
void exportOnnx(const std::string &out, const Arena &arena);
/// The same with each parameter's global value from `globalValue` (the
/// bytes of the global tensor), as a partitioned program's rank 0 reads
/// them from a checkpoint.
void exportOnnx(const std::string &out,
                const std::function<void(const cleave_named_tensor &,
                                         std::vector<char> &)> &globalValue);

} // namespace cleave::rt::trainer

#endif // CLEAVE_RUNTIME_TRAINER_ONNXEXPORT_H
