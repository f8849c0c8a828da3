//===- LowerToRuntime.cpp - planned graph IR -> runtime calls in LLVM ----===//
//
// Turns the memory-planned entry function into `llvm.func
// @cleave_program_run(%arena)`: one call of the runtime C ABI per op
// (runtime/include/cleave/Runtime/cleave_rt.h), each tensor a constant
// descriptor (offset, dtype, shape) and attribute arrays constant globals.
// The parameters, inputs and outputs become the `cleave_program` metadata
// that the runtime's main reads. Views (reshape, read_param) emit nothing.
//
//===----------------------------------------------------------------------===//

#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/MemoryPlan.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace cleave {
#define GEN_PASS_DEF_LOWERTORUNTIMEPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;

namespace {

/// Runtime dtype codes (enum cleave_dtype).
FailureOr<int64_t> dtypeCode(Type t) {
  if (t.isF32())
    return 0;
  if (t.isF16())
    return 1;
  if (t.isBF16())
    return 2;
  if (t.isInteger(64))
    return 3;
  if (t.isInteger(32))
    return 4;
  if (t.isInteger(1))
    return 5;
  return failure();
}

/// The bytes of an elements attribute in the runtime's layout (i1 as one
/// byte per element, splats expanded).
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

/// CLEAVE_RT_ABI_VERSION of the cleave_program_info layout emitted here.
constexpr int64_t kAbiVersion = 2;

class Lowering {
public:
  Lowering(ModuleOp module)
      : module(module), ctx(module.getContext()), b(ctx),
        loc(module.getLoc()) {
    i8 = IntegerType::get(ctx, 8);
    i32 = IntegerType::get(ctx, 32);
    i64 = IntegerType::get(ctx, 64);
    f64 = Float64Type::get(ctx);
    ptr = LLVM::LLVMPointerType::get(ctx);
    descType = LLVM::LLVMArrayType::get(i64, 10);
    namedType = LLVM::LLVMStructType::getLiteral(ctx,
                                                 {ptr, descType, ptr, ptr, i64});
  }

  LogicalResult run(func::FuncOp fn);

private:
  //===--- Globals ---------------------------------------------------===//

  /// Inserts at the module's start, so globals precede their uses.
  template <typename Fn> auto atModuleStart(Fn fn) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    return fn();
  }

  std::string uniqueName(StringRef prefix) {
    return (prefix + "." + Twine(counter++)).str();
  }

  /// The descriptor words of a tensor: offset, dtype | rank << 32, shape.
  FailureOr<SmallVector<int64_t>> descWords(int64_t offset, Type type) {
    auto tensor = cast<RankedTensorType>(type);
    FailureOr<int64_t> code = dtypeCode(tensor.getElementType());
    if (failed(code) || tensor.getRank() > 8)
      return failure();
    SmallVector<int64_t> words(10, 0);
    words[0] = offset;
    words[1] = *code | (tensor.getRank() << 32);
    for (int64_t d = 0; d < tensor.getRank(); ++d)
      words[2 + d] = tensor.getDimSize(d);
    return words;
  }

