//===- NonblockingTest.cpp - started collectives and their waits ----------===//
//
// cleave_comm_*_start and cleave_comm_wait: on seeded random inputs, each
// started collective gives what its blocking form gives, bit for bit, on
// every group of the test mesh; several collectives on different groups in
// flight at once and waited for in reverse order match their float64
// references; kernels called between a start and its wait (reading the
// started collective's input) run and the results of both are right; a
// start returns before the other ranks have called theirs (and, on the NCCL
// engine, so does a blocking collective); the byte counters count at the
// start. On emulated GPUs, a step of kernels and collectives of every kind
// makes the host wait once, at its marker, as on one GPU.
//
//===----------------------------------------------------------------------===//

#include "CommTestUtil.h"

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#ifdef CLEAVE_CUDA_EMULATION
#include "FakeCuda.h"
#endif

#include <chrono>
#include <map>
#include <thread>

using namespace cleave::rt::test;

namespace {

/// The references of the collective tests, for what these tests check.
std::vector<std::vector<double>> groupInputs(const TestGroup &g, uint64_t seed,
                                             int64_t n, int32_t dtype) {
  std::vector<std::vector<double>> inputs;
  for (int member : g.members)
    inputs.push_back(inputOf(seed, member, n, dtype));
  return inputs;
}

/// The group sum of element i, and its tolerance.
Expected sumRef(int32_t dtype, const std::vector<std::vector<double>> &inputs,
                size_t i) {
  double sum = 0, magnitude = 0;
  for (const auto &in : inputs) {
    sum += in[i];
    magnitude += std::fabs(in[i]);
  }
  return {sum, tolerance(dtype, magnitude)};
}

std::string context(const TestGroup &g, int32_t dtype, const char *what) {
  return g.name + " " + dtypeString(dtype) + " " + what + " on rank " +
         std::to_string(myRank());
}

/// Waits up to 60 s for the token that rank 0 sends every other rank once
/// its call has returned; false if none came.
bool receiveToken() {
  int token = 0, done = 0;
  MPI_Request request;
  MPI_Irecv(&token, 1, MPI_INT, 0, 9090, MPI_COMM_WORLD, &request);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done && std::chrono::steady_clock::now() < deadline) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!done) {
    MPI_Cancel(&request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  return done;
}

void sendTokens() {
  int token = 1;
  for (int r = 1; r < cleave_comm_world_size(); ++r)
    MPI_Send(&token, 1, MPI_INT, r, 9090, MPI_COMM_WORLD);
}

cleave_comm_counter counterOf(int32_t comm, int32_t kind) {
  cleave_comm_counter c{};
  cleave_comm_get_counter(comm, kind, &c);
  return c;
}

} // namespace

