//===- AttentionBlockTest.cpp - the blocks of ring attention --------------===//
//
// cleave_rt_attention_block and cleave_rt_attention_block_grad as a ring
// uses them: one device's queries (their positions a subset of the
// sequence, in the contiguous layout or in two chunks as the zigzag
// layout holds them) against the key/value blocks of every device in ring
// order, merged block by block, then the backward over the same blocks
// with the final output and log-sum-exp. Checked against a float64
// reference written here: attention of the queries over all the keys with
// the causal mask by position (key position <= query position), its
// log-sum-exp, and its analytic gradients (dS = P (dP - rowsum(dO * O)));
// the reference gradient itself against central differences on a small
// case. Grouped-query heads, query blocks past the kernel's 64 rows,
// queries that see no key of the first blocks (or of any), 1 and 8
// threads, out and lse written over out_in and lse_in, f16 operands.
// Tolerances (relative, absolute): f32 1e-4, 1e-5; f16 1/256, 2e-3.
//
//===----------------------------------------------------------------------===//

#include "References.h"

#include <omp.h>

#include <algorithm>
#include <numeric>

using namespace cleave::rt::test;

namespace {

using Values = std::vector<double>;
using Positions = std::vector<int64_t>;

struct ScopedThreads {
  int saved;
  explicit ScopedThreads(int threads) : saved(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~ScopedThreads() { omp_set_num_threads(saved); }
};

/// q [b, h, sq, d] against all keys k [b, hkv, sk, d], v [b, hkv, sk, dv].
struct Shape4 {
  int64_t b, h, hkv, sq, sk, d, dv;
};

/// The float64 attention of q over the keys with positions: out, lse (-inf
/// and zeros for a row without live keys) and, given dout, the gradients.
struct Reference {
  Values out, lse, dq, dk, dv;
};

Reference reference(const Shape4 &s, const Values &q, const Values &k,
                    const Values &v, const Positions &qPos,
                    const Positions &kPos, bool causal, double scale,
                    const Values *dout) {
  Reference r;
  r.out.assign(size_t(s.b * s.h * s.sq * s.dv), 0.0);
  r.lse.assign(size_t(s.b * s.h * s.sq), -INFINITY);
  r.dq.assign(q.size(), 0.0);
  r.dk.assign(k.size(), 0.0);
  r.dv.assign(v.size(), 0.0);
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.h; ++h)
      for (int64_t i = 0; i < s.sq; ++i) {
        int64_t hk = h / (s.h / s.hkv), qi = (b * s.h + h) * s.sq + i;
        auto kRow = [&](int64_t j) { return (b * s.hkv + hk) * s.sk + j; };
        Values sc(size_t(s.sk), -INFINITY);
        double max = -INFINITY;
        for (int64_t j = 0; j < s.sk; ++j) {
          if (causal && kPos[size_t(j)] > qPos[size_t(i)])
            continue;
          double dot = 0;
          for (int64_t d = 0; d < s.d; ++d)
            dot += q[size_t(qi * s.d + d)] * k[size_t(kRow(j) * s.d + d)];
          sc[size_t(j)] = dot * scale;
          max = std::max(max, sc[size_t(j)]);
        }
        if (max == -INFINITY)
          continue;
        double sum = 0;
        for (double x : sc)
          sum += std::exp(x - max);
        double lse = max + std::log(sum);
        r.lse[size_t(qi)] = lse;
        Values p(size_t(s.sk));
        for (int64_t j = 0; j < s.sk; ++j) {
          p[size_t(j)] = std::exp(sc[size_t(j)] - lse);
          for (int64_t d = 0; d < s.dv; ++d)
            r.out[size_t(qi * s.dv + d)] +=
                p[size_t(j)] * v[size_t(kRow(j) * s.dv + d)];
        }
        if (!dout)
          continue;
        double rowDot = 0;
        for (int64_t d = 0; d < s.dv; ++d)
          rowDot += (*dout)[size_t(qi * s.dv + d)] * r.out[size_t(qi * s.dv + d)];
        for (int64_t j = 0; j < s.sk; ++j) {
          double dp = 0;
          for (int64_t d = 0; d < s.dv; ++d)
            dp += (*dout)[size_t(qi * s.dv + d)] * v[size_t(kRow(j) * s.dv + d)];
          double ds = p[size_t(j)] * (dp - rowDot);
          for (int64_t d = 0; d < s.d; ++d) {
            r.dq[size_t(qi * s.d + d)] += scale * ds * k[size_t(kRow(j) * s.d + d)];
            r.dk[size_t(kRow(j) * s.d + d)] += scale * ds * q[size_t(qi * s.d + d)];
          }
          for (int64_t d = 0; d < s.dv; ++d)
            r.dv[size_t(kRow(j) * s.dv + d)] +=
                p[size_t(j)] * (*dout)[size_t(qi * s.dv + d)];
        }
      }
  return r;
}

/// Block `n` of `blocks` equal blocks along dimension 2 of x [b, hh, S, e].
Values blockOf(const Values &x, int64_t bh, int64_t seq, int64_t e,
               int64_t blocks, int64_t n) {
  int64_t len = seq / blocks;
  Values out;
  for (int64_t r = 0; r < bh; ++r)
    for (int64_t j = n * len; j < (n + 1) * len; ++j)
      for (int64_t d = 0; d < e; ++d)
        out.push_back(x[size_t((r * seq + j) * e + d)]);
  return out;
}

/// Adds `part` into block `n` of x (the transpose of blockOf).
void addBlock(Values &x, const Values &part, int64_t bh, int64_t seq,
              int64_t e, int64_t blocks, int64_t n) {
  int64_t len = seq / blocks;
  size_t at = 0;
  for (int64_t r = 0; r < bh; ++r)
    for (int64_t j = n * len; j < (n + 1) * len; ++j)
      for (int64_t d = 0; d < e; ++d)
        x[size_t((r * seq + j) * e + d)] += part[at++];
}

struct RingCase {
  Shape4 s; // sk: the whole sequence of keys
  int64_t blocks;
  Positions qPos, kPos; // kPos over the whole sequence of keys
  bool causal;
  int32_t dtype = CLEAVE_F32;
  std::string name;
};

/// Runs the forward over the blocks in ring order (the device's own block
/// `first` first), then the backward, and checks both against the
/// reference; `inPlace` writes each step's out and lse over its inputs.
void checkRing(const RingCase &c, int64_t first, bool inPlace, unsigned seed) {
  const Shape4 &s = c.s;
  int64_t len = s.sk / c.blocks;
  TestArena arena(size_t(32) << 20);
  cleave_tensor q = arena.add(c.dtype, {s.b, s.h, s.sq, s.d});
  cleave_tensor dout = arena.add(c.dtype, {s.b, s.h, s.sq, s.dv});
  Values qv = arena.fill(q, -1.5, 1.5, seed);
  Values dov = arena.fill(dout, -1, 1, seed + 1);
  cleave_tensor kAll = arena.add(c.dtype, {s.b, s.hkv, s.sk, s.d});
  cleave_tensor vAll = arena.add(c.dtype, {s.b, s.hkv, s.sk, s.dv});
  Values kv = arena.fill(kAll, -1.5, 1.5, seed + 2);
  Values vv = arena.fill(vAll, -1, 1, seed + 3);
  cleave_tensor qPos = arena.add(CLEAVE_I64, {s.sq});
  arena.setValues(qPos, Values(c.qPos.begin(), c.qPos.end()));
  double scale = 1 / std::sqrt(double(s.d));
  Reference want =
      reference(s, qv, kv, vv, c.qPos, c.kPos, c.causal, scale, &dov);

  // One device's tensors per block.
  struct Block {
    cleave_tensor k, v, pos, dk, dv;
  };
  std::vector<Block> blocks;
  for (int64_t n = 0; n < c.blocks; ++n) {
    Block b;
    b.k = arena.add(c.dtype, {s.b, s.hkv, len, s.d});
    b.v = arena.add(c.dtype, {s.b, s.hkv, len, s.dv});
    b.pos = arena.add(CLEAVE_I64, {len});
    b.dk = arena.add(c.dtype, {s.b, s.hkv, len, s.d});
    b.dv = arena.add(c.dtype, {s.b, s.hkv, len, s.dv});
    arena.setValues(b.k, blockOf(kv, s.b * s.hkv, s.sk, s.d, c.blocks, n));
    arena.setValues(b.v, blockOf(vv, s.b * s.hkv, s.sk, s.dv, c.blocks, n));
    arena.setValues(b.pos, Values(c.kPos.begin() + n * len,
                                  c.kPos.begin() + (n + 1) * len));
    arena.fill(b.dk, 7, 8, seed + 10 + unsigned(n)); // garbage: overwritten
    blocks.push_back(b);
  }
  Shape outShape = {s.b, s.h, s.sq, s.dv}, lseShape = {s.b, s.h, s.sq};
  cleave_tensor outs[2] = {arena.add(c.dtype, outShape),
                           arena.add(c.dtype, outShape)};
  cleave_tensor lses[2] = {arena.add(CLEAVE_F32, lseShape),
                           arena.add(CLEAVE_F32, lseShape)};
  int cur = 0;
  for (int64_t step = 0; step < c.blocks; ++step) {
    const Block &b = blocks[size_t((first - step + c.blocks) % c.blocks)];
    int next = inPlace ? cur : (step == 0 ? cur : 1 - cur);
    cleave_rt_attention_block(arena.data(), &q, &b.k, &b.v,
                              step ? &outs[cur] : nullptr,
                              step ? &lses[cur] : nullptr, &qPos, &b.pos,
                              &outs[next], &lses[next], c.causal, scale);
    cur = next;
  }
  bool f16 = c.dtype == CLEAVE_F16;
  double rtol = f16 ? 1.0 / 256 : 1e-4, atol = f16 ? 2e-3 : 1e-5;
  std::string name = c.name + (inPlace ? " in place" : "");
  check(arena.values(outs[cur]), want.out, rtol, atol, name + " out");
  check(arena.values(lses[cur]), want.lse, rtol, atol, name + " lse");

  cleave_tensor dq = arena.add(c.dtype, {s.b, s.h, s.sq, s.d});
  Values dqSum(qv.size(), 0.0), dkAll(kv.size(), 0.0), dvAll(vv.size(), 0.0);
  for (int64_t n = 0; n < c.blocks; ++n) {
    const Block &b = blocks[size_t(n)];
    cleave_rt_attention_block_grad(arena.data(), &q, &b.k, &b.v, &outs[cur],
                                   &lses[cur], &dout, &qPos, &b.pos, &dq,
                                   &b.dk, &b.dv, c.causal, scale);
    Values part = arena.values(dq);
    for (size_t i = 0; i < part.size(); ++i)
      dqSum[i] += part[i];
    addBlock(dkAll, arena.values(b.dk), s.b * s.hkv, s.sk, s.d, c.blocks, n);
    addBlock(dvAll, arena.values(b.dv), s.b * s.hkv, s.sk, s.dv, c.blocks, n);
  }
  check(dqSum, want.dq, rtol, atol, name + " dq");
  check(dkAll, want.dk, rtol, atol, name + " dk");
  check(dvAll, want.dv, rtol, atol, name + " dv");
}

Positions iota(int64_t from, int64_t n) {
  Positions p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), from);
  return p;
}

