//===- DistPipeline.cpp - pipeline stages of a partitioned step -----------===//
//
// -dist-pipeline-parallel: one device's training step, its microbatches
// unrolled, cut into stage programs along the layers. The work is in four
// parts: the layers' chunks (balanced by estimated FLOPs, or given), the
// place of every op (its chunk, or every stage that uses it when it reads
// only parameters, inputs and constants), the order of each stage (the
// unrolled schedule of PipelineSchedule.h) with the transfers between
// stages, and a proof that the stages' sends and receives cannot deadlock.
// Each stage becomes a nested module that the lowering treats as any
// partitioned program; -cleave-link-stages (LinkStages.cpp) joins them.
//
//===----------------------------------------------------------------------===//

#include "DistPipeline.h"
#include "ShardingLayout.h"
#include "TrainingStep.h"

#include "cleave/Dialect/Cleave/IR/CleaveDialect.h"
#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/MemoryPlan.h"
#include "cleave/Transforms/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <limits>
#include <tuple>

namespace cleave {
#define GEN_PASS_DEF_DISTPIPELINEPARALLELPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace cleave;
using namespace cleave::graph;
using namespace cleave::pipeline_split;

namespace {

//===----------------------------------------------------------------------===//
// Chunks of layers
//===----------------------------------------------------------------------===//

/// Elements of a ranked tensor type (1 for anything else).
int64_t elementsOf(Type t) {
  auto ranked = dyn_cast<RankedTensorType>(t);
  return ranked && ranked.hasStaticShape() ? ranked.getNumElements() : 1;
}

/// An estimate of the floating-point work of one op: 2·M·N·K for a
/// product (its result's elements times the operand's contracted size),
/// 4·B·H·S²·D for attention, one per result element otherwise. It only
/// balances stages against each other, so its constants do not matter.
double estimateFlops(Operation *op) {
  double out = 0;
  for (Type t : op->getResultTypes())
    out += double(elementsOf(t));
  auto lastDim = [](Value v) -> double {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getRank() > 0 ? double(t.getShape().back()) : 1.0;
  };
  if (isa<MatmulOp, LinearOp>(op) && op->getNumOperands() >= 1)
    return 2.0 * out * lastDim(op->getOperand(0));
  if (isa<AttentionOp>(op) && op->getNumOperands() >= 2) {
    auto k = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    double keys = k && k.getRank() >= 2 ? double(k.getShape()[k.getRank() - 2])
                                        : 1.0;
    return 4.0 * out * keys;
  }
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// The split
//===----------------------------------------------------------------------===//

namespace cleave::pipeline_split {

int64_t PipelineSplit::blockOf(int64_t s, bool backward, int64_t mb,
                               int64_t k) const {
  auto it = stepIndex[s].find({backward, mb, k});
  return it != stepIndex[s].end() ? it->second : int64_t(orders[s].size());
}

LogicalResult PipelineSplit::chooseChunks() {
  StringRef name = options.schedule;
  if (name == "gpipe")
    kind = pl::ScheduleKind::GPipe;
  else if (name == "1f1b")
    kind = pl::ScheduleKind::OneFOneB;
  else if (name == "interleaved")
    kind = pl::ScheduleKind::Interleaved;
  else
    return error() << "unknown schedule '" << name
                   << "' (gpipe, 1f1b or interleaved)";
  v = options.virtualStages;
  if (v < 1)
    return error() << "virtual=" << v << ": a stage holds at least one chunk";
  if (v > 1 && kind != pl::ScheduleKind::Interleaved)
    return error() << "virtual=" << v
                   << " needs schedule=interleaved (gpipe and 1f1b run one "
                      "chunk per stage)";
  if (kind == pl::ScheduleKind::Interleaved && v < 2)
    return error() << "schedule=interleaved needs virtual >= 2 chunks per "
                      "stage";
  m = 1;
  if (auto config = step->getAttrOfType<DictionaryAttr>(kTrainingConfigAttr))
    if (auto k = config.getAs<IntegerAttr>("accumulate"))
      m = k.getInt();
  for (Operation &op : step.getBody().front().without_terminator())
    if (std::optional<int64_t> l = layerOf(&op))
      numLayers = std::max(numLayers, *l + 1);
  int64_t chunks = p * v;
  if (numLayers < chunks)
    return error() << p << " stages x " << v << " chunks need at least "
                   << chunks << " layers; the step has " << numLayers
                   << " (graph.layer tags)";
  if (std::string err = pl::unroll(kind, p, m, v, orders); !err.empty())
    return error() << err;
  stepIndex.assign(p, {});
  for (int64_t s = 0; s < p; ++s)
    for (auto [i, st] : llvm::enumerate(orders[s]))
      stepIndex[s][{st.backward, st.microbatch, st.chunk}] = int64_t(i);

  // The forward work of one microbatch per layer, and that before and
  // after the layers (the embedding, the head and the loss).
  std::vector<double> cost(numLayers, 0.0);
  double before = 0, after = 0;
  DenseSet<Operation *> afterLayers;
  for (Operation &op : step.getBody().front().without_terminator()) {
    if (phaseOf(&op).value_or(Phase::Forward) != Phase::Forward ||
        microbatchOf(&op).value_or(0) != 0)
      continue;
    std::optional<int64_t> l = layerOf(&op);
    bool late = l.has_value() || llvm::any_of(op.getOperands(), [&](Value x) {
                  return x.getDefiningOp() &&
                         afterLayers.contains(x.getDefiningOp());
                });
    if (late)
      afterLayers.insert(&op);
    double f = estimateFlops(&op);
    if (l)
      cost[*l] += f;
    else if (late)
      after += f;
    else
      before += f;
  }
  if (!options.split.empty()) {
    if (int64_t(options.split.size()) != chunks - 1)
      return error() << "split names " << options.split.size()
                     << " first layers; " << chunks << " chunks need "
                     << chunks - 1;
    chunkStarts = {0};
    for (int64_t s : options.split) {
      if (s <= chunkStarts.back() || s >= numLayers)
        return error() << "split: " << s
                       << " is not a layer after the previous chunk's first "
                          "and before "
                       << numLayers;
      chunkStarts.push_back(s);
    }
  } else {
    chunkStarts = pl::balance(cost, chunks, before, after);
  }
  chunkCost.assign(chunks, 0.0);
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t end = c + 1 < chunks ? chunkStarts[c + 1] : numLayers;
    for (int64_t l = chunkStarts[c]; l < end; ++l)
      chunkCost[c] += cost[l];
  }
  chunkCost.front() += before;
  chunkCost.back() += after;
  return success();
}

LogicalResult PipelineSplit::placeOps() {
  auto chunkOfLayer = [&](int64_t l) {
    return int64_t(std::upper_bound(chunkStarts.begin(), chunkStarts.end(),
                                    l) -
                   chunkStarts.begin()) -
           1;
  };
  for (Operation &op : step.getBody().front().without_terminator()) {
    indexOf[&op] = int64_t(body.size());
    body.push_back(&op);
    if (op.getNumRegions() != 0)
      return op.emitOpError("has regions; ")
             << kPass << " splits a step of flat ops";
    bool operandsFree =
        llvm::all_of(op.getOperands(), [&](Value x) { return isFree(x); });
    // A layer's op stays on its stage, even where it reads only free
    // values (its parameters, the embedding's output); constants and
    // parameter reads go wherever they are used.
    if (operandsFree && op.getNumResults() > 0 &&
        (!layerOf(&op) || op.getNumOperands() == 0)) {
      free.insert(&op);
      continue;
    }
    if (isa<AssignOp>(op) && operandsFree)
      continue; // placed with the parameter's readers below
    int64_t c = -1;
    if (std::optional<int64_t> l = layerOf(&op))
      c = chunkOfLayer(*l);
    else
      for (Value x : op.getOperands())
        if (!isFree(x))
          c = std::max(c, chunk.lookup(x.getDefiningOp()));
    if (c < 0)
      return op.emitOpError("has no result and reads nothing a stage "
                            "computes; ")
             << kPass << " cannot place it";
    chunk[&op] = c;
  }

  // The free ops each stage needs, and so the parameters it reads; an
  // assignment goes to every stage that reads its parameter, which may
  // need more free ops (its value), until nothing changes.
  std::vector<DenseSet<Operation *>> needed(p);
  std::vector<llvm::StringSet<>> reads(p); // the parameters each reads
  std::function<void(Value, int64_t)> need = [&](Value x, int64_t s) {
    Operation *d = x.getDefiningOp();
    if (!d || !free.contains(d) || !needed[s].insert(d).second)
      return;
    if (auto read = dyn_cast<ReadParamOp>(d))
      reads[s].insert(read.getParam());
    for (Value y : d->getOperands())
      need(y, s);
  };
  for (Operation *op : body)
    if (chunk.count(op))
      for (Value x : op->getOperands())
        need(x, stageOf(op));
  Operation *ret = step.getBody().front().getTerminator();
  for (Value x : ret->getOperands())
    for (int64_t s = 0; s < p; ++s)
      need(x, s);
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation *op : body) {
      auto assign = dyn_cast<AssignOp>(op);
      if (!assign)
        continue;
      SmallVector<int64_t> stages;
      for (int64_t s = 0; s < p; ++s)
        if (reads[s].contains(assign.getParam()))
          stages.push_back(s);
      if (stages.empty())
        stages.push_back(chunk.count(op) ? stageOf(op) : 0);
      if (assignStages[op] != stages) {
        assignStages[op] = stages;
        changed = true;
        for (int64_t s : stages)
          need(assign.getValue(), s);
      }
    }
  }
  return success();
}

LogicalResult PipelineSplit::orderStages() {
  items.assign(p, {});
  // Compute items: the natural step of each op, no earlier than its
  // operands' on the same stage.
  auto naturalBlock = [&](Operation *op, int64_t s, int64_t c) {
    Phase phase = phaseOf(op).value_or(Phase::Forward);
    if (phase == Phase::Optimizer)
      return int64_t(orders[s].size());
    // An untagged backward op that adds another stage's gradient (a tied
    // embedding's) waits for the optimizer: in its microbatch's step it
    // would wait for that stage's whole backward.
    if (phase == Phase::Backward && !layerOf(op) &&
        llvm::any_of(op->getOperands(), [&](Value x) {
          return !isFree(x) && stageOf(x) != s;
        }))
      return int64_t(orders[s].size());
    return blockOf(s, phase == Phase::Backward, microbatchOf(op).value_or(0),
                   localChunk(c));
  };
  for (Operation *op : body) {
    SmallVector<std::pair<int64_t, int64_t>> places; // (stage, chunk)
    if (auto it = assignStages.find(op); it != assignStages.end()) {
      for (int64_t s : it->second)
        places.push_back({s, chunk.count(op) ? chunk[op] : s});
    } else if (chunk.count(op)) {
      places.push_back({stageOf(op), chunk[op]});
    }
    for (auto [s, c] : places) {
      int64_t block = naturalBlock(op, s, c);
      for (Value x : op->getOperands())
        if (!isFree(x) && stageOf(x) == s)
          block = std::max(block, blockAt.lookup(x.getDefiningOp()));
      if (!assignStages.count(op))
        blockAt[op] = block;
      items[s].push_back({Item::Compute, Key{block, indexOf[op], 0, 0}, op});
    }
  }

  // Transfers: a value that stage t reads and stage s computed is sent
  // right after it is computed and received before its first reader on t,
  // in the order it was sent (the engines match each pair's messages in
  // order).
  struct Transfer {
    Value value;
    int64_t from, to;
    Key send, recv;
  };
  llvm::MapVector<std::pair<Value, int64_t>, Transfer> transfers;
  auto addUse = [&](Value x, int64_t t, Key use) {
    if (isFree(x) || stageOf(x) == t)
      return;
    auto [it, inserted] = transfers.insert({{x, t}, Transfer{}});
    Transfer &tr = it->second;
    if (inserted) {
      Operation *d = x.getDefiningOp();
      tr = {x, stageOf(x), t,
            Key{blockAt.lookup(d), indexOf[d], 1, 0}, use};
    } else if (use < tr.recv) {
      tr.recv = use;
    }
  };
  for (int64_t t = 0; t < p; ++t)
    for (const Item &item : items[t])
      for (Value x : item.op->getOperands())
        addUse(x, t, Key{item.key.block, item.key.index, -1, 0});
  Operation *ret = step.getBody().front().getTerminator();
  for (int64_t t = 0; t < p; ++t)
    for (Value x : ret->getOperands())
      addUse(x, t,
             Key{int64_t(orders[t].size()), int64_t(body.size()), -1, 0});

  // A value the receiver reads only in its optimizer step (a tied
  // embedding's gradient of each microbatch) is sent in the sender's:
  // sent at once, it would make the receiver take it, in the order of
  // the pair's messages, before its own microbatches.
  for (auto &entry : transfers) {
    Transfer &tr = entry.second;
    int64_t last = int64_t(orders[tr.from].size());
    if (tr.recv.block == int64_t(orders[tr.to].size()) && tr.send.block < last)
      tr.send = Key{last, tr.send.index, 1, 0};
  }
  std::map<std::pair<int64_t, int64_t>, SmallVector<Transfer *>> pairs;
  for (auto &entry : transfers)
    pairs[{entry.second.from, entry.second.to}].push_back(&entry.second);
  int64_t seq = 0;
  for (auto &[pair, list] : pairs) {
    llvm::stable_sort(list, [](Transfer *a, Transfer *b) {
      return a->send < b->send;
    });
    // Received in the order sent: each receive no later than the next.
    for (int64_t i = int64_t(list.size()) - 2; i >= 0; --i)
      if (list[i + 1]->recv < list[i]->recv)
        list[i]->recv = list[i + 1]->recv;
    for (Transfer *tr : list) {
      tr->send.seq = tr->recv.seq = ++seq;
      items[tr->from].push_back(
          {Item::Send, tr->send, nullptr, tr->value, tr->to});
      items[tr->to].push_back(
          {Item::Recv, tr->recv, nullptr, tr->value, tr->from});
    }
  }
  for (std::vector<Item> &list : items)
    llvm::stable_sort(list, [](const Item &a, const Item &b) {
      return a.key < b.key;
    });
  return success();
}

LogicalResult PipelineSplit::pairTransfers() {
  // Runs every stage's transfers as if each send waited for its receive
  // (as NCCL's and large MPI messages do): an item completes when the
  // peers of all its halves have reached theirs; messages of a pair match
  // in order. Where the stages wait on each other, a stage waiting in a
  // send whose next transfer is a receive its peer is sending now makes
  // the two one grouped send_recv (a 1F1B stage sends an activation and
  // receives a gradient), and the run starts again. Any other wait is a
  // deadlock of the schedule, an error: so the stages that come out of
  // this cannot deadlock.
  struct Half {
    bool send;
    int64_t peer, seq;
    bool done = false;
  };
  while (true) {
    // Per stage, its transfer items (indices into items[s]) and halves.
    std::vector<std::vector<size_t>> which(p);
    std::vector<std::vector<std::vector<Half>>> ops(p);
    std::map<std::pair<int64_t, int64_t>, int64_t> sent, received;
    for (int64_t s = 0; s < p; ++s)
      for (auto [i, item] : llvm::enumerate(items[s])) {
        std::vector<Half> halves;
        if (item.kind == Item::Send || item.kind == Item::SendRecv)
          halves.push_back({true, item.peer, sent[{s, item.peer}]++});
        if (item.kind == Item::Recv)
          halves.push_back({false, item.peer, received[{item.peer, s}]++});
        if (item.kind == Item::SendRecv)
          halves.push_back(
              {false, item.recvPeer, received[{item.recvPeer, s}]++});
        if (halves.empty())
          continue;
        which[s].push_back(i);
        ops[s].push_back(std::move(halves));
      }
    std::vector<size_t> at(p, 0);
    auto current = [&](int64_t s) -> std::vector<Half> * {
      return at[s] < ops[s].size() ? &ops[s][at[s]] : nullptr;
    };
    bool progress = true;
    while (progress) {
      progress = false;
      for (int64_t s = 0; s < p; ++s) {
        std::vector<Half> *mine = current(s);
        if (!mine)
          continue;
        for (Half &h : *mine) {
          std::vector<Half> *theirs = current(h.peer);
          if (h.done || !h.send || !theirs)
            continue;
          for (Half &r : *theirs)
            if (!r.done && !r.send && r.peer == s && r.seq == h.seq)
              h.done = r.done = true;
        }
      }
      for (int64_t s = 0; s < p; ++s)
        while (current(s) && llvm::all_of(*current(s), [](const Half &h) {
                 return h.done;
               })) {
          ++at[s];
          progress = true;
        }
    }
    if (llvm::all_of(llvm::seq<int64_t>(0, p),
                     [&](int64_t s) { return !current(s); }))
      return success();

    // A waiting send to pair with a later receive that its peer is
    // sending now (moved up past other sends: the pair's messages keep
    // their order).
    bool paired = false;
    for (int64_t s = 0; s < p && !paired; ++s) {
      if (!current(s) || items[s][which[s][at[s]]].kind != Item::Send)
        continue;
      for (size_t j = at[s] + 1; j < ops[s].size() && !paired; ++j) {
        Item &recv = items[s][which[s][j]];
        if (recv.kind != Item::Recv)
          continue;
        const Half &want = ops[s][j].front();
        std::vector<Half> *peer = current(want.peer);
        if (!peer || llvm::none_of(*peer, [&](const Half &h) {
              return h.send && !h.done && h.peer == s && h.seq == want.seq;
            }))
          continue;
        Item &send = items[s][which[s][at[s]]];
        send.kind = Item::SendRecv;
        send.recvValue = recv.value;
        send.recvPeer = recv.peer;
        items[s].erase(items[s].begin() + which[s][j]);
        paired = true;
      }
    }
    if (paired)
      continue;
    InFlightDiagnostic diag = error();
    diag << "the stages' transfers would deadlock under schedule "
         << options.schedule << ":";
    for (int64_t t = 0; t < p; ++t)
      if (current(t)) {
        diag << " stage " << t << " waits to";
        for (const Half &h : *current(t))
          if (!h.done)
            diag << (h.send ? " send to " : " receive from ") << h.peer
                 << " (message " << h.seq << " between the two)";
        diag << ";";
      }
    return diag;
  }
}

LogicalResult PipelineSplit::run(ModuleOp module) {
  if (failed(chooseChunks()) || failed(placeOps()) || failed(orderStages()))
    return failure();
  if (failed(pairTransfers()))
    return failure();
  if (options.report)
    measureSavedActivations();
  // emit replaces the step by the stages; the report names it.
  stepName = step.getSymName().str();
  stepLoc = step.getLoc();
  if (failed(emit(module)))
    return failure();
  report();
  return success();
}

LogicalResult PipelineSplit::emit(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  ArrayAttr axes = b.getStrArrayAttr({axis});
  int64_t axisIndex =
      llvm::find(mesh.getAxisNames().getValue(), b.getStringAttr(axis)) -
      mesh.getAxisNames().getValue().begin();
  b.setInsertionPointAfter(step);
  for (int64_t s = 0; s < p; ++s) {
    auto sub = ModuleOp::create(b, step.getLoc(),
                                StringRef(("stage" + Twine(s)).str()));
    sub->setAttr(dist::DistDialect::getStageAttrName(), b.getI64IntegerAttr(s));
    sub->setAttr(dist::DistDialect::getStageAxisAttrName(),
                 b.getI64IntegerAttr(axisIndex));
    for (NamedAttribute a : module->getAttrs())
      if (a.getName() != SymbolTable::getSymbolAttrName())
        sub->setAttr(a.getName(), a.getValue());
    OpBuilder sb = OpBuilder::atBlockEnd(sub.getBody());
    sb.clone(*mesh);
    func::FuncOp fn = step.cloneWithoutRegions();
    sb.insert(fn);
    Block &entry = *fn.addEntryBlock();
    stageModules.push_back(sub);
    Block &old = step.getBody().front();
    IRMapping map;
    for (auto [a, n] : llvm::zip(old.getArguments(), entry.getArguments()))
      map.map(a, n);
    OpBuilder fb = OpBuilder::atBlockEnd(&entry);
    std::function<Value(Value)> local = [&](Value x) -> Value {
      if (Value y = map.lookupOrNull(x))
        return y;
      Operation *d = x.getDefiningOp();
      assert(d && free.contains(d) && "a value used before it is placed");
      for (Value y : d->getOperands())
        local(y);
      fb.clone(*d, map);
      return map.lookup(x);
    };
    auto annotate = [&](Operation *comm, Value x, StringRef what) {
      if (Operation *d = x.getDefiningOp())
        copyStepAnnotations(d, comm);
      comm->setLoc(NameLoc::get(
          b.getStringAttr((Twine("pipeline ") + what).str()), x.getLoc()));
    };
    // Each schedule step, and the optimizer's after the last, begins with
    // its mark (the trainer's measured timeline).
    int64_t marked = -1;
    auto markUpTo = [&](int64_t block) {
      for (; marked < block; ++marked) {
        int64_t next = marked + 1;
        bool optimizer = next >= int64_t(orders[s].size());
        pl::Step st = optimizer ? pl::Step() : orders[s][next];
        dist::PipelineStepOp::create(
            fb, step.getLoc(),
            optimizer ? "optimizer" : st.backward ? "backward" : "forward",
            st.microbatch, st.chunk);
      }
    };
    for (const Item &item : items[s]) {
      markUpTo(item.key.block);
      switch (item.kind) {
      case Item::Compute: {
        for (Value x : item.op->getOperands())
          local(x);
        fb.clone(*item.op, map);
        break;
      }
      case Item::Send: {
        auto send = dist::SendOp::create(fb, item.value.getLoc(),
                                         local(item.value), meshRef, axes,
                                         fb.getI64IntegerAttr(item.peer),
                                         fb.getI64IntegerAttr(0));
        annotate(send, item.value,
                 ("send to stage " + Twine(item.peer)).str());
        break;
      }
      case Item::Recv: {
        auto recv = dist::RecvOp::create(fb, item.value.getLoc(),
                                         item.value.getType(), meshRef, axes,
                                         fb.getI64IntegerAttr(item.peer),
                                         fb.getI64IntegerAttr(0));
        annotate(recv, item.value,
                 ("receive from stage " + Twine(item.peer)).str());
        map.map(item.value, recv.getResult());
        break;
      }
      case Item::SendRecv: {
        auto sr = dist::SendRecvOp::create(
            fb, item.value.getLoc(), item.recvValue.getType(),
            local(item.value), meshRef, axes, fb.getI64IntegerAttr(item.peer),
            fb.getI64IntegerAttr(item.recvPeer));
        annotate(sr, item.value,
                 ("send to stage " + Twine(item.peer) +
                  ", receive from stage " + Twine(item.recvPeer))
                     .str());
        map.map(item.recvValue, sr.getResult());
        break;
      }
      }
    }
    markUpTo(int64_t(orders[s].size()));
    Operation *ret = old.getTerminator();
    SmallVector<Value> results;
    for (Value x : ret->getOperands())
      results.push_back(local(x));
    func::ReturnOp::create(fb, ret->getLoc(), results);

    // The parameters this stage reads or assigns.
    llvm::SetVector<StringAttr> used;
    fn.walk([&](Operation *op) {
      if (auto read = dyn_cast<ReadParamOp>(op))
        used.insert(read.getParamAttr().getAttr());
      else if (auto assign = dyn_cast<AssignOp>(op))
        used.insert(assign.getParamAttr().getAttr());
    });
    OpBuilder pb = OpBuilder::atBlockBegin(stageModules[s].getBody());
    pb.setInsertionPointAfter(&stageModules[s].getBody()->front());
    for (auto param : module.getOps<ParamOp>())
      if (used.contains(param.getSymNameAttr()))
        pb.clone(*param.getOperation());
  }

  // One order of the communicator groups for every stage, so that every
  // rank creates them alike.
  SmallVector<Attribute> groups;
  auto addGroup = [&](ArrayAttr g) {
    if (!llvm::is_contained(groups, g))
      groups.push_back(g);
  };
  addGroup(axes);
  for (ModuleOp sub : stageModules)
    sub.walk([&](Operation *op) {
      if (auto g = op->getAttrOfType<ArrayAttr>("axes"))
        if (isa<dist::DistDialect>(op->getDialect()))
          addGroup(g);
    });
  for (ModuleOp sub : stageModules)
    sub->setAttr(dist::DistDialect::getGroupsAttrName(),
                 b.getArrayAttr(groups));

  // The stages replace the step and the parameters.
  step.erase();
  for (auto param : llvm::make_early_inc_range(module.getOps<ParamOp>()))
    param.erase();
  return success();
}

} // namespace cleave::pipeline_split

