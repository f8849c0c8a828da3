//===- Collectives.cpp - the collectives of cleave_comm.h over an engine --===//
//
// Every collective, point-to-point call and wait of the C ABI: the checks
// of its descriptors and peers (and against the nonblocking collectives in
// flight), then the engine, then the byte counters. Compiled into both
// engines' libraries with Comm.cpp.
//
//===----------------------------------------------------------------------===//

#include "CommState.h"
#include "Trace.h"

#include "../cpu/Tensor.h"

#include <cstdio>
#include <map>
#include <string>
#include <utility>

using namespace cleave::rt;
using namespace cleave::rt::comm;

namespace {

void count(Group &g, int32_t kind, int64_t payload, int64_t wire) {
  cleave_comm_counter &c = g.counters[kind];
  c.calls += 1;
  c.payload_bytes += payload;
  c.wire_bytes += wire;
}

/// Ring bytes: the fraction (n-1)/n of `bytes`, times `times`.
int64_t ringBytes(const Group &g, int64_t bytes, int64_t times) {
  return times * (g.size - 1) * bytes / g.size;
}

void checkArena(const char *fn, const char *arena) {
  if (!arena)
    cleave_rt_fail("%s: arena is NULL", fn);
}

/// The descriptors of a collective with an input and an output of the same
/// dtype.
void checkPair(const char *fn, const char *arena, const cleave_tensor *in,
               const cleave_tensor *out) {
  checkArena(fn, arena);
  checkTensor(fn, "in", in);
  checkTensor(fn, "out", out);
  if (in->dtype != out->dtype)
    cleave_rt_fail("%s: in is %s but out is %s", fn, dtypeName(in->dtype),
                   dtypeName(out->dtype));
}

void checkReduction(const char *fn, int32_t op, int32_t dtype) {
  if (op != CLEAVE_SUM && op != CLEAVE_MEAN && op != CLEAVE_MAX_REDUCE &&
      op != CLEAVE_MIN_REDUCE)
    cleave_rt_fail("%s: unknown reduction %d", fn, int(op));
  if (dtype == CLEAVE_I1)
    cleave_rt_fail("%s: cannot reduce i1 tensors", fn);
  if (op == CLEAVE_MEAN && !isFloatType(dtype))
    cleave_rt_fail("%s: the mean of %s tensors is not defined (use sum)", fn,
                   dtypeName(dtype));
}

/// Fails unless `big` is `small` with dim 0 multiplied by the group size.
void checkDim0(const char *fn, const Group &g, const char *bigName,
               const cleave_tensor &big, const char *smallName,
               const cleave_tensor &small) {
  bool ok = big.rank >= 1 && big.rank == small.rank &&
            big.shape[0] == small.shape[0] * g.size;
  for (int d = 1; ok && d < big.rank; ++d)
    ok = big.shape[d] == small.shape[d];
  if (!ok)
    cleave_rt_fail("%s: %s %s must be %s %s with dim 0 times the group size "
                   "%d of %s",
                   fn, bigName, shapeString(big).c_str(), smallName,
                   shapeString(small).c_str(), g.size, g.label.c_str());
}

void checkPeer(const char *fn, const char *what, const Group &g, int32_t peer,
               bool notSelf) {
  if (peer < 0 || peer >= g.size || (notSelf && peer == g.rank))
    cleave_rt_fail("%s: %s %d is not %s group rank of %s (size %d, this "
                   "rank %d)",
                   fn, what, int(peer), notSelf ? "another" : "a",
                   g.label.c_str(), g.size, g.rank);
}

/// This rank's part of a permutation: the group rank it sends to and the
/// one it receives from (-1: none), after checking every pair.
struct PermutePeers {
  int target = -1;
  int source = -1;
};

PermutePeers permutePeers(const char *fn, const Group &g, const int64_t *pairs,
                          int64_t numPairs) {
  if (numPairs < 0)
    cleave_rt_fail("%s: num_pairs is %lld, which is negative", fn,
                   (long long)numPairs);
  if (numPairs > 0 && !pairs)
    cleave_rt_fail("%s: pairs is NULL with %lld pairs", fn,
                   (long long)numPairs);
  // The pair that names each group rank as its source and as its target.
  std::vector<int64_t> bySource(size_t(g.size), -1);
  std::vector<int64_t> byTarget(size_t(g.size), -1);
  auto pairString = [&](int64_t p) {
    return std::to_string(p) + " (" + std::to_string(pairs[2 * p]) + " -> " +
           std::to_string(pairs[2 * p + 1]) + ")";
  };
  PermutePeers peers;
  for (int64_t p = 0; p < numPairs; ++p) {
    int64_t source = pairs[2 * p], target = pairs[2 * p + 1];
    if (source < 0 || source >= g.size || target < 0 || target >= g.size)
      cleave_rt_fail("%s: pair %s is not two group ranks of %s (size %d)", fn,
                     pairString(p).c_str(), g.label.c_str(), g.size);
    int64_t &sourcePair = bySource[size_t(source)];
    int64_t &targetPair = byTarget[size_t(target)];
    if (sourcePair >= 0)
      cleave_rt_fail("%s: group rank %lld is the source of pairs %s and %s",
                     fn, (long long)source, pairString(sourcePair).c_str(),
                     pairString(p).c_str());
    if (targetPair >= 0)
      cleave_rt_fail("%s: group rank %lld is the target of pairs %s and %s",
                     fn, (long long)target, pairString(targetPair).c_str(),
                     pairString(p).c_str());
    sourcePair = targetPair = p;
    if (source == g.rank)
      peers.target = int(target);
    if (target == g.rank)
      peers.source = int(source);
  }
  return peers;
}

} // namespace

