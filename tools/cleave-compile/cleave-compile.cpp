//===- cleave-compile.cpp - model -> native program ---------------------===//
//
// Compiles an ONNX model or graph-dialect IR ahead of time into a native
// executable: import, raise, plan memory, lower to runtime calls, translate
// to LLVM IR, optimize, emit an object in-process, and link it with the
// runtime library: the CPU backend, or with --target cuda the CUDA backend
// (when this cleave-compile was built with it; the object is the same).
// The pass pipeline and its flags are the library's (cleave/Transforms/
// Pipeline.h); this file adds the input, the output and the link.
//
//   cleave-compile model.onnx -o prog [--emit=mlir|llvm|obj|exe]
//                             [--target cpu|cuda]
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Import/OnnxImporter.h"
#include "cleave/Tools/ToolVersion.h"
#include "cleave/Transforms/MemoryPlan.h"
#include "cleave/Transforms/Pipeline.h"

#include "CompileConfig.h"
#include "PlanFile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("cleave-compile options");

static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("<model.onnx | model.mlir>"),
                                      cl::cat(category));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("path"), cl::init(""),
                                       cl::cat(category));
enum class Emit { Mlir, Llvm, Obj, Exe };
static cl::opt<Emit> emit(
    "emit", cl::desc("What to produce (default: an executable)"),
    cl::values(clEnumValN(Emit::Mlir, "mlir", "the LLVM-dialect module"),
               clEnumValN(Emit::Llvm, "llvm", "LLVM IR"),
               clEnumValN(Emit::Obj, "obj", "an object file"),
               clEnumValN(Emit::Exe, "exe", "a linked executable")),
    cl::init(Emit::Exe), cl::cat(category));
static cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("Static shape of an ONNX input, NAME=DxD (repeatable)"),
                cl::cat(category));
static cl::opt<bool> printPipeline("print-pipeline",
                                   cl::desc("Print the pass pipeline and exit"),
                                   cl::cat(category));
static cl::opt<bool> verbose("v", cl::desc("Report the time of each pass"),
                             cl::cat(category));
// The runtime backends this cleave-compile can link (CompileConfig.h).
#ifdef CLEAVE_HAVE_CUDA
#define CLEAVE_TARGETS "cpu, cuda"
#else
#define CLEAVE_TARGETS "cpu"
#endif
static cl::opt<std::string> target(
    "target",
    cl::desc("Runtime backend to link: " CLEAVE_TARGETS " (default cpu)"),
    cl::value_desc("backend"), cl::init("cpu"), cl::cat(category));

static cl::OptionCategory trainCategory(
    "training options",
    "--train compiles one training step: the program takes the model's "
    "inputs and the loss's target (`labels` or `targets`), returns the loss "
    "and updates the parameters in place; its main trains (see ./prog "
    "--help). --loss without --train compiles the gradients instead: the "
    "program returns the loss and grad.<param> of each parameter. Defaults "
    "are PyTorch's.");

static cl::OptionCategory distCategory(
    "distribution options",
    "--mesh compiles one device's program of a mesh: the binary runs under "
    "mpirun with one rank per device (mpirun -np 4 ./train ... for "
    "--mesh dp=2,tp=2), takes the same data flags as on one device and "
    "trains exactly as one device would (see docs/distributed.md).");

static cl::opt<std::string> planFile(
    "plan",
    cl::desc("Take the mesh, the ZeRO stage, sequence parallelism, the "
             "precision and the pipeline (microbatches, schedule, virtual "
             "stages, each stage's layers) from a plan file of cleave-plan "
             "--out (docs/planner.md)"),
    cl::value_desc("plan.json"), cl::cat(distCategory));

/// The pipeline's flags (--train, --lr, --precision, --no-fusion...), bound
/// into the command line in main.
static cl::opt<bool> noEval(
    "no-eval",
    cl::desc("With --train: leave out the evaluation program (the step's "
             "forward pass and loss, which the training binary's --eval-* "
             "flags run); compiles faster"),
    cl::cat(trainCategory));

static cleave::CleavePipelineOptions pipelineOptions;

namespace {
int fail(const llvm::Twine &message) {
  llvm::errs() << "cleave-compile: error: " << message << "\n";
  return 1;
}

/// Reads the input as ONNX (by extension) or MLIR.
OwningOpRef<ModuleOp> loadInput(MLIRContext &ctx, llvm::SourceMgr &sourceMgr) {
  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file) {
    llvm::errs() << "cleave-compile: error: " << error << "\n";
    return {};
  }
  if (llvm::StringRef(inputFile).ends_with(".onnx")) {
    cleave::OnnxImportOptions options;
    options.fileName = inputFile;
    llvm::SmallString<256> dir(inputFile);
    llvm::sys::path::remove_filename(dir);
    options.baseDir = std::string(dir.empty() ? "." : dir.str());
    for (const std::string &spec : inputShapes) {
      std::string err = cleave::parseInputShape(spec, options);
      if (!err.empty()) {
        llvm::errs() << "cleave-compile: error: " << err << "\n";
        return {};
      }
    }
    return cleave::importOnnxModel(file->getBuffer(), options, &ctx);
  }
  if (!inputShapes.empty()) {
    llvm::errs() << "cleave-compile: error: --input-shape applies to ONNX "
                    "models only\n";
    return {};
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &ctx);
}

