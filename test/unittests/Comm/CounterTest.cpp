//===- CounterTest.cpp - communicator handles and byte counters -----------===//
//
// The handles of mesh-axis groups (the same group twice gives the same
// handle, all axes in mesh order is the world), and the byte counters of
// every collective kind against the ring formulas of cleave_comm.h, written
// out here independently for a group of n ranks, plus the printed table.
//
//===----------------------------------------------------------------------===//

#include "CommTestUtil.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

using namespace cleave::rt::test;

namespace {

cleave_comm_counter counterOf(int32_t comm, int32_t kind) {
  cleave_comm_counter c{};
  cleave_comm_get_counter(comm, kind, &c);
  return c;
}

void expectCounter(int32_t comm, int32_t kind, int64_t calls, int64_t payload,
                   int64_t wire, const std::string &what) {
  cleave_comm_counter c = counterOf(comm, kind);
  EXPECT_EQ(c.calls, calls) << what << " kind " << kind;
  EXPECT_EQ(c.payload_bytes, payload) << what << " kind " << kind;
  EXPECT_EQ(c.wire_bytes, wire) << what << " kind " << kind;
}

} // namespace

TEST_F(CommTest, GroupHandles) {
  Shape mesh = testMesh(cleave_comm_world_size());
  int64_t axis0[] = {0}, both[] = {0, 1}, reversed[] = {1, 0};
  int32_t a = cleave_comm_group(2, mesh.data(), 1, axis0);
  EXPECT_EQ(cleave_comm_group(2, mesh.data(), 1, axis0), a);
  EXPECT_EQ(cleave_comm_group(2, mesh.data(), 2, both), CLEAVE_COMM_WORLD);
  int32_t r = cleave_comm_group(2, mesh.data(), 2, reversed);
  EXPECT_EQ(cleave_comm_size(r), cleave_comm_world_size());
  // A group that holds every rank in world order is the world itself: axis
  // 0 of a [2, 1] mesh, and both axes in either order when one has size 1.
  bool square = mesh[0] > 1 && mesh[1] > 1;
  EXPECT_EQ(r == CLEAVE_COMM_WORLD, !square);
  EXPECT_EQ(a == CLEAVE_COMM_WORLD, mesh[1] == 1);
  // No axes: a group of this rank alone.
  int32_t self = cleave_comm_group(2, mesh.data(), 0, nullptr);
  EXPECT_EQ(cleave_comm_size(self), 1);
  EXPECT_EQ(cleave_comm_rank(self), 0);
}

