//===- Timeline.cpp - the trainer's measured pipeline timeline -----------===//
//
// See Timeline.h.
//
//===----------------------------------------------------------------------===//

#include "Timeline.h"
#include "Mesh.h"
#include "Program.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>


namespace cleave::rt::trainer {

namespace {

bool isPhase(int32_t kind) {
  return kind == CLEAVE_COMM_TRACE_FORWARD ||
         kind == CLEAVE_COMM_TRACE_BACKWARD ||
         kind == CLEAVE_COMM_TRACE_OPTIMIZER;
}

bool isTransfer(int32_t kind) {
  return kind == CLEAVE_COMM_TRACE_SEND || kind == CLEAVE_COMM_TRACE_RECV ||
         kind == CLEAVE_COMM_TRACE_SENDRECV;
}

std::string eventName(const cleave_comm_trace_event &e) {
  switch (e.kind) {
  case CLEAVE_COMM_TRACE_FORWARD:
  case CLEAVE_COMM_TRACE_BACKWARD:
    // The planned timeline's names: F<microbatch>.<chunk>.
    return (e.kind == CLEAVE_COMM_TRACE_FORWARD ? "F" : "B") +
           std::to_string(e.microbatch) + "." + std::to_string(e.chunk);
  case CLEAVE_COMM_TRACE_OPTIMIZER:
    return "optimizer";
  case CLEAVE_COMM_TRACE_SEND:
    return "send to " + std::to_string(e.peer);
  case CLEAVE_COMM_TRACE_RECV:
    return "receive from " + std::to_string(e.peer);
  case CLEAVE_COMM_TRACE_SENDRECV:
    return "send to " + std::to_string(e.peer) + " and receive";
  default:
    return "step " + std::to_string(e.step);
  }
}

const char *category(int32_t kind) {
  switch (kind) {
  case CLEAVE_COMM_TRACE_FORWARD:
    return "forward";
  case CLEAVE_COMM_TRACE_BACKWARD:
    return "backward";
  case CLEAVE_COMM_TRACE_OPTIMIZER:
    return "optimizer";
  case CLEAVE_COMM_TRACE_STEP:
    return "step";
  default:
    return "transfer";
  }
}

std::string number(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f", x);
  return buffer;
}

} // namespace

TimelineSummary summarize(const std::vector<RankEvents> &ranks,
                          int64_t stages) {
  TimelineSummary s;
  s.stages = stages;
  // Per step, per rank: [start, end] and the time in transfers.
  struct Span {
    double start = 0, end = 0, transfers = 0;
  };
  std::map<int64_t, std::vector<Span>> steps;
  for (size_t r = 0; r < ranks.size(); ++r)
    for (const cleave_comm_trace_event &e : ranks[r].events) {
      std::vector<Span> &spans = steps[e.step];
      spans.resize(ranks.size());
      if (e.kind == CLEAVE_COMM_TRACE_STEP) {
        spans[r].start = e.start;
        spans[r].end = e.end;
      } else if (isTransfer(e.kind)) {
        spans[r].transfers += e.end - e.start;
      } else if (e.kind != CLEAVE_COMM_TRACE_OPTIMIZER && isPhase(e.kind)) {
        s.microbatches = std::max<int64_t>(s.microbatches, e.microbatch + 1);
        s.chunks = std::max<int64_t>(s.chunks, e.chunk + 1);
      }
    }
  if (steps.empty())
    return s;
  if (steps.size() > 1)
    steps.erase(steps.begin());
  s.firstStep = steps.begin()->first;
  s.lastStep = steps.rbegin()->first;
  double window = 0, busy = 0, transfers = 0;
  std::vector<double> rankBusy(ranks.size(), 0.0);
  for (const auto &[step, spans] : steps) {
    double first = spans[0].start, last = spans[0].end;
    for (const Span &span : spans) {
      first = std::min(first, span.start);
      last = std::max(last, span.end);
    }
    window += last - first;
    for (size_t r = 0; r < spans.size(); ++r) {
      double b = spans[r].end - spans[r].start - spans[r].transfers;
      busy += b;
      rankBusy[r] += b;
      transfers += spans[r].transfers;
    }
  }
  const double all = window * double(ranks.size());
  s.idle = all > 0 ? 1.0 - busy / all : 0;
  s.transfers = all > 0 ? transfers / all : 0;
  for (double b : rankBusy)
    s.rankIdle.push_back(window > 0 ? 1.0 - b / window : 0);
  const double p = double(stages), v = double(std::max<int64_t>(s.chunks, 1)),
               m = double(s.microbatches);
  s.closedForm = stages > 1 && m > 0 ? (p - 1) / (v * m + p - 1) : 0;
  return s;
}

std::string chromeTrace(const std::vector<RankEvents> &ranks,
                        const TimelineSummary &summary) {
  std::ostringstream os;
  os << "{\"traceEvents\": [";
  bool first = true;
  for (const RankEvents &r : ranks) {
    os << (first ? "" : ",") << "\n  {\"name\": \"thread_name\", \"ph\": "
       << "\"M\", \"pid\": 0, \"tid\": " << r.rank
       << ", \"args\": {\"name\": \"rank " << r.rank << " (stage " << r.stage
       << ")\"}}";
    first = false;
    for (const cleave_comm_trace_event &e : r.events)
      os << ",\n  {\"name\": \"" << eventName(e) << "\", \"cat\": \""
         << category(e.kind) << "\", \"ph\": \"X\", \"pid\": 0, \"tid\": "
         << r.rank << ", \"ts\": " << number(e.start * 1e6)
         << ", \"dur\": " << number((e.end - e.start) * 1e6)
         << ", \"args\": {\"step\": " << e.step << "}}";
  }
  os << "\n], \"displayTimeUnit\": \"ms\", \"otherData\": {"
     << "\"measured_steps\": [" << summary.firstStep << ", "
     << summary.lastStep << "], \"stages\": " << summary.stages
     << ", \"microbatches\": " << summary.microbatches
     << ", \"chunks\": " << summary.chunks
     << ", \"idle_fraction\": " << summary.idle
     << ", \"transfer_fraction\": " << summary.transfers
     << ", \"closed_form_bubble\": " << summary.closedForm
     << ", \"rank_idle_fraction\": [";
  for (size_t r = 0; r < summary.rankIdle.size(); ++r)
    os << (r ? ", " : "") << summary.rankIdle[r];
  os << "]}}\n";
  return os.str();
}

void RunTimeline::check() const {
  if (!enabled())
    return;
  if (numStages() < 1)
    fail("--trace " + path +
         ": the measured timeline is of a pipelined program's stages "
         "(compiled with --mesh pp=...); this program has none");
  if (steps < 1)
    fail("--trace-steps expects a positive number of steps, got " +
         std::to_string(steps));
  if (!isRankZero())
    return;
  checkWritable("--trace", path);
}

void RunTimeline::start() {
  if (!enabled())
    return;
  const Device &dev = device();
  // The ranks start their clocks together, so their rows line up.
  dev.comm->barrier(CLEAVE_COMM_WORLD);
  dev.comm->trace_start();
  running = true;
}

void RunTimeline::beforeStep(int64_t step) {
  if (running)
    device().comm->trace_step(int32_t(step), 1);
}

void RunTimeline::afterStep(int64_t step) {
  if (!running)
    return;
  const Device &dev = device();
  dev.comm->trace_step(int32_t(step), 0);
  if (++traced == steps) {
    dev.comm->trace_stop();
    running = false;
  }
}

void RunTimeline::finish(bool quiet) {
  if (!enabled())
    return;
  const Device &dev = device();
  if (running) {
    dev.comm->trace_stop();
    running = false;
  }
  const cleave_comm_trace_event *mine = nullptr;
  int64_t count = dev.comm->trace_events(&mine);
  // Every rank sends as many events as the most any has, padded.
  const int64_t most = dev.comm->host_max(CLEAVE_COMM_WORLD, count);
  cleave_comm_trace_event padding{};
  padding.kind = -1;
  std::vector<cleave_comm_trace_event> sent(size_t(most), padding);
  std::copy(mine, mine + count, sent.begin());
  std::vector<cleave_comm_trace_event> all(
      isRankZero() ? size_t(most) * size_t(dev.size) : 0);
  dev.comm->host_gather(CLEAVE_COMM_WORLD, sent.data(),
                        most * int64_t(sizeof(cleave_comm_trace_event)),
                        all.data());
  if (!isRankZero())
    return;
  std::vector<RankEvents> ranks(size_t(dev.size));
  for (int64_t r = 0; r < dev.size; ++r) {
    RankEvents &re = ranks[size_t(r)];
    re.rank = r;
    // The row-major coordinate of rank r along the stage axis.
    int64_t rest = r;
    for (int64_t a = int64_t(dev.shape.size()) - 1; a >= 0; --a) {
      if (a == dev.stageAxis)
        re.stage = rest % dev.shape[size_t(a)];
      rest /= dev.shape[size_t(a)];
    }
    for (int64_t i = 0; i < most; ++i) {
      const cleave_comm_trace_event &e = all[size_t(r * most + i)];
      if (e.kind >= 0)
        re.events.push_back(e);
    }
  }
  TimelineSummary summary = summarize(ranks, numStages());
  std::ofstream out(path);
  out << chromeTrace(ranks, summary);
  out.close();
  if (!out)
    fail("--trace: cannot write " + path);
  if (quiet)
    return;
  std::printf("timeline: wrote %s; steps %lld..%lld on %d ranks: idle %.3f "
              "of the step (transfers %.3f); the schedule's bubble with "
              "equal stages (p-1)/(vm+p-1) = %.3f\n",
              path.c_str(), (long long)summary.firstStep,
              (long long)summary.lastStep, int(dev.size), summary.idle,
              summary.transfers, summary.closedForm);
  for (const RankEvents &r : ranks)
    std::printf("  rank %lld (stage %lld): idle %.3f\n", (long long)r.rank,
                (long long)r.stage, summary.rankIdle[size_t(r.rank)]);
}

} // namespace cleave::rt::trainer
