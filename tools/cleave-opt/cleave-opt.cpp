//===- cleave-opt.cpp - Cleave's mlir-opt -------------------------------===//
//
// Runs any pipeline of Cleave and upstream passes over `graph`/`dist` IR, as
// mlir-opt does, and cleave-compile's as --cleave-pipeline='...'. Only the
// upstream dialects and passes Cleave uses are registered, which keeps the
// tool small.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Cleave/IR/CleaveDialect.h"
#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Tools/ToolVersion.h"
#include "cleave/Transforms/Passes.h"
#include "cleave/Transforms/Pipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  cleave::setToolVersion("cleave-opt");
  mlir::DialectRegistry registry;
  // The graph dialect loads the cleave dialect (the cleave.* metadata);
  // registered too, so that a #cleave attribute parses before any graph op.
  registry.insert<cleave::CleaveDialect, cleave::graph::GraphDialect,
                  cleave::dist::DistDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect>();
  mlir::func::registerInlinerExtension(registry);

  // Upstream passes that Cleave pipelines use.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerInlinerPass();
  mlir::registerSymbolDCEPass();
  mlir::registerSCCPPass();

  cleave::registerCleavePasses();
  cleave::registerCleavePipelines();

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "Cleave optimizer driver: graph and dist IR passes\n",
      registry));
}
