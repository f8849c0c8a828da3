//===- RuntimeTestUtil.h - helpers of the runtime kernel tests --*- C++ -*-===//
//
// An arena that hands out tensor descriptors, typed fills with seeded random
// values, conversion of any tensor to float64 for reference checks, NumPy
// broadcasting of reference indices and a closeness check with a stated
// tolerance (check also reports the largest error when
// CLEAVE_TEST_PRINT_ERRORS is set).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_UNITTESTS_RUNTIME_RUNTIMETESTUTIL_H
#define CLEAVE_TEST_UNITTESTS_RUNTIME_RUNTIMETESTUTIL_H

#include "cleave/Runtime/Float16.h"
#include "cleave/Runtime/cleave_rt.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace cleave::rt::test {

using Shape = std::vector<int64_t>;

inline int64_t product(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

inline size_t byteSize(int32_t dtype) {
  switch (dtype) {
  case CLEAVE_F32:
  case CLEAVE_I32:
    return 4;
  case CLEAVE_F16:
  case CLEAVE_BF16:
    return 2;
  case CLEAVE_I64:
    return 8;
  default:
    return 1;
  }
}

/// A zeroed, 64-byte aligned arena of fixed capacity; `add` places each
/// tensor at the next 64-byte aligned offset.
class TestArena {
public:
  explicit TestArena(size_t capacity = size_t(8) << 20)
      : capacity((capacity + 63) / 64 * 64),
        base(static_cast<char *>(std::aligned_alloc(64, this->capacity))) {
    std::memset(base, 0, this->capacity);
  }
  ~TestArena() { std::free(base); }
  TestArena(const TestArena &) = delete;
  TestArena &operator=(const TestArena &) = delete;

  cleave_tensor add(int32_t dtype, const Shape &shape) {
    cleave_tensor t = {};
    t.offset = int64_t(used);
    t.dtype = dtype;
    t.rank = int32_t(shape.size());
    for (size_t d = 0; d < shape.size(); ++d)
      t.shape[d] = shape[d];
    used += (size_t(product(shape)) * byteSize(dtype) + 63) / 64 * 64;
    if (used > capacity) {
      ADD_FAILURE() << "test arena too small";
      std::abort();
    }
    return t;
  }

  char *data() { return base; }
  template <typename T> T *ptr(const cleave_tensor &t) {
    return reinterpret_cast<T *>(base + t.offset);
  }

  /// Element i of t as a double (f16/bf16 decoded).
  double get(const cleave_tensor &t, int64_t i) {
    switch (t.dtype) {
    case CLEAVE_F32:
      return ptr<float>(t)[i];
    case CLEAVE_F16:
      return halfToFloat(ptr<uint16_t>(t)[i]);
    case CLEAVE_BF16:
      return bf16ToFloat(ptr<uint16_t>(t)[i]);
    case CLEAVE_I64:
      return double(ptr<int64_t>(t)[i]);
    case CLEAVE_I32:
      return ptr<int32_t>(t)[i];
    default:
      return ptr<uint8_t>(t)[i];
    }
  }

  /// Stores v into element i of t (rounded to the dtype).
  void set(const cleave_tensor &t, int64_t i, double v) {
    switch (t.dtype) {
    case CLEAVE_F32:
      ptr<float>(t)[i] = float(v);
      break;
    case CLEAVE_F16:
      ptr<uint16_t>(t)[i] = floatToHalf(float(v));
      break;
    case CLEAVE_BF16:
      ptr<uint16_t>(t)[i] = floatToBf16(float(v));
      break;
    case CLEAVE_I64:
      ptr<int64_t>(t)[i] = int64_t(v);
      break;
    case CLEAVE_I32:
      ptr<int32_t>(t)[i] = int32_t(v);
      break;
    default:
      ptr<uint8_t>(t)[i] = v != 0;
    }
  }

  std::vector<double> values(const cleave_tensor &t) {
    std::vector<double> v(size_t(numElements(t)));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = get(t, int64_t(i));
    return v;
  }

  void setValues(const cleave_tensor &t, const std::vector<double> &v) {
    for (size_t i = 0; i < v.size(); ++i)
      set(t, int64_t(i), v[i]);
  }

  /// Uniform values in [lo, hi) (integers for integer dtypes), seeded;
  /// returns what was stored, as doubles.
  std::vector<double> fill(const cleave_tensor &t, double lo, double hi,
                           unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    int64_t n = numElements(t);
    for (int64_t i = 0; i < n; ++i) {
      double v = dist(gen);
      if (t.dtype == CLEAVE_I64 || t.dtype == CLEAVE_I32)
        v = std::floor(v);
      if (t.dtype == CLEAVE_I1)
        v = v < 0.5 * (lo + hi) ? 0 : 1;
      set(t, i, v);
    }
    return values(t);
  }

  static int64_t numElements(const cleave_tensor &t) {
    int64_t n = 1;
    for (int d = 0; d < t.rank; ++d)
      n *= t.shape[d];
    return n;
  }

private:
  size_t capacity;
  size_t used = 0;
  char *base;
};

inline Shape shapeOf(const cleave_tensor &t) {
  return Shape(t.shape, t.shape + t.rank);
}

/// The linear index into an operand of shape `op` that NumPy broadcasting
/// reads for linear index `i` of the output shape `out`.
inline int64_t broadcastIndex(const Shape &out, const Shape &op, int64_t i) {
  int64_t index = 0, stride = 1;
  int shift = int(out.size()) - int(op.size());
  for (int d = int(out.size()) - 1; d >= 0; --d) {
    int64_t coord = i % out[size_t(d)];
    i /= out[size_t(d)];
    int od = d - shift;
    if (od < 0)
      continue;
    if (op[size_t(od)] != 1)
      index += coord * stride;
    stride *= op[size_t(od)];
  }
  return index;
}

/// Expects |got - want| <= atol + rtol * |want| for every element (NaNs
/// must match), reporting the first few mismatches.
inline void expectClose(const std::vector<double> &got,
                        const std::vector<double> &want, double rtol,
                        double atol = 0.0, const std::string &what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 5; ++i) {
    bool ok = std::isnan(want[i])
                  ? std::isnan(got[i])
                  : (got[i] == want[i] || std::fabs(got[i] - want[i]) <=
                                              atol + rtol * std::fabs(want[i]));
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << " element " << i << ": got " << got[i]
                    << ", want " << want[i] << " (rtol " << rtol << ", atol "
                    << atol << ")";
    }
  }
}

