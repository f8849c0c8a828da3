//===- RuntimeLowering.h - the lowering to the runtime's C ABI -*- C++ -*-===//
//
// What the files of -cleave-lower-to-runtime share. The lowering is a
// dialect conversion of the entry function: a tensor converts to the
// address of its constant descriptor (DescriptorConverter), each op family
// has a pattern (over RuntimePattern) that emits its runtime calls with a
// RuntimeBuilder, and the state that the patterns share (Lowering: the
// memory plan's offsets, the descriptor globals, the communicator groups)
// outlives them for the program's metadata, `cleave_program`
// (ProgramInfo.cpp). The driver is LowerToRuntime.cpp, the graph ops'
// patterns are LowerGraph.cpp's, the dist ops' LowerDist.cpp's. Every number
// the runtime reads (dtypes, kinds, the ABI version) is a name from the
// runtime's own header, cleave_rt_enums.h, never a copy.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_RUNTIMELOWERING_H
#define CLEAVE_TRANSFORMS_RUNTIMELOWERING_H

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/MemoryPlan.h"
#include "cleave/Transforms/Passes.h"

#include "cleave/Runtime/cleave_rt.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Transforms/DialectConversion.h"

#include "llvm/ADT/StringSet.h"

#include <cstddef>
#include <optional>
#include <string>

