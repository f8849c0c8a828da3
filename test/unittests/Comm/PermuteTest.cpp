//===- PermuteTest.cpp - grouped point to point and collective_permute ----===//
//
// cleave_comm_sendrecv and cleave_comm_collective_permute on every group of
// the test mesh, on seeded random inputs that every rank regenerates for the
// whole group: rings in both directions (every rank calls in the same
// order, which blocking sends would deadlock on), chains whose ends have
// no peer, permutations that leave ranks without a source (zeros), and
// shifts along one axis of the mesh. Data movement is exact.
//
//===----------------------------------------------------------------------===//

#include "CommTestUtil.h"

#include <utility>

using namespace cleave::rt::test;

namespace {

using Pairs = std::vector<std::pair<int, int>>; // (source, target)

const int32_t kAllTypes[] = {CLEAVE_F32, CLEAVE_F16, CLEAVE_BF16,
                             CLEAVE_I64, CLEAVE_I32, CLEAVE_I1};

std::string pairsString(const Pairs &pairs) {
  std::string s = "{";
  for (size_t i = 0; i < pairs.size(); ++i)
    s += (i ? ", " : "") + std::to_string(pairs[i].first) + "->" +
         std::to_string(pairs[i].second);
  return s + "}";
}

std::string context(const TestGroup &g, int32_t dtype,
                    const std::string &what) {
  return g.name + " " + dtypeString(dtype) + " " + what + " on rank " +
         std::to_string(myRank());
}

/// Permutes a tensor of `dtype` and `shape` over `g` with `pairs` and
/// checks that out holds the input of the rank whose target this one is, or
/// zeros. out starts as other random values, so that zeros show. `started`:
/// by cleave_comm_collective_permute_start and its wait.
void checkPermute(const TestGroup &g, const Pairs &pairs, int32_t dtype,
                  uint64_t seed, const std::string &what,
                  const Shape &shape = {3, 5}, bool started = false) {
  const int64_t n = product(shape);
  Arena arena(2 * (n * int64_t(byteSize(dtype)) + 64));
  cleave_tensor in = arena.add(dtype, shape);
  cleave_tensor out = arena.add(dtype, shape);
  arena.write(in, inputOf(seed, myRank(), n, dtype));
  arena.write(out, inputOf(seed + 1000000, myRank(), n, dtype));
  std::vector<int64_t> flat;
  for (auto [source, target] : pairs) {
    flat.push_back(source);
    flat.push_back(target);
  }
  if (started)
    cleave_comm_wait(cleave_comm_collective_permute_start(
        g.comm, arena.data(), &in, &out, flat.data(), int64_t(pairs.size())));
  else
    cleave_comm_collective_permute(g.comm, arena.data(), &in, &out,
                                   flat.data(), int64_t(pairs.size()));
  std::vector<double> want(size_t(n), 0.0);
  for (auto [source, target] : pairs)
    if (target == groupRankOf(g))
      want = inputOf(seed, g.members[size_t(source)], n, dtype);
  expectValues(arena.read(out), exact(want),
               context(g, dtype, what + " " + pairsString(pairs)));
  // in is left alone.
  expectValues(arena.read(in), exact(inputOf(seed, myRank(), n, dtype)),
               context(g, dtype, what + " in"));
}

/// The ring i -> i + step (mod n).
Pairs ring(int n, int step) {
  Pairs pairs;
  for (int i = 0; i < n; ++i)
    pairs.push_back({i, ((i + step) % n + n) % n});
  return pairs;
}

} // namespace

TEST_F(CommTest, CollectivePermuteRing) {
  uint64_t seed = 8000;
  for (const TestGroup &g : testGroups()) {
    int n = int(g.members.size());
    for (int step : {1, -1}) {
      for (int32_t dtype : kAllTypes)
        checkPermute(g, ring(n, step), dtype, ++seed, "ring");
      // 256 KiB: beyond MPI's eager limits, where a send waits for its
      // receive.
      checkPermute(g, ring(n, step), CLEAVE_F32, ++seed, "large ring",
                   {256, 256});
      for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_I64})
        checkPermute(g, ring(n, step), dtype, ++seed, "started ring", {3, 5},
                     true);
      checkPermute(g, ring(n, step), CLEAVE_F32, ++seed, "large started ring",
                   {256, 256}, true);
    }
  }
}

