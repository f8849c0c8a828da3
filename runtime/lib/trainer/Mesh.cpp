//===- Mesh.cpp - this process's place in a partitioned program -----------===//
//
// The start of a partitioned program's engine and the block arithmetic of
// shardings (Mesh.h).
//
//===----------------------------------------------------------------------===//

#include "Mesh.h"

#include "Program.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

using namespace cleave::rt::trainer;

namespace {

Device &state() {
  static Device d;
  return d;
}

std::string shapeOfMesh(const cleave_program_info &p) {
  return shapeString(std::vector<int64_t>(p.mesh_shape,
                                          p.mesh_shape + p.mesh_rank));
}

void checkSharding(const char *kind, const cleave_named_tensor &t) {
  const cleave_program_info &p = program();
  const cleave_sharding &s = *t.sharding;
  std::string what = std::string("program metadata: ") + kind + " '" +
                     t.name + "'";
  if (p.mesh_rank == 0)
    fail(what + " has a sharding but the program has no mesh");
  std::set<int64_t> used;
  for (int d = 0; d < t.tensor.rank; ++d) {
    if (s.num_axes[d] < 0 || s.num_axes[d] > p.mesh_rank)
      fail(what + " splits dimension " + std::to_string(d) + " over " +
           std::to_string(s.num_axes[d]) + " axes");
    int64_t parts = 1;
    for (int64_t j = 0; j < s.num_axes[d]; ++j) {
      int64_t axis = s.axes[d][j];
      if (axis < 0 || axis >= p.mesh_rank || !used.insert(axis).second)
        fail(what + " names mesh axis " + std::to_string(axis) +
             " twice or outside the mesh");
      parts *= p.mesh_shape[axis];
    }
    if (s.global_shape[d] != t.tensor.shape[d] * parts)
      fail(what + " is " + describe(t.tensor) + " on each device, which " +
           "is not a block of its global dimension " + std::to_string(d) +
           " of " + std::to_string(s.global_shape[d]));
  }
}

void checkShardings(const char *kind, const cleave_named_tensor *list,
                    int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    if (list[i].sharding)
      checkSharding(kind, list[i]);
}

/// The index of the block of `t` along `d` for the device at `coords`: the
/// row-major index of its coordinates along the dimension's axes.
int64_t blockIndex(const cleave_named_tensor &t, int d,
                   const std::vector<int64_t> &coords) {
  const cleave_program_info &p = program();
  int64_t index = 0;
  for (int64_t j = 0; j < t.sharding->num_axes[d]; ++j) {
    int64_t axis = t.sharding->axes[d][j];
    index = index * p.mesh_shape[axis] + coords[size_t(axis)];
  }
  return index;
}

} // namespace

bool cleave::rt::trainer::namesDistinctAxes(const cleave_group &group,
                                            int32_t meshRank) {
  std::set<int64_t> axes;
  bool ok = group.num_axes >= 1 && group.num_axes <= meshRank;
  for (int64_t j = 0; ok && j < group.num_axes; ++j)
    ok = group.axes[j] >= 0 && group.axes[j] < meshRank &&
         axes.insert(group.axes[j]).second;
  return ok;
}

void cleave::rt::trainer::checkMeshMetadata() {
  const cleave_program_info &p = program();
  if (p.mesh_rank < 0 || p.mesh_rank > CLEAVE_RT_MAX_MESH_RANK)
    fail("program metadata: mesh rank " + std::to_string(p.mesh_rank) +
         " is not in [0, " + std::to_string(CLEAVE_RT_MAX_MESH_RANK) + "]");
  if (p.mesh_rank > 0) {
    if (!p.mesh_shape || !p.mesh_axis_names)
      fail("program metadata: the mesh has no shape or axis names");
    for (int32_t a = 0; a < p.mesh_rank; ++a)
      if (p.mesh_shape[a] < 1 || !p.mesh_axis_names[a])
        fail("program metadata: mesh " + shapeOfMesh(p) +
             " has an axis without a name or of size below 1");
    if (!p.comm)
      fail("program metadata: the program runs on mesh " + shapeOfMesh(p) +
           " but was linked without a communication engine (compile it "
           "with cleave-compile, which links one)");
  }
  if (p.num_groups < 0 || (p.num_groups > 0 && (!p.groups || !p.mesh_rank)))
    fail("program metadata: bad communicator group list");
  for (int64_t g = 0; g < p.num_groups; ++g) {
    if (!namesDistinctAxes(p.groups[g], p.mesh_rank))
      fail("program metadata: communicator group " + std::to_string(g) +
           " does not name distinct axes of mesh " + shapeOfMesh(p));
  }
  checkShardings("parameter", p.params, p.num_params);
  checkShardings("input", p.inputs, p.num_inputs);
  checkShardings("output", p.outputs, p.num_outputs);
}

