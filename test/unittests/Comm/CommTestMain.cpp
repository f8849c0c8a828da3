//===- CommTestMain.cpp - the main of the communication engine tests ------===//
//
// Run under mpirun: every rank starts the engine, runs every test in the
// same order, and the job's exit status is non-zero when any test failed on
// any rank. Rank 0 prints GoogleTest's usual output; the other ranks print
// only their failures, prefixed with their rank. Without a usable engine (the
// NCCL build on a machine without a CUDA device) every test skips with the
// reason and the engine is never started.
//
//===----------------------------------------------------------------------===//

#include "CommTestUtil.h"

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#ifdef CLEAVE_COMM_TEST_NCCL
#include <cuda_runtime_api.h>
#endif

#include <cstdio>

using namespace cleave::rt::test;

std::string &cleave::rt::test::skipReason() {
  static std::string reason;
  return reason;
}

std::vector<TestGroup> cleave::rt::test::testGroups() {
  int size = cleave_comm_world_size(), rank = cleave_comm_world_rank();
  Shape mesh = testMesh(size);
  int64_t a = mesh[0], b = mesh[1];
  int64_t c0 = rank / b, c1 = rank % b;
  auto group = [&](std::vector<int64_t> axes) {
    return cleave_comm_group(2, mesh.data(), int32_t(axes.size()),
                             axes.data());
  };
  std::vector<TestGroup> groups;
  TestGroup world{"world", CLEAVE_COMM_WORLD, {}};
  for (int r = 0; r < size; ++r)
    world.members.push_back(r);
  groups.push_back(world);
  TestGroup axis0{"axes {0}", group({0}), {}};
  for (int64_t i = 0; i < a; ++i)
    axis0.members.push_back(int(i * b + c1));
  groups.push_back(axis0);
  TestGroup axis1{"axes {1}", group({1}), {}};
  for (int64_t j = 0; j < b; ++j)
    axis1.members.push_back(int(c0 * b + j));
  groups.push_back(axis1);
  TestGroup both{"axes {0, 1}", group({0, 1}), world.members};
  groups.push_back(both);
  // Axis 1 major: group rank k has c1 = k / a, c0 = k % a.
  TestGroup reversed{"axes {1, 0}", group({1, 0}), {}};
  for (int64_t k = 0; k < a * b; ++k)
    reversed.members.push_back(int((k % a) * b + k / a));
  groups.push_back(reversed);
  return groups;
}

namespace {

/// On ranks other than 0: failed assertions only, with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
public:
  explicit FailurePrinter(int rank) : rank(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &result) override {
    if (!result.failed())
      return;
    std::printf("[rank %d] %s:%d: failure\n%s\n", rank,
                result.file_name() ? result.file_name() : "?",
                result.line_number(), result.summary());
    std::fflush(stdout);
  }

private:
  int rank;
};

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
#ifdef CLEAVE_COMM_TEST_NCCL
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess)
    skipReason() = std::string("no CUDA device: ") + cudaGetErrorName(status) +
                   ": " + cudaGetErrorString(status);
  else if (devices == 0)
    skipReason() = "no CUDA device: cudaGetDeviceCount found 0 devices";
#endif
  if (!skipReason().empty())
    return RUN_ALL_TESTS();

  cleave_comm_init(&argc, &argv);
  int rank = cleave_comm_world_rank();
  if (rank != 0) {
    ::testing::TestEventListeners &listeners =
        ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0;
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("%s on all %d ranks (%s engine)\n",
                anyFailed ? "FAILED" : "passed", cleave_comm_world_size(),
                cleave_comm_engine_name());
  cleave_comm_finalize();
  return anyFailed;
}
