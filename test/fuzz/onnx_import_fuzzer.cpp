//===- onnx_import_fuzzer.cpp - libFuzzer target of the ONNX importer ---===//
//
// Feeds arbitrary bytes to the importer (libonnx's checker, shape inference
// and version converter, then the node converters): it must report an error
// or produce verified IR, never crash, hang or hit undefined behaviour. Built
// only with clang (-DCLEAVE_ENABLE_FUZZER=ON); test/fuzz/run.sh builds and
// runs it briefly.
//
//===----------------------------------------------------------------------===//

#include "cleave/Import/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  // Errors are the expected outcome for most inputs; keep them quiet.
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  cleave::OnnxImportOptions options;
  options.fileName = "fuzz.onnx";
  options.baseDir = "/nonexistent-fuzz-dir";
  (void)cleave::importOnnxModel(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), options,
      &context);
  return 0;
}