  DenseElementsAttr i64Array(ArrayRef<int64_t> values) {
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      i64);
    return DenseElementsAttr::get(type, values);
  }

  /// A pointer to the constant descriptor of a tensor at `offset`.
  FailureOr<Value> desc(int64_t offset, Type type, Operation *user) {
    FailureOr<SmallVector<int64_t>> words = descWords(offset, type);
    if (failed(words))
      return user->emitOpError("cannot describe ")
             << type << " to the runtime (element type or rank > 8)";
    std::string key;
    for (int64_t w : *words)
      key += std::to_string(w) + ",";
    LLVM::GlobalOp &global = descs[key];
    if (!global)
      global = atModuleStart([&] {
        return LLVM::GlobalOp::create(b, loc, descType, /*isConstant=*/true,
                                      LLVM::Linkage::Private,
                                      uniqueName("cleave.desc"),
                                      i64Array(*words));
      });
    return LLVM::AddressOfOp::create(b, loc, global).getResult();
  }

  /// A pointer to a constant global holding `bytes`.
  Value bytesGlobal(StringRef prefix, StringRef bytes) {
    auto type = LLVM::LLVMArrayType::get(i8, std::max<size_t>(bytes.size(), 1));
    auto global = atModuleStart([&] {
      auto g = LLVM::GlobalOp::create(
          b, loc, type, /*isConstant=*/true, LLVM::Linkage::Private,
          uniqueName(prefix),
          b.getStringAttr(bytes.empty() ? StringRef("\0", 1) : bytes));
      g.setAlignment(64);
      return g;
    });
    return LLVM::AddressOfOp::create(b, loc, global);
  }

  Value cString(StringRef s) {
    std::string withNull = s.str();
    withNull.push_back('\0');
    return bytesGlobal("cleave.str", withNull);
  }

  /// A pointer to a constant i64 array.
  Value int64s(ArrayRef<int64_t> values) {
    SmallVector<int64_t> padded(values.begin(), values.end());
    if (padded.empty())
      padded.push_back(0);
    auto type = LLVM::LLVMArrayType::get(i64, padded.size());
    auto global = atModuleStart([&] {
      return LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true,
                                    LLVM::Linkage::Private,
                                    uniqueName("cleave.ints"),
                                    i64Array(padded));
    });
    return LLVM::AddressOfOp::create(b, loc, global);
  }

  Value constI32(int64_t v) {
    return LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(v));
  }
  Value constI64(int64_t v) {
    return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
  }
  Value constF64(double v) {
    return LLVM::ConstantOp::create(b, loc, f64, b.getF64FloatAttr(v));
  }
  Value null() { return LLVM::ZeroOp::create(b, loc, ptr); }

  /// Calls the runtime function `name`, declaring it on first use.
  void call(StringRef name, ValueRange args) {
    auto fn = module.lookupSymbol<LLVM::LLVMFuncOp>(name);
    if (!fn) {
      SmallVector<Type> types(args.getTypes());
      auto fnType =
          LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), types);
      fn = atModuleStart(
          [&] { return LLVM::LLVMFuncOp::create(b, loc, name, fnType); });
    }
    LLVM::CallOp::create(b, loc, fn, args);
  }

  //===--- Ops -------------------------------------------------------===//

  /// Descriptors of the operands and results of `op` (null for absent).
  FailureOr<SmallVector<Value>> tensors(Operation *op, ValueRange values) {
    SmallVector<Value> descs;
    for (Value v : values) {
      auto it = offsets.find(v);
      if (it == offsets.end())
        return op->emitOpError("has no planned offset; run "
                               "-cleave-plan-memory first");
      FailureOr<Value> d = desc(it->second, v.getType(), op);
      if (failed(d))
        return failure();
      descs.push_back(*d);
    }
    return descs;
  }

  LogicalResult lowerOp(Operation *op);

  /// The descriptor of the storage of parameter `ref`.
  /// Copies an update's operand into its result's buffer, unless the memory
  /// plan placed them together (the update then runs in place).
  void copyUnlessAliased(Value operand, Value result, Value operandDesc,
                         Value resultDesc) {
    if (offsets.lookup(operand) != offsets.lookup(result))
      call("cleave_rt_copy", {arena, operandDesc, resultDesc});
  }

  FailureOr<Value> paramDesc(FlatSymbolRefAttr ref, Operation *user) {
    auto param = module.lookupSymbol<ParamOp>(ref);
    if (!param || !param->hasAttr(kOffsetAttr))
      return user->emitOpError("names ")
             << ref << ", which is not a planned graph.param";
    return desc(cast<IntegerAttr>(param->getAttr(kOffsetAttr)).getInt(),
                param.getType(), user);
  }

  ModuleOp module;
  MLIRContext *ctx;
  OpBuilder b;
  Location loc;
  Type i8, i32, i64, f64, ptr, descType, namedType;
  Value arena;
  DenseMap<Value, int64_t> offsets;
  llvm::StringMap<LLVM::GlobalOp> descs;
  int64_t counter = 0;

public:
  /// The metadata table of named tensors.
  struct Named {
    std::string name;
    int64_t offset;
    Type type;
    std::string initData; // bytes, when present
    bool hasInitData = false;
    std::string initFile;
    int64_t initOffset = 0;
  };
  Value namedTable(ArrayRef<Named> entries, Operation *where, bool &ok);
  LogicalResult emitProgramInfo(func::FuncOp fn);
};

