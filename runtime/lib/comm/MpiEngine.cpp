//===- MpiEngine.cpp - the collectives on MPI, for the CPU backend --------===//
//
// The arena is host memory. Each collective is one nonblocking MPI call
// (MPI_Iallreduce, MPI_Iallgather, ...) on the group's communicator, waited
// for under the watchdog (sendrecv: an MPI_Irecv and an MPI_Isend, waited
// for together). all_reduce, all_gather, reduce_scatter and all_to_all
// return their request as an Operation, which a blocking call waits for at
// once and a nonblocking one at cleave_comm_wait; until then the engine
// tests it at every call (MPI moves a nonblocking collective on only inside
// MPI calls) and fires its watchdog once it is overdue. f16 and bf16
// reductions go through f32 buffers, so they accumulate in f32 and round
// once; a mean is divided at the wait. Counts are ints in MPI: a transfer of
// 2^31 units or more fails with a clear error.
//
//===----------------------------------------------------------------------===//

#include "Engine.h"

#include "../cpu/Tensor.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <list>
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

class MpiEngine;

/// One nonblocking MPI collective: its request, its deadline, the f32
/// buffers of a 16-bit reduction, and what the wait does once the request
/// has completed (a mean's division, the conversion back).
class MpiOperation final : public Operation {
public:
  MpiOperation(MpiEngine &engine, const char *fn, Group &g);
  ~MpiOperation() override;
  void wait() override;
  /// Tests the request (which moves it on); fires the watchdog when it is
  /// still incomplete past its deadline.
  void poll() {
    // A completed request is MPI_REQUEST_NULL; testing it again would
    // overwrite its status with an empty one.
    if (request == MPI_REQUEST_NULL)
      return;
    int done = 0;
    MPI_Test(&request, &done, &status);
    if (!done && watchdog.expired())
      watchdog.fire();
  }

  Watchdog watchdog;
  MPI_Request request = MPI_REQUEST_NULL;
  /// Set when the request completes (a receive's source and count).
  MPI_Status status{};
  std::vector<float> send, recv;
  std::function<void()> finish;

private:
  MpiEngine &engine;
};

/// Operations completed by one wait, in order (a started send and receive).
class Joined final : public Operation {
public:
  void wait() override {
    for (OperationPtr &part : parts)
      part->wait();
  }
  std::vector<OperationPtr> parts;
};

class MpiEngine final : public Engine {
public:
  const char *name() const override { return "mpi"; }
  void init(MPI_Comm) override {}
  void addGroup(Group &) override {}

  OperationPtr allReduce(Group &g, char *arena, int32_t op,
                         const cleave_tensor &in, const cleave_tensor &out,
                         const char *fn) override {
    int64_t n = numElements(in);
    int count = mpiCount(fn, n, "elements");
    auto o = std::make_unique<MpiOperation>(*this, fn, g);
    int size = g.size;
    if (isHalf(in.dtype)) {
      o->recv.resize(static_cast<size_t>(n));
      convertToF32(dataOf(arena, in), in.dtype, o->recv.data(), n);
      MPI_Iallreduce(MPI_IN_PLACE, o->recv.data(), count, MPI_FLOAT,
                     reduceOp(op), g.mpi, &o->request);
      char *dst = dataOf(arena, out);
      int32_t dtype = out.dtype;
      MpiOperation *self = o.get();
      o->finish = [self, op, n, size, dst, dtype] {
        if (op == CLEAVE_MEAN)
          divideBy(self->recv.data(), n, size);
        convertFromF32(self->recv.data(), dst, dtype, n);
      };
      return o;
    }
    const void *src =
        in.offset == out.offset ? MPI_IN_PLACE : dataOf(arena, in);
    float *dst = reinterpret_cast<float *>(dataOf(arena, out));
    MPI_Iallreduce(src, dst, count, reduceType(in.dtype), reduceOp(op), g.mpi,
                   &o->request);
    if (op == CLEAVE_MEAN)
      o->finish = [dst, n, size] { divideBy(dst, n, size); };
    return o;
  }