TEST_F(CommTest, CountersFollowTheRingFormulas) {
  std::set<int32_t> seen;
  for (const TestGroup &g : testGroups()) {
    if (!seen.insert(g.comm).second)
      continue; // the world twice
    int64_t n = int64_t(g.members.size());
    int64_t rank = std::find(g.members.begin(), g.members.end(),
                             cleave_comm_world_rank()) -
                   g.members.begin();
    cleave_comm_reset_counters();
    Arena arena;

    cleave_tensor ar = arena.add(CLEAVE_F32, {4, 5}); // 80 bytes
    arena.write(ar, std::vector<double>(20, 1.0));
    cleave_comm_all_reduce(g.comm, arena.data(), CLEAVE_SUM, &ar, &ar);
    cleave_comm_all_reduce(g.comm, arena.data(), CLEAVE_MAX_REDUCE, &ar, &ar);

    cleave_tensor agIn = arena.add(CLEAVE_BF16, {3});       // 6 bytes
    cleave_tensor agOut = arena.add(CLEAVE_BF16, {3 * n});  // 6n bytes
    arena.write(agIn, {1, 2, 3});
    cleave_comm_all_gather(g.comm, arena.data(), &agIn, &agOut);

    cleave_tensor rsIn = arena.add(CLEAVE_I64, {2 * n, 2}); // 32n bytes
    cleave_tensor rsOut = arena.add(CLEAVE_I64, {2, 2});
    arena.write(rsIn, std::vector<double>(size_t(4 * n), 3.0));
    cleave_comm_reduce_scatter(g.comm, arena.data(), CLEAVE_SUM, &rsIn,
                               &rsOut);

    cleave_tensor aaIn = arena.add(CLEAVE_I32, {n, 4}); // 16n bytes
    cleave_tensor aaOut = arena.add(CLEAVE_I32, {n, 4});
    arena.write(aaIn, std::vector<double>(size_t(4 * n), 5.0));
    cleave_comm_all_to_all(g.comm, arena.data(), &aaIn, &aaOut);

    cleave_tensor bc = arena.add(CLEAVE_F32, {10}); // 40 bytes
    arena.write(bc, std::vector<double>(10, 2.0));
    cleave_comm_broadcast(g.comm, arena.data(), &bc, 0);
    cleave_comm_barrier(g.comm);

    std::string what = g.name + " on rank " +
                       std::to_string(cleave_comm_world_rank());
    expectCounter(g.comm, CLEAVE_COMM_ALL_REDUCE, 2, 160,
                  2 * (2 * (n - 1) * 80 / n), what);
    expectCounter(g.comm, CLEAVE_COMM_ALL_GATHER, 1, 6 * n, 6 * (n - 1), what);
    expectCounter(g.comm, CLEAVE_COMM_REDUCE_SCATTER, 1, 32 * n,
                  32 * (n - 1), what);
    expectCounter(g.comm, CLEAVE_COMM_ALL_TO_ALL, 1, 16 * n, 16 * (n - 1),
                  what);
    // The chain from root 0 ends at group rank n - 1, which sends nothing.
    expectCounter(g.comm, CLEAVE_COMM_BROADCAST, 1, 40,
                  rank == n - 1 ? 0 : 40, what);
    expectCounter(g.comm, CLEAVE_COMM_BARRIER, 1, 0, 0, what);
    expectCounter(g.comm, CLEAVE_COMM_SEND, 0, 0, 0, what);

    if (n > 1) {
      cleave_tensor p = arena.add(CLEAVE_F32, {7}); // 28 bytes
      arena.write(p, std::vector<double>(7, 1.5));
      if (rank == 0)
        cleave_comm_send(g.comm, arena.data(), &p, 1);
      else if (rank == 1)
        cleave_comm_recv(g.comm, arena.data(), &p, 0);
      expectCounter(g.comm, CLEAVE_COMM_SEND, rank == 0, rank == 0 ? 28 : 0,
                    rank == 0 ? 28 : 0, what);
      expectCounter(g.comm, CLEAVE_COMM_RECV, rank == 1, rank == 1 ? 28 : 0,
                    0, what);
    }
    // Other communicators count nothing of this.
    for (int32_t other : seen)
      if (other != g.comm)
        expectCounter(other, CLEAVE_COMM_ALL_REDUCE, 0, 0, 0, what);
  }
}

