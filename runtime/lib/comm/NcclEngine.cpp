//===- NcclEngine.cpp - the collectives on NCCL, for the CUDA backend -----===//
//
// The arena is device memory (the CUDA backend's). Each mesh-axis group gets
// one NCCL communicator, created from a unique id that the group's rank 0
// makes and broadcasts over the group's MPI communicator. Communicators are
// nonblocking (ncclConfig_t::blocking = 0), so that neither their creation
// nor a collective can block the host.
//
// Every collective runs on the engine's one communication stream, in the
// order the program calls them: the stream first waits for an event
// recorded on the backend's stream (the kernels called before it), then
// the NCCL call is enqueued, then an event records its completion. A wait
// (cleave_comm_wait, or at once for a blocking call) makes the backend's
// stream wait for that event; the host never waits for a collective here.
// Issuing all of them on one stream keeps the ranks' NCCL kernels in the
// same order whatever the order of the waits.
//
// The watchdog is asynchronous: the events of the collectives not yet seen
// complete are kept in issue order, and poll() checks the oldest without
// blocking (cudaEventQuery, ncclCommGetAsyncError) at every call of the
// ABI and, through the backend's wait hook (../cpu/WaitHook.h), while the
// host waits for the device. One still incomplete past its deadline fails
// the job as before (its communicator aborted first). Host-only code:
// compiled by the C++ compiler.
//
//===----------------------------------------------------------------------===//

#include "Engine.h"

#include "../cpu/Tensor.h"
#include "../cpu/WaitHook.h"
#include "../cuda/Stream.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::comm;

namespace {

ncclDataType_t ncclType(int32_t dtype) {
  switch (dtype) {
  case CLEAVE_F16:
    return ncclFloat16;
  case CLEAVE_BF16:
    return ncclBfloat16;
  case CLEAVE_I64:
    return ncclInt64;
  case CLEAVE_I32:
    return ncclInt32;
  case CLEAVE_I1:
    return ncclUint8;
  default:
    return ncclFloat32;
  }
}

ncclRedOp_t ncclOp(int32_t op) {
  switch (op) {
  case CLEAVE_MEAN:
    return ncclAvg;
  case CLEAVE_MAX_REDUCE:
    return ncclMax;
  case CLEAVE_MIN_REDUCE:
    return ncclMin;
  default:
    return ncclSum;
  }
}

void checkCuda(cudaError_t status, const char *fn, const char *what) {
  if (status != cudaSuccess)
    cleave_rt_fail("%s: CUDA: %s: %s", fn, what, cudaGetErrorString(status));
}

class NcclEngine;

/// A started collective, known to the engine by its serial number.
class NcclOperation final : public Operation {
public:
  NcclOperation(NcclEngine &engine, uint64_t serial)
      : engine(engine), serial(serial) {}
  void wait() override;

private:
  NcclEngine &engine;
  uint64_t serial;
};

/// A started receive: issued at its wait, in the stream's order with the
/// transfers around it (see Engine::recvStart).
class DeferredRecv final : public Operation {
public:
  DeferredRecv(Engine &engine, Group &g, char *arena, const cleave_tensor &t,
               int peer)
      : engine(engine), group(g), arena(arena), tensor(t), peer(peer) {}
  void wait() override { engine.recv(group, arena, tensor, peer); }

private:
  Engine &engine;
  Group &group;
  char *arena;
  cleave_tensor tensor;
  int peer;
};

class NcclEngine final : public Engine {
public:
  const char *name() const override { return "nccl"; }

