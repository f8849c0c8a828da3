//===- Linear.cu - GEMMs with bias and GELU epilogues on CUDA ------------===//
//
// cleave_rt_linear (out = act(x W + bias), pre = x W + bias) and its
// backward cleave_rt_matmul_gelu_grad (dz = gelu'(pre) * (dy W), with the
// bias gradient). Where every operand has one dtype (f32, f16 or bf16) and
// cuBLASLt offers the epilogue, each is one cuBLASLt matmul whose epilogue
// works on the f32 accumulators before the store: BIAS, GELU_BIAS or
// GELU_AUX_BIAS (which stores the GELU input as the aux matrix) forward,
// DGELU or DGELU_BGRAD (which read it, and sum the bias gradient) backward.
// cuBLASLt's GELU is the tanh form (used for 16-bit outputs only) and its
// aux leading dimension must be a multiple of 8, so the exact (erf) GELU,
// f32 GELU layers, such shapes, mixed dtypes,
// aliased operands, an empty contraction and anything cuBLASLt declines
// take the unfused path: one GEMM into f32 scratch, then one epilogue kernel
// (and a column sum in f64 for the bias gradient). Both round each output
// once, as the CPU backend does. CLEAVE_CUDA_LINEAR=unfused forces the
// unfused path (read at each call, for tests and benchmarks). The weight
// gradient's cleave_rt_gemm (Matmul.cu) borrows the BGRADB epilogue, which
// sums its bias gradient, and the column sum (Linear.cuh).
//
//===----------------------------------------------------------------------===//

#include "Linear.cuh"

#include "DeviceUtil.cuh"
#include "KernelUtil.cuh"

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
constexpr const char *kGradKernel = "cleave_rt_matmul_gelu_grad";

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

/// One row-major GEMM for cuBLASLt: d [m, n] = op(a) [m, k] op(b) [k, n],
/// a and b stored in `abType`, d (and a bias or bias gradient) in `dType`.
struct LtGemm {
  int64_t m = 0, n = 0, k = 0;
  bool transposeA = false, transposeB = false;
  int32_t abType = CLEAVE_F32, dType = CLEAVE_F32;

  /// The GEMM of a linear (x [rows, k], the weight as b).
  static LtGemm of(const LinearPlan &p, int32_t dtype) {
    return {p.rows, p.n, p.k, false, p.transposed, dtype, dtype};
  }
};
/// The problem and the epilogue: what a heuristic choice is cached for.
using LtKey = std::tuple<int64_t, int64_t, int64_t, bool, bool, int32_t,
                         int32_t, int32_t>;

/// cuBLASLt wants a workspace; 32 MiB is what it recommends on Hopper.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