void cleave::rt::trainer::startDevice(int *argc, char ***argv) {
  const cleave_program_info &p = program();
  Device &d = state();
  if (p.mesh_rank == 0)
    return;
  d.comm = p.comm;
  d.comm->init(argc, argv);
  d.distributed = true;
  d.rank = d.comm->world_rank();
  d.size = d.comm->world_size();
  int64_t devices = 1;
  for (int32_t a = 0; a < p.mesh_rank; ++a) {
    d.shape.push_back(p.mesh_shape[a]);
    d.axisNames.push_back(p.mesh_axis_names[a]);
    devices *= p.mesh_shape[a];
  }
  // Before any other work: every rank says what it expected and got.
  d.comm->expect_world_size(int32_t(devices));
  d.coords.assign(size_t(p.mesh_rank), 0);
  for (int64_t a = p.mesh_rank - 1, r = d.rank; a >= 0; --a) {
    d.coords[size_t(a)] = r % p.mesh_shape[a];
    r /= p.mesh_shape[a];
  }
  if (numStages() > 0) {
    // Every stage has this mesh and these groups; the device runs the
    // stage of its coordinate along the stage axis.
    d.stageAxis = cleave_program.stage_axis;
    d.stage = d.coords[size_t(d.stageAxis)];
    d.context.stage = d.stage;
    selectStage(d.stage);
  }
  for (int64_t g = 0; g < p.num_groups; ++g) {
    const cleave_group &group = p.groups[g];
    int32_t comm = d.comm->group(p.mesh_rank, p.mesh_shape,
                                 int32_t(group.num_axes), group.axes);
    d.comms.push_back(comm);
    d.groupRanks.push_back(d.comm->rank(comm));
  }
  d.context.comms = d.comms.empty() ? nullptr : d.comms.data();
  d.context.group_ranks = d.groupRanks.empty() ? nullptr : d.groupRanks.data();
}

OtherProgramContext::OtherProgramContext(const cleave_program_info &other) {
  const Device &d = state();
  const cleave_program_info &p = program();
  context.stage = d.stage;
  for (int64_t g = 0; g < other.num_groups; ++g) {
    const cleave_group &group = other.groups[g];
    int64_t same = -1;
    for (int64_t h = 0; same < 0 && h < p.num_groups; ++h)
      if (std::memcmp(&p.groups[h], &group, sizeof(cleave_group)) == 0)
        same = h;
    int32_t comm = same >= 0 ? d.comms[size_t(same)]
                             : d.comm->group(p.mesh_rank, p.mesh_shape,
                                             int32_t(group.num_axes),
                                             group.axes);
    comms.push_back(comm);
    groupRanks.push_back(d.comm->rank(comm));
  }
  context.comms = comms.empty() ? nullptr : comms.data();
  context.group_ranks = groupRanks.empty() ? nullptr : groupRanks.data();
}

void cleave::rt::trainer::stopDevice() {
  Device &d = state();
  if (!d.distributed)
    return;
  d.comm->finalize();
  d.distributed = false;
}

void cleave::rt::trainer::onEveryRank(const std::function<void()> &work) {
  Device &d = state();
  if (!d.distributed)
    return work();
  std::string error;
  try {
    work();
  } catch (const Error &e) {
    error = e.what();
  }
  if (d.comm->host_max(CLEAVE_COMM_WORLD, error.empty() ? 0 : 1) == 0)
    return;
  // Every rank has its line out before the job ends; no rank aborts the
  // others.
  std::string line =
      "error: " +
      (error.empty() ? std::string("another rank failed (its error above)")
                     : error) +
      "\n";
  std::fflush(stdout);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  d.comm->barrier(CLEAVE_COMM_WORLD);
  stopDevice();
  std::exit(1);
}