TEST_F(CommTest, StartedPermutesInFlightTogether) {
  // Ring attention's step: the key and the value blocks started around the
  // ring together (large, so that MPI's sends wait for their receives),
  // waited for in the other order, the inputs read while in flight.
  uint64_t seed = 8500;
  const Shape shape = {128, 512};
  const int64_t n = product(shape);
  for (const TestGroup &g : testGroups()) {
    Pairs pairs = ring(int(g.members.size()), 1);
    std::vector<int64_t> flat;
    for (auto [source, target] : pairs)
      flat.insert(flat.end(), {source, target});
    Arena arena(4 * (n * 4 + 64));
    cleave_tensor k = arena.add(CLEAVE_F32, shape), v = arena.add(CLEAVE_F32, shape);
    cleave_tensor kOut = arena.add(CLEAVE_F32, shape);
    cleave_tensor vOut = arena.add(CLEAVE_F32, shape);
    arena.write(k, inputOf(++seed, myRank(), n, CLEAVE_F32));
    arena.write(v, inputOf(seed + 100, myRank(), n, CLEAVE_F32));
    int64_t hk = cleave_comm_collective_permute_start(
        g.comm, arena.data(), &k, &kOut, flat.data(), int64_t(pairs.size()));
    int64_t hv = cleave_comm_collective_permute_start(
        g.comm, arena.data(), &v, &vOut, flat.data(), int64_t(pairs.size()));
    // Reading the inputs while they are sent is allowed.
    expectValues(arena.read(k), exact(inputOf(seed, myRank(), n, CLEAVE_F32)),
                 context(g, CLEAVE_F32, "k in flight"));
    cleave_comm_wait(hv);
    cleave_comm_wait(hk);
    int from = g.members[size_t((groupRankOf(g) + int(pairs.size()) - 1) %
                                int(pairs.size()))];
    expectValues(arena.read(kOut), exact(inputOf(seed, from, n, CLEAVE_F32)),
                 context(g, CLEAVE_F32, "started k"));
    expectValues(arena.read(vOut),
                 exact(inputOf(seed + 100, from, n, CLEAVE_F32)),
                 context(g, CLEAVE_F32, "started v"));
  }
}

TEST_F(CommTest, CollectivePermutePartial) {
  uint64_t seed = 9000;
  for (const TestGroup &g : testGroups()) {
    int n = int(g.members.size());
    std::vector<Pairs> cases;
    // The even ranks send to the next; the odd ones receive or get zeros.
    Pairs even;
    for (int i = 0; i < n; i += 2)
      even.push_back({i, (i + 1) % n});
    cases.push_back(even);
    // One pair: the last rank to the first.
    cases.push_back({{n - 1, 0}});
    // No pairs: zeros everywhere.
    cases.push_back({});
    // Group rank 0 keeps its own; the others rotate among themselves.
    Pairs rest{{0, 0}};
    for (int i = 1; i < n; ++i)
      rest.push_back({i, i % (n - 1) + 1});
    cases.push_back(rest);
    for (const Pairs &pairs : cases)
      for (int32_t dtype : {CLEAVE_F32, CLEAVE_BF16, CLEAVE_I64})
        checkPermute(g, pairs, dtype, ++seed, "partial");
  }
}

TEST_F(CommTest, CollectivePermuteShiftAlongAMeshAxis) {
  // A shift by one along axis `ax` of the test mesh [a, b], with or without
  // wrapping around, as a permutation of a group over both axes (in either
  // order), must give what the same shift gives as a ring (or a chain) of
  // the axis's own group: the input of the rank one step back along the
  // axis, or zeros at its start.
  uint64_t seed = 10000;
  int size = cleave_comm_world_size();
  Shape mesh = testMesh(size);
  auto coordsOf = [&](int w) {
    return std::vector<int64_t>{w / mesh[1], w % mesh[1]};
  };
  std::vector<TestGroup> groups = testGroups();
  const TestGroup &axis0 = groups[1], &axis1 = groups[2];
  const TestGroup &both = groups[3], &reversed = groups[4];
  for (int ax : {0, 1}) {
    for (bool wrap : {true, false}) {
      std::string what = std::string("shift along axis ") +
                         std::to_string(ax) + (wrap ? " (cyclic)" : "");
      for (const TestGroup *g : {&both, &reversed}) {
        Pairs pairs;
        for (size_t k = 0; k < g->members.size(); ++k) {
          std::vector<int64_t> c = coordsOf(g->members[k]);
          if (c[ax] + 1 == mesh[ax] && !wrap)
            continue;
          c[ax] = (c[ax] + 1) % mesh[ax];
          int target = int(c[0] * mesh[1] + c[1]);
          auto it = std::find(g->members.begin(), g->members.end(), target);
          pairs.push_back({int(k), int(it - g->members.begin())});
        }
        for (int32_t dtype : {CLEAVE_F32, CLEAVE_I32})
          checkPermute(*g, pairs, dtype, ++seed, what);
      }
      // The axis's own group, whose group rank is the axis coordinate.
      const TestGroup &line = ax == 0 ? axis0 : axis1;
      int n = int(line.members.size());
      Pairs pairs = wrap ? ring(n, 1) : Pairs{};
      for (int i = 0; !wrap && i + 1 < n; ++i)
        pairs.push_back({i, i + 1});
      for (int32_t dtype : {CLEAVE_F32, CLEAVE_I32})
        checkPermute(line, pairs, dtype, ++seed, what);
    }
  }
}

