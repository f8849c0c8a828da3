//===- PlanMemory.cpp - static arena plan of a graph function -----------===//
//
// Every tensor of the entry function gets a byte offset in one arena:
// parameters and inputs in a persistent region, the other tensors in a
// temporary region where buffers whose lifetimes do not overlap share bytes.
// Views need no storage (reshape, read_param), and an elementwise op whose
// operand dies there writes in place. The plan is recorded as attributes
// that the lowering to the runtime reads.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/MemoryPlan.h"

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/Support/MathExtras.h"

#include <deque>

namespace cleave {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;

int64_t cleave::getTensorBytes(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  int64_t bits = tensor.getElementType().getIntOrFloatBitWidth();
  return tensor.getNumElements() * std::max<int64_t>(bits / 8, 1);
}

int64_t cleave::alignTo(int64_t bytes, int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

func::FuncOp cleave::getEntryFunction(ModuleOp module, StringRef name) {
  if (auto fn = module.lookupSymbol<func::FuncOp>(name))
    return fn;
  func::FuncOp only;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (only)
      return {};
    only = fn;
  }
  return only;
}

namespace {

/// Ops whose result may reuse the storage of an operand that dies there:
/// elementwise kernels read element i before writing it.
bool canWriteInPlace(Operation *op) {
  return isa<graph::NegOp, graph::AbsOp, graph::ReluOp, graph::ExpOp,
             graph::LogOp, graph::SqrtOp, graph::RsqrtOp, graph::ReciprocalOp,
             graph::TanhOp, graph::ErfOp, graph::SigmoidOp, graph::SiluOp,
             graph::SinOp, graph::CosOp, graph::GeluOp, graph::AddOp,
             graph::SubOp, graph::MulOp, graph::DivOp, graph::PowOp,
             graph::MaxOp, graph::MinOp,
             // The engine reduces and broadcasts in place (cleave_comm.h).
             dist::AllReduceOp, dist::BroadcastOp>(op);
}

struct Buffer {
  int64_t bytes = 0;
  int64_t start = 0, end = 0; // op indices, inclusive
  int64_t offset = -1;
  bool persistent = false;
};

/// The bytes of `type`, or nothing when they exceed 2^62 (or its element
/// count overflows int64).
std::optional<int64_t> checkedTensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() ||
      !tensor.getElementType().isIntOrFloat())
    return 0; // not planned here: the lowering names it
  int64_t bits = tensor.getElementType().getIntOrFloatBitWidth();
  int64_t n = std::max<int64_t>(bits / 8, 1);
  for (int64_t d : tensor.getShape())
    if (d < 0 || llvm::MulOverflow(n, d, n))
      return std::nullopt;
  if (n > (int64_t(1) << 62))
    return std::nullopt;
  return n;
}

LogicalResult checkSizes(ModuleOp module, func::FuncOp fn) {
  auto check = [](Operation *where, Type type, const Twine &what) {
    if (checkedTensorBytes(type))
      return success();
    return LogicalResult(where->emitOpError()
                         << what << " " << type
                         << " has more than 2^62 bytes: it cannot be planned");
  };
  for (auto param : module.getOps<graph::ParamOp>())
    if (failed(check(param, param.getType(), "parameter")))
      return failure();
  for (BlockArgument arg : fn.getArguments())
    if (failed(check(fn, arg.getType(), "argument #" + Twine(arg.getArgNumber()))))
      return failure();
  for (Operation &op : fn.getBody().front())
    for (Value result : op.getResults())
      if (failed(check(&op, result.getType(), "result")))
        return failure();
  return success();
}

