//===- Trace.h - timing the transfers of the timeline -----------*- C++ -*-===//
//
// What Collectives.cpp needs of Trace.cpp: a scope that records a
// point-to-point transfer's call as a timeline event while tracing is on.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_COMM_TRACE_H
#define CLEAVE_RUNTIME_LIB_COMM_TRACE_H

#include <cstdint>

namespace cleave::rt::comm {

/// True between cleave_comm_trace_start and cleave_comm_trace_stop.
bool tracing();

/// Records [construction, destruction) as a transfer event of `kind`
/// (CLEAVE_COMM_TRACE_SEND, RECV or SENDRECV) with `peer`, when tracing;
/// nothing for a kind < 0.
class TraceTransfer {
public:
  TraceTransfer(int32_t kind, int32_t peer, const char *fn);
  ~TraceTransfer();
  TraceTransfer(const TraceTransfer &) = delete;
  TraceTransfer &operator=(const TraceTransfer &) = delete;

private:
  int32_t kind, peer;
  const char *fn;
  double start = 0;
  bool active = false;
};

} // namespace cleave::rt::comm

#endif // CLEAVE_RUNTIME_LIB_COMM_TRACE_H
