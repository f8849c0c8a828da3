//===- NpyTest.cpp - .npy reading and writing -----------------------------===//
//
// Round trips of every dtype, the header layout, version 2.0 headers, each
// error (missing file, bad magic, truncation, Fortran order, big-endian,
// wrong dtype, wrong shape), and interoperability with NumPy itself when
// /usr/bin/python3 has it.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include "cleave/Runtime/Npy.h"

#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

using namespace cleave::rt;
using namespace cleave::rt::test;

namespace {

/// The folder of this process's test files, removed when the tests end.
class TempFolder : public ::testing::Environment {
public:
  const std::string &path() {
    if (dir.empty()) {
      dir = ::testing::TempDir() + "cleave_npy_test_" +
            std::to_string(::getpid());
      std::filesystem::create_directories(dir);
    }
    return dir;
  }
  void TearDown() override {
    if (!dir.empty())
      std::filesystem::remove_all(dir);
  }

private:
  std::string dir;
};

TempFolder *const tempFolder = static_cast<TempFolder *>(
    ::testing::AddGlobalTestEnvironment(new TempFolder));

std::string tempDir() { return tempFolder->path(); }

std::string tempPath(const std::string &name) { return tempDir() + "/" + name; }

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), std::streamsize(bytes.size()));
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A v1 .npy file with the given header dict and payload.
std::string npyFile(const std::string &dict, const std::string &payload,
                    int version = 1) {
  std::string head = "\x93NUMPY";
  head += char(version);
  head += char(0);
  size_t n = dict.size();
  head += char(n & 0xff);
  head += char(n >> 8);
  if (version > 1)
    head += std::string(2, '\0');
  return head + dict + payload;
}

TEST(RuntimeNpy, RoundTripEveryDtype) {
  const Shape shapes[] = {{}, {7}, {2, 3, 4}};
  for (int32_t dtype : {CLEAVE_F32, CLEAVE_F16, CLEAVE_BF16, CLEAVE_I64,
                        CLEAVE_I32, CLEAVE_I1}) {
    for (const Shape &shape : shapes) {
      TestArena arena;
      cleave_tensor t = arena.add(dtype, shape);
      cleave_tensor back = arena.add(dtype, shape);
      std::vector<double> v = arena.fill(t, -100, 100, unsigned(dtype));
      std::string path = tempPath("rt" + std::to_string(dtype) + ".npy");
      std::string error;
      ASSERT_TRUE(saveTensorNpy(path, t, arena.data() + t.offset, error))
          << error;
      ASSERT_TRUE(loadTensorNpy(path, back, arena.data() + back.offset, error))
          << error;
      expectClose(arena.values(back), v, 0);
      NpyArray array;
      ASSERT_TRUE(readNpy(path, array, error)) << error;
      EXPECT_EQ(array.descr, npyDescr(dtype));
      EXPECT_EQ(array.shape, shape);
      // The data starts 64-byte aligned.
      std::string bytes = readBytes(path);
      EXPECT_EQ((bytes.size() - array.data.size()) % 64, 0u);
    }
  }
}

TEST(RuntimeNpy, HeaderText) {
  int32_t values[3] = {1, 2, 3};
  std::string error;
  std::string path = tempPath("header.npy");
  ASSERT_TRUE(writeNpy(path, "<i4", {3}, values, sizeof(values), error));
  std::string bytes = readBytes(path);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  std::string dict =
      "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }";
  EXPECT_EQ(bytes.substr(10, dict.size()), dict);
  // Padded with spaces to a 64-byte multiple (here 128), like NumPy.
  EXPECT_EQ(bytes.substr(10 + dict.size(), 128 - 11 - dict.size()),
            std::string(128 - 11 - dict.size(), ' '));
  EXPECT_EQ(bytes[127], '\n');
  EXPECT_EQ(bytes.size(), 128u + 12u);
}

TEST(RuntimeNpy, ReadsVersion2AndPythonVariants) {
  std::string payload(8, '\0');
  payload[0] = 5;
  payload[4] = 6;
  std::string path = tempPath("v2.npy");
  writeBytes(path, npyFile("{\"descr\":\"<i4\",\"shape\":(2L,),"
                           "\"fortran_order\":False}\n",
                           payload, 2));
  NpyArray array;
  std::string error;
  ASSERT_TRUE(readNpy(path, array, error)) << error;
  EXPECT_EQ(array.descr, "<i4");
  EXPECT_EQ(array.shape, Shape({2}));
  EXPECT_EQ(array.data[4], 6);
}

void expectReadError(const std::string &name, const std::string &contents,
                     const std::string &needle) {
  std::string path = tempPath(name);
  writeBytes(path, contents);
  NpyArray array;
  std::string error;
  EXPECT_FALSE(readNpy(path, array, error));
  EXPECT_NE(error.find(path + ": "), std::string::npos) << error;
  EXPECT_NE(error.find(needle), std::string::npos) << error;
}