TEST_F(CommTest, StartedCollectivesEqualBlockingOnes) {
  uint64_t seed = 11000;
  for (const TestGroup &g : testGroups()) {
    int64_t n = int64_t(g.members.size());
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_I64}) {
      for (int32_t op : {CLEAVE_SUM, CLEAVE_MEAN, CLEAVE_MAX_REDUCE}) {
        if (op == CLEAVE_MEAN && !isFloat(dtype))
          continue;
        ++seed;
        std::string what =
            context(g, dtype, ("op " + std::to_string(op)).c_str());
        Arena arena;
        char *a = arena.data();
        cleave_tensor arIn = arena.add(dtype, {5, 7});
        cleave_tensor arBlocking = arena.add(dtype, {5, 7});
        cleave_tensor arStarted = arena.add(dtype, {5, 7});
        cleave_tensor rsIn = arena.add(dtype, {3 * n, 4});
        cleave_tensor rsBlocking = arena.add(dtype, {3, 4});
        cleave_tensor rsStarted = arena.add(dtype, {3, 4});
        arena.write(arIn, inputOf(seed, myRank(), 35, dtype));
        arena.write(rsIn, inputOf(seed + 500, myRank(), 12 * n, dtype));
        cleave_comm_all_reduce(g.comm, a, op, &arIn, &arBlocking);
        cleave_comm_reduce_scatter(g.comm, a, op, &rsIn, &rsBlocking);
        int64_t ar =
            cleave_comm_all_reduce_start(g.comm, a, op, &arIn, &arStarted);
        int64_t rs =
            cleave_comm_reduce_scatter_start(g.comm, a, op, &rsIn, &rsStarted);
        EXPECT_GT(ar, 0) << what;
        EXPECT_NE(ar, rs) << what;
        cleave_comm_wait(ar);
        cleave_comm_wait(rs);
        expectValues(arena.read(arStarted), exact(arena.read(arBlocking)),
                     what + " all_reduce");
        expectValues(arena.read(rsStarted), exact(arena.read(rsBlocking)),
                     what + " reduce_scatter");
      }
      // The data movement collectives, once per dtype.
      ++seed;
      std::string what = context(g, dtype, "");
      Arena arena;
      char *a = arena.data();
      cleave_tensor agIn = arena.add(dtype, {3, 2});
      cleave_tensor agBlocking = arena.add(dtype, {3 * n, 2});
      cleave_tensor agStarted = arena.add(dtype, {3 * n, 2});
      cleave_tensor aaIn = arena.add(dtype, {2 * n, 3});
      cleave_tensor aaBlocking = arena.add(dtype, {2 * n, 3});
      cleave_tensor aaStarted = arena.add(dtype, {2 * n, 3});
      arena.write(agIn, inputOf(seed, myRank(), 6, dtype));
      arena.write(aaIn, inputOf(seed + 500, myRank(), 6 * n, dtype));
      cleave_comm_all_gather(g.comm, a, &agIn, &agBlocking);
      cleave_comm_all_to_all(g.comm, a, &aaIn, &aaBlocking);
      int64_t ag = cleave_comm_all_gather_start(g.comm, a, &agIn, &agStarted);
      int64_t aa = cleave_comm_all_to_all_start(g.comm, a, &aaIn, &aaStarted);
      cleave_comm_wait(ag);
      cleave_comm_wait(aa);
      expectValues(arena.read(agStarted), exact(arena.read(agBlocking)),
                   what + " all_gather");
      expectValues(arena.read(aaStarted), exact(arena.read(aaBlocking)),
                   what + " all_to_all");
    }
  }
}

