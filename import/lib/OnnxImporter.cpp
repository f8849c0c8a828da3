//===- OnnxImporter.cpp - ONNX models into the graph dialect ------------===//
//
// Parses the ModelProto, runs libonnx's checker (and converts opsets 7 to 12
// to 13 with its version converter), turns float initializers into
// `graph.param`s (tied weights stay one parameter), integer initializers
// into known constants, and the graph into `func.func @forward`, converting
// node by node in topological order, then checks the shapes that ONNX shape
// inference finds against the import's. Also registers `cleave-translate
// --import-onnx`.
//
//===----------------------------------------------------------------------===//

#include "cleave/Import/OnnxImporter.h"

#include "Importer.h"
#include "OnnxLibrary.h"
#include "TensorReader.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstring>
#include <limits>
#include <map>

using namespace mlir;
using namespace cleave;
using namespace cleave::onnx_import;


//===----------------------------------------------------------------------===//
// Importer and NodeContext
//===----------------------------------------------------------------------===//

Value Importer::materialize(ImportedValue &v, Location loc) {
  if (v.value)
    return v.value;
  if (!v.param.empty()) {
    // One read per parameter: copies of the value (Identity) share it.
    Value &read = paramReads[v.param];
    if (!read)
      read = graph::ReadParamOp::create(b, loc, v.paramType,
                                        FlatSymbolRefAttr::get(ctx, v.param));
    v.value = read;
  }
  else if (v.constant)
    v.value = graph::ConstantOp::create(b, loc, v.constant->getType(),
                                        v.constant->toAttr());
  return v.value;
}

NodeContext::NodeContext(Importer &importer, const onnx::NodeProto &node,
                         std::string name, Location loc, int64_t opset)
    : node(node), name(std::move(name)), loc(loc), opset(opset), b(importer.b), ctx(importer.ctx),
      importer(importer) {}

InFlightDiagnostic NodeContext::error() {
  return emitError(loc) << "node '" << name << "' (" << node.op_type()
                        << "): ";
}

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeContext::getInt(StringRef name, int64_t dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->i() : dflt;
}

float NodeContext::getFloat(StringRef name, float dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->f() : dflt;
}

std::optional<SmallVector<int64_t>>
NodeContext::getInts(StringRef name) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

bool NodeContext::hasInput(unsigned i) const {
  return i < numInputs() && !node.input(i).empty();
}

ImportedValue *NodeContext::input(unsigned i) {
  if (!hasInput(i))
    return nullptr;
  auto it = importer.values.find(node.input(i));
  return it == importer.values.end() ? nullptr : &it->second;
}

Value NodeContext::value(unsigned i) {
  ImportedValue *v = input(i);
  return v ? importer.materialize(*v, loc) : Value();
}

RankedTensorType NodeContext::type(unsigned i) {
  ImportedValue *v = input(i);
  if (!v)
    return {};
  if (v->value)
    return cast<RankedTensorType>(v->value.getType());
  if (!v->param.empty())
    return v->paramType;
  return v->constant->getType();
}

const ConstTensor *NodeContext::constant(unsigned i) {
  ImportedValue *v = input(i);
  return v && v->constant ? &*v->constant : nullptr;
}

bool NodeContext::allInputsConstant() {
  for (unsigned i = 0; i < numInputs(); ++i)
    if (hasInput(i) && !constant(i))
      return false;
  return true;
}

FailureOr<SmallVector<int64_t>> NodeContext::constInts(unsigned i,
                                                       StringRef what) {
  const ConstTensor *c = constant(i);
  if (!c)
    return error() << what << " (input " << i
                   << ") must be known at import time: static shapes only";
  return c->asInts();
}

bool NodeContext::outputUsed(unsigned i) const {
  if (i >= numOutputs() || node.output(i).empty())
    return false;
  return importer.useCounts.lookup(node.output(i)) > 0;
}

void NodeContext::set(unsigned i, Value v) {
  if (i < numOutputs() && !node.output(i).empty())
    importer.values[node.output(i)] = ImportedValue{v, std::nullopt, {}, {}};
}

void NodeContext::set(unsigned i, ConstTensor t) {
  if (i < numOutputs() && !node.output(i).empty())
    importer.values[node.output(i)] = ImportedValue{{}, std::move(t), {}, {}};
}

