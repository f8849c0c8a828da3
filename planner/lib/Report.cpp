//===- Report.cpp - text, JSON and plan-file output ---------------------===//
//
// A small JSON writer (objects keep insertion order; numbers print with six
// significant digits) and the three outputs of the planner.
//
//===----------------------------------------------------------------------===//

#include "cleave/Planner/Report.h"

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

/// Writes JSON with one member per line, or on one line for `compact`
/// containers.
class JsonWriter {
public:
  void beginObject(bool compact = false) { open('{', compact); }
  void endObject() { close('}'); }
  void beginArray(bool compact = false) { open('[', compact); }
  void endArray() { close(']'); }

  void key(const std::string &k) {
    separate();
    string(k);
    out += ": ";
    afterKey = true;
  }
  void value(const std::string &s) {
    separate();
    string(s);
  }
  void value(const char *s) { value(std::string(s)); }
  void value(bool b) {
    separate();
    out += b ? "true" : "false";
  }
  void value(int64_t i) {
    separate();
    out += std::to_string(i);
  }
  void value(int i) { value(int64_t(i)); }
  void value(double d) {
    separate();
    if (!std::isfinite(d)) {
      out += "null";
      return;
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6g", d);
    out += buf;
  }
  template <typename T> void member(const std::string &k, T v) {
    key(k);
    value(v);
  }

  std::string str() const { return out + "\n"; }

private:
  struct Level {
    bool compact;
    bool empty = true;
  };

  void open(char c, bool compact) {
    separate();
    out += c;
    // A compact parent keeps its children compact.
    bool inherit = !stack.empty() && stack.back().compact;
    stack.push_back({compact || inherit});
  }
  void close(char c) {
    Level level = stack.back();
    stack.pop_back();
    if (!level.compact && !level.empty)
      newline();
    out += c;
  }
  void separate() {
    if (afterKey) {
      afterKey = false;
      return;
    }
    if (stack.empty())
      return;
    Level &level = stack.back();
    if (!level.empty)
      out += level.compact ? ", " : ",";
    if (!level.compact)
      newline();
    level.empty = false;
  }
  void newline() {
    out += '\n';
    out.append(2 * stack.size(), ' ');
  }
  void string(const std::string &s) {
    out += '"';
    for (char c : s) {
      switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
      }
    }
    out += '"';
  }

  std::string out;
  std::vector<Level> stack;
  bool afterKey = false;
};

void writeEstimate(JsonWriter &w, const Estimate &est) {
  const Layout &l = est.layout;
  w.beginObject();
  w.key("layout");
  w.beginObject();
  w.member("dp", l.dp);
  w.member("tp", l.tp);
  w.member("pp", l.pp);
  w.member("cp", l.cp);
  w.member("ep", l.ep);
  w.member("zero", l.zero);
  w.member("microbatches", l.microbatches);
  w.member("schedule", scheduleName(l.schedule));
  w.member("recompute", recomputeName(l.recompute));
  w.endObject();

  const MemoryEstimate &m = est.memory;
  w.key("memory_gb");
  w.beginObject();
  w.member("params", m.params / 1e9);
  w.member("grads", m.grads / 1e9);
  w.member("optimizer", m.optimizer / 1e9);
  w.member("activations", m.activations / 1e9);
  w.member("total", m.total() / 1e9);
  w.endObject();

  const CommEstimate &c = est.comm;
  LinkBytes all = c.total();
  w.key("comm_gb");
  w.beginObject();
  w.member("intra_node", all.intra / 1e9);
  w.member("inter_node", all.inter / 1e9);
  w.member("tp", c.tp.total() / 1e9);
  w.member("cp", c.cp.total() / 1e9);
  w.member("ep", c.ep.total() / 1e9);
  w.member("pp", c.pp.total() / 1e9);
  w.member("dp", c.dp.total() / 1e9);
  w.endObject();

  w.member("bubble", est.bubble);
  w.member("step_time_s", est.stepTime);
  w.member("tflops_per_gpu", est.tflopsPerGpu);
  w.member("mfu", est.mfu);
  w.endObject();
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
                "%3s %4s %4s %4s %4s %4s %5s %-14s %4s %-9s %7s %6s %8s %12s "
                "%6s  %s\n",
                "#", "tp", "pp", "dp", "cp", "ep", "mb", "schedule", "zero",
                "recompute", "mem GB", "bubble", "step s", "tokens/s", "MFU",
                "why it loses");
  s += line;
  for (size_t i = 0; i < r.ranked.size() && i < rows; ++i) {
    const Estimate &e = r.ranked[i].estimate;
    const Layout &l = e.layout;
    std::string schedule = scheduleName(l.schedule);
    if (l.schedule == Schedule::Interleaved)
      schedule += "/" + std::to_string(l.virtualStages);
    std::snprintf(
        line, sizeof(line),
        "%3zu %4lld %4lld %4lld %4lld %4lld %5lld %-14s %4d %-9s %7.1f %6.3f "
        "%8.3g %12s %5.1f%%  %s\n",
        i + 1, (long long)l.tp, (long long)l.pp, (long long)l.dp,
        (long long)l.cp, (long long)l.ep, (long long)l.microbatches,
        schedule.c_str(), l.zero, recomputeName(l.recompute),
        e.memory.total() / 1e9, e.bubble, e.stepTime,
        grouped(e.tokensPerSecond).c_str(), 100 * e.mfu,
        r.ranked[i].reason.c_str());
    s += line;
  }
  return s;
}