TEST_F(CommTest, SeveralInFlightWaitedForInReverseOrder) {
  // testGroups(): the world, axis 0, axis 1, both axes, both reversed.
  std::vector<TestGroup> groups = testGroups();
  const TestGroup &world = groups[0], &axis0 = groups[1], &axis1 = groups[2],
                  &reversed = groups[4];
  int64_t n0 = int64_t(axis0.members.size());
  int64_t n1 = int64_t(axis1.members.size());
  int64_t nr = int64_t(reversed.members.size());
  uint64_t seed = 12000;
  Arena arena;
  char *a = arena.data();
  // all_reduce in place on the world, f32.
  cleave_tensor ar = arena.add(CLEAVE_F32, {64, 16});
  arena.write(ar, inputOf(seed, myRank(), 1024, CLEAVE_F32));
  // all_gather on axis 0, bf16.
  cleave_tensor agIn = arena.add(CLEAVE_BF16, {4, 8});
  cleave_tensor agOut = arena.add(CLEAVE_BF16, {4 * n0, 8});
  arena.write(agIn, inputOf(seed + 1, myRank(), 32, CLEAVE_BF16));
  // reduce_scatter on axis 1, f32.
  cleave_tensor rsIn = arena.add(CLEAVE_F32, {6 * n1, 5});
  cleave_tensor rsOut = arena.add(CLEAVE_F32, {6, 5});
  arena.write(rsIn, inputOf(seed + 2, myRank(), 30 * n1, CLEAVE_F32));
  // all_to_all on both axes in reverse order, i32.
  cleave_tensor aaIn = arena.add(CLEAVE_I32, {3 * nr, 2});
  cleave_tensor aaOut = arena.add(CLEAVE_I32, {3 * nr, 2});
  arena.write(aaIn, inputOf(seed + 3, myRank(), 6 * nr, CLEAVE_I32));
  // A second all_reduce on axis 1, i64, reading what the all_to_all reads
  // (two collectives in flight may share an input).
  cleave_tensor ar2In = arena.add(CLEAVE_I64, {9});
  cleave_tensor ar2Out = arena.add(CLEAVE_I64, {9});
  arena.write(ar2In, inputOf(seed + 4, myRank(), 9, CLEAVE_I64));

  int64_t handles[] = {
      cleave_comm_all_reduce_start(world.comm, a, CLEAVE_SUM, &ar, &ar),
      cleave_comm_all_gather_start(axis0.comm, a, &agIn, &agOut),
      cleave_comm_reduce_scatter_start(axis1.comm, a, CLEAVE_SUM, &rsIn,
                                       &rsOut),
      cleave_comm_all_to_all_start(reversed.comm, a, &aaIn, &aaOut),
      cleave_comm_all_reduce_start(axis1.comm, a, CLEAVE_MAX_REDUCE, &ar2In,
                                   &ar2Out),
  };
  // A blocking collective between the starts and the waits.
  cleave_tensor bc = arena.add(CLEAVE_F32, {3});
  arena.write(bc, {double(myRank()), 1, 2});
  cleave_comm_broadcast(world.comm, a, &bc, 0);
  for (int i = 4; i >= 0; --i)
    cleave_comm_wait(handles[i]);

  auto worldInputs = groupInputs(world, seed, 1024, CLEAVE_F32);
  std::vector<Expected> want;
  for (size_t i = 0; i < 1024; ++i)
    want.push_back(sumRef(CLEAVE_F32, worldInputs, i));
  expectValues(arena.read(ar), want, context(world, CLEAVE_F32, "all_reduce"));

  std::vector<double> gathered;
  for (int member : axis0.members) {
    auto block = inputOf(seed + 1, member, 32, CLEAVE_BF16);
    gathered.insert(gathered.end(), block.begin(), block.end());
  }
  expectValues(arena.read(agOut), exact(gathered),
               context(axis0, CLEAVE_BF16, "all_gather"));

  auto rsInputs = groupInputs(axis1, seed + 2, 30 * n1, CLEAVE_F32);
  int64_t rank1 = groupRankOf(axis1);
  want.clear();
  for (int64_t i = 0; i < 30; ++i)
    want.push_back(sumRef(CLEAVE_F32, rsInputs, size_t(30 * rank1 + i)));
  expectValues(arena.read(rsOut), want,
               context(axis1, CLEAVE_F32, "reduce_scatter"));

  int64_t rankR = groupRankOf(reversed);
  std::vector<double> exchanged;
  for (int member : reversed.members) {
    auto input = inputOf(seed + 3, member, 6 * nr, CLEAVE_I32);
    exchanged.insert(exchanged.end(), input.begin() + 6 * rankR,
                     input.begin() + 6 * (rankR + 1));
  }
  expectValues(arena.read(aaOut), exact(exchanged),
               context(reversed, CLEAVE_I32, "all_to_all"));

  auto maxInputs = groupInputs(axis1, seed + 4, 9, CLEAVE_I64);
  std::vector<double> maxima(9, -1e9);
  for (const auto &in : maxInputs)
    for (size_t i = 0; i < 9; ++i)
      maxima[i] = std::max(maxima[i], in[i]);
  expectValues(arena.read(ar2Out), exact(maxima),
               context(axis1, CLEAVE_I64, "all_reduce max"));
  expectValues(arena.read(bc), exact({0, 1, 2}),
               context(world, CLEAVE_F32, "broadcast"));
}

