//===- Profile.cpp - the trainer's kernel profiler ------------------------===//

#include "Profile.h"
#include "Json.h"
#include "Mesh.h"
#include "Program.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace {

enum class MarkKind : int8_t { Op, RunEnd, StepBegin, StepEnd };

struct Mark {
  const cleave_rt_kernel_info *kernel;
  int64_t marker, step;
  MarkKind kind;
};

// The recorder: only the thread that runs the program marks. Counting,
// in the step before the first profiled one, tells how many markers the
// profiled steps take, so that they are made before (a GPU marker's event
// and host memory cost more than the kernels they time).
enum class Mode : int8_t { Off, Counting, Recording };
Mode mode = Mode::Off;
int64_t recordedStep = 0, counted = 0;
std::vector<Mark> marks;

void record(const cleave_rt_kernel_info *kernel, MarkKind kind) {
  marks.push_back({kernel, cleave_rt_marker_record(), recordedStep, kind});
}

} // namespace

extern "C" void cleave_rt_profile_mark(const cleave_rt_kernel_info *kernel) {
  if (__builtin_expect(mode == Mode::Off, 1))
    return;
  if (mode == Mode::Counting)
    ++counted;
  else
    record(kernel, kernel ? MarkKind::Op : MarkKind::RunEnd);
}

