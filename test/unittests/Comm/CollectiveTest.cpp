//===- CollectiveTest.cpp - every collective against float64 references ---===//
//
// Each collective on every group of the test mesh (the world, each axis, both
// axes in either order), on seeded random inputs that every rank regenerates
// for the whole group. Sums and means of f32 must be within 1e-6 of the
// float64 reference relative to the sum of the terms' magnitudes, f16 and
// bf16 within 1e-2; max, min, integer results and data movement are exact.
//
//===----------------------------------------------------------------------===//

#include "CommTestUtil.h"

#include <algorithm>

using namespace cleave::rt::test;

namespace {

const int32_t kReducibleTypes[] = {CLEAVE_F32, CLEAVE_F16, CLEAVE_BF16,
                                   CLEAVE_I64, CLEAVE_I32};
const int32_t kOps[] = {CLEAVE_SUM, CLEAVE_MEAN, CLEAVE_MAX_REDUCE,
                        CLEAVE_MIN_REDUCE};

const char *opName(int32_t op) {
  switch (op) {
  case CLEAVE_SUM:
    return "sum";
  case CLEAVE_MEAN:
    return "mean";
  case CLEAVE_MAX_REDUCE:
    return "max";
  default:
    return "min";
  }
}

/// The reference of `op` over every member's element i, and the tolerance.
Expected reduceRef(int32_t op, int32_t dtype,
                   const std::vector<std::vector<double>> &inputs, size_t i) {
  double sum = 0, magnitude = 0, best = inputs[0][i];
  for (const auto &in : inputs) {
    sum += in[i];
    magnitude += std::fabs(in[i]);
    best = op == CLEAVE_MAX_REDUCE ? std::max(best, in[i])
                                   : std::min(best, in[i]);
  }
  double n = double(inputs.size());
  switch (op) {
  case CLEAVE_SUM:
    return {sum, tolerance(dtype, magnitude)};
  case CLEAVE_MEAN:
    return {sum / n, tolerance(dtype, magnitude / n)};
  default:
    return {best, 0};
  }
}

std::vector<std::vector<double>> groupInputs(const TestGroup &g, uint64_t seed,
                                             int64_t n, int32_t dtype) {
  std::vector<std::vector<double>> inputs;
  for (int member : g.members)
    inputs.push_back(inputOf(seed, member, n, dtype));
  return inputs;
}

std::string context(const TestGroup &g, int32_t dtype, const char *op = "") {
  return g.name + " " + dtypeString(dtype) + (*op ? " " : "") + op +
         " on rank " + std::to_string(myRank());
}

} // namespace

TEST_F(CommTest, AllReduce) {
  uint64_t seed = 1000;
  for (const TestGroup &g : testGroups()) {
    for (int32_t dtype : kReducibleTypes) {
      for (int32_t op : kOps) {
        if (op == CLEAVE_MEAN && !isFloat(dtype))
          continue;
        ++seed;
        Arena arena;
        Shape shape{3, 5};
        cleave_tensor in = arena.add(dtype, shape);
        cleave_tensor out = arena.add(dtype, shape);
        arena.write(in, inputOf(seed, myRank(), 15, dtype));
        cleave_comm_all_reduce(g.comm, arena.data(), op, &in, &out);
        auto inputs = groupInputs(g, seed, 15, dtype);
        std::vector<Expected> want;
        for (size_t i = 0; i < 15; ++i)
          want.push_back(reduceRef(op, dtype, inputs, i));
        expectValues(arena.read(out), want, context(g, dtype, opName(op)));
      }
    }
  }
}

TEST_F(CommTest, AllReduceInPlace) {
  uint64_t seed = 2000;
  for (const TestGroup &g : testGroups()) {
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_I64}) {
      ++seed;
      Arena arena;
      cleave_tensor t = arena.add(dtype, {7, 9});
      arena.write(t, inputOf(seed, myRank(), 63, dtype));
      cleave_comm_all_reduce(g.comm, arena.data(), CLEAVE_SUM, &t, &t);
      auto inputs = groupInputs(g, seed, 63, dtype);
      std::vector<Expected> want;
      for (size_t i = 0; i < 63; ++i)
        want.push_back(reduceRef(CLEAVE_SUM, dtype, inputs, i));
      expectValues(arena.read(t), want, context(g, dtype, "in place"));
    }
  }
}

TEST_F(CommTest, AllGather) {
  uint64_t seed = 3000;
  for (const TestGroup &g : testGroups()) {
    int64_t n = int64_t(g.members.size());
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_I64, CLEAVE_I1}) {
      ++seed;
      Arena arena;
      cleave_tensor in = arena.add(dtype, {2, 3});
      cleave_tensor out = arena.add(dtype, {2 * n, 3});
      arena.write(in, inputOf(seed, myRank(), 6, dtype));
      cleave_comm_all_gather(g.comm, arena.data(), &in, &out);
      // Block i (rows 2i, 2i+1) is group rank i's input.
      std::vector<double> want;
      for (int member : g.members) {
        auto block = inputOf(seed, member, 6, dtype);
        want.insert(want.end(), block.begin(), block.end());
      }
      expectValues(arena.read(out), exact(want), context(g, dtype));
    }
  }
}

