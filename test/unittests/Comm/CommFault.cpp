//===- CommFault.cpp - error paths of the engines, run under mpirun -------===//
//
// One failure per mode (argv[1]), each of which must end the whole job with
// a non-zero exit and a clear message, never hang it; CheckJob.cmake runs it
// under mpirun and checks the message, the exit status and the time taken.
//   world-size  the job has one rank fewer than the program expects
//   dtype       all_reduce with an f32 in and an f16 out
//   shape       all_gather whose out is not n times in along dim 0
//   mesh        a mesh whose size is not the job's
//   skip        the last rank skips an all_reduce (the watchdog's case);
//               the others then wait for the device, as the trainer does
//               at its marker (on the NCCL engine the all_reduce returns
//               before it completes, and the watchdog fires in that wait)
//   fail        rank 1 fails (cleave_rt_fail) while the others wait in a
//               barrier with the default 600 s timeout
//   init        nothing after cleave_comm_init, for the failures of the
//               start itself (the NCCL engine's one GPU per rank)
//   permute-target  collective_permute where group rank 1 is the target of
//               two pairs
//   permute-source  ... where group rank 0 is the source of two pairs
//   permute-rank    ... with a pair that names a rank outside the group
//   permute-shape   ... whose out differs from in in shape
//   permute-skip    the last rank skips a ring permute (the watchdog's
//               case), the others wait for the device after theirs
//   start-skip  the last rank skips a started all_reduce; the others start
//               it and an all_gather, wait for both in reverse order, then
//               for the device
//   never-waited  every rank starts an all_reduce and never waits for it
//   wait-twice  a handle waited for twice
//   in-flight   an all_gather whose out covers a started all_reduce's in
//   sendrecv-self   a send to this rank without a receive from it
//   sendrecv-peer   a send_peer outside the group
//   sendrecv-size   rank 1 receives more bytes than rank 0 sends
//
// It links either engine: CleaveCommFault the MPI engine with the CPU
// backend, CleaveCommFaultNcclEmulated the NCCL engine on emulated GPUs.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/cleave_comm.h"
#include "cleave/Runtime/cleave_rt.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace {

/// The host waits for the device's work so far, as the trainer does once a
/// step at its marker.
void waitForDevice() {
  int64_t marker = cleave_rt_marker_record();
  cleave_rt_marker_wait(marker);
  cleave_rt_marker_free(marker);
}

} // namespace

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
    if (rank != size - 1) {
      cleave_comm_all_reduce(CLEAVE_COMM_WORLD, arena, CLEAVE_SUM, &a, &b);
      waitForDevice();
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(120));
    }
  } else if (!std::strcmp(mode, "start-skip")) {
    cleave_tensor c{2048, CLEAVE_F32, 1, {2}};
    cleave_tensor d{3072, CLEAVE_F32, 1, {2 * int64_t(size)}};
    if (rank != size - 1) {
      int64_t reduce = cleave_comm_all_reduce_start(CLEAVE_COMM_WORLD, arena,
                                                    CLEAVE_SUM, &a, &b);
      int64_t gather =
          cleave_comm_all_gather_start(CLEAVE_COMM_WORLD, arena, &c, &d);
      cleave_comm_wait(gather);
      cleave_comm_wait(reduce);
      waitForDevice();
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(120));
    }
  } else if (!std::strcmp(mode, "never-waited")) {
    cleave_comm_all_reduce_start(CLEAVE_COMM_WORLD, arena, CLEAVE_SUM, &a, &b);
    waitForDevice();
    cleave_comm_finalize();
  } else if (!std::strcmp(mode, "wait-twice")) {
    int64_t handle = cleave_comm_all_reduce_start(CLEAVE_COMM_WORLD, arena,
                                                  CLEAVE_SUM, &a, &b);
    cleave_comm_wait(handle);
    cleave_comm_wait(handle);
  } else if (!std::strcmp(mode, "in-flight")) {
    // out d covers a, which the started all_reduce reads.
    cleave_tensor c{2048, CLEAVE_F32, 2, {2, 2}};
    cleave_tensor d{0, CLEAVE_F32, 2, {2 * int64_t(size), 2}};
    int64_t handle = cleave_comm_all_reduce_start(CLEAVE_COMM_WORLD, arena,
                                                  CLEAVE_SUM, &a, &b);
    cleave_comm_all_gather(CLEAVE_COMM_WORLD, arena, &c, &d);
    cleave_comm_wait(handle);
  } else if (!std::strcmp(mode, "fail")) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      cleave_rt_fail("rank %d failed on purpose", rank);
    }
    cleave_comm_barrier(CLEAVE_COMM_WORLD);
  } else if (!std::strncmp(mode, "permute-", 8)) {
    std::vector<int64_t> pairs;
    for (int i = 0; i < size; ++i) {
      pairs.push_back(i);
      pairs.push_back((i + 1) % size);
    }
    if (!std::strcmp(mode, "permute-target"))
      pairs = {0, 1, 1, 1};
    else if (!std::strcmp(mode, "permute-source"))
      pairs = {0, 1, 0, 0};
    else if (!std::strcmp(mode, "permute-rank"))
      pairs = {0, size};
    else if (!std::strcmp(mode, "permute-shape"))
      b.shape[0] = 4, b.shape[1] = 1;
    bool skip = !std::strcmp(mode, "permute-skip") && rank == size - 1;
    if (!skip) {
      cleave_comm_collective_permute(CLEAVE_COMM_WORLD, arena, &a, &b,
                                     pairs.data(),
                                     int64_t(pairs.size() / 2));
      waitForDevice();
    }
    if (!std::strcmp(mode, "permute-skip"))
      std::this_thread::sleep_for(std::chrono::seconds(120));
  } else if (!std::strcmp(mode, "sendrecv-self")) {
    cleave_comm_sendrecv(CLEAVE_COMM_WORLD, arena, &a, rank, nullptr, -1);
  } else if (!std::strcmp(mode, "sendrecv-peer")) {
    cleave_comm_sendrecv(CLEAVE_COMM_WORLD, arena, &a, size, &b, rank);
  } else if (!std::strcmp(mode, "sendrecv-size")) {
    b.shape[0] = 4, b.shape[1] = 4;
    if (rank == 0)
      cleave_comm_sendrecv(CLEAVE_COMM_WORLD, arena, &a, 1, nullptr, -1);
    else if (rank == 1)
      cleave_comm_sendrecv(CLEAVE_COMM_WORLD, arena, nullptr, -1, &b, 0);
    cleave_comm_barrier(CLEAVE_COMM_WORLD);
  } else if (std::strcmp(mode, "init") != 0) {
    std::fprintf(stderr, "unknown mode '%s'\n", mode);
  }
  // Reached only when the mode failed to fail.
  waitForDevice();
  std::printf("rank %d: mode %s finished without an error\n", rank, mode);
  cleave_rt_arena_free(arena);
  cleave_comm_finalize();
  return 0;
}