TEST_F(CommTest, KernelsRunBetweenAStartAndItsWait) {
  std::vector<TestGroup> groups = testGroups();
  const TestGroup &world = groups[0];
  uint64_t seed = 13000;
  Arena arena;
  char *a = arena.data();
  cleave_tensor in = arena.add(CLEAVE_F32, {32, 32});
  cleave_tensor out = arena.add(CLEAVE_F32, {32, 32});
  cleave_tensor y = arena.add(CLEAVE_F32, {32, 32});
  cleave_tensor z = arena.add(CLEAVE_F32, {32, 32});
  cleave_tensor w = arena.add(CLEAVE_F32, {32, 32});
  auto mine = inputOf(seed, myRank(), 1024, CLEAVE_F32);
  auto other = inputOf(seed + 1, myRank(), 1024, CLEAVE_F32);
  arena.write(in, mine);
  arena.write(y, other);
  int64_t h =
      cleave_comm_all_reduce_start(world.comm, a, CLEAVE_SUM, &in, &out);
  // Kernels that read the started collective's input, and others.
  for (int i = 0; i < 4; ++i) {
    cleave_rt_binary(a, CLEAVE_MUL, &in, &y, &z);
    cleave_rt_binary(a, CLEAVE_ADD, &z, &y, &w);
  }
  cleave_comm_wait(h);
  // A kernel after the wait reads the result.
  cleave_rt_binary(a, CLEAVE_ADD, &out, &w, &z);

  auto inputs = groupInputs(world, seed, 1024, CLEAVE_F32);
  std::vector<double> got = arena.read(z);
  std::vector<Expected> want;
  for (size_t i = 0; i < 1024; ++i) {
    double product = double(float(mine[i]) * float(other[i]));
    double sum = double(float(product) + float(other[i]));
    Expected s = sumRef(CLEAVE_F32, inputs, i);
    want.push_back({s.value + sum, s.tol + 1e-6 * std::fabs(sum)});
  }
  expectValues(got, want, context(world, CLEAVE_F32, "all_reduce + kernels"));
}

TEST_F(CommTest, AStartReturnsBeforeTheOtherRanksCallIt) {
  // Rank 0 starts, and only then lets the others start: a start that
  // waited for them would never return (the watchdog would end the job).
  std::vector<TestGroup> groups = testGroups();
  const TestGroup &world = groups[0];
  Arena arena;
  cleave_tensor t = arena.add(CLEAVE_F32, {16});
  arena.write(t, std::vector<double>(16, double(myRank() + 1)));
  int64_t h = 0;
  if (myRank() == 0) {
    h = cleave_comm_all_reduce_start(world.comm, arena.data(), CLEAVE_SUM, &t,
                                     &t);
    sendTokens();
  } else {
    ASSERT_TRUE(receiveToken()) << "rank 0's start did not return";
    h = cleave_comm_all_reduce_start(world.comm, arena.data(), CLEAVE_SUM, &t,
                                     &t);
  }
  cleave_comm_wait(h);
  int size = cleave_comm_world_size();
  expectValues(arena.read(t),
               exact(std::vector<double>(16, size * (size + 1) / 2.0)),
               "started all_reduce on rank " + std::to_string(myRank()));
}

// A started receive takes the peer's message at its wait: rank 0 starts
// its receive from rank 1, sends to it and then waits; rank 1 receives
// and answers. 1 MiB, beyond MPI's eager messages.
TEST_F(CommTest, AStartedReceiveCompletesAtItsWait) {
  std::vector<TestGroup> groups = testGroups();
  const TestGroup &world = groups[0];
  if (myRank() > 1)
    return;
  const int64_t n = 1 << 18;
  Arena arena(int64_t(3) << 20);
  cleave_tensor mine = arena.add(CLEAVE_F32, {n});
  cleave_tensor theirs = arena.add(CLEAVE_F32, {n});
  arena.write(mine, inputOf(9100, myRank(), n, CLEAVE_F32));
  int other = 1 - myRank();
  if (myRank() == 0) {
    int64_t h = cleave_comm_recv_start(world.comm, arena.data(), &theirs, 1);
    cleave_comm_send(world.comm, arena.data(), &mine, 1);
    cleave_comm_wait(h);
  } else {
    cleave_comm_recv(world.comm, arena.data(), &theirs, 0);
    cleave_comm_send(world.comm, arena.data(), &mine, 0);
  }
  expectValues(arena.read(theirs), exact(inputOf(9100, other, n, CLEAVE_F32)),
               "started recv on rank " + std::to_string(myRank()));
}