//===----------------------------------------------------------------------===//
// Collectives: checks, then the engine, then the counters
//===----------------------------------------------------------------------===//

namespace {

using ByteRange = std::pair<const char *, const char *>;

ByteRange bytesOf(const char *arena, const cleave_tensor &t) {
  const char *begin = arena + t.offset;
  return {begin, begin + tensorBytes(t)};
}

bool intersect(const ByteRange &a, const ByteRange &b) {
  return a.first < b.second && b.first < a.second;
}

/// Fails when a collective that reads tensor `reads` and writes `writes`
/// (either null; the names are the ABI's parameters) would touch the
/// buffers of a nonblocking collective in flight: it may read what that
/// one reads, but not write what it reads or writes, nor read what it
/// writes.
void checkNotInFlight(const char *fn, const char *arena, const char *readName,
                      const cleave_tensor *reads, const char *writeName,
                      const cleave_tensor *writes) {
  for (const auto &[handle, f] : state().inFlight) {
    const char *mine = nullptr, *theirs = nullptr;
    const cleave_tensor *t = nullptr;
    if (writes && intersect(bytesOf(arena, *writes), f.reads))
      mine = writeName, theirs = "in", t = writes;
    else if (writes && intersect(bytesOf(arena, *writes), f.writes))
      mine = writeName, theirs = "out", t = writes;
    else if (reads && intersect(bytesOf(arena, *reads), f.writes))
      mine = readName, theirs = "out", t = reads;
    if (mine)
      cleave_rt_fail("%s: %s %s overlaps the %s of %s on %s (handle %lld), "
                     "which has not been waited for",
                     fn, mine, shapeString(*t).c_str(), theirs, f.fn,
                     f.group->label.c_str(), (long long)handle);
  }
}

/// Keeps a started collective under a new handle.
int64_t track(const char *fn, const Group &g, const char *arena,
              const cleave_tensor &in, const cleave_tensor &out,
              OperationPtr operation) {
  State &s = state();
  int64_t handle = ++s.lastHandle;
  s.inFlight[handle] = InFlight{std::move(operation), fn, &g,
                                bytesOf(arena, in), bytesOf(arena, out)};
  return handle;
}

OperationPtr startAllReduce(const char *fn, int32_t comm, char *arena,
                            int32_t op, const cleave_tensor *in,
                            const cleave_tensor *out) {
  Group &g = collectiveGroup(fn, comm);
  checkPair(fn, arena, in, out);
  checkReduction(fn, op, in->dtype);
  if (!sameShape(*in, *out))
    cleave_rt_fail("%s: in %s and out %s differ in shape", fn,
                   shapeString(*in).c_str(), shapeString(*out).c_str());
  if (in->offset != out->offset && overlaps(*in, *out))
    cleave_rt_fail("%s: in and out overlap without being the same tensor", fn);
  checkNotInFlight(fn, arena, "in", in, "out", out);
  OperationPtr o = state().engine->allReduce(g, arena, op, *in, *out, fn);
  int64_t bytes = tensorBytes(*in);
  count(g, CLEAVE_COMM_ALL_REDUCE, bytes, ringBytes(g, bytes, 2));
  return o;
}

OperationPtr startAllGather(const char *fn, int32_t comm, char *arena,
                            const cleave_tensor *in,
                            const cleave_tensor *out) {
  Group &g = collectiveGroup(fn, comm);
  checkPair(fn, arena, in, out);
  checkDim0(fn, g, "out", *out, "in", *in);
  if (overlaps(*in, *out))
    cleave_rt_fail("%s: in and out overlap", fn);
  checkNotInFlight(fn, arena, "in", in, "out", out);
  OperationPtr o = state().engine->allGather(g, arena, *in, *out, fn);
  int64_t bytes = tensorBytes(*out);
  count(g, CLEAVE_COMM_ALL_GATHER, bytes, ringBytes(g, bytes, 1));
  return o;
}

OperationPtr startReduceScatter(const char *fn, int32_t comm, char *arena,
                                int32_t op, const cleave_tensor *in,
                                const cleave_tensor *out) {
  Group &g = collectiveGroup(fn, comm);
  checkPair(fn, arena, in, out);
  checkReduction(fn, op, in->dtype);
  checkDim0(fn, g, "in", *in, "out", *out);
  if (overlaps(*in, *out))
    cleave_rt_fail("%s: in and out overlap", fn);
  checkNotInFlight(fn, arena, "in", in, "out", out);
  OperationPtr o = state().engine->reduceScatter(g, arena, op, *in, *out, fn);
  int64_t bytes = tensorBytes(*in);
  count(g, CLEAVE_COMM_REDUCE_SCATTER, bytes, ringBytes(g, bytes, 1));
  return o;
}

OperationPtr startAllToAll(const char *fn, int32_t comm, char *arena,
                           const cleave_tensor *in, const cleave_tensor *out) {
  Group &g = collectiveGroup(fn, comm);
  checkPair(fn, arena, in, out);
  if (!sameShape(*in, *out))
    cleave_rt_fail("%s: in %s and out %s differ in shape", fn,
                   shapeString(*in).c_str(), shapeString(*out).c_str());
  if (in->rank < 1 || in->shape[0] % g.size != 0)
    cleave_rt_fail("%s: dim 0 of in %s must be a multiple of the group size "
                   "%d of %s",
                   fn, shapeString(*in).c_str(), g.size, g.label.c_str());
  if (overlaps(*in, *out))
    cleave_rt_fail("%s: in and out overlap", fn);
  checkNotInFlight(fn, arena, "in", in, "out", out);
  OperationPtr o = state().engine->allToAll(g, arena, *in, *out, fn);
  int64_t bytes = tensorBytes(*in);
  count(g, CLEAVE_COMM_ALL_TO_ALL, bytes, ringBytes(g, bytes, 1));
  return o;
}

} // namespace

