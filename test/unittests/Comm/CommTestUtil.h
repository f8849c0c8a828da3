//===- CommTestUtil.h - helpers of the communication engine tests -*- C++ -*-===//
//
// The tests run as one GoogleTest binary per engine under mpirun: every rank
// runs every test, in the same order, and checks its own results. Inputs are
// seeded random values (magnitudes in [0.5, 2) with random signs for floats,
// nonzero integers in [-1000, 1000]) that depend on the seed and the world
// rank, so each rank regenerates any other rank's input and computes the
// expected result in float64 itself. The arena is the linked backend's
// (cleave_rt_arena_*): host memory with the MPI engine, device memory with
// the NCCL engine, so the same test source serves both.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_UNITTESTS_COMM_COMMTESTUTIL_H
#define CLEAVE_TEST_UNITTESTS_COMM_COMMTESTUTIL_H

#include "RuntimeTestUtil.h" // Shape, product, byteSize

#include "cleave/Runtime/Float16.h"
#include "cleave/Runtime/cleave_comm.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace cleave::rt::test {

/// Why the engine cannot run here ("" when it can); set by the main.
std::string &skipReason();

/// Every test skips, with the reason, when the engine cannot run here.
class CommTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!skipReason().empty())
      GTEST_SKIP() << skipReason();
  }
};


inline const char *dtypeString(int32_t dtype) {
  static const char *names[] = {"f32", "f16", "bf16", "i64", "i32", "i1"};
  return dtype >= 0 && dtype <= CLEAVE_I1 ? names[dtype] : "?";
}

inline bool isFloat(int32_t dtype) {
  return dtype == CLEAVE_F32 || dtype == CLEAVE_F16 || dtype == CLEAVE_BF16;
}

/// `v` rounded to what `dtype` stores, as a double.
inline double quantize(double v, int32_t dtype) {
  switch (dtype) {
  case CLEAVE_F32:
    return double(float(v));
  case CLEAVE_F16:
    return double(halfToFloat(floatToHalf(float(v))));
  case CLEAVE_BF16:
    return double(bf16ToFloat(floatToBf16(float(v))));
  case CLEAVE_I1:
    return v != 0 ? 1.0 : 0.0;
  default:
    return double(int64_t(v));
  }
}

/// The input of world rank `rank` for test seed `seed`: `n` values of
/// `dtype`, already quantized.
inline std::vector<double> inputOf(uint64_t seed, int rank, int64_t n,
                                   int32_t dtype) {
  std::mt19937_64 rng(seed * 7919 + uint64_t(rank) * 104729 + 17);
  std::vector<double> v(static_cast<size_t>(n));
  for (double &x : v) {
    if (dtype == CLEAVE_I1) {
      x = double(rng() & 1);
    } else if (isFloat(dtype)) {
      double magnitude =
          0.5 + 1.5 * std::uniform_real_distribution<double>(0, 1)(rng);
      x = quantize((rng() & 1) ? magnitude : -magnitude, dtype);
    } else {
      int64_t k = std::uniform_int_distribution<int64_t>(1, 1000)(rng);
      x = double((rng() & 1) ? k : -k);
    }
  }
  return v;
}

/// An arena of the linked backend that hands out descriptors at 64-byte
/// aligned offsets and moves float64 values in and out in any dtype.
class Arena {
public:
  explicit Arena(int64_t capacity = int64_t(1) << 20)
      : capacity(capacity), base(cleave_rt_arena_alloc(capacity)) {}
  ~Arena() { cleave_rt_arena_free(base); }
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;

  char *data() { return base; }

  cleave_tensor add(int32_t dtype, const Shape &shape) {
    cleave_tensor t{};
    t.offset = used;
    t.dtype = dtype;
    t.rank = int32_t(shape.size());
    for (size_t d = 0; d < shape.size(); ++d)
      t.shape[d] = shape[d];
    int64_t bytes = product(shape) * int64_t(byteSize(dtype));
    used += (bytes + 63) / 64 * 64;
    EXPECT_LE(used, capacity) << "test arena too small";
    return t;
  }