namespace cleave::lowering {

using namespace mlir;
using namespace cleave::graph;

/// The runtime's dtype (enum cleave_dtype) of an element type.
inline FailureOr<int64_t> dtypeCode(Type t) {
  if (t.isF32())
    return CLEAVE_F32;
  if (t.isF16())
    return CLEAVE_F16;
  if (t.isBF16())
    return CLEAVE_BF16;
  if (t.isInteger(64))
    return CLEAVE_I64;
  if (t.isInteger(32))
    return CLEAVE_I32;
  if (t.isInteger(1))
    return CLEAVE_I1;
  return failure();
}

// The graph dialect's enums map to the runtime's by name, so that neither
// side depends on the other's order.
inline int32_t runtimeKind(CompareDirection direction) {
  switch (direction) {
  case CompareDirection::EQ:
    return CLEAVE_EQ;
  case CompareDirection::NE:
    return CLEAVE_NE;
  case CompareDirection::LT:
    return CLEAVE_LT;
  case CompareDirection::LE:
    return CLEAVE_LE;
  case CompareDirection::GT:
    return CLEAVE_GT;
  case CompareDirection::GE:
    return CLEAVE_GE;
  }
  llvm_unreachable("unknown compare direction");
}

inline int32_t runtimeKind(ReductionKind kind) {
  switch (kind) {
  case ReductionKind::Sum:
    return CLEAVE_SUM;
  case ReductionKind::Mean:
    return CLEAVE_MEAN;
  case ReductionKind::Max:
    return CLEAVE_MAX_REDUCE;
  case ReductionKind::Min:
    return CLEAVE_MIN_REDUCE;
  }
  llvm_unreachable("unknown reduction kind");
}

inline int32_t runtimeKind(Activation activation) {
  switch (activation) {
  case Activation::None:
    return CLEAVE_ACT_NONE;
  case Activation::Gelu:
    return CLEAVE_ACT_GELU_ERF;
  case Activation::GeluTanh:
    return CLEAVE_ACT_GELU_TANH;
  }
  llvm_unreachable("unknown activation");
}

/// The unary kind of a GELU (cleave_rt_unary, cleave_rt_unary_grad).
inline int32_t geluKind(GeluApproximation approximate) {
  return approximate == GeluApproximation::Tanh ? CLEAVE_GELU_TANH
                                                : CLEAVE_GELU_ERF;
}

/// The bytes of an elements attribute in the runtime's layout (i1 as one
/// byte per element, splats expanded); failure for a dense_resource
/// without data or an unknown attribute.
FailureOr<std::string> elementBytes(Attribute attr);

/// The words of a cleave_tensor descriptor: offset, dtype and rank, shape.
constexpr int64_t kDescWords = 2 + CLEAVE_RT_MAX_RANK;
static_assert(sizeof(cleave_tensor) == kDescWords * sizeof(int64_t),
              "the descriptor globals must have cleave_tensor's layout");
// The tables and the info struct below are literal LLVM structs of the
// header's fields, in order; on the host their layout is the header's.
static_assert(offsetof(cleave_named_tensor, role) ==
                      3 * sizeof(void *) + sizeof(cleave_tensor) +
                          sizeof(int64_t) &&
                  offsetof(cleave_named_tensor, sharding) ==
                      offsetof(cleave_named_tensor, role) + sizeof(void *),
              "cleave_named_tensor is {ptr, desc, ptr, ptr, i64, i32, ptr}");
static_assert(offsetof(cleave_program_info, training_config) ==
                      2 * sizeof(int32_t) + 3 * sizeof(int64_t) +
                          sizeof(void *) +
                          2 * (sizeof(int64_t) + sizeof(void *)) +
                          sizeof(void *) &&
                  offsetof(cleave_program_info, mesh_rank) ==
                      offsetof(cleave_program_info, training_config) +
                          sizeof(void *) &&
                  offsetof(cleave_program_info, comm) ==
                      offsetof(cleave_program_info, mesh_rank) +
                          3 * sizeof(void *) + sizeof(int64_t) +
                          sizeof(void *),
              "cleave_program_info is {i32, i32, i64, i64, i64, ptr, i64, "
              "ptr, i64, ptr, ptr, ptr, i32, ptr, ptr, i64, ptr, ptr, i64, "
              "i64, ptr, ptr}");
static_assert(offsetof(cleave_program_info, num_stages) ==
                      offsetof(cleave_program_info, comm) + sizeof(void *) &&
                  offsetof(cleave_program_info, stage_runs) ==
                      offsetof(cleave_program_info, num_stages) +
                          2 * sizeof(int64_t) + sizeof(void *) &&
                  offsetof(cleave_program_info, eval) ==
                      offsetof(cleave_program_info, stage_runs) +
                          sizeof(void *) &&
                  offsetof(cleave_program_info, flops) ==
                      offsetof(cleave_program_info, eval) +
                          2 * sizeof(void *) &&
                  sizeof(cleave_program_info) ==
                      offsetof(cleave_program_info, flops) + sizeof(double),
              "cleave_program_info ends {i64, i64, ptr, ptr, ptr, ptr, f64} "
              "(ABI 5 and 7)");
static_assert(offsetof(cleave_program_context, stage) == 2 * sizeof(void *),
              "cleave_program_context is {ptr, ptr, i64}");

/// The LLVM struct of cleave_program_info.
inline LLVM::LLVMStructType programInfoType(MLIRContext *ctx) {
  Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  return LLVM::LLVMStructType::getLiteral(
      ctx, {i32, i32, i64, i64, i64, ptr, i64, ptr, i64, ptr, ptr, ptr, i32,
            ptr, ptr, i64, ptr, ptr, i64, i64, ptr, ptr, ptr, ptr,
            Float64Type::get(ctx)});
}

/// The fields of cleave_program_info that -cleave-link-eval fills: the
/// evaluation program and its run function.
constexpr int64_t kEvalInfoField = 22, kEvalRunField = 23;
/// The field of cleave_program_info with a run's FLOPs.
constexpr int64_t kFlopsField = 24;

/// The attribute of a pipeline stage's module (-dist-pipeline-parallel):
/// its stage index; the lowering names the stage's symbols after it.
constexpr llvm::StringLiteral kStageAttr = dist::DistDialect::getStageAttrName();
/// The communicator groups of every stage, in one order (an array of
/// arrays of mesh axis names), which the lowering numbers them by.
constexpr llvm::StringLiteral kGroupsAttr =
    dist::DistDialect::getGroupsAttrName();
/// The prefix of the evaluation program's symbols (-cleave-lower-to-runtime
/// symbol-prefix, which the evaluation pipeline sets).
constexpr llvm::StringLiteral kEvalSymbolPrefix = "cleave_eval_";
/// Moves the code and data of the lowered program `sub` (nested in `top`)
/// into `top` and erases `sub`; `names` holds the symbols of `top`. An
/// external declaration both have stays once; any other symbol both define
/// is an error.
LogicalResult takeInProgram(ModuleOp top, ModuleOp sub,
                            llvm::StringSet<> &names);
/// The names of the symbols directly in `module`.
llvm::StringSet<> symbolNames(ModuleOp module);

/// The prefix of stage `s`'s symbols.
inline std::string stageSymbolPrefix(int64_t s) {
  return "cleave_stage" + std::to_string(s) + "_";
}
/// The FLOPs of `op`'s matrix products (cleave_program_info.flops): 2 per
/// multiply-add of each matmul, linear layer, expert product and
/// attention; 0 for any other op (ProgramInfo.cpp).
double matrixProductFlops(Operation *op);

class Lowering;

/// The profiler's marks (ProfileMarks.cpp): before the conversion, a call
/// of cleave_rt_profile_mark with the op's constant cleave_rt_kernel_info
/// goes before each op of `fn`; after it, finishProfileMarks drops the
/// marks of ops that lowered to no runtime call from `run` and ends each
/// of its returns with a last mark (null).
void insertProfileMarks(Lowering &state, func::FuncOp fn);
void finishProfileMarks(LLVM::LLVMFuncOp run);

/// The words of a cleave_sharding and of a cleave_group.
constexpr int64_t kShardingWords =
    2 * CLEAVE_RT_MAX_RANK + CLEAVE_RT_MAX_RANK * CLEAVE_RT_MAX_MESH_RANK;
constexpr int64_t kGroupWords = 1 + CLEAVE_RT_MAX_MESH_RANK;
static_assert(sizeof(cleave_sharding) == kShardingWords * sizeof(int64_t) &&
                  sizeof(cleave_group) == kGroupWords * sizeof(int64_t),
              "cleave_sharding and cleave_group are arrays of int64_t");

/// An entry of a table of named tensors in the metadata
/// (cleave_named_tensor).
struct NamedTensor {
  std::string name;
  int64_t offset;
  Type type;
  std::string initData; // bytes, when present
  bool hasInitData = false;
  std::string initFile;
  int64_t initOffset = 0;
  int32_t role = 0; // enum cleave_param_role, parameters only
  std::optional<SmallVector<int64_t>> sharding; // cleave_sharding words
};

/// What `cleave_program` says of the program. It is read from the entry
/// function before the conversion replaces it, and emitted after, when the
/// collectives have added their communicator groups.
struct ProgramInfo {
  SmallVector<NamedTensor> params, inputs, outputs;
  int64_t numModelParams = 0;
  int64_t arenaBytes = 0;
  /// The training configuration (the loss keys for an evaluation program).
  DictionaryAttr trainingConfig;
  StringAttr sourceModel;
  cleave_program_kind kind = CLEAVE_PROGRAM_INFERENCE;
  /// The FLOPs of one run (cleave_program_info.flops).
  double flops = 0;
};

/// The state of one lowering: what its patterns share and the metadata
/// reads after them. The memory plan's offsets are keyed by the entry
/// function's original values, which the conversion leaves in place until
/// it commits (pattern rollback, its default): a pattern finds the offsets
/// of its op's own operands and results.
class Lowering {
public:
  explicit Lowering(ModuleOp module);

