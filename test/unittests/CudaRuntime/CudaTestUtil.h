//===- CudaTestUtil.h - CUDA kernels against the CPU backend ----*- C++ -*-===//
//
// Every CUDA kernel test builds seeded random inputs in a host TestArena,
// copies the arena to a device arena of the CUDA backend, makes the same
// call with the same descriptors on both backends (the CPU backend's
// kernels are linked renamed cleave_cpu_ref_*, see runtime/CMakeLists.txt),
// reads the device arena back and compares the outputs allclose-style:
//   |cuda - cpu| <= rtol |cpu| + atol max |cpu|
// with (rtol, atol) = (1e-4, 1e-5) for f32 and (1e-2, 1e-2) for f16/bf16,
// and exact equality for integer and i1 outputs (NaN must match NaN). The
// atol term is relative to the largest magnitude of the tensor: elements
// that cancel (a matmul output near zero, a norm's gradient) are only as
// accurate as the tensor's scale. Elementwise f32 results use 1e-4 relative
// plus 1e-6 absolute instead. Every test skips where no CUDA device is
// present.
//
// Without a device, CLEAVE_CUDA_TESTS_CPU_ONLY=1 runs every test on the CPU
// side alone (compared with itself, death tests skipped): a check of the
// test cases, that each call is valid for the reference backend.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_UNITTESTS_CUDARUNTIME_CUDATESTUTIL_H
#define CLEAVE_TEST_UNITTESTS_CUDARUNTIME_CUDATESTUTIL_H

#include "RuntimeTestUtil.h"

#include "cleave/Runtime/cleave_cpu_ref.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace cleave::rt::test {

/// Why the CUDA backend cannot run here ("" when a device is present).
inline const std::string &noDeviceReason() {
  static const std::string reason = [] {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess)
      return std::string(cudaGetErrorName(status)) + ": " +
             cudaGetErrorString(status);
    if (count == 0)
      return std::string("cudaGetDeviceCount found 0 devices");
    return std::string();
  }();
  return reason;
}

/// Whether the tests run the CPU side alone (no device, and
/// CLEAVE_CUDA_TESTS_CPU_ONLY set to anything but 0).
inline bool cpuOnly() {
  static const bool on = [] {
    const char *env = std::getenv("CLEAVE_CUDA_TESTS_CPU_ONLY");
    return !noDeviceReason().empty() && env && std::string(env) != "0";
  }();
  return on;
}

/// The fixture of every test here: skips without a device.
class CudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!noDeviceReason().empty() && !cpuOnly())
      GTEST_SKIP() << "no CUDA device: " << noDeviceReason();
  }
};

/// For the tests that call the CUDA backend directly.
#define SKIP_IN_CPU_ONLY_MODE()                                                \
  do {                                                                         \
    if (cpuOnly())                                                             \
      GTEST_SKIP() << "calls the CUDA backend directly";                       \
  } while (0)

/// |cuda - cpu| <= rtol |cpu| + atol (times max |cpu| when atolOfMax).
struct Tolerance {
  double rtol, atol;
  bool atolOfMax = true;
};

/// The default comparison of outputs of `dtype` (see the file comment).
inline Tolerance defaultTolerance(int32_t dtype) {
  switch (dtype) {
  case CLEAVE_F32:
    return {1e-4, 1e-5};
  case CLEAVE_F16:
  case CLEAVE_BF16:
    return {1e-2, 1e-2};
  default:
    return {0, 0};
  }
}

/// Elementwise results have no cancellation to allow for: f32 within 1e-4
/// relative plus 1e-6 absolute, whatever the tensor's largest magnitude.
inline Tolerance elementwiseTolerance(int32_t dtype) {
  if (dtype == CLEAVE_F32)
    return {1e-4, 1e-6, false};
  return defaultTolerance(dtype);
}

/// An arena capacity for tensors of these shapes (of up to 8-byte
/// elements) and a few small ones: the arenas are allocated and zeroed
/// whole, so large tests ask for what they use.
inline size_t capacityFor(std::initializer_list<Shape> shapes) {
  size_t bytes = size_t(1) << 16;
  for (const Shape &s : shapes)
    bytes += (size_t(product(s)) * 8 + 63) / 64 * 64;
  return bytes;
}

/// A host arena and its copy on the device. Tensors are added and filled on
/// the host; the first `run` copies the arena to the device, then each run
/// calls the CUDA kernel on the device arena and the CPU kernel on the host
/// arena with the same arguments. `expectMatch` reads the device arena back
/// and compares a tensor of both.
class DevicePair {
public:
  explicit DevicePair(size_t capacity = size_t(8) << 20)
      : host(capacity), back(capacity),
        capacity(int64_t((capacity + 63) / 64 * 64)) {}
  ~DevicePair() {
    if (device)
      cleave_rt_arena_free(device);
  }
  DevicePair(const DevicePair &) = delete;
  DevicePair &operator=(const DevicePair &) = delete;