/// One cuBLASLt matmul d = op(a) op(b) with `epilogue`. `bias` is the bias
/// (n values, one per column of d) or a bias gradient: for BGRADB the sums
/// of op(a) over k (m values), for DGELU_BGRAD the sums of d over its rows
/// (n values). `aux` is the GELU input (stored, or read by DGELU). False
/// when cuBLASLt offers no algorithm for it.
bool runLt(const char *kernel, const LtGemm &g, cublasLtEpilogue_t epilogue,
           const void *a, const void *b, void *d, const void *bias,
           const void *aux) {
  // Row-major d [m, n] = op(a) op(b) is column-major d^T = op(b)^T op(a)^T:
  // cuBLAS's A is b, its B is a, and D is n x m, so bias vectors run along
  // D's rows (n) and BGRADB's along its columns (m).
  LtCall call;
  checkBlas(cublasLtMatmulDescCreate(&call.op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            "creating a cuBLASLt matmul");
  cublasOperation_t opA = g.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opB = g.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  call.set(CUBLASLT_MATMUL_DESC_TRANSA, opA);
  call.set(CUBLASLT_MATMUL_DESC_TRANSB, opB);
  call.set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  if (bias)
    call.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (aux) {
    call.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    call.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(g.n));
  }
  // Row-major [r, c] is c x r column-major, read transposed when op is T:
  // b is [k, n] (n x k) or [n, k] (k x n); a is [m, k] (k x m) or [k, m]
  // (m x k).
  cudaDataType_t abType = blasType(g.abType);
  checkBlas(cublasLtMatrixLayoutCreate(
                &call.a, abType, g.transposeB ? g.k : g.n,
                g.transposeB ? g.n : g.k, g.transposeB ? g.k : g.n),
            "creating a cuBLASLt layout");
  checkBlas(cublasLtMatrixLayoutCreate(
                &call.b, abType, g.transposeA ? g.m : g.k,
                g.transposeA ? g.k : g.m, g.transposeA ? g.m : g.k),
            "creating a cuBLASLt layout");
  checkBlas(
      cublasLtMatrixLayoutCreate(&call.d, blasType(g.dType), g.n, g.m, g.n),
      "creating a cuBLASLt layout");

  static std::map<LtKey, LtChoice> choices;
  LtKey key{g.m,          g.n,      g.k,     g.transposeA,
            g.transposeB, g.abType, g.dType, int32_t(epilogue)};
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
    // Split-K partial sums only in f32 (the default also allows adding
    // them in a 16-bit output type), so out, pre, dz and dbias are rounded
    // once, as the ABI says.
    uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    checkBlas(cublasLtMatmulPreferenceSetAttribute(
                  call.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                  &reduction, sizeof(reduction)),
              "setting the cuBLASLt reduction scheme");
    // Tensors are 64-byte aligned (cleave_rt.h), less than the 256 bytes
    // cuBLASLt assumes by default; the choice is cached per shape, so it
    // must hold for any 64-byte-aligned operands.
    for (cublasLtMatmulPreferenceAttributes_t attr :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      uint32_t alignment = 64;
      checkBlas(cublasLtMatmulPreferenceSetAttribute(call.pref, attr,
                                                     &alignment,
                                                     sizeof(alignment)),
                "setting the cuBLASLt alignment");
    }
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
  ScratchBuffer workspace(chosen.workspaceSize, kernel);
  float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t status =
      cublasLtMatmul(ltHandle(), call.op, &alpha, b, call.a, a, call.b, &beta,
                     d, call.d, d, call.d, &chosen.algo, workspace.as<void>(),
                     chosen.workspaceSize, stream());
  if (status == CUBLAS_STATUS_NOT_SUPPORTED ||
      status == CUBLAS_STATUS_INVALID_VALUE) {
    // Refused at launch (the heuristic's check does not promise that the
    // algorithm runs): this shape takes the unfused path from now on.
    it->second.found = false;
    return false;
  }
  checkBlas(status, kernel);
  return true;
}

/// Whether cuBLASLt may run a fused GEMM over these operands: the tanh
/// GELU if any (cuBLASLt's GELU is that form) and only into 16-bit
/// outputs, a nonempty contraction, one dtype, no input overlapping an
/// output, and an aux row length that is a multiple of 8 (its
/// leading-dimension rule). cuBLASLt does not document how it evaluates
/// tanh; a hardware approximation (about 2^-11 relative) is below 16-bit
/// rounding but not below f32's, so f32 GELU layers take the unfused path.
bool ltApplies(const LinearPlan &p, bool hasAux,
               std::initializer_list<const cleave_tensor *> inputs,
               std::initializer_list<const cleave_tensor *> outputs) {
  int32_t dtype = (*outputs.begin())->dtype;
  if (p.activation == CLEAVE_ACT_GELU_ERF || p.k == 0 ||
      (hasAux && p.n % 8 != 0) ||
      (p.activation != CLEAVE_ACT_NONE && dtype == CLEAVE_F32))
    return false;
  for (auto list : {inputs, outputs})
    for (const cleave_tensor *t : list)
      if (t && t->dtype != dtype)
        return false;
  for (const cleave_tensor *in : inputs)
    for (const cleave_tensor *out : outputs)
      if (in && out && overlaps(*in, *out))
        return false;
  return true;
}

