// Shim: the cuBLASLt subset of Linear.cu (matmuls with bias, GELU and
// bias-gradient epilogues), emulated in FakeCublasLt.cpp (see ../FakeCuda.h).
#ifndef CLEAVE_TEST_CUDAEMULATION_CUBLASLT_H
#define CLEAVE_TEST_CUDAEMULATION_CUBLASLT_H

#include "../FakeCuda.h"

struct FakeLtHandle;
struct FakeLtDesc;
struct FakeLtLayout;
struct FakeLtPreference;
typedef FakeLtHandle *cublasLtHandle_t;
typedef FakeLtDesc *cublasLtMatmulDesc_t;
typedef FakeLtLayout *cublasLtMatrixLayout_t;
typedef FakeLtPreference *cublasLtMatmulPreference_t;

enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA,
  CUBLASLT_MATMUL_DESC_TRANSB,
  CUBLASLT_MATMUL_DESC_EPILOGUE,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
};
enum cublasLtEpilogue_t {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_GELU_BIAS = 36,
  CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 164,
  CUBLASLT_EPILOGUE_DGELU = 192,
  CUBLASLT_EPILOGUE_DGELU_BGRAD = 208,
  CUBLASLT_EPILOGUE_BGRADB = 512,
};
enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};
enum { CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2 };

struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t a,
                                              const void *value, size_t size);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                          cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p);
cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                     cublasLtMatmulPreferenceAttributes_t a,
                                     const void *value, size_t size);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
    cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested,
    cublasLtMatmulHeuristicResult_t *results, int *count);
cublasStatus_t cublasLtMatmul(
    cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha,
    const void *A, cublasLtMatrixLayout_t a, const void *B,
    cublasLtMatrixLayout_t b, const void *beta, const void *C,
    cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
    const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSize,
    cudaStream_t stream);

#endif
