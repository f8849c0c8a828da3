//===- Engine.h - the communication engine interface ------------*- C++ -*-===//
//
// What the C ABI of cleave_comm.h (Comm.cpp, Collectives.cpp) shares with
// the two engines: the communicator groups (each with its MPI
// communicator, which the MPI engine uses for data and the NCCL engine for
// bootstrap and barriers), the
// engine interface that moves the bytes, and the watchdog that turns a
// collective that does not complete in time into an error on every rank.
// Collectives.cpp checks every descriptor and counts bytes before it calls an
// engine, so engines see only valid calls, and it keeps the handles of the
// nonblocking collectives: each is an engine Operation until its wait.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_COMM_ENGINE_H
#define CLEAVE_RUNTIME_LIB_COMM_ENGINE_H

#include "cleave/Runtime/cleave_comm.h"

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cleave::rt::comm {

/// "all_reduce", "all_gather", ... (the ABI function without cleave_comm_).
const char *kindName(int32_t kind);

/// One mesh-axis group of ranks and this rank's place in it.
struct Group {
  int32_t id = 0;
  /// "world [4]" or "mesh [2, 2] axes {0}": how messages name it.
  std::string label;
  std::vector<int64_t> mesh;
  std::vector<int64_t> axes;
  /// World ranks in group rank order.
  std::vector<int> worldRanks;
  int rank = 0;
  int size = 1;
  MPI_Comm mpi = MPI_COMM_NULL;
  cleave_comm_counter counters[CLEAVE_COMM_NUM_KINDS] = {};
};

/// The deadline of one call: started when the call begins, it fails the job
/// once CLEAVE_COMM_TIMEOUT_S seconds have passed.
class Watchdog {
public:
  /// `what` names the call ("cleave_comm_all_reduce").
  Watchdog(const char *what, const Group &group);
  bool expired() const;
  const char *name() const { return what; }
  const Group &groupOf() const { return group; }
  /// Reports that the call did not complete in time, aborts the engine's
  /// communicators (Engine::abort) and then the job.
  [[noreturn]] void fire() const;
  /// Polls with a backoff: spins at first, then sleeps up to a millisecond,
  /// so that ranks oversubscribing a core leave it to the rank they wait for.
  void pause();

private:
  const char *what;
  const Group &group;
  std::chrono::steady_clock::time_point start;
  unsigned polls = 0;
};

/// Waits for MPI requests under the watchdog. MPI errors are fatal (the
/// default error handler of MPI_COMM_WORLD aborts the job).
void waitRequests(int count, MPI_Request *requests, MPI_Status *statuses,
                  Watchdog &watchdog);

/// CLEAVE_COMM_TIMEOUT_S (600 when unset); fails unless it is a positive
/// number of seconds.
double timeoutSeconds();

/// Bytes in the arena `t` takes.
int64_t tensorBytes(const cleave_tensor &t);

/// A collective between its start and its wait: what a handle of
/// cleave_comm_*_start stands for (Collectives.cpp), and how a blocking call
/// completes (start, then wait at once).
class Operation {
public:
  virtual ~Operation() = default;
  /// Makes the collective's results ready for what the program does next:
  /// the MPI engine waits for it on the host, under its watchdog; the NCCL
  /// engine makes the backend's stream wait for it, and the host goes on.
  /// Called once.
  virtual void wait() = 0;
};
using OperationPtr = std::unique_ptr<Operation>;

/// Moves the bytes of valid collectives. Calls arrive in the order of the
/// program, on the thread that called cleave_comm_init. The four
/// collectives that have a nonblocking form start and return their
/// Operation; `fn` names the ABI call for the watchdog and errors.
class Engine {
public:
  virtual ~Engine() = default;
  virtual const char *name() const = 0;
  /// After MPI is up; `local` holds the ranks of this node.
  virtual void init(MPI_Comm local) = 0;
  /// A new communicator (called by every rank, in the same order).
  virtual void addGroup(Group &group) = 0;
  virtual OperationPtr allReduce(Group &group, char *arena, int32_t op,
                                 const cleave_tensor &in,
                                 const cleave_tensor &out, const char *fn) = 0;
  virtual OperationPtr allGather(Group &group, char *arena,
                                 const cleave_tensor &in,
                                 const cleave_tensor &out, const char *fn) = 0;
  virtual OperationPtr reduceScatter(Group &group, char *arena, int32_t op,
                                     const cleave_tensor &in,
                                     const cleave_tensor &out,
                                     const char *fn) = 0;
  virtual OperationPtr allToAll(Group &group, char *arena,
                                const cleave_tensor &in,
                                const cleave_tensor &out, const char *fn) = 0;
  virtual void broadcast(Group &group, char *arena, const cleave_tensor &t,
                         int root) = 0;
  virtual void send(Group &group, char *arena, const cleave_tensor &t,
                    int peer) = 0;
  virtual void recv(Group &group, char *arena, const cleave_tensor &t,
                    int peer) = 0;
  /// A receive started now and completed by its Operation's wait: the MPI
  /// engine posts it (so that the peer's send need not wait for this rank
  /// to reach the receive); the NCCL engine, whose stream runs transfers in
  /// the order they are issued, issues it at the wait, where the blocking
  /// receive was (the device overlaps it anyway).
  virtual OperationPtr recvStart(Group &group, char *arena,
                                 const cleave_tensor &t, int peer) = 0;
  /// Sends `send` to group rank sendPeer and receives `recv` from recvPeer
  /// as one grouped operation (MPI_Isend and MPI_Irecv, or ncclSend and
  /// ncclRecv in one NCCL group), so that no order of the ranks' calls
  /// deadlocks. A null tensor (its peer -1) is no send or no receive; with
  /// neither, the call still waits for the engine's pending work. `fn`
  /// names the ABI call for the watchdog and errors.
  virtual void sendRecv(Group &group, char *arena, const cleave_tensor *send,
                        int sendPeer, const cleave_tensor *recv, int recvPeer,
                        const char *fn) = 0;
  /// sendRecv started, completed by its Operation's wait: the MPI engine
  /// posts both requests; the NCCL engine issues the group on its stream.
  virtual OperationPtr sendRecvStart(Group &group, char *arena,
                                     const cleave_tensor *send, int sendPeer,
                                     const cleave_tensor *recv, int recvPeer,
                                     const char *fn) = 0;
  /// Zeroes `t`, in order with the calls around it; a following call
  /// waits for it (the NCCL engine: on the stream, without waiting here).
  virtual void zero(char *arena, const cleave_tensor &t, const char *fn) = 0;
  virtual void barrier(Group &group) = 0;
  /// Checks the collectives in flight without waiting for any: moves them
  /// on, reports their errors, and fires the watchdog of one that is past
  /// its deadline. Called at every collective and wait of the ABI and, by
  /// the NCCL engine's wait hook, while the host waits for the device.
  virtual void poll() = 0;
  /// Waits for the work called so far to end on the device, so that the
  /// host's clock sees it (the measured timeline); the MPI engine's calls
  /// have completed when they return.
  virtual void settle(const char *fn) { (void)fn; }
  /// Makes every pending operation of the engine give up, without waiting
  /// (before the job is aborted). Must not call cleave_rt_fail.
  virtual void abort() {}
  /// Waits for everything in flight, under the watchdog, and frees the
  /// engine's communicators; MPI is still up. Every Operation has been
  /// waited for.
  virtual void finalize() = 0;
};

/// The engine this library was built with (MpiEngine.cpp or NcclEngine.cpp).
std::unique_ptr<Engine> createEngine();
/// The engine in use, or null before cleave_comm_init (Comm.cpp).
Engine *currentEngine();
/// Engine::abort on the engine in use, given at most a few seconds: the job
/// is aborted next whether or not the engine's abort returned.
void abortEngine();
/// This rank in the job (-1 before cleave_comm_init).
int worldRank();

} // namespace cleave::rt::comm

#endif // CLEAVE_RUNTIME_LIB_COMM_ENGINE_H