namespace {

struct DistPipelineParallelPass
    : cleave::impl::DistPipelineParallelPassBase<DistPipelineParallelPass> {
  using DistPipelineParallelPassBase::DistPipelineParallelPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto meshAxis = dist::getMeshAxis(module, kPass, axis);
    if (failed(meshAxis))
      return signalPassFailure();
    auto [mesh, stages] = *meshAxis;
    SmallVector<func::FuncOp> steps;
    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal())
        steps.push_back(fn);
    if (steps.size() != 1) {
      module.emitError() << kPass
                         << " needs exactly one function (the training "
                            "step); the module has "
                         << steps.size();
      return signalPassFailure();
    }
    func::FuncOp step = steps.front();
    if (!step->hasAttr(dist::DistDialect::getPartitionedAttrName())) {
      step.emitOpError() << "is not one device's program; run "
                            "-dist-partition before "
                         << kPass;
      return signalPassFailure();
    }
    DistPipelineParallelPassOptions o;
    o.axis = axis;
    o.schedule = schedule;
    o.virtualStages = virtualStages;
    o.split.assign(split.begin(), split.end());
    o.report = report;
    o.trace = trace;
    PipelineSplit pipeline(step, mesh, axis, stages, o);
    if (failed(pipeline.run(module)))
      signalPassFailure();
  }
};

} // namespace