  /// Replaces `fn` with cleave_program_run and adds `cleave_program`.
  LogicalResult run(func::FuncOp fn);
  /// Numbers the groups of the module's dist.groups first, in order.
  LogicalResult presetGroups();

  /// The descriptor words of a tensor: offset, dtype | rank << 32, shape;
  /// failure for what the runtime cannot describe.
  static FailureOr<SmallVector<int64_t>> descWords(int64_t offset, Type type);

  /// The type a parameter is stored as: its block in a partitioned
  /// program (the memory plan's cleave.stored_type), else its own.
  static RankedTensorType storedType(ParamOp param) {
    if (auto stored = param->getAttrOfType<TypeAttr>(kStoredTypeAttr))
      return cast<RankedTensorType>(stored.getValue());
    return param.getType();
  }

  //===--- Partitioned programs (LowerDist.cpp) ----------------------===//

  /// The program's one mesh (null without one; several are refused).
  dist::MeshOp mesh() const { return meshes.empty() ? nullptr : meshes[0]; }
  /// The index of the communicator group of `axes` of `meshRef` in the
  /// program's group table, added on first use.
  FailureOr<int64_t> groupOf(Operation *op, FlatSymbolRefAttr meshRef,
                             ArrayAttr axes);
  /// The words of the cleave_sharding of a value of global type `global`
  /// sharded as `sharding`, or failure (naming `what`) for what the runtime
  /// cannot split: sub-axes and partial values.
  FailureOr<SmallVector<int64_t>> shardingWords(dist::ShardingAttr sharding,
                                                RankedTensorType global,
                                                Operation *where,
                                                const Twine &what);

