//===- Comm.cpp - the C ABI of cleave_comm.h over an engine ---------------===//
//
// Start-up (MPI, the fail hook, the world communicator), mesh-axis groups,
// the counters and the engine's table, shared by the MPI and the NCCL
// engine: this file and Collectives.cpp (every collective's checks, byte
// counts and handles) are compiled into both libraries, and the engine
// only moves bytes.
//
//===----------------------------------------------------------------------===//

#include "CommState.h"

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
    cleave_comm_kind_name,   cleave_comm_host_gather,
    cleave_comm_trace_start, cleave_comm_trace_stop,
    cleave_comm_trace_step,  cleave_comm_trace_events};

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