// A send returns before its receiver reaches the receive (the MPI engine
// sends from a copy; the NCCL engine enqueues): rank 0 sends 1 MiB, beyond
// MPI's eager messages, and only then lets rank 1 receive it; rank 0
// overwrites its buffer at once, and rank 1 still gets what was sent.
TEST_F(CommTest, ASendReturnsBeforeItsReceive) {
  std::vector<TestGroup> groups = testGroups();
  const TestGroup &world = groups[0];
  const int64_t n = 1 << 18;
  Arena arena(int64_t(3) << 20);
  cleave_tensor t = arena.add(CLEAVE_F32, {n});
  if (myRank() == 0) {
    arena.write(t, inputOf(9300, 0, n, CLEAVE_F32));
    for (int r = 1; r < cleave_comm_world_size(); ++r)
      cleave_comm_send(world.comm, arena.data(), &t, r);
    sendTokens();
#ifndef CLEAVE_COMM_TEST_NCCL
    // The bytes were copied out: the arena is the program's again.
    arena.write(t, std::vector<double>(n, -1.0));
#endif
  } else {
    ASSERT_TRUE(receiveToken()) << "rank 0's send did not return";
    cleave_comm_recv(world.comm, arena.data(), &t, 0);
    expectValues(arena.read(t), exact(inputOf(9300, 0, n, CLEAVE_F32)),
                 "recv on rank " + std::to_string(myRank()));
  }
  cleave_comm_barrier(world.comm);
}

#ifndef CLEAVE_COMM_TEST_NCCL
// The MPI engine posts a started receive: around a ring every rank starts
// its receive, then sends (blocking, 1 MiB), then waits. Blocking
// receives first, or blocking sends first, would wait on each other.
TEST_F(CommTest, StartedReceivesLetARingOfSendsComplete) {
  std::vector<TestGroup> groups = testGroups();
  const TestGroup &world = groups[0];
  int n = cleave_comm_world_size();
  if (n == 1)
    return;
  const int64_t count = 1 << 18;
  int rank = myRank(), next = (rank + 1) % n, prev = (rank + n - 1) % n;
  Arena arena(int64_t(3) << 20);
  cleave_tensor out = arena.add(CLEAVE_F32, {count});
  cleave_tensor in = arena.add(CLEAVE_F32, {count});
  arena.write(out, inputOf(9200, rank, count, CLEAVE_F32));
  int64_t h = cleave_comm_recv_start(world.comm, arena.data(), &in, prev);
  cleave_comm_send(world.comm, arena.data(), &out, next);
  cleave_comm_wait(h);
  expectValues(arena.read(in), exact(inputOf(9200, prev, count, CLEAVE_F32)),
               "ring of started receives on rank " + std::to_string(rank));
}
#endif

#ifdef CLEAVE_COMM_TEST_NCCL
TEST_F(CommTest, ABlockingCollectiveReturnsBeforeTheOtherRanksCallIt) {
  // The NCCL engine: a blocking collective is enqueued, and the host goes
  // on (the MPI engine's completes before it returns, by definition).
  std::vector<TestGroup> groups = testGroups();
  const TestGroup &world = groups[0];
  Arena arena;
  cleave_tensor in = arena.add(CLEAVE_F32, {8});
  cleave_tensor out =
      arena.add(CLEAVE_F32, {8 * int64_t(world.members.size())});
  arena.write(in, std::vector<double>(8, double(myRank())));
  if (myRank() == 0) {
    cleave_comm_all_gather(world.comm, arena.data(), &in, &out);
    sendTokens();
  } else {
    ASSERT_TRUE(receiveToken()) << "rank 0's all_gather did not return";
    cleave_comm_all_gather(world.comm, arena.data(), &in, &out);
  }
  std::vector<double> want;
  for (int r : world.members)
    want.insert(want.end(), 8, double(r));
  expectValues(arena.read(out), exact(want),
               "all_gather on rank " + std::to_string(myRank()));
}
#endif