  OperationPtr allGather(Group &g, char *arena, const cleave_tensor &in,
                         const cleave_tensor &out, const char *fn) override {
    int count = mpiCount(fn, tensorBytes(in), "bytes per rank");
    auto o = std::make_unique<MpiOperation>(*this, fn, g);
    MPI_Iallgather(dataOf(arena, in), count, MPI_BYTE, dataOf(arena, out),
                   count, MPI_BYTE, g.mpi, &o->request);
    return o;
  }

  OperationPtr reduceScatter(Group &g, char *arena, int32_t op,
                             const cleave_tensor &in, const cleave_tensor &out,
                             const char *fn) override {
    int64_t n = numElements(out);
    int count = mpiCount(fn, n, "elements per rank");
    auto o = std::make_unique<MpiOperation>(*this, fn, g);
    int size = g.size;
    if (isHalf(in.dtype)) {
      o->send.resize(static_cast<size_t>(n * g.size));
      o->recv.resize(static_cast<size_t>(n));
      convertToF32(dataOf(arena, in), in.dtype, o->send.data(),
                   int64_t(o->send.size()));
      MPI_Ireduce_scatter_block(o->send.data(), o->recv.data(), count,
                                MPI_FLOAT, reduceOp(op), g.mpi, &o->request);
      char *dst = dataOf(arena, out);
      int32_t dtype = out.dtype;
      MpiOperation *self = o.get();
      o->finish = [self, op, n, size, dst, dtype] {
        if (op == CLEAVE_MEAN)
          divideBy(self->recv.data(), n, size);
        convertFromF32(self->recv.data(), dst, dtype, n);
      };
      return o;
    }
    float *dst = reinterpret_cast<float *>(dataOf(arena, out));
    MPI_Ireduce_scatter_block(dataOf(arena, in), dst, count,
                              reduceType(in.dtype), reduceOp(op), g.mpi,
                              &o->request);
    if (op == CLEAVE_MEAN)
      o->finish = [dst, n, size] { divideBy(dst, n, size); };
    return o;
  }