static cl::opt<unsigned> llvmOptLevel(
    "llvm-opt-level",
    cl::desc("LLVM optimization level of the program's code, 0-3 (default "
             "2); the kernels are the runtime's, compiled already"),
    cl::init(2), cl::cat(category));

/// Translates, optimizes (-O<llvm-opt-level>) and emits an object for the
/// host.
LogicalResult emitNative(ModuleOp module, llvm::StringRef path) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "cleave_program");
  if (!llvmModule)
    return failure();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *llvmTarget =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!llvmTarget) {
    llvm::errs() << "cleave-compile: error: " << error << "\n";
    return failure();
  }
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(llvmTarget->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), "", options, llvm::Reloc::PIC_));
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(triple);
  if (llvmOptLevel > 3) {
    llvm::errs() << "cleave-compile: error: --llvm-opt-level must be 0-3\n";
    return failure();
  }
  machine->setOptLevel(llvmOptLevel == 0   ? llvm::CodeGenOptLevel::None
                       : llvmOptLevel == 1 ? llvm::CodeGenOptLevel::Less
                                           : llvm::CodeGenOptLevel::Default);
  if (llvm::Error err = makeOptimizingTransformer(llvmOptLevel, 0,
                                                  machine.get())(
          llvmModule.get())) {
    llvm::errs() << "cleave-compile: error: " << toString(std::move(err))
                 << "\n";
    return failure();
  }
  if (emit == Emit::Llvm) {
    std::string errorMessage;
    auto out = openOutputFile(path, &errorMessage);
    if (!out)
      return failure();
    llvmModule->print(out->os(), nullptr);
    out->keep();
    return success();
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "cleave-compile: error: cannot write '" << path
                 << "': " << ec.message() << "\n";
    return failure();
  }
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile)) {
    llvm::errs() << "cleave-compile: error: the target cannot emit objects\n";
    return failure();
  }
  codegen.run(*llvmModule);
  return success();
}

/// The link line of --target (cpu or, when built, cuda) after the object.
llvm::StringRef runtimeLinkLine() {
#ifdef CLEAVE_HAVE_CUDA
  if (target == "cuda")
    return CLEAVE_RUNTIME_LINK_CUDA;
#endif
  return CLEAVE_RUNTIME_LINK_CPU;
}

/// Checks --target: "" when this cleave-compile links it, else the error.
std::string checkTarget() {
  if (target == "cpu")
    return "";
  if (target == "cuda") {
#ifdef CLEAVE_HAVE_CUDA
    return "";
#else
    return "--target cuda: this cleave-compile was built without the CUDA "
           "backend (CLEAVE_ENABLE_CUDA=OFF)";
#endif
  }
  return "unknown --target '" + target + "' (available: " CLEAVE_TARGETS ")";
}

/// The communication engine of --target, for a partitioned program.
llvm::StringRef commLinkLine() {
#ifdef CLEAVE_COMM_LINK_CUDA
  if (target == "cuda")
    return CLEAVE_COMM_LINK_CUDA;
#endif
  return CLEAVE_COMM_LINK_CPU;
}

