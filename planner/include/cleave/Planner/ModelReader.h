//===- ModelReader.h - a model file as a planner model ----------*- C++ -*-===//
//
// Reads an ONNX model (through the ONNX importer) or a `graph` MLIR file,
// lists its parameters with exact sizes and roles, and infers the transformer
// shapes it can from the graph after `-cleave-raise`:
//   layers, heads, kv heads, sequence   the `graph.attention` ops
//                                       ([b, heads, s, d] operands)
//   vocabulary, hidden                  the token embedding: a `graph.gather`
//                                       of a parameter by a function argument
//   learned positions                   another gathered parameter
//   FFN size, gated MLP                 the `graph.gelu` / `graph.silu` result
//   experts, top-k                      the router's `graph.topk`
//   tied embeddings                     no other [vocab, hidden] parameter
//   batch                               the token input's first dimension
// What is not inferable (a graph without attention, such as an MLP) stays 0
// and must be given by flags. The header is plain C++; the implementation
// is the one part of the planner that needs MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_MODELREADER_H
#define CLEAVE_PLANNER_MODELREADER_H

#include "cleave/Planner/Model.h"

#include <string>
#include <utility>
#include <vector>

namespace cleave::planner {

struct ModelFile {
  /// Inferred shapes (0 where unknown); `measured` holds the exact counts.
  ModelSpec spec;
  /// Every `graph.param`, in declaration order.
  std::vector<ParamTensor> params;
  int64_t batch = 0; ///< batch of the token input, 0 if unknown
  /// The element type of the parameters: "f32", "bf16", "f16" or "mixed".
  std::string paramType;
  /// How each shape was inferred, for `--model-summary`.
  std::vector<std::string> notes;
};

struct ReadOptions {
  /// `name=2x128` static shapes for symbolic ONNX inputs.
  std::vector<std::string> inputShapes;
};

/// Reads `path` (`.onnx`, or MLIR text/bytecode otherwise). On failure
/// returns false with the diagnostics in `error`, as the lines to print
/// (`file:line:col: error: ...` where a location is known).
bool readModelFile(const std::string &path, const ReadOptions &options,
                   ModelFile &out, std::string &error);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_MODELREADER_H
