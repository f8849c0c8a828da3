//===- Comm.cpp - the C ABI of cleave_comm.h over an engine ---------------===//
//
// Start-up (MPI, the fail hook, the world communicator), mesh-axis groups,
// every collective's descriptor checks and byte counts, and the handles of
// the nonblocking collectives, shared by the MPI and the NCCL engine: this
// file is compiled into both libraries, and the engine only moves bytes.
//
//===----------------------------------------------------------------------===//

#include "Engine.h"

#include "../cpu/FailHook.h"
#include "../cpu/Tensor.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>

using namespace cleave::rt;
using namespace cleave::rt::comm;

namespace {

/// A nonblocking collective between its start and its wait.
struct InFlight {
  OperationPtr operation;
  const char *fn;
  const Group *group;
  /// The arena bytes it reads and those it writes, [begin, end).
  std::pair<const char *, const char *> reads, writes;
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

State &state() {
  static State s;
  return s;
}

/// cleave_rt_fail's hook: one rank's fatal error ends every rank.
void abortJob() {
  State &s = state();
  if (!s.initialized || s.finalized || s.worldSize == 1)
    return;
  std::fprintf(stderr,
               "note: rank %d of %d failed (the error above): aborting "
               "every rank\n",
               s.worldRank, s.worldSize);
  std::fflush(stderr);
  abortEngine();
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void requireInit(const char *fn) {
  State &s = state();
  if (!s.initialized || s.finalized)
    cleave_rt_fail("%s: the communication engine is not running (call "
                   "cleave_comm_init first)",
                   fn);
}

Group &groupOf(const char *fn, int32_t comm) {
  requireInit(fn);
  State &s = state();
  if (comm < 0 || comm >= int32_t(s.groups.size()))
    cleave_rt_fail("%s: communicator %d does not exist (%d created)", fn,
                   int(comm), int(s.groups.size()));
  return *s.groups[comm];
}

/// groupOf for a collective or a wait: first lets the engine check what is
/// in flight (its watchdog, MPI's progress).
Group &collectiveGroup(const char *fn, int32_t comm) {
  Group &g = groupOf(fn, comm);
  state().engine->poll();
  return g;
}

std::string listString(const std::vector<int64_t> &v, const char *open,
                       const char *close) {
  std::string s = open;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + close;
}

/// Creates the MPI communicator of `g` (worldRanks filled in) under the
/// watchdog, after checking that every rank asks for the same group.
void splitWorld(Group &g, int color, uint64_t fingerprint) {
  State &s = state();
  Group &world = *s.groups[0];
  // The ranks must agree on the mesh and axes: max(h) == -max(-h) for a
  // fingerprint h of them (the top bit cleared, so that both fit an int64).
  int64_t h = int64_t(fingerprint >> 1);
  int64_t mine[2] = {h, -h}, all[2] = {0, 0};
  Watchdog watchdog("cleave_comm_group", world);
  MPI_Request request;
  MPI_Iallreduce(mine, all, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD, &request);
  waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
  if (all[0] != -all[1])
    cleave_rt_fail("cleave_comm_group: the ranks disagree on the mesh or "
                   "the axes (rank %d asked for %s)",
                   s.worldRank, g.label.c_str());
  MPI_Comm_split(MPI_COMM_WORLD, color, g.rank, &g.mpi);
}

uint64_t fingerprintOf(const std::vector<int64_t> &mesh,
                       const std::vector<int64_t> &axes) {
  // FNV-1a over the numbers, with the list lengths as separators.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= uint64_t(v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(int64_t(mesh.size()));
  for (int64_t v : mesh)
    mix(v);
  mix(int64_t(axes.size()));
  for (int64_t v : axes)
    mix(v);
  return h;
}

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

const char *cleave::rt::comm::kindName(int32_t kind) {
  static const char *names[CLEAVE_COMM_NUM_KINDS] = {
      "all_reduce", "all_gather", "reduce_scatter",    "all_to_all",
      "broadcast",  "send",       "recv",              "barrier",
      "collective_permute"};
  return kind >= 0 && kind < CLEAVE_COMM_NUM_KINDS ? names[kind] : "unknown";
}

int64_t cleave::rt::comm::tensorBytes(const cleave_tensor &t) {
  return numElements(t) * int64_t(elementSize(t.dtype));
}

Engine *cleave::rt::comm::currentEngine() { return state().engine.get(); }

int cleave::rt::comm::worldRank() { return state().worldRank; }

//===----------------------------------------------------------------------===//
// Start-up and groups
//===----------------------------------------------------------------------===//

extern "C" void cleave_comm_init(int *argc, char ***argv) {
  State &s = state();
  if (s.initialized)
    cleave_rt_fail("cleave_comm_init: called twice");
  timeoutSeconds(); // fails early on a malformed CLEAVE_COMM_TIMEOUT_S
  int running = 0;
  MPI_Initialized(&running);
  if (!running) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    s.ownsMpi = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &s.worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.worldSize);
  s.initialized = true;
  setFailHook(abortJob);

  auto world = std::make_unique<Group>();
  world->id = CLEAVE_COMM_WORLD;
  world->label = "world [" + std::to_string(s.worldSize) + "]";
  world->mesh = {s.worldSize};
  world->axes = {0};
  world->rank = s.worldRank;
  world->size = s.worldSize;
  for (int r = 0; r < s.worldSize; ++r)
    world->worldRanks.push_back(r);
  MPI_Comm_dup(MPI_COMM_WORLD, &world->mpi);
  s.byAxes[{world->mesh, world->axes}] = CLEAVE_COMM_WORLD;
  s.groups.push_back(std::move(world));

  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, s.worldRank,
                      MPI_INFO_NULL, &local);
  s.engine = createEngine();
  s.engine->init(local);
  MPI_Comm_free(&local);
  s.engine->addGroup(*s.groups[0]);
}

extern "C" void cleave_comm_finalize(void) {
  State &s = state();
  if (!s.initialized || s.finalized)
    return;
  if (!s.inFlight.empty()) {
    // Every rank that started them reports them; the first report ends the
    // job (its fail hook), where a finalize over them could hang.
    std::string list;
    size_t shown = 0;
    for (const auto &[handle, f] : s.inFlight) {
      if (shown++ == 4) {
        list += ", ...";
        break;
      }
      list += std::string(list.empty() ? "" : ", ") + "handle " +
              std::to_string(handle) + " (" + f.fn + " on " + f.group->label +
              ")";
    }
    size_t n = s.inFlight.size();
    cleave_rt_fail("cleave_comm_finalize: %zu nonblocking collective%s %s "
                   "started but never waited for: %s; call cleave_comm_wait "
                   "on every handle before finalize",
                   n, n == 1 ? "" : "s", n == 1 ? "was" : "were",
                   list.c_str());
  }
  s.engine->finalize();
  for (auto &g : s.groups)
    if (g->mpi != MPI_COMM_NULL)
      MPI_Comm_free(&g->mpi);
  s.finalized = true;
  setFailHook(nullptr);
  if (s.ownsMpi)
    MPI_Finalize();
}

extern "C" const char *cleave_comm_engine_name(void) {
  requireInit("cleave_comm_engine_name");
  return state().engine->name();
}

extern "C" int32_t cleave_comm_world_rank(void) {
  requireInit("cleave_comm_world_rank");
  return state().worldRank;
}

extern "C" int32_t cleave_comm_world_size(void) {
  requireInit("cleave_comm_world_size");
  return state().worldSize;
}

extern "C" void cleave_comm_expect_world_size(int32_t expected) {
  requireInit("cleave_comm_expect_world_size");
  State &s = state();
  if (expected < 1)
    cleave_rt_fail("cleave_comm_expect_world_size: expected %d ranks, which "
                   "is not a positive count",
                   int(expected));
  if (expected == s.worldSize)
    return;
  // Every rank sees the same mismatch: each says so, and once all have,
  // the job ends with status 1 (an MPI_Abort could cut the others short).
  std::fflush(stdout);
  std::fprintf(stderr,
               "error: rank %d: this program runs on %d ranks (the size of "
               "its mesh) but the job has %d; launch it with %d ranks "
               "(mpirun -np %d)\n",
               s.worldRank, int(expected), s.worldSize, int(expected),
               int(expected));
  std::fflush(stderr);
  Group &world = *s.groups[0];
  Watchdog watchdog("cleave_comm_expect_world_size", world);
  MPI_Request request;
  MPI_Ibarrier(world.mpi, &request);
  waitRequests(1, &request, MPI_STATUS_IGNORE, watchdog);
  cleave_comm_finalize();
  std::exit(1);
}

extern "C" int32_t cleave_comm_group(int32_t meshRank,
                                     const int64_t *meshShape,
                                     int32_t numAxes, const int64_t *axes) {
  const char *fn = "cleave_comm_group";
  requireInit(fn);
  State &s = state();
  if (meshRank < 1 || meshRank > CLEAVE_COMM_MAX_MESH_RANK)
    cleave_rt_fail("%s: mesh rank %d is not in [1, %d]", fn, int(meshRank),
                   CLEAVE_COMM_MAX_MESH_RANK);
  if (!meshShape || (numAxes > 0 && !axes))
    cleave_rt_fail("%s: mesh_shape or axes is NULL", fn);
  std::vector<int64_t> mesh(meshShape, meshShape + meshRank);
  int64_t total = 1;
  for (int64_t size : mesh) {
    if (size < 1)
      cleave_rt_fail("%s: mesh %s has a size below 1", fn,
                     listString(mesh, "[", "]").c_str());
    total *= size;
  }
  if (total != s.worldSize)
    cleave_rt_fail("%s: mesh %s has %lld devices but the job has %d ranks",
                   fn, listString(mesh, "[", "]").c_str(), (long long)total,
                   s.worldSize);
  if (numAxes < 0 || numAxes > meshRank)
    cleave_rt_fail("%s: %d axes for a mesh of rank %d", fn, int(numAxes),
                   int(meshRank));
  std::vector<int64_t> groupAxes(axes, axes + numAxes);
  std::vector<bool> inGroup(meshRank, false);
  for (int64_t a : groupAxes) {
    if (a < 0 || a >= meshRank || inGroup[a])
      cleave_rt_fail("%s: axes %s must be distinct axes of the rank-%d mesh",
                     fn, listString(groupAxes, "{", "}").c_str(),
                     int(meshRank));
    inGroup[a] = true;
  }
  auto known = s.byAxes.find({mesh, groupAxes});
  if (known != s.byAxes.end())
    return known->second;

  // This rank's mesh coordinates (row-major: the last axis fastest).
  std::vector<int64_t> coords(meshRank), strides(meshRank);
  int64_t stride = 1;
  for (int d = meshRank - 1; d >= 0; --d) {
    strides[d] = stride;
    coords[d] = (s.worldRank / stride) % mesh[d];
    stride *= mesh[d];
  }
  auto g = std::make_unique<Group>();
  g->label = "mesh " + listString(mesh, "[", "]") + " axes " +
             listString(groupAxes, "{", "}");
  g->mesh = mesh;
  g->axes = groupAxes;
  g->size = 1;
  g->rank = 0;
  for (int64_t a : groupAxes) {
    g->rank = int(g->rank * mesh[a] + coords[a]);
    g->size *= int(mesh[a]);
  }
  // The group's world ranks in group rank order: walk the group axes
  // row-major from this rank's coordinates with those axes zeroed.
  int64_t base = 0;
  for (int d = 0; d < meshRank; ++d)
    if (!inGroup[d])
      base += coords[d] * strides[d];
  for (int i = 0; i < g->size; ++i) {
    int64_t rank = base, rest = i;
    for (int k = numAxes - 1; k >= 0; --k) {
      int64_t a = groupAxes[k];
      rank += (rest % mesh[a]) * strides[a];
      rest /= mesh[a];
    }
    g->worldRanks.push_back(int(rank));
  }
  // The world itself keeps its handle.
  bool isWorld = g->size == s.worldSize;
  for (int i = 0; isWorld && i < g->size; ++i)
    isWorld = g->worldRanks[i] == i;
  if (isWorld) {
    s.byAxes[{mesh, groupAxes}] = CLEAVE_COMM_WORLD;
    return CLEAVE_COMM_WORLD;
  }
  // Ranks of one group share the coordinates outside the group's axes:
  // their row-major index is the color.
  int color = 0;
  for (int d = 0; d < meshRank; ++d)
    if (!inGroup[d])
      color = int(color * mesh[d] + coords[d]);
  g->id = int32_t(s.groups.size());
  splitWorld(*g, color, fingerprintOf(mesh, groupAxes));
  s.engine->addGroup(*g);
  s.byAxes[{mesh, groupAxes}] = g->id;
  s.groups.push_back(std::move(g));
  return s.groups.back()->id;
}

extern "C" int32_t cleave_comm_rank(int32_t comm) {
  return groupOf("cleave_comm_rank", comm).rank;
}

extern "C" int32_t cleave_comm_size(int32_t comm) {
  return groupOf("cleave_comm_size", comm).size;
}

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
  s.inFlight.erase(it);
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
  state().engine->send(g, arena, *t, peer);
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
  state().engine->recv(g, arena, *t, peer);
  count(g, CLEAVE_COMM_RECV, tensorBytes(*t), 0);
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
  state().engine->sendRecv(g, arena, sendPeer != -1 ? send : nullptr,
                           sendPeer, recvPeer != -1 ? recv : nullptr, recvPeer,
                           fn);
  if (sendPeer != -1) {
    int64_t bytes = tensorBytes(*send);
    count(g, CLEAVE_COMM_SEND, bytes, sendPeer == g.rank ? 0 : bytes);
  }
  if (recvPeer != -1)
    count(g, CLEAVE_COMM_RECV, tensorBytes(*recv), 0);
}