TEST_F(CommTest, AllGatherOfWorldRanksNumbersTheGroup) {
  for (const TestGroup &g : testGroups()) {
    int64_t n = int64_t(g.members.size());
    Arena arena;
    cleave_tensor in = arena.add(CLEAVE_I32, {1});
    cleave_tensor out = arena.add(CLEAVE_I32, {n});
    arena.write(in, {double(myRank())});
    cleave_comm_all_gather(g.comm, arena.data(), &in, &out);
    std::vector<double> want(g.members.begin(), g.members.end());
    expectValues(arena.read(out), exact(want), context(g, CLEAVE_I32));
    EXPECT_EQ(cleave_comm_size(g.comm), int32_t(n)) << g.name;
    EXPECT_EQ(cleave_comm_rank(g.comm), groupRankOf(g)) << g.name;
  }
}

TEST_F(CommTest, ReduceScatter) {
  uint64_t seed = 4000;
  for (const TestGroup &g : testGroups()) {
    int64_t n = int64_t(g.members.size());
    int64_t rank = groupRankOf(g);
    for (int32_t dtype : kReducibleTypes) {
      for (int32_t op : kOps) {
        if (op == CLEAVE_MEAN && !isFloat(dtype))
          continue;
        ++seed;
        Arena arena;
        cleave_tensor in = arena.add(dtype, {2 * n, 3});
        cleave_tensor out = arena.add(dtype, {2, 3});
        arena.write(in, inputOf(seed, myRank(), 6 * n, dtype));
        cleave_comm_reduce_scatter(g.comm, arena.data(), op, &in, &out);
        // Rows 2 rank, 2 rank + 1 of the reduction.
        auto inputs = groupInputs(g, seed, 6 * n, dtype);
        std::vector<Expected> want;
        for (int64_t i = 0; i < 6; ++i)
          want.push_back(reduceRef(op, dtype, inputs, size_t(6 * rank + i)));
        expectValues(arena.read(out), want, context(g, dtype, opName(op)));
      }
    }
  }
}

TEST_F(CommTest, AllToAll) {
  uint64_t seed = 5000;
  for (const TestGroup &g : testGroups()) {
    int64_t n = int64_t(g.members.size());
    int64_t rank = groupRankOf(g);
    for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_I32, CLEAVE_I64}) {
      ++seed;
      Arena arena;
      cleave_tensor in = arena.add(dtype, {2 * n, 3});
      cleave_tensor out = arena.add(dtype, {2 * n, 3});
      arena.write(in, inputOf(seed, myRank(), 6 * n, dtype));
      cleave_comm_all_to_all(g.comm, arena.data(), &in, &out);
      // Block i of out is block `rank` of group rank i's input.
      std::vector<double> want;
      for (int member : g.members) {
        auto input = inputOf(seed, member, 6 * n, dtype);
        want.insert(want.end(), input.begin() + 6 * rank,
                    input.begin() + 6 * (rank + 1));
      }
      expectValues(arena.read(out), exact(want), context(g, dtype));
    }
  }
}

TEST_F(CommTest, Broadcast) {
  uint64_t seed = 6000;
  for (const TestGroup &g : testGroups()) {
    int n = int(g.members.size());
    for (int root = 0; root < n; ++root) {
      for (int32_t dtype : {CLEAVE_F32, CLEAVE_F16, CLEAVE_I64}) {
        ++seed;
        Arena arena;
        cleave_tensor t = arena.add(dtype, {4, 2, 3});
        arena.write(t, inputOf(seed, myRank(), 24, dtype));
        cleave_comm_broadcast(g.comm, arena.data(), &t, root);
        expectValues(arena.read(t),
                     exact(inputOf(seed, g.members[root], 24, dtype)),
                     context(g, dtype, ("root " + std::to_string(root)).c_str()));
      }
    }
  }
}

TEST_F(CommTest, SendRecvAroundTheRing) {
  uint64_t seed = 7000;
  for (const TestGroup &g : testGroups()) {
    int n = int(g.members.size());
    if (n == 1)
      continue;
    ++seed;
    int rank = groupRankOf(g);
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    Arena arena;
    cleave_tensor out = arena.add(CLEAVE_BF16, {5, 4});
    cleave_tensor in = arena.add(CLEAVE_BF16, {5, 4});
    arena.write(out, inputOf(seed, myRank(), 20, CLEAVE_BF16));
    // Even group ranks send first, odd ones receive first.
    if (rank % 2 == 0) {
      cleave_comm_send(g.comm, arena.data(), &out, next);
      cleave_comm_recv(g.comm, arena.data(), &in, prev);
    } else {
      cleave_comm_recv(g.comm, arena.data(), &in, prev);
      cleave_comm_send(g.comm, arena.data(), &out, next);
    }
    expectValues(arena.read(in),
                 exact(inputOf(seed, g.members[prev], 20, CLEAVE_BF16)),
                 context(g, CLEAVE_BF16, "recv"));
  }
}

TEST_F(CommTest, BarrierOnEveryGroup) {
  for (const TestGroup &g : testGroups())
    cleave_comm_barrier(g.comm);
  SUCCEED();
}