LogicalResult NodeContext::verifyCreated(Block *block, Operation *last) {
  auto begin = last ? std::next(Block::iterator(last)) : block->begin();
  for (Operation &op : llvm::make_range(begin, block->end())) {
    std::string message;
    LogicalResult result = success();
    {
      ScopedDiagnosticHandler capture(ctx, [&](Diagnostic &d) {
        if (message.empty())
          message = d.str();
        return success();
      });
      result = mlir::verify(&op, /*verifyRecursively=*/false);
    }
    if (failed(result))
      return error() << message;
  }
  return success();
}

void NodeContext::forward(unsigned out, unsigned in) {
  if (out >= numOutputs() || node.output(out).empty())
    return;
  // Copy first: inserting into the map may move the input's entry.
  ImportedValue copy = *input(in);
  importer.values[node.output(out)] = std::move(copy);
}

FailureOr<int64_t> NodeContext::axis(int64_t a, int64_t rank, StringRef what) {
  if (a < -rank || a >= rank)
    return error() << what << " " << a << " is out of range for rank "
                   << rank;
  return a < 0 ? a + rank : a;
}

//===----------------------------------------------------------------------===//
// The driver
//===----------------------------------------------------------------------===//

namespace {
/// The opsets the converters are written for; models of opsets
/// kMinConvertedOpset to kMinOpset - 1 are converted to kMinOpset first.
constexpr int64_t kMinOpset = 13, kMaxOpset = 18, kMinConvertedOpset = 7;

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s;
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "x" : "") + std::to_string(d);
  return s;
}

class ModelImporter {
public:
  ModelImporter(MLIRContext *ctx, const OnnxImportOptions &options)
      : ctx(ctx), options(options), reader(ctx, options),
        fileLoc(FileLineColLoc::get(ctx, options.fileName, 0, 0)) {}

  OwningOpRef<ModuleOp> run(StringRef bytes) {
    onnx::ModelProto model;
    google::protobuf::io::ArrayInputStream raw(bytes.data(),
                                               static_cast<int>(bytes.size()));
    google::protobuf::io::CodedInputStream stream(&raw);
    stream.SetTotalBytesLimit(std::numeric_limits<int>::max());
    if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
        !model.ParseFromCodedStream(&stream) ||
        !stream.ConsumedEntireMessage()) {
      emitError(fileLoc) << "'" << options.fileName
                         << "' is not a valid ONNX model (the protobuf does "
                            "not parse; is the file truncated?)";
      return {};
    }
    if (!model.has_graph() || model.ir_version() <= 0) {
      emitError(fileLoc) << "'" << options.fileName
                         << "' is not an ONNX model (no graph or IR version)";
      return {};
    }
    bool importsDefault = false;
    for (const onnx::OperatorSetIdProto &o : model.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") {
        opset = o.version();
        importsDefault = true;
      }
    if (!importsDefault) {
      std::string domains;
      for (const onnx::OperatorSetIdProto &o : model.opset_import())
        domains += (domains.empty() ? "'" : ", '") + o.domain() + "'";
      emitError(fileLoc) << "'" << options.fileName
                         << "' does not import the default ONNX domain (only "
                         << (domains.empty() ? "none" : domains)
                         << "); only ONNX-domain models are supported";
      return {};
    }
    if (opset < kMinConvertedOpset || opset > kMaxOpset) {
      emitError(fileLoc) << "'" << options.fileName << "' uses opset " << opset
                         << " of the default ONNX domain; Cleave "
                         << "imports opsets " << kMinConvertedOpset << " to "
                         << kMaxOpset << " (" << kMinConvertedOpset << " to "
                         << kMinOpset - 1 << " converted to " << kMinOpset
                         << "; re-export with opset_version=17)";
      return {};
    }
    if (failed(applyInputShapes(*model.mutable_graph())) ||
        failed(prepareModel(model)))
      return {};

    OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
    OpBuilder b(ctx);
    Importer importer(ctx, *module, b);
    if (failed(importGraph(model.graph(), importer)))
      return {};
    // Shape inference runs on what the importer accepted: libonnx 1.12's
    // inference functions trust attributes that its checker does not check
    // (LayerNormalization's axis far out of range crashes it), and the
    // converters check them.
    if ((opset <= libraryMaxOpset() && failed(infer(model))) ||
        failed(checkShapes(model.graph(), importer)))
      return {};
    if (failed(verify(*module)))
      return {};
    return module;
  }