  void write(const cleave_tensor &t, const std::vector<double> &values) {
    size_t size = byteSize(t.dtype);
    std::vector<char> bytes(values.size() * size);
    for (size_t i = 0; i < values.size(); ++i) {
      char *p = bytes.data() + i * size;
      double v = values[i];
      switch (t.dtype) {
      case CLEAVE_F32: {
        float f = float(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case CLEAVE_F16: {
        uint16_t h = floatToHalf(float(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case CLEAVE_BF16: {
        uint16_t h = floatToBf16(float(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case CLEAVE_I64: {
        int64_t x = int64_t(v);
        std::memcpy(p, &x, 8);
        break;
      }
      case CLEAVE_I32: {
        int32_t x = int32_t(v);
        std::memcpy(p, &x, 4);
        break;
      }
      default:
        *p = v != 0 ? 1 : 0;
      }
    }
    cleave_rt_arena_write(base, t.offset, bytes.data(), int64_t(bytes.size()));
  }

  std::vector<double> read(const cleave_tensor &t) {
    int64_t n = 1;
    for (int d = 0; d < t.rank; ++d)
      n *= t.shape[d];
    size_t size = byteSize(t.dtype);
    std::vector<char> bytes(size_t(n) * size);
    cleave_rt_arena_read(base, t.offset, bytes.data(), int64_t(bytes.size()));
    std::vector<double> values(static_cast<size_t>(n));
    for (size_t i = 0; i < values.size(); ++i) {
      const char *p = bytes.data() + i * size;
      switch (t.dtype) {
      case CLEAVE_F32: {
        float f;
        std::memcpy(&f, p, 4);
        values[i] = f;
        break;
      }
      case CLEAVE_F16:
      case CLEAVE_BF16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        values[i] = t.dtype == CLEAVE_F16 ? halfToFloat(h) : bf16ToFloat(h);
        break;
      }
      case CLEAVE_I64: {
        int64_t x;
        std::memcpy(&x, p, 8);
        values[i] = double(x);
        break;
      }
      case CLEAVE_I32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        values[i] = double(x);
        break;
      }
      default:
        values[i] = *p;
      }
    }
    return values;
  }

private:
  int64_t capacity;
  int64_t used = 0;
  char *base;
};

/// The tolerance of a reduced value whose terms have absolute sum `scale`:
/// 1e-6 relative for f32, 1e-2 for f16 and bf16, exact for integers.
inline double tolerance(int32_t dtype, double scale) {
  if (dtype == CLEAVE_F32)
    return 1e-6 * scale;
  if (dtype == CLEAVE_F16 || dtype == CLEAVE_BF16)
    return 1e-2 * scale;
  return 0;
}

/// The test's 2-D mesh of the job's ranks: [2, size/2] for an even size
/// (the 2x2 mesh on 4 ranks), else [1, size].
inline Shape testMesh(int size) {
  if (size % 2 == 0)
    return {2, size / 2};
  return {1, size};
}

/// A mesh-axis group of the test mesh and its world ranks in group order,
/// computed independently of the engine.
struct TestGroup {
  std::string name;
  int32_t comm;
  std::vector<int> members; ///< world ranks, by group rank
};

/// The groups the collective tests run on: the world, axis 0, axis 1, both
/// axes in mesh order (the world again) and in reverse order.
std::vector<TestGroup> testGroups();

inline int myRank() { return cleave_comm_world_rank(); }

/// This rank's group rank in `g`.
inline int groupRankOf(const TestGroup &g) {
  return int(std::find(g.members.begin(), g.members.end(), myRank()) -
             g.members.begin());
}

/// An expected element and its tolerance.
struct Expected {
  double value;
  double tol;
};

/// Compares `got` with `want` element by element; reports the count of
/// mismatches and the first one.
inline void expectValues(const std::vector<double> &got,
                         const std::vector<Expected> &want,
                         const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i].value) <= want[i].tol) && bad++ == 0)
      first = i;
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size()
                     << " elements wrong; element " << first << " is "
                     << got[first] << ", expected " << want[first].value
                     << " within " << want[first].tol;
}

inline std::vector<Expected> exact(const std::vector<double> &values) {
  std::vector<Expected> e;
  for (double v : values)
    e.push_back({v, 0});
  return e;
}

} // namespace cleave::rt::test

#endif // CLEAVE_TEST_UNITTESTS_COMM_COMMTESTUTIL_H