struct PlanMemoryPass : cleave::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp fn = getEntryFunction(module, entry);
    if (!fn) {
      module.emitError("no entry function '")
          << entry << "' (and not exactly one function) to plan";
      return signalPassFailure();
    }
    if (!fn.getBody().hasOneBlock()) {
      fn.emitOpError("must have a single block to plan its memory");
      return signalPassFailure();
    }
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    const int64_t align = alignment;

    // Every tensor's bytes fit the arena's int64 offsets (a count that
    // wrapped would plan a buffer too small and let kernels write past it).
    if (failed(checkSizes(module, fn)))
      return signalPassFailure();

    // A sharded parameter that a partitioned program reads (and assigns)
    // with its local type is stored at that size: this device's block.
    llvm::StringMap<Type> storedAs;
    for (Operation &op : fn.getBody().front()) {
      std::optional<std::pair<StringRef, Type>> use;
      if (auto read = dyn_cast<graph::ReadParamOp>(op))
        use = {read.getParam(), read.getType()};
      if (auto assign = dyn_cast<graph::AssignOp>(op))
        use = {assign.getParam(), assign.getValue().getType()};
      if (!use)
        continue;
      auto [it, inserted] = storedAs.try_emplace(use->first, use->second);
      if (!inserted && it->second != use->second) {
        op.emitOpError("uses @")
            << use->first << " as " << use->second
            << " after another op used it as " << it->second
            << "; a program sees a parameter either whole or as its block";
        return signalPassFailure();
      }
    }

    // Persistent region: parameters, then the function's inputs.
    int64_t persistent = 0;
    llvm::StringMap<int64_t> paramOffsets;
    for (auto param : module.getOps<graph::ParamOp>()) {
      paramOffsets[param.getSymName()] = persistent;
      param->setAttr(kOffsetAttr, b.getI64IntegerAttr(persistent));
      Type stored = storedAs.lookup(param.getSymName());
      if (stored && stored != param.getType())
        param->setAttr(kStoredTypeAttr, TypeAttr::get(stored));
      else
        param->removeAttr(kStoredTypeAttr);
      persistent +=
          alignTo(getTensorBytes(stored ? stored : param.getType()), align);
    }
    int64_t paramBytes = persistent;
    for (BlockArgument arg : fn.getArguments()) {
      if (!isa<RankedTensorType>(arg.getType())) {
        fn.emitOpError("argument #") << arg.getArgNumber()
                                     << " is not a tensor";
        return signalPassFailure();
      }
      fn.setArgAttr(arg.getArgNumber(), kOffsetAttr,
                    b.getI64IntegerAttr(persistent));
      persistent += alignTo(getTensorBytes(arg.getType()), align);
    }

    // Buffers: one per value, unioned for views and in-place results.
    Block &block = fn.getBody().front();
    DenseMap<Value, int64_t> opIndex;
    DenseMap<Value, int64_t> lastUse;
    int64_t n = 0;
    for (Operation &op : block) {
      for (Value operand : op.getOperands())
        lastUse[operand] = n;
      for (Value r : op.getResults())
        opIndex[r] = n;
      ++n;
    }
    // Returned values stay until the runtime reads them.
    for (Value v : block.getTerminator()->getOperands())
      lastUse[v] = n;
    // A started collective reads its input until its wait.
    for (Operation &op : block)
      if (auto wait = dyn_cast<dist::WaitOp>(op))
        for (Value operand : wait.getInput().getDefiningOp()->getOperands())
          lastUse[operand] = std::max(lastUse[operand],
                                      opIndex.lookup(wait.getResult()));

    llvm::EquivalenceClasses<Value> classes;
    DenseMap<Value, int64_t> fixedOffset; // members of persistent storage
    for (BlockArgument arg : fn.getArguments())
      fixedOffset[arg] = cast<IntegerAttr>(fn.getArgAttr(arg.getArgNumber(),
                                                         kOffsetAttr))
                             .getInt();
    for (Operation &op : block) {
      if (op.hasTrait<OpTrait::IsTerminator>())
        continue;
      if (auto read = dyn_cast<graph::ReadParamOp>(op)) {
        fixedOffset[read.getResult()] = paramOffsets.lookup(read.getParam());
        classes.insert(read.getResult());
        continue;
      }
      for (Value r : op.getResults()) {
        if (!isa<RankedTensorType>(r.getType())) {
          op.emitOpError("result is not a tensor; cannot plan it");
          return signalPassFailure();
        }
        classes.insert(r);
      }
      // Views: a reshape, and the wait that completes a started
      // collective's result in its buffer.
      if (isa<graph::ReshapeOp, dist::WaitOp>(op)) {
        classes.unionSets(op.getOperand(0), op.getResult(0));
        continue;
      }
      if (canWriteInPlace(&op) && op.getNumResults() == 1) {
        Value result = op.getResult(0);
        for (Value operand : op.getOperands()) {
          Value leader = classes.getOrInsertLeaderValue(operand);
          bool persistentStorage = false;
          for (auto it = classes.findLeader(leader); it != classes.member_end();
               ++it)
            persistentStorage |= fixedOffset.count(*it) > 0;
          if (!persistentStorage && operand.getType() == result.getType() &&
              lastUse.lookup(operand) == opIndex.lookup(result)) {
            // Every other member of the class must be dead here too.
            bool allDead = true;
            for (auto it = classes.findLeader(leader);
                 it != classes.member_end(); ++it)
              allDead &= lastUse.lookup(*it) <= opIndex.lookup(result);
            if (allDead) {
              classes.unionSets(operand, result);
              ++numInPlace;
              break;
            }
          }
        }
      }
    }

    // A bucket reduces its inputs in place, in one buffer: each input and
    // its result are one class, and the classes of a bucket are placed one
    // after another (below).
    SmallVector<SmallVector<Value>> buckets;
    for (Operation &op : block) {
      auto bucket = dyn_cast<dist::AllReduceBucketOp>(op);
      if (!bucket)
        continue;
      SmallVector<Value> members;
      // A started bucket reads its inputs until its last wait.
      int64_t done = 0;
      for (Value r : bucket.getResults()) {
        done = std::max(done, opIndex.lookup(r));
        if (bucket.getAsync())
          for (Operation *wait : r.getUsers())
            done = std::max(done, opIndex.lookup(wait->getResult(0)));
      }
      for (auto [i, in] : llvm::enumerate(bucket.getInputs())) {
        Value leader = classes.getOrInsertLeaderValue(in);
        bool ok = true;
        for (auto it = classes.findLeader(leader); it != classes.member_end();
             ++it)
          ok &= !fixedOffset.count(*it) && lastUse.lookup(*it) <= done;
        if (!ok || llvm::is_contained(members, leader)) {
          bucket.emitOpError("input #")
              << i << " is stored elsewhere or used after the bucket; a "
              << "bucket reduces its inputs in place";
          return signalPassFailure();
        }
        classes.unionSets(in, bucket.getResult(i));
        members.push_back(in);
      }
      buckets.push_back(members);
    }

    // Optimizer updates in place: a new parameter (or state) whose only use
    // assigns it back to the parameter its operand read is computed in that
    // parameter's storage, when no read of the parameter is used after the
    // update and none sits between the update and the assignment.
    DenseMap<Operation *, int64_t> opIndexOf;
    for (auto [i, op] : llvm::enumerate(block))
      opIndexOf[&op] = i;
    llvm::StringMap<SmallVector<graph::ReadParamOp>> readsOf;
    llvm::StringMap<int64_t> assignsTo;
    for (Operation &op : block) {
      if (auto read = dyn_cast<graph::ReadParamOp>(op))
        readsOf[read.getParam()].push_back(read);
      if (auto assign = dyn_cast<graph::AssignOp>(op))
        ++assignsTo[assign.getParam()];
    }
    auto lastUseOfClass = [&](Value v) {
      int64_t last = lastUse.lookup(v);
      for (auto it = classes.findLeader(classes.getOrInsertLeaderValue(v));
           it != classes.member_end(); ++it)
        last = std::max(last, lastUse.lookup(*it));
      return last;
    };
    // The op index at which an assignment's parameter is really written.
    DenseMap<Operation *, int64_t> writtenAt;
    auto tryInPlace = [&](Operation *update, Value operand, Value result) {
      auto read = operand.getDefiningOp<graph::ReadParamOp>();
      if (!read || !result.hasOneUse())
        return;
      auto assign = dyn_cast<graph::AssignOp>(*result.getUsers().begin());
      if (!assign || assign.getParam() != read.getParam() ||
          assignsTo.lookup(read.getParam()) != 1)
        return;
      int64_t at = opIndexOf[update], assignAt = opIndexOf[assign];
      for (graph::ReadParamOp other : readsOf[read.getParam()]) {
        int64_t def = opIndexOf[other];
        if ((def < at && lastUseOfClass(other.getResult()) > at) ||
            (def > at && def < assignAt))
          return;
      }
      fixedOffset[result] = paramOffsets.lookup(read.getParam());
      writtenAt[assign] = at;
      ++numUpdatesInPlace;
    };
    for (Operation &op : block) {
      if (auto sgd = dyn_cast<graph::SgdOp>(op)) {
        tryInPlace(sgd, sgd.getParam(), sgd.getNewParam());
        if (Value buf = sgd.getMomentumBuffer())
          tryInPlace(sgd, buf, sgd.getNewMomentumBuffer());
      }
      if (auto adamw = dyn_cast<graph::AdamwOp>(op)) {
        tryInPlace(adamw, adamw.getParam(), adamw.getNewParam());
        tryInPlace(adamw, adamw.getFirstMoment(), adamw.getNewFirstMoment());
        tryInPlace(adamw, adamw.getSecondMoment(), adamw.getNewSecondMoment());
      }
    }

    // A parameter's storage is its value: a read (a view) must not be used
    // after an op overwrites the parameter.
    llvm::StringMap<int64_t> firstWrite;
    for (auto [i, op] : llvm::enumerate(block))
      if (auto assign = dyn_cast<graph::AssignOp>(op)) {
        int64_t at = writtenAt.count(&op) ? writtenAt[&op] : int64_t(i);
        auto [it, inserted] = firstWrite.try_emplace(assign.getParam(), at);
        if (!inserted)
          it->second = std::min(it->second, at);
      }
    for (Operation &op : block) {
      auto read = dyn_cast<graph::ReadParamOp>(op);
      if (!read)
        continue;
      auto write = firstWrite.find(read.getParam());
      if (write == firstWrite.end() || opIndex.lookup(read.getResult()) > write->second)
        continue;
      if (lastUseOfClass(read.getResult()) > write->second) {
        read.emitOpError("value of @")
            << read.getParam()
            << " is used after an op overwrites the parameter";
        return signalPassFailure();
      }
    }

    // One buffer per class: its interval spans all members.
    DenseMap<Value, Buffer> buffers; // by leader
    SmallVector<Value> leaders;
    for (auto it = classes.begin(); it != classes.end(); ++it) {
      if (!(*it)->isLeader())
        continue;
      Value leader = (*it)->getData();
      Buffer buf;
      buf.start = std::numeric_limits<int64_t>::max();
      buf.end = -1;
      for (auto m = classes.member_begin(**it); m != classes.member_end();
           ++m) {
        Value v = *m;
        if (auto off = fixedOffset.find(v); off != fixedOffset.end()) {
          buf.persistent = true;
          buf.offset = off->second;
        }
        int64_t def = isa<BlockArgument>(v) ? 0 : opIndex.lookup(v);
        buf.start = std::min(buf.start, def);
        buf.end = std::max({buf.end, def, lastUse.lookup(v)});
        buf.bytes = std::max(buf.bytes, alignTo(getTensorBytes(v.getType()),
                                                align));
      }
      buffers[leader] = buf;
      if (!buf.persistent)
        leaders.push_back(leader);
    }

    // A bucket is one buffer spanning its members' lifetimes, which are
    // placed in it in order.
    std::deque<Buffer> composites;
    SmallVector<std::pair<Buffer *, SmallVector<Value>>> bucketLayouts;
    DenseSet<Value> inBucket;
    for (ArrayRef<Value> members : buckets) {
      Buffer comp;
      comp.start = std::numeric_limits<int64_t>::max();
      comp.end = -1;
      SmallVector<Value> memberLeaders;
      for (Value v : members) {
        Value leader = classes.getLeaderValue(v);
        const Buffer &m = buffers[leader];
        comp.start = std::min(comp.start, m.start);
        comp.end = std::max(comp.end, m.end);
        comp.bytes += m.bytes;
        memberLeaders.push_back(leader);
        inBucket.insert(leader);
      }
      composites.push_back(comp);
      bucketLayouts.push_back({&composites.back(), memberLeaders});
    }
    SmallVector<Buffer *> toPlace;
    for (Value leader : leaders)
      if (!inBucket.count(leader))
        toPlace.push_back(&buffers[leader]);
    for (Buffer &comp : composites)
      toPlace.push_back(&comp);

    // First fit, in order of definition.
    llvm::stable_sort(toPlace, [&](Buffer *a, Buffer *c) {
      return a->start < c->start;
    });
    SmallVector<Buffer *> placed;
    int64_t tempBytes = 0;
    for (Buffer *bufPtr : toPlace) {
      Buffer &buf = *bufPtr;
      SmallVector<std::pair<int64_t, int64_t>> busy;
      for (Buffer *other : placed)
        if (other->start <= buf.end && buf.start <= other->end)
          busy.push_back({other->offset, other->offset + other->bytes});
      llvm::sort(busy);
      int64_t offset = 0;
      for (auto [lo, hi] : busy) {
        if (offset + buf.bytes <= lo)
          break;
        offset = std::max(offset, hi);
      }
      buf.offset = offset;
      tempBytes = std::max(tempBytes, offset + buf.bytes);
      placed.push_back(&buf);
    }

    for (auto &[comp, memberLeaders] : bucketLayouts) {
      int64_t at = comp->offset;
      for (Value leader : memberLeaders) {
        buffers[leader].offset = at;
        at += buffers[leader].bytes;
      }
    }

    // The peak: the most bytes of temporaries live at once.
    int64_t peak = 0;
    for (int64_t i = 0; i <= n; ++i) {
      int64_t live = 0;
      for (Buffer *buf : placed)
        if (buf->start <= i && i <= buf->end)
          live += buf->bytes;
      peak = std::max(peak, live);
    }

    // Record the plan.
    for (Operation &op : block) {
      if (op.getNumResults() == 0)
        continue;
      SmallVector<int64_t> offsets;
      for (Value r : op.getResults()) {
        const Buffer &buf = buffers[classes.getLeaderValue(r)];
        offsets.push_back(buf.persistent ? buf.offset
                                         : persistent + buf.offset);
      }
      op.setAttr(kOffsetsAttr, b.getDenseI64ArrayAttr(offsets));
    }
    fn->setAttr(kParamBytesAttr, b.getI64IntegerAttr(paramBytes));
    fn->setAttr(kPersistentBytesAttr, b.getI64IntegerAttr(persistent));
    fn->setAttr(kArenaBytesAttr, b.getI64IntegerAttr(persistent + tempBytes));
    fn->setAttr(kPeakBytesAttr, b.getI64IntegerAttr(persistent + peak));
    numBuffers = placed.size();
    if (report)
      fn.emitRemark("memory plan: arena ")
          << persistent + tempBytes << " bytes (parameters " << paramBytes
          << ", inputs " << persistent - paramBytes << ", temporaries "
          << tempBytes << "), peak " << persistent + peak << " bytes";
  }
};
} // namespace