private:
  /// Reports what libonnx found, at the node it names.
  LogicalResult libraryError(const LibraryError &e, const Twine &what) {
    if (e.nodeName.empty())
      return emitError(fileLoc)
             << what << ": "
             << (e.nodeOpType.empty() ? "" : "a '" + e.nodeOpType + "' node: ")
             << e.message;
    Location loc = NameLoc::get(StringAttr::get(ctx, e.nodeName), fileLoc);
    return emitError(loc) << "node '" << e.nodeName << "' (" << e.nodeOpType
                          << "): " << what << ": " << e.message;
  }

  /// The ONNX library's passes over the model before the import: the
  /// checker, and for opsets below kMinOpset shape inference and the version
  /// converter (whose adapters read the shapes inference found). Opsets newer
  /// than the library's own are imported as they are: its schemas of older
  /// versions would misjudge them.
  LogicalResult prepareModel(onnx::ModelProto &model) {
    if (opset > libraryMaxOpset())
      return success();
    if (failed(check(model)))
      return failure();
    if (opset < kMinOpset) {
      if (failed(checkConvertible(model.graph())) || failed(infer(model)))
        return failure();
      onnx::ModelProto converted;
      if (std::optional<LibraryError> e =
              convertVersion(model, kMinOpset, converted))
        return libraryError(*e, "the ONNX version converter cannot convert '" +
                                    options.fileName + "' from opset " +
                                    Twine(opset) + " to opset " +
                                    Twine(kMinOpset));
      // The converter passes initializers through by name, but copies them
      // without their external data: restore them as the file has them.
      llvm::StringMap<const onnx::TensorProto *> original;
      for (const onnx::TensorProto &t : model.graph().initializer())
        original[t.name()] = &t;
      for (onnx::TensorProto &t :
           *converted.mutable_graph()->mutable_initializer())
        if (const onnx::TensorProto *o = original.lookup(t.name()))
          t = *o;
      ctx->getDiagEngine().emit(fileLoc, DiagnosticSeverity::Note)
          << "converted the model from opset " << opset << " to opset "
          << kMinOpset << " (ONNX version converter)";
      model = std::move(converted);
      opset = kMinOpset;
    }
    return success();
  }

  /// What libonnx's version converter assumes but its checker does not
  /// check (the converter dereferences what these name): each graph output
  /// is defined, and every node is of the default domain (the importer
  /// supports no other, and checkSupported says so).
  LogicalResult checkConvertible(const onnx::GraphProto &g) {
    llvm::StringSet<> defined;
    for (const onnx::ValueInfoProto &in : g.input())
      defined.insert(in.name());
    for (const onnx::TensorProto &t : g.initializer())
      defined.insert(t.name());
    for (const onnx::NodeProto &n : g.node()) {
      if (!n.domain().empty() && n.domain() != "ai.onnx")
        return checkSupported(g, getConverters(), opset, fileLoc);
      for (const std::string &out : n.output())
        defined.insert(out);
    }
    for (const onnx::ValueInfoProto &out : g.output())
      if (out.name().empty() || !defined.contains(out.name()))
        return emitError(fileLoc) << "graph output '" << out.name()
                                  << "' is not produced by any node";
    return success();
  }

  LogicalResult infer(onnx::ModelProto &model) {
    if (std::optional<LibraryError> e = inferShapes(model))
      return libraryError(*e, "ONNX shape inference fails on '" +
                                  options.fileName + "'");
    return success();
  }

  /// onnx::checker::check_model, external data relative to the model's
  /// folder. The locations of external initializers are checked first by the
  /// importer's stricter rules (TensorReader::resolveExternal: inside the
  /// model's folder, a regular file, the range inside it), whose messages
  /// say more than the checker's "does not exist". Two things the checker
  /// requires are not required here: a shape on every graph input and output
  /// (input shapes may come from --input-shape, which importGraph asks for,
  /// and output shapes from shape inference), and an IR version no newer
  /// than the library's.
  LogicalResult check(onnx::ModelProto &model) {
    onnx::GraphProto &g = *model.mutable_graph();
    for (const onnx::TensorProto &t : g.initializer())
      if (t.data_location() == onnx::TensorProto::EXTERNAL &&
          failed(reader.resolveExternal(
              t, NameLoc::get(StringAttr::get(ctx, t.name()), fileLoc))))
        return failure();
    SmallVector<onnx::TypeProto::Tensor *> unshaped;
    for (auto *values : {g.mutable_input(), g.mutable_output()})
      for (onnx::ValueInfoProto &v : *values)
        if (v.type().has_tensor_type() && !v.type().tensor_type().has_shape()) {
          unshaped.push_back(v.mutable_type()->mutable_tensor_type());
          unshaped.back()->mutable_shape();
        }
    int64_t irVersion = model.ir_version();
    model.set_ir_version(std::min<int64_t>(irVersion, libraryIrVersion()));
    std::optional<LibraryError> e = checkModel(model, options.baseDir);
    model.set_ir_version(irVersion);
    for (onnx::TypeProto::Tensor *t : unshaped)
      t->clear_shape();
    if (e)
      return libraryError(*e, "the ONNX checker rejects '" + options.fileName +
                                  "'");
    return success();
  }

  /// Checks each --input-shape against the model's input and writes it into
  /// the model, so that the checker and shape inference see static shapes.
  LogicalResult applyInputShapes(onnx::GraphProto &g) {
    llvm::StringSet<> initializerNames;
    for (const onnx::TensorProto &t : g.initializer())
      initializerNames.insert(t.name());
    llvm::StringMap<onnx::ValueInfoProto *> inputs;
    std::string names;
    for (onnx::ValueInfoProto &in : *g.mutable_input())
      if (!initializerNames.contains(in.name())) {
        inputs[in.name()] = &in;
        names += (names.empty() ? "" : ", ") + in.name();
      }
    for (const auto &entry : options.inputShapes)
      if (!inputs.count(entry.getKey()))
        return emitError(fileLoc)
               << "--input-shape names '" << entry.getKey()
               << "', which is not a model input (inputs: " << names << ")";
    for (const auto &entry : options.inputShapes) {
      onnx::ValueInfoProto &in = *inputs[entry.getKey()];
      if (!in.type().has_tensor_type())
        continue; // importGraph reports it
      Location loc = NameLoc::get(StringAttr::get(ctx, in.name()), fileLoc);
      ArrayRef<int64_t> shape = entry.getValue();
      onnx::TypeProto::Tensor &tt = *in.mutable_type()->mutable_tensor_type();
      if (tt.has_shape()) {
        if (tt.shape().dim_size() != static_cast<int>(shape.size()))
          return emitError(loc)
                 << "--input-shape " << in.name() << "=" << shapeString(shape)
                 << " has rank " << shape.size() << " but the model's input "
                 << "has rank " << tt.shape().dim_size();
        for (auto [d, dim] : llvm::enumerate(tt.shape().dim()))
          if (dim.has_dim_value() && dim.dim_value() != shape[d])
            return emitError(loc)
                   << "--input-shape " << in.name() << "=" << shapeString(shape)
                   << " contradicts the model: dimension " << d << " is "
                   << dim.dim_value();
      }
      tt.clear_shape();
      for (int64_t d : shape)
        tt.mutable_shape()->add_dim()->set_dim_value(d);
    }
    return success();
  }

  LogicalResult importGraph(const onnx::GraphProto &g, Importer &imp) {
    OpBuilder &b = imp.b;
    b.setInsertionPointToEnd(imp.module.getBody());

    // Initializers: floats become parameters, the rest known constants.
    llvm::StringSet<> initializerNames;
    for (const onnx::TensorProto &t : g.initializer()) {
      Location loc = NameLoc::get(StringAttr::get(ctx, t.name()), fileLoc);
      initializerNames.insert(t.name());
      auto type = reader.typeOf(t, loc, "initializer");
      if (failed(type))
        return failure();
      if (isa<FloatType>(type->getElementType())) {
        if (type->getNumElements() == 0)
          return emitError(loc) << "initializer '" << t.name()
                                << "' is an empty float tensor";
        auto init = reader.readParameter(t, *type, loc);
        if (failed(init))
          return failure();
        graph::ParamOp::create(b, loc, t.name(), *type, *init,
                               /*frozen=*/false);
        imp.values[t.name()] = ImportedValue{{}, std::nullopt, t.name(), *type};
        continue;
      }
      auto c = reader.readConstant(t, loc);
      if (failed(c))
        return failure();
      imp.values[t.name()] = ImportedValue{{}, std::move(*c), {}, {}};
    }

    // Inputs, with their static shapes (--input-shape is in the model now).
    SmallVector<const onnx::ValueInfoProto *> inputs;
    for (const onnx::ValueInfoProto &in : g.input())
      if (!initializerNames.contains(in.name()))
        inputs.push_back(&in);
    SmallVector<Type> argTypes;
    SmallVector<std::string> argNames;
    for (const onnx::ValueInfoProto *in : inputs) {
      auto type = inputType(*in);
      if (failed(type))
        return failure();
      argTypes.push_back(*type);
      argNames.push_back(in->name());
    }

    // Count uses so converters can tell whether optional outputs matter.
    for (const onnx::NodeProto &n : g.node())
      for (const std::string &i : n.input())
        ++imp.useCounts[i];
    for (const onnx::ValueInfoProto &out : g.output())
      ++imp.useCounts[out.name()];

    auto fn = func::FuncOp::create(b, fileLoc, "forward",
                                   b.getFunctionType(argTypes, {}));
    Block *entry = fn.addEntryBlock();
    for (auto [i, name] : llvm::enumerate(argNames)) {
      fn.setArgAttr(i, "onnx.name", b.getStringAttr(name));
      imp.values[name] = ImportedValue{entry->getArgument(i), std::nullopt,
                                       {}, {}};
    }
    b.setInsertionPointToStart(entry);

    const llvm::StringMap<OpConverter> &converters = getConverters();
    if (failed(checkSupported(g, converters, opset, fileLoc)))
      return failure();
    for (const onnx::NodeProto &node : g.node()) {
      std::string name = node.name().empty()
                             ? node.op_type() + "_" + std::to_string(nodeIndex)
                             : node.name();
      ++nodeIndex;
      Location loc = NameLoc::get(StringAttr::get(ctx, name), fileLoc);
      NodeContext nc(imp, node, name, loc, opset);
      bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
      auto it = converters.find(node.op_type());
      assert(defaultDomain && it != converters.end() &&
             "checkSupported let an unsupported op through");
      (void)defaultDomain;
      for (unsigned i = 0; i < it->second.requiredInputs; ++i)
        if (!nc.hasInput(i))
          return nc.error() << "required input " << i << " is missing";
      for (unsigned i = 0; i < nc.numInputs(); ++i)
        if (nc.hasInput(i) && !imp.values.count(node.input(i)))
          return nc.error() << "input '" << node.input(i)
                            << "' is not produced by any earlier node, "
                               "initializer or graph input";
      Operation *last = entry->empty() ? nullptr : &entry->back();
      if (failed(it->second.convert(nc)) ||
          failed(nc.verifyCreated(entry, last)))
        return failure();
      for (unsigned i = 0; i < nc.numOutputs(); ++i)
        if (nc.outputUsed(i) && !imp.values.count(node.output(i)))
          return nc.error() << "output " << i << " ('" << node.output(i)
                            << "') is used, which is not supported";
    }

    SmallVector<Value> results;
    for (const onnx::ValueInfoProto &out : g.output()) {
      auto it = imp.values.find(out.name());
      if (it == imp.values.end())
        return emitError(fileLoc) << "graph output '" << out.name()
                                  << "' is not produced by any node";
      results.push_back(imp.materialize(it->second, fileLoc));
    }
    func::ReturnOp::create(b, fileLoc, results);
    fn.setType(b.getFunctionType(argTypes, ValueRange(results).getTypes()));
    for (auto [i, out] : llvm::enumerate(g.output()))
      fn.setResultAttr(i, "onnx.name", b.getStringAttr(out.name()));
    return success();
  }

  /// The static shapes that the model declares or ONNX shape inference
  /// found (value_info and graph outputs) are the shapes of the imported
  /// values: a difference is a converter's mistake, not the model's.
  LogicalResult checkShapes(const onnx::GraphProto &g, Importer &imp) {
    llvm::StringMap<const onnx::TensorShapeProto *> known;
    for (const auto *values : {&g.value_info(), &g.output()})
      for (const onnx::ValueInfoProto &v : *values)
        if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
          known[v.name()] = &v.type().tensor_type().shape();
    auto describe = [](ArrayRef<int64_t> s) {
      return s.empty() ? std::string("a scalar shape")
                       : "shape " + shapeString(s);
    };
    for (auto [n, node] : llvm::enumerate(g.node())) {
      for (auto [i, name] : llvm::enumerate(node.output())) {
        auto shape = known.find(name);
        auto value = imp.values.find(name);
        if (name.empty() || shape == known.end() || value == imp.values.end())
          continue;
        SmallVector<int64_t> expected;
        for (const onnx::TensorShapeProto::Dimension &d :
             shape->second->dim()) {
          if (!d.has_dim_value() || d.dim_value() < 0)
            break;
          expected.push_back(d.dim_value());
        }
        if (static_cast<int>(expected.size()) != shape->second->dim_size())
          continue;
        const ImportedValue &v = value->second;
        RankedTensorType type =
            v.value            ? dyn_cast<RankedTensorType>(v.value.getType())
            : !v.param.empty() ? v.paramType
            : v.constant       ? v.constant->getType()
                               : RankedTensorType();
        if (!type || type.getShape() == ArrayRef<int64_t>(expected))
          continue;
        std::string nodeName = node.name().empty()
                                   ? node.op_type() + "_" + std::to_string(n)
                                   : node.name();
        return emitError(NameLoc::get(StringAttr::get(ctx, nodeName), fileLoc))
               << "node '" << nodeName << "' (" << node.op_type()
               << "): output " << i << " ('" << name << "') has "
               << describe(type.getShape()) << " in the import but "
               << describe(expected)
               << " in the model (declared or found by ONNX shape inference)";
      }
    }
    return success();
  }

  FailureOr<RankedTensorType> inputType(const onnx::ValueInfoProto &in) {
    Location loc = NameLoc::get(StringAttr::get(ctx, in.name()), fileLoc);
    if (!in.type().has_tensor_type())
      return emitError(loc) << "input '" << in.name()
                            << "' is a sequence, map or optional, which is "
                               "not supported (only tensors)";
    const onnx::TypeProto::Tensor &tt = in.type().tensor_type();
    Type element = convertElementType(tt.elem_type(), ctx);
    if (!element)
      return emitError(loc) << "input '" << in.name()
                            << "' has unsupported element type "
                            << onnxTypeName(tt.elem_type())
                            << " (supported: FLOAT, FLOAT16, BFLOAT16, DOUBLE, "
                               "INT64, INT32, BOOL)";
    if (!tt.has_shape())
      return emitError(loc) << "input '" << in.name()
                            << "' has no shape; give it with --input-shape "
                            << in.name() << "=2x8";
    SmallVector<int64_t> shape;
    std::string suggestion;
    for (auto [d, dim] : llvm::enumerate(tt.shape().dim())) {
      if (!dim.has_dim_value() || dim.dim_value() < 0) {
        return emitError(loc)
               << "input '" << in.name() << "' has unknown dimension " << d
               << (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : "")
               << "; Cleave needs static shapes: set them with --input-shape "
               << in.name() << "=" << exampleShape(tt.shape());
      }
      shape.push_back(dim.dim_value());
    }
    if (!elementCount(shape))
      return emitError(loc) << "input '" << in.name() << "' has more than "
                            << kMaxElements << " elements";
    return RankedTensorType::get(shape, element);
  }

  static std::string exampleShape(const onnx::TensorShapeProto &shape) {
    std::string s;
    for (auto [d, dim] : llvm::enumerate(shape.dim()))
      s += (d ? "x" : "") +
           std::to_string(dim.has_dim_value() && dim.dim_value() > 0
                              ? dim.dim_value()
                              : 8);
    return s;
  }

  /// Every node's op must have a converter: one error lists each
  /// unsupported op type with its count and first node, so that a model
  /// shows all it lacks at once.
  LogicalResult checkSupported(const onnx::GraphProto &g,
                               const llvm::StringMap<OpConverter> &converters,
                               int64_t opset, Location fileLoc) {
    struct Missing {
      std::string first;
      int64_t count = 0;
    };
    llvm::MapVector<std::string, Missing, std::map<std::string, unsigned>>
        missing;
    for (auto [i, node] : llvm::enumerate(g.node())) {
      bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
      if (defaultDomain && converters.count(node.op_type()))
        continue;
      std::string type =
          (defaultDomain ? "" : node.domain() + "::") + node.op_type();
      Missing &m = missing[type];
      if (!m.count++)
        m.first = node.name().empty()
                      ? node.op_type() + "_" +
                            std::to_string(nodeIndex + int64_t(i))
                      : node.name();
    }
    if (missing.empty())
      return success();
    std::string supported;
    for (StringRef op : getSupportedOnnxOps())
      supported += (supported.empty() ? "" : ", ") + op.str();
    const auto &[type, first] = *missing.begin();
    Location loc =
        NameLoc::get(StringAttr::get(ctx, first.first), fileLoc);
    if (missing.size() == 1 && first.count == 1)
      return emitError(loc)
             << "unsupported ONNX op: node '" << first.first
             << "' has op type '" << type << "' (opset " << opset
             << "); supported ops: " << supported;
    int64_t nodes = 0;
    std::string list;
    for (const auto &[t, m] : missing) {
      nodes += m.count;
      list += (list.empty() ? "" : ", ") + ("'" + t + "' (") +
              std::to_string(m.count) + (m.count == 1 ? " node '" : " nodes, the first '") +
              m.first + "')";
    }
    return emitError(loc) << "unsupported ONNX ops: " << nodes << " nodes of "
                          << missing.size() << " op types: " << list
                          << " (opset " << opset
                          << "); supported ops: " << supported;
  }

  MLIRContext *ctx;
  const OnnxImportOptions &options;
  TensorReader reader;
  Location fileLoc;
  int64_t opset = 0;
  int64_t nodeIndex = 0;
};
} // namespace

