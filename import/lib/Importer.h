//===- Importer.h - ONNX import state and per-node context ------*- C++ -*-===//
//
// Shared between the import driver (OnnxImporter.cpp) and the per-op
// converters (OnnxOps.cpp): the value table, and the view of one node that a
// converter works on.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IMPORT_IMPORTER_H
#define CLEAVE_IMPORT_IMPORTER_H

#include "ConstTensor.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>

namespace cleave::onnx_import {

/// A value of the ONNX graph: IR, a parameter read on first use, a known
/// constant materialized on first use, or several of these.
struct ImportedValue {
  mlir::Value value;
  std::optional<ConstTensor> constant;
  /// Non-empty for an initializer that became a `graph.param`.
  std::string param;
  mlir::RankedTensorType paramType;
};

/// The name of an ONNX element type (FLOAT, INT64, ...).
std::string onnxTypeName(int32_t onnxType);

/// The MLIR element type of an ONNX tensor element type, or null.
mlir::Type convertElementType(int32_t onnxType, mlir::MLIRContext *ctx);

class Importer;

/// One node under conversion.
class NodeContext {
public:
  NodeContext(Importer &importer, const onnx::NodeProto &node,
              std::string name, mlir::Location loc, int64_t opset);

  const onnx::NodeProto &node;
  /// The node's name, or `<OpType>_<index>` for unnamed nodes.
  std::string name;
  mlir::Location loc;
  int64_t opset;
  mlir::OpBuilder &b;
  mlir::MLIRContext *ctx;

  /// An error prefixed with the node's name and op type.
  mlir::InFlightDiagnostic error();

  // Attributes.
  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t getInt(llvm::StringRef name, int64_t dflt) const;
  float getFloat(llvm::StringRef name, float dflt) const;
  std::optional<llvm::SmallVector<int64_t>>
  getInts(llvm::StringRef name) const;

  // Inputs; optional inputs may be absent (empty name).
  unsigned numInputs() const { return node.input_size(); }
  bool hasInput(unsigned i) const;
  /// The IR value of input i, materializing constants and parameters.
  mlir::Value value(unsigned i);
  mlir::RankedTensorType type(unsigned i);
  /// The known values of input i, or null.
  const ConstTensor *constant(unsigned i);
  bool allInputsConstant();
  /// The integer values of input i, which must be known at import time.
  mlir::FailureOr<llvm::SmallVector<int64_t>> constInts(unsigned i,
                                                        llvm::StringRef what);

  // Outputs.
  unsigned numOutputs() const { return node.output_size(); }
  /// True when output i exists and something reads it.
  bool outputUsed(unsigned i) const;
  void set(unsigned i, mlir::Value v);
  void set(unsigned i, ConstTensor t);
  /// Output `out` is input `in` (Identity, Dropout, no-op reshapes).
  void forward(unsigned out, unsigned in);

  /// Creates a graph op whose result types are inferred, or reports the
  /// inference error at the node and returns null (never aborts).
  template <typename OpTy>
  OpTy create(mlir::ValueRange operands,
              llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    llvm::SmallVector<mlir::Type> types;
    mlir::DictionaryAttr dict = b.getDictionaryAttr(attrs);
    typename OpTy::Properties props{};
    if constexpr (!std::is_same_v<typename OpTy::Properties,
                                  mlir::EmptyProperties>) {
      if (mlir::failed(OpTy::setPropertiesFromAttr(
              props, dict, [&]() { return error(); })))
        return {};
    }
    typename OpTy::Adaptor adaptor(operands, dict, props, {});
    std::string message;
    {
      // Re-emit the op's own type error with the node's name in front.
      mlir::ScopedDiagnosticHandler capture(ctx, [&](mlir::Diagnostic &d) {
        if (message.empty())
          message = d.str();
        return mlir::success();
      });
      if (mlir::succeeded(OpTy::inferReturnTypes(ctx, loc, adaptor, types)))
        return OpTy::create(b, loc, types, operands, attrs);
    }
    error() << message;
    return {};
  }

  /// Verifies the ops this node created after `last` (all of the block when
  /// null); a failure is reported with the node's name.
  mlir::LogicalResult verifyCreated(mlir::Block *block, mlir::Operation *last);

  /// Normalizes a possibly negative axis for rank `rank`; errors when out of
  /// range.
  mlir::FailureOr<int64_t> axis(int64_t a, int64_t rank,
                                llvm::StringRef what = "axis");

private:
  Importer &importer;
  ImportedValue *input(unsigned i);
};

using Converter = mlir::LogicalResult (*)(NodeContext &);

struct OpConverter {
  Converter convert;
  /// Inputs that must be present (non-empty names); the rest are optional.
  unsigned requiredInputs;
};

/// The converter of each supported ONNX op type (default domain).
const llvm::StringMap<OpConverter> &getConverters();

class Importer {
public:
  Importer(mlir::MLIRContext *ctx, mlir::ModuleOp module, mlir::OpBuilder &b)
      : ctx(ctx), module(module), b(b) {}

  mlir::MLIRContext *ctx;
  mlir::ModuleOp module;
  mlir::OpBuilder &b;
  llvm::StringMap<ImportedValue> values;
  /// How many nodes read each value (to reject unsupported optional outputs).
  llvm::StringMap<unsigned> useCounts;
  /// The one read of each parameter, shared by every use (tied weights).
  llvm::StringMap<mlir::Value> paramReads;

  mlir::Value materialize(ImportedValue &v, mlir::Location loc);
};

} // namespace cleave::onnx_import

#endif // CLEAVE_IMPORT_IMPORTER_H