std::string formatEstimate(const Estimate &e, const ClusterSpec &c) {
  const Layout &l = e.layout;
  const MemoryEstimate &m = e.memory;
  std::string s = "layout    " + l.str() + " (" + std::to_string(e.microBatch) +
                  (e.microBatch == 1 ? " sequence" : " sequences") +
                  " per microbatch)\n";
  s += "memory    per GPU on stage " + std::to_string(m.stage) + ": params " +
       size(m.params) + " + grads " + size(m.grads) + " + optimizer " +
       size(m.optimizer) + " + activations " + size(m.activations) + " = " +
       size(m.total()) + " of " + size(c.usableBytes()) + " usable";
  if (m.offloaded > 0)
    s += "; " + size(m.offloaded) + " of optimizer state in host memory";
  s += "\n";

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
       " s per step (bubble fraction " + fixed(e.bubble, 3) + ")\n";
  s += "speed     " + grouped(e.tokensPerSecond) + " tokens/s, " +
       fixed(e.tflopsPerGpu, 1) + " TFLOP/s per GPU, MFU " +
       fixed(100 * e.mfu, 1) + "%\n";
  return s;
}

std::string estimateToJson(const Estimate &est) {
  JsonWriter w;
  writeEstimate(w, est);
  return w.str();
}

std::string planFileJson(const ModelSpec &m, const TrainingConfig &t,
                         const ClusterSpec &c, const Estimate &est) {
  const Layout &l = est.layout;
  JsonWriter w;
  w.beginObject();
  w.member("format", "cleave-plan");
  w.member("version", kPlanFormatVersion);

  w.key("model");
  w.beginObject();
  w.member("name", m.name);
  w.member("arch", archName(m.arch));
  w.member("layers", m.layers);
  w.member("hidden", m.hidden);
  w.member("heads", m.heads);
  w.member("kv_heads", m.kvHeads ? m.kvHeads : m.heads);
  w.member("ffn", m.ffn);
  w.member("vocab", m.vocab);
  w.member("seq", m.seq);
  w.member("experts", m.experts);
  w.member("top_k", m.topK);
  w.member("params", m.params().total());
  w.endObject();

  w.key("training");
  w.beginObject();
  w.member("global_batch", t.globalBatch);
  w.member("micro_batch", est.microBatch);
  w.member("precision", precisionName(t.precision));
  w.member("master_weights", t.masterWeights);
  w.member("f32_grads", t.f32Grads);
  w.member("optimizer", optimizerName(t.optimizer));
  w.member("offload", t.offload);
  w.member("sequence_parallel", t.sequenceParallel);
  w.endObject();

  w.key("cluster");
  w.beginObject();
  w.member("name", c.name);
  w.member("gpus", c.gpus);
  w.member("gpus_per_node", c.gpusPerNode);
  w.member("gpu_mem_gb", c.memGB);
  w.member("gpu_tflops", c.tflops);
  w.member("intra_bw_gbs", c.intraBW);
  w.member("inter_bw_gbs", c.interBW);
  w.endObject();

  // Major to minor; the batch is split over dp and ep, experts over ep.
  w.key("mesh");
  w.beginArray();
  const int64_t dpAxis = l.foldEp ? l.dp / l.ep : l.dp;
  for (auto [axis, size] :
       {std::pair{"pp", l.pp}, std::pair{"dp", dpAxis}, std::pair{"ep", l.ep},
        std::pair{"cp", l.cp}, std::pair{"tp", l.tp}}) {
    w.beginObject(/*compact=*/true);
    w.member("axis", axis);
    w.member("size", size);
    w.endObject();
  }
  w.endArray();

  w.key("layout");
  w.beginObject();
  w.member("dp", l.dp);
  w.member("tp", l.tp);
  w.member("pp", l.pp);
  w.member("cp", l.cp);
  w.member("ep", l.ep);
  w.member("fold_ep", l.foldEp);
  w.member("zero", l.zero);
  w.member("microbatches", l.microbatches);
  w.member("schedule", scheduleName(l.schedule));
  w.member("virtual_stages", l.chunks());
  w.member("recompute", recomputeName(l.recompute));
  w.endObject();

  // Chunk k of p * v holds the k-th run of layers and runs on stage k mod p.
  w.key("stages");
  w.beginArray();
  const int64_t v = l.chunks();
  std::vector<int64_t> chunks = splitLayers(m.layers, l.pp * v);
  std::vector<int64_t> starts(chunks.size() + 1, 0);
  for (size_t k = 0; k < chunks.size(); ++k)
    starts[k + 1] = starts[k] + chunks[k];
  for (int64_t stage = 0; stage < l.pp; ++stage) {
    w.beginObject(/*compact=*/true);
    w.member("stage", stage);
    w.key("layers");
    w.beginArray();
    for (int64_t j = 0; j < v; ++j) {
      int64_t k = j * l.pp + stage;
      w.beginArray();
      w.value(starts[k]);
      w.value(starts[k + 1]);
      w.endArray();
    }
    w.endArray();
    w.endObject();
  }
  w.endArray();

  w.key("estimate");
  writeEstimate(w, est);
  w.endObject();
  return w.str();
}

} // namespace cleave::planner