const Device &cleave::rt::trainer::device() { return state(); }

int cleave::rt::trainer::launcherRank() {
  for (const char *name :
       {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PMI_RANK"})
    if (const char *value = std::getenv(name))
      return std::atoi(value);
  return 0;
}

const cleave_program_context *cleave::rt::trainer::programContext() {
  return &state().context;
}

std::vector<int64_t>
cleave::rt::trainer::globalShape(const cleave_named_tensor &t) {
  if (!t.sharding)
    return shapeOf(t.tensor);
  return std::vector<int64_t>(t.sharding->global_shape,
                              t.sharding->global_shape + t.tensor.rank);
}

cleave_tensor cleave::rt::trainer::globalTensor(const cleave_named_tensor &t) {
  cleave_tensor g = t.tensor;
  std::vector<int64_t> shape = globalShape(t);
  for (int d = 0; d < g.rank; ++d)
    g.shape[d] = shape[size_t(d)];
  return g;
}

std::vector<int64_t>
cleave::rt::trainer::blockStart(const cleave_named_tensor &t,
                                const std::vector<int64_t> &coords) {
  std::vector<int64_t> start(size_t(t.tensor.rank), 0);
  if (t.sharding)
    for (int d = 0; d < t.tensor.rank; ++d)
      start[size_t(d)] = blockIndex(t, d, coords) * t.tensor.shape[d];
  return start;
}

void cleave::rt::trainer::copyBlock(const cleave_named_tensor &t,
                                    const std::vector<int64_t> &coords,
                                    const char *global, char *local) {
  // copyRegion moves either way; this direction only reads `global`.
  copyRegion(const_cast<char *>(global), globalShape(t), blockStart(t, coords),
             shapeOf(t.tensor), dtypeSize(t.tensor.dtype), local,
             /*toGlobal=*/false);
}

bool cleave::rt::trainer::ownsBlock(const cleave_named_tensor &t,
                                    const std::vector<int64_t> &coords) {
  std::vector<bool> splits(coords.size(), false);
  if (t.sharding)
    for (int d = 0; d < t.tensor.rank; ++d)
      for (int64_t j = 0; j < t.sharding->num_axes[d]; ++j)
        splits[size_t(t.sharding->axes[d][j])] = true;
  for (size_t a = 0; a < coords.size(); ++a)
    if (!splits[a] && coords[a] != 0 && int64_t(a) != state().stageAxis)
      return false;
  return true;
}

void cleave::rt::trainer::copyRegion(char *global,
                                     const std::vector<int64_t> &gshape,
                                     const std::vector<int64_t> &start,
                                     const std::vector<int64_t> &block,
                                     size_t es, char *blockBytes,
                                     bool toGlobal) {
  int rank = int(block.size());
  int64_t elements = 1;
  for (int64_t d : block)
    elements *= d;
  if (elements == 0)
    return;
  if (rank == 0) {
    if (toGlobal)
      std::memcpy(global, blockBytes, es);
    else
      std::memcpy(blockBytes, global, es);
    return;
  }
  // One contiguous run of the last dimension at a time.
  size_t run = size_t(block[size_t(rank - 1)]) * es;
  int64_t rows = elements / block[size_t(rank - 1)];
  std::vector<int64_t> index(size_t(rank), 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t g = 0;
    for (int d = 0; d < rank; ++d)
      g = g * gshape[size_t(d)] + start[size_t(d)] + index[size_t(d)];
    char *gp = global + size_t(g) * es;
    char *bp = blockBytes + size_t(r) * run;
    if (toGlobal)
      std::memcpy(gp, bp, run);
    else
      std::memcpy(bp, gp, run);
    for (int d = rank - 2; d >= 0; --d) {
      if (++index[size_t(d)] < block[size_t(d)])
        break;
      index[size_t(d)] = 0;
    }
  }
}
