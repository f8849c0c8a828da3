//===- FakeCublasLt.cpp - cuBLASLt matmuls with epilogues, emulated ------===//
//
// The cuBLASLt calls of Linear.cu, as cuBLASLt's documentation defines
// them: column-major D (m x n) = epilogue(alpha op(A) op(B) + beta C) with
// the shapes of each matrix layout (rows, cols, leading dimension), f32
// accumulation, and the epilogues
//   BIAS           D = AB + bias[i]
//   GELU_BIAS      D = gelu(AB + bias[i])
//   GELU_AUX_BIAS  aux = AB + bias[i] (stored, leading dimension AUX_LD),
//                  D = gelu(aux)
//   DGELU          D = AB * gelu'(aux)
//   DGELU_BGRAD    the same, and bias[i] = the sum of row i of D
//   BGRADB         D = AB, and bias[j] = the sum of column j of op(B)
// with the bias and aux in D's type and GELU in its tanh form. Operand
// shapes that do not chain (op(A) m x k, op(B) k x n, D m x n), leading
// dimensions under the rows, a missing bias or aux pointer, and an aux
// leading dimension that is not a multiple of 8 end the run with a message:
// they are the bookkeeping errors this emulation is for.
//
//===----------------------------------------------------------------------===//

#include <cublasLt.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

struct FakeLtHandle {};
struct FakeLtDesc {
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  void *aux = nullptr;
  int64_t auxLd = 0;
};
struct FakeLtLayout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct FakeLtPreference {};

