//===- Tensor.cpp - shared helpers of the CPU kernels ---------------------===//
//
// Descriptor checks, broadcasting plans, cleave_rt_fail and the hooks the
// communication engine installs (FailHook.h, WaitHook.h). (Conversions are
// in Convert.cpp; the strided copy behind the data movement kernels is in
// DataMovement.cpp, with its inverse.)
//
//===----------------------------------------------------------------------===//

#include "Tensor.h"
#include "FailHook.h"
#include "WaitHook.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace cleave::rt;

static FailHook failHook = nullptr;

void cleave::rt::setFailHook(FailHook hook) { failHook = hook; }

static WaitHook deviceWaitHook = nullptr;

void cleave::rt::setWaitHook(WaitHook hook) { deviceWaitHook = hook; }

WaitHook cleave::rt::waitHook() { return deviceWaitHook; }

extern "C" void cleave_rt_fail(const char *format, ...) {
  std::fflush(stdout);
  // One write, so that the lines of ranks failing together do not mix.
  char line[4096];
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(line, sizeof(line), format, args);
  va_end(args);
  std::string message = "error: ";
  message += n >= 0 ? line : "(unprintable message)";
  if (n >= int(sizeof(line)))
    message += "...";
  message += "\n";
  std::fwrite(message.data(), 1, message.size(), stderr);
  std::fflush(stderr);
  if (FailHook hook = failHook) {
    failHook = nullptr;
    hook();
  }
  std::exit(1);
}

void cleave::rt::checkTensor(const char *kernel, const char *what,
                             const cleave_tensor *t) {
  if (!t)
    cleave_rt_fail("%s: %s is NULL", kernel, what);
  if (elementSize(t->dtype) == 0)
    cleave_rt_fail("%s: %s has unknown dtype %d", kernel, what, t->dtype);
  if (t->rank < 0 || t->rank > CLEAVE_RT_MAX_RANK)
    cleave_rt_fail("%s: %s has rank %d, expected 0 to %d", kernel, what,
                   t->rank, CLEAVE_RT_MAX_RANK);
  for (int d = 0; d < t->rank; ++d)
    if (t->shape[d] < 0)
      cleave_rt_fail("%s: %s has negative size %lld in dim %d", kernel, what,
                     (long long)t->shape[d], d);
  if (t->offset < 0)
    cleave_rt_fail("%s: %s has negative offset %lld", kernel, what,
                   (long long)t->offset);
}

int64_t cleave::rt::numElements(const cleave_tensor &t) {
  int64_t n = 1;
  for (int d = 0; d < t.rank; ++d)
    n *= t.shape[d];
  return n;
}

void cleave::rt::checkIndexTensor(const char *kernel, const char *what,
                                  const cleave_tensor &t) {
  if (t.dtype != CLEAVE_I64 && t.dtype != CLEAVE_I32)
    cleave_rt_fail("%s: %s must be i64 or i32, got %s", kernel, what,
                   dtypeName(t.dtype));
}

size_t cleave::rt::elementSize(int32_t dtype) {
  return size_t(cleave_dtype_size(dtype));
}

bool cleave::rt::isFloatType(int32_t dtype) {
  return dtype == CLEAVE_F32 || dtype == CLEAVE_F16 || dtype == CLEAVE_BF16;
}

const char *cleave::rt::dtypeName(int32_t dtype) {
  const char *name = cleave_dtype_name(dtype);
  return name ? name : "unknown dtype";
}

std::string cleave::rt::shapeString(const cleave_tensor &t) {
  std::string s = "[";
  for (int d = 0; d < t.rank; ++d) {
    if (d)
      s += ", ";
    s += std::to_string(t.shape[d]);
  }
  return s + "]";
}

bool cleave::rt::sameShape(const cleave_tensor &a, const cleave_tensor &b) {
  if (a.rank != b.rank)
    return false;
  for (int d = 0; d < a.rank; ++d)
    if (a.shape[d] != b.shape[d])
      return false;
  return true;
}

bool cleave::rt::overlaps(const cleave_tensor &a, const cleave_tensor &b) {
  int64_t aEnd = a.offset + numElements(a) * int64_t(elementSize(a.dtype));
  int64_t bEnd = b.offset + numElements(b) * int64_t(elementSize(b.dtype));
  return a.offset < bEnd && b.offset < aEnd;
}

void cleave::rt::contiguousStrides(const cleave_tensor &t, int64_t *strides) {
  int64_t s = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= t.shape[d];
  }
}

//===----------------------------------------------------------------------===//
// Broadcasting and strided copies
//===----------------------------------------------------------------------===//

Broadcast::Broadcast(const char *kernel, const cleave_tensor &out,
                     const cleave_tensor *const *operands, int numOps)
    : numOperands(numOps) {
  // Right-align each operand against the output and zero the strides of its
  // broadcast dimensions.
  int64_t full[kMaxOperands][CLEAVE_RT_MAX_RANK];
  for (int i = 0; i < numOps; ++i) {
    const cleave_tensor &op = *operands[i];
    int shift = out.rank - op.rank;
    bool ok = shift >= 0;
    int64_t stride = 1;
    for (int d = out.rank - 1; ok && d >= 0; --d) {
      int od = d - shift;
      if (od < 0) {
        full[i][d] = 0;
        continue;
      }
      if (op.shape[od] == out.shape[d]) {
        full[i][d] = out.shape[d] == 1 ? 0 : stride;
      } else if (op.shape[od] == 1) {
        full[i][d] = 0;
      } else {
        ok = false;
      }
      stride *= op.shape[od];
    }
    if (!ok)
      cleave_rt_fail("%s: operand %d of shape %s does not broadcast to %s",
                     kernel, i, shapeString(op).c_str(),
                     shapeString(out).c_str());
  }
  // Drop size-1 dims, then merge dim d into the run before it when every
  // operand steps through both as one (stride[d-1] == stride[d] * size[d]).
  rank = 0;
  for (int d = 0; d < out.rank; ++d) {
    total *= out.shape[d];
    if (out.shape[d] == 1)
      continue;
    bool merge = rank > 0;
    for (int i = 0; merge && i < numOps; ++i)
      merge = strides[i][rank - 1] == full[i][d] * out.shape[d];
    if (merge) {
      shape[rank - 1] *= out.shape[d];
      for (int i = 0; i < numOps; ++i)
        strides[i][rank - 1] = full[i][d];
      continue;
    }
    shape[rank] = out.shape[d];
    for (int i = 0; i < numOps; ++i)
      strides[i][rank] = full[i][d];
    ++rank;
  }
}