extern "C" void cleave_comm_all_reduce(int32_t comm, char *arena, int32_t op,
                                       const cleave_tensor *in,
                                       const cleave_tensor *out) {
  startAllReduce("cleave_comm_all_reduce", comm, arena, op, in, out)->wait();
}

extern "C" void cleave_comm_all_gather(int32_t comm, char *arena,
                                       const cleave_tensor *in,
                                       const cleave_tensor *out) {
  startAllGather("cleave_comm_all_gather", comm, arena, in, out)->wait();
}

extern "C" void cleave_comm_reduce_scatter(int32_t comm, char *arena,
                                           int32_t op, const cleave_tensor *in,
                                           const cleave_tensor *out) {
  startReduceScatter("cleave_comm_reduce_scatter", comm, arena, op, in, out)
      ->wait();
}

extern "C" void cleave_comm_all_to_all(int32_t comm, char *arena,
                                       const cleave_tensor *in,
                                       const cleave_tensor *out) {
  startAllToAll("cleave_comm_all_to_all", comm, arena, in, out)->wait();
}

extern "C" int64_t cleave_comm_all_reduce_start(int32_t comm, char *arena,
                                                int32_t op,
                                                const cleave_tensor *in,
                                                const cleave_tensor *out) {
  const char *fn = "cleave_comm_all_reduce_start";
  OperationPtr o = startAllReduce(fn, comm, arena, op, in, out);
  return track(fn, *state().groups[comm], arena, *in, *out, std::move(o));
}