  cleave_tensor add(int32_t dtype, const Shape &shape) {
    cleave_tensor t = host.add(dtype, shape);
    back.add(dtype, shape);
    int64_t end = t.offset + product(shape) * int64_t(byteSize(dtype));
    extent = std::max(extent, (end + 63) / 64 * 64);
    return t;
  }

  /// Seeded uniform values in [lo, hi) on both sides; returns them.
  std::vector<double> fill(const cleave_tensor &t, double lo, double hi,
                           unsigned seed) {
    std::vector<double> v = host.fill(t, lo, hi, seed);
    writeDevice(t);
    return v;
  }
  /// The same values on both sides.
  void setValues(const cleave_tensor &t, const std::vector<double> &v) {
    host.setValues(t, v);
    writeDevice(t);
  }

  /// Copies the host arena to the device (once: later writes go through
  /// fill and setValues). The device arena has the host's whole capacity,
  /// so tensors added after the first kernel call fit too.
  void upload() {
    if (device || cpuOnly())
      return;
    device = cleave_rt_arena_alloc(capacity);
    cleave_rt_arena_write(device, 0, host.data(), extent);
  }

  /// Calls `gpu` on the device arena and `cpu` on the host arena, both with
  /// `args`.
  template <typename... P, typename... A>
  void run(void (*cpu)(char *, P...), void (*gpu)(char *, P...), A... args) {
    upload();
    if (!cpuOnly())
      gpu(device, args...);
    cpu(host.data(), args...);
  }

  /// The values of t on each side (the device's as read back now).
  std::vector<double> cudaValues(const cleave_tensor &t) {
    download();
    return back.values(t);
  }
  std::vector<double> cpuValues(const cleave_tensor &t) {
    return host.values(t);
  }

  /// Compares t on both sides with `tol` (default: by its dtype).
  void expectMatch(const cleave_tensor &t, const std::string &what) {
    expectMatch(t, what, defaultTolerance(t.dtype));
  }
  void expectMatch(const cleave_tensor &t, const std::string &what,
                   Tolerance tol) {
    if (t.dtype == CLEAVE_I64 || t.dtype == CLEAVE_I32 || t.dtype == CLEAVE_I1)
      return expectSameIntegers(t, what);
    std::vector<double> want = cpuValues(t), got = cudaValues(t);
    double scale = 1;
    if (tol.atolOfMax) {
      scale = 0;
      for (double w : want)
        if (std::isfinite(w))
          scale = std::max(scale, std::fabs(w));
    }
    check(got, want, tol.rtol, tol.atol * scale, what);
  }

  /// Integer and i1 outputs: the same values, compared as integers.
  void expectSameIntegers(const cleave_tensor &t, const std::string &what) {
    download();
    int64_t n = TestArena::numElements(t);
    int failures = 0;
    for (int64_t i = 0; i < n && failures < 5; ++i) {
      int64_t want = integerAt(host, t, i), got = integerAt(back, t, i);
      if (got != want) {
        ++failures;
        ADD_FAILURE() << what << " element " << i << ": got " << got
                      << ", want " << want << " (exact)";
      }
    }
  }

  char *deviceArena() {
    upload();
    return device;
  }
  TestArena &hostArena() { return host; }

private:
  static int64_t integerAt(TestArena &arena, const cleave_tensor &t,
                           int64_t i) {
    switch (t.dtype) {
    case CLEAVE_I64:
      return arena.ptr<int64_t>(t)[i];
    case CLEAVE_I32:
      return arena.ptr<int32_t>(t)[i];
    default:
      return arena.ptr<uint8_t>(t)[i];
    }
  }
  void writeDevice(const cleave_tensor &t) {
    if (!device)
      return;
    int64_t bytes = TestArena::numElements(t) * int64_t(byteSize(t.dtype));
    cleave_rt_arena_write(device, t.offset, host.data() + t.offset, bytes);
  }
  void download() {
    upload();
    if (cpuOnly())
      std::memcpy(back.data(), host.data(), size_t(extent));
    else
      cleave_rt_arena_read(device, 0, back.data(), extent);
  }

  TestArena host, back;
  char *device = nullptr;
  int64_t extent = 0;
  int64_t capacity; // of both arenas, in bytes
};

/// Runs `kernel` of both backends on `pair` with the same arguments, e.g.
/// CUDA_AND_CPU(p, unary, CLEAVE_EXP, &x, &out).
#define CUDA_AND_CPU(pair, kernel, ...)                                        \
  (pair).run(cleave_cpu_ref_##kernel, cleave_rt_##kernel, __VA_ARGS__)

/// "f32", "bf16", ...: for the messages of the tests.
inline const char *dtypeName(int32_t dtype) {
  static const char *names[] = {"f32", "f16", "bf16", "i64", "i32", "i1"};
  return dtype >= 0 && dtype <= CLEAVE_I1 ? names[dtype] : "?";
}

} // namespace cleave::rt::test

#endif // CLEAVE_TEST_UNITTESTS_CUDARUNTIME_CUDATESTUTIL_H