/// The linear as one cuBLASLt matmul with its bias (and GELU) epilogue.
bool linearLt(char *arena, const LinearPlan &p, const cleave_tensor &x,
              const cleave_tensor &w, const cleave_tensor &bias,
              const cleave_tensor &out, const cleave_tensor *pre) {
  if (!ltApplies(p, pre, {&x, &w, &bias}, {&out, pre}))
    return false;
  cublasLtEpilogue_t epilogue =
      p.activation == CLEAVE_ACT_NONE ? CUBLASLT_EPILOGUE_BIAS
      : pre                           ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                      : CUBLASLT_EPILOGUE_GELU_BIAS;
  return runLt(kKernel, LtGemm::of(p, x.dtype), epilogue, dataOf(arena, x),
               dataOf(arena, w), dataOf(arena, out), dataOf(arena, bias),
               pre ? dataOf(arena, *pre) : nullptr);
}

/// matmul_gelu_grad as one cuBLASLt matmul with the DGELU(_BGRAD)
/// epilogue, which reads the GELU input as its aux matrix.
bool geluGradLt(char *arena, const LinearPlan &p, const cleave_tensor &dy,
                const cleave_tensor &w, const cleave_tensor &pre,
                const cleave_tensor &dz, const cleave_tensor *dbias) {
  if (!ltApplies(p, true, {&dy, &w, &pre}, {&dz, dbias}))
    return false;
  return runLt(kGradKernel, LtGemm::of(p, dy.dtype),
               dbias ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU,
               dataOf(arena, dy), dataOf(arena, w), dataOf(arena, dz),
               dbias ? dataOf(arena, *dbias) : nullptr, dataOf(arena, pre));
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

/// acc [rows, n] = x W in f32: the operands as stored when they share a
/// dtype (cublasGemmEx reads 16-bit and writes f32), else staged as f32.
/// `copyX`/`copyW` copy an operand first (an output of the call overlaps
/// it). The buffers hold what acc may point into until the caller is done.
struct F32Gemm {
  ScratchBuffer acc, x, w;
  float *run(const char *kernel, char *arena, const LinearPlan &p,
             const cleave_tensor &xt, const cleave_tensor &wt, bool copyX,
             bool copyW) {
    int64_t total = p.rows * p.n;
    acc.allocate(size_t(total) * sizeof(float), kernel);
    float *out = acc.as<float>();
    if (p.k == 0) {
      // cuBLAS rejects the leading dimension 0 of an empty operand.
      check(cudaMemsetAsync(out, 0, size_t(total) * sizeof(float), stream()),
            "clearing a GEMM accumulator");
    } else if (xt.dtype == wt.dtype) {
      const char *xp = bytesInput(arena, xt, copyX, x, kernel);
      const char *wp = bytesInput(arena, wt, copyW, w, kernel);
      cudaDataType_t type = blasType(xt.dtype);
      float alpha = 1.0f, beta = 0.0f;
      checkBlas(cublasGemmEx(cublas(),
                             p.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                             CUBLAS_OP_N, int(p.n), int(p.rows), int(p.k),
                             &alpha, wp, type, int(p.transposed ? p.k : p.n),
                             xp, type, int(p.k), &beta, out, CUDA_R_32F,
                             int(p.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                kernel);
    } else {
      const float *xp = f32Input(arena, xt, copyX, x, kernel);
      const float *wp = f32Input(arena, wt, copyW, w, kernel);
      gemmF32(kernel, false, p.transposed, p.rows, p.n, p.k, 1.0f, xp, p.k, 0,
              wp, p.transposed ? p.k : p.n, 0, 0.0f, out, p.n, 0, 1);
    }
    return out;
  }
};

void linearUnfused(char *arena, const LinearPlan &p, const cleave_tensor &x,
                   const cleave_tensor &w, const cleave_tensor &bias,
                   const cleave_tensor &out, const cleave_tensor *pre) {
  auto written = [&](const cleave_tensor &t) {
    return overlaps(t, out) || (pre && overlaps(t, *pre));
  };
  F32Gemm gemm;
  float *acc = gemm.run(kKernel, arena, p, x, w, written(x), written(w));
  ScratchBuffer biasBuf;
  const char *bp = bytesInput(arena, bias, written(bias), biasBuf, kKernel);
  int64_t total = p.rows * p.n;
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

/// acc = gelu'(pre) * acc, stored into dz as well.
template <int32_t Act>
__global__ void geluGradEpilogueKernel(float *acc, int64_t total,
                                       const char *pre, int32_t preType,
                                       char *dz, int32_t dzType) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = loadF32(pre, preType, i);
    float g = acc[i] * (Act == CLEAVE_ACT_GELU_ERF ? geluErfGradF32(v)
                                                   : geluTanhGradF32(v));
    acc[i] = g;
    storeF32(dz, dzType, i, g);
  }
}

constexpr int kSumColumns = 32, kSumLanes = 8;
/// Rows per split of the bias-gradient sum: enough splits for the whole GPU
/// on a few columns, a fixed function of the shape (so the sum's order, and
/// its bits, are too).
constexpr int64_t kSumRowsPerSplit = 512;

/// The bias gradient's partial sums: a block of 32 x 8 threads per (32
/// columns, split of kSumRowsPerSplit rows); the 8 lanes of a column take
/// every 8th row, in f64, and are added in lane order. partial[split, j].
__global__ void __launch_bounds__(kSumColumns *kSumLanes)
    columnPartialSumKernel(const float *acc, int64_t rows, int64_t n,
                           double *partial) {
  __shared__ double lanes[kSumLanes][kSumColumns + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t tiles = (n + kSumColumns - 1) / kSumColumns;
  int64_t splits = (rows + kSumRowsPerSplit - 1) / kSumRowsPerSplit;
  for (int64_t task = blockIdx.x; task < tiles * splits; task += gridDim.x) {
    int64_t tile = task % tiles, split = task / tiles;
    int64_t j = tile * kSumColumns + tx;
    int64_t end = min(rows, (split + 1) * kSumRowsPerSplit);
    double sum = 0;
    if (j < n)
      for (int64_t r = split * kSumRowsPerSplit + ty; r < end; r += kSumLanes)
        sum += acc[r * n + j];
    lanes[ty][tx] = sum;
    __syncthreads();
    if (ty == 0 && j < n) {
      for (int lane = 1; lane < kSumLanes; ++lane)
        sum += lanes[lane][tx];
      partial[split * n + j] = sum;
    }
    __syncthreads();
  }
}

/// dbias[j] = the partial sums of column j added in split order.
__global__ void columnSumKernel(const double *partial, int64_t splits,
                                int64_t n, char *dbias, int32_t dbiasType) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n;
       j += int64_t(gridDim.x) * blockDim.x) {
    double sum = 0;
    for (int64_t s = 0; s < splits; ++s)
      sum += partial[s * n + j];
    storeF32(dbias, dbiasType, j, float(sum));
  }
}

void geluGradUnfused(char *arena, const LinearPlan &p, const cleave_tensor &dy,
                     const cleave_tensor &w, const cleave_tensor &pre,
                     const cleave_tensor &dz, const cleave_tensor *dbias) {
  auto written = [&](const cleave_tensor &t) {
    return overlaps(t, dz) || (dbias && overlaps(t, *dbias));
  };
  F32Gemm gemm;
  float *acc =
      gemm.run(kGradKernel, arena, p, dy, w, written(dy), written(w));
  ScratchBuffer preBuf;
  const char *pp = bytesInput(arena, pre, written(pre), preBuf, kGradKernel);
  int64_t total = p.rows * p.n;
  auto kernel = p.activation == CLEAVE_ACT_GELU_ERF
                    ? geluGradEpilogueKernel<CLEAVE_ACT_GELU_ERF>
                    : geluGradEpilogueKernel<CLEAVE_ACT_GELU_TANH>;
  kernel<<<blocksFor(total), kThreads, 0, stream()>>>(
      acc, total, pp, pre.dtype, dataOf(arena, dz), dz.dtype);
  checkLaunchOf(kGradKernel);
  if (dbias)
    sumColumns(kGradKernel, acc, p.rows, p.n, *dbias, arena);
}

/// Fails unless cuBLAS's int dimensions can hold the GEMM.
void checkGemmSize(const char *kernel, const LinearPlan &p) {
  if (p.rows > INT_MAX || p.n > INT_MAX || p.k > INT_MAX)
    cleave_rt_fail("%s: GEMM size [%lld x %lld] x [%lld x %lld] exceeds the "
                   "cuBLAS limit",
                   kernel, (long long)p.rows, (long long)p.k, (long long)p.k,
                   (long long)p.n);
}

} // namespace

