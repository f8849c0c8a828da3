//===- Report.cpp - text, JSON and plan-file output ---------------------===//
//
// The three outputs of the planner: the text report, the `--json` object and
// the plan file (both JSON, written with llvm/Support/JSON.h).
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Report.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

namespace cleave::planner {

namespace {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

/// 1234567 -> "1,234,567".
std::string grouped(double v) {
  std::string digits = fixed(std::round(v), 0), out;
  size_t start = digits[0] == '-' ? 1 : 0;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > start && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

/// Bytes in GB, MB, kB or B, whichever reads best.
std::string size(double bytes) {
  if (bytes >= 1e9 || bytes == 0)
    return fixed(bytes / 1e9, 2) + " GB";
  if (bytes >= 1e6)
    return fixed(bytes / 1e6, 2) + " MB";
  if (bytes >= 1e3)
    return fixed(bytes / 1e3, 2) + " kB";
  return fixed(bytes, 0) + " B";
}

/// A count in billions or millions, or in full.
std::string count(double n) {
  if (n >= 1e9)
    return fixed(n / 1e9, 2) + " B";
  if (n >= 1e6)
    return fixed(n / 1e6, 2) + " M";
  return grouped(n);
}

/// Seconds with four significant digits.
std::string secs(double s) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g", s);
  return buf;
}

// JSON goes through llvm::json::OStream, which quotes, escapes and checks
// that the document is well formed. Members are streamed rather than put in
// an llvm::json::Object, which would print them sorted: the schema's order
// is part of the output. Numbers print with six significant digits
// (llvm::json prints a double with 17), and small records in a list on one
// line each.

/// `d` with six significant digits; null when it is not finite.
void number(llvm::json::OStream &j, double d) {
  if (!std::isfinite(d)) {
    j.value(nullptr);
    return;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", d);
  j.rawValue(buf);
}

void number(llvm::json::OStream &j, llvm::StringRef key, double d) {
  j.attributeBegin(key);
  number(j, d);
  j.attributeEnd();
}

/// Writes the value `fill` writes, on one line.
void oneLine(llvm::json::OStream &j,
             llvm::function_ref<void(llvm::json::OStream &)> fill) {
  std::string line;
  llvm::raw_string_ostream os(line);
  llvm::json::OStream inner(os);
  fill(inner);
  j.rawValue(line);
}

/// The whole document `fill` writes, indented, with a final newline.
std::string document(llvm::function_ref<void(llvm::json::OStream &)> fill) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream j(os, /*IndentSize=*/2);
  fill(j);
  j.flush();
  return text + "\n";
}

void writeEstimate(llvm::json::OStream &j, const Estimate &est) {
  const Layout &l = est.layout;
  const MemoryEstimate &m = est.memory;
  const CommEstimate &c = est.comm;
  LinkBytes all = c.total();
  j.object([&] {
    j.attributeObject("layout", [&] {
      j.attribute("dp", l.dp);
      j.attribute("tp", l.tp);
      j.attribute("pp", l.pp);
      j.attribute("cp", l.cp);
      j.attribute("ep", l.ep);
      j.attribute("zero", l.zero);
      j.attribute("microbatches", l.microbatches);
      j.attribute("micro_batch_size", est.microBatch);
      j.attribute("schedule", scheduleName(l.schedule));
      j.attribute("recompute", recomputeName(l.recompute));
    });
    j.attributeObject("memory_gb", [&] {
      number(j, "params", m.params / 1e9);
      number(j, "grads", m.grads / 1e9);
      number(j, "optimizer", m.optimizer / 1e9);
      number(j, "activations", m.activations / 1e9);
      number(j, "buffers", m.buffers / 1e9);
      number(j, "total", m.total() / 1e9);
      number(j, "offloaded", m.offloaded / 1e9);
      number(j, "host_per_node", est.hostBytesPerNode / 1e9);
    });
    j.attributeObject("comm_gb", [&] {
      number(j, "intra_node", all.intra / 1e9);
      number(j, "inter_node", all.inter / 1e9);
      number(j, "tp", c.tp.total() / 1e9);
      number(j, "cp", c.cp.total() / 1e9);
      number(j, "ep", c.ep.total() / 1e9);
      number(j, "pp", c.pp.total() / 1e9);
      number(j, "dp", c.dp.total() / 1e9);
    });
    number(j, "bubble", est.bubble);
    // Each pipeline stage's layers and memory, in bytes (what
    // cleave-compile --pipeline-report prints for the same layout).
    j.attributeArray("stages", [&] {
      for (size_t i = 0; i < est.stageMemory.size(); ++i) {
        const MemoryEstimate &s = est.stageMemory[i];
        j.object([&] {
          j.attribute("stage", int64_t(i));
          j.attribute("layers", est.pipeline.stageLayers[i]);
          number(j, "microbatches_in_flight", est.pipeline.inFlight[i]);
          j.attribute("params_bytes", int64_t(s.params));
          j.attribute("grads_bytes", int64_t(s.grads));
          j.attribute("optimizer_bytes", int64_t(s.optimizer));
          j.attribute("activations_bytes", int64_t(s.activations));
          j.attribute("buffers_bytes", int64_t(s.buffers));
          j.attribute("offloaded_bytes", int64_t(s.offloaded));
        });
      }
    });
    number(j, "step_time_s", est.stepTime);
    number(j, "tflops_per_gpu", est.tflopsPerGpu);
    number(j, "hw_tflops_per_gpu", est.hardwareTflopsPerGpu);
    number(j, "mfu", est.mfu);
    // Whether the stage that needs the most fits, by how much it does not,
    // and which stages are over.
    j.attribute("fits", est.fits);
    number(j, "usable_gb", est.usableBytes / 1e9);
    number(j, "over_gb", est.overBytes() / 1e9);
    j.attributeArray("stages_over", [&] {
      for (int64_t stage : est.stagesOver())
        j.value(stage);
    });
  });
}

} // namespace

std::string formatSetup(const ModelSpec &m, const TrainingConfig &t,
                        const ClusterSpec &c) {
  std::string s = "model     " + (m.name.empty() ? "(flags)" : m.name) + " (" +
                  archName(m.arch) + "): " + std::to_string(m.layers) +
                  " layers, hidden " + std::to_string(m.hidden) + ", " +
                  std::to_string(m.heads) + " heads";
  if (m.kvHeads && m.kvHeads != m.heads)
    s += " (" + std::to_string(m.kvHeads) + " kv)";
  s += ", FFN " + std::to_string(m.ffn) + (m.gatedMlp ? " gated" : "");
  if (m.isMoE())
    s += " x " + std::to_string(m.experts) + " experts (top-" +
         std::to_string(m.topK) + ")";
  s += ", vocab " + std::to_string(m.vocab) + ", seq " + std::to_string(m.seq) +
       "\n";
  ParamCounts p = m.params();
  s += "          " + count(double(p.total())) + " parameters" +
       (m.measured ? " (counted in the model file)" : "");
  if (m.isMoE())
    s += ", " + count(m.activeParams()) + " active per token";
  s += "\n";
  auto plural = [](int64_t n, const char *what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  s += "cluster   " + (c.name.empty() ? std::string("(flags)") : c.name) +
       ": " + plural(c.gpus, "GPU") + " (" + plural(c.nodes(), "node") +
       " of " + std::to_string(c.gpusPerNode) + "), " + fixed(c.memGB, 0) +
       " GB, " + fixed(c.tflops, 0) + " TFLOP/s, " + fixed(c.intraBW, 0) +
       " GB/s in a node, " + fixed(c.interBW, 0) + " GB/s between nodes\n";
  StateBytes b = stateBytes(t);
  s += "training  " + std::to_string(t.globalBatch) + " sequences per step (" +
       count(double(t.globalBatch) * double(m.seq)) + " tokens), " +
       precisionName(t.precision) + ", " + optimizerName(t.optimizer) + ", " +
       fixed(b.total(), 0) + " bytes of model state per parameter" +
       (t.offload ? ", optimizer offloaded" : "") + "\n";
  return s;
}

std::string formatTable(const SearchResult &r, size_t rows) {
  std::string s =
      "searched " + std::to_string(r.evaluated) + " configurations of " +
      std::to_string(r.meshes - r.invalidMeshes) + " meshes (" +
      std::to_string(r.invalidMeshes) + " meshes invalid, " +
      std::to_string(r.tooBig) + " configurations out of memory)\n\n";
  char line[512];
  std::snprintf(line, sizeof(line),
                "%3s %4s %4s %4s %4s %4s %8s %7s %-14s %4s %-9s %7s %7s %6s "
                "%8s %12s %6s  %s\n",
                "#", "tp", "pp", "dp", "cp", "ep", "mb-count", "mb-size",
                "schedule", "zero", "recompute", "mem GB", "host GB", "bubble",
                "step s", "tokens/s", "MFU", "why it loses");
  s += line;
  for (size_t i = 0; i < r.ranked.size() && i < rows; ++i) {
    const Estimate &e = r.ranked[i].estimate;
    const Layout &l = e.layout;
    std::string schedule = scheduleName(l.schedule);
    if (l.schedule == Schedule::Interleaved)
      schedule += "/" + std::to_string(l.virtualStages);
    std::snprintf(
        line, sizeof(line),
        "%3zu %4lld %4lld %4lld %4lld %4lld %8lld %7lld %-14s %4d %-9s %7.1f "
        "%7.1f %6.3f %8.3g %12s %5.1f%%  %s\n",
        i + 1, (long long)l.tp, (long long)l.pp, (long long)l.dp,
        (long long)l.cp, (long long)l.ep, (long long)l.microbatches,
        (long long)e.microBatch, schedule.c_str(), l.zero,
        recomputeName(l.recompute), e.memory.total() / 1e9,
        e.hostBytesPerNode / 1e9, e.bubble, e.stepTime,
        grouped(e.tokensPerSecond).c_str(), 100 * e.mfu,
        r.ranked[i].reason.c_str());
    s += line;
  }
  return s;
}

std::string formatEstimate(const Estimate &e, const ClusterSpec &c) {
  const Layout &l = e.layout;
  const MemoryEstimate &m = e.memory;
  std::string s = "layout    " + l.str() + " (micro-batch size " +
                  std::to_string(e.microBatch) +
                  (e.microBatch == 1 ? " sequence" : " sequences") + ")\n";
  auto breakdown = [](const MemoryEstimate &m) {
    std::string s = "params " + size(m.params) + " + grads " + size(m.grads) +
                    " + optimizer " + size(m.optimizer) + " + activations " +
                    size(m.activations);
    if (m.buffers > 0)
      s += " + ZeRO buffers " + size(m.buffers);
    return s + " = " + size(m.total());
  };
  s += "memory    per GPU on stage " + std::to_string(m.stage) + ": " +
       breakdown(m) + " of " + size(c.usableBytes()) + " usable";
  if (m.offloaded > 0)
    s += "; " + size(m.offloaded) + " of optimizer state in host memory (" +
         size(e.hostBytesPerNode) + " per node)";
  s += "\n";
  if (!e.fits) {
    std::string stages;
    for (int64_t i : e.stagesOver())
      stages += (stages.empty() ? "" : ", ") + std::to_string(i);
    s += "fits      no: stage " + std::to_string(m.stage) + " needs " +
         size(m.total()) + ", " + size(e.overBytes()) + " more than the " +
         size(e.usableBytes) + " usable (stages over: " + stages + ")\n";
  }
  if (l.pp > 1)
    for (size_t i = 0; i < e.stageMemory.size(); ++i) {
      const MemoryEstimate &st = e.stageMemory[i];
      s += "          stage " + std::to_string(i) + ": " +
           std::to_string(e.pipeline.stageLayers[i]) + " layers, " +
           fixed(e.pipeline.inFlight[i], 2) + " microbatches in flight; " +
           breakdown(st) + "\n";
    }

  auto link = [](const char *name, const CommEstimate &comm, bool intra) {
    std::string parts;
    for (auto [part, bytes] :
         {std::pair{"tp", comm.tp}, std::pair{"cp", comm.cp},
          std::pair{"ep", comm.ep}, std::pair{"pp", comm.pp},
          std::pair{"dp", comm.dp}}) {
      double v = intra ? bytes.intra : bytes.inter;
      if (v > 0)
        parts += std::string(parts.empty() ? "" : ", ") + part + " " + size(v);
    }
    LinkBytes all = comm.total();
    return std::string(name) + " " + size(intra ? all.intra : all.inter) +
           (parts.empty() ? "" : " (" + parts + ")");
  };
  s += "comm      per GPU per step: " + link("intra-node", e.comm, true) +
       ", " + link("inter-node", e.comm, false) + "\n";

  const TimeBreakdown &t = e.time;
  std::string parts = "compute " + secs(t.compute);
  for (auto [name, v] :
       {std::pair{"recompute", t.recompute}, std::pair{"tp", t.tp},
        std::pair{"cp", t.cp}, std::pair{"ep", t.ep}, std::pair{"pp", t.pp},
        std::pair{"bubble", t.bubble}, std::pair{"dp", t.dp},
        std::pair{"offload", t.offload}})
    if (v > 0)
      parts += std::string(" + ") + name + " " + secs(v);
  s += "time      " + parts + " = " + secs(e.stepTime) +
       " s per step (bubble " + fixed(e.bubble, 3) + " of the step)\n";
  s += "speed     " + grouped(e.tokensPerSecond) + " tokens/s, " +
       fixed(e.tflopsPerGpu, 1) + " TFLOP/s per GPU (" +
       fixed(e.hardwareTflopsPerGpu, 1) + " with recomputation), MFU " +
       fixed(100 * e.mfu, 1) + "%\n";
  return s;
}

std::string estimateToJson(const Estimate &est) {
  return document([&](llvm::json::OStream &j) { writeEstimate(j, est); });
}

std::string planFileJson(const ModelSpec &m, const TrainingConfig &t,
                         const ClusterSpec &c, const Estimate &est) {
  const Layout &l = est.layout;
  return document([&](llvm::json::OStream &j) {
    j.object([&] {
      j.attribute("format", "cleave-plan");
      j.attribute("version", kPlanFormatVersion);

      j.attributeObject("model", [&] {
        j.attribute("name", m.name);
        j.attribute("arch", archName(m.arch));
        j.attribute("layers", m.layers);
        j.attribute("hidden", m.hidden);
        j.attribute("heads", m.heads);
        j.attribute("kv_heads", m.kvHeads ? m.kvHeads : m.heads);
        j.attribute("ffn", m.ffn);
        j.attribute("vocab", m.vocab);
        j.attribute("seq", m.seq);
        j.attribute("experts", m.experts);
        j.attribute("top_k", m.topK);
        j.attribute("params", m.params().total());
      });

      j.attributeObject("training", [&] {
        j.attribute("global_batch", t.globalBatch);
        j.attribute("micro_batch", est.microBatch);
        j.attribute("precision", precisionName(t.precision));
        j.attribute("master_weights", t.masterWeights);
        j.attribute("f32_grads", t.f32Grads);
        j.attribute("optimizer", optimizerName(t.optimizer));
        j.attribute("offload", t.offload);
        j.attribute("sequence_parallel", t.sequenceParallel);
      });

      j.attributeObject("cluster", [&] {
        j.attribute("name", c.name);
        j.attribute("gpus", c.gpus);
        j.attribute("gpus_per_node", c.gpusPerNode);
        number(j, "gpu_mem_gb", c.memGB);
        number(j, "gpu_tflops", c.tflops);
        number(j, "intra_bw_gbs", c.intraBW);
        number(j, "inter_bw_gbs", c.interBW);
      });

      // Major to minor; the batch is split over dp and ep, experts over ep.
      const int64_t dpAxis = l.foldEp ? l.dp / l.ep : l.dp;
      j.attributeArray("mesh", [&] {
        for (auto [axis, size] :
             {std::pair{"pp", l.pp}, std::pair{"dp", dpAxis},
              std::pair{"ep", l.ep}, std::pair{"cp", l.cp},
              std::pair{"tp", l.tp}})
          oneLine(j, [&](llvm::json::OStream &row) {
            row.object([&] {
              row.attribute("axis", axis);
              row.attribute("size", size);
            });
          });
      });

      j.attributeObject("layout", [&] {
        j.attribute("dp", l.dp);
        j.attribute("tp", l.tp);
        j.attribute("pp", l.pp);
        j.attribute("cp", l.cp);
        j.attribute("ep", l.ep);
        j.attribute("fold_ep", l.foldEp);
        j.attribute("zero", l.zero);
        j.attribute("microbatches", l.microbatches);
        j.attribute("schedule", scheduleName(l.schedule));
        j.attribute("virtual_stages", l.chunks());
        j.attribute("recompute", recomputeName(l.recompute));
      });

      // Chunk k of p * v holds the k-th run of layers and runs on stage k
      // mod p.
      const int64_t v = l.chunks();
      std::vector<int64_t> starts = est.pipeline.chunkStarts;
      starts.push_back(m.layers);
      j.attributeArray("stages", [&] {
        for (int64_t stage = 0; stage < l.pp; ++stage)
          oneLine(j, [&](llvm::json::OStream &row) {
            row.object([&] {
              row.attribute("stage", stage);
              row.attributeArray("layers", [&] {
                for (int64_t i = 0; i < v; ++i) {
                  int64_t k = i * l.pp + stage;
                  row.array([&] {
                    row.value(starts[k]);
                    row.value(starts[k + 1]);
                  });
                }
              });
            });
          });
      });

      j.attributeBegin("estimate");
      writeEstimate(j, est);
      j.attributeEnd();
    });
  });
}

} // namespace cleave::planner
