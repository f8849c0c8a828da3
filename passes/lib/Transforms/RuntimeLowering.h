//===- RuntimeLowering.h - the lowering to the runtime's C ABI -*- C++ -*-===//
//
// The state and builders that -cleave-lower-to-runtime shares between its
// two halves: the calls of the ops (LowerToRuntime.cpp) and the program's
// metadata, `cleave_program` (ProgramInfo.cpp). Every number the runtime
// reads (dtypes, kinds, the ABI version) is a name from the runtime's own
// header, cleave_rt_enums.h, never a copy.
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

#include <cstddef>
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
              "ptr, i64, ptr, ptr, ptr, i32, ptr, ptr, i64, ptr, ptr}");
/// The words of a cleave_sharding and of a cleave_group.
constexpr int64_t kShardingWords =
    2 * CLEAVE_RT_MAX_RANK + CLEAVE_RT_MAX_RANK * CLEAVE_RT_MAX_MESH_RANK;
constexpr int64_t kGroupWords = 1 + CLEAVE_RT_MAX_MESH_RANK;
static_assert(sizeof(cleave_sharding) == kShardingWords * sizeof(int64_t) &&
                  sizeof(cleave_group) == kGroupWords * sizeof(int64_t),
              "cleave_sharding and cleave_group are arrays of int64_t");

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
    descType = LLVM::LLVMArrayType::get(i64, kDescWords);
    // cleave_named_tensor: name, tensor, init_data, init_file, init_offset,
    // role.
    namedType = LLVM::LLVMStructType::getLiteral(
        ctx, {ptr, descType, ptr, ptr, i64, i32, ptr});
    for (auto m : module.getOps<dist::MeshOp>())
      meshes.push_back(m);
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
    if (failed(code) || tensor.getRank() > CLEAVE_RT_MAX_RANK)
      return failure();
    SmallVector<int64_t> words(kDescWords, 0);
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
             << type << " to the runtime (element type or rank > "
             << CLEAVE_RT_MAX_RANK << ")";
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

  /// Calls the runtime function `name` returning an i64 (a started
  /// collective's handle), declaring it on first use.
  Value callI64(StringRef name, ValueRange args) {
    auto fn = module.lookupSymbol<LLVM::LLVMFuncOp>(name);
    if (!fn) {
      SmallVector<Type> types(args.getTypes());
      auto fnType = LLVM::LLVMFunctionType::get(i64, types);
      fn = atModuleStart(
          [&] { return LLVM::LLVMFuncOp::create(b, loc, name, fnType); });
    }
    return LLVM::CallOp::create(b, loc, fn, args).getResult();
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

  //===--- Partitioned programs (LowerDist.cpp) ----------------------===//

  /// The calls of a dist op (collectives, axis_index, local_slice), given
  /// the descriptors of its operands and results.
  LogicalResult lowerDistOp(Operation *op, ArrayRef<Value> in,
                            ArrayRef<Value> out);
  /// The index of the communicator group of `axes` of `meshRef` in the
  /// program's group table, added on first use.
  FailureOr<int64_t> groupOf(Operation *op, FlatSymbolRefAttr meshRef,
                             ArrayAttr axes);
  /// Loads the context's communicator (i32) or group rank (i64) of group
  /// `g`.
  Value loadComm(int64_t g);
  Value loadGroupRank(int64_t g);

  /// The program's one mesh (null without one; several are refused).
  dist::MeshOp mesh() const { return meshes.empty() ? nullptr : meshes[0]; }
  /// The words of the cleave_sharding of a value of global type `global`
  /// sharded as `sharding`, or failure (naming `what`) for what the runtime
  /// cannot split: sub-axes and partial values.
  FailureOr<SmallVector<int64_t>> shardingWords(dist::ShardingAttr sharding,
                                                RankedTensorType global,
                                                Operation *where,
                                                const Twine &what);
  /// The type a parameter is stored as: its block in a partitioned
  /// program (the memory plan's cleave.stored_type), else its own.
  static RankedTensorType storedType(ParamOp param) {
    if (auto stored = param->getAttrOfType<TypeAttr>(kStoredTypeAttr))
      return cast<RankedTensorType>(stored.getValue());
    return param.getType();
  }

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
                storedType(param), user);
  }

  ModuleOp module;
  MLIRContext *ctx;
  OpBuilder b;
  Location loc;
  Type i8, i32, i64, f64, ptr, descType, namedType;
  Value arena, context;
  SmallVector<dist::MeshOp> meshes;
  /// The handle of each started collective, by its result.
  DenseMap<Value, Value> handles;
  /// The communicator groups, as mesh axis indices, in table order.
  SmallVector<SmallVector<int64_t>> groups;
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
    int32_t role = 0; // enum cleave_param_role, parameters only
    std::optional<SmallVector<int64_t>> sharding; // cleave_sharding words
  };
  Value namedTable(ArrayRef<Named> entries, Operation *where, bool &ok);
  /// The mesh's axis names as a constant array of C strings.
  Value axisNames(dist::MeshOp m);
  /// The address of the communication engine's cleave_comm_engine.
  Value commEngine();
  LogicalResult emitProgramInfo(func::FuncOp fn);
};

} // namespace cleave::lowering

#endif // CLEAVE_TRANSFORMS_RUNTIMELOWERING_H
