//===- Linear.cuh - what Linear.cu offers the other CUDA kernels -*- CUDA
//-*-===//
//
// cleave_rt_gemm (Matmul.cu) sums its bias gradient with the tools of the
// fused linears: cuBLASLt's BGRADB epilogue, or the column sum of the
// unfused path.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CUDA_LINEAR_CUH
#define CLEAVE_RUNTIME_CUDA_LINEAR_CUH

#include "../cpu/KernelChecks.h"

namespace cleave::rt::cuda {

/// out = op(a) op(b) and dbias = the sums of a's rows (a read transposed)
/// as one cuBLASLt matmul with the BGRADB epilogue. False, with nothing
/// done, where it does not apply: CLEAVE_CUDA_LINEAR=unfused, an empty
/// problem, a and b of two dtypes, out other than theirs or f32, dbias
/// other than out's, an output overlapping an input, or no algorithm.
bool gemmBiasGradLt(char *arena, const GemmPlan &p, const cleave_tensor &a,
                    const cleave_tensor &b, const cleave_tensor &out,
                    const cleave_tensor &dbias);

/// dbias [n] = the column sums of x [rows, n] (device f32), added in f64 in
/// an order fixed by the shape, so the same bits at each run.
void sumColumns(const char *kernel, const float *x, int64_t rows, int64_t n,
                const cleave_tensor &dbias, char *arena);

} // namespace cleave::rt::cuda

#endif // CLEAVE_RUNTIME_CUDA_LINEAR_CUH
