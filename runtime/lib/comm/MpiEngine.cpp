//===- MpiEngine.cpp - the collectives on MPI, for the CPU backend --------===//
//
// The arena is host memory. Each collective is one nonblocking MPI call
// (MPI_Iallreduce, MPI_Iallgather, ...) on the group's communicator, waited
// for under the watchdog (sendrecv: an MPI_Irecv and an MPI_Isend, waited
// for together). f16 and bf16 reductions go through f32 buffers, so
// they accumulate in f32 and round once. Counts are ints in MPI: a transfer
// of 2^31 units or more fails with a clear error.
//
//===----------------------------------------------------------------------===//

#include "Engine.h"

#include "../cpu/Tensor.h"

#include <climits>
#include <cstring>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::comm;

namespace {

/// Tag of the point-to-point messages (one stream per pair and group).
constexpr int kSendRecvTag = 7411;

bool isHalf(int32_t dtype) {
  return dtype == CLEAVE_F16 || dtype == CLEAVE_BF16;
}

/// The MPI type a reduction of `dtype` runs in (f16/bf16: in f32).
MPI_Datatype reduceType(int32_t dtype) {
  switch (dtype) {
  case CLEAVE_I64:
    return MPI_INT64_T;
  case CLEAVE_I32:
    return MPI_INT32_T;
  default:
    return MPI_FLOAT;
  }
}

MPI_Op reduceOp(int32_t op) {
  switch (op) {
  case CLEAVE_MAX_REDUCE:
    return MPI_MAX;
  case CLEAVE_MIN_REDUCE:
    return MPI_MIN;
  default: // sum, and the mean as a sum divided afterwards
    return MPI_SUM;
  }
}

int mpiCount(const char *fn, int64_t n, const char *unit) {
  if (n > INT_MAX)
    cleave_rt_fail("%s: %lld %s exceed MPI's count limit of %d", fn,
                   (long long)n, unit, INT_MAX);
  return int(n);
}

void divideBy(float *data, int64_t n, int size) {
  float d = float(size);
  for (int64_t i = 0; i < n; ++i)
    data[i] /= d;
}

/// Fails unless the receive of `t` from `peer` got all of its bytes. A
/// larger message is MPI_ERR_TRUNCATE (fatal); a smaller one is reported
/// here.
void checkReceived(const char *fn, const Group &g, const cleave_tensor &t,
                   int peer, int count, const MPI_Status &status) {
  int received = 0;
  MPI_Get_count(&status, MPI_BYTE, &received);
  if (received != count)
    cleave_rt_fail("%s: received %d bytes from group rank %d of %s, "
                   "expected %d (%s %s)",
                   fn, received, peer, g.label.c_str(), count,
                   dtypeName(t.dtype), shapeString(t).c_str());
}

class MpiEngine final : public Engine {
public:
  const char *name() const override { return "mpi"; }
  void init(MPI_Comm) override {}
  void addGroup(Group &) override {}

  void allReduce(Group &g, char *arena, int32_t op, const cleave_tensor &in,
                 const cleave_tensor &out) override {
    const char *fn = "cleave_comm_all_reduce";
    int64_t n = numElements(in);
    int count = mpiCount(fn, n, "elements");
    Watchdog watchdog(fn, g);
    MPI_Request request;
    if (isHalf(in.dtype)) {
      std::vector<float> buf(static_cast<size_t>(n));
      convertToF32(dataOf(arena, in), in.dtype, buf.data(), n);
      MPI_Iallreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, reduceOp(op),
                     g.mpi, &request);
      waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
      if (op == CLEAVE_MEAN)
        divideBy(buf.data(), n, g.size);
      convertFromF32(buf.data(), dataOf(arena, out), out.dtype, n);
      return;
    }
    const void *src =
        in.offset == out.offset ? MPI_IN_PLACE : dataOf(arena, in);
    MPI_Iallreduce(src, dataOf(arena, out), count, reduceType(in.dtype),
                   reduceOp(op), g.mpi, &request);
    waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
    if (op == CLEAVE_MEAN)
      divideBy(reinterpret_cast<float *>(dataOf(arena, out)), n, g.size);
  }

  void allGather(Group &g, char *arena, const cleave_tensor &in,
                 const cleave_tensor &out) override {
    const char *fn = "cleave_comm_all_gather";
    int count = mpiCount(fn, tensorBytes(in), "bytes per rank");
    Watchdog watchdog(fn, g);
    MPI_Request request;
    MPI_Iallgather(dataOf(arena, in), count, MPI_BYTE, dataOf(arena, out),
                   count, MPI_BYTE, g.mpi, &request);
    waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
  }