/// Two chunks of `len` positions: chunk `early` and chunk `late`.
Positions chunks(int64_t len, int64_t early, int64_t late) {
  Positions p = iota(early * len, len), l = iota(late * len, len);
  p.insert(p.end(), l.begin(), l.end());
  return p;
}

TEST(RuntimeAttentionBlock, ReferenceGradientAgreesWithDifferences) {
  // The analytic reference gradient against central differences of the
  // reference forward, on a causal case with positions out of order.
  Shape4 s = {1, 2, 1, 3, 5, 3, 2};
  Positions qPos = {4, 0, 2}, kPos = {3, 1, 0, 4, 2};
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> dist(-1, 1);
  auto random = [&](size_t n) {
    Values x(n);
    for (double &e : x)
      e = dist(gen);
    return x;
  };
  Values q = random(6 * 3), k = random(5 * 3), v = random(5 * 2);
  Values dout = random(6 * 2);
  Reference r = reference(s, q, k, v, qPos, kPos, true, 0.7, &dout);
  Forward f = [&](const std::vector<Values> &in) {
    return reference(s, in[0], in[1], in[2], qPos, kPos, true, 0.7, nullptr)
        .out;
  };
  std::vector<Values> inputs = {q, k, v};
  expectClose(r.dq, numericVjp(f, inputs, 0, dout), 1e-6, 1e-8, "dq");
  expectClose(r.dk, numericVjp(f, inputs, 1, dout), 1e-6, 1e-8, "dk");
  expectClose(r.dv, numericVjp(f, inputs, 2, dout), 1e-6, 1e-8, "dv");
}