extern "C" int64_t cleave_comm_all_gather_start(int32_t comm, char *arena,
                                                const cleave_tensor *in,
                                                const cleave_tensor *out) {
  const char *fn = "cleave_comm_all_gather_start";
  OperationPtr o = startAllGather(fn, comm, arena, in, out);
  return track(fn, *state().groups[comm], arena, *in, *out, std::move(o));
}

extern "C" int64_t cleave_comm_reduce_scatter_start(int32_t comm, char *arena,
                                                    int32_t op,
                                                    const cleave_tensor *in,
                                                    const cleave_tensor *out) {
  const char *fn = "cleave_comm_reduce_scatter_start";
  OperationPtr o = startReduceScatter(fn, comm, arena, op, in, out);
  return track(fn, *state().groups[comm], arena, *in, *out, std::move(o));
}

extern "C" int64_t cleave_comm_all_to_all_start(int32_t comm, char *arena,
                                                const cleave_tensor *in,
                                                const cleave_tensor *out) {
  const char *fn = "cleave_comm_all_to_all_start";
  OperationPtr o = startAllToAll(fn, comm, arena, in, out);
  return track(fn, *state().groups[comm], arena, *in, *out, std::move(o));
}

extern "C" void cleave_comm_wait(int64_t handle) {
  const char *fn = "cleave_comm_wait";
  requireInit(fn);
  State &s = state();
  s.engine->poll();
  auto it = s.inFlight.find(handle);
  if (it == s.inFlight.end())
    cleave_rt_fail("%s: %lld is not the handle of a collective in flight (%s)",
                   fn, (long long)handle,
                   handle >= 1 && handle <= s.lastHandle
                       ? "it was waited for already"
                       : "no cleave_comm_*_start returned it");
  // Out of the table first: the wait may fail (the watchdog).
  OperationPtr o = std::move(it->second.operation);
  int32_t traceKind = it->second.traceKind, peer = it->second.peer;
  s.inFlight.erase(it);
  TraceTransfer traced(traceKind, peer, fn);
  o->wait();
}

extern "C" void cleave_comm_broadcast(int32_t comm, char *arena,
                                      const cleave_tensor *t, int32_t root) {
  const char *fn = "cleave_comm_broadcast";
  Group &g = collectiveGroup(fn, comm);
  checkArena(fn, arena);
  checkTensor(fn, "t", t);
  checkPeer(fn, "root", g, root, false);
  checkNotInFlight(fn, arena, "t", t, "t", t);
  state().engine->broadcast(g, arena, *t, root);
  // A chain root, root+1, ...: every rank but the last forwards the tensor.
  int64_t bytes = tensorBytes(*t);
  bool last = (g.rank - root + g.size) % g.size == g.size - 1;
  count(g, CLEAVE_COMM_BROADCAST, bytes, last ? 0 : bytes);
}