  void init(MPI_Comm local) override {
    const char *fn = "cleave_comm_init";
    int localRank = 0, localSize = 1, devices = 0;
    MPI_Comm_rank(local, &localRank);
    MPI_Comm_size(local, &localSize);
    cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0)
      cleave_rt_fail("%s: no CUDA device for the NCCL engine (%s)", fn,
                     status != cudaSuccess ? cudaGetErrorString(status)
                                           : "0 devices");
    // The node-local rank modulo the devices this process sees: all of the
    // node's GPUs, or the one a launcher left visible to each rank
    // (CUDA_VISIBLE_DEVICES per task).
    device = localRank % devices;
    checkCuda(cudaSetDevice(device), fn, "selecting the device");
    requireOwnDevice(local, localRank, localSize, devices);
    // The backend creates its stream on the current device, unless it was
    // initialized before this (on device 0).
    cleave_rt_backend_init();
    stream = cuda::stream();
    int streamDevice = -1;
    checkCuda(cudaStreamGetDevice(stream, &streamDevice), fn,
              "querying the stream's device");
    if (streamDevice != device)
      cleave_rt_fail("%s: the CUDA backend already runs on device %d but "
                     "this rank (local rank %d) needs device %d; call "
                     "cleave_comm_init before cleave_rt_backend_init",
                     fn, streamDevice, localRank, device);
    // The collectives' stream, at the device's highest priority, so that
    // their kernels start ahead of the compute kernels they overlap.
    int lowest = 0, highest = 0;
    checkCuda(cudaDeviceGetStreamPriorityRange(&lowest, &highest), fn,
              "querying the stream priorities");
    checkCuda(cudaStreamCreateWithPriority(&commStream, cudaStreamNonBlocking,
                                           highest),
              fn, "creating the communication stream");
    checkCuda(cudaEventCreateWithFlags(&computed, cudaEventDisableTiming), fn,
              "creating an event");
    checkCuda(cudaEventCreateWithFlags(&drained, cudaEventDisableTiming), fn,
              "creating an event");
    // The backend's waits for the device poll the watchdog.
    setWaitHook([] {
      if (Engine *engine = currentEngine())
        engine->poll();
    });
  }

  void addGroup(Group &g) override {
    const char *fn = "cleave_comm_group";
    ncclUniqueId id{};
    if (g.rank == 0)
      checkNccl(ncclGetUniqueId(&id), fn, g, nullptr);
    Watchdog watchdog(fn, g);
    MPI_Request request;
    MPI_Ibcast(&id, int(sizeof(id)), MPI_BYTE, 0, g.mpi, &request);
    waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t result =
        ncclCommInitRankConfig(&comm, g.size, id, g.rank, &config);
    if (comms.size() <= size_t(g.id))
      comms.resize(size_t(g.id) + 1);
    comms[g.id] = {&g, comm};
    settle(fn, g, comm, result, watchdog);
  }

  OperationPtr allReduce(Group &g, char *arena, int32_t op,
                         const cleave_tensor &in, const cleave_tensor &out,
                         const char *fn) override {
    ncclComm_t comm = commOf(g);
    const char *src = dataOf(arena, in);
    char *dst = dataOf(arena, out);
    return start(fn, g, [&] {
      return ncclAllReduce(src, dst, size_t(numElements(in)),
                           ncclType(in.dtype), ncclOp(op), comm, commStream);
    });
  }

  OperationPtr allGather(Group &g, char *arena, const cleave_tensor &in,
                         const cleave_tensor &out, const char *fn) override {
    ncclComm_t comm = commOf(g);
    const char *src = dataOf(arena, in);
    char *dst = dataOf(arena, out);
    return start(fn, g, [&] {
      return ncclAllGather(src, dst, size_t(tensorBytes(in)), ncclUint8, comm,
                           commStream);
    });
  }

  OperationPtr reduceScatter(Group &g, char *arena, int32_t op,
                             const cleave_tensor &in, const cleave_tensor &out,
                             const char *fn) override {
    ncclComm_t comm = commOf(g);
    const char *src = dataOf(arena, in);
    char *dst = dataOf(arena, out);
    return start(fn, g, [&] {
      return ncclReduceScatter(src, dst, size_t(numElements(out)),
                               ncclType(in.dtype), ncclOp(op), comm,
                               commStream);
    });
  }

  OperationPtr allToAll(Group &g, char *arena, const cleave_tensor &in,
                        const cleave_tensor &out, const char *fn) override {
    ncclComm_t comm = commOf(g);
    size_t block = size_t(tensorBytes(in) / g.size);
    const char *src = dataOf(arena, in);
    char *dst = dataOf(arena, out);
    return start(fn, g, [&] {
      checkNccl(ncclGroupStart(), fn, g, comm);
      for (int peer = 0; peer < g.size; ++peer) {
        checkNccl(ncclSend(src + peer * block, block, ncclUint8, peer, comm,
                           commStream),
                  fn, g, comm);
        checkNccl(ncclRecv(dst + peer * block, block, ncclUint8, peer, comm,
                           commStream),
                  fn, g, comm);
      }
      return ncclGroupEnd();
    });
  }