/// expectClose, and with CLEAVE_TEST_PRINT_ERRORS set, a line with the
/// largest absolute error and the largest fraction of the tolerance used.
inline void check(const std::vector<double> &got,
                  const std::vector<double> &want, double rtol, double atol,
                  const std::string &what) {
  expectClose(got, want, rtol, atol, what);
  if (!std::getenv("CLEAVE_TEST_PRINT_ERRORS") || got.size() != want.size())
    return;
  double maxAbs = 0, maxFraction = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(got[i] - want[i]);
    if (std::isnan(err))
      continue;
    maxAbs = std::max(maxAbs, err);
    maxFraction =
        std::max(maxFraction, err / (atol + rtol * std::fabs(want[i])));
  }
  std::printf("[ max error ] %s: abs %.2e, %.1f%% of tolerance\n", what.c_str(),
              maxAbs, 100 * maxFraction);
}

/// A kernel call that must end the process with status 1 and a message
/// matching `regex`. The thread-safe style re-executes the test binary, so
/// OpenMP threads in the parent do not matter.
#define EXPECT_RT_FAIL(statement, regex)                                       \
  do {                                                                         \
    GTEST_FLAG_SET(death_test_style, "threadsafe");                            \
    EXPECT_EXIT(statement, ::testing::ExitedWithCode(1), regex);               \
  } while (0)

/// Expects the stderr of a ScratchDirTest's last run to contain `text`,
/// and shows that stderr when it does not.
#define EXPECT_ERR_HAS(text) EXPECT_NE(err.find(text), std::string::npos) << err

/// A test with a folder of its own (GoogleTest's temporary directory, the
/// prefix, the test's name and the process id), in which it runs programs.
/// The folder goes with a passing test; a failing one keeps it to look at.
class ScratchDirTest : public ::testing::Test {
protected:
  explicit ScratchDirTest(std::string prefix) : prefix(std::move(prefix)) {}

  void SetUp() override {
    const ::testing::TestInfo *info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    dir = ::testing::TempDir() + prefix + info->name() + "_" +
          std::to_string(::getpid());
    ASSERT_EQ(
        std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()),
        0);
  }
  void TearDown() override {
    if (!HasFailure())
      std::system(("rm -rf '" + dir + "'").c_str());
  }

  /// Runs `exe` with `args` in `dir` (environment assignments in `env`);
  /// returns the exit status and leaves stdout and stderr in `out`, `err`.
  int run(const std::string &exe, const std::string &args,
          const std::string &env = "") {
    std::string cmd = "cd '" + dir + "' && " + env + " " + exe + " " + args +
                      " >stdout.txt 2>stderr.txt";
    int status = std::system(cmd.c_str());
    out = slurp("stdout.txt");
    err = slurp("stderr.txt");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  /// The bytes of `file` in `dir` ("" when it cannot be read).
  std::string slurp(const std::string &file) {
    std::ifstream in(dir + "/" + file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string dir, out, err;

private:
  std::string prefix;
};

} // namespace cleave::rt::test

#endif // CLEAVE_TEST_UNITTESTS_RUNTIME_RUNTIMETESTUTIL_H