TEST_F(CommTest, StartedCollectivesCountAtTheStart) {
  std::vector<TestGroup> groups = testGroups();
  const TestGroup &g = groups[1]; // axis 0
  int64_t n = int64_t(g.members.size());
  cleave_comm_reset_counters();
  Arena arena;
  char *a = arena.data();
  cleave_tensor ar = arena.add(CLEAVE_F32, {4, 5});       // 80 bytes
  cleave_tensor agIn = arena.add(CLEAVE_BF16, {3});       // 6 bytes
  cleave_tensor agOut = arena.add(CLEAVE_BF16, {3 * n});  // 6n bytes
  cleave_tensor rsIn = arena.add(CLEAVE_I64, {2 * n, 2}); // 32n bytes
  cleave_tensor rsOut = arena.add(CLEAVE_I64, {2, 2});
  cleave_tensor aaIn = arena.add(CLEAVE_I32, {n, 4}); // 16n bytes
  cleave_tensor aaOut = arena.add(CLEAVE_I32, {n, 4});
  arena.write(ar, std::vector<double>(20, 1.0));
  arena.write(agIn, {1, 2, 3});
  arena.write(rsIn, std::vector<double>(size_t(4 * n), 3.0));
  arena.write(aaIn, std::vector<double>(size_t(4 * n), 5.0));
  int64_t handles[] = {
      cleave_comm_all_reduce_start(g.comm, a, CLEAVE_SUM, &ar, &ar),
      cleave_comm_all_gather_start(g.comm, a, &agIn, &agOut),
      cleave_comm_reduce_scatter_start(g.comm, a, CLEAVE_SUM, &rsIn, &rsOut),
      cleave_comm_all_to_all_start(g.comm, a, &aaIn, &aaOut),
  };
  auto check = [&](const std::string &when) {
    std::string what =
        g.name + " " + when + " on rank " + std::to_string(myRank());
    struct Want {
      int32_t kind;
      int64_t payload, wire;
    } wants[] = {
        {CLEAVE_COMM_ALL_REDUCE, 80, 2 * (n - 1) * 80 / n},
        {CLEAVE_COMM_ALL_GATHER, 6 * n, 6 * (n - 1)},
        {CLEAVE_COMM_REDUCE_SCATTER, 32 * n, 32 * (n - 1)},
        {CLEAVE_COMM_ALL_TO_ALL, 16 * n, 16 * (n - 1)},
    };
    for (const Want &w : wants) {
      cleave_comm_counter c = counterOf(g.comm, w.kind);
      EXPECT_EQ(c.calls, 1) << what << " kind " << w.kind;
      EXPECT_EQ(c.payload_bytes, w.payload) << what << " kind " << w.kind;
      EXPECT_EQ(c.wire_bytes, w.wire) << what << " kind " << w.kind;
    }
  };
  check("before the waits");
  for (int64_t h : handles)
    cleave_comm_wait(h);
  check("after the waits");
}