  void broadcast(Group &g, char *arena, const cleave_tensor &t,
                 int root) override {
    const char *fn = "cleave_comm_broadcast";
    ncclComm_t comm = commOf(g);
    char *data = dataOf(arena, t);
    run(fn, g, [&] {
      return ncclBroadcast(data, data, size_t(tensorBytes(t)), ncclUint8, root,
                           comm, commStream);
    });
  }

  void send(Group &g, char *arena, const cleave_tensor &t,
            int peer) override {
    const char *fn = "cleave_comm_send";
    ncclComm_t comm = commOf(g);
    const char *data = dataOf(arena, t);
    run(fn, g, [&] {
      return ncclSend(data, size_t(tensorBytes(t)), ncclUint8, peer, comm,
                      commStream);
    });
  }

  void recv(Group &g, char *arena, const cleave_tensor &t,
            int peer) override {
    const char *fn = "cleave_comm_recv";
    ncclComm_t comm = commOf(g);
    char *data = dataOf(arena, t);
    run(fn, g, [&] {
      return ncclRecv(data, size_t(tensorBytes(t)), ncclUint8, peer, comm,
                      commStream);
    });
  }

  OperationPtr recvStart(Group &g, char *arena, const cleave_tensor &t,
                         int peer) override {
    return std::make_unique<DeferredRecv>(*this, g, arena, t, peer);
  }

  /// What issues a send and a receive as one group: NCCL runs them
  /// together, so neither waits for the other. An empty group still orders
  /// the streams.
  auto groupedSendRecv(Group &g, char *arena, const cleave_tensor *send,
                       int sendPeer, const cleave_tensor *recv, int recvPeer,
                       const char *fn) {
    return [this, &g, arena, send, sendPeer, recv, recvPeer, fn] {
      ncclComm_t comm = commOf(g);
      checkNccl(ncclGroupStart(), fn, g, comm);
      if (send)
        checkNccl(ncclSend(dataOf(arena, *send), size_t(tensorBytes(*send)),
                           ncclUint8, sendPeer, comm, commStream),
                  fn, g, comm);
      if (recv)
        checkNccl(ncclRecv(dataOf(arena, *recv), size_t(tensorBytes(*recv)),
                           ncclUint8, recvPeer, comm, commStream),
                  fn, g, comm);
      return ncclGroupEnd();
    };
  }

  void sendRecv(Group &g, char *arena, const cleave_tensor *send,
                int sendPeer, const cleave_tensor *recv, int recvPeer,
                const char *fn) override {
    run(fn, g, groupedSendRecv(g, arena, send, sendPeer, recv, recvPeer, fn));
  }

  OperationPtr sendRecvStart(Group &g, char *arena, const cleave_tensor *send,
                             int sendPeer, const cleave_tensor *recv,
                             int recvPeer, const char *fn) override {
    return start(fn, g,
                 groupedSendRecv(g, arena, send, sendPeer, recv, recvPeer, fn));
  }

  void zero(char *arena, const cleave_tensor &t, const char *fn) override {
    checkCuda(cudaMemsetAsync(dataOf(arena, t), 0, size_t(tensorBytes(t)),
                              stream),
              fn, "zeroing a tensor");
  }

  void barrier(Group &g) override {
    const char *fn = "cleave_comm_barrier";
    // The device work called so far, then the ranks.
    drain(fn, g);
    Watchdog watchdog(fn, g);
    MPI_Request request;
    MPI_Ibarrier(g.mpi, &request);
    waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
  }

  void settle(const char *fn) override {
    // The compute and communication streams' work so far (the timeline).
    if (!comms.empty() && comms[0].group)
      drain(fn, *comms[0].group);
  }

