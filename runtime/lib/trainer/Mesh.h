//===- Mesh.h - this process's place in a partitioned program ---*- C++ -*-===//
//
// A partitioned program (cleave_program_info.mesh_rank > 0) runs as one
// process per device of its mesh, launched by mpirun or srun. At start-up
// the main starts the communication engine the program was linked with
// (through cleave_program_info.comm), checks that the job has as many ranks
// as the mesh has devices, creates the program's communicator groups in
// metadata order, and fills the context cleave_program_run takes. Tensors
// with a sharding hold this device's block of a global value: the helpers
// here cut a block out of global bytes and put blocks back together.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINER_MESH_H
#define CLEAVE_RUNTIME_TRAINER_MESH_H

#include "cleave/Runtime/cleave_comm.h"
#include "cleave/Runtime/cleave_rt.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cleave::rt::trainer {

/// This process's device.
struct Device {
  /// True for a partitioned program (the engine is running).
  bool distributed = false;
  int32_t rank = 0, size = 1;
  /// The mesh (empty for one device) and this device's coordinates.
  std::vector<int64_t> shape, coords;
  std::vector<std::string> axisNames;
  /// Per group of the metadata: its communicator and this device's index.
  std::vector<int32_t> comms;
  std::vector<int64_t> groupRanks;
  /// A pipelined program: the mesh axis of the stages and this device's
  /// stage (-1 and 0 otherwise).
  int64_t stageAxis = -1, stage = 0;
  cleave_program_context context{};
  /// The engine (null for one device).
  const cleave_comm_api *comm = nullptr;
};

/// Whether `group` names between 1 and `meshRank` distinct axes of a mesh
/// of `meshRank` axes.
bool namesDistinctAxes(const cleave_group &group, int32_t meshRank);
/// Checks the mesh, group and sharding metadata of the program (ABI 4).
void checkMeshMetadata();

/// Starts the engine of a partitioned program, checks the job's size
/// against the mesh (every rank says what it expected and got, and the
/// job exits 1) and creates the groups; does nothing for one device.
void startDevice(int *argc, char ***argv);
/// Ends the engine (after the last collective), if it was started.
void stopDevice();
/// Runs `work`, which every rank of a partitioned program runs alike (the
/// checks of a checkpoint to resume). When it fails on any rank, every
/// rank says so (its own error, or that another rank failed) before the
/// job ends with status 1: a problem every rank sees is reported by each,
/// not only by the first to abort the others.
void onEveryRank(const std::function<void()> &work);
const Device &device();
/// The context argument of cleave_program_run.
const cleave_program_context *programContext();
/// The context of another program of this binary on this device (the
/// evaluation program), whose communicator groups may differ from the
/// training program's: each group takes the training program's
/// communicator of the same axes, or a new one. Every rank constructs it at
/// the same point, as creating a communicator is collective.
class OtherProgramContext {
public:
  explicit OtherProgramContext(const cleave_program_info &other);
  const cleave_program_context *get() const { return &context; }

private:
  std::vector<int32_t> comms;
  std::vector<int64_t> groupRanks;
  cleave_program_context context{};
};
/// This process's rank as its launcher says (Open MPI's mpirun, PMIx,
/// Slurm's srun, MPICH), before any engine starts; 0 without a launcher.
int launcherRank();
/// Rank 0 of the job (always true on one device): it prints and logs.
inline bool isRankZero() { return device().rank == 0; }

/// The global shape of a named tensor (its descriptor's shape when it has
/// no sharding).
std::vector<int64_t> globalShape(const cleave_named_tensor &t);
/// The global descriptor of `t`: its shape global, its offset kept.
cleave_tensor globalTensor(const cleave_named_tensor &t);
/// The element offset of this block's first element along each dimension
/// of the global tensor, for the device at `coords`.
std::vector<int64_t> blockStart(const cleave_named_tensor &t,
                                const std::vector<int64_t> &coords);
/// Copies the block of the device at `coords` out of `global` (row-major
/// bytes of the global tensor) into `local` (the descriptor's bytes).
void copyBlock(const cleave_named_tensor &t, const std::vector<int64_t> &coords,
               const char *global, char *local);
/// Moves a block of shape `block` at element offsets `start` of a
/// row-major tensor of shape `global` (elements of `elementSize` bytes)
/// between the global bytes and the block's own row-major bytes.
void copyRegion(char *global, const std::vector<int64_t> &globalShape,
                const std::vector<int64_t> &start,
                const std::vector<int64_t> &block, size_t elementSize,
                char *blockBytes, bool toGlobal);
/// True when the device at `coords` writes `t`'s block to a checkpoint:
/// its coordinate is 0 along every mesh axis that does not split `t` (but
/// the pipeline's, whose stages hold different parameters), so each block
/// is written once.
bool ownsBlock(const cleave_named_tensor &t,
               const std::vector<int64_t> &coords);

} // namespace cleave::rt::trainer

#endif // CLEAVE_RUNTIME_TRAINER_MESH_H