namespace {

[[noreturn]] void fail(const char *what) {
  std::fprintf(stderr, "fake cuBLASLt: %s\n", what);
  std::abort();
}

template <class T> T read(const void *value, size_t size) {
  if (size != sizeof(T))
    fail("an attribute value of the wrong size");
  T v;
  std::memcpy(&v, value, sizeof(T));
  return v;
}

float geluTanh(float v) {
  float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
  return 0.5f * v * (1.0f + std::tanh(inner));
}
float geluTanhGrad(float v) {
  float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
  float t = std::tanh(inner);
  return 0.5f * (1.0f + t) +
         0.5f * v * (1.0f - t * t) * 0.7978845608f *
             (1.0f + 3.0f * 0.044715f * v * v);
}

/// op(layout)'s rows and columns.
void shape(const FakeLtLayout &l, cublasOperation_t op, uint64_t &rows,
           uint64_t &cols) {
  rows = op == CUBLAS_OP_N ? l.rows : l.cols;
  cols = op == CUBLAS_OP_N ? l.cols : l.rows;
  if (l.ld < int64_t(l.rows) || l.ld < 1)
    fail("a leading dimension below the layout's rows");
}

} // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  static FakeLtHandle handle;
  *h = &handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F)
    fail("a matmul that does not compute in f32");
  *desc = new FakeLtDesc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t a,
                                              const void *value, size_t size) {
  switch (a) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    desc->transA = read<cublasOperation_t>(value, size);
    break;
  case CUBLASLT_MATMUL_DESC_TRANSB:
    desc->transB = read<cublasOperation_t>(value, size);
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    desc->epilogue = read<cublasLtEpilogue_t>(value, size);
    break;
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    desc->bias = read<const void *>(value, size);
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    desc->aux = read<void *>(value, size);
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    desc->auxLd = read<int64_t>(value, size);
    break;
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                          cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *layout = new FakeLtLayout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = new FakeLtPreference;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                     cublasLtMatmulPreferenceAttributes_t,
                                     const void *, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
    cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
    cublasLtMatmulPreference_t, int requested,
    cublasLtMatmulHeuristicResult_t *results, int *count) {
  if (requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].workspaceSize = 4096; // so that the caller's workspace is used
  *count = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(
    cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void *alpha,
    const void *A, cublasLtMatrixLayout_t a, const void *B,
    cublasLtMatrixLayout_t b, const void *beta, const void *C,
    cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
    const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSize,
    cudaStream_t stream) {
  fake::drainStream(stream);
  if (!algo || (workspaceSize && !workspace))
    fail("no algorithm, or a workspace size without a workspace");
  uint64_t m, k, kb, n, cm, cn;
  shape(*a, desc->transA, m, k);
  shape(*b, desc->transB, kb, n);
  shape(*c, CUBLAS_OP_N, cm, cn);
  if (k != kb || d->rows != m || d->cols != n || cm != m || cn != n)
    fail("operand shapes that do not chain (op(A) m x k, op(B) k x n, "
         "C and D m x n)");
  cublasLtEpilogue_t e = desc->epilogue;
  bool wantsBias =
      e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
      e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
      e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADB;
  bool wantsAux = e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
                  e == CUBLASLT_EPILOGUE_DGELU ||
                  e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
  if (wantsBias && !desc->bias)
    fail("a bias epilogue without a bias pointer");
  if (wantsAux && (!desc->aux || desc->auxLd < int64_t(m) ||
                   desc->auxLd % 8 != 0))
    fail("an aux epilogue without an aux pointer, or with an aux leading "
         "dimension below m or not a multiple of 8");
  float al = *static_cast<const float *>(alpha);
  float be = *static_cast<const float *>(beta);
  auto at = [&](const FakeLtLayout &l, cublasOperation_t op, int64_t i,
                int64_t j) {
    return op == CUBLAS_OP_N ? i + j * l.ld : j + i * l.ld;
  };
  cudaDataType_t dt = d->type;
  std::vector<float> rowSum(e == CUBLASLT_EPILOGUE_DGELU_BGRAD ? m : 0, 0.0f);
  std::vector<float> products = fake::products(
      int64_t(m), int64_t(n), int64_t(k),
      [&](int64_t i, int64_t l) {
        return fake::loadElement(A, a->type, at(*a, desc->transA, i, l),
                                 false);
      },
      [&](int64_t l, int64_t j) {
        return fake::loadElement(B, b->type, at(*b, desc->transB, l, j),
                                 false);
      });
  std::vector<float> result(size_t(m * n));
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < m; ++i) {
      float v = al * products[size_t(i * n + j)];
      if (be != 0.0f)
        v += be * fake::loadElement(C, c->type, at(*c, CUBLAS_OP_N, i, j),
                                    false);
      int64_t ai = int64_t(i) + int64_t(j) * desc->auxLd;
      bool isGradient =
          e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADB;
      float bias = wantsBias && !isGradient
                       ? fake::loadElement(desc->bias, dt, int64_t(i), false)
                       : 0.0f;
      switch (e) {
      case CUBLASLT_EPILOGUE_BIAS:
        v += bias;
        break;
      case CUBLASLT_EPILOGUE_GELU_BIAS:
        v = geluTanh(v + bias);
        break;
      case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
        fake::storeElement(desc->aux, dt, ai, v + bias);
        v = geluTanh(v + bias);
        break;
      case CUBLASLT_EPILOGUE_DGELU:
      case CUBLASLT_EPILOGUE_DGELU_BGRAD:
        v *= geluTanhGrad(fake::loadElement(desc->aux, dt, ai, false));
        if (e == CUBLASLT_EPILOGUE_DGELU_BGRAD)
          rowSum[i] += v;
        break;
      default:
        break;
      }
      result[size_t(i + j * m)] = v;
    }
  // D may be C (beta 0 here) but never an input: stored after the loop.
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < m; ++i)
      fake::storeElement(D, dt, at(*d, CUBLAS_OP_N, i, j),
                         result[size_t(i + j * m)]);
  for (uint64_t i = 0; i < rowSum.size(); ++i)
    fake::storeElement(const_cast<void *>(desc->bias), dt, int64_t(i),
                       rowSum[i]);
  if (e == CUBLASLT_EPILOGUE_BGRADB)
    for (uint64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (uint64_t l = 0; l < k; ++l)
        sum += fake::loadElement(B, b->type, at(*b, desc->transB, l, j), false);
      fake::storeElement(const_cast<void *>(desc->bias), dt, int64_t(j), sum);
    }
  return CUBLAS_STATUS_SUCCESS;
}