  void poll() override {
    while (!pending.empty()) {
      Pending &p = pending.front();
      cudaError_t status = cudaEventQuery(p.done);
      if (status == cudaSuccess) {
        spareEvents.push_back(p.done);
        pending.pop_front();
        continue;
      }
      const char *fn = p.watchdog.name();
      const Group &g = p.watchdog.groupOf();
      if (status != cudaErrorNotReady)
        cleave_rt_fail("%s on %s: CUDA: %s", fn, g.label.c_str(),
                       cudaGetErrorString(status));
      // Later collectives run after this one: it is the one to check.
      ncclResult_t state = ncclSuccess;
      checkNccl(ncclCommGetAsyncError(p.comm, &state), fn, g, p.comm);
      checkNccl(state, fn, g, p.comm);
      if (p.watchdog.expired()) {
        active = p.comm;
        p.watchdog.fire();
      }
      return;
    }
  }

  void abort() override {
    // The communicator whose call is stuck first (the one being issued,
    // else the oldest incomplete one): its kernel may still spin on the
    // device, and freeing another communicator's memory first would wait
    // for that kernel forever. Those after it on the stream wait for it.
    if (!active && !pending.empty())
      active = pending.front().comm;
    for (Entry &e : comms)
      if (e.comm && e.comm == active) {
        ncclCommAbort(e.comm);
        e.comm = nullptr;
      }
    active = nullptr;
    for (Entry &e : comms)
      if (e.comm) {
        ncclCommAbort(e.comm);
        e.comm = nullptr;
      }
  }

  void finalize() override {
    const char *fn = "cleave_comm_finalize";
    if (!comms.empty() && comms[0].group)
      drain(fn, *comms[0].group);
    setWaitHook(nullptr);
    for (Entry &e : comms) {
      if (!e.comm)
        continue;
      Watchdog watchdog(fn, *e.group);
      settle(fn, *e.group, e.comm, ncclCommFinalize(e.comm), watchdog);
      ncclCommDestroy(e.comm);
      e.comm = nullptr;
    }
    for (cudaEvent_t e : spareEvents)
      cudaEventDestroy(e);
    spareEvents.clear();
    cudaEventDestroy(computed);
    cudaEventDestroy(drained);
    cudaStreamDestroy(commStream);
    commStream = nullptr;
  }

  /// Makes the backend's stream wait for collective `serial`, unless it
  /// has completed already.
  void waitFor(uint64_t serial) {
    poll();
    for (const Pending &p : pending)
      if (p.serial == serial) {
        checkCuda(cudaStreamWaitEvent(stream, p.done, 0), p.watchdog.name(),
                  "ordering the stream after the collective");
        return;
      }
  }

private:
  struct Entry {
    Group *group = nullptr;
    ncclComm_t comm = nullptr;
  };

  ncclComm_t commOf(const Group &g) const { return comms[g.id].comm; }

