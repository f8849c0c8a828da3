//===- Trace.cpp - the measured timeline of a pipelined program ----------===//
//
// The events of cleave_comm.h's timeline: the trainer's runs of the
// program, the schedule steps the compiled stage program marks, and the
// point-to-point transfers (TraceTransfer, around each in Collectives.cpp),
// timed with the steady clock while tracing is on. Compiled into both
// engines' libraries with Comm.cpp.
//
//===----------------------------------------------------------------------===//

#include "CommState.h"
#include "Trace.h"

#include <chrono>
#include <vector>

using namespace cleave::rt::comm;

namespace {

struct Tracer {
  bool on = false;
  std::chrono::steady_clock::time_point origin;
  std::vector<cleave_comm_trace_event> events;
  /// The open STEP and schedule-step events (indices), or -1.
  int64_t openStep = -1, openPhase = -1;
  int32_t step = 0;

  double now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         origin)
        .count();
  }
  void closePhase(double t) {
    if (openPhase >= 0)
      events[size_t(openPhase)].end = t;
    openPhase = -1;
  }
  int64_t open(int32_t kind, int32_t microbatch, int32_t chunk, int32_t peer,
               double t) {
    events.push_back({t, t, kind, step, microbatch, chunk, peer, 0});
    return int64_t(events.size()) - 1;
  }
};

Tracer &tracer() {
  static Tracer t;
  return t;
}

/// Lets the engine finish the device's work before the clock is read.
void settle(const char *fn) {
  State &s = state();
  if (s.initialized && !s.finalized && s.engine)
    s.engine->settle(fn);
}

} // namespace

namespace cleave::rt::comm {

bool tracing() { return tracer().on; }

TraceTransfer::TraceTransfer(int32_t kind, int32_t peer, const char *fn)
    : kind(kind), peer(peer), fn(fn) {
  if (kind < 0 || !tracing())
    return;
  settle(fn);
  start = tracer().now();
  active = true;
}

TraceTransfer::~TraceTransfer() {
  if (!active || !tracing())
    return;
  settle(fn);
  Tracer &t = tracer();
  double end = t.now();
  t.events[size_t(t.open(kind, 0, 0, peer, start))].end = end;
}

} // namespace cleave::rt::comm

extern "C" void cleave_comm_trace_start(void) {
  Tracer &t = tracer();
  t.events.clear();
  t.openStep = t.openPhase = -1;
  t.origin = std::chrono::steady_clock::now();
  t.on = true;
}

extern "C" void cleave_comm_trace_stop(void) {
  Tracer &t = tracer();
  if (!t.on)
    return;
  double end = t.now();
  t.closePhase(end);
  if (t.openStep >= 0)
    t.events[size_t(t.openStep)].end = end;
  t.openStep = -1;
  t.on = false;
}

extern "C" void cleave_comm_trace_step(int32_t step, int32_t begin) {
  Tracer &t = tracer();
  if (!t.on)
    return;
  settle("cleave_comm_trace_step");
  double now = t.now();
  t.closePhase(now);
  if (begin) {
    t.step = step;
    t.openStep = t.open(CLEAVE_COMM_TRACE_STEP, 0, 0, -1, now);
  } else if (t.openStep >= 0) {
    t.events[size_t(t.openStep)].end = now;
    t.openStep = -1;
  }
}

extern "C" void cleave_comm_trace_phase(int32_t kind, int32_t microbatch,
                                        int32_t chunk) {
  Tracer &t = tracer();
  if (!t.on)
    return;
  if (kind < CLEAVE_COMM_TRACE_FORWARD || kind > CLEAVE_COMM_TRACE_OPTIMIZER)
    cleave_rt_fail("cleave_comm_trace_phase: kind %d is not a schedule step "
                   "(forward %d, backward %d, optimizer %d)",
                   int(kind), int(CLEAVE_COMM_TRACE_FORWARD),
                   int(CLEAVE_COMM_TRACE_BACKWARD),
                   int(CLEAVE_COMM_TRACE_OPTIMIZER));
  settle("cleave_comm_trace_phase");
  double now = t.now();
  t.closePhase(now);
  t.openPhase = t.open(kind, microbatch, chunk, -1, now);
}

extern "C" int64_t
cleave_comm_trace_events(const cleave_comm_trace_event **events) {
  Tracer &t = tracer();
  *events = t.events.data();
  return int64_t(t.events.size());
}

extern "C" void cleave_comm_host_gather(int32_t comm, const void *data,
                                        int64_t bytes, void *out) {
  const char *fn = "cleave_comm_host_gather";
  Group &g = collectiveGroup(fn, comm);
  if (bytes < 0 || bytes > int64_t(1) << 30)
    cleave_rt_fail("%s: %lld bytes per rank (0 to 2^30)", fn,
                   (long long)bytes);
  // Host memory on both engines, over their MPI bootstrap communicator.
  Watchdog watchdog(fn, g);
  MPI_Request request;
  MPI_Igather(data, int(bytes), MPI_BYTE, out, int(bytes), MPI_BYTE, 0, g.mpi,
              &request);
  waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
}