  void reduceScatter(Group &g, char *arena, int32_t op,
                     const cleave_tensor &in,
                     const cleave_tensor &out) override {
    const char *fn = "cleave_comm_reduce_scatter";
    int64_t n = numElements(out);
    int count = mpiCount(fn, n, "elements per rank");
    Watchdog watchdog(fn, g);
    MPI_Request request;
    if (isHalf(in.dtype)) {
      std::vector<float> send(static_cast<size_t>(n * g.size));
      std::vector<float> recv(static_cast<size_t>(n));
      convertToF32(dataOf(arena, in), in.dtype, send.data(),
                   int64_t(send.size()));
      MPI_Ireduce_scatter_block(send.data(), recv.data(), count, MPI_FLOAT,
                                reduceOp(op), g.mpi, &request);
      waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
      if (op == CLEAVE_MEAN)
        divideBy(recv.data(), n, g.size);
      convertFromF32(recv.data(), dataOf(arena, out), out.dtype, n);
      return;
    }
    MPI_Ireduce_scatter_block(dataOf(arena, in), dataOf(arena, out), count,
                              reduceType(in.dtype), reduceOp(op), g.mpi,
                              &request);
    waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
    if (op == CLEAVE_MEAN)
      divideBy(reinterpret_cast<float *>(dataOf(arena, out)), n, g.size);
  }

  void allToAll(Group &g, char *arena, const cleave_tensor &in,
                const cleave_tensor &out) override {
    const char *fn = "cleave_comm_all_to_all";
    int count = mpiCount(fn, tensorBytes(in) / g.size, "bytes per block");
    Watchdog watchdog(fn, g);
    MPI_Request request;
    MPI_Ialltoall(dataOf(arena, in), count, MPI_BYTE, dataOf(arena, out),
                  count, MPI_BYTE, g.mpi, &request);
    waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
  }

  void broadcast(Group &g, char *arena, const cleave_tensor &t,
                 int root) override {
    const char *fn = "cleave_comm_broadcast";
    int count = mpiCount(fn, tensorBytes(t), "bytes");
    Watchdog watchdog(fn, g);
    MPI_Request request;
    MPI_Ibcast(dataOf(arena, t), count, MPI_BYTE, root, g.mpi, &request);
    waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
  }

  void send(Group &g, char *arena, const cleave_tensor &t,
            int peer) override {
    const char *fn = "cleave_comm_send";
    int count = mpiCount(fn, tensorBytes(t), "bytes");
    Watchdog watchdog(fn, g);
    MPI_Request request;
    MPI_Isend(dataOf(arena, t), count, MPI_BYTE, peer, kSendRecvTag, g.mpi,
              &request);
    waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
  }

  void recv(Group &g, char *arena, const cleave_tensor &t,
            int peer) override {
    const char *fn = "cleave_comm_recv";
    int count = mpiCount(fn, tensorBytes(t), "bytes");
    Watchdog watchdog(fn, g);
    MPI_Request request;
    MPI_Status status;
    MPI_Irecv(dataOf(arena, t), count, MPI_BYTE, peer, kSendRecvTag, g.mpi,
              &request);
    waitRequests(1, &request, &status, watchdog);
    checkReceived(fn, g, t, peer, count, status);
  }

  void sendRecv(Group &g, char *arena, const cleave_tensor *send,
                int sendPeer, const cleave_tensor *recv, int recvPeer,
                const char *fn) override {
    int sendCount = send ? mpiCount(fn, tensorBytes(*send), "bytes") : 0;
    int recvCount = recv ? mpiCount(fn, tensorBytes(*recv), "bytes") : 0;
    Watchdog watchdog(fn, g);
    // Both nonblocking, so neither waits for the other (a ring completes);
    // the receive is request 0.
    MPI_Request requests[2];
    MPI_Status statuses[2];
    int n = 0;
    if (recv)
      MPI_Irecv(dataOf(arena, *recv), recvCount, MPI_BYTE, recvPeer,
                kSendRecvTag, g.mpi, &requests[n++]);
    if (send)
      MPI_Isend(dataOf(arena, *send), sendCount, MPI_BYTE, sendPeer,
                kSendRecvTag, g.mpi, &requests[n++]);
    waitRequests(n, requests, statuses, watchdog);
    if (recv)
      checkReceived(fn, g, *recv, recvPeer, recvCount, statuses[0]);
  }

  void zero(char *arena, const cleave_tensor &t, const char *) override {
    std::memset(dataOf(arena, t), 0, size_t(tensorBytes(t)));
  }

  void barrier(Group &g) override {
    Watchdog watchdog("cleave_comm_barrier", g);
    MPI_Request request;
    MPI_Ibarrier(g.mpi, &request);
    waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
  }

  void finalize() override {}
};

} // namespace

std::unique_ptr<Engine> cleave::rt::comm::createEngine() {
  return std::make_unique<MpiEngine>();
}
