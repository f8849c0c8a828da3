//===- CommState.h - the state the C ABI's two files share ------*- C++ -*-===//
//
// What Comm.cpp (start-up, groups, counters) and Collectives.cpp (every
// collective's checks, byte counts and handles) share: the engine's state,
// its groups and the nonblocking collectives in flight, and the lookups of
// a communicator that check the engine is running.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_COMM_COMMSTATE_H
#define CLEAVE_RUNTIME_LIB_COMM_COMMSTATE_H

#include "Engine.h"

#include "cleave/Runtime/cleave_rt.h"

#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace cleave::rt::comm {

/// A nonblocking collective between its start and its wait.
struct InFlight {
  OperationPtr operation;
  const char *fn;
  const Group *group;
  /// The arena bytes it reads and those it writes, [begin, end).
  std::pair<const char *, const char *> reads, writes;
  /// A started receive: its wait is a transfer of the timeline.
  int32_t traceKind = -1, peer = -1;
};

struct State {
  bool initialized = false;
  bool finalized = false;
  /// Whether init started MPI (a test harness may have done it before).
  bool ownsMpi = false;
  int worldRank = -1;
  int worldSize = 0;
  std::unique_ptr<Engine> engine;
  std::vector<std::unique_ptr<Group>> groups;
  /// (mesh, axes) -> group id, so that asking twice gives the same handle.
  std::map<std::pair<std::vector<int64_t>, std::vector<int64_t>>, int32_t>
      byAxes;
  /// The nonblocking collectives not yet waited for, by handle; handles
  /// count up from 1 and are never reused.
  std::map<int64_t, InFlight> inFlight;
  int64_t lastHandle = 0;
};

inline State &state() {
  static State s;
  return s;
}

inline void requireInit(const char *fn) {
  State &s = state();
  if (!s.initialized || s.finalized)
    cleave_rt_fail("%s: the communication engine is not running (call "
                   "cleave_comm_init first)",
                   fn);
}

inline Group &groupOf(const char *fn, int32_t comm) {
  requireInit(fn);
  State &s = state();
  if (comm < 0 || comm >= int32_t(s.groups.size()))
    cleave_rt_fail("%s: communicator %d does not exist (%d created)", fn,
                   int(comm), int(s.groups.size()));
  return *s.groups[comm];
}

/// groupOf for a collective or a wait: first lets the engine check what is
/// in flight (its watchdog, MPI's progress).
inline Group &collectiveGroup(const char *fn, int32_t comm) {
  Group &g = groupOf(fn, comm);
  state().engine->poll();
  return g;
}

} // namespace cleave::rt::comm

#endif // CLEAVE_RUNTIME_LIB_COMM_COMMSTATE_H