TEST_F(CommTest, PointToPointCountersFollowTheFormulas) {
  // collective_permute: B = in bytes on every rank, wire = B on a source
  // that sends to another rank; sendrecv: a send and a recv.
  std::set<int32_t> seen;
  for (const TestGroup &g : testGroups()) {
    if (!seen.insert(g.comm).second)
      continue;
    int64_t n = int64_t(g.members.size());
    int64_t rank = groupRankOf(g);
    std::string what = g.name + " on rank " + std::to_string(myRank());
    cleave_comm_reset_counters();
    Arena arena;
    cleave_tensor in = arena.add(CLEAVE_F32, {7}); // 28 bytes
    cleave_tensor out = arena.add(CLEAVE_F32, {7});
    arena.write(in, std::vector<double>(7, 1.5));

    // A ring (every rank sends, to itself when n is 1), then the last rank
    // to the first only, then no pairs.
    std::vector<int64_t> ring;
    for (int64_t i = 0; i < n; ++i) {
      ring.push_back(i);
      ring.push_back((i + 1) % n);
    }
    cleave_comm_collective_permute(g.comm, arena.data(), &in, &out,
                                   ring.data(), n);
    int64_t wire = n > 1 ? 28 : 0;
    expectCounter(g.comm, CLEAVE_COMM_COLLECTIVE_PERMUTE, 1, 28, wire, what);
    int64_t lastToFirst[] = {n - 1, 0};
    cleave_comm_collective_permute(g.comm, arena.data(), &in, &out,
                                   lastToFirst, 1);
    wire += rank == n - 1 && n > 1 ? 28 : 0;
    expectCounter(g.comm, CLEAVE_COMM_COLLECTIVE_PERMUTE, 2, 56, wire, what);
    cleave_comm_collective_permute(g.comm, arena.data(), &in, &out, nullptr,
                                   0);
    expectCounter(g.comm, CLEAVE_COMM_COLLECTIVE_PERMUTE, 3, 84, wire, what);
    // A permute counts no sends or receives.
    expectCounter(g.comm, CLEAVE_COMM_SEND, 0, 0, 0, what);
    expectCounter(g.comm, CLEAVE_COMM_RECV, 0, 0, 0, what);

    // sendrecv around the ring: 12 bytes each way.
    cleave_tensor send = arena.add(CLEAVE_BF16, {6});
    cleave_tensor recv = arena.add(CLEAVE_BF16, {6});
    arena.write(send, std::vector<double>(6, 2.0));
    int32_t next = int32_t((rank + 1) % n), prev = int32_t((rank + n - 1) % n);
    cleave_comm_sendrecv(g.comm, arena.data(), &send, next, &recv, prev);
    expectCounter(g.comm, CLEAVE_COMM_SEND, 1, 12, n > 1 ? 12 : 0, what);
    expectCounter(g.comm, CLEAVE_COMM_RECV, 1, 12, 0, what);
    // A chain 0 -> 1 -> ... -> n-1: no send on the last, no recv on the
    // first.
    if (n > 1) {
      bool first = rank == 0, last = rank == n - 1;
      cleave_comm_sendrecv(g.comm, arena.data(), last ? nullptr : &send,
                           last ? -1 : int32_t(rank + 1),
                           first ? nullptr : &recv,
                           first ? -1 : int32_t(rank - 1));
      expectCounter(g.comm, CLEAVE_COMM_SEND, last ? 1 : 2, last ? 12 : 24,
                    last ? 12 : 24, what);
      expectCounter(g.comm, CLEAVE_COMM_RECV, first ? 1 : 2, first ? 12 : 24,
                    0, what);
    }
    expectCounter(g.comm, CLEAVE_COMM_COLLECTIVE_PERMUTE, 3, 84, wire, what);
  }
  // The table names the kind (the last group's counts).
  char *text = nullptr;
  size_t length = 0;
  FILE *out = open_memstream(&text, &length);
  ASSERT_NE(out, nullptr);
  cleave_comm_print_stats(out);
  std::fclose(out);
  std::string table(text, length);
  std::free(text);
  EXPECT_NE(table.find("collective_permute"), std::string::npos) << table;
}

TEST_F(CommTest, StatsTable) {
  Shape mesh = testMesh(cleave_comm_world_size());
  int64_t axis0[] = {0};
  int32_t comm = cleave_comm_group(2, mesh.data(), 1, axis0);
  cleave_comm_reset_counters();
  Arena arena;
  cleave_tensor t = arena.add(CLEAVE_F32, {256, 1024}); // 1 MiB
  arena.write(t, std::vector<double>(256 * 1024, 0.5));
  for (int i = 0; i < 3; ++i)
    cleave_comm_all_reduce(comm, arena.data(), CLEAVE_SUM, &t, &t);

  char *text = nullptr;
  size_t length = 0;
  FILE *out = open_memstream(&text, &length);
  ASSERT_NE(out, nullptr);
  cleave_comm_print_stats(out);
  std::fclose(out);
  std::string table(text, length);
  std::free(text);
  std::string label = mesh[1] == 1 ? "world [" + std::to_string(mesh[0]) + "]"
                                    : "mesh [" + std::to_string(mesh[0]) +
                                          ", " + std::to_string(mesh[1]) +
                                          "] axes {0}";
  EXPECT_NE(table.find(label), std::string::npos) << table;
  EXPECT_NE(table.find("all_reduce"), std::string::npos) << table;
  EXPECT_NE(table.find("3.00 MiB"), std::string::npos) << table; // payload
  EXPECT_NE(table.find("total"), std::string::npos) << table;
  EXPECT_EQ(table.find("all_gather"), std::string::npos) << table;
  EXPECT_EQ(table.find("collective_permute"), std::string::npos) << table;
  if (cleave_comm_world_rank() == 0)
    std::fputs(table.c_str(), stdout);
}
