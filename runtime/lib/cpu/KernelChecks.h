//===- KernelChecks.h - descriptor checks both backends share ---*- C++ -*-===//
//
// The host-side validation and shape planning of the kernels, shared by the
// CPU backend (runtime/lib/cpu) and the CUDA backend (runtime/lib/cuda), so
// both accept the same descriptors and fail with the same messages. Pure
// C++ (no OpenMP, BLAS or CUDA), in cleave_rt_common. Every function fails
// through cleave_rt_fail naming the kernel.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_CPU_KERNELCHECKS_H
#define CLEAVE_RUNTIME_LIB_CPU_KERNELCHECKS_H

#include "Tensor.h"

#include <cstdint>

// The plan structs are passed by value to CUDA kernels; their accessors run
// on both sides there.
#ifdef __CUDACC__
#define CLEAVE_RT_HOST_DEVICE __host__ __device__
#else
#define CLEAVE_RT_HOST_DEVICE
#endif

namespace cleave::rt {

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

/// The matrices of one matmul: batch shape (of out), per-batch element
/// offsets of a and b, and M, K, N.
struct MatmulPlan {
  int64_t m = 1, k = 1, n = 1;
  int32_t batchRank = 0;
  int64_t batchShape[CLEAVE_RT_MAX_RANK];
  int64_t aStrides[CLEAVE_RT_MAX_RANK], bStrides[CLEAVE_RT_MAX_RANK];
  int64_t batches = 1;
  bool bShared = true; // b is the same matrix for every batch
  bool aDense = true;  // a's batches are consecutive matrices

