//===- ModelReader.cpp - a model file as a planner model ----------------===//
//
// The one MLIR-dependent part of the planner: imports or parses the file,
// runs -cleave-raise so that attention, norms and activations are single
// ops, and reads shapes off those ops and the parameters they use.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/ModelReader.h"

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Import/OnnxImporter.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <map>

using namespace mlir;

namespace cleave::planner {

namespace {

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string typeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isBF16())
    return "bf16";
  if (t.isF16())
    return "f16";
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

/// The parameter `value` reads, or null.
graph::ReadParamOp readOf(Value value) {
  return value ? value.getDefiningOp<graph::ReadParamOp>() : nullptr;
}

/// The parameter behind `value` through views and casts, or null.
graph::ReadParamOp paramBehind(Value value) {
  while (value) {
    if (auto read = readOf(value))
      return read;
    Operation *def = value.getDefiningOp();
    if (!def || !isa<graph::TransposeOp, graph::ReshapeOp, graph::CastOp>(def))
      return nullptr;
    value = def->getOperand(0);
  }
  return nullptr;
}

func::FuncOp entryFunction(ModuleOp module) {
  if (auto fn = module.lookupSymbol<func::FuncOp>("forward"))
    return fn;
  for (auto fn : module.getOps<func::FuncOp>())
    return fn;
  return nullptr;
}

/// Infers shapes and parameter roles from the raised graph.
void infer(ModuleOp module, ModelFile &out) {
  std::map<std::string, size_t> index;
  for (auto param : module.getOps<graph::ParamOp>()) {
    RankedTensorType type = param.getTensorType();
    ParamTensor t;
    t.name = param.getSymName().str();
    t.shape.assign(type.getShape().begin(), type.getShape().end());
    t.elementBytes =
        std::max<int64_t>(type.getElementType().getIntOrFloatBitWidth() / 8, 1);
    t.role = param.getFrozen() ? ParamRole::Frozen : ParamRole::Layer;
    std::string ty = typeName(type.getElementType());
    out.paramType = out.paramType.empty() || out.paramType == ty ? ty : "mixed";
    index[t.name] = out.params.size();
    out.params.push_back(std::move(t));
  }
  auto setRole = [&](graph::ReadParamOp read, ParamRole role) {
    auto it = index.find(read.getParam().str());
    if (it != index.end() && out.params[it->second].role != ParamRole::Frozen)
      out.params[it->second].role = role;
  };

  ModelSpec &spec = out.spec;
  func::FuncOp fn = entryFunction(module);
  if (!fn) {
    out.notes.push_back("no function: shapes not inferred");
    spec.measured = countTensors(out.params);
    return;
  }

  SmallVector<graph::AttentionOp> attentions;
  Operation *lastNorm = nullptr, *lastAttention = nullptr;
  Operation *lastActivation = nullptr;
  graph::MatmulOp lastMatmul;
  bool sawRms = false, sawLayerNorm = false, sawGelu = false, sawSilu = false;
  int64_t ffn = 0;
  graph::ReadParamOp tokenEmbedding;
  SmallVector<graph::ReadParamOp> positionEmbeddings;
  int64_t batch = 0, tokenSeq = 0;
  int64_t experts = 0, topK = 0;
  std::string ffnFrom;

  fn.walk([&](Operation *op) {
    if (auto a = dyn_cast<graph::AttentionOp>(op)) {
      attentions.push_back(a);
      lastAttention = op;
    } else if (auto mm = dyn_cast<graph::MatmulOp>(op)) {
      lastMatmul = mm;
    } else if (auto g = dyn_cast<graph::GatherOp>(op)) {
      auto read = readOf(g.getData());
      if (!read || cast<RankedTensorType>(read.getType()).getRank() != 2)
        return;
      auto indices = cast<RankedTensorType>(g.getIndices().getType());
      if (isa<BlockArgument>(g.getIndices()) && !tokenEmbedding) {
        tokenEmbedding = read;
        if (indices.getRank() >= 2) {
          batch = indices.getDimSize(0);
          tokenSeq = indices.getDimSize(1);
        }
      } else {
        positionEmbeddings.push_back(read);
      }
    } else if (isa<graph::LayerNormOp, graph::RmsNormOp>(op)) {
      (isa<graph::RmsNormOp>(op) ? sawRms : sawLayerNorm) = true;
      lastNorm = op;
    } else if (isa<graph::GeluOp, graph::SiluOp>(op)) {
      (isa<graph::SiluOp>(op) ? sawSilu : sawGelu) = true;
      lastActivation = op;
      auto type = cast<RankedTensorType>(op->getResult(0).getType());
      ffn = type.getShape().back();
      ffnFrom =
          op->getName().getStringRef().str() + " " + shapeStr(type.getShape());
    } else if (auto topk = dyn_cast<graph::TopKOp>(op)) {
      auto type = cast<RankedTensorType>(topk.getOperand().getType());
      experts = type.getDimSize(topk.getDim());
      topK = topk.getK();
    } else if (auto router = dyn_cast<graph::RouterTopKOp>(op)) {
      auto type = cast<RankedTensorType>(router.getLogits().getType());
      experts = type.getShape().back();
      topK = router.getK();
    }
  });

  // Embeddings.
  if (tokenEmbedding) {
    auto type = cast<RankedTensorType>(tokenEmbedding.getType());
    spec.vocab = type.getDimSize(0);
    spec.hidden = type.getDimSize(1);
    setRole(tokenEmbedding, ParamRole::TokenEmbedding);
    out.notes.push_back("vocab " + std::to_string(spec.vocab) + ", hidden " +
                        std::to_string(spec.hidden) + ": token embedding @" +
                        tokenEmbedding.getParam().str() + " " +
                        shapeStr(type.getShape()));
  }
  for (auto read : positionEmbeddings)
    setRole(read, ParamRole::Embedding);
  spec.learnedPositions = !positionEmbeddings.empty();
  out.batch = batch;

  // Attention: [batch, heads, seq, head_dim] operands.
  if (!attentions.empty()) {
    auto q = cast<RankedTensorType>(attentions.front().getQuery().getType());
    auto k = cast<RankedTensorType>(attentions.front().getKey().getType());
    spec.layers = int64_t(attentions.size());
    if (q.getRank() == 4 && k.getRank() == 4) {
      spec.heads = q.getDimSize(1);
      spec.kvHeads = k.getDimSize(1);
      spec.seq = q.getDimSize(2);
      if (!spec.hidden)
        spec.hidden = spec.heads * q.getDimSize(3);
    }
    out.notes.push_back(
        "layers " + std::to_string(spec.layers) + ", heads " +
        std::to_string(spec.heads) + ", kv heads " +
        std::to_string(spec.kvHeads) + ", seq " + std::to_string(spec.seq) +
        ": " + std::to_string(attentions.size()) +
        " graph.attention ops, query " + shapeStr(q.getShape()) + ", key " +
        shapeStr(k.getShape()));
  } else {
    out.notes.push_back("no graph.attention after -cleave-raise: layers, "
                        "heads and seq must be given by flags");
  }
  if (!spec.seq)
    spec.seq = tokenSeq;

  // The final norm: the last norm, after the last attention and the last
  // MLP activation (so not the pre-MLP norm of a lone block).
  auto before = [&](Operation *a, Operation *b) {
    return !a || (a->getBlock() == b->getBlock() && a->isBeforeInBlock(b));
  };
  if (lastNorm && lastAttention && before(lastAttention, lastNorm) &&
      before(lastActivation, lastNorm)) {
    for (Value operand : lastNorm->getOperands().drop_front())
      if (auto read = readOf(operand))
        setRole(read, ParamRole::Final);
  }

  if (ffn) {
    spec.ffn = ffn;
    out.notes.push_back("ffn " + std::to_string(ffn) + ": " + ffnFrom);
  }

  // Experts: rank-3 parameters [experts, ...].
  if (experts) {
    spec.experts = experts;
    spec.topK = topK;
    out.notes.push_back("experts " + std::to_string(experts) + ", top-" +
                        std::to_string(topK) + ": the router's top-k");
    for (ParamTensor &t : out.params)
      if (t.role == ParamRole::Layer && t.shape.size() == 3 &&
          t.shape[0] == experts)
        t.role = ParamRole::Expert;
  }

  // The LM head: the parameter of the last matmul (the logits), when it
  // has a vocabulary-sized dimension; tied when it is the token embedding.
  bool tied = true;
  if (spec.vocab && lastMatmul) {
    for (Value operand : lastMatmul->getOperands()) {
      graph::ReadParamOp read = paramBehind(operand);
      if (!read || read == tokenEmbedding ||
          (tokenEmbedding && read.getParam() == tokenEmbedding.getParam()))
        continue;
      auto shape = cast<RankedTensorType>(read.getType()).getShape();
      if (llvm::is_contained(shape, spec.vocab)) {
        setRole(read, ParamRole::Head);
        tied = false;
        out.notes.push_back("untied LM head @" + read.getParam().str() +
                            ": the last matmul");
      }
    }
    if (tied)
      out.notes.push_back("tied LM head: the last matmul reads no other "
                          "parameter with the vocabulary dimension");
  }

  Arch arch = experts ? Arch::MoE : sawRms ? Arch::Llama : Arch::GPT;
  spec.applyArchDefaults(arch);
  spec.gatedMlp = sawSilu && !sawGelu;
  spec.biases = sawLayerNorm;
  spec.tiedEmbeddings = tied;
  spec.learnedPositions = !positionEmbeddings.empty();
  // Exported graphs are in inference mode: no dropout.
  spec.dropout = false;
  spec.measured = countTensors(out.params);
}

} // namespace

