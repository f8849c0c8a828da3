//===- SplitRunFunction.cpp - the run function in noinline chunks --------===//
//
// The last step of -cleave-lower-to-runtime (chunk-size): the run function
// is one straight-line block of a runtime call per op, and LLVM's -O2 takes
// time superlinear in a function's size, so a large program's one function
// dominated its compile time. The block is cut into private, noinline
// functions of at most chunk-size calls each, which the run function calls
// in order. Each chunk takes the run function's (arena, context); the pure
// values it uses (constants, addresses of globals, address arithmetic on
// them and on the arguments) are built again inside it, and any other value
// that crosses a cut (a started collective's handle, the hyperparameters
// the entry loads) is returned by the chunk that defines it and passed to
// those that use it, so each call runs as it did, in the same order.
//
//===----------------------------------------------------------------------===//

#include "RuntimeLowering.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/SetVector.h"

#include <functional>

using namespace mlir;
using namespace cleave;
using namespace cleave::lowering;

namespace {

/// A value each chunk can build again: an op with no memory effects and no
/// regions whose operands are the function's arguments or such values.
bool isRematerializable(Operation &op, Block &body,
                        const DenseSet<Operation *> &remat) {
  if (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))
    return false;
  return llvm::all_of(op.getOperands(), [&](Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return arg.getOwner() == &body;
    return remat.contains(v.getDefiningOp());
  });
}

/// One chunk: its ops (the rematerializable ones are built where used), the
/// values it takes from earlier chunks and those it returns to later ones.
struct Chunk {
  SmallVector<Operation *> ops;
  llvm::SetVector<Value> liveIn, liveOut;
};

/// Builds the function of `chunk`, its ops cloned in order, and returns it.
LLVM::LLVMFuncOp buildChunk(OpBuilder &b, LLVM::LLVMFuncOp run,
                            const Chunk &chunk, int64_t index,
                            const DenseSet<Operation *> &remat) {
  MLIRContext *ctx = run.getContext();
  Block &body = run.getBody().front();
  Location loc = run.getLoc();
  SmallVector<Type> argTypes(body.getArgumentTypes());
  for (Value v : chunk.liveIn)
    argTypes.push_back(v.getType());
  SmallVector<Type> resultTypes;
  for (Value v : chunk.liveOut)
    resultTypes.push_back(v.getType());
  Type resultType = resultTypes.empty() ? LLVM::LLVMVoidType::get(ctx)
                    : resultTypes.size() == 1
                        ? resultTypes.front()
                        : LLVM::LLVMStructType::getLiteral(ctx, resultTypes);
  auto fn = LLVM::LLVMFuncOp::create(
      b, loc, (run.getName() + ".chunk." + Twine(index)).str(),
      LLVM::LLVMFunctionType::get(resultType, argTypes),
      LLVM::Linkage::Private);
  fn.setNoInline(true);

  OpBuilder::InsertionGuard guard(b);
  Block *entry = fn.addEntryBlock(b);
  b.setInsertionPointToStart(entry);
  IRMapping map;
  for (auto [from, to] :
       llvm::zip(llvm::concat<Value>(body.getArguments(), chunk.liveIn),
                 entry->getArguments()))
    map.map(from, to);
  // A rematerializable value is built before its first use in the chunk.
  std::function<void(Value)> materialize = [&](Value v) {
    if (map.contains(v))
      return;
    Operation *def = v.getDefiningOp();
    assert(def && remat.contains(def) && "a value that crosses a cut unpassed");
    for (Value operand : def->getOperands())
      materialize(operand);
    b.clone(*def, map);
  };
  for (Operation *op : chunk.ops) {
    for (Value operand : op->getOperands())
      materialize(operand);
    b.clone(*op, map);
  }

  SmallVector<Value> results;
  for (Value v : chunk.liveOut)
    results.push_back(map.lookup(v));
  if (results.size() > 1) {
    Value packed = LLVM::UndefOp::create(b, loc, resultType);
    for (auto [i, v] : llvm::enumerate(results))
      packed = LLVM::InsertValueOp::create(b, loc, packed, v,
                                           ArrayRef<int64_t>{int64_t(i)});
    results.assign({packed});
  }
  LLVM::ReturnOp::create(b, loc, results);
  return fn;
}

} // namespace

