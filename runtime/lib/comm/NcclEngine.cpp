//===- NcclEngine.cpp - the collectives on NCCL, for the CUDA backend -----===//
//
// The arena is device memory (the CUDA backend's). Each mesh-axis group gets
// one NCCL communicator, created from a unique id that the group's rank 0
// makes and broadcasts over the group's MPI communicator. Communicators are
// nonblocking (ncclConfig_t::blocking = 0), so that neither their creation
// nor a collective can block the host: each collective is enqueued on the
// backend's stream, then the calling thread polls the communicator's state
// (ncclCommGetAsyncError) and the stream (cudaStreamQuery) under the
// watchdog, which aborts the communicators (ncclCommAbort) and the job when
// the deadline passes. Host-only code: compiled by the C++ compiler.
//
//===----------------------------------------------------------------------===//

#include "Engine.h"

#include "../cpu/Tensor.h"
#include "../cuda/Stream.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
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
    complete(fn, g, comm, result, watchdog, /*stream=*/false);
  }

  void allReduce(Group &g, char *arena, int32_t op, const cleave_tensor &in,
                 const cleave_tensor &out) override {
    const char *fn = "cleave_comm_all_reduce";
    Watchdog watchdog(fn, g);
    ncclComm_t comm = commOf(g);
    complete(fn, g, comm,
             ncclAllReduce(dataOf(arena, in), dataOf(arena, out),
                           size_t(numElements(in)), ncclType(in.dtype),
                           ncclOp(op), comm, stream),
             watchdog);
  }

  void allGather(Group &g, char *arena, const cleave_tensor &in,
                 const cleave_tensor &out) override {
    const char *fn = "cleave_comm_all_gather";
    Watchdog watchdog(fn, g);
    ncclComm_t comm = commOf(g);
    complete(fn, g, comm,
             ncclAllGather(dataOf(arena, in), dataOf(arena, out),
                           size_t(tensorBytes(in)), ncclUint8, comm, stream),
             watchdog);
  }

  void reduceScatter(Group &g, char *arena, int32_t op,
                     const cleave_tensor &in,
                     const cleave_tensor &out) override {
    const char *fn = "cleave_comm_reduce_scatter";
    Watchdog watchdog(fn, g);
    ncclComm_t comm = commOf(g);
    complete(fn, g, comm,
             ncclReduceScatter(dataOf(arena, in), dataOf(arena, out),
                               size_t(numElements(out)), ncclType(in.dtype),
                               ncclOp(op), comm, stream),
             watchdog);
  }

  void allToAll(Group &g, char *arena, const cleave_tensor &in,
                const cleave_tensor &out) override {
    const char *fn = "cleave_comm_all_to_all";
    Watchdog watchdog(fn, g);
    ncclComm_t comm = commOf(g);
    size_t block = size_t(tensorBytes(in) / g.size);
    const char *src = dataOf(arena, in);
    char *dst = dataOf(arena, out);
    checkNccl(ncclGroupStart(), fn, g, comm);
    for (int peer = 0; peer < g.size; ++peer) {
      checkNccl(ncclSend(src + peer * block, block, ncclUint8, peer, comm,
                         stream),
                fn, g, comm);
      checkNccl(ncclRecv(dst + peer * block, block, ncclUint8, peer, comm,
                         stream),
                fn, g, comm);
    }
    complete(fn, g, comm, ncclGroupEnd(), watchdog);
  }

  void broadcast(Group &g, char *arena, const cleave_tensor &t,
                 int root) override {
    const char *fn = "cleave_comm_broadcast";
    Watchdog watchdog(fn, g);
    ncclComm_t comm = commOf(g);
    char *data = dataOf(arena, t);
    complete(fn, g, comm,
             ncclBroadcast(data, data, size_t(tensorBytes(t)), ncclUint8, root,
                           comm, stream),
             watchdog);
  }

  void send(Group &g, char *arena, const cleave_tensor &t,
            int peer) override {
    const char *fn = "cleave_comm_send";
    Watchdog watchdog(fn, g);
    ncclComm_t comm = commOf(g);
    complete(fn, g, comm,
             ncclSend(dataOf(arena, t), size_t(tensorBytes(t)), ncclUint8,
                      peer, comm, stream),
             watchdog);
  }

  void recv(Group &g, char *arena, const cleave_tensor &t,
            int peer) override {
    const char *fn = "cleave_comm_recv";
    Watchdog watchdog(fn, g);
    ncclComm_t comm = commOf(g);
    complete(fn, g, comm,
             ncclRecv(dataOf(arena, t), size_t(tensorBytes(t)), ncclUint8,
                      peer, comm, stream),
             watchdog);
  }

  void sendRecv(Group &g, char *arena, const cleave_tensor *send,
                int sendPeer, const cleave_tensor *recv, int recvPeer,
                const char *fn) override {
    Watchdog watchdog(fn, g);
    ncclComm_t comm = commOf(g);
    // One group: NCCL runs its sends and receives together, so neither
    // waits for the other. An empty group still waits for the stream.
    checkNccl(ncclGroupStart(), fn, g, comm);
    if (send)
      checkNccl(ncclSend(dataOf(arena, *send), size_t(tensorBytes(*send)),
                         ncclUint8, sendPeer, comm, stream),
                fn, g, comm);
    if (recv)
      checkNccl(ncclRecv(dataOf(arena, *recv), size_t(tensorBytes(*recv)),
                         ncclUint8, recvPeer, comm, stream),
                fn, g, comm);
    complete(fn, g, comm, ncclGroupEnd(), watchdog);
  }

  void zero(char *arena, const cleave_tensor &t, const char *fn) override {
    checkCuda(cudaMemsetAsync(dataOf(arena, t), 0, size_t(tensorBytes(t)),
                              stream),
              fn, "zeroing a tensor");
  }

  void barrier(Group &g) override {
    const char *fn = "cleave_comm_barrier";
    Watchdog watchdog(fn, g);
    // The device work called so far, then the ranks.
    complete(fn, g, commOf(g), ncclSuccess, watchdog);
    MPI_Request request;
    MPI_Ibarrier(g.mpi, &request);
    waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
  }

  void abort() override {
    // The communicator whose call is stuck first: its kernel may still
    // spin on the device, and freeing another communicator's memory first
    // would wait for that kernel forever. The others are idle (each call
    // completes before it returns).
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
    for (Entry &e : comms) {
      if (!e.comm)
        continue;
      Watchdog watchdog(fn, *e.group);
      complete(fn, *e.group, e.comm, ncclCommFinalize(e.comm), watchdog);
      ncclCommDestroy(e.comm);
      e.comm = nullptr;
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

  /// Waits until the operation that returned `issued` is done: the
  /// communicator's state leaves ncclInProgress and, with `onStream`, the
  /// stream has run everything enqueued so far.
  void complete(const char *fn, const Group &g, ncclComm_t comm,
                ncclResult_t issued, Watchdog &watchdog,
                bool onStream = true) {
    active = comm;
    checkNccl(issued, fn, g, comm);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      checkNccl(ncclCommGetAsyncError(comm, &state), fn, g, comm);
      checkNccl(state, fn, g, comm);
      if (state == ncclSuccess) {
        if (!onStream)
          return;
        cudaError_t status = cudaStreamQuery(stream);
        if (status == cudaSuccess)
          return;
        if (status != cudaErrorNotReady)
          cleave_rt_fail("%s on %s: CUDA: %s", fn, g.label.c_str(),
                         cudaGetErrorString(status));
      }
      if (watchdog.expired())
        watchdog.fire();
      watchdog.pause();
    }
  }

  int device = -1;
  cudaStream_t stream = nullptr;
  /// The communicator of the call in progress (or of the last one).
  ncclComm_t active = nullptr;
  /// By group id.
  std::vector<Entry> comms;
};

} // namespace

std::unique_ptr<Engine> cleave::rt::comm::createEngine() {
  return std::make_unique<NcclEngine>();
}