template <typename T> int64_t enumValue(T v) {
  return static_cast<int64_t>(v);
}

LogicalResult Lowering::lowerOp(Operation *op) {
  auto operands = tensors(op, op->getOperands());
  if (failed(operands))
    return failure();
  auto results = tensors(op, op->getResults());
  if (failed(results))
    return failure();
  SmallVector<Value> in = *operands, out = *results;

  auto unary = [&](int64_t kind) {
    call("cleave_rt_unary", {arena, constI32(kind), in[0], out[0]});
    return success();
  };
  auto binary = [&](int64_t kind) {
    call("cleave_rt_binary", {arena, constI32(kind), in[0], in[1], out[0]});
    return success();
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ReadParamOp>([](auto) { return success(); })
      .Case<ReshapeOp>([&](ReshapeOp r) {
        if (offsets[r.getOperand()] != offsets[r.getResult()])
          call("cleave_rt_copy", {arena, in[0], out[0]});
        return success();
      })
      .Case<ConstantOp>([&](ConstantOp c) -> LogicalResult {
        FailureOr<std::string> bytes = elementBytes(c.getValue());
        if (failed(bytes))
          return c.emitOpError("has a value the runtime cannot hold");
        call("cleave_rt_constant",
             {arena, out[0], bytesGlobal("cleave.const", *bytes)});
        return success();
      })
      .Case<IotaOp>([&](IotaOp o) {
        call("cleave_rt_iota", {arena, out[0], constI64(o.getDim())});
        return success();
      })
      .Case<NegOp>([&](auto) { return unary(0); })
      .Case<AbsOp>([&](auto) { return unary(1); })
      .Case<ReluOp>([&](auto) { return unary(2); })
      .Case<ExpOp>([&](auto) { return unary(3); })
      .Case<LogOp>([&](auto) { return unary(4); })
      .Case<SqrtOp>([&](auto) { return unary(5); })
      .Case<RsqrtOp>([&](auto) { return unary(6); })
      .Case<ReciprocalOp>([&](auto) { return unary(7); })
      .Case<TanhOp>([&](auto) { return unary(8); })
      .Case<ErfOp>([&](auto) { return unary(9); })
      .Case<SigmoidOp>([&](auto) { return unary(10); })
      .Case<SiluOp>([&](auto) { return unary(11); })
      .Case<SinOp>([&](auto) { return unary(12); })
      .Case<CosOp>([&](auto) { return unary(13); })
      .Case<GeluOp>([&](GeluOp g) {
        return unary(g.getApproximate() == GeluApproximation::Tanh ? 15 : 14);
      })
      .Case<AddOp>([&](auto) { return binary(0); })
      .Case<SubOp>([&](auto) { return binary(1); })
      .Case<MulOp>([&](auto) { return binary(2); })
      .Case<DivOp>([&](auto) { return binary(3); })
      .Case<PowOp>([&](auto) { return binary(4); })
      .Case<MaxOp>([&](auto) { return binary(5); })
      .Case<MinOp>([&](auto) { return binary(6); })
      .Case<CompareOp>([&](CompareOp c) {
        call("cleave_rt_compare", {arena, constI32(enumValue(c.getDirection())),
                                   in[0], in[1], out[0]});
        return success();
      })
      .Case<WhereOp>([&](auto) {
        call("cleave_rt_where", {arena, in[0], in[1], in[2], out[0]});
        return success();
      })
      .Case<CastOp>([&](auto) {
        call("cleave_rt_cast", {arena, in[0], out[0]});
        return success();
      })
      .Case<MatmulOp>([&](auto) {
        call("cleave_rt_matmul", {arena, in[0], in[1], out[0]});
        return success();
      })
      .Case<LinearOp>([&](LinearOp l) {
        Value pre = l.getPreactivation() ? out[1] : null();
        call("cleave_rt_linear",
             {arena, in[0], in[1], in[2], out[0], pre,
              constI32(l.getTransposeWeight() ? 1 : 0),
              constI32(enumValue(l.getActivation()))});
        return success();
      })
      .Case<GemmOp>([&](GemmOp g) {
        Value dbias = g.getBiasGrad() ? out[1] : null();
        call("cleave_rt_gemm", {arena, in[0], in[1], out[0], dbias,
                                constI32(g.getTransposeLhs() ? 1 : 0),
                                constI32(g.getTransposeRhs() ? 1 : 0)});
        return success();
      })
      .Case<MatmulGeluGradOp>([&](MatmulGeluGradOp g) {
        Value dbias = g.getBiasGrad() ? out[1] : null();
        int64_t activation =
            enumValue(g.getApproximate() == GeluApproximation::Tanh
                          ? Activation::GeluTanh
                          : Activation::Gelu);
        call("cleave_rt_matmul_gelu_grad",
             {arena, in[0], in[1], in[2], out[0], dbias,
              constI32(g.getTransposeWeight() ? 1 : 0), constI32(activation)});
        return success();
      })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto s) {
        call("cleave_rt_softmax",
             {arena, in[0], out[0], constI64(s.getDim()),
              constI32(isa<LogSoftmaxOp>(s.getOperation()) ? 1 : 0)});
        return success();
      })
      .Case<ReduceOp>([&](ReduceOp r) {
        call("cleave_rt_reduce",
             {arena, constI32(enumValue(r.getKind())), in[0], out[0],
              int64s(r.getDims()), constI64(r.getDims().size())});
        return success();
      })
      .Case<LayerNormOp>([&](LayerNormOp l) {
        Value bias = l.getBias() ? in[2] : null();
        call("cleave_rt_layer_norm",
             {arena, in[0], in[1], bias, out[0], constI64(l.getDim()),
              constF64(l.getEpsilon().convertToDouble())});
        return success();
      })
      .Case<RmsNormOp>([&](RmsNormOp r) {
        call("cleave_rt_rms_norm",
             {arena, in[0], in[1], out[0], constI64(r.getDim()),
              constF64(r.getEpsilon().convertToDouble())});
        return success();
      })
      .Case<TransposeOp>([&](TransposeOp t) {
        call("cleave_rt_transpose", {arena, in[0], out[0], int64s(t.getPerm())});
        return success();
      })
      .Case<BroadcastInDimOp>([&](BroadcastInDimOp bc) {
        call("cleave_rt_broadcast_in_dim",
             {arena, in[0], out[0], int64s(bc.getDims())});
        return success();
      })
      .Case<SliceOp>([&](SliceOp s) {
        call("cleave_rt_slice", {arena, in[0], out[0], int64s(s.getStart()),
                                 int64s(s.getStridesOrOnes())});
        return success();
      })
      .Case<SplitOp>([&](SplitOp s) {
        int64_t rank = s.getOperand().getType().getRank();
        SmallVector<int64_t> start(rank, 0), ones(rank, 1);
        for (auto [i, size] : llvm::enumerate(s.getSizes())) {
          call("cleave_rt_slice",
               {arena, in[0], out[i], int64s(start), int64s(ones)});
          start[s.getDim()] += size;
        }
        return success();
      })
      .Case<ConcatOp>([&](ConcatOp c) {
        // A constant array of the input descriptors' addresses.
        auto arrayType = LLVM::LLVMArrayType::get(ptr, in.size());
        auto global = atModuleStart([&] {
          auto g = LLVM::GlobalOp::create(b, loc, arrayType, true,
                                          LLVM::Linkage::Private,
                                          uniqueName("cleave.list"),
                                          Attribute());
          Block *block = b.createBlock(&g.getInitializerRegion());
          b.setInsertionPointToStart(block);
          Value list = LLVM::UndefOp::create(b, loc, arrayType);
          for (auto [i, d] : llvm::enumerate(in)) {
            auto addr = cast<LLVM::AddressOfOp>(d.getDefiningOp());
            Value a = LLVM::AddressOfOp::create(b, loc, ptr,
                                                addr.getGlobalName());
            list = LLVM::InsertValueOp::create(b, loc, list, a,
                                               ArrayRef<int64_t>{int64_t(i)});
          }
          LLVM::ReturnOp::create(b, loc, list);
          return g;
        });
        Value list = LLVM::AddressOfOp::create(b, loc, global);
        call("cleave_rt_concat", {arena, list, constI64(in.size()), out[0],
                                  constI64(c.getDim())});
        return success();
      })
      .Case<GatherOp>([&](GatherOp g) {
        call("cleave_rt_gather",
             {arena, in[0], in[1], out[0], constI64(g.getDim())});
        return success();
      })
      .Case<TopKOp>([&](TopKOp t) {
        call("cleave_rt_topk",
             {arena, in[0], out[0], out[1], constI64(t.getK()),
              constI64(t.getDim()), constI32(t.getSmallest() ? 1 : 0)});
        return success();
      })
      .Case<AttentionOp>([&](AttentionOp a) {
        double scale = a.getScale()
                           ? a.getScale()->convertToDouble()
                           : 1.0 / std::sqrt(static_cast<double>(
                                 a.getQuery().getType().getDimSize(3)));
        Value mask = a.getMask() ? in[3] : null();
        call("cleave_rt_attention",
             {arena, in[0], in[1], in[2], mask, out[0],
              constI32(a.getCausal() ? 1 : 0), constF64(scale)});
        return success();
      })
      .Case<CrossEntropyOp>([&](CrossEntropyOp c) {
        std::optional<int64_t> ignore = c.getIgnoreIndex();
        call("cleave_rt_cross_entropy",
             {arena, in[0], in[1], out[0], constI32(ignore ? 1 : 0),
              constI64(ignore.value_or(0)),
              constI32(static_cast<int64_t>(c.getReduction()))});
        return success();
      })
      .Case<MseOp>([&](auto) {
        call("cleave_rt_mse", {arena, in[0], in[1], out[0]});
        return success();
      })
      .Case<RouterTopKOp>([&](RouterTopKOp r) {
        call("cleave_rt_router_topk",
             {arena, in[0], out[0], out[1], constI64(r.getK()),
              constI32(r.getNormalize() ? 1 : 0)});
        return success();
      })
      .Case<MoeDispatchOp>([&](auto) {
        call("cleave_rt_moe_dispatch", {arena, in[0], in[1], out[0]});
        return success();
      })
      .Case<ExpertMatmulOp>([&](auto) {
        call("cleave_rt_expert_matmul", {arena, in[0], in[1], out[0]});
        return success();
      })
      .Case<MoeCombineOp>([&](auto) {
        call("cleave_rt_moe_combine", {arena, in[0], in[1], in[2], out[0]});
        return success();
      })
      .Case<GeluGradOp>([&](GeluGradOp g) {
        int64_t kind =
            g.getApproximate() == GeluApproximation::Tanh ? 15 : 14;
        call("cleave_rt_unary_grad",
             {arena, constI32(kind), in[0], in[1], out[0]});
        return success();
      })
      .Case<SiluGradOp>([&](auto) {
        call("cleave_rt_unary_grad",
             {arena, constI32(11), in[0], in[1], out[0]});
        return success();
      })
      .Case<LayerNormGradOp>([&](LayerNormGradOp l) {
        // The bias gradient is skipped when nothing reads it.
        Value dbias = l.getBiasGrad().use_empty() ? null() : out[2];
        call("cleave_rt_layer_norm_grad",
             {arena, in[0], in[1], in[2], out[0], out[1], dbias,
              constI64(l.getDim()),
              constF64(l.getEpsilon().convertToDouble())});
        return success();
      })
      .Case<RmsNormGradOp>([&](RmsNormGradOp r) {
        call("cleave_rt_rms_norm_grad",
             {arena, in[0], in[1], in[2], out[0], out[1],
              constI64(r.getDim()),
              constF64(r.getEpsilon().convertToDouble())});
        return success();
      })
      .Case<AttentionGradOp>([&](AttentionGradOp a) {
        Value mask = a.getMask() ? in[4] : null();
        call("cleave_rt_attention_grad",
             {arena, in[0], in[1], in[2], mask, in[3], out[0], out[1], out[2],
              constI32(a.getCausal() ? 1 : 0),
              constF64(a.getScale().convertToDouble())});
        return success();
      })
      .Case<GatherGradOp>([&](GatherGradOp g) {
        call("cleave_rt_gather_grad",
             {arena, in[0], in[1], out[0], constI64(g.getDim())});
        return success();
      })
      .Case<SliceGradOp>([&](SliceGradOp s) {
        call("cleave_rt_slice_grad", {arena, in[0], out[0],
                                      int64s(s.getStart()),
                                      int64s(s.getStrides())});
        return success();
      })
      .Case<CrossEntropyGradOp>([&](CrossEntropyGradOp c) {
        std::optional<int64_t> ignore = c.getIgnoreIndex();
        call("cleave_rt_cross_entropy_grad",
             {arena, in[0], in[1], in[2], out[0], constI32(ignore ? 1 : 0),
              constI64(ignore.value_or(0)),
              constI32(static_cast<int64_t>(c.getReduction()))});
        return success();
      })
      .Case<AssignOp>([&](AssignOp a) -> LogicalResult {
        auto param = module.lookupSymbol<ParamOp>(a.getParamAttr());
        if (param && param->hasAttr(kOffsetAttr) &&
            cast<IntegerAttr>(param->getAttr(kOffsetAttr)).getInt() ==
                offsets.lookup(a.getValue()))
          return success(); // computed in the parameter's storage
        FailureOr<Value> desc = paramDesc(a.getParamAttr(), a);
        if (failed(desc))
          return failure();
        call("cleave_rt_copy", {arena, in[0], *desc});
        return success();
      })
      .Case<SgdOp>([&](SgdOp u) -> LogicalResult {
        // The kernel updates in place: the results start as the operands.
        copyUnlessAliased(u.getParam(), u.getNewParam(), in[0], out[0]);
        Value buf = null();
        if (Value b = u.getMomentumBuffer()) {
          unsigned i = u.getGradScale() ? 4 : 3;
          copyUnlessAliased(b, u.getNewMomentumBuffer(), in[i], out[1]);
          buf = out[1];
        }
        Value scale = u.getGradScale() ? in[3] : null();
        call("cleave_rt_sgd",
             {arena, out[0], in[1], buf, in[2], scale,
              constF64(u.getLr().convertToDouble()),
              constF64(u.getMomentum().convertToDouble()),
              constF64(u.getDampening().convertToDouble()),
              constF64(u.getWeightDecay().convertToDouble()),
              constI32(u.getNesterov() ? 1 : 0)});
        return success();
      })
      .Case<AdamwOp>([&](AdamwOp u) -> LogicalResult {
        copyUnlessAliased(u.getParam(), u.getNewParam(), in[0], out[0]);
        copyUnlessAliased(u.getFirstMoment(), u.getNewFirstMoment(), in[2],
                          out[1]);
        copyUnlessAliased(u.getSecondMoment(), u.getNewSecondMoment(), in[3],
                          out[2]);
        Value scale = u.getGradScale() ? in[5] : null();
        call("cleave_rt_adamw",
             {arena, out[0], in[1], out[1], out[2], in[4], scale,
              constF64(u.getLr().convertToDouble()),
              constF64(u.getBeta1().convertToDouble()),
              constF64(u.getBeta2().convertToDouble()),
              constF64(u.getEps().convertToDouble()),
              constF64(u.getWeightDecay().convertToDouble())});
        return success();
      })
      .Default([](Operation *op) {
        if (isa<dist::DistDialect>(op->getDialect()))
          return op->emitOpError(
              "is lowered by the rank-aware runtime, which this build does "
              "not have yet");
        return op->emitOpError("cannot be lowered to the runtime");
      });
}

