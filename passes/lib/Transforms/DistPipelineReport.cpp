//===- DistPipelineReport.cpp - --pipeline-report and --trace ------------===//
//
// What -dist-pipeline-parallel reports before anything runs: each stage's
// layers, share of the work and memory (its parameters, the gradients its
// updates consume, its optimizer state and the activations it keeps over
// its schedule), the bubble against the closed form and with the stages'
// estimated costs, and the planned timeline as a Chrome trace.
//
//===----------------------------------------------------------------------===//

#include "DistPipeline.h"
#include "TrainingStep.h"

#include "cleave/Dialect/Cleave/IR/CleaveDialect.h"
#include "cleave/Dialect/Graph/IR/GraphOps.h"
#include "cleave/Transforms/MemoryPlan.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace cleave::graph;

namespace cleave::pipeline_split {

/// The activations of a microbatch-chunk: the values a forward op computes
/// (or the stage receives) that a backward op of the stage reads, held from
/// the chunk's forward step to its backward step. The most bytes held at
/// once, over the stage's order, is what the schedule costs in memory.
void PipelineSplit::measureSavedActivations() {
  std::vector<std::map<std::pair<int64_t, int64_t>, int64_t>> saved(p);
  for (Operation *op : body) {
    if (free.contains(op) ||
        phaseOf(op).value_or(Phase::Forward) != Phase::Forward)
      continue;
    int64_t mb = microbatchOf(op).value_or(0);
    for (Value x : op->getResults()) {
      llvm::SmallDenseSet<int64_t, 4> counted;
      for (Operation *user : x.getUsers()) {
        auto it = chunk.find(user);
        if (it == chunk.end() || phaseOf(user) != Phase::Backward)
          continue;
        int64_t s = stageOfChunk(it->second);
        if (counted.insert(s).second)
          saved[s][{mb, localChunk(it->second)}] += getTensorBytes(x.getType());
      }
    }
  }
  savedPeak.assign(p, 0);
  for (int64_t s = 0; s < p; ++s) {
    int64_t live = 0;
    for (const pl::Step &st : orders[s]) {
      int64_t bytes = saved[s][{st.microbatch, st.chunk}];
      live += st.backward ? -bytes : bytes;
      savedPeak[s] = std::max(savedPeak[s], live);
    }
  }
}

void PipelineSplit::report() {
  if (!options.report && options.trace.empty())
    return;
  pl::Timeline timeline;
  std::string err = pl::simulate(orders, v, m, 1.0, 2.0, timeline);
  if (options.report) {
    llvm::raw_ostream &os = llvm::outs();
    os << "dist-pipeline-parallel: @" << stepName << " over \""
       << axis << "\": " << p << " stages";
    if (v > 1)
      os << " x " << v << " chunks";
    os << ", " << m << " microbatch" << (m == 1 ? "" : "es") << ", "
       << options.schedule << "\n";
    double total = 0;
    for (double c : chunkCost)
      total += c;
    for (int64_t s = 0; s < p; ++s) {
      os << "  stage " << s << ":";
      for (int64_t c = s; c < p * v; c += p) {
        int64_t end = c + 1 < p * v ? chunkStarts[c + 1] : numLayers;
        os << " layers " << chunkStarts[c] << "-" << end - 1;
        if (c == 0)
          os << " (and the ops before them: the embedding)";
        if (c == p * v - 1)
          os << " (and the ops after them: the head, the loss)";
        os << ",";
      }
      double share = 0;
      for (int64_t c = s; c < p * v; c += p)
        share += chunkCost[c];
      os << llvm::format(" %.1f%% of the forward FLOPs", 100 * share / total);
      if (err.empty())
        os << ", activations of at most " << timeline.peakInFlight[s]
           << " microbatch-chunk"
           << (timeline.peakInFlight[s] == 1 ? "" : "s") << " held";
      os << "\n";
      // What the stage's rank stores: its parameters and optimizer state,
      // the gradients its updates consume, the activations it keeps.
      int64_t params = 0, state = 0, grads = 0;
      for (auto param : stageModules[s].getOps<ParamOp>()) {
        cleave_param_role role = getParamRole(param);
        if (role == CLEAVE_PARAM_MODEL)
          params += getTensorBytes(param.getType());
        else if (role == CLEAVE_PARAM_OPTIMIZER_STATE)
          state += getTensorBytes(param.getType());
      }
      stageModules[s].walk([&](Operation *op) {
        if (auto adamw = dyn_cast<AdamwOp>(op))
          grads += getTensorBytes(adamw.getGrad().getType());
        else if (auto sgd = dyn_cast<SgdOp>(op))
          grads += getTensorBytes(sgd.getGrad().getType());
      });
      os << "  stage " << s << " memory: parameters " << params
         << " B, gradients " << grads << " B, optimizer state " << state
         << " B, saved activations at most " << savedPeak[s] << " B\n";
    }
    if (err.empty()) {
      double closed = pl::closedFormBubble(kind, p, m, v);
      os << llvm::format("  bubble %.4f of the step with equal stages "
                         "(closed form %s = %.4f)\n",
                         timeline.bubble,
                         kind == pl::ScheduleKind::Interleaved
                             ? "(p-1)/(vm+p-1)"
                             : "(p-1)/(m+p-1)",
                         closed);
      // With each chunk's estimated forward FLOPs: what the trainer's
      // measured timeline (--trace) is to be compared with.
      pl::Timeline costed;
      if (pl::simulate(orders, v, m, chunkCost, 2.0, costed).empty())
        os << llvm::format("  bubble %.4f of the step with the stages' "
                           "estimated costs (backward 2x forward)\n",
                           costed.bubble);
    }
  }
  if (!options.trace.empty() && err.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(options.trace, ec);
    if (ec)
      emitWarning(*stepLoc) << "cannot write the schedule trace '"
                         << options.trace << "': " << ec.message();
    else
      out << pl::chromeTrace(timeline);
  }
}

} // namespace cleave::pipeline_split