OwningOpRef<ModuleOp> cleave::importOnnxModel(StringRef bytes,
                                              const OnnxImportOptions &options,
                                              MLIRContext *context) {
  context->loadDialect<graph::GraphDialect, func::FuncDialect>();
  return ModelImporter(context, options).run(bytes);
}

SmallVector<StringRef> cleave::getSupportedOnnxOps() {
  SmallVector<StringRef> ops;
  for (const auto &entry : onnx_import::getConverters())
    ops.push_back(entry.getKey());
  llvm::sort(ops);
  return ops;
}

std::string cleave::parseInputShape(StringRef spec,
                                    OnnxImportOptions &options) {
  auto [name, dims] = spec.split('=');
  if (name.empty() || dims.empty())
    return "--input-shape expects NAME=DxDx..., got '" + spec.str() + "'";
  SmallVector<int64_t> shape;
  SmallVector<StringRef> parts;
  dims.split(parts, 'x');
  for (StringRef p : parts) {
    int64_t d;
    if (p.getAsInteger(10, d) || d <= 0)
      return "--input-shape " + spec.str() +
             ": dimensions must be positive integers separated by 'x'";
    shape.push_back(d);
  }
  if (!onnx_import::elementCount(shape))
    return "--input-shape " + spec.str() + ": more than " +
           std::to_string(onnx_import::kMaxElements) + " elements";
  if (!options.inputShapes.try_emplace(name, shape).second)
    return "--input-shape gives '" + name.str() + "' twice";
  return "";
}