Value Lowering::namedTable(ArrayRef<Named> entries, Operation *where,
                           bool &ok) {
  if (entries.empty())
    return {};
  auto arrayType = LLVM::LLVMArrayType::get(namedType, entries.size());
  // Pointees first (they are globals at the module start).
  struct Ptrs {
    std::string name, data, file;
  };
  SmallVector<Ptrs> ptrs;
  auto symbolOf = [](Value addr) {
    return addr ? cast<LLVM::AddressOfOp>(addr.getDefiningOp())
                      .getGlobalName()
                      .str()
                : std::string();
  };
  SmallVector<SmallVector<int64_t>> words;
  for (const Named &e : entries) {
    Ptrs p;
    p.name = symbolOf(cString(e.name));
    if (e.hasInitData)
      p.data = symbolOf(bytesGlobal("cleave.init", e.initData));
    if (!e.initFile.empty())
      p.file = symbolOf(cString(e.initFile));
    ptrs.push_back(p);
    FailureOr<SmallVector<int64_t>> w = descWords(e.offset, e.type);
    if (failed(w)) {
      where->emitOpError("cannot describe '") << e.name << "' to the runtime";
      ok = false;
      return {};
    }
    words.push_back(*w);
  }
  auto global = atModuleStart([&] {
    auto g = LLVM::GlobalOp::create(b, loc, arrayType, true,
                                    LLVM::Linkage::Private,
                                    uniqueName("cleave.tensors"), Attribute());
    b.setInsertionPointToStart(b.createBlock(&g.getInitializerRegion()));
    Value table = LLVM::UndefOp::create(b, loc, arrayType);
    auto addr = [&](const std::string &sym) -> Value {
      if (sym.empty())
        return LLVM::ZeroOp::create(b, loc, ptr);
      return LLVM::AddressOfOp::create(b, loc, ptr, sym);
    };
    for (auto [i, e] : llvm::enumerate(entries)) {
      int64_t idx = i;
      auto insert = [&](Value v, int64_t field) {
        table = LLVM::InsertValueOp::create(b, loc, table, v,
                                            ArrayRef<int64_t>{idx, field});
      };
      insert(addr(ptrs[i].name), 0);
      insert(LLVM::ConstantOp::create(b, loc, descType, i64Array(words[i])), 1);
      insert(addr(ptrs[i].data), 2);
      insert(addr(ptrs[i].file), 3);
      insert(LLVM::ConstantOp::create(b, loc, i64,
                                      b.getI64IntegerAttr(e.initOffset)),
             4);
    }
    LLVM::ReturnOp::create(b, loc, table);
    return g;
  });
  return LLVM::AddressOfOp::create(b, loc, global);
}