namespace cleave::rt::trainer {

namespace {

/// The marks as events and steps: waits for the last, then frees them all.
void resolve(std::vector<ProfileEvent> &events,
             std::vector<ProfileStep> &steps) {
  if (marks.empty())
    return;
  cleave_rt_marker_wait(marks.back().marker);
  std::vector<double> t(marks.size());
  for (size_t i = 0; i < marks.size(); ++i)
    t[i] = cleave_rt_marker_elapsed_ms(marks.front().marker, marks[i].marker);
  for (size_t i = 0; i < marks.size(); ++i) {
    const Mark &m = marks[i];
    if (m.kind == MarkKind::Op && i + 1 < marks.size())
      events.push_back({m.kernel, m.step, t[i], t[i + 1]});
    else if (m.kind == MarkKind::StepBegin)
      steps.push_back({m.step, t[i], t[i]});
    else if (m.kind == MarkKind::StepEnd && !steps.empty())
      steps.back().end = t[i];
  }
  for (const Mark &m : marks)
    cleave_rt_marker_free(m.marker);
  marks.clear();
}

bool isCollective(const cleave_rt_kernel_info *k) {
  return std::strncmp(k->op, "dist.", 5) == 0;
}

std::string number(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

} // namespace

std::vector<ProfileRow> profileRows(const std::vector<ProfileEvent> &events,
                                    const std::vector<ProfileStep> &steps,
                                    double &stepMs, double &opMs) {
  stepMs = opMs = 0;
  if (steps.empty())
    return {};
  for (const ProfileStep &s : steps)
    stepMs += s.end - s.start;
  double n = double(steps.size());
  stepMs /= n;
  std::map<std::pair<std::string, std::string>, ProfileRow> byKind;
  for (const ProfileEvent &e : events) {
    ProfileRow &row = byKind[{e.kernel->op, e.kernel->shapes}];
    if (row.calls == 0) {
      row.op = e.kernel->op;
      row.shapes = e.kernel->shapes;
      row.where = e.kernel->where;
    }
    ++row.calls;
    row.ms += e.end - e.start;
    row.flops += e.kernel->flops;
  }
  std::vector<ProfileRow> rows;
  for (auto &[key, row] : byKind) {
    row.ms /= n;
    row.flops /= n;
    row.calls = int64_t(double(row.calls) / n + 0.5);
    row.share = stepMs > 0 ? row.ms / stepMs : 0;
    opMs += row.ms;
    rows.push_back(row);
  }
  std::stable_sort(
      rows.begin(), rows.end(),
      [](const ProfileRow &a, const ProfileRow &b) { return a.ms > b.ms; });
  return rows;
}

std::string chromeTraceEvents(int64_t rank,
                              const std::vector<ProfileEvent> &events,
                              const std::vector<ProfileStep> &steps) {
  std::ostringstream os;
  auto common = [&](const char *cat, int tid, double start, double end) {
    os << ", \"cat\": \"" << cat << "\", \"ph\": \"X\", \"pid\": " << rank
       << ", \"tid\": " << tid << ", \"ts\": " << number(start * 1e3)
       << ", \"dur\": " << number((end - start) * 1e3);
  };
  const char *rows[] = {"ops", "collectives", "steps"};
  os << "  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << rank
     << ", \"args\": {\"name\": \"rank " << rank << "\"}},\n";
  for (int tid = 0; tid < 3; ++tid)
    os << "  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << rank
       << ", \"tid\": " << tid << ", \"args\": {\"name\": \"" << rows[tid]
       << "\"}},\n";
  for (const ProfileStep &s : steps) {
    os << "  {\"name\": \"step " << s.step << "\"";
    common("step", 2, s.start, s.end);
    os << "},\n";
  }
  for (const ProfileEvent &e : events) {
    const cleave_rt_kernel_info &k = *e.kernel;
    bool collective = isCollective(e.kernel);
    os << "  {\"name\": " << jsonQuote(k.op);
    common(collective ? "collective" : "op", collective ? 1 : 0, e.start,
           e.end);
    double seconds = (e.end - e.start) * 1e-3;
    os << ", \"args\": {\"step\": " << e.step
       << ", \"where\": " << jsonQuote(k.where)
       << ", \"shapes\": " << jsonQuote(k.shapes) << ", \"bytes\": " << k.bytes
       << ", \"flops\": " << number(k.flops);
    if (k.flops > 0 && seconds > 0)
      os << ", \"gflops_per_s\": " << number(k.flops / seconds * 1e-9);
    os << "}},\n";
  }
  return os.str();
}

void Profiler::check(int64_t first, int64_t last) {
  if (!enabled())
    return;
  if (steps < 1)
    fail("--profile-steps expects a positive number of steps, got " +
         std::to_string(steps));
  // By default the steps after the first, which pays for warm-up.
  if (start == 0)
    start = last > first ? first + 1 : first;
  else if (start < first || start > last)
    fail("--profile-start " + std::to_string(start) +
         " is not a step of this run (" + std::to_string(first) + ".." +
         std::to_string(last) + ")");
  if (!isRankZero())
    return;
  checkWritable("--profile", path);
}

void Profiler::beforeStep(int64_t step) {
  if (!enabled())
    return;
  if (step == start - 1) {
    mode = Mode::Counting;
    return;
  }
  if (step < start || step >= start + steps)
    return;
  if (step == start && counted > 0) {
    // The markers of every profiled step (two more a step for its bounds),
    // made now and freed for the marks to reuse.
    std::vector<int64_t> made(size_t((counted + 2) * steps));
    for (int64_t &m : made)
      m = cleave_rt_marker_record();
    for (int64_t m : made)
      cleave_rt_marker_free(m);
  }
  recordedStep = step;
  mode = Mode::Recording;
  record(nullptr, MarkKind::StepBegin);
}

void Profiler::afterStep(int64_t) {
  if (mode == Mode::Recording)
    record(nullptr, MarkKind::StepEnd);
  mode = Mode::Off;
}

void Profiler::finish(bool quiet) {
  if (!enabled())
    return;
  mode = Mode::Off;
  std::vector<ProfileEvent> events;
  std::vector<ProfileStep> stepsRun;
  resolve(events, stepsRun);
  const Device &dev = device();
  std::string mine = chromeTraceEvents(dev.rank, events, stepsRun);
  std::string all = mine;
  if (dev.distributed) {
    // Every rank sends as many bytes as the most any has, padded with
    // NULs.
    int64_t most = dev.comm->host_max(CLEAVE_COMM_WORLD, int64_t(mine.size()));
    mine.resize(size_t(most), '\0');
    std::string gathered(isRankZero() ? size_t(most) * size_t(dev.size) : 0,
                         '\0');
    dev.comm->host_gather(CLEAVE_COMM_WORLD, mine.data(), most,
                          gathered.data());
    all.clear();
    for (int64_t r = 0; r < (isRankZero() ? dev.size : 0); ++r) {
      std::string part = gathered.substr(size_t(r * most), size_t(most));
      all += part.substr(0, part.find('\0'));
    }
  }
  if (!isRankZero())
    return;
  int64_t firstStep = stepsRun.empty() ? 0 : stepsRun.front().step;
  int64_t lastStep = stepsRun.empty() ? 0 : stepsRun.back().step;
  std::ofstream out(path);
  out << "{\"traceEvents\": [\n"
      << all << "  {\"name\": \"profile\", \"ph\": \"M\", \"pid\": 0, "
      << "\"args\": {}}\n], \"displayTimeUnit\": \"ms\", \"otherData\": "
      << "{\"backend\": " << jsonQuote(cleave_rt_backend_name())
      << ", \"ranks\": " << dev.size << ", \"steps\": [" << firstStep << ", "
      << lastStep << "]}}\n";
  out.close();
  if (!out)
    fail("--profile: cannot write " + path);
  if (quiet)
    return;
  if (stepsRun.empty()) {
    std::printf("profile: no step of %lld..%lld ran; %s has no events\n",
                (long long)start, (long long)(start + steps - 1), path.c_str());
    return;
  }
  double stepMs = 0, opMs = 0;
  std::vector<ProfileRow> rows = profileRows(events, stepsRun, stepMs, opMs);
  int64_t opsPerStep = 0;
  for (const ProfileRow &r : rows)
    opsPerStep += r.calls;
  std::printf("profile: wrote %s: steps %lld..%lld on %d rank%s (%s); "
              "rank 0's step %.3f ms, %.1f%% of it in its %lld ops\n",
              path.c_str(), (long long)firstStep, (long long)lastStep,
              int(dev.size), dev.size == 1 ? "" : "s", cleave_rt_backend_name(),
              stepMs, stepMs > 0 ? 100 * opMs / stepMs : 0.0,
              (long long)opsPerStep);
  std::printf("  %10s %6s %5s %8s  %s\n", "ms/step", "share", "calls",
              "GFLOP/s", "op, types (first at)");
  for (size_t i = 0; i < rows.size() && i < 12; ++i) {
    const ProfileRow &r = rows[i];
    char rate[32] = "-";
    if (r.flops > 0 && r.ms > 0)
      std::snprintf(rate, sizeof(rate), "%.1f", r.flops / r.ms * 1e-6);
    std::string where = r.where.empty() ? "" : " (" + r.where + ")";
    std::printf("  %10.3f %5.1f%% %5lld %8s  %s %s%s\n", r.ms, 100 * r.share,
                (long long)r.calls, rate, r.op.c_str(), r.shapes.c_str(),
                where.c_str());
  }
}

} // namespace cleave::rt::trainer
