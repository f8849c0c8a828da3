//===- Linear.cu - matmul with a bias and GELU epilogue on CUDA ----------===//
//
// cleave_rt_linear: out = act(x W + bias), pre = x W + bias. Where every
// operand has one dtype (f32, f16 or bf16) and cuBLASLt offers the epilogue
// (bias; bias + tanh GELU; the same storing the GELU input as the aux
// matrix, whose leading dimension must be a multiple of 8), it is one
// cuBLASLt matmul: the bias and activation are applied to the f32
// accumulators before the store. cuBLASLt's GELU is the tanh form, so the
// exact (erf) GELU, mixed dtypes, aliased operands, an empty contraction
// and any shape cuBLASLt declines take the unfused path: one GEMM into f32
// scratch, then one epilogue kernel. Both round out and pre once, as the
// CPU backend does. CLEAVE_CUDA_LINEAR=unfused forces the second path
// (read at each call, for tests and benchmarks).
//
//===----------------------------------------------------------------------===//

#include "DeviceUtil.cuh"
#include "KernelUtil.cuh"

#include "../cpu/KernelChecks.h"
#include "../cpu/Tensor.h"

#include <cublasLt.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

constexpr const char *kKernel = "cleave_rt_linear";

bool forceUnfused() {
  const char *env = std::getenv("CLEAVE_CUDA_LINEAR");
  if (!env || !*env || std::strcmp(env, "fused") == 0)
    return false;
  if (std::strcmp(env, "unfused") != 0)
    cleave_rt_fail("CLEAVE_CUDA_LINEAR must be 'fused' or 'unfused', got '%s'",
                   env);
  return true;
}