LogicalResult cleave::lowering::splitRunFunction(Lowering &lowering,
                                                 int64_t chunkSize) {
  if (chunkSize < 0)
    return lowering.module.emitError("expects chunk-size >= 0, got ")
           << chunkSize;
  if (chunkSize == 0 || !lowering.arena)
    return success();
  auto run = dyn_cast<LLVM::LLVMFuncOp>(
      lowering.arena.getParentBlock()->getParentOp());
  // The lowering builds one block ending in a plain return.
  if (!run || !run.getBody().hasOneBlock())
    return success();
  Block &body = run.getBody().front();
  auto ret = dyn_cast<LLVM::ReturnOp>(body.getTerminator());
  if (!ret || ret.getNumOperands() != 0)
    return success();

  // Each op that is not rebuilt goes with the next call (the loads of a
  // call's arguments stay with it), the ops after the last call with it.
  DenseSet<Operation *> remat;
  SmallVector<Operation *> ops;
  SmallVector<int64_t> callsBefore;
  int64_t calls = 0;
  for (Operation &op : body.without_terminator()) {
    // Stack memory would not outlive the chunk that allocates it (the
    // lowering allocates none).
    if (isa<LLVM::AllocaOp>(op))
      return success();
    if (isRematerializable(op, body, remat)) {
      remat.insert(&op);
      continue;
    }
    ops.push_back(&op);
    callsBefore.push_back(calls);
    if (isa<LLVM::CallOp>(op))
      ++calls;
  }
  if (calls <= chunkSize)
    return success();
  int64_t numChunks = (calls + chunkSize - 1) / chunkSize;
  SmallVector<Chunk> chunks(numChunks);
  DenseMap<Operation *, int64_t> chunkOf;
  for (auto [op, before] : llvm::zip(ops, callsBefore)) {
    int64_t c = std::min(before / chunkSize, numChunks - 1);
    chunks[c].ops.push_back(op);
    chunkOf[op] = c;
  }
  // A value used by a later chunk is returned and passed (the uses of a
  // value that is not rebuilt are ops that are not either).
  for (auto [c, chunk] : llvm::enumerate(chunks))
    for (Operation *op : chunk.ops)
      for (Value v : op->getResults()) {
        SmallVector<int64_t> users;
        for (Operation *user : v.getUsers())
          if (int64_t u = chunkOf.lookup(user); u != int64_t(c))
            users.push_back(u);
        if (users.empty())
          continue;
        llvm::sort(users);
        chunk.liveOut.insert(v);
        for (int64_t u : llvm::make_range(users.begin(), llvm::unique(users)))
          chunks[u].liveIn.insert(v);
      }

  OpBuilder b(run);
  SmallVector<LLVM::LLVMFuncOp> fns;
  for (auto [c, chunk] : llvm::enumerate(chunks))
    fns.push_back(buildChunk(b, run, chunk, c, remat));

  // The run function's body becomes the chunks' calls.
  SmallVector<Operation *> old;
  for (Operation &op : body.without_terminator())
    old.push_back(&op);
  b.setInsertionPoint(ret);
  Location loc = run.getLoc();
  IRMapping passed;
  for (auto [chunk, fn] : llvm::zip(chunks, fns)) {
    SmallVector<Value> args(body.getArguments());
    for (Value v : chunk.liveIn)
      args.push_back(passed.lookup(v));
    auto call = LLVM::CallOp::create(b, loc, fn, args);
    if (chunk.liveOut.size() == 1)
      passed.map(chunk.liveOut.front(), call.getResult());
    else
      for (auto [i, v] : llvm::enumerate(chunk.liveOut))
        passed.map(v,
                   LLVM::ExtractValueOp::create(b, loc, call.getResult(),
                                                ArrayRef<int64_t>{int64_t(i)}));
  }
  for (Operation *op : llvm::reverse(old))
    op->erase();
  return success();
}