  ModuleOp module;
  MLIRContext *ctx;
  /// The module's parameters, and the runtime functions and globals the
  /// lowering declared, by name: a module's lookupSymbol scans its ops, so
  /// one per op would make the lowering quadratic in the program's size.
  llvm::StringMap<ParamOp> params;
  llvm::StringMap<Operation *> declared;
  ParamOp lookupParam(FlatSymbolRefAttr ref) const {
    return params.lookup(ref.getValue());
  }
  /// The function or global `name` of the module, declared by `create` on
  /// first use.
  template <typename OpT>
  OpT lookupOrDeclare(StringRef name, function_ref<OpT()> create) {
    Operation *&slot = declared[name];
    if (!slot) {
      OpT found = module.lookupSymbol<OpT>(name);
      slot = found ? found.getOperation() : create().getOperation();
    }
    return cast<OpT>(slot);
  }
  Type i8, i32, i64, f64, ptr, descType, namedType;
  /// The arguments of cleave_program_run, once the function is converted.
  Value arena, context;
  SmallVector<dist::MeshOp> meshes;
  /// The communicator groups, as mesh axis indices, in table order.
  SmallVector<SmallVector<int64_t>> groups;
  /// What the program's own symbols start with: empty, or a pipeline
  /// stage's prefix (stageSymbolPrefix), so that the stages' lowered
  /// modules can be joined.
  std::string symbolPrefix;
  /// The run function's name: cleave_program_run, or <prefix>run.
  std::string runSymbol() const {
    return symbolPrefix.empty() ? "cleave_program_run" : symbolPrefix + "run";
  }
  /// The planned offset of each argument and op result of the function.
  DenseMap<Value, int64_t> offsets;
  /// The handle of each started collective, by its (original) result.
  DenseMap<Value, Value> handles;
  /// The handles of started buckets (whose results share one): whether a
  /// wait has completed it, so that the later waits do not wait again.
  DenseMap<void *, bool> bucketWaited;
  /// The descriptor globals, by their words. No pattern that made one is
  /// rolled back: each succeeds, with LLVM ops, which are legal.
  llvm::StringMap<LLVM::GlobalOp> descs;
  /// Zeros read in place of a null program context (loadHyperparameter).
  LLVM::GlobalOp noContext;
  /// Per program context: its hyperparameter array (or the zeros) and
  /// whether it has none, built at the function's entry on first use.
  DenseMap<Value, std::pair<Value, Value>> hyperparameters;
  int64_t counter = 0;
  /// Whether a pattern reported an error at its op.
  bool reportedError = false;
  /// Whether the program calls the profiler's marks (ProfileMarks.cpp).
  bool profile = true;

private:
  /// Reads the memory plan: every value an op of `fn` uses or defines
  /// needs an offset and a type the runtime describes.
  LogicalResult readPlan(func::FuncOp fn);

  /// Reads what `cleave_program` says of `fn` (ProgramInfo.cpp).
  FailureOr<ProgramInfo> describeProgram(func::FuncOp fn);
};

/// Builds the IR of runtime calls at one location: values and calls at the
/// builder's insertion point, globals at the module's start (so that they
/// precede their uses). The patterns build with their rewriter, which
/// tracks what they create; the metadata with a plain builder.
class RuntimeBuilder {
public:
  RuntimeBuilder(Lowering &state, OpBuilder &b, Location loc)
      : state(state), b(b), loc(loc), i8(state.i8), i32(state.i32),
        i64(state.i64), f64(state.f64), ptr(state.ptr),
        descType(state.descType), namedType(state.namedType) {}

  Value arena() const { return state.arena; }

  //===--- Descriptors -----------------------------------------------===//

  /// A pointer to the constant descriptor of a tensor at `offset` (of a
  /// type readPlan accepted).
  Value desc(int64_t offset, Type type) {
    FailureOr<SmallVector<int64_t>> words = Lowering::descWords(offset, type);
    assert(succeeded(words) && "a planned value the runtime cannot describe");
    std::string key;
    for (int64_t w : *words)
      key += std::to_string(w) + ",";
    LLVM::GlobalOp &global = state.descs[key];
    if (!global)
      global = atModuleStart([&] {
        return LLVM::GlobalOp::create(b, loc, descType, /*isConstant=*/true,
                                      LLVM::Linkage::Private,
                                      uniqueName("cleave.desc"),
                                      i64Array(*words));
      });
    return LLVM::AddressOfOp::create(b, loc, global).getResult();
  }

