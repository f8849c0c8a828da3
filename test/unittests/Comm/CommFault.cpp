//===- CommFault.cpp - error paths of the engines, run under mpirun -------===//
//
// One failure per mode (argv[1]), each of which must end the whole job with
// a non-zero exit and a clear message, never hang it; CheckJob.cmake runs it
// under mpirun and checks the message, the exit status and the time taken.
//   world-size  the job has one rank fewer than the program expects
//   dtype       all_reduce with an f32 in and an f16 out
//   shape       all_gather whose out is not n times in along dim 0
//   mesh        a mesh whose size is not the job's
//   skip        the last rank skips an all_reduce (the watchdog's case)
//   fail        rank 1 fails (cleave_rt_fail) while the others wait in a
//               barrier with the default 600 s timeout
//   init        nothing after cleave_comm_init, for the failures of the
//               start itself (the NCCL engine's one GPU per rank)
//
// It links either engine: CleaveCommFault the MPI engine with the CPU
// backend, CleaveCommFaultNcclEmulated the NCCL engine on emulated GPUs.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/cleave_comm.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODE\n", argv[0]);
    return 2;
  }
  const char *mode = argv[1];
  cleave_comm_init(&argc, &argv);
  int rank = cleave_comm_world_rank(), size = cleave_comm_world_size();
  char *arena = cleave_rt_arena_alloc(4096);
  cleave_tensor a{0, CLEAVE_F32, 2, {2, 2}};
  cleave_tensor b{1024, CLEAVE_F32, 2, {2, 2}};

  if (!std::strcmp(mode, "world-size")) {
    cleave_comm_expect_world_size(size + 1);
  } else if (!std::strcmp(mode, "dtype")) {
    b.dtype = CLEAVE_F16;
    cleave_comm_all_reduce(CLEAVE_COMM_WORLD, arena, CLEAVE_SUM, &a, &b);
  } else if (!std::strcmp(mode, "shape")) {
    b.shape[0] = 2 * size + 1;
    cleave_comm_all_gather(CLEAVE_COMM_WORLD, arena, &a, &b);
  } else if (!std::strcmp(mode, "mesh")) {
    int64_t mesh[] = {size + 1}, axes[] = {0};
    cleave_comm_group(1, mesh, 1, axes);
  } else if (!std::strcmp(mode, "skip")) {
    if (rank != size - 1)
      cleave_comm_all_reduce(CLEAVE_COMM_WORLD, arena, CLEAVE_SUM, &a, &b);
    else
      std::this_thread::sleep_for(std::chrono::seconds(120));
  } else if (!std::strcmp(mode, "fail")) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      cleave_rt_fail("rank %d failed on purpose", rank);
    }
    cleave_comm_barrier(CLEAVE_COMM_WORLD);
  } else if (std::strcmp(mode, "init") != 0) {
    std::fprintf(stderr, "unknown mode '%s'\n", mode);
  }
  // Reached only when the mode failed to fail.
  std::printf("rank %d: mode %s finished without an error\n", rank, mode);
  cleave_rt_arena_free(arena);
  cleave_comm_finalize();
  return 0;
}