  /// NCCL needs a GPU of its own per rank: fails, naming both ranks, when
  /// two ranks of this node selected the same device (by PCI bus id).
  void requireOwnDevice(MPI_Comm local, int localRank, int localSize,
                        int devices) {
    const char *fn = "cleave_comm_init";
    constexpr int kIdBytes = 32;
    std::vector<char> ids(size_t(localSize) * kIdBytes, '\0');
    char *mine = ids.data() + size_t(localRank) * kIdBytes;
    checkCuda(cudaDeviceGetPCIBusId(mine, kIdBytes - 1, device), fn,
              "querying the device's PCI bus id");
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, ids.data(), kIdBytes, MPI_BYTE,
                  local);
    for (int r = 0; r < localSize; ++r)
      if (r != localRank &&
          std::strncmp(ids.data() + size_t(r) * kIdBytes, mine, kIdBytes) == 0)
        cleave_rt_fail("%s: local ranks %d and %d would share the GPU at %s "
                       "(%d ranks on this node, %d devices visible to this "
                       "one); the NCCL engine needs one GPU per rank",
                       fn, std::min(r, localRank), std::max(r, localRank),
                       mine, localSize, devices);
  }

  void checkNccl(ncclResult_t result, const char *fn, const Group &g,
                 ncclComm_t comm) {
    if (result == ncclSuccess || result == ncclInProgress)
      return;
    cleave_rt_fail("%s on %s: NCCL: %s (%s)", fn, g.label.c_str(),
                   ncclGetErrorString(result),
                   comm ? ncclGetLastError(comm) : "no communicator");
  }

  /// Waits on the host until the communicator has taken the operation that
  /// returned `issued` (a nonblocking communicator returns ncclInProgress
  /// while it is still being set up or enqueued): not for its completion.
  void settle(const char *fn, const Group &g, ncclComm_t comm,
              ncclResult_t issued, Watchdog &watchdog) {
    active = comm;
    checkNccl(issued, fn, g, comm);
    while (issued == ncclInProgress) {
      checkNccl(ncclCommGetAsyncError(comm, &issued), fn, g, comm);
      checkNccl(issued, fn, g, comm);
      if (issued == ncclSuccess)
        break;
      if (watchdog.expired())
        watchdog.fire();
      watchdog.pause();
    }
    active = nullptr;
  }

  /// An event without timing, from the spares when there is one.
  cudaEvent_t takeEvent(const char *fn) {
    cudaEvent_t e = nullptr;
    if (!spareEvents.empty()) {
      e = spareEvents.back();
      spareEvents.pop_back();
      return e;
    }
    checkCuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), fn,
              "creating an event");
    return e;
  }

  /// Issues one collective on the communication stream after the kernels
  /// called so far (`enqueue` makes the NCCL calls); returns its serial.
  template <class F> uint64_t issue(const char *fn, Group &g, F &&enqueue) {
    ncclComm_t comm = commOf(g);
    Watchdog watchdog(fn, g);
    checkCuda(cudaEventRecord(computed, stream), fn,
              "recording the stream's work");
    checkCuda(cudaStreamWaitEvent(commStream, computed, 0), fn,
              "ordering the collective after the stream's work");
    settle(fn, g, comm, enqueue(), watchdog);
    cudaEvent_t done = takeEvent(fn);
    checkCuda(cudaEventRecord(done, commStream), fn,
              "recording the collective");
    pending.push_back(Pending{++lastSerial, done, comm, watchdog});
    return lastSerial;
  }

  template <class F> OperationPtr start(const char *fn, Group &g, F &&enqueue) {
    return std::make_unique<NcclOperation>(*this, issue(fn, g, enqueue));
  }

  /// A blocking call: issued, and the backend's stream made to wait for it.
  template <class F> void run(const char *fn, Group &g, F &&enqueue) {
    waitFor(issue(fn, g, enqueue));
  }

  /// Waits on the host, under the watchdog, until every collective issued
  /// and the backend's stream have run everything called so far; then
  /// synchronizes both streams, which have nothing left to do.
  void drain(const char *fn, const Group &g) {
    Watchdog watchdog(fn, g);
    checkCuda(cudaEventRecord(drained, stream), fn,
              "recording the stream's work");
    for (;;) {
      poll();
      cudaError_t status = cudaEventQuery(drained);
      if (status == cudaSuccess && pending.empty())
        break;
      if (status != cudaSuccess && status != cudaErrorNotReady)
        checkCuda(status, fn, "running the device's work");
      if (watchdog.expired())
        watchdog.fire();
      watchdog.pause();
    }
    checkCuda(cudaStreamSynchronize(commStream), fn,
              "running the collectives");
    checkCuda(cudaStreamSynchronize(stream), fn, "running the device's work");
  }

  /// A collective issued and not yet seen complete.
  struct Pending {
    uint64_t serial;
    cudaEvent_t done;
    ncclComm_t comm;
    Watchdog watchdog;
  };

  int device = -1;
  /// The backend's stream, and the one the collectives run on.
  cudaStream_t stream = nullptr, commStream = nullptr;
  /// Recorded on `stream` for the collective being issued to wait for, and
  /// for drain().
  cudaEvent_t computed = nullptr, drained = nullptr;
  /// The communicator being set up or issued to.
  ncclComm_t active = nullptr;
  /// By group id.
  std::vector<Entry> comms;
  /// In issue order.
  std::deque<Pending> pending;
  uint64_t lastSerial = 0;
  std::vector<cudaEvent_t> spareEvents;
};

void NcclOperation::wait() { engine.waitFor(serial); }

} // namespace

std::unique_ptr<Engine> cleave::rt::comm::createEngine() {
  return std::make_unique<NcclEngine>();
}
