//===- cleave-translate.cpp - Cleave's mlir-translate -------------------===//
//
// Translations into and out of Cleave's IR:
//   cleave-translate --import-onnx model.onnx [--input-shape idx=2x8] -o out.mlir
//
//===----------------------------------------------------------------------===//

#include "cleave/Import/OnnxImporter.h"
#include "cleave/Tools/ToolVersion.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  cleave::setToolVersion("cleave-translate");
  cleave::registerOnnxImportTranslation();
  return mlir::failed(mlir::mlirTranslateMain(
             argc, argv, "Cleave translation driver (ONNX import)\n"))
             ? 1
             : 0;
}