extern "C" void cleave_comm_send(int32_t comm, char *arena,
                                 const cleave_tensor *t, int32_t peer) {
  const char *fn = "cleave_comm_send";
  Group &g = collectiveGroup(fn, comm);
  checkArena(fn, arena);
  checkTensor(fn, "t", t);
  checkPeer(fn, "peer", g, peer, true);
  checkNotInFlight(fn, arena, "t", t, nullptr, nullptr);
  {
    TraceTransfer traced(CLEAVE_COMM_TRACE_SEND, peer, fn);
    state().engine->send(g, arena, *t, peer);
  }
  int64_t bytes = tensorBytes(*t);
  count(g, CLEAVE_COMM_SEND, bytes, bytes);
}

extern "C" void cleave_comm_recv(int32_t comm, char *arena,
                                 const cleave_tensor *t, int32_t peer) {
  const char *fn = "cleave_comm_recv";
  Group &g = collectiveGroup(fn, comm);
  checkArena(fn, arena);
  checkTensor(fn, "t", t);
  checkPeer(fn, "peer", g, peer, true);
  checkNotInFlight(fn, arena, nullptr, nullptr, "t", t);
  {
    TraceTransfer traced(CLEAVE_COMM_TRACE_RECV, peer, fn);
    state().engine->recv(g, arena, *t, peer);
  }
  count(g, CLEAVE_COMM_RECV, tensorBytes(*t), 0);
}

extern "C" int64_t cleave_comm_recv_start(int32_t comm, char *arena,
                                          const cleave_tensor *t,
                                          int32_t peer) {
  const char *fn = "cleave_comm_recv_start";
  Group &g = collectiveGroup(fn, comm);
  checkArena(fn, arena);
  checkTensor(fn, "t", t);
  checkPeer(fn, "peer", g, peer, true);
  checkNotInFlight(fn, arena, nullptr, nullptr, "t", t);
  OperationPtr o = state().engine->recvStart(g, arena, *t, peer);
  count(g, CLEAVE_COMM_RECV, tensorBytes(*t), 0);
  // Nothing may read or write its buffer before the wait.
  int64_t handle = track(fn, g, arena, *t, *t, std::move(o));
  InFlight &f = state().inFlight[handle];
  f.traceKind = CLEAVE_COMM_TRACE_RECV;
  f.peer = peer;
  return handle;
}

extern "C" void cleave_comm_sendrecv(int32_t comm, char *arena,
                                     const cleave_tensor *send,
                                     int32_t sendPeer,
                                     const cleave_tensor *recv,
                                     int32_t recvPeer) {
  const char *fn = "cleave_comm_sendrecv";
  Group &g = collectiveGroup(fn, comm);
  checkArena(fn, arena);
  if (sendPeer != -1) {
    checkPeer(fn, "send_peer", g, sendPeer, false);
    checkTensor(fn, "send", send);
  }
  if (recvPeer != -1) {
    checkPeer(fn, "recv_peer", g, recvPeer, false);
    checkTensor(fn, "recv", recv);
  }
  // A send to this rank is matched by this call's receive or by nothing.
  if ((sendPeer == g.rank) != (recvPeer == g.rank))
    cleave_rt_fail("%s: send_peer %d and recv_peer %d: a rank sends to "
                   "itself only when it also receives from itself (group "
                   "rank %d of %s)",
                   fn, int(sendPeer), int(recvPeer), g.rank, g.label.c_str());
  if (sendPeer != -1 && recvPeer != -1 && overlaps(*send, *recv))
    cleave_rt_fail("%s: send and recv overlap", fn);
  checkNotInFlight(fn, arena, "send", sendPeer != -1 ? send : nullptr, "recv",
                   recvPeer != -1 ? recv : nullptr);
  {
    TraceTransfer traced(sendPeer == -1   ? CLEAVE_COMM_TRACE_RECV
                         : recvPeer == -1 ? CLEAVE_COMM_TRACE_SEND
                                          : CLEAVE_COMM_TRACE_SENDRECV,
                         sendPeer == -1 ? recvPeer : sendPeer, fn);
    state().engine->sendRecv(g, arena, sendPeer != -1 ? send : nullptr,
                             sendPeer, recvPeer != -1 ? recv : nullptr,
                             recvPeer, fn);
  }
  if (sendPeer != -1) {
    int64_t bytes = tensorBytes(*send);
    count(g, CLEAVE_COMM_SEND, bytes, sendPeer == g.rank ? 0 : bytes);
  }
  if (recvPeer != -1)
    count(g, CLEAVE_COMM_RECV, tensorBytes(*recv), 0);
}