  /// The descriptor of a value of the entry function, from the plan.
  Value descOf(Value v) { return desc(state.offsets.lookup(v), v.getType()); }

  /// The descriptor of the storage of parameter `ref`.
  FailureOr<Value> paramDesc(FlatSymbolRefAttr ref, Operation *user) {
    ParamOp param = state.lookupParam(ref);
    if (!param || !param->hasAttr(kOffsetAttr))
      return user->emitOpError("names ")
             << ref << ", which is not a planned graph.param";
    return desc(cast<IntegerAttr>(param->getAttr(kOffsetAttr)).getInt(),
                Lowering::storedType(param));
  }

  /// Copies an update's operand into its result's buffer, unless the memory
  /// plan placed them together (the update then runs in place).
  void copyUnlessAliased(Value operand, Value result, Value operandDesc,
                         Value resultDesc) {
    if (state.offsets.lookup(operand) != state.offsets.lookup(result))
      call("cleave_rt_copy", {arena(), operandDesc, resultDesc});
  }

  //===--- Constants and globals -------------------------------------===//

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

  /// A pointer to a constant global of i64 `words` (a cleave_sharding or
  /// a table of cleave_group).
  Value wordsGlobal(StringRef prefix, ArrayRef<int64_t> words) {
    auto type = LLVM::LLVMArrayType::get(i64, words.size());
    auto global = atModuleStart([&] {
      return LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true,
                                    LLVM::Linkage::Private, uniqueName(prefix),
                                    i64Array(words));
    });
    return LLVM::AddressOfOp::create(b, loc, global);
  }

