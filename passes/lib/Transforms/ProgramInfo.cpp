//===- ProgramInfo.cpp - the `cleave_program` metadata of a lowering -----===//
//
// The constant `cleave_program` that the runtime's main reads: the ABI
// version, the kind of program, the arena size, and the tables of
// parameters (with their initial values and roles), inputs and outputs, and
// the mesh and its communicator groups. It is described from the entry
// function before the conversion replaces it (Lowering::describeProgram)
// and emitted after it, with the groups that the collectives added
// (RuntimeBuilder::programInfo).
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace cleave::lowering {

FailureOr<std::string> elementBytes(Attribute attr) {
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return failure();
    ArrayRef<char> data = blob->getData();
    return std::string(data.begin(), data.end());
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return failure();
  Type elem = dense.getElementType();
  std::string bytes;
  auto append = [&](const void *p, size_t n) {
    bytes.append(static_cast<const char *>(p), n);
  };
  if (elem.isInteger(1)) {
    for (bool v : dense.getValues<bool>()) {
      char c = v;
      append(&c, 1);
    }
  } else if (auto intType = dyn_cast<IntegerType>(elem)) {
    for (APInt v : dense.getValues<APInt>()) {
      int64_t x = v.getSExtValue();
      append(&x, intType.getWidth() / 8);
    }
  } else if (isa<FloatType>(elem)) {
    unsigned width = elem.getIntOrFloatBitWidth();
    for (APFloat v : dense.getValues<APFloat>()) {
      uint64_t bits = v.bitcastToAPInt().getZExtValue();
      append(&bits, width / 8);
    }
  } else {
    return failure();
  }
  return bytes;
}

Value RuntimeBuilder::axisNames(dist::MeshOp m) {
  // A constant array of pointers to the names.
  SmallVector<Value> names;
  for (Attribute name : m.getAxisNames())
    names.push_back(cString(cast<StringAttr>(name).getValue()));
  return addressList("cleave.axes", names);
}

Value RuntimeBuilder::commEngine() {
  // The engine's table, defined by the communication library the program
  // is linked with (cleave_comm.h): referring to it pulls the engine in.
  StringRef name = "cleave_comm_engine";
  auto global = state.lookupOrDeclare<LLVM::GlobalOp>(name, [&] {
    return atModuleStart([&] {
      return LLVM::GlobalOp::create(b, loc, i8, /*isConstant=*/true,
                                    LLVM::Linkage::External, name,
                                    Attribute());
    });
  });
  return LLVM::AddressOfOp::create(b, loc, global);
}

Value RuntimeBuilder::namedTable(ArrayRef<NamedTensor> entries) {
  if (entries.empty())
    return {};
  // Each insertvalue into a constant aggregate copies it, so one array's
  // inserts would take time quadratic in the entries (a large program's
  // translation to LLVM IR): a table of more than kTableRows entries is a
  // struct of arrays of at most kTableRows, which has the array's layout.
  constexpr size_t kTableRows = 256;
  SmallVector<Type> parts;
  for (size_t start = 0; start < entries.size(); start += kTableRows)
    parts.push_back(LLVM::LLVMArrayType::get(
        namedType, std::min(kTableRows, entries.size() - start)));
  Type tableType = parts.size() == 1
                       ? parts.front()
                       : LLVM::LLVMStructType::getLiteral(state.ctx, parts);
  // Pointees first (they are globals at the module start).
  struct Ptrs {
    std::string name, data, file, sharding;
  };
  SmallVector<Ptrs> ptrs;
  auto symbolOf = [](Value addr) {
    return addr ? cast<LLVM::AddressOfOp>(addr.getDefiningOp())
                      .getGlobalName()
                      .str()
                : std::string();
  };
  SmallVector<SmallVector<int64_t>> words;
  for (const NamedTensor &e : entries) {
    Ptrs p;
    p.name = symbolOf(cString(e.name));
    if (e.hasInitData)
      p.data = symbolOf(bytesGlobal("cleave.init", e.initData));
    if (!e.initFile.empty())
      p.file = symbolOf(cString(e.initFile));
    if (e.sharding)
      p.sharding = symbolOf(wordsGlobal("cleave.sharding", *e.sharding));
    ptrs.push_back(p);
    // describeProgram checked the types.
    words.push_back(*Lowering::descWords(e.offset, e.type));
  }
  auto global = atModuleStart([&] {
    auto g =
        LLVM::GlobalOp::create(b, loc, tableType, true, LLVM::Linkage::Private,
                               uniqueName("cleave.tensors"), Attribute());
    b.setInsertionPointToStart(b.createBlock(&g.getInitializerRegion()));
    Value table = LLVM::UndefOp::create(b, loc, tableType);
    Value part;
    auto addr = [&](const std::string &sym) -> Value {
      if (sym.empty())
        return LLVM::ZeroOp::create(b, loc, ptr);
      return LLVM::AddressOfOp::create(b, loc, ptr, sym);
    };
    for (auto [i, e] : llvm::enumerate(entries)) {
      int64_t row = i % kTableRows, p = i / kTableRows;
      if (parts.size() > 1 && row == 0)
        part = LLVM::UndefOp::create(b, loc, parts[p]);
      Value &into = parts.size() > 1 ? part : table;
      auto insert = [&](Value v, int64_t field) {
        into = LLVM::InsertValueOp::create(b, loc, into, v,
                                           ArrayRef<int64_t>{row, field});
      };
      insert(addr(ptrs[i].name), 0);
      insert(LLVM::ConstantOp::create(b, loc, descType, i64Array(words[i])), 1);
      insert(addr(ptrs[i].data), 2);
      insert(addr(ptrs[i].file), 3);
      insert(LLVM::ConstantOp::create(b, loc, i64,
                                      b.getI64IntegerAttr(e.initOffset)),
             4);
      insert(LLVM::ConstantOp::create(b, loc, i32,
                                      b.getI32IntegerAttr(e.role)),
             5);
      insert(addr(ptrs[i].sharding), 6);
      if (parts.size() > 1 &&
          (row == int64_t(kTableRows) - 1 || i + 1 == entries.size()))
        table = LLVM::InsertValueOp::create(b, loc, table, part,
                                            ArrayRef<int64_t>{p});
    }
    LLVM::ReturnOp::create(b, loc, table);
    return g;
  });
  return LLVM::AddressOfOp::create(b, loc, global);
}

double matrixProductFlops(Operation *op) {
  auto shape = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  auto elements = [](Value v) {
    return double(cast<RankedTensorType>(v.getType()).getNumElements());
  };
  auto last = [&](Value v) {
    ArrayRef<int64_t> s = shape(v);
    return s.empty() ? 1.0 : double(s.back());
  };
  // result = the product's output, k = its contracted size.
  auto product = [&](Value result, double k) {
    return 2.0 * elements(result) * k;
  };
  // Attention: scores q k^T and output p v, rows = batch x heads x queries.
  auto attention = [&](Value q, Value k, Value v) {
    ArrayRef<int64_t> ks = shape(k);
    double keys = ks.size() >= 2 ? double(ks[ks.size() - 2]) : 1.0;
    return 2.0 * (elements(q) / last(q)) * keys * (last(q) + last(v));
  };
  return llvm::TypeSwitch<Operation *, double>(op)
      .Case(
          [&](MatmulOp m) { return product(m.getResult(), last(m.getLhs())); })
      .Case([&](GemmOp m) {
        ArrayRef<int64_t> l = shape(m.getLhs());
        double k = m.getTransposeLhs() && l.size() >= 2
                       ? double(l[l.size() - 2])
                       : last(m.getLhs());
        return product(m.getResult(), k);
      })
      .Case([&](LinearOp m) {
        return product(m.getResult(), last(m.getInput()));
      })
      .Case([&](MatmulGeluGradOp m) {
        return product(m.getResult(), last(m.getGrad()));
      })
      .Case([&](ExpertMatmulOp m) {
        return product(m.getResult(), last(m.getInput()));
      })
      .Case([&](AttentionOp a) {
        return attention(a.getQuery(), a.getKey(), a.getValue());
      })
      .Case([&](AttentionBlockOp a) {
        return attention(a.getQuery(), a.getKey(), a.getValue());
      })
      // The gradients' four products, twice the forward's two (its scores
      // recomputed inside the kernel are not counted, as model FLOPs go).
      .Case([&](AttentionGradOp a) {
        return 2.0 * attention(a.getQuery(), a.getKey(), a.getValue());
      })
      .Case([&](AttentionBlockGradOp a) {
        return 2.0 * attention(a.getQuery(), a.getKey(), a.getValue());
      })
      .Default([](Operation *) { return 0.0; });
}

FailureOr<ProgramInfo> Lowering::describeProgram(func::FuncOp fn) {
  ProgramInfo info;
  SmallVector<NamedTensor> &params = info.params, &inputs = info.inputs,
                           &outputs = info.outputs;
  // The model's parameters first, then the optimizer's state (every other
  // role).
  SmallVector<ParamOp> ordered;
  for (auto param : module.getOps<ParamOp>())
    if (getParamRole(param) == CLEAVE_PARAM_MODEL)
      ordered.push_back(param);
  info.numModelParams = ordered.size();
  for (auto param : module.getOps<ParamOp>())
    if (getParamRole(param) != CLEAVE_PARAM_MODEL)
      ordered.push_back(param);
  // The runtime finds the step counter and the loss scaler's state by role:
  // one parameter each at most.
  llvm::SmallDenseMap<int32_t, ParamOp> byRole;
  for (ParamOp param : ordered) {
    cleave_param_role role = getParamRole(param);
    if (role == CLEAVE_PARAM_MODEL || role == CLEAVE_PARAM_OPTIMIZER_STATE)
      continue;
    auto [it, inserted] = byRole.try_emplace(role, param);
    if (!inserted)
      return param.emitOpError("has role ")
             << cleave_param_role_name(role) << ", as @"
             << it->second.getSymName() << " has; a program has one at most";
  }
  for (ParamOp param : ordered) {
    auto offset = param->getAttrOfType<IntegerAttr>(kOffsetAttr);
    if (!offset)
      return param.emitOpError("has no planned offset ('")
             << kOffsetAttr << "'); run -cleave-plan-memory first";
    NamedTensor e{param.getSymName().str(), offset.getInt(),
                  storedType(param),
                  {},
                  false,
                  {},
                  0,
                  getParamRole(param)};
    // A parameter stored as its block: each device takes its block of the
    // global initial value.
    if (storedType(param) != param.getType()) {
      if (!param.getSharding())
        return param.emitOpError("is stored as ")
               << storedType(param) << " but has no sharding";
      auto words = shardingWords(*param.getSharding(), param.getType(),
                                 param, "its value");
      if (failed(words))
        return failure();
      e.sharding = std::move(*words);
    }
    if (Attribute init = param.getInitialValueAttr()) {
      if (auto ext = dyn_cast<ExternalWeightsAttr>(init)) {
        e.initFile = ext.getPath().str();
        e.initOffset = ext.getOffset();
      } else {
        FailureOr<std::string> bytes = elementBytes(init);
        if (failed(bytes))
          return param.emitOpError("has an initial value the runtime cannot "
                                   "hold (a dense_resource without data?)");
        e.initData = std::move(*bytes);
        e.hasInitData = true;
      }
    }
    params.push_back(std::move(e));
  }
  auto nameOf = [](DictionaryAttr attrs, StringRef prefix, unsigned i) {
    if (attrs)
      if (auto name = attrs.getAs<StringAttr>("onnx.name"))
        return name.str();
    return (prefix + Twine(i)).str();
  };
  // In one device's program (dist.partitioned), an argument or result
  // sharding says how its block makes up the global value: the runtime
  // splits the global batch by it.
  bool partitioned = fn->hasAttr(dist::DistDialect::getPartitionedAttrName());
  auto blockSharding = [&](Attribute attr, Type type, const Twine &what,
                           NamedTensor &e) -> LogicalResult {
    auto sharding = dyn_cast_or_null<dist::ShardingAttr>(attr);
    if (!sharding)
      return success();
    if (!partitioned)
      return fn.emitOpError("has a sharding on ")
             << what << " but is not one device's program ("
             << dist::DistDialect::getPartitionedAttrName()
             << "): partition it before lowering";
    auto local = cast<RankedTensorType>(type);
    auto words = shardingWords(
        sharding, dist::getGlobalType(sharding, local, mesh()), fn, what);
    if (failed(words))
      return failure();
    e.sharding = std::move(*words);
    return success();
  };
  StringRef shardingName = dist::DistDialect::getShardingAttrName();
  for (BlockArgument arg : fn.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto offset = fn.getArgAttrOfType<IntegerAttr>(i, kOffsetAttr);
    if (!offset)
      return fn.emitOpError("argument #")
             << i << " has no planned offset ('" << kOffsetAttr
             << "'); run -cleave-plan-memory first";
    NamedTensor e{nameOf(fn.getArgAttrDict(i), "input", i), offset.getInt(),
                  arg.getType(),
                  {},
                  false,
                  {},
                  0};
    if (failed(blockSharding(fn.getArgAttr(i, shardingName), arg.getType(),
                             "argument #" + Twine(i), e)))
      return failure();
    inputs.push_back(std::move(e));
  }
  Operation *ret = fn.getBody().front().getTerminator();
  for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
    auto it = offsets.find(v);
    if (it == offsets.end())
      return ret->emitOpError("returns a value without a planned offset");
    NamedTensor e{nameOf(fn.getResultAttrDict(i), "output", i),
                  it->second,
                  v.getType(),
                  {},
                  false,
                  {},
                  0};
    if (failed(blockSharding(fn.getResultAttr(i, shardingName), v.getType(),
                             "result #" + Twine(i), e)))
      return failure();
    outputs.push_back(std::move(e));
  }
  // The tables hold the descriptors of their tensors.
  for (ArrayRef<NamedTensor> table : {params, inputs, outputs})
    for (const NamedTensor &e : table)
      if (failed(descWords(e.offset, e.type)))
        return fn.emitOpError("cannot describe '")
               << e.name << "' to the runtime";
  info.arenaBytes = cast<IntegerAttr>(fn->getAttr(kArenaBytesAttr)).getInt();
  for (Operation &op : fn.getBody().front())
    info.flops += matrixProductFlops(&op);
  info.trainingConfig = fn->getAttrOfType<DictionaryAttr>(kTrainingConfigAttr);
  // A step with its loss but no update (-cleave-add-loss alone) is an
  // evaluation program; its configuration is the loss's.
  info.kind = CLEAVE_PROGRAM_TRAINING;
  if (!info.trainingConfig) {
    info.trainingConfig = fn->getAttrOfType<DictionaryAttr>(kLossAttr);
    // The gradient program (-cleave-differentiate without an optimizer)
    // keeps the loss too, and returns the gradients.
    bool gradients = false;
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      gradients |= static_cast<bool>(fn.getResultAttr(i, kGradientAttr));
    info.kind = info.trainingConfig && !gradients ? CLEAVE_PROGRAM_EVAL
                                                  : CLEAVE_PROGRAM_INFERENCE;
    if (info.kind != CLEAVE_PROGRAM_EVAL)
      info.trainingConfig = nullptr;
  }
  info.sourceModel = module->getAttrOfType<StringAttr>(kSourceModelAttr);
  return info;
}

