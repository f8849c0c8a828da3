//===- DistPipeline.h - the split of -dist-pipeline-parallel ----*- C++ -*-===//
//
// What DistPipeline.cpp (the split: chunks, places, orders, transfers, the
// stage modules) and DistPipelineReport.cpp (--pipeline-report, --trace)
// share: the stages' orders and the split that makes them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_DISTPIPELINE_H
#define CLEAVE_TRANSFORMS_DISTPIPELINE_H

#include "cleave/Dialect/Dist/IR/DistOps.h"
#include "cleave/Transforms/Passes.h"
#include "cleave/Transforms/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace cleave::pipeline_split {

using namespace mlir;
namespace pl = cleave::pipeline;

constexpr llvm::StringLiteral kPass = "-dist-pipeline-parallel";

/// Where an item goes in a stage's order: the schedule step (the
/// optimizer after the last), the op's index in the step, then receives
/// before and sends after the op, each in its own sequence.
struct Key {
  int64_t block = 0, index = 0, sub = 0, seq = 0;
  bool operator<(const Key &o) const {
    return std::tie(block, index, sub, seq) <
           std::tie(o.block, o.index, o.sub, o.seq);
  }
};

/// One entry of a stage's order.
struct Item {
  enum Kind { Compute, Send, Recv, SendRecv } kind = Compute;
  Key key;
  Operation *op = nullptr; // Compute: the op of the step
  Value value;             // Send: what is sent; Recv: what arrives
  int64_t peer = -1;       // Send, Recv: the other stage
  Value recvValue;         // SendRecv: what arrives (value: what is sent)
  int64_t recvPeer = -1;
};

class PipelineSplit {
public:
  PipelineSplit(func::FuncOp step, dist::MeshOp mesh, StringRef axis,
                int64_t stages, const DistPipelineParallelPassOptions &options)
      : step(step), mesh(mesh), axis(axis), p(stages), options(options) {}

  LogicalResult run(ModuleOp module);

private:
  LogicalResult chooseChunks();
  LogicalResult placeOps();
  LogicalResult orderStages();
  LogicalResult pairTransfers();
  void measureSavedActivations();
  void report();
  LogicalResult emit(ModuleOp module);

  int64_t stageOfChunk(int64_t c) const { return c % p; }
  int64_t localChunk(int64_t c) const { return c / p; }
  bool isFree(Value v) const {
    Operation *d = v.getDefiningOp();
    return !d || free.contains(d);
  }
  /// The stage of an op that is not free, and of its results.
  int64_t stageOf(Operation *op) const {
    return stageOfChunk(chunk.lookup(op));
  }
  int64_t stageOf(Value v) const { return stageOf(v.getDefiningOp()); }
  /// The block of schedule step (backward, microbatch, local chunk) of
  /// stage s; the optimizer's is the stage's number of steps.
  int64_t blockOf(int64_t s, bool backward, int64_t mb, int64_t k) const;
  InFlightDiagnostic error() {
    return step.emitOpError() << "(" << kPass << "): ";
  }

  func::FuncOp step;
  dist::MeshOp mesh;
  StringRef axis;
  int64_t p;
  DistPipelineParallelPassOptions options;
  int64_t v = 1, m = 1, numLayers = 0;
  pl::ScheduleKind kind = pl::ScheduleKind::OneFOneB;
  pl::Orders orders;
  std::vector<int64_t> chunkStarts; // the first layer of each chunk
  std::vector<double> chunkCost;
  SmallVector<Operation *> body; // the step's ops, in order
  DenseMap<Operation *, int64_t> indexOf;
  DenseSet<Operation *> free;
  /// The chunk of every op that is not free, but assignments of free
  /// values (placed by assignStages).
  DenseMap<Operation *, int64_t> chunk;
  DenseMap<Operation *, int64_t> blockAt;
  /// Per stage, the index in its order of each (backward, microbatch,
  /// local chunk) step.
  std::vector<std::map<std::tuple<bool, int64_t, int64_t>, int64_t>>
      stepIndex;
  /// Assignments: the stages that store the parameter.
  DenseMap<Operation *, SmallVector<int64_t>> assignStages;
  std::vector<std::vector<Item>> items; // per stage, in order
  /// Per stage, the most bytes of saved activations held at once.
  std::vector<int64_t> savedPeak;
  std::vector<ModuleOp> stageModules; // made by emit
  std::string stepName;
  std::optional<Location> stepLoc;
};

} // namespace cleave::pipeline_split

#endif // CLEAVE_TRANSFORMS_DISTPIPELINE_H