namespace {

/// A collective_permute's checks, its start and its count; `fn` names the
/// ABI call.
OperationPtr startCollectivePermute(const char *fn, int32_t comm, char *arena,
                                    const cleave_tensor *in,
                                    const cleave_tensor *out,
                                    const int64_t *pairs, int64_t numPairs) {
  Group &g = collectiveGroup(fn, comm);
  checkPair(fn, arena, in, out);
  if (!sameShape(*in, *out))
    cleave_rt_fail("%s: in %s and out %s differ in shape", fn,
                   shapeString(*in).c_str(), shapeString(*out).c_str());
  if (overlaps(*in, *out))
    cleave_rt_fail("%s: in and out overlap", fn);
  PermutePeers peers = permutePeers(fn, g, pairs, numPairs);
  checkNotInFlight(fn, arena, "in", in, "out", out);
  Engine &engine = *state().engine;
  if (peers.source < 0)
    engine.zero(arena, *out, fn);
  OperationPtr o = engine.sendRecvStart(
      g, arena, peers.target >= 0 ? in : nullptr, peers.target,
      peers.source >= 0 ? out : nullptr, peers.source, fn);
  int64_t bytes = tensorBytes(*in);
  bool sends = peers.target >= 0 && peers.target != g.rank;
  count(g, CLEAVE_COMM_COLLECTIVE_PERMUTE, bytes, sends ? bytes : 0);
  return o;
}

} // namespace

extern "C" void cleave_comm_collective_permute(int32_t comm, char *arena,
                                               const cleave_tensor *in,
                                               const cleave_tensor *out,
                                               const int64_t *pairs,
                                               int64_t numPairs) {
  startCollectivePermute("cleave_comm_collective_permute", comm, arena, in,
                         out, pairs, numPairs)
      ->wait();
}

extern "C" int64_t cleave_comm_collective_permute_start(
    int32_t comm, char *arena, const cleave_tensor *in,
    const cleave_tensor *out, const int64_t *pairs, int64_t numPairs) {
  const char *fn = "cleave_comm_collective_permute_start";
  OperationPtr o =
      startCollectivePermute(fn, comm, arena, in, out, pairs, numPairs);
  return track(fn, *state().groups[comm], arena, *in, *out, std::move(o));
}

extern "C" void cleave_comm_barrier(int32_t comm) {
  Group &g = collectiveGroup("cleave_comm_barrier", comm);
  state().engine->barrier(g);
  count(g, CLEAVE_COMM_BARRIER, 0, 0);
}

extern "C" int64_t cleave_comm_host_max(int32_t comm, int64_t value) {
  Group &g = collectiveGroup("cleave_comm_host_max", comm);
  // Not a collective of the program: not counted, and host memory on both
  // engines (their bootstrap communicator is MPI's).
  Watchdog watchdog("cleave_comm_host_max", g);
  int64_t result = value;
  MPI_Request request;
  MPI_Iallreduce(&value, &result, 1, MPI_INT64_T, MPI_MAX, g.mpi, &request);
  waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
  return result;
}

