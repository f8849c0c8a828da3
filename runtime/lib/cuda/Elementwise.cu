//===- Elementwise.cu - elementwise CUDA kernels --------------------------===//
//
// copy, constant, iota, unary, binary, compare, where and cast on the GPU,
// with NumPy broadcasting from the operand shapes to the output shape. As in
// the CPU kernels (runtime/lib/cpu/Elementwise.cpp, the reference), float
// outputs compute in f32 and integer outputs in i64, converting each operand
// on load. The op is a template argument, so the per-element body is a small
// inlined functor; the dtype switches of the loads and stores take the same
// branch in every thread.
//
//===----------------------------------------------------------------------===//

#include "CudaCommon.cuh"
#include "KernelUtil.cuh"

#include "../cpu/Tensor.h"

#include <cstring>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace cleave::rt::cuda {
namespace {

const char *unaryName(int32_t op) {
  const char *name = cleave_unary_name(op);
  return name ? name : "unknown";
}

/// The device bytes of operand `t`, copied aside when they overlap `out`
/// other than as the same elements: every kernel here reads element i of an
/// operand of out's size before writing element i of out, so only a partial
/// overlap needs the copy.
const char *operandData(char *arena, const cleave_tensor &t,
                        const cleave_tensor &out, ScratchBuffer &scratch,
                        const char *kernel) {
  const char *data = dataOf(arena, t);
  bool same = t.offset == out.offset &&
              elementSize(t.dtype) == elementSize(out.dtype) &&
              numElements(t) == numElements(out);
  if (same || !overlaps(t, out))
    return data;
  return copyToScratch(scratch, data,
                       size_t(numElements(t)) * elementSize(t.dtype), kernel);
}

/// A plan that reads every operand contiguously over `n` elements (for the
/// kernels whose operands are reshapes of the output, not broadcasts).
Broadcast contiguousPlan(int64_t n, int numOperands) {
  Broadcast b{};
  b.rank = 1;
  b.shape[0] = n;
  for (int k = 0; k < numOperands; ++k)
    b.strides[k][0] = 1;
  return b;
}

//===----------------------------------------------------------------------===//
// Op bodies
//===----------------------------------------------------------------------===//

template <int Op> __device__ inline float unaryF32(float v) {
  if constexpr (Op == CLEAVE_NEG)
    return -v;
  else if constexpr (Op == CLEAVE_ABS)
    return fabsf(v);
  else if constexpr (Op == CLEAVE_RELU)
    return v > 0.0f ? v : 0.0f;
  else if constexpr (Op == CLEAVE_EXP)
    return expf(v);
  else if constexpr (Op == CLEAVE_LOG)
    return logf(v);
  else if constexpr (Op == CLEAVE_SQRT)
    return sqrtf(v);
  else if constexpr (Op == CLEAVE_RSQRT)
    return 1.0f / sqrtf(v);
  else if constexpr (Op == CLEAVE_RECIPROCAL)
    return 1.0f / v;
  else if constexpr (Op == CLEAVE_TANH)
    return tanhf(v);
  else if constexpr (Op == CLEAVE_ERF)
    return erff(v);
  else if constexpr (Op == CLEAVE_SIGMOID)
    return sigmoidF32(v);
  else if constexpr (Op == CLEAVE_SILU)
    return v * sigmoidF32(v);
  else if constexpr (Op == CLEAVE_SIN)
    return sinf(v);
  else if constexpr (Op == CLEAVE_COS)
    return cosf(v);
  else if constexpr (Op == CLEAVE_GELU_ERF)
    return geluErfF32(v);
  else {
    static_assert(Op == CLEAVE_GELU_TANH, "unknown unary op");
    return geluTanhF32(v);
  }
}

/// The integer unary ops; negation wraps (computed unsigned).
template <int Op> __device__ inline int64_t unaryI64(int64_t v) {
  if constexpr (Op == CLEAVE_NEG)
    return int64_t(0 - uint64_t(v));
  else if constexpr (Op == CLEAVE_ABS)
    return v < 0 ? int64_t(0 - uint64_t(v)) : v;
  else {
    static_assert(Op == CLEAVE_RELU, "no integer unary op");
    return v > 0 ? v : 0;
  }
}

template <int Op> __device__ inline float binaryF32(float x, float y) {
  if constexpr (Op == CLEAVE_ADD)
    return x + y;
  else if constexpr (Op == CLEAVE_SUB)
    return x - y;
  else if constexpr (Op == CLEAVE_MUL)
    return x * y;
  else if constexpr (Op == CLEAVE_DIV)
    return x / y;
  else if constexpr (Op == CLEAVE_POW)
    return powf(x, y);
  // max/min propagate NaN like NumPy's maximum/minimum.
  else if constexpr (Op == CLEAVE_MAX)
    return (x > y || x != x) ? x : y;
  else {
    static_assert(Op == CLEAVE_MIN, "unknown binary op");
    return (x < y || x != x) ? x : y;
  }
}

/// Integer power by squaring; a negative exponent truncates 1/x^-e toward
/// zero (so only |x| == 1 gives a nonzero result).
__device__ inline int64_t intPow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1)
      return 1;
    if (base == -1)
      return (exp & 1) ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, b = uint64_t(base);
  while (exp) {
    if (exp & 1)
      result *= b;
    b *= b;
    exp >>= 1;
  }
  return int64_t(result);
}