/// Links `object` with the runtime into `exe`; a partitioned program
/// (`distributed`: it refers to the engine's cleave_comm_engine) with the
/// communication engine and MPI as well.
int linkExecutable(llvm::StringRef object, llvm::StringRef exe,
                   bool distributed) {
  llvm::SmallVector<std::string> args = {CLEAVE_LINKER, object.str(), "-o",
                                         exe.str()};
  auto append = [&](llvm::StringRef line) {
    for (llvm::StringRef lib : llvm::split(line, ';'))
      if (!lib.empty())
        args.push_back(lib.str());
  };
  if (distributed)
    append(commLinkLine());
  append(runtimeLinkLine());
  if (distributed)
    append(CLEAVE_MPI_LINK);
  llvm::SmallVector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(args[0], argRefs, std::nullopt, {}, 0, 0,
                                     &error);
  if (rc != 0)
    return fail("linking '" + exe + "' failed" +
                (error.empty() ? "" : ": " + error));
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  cleave::setToolVersion("cleave-compile");
  llvm::InitLLVM initLLVM(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  pipelineOptions.addToCommandLine(
      [](llvm::StringRef flag) -> cl::OptionCategory & {
        if (flag == "mesh" || flag == "zero" || flag == "bucket-bytes" ||
            flag == "dist-explain" || flag == "sp" || flag == "cp-form" ||
            flag == "cp-layout")
          return distCategory;
        return flag == "no-fusion" || flag == "split-projections" ||
                       flag == "no-profile-marks" || flag == "run-chunk-size"
                   ? category
                   : trainCategory;
      });
  cl::HideUnrelatedOptions({&category, &trainCategory, &distCategory});
  cl::ParseCommandLineOptions(
      argc, argv,
      "Cleave compiler: compiles an ONNX model or graph IR into a native "
      "program.\n\n"
      "  cleave-compile model.onnx -o prog\n"
      "  ./prog --input x=x.npy --output-dir out/\n\n"
      "  cleave-compile model.onnx --train --optimizer adamw --lr 1e-3 -o "
      "train\n"
      "  ./train --inputs x.npy --targets labels.npy --steps 100\n\n"
      "Targets (--target): " CLEAVE_TARGETS ".\n");

  if (std::string err = checkTarget(); !err.empty())
    return fail(err);
  if (!planFile.empty())
    if (std::string err = applyPlanFile(planFile, pipelineOptions);
        !err.empty())
      return fail(err);
  if (failed(pipelineOptions.verify([](const llvm::Twine &message) {
        fail(message);
        return failure();
      })))
    return 1;

  DialectRegistry registry;
  registry.insert<cleave::graph::GraphDialect, func::FuncDialect,
                  LLVM::LLVMDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();

  PassManager pm(&ctx);
  cleave::buildCleavePipeline(pm, pipelineOptions);
  if (printPipeline) {
    pm.printAsTextualPipeline(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }

  if (inputFile.empty())
    return fail("no input model (see --help)");

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &ctx);
  DefaultTimingManager timing;
  timing.setEnabled(verbose);
  TimingScope root = timing.getRootScope();

  TimingScope loadTiming = root.nest("load input");
  OwningOpRef<ModuleOp> module = loadInput(ctx, sourceMgr);
  if (!module)
    return 1;
  if (llvm::StringRef(inputFile).ends_with(".onnx")) {
    // The trainer exports trained weights into a copy of this model.
    llvm::SmallString<256> path(inputFile);
    llvm::sys::fs::make_absolute(path);
    (*module)->setAttr(cleave::kSourceModelAttr,
                       StringAttr::get(&ctx, path));
  }
  loadTiming.stop();

  if (failed(applyPassManagerCLOptions(pm)))
    return 1;
  // The evaluation program is compiled from the same model by a pipeline of
  // its own, then linked into the training program.
  OwningOpRef<ModuleOp> evalModule;
  if (!noEval && cleave::hasEvalProgram(pipelineOptions))
    evalModule = module->clone();
  pm.enableTiming(root);
  if (failed(pm.run(*module)))
    return 1;
  if (evalModule) {
    TimingScope evalTiming = root.nest("evaluation program");
    PassManager evalPm(&ctx);
    cleave::buildCleaveEvalPipeline(evalPm, pipelineOptions);
    if (failed(applyPassManagerCLOptions(evalPm)))
      return 1;
    evalPm.enableTiming(evalTiming);
    if (failed(evalPm.run(*evalModule)))
      return 1;
    (*evalModule)->setAttr(cleave::kEvalProgramAttr,
                           UnitAttr::get(&ctx));
    module->push_back(evalModule.release());
    PassManager link(&ctx);
    link.addPass(cleave::createLinkEvalPass());
    if (failed(link.run(*module)))
      return 1;
  }

  std::string out = outputFile;
  if (out.empty()) {
    llvm::SmallString<128> stem(llvm::sys::path::stem(inputFile));
    static const char *suffix[] = {".ll.mlir", ".ll", ".o", ""};
    out = (stem + suffix[static_cast<int>(emit.getValue())]).str();
  }
  if (emit == Emit::Mlir) {
    std::string error;
    auto file = openOutputFile(out, &error);
    if (!file)
      return fail(error);
    module->print(file->os());
    file->keep();
    return 0;
  }
  // The lowering refers to the engine's table when the program has a mesh.
  bool distributed = module->lookupSymbol("cleave_comm_engine") != nullptr;
  TimingScope nativeTiming = root.nest("translate, optimize, emit object");
  std::string object = out;
  llvm::SmallString<128> temp;
  if (emit == Emit::Exe) {
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("cleave", "o", temp))
      return fail("cannot create a temporary object: " + ec.message());
    object = std::string(temp);
  }
  if (failed(emitNative(*module, object)))
    return 1;
  nativeTiming.stop();
  if (emit != Emit::Exe)
    return 0;
  TimingScope linkTiming = root.nest("link");
  int rc = linkExecutable(object, out, distributed);
  llvm::sys::fs::remove(object);
  return rc;
}