TEST(RuntimeAttentionBlock, ContiguousCausalRing) {
  // Device 1 of 4 (queries at 16..31, grouped heads): the blocks of
  // devices 2 and 3 come after every query (skipped).
  RingCase c = {{2, 4, 2, 16, 64, 8, 6}, 4, iota(16, 16), iota(0, 64), true};
  c.name = "contiguous causal";
  checkRing(c, 1, false, 10);
  checkRing(c, 1, true, 11);
}

TEST(RuntimeAttentionBlock, FirstDeviceSeesNoKeyOfLaterBlocks) {
  // Device 0's queries start the sequence: after its own block every
  // block is masked, and query 0 sees one key.
  RingCase c = {{1, 2, 2, 8, 24, 4, 4}, 3, iota(0, 8), iota(0, 24), true};
  c.name = "first device";
  checkRing(c, 0, false, 20);
}

TEST(RuntimeAttentionBlock, ZigzagChunks) {
  // The zigzag layout of 2 devices: 4 chunks of 5, device 0 holds chunks 0
  // and 3, device 1 chunks 1 and 2; the keys in the same order.
  Positions keys = chunks(5, 0, 3), late = chunks(5, 1, 2);
  keys.insert(keys.end(), late.begin(), late.end());
  RingCase c = {{1, 2, 1, 10, 20, 4, 3}, 2, chunks(5, 0, 3), keys, true};
  c.name = "zigzag device 0";
  checkRing(c, 0, false, 30);
  c.qPos = chunks(5, 1, 2);
  c.name = "zigzag device 1";
  checkRing(c, 1, false, 31);
}