void cleave::rt::cuda::sumColumns(const char *kernel, const float *x,
                                  int64_t rows, int64_t n,
                                  const cleave_tensor &dbias, char *arena) {
  if (n == 0)
    return;
  int64_t splits =
      std::max<int64_t>(1, (rows + kSumRowsPerSplit - 1) / kSumRowsPerSplit);
  ScratchBuffer partial(size_t(splits * n) * sizeof(double), kernel);
  int64_t tasks = splits * ((n + kSumColumns - 1) / kSumColumns);
  columnPartialSumKernel<<<unsigned(std::min<int64_t>(tasks, 65535 * 8)),
                           dim3(kSumColumns, kSumLanes), 0, stream()>>>(
      x, rows, n, partial.as<double>());
  checkLaunchOf(kernel);
  columnSumKernel<<<blocksFor(n), kThreads, 0, stream()>>>(
      partial.as<double>(), splits, n, dataOf(arena, dbias), dbias.dtype);
  checkLaunchOf(kernel);
}

bool cleave::rt::cuda::gemmBiasGradLt(char *arena, const GemmPlan &p,
                                      const cleave_tensor &a,
                                      const cleave_tensor &b,
                                      const cleave_tensor &out,
                                      const cleave_tensor &dbias) {
  if (forceUnfused() || p.m == 0 || p.n == 0 || p.k == 0 || p.m > INT_MAX ||
      p.n > INT_MAX || p.k > INT_MAX || a.dtype != b.dtype ||
      dbias.dtype != out.dtype ||
      (out.dtype != a.dtype && out.dtype != CLEAVE_F32))
    return false;
  for (const cleave_tensor *in : {&a, &b})
    for (const cleave_tensor *written : {&out, &dbias})
      if (overlaps(*in, *written))
        return false;
  LtGemm g{p.m, p.n, p.k, p.transposeA, p.transposeB, a.dtype, out.dtype};
  return runLt("cleave_rt_gemm", g, CUBLASLT_EPILOGUE_BGRADB, dataOf(arena, a),
               dataOf(arena, b), dataOf(arena, out), dataOf(arena, dbias),
               nullptr);
}

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
  checkGemmSize(kKernel, p);
  if (!forceUnfused() && linearLt(arena, p, *x, *w, *bias, *out, pre))
    return;
  linearUnfused(arena, p, *x, *w, *bias, *out, pre);
}

extern "C" void cleave_rt_matmul_gelu_grad(
    char *arena, const cleave_tensor *dy, const cleave_tensor *w,
    const cleave_tensor *pre, const cleave_tensor *dz,
    const cleave_tensor *dbias, int32_t transpose_w, int32_t activation) {
  LinearPlan p = planMatmulGeluGrad(kGradKernel, dy, w, pre, dz, dbias,
                                    transpose_w, activation);
  if (p.n == 0)
    return;
  if (p.rows == 0) {
    // An empty sum: the bias gradient is zero.
    if (dbias)
      check(cudaMemsetAsync(dataOf(arena, *dbias), 0,
                            size_t(p.n) * elementSize(dbias->dtype), stream()),
            "clearing the bias gradient");
    return;
  }
  checkGemmSize(kGradKernel, p);
  if (!forceUnfused() && geluGradLt(arena, p, *dy, *w, *pre, *dz, dbias))
    return;
  geluGradUnfused(arena, p, *dy, *w, *pre, *dz, dbias);
}