LogicalResult Lowering::emitProgramInfo(func::FuncOp fn) {
  SmallVector<Named> params, inputs, outputs;
  // The model's parameters first, then the optimizer state.
  SmallVector<ParamOp> ordered;
  for (auto param : module.getOps<ParamOp>())
    if (!param->hasAttr(kOptimizerStateAttr))
      ordered.push_back(param);
  int64_t numModelParams = ordered.size();
  for (auto param : module.getOps<ParamOp>())
    if (param->hasAttr(kOptimizerStateAttr))
      ordered.push_back(param);
  for (ParamOp param : ordered) {
    Named e{param.getSymName().str(),
            cast<IntegerAttr>(param->getAttr(kOffsetAttr)).getInt(),
            param.getType(), {}, false, {}, 0};
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
  for (BlockArgument arg : fn.getArguments())
    inputs.push_back(
        {nameOf(fn.getArgAttrDict(arg.getArgNumber()), "input",
                arg.getArgNumber()),
         cast<IntegerAttr>(fn.getArgAttr(arg.getArgNumber(), kOffsetAttr))
             .getInt(),
         arg.getType(),
         {},
         false,
         {},
         0});
  Operation *ret = fn.getBody().front().getTerminator();
  for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
    auto it = offsets.find(v);
    if (it == offsets.end())
      return ret->emitOpError("returns a value without a planned offset");
    outputs.push_back({nameOf(fn.getResultAttrDict(i), "output", i),
                       it->second, v.getType(), {}, false, {}, 0});
  }

  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  auto infoType = LLVM::LLVMStructType::getLiteral(
      ctx, {i32, i32, i64, i64, i64, ptr, i64, ptr, i64, ptr, ptr, ptr});
  auto config = fn->getAttrOfType<StringAttr>(kTrainingConfigAttr);
  auto source = module->getAttrOfType<StringAttr>(kSourceModelAttr);
  auto info = LLVM::GlobalOp::create(b, loc, infoType, /*isConstant=*/true,
                                     LLVM::Linkage::External, "cleave_program",
                                     Attribute());
  b.setInsertionPointToStart(b.createBlock(&info.getInitializerRegion()));
  bool ok = true;
  Value paramTable = namedTable(params, fn, ok);
  Value inputTable = namedTable(inputs, fn, ok);
  Value outputTable = namedTable(outputs, fn, ok);
  if (!ok)
    return failure();
  Value s = LLVM::UndefOp::create(b, loc, infoType);
  auto field = [&](Value v, int64_t i) {
    s = LLVM::InsertValueOp::create(b, loc, s, v, ArrayRef<int64_t>{i});
  };
  auto orNull = [&](Value v) { return v ? v : null(); };
  auto string = [&](StringAttr attr) {
    return attr ? cString(attr.getValue()) : null();
  };
  field(constI32(kAbiVersion), 0);
  field(constI32(config ? 1 : 0), 1); // CLEAVE_PROGRAM_TRAINING : INFERENCE
  field(constI64(cast<IntegerAttr>(fn->getAttr(kArenaBytesAttr)).getInt()), 2);
  field(constI64(params.size()), 3);
  field(constI64(numModelParams), 4);
  field(orNull(paramTable), 5);
  field(constI64(inputs.size()), 6);
  field(orNull(inputTable), 7);
  field(constI64(outputs.size()), 8);
  field(orNull(outputTable), 9);
  field(string(source), 10);
  field(string(config), 11);
  LLVM::ReturnOp::create(b, loc, s);
  return success();
}

