//===- ProgramTest.cpp - the runtime main, end to end ---------------------===//
//
// Runs the CleaveRuntimeFakeProgram executable (FakeProgram.cpp linked with
// cleave_rt_main) as a subprocess: inputs by name and by position, the
// parameter read from a weights file, outputs written as .npy, the ABI
// version check, and each user error reported as "error: ..." with a
// non-zero exit status.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include "cleave/Runtime/Npy.h"

#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cleave::rt;
using namespace cleave::rt::test;

namespace {

class RuntimeProgram : public ScratchDirTest {
protected:
  RuntimeProgram() : ScratchDirTest("cleave_program_") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    if (HasFatalFailure())
      return;
    // v = [10, 20, 30] after 8 bytes of padding.
    float v[3] = {10, 20, 30};
    std::ofstream weights(dir + "/fake_weights.bin", std::ios::binary);
    weights.write("padding!", 8);
    weights.write(reinterpret_cast<const char *>(v), sizeof(v));
    weights.close();
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {2, 4, 6};
    std::string error;
    ASSERT_TRUE(writeNpy(dir + "/a.npy", "<f4", {2, 3}, a, sizeof(a), error));
    ASSERT_TRUE(writeNpy(dir + "/b.npy", "<f4", {3}, b, sizeof(b), error));
  }

  /// Runs the program (or `exe`) in `dir` with `args`.
  int run(const std::string &args,
          const std::string &exe = CLEAVE_FAKE_PROGRAM) {
    return ScratchDirTest::run(exe, args);
  }

  void expectSum() {
    NpyArray sum;
    std::string error;
    ASSERT_TRUE(readNpy(dir + "/out/sum.npy", sum, error)) << error;
    EXPECT_EQ(sum.descr, "<f4");
    EXPECT_EQ(sum.shape, Shape({2, 3}));
    const float *s = reinterpret_cast<const float *>(sum.data.data());
    // a + b * w + v with w = [0.5, -1, 2], v = [10, 20, 30].
    float want[6] = {1 + 1 + 10, 2 - 4 + 20, 3 + 12 + 30,
                     4 + 1 + 10, 5 - 4 + 20, 6 + 12 + 30};
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(s[i], want[i]) << i;
  }
};

TEST_F(RuntimeProgram, NamedInputs) {
  ASSERT_EQ(run("--input b=b.npy --input a=a.npy --output-dir out"), 0) << err;
  expectSum();
  NpyArray idx;
  std::string error;
  ASSERT_TRUE(readNpy(dir + "/out/model_idx_0.npy", idx, error)) << error;
  EXPECT_EQ(idx.descr, "<i8");
  const int64_t *v = reinterpret_cast<const int64_t *>(idx.data.data());
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(v[i], i % 3);
}

TEST_F(RuntimeProgram, PositionalInputsAndNestedOutputDir) {
  ASSERT_EQ(run("--input a.npy --input=b.npy --output-dir=out"), 0) << err;
  expectSum();
  ASSERT_EQ(run("--input b=b.npy --input a.npy --output-dir deep/er/out"), 0)
      << err;
  struct stat st;
  EXPECT_EQ(::stat((dir + "/deep/er/out/sum.npy").c_str(), &st), 0);
}

TEST_F(RuntimeProgram, Help) {
  ASSERT_EQ(run("--help"), 0);
  EXPECT_NE(out.find("usage:"), std::string::npos) << out;
  EXPECT_NE(out.find("model/idx:0  i64 [2, 3]"), std::string::npos) << out;
}

TEST_F(RuntimeProgram, UserErrors) {
  EXPECT_EQ(run("--input a=a.npy --output-dir out"), 1);
  EXPECT_ERR_HAS("error: missing input 'b'");

  EXPECT_EQ(run("--input a=b.npy --input b=b.npy --output-dir out"), 1);
  EXPECT_ERR_HAS("error: input 'a': b.npy: expected shape [2, 3], got "
                 "[3]");

  EXPECT_EQ(run("--input a=a.npy --input b=nope.npy --output-dir out"), 1);
  EXPECT_ERR_HAS("nope.npy: cannot open");

  EXPECT_EQ(run("--input a.npy --input b.npy --input a.npy --output-dir o"), 1);
  EXPECT_ERR_HAS("error: too many inputs");

  EXPECT_EQ(run("--input a=a.npy --input a=a.npy --output-dir o"), 1);
  EXPECT_ERR_HAS("error: input 'a' is given twice");

  EXPECT_EQ(run("--input a.npy --input b.npy"), 1);
  EXPECT_ERR_HAS("error: missing --output-dir");

  EXPECT_EQ(run("--frobnicate"), 1);
  EXPECT_ERR_HAS("error: unknown argument '--frobnicate'");
}

TEST_F(RuntimeProgram, AbiVersion) {
  EXPECT_EQ(run("--help", CLEAVE_FAKE_PROGRAM_ABI1), 1);
  EXPECT_ERR_HAS("error: the program was compiled for runtime ABI version 1 "
                 "but this runtime implements " +
                 std::to_string(CLEAVE_RT_ABI_VERSION) +
                 ": compile it again with the cleave-compile of this runtime");
}

TEST_F(RuntimeProgram, WrongDtypeInput) {
  int64_t ints[3] = {1, 2, 3};
  std::string error;
  ASSERT_TRUE(writeNpy(dir + "/bi.npy", "<i8", {3}, ints, sizeof(ints), error));
  EXPECT_EQ(run("--input a.npy --input bi.npy --output-dir out"), 1);
  EXPECT_ERR_HAS("error: input 'b': bi.npy: expected dtype f32 ('<f4'), "
                 "got '<i8'");
}

TEST_F(RuntimeProgram, MissingOrShortWeights) {
  // Truncate the weights: 8 bytes of padding and one float.
  ASSERT_EQ(::truncate((dir + "/fake_weights.bin").c_str(), 12), 0);
  EXPECT_EQ(run("--input a.npy --input b.npy --output-dir out"), 1);
  EXPECT_ERR_HAS("fake_weights.bin: parameter 'v' needs 12 bytes at "
                 "offset 8, the file has 4");
  ASSERT_EQ(::unlink((dir + "/fake_weights.bin").c_str()), 0);
  EXPECT_EQ(run("--input a.npy --input b.npy --output-dir out"), 1);
  EXPECT_ERR_HAS("fake_weights.bin: cannot open the initial value of "
                 "parameter 'v'");
}

} // namespace