void RuntimeBuilder::programInfo(const ProgramInfo &info) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(state.module.getBody());
  auto infoType = programInfoType(state.ctx);
  DictionaryAttr config = info.trainingConfig;
  StringAttr source = info.sourceModel;
  auto global = LLVM::GlobalOp::create(b, loc, infoType, /*isConstant=*/true,
                                       LLVM::Linkage::External,
                                       state.symbolPrefix.empty()
                                           ? "cleave_program"
                                           : state.symbolPrefix + "program",
                                       Attribute());
  b.setInsertionPointToStart(b.createBlock(&global.getInitializerRegion()));
  Value paramTable = namedTable(info.params);
  Value inputTable = namedTable(info.inputs);
  Value outputTable = namedTable(info.outputs);
  Value s = LLVM::UndefOp::create(b, loc, infoType);
  auto field = [&](Value v, int64_t i) {
    s = LLVM::InsertValueOp::create(b, loc, s, v, ArrayRef<int64_t>{i});
  };
  auto orNull = [&](Value v) { return v ? v : null(); };
  auto string = [&](StringAttr attr) {
    return attr ? cString(attr.getValue()) : null();
  };
  // The runtime reads the configuration as JSON.
  Value configJson = config ? cString(getTrainingConfigJson(config)) : null();
  field(constI32(CLEAVE_RT_ABI_VERSION), 0);
  field(constI32(info.kind), 1);
  field(constI64(info.arenaBytes), 2);
  field(constI64(info.params.size()), 3);
  field(constI64(info.numModelParams), 4);
  field(orNull(paramTable), 5);
  field(constI64(info.inputs.size()), 6);
  field(orNull(inputTable), 7);
  field(constI64(info.outputs.size()), 8);
  field(orNull(outputTable), 9);
  field(string(source), 10);
  field(configJson, 11);
  // The mesh, the communicator groups and the engine.
  dist::MeshOp m = state.mesh();
  field(constI32(m ? int32_t(m.getAxisSizes().size()) : 0), 12);
  field(m ? int64s(m.getAxisSizes()) : null(), 13);
  field(m ? axisNames(m) : null(), 14);
  field(constI64(int64_t(state.groups.size())), 15);
  SmallVector<int64_t> groupWords;
  for (ArrayRef<int64_t> axes : state.groups) {
    groupWords.push_back(int64_t(axes.size()));
    llvm::append_range(groupWords, axes);
    groupWords.resize(groupWords.size() + CLEAVE_RT_MAX_MESH_RANK - axes.size(),
                      0);
  }
  field(state.groups.empty() ? null()
                             : wordsGlobal("cleave.groups", groupWords),
        16);
  field(m ? commEngine() : null(), 17);
  // Not pipelined (a stage's program is not either): no stages.
  field(constI64(0), 18);
  field(constI64(0), 19);
  field(null(), 20);
  field(null(), 21);
  // No evaluation program until -cleave-link-eval adds one.
  field(null(), kEvalInfoField);
  field(null(), kEvalRunField);
  field(LLVM::ConstantOp::create(b, loc, b.getF64Type(),
                                 b.getF64FloatAttr(info.flops)),
        kFlopsField);
  LLVM::ReturnOp::create(b, loc, s);
}

} // namespace cleave::lowering