bool readModelFile(const std::string &path, const ReadOptions &options,
                   ModelFile &out, std::string &error) {
  DialectRegistry registry;
  registry.insert<graph::GraphDialect, dist::DistDialect, func::FuncDialect,
                  arith::ArithDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, os);

  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    error = "error: cannot read '" + path + "': " + buffer.getError().message();
    return false;
  }

  OwningOpRef<ModuleOp> module;
  if (llvm::StringRef(path).ends_with(".onnx")) {
    OnnxImportOptions importOptions;
    importOptions.fileName = path;
    importOptions.baseDir = llvm::sys::path::parent_path(path).str();
    for (const std::string &spec : options.inputShapes) {
      std::string message = parseInputShape(spec, importOptions);
      if (!message.empty()) {
        error = "error: " + message;
        return false;
      }
    }
    module = importOnnxModel((*buffer)->getBuffer(), importOptions, &context);
  } else {
    sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  }
  if (!module) {
    error =
        diagnostics.empty() ? "error: cannot read '" + path + "'" : diagnostics;
    return false;
  }

  PassManager pm(&context);
  pm.addPass(cleave::createRaisePass());
  if (failed(pm.run(*module))) {
    error = diagnostics;
    return false;
  }

  infer(*module, out);
  out.spec.name = llvm::sys::path::stem(path).str();
  if (out.spec.name == "model") // examples/<name>/model.onnx
    out.spec.name =
        llvm::sys::path::filename(llvm::sys::path::parent_path(path)).str();
  return true;
}

} // namespace cleave::planner