void cleave::registerOnnxImportTranslation() {
  static llvm::cl::list<std::string> inputShapes(
      "input-shape",
      llvm::cl::desc("Static shape of a model input, NAME=DxDx... "
                     "(e.g. idx=2x128); repeatable"),
      llvm::cl::ZeroOrMore);
  static TranslateToMLIRRegistration registration(
      "import-onnx", "Import an ONNX model (.onnx) into the graph dialect",
      [](llvm::SourceMgr &sourceMgr,
         MLIRContext *context) -> OwningOpRef<Operation *> {
        const llvm::MemoryBuffer *buffer =
            sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
        OnnxImportOptions options;
        options.fileName = buffer->getBufferIdentifier().str();
        SmallString<256> dir(options.fileName);
        llvm::sys::path::remove_filename(dir);
        options.baseDir = std::string(dir.empty() ? "." : dir.str());
        for (const std::string &spec : inputShapes) {
          std::string err = parseInputShape(spec, options);
          if (!err.empty()) {
            emitError(FileLineColLoc::get(context, options.fileName, 0, 0))
                << err;
            return {};
          }
        }
        OwningOpRef<ModuleOp> module =
            importOnnxModel(buffer->getBuffer(), options, context);
        return OwningOpRef<Operation *>(module.release());
      },
      [](DialectRegistry &registry) {
        registry.insert<graph::GraphDialect, func::FuncDialect>();
      });
}