  /// A pointer to a constant array of the addresses of `globals` (each an
  /// llvm.mlir.addressof: descriptors, strings).
  Value addressList(StringRef prefix, ArrayRef<Value> globals) {
    auto arrayType = LLVM::LLVMArrayType::get(ptr, globals.size());
    auto global = atModuleStart([&] {
      auto g = LLVM::GlobalOp::create(b, loc, arrayType, /*isConstant=*/true,
                                      LLVM::Linkage::Private,
                                      uniqueName(prefix), Attribute());
      b.setInsertionPointToStart(b.createBlock(&g.getInitializerRegion()));
      Value list = LLVM::UndefOp::create(b, loc, arrayType);
      for (auto [i, d] : llvm::enumerate(globals)) {
        auto addr = cast<LLVM::AddressOfOp>(d.getDefiningOp());
        Value a = LLVM::AddressOfOp::create(b, loc, ptr, addr.getGlobalName());
        list = LLVM::InsertValueOp::create(b, loc, list, a,
                                           ArrayRef<int64_t>{int64_t(i)});
      }
      LLVM::ReturnOp::create(b, loc, list);
      return g;
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

  /// Calls the runtime function `name`, declaring it on first use; with a
  /// `result` type (a started collective's i64 handle), returns its value.
  Value call(StringRef name, ValueRange args, Type result = {}) {
    auto fn = state.lookupOrDeclare<LLVM::LLVMFuncOp>(name, [&] {
      SmallVector<Type> types(args.getTypes());
      auto fnType = LLVM::LLVMFunctionType::get(
          result ? result : LLVM::LLVMVoidType::get(state.ctx), types);
      return atModuleStart(
          [&] { return LLVM::LLVMFuncOp::create(b, loc, name, fnType); });
    });
    auto call = LLVM::CallOp::create(b, loc, fn, args);
    return result ? call.getResult() : Value();
  }

  //===--- The program context (LowerDist.cpp) -----------------------===//

  /// Loads the context's communicator (i32) or group rank (i64) of group
  /// `g`.
  Value loadComm(int64_t g);
  Value loadGroupRank(int64_t g);
  /// The double of run-time hyperparameter `slot` this call runs with:
  /// context->hyperparameters[slot], or `fallback` when the context or its
  /// hyperparameters are null (LowerGraph.cpp).
  Value loadHyperparameter(int32_t slot, double fallback);

  //===--- The metadata (ProgramInfo.cpp) ----------------------------===//

  /// The metadata table of named tensors.
  Value namedTable(ArrayRef<NamedTensor> entries);
  /// The mesh's axis names as a constant array of C strings.
  Value axisNames(dist::MeshOp m);
  /// The address of the communication engine's cleave_comm_engine.
  Value commEngine();
  /// The constant `cleave_program`, at the module's end.
  void programInfo(const ProgramInfo &info);

private:
  /// Inserts at the module's start, so globals precede their uses.
  template <typename Fn> auto atModuleStart(Fn fn) -> decltype(fn()) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(state.module.getBody());
    return fn();
  }

  std::string uniqueName(StringRef prefix) {
    return (state.symbolPrefix + prefix + "." + Twine(state.counter++)).str();
  }

  DenseElementsAttr i64Array(ArrayRef<int64_t> values) {
    auto type =
        RankedTensorType::get({static_cast<int64_t>(values.size())}, i64);
    return DenseElementsAttr::get(type, values);
  }

  Lowering &state;
  OpBuilder &b;
  Location loc;
  Type i8, i32, i64, f64, ptr, descType, namedType;
};

//===----------------------------------------------------------------------===//
// The conversion
//===----------------------------------------------------------------------===//

/// Each tensor converts to the address of its constant descriptor, an
/// `!llvm.ptr`: the pattern of the op that defines a value (or the
/// function's, for an argument) builds its descriptor from the memory plan,
/// and the ops that use it receive that address as their adaptor operand.
class DescriptorConverter : public TypeConverter {
public:
  explicit DescriptorConverter(MLIRContext *ctx) {
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    addConversion([ptr](RankedTensorType type) -> std::optional<Type> {
      if (failed(Lowering::descWords(0, type)))
        return Type(); // not describable: no conversion
      return ptr;
    });
  }
};

/// The lowering of one op to runtime calls, the base of each op family's
/// pattern. The adaptor's operands are the descriptors of the op's
/// operands; the descriptors of its results are built here, from the
/// memory plan, and replace the op, whose calls `lower` emits between the
/// two. A failure of `lower` is an error it reported at its op: the op is
/// still replaced and the conversion goes on (the conversion's own
/// "failed to legalize" then names only ops that no pattern lowers), and
/// the pass fails after it.
template <typename Op> class RuntimePattern : public OpConversionPattern<Op> {
public:
  RuntimePattern(const DescriptorConverter &converter, Lowering &state)
      : OpConversionPattern<Op>(converter, state.ctx), state(state) {}

  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const final {
    RuntimeBuilder rt(state, rewriter, op.getLoc());
    SmallVector<Value> results;
    for (Value result : op->getResults())
      results.push_back(rt.descOf(result));
    SmallVector<Value> operands(adaptor.getOperands());
    if (failed(lower(op, operands, results, rt)))
      state.reportedError = true;
    rewriter.replaceOp(op, results);
    return success();
  }

protected:
  /// Emits the calls of `op`, given the descriptors of its operands (`in`)
  /// and results (`out`).
  virtual LogicalResult lower(Op op, ArrayRef<Value> in, ArrayRef<Value> out,
                              RuntimeBuilder &rt) const = 0;

  Lowering &state;
};

/// A family whose ops lower to calls that cannot fail: `Family<Op>` has a
/// static `build(op, in, out, rt)` overload per op.
template <template <typename> class Family, typename Op>
struct CallPattern : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;

protected:
  LogicalResult lower(Op op, ArrayRef<Value> in, ArrayRef<Value> out,
                      RuntimeBuilder &rt) const override {
    Family<Op>::build(op, in, out, rt);
    return success();
  }
};

/// Adds `Family<Op>` for each of `Ops`: one op family's patterns.
template <template <typename> class Family, typename... Ops>
void addFamily(RewritePatternSet &patterns,
               const DescriptorConverter &converter, Lowering &state) {
  patterns.add<Family<Ops>...>(converter, state);
}

/// Cuts the body of the run function that `lowering` produced into private,
/// noinline functions of at most `chunkSize` runtime calls each, which it
/// calls in order (SplitRunFunction.cpp); nothing for 0 or a function of
/// no more calls, an error for a negative size.
LogicalResult splitRunFunction(Lowering &lowering, int64_t chunkSize);

/// The patterns of the graph ops (LowerGraph.cpp) and of the dist ops of a
/// partitioned program (LowerDist.cpp).
void populateGraphToRuntimePatterns(RewritePatternSet &patterns,
                                    const DescriptorConverter &converter,
                                    Lowering &state);
void populateDistToRuntimePatterns(RewritePatternSet &patterns,
                                   const DescriptorConverter &converter,
                                   Lowering &state);

} // namespace cleave::lowering

#endif // CLEAVE_TRANSFORMS_RUNTIMELOWERING_H