TEST(RuntimeAttentionBlock, ZigzagChunksOverSeveralRowBlocks) {
  // Chunks of 70 (the kernel's blocks of 64 query rows end inside them):
  // each row block computes only the keys up to its last query, a prefix
  // of the ascending key positions that differs from block to block.
  Positions keys = chunks(70, 0, 3), late = chunks(70, 1, 2);
  keys.insert(keys.end(), late.begin(), late.end());
  RingCase c = {{1, 2, 1, 140, 280, 8, 8}, 2, chunks(70, 1, 2), keys, true};
  for (int threads : {1, 4}) {
    ScopedThreads scoped(threads);
    c.name = "zigzag chunks of 70, threads " + std::to_string(threads);
    checkRing(c, 1, false, 35);
  }
}

TEST(RuntimeAttentionBlock, CausalKeysInAnyOrder) {
  // Key positions that do not ascend: every key is computed and masked.
  Positions keys = iota(0, 24);
  std::reverse(keys.begin(), keys.begin() + 12);
  std::swap(keys[14], keys[21]);
  RingCase c = {{1, 2, 2, 12, 24, 4, 4}, 2, chunks(6, 0, 3), keys, true};
  c.name = "keys in any order";
  checkRing(c, 0, false, 36);
  checkRing(c, 1, true, 37);
}

TEST(RuntimeAttentionBlock, QueryBeforeEveryKey) {
  // Positions that put query 0 before every key: its row stays zeros with
  // lse -inf through every block, and gets no gradient.
  RingCase c = {{1, 2, 2, 4, 8, 4, 4}, 2, {0, 5, 6, 7}, iota(1, 8), true};
  c.name = "query before every key";
  checkRing(c, 0, false, 40);
}

TEST(RuntimeAttentionBlock, NotCausalLongBlocksAndThreads) {
  // Without causal; 70 queries (two of the kernel's row blocks).
  RingCase c = {{2, 4, 4, 70, 90, 8, 8}, 3, iota(0, 70), iota(0, 90), false};
  c.name = "not causal";
  for (int threads : {1, 8}) {
    ScopedThreads scoped(threads);
    c.name = "not causal threads " + std::to_string(threads);
    checkRing(c, 2, false, 50);
  }
}

TEST(RuntimeAttentionBlock, HalfPrecision) {
  RingCase c = {{1, 4, 2, 12, 24, 8, 8}, 2, iota(12, 12), iota(0, 24), true,
                CLEAVE_F16};
  c.name = "f16";
  checkRing(c, 1, false, 60);
}

TEST(RuntimeAttentionBlock, BadDescriptors) {
  TestArena arena;
  cleave_tensor q = arena.add(CLEAVE_F32, {1, 2, 4, 4});
  cleave_tensor pos = arena.add(CLEAVE_I64, {4});
  cleave_tensor pos3 = arena.add(CLEAVE_I64, {3});
  cleave_tensor out = arena.add(CLEAVE_F32, {1, 2, 4, 4});
  cleave_tensor lse = arena.add(CLEAVE_F32, {1, 2, 4});
  cleave_tensor lse16 = arena.add(CLEAVE_F16, {1, 2, 4});
  EXPECT_RT_FAIL(cleave_rt_attention_block(arena.data(), &q, &q, &q, nullptr,
                                           nullptr, &pos, &pos3, &out, &lse, 1,
                                           0.5),
                 "cleave_rt_attention_block: k_pos must be i64 \\[4\\], got "
                 "i64 \\[3\\]");
  EXPECT_RT_FAIL(cleave_rt_attention_block(arena.data(), &q, &q, &q, nullptr,
                                           nullptr, &pos, &pos, &out, &lse16,
                                           1, 0.5),
                 "lse must be f32 \\[1, 2, 4\\], got f16");
  EXPECT_RT_FAIL(cleave_rt_attention_block(arena.data(), &q, &q, &q, &out,
                                           nullptr, &pos, &pos, &out, &lse, 1,
                                           0.5),
                 "out_in and lse_in must be given together");
  EXPECT_RT_FAIL(cleave_rt_attention_block_grad(arena.data(), &q, &q, &q, &out,
                                                &lse16, &out, &pos, &pos, &q,
                                                &q, &q, 1, 0.5),
                 "cleave_rt_attention_block_grad: lse must be f32");
}

} // namespace