/// Integer binary ops; add, sub and mul wrap (computed unsigned). A zero
/// divisor raises kIntegerDivideByZero through `slot` and gives 0.
template <int Op>
__device__ inline int64_t binaryI64(int64_t x, int64_t y, DeviceError *slot) {
  if constexpr (Op == CLEAVE_ADD)
    return int64_t(uint64_t(x) + uint64_t(y));
  else if constexpr (Op == CLEAVE_SUB)
    return int64_t(uint64_t(x) - uint64_t(y));
  else if constexpr (Op == CLEAVE_MUL)
    return int64_t(uint64_t(x) * uint64_t(y));
  else if constexpr (Op == CLEAVE_DIV) {
    if (y == 0) {
      raiseError(slot, kIntegerDivideByZero, kBinary, 0, 0);
      return 0;
    }
    return (x == INT64_MIN && y == -1) ? INT64_MIN : x / y;
  } else if constexpr (Op == CLEAVE_POW)
    return intPow(x, y);
  else if constexpr (Op == CLEAVE_MAX)
    return x > y ? x : y;
  else {
    static_assert(Op == CLEAVE_MIN, "unknown binary op");
    return x < y ? x : y;
  }
}

template <int Dir, typename T> __device__ inline bool compareOp(T x, T y) {
  if constexpr (Dir == CLEAVE_EQ)
    return x == y;
  else if constexpr (Dir == CLEAVE_NE)
    return x != y;
  else if constexpr (Dir == CLEAVE_LT)
    return x < y;
  else if constexpr (Dir == CLEAVE_LE)
    return x <= y;
  else if constexpr (Dir == CLEAVE_GT)
    return x > y;
  else {
    static_assert(Dir == CLEAVE_GE, "unknown compare direction");
    return x >= y;
  }
}

//===----------------------------------------------------------------------===//
// Functors (the bodies of broadcastKernel)
//===----------------------------------------------------------------------===//

template <int Op, bool Float> struct UnaryBody {
  const char *x;
  int32_t xType;
  char *out;
  int32_t outType;

  template <typename Index>
  __device__ void operator()(int64_t o, const Index (&off)[1]) const {
    if constexpr (Float)
      storeF32(out, outType, o, unaryF32<Op>(loadF32(x, xType, off[0])));
    else
      storeI64(out, outType, o, unaryI64<Op>(loadI64(x, xType, off[0])));
  }
};

/// The operands of binary and compare.
struct BinaryArgs {
  const char *a, *b;
  int32_t aType, bType;
  char *out;
  int32_t outType;
  DeviceError *slot; ///< integer division by zero
};

template <int Op, bool Float> struct BinaryBody {
  BinaryArgs p;

  template <typename Index>
  __device__ void operator()(int64_t o, const Index (&off)[2]) const {
    if constexpr (Float)
      storeF32(p.out, p.outType, o,
               binaryF32<Op>(loadF32(p.a, p.aType, off[0]),
                             loadF32(p.b, p.bType, off[1])));
    else
      storeI64(p.out, p.outType, o,
               binaryI64<Op>(loadI64(p.a, p.aType, off[0]),
                             loadI64(p.b, p.bType, off[1]), p.slot));
  }
};