  CLEAVE_RT_HOST_DEVICE int64_t aOffset(int64_t batch) const {
    return offset(batch, aStrides);
  }
  CLEAVE_RT_HOST_DEVICE int64_t bOffset(int64_t batch) const {
    return offset(batch, bStrides);
  }

private:
  CLEAVE_RT_HOST_DEVICE int64_t offset(int64_t batch,
                                       const int64_t *strides) const {
    int64_t off = 0;
    for (int d = batchRank - 1; d >= 0; --d) {
      off += (batch % batchShape[d]) * strides[d];
      batch /= batchShape[d];
    }
    return off;
  }
};

/// Checks out = a b (descriptors, shapes, dtypes: all float or all
/// integer, not i1) and plans it. Rank-1 operands follow NumPy: a [k] is a
/// row [1, k] and b [k] a column [k, 1], and the added dimension is absent
/// from out.
MatmulPlan planMatmul(const char *kernel, const cleave_tensor *a,
                      const cleave_tensor *b, const cleave_tensor *out);

/// cleave_rt_gemm: out [m, n] = op(a) [m, k] x op(b) [k, n], and with
/// transposeA the optional dbias [m] = the sums of a's k rows.
struct GemmPlan {
  int64_t m = 0, k = 0, n = 0;
  bool transposeA = false, transposeB = false;
};
GemmPlan planGemm(const char *kernel, const cleave_tensor *a,
                  const cleave_tensor *b, const cleave_tensor *out,
                  const cleave_tensor *dbias, int32_t transposeA,
                  int32_t transposeB);

/// The GEMM of one linear: out [rows, n] = x [rows, k] W [k, n] (W read
/// transposed from w [n, k] when `transposed`).
struct LinearPlan {
  int64_t rows = 0, k = 0, n = 0;
  bool transposed = false;
  int32_t activation = CLEAVE_ACT_NONE;
};

/// Checks the operands of linear (descriptors, float dtypes, shapes, the
/// activation, pre only with an activation) and plans it.
LinearPlan planLinear(const char *kernel, const cleave_tensor *x,
                      const cleave_tensor *w, const cleave_tensor *bias,
                      const cleave_tensor *out, const cleave_tensor *pre,
                      int32_t transposeW, int32_t activation);

/// Checks the operands of matmul_gelu_grad (dz [..., n] = dy [..., k] W,
/// pre like dz, dbias n elements, a GELU activation) and plans its GEMM.
LinearPlan planMatmulGeluGrad(const char *kernel, const cleave_tensor *dy,
                              const cleave_tensor *w, const cleave_tensor *pre,
                              const cleave_tensor *dz,
                              const cleave_tensor *dbias, int32_t transposeW,
                              int32_t activation);

/// The checks of expert_matmul beyond the matmul's: x [E,C,H], w [E,H,F],
/// out [E,C,F].
void checkExpertMatmul(const char *k, const cleave_tensor *x,
                       const cleave_tensor *w, const cleave_tensor *out);

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

void checkSameDtype(const char *kernel, const cleave_tensor &x,
                    const cleave_tensor &out);

/// Checks local_slice of `x` along `dim` into out (`index` an integer
/// scalar whose value the backend checks) and returns the number of
/// blocks: x.shape[dim] / out.shape[dim].
int64_t checkLocalSlice(const char *k, const cleave_tensor *x,
                        const cleave_tensor *index, const cleave_tensor *out,
                        int64_t dim);

/// Checks that `t` (the operand `name`) is an i64 or i32 scalar.
void checkIndexScalar(const char *k, const char *name, const cleave_tensor *t);

/// Checks set_scalar's out (a scalar of a float or integer dtype) and
/// returns `value` as its element's bytes (a float type rounded to nearest,
/// an integer toward zero) in the low bytes of the result.
uint64_t encodeScalar(const char *k, const cleave_tensor *out, double value);

/// Checks set_index's out: an i64 or i32 scalar.
void checkSetIndex(const char *k, const cleave_tensor *out);

/// The loop sizes of gather and gather_grad: elements before the gathered
/// dim, after it, and its size (in data, or in gather_grad's out).
struct GatherPlan {
  int64_t outer, inner, size;
};

/// Checks gather of `data` along `dim` by `indices` into out (the indices'
/// values are the backend's to check).
GatherPlan checkGather(const char *k, const cleave_tensor *data,
                       const cleave_tensor *indices, const cleave_tensor *out,
                       int64_t dim);

/// Checks gather_grad: dy (float) is out (float) gathered along `dim` by
/// `indices`.
GatherPlan checkGatherGrad(const char *k, const cleave_tensor *dy,
                           const cleave_tensor *indices,
                           const cleave_tensor *out, int64_t dim);

/// Checks transpose (out dim d is x dim perm[d]) and sets the element
/// strides in x of each out dim.
void planTranspose(const char *k, const cleave_tensor *x,
                   const cleave_tensor *out, const int64_t *perm,
                   int64_t *srcStrides);

/// Checks broadcast_in_dim (x dim d goes to out dim dims[d]) and sets the
/// element strides in x of each out dim (0 where x broadcasts).
void planBroadcastInDim(const char *k, const cleave_tensor *x,
                        const cleave_tensor *out, const int64_t *dims,
                        int64_t *srcStrides);

/// Checks slice (out[i] = x[start + i * strides]) and sets the element
/// strides in x of each out dim and the element offset `base` of out[0].
/// Returns false when out is empty (then nothing is read).
bool planSlice(const char *k, const cleave_tensor *x, const cleave_tensor *out,
               const int64_t *start, const int64_t *strides,
               int64_t *srcStrides, int64_t &base);

/// Checks slice_grad (the gradient of slice: out[start + i * strides] =
/// dy[i], zero elsewhere) and sets the element strides in out of each dy
/// dim and the element offset `base` of dy[0] in out. Returns false when dy
/// is empty (then nothing is written but the zeros).
bool planSliceGrad(const char *k, const cleave_tensor *dy,
                   const cleave_tensor *out, const int64_t *start,
                   const int64_t *strides, int64_t *dstStrides, int64_t &base);

/// Checks concat of `inputs` along `dim` into out and sets the element
/// counts before (`outer`) and after (`inner`) that dim.
void checkConcat(const char *k, const cleave_tensor *const *inputs,
                 int64_t numInputs, const cleave_tensor *out, int64_t dim,
                 int64_t &outer, int64_t &inner);

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

void checkNorm(const char *kernel, const cleave_tensor *x,
               const cleave_tensor *out, int64_t dim);

/// Rows and row length when normalizing over dims [dim, rank).
void rowsOf(const cleave_tensor &x, int64_t dim, int64_t &rows, int64_t &n);

/// The strides (in elements, 0 where it broadcasts) of a trailing operand
/// `t` right-aligned against x.shape[dim:]; fails naming `what` unless it
/// broadcasts.
void trailingStrides(const char *kernel, const char *what,
                     const cleave_tensor &t, const cleave_tensor &x,
                     int64_t dim, int64_t *strides);

/// The checks of the layer_norm and rms_norm gradients.
void checkNormGrad(const char *kernel, const cleave_tensor *x,
                   const cleave_tensor *scale, const cleave_tensor *dy,
                   const cleave_tensor *dx, const cleave_tensor *dscale,
                   const cleave_tensor *dbias, int64_t dim);

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

/// Checks logits [..., C], integer labels [...] and a one-element `scalar`
/// (the loss or its gradient, named `scalarName` in the message).
void checkCrossEntropyShapes(const char *k, const cleave_tensor *logits,
                             const cleave_tensor *labels,
                             const cleave_tensor *scalar,
                             const char *scalarName);

/// The descriptor checks of cross_entropy (labels' values are the
/// backend's to check).
void checkCrossEntropyArgs(const char *k, const cleave_tensor *logits,
                           const cleave_tensor *labels,
                           const cleave_tensor *out);

/// A loss reduction argument: CLEAVE_MEAN or CLEAVE_SUM.
void checkLossReduction(const char *k, int32_t reduction);

/// The descriptor checks of cross_entropy_grad.
void checkCrossEntropyGradArgs(const char *k, const cleave_tensor *logits,
                               const cleave_tensor *labels,
                               const cleave_tensor *dloss,
                               const cleave_tensor *dlogits);

/// The checks of mse: pred and target of one shape, a float scalar out.
void checkMse(const char *k, const cleave_tensor *pred,
              const cleave_tensor *target, const cleave_tensor *out);

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// The shapes shared by the forward and backward kernels.
struct AttentionShape {
  int64_t B, H, Hkv, Sq, Sk, D, Dv;
  int64_t group() const { return H / Hkv; }
};

/// Checks q [B,H,Sq,D], k [B,Hkv,Sk,D], v [B,Hkv,Sk,Dv] and `out` (the
/// forward output or the gradient flowing into it, named `outName`)
/// [B,H,Sq,Dv], all float, with H a multiple of Hkv.
AttentionShape checkAttention(const char *kn, const cleave_tensor *q,
                              const cleave_tensor *k, const cleave_tensor *v,
                              const cleave_tensor *out, const char *outName);

/// The checks of attention_grad: checkAttention's with dout as out, and dq,
/// dk and dv float of the shapes of q, k and v.
AttentionShape
checkAttentionGrad(const char *kn, const cleave_tensor *q,
                   const cleave_tensor *k, const cleave_tensor *v,
                   const cleave_tensor *dout, const cleave_tensor *dq,
                   const cleave_tensor *dk, const cleave_tensor *dv);

/// The checks of attention_block: checkAttention's with out as the
/// output, lse (and lse_in) f32 [B, H, Sq], out_in (when given, with
/// lse_in) of out's shape, and the positions i64 [Sq] and [Sk].
AttentionShape checkAttentionBlock(const char *kn, const cleave_tensor *q,
                                   const cleave_tensor *k,
                                   const cleave_tensor *v,
                                   const cleave_tensor *out_in,
                                   const cleave_tensor *lse_in,
                                   const cleave_tensor *q_pos,
                                   const cleave_tensor *k_pos,
                                   const cleave_tensor *out,
                                   const cleave_tensor *lse);

/// The checks of attention_block_grad: checkAttentionGrad's, out of dout's
/// shape, lse f32 [B, H, Sq], the positions i64 [Sq] and [Sk].
AttentionShape checkAttentionBlockGrad(
    const char *kn, const cleave_tensor *q, const cleave_tensor *k,
    const cleave_tensor *v, const cleave_tensor *out, const cleave_tensor *lse,
    const cleave_tensor *dout, const cleave_tensor *q_pos,
    const cleave_tensor *k_pos, const cleave_tensor *dq,
    const cleave_tensor *dk, const cleave_tensor *dv);

/// Checks the attention mask (i1 or float, right-aligned against
/// [B, H, Sq, Sk] with size-1 dims broadcasting) and writes its element
/// strides along those four dims (0 where broadcast).
void checkAttentionMask(const char *kn, const AttentionShape &s,
                        const cleave_tensor *mask, int64_t strides[4]);

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

void checkExperts(const char *kernel, const cleave_tensor *experts);

/// The checks of router_topk: logits [T, E], gates and experts [T, k].
void checkRouterTopk(const char *kn, const cleave_tensor *logits,
                     const cleave_tensor *gates, const cleave_tensor *experts,
                     int64_t k);

/// The checks of moe_dispatch: tokens [T, H], experts [T, k], out
/// [E, C, H] of tokens' dtype.
void checkMoeDispatch(const char *kn, const cleave_tensor *tokens,
                      const cleave_tensor *experts, const cleave_tensor *out,
                      int64_t groups);

/// The checks of moe_combine: expert_out [E, C, H], gates and experts
/// [T, k], out [T, H].
void checkMoeCombine(const char *kn, const cleave_tensor *expert_out,
                     const cleave_tensor *gates, const cleave_tensor *experts,
                     const cleave_tensor *out, int64_t groups);

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

/// param f32, grad float of param's shape.
void checkParam(const char *k, const cleave_tensor *param,
                const cleave_tensor *grad);

/// Optimizer state: f32 and the parameter's shape.
void checkState(const char *k, const char *what, const cleave_tensor *state,
                const cleave_tensor *param);

/// The step counter: an i64 scalar (its value is the backend's to check).
void checkStep(const char *k, const cleave_tensor *step);

/// The gradient scale, when given: an f32 scalar.
void checkGradScale(const char *k, const cleave_tensor *scale);

//===----------------------------------------------------------------------===//
// Reduction
//===----------------------------------------------------------------------===//

/// Checks reduce over `dims` (sorted, unique) and marks them in `reduced`
/// (CLEAVE_RT_MAX_RANK entries, all false on entry).
void checkReduce(const char *k, int32_t kind, const cleave_tensor *x,
                 const cleave_tensor *out, const int64_t *dims, int64_t numDims,
                 bool *reduced);

/// Checks topk of x along dim into values and indices.
void checkTopk(const char *kn, const cleave_tensor *x,
               const cleave_tensor *values, const cleave_tensor *indices,
               int64_t k, int64_t dim);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_LIB_CPU_KERNELCHECKS_H