extern "C" void cleave_comm_collective_permute(int32_t comm, char *arena,
                                               const cleave_tensor *in,
                                               const cleave_tensor *out,
                                               const int64_t *pairs,
                                               int64_t numPairs) {
  const char *fn = "cleave_comm_collective_permute";
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
  engine.sendRecv(g, arena, peers.target >= 0 ? in : nullptr, peers.target,
                  peers.source >= 0 ? out : nullptr, peers.source, fn);
  int64_t bytes = tensorBytes(*in);
  bool sends = peers.target >= 0 && peers.target != g.rank;
  count(g, CLEAVE_COMM_COLLECTIVE_PERMUTE, bytes, sends ? bytes : 0);
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

extern "C" const char *cleave_comm_kind_name(int32_t kind) {
  return kind >= 0 && kind < CLEAVE_COMM_NUM_KINDS ? kindName(kind) : nullptr;
}

extern "C" const cleave_comm_api cleave_comm_engine = {
    cleave_comm_init,        cleave_comm_finalize,
    cleave_comm_engine_name, cleave_comm_world_rank,
    cleave_comm_world_size,  cleave_comm_expect_world_size,
    cleave_comm_group,       cleave_comm_rank,
    cleave_comm_size,        cleave_comm_barrier,
    cleave_comm_host_max,    cleave_comm_get_counter,
    cleave_comm_reset_counters, cleave_comm_print_stats,
    cleave_comm_kind_name};

//===----------------------------------------------------------------------===//
// Counters
//===----------------------------------------------------------------------===//

extern "C" void cleave_comm_get_counter(int32_t comm, int32_t kind,
                                        cleave_comm_counter *out) {
  const char *fn = "cleave_comm_get_counter";
  Group &g = groupOf(fn, comm);
  if (kind < 0 || kind >= CLEAVE_COMM_NUM_KINDS)
    cleave_rt_fail("%s: unknown collective kind %d", fn, int(kind));
  if (!out)
    cleave_rt_fail("%s: out is NULL", fn);
  *out = g.counters[kind];
}

extern "C" void cleave_comm_reset_counters(void) {
  requireInit("cleave_comm_reset_counters");
  for (auto &g : state().groups)
    for (cleave_comm_counter &c : g->counters)
      c = cleave_comm_counter{};
}

namespace {

std::string humanBytes(int64_t bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v,
                units[u]);
  return buf;
}

} // namespace