LogicalResult Lowering::run(func::FuncOp fn) {
  if (!fn->hasAttr(kArenaBytesAttr))
    return fn.emitOpError("has no memory plan; run -cleave-plan-memory first");
  for (Operation &op : module.getBody()->getOperations())
    if (!isa<func::FuncOp, ParamOp, dist::MeshOp>(op))
      return op.emitOpError("cannot be lowered to the runtime");
  // A partitioned program (a parameter read as its block) needs each rank
  // to take its block of the initial value, which the rank-aware program
  // metadata will describe; until then it is refused, not run wrongly.
  WalkResult local = fn.walk([&](ReadParamOp read) {
    auto param = module.lookupSymbol<ParamOp>(read.getParamAttr());
    if (param && param.getType() != read.getType()) {
      read.emitOpError("reads the block ")
          << read.getType() << " of sharded parameter @" << read.getParam()
          << ": lowering partitioned programs needs the rank-aware runtime, "
             "which this build does not have yet";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (local.wasInterrupted())
    return failure();
  Block &body = fn.getBody().front();
  for (BlockArgument arg : fn.getArguments())
    offsets[arg] =
        cast<IntegerAttr>(fn.getArgAttr(arg.getArgNumber(), kOffsetAttr))
            .getInt();
  for (Operation &op : body)
    if (auto planned = op.getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr))
      for (auto [r, off] : llvm::zip(op.getResults(), planned.asArrayRef()))
        offsets[r] = off;

  b.setInsertionPointToEnd(module.getBody());
  auto runType = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                             {ptr});
  auto run = LLVM::LLVMFuncOp::create(b, fn.getLoc(), "cleave_program_run",
                                      runType);
  Block *entry = run.addEntryBlock(b);
  arena = entry->getArgument(0);
  b.setInsertionPointToStart(entry);
  for (Operation &op : body) {
    if (isa<func::ReturnOp>(op))
      continue;
    loc = op.getLoc();
    if (failed(lowerOp(&op)))
      return failure();
  }
  loc = fn.getLoc();
  LLVM::ReturnOp::create(b, loc, ValueRange());
  if (failed(emitProgramInfo(fn)))
    return failure();

  fn.erase();
  for (auto param : llvm::make_early_inc_range(module.getOps<ParamOp>()))
    param.erase();
  return success();
}

struct LowerToRuntimePass
    : cleave::impl::LowerToRuntimePassBase<LowerToRuntimePass> {
  using LowerToRuntimePassBase::LowerToRuntimePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp fn = getEntryFunction(module, entry);
    if (!fn) {
      module.emitError("no entry function '")
          << entry << "' (and not exactly one function) to lower";
      return signalPassFailure();
    }
    if (failed(Lowering(module).run(fn)))
      signalPassFailure();
  }
};
} // namespace