#ifdef CLEAVE_CUDA_EMULATION
TEST_F(CommTest, AStepWithCollectivesWaitsOnceOnTheHost) {
  // As the trainer's step: kernels, collectives of every kind (blocking,
  // and a started one waited for later), the loss copied to page-locked
  // memory, and the wait for the step's marker, its only host wait.
  std::vector<TestGroup> groups = testGroups();
  const TestGroup &world = groups[0], &axis0 = groups[1];
  int64_t n = int64_t(world.members.size());
  int rank = groupRankOf(world);
  Arena arena;
  char *a = arena.data();
  cleave_tensor x = arena.add(CLEAVE_F32, {8, 8});
  cleave_tensor y = arena.add(CLEAVE_F32, {8, 8});
  cleave_tensor grad = arena.add(CLEAVE_F32, {8 * n, 8});
  cleave_tensor shard = arena.add(CLEAVE_F32, {8, 8});
  cleave_tensor gathered = arena.add(CLEAVE_F32, {8 * n, 8});
  cleave_tensor exchanged = arena.add(CLEAVE_F32, {8 * n, 8});
  cleave_tensor loss = arena.add(CLEAVE_F32, {1});
  cleave_tensor shifted = arena.add(CLEAVE_F32, {1});
  arena.write(x, inputOf(14000, myRank(), 64, CLEAVE_F32));
  arena.write(y, inputOf(14001, myRank(), 64, CLEAVE_F32));
  arena.write(grad, std::vector<double>(size_t(64 * n), 1.0));
  arena.write(loss, {double(myRank())});
  float *readback = static_cast<float *>(cleave_rt_host_alloc(sizeof(float)));
  // The marker pool's first marker allocates.
  cleave_rt_marker_free(cleave_rt_marker_record());
  std::vector<int64_t> ring;
  for (int64_t i = 0; i < n; ++i) {
    ring.push_back(i);
    ring.push_back((i + 1) % n);
  }

  std::map<std::string, long long> before = fake::hostWaits();
  cleave_rt_binary(a, CLEAVE_MUL, &x, &y, &shard);
  int64_t h = cleave_comm_all_reduce_start(world.comm, a, CLEAVE_SUM, &x, &x);
  cleave_comm_reduce_scatter(world.comm, a, CLEAVE_SUM, &grad, &shard);
  cleave_comm_all_gather(world.comm, a, &shard, &gathered);
  cleave_comm_all_to_all(world.comm, a, &gathered, &exchanged);
  cleave_comm_all_reduce(axis0.comm, a, CLEAVE_MEAN, &loss, &loss);
  cleave_comm_broadcast(world.comm, a, &y, 0);
  cleave_comm_collective_permute(world.comm, a, &loss, &shifted, ring.data(),
                                 n);
  cleave_comm_wait(h);
  cleave_rt_binary(a, CLEAVE_ADD, &x, &y, &y);
  cleave_rt_arena_read_async(a, shifted.offset, readback, sizeof(float));
  int64_t marker = cleave_rt_marker_record();
  cleave_rt_marker_wait(marker);
  std::map<std::string, long long> after = fake::hostWaits();
  cleave_rt_marker_free(marker);

  std::map<std::string, long long> step;
  for (const auto &[call, count] : after)
    if (count != before[call])
      step[call] = count - before[call];
  std::map<std::string, long long> expect{{"cudaEventSynchronize", 1}};
  EXPECT_EQ(step, expect) << "the host waits of a step with collectives";

  // The step's results: the reduce_scatter's shard is n everywhere, so is
  // what went through the all_gather and all_to_all; the permuted loss is
  // the previous group rank's mean over axis 0.
  expectValues(arena.read(exchanged),
               exact(std::vector<double>(size_t(64 * n), double(n))),
               "all_to_all after the step on rank " + std::to_string(rank));
  int prev = int((rank + n - 1) % n);
  double meanOfPrev = 0;
  // The previous world rank's axis-0 group: world ranks with its column.
  int64_t columns = testMesh(int(n))[1];
  for (int64_t r = prev % columns; r < n; r += columns)
    meanOfPrev += double(r);
  meanOfPrev /= double(n / columns);
  EXPECT_FLOAT_EQ(*readback, float(meanOfPrev)) << "rank " << rank;
  cleave_rt_host_free(readback);
}
#endif