cudaDataType_t blasType(int32_t dtype) {
  switch (dtype) {
  case CLEAVE_F16:
    return CUDA_R_16F;
  case CLEAVE_BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

//===----------------------------------------------------------------------===//
// cuBLASLt
//===----------------------------------------------------------------------===//

cublasLtHandle_t ltHandle() {
  static cublasLtHandle_t handle = [] {
    cublasLtHandle_t h;
    checkBlas(cublasLtCreate(&h), "creating the cuBLASLt handle");
    return h;
  }();
  return handle;
}

/// The descriptors of one cuBLASLt call, destroyed with it.
struct LtCall {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;

  ~LtCall() {
    if (pref)
      cublasLtMatmulPreferenceDestroy(pref);
    for (cublasLtMatrixLayout_t l : {a, b, d})
      if (l)
        cublasLtMatrixLayoutDestroy(l);
    if (op)
      cublasLtMatmulDescDestroy(op);
  }

  template <typename T>
  void set(cublasLtMatmulDescAttributes_t attr, const T &value) {
    checkBlas(cublasLtMatmulDescSetAttribute(op, attr, &value, sizeof(T)),
              "setting a cuBLASLt matmul attribute");
  }
};

/// What the heuristic chose for one problem (or that it found nothing).
struct LtChoice {
  bool found = false;
  cublasLtMatmulHeuristicResult_t result;
};
using LtKey = std::tuple<int64_t, int64_t, int64_t, int32_t, bool, int32_t>;

/// cuBLASLt wants a workspace; 32 MiB is what it recommends on Hopper.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

/// Runs the linear as one cuBLASLt matmul with its epilogue; false when
/// cuBLASLt offers none for it (the caller then runs the unfused path).
bool linearLt(char *arena, const LinearPlan &p, const cleave_tensor &x,
              const cleave_tensor &w, const cleave_tensor &bias,
              const cleave_tensor &out, const cleave_tensor *pre) {
  if (p.activation == CLEAVE_ACT_GELU_ERF || p.k == 0 ||
      (pre && p.n % 8 != 0))
    return false;
  for (const cleave_tensor *t : {&w, &bias, pre})
    if (t && t->dtype != x.dtype)
      return false;
  if (out.dtype != x.dtype)
    return false;
  for (const cleave_tensor *in : {&x, &w, &bias})
    if (overlaps(*in, out) || (pre && overlaps(*in, *pre)))
      return false;

  // Row-major out [rows, n] = x W is column-major out^T = W^T x^T: cuBLAS's
  // A is the weight, B is x, and the bias runs along D's rows (n).
  cudaDataType_t type = blasType(x.dtype);
  cublasLtEpilogue_t epilogue =
      p.activation == CLEAVE_ACT_NONE ? CUBLASLT_EPILOGUE_BIAS
      : pre                           ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                      : CUBLASLT_EPILOGUE_GELU_BIAS;
  LtCall call;
  checkBlas(cublasLtMatmulDescCreate(&call.op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            "creating a cuBLASLt matmul");
  cublasOperation_t opA = p.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opB = CUBLAS_OP_N;
  call.set(CUBLASLT_MATMUL_DESC_TRANSA, opA);
  call.set(CUBLASLT_MATMUL_DESC_TRANSB, opB);
  call.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  const void *biasPtr = dataOf(arena, bias);
  call.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, biasPtr);
  if (pre) {
    void *aux = dataOf(arena, *pre);
    call.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    call.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(p.n));
  }
  // The stored weight: [k, n] row-major is n x k column-major; [n, k] is
  // k x n, read transposed.
  checkBlas(cublasLtMatrixLayoutCreate(&call.a, type,
                                       p.transposed ? p.k : p.n,
                                       p.transposed ? p.n : p.k,
                                       p.transposed ? p.k : p.n),
            "creating a cuBLASLt layout");
  checkBlas(cublasLtMatrixLayoutCreate(&call.b, type, p.k, p.rows, p.k),
            "creating a cuBLASLt layout");
  checkBlas(cublasLtMatrixLayoutCreate(&call.d, type, p.n, p.rows, p.n),
            "creating a cuBLASLt layout");

  static std::map<LtKey, LtChoice> choices;
  LtKey key{p.rows, p.k, p.n, x.dtype, p.transposed, int32_t(epilogue)};
  auto it = choices.find(key);
  if (it == choices.end()) {
    LtChoice choice;
    checkBlas(cublasLtMatmulPreferenceCreate(&call.pref),
              "creating a cuBLASLt preference");
    size_t workspace = kWorkspaceBytes;
    checkBlas(cublasLtMatmulPreferenceSetAttribute(
                  call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                  &workspace, sizeof(workspace)),
              "setting the cuBLASLt workspace");
    int count = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        ltHandle(), call.op, call.a, call.b, call.d, call.d, call.pref, 1,
        &choice.result, &count);
    // Any refusal (NOT_SUPPORTED, or INVALID_VALUE for a combination this
    // cuBLASLt does not offer) sends the shape to the unfused path: it
    // costs speed, never the result.
    choice.found = status == CUBLAS_STATUS_SUCCESS && count > 0;
    it = choices.emplace(key, choice).first;
  }
  if (!it->second.found)
    return false;
  const cublasLtMatmulHeuristicResult_t &chosen = it->second.result;
  ScratchBuffer workspace(chosen.workspaceSize, kKernel);
  float alpha = 1.0f, beta = 0.0f;
  char *outPtr = dataOf(arena, out);
  checkBlas(cublasLtMatmul(ltHandle(), call.op, &alpha, dataOf(arena, w),
                           call.a, dataOf(arena, x), call.b, &beta, outPtr,
                           call.d, outPtr, call.d, &chosen.algo,
                           workspace.as<void>(), chosen.workspaceSize,
                           stream()),
            kKernel);
  return true;
}

//===----------------------------------------------------------------------===//
// Unfused: GEMM into f32, then the epilogue
//===----------------------------------------------------------------------===//

template <int32_t Act>
__global__ void linearEpilogueKernel(const float *acc, int64_t total, int64_t n,
                                     const char *bias, int32_t biasType,
                                     char *out, int32_t outType, char *pre,
                                     int32_t preType) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = acc[i] + loadF32(bias, biasType, i % n);
    if (pre)
      storeF32(pre, preType, i, v);
    if constexpr (Act == CLEAVE_ACT_GELU_ERF)
      v = geluErfF32(v);
    else if constexpr (Act == CLEAVE_ACT_GELU_TANH)
      v = geluTanhF32(v);
    storeF32(out, outType, i, v);
  }
}