extern "C" void cleave_comm_print_stats(FILE *out) {
  requireInit("cleave_comm_print_stats");
  State &s = state();
  if (!out)
    cleave_rt_fail("cleave_comm_print_stats: out is NULL");
  std::fprintf(out,
               "communication of rank %d of %d (%s engine; wire = bytes this "
               "rank sends, ring algorithms)\n",
               s.worldRank, s.worldSize, s.engine->name());
  std::fprintf(out, "  %-28s %-15s %10s %14s %14s\n", "communicator",
               "collective", "calls", "payload", "wire");
  cleave_comm_counter total{};
  for (auto &g : s.groups) {
    for (int32_t k = 0; k < CLEAVE_COMM_NUM_KINDS; ++k) {
      const cleave_comm_counter &c = g->counters[k];
      if (c.calls == 0)
        continue;
      std::fprintf(out, "  %-28s %-15s %10lld %14s %14s\n", g->label.c_str(),
                   kindName(k), (long long)c.calls,
                   humanBytes(c.payload_bytes).c_str(),
                   humanBytes(c.wire_bytes).c_str());
      total.calls += c.calls;
      total.payload_bytes += c.payload_bytes;
      total.wire_bytes += c.wire_bytes;
    }
  }
  std::fprintf(out, "  %-28s %-15s %10lld %14s %14s\n", "total", "",
               (long long)total.calls, humanBytes(total.payload_bytes).c_str(),
               humanBytes(total.wire_bytes).c_str());
}