TEST(RuntimeNpy, ReadErrors) {
  NpyArray array;
  std::string error;
  EXPECT_FALSE(readNpy(tempPath("missing.npy"), array, error));
  EXPECT_NE(error.find("missing.npy: cannot open: No such file"),
            std::string::npos)
      << error;
  expectReadError("magic.npy", "PK\x03\x04 not numpy", "bad magic");
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
  expectReadError("short.npy", npyFile(dict, std::string(10, 'x')),
                  "truncated data: expected 16 bytes for shape [4] of '<f4', "
                  "got 10");
  expectReadError("fortran.npy",
                  npyFile("{'descr': '<f4', 'fortran_order': True, 'shape': "
                          "(2, 2), }",
                          std::string(16, 'x')),
                  "fortran_order arrays are not supported");
  expectReadError("big.npy",
                  npyFile("{'descr': '>f4', 'fortran_order': False, 'shape': "
                          "(1,), }",
                          std::string(4, 'x')),
                  "big-endian dtype '>f4' is not supported");
  expectReadError("struct.npy",
                  npyFile("{'descr': [('a', '<f4')], 'fortran_order': False, "
                          "'shape': (1,), }",
                          std::string(4, 'x')),
                  "structured arrays are not supported");
  expectReadError("header.npy", std::string("\x93NUMPY\x01\x00\xff\x00{", 11),
                  "truncated header");
  // Sizes from a corrupt header are checked against the file, not
  // allocated.
  expectReadError("huge.npy",
                  npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': "
                          "(1000000000000,), }",
                          std::string(8, 'x')),
                  "truncated data: expected 4000000000000 bytes");
  expectReadError("overflow.npy",
                  npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': "
                          "(4611686018427387904, 4611686018427387904), }",
                          ""),
                  "is too large");
}

TEST(RuntimeNpy, TensorMismatchErrors) {
  TestArena arena;
  cleave_tensor t = arena.add(CLEAVE_F32, {2, 3});
  std::string path = tempPath("mismatch.npy");
  std::string error;
  double values[6] = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(writeNpy(path, "<f8", {2, 3}, values, sizeof(values), error));
  EXPECT_FALSE(loadTensorNpy(path, t, arena.data() + t.offset, error));
  EXPECT_EQ(error, path + ": expected dtype f32 ('<f4'), got '<f8'");
  ASSERT_TRUE(writeNpy(path, "<f4", {3, 2}, values, 24, error));
  EXPECT_FALSE(loadTensorNpy(path, t, arena.data() + t.offset, error));
  EXPECT_EQ(error, path + ": expected shape [2, 3], got [3, 2]");
}

/// Whether /usr/bin/python3 has NumPy (scripts/setup.sh installs it).
bool havePythonNumpy() {
  return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

TEST(RuntimeNpy, NumpyReadsOurFilesAndWeReadTheirs) {
  ASSERT_TRUE(havePythonNumpy())
      << "/usr/bin/python3 has no numpy, which scripts/setup.sh installs "
         "(python3-numpy)";
  TestArena arena;
  cleave_tensor f = arena.add(CLEAVE_F32, {2, 3});
  cleave_tensor h = arena.add(CLEAVE_F16, {4});
  cleave_tensor b = arena.add(CLEAVE_I1, {3});
  arena.setValues(f, {1.5, -2, 3, 4, 5, 6.25});
  arena.setValues(h, {0.5, -1, 65504, 1e-7});
  arena.setValues(b, {1, 0, 1});
  std::string error;
  ASSERT_TRUE(saveTensorNpy(tempPath("f.npy"), f, arena.ptr<char>(f), error));
  ASSERT_TRUE(saveTensorNpy(tempPath("h.npy"), h, arena.ptr<char>(h), error));
  ASSERT_TRUE(saveTensorNpy(tempPath("b.npy"), b, arena.ptr<char>(b), error));
  std::string dir = tempDir();
  std::string script =
      "import numpy as np, sys\n"
      "d = sys.argv[1]\n"
      "f = np.load(d + '/f.npy'); h = np.load(d + '/h.npy'); b = np.load(d + "
      "'/b.npy')\n"
      "assert f.dtype == np.float32 and f.shape == (2, 3), f\n"
      "assert (f == np.array([[1.5, -2, 3], [4, 5, 6.25]], np.float32)).all()\n"
      "assert h.dtype == np.float16 and (h == np.array([0.5, -1, 65504, 1e-7], "
      "np.float16)).all(), h\n"
      "assert b.dtype == np.bool_ and list(b) == [True, False, True]\n"
      "np.save(d + '/np_i8.npy', np.arange(12, dtype=np.int64).reshape(3, 4) - "
      "5)\n"
      "np.save(d + '/np_scalar.npy', np.float32(2.5))\n"
      "np.save(d + '/np_f.npy', np.asfortranarray(np.ones((2, 2), "
      "np.float32)))\n";
  writeBytes(tempPath("check.py"), script);
  ASSERT_EQ(
      std::system(
          ("/usr/bin/python3 " + tempPath("check.py") + " " + dir).c_str()),
      0);
  cleave_tensor i8 = arena.add(CLEAVE_I64, {3, 4});
  ASSERT_TRUE(
      loadTensorNpy(tempPath("np_i8.npy"), i8, arena.ptr<char>(i8), error))
      << error;
  for (int64_t i = 0; i < 12; ++i)
    EXPECT_EQ(arena.get(i8, i), double(i - 5));
  cleave_tensor s = arena.add(CLEAVE_BF16, {});
  ASSERT_TRUE(
      loadTensorNpy(tempPath("np_scalar.npy"), s, arena.ptr<char>(s), error))
      << error;
  EXPECT_EQ(arena.get(s, 0), 2.5);
  cleave_tensor ff = arena.add(CLEAVE_F32, {2, 2});
  EXPECT_FALSE(
      loadTensorNpy(tempPath("np_f.npy"), ff, arena.ptr<char>(ff), error));
  EXPECT_NE(error.find("fortran_order arrays are not supported"),
            std::string::npos);
}

} // namespace