void linearUnfused(char *arena, const LinearPlan &p, const cleave_tensor &x,
                   const cleave_tensor &w, const cleave_tensor &bias,
                   const cleave_tensor &out, const cleave_tensor *pre) {
  auto written = [&](const cleave_tensor &t) {
    return overlaps(t, out) || (pre && overlaps(t, *pre));
  };
  int64_t total = p.rows * p.n;
  ScratchBuffer accBuf(size_t(total) * sizeof(float), kKernel);
  float *acc = accBuf.as<float>();
  ScratchBuffer xBuf, wBuf, biasBuf;
  if (p.k == 0) {
    // cuBLAS rejects the leading dimension 0 of an empty operand.
    check(cudaMemsetAsync(acc, 0, size_t(total) * sizeof(float), stream()),
          "clearing the linear accumulator");
  } else if (x.dtype == w.dtype) {
    // Both operands as stored, accumulated and written in f32.
    const char *xp = bytesInput(arena, x, written(x), xBuf, kKernel);
    const char *wp = bytesInput(arena, w, written(w), wBuf, kKernel);
    cudaDataType_t type = blasType(x.dtype);
    float alpha = 1.0f, beta = 0.0f;
    checkBlas(cublasGemmEx(cublas(), p.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                           CUBLAS_OP_N, int(p.n), int(p.rows), int(p.k),
                           &alpha, wp, type, int(p.transposed ? p.k : p.n), xp,
                           type, int(p.k), &beta, acc, CUDA_R_32F, int(p.n),
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              kKernel);
  } else {
    const float *xp = f32Input(arena, x, written(x), xBuf, kKernel);
    const float *wp = f32Input(arena, w, written(w), wBuf, kKernel);
    gemmF32(kKernel, false, p.transposed, p.rows, p.n, p.k, 1.0f, xp, p.k, 0,
            wp, p.transposed ? p.k : p.n, 0, 0.0f, acc, p.n, 0, 1);
  }
  const char *bp = bytesInput(arena, bias, written(bias), biasBuf, kKernel);
  char *preData = pre ? dataOf(arena, *pre) : nullptr;
  int32_t preType = pre ? pre->dtype : CLEAVE_F32;
  auto launch = [&](auto kernel) {
    kernel<<<blocksFor(total), kThreads, 0, stream()>>>(
        acc, total, p.n, bp, bias.dtype, dataOf(arena, out), out.dtype,
        preData, preType);
    checkLaunchOf(kKernel);
  };
  switch (p.activation) {
  case CLEAVE_ACT_GELU_ERF:
    return launch(linearEpilogueKernel<CLEAVE_ACT_GELU_ERF>);
  case CLEAVE_ACT_GELU_TANH:
    return launch(linearEpilogueKernel<CLEAVE_ACT_GELU_TANH>);
  default:
    return launch(linearEpilogueKernel<CLEAVE_ACT_NONE>);
  }
}

} // namespace

extern "C" void cleave_rt_linear(char *arena, const cleave_tensor *x,
                                 const cleave_tensor *w,
                                 const cleave_tensor *bias,
                                 const cleave_tensor *out,
                                 const cleave_tensor *pre, int32_t transpose_w,
                                 int32_t activation) {
  LinearPlan p =
      planLinear(kKernel, x, w, bias, out, pre, transpose_w, activation);
  if (p.rows == 0 || p.n == 0)
    return;
  if (p.rows > INT_MAX || p.n > INT_MAX || p.k > INT_MAX)
    cleave_rt_fail("%s: GEMM size [%lld x %lld] x [%lld x %lld] exceeds the "
                   "cuBLAS limit",
                   kKernel, (long long)p.rows, (long long)p.k, (long long)p.k,
                   (long long)p.n);
  if (!forceUnfused() && linearLt(arena, p, *x, *w, *bias, *out, pre))
    return;
  linearUnfused(arena, p, *x, *w, *bias, *out, pre);
}