template <int Dir, bool Int> struct CompareBody {
  BinaryArgs p;

  template <typename Index>
  __device__ void operator()(int64_t o, const Index (&off)[2]) const {
    bool r;
    if constexpr (Int)
      r = compareOp<Dir>(loadI64(p.a, p.aType, off[0]),
                         loadI64(p.b, p.bType, off[1]));
    else
      r = compareOp<Dir>(loadF32(p.a, p.aType, off[0]),
                         loadF32(p.b, p.bType, off[1]));
    reinterpret_cast<uint8_t *>(p.out)[o] = r ? 1 : 0;
  }
};

template <bool Float> struct WhereBody {
  const char *cond, *x, *y;
  int32_t condType, xType, yType;
  char *out;
  int32_t outType;

  template <typename Index>
  __device__ void operator()(int64_t o, const Index (&off)[3]) const {
    bool c = loadBool(cond, condType, off[0]);
    if constexpr (Float)
      storeF32(out, outType, o,
               c ? loadF32(x, xType, off[1]) : loadF32(y, yType, off[2]));
    else
      storeI64(out, outType, o,
               c ? loadI64(x, xType, off[1]) : loadI64(y, yType, off[2]));
  }
};

/// How cast converts: to i1 (nonzero), through f32 (a float out) or through
/// i64 (an integer out; floats truncate).
enum class CastMode { Bool, Float, Int };

template <CastMode Mode> struct CastBody {
  const char *x;
  int32_t xType;
  char *out;
  int32_t outType;

  template <typename Index>
  __device__ void operator()(int64_t o, const Index (&off)[1]) const {
    if constexpr (Mode == CastMode::Bool)
      reinterpret_cast<uint8_t *>(out)[o] = loadBool(x, xType, off[0]) ? 1 : 0;
    else if constexpr (Mode == CastMode::Float)
      storeF32(out, outType, o, loadF32(x, xType, off[0]));
    else
      storeI64(out, outType, o, loadI64(x, xType, off[0]));
  }
};

struct IotaBody {
  char *out;
  int32_t outType;
  int64_t size, inner;

  template <typename Index>
  __device__ void operator()(int64_t o, const Index (&)[1]) const {
    storeI64(out, outType, o, (o / inner) % size);
  }
};

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

template <int Op, bool Float>
void launchUnary(const Broadcast &b, int64_t n, const char *x, int32_t xType,
                 char *out, int32_t outType) {
  launchBroadcast<1>("unary", b, n,
                     UnaryBody<Op, Float>{x, xType, out, outType});
}

void unaryFloat(int32_t op, const Broadcast &b, int64_t n, const char *x,
                int32_t xType, char *out, int32_t outType) {
  switch (op) {
// One case per kind of the ABI's list: a kind that unaryF32 does not
// implement fails its static_assert.
#define CLEAVE_UNARY_CASE(NAME, VALUE, MNEMONIC)                               \
  case CLEAVE_##NAME:                                                          \
    return launchUnary<CLEAVE_##NAME, true>(b, n, x, xType, out, outType);
    CLEAVE_RT_UNARY_KINDS(CLEAVE_UNARY_CASE)
#undef CLEAVE_UNARY_CASE
  }
  cleave_rt_fail("cleave_rt_unary: unknown op %d", op);
}

void unaryInt(int32_t op, const Broadcast &b, int64_t n, const char *x,
              int32_t xType, char *out, int32_t outType) {
  switch (op) {
  case CLEAVE_NEG:
    return launchUnary<CLEAVE_NEG, false>(b, n, x, xType, out, outType);
  case CLEAVE_ABS:
    return launchUnary<CLEAVE_ABS, false>(b, n, x, xType, out, outType);
  case CLEAVE_RELU:
    return launchUnary<CLEAVE_RELU, false>(b, n, x, xType, out, outType);
  }
  cleave_rt_fail("cleave_rt_unary: op %s (%d) is not defined for %s",
                 unaryName(op), op, dtypeName(outType));
}

template <int Op> using OpTag = std::integral_constant<int, Op>;