  OperationPtr allToAll(Group &g, char *arena, const cleave_tensor &in,
                        const cleave_tensor &out, const char *fn) override {
    int count = mpiCount(fn, tensorBytes(in) / g.size, "bytes per block");
    auto o = std::make_unique<MpiOperation>(*this, fn, g);
    MPI_Ialltoall(dataOf(arena, in), count, MPI_BYTE, dataOf(arena, out),
                  count, MPI_BYTE, g.mpi, &o->request);
    return o;
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

  /// The bytes are copied out of the arena and sent from the copy: the
  /// call returns without waiting for the receiver to reach its receive
  /// (a pipeline stage goes on computing), and MPI delivers them when it
  /// does. At most kMaxStagedBytes wait so; beyond, the oldest are waited
  /// for first.
  void send(Group &g, char *arena, const cleave_tensor &t,
            int peer) override {
    const char *fn = "cleave_comm_send";
    int count = mpiCount(fn, tensorBytes(t), "bytes");
    reapSends(/*all=*/false);
    while (!staged.empty() && stagedBytes + count > kMaxStagedBytes)
      waitOldestSend();
    const char *data = dataOf(arena, t);
    StagedSend &s = staged.emplace_back(fn, g, data, count);
    stagedBytes += count;
    MPI_Isend(s.bytes.data(), count, MPI_BYTE, peer, kSendRecvTag, g.mpi,
              &s.request);
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

  OperationPtr recvStart(Group &g, char *arena, const cleave_tensor &t,
                         int peer) override {
    const char *fn = "cleave_comm_recv_start";
    int count = mpiCount(fn, tensorBytes(t), "bytes");
    auto o = std::make_unique<MpiOperation>(*this, fn, g);
    MPI_Irecv(dataOf(arena, t), count, MPI_BYTE, peer, kSendRecvTag, g.mpi,
              &o->request);
    MpiOperation *op = o.get();
    const cleave_tensor received = t;
    o->finish = [op, &g, received, peer, count] {
      checkReceived("cleave_comm_recv_start", g, received, peer, count,
                    op->status);
    };
    return o;
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

  OperationPtr sendRecvStart(Group &g, char *arena, const cleave_tensor *send,
                             int sendPeer, const cleave_tensor *recv,
                             int recvPeer, const char *fn) override {
    // Two operations in flight, the receive's and the send's, so that each
    // is tested and watched as every started collective is.
    auto both = std::make_unique<Joined>();
    if (recv) {
      int count = mpiCount(fn, tensorBytes(*recv), "bytes");
      auto o = std::make_unique<MpiOperation>(*this, fn, g);
      MPI_Irecv(dataOf(arena, *recv), count, MPI_BYTE, recvPeer, kSendRecvTag,
                g.mpi, &o->request);
      MpiOperation *op = o.get();
      const cleave_tensor received = *recv;
      o->finish = [op, &g, received, recvPeer, count, fn] {
        checkReceived(fn, g, received, recvPeer, count, op->status);
      };
      both->parts.push_back(std::move(o));
    }
    if (send) {
      auto o = std::make_unique<MpiOperation>(*this, fn, g);
      MPI_Isend(dataOf(arena, *send),
                mpiCount(fn, tensorBytes(*send), "bytes"), MPI_BYTE, sendPeer,
                kSendRecvTag, g.mpi, &o->request);
      both->parts.push_back(std::move(o));
    }
    return both;
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

  void poll() override {
    // In start order: the oldest overdue collective is the one reported.
    for (MpiOperation *o : inFlight)
      o->poll();
    reapSends(/*all=*/false);
  }

  void finalize() override { reapSends(/*all=*/true); }

  /// The operations not yet destroyed, in start order.
  std::vector<MpiOperation *> inFlight;

private:
  /// A send's bytes on their way, and its deadline.
  struct StagedSend {
    StagedSend(const char *fn, Group &g, const char *data, int count)
        : watchdog(fn, g), bytes(data, data + count) {}
    Watchdog watchdog;
    std::vector<char> bytes;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  static constexpr int64_t kMaxStagedBytes = int64_t(256) << 20;

  /// Frees the staged sends that completed; with `all`, waits for every
  /// one (under its watchdog) first.
  void reapSends(bool all) {
    while (all && !staged.empty())
      waitOldestSend();
    for (auto it = staged.begin(); it != staged.end();) {
      int done = 0;
      MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      if (!done) {
        if (it->watchdog.expired())
          it->watchdog.fire();
        ++it;
        continue;
      }
      stagedBytes -= int64_t(it->bytes.size());
      it = staged.erase(it);
    }
  }
  void waitOldestSend() {
    StagedSend &s = staged.front();
    waitRequests(1, &s.request, MPI_STATUS_IGNORE, s.watchdog);
    stagedBytes -= int64_t(s.bytes.size());
    staged.pop_front();
  }

  std::list<StagedSend> staged;
  int64_t stagedBytes = 0;
};

MpiOperation::MpiOperation(MpiEngine &engine, const char *fn, Group &g)
    : watchdog(fn, g), engine(engine) {
  engine.inFlight.push_back(this);
}

void MpiOperation::wait() {
  // The engine's poll tests every collective in flight in start order, so
  // that the oldest overdue one (here or one started before) is reported.
  while (request != MPI_REQUEST_NULL) {
    int done = 0;
    MPI_Test(&request, &done, &status);
    if (done)
      break;
    engine.poll();
    watchdog.pause();
  }
  if (finish)
    finish();
  finish = nullptr;
}

MpiOperation::~MpiOperation() {
  std::vector<MpiOperation *> &all = engine.inFlight;
  all.erase(std::find(all.begin(), all.end(), this));
  // Only an abandoned job (cleave_rt_fail, with the request still active)
  // destroys one unwaited: leave the request to MPI_Abort.
}

} // namespace

std::unique_ptr<Engine> cleave::rt::comm::createEngine() {
  return std::make_unique<MpiEngine>();
}