TEST_F(CommTest, SendRecvAroundTheRingInOneCall) {
  // 256 KiB per message: beyond MPI's eager limits, so that the blocking
  // send / recv pair would need the opposite orders that sendrecv does not.
  uint64_t seed = 11000;
  const int64_t n = 64 * 1024;
  for (const TestGroup &g : testGroups()) {
    int size = int(g.members.size());
    int rank = groupRankOf(g);
    for (int step : {1, -1}) {
      ++seed;
      int next = ((rank + step) % size + size) % size;
      int prev = ((rank - step) % size + size) % size;
      Arena arena(int64_t(1) << 20);
      cleave_tensor send = arena.add(CLEAVE_F32, {n});
      cleave_tensor recv = arena.add(CLEAVE_F32, {n});
      arena.write(send, inputOf(seed, myRank(), n, CLEAVE_F32));
      cleave_comm_sendrecv(g.comm, arena.data(), &send, next, &recv, prev);
      expectValues(arena.read(recv),
                   exact(inputOf(seed, g.members[size_t(prev)], n, CLEAVE_F32)),
                   context(g, CLEAVE_F32,
                           "sendrecv step " + std::to_string(step)));
    }
  }
}

TEST_F(CommTest, SendRecvAlongAChain) {
  // Group rank r sends to r + 1 and receives from r - 1; the first rank has
  // nothing to receive and the last nothing to send (peer -1, no tensor).
  // With `plainEnds`, the ends call send and recv instead, which match the
  // middle ranks' sendrecv.
  uint64_t seed = 12000;
  for (const TestGroup &g : testGroups()) {
    int size = int(g.members.size());
    if (size == 1)
      continue;
    int rank = groupRankOf(g);
    for (bool plainEnds : {false, true}) {
      for (int32_t dtype : {CLEAVE_BF16, CLEAVE_I64}) {
        ++seed;
        Arena arena;
        cleave_tensor send = arena.add(dtype, {4, 6});
        cleave_tensor recv = arena.add(dtype, {4, 6});
        arena.write(send, inputOf(seed, myRank(), 24, dtype));
        arena.write(recv, inputOf(seed + 1000000, myRank(), 24, dtype));
        bool first = rank == 0, last = rank == size - 1;
        if (plainEnds && first)
          cleave_comm_send(g.comm, arena.data(), &send, 1);
        else if (plainEnds && last)
          cleave_comm_recv(g.comm, arena.data(), &recv, rank - 1);
        else
          cleave_comm_sendrecv(g.comm, arena.data(), last ? nullptr : &send,
                               last ? -1 : rank + 1, first ? nullptr : &recv,
                               first ? -1 : rank - 1);
        // The first rank's recv is untouched.
        int from = first ? myRank() : g.members[size_t(rank - 1)];
        uint64_t s = first ? seed + 1000000 : seed;
        expectValues(arena.read(recv), exact(inputOf(s, from, 24, dtype)),
                     context(g, dtype, plainEnds ? "chain, plain ends"
                                                 : "chain"));
      }
    }
  }
}

TEST_F(CommTest, SendRecvToItselfCopies) {
  uint64_t seed = 13000;
  for (const TestGroup &g : testGroups()) {
    ++seed;
    int rank = groupRankOf(g);
    Arena arena;
    cleave_tensor send = arena.add(CLEAVE_F16, {2, 3});
    cleave_tensor recv = arena.add(CLEAVE_F16, {2, 3});
    arena.write(send, inputOf(seed, myRank(), 6, CLEAVE_F16));
    cleave_comm_sendrecv(g.comm, arena.data(), &send, rank, &recv, rank);
    expectValues(arena.read(recv),
                 exact(inputOf(seed, myRank(), 6, CLEAVE_F16)),
                 context(g, CLEAVE_F16, "sendrecv to itself"));
  }
}