template <bool Float>
void binaryTyped(int32_t op, const Broadcast &b, int64_t n,
                 const BinaryArgs &args) {
  auto with = [&](auto tag) {
    launchBroadcast<2>("binary", b, n,
                       BinaryBody<decltype(tag)::value, Float>{args});
  };
  switch (op) {
  case CLEAVE_ADD:
    return with(OpTag<CLEAVE_ADD>());
  case CLEAVE_SUB:
    return with(OpTag<CLEAVE_SUB>());
  case CLEAVE_MUL:
    return with(OpTag<CLEAVE_MUL>());
  case CLEAVE_DIV:
    return with(OpTag<CLEAVE_DIV>());
  case CLEAVE_POW:
    return with(OpTag<CLEAVE_POW>());
  case CLEAVE_MAX:
    return with(OpTag<CLEAVE_MAX>());
  case CLEAVE_MIN:
    return with(OpTag<CLEAVE_MIN>());
  }
  cleave_rt_fail("cleave_rt_binary: unknown op %d", op);
}

template <bool Int>
void compareTyped(int32_t dir, const Broadcast &b, int64_t n,
                  const BinaryArgs &args) {
  auto with = [&](auto tag) {
    launchBroadcast<2>("compare", b, n,
                       CompareBody<decltype(tag)::value, Int>{args});
  };
  switch (dir) {
  case CLEAVE_EQ:
    return with(OpTag<CLEAVE_EQ>());
  case CLEAVE_NE:
    return with(OpTag<CLEAVE_NE>());
  case CLEAVE_LT:
    return with(OpTag<CLEAVE_LT>());
  case CLEAVE_LE:
    return with(OpTag<CLEAVE_LE>());
  case CLEAVE_GT:
    return with(OpTag<CLEAVE_GT>());
  case CLEAVE_GE:
    return with(OpTag<CLEAVE_GE>());
  }
  cleave_rt_fail("cleave_rt_compare: unknown direction %d", dir);
}

/// A device copy of the constant bytes at `data`, uploaded once and reused
/// while the host bytes are unchanged, so that cleave_rt_constant copies
/// device to device, fully asynchronously (a copy from pageable host memory
/// may wait for the stream, at every step). The host bytes are compared on
/// every call, so a caller that reuses a buffer for other constants stays
/// correct. The copies live as long as the process.
const char *deviceConstant(const void *data, size_t bytes) {
  struct Entry {
    std::vector<char> host;
    char *device = nullptr;
  };
  static std::map<std::pair<const void *, size_t>, Entry> cache;
  Entry &e = cache[{data, bytes}];
  if (e.device && std::memcmp(e.host.data(), data, bytes) == 0)
    return e.device;
  if (!e.device)
    check(cudaMalloc(reinterpret_cast<void **>(&e.device), bytes),
          "allocating a constant");
  e.host.assign(static_cast<const char *>(data),
                static_cast<const char *>(data) + bytes);
  // Stream-ordered after the earlier copies out of e.device. The host waits
  // for the upload (once per constant, not per step), so that no copy from
  // host memory is in flight when the caller changes its bytes.
  check(cudaMemcpyAsync(e.device, e.host.data(), bytes, cudaMemcpyHostToDevice,
                        stream()),
        "uploading a constant");
  waitForStream("uploading a constant");
  return e.device;
}

} // namespace
} // namespace cleave::rt::cuda

extern "C" {

void cleave_rt_copy(char *arena, const cleave_tensor *src,
                    const cleave_tensor *dst) {
  checkTensor("cleave_rt_copy", "src", src);
  checkTensor("cleave_rt_copy", "dst", dst);
  if (numElements(*src) != numElements(*dst))
    cleave_rt_fail("cleave_rt_copy: src %s and dst %s differ in element count",
                   shapeString(*src).c_str(), shapeString(*dst).c_str());
  // A copy between dtypes is a cast; shapes may differ (a reshape).
  if (src->dtype != dst->dtype)
    return cleave_rt_cast(arena, src, dst);
  size_t bytes = size_t(numElements(*src)) * elementSize(src->dtype);
  if (src->offset == dst->offset || bytes == 0)
    return;
  ScratchBuffer scratch;
  const char *from = operandData(arena, *src, *dst, scratch, "cleave_rt_copy");
  check(cudaMemcpyAsync(dataOf(arena, *dst), from, bytes,
                        cudaMemcpyDeviceToDevice, stream()),
        "cleave_rt_copy");
}

void cleave_rt_constant(char *arena, const cleave_tensor *out,
                        const void *data) {
  checkTensor("cleave_rt_constant", "out", out);
  size_t bytes = size_t(numElements(*out)) * elementSize(out->dtype);
  if (bytes && !data)
    cleave_rt_fail("cleave_rt_constant: data is NULL for out %s",
                   shapeString(*out).c_str());
  if (!bytes)
    return;
  check(cudaMemcpyAsync(dataOf(arena, *out), deviceConstant(data, bytes), bytes,
                        cudaMemcpyDeviceToDevice, stream()),
        "cleave_rt_constant");
}

void cleave_rt_iota(char *arena, const cleave_tensor *out, int64_t dim) {
  checkTensor("cleave_rt_iota", "out", out);
  if (dim < 0 || dim >= out->rank)
    cleave_rt_fail("cleave_rt_iota: dim %lld is out of range for rank %d",
                   (long long)dim, out->rank);
  int64_t inner = 1;
  for (int d = int(dim) + 1; d < out->rank; ++d)
    inner *= out->shape[d];
  int64_t n = numElements(*out);
  if (n == 0)
    return;
  launchBroadcast<1>(
      "iota", contiguousPlan(n, 1), n,
      IotaBody{dataOf(arena, *out), out->dtype, out->shape[dim], inner});
}

void cleave_rt_unary(char *arena, int32_t op, const cleave_tensor *x,
                     const cleave_tensor *out) {
  checkTensor("cleave_rt_unary", "x", x);
  checkTensor("cleave_rt_unary", "out", out);
  const cleave_tensor *ops[] = {x};
  auto b = makeBroadcast("unary", ops, 1, *out);
  int64_t n = numElements(*out);
  bool isFloat = isFloatType(out->dtype);
  if (!isFloat && op != CLEAVE_NEG && op != CLEAVE_ABS && op != CLEAVE_RELU)
    cleave_rt_fail("cleave_rt_unary: op %s (%d) is not defined for %s",
                   unaryName(op), op, dtypeName(out->dtype));
  if (isFloat && (op < 0 || op >= CLEAVE_NUM_UNARY_KINDS))
    cleave_rt_fail("cleave_rt_unary: unknown op %d", op);
  ScratchBuffer scratch;
  const char *xd = operandData(arena, *x, *out, scratch, "cleave_rt_unary");
  char *od = dataOf(arena, *out);
  if (isFloat)
    unaryFloat(op, b, n, xd, x->dtype, od, out->dtype);
  else
    unaryInt(op, b, n, xd, x->dtype, od, out->dtype);
}

void cleave_rt_binary(char *arena, int32_t op, const cleave_tensor *a,
                      const cleave_tensor *b, const cleave_tensor *out) {
  checkTensor("cleave_rt_binary", "a", a);
  checkTensor("cleave_rt_binary", "b", b);
  checkTensor("cleave_rt_binary", "out", out);
  if (op < 0 || op >= CLEAVE_NUM_BINARY_KINDS)
    cleave_rt_fail("cleave_rt_binary: unknown op %d", op);
  const cleave_tensor *ops[] = {a, b};
  auto plan = makeBroadcast("binary", ops, 2, *out);
  int64_t n = numElements(*out);
  ScratchBuffer scratchA, scratchB;
  const char *ad = operandData(arena, *a, *out, scratchA, "cleave_rt_binary");
  const char *bd = operandData(arena, *b, *out, scratchB, "cleave_rt_binary");
  char *od = dataOf(arena, *out);
  // An integer zero divisor is found on the device and reported at the next
  // synchronization (every element of b is read when out is not empty).
  if (isFloatType(out->dtype))
    binaryTyped<true>(op, plan, n,
                      {ad, bd, a->dtype, b->dtype, od, out->dtype, nullptr});
  else
    binaryTyped<false>(
        op, plan, n, {ad, bd, a->dtype, b->dtype, od, out->dtype, errorSlot()});
}

void cleave_rt_compare(char *arena, int32_t direction, const cleave_tensor *a,
                       const cleave_tensor *b, const cleave_tensor *out) {
  checkTensor("cleave_rt_compare", "a", a);
  checkTensor("cleave_rt_compare", "b", b);
  checkTensor("cleave_rt_compare", "out", out);
  if (out->dtype != CLEAVE_I1)
    cleave_rt_fail("cleave_rt_compare: out must be i1, got %s",
                   dtypeName(out->dtype));
  if (direction < 0 || direction >= CLEAVE_NUM_COMPARE_DIRECTIONS)
    cleave_rt_fail("cleave_rt_compare: unknown direction %d", direction);
  const cleave_tensor *ops[] = {a, b};
  auto plan = makeBroadcast("compare", ops, 2, *out);
  int64_t n = numElements(*out);
  ScratchBuffer scratchA, scratchB;
  const char *ad = operandData(arena, *a, *out, scratchA, "cleave_rt_compare");
  const char *bd = operandData(arena, *b, *out, scratchB, "cleave_rt_compare");
  BinaryArgs args{ad,        bd,     a->dtype, b->dtype, dataOf(arena, *out),
                  CLEAVE_I1, nullptr};
  // Two integer operands compare exactly in i64; otherwise in f32.
  if (!isFloatType(a->dtype) && !isFloatType(b->dtype))
    compareTyped<true>(direction, plan, n, args);
  else
    compareTyped<false>(direction, plan, n, args);
}

void cleave_rt_where(char *arena, const cleave_tensor *cond,
                     const cleave_tensor *x, const cleave_tensor *y,
                     const cleave_tensor *out) {
  checkTensor("cleave_rt_where", "cond", cond);
  checkTensor("cleave_rt_where", "x", x);
  checkTensor("cleave_rt_where", "y", y);
  checkTensor("cleave_rt_where", "out", out);
  const cleave_tensor *ops[] = {cond, x, y};
  auto plan = makeBroadcast("where", ops, 3, *out);
  int64_t n = numElements(*out);
  ScratchBuffer scratchC, scratchX, scratchY;
  const char *cd = operandData(arena, *cond, *out, scratchC, "cleave_rt_where");
  const char *xd = operandData(arena, *x, *out, scratchX, "cleave_rt_where");
  const char *yd = operandData(arena, *y, *out, scratchY, "cleave_rt_where");
  char *od = dataOf(arena, *out);
  if (isFloatType(out->dtype))
    launchBroadcast<3>("where", plan, n,
                       WhereBody<true>{cd, xd, yd, cond->dtype, x->dtype,
                                       y->dtype, od, out->dtype});
  else
    launchBroadcast<3>("where", plan, n,
                       WhereBody<false>{cd, xd, yd, cond->dtype, x->dtype,
                                        y->dtype, od, out->dtype});
}

void cleave_rt_cast(char *arena, const cleave_tensor *x,
                    const cleave_tensor *out) {
  checkTensor("cleave_rt_cast", "x", x);
  checkTensor("cleave_rt_cast", "out", out);
  int64_t n = numElements(*out);
  if (numElements(*x) != n)
    cleave_rt_fail("cleave_rt_cast: x %s and out %s differ in element count",
                   shapeString(*x).c_str(), shapeString(*out).c_str());
  if (n == 0)
    return;
  ScratchBuffer scratch;
  if (x->dtype == out->dtype) {
    if (x->offset != out->offset)
      check(cudaMemcpyAsync(
                dataOf(arena, *out),
                operandData(arena, *x, *out, scratch, "cleave_rt_cast"),
                size_t(n) * elementSize(x->dtype), cudaMemcpyDeviceToDevice,
                stream()),
            "cleave_rt_cast");
    return;
  }
  const char *xd = operandData(arena, *x, *out, scratch, "cleave_rt_cast");
  char *od = dataOf(arena, *out);
  auto plan = contiguousPlan(n, 1);
  // A bool is true for any nonzero value (0.5 and NaN included), as in
  // NumPy and ONNX, so it does not go through integer truncation.
  if (out->dtype == CLEAVE_I1)
    launchBroadcast<1>("cast", plan, n,
                       CastBody<CastMode::Bool>{xd, x->dtype, od, out->dtype});
  else if (isFloatType(out->dtype))
    launchBroadcast<1>("cast", plan, n,
                       CastBody<CastMode::Float>{xd, x->dtype, od, out->dtype});
  else
    launchBroadcast<1>("cast", plan, n,
                       CastBody<CastMode::Int>{xd, x->dtype, od, out->dtype});
}

} // extern "C"
