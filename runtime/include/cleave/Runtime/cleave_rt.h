/*===- cleave_rt.h - the runtime C ABI of compiled Cleave programs -*- C -*-===*
 *
 * A compiled program is a sequence of calls of these functions. Every tensor
 * lives in one arena per rank (DESIGN.md §5): the compiler assigns each a
 * byte offset, and passes constant `cleave_tensor` descriptors (offset,
 * element type, static shape) to the kernels together with the arena base.
 * All tensors are dense, row-major, and never overlap unless they are the
 * same tensor. The CPU backend implements this ABI on OpenBLAS; the CUDA
 * backend implements it on the GPU.
 *
 * The generated object also defines `cleave_program` (the metadata below)
 * and `cleave_program_run`; the runtime's `main` loads parameters and
 * inputs into the arena, runs the program and writes the outputs.
 *
 * Semantics fixed where the declarations alone leave a choice (every
 * backend implements them):
 * - Aliasing: `out` may be the same tensor as an input (same offset, same
 *   bytes) for every kernel except concat; kernels that read out of order
 *   then work on a copy. Partial overlaps are rejected where detected.
 * - Mixed dtypes: a kernel computes in f32 when its output is a float type
 *   and in i64 otherwise, converting each operand on load (compare: i64
 *   when both operands are integers, else f32). Conversion to i1 is
 *   "nonzero" (0.5 and NaN are true); float to integer truncates toward
 *   zero with NaN -> 0 and saturation at the i64 bounds; narrowing to i32
 *   wraps. The data movement kernels (transpose, broadcast_in_dim, slice,
 *   concat, gather, moe_dispatch) copy bytes and need equal dtypes.
 * - Integer arithmetic wraps on overflow; integer div truncates toward zero
 *   and a zero divisor is fatal; integer pow with a negative exponent is
 *   the truncated quotient (0 unless the base is +-1). Only neg, abs and
 *   relu are defined on integers. Float max/min propagate NaN.
 * - Index operands (gather indices, labels, experts) may be i64 or i32.
 * - Errors (bad shapes or dtypes, indices out of range) end the process
 *   through cleave_rt_fail with a message naming the kernel and the value.
 *
 *===----------------------------------------------------------------------===*/

#ifndef CLEAVE_RUNTIME_CLEAVE_RT_H
#define CLEAVE_RUNTIME_CLEAVE_RT_H

#include <stdint.h>

/* The ABI version, the dtypes and every kind below (enum cleave_dtype,
 * cleave_unary, cleave_binary, cleave_compare, cleave_reduction,
 * cleave_activation, cleave_program_kind, cleave_param_role) are
 * generated from the X-macro lists of this header, which the compiler
 * includes too. */
#include "cleave/Runtime/cleave_rt_enums.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A tensor in the arena. Rank 0 is a scalar (one element). */
typedef struct cleave_tensor {
  int64_t offset; /* bytes from the arena base, 64-byte aligned */
  int32_t dtype;  /* enum cleave_dtype */
  int32_t rank;
  int64_t shape[CLEAVE_RT_MAX_RANK];
} cleave_tensor;

/* Float kernels compute in f32 (f16/bf16 are converted on load and store);
 * integer kernels in i64. Elementwise kernels broadcast NumPy-style from the
 * operand shapes to the output shape. */

/* src and dst may differ in shape (a reshape) if their element counts
 * match; with different dtypes it is a cast. */
void cleave_rt_copy(char *arena, const cleave_tensor *src,
                    const cleave_tensor *dst);
/* Copies `data` (the tensor's bytes in its dtype) into `out`. */
void cleave_rt_constant(char *arena, const cleave_tensor *out,
                        const void *data);
/* out[..., i, ...] = i along `dim` (integer or float out). */
void cleave_rt_iota(char *arena, const cleave_tensor *out, int64_t dim);
void cleave_rt_unary(char *arena, int32_t op, const cleave_tensor *x,
                     const cleave_tensor *out);
void cleave_rt_binary(char *arena, int32_t op, const cleave_tensor *a,
                      const cleave_tensor *b, const cleave_tensor *out);
/* out is i1. */
void cleave_rt_compare(char *arena, int32_t direction, const cleave_tensor *a,
                       const cleave_tensor *b, const cleave_tensor *out);
void cleave_rt_where(char *arena, const cleave_tensor *cond,
                     const cleave_tensor *x, const cleave_tensor *y,
                     const cleave_tensor *out);
/* Element type conversion; float to int truncates toward zero. */
void cleave_rt_cast(char *arena, const cleave_tensor *x,
                    const cleave_tensor *out);
/* [..., m, k] x [..., k, n] -> [..., m, n], batch dims broadcast. A rank-1
 * operand follows NumPy: a [k] is [1, k] and b [k] is [k, 1], with that
 * dimension absent from out. Integer operands multiply in i64. */
void cleave_rt_matmul(char *arena, const cleave_tensor *a,
                      const cleave_tensor *b, const cleave_tensor *out);
/* out = op(a) op(b), BLAS's GEMM: a is [..., m, k] (its leading dims are
 * rows) or, with transpose_a != 0, the rank-2 [k, m] read transposed; b is
 * the rank-2 [k, n] or, with transpose_b != 0, [n, k] read transposed; out
 * is [..., m, n]. Float operands; the product accumulates in f32 and out is
 * rounded once. dbias, when not NULL (only with transpose_a), has m
 * elements ([m] or [1, ..., 1, m]) and receives the sum of a's k rows (for
 * a weight gradient dy^T x, the bias gradient), accumulated in f32 or
 * wider and rounded once. The CUDA backend runs it as one cuBLASLt GEMM
 * with the BGRADB epilogue where cuBLASLt offers it. */
void cleave_rt_gemm(char *arena, const cleave_tensor *a, const cleave_tensor *b,
                    const cleave_tensor *out, const cleave_tensor *dbias,
                    int32_t transpose_a, int32_t transpose_b);
/* out = activation(x W + bias): x [..., k]; W is w [k, n], or w [n, k]
 * read transposed when transpose_w != 0 (a PyTorch Linear's layout); bias
 * [n]; out [..., n]. pre, when not NULL (only with an activation), has
 * out's shape and receives x W + bias, the value the activation's gradient
 * needs. Float operands; the product accumulates in f32 and out and pre are
 * rounded once. The CUDA backend runs it as one cuBLASLt GEMM with a bias
 * (and GELU) epilogue where cuBLASLt offers one. */
void cleave_rt_linear(char *arena, const cleave_tensor *x,
                      const cleave_tensor *w, const cleave_tensor *bias,
                      const cleave_tensor *out, const cleave_tensor *pre,
                      int32_t transpose_w, int32_t activation);
/* The backward of a GELU linear, seen from the layer after it: dz =
 * gelu'(pre) * (dy W), with dy [..., k], W as in cleave_rt_linear (w [k, n],
 * or [n, k] read transposed when transpose_w != 0), pre and dz [..., n].
 * dbias, when not NULL, has n elements ([n] or [1, ..., 1, n]) and receives
 * the sum of dz over every dimension but the last, from its unrounded
 * values. activation is CLEAVE_ACT_GELU_ERF or CLEAVE_ACT_GELU_TANH. The
 * CUDA backend runs it as one cuBLASLt GEMM with the DGELU(_BGRAD)
 * epilogue where cuBLASLt offers it. */
void cleave_rt_matmul_gelu_grad(char *arena, const cleave_tensor *dy,
                                const cleave_tensor *w,
                                const cleave_tensor *pre,
                                const cleave_tensor *dz,
                                const cleave_tensor *dbias, int32_t transpose_w,
                                int32_t activation);
/* Softmax (or log-softmax when `log` != 0) along `dim`. A slice that is
 * all -inf gives NaN, as in NumPy and PyTorch (attention, below, defines
 * its fully masked rows instead). */
void cleave_rt_softmax(char *arena, const cleave_tensor *x,
                       const cleave_tensor *out, int64_t dim, int32_t log);
/* Reduces the sorted `dims`; out has them as size 1 or dropped. Integer
 * mean truncates. An empty reduction gives 0 (sum), NaN (float mean), -inf
 * or the lowest integer (max), +inf or the largest integer (min). */
void cleave_rt_reduce(char *arena, int32_t kind, const cleave_tensor *x,
                      const cleave_tensor *out, const int64_t *dims,
                      int64_t num_dims);
/* Normalizes over dims [dim, rank); bias may be NULL. Biased variance.
 * scale and bias (also for rms_norm) either have exactly
 * prod(x.shape[dim:]) elements, read in row-major order, or broadcast
 * NumPy-style to x.shape[dim:]. */
void cleave_rt_layer_norm(char *arena, const cleave_tensor *x,
                          const cleave_tensor *scale, const cleave_tensor *bias,
                          const cleave_tensor *out, int64_t dim, double eps);
void cleave_rt_rms_norm(char *arena, const cleave_tensor *x,
                        const cleave_tensor *scale, const cleave_tensor *out,
                        int64_t dim, double eps);
/* out dim i = x dim perm[i]. */
void cleave_rt_transpose(char *arena, const cleave_tensor *x,
                         const cleave_tensor *out, const int64_t *perm);
/* x dim i maps to out dim dims[i] (size 1 or equal). */
void cleave_rt_broadcast_in_dim(char *arena, const cleave_tensor *x,
                                const cleave_tensor *out, const int64_t *dims);
/* out[i] = x[start + i * stride] per dim (the sizes are out's). Strides may
 * be negative; every index read must lie in [0, size). */
void cleave_rt_slice(char *arena, const cleave_tensor *x,
                     const cleave_tensor *out, const int64_t *start,
                     const int64_t *strides);
void cleave_rt_concat(char *arena, const cleave_tensor *const *inputs,
                      int64_t num_inputs, const cleave_tensor *out,
                      int64_t dim);
/* Block `*index` of x along `dim`: out equals x except along dim, where it
 * holds x[i * n, (i + 1) * n) with n = out's size there and i the value of
 * the integer scalar `index` (in the arena, so that it may be computed on
 * the device); an i outside the blocks is a fatal error naming it. The
 * lowering of dist.local_slice: a device's shard of a replicated value. */
void cleave_rt_local_slice(char *arena, const cleave_tensor *x,
                           const cleave_tensor *index,
                           const cleave_tensor *out, int64_t dim);
/* Writes `value` into the integer scalar `out` (i64 or i32): the lowering
 * of dist.axis_index, whose value the program context gives. */
void cleave_rt_set_index(char *arena, const cleave_tensor *out, int64_t value);
/* Writes `value` into the scalar `out`, converted to its dtype (a float
 * type rounded to nearest, i64 or i32 toward zero): the lowering of
 * graph.hyperparameter, whose value the program context gives. */
void cleave_rt_set_scalar(char *arena, const cleave_tensor *out, double value);
/* out = data[:dim] + indices + data[dim+1:]; a negative index counts from
 * the end (ONNX Gather); one outside [-size, size) is a fatal error naming
 * the index. */
void cleave_rt_gather(char *arena, const cleave_tensor *data,
                      const cleave_tensor *indices, const cleave_tensor *out,
                      int64_t dim);
/* cleave_rt_gather from a block of a larger table: data holds its entries
 * [o, o + size) along dim, o the value of the integer scalar `offset` (in
 * the arena: a device's vocabulary offset, computed on it). Index i takes
 * entry i - o; an index outside the block gives zeros (none counts from
 * the end). The vocabulary-parallel embedding's lookup. */
void cleave_rt_gather_block(char *arena, const cleave_tensor *data,
                            const cleave_tensor *indices,
                            const cleave_tensor *offset,
                            const cleave_tensor *out, int64_t dim);
/* Top (bottom when smallest) k along dim, sorted; ties to the lower index;
 * indices are i64. NaN ranks above every number (first when largest, last
 * when smallest). */
void cleave_rt_topk(char *arena, const cleave_tensor *x,
                    const cleave_tensor *values, const cleave_tensor *indices,
                    int64_t k, int64_t dim, int32_t smallest);
/* q [B,H,Sq,D], k [B,Hkv,Sk,D], v [B,Hkv,Sk,Dv] -> [B,H,Sq,Dv]; query head h
 * uses kv head h / (H / Hkv). mask (may be NULL) broadcasts to [B,H,Sq,Sk]:
 * i1 keeps where true, float is added. causal masks key j > query i.
 * `scale` is used as given. A query row whose keys are all masked (by the
 * mask, causal, or a -inf float mask) is defined as zeros, not NaN; a NaN
 * score of a live key makes its row NaN. */
void cleave_rt_attention(char *arena, const cleave_tensor *q,
                         const cleave_tensor *k, const cleave_tensor *v,
                         const cleave_tensor *mask, const cleave_tensor *out,
                         int32_t causal, double scale);
/* One block of ring attention (context parallelism): q [B,H,Sq,D] against
 * the keys k [B,Hkv,Sk,D] and values v [B,Hkv,Sk,Dv] of one block, merged
 * into out_in [B,H,Sq,Dv] and lse_in [B,H,Sq] (f32), the attention over the
 * blocks before (both NULL for the first block). Writes out, the attention
 * over every block so far, and lse, the natural log of the sum of
 * exp(score) over their keys: -inf for a query row with no live key yet,
 * whose out is zeros. q_pos [Sq] and k_pos [Sk] (i64) are sequence
 * positions: under causal a key whose position is after the query's is
 * masked. `scale` is used as given; grouped-query heads as in attention.
 * out and lse may alias out_in and lse_in. */
void cleave_rt_attention_block(char *arena, const cleave_tensor *q,
                               const cleave_tensor *k, const cleave_tensor *v,
                               const cleave_tensor *out_in,
                               const cleave_tensor *lse_in,
                               const cleave_tensor *q_pos,
                               const cleave_tensor *k_pos,
                               const cleave_tensor *out,
                               const cleave_tensor *lse, int32_t causal,
                               double scale);
/* Mean (reduction CLEAVE_MEAN) or sum (CLEAVE_SUM) over positions whose
 * label != ignore_index (when has_ignore) of -log_softmax(logits)[label];
 * logits [..., C], labels [...]; out scalar. A label outside [0, C) is a
 * fatal error (ignored positions may hold any value). When every position
 * is ignored the loss is 0, not 0/0. */
void cleave_rt_cross_entropy(char *arena, const cleave_tensor *logits,
                             const cleave_tensor *labels,
                             const cleave_tensor *out, int32_t has_ignore,
                             int64_t ignore_index, int32_t reduction);
/* mean((pred - target)^2) over same-shaped pred and target; out scalar. */
void cleave_rt_mse(char *arena, const cleave_tensor *pred,
                   const cleave_tensor *target, const cleave_tensor *out);
/* logits [T,E] -> gates [T,k] (softmax probabilities of the top k, divided by
 * their sum when normalize), experts [T,k] i64. The softmax is over all E;
 * experts are ranked by logit, ties to the lower index. */
void cleave_rt_router_topk(char *arena, const cleave_tensor *logits,
                           const cleave_tensor *gates,
                           const cleave_tensor *experts, int64_t k,
                           int32_t normalize);
/* tokens [T,H], experts [T,k] -> out [E,C,H]: the tokens form `groups`
 * groups of T/groups consecutive tokens, each with C/groups slots per
 * expert (slots [g C/groups, (g+1) C/groups) of group g); assignment (t, j)
 * goes to expert experts[t,j] at its next free slot of the group in (t, j)
 * order; beyond the group's slots it is dropped; empty slots are zero. An
 * expert index outside [0, E) is fatal. */
void cleave_rt_moe_dispatch(char *arena, const cleave_tensor *tokens,
                            const cleave_tensor *experts,
                            const cleave_tensor *out, int64_t groups);
/* [E,C,H] x [E,H,F] -> [E,C,F]. */
void cleave_rt_expert_matmul(char *arena, const cleave_tensor *x,
                             const cleave_tensor *w, const cleave_tensor *out);
/* expert_out [E,C,H], gates [T,k], experts [T,k] -> [T,H] with the slots
 * that moe_dispatch with the same groups assigns. */
void cleave_rt_moe_combine(char *arena, const cleave_tensor *expert_out,
                           const cleave_tensor *gates,
                           const cleave_tensor *experts,
                           const cleave_tensor *out, int64_t groups);

/*===----------------------------------------------------------------------===*
 * Backward kernels (the gradient rules of -cleave-autodiff). Each computes
 * the vector-Jacobian product of its forward kernel with the same
 * arguments; `d<name>` is the gradient flowing into tensor <name>. Outputs
 * are overwritten, never accumulated into.
 *===----------------------------------------------------------------------===*/

/* dx = dy * f'(x) for op in {RELU, TANH, SIGMOID, SILU, GELU_ERF,
 * GELU_TANH} (enum cleave_unary); x, dy and dx have one shape; dx may
 * alias x or dy. */
void cleave_rt_unary_grad(char *arena, int32_t op, const cleave_tensor *x,
                          const cleave_tensor *dy, const cleave_tensor *dx);
/* The gradients of cleave_rt_layer_norm (mean and variance recomputed from
 * x): dx like x; dscale like scale and dbias like the forward's bias (either
 * may be NULL, then not computed), summed over the leading dims [0, dim)
 * and over the dims along which scale or bias broadcast. */
void cleave_rt_layer_norm_grad(char *arena, const cleave_tensor *x,
                               const cleave_tensor *scale,
                               const cleave_tensor *dy, const cleave_tensor *dx,
                               const cleave_tensor *dscale,
                               const cleave_tensor *dbias, int64_t dim,
                               double eps);
/* The gradients of cleave_rt_rms_norm: dx like x; dscale like scale (may be
 * NULL), summed as for layer_norm_grad. */
void cleave_rt_rms_norm_grad(char *arena, const cleave_tensor *x,
                             const cleave_tensor *scale,
                             const cleave_tensor *dy, const cleave_tensor *dx,
                             const cleave_tensor *dscale, int64_t dim,
                             double eps);
/* The gradients of cleave_rt_attention (same q, k, v, mask, causal, scale):
 * dq like q; dk, dv like k, v, each summed over the query heads that share
 * the kv head. The mask gets no gradient. Fully masked rows give zeros. */
void cleave_rt_attention_grad(char *arena, const cleave_tensor *q,
                              const cleave_tensor *k, const cleave_tensor *v,
                              const cleave_tensor *mask,
                              const cleave_tensor *dout,
                              const cleave_tensor *dq, const cleave_tensor *dk,
                              const cleave_tensor *dv, int32_t causal,
                              double scale);
/* The gradients of one block of cleave_rt_attention_block: out and lse are
 * the forward's final results over every block, dout the gradient flowing
 * into out. The block's probabilities are exp(scale q k^T - lse) (zero for
 * masked keys and for rows whose lse is -inf); dq is the block's share of
 * the query gradient, dk and dv the block's key and value gradients, summed
 * over the query heads that share a kv head. */
void cleave_rt_attention_block_grad(
    char *arena, const cleave_tensor *q, const cleave_tensor *k,
    const cleave_tensor *v, const cleave_tensor *out, const cleave_tensor *lse,
    const cleave_tensor *dout, const cleave_tensor *q_pos,
    const cleave_tensor *k_pos, const cleave_tensor *dq,
    const cleave_tensor *dk, const cleave_tensor *dv, int32_t causal,
    double scale);
/* The transpose of cleave_rt_gather: out (the data's shape) is zeroed, then
 * out[..., idx, ...] += dy[..., j, ...] for every index position j (a
 * negative index counts from the end, as in the forward). dy and out are
 * float types (summed in f32, in index order). */
void cleave_rt_gather_grad(char *arena, const cleave_tensor *dy,
                           const cleave_tensor *indices,
                           const cleave_tensor *out, int64_t dim);
/* The transpose of cleave_rt_gather_block: out is the block [o, o + size)
 * of the table's gradient; dy's slice at position j is added at entry
 * indices[j] - o, and dropped when that falls outside the block. */
void cleave_rt_gather_grad_block(char *arena, const cleave_tensor *dy,
                                 const cleave_tensor *indices,
                                 const cleave_tensor *offset,
                                 const cleave_tensor *out, int64_t dim);
/* The transpose of cleave_rt_slice: out (the sliced operand's shape) is
 * zeroed, then out[start + i * stride] = dy[i] per dim. Copies bytes (dy
 * and out of one dtype); a stride of 0 along a dim of size > 1 (a repeated
 * read in the forward, whose transpose would be a sum) is rejected. */
void cleave_rt_slice_grad(char *arena, const cleave_tensor *dy,
                          const cleave_tensor *out, const int64_t *start,
                          const int64_t *strides);
/* d logits of cleave_rt_cross_entropy scaled by the scalar dloss:
 * (softmax(logits) - onehot(label)) * dloss / count for CLEAVE_MEAN, count
 * being the number of positions not ignored, or without the division for
 * CLEAVE_SUM; ignored positions get zeros (so all zeros when every position
 * is ignored). */
void cleave_rt_cross_entropy_grad(char *arena, const cleave_tensor *logits,
                                  const cleave_tensor *labels,
                                  const cleave_tensor *dloss,
                                  const cleave_tensor *dlogits,
                                  int32_t has_ignore, int64_t ignore_index,
                                  int32_t reduction);

/*===----------------------------------------------------------------------===*
 * Optimizer updates, in place on f32 parameters and f32 state, with exactly
 * the update formulas of torch.optim.SGD and torch.optim.AdamW. `step` is
 * an i64 scalar holding the 1-based number of this update; `grad_scale`
 * (may be NULL) is an f32 scalar the gradient is multiplied by first (the
 * global-norm clipping coefficient, over the loss scale when scaling); when
 * it is not finite (inf or NaN: the loss scaler found non-finite
 * gradients) the update is skipped, leaving the parameter and its state
 * unchanged. The gradient may be f32, f16 or bf16.
 *===----------------------------------------------------------------------===*/

/* g = grad * scale + weight_decay * p; with momentum != 0: buf = g on step
 * 1, else buf = momentum * buf + (1 - dampening) * g, and g = buf (or
 * g + momentum * buf when nesterov); then p -= lr * g. momentum_buf may be
 * NULL only when momentum is 0. */
void cleave_rt_sgd(char *arena, const cleave_tensor *param,
                   const cleave_tensor *grad,
                   const cleave_tensor *momentum_buf,
                   const cleave_tensor *step, const cleave_tensor *grad_scale,
                   double lr, double momentum, double dampening,
                   double weight_decay, int32_t nesterov);
/* p *= 1 - lr * weight_decay; m = beta1 m + (1 - beta1) g;
 * v = beta2 v + (1 - beta2) g^2; p -= lr / (1 - beta1^t) * m /
 * (sqrt(v) / sqrt(1 - beta2^t) + eps), t = *step. (As PyTorch 1.13
 * computes m; PyTorch 2 writes it as m.lerp_(g, 1 - beta1), which rounds
 * differently.) */
void cleave_rt_adamw(char *arena, const cleave_tensor *param,
                     const cleave_tensor *grad, const cleave_tensor *m,
                     const cleave_tensor *v, const cleave_tensor *step,
                     const cleave_tensor *grad_scale, double lr, double beta1,
                     double beta2, double eps, double weight_decay);

/*===----------------------------------------------------------------------===*
 * The backend: where the arena lives. The main touches arena bytes only
 * through these, so one compiled program runs on either backend (host
 * memory on the CPU, device memory on CUDA, where the kernels run on one
 * stream in call order and these calls order themselves after it).
 *===----------------------------------------------------------------------===*/

/* "cpu" or "cuda". */
const char *cleave_rt_backend_name(void);
/* Prepares the backend (selects the device); fails with a clear error when
 * there is none. Idempotent. */
void cleave_rt_backend_init(void);
/* A zeroed arena of `bytes`, 64-byte aligned; cleave_rt_fail when it cannot
 * be allocated. */
char *cleave_rt_arena_alloc(int64_t bytes);
void cleave_rt_arena_free(char *arena);
/* Host <-> arena copies of `bytes` at `offset`; both wait for the kernels
 * already called, so a read sees the step that was run. */
void cleave_rt_arena_write(char *arena, int64_t offset, const void *src,
                           int64_t bytes);
void cleave_rt_arena_read(const char *arena, int64_t offset, void *dst,
                          int64_t bytes);
/* Waits for every kernel called so far and reports any error they raised
 * (an index out of range found on the device). */
void cleave_rt_synchronize(void);
/* Overlapping the host with the device: the trainer prepares and calls
 * step N+1 (its batch, its kernels) while the device still runs step N,
 * and reads step N's loss when it is done. On the CPU, whose kernels run as
 * they are called, these are plain copies and clock readings.
 *
 * Host memory for the copies below, 64-byte aligned: page-locked on CUDA,
 * where a copy from pageable memory would make the host wait. */
void *cleave_rt_host_alloc(int64_t bytes);
void cleave_rt_host_free(void *p);
/* Copies `bytes` between cleave_rt_host_alloc memory and the arena after
 * the kernels already called, without waiting for them: `src` must stay
 * unchanged, and `dst` is not valid, until a marker recorded after the
 * call has been waited for. */
void cleave_rt_arena_write_async(char *arena, int64_t offset, const void *src,
                                 int64_t bytes);
void cleave_rt_arena_read_async(const char *arena, int64_t offset, void *dst,
                                int64_t bytes);
/* A marker after the work called so far, as an opaque handle. Waiting for
 * it waits for that work only (not for what was called after it) and
 * reports any error the work raised. The time between two waited markers
 * is the device's, in milliseconds. Freed handles are reused. */
int64_t cleave_rt_marker_record(void);
void cleave_rt_marker_wait(int64_t marker);
double cleave_rt_marker_elapsed_ms(int64_t from, int64_t to);
void cleave_rt_marker_free(int64_t marker);

/* The profiler (the trainer's --profile). A compiled program calls
 * cleave_rt_profile_mark before the runtime calls of each of its ops, with
 * that op's constant cleave_rt_kernel_info, and once at the end of a run
 * with NULL, so that each op's time is the time from its mark to the next.
 * The function returns at once unless the trainer is profiling; then it
 * records a marker (above), so that on the GPU the times are the device's.
 * The strings are the program's constants. */
typedef struct cleave_rt_kernel_info {
  const char *op;     /* the op, "graph.matmul" */
  const char *where;  /* its location: the ONNX node's name, or "" */
  const char *shapes; /* "f32[8,64] f32[64,32] -> f32[8,32]" */
  double flops;       /* its matrix-product FLOPs (cleave_program_info's
                         share), 0 for other ops */
  int64_t bytes;      /* the bytes of its operands and results */
} cleave_rt_kernel_info;
void cleave_rt_profile_mark(const cleave_rt_kernel_info *kernel);

/* Reports a fatal error ("error: <message>") and exits with status 1. */
#if defined(__GNUC__)
__attribute__((noreturn, format(printf, 1, 2)))
#endif
void cleave_rt_fail(const char *format, ...);

/*===----------------------------------------------------------------------===*
 * Program metadata, defined by the compiled object.
 *===----------------------------------------------------------------------===*/

/* How a tensor of a partitioned program is split over the device mesh:
 * its global shape, and for each dimension d the mesh axes
 * axes[d][0, num_axes[d]) it is split over (the first the most
 * significant, as in a #dist.sharding). A device holds the block whose
 * index along d is the row-major index of its coordinates along those
 * axes; the descriptor's shape is the block's (global / the axes' sizes).
 * A tensor without a sharding is the same on every device. Every field is
 * an int64_t, so the compiler emits it as one constant i64 array. */
typedef struct cleave_sharding {
  int64_t global_shape[CLEAVE_RT_MAX_RANK];
  int64_t num_axes[CLEAVE_RT_MAX_RANK];
  int64_t axes[CLEAVE_RT_MAX_RANK][CLEAVE_RT_MAX_MESH_RANK];
} cleave_sharding;

/* A communicator group of a partitioned program: the devices that differ
 * only along mesh axes axes[0, num_axes) (the first the most significant
 * in the group's numbering, as cleave_comm_group takes them). */
typedef struct cleave_group {
  int64_t num_axes;
  int64_t axes[CLEAVE_RT_MAX_MESH_RANK];
} cleave_group;

/* A named tensor: a parameter, input or output. */
typedef struct cleave_named_tensor {
  const char *name;
  cleave_tensor tensor;
  /* Parameters only: the initial value, either `init_data` (the tensor's
   * bytes) or `init_file` at `init_offset` (raw little-endian bytes); both
   * NULL leaves it zero. */
  const void *init_data;
  const char *init_file;
  int64_t init_offset;
  /* Parameters only: what the parameter holds (enum cleave_param_role),
   * which is how the runtime finds the step counter and the loss scale;
   * 0 for inputs and outputs. */
  int32_t role;
  /* Partitioned programs: how the tensor is split over the mesh (the
   * descriptor is this device's block; init_data or init_file hold the
   * global value, of which each device takes its block), or NULL when
   * every device holds all of it. */
  const cleave_sharding *sharding;
} cleave_named_tensor;

/* The program kinds (enum cleave_program_kind): CLEAVE_PROGRAM_INFERENCE
 * runs the model, inputs in, outputs out. CLEAVE_PROGRAM_TRAINING runs one
 * training step: the inputs are the model's inputs followed by the loss's
 * target (named "labels" for cross-entropy, "targets" for mse); output 0
 * is the scalar f32 "loss" (the mean over the batch); the optimizer update
 * writes the parameters and their state in place. CLEAVE_PROGRAM_EVAL
 * runs the forward pass and the loss of a training step, nothing else: the
 * training program's inputs (the same names, descriptors' dtypes and
 * shapes, and shardings), output 0 the scalar f32 "loss" (the mean over the
 * batch, without an auxiliary loss), the model's parameters (each of the
 * training program's dtype, shape and sharding, which the main copies in
 * before it evaluates), and training_config holding the loss keys
 * ("loss", "ignore_index", "accumulate"). */

struct cleave_program_context;

typedef struct cleave_program_info {
  int32_t abi_version; /* CLEAVE_RT_ABI_VERSION */
  int32_t kind;        /* enum cleave_program_kind */
  int64_t arena_bytes;
  /* params[0, num_model_params) are the model's own parameters (role
   * CLEAVE_PARAM_MODEL), in the order of the source model; the rest are the
   * optimizer's state (every other role: "<param>.m", "<param>.v",
   * "<param>.momentum", the step counter "optimizer.step", the loss
   * scaler's "amp.loss_scale" and "amp.growth_tracker"). A training program
   * has one step counter, and at most one loss scale and growth tracker. */
  int64_t num_params;
  int64_t num_model_params;
  const cleave_named_tensor *params;
  int64_t num_inputs;
  const cleave_named_tensor *inputs;
  int64_t num_outputs;
  const cleave_named_tensor *outputs;
  /* The absolute path of the ONNX model the program was compiled from, or
   * NULL (compiled from MLIR). Parameter names are its initializer names. */
  const char *source_model;
  /* Training programs: a JSON object describing the loss and the optimizer
   * (e.g. {"loss":"cross-entropy","optimizer":"adamw","lr":0.001,...});
   * NULL otherwise. */
  const char *training_config;
  /* Partitioned programs (ABI 4): the device mesh, mesh_rank axes of
   * mesh_shape devices named mesh_axis_names (row-major: the last axis
   * varies fastest, as the communication engine numbers ranks), and the
   * communicator groups the program's collectives and dist.axis_index use,
   * in the order of cleave_program_context.comms. mesh_rank 0: a program
   * for one device, with no groups. */
  int32_t mesh_rank;
  const int64_t *mesh_shape;
  const char *const *mesh_axis_names;
  int64_t num_groups;
  const cleave_group *groups;
  /* The communication engine the program was linked with (cleave_comm.h's
   * cleave_comm_engine), through which the main starts it; NULL for a
   * program for one device. */
  const struct cleave_comm_api *comm;
  /* Pipelined programs (ABI 5): num_stages > 0 stage programs, stages[s]
   * (each a complete program of its own, num_stages 0) run by
   * stage_runs[s] on the devices whose coordinate along mesh axis
   * stage_axis is s; the mesh of stages[0] is the whole mesh, and every
   * stage has the same communicator groups in the same order. The fields
   * above are then empty but for abi_version and kind, and
   * cleave_program_run runs stage context->stage. 0 for any other
   * program. */
  int64_t num_stages;
  int64_t stage_axis;
  const struct cleave_program_info *const *stages;
  void (*const *stage_runs)(char *arena,
                            const struct cleave_program_context *context);
  /* Training programs (ABI 7): the evaluation program compiled beside the
   * step (kind CLEAVE_PROGRAM_EVAL, a complete program of its own with its
   * own arena), run by eval_run; both NULL when there is none (a pipelined
   * program, or cleave-compile --no-eval). NULL for any other program. */
  const struct cleave_program_info *eval;
  void (*eval_run)(char *arena, const struct cleave_program_context *context);
  /* The floating-point operations of one cleave_program_run on this device
   * (ABI 7): the matrix products' (matmuls, linear layers, experts, and
   * attention's two per head, counted whole when causal; a backward's
   * products as the compiler wrote them, attention's as twice its
   * forward), 2 per multiply-add, as model FLOPs are counted; 0 when
   * unknown. The trainer reports TFLOP/s from it. */
  double flops;
} cleave_program_info;

/* What cleave_program_run needs to know about its device, set up once by
 * the main: comms[g] is the communicator of group g of the metadata and
 * group_ranks[g] this device's index in it. Both are NULL for a program
 * without groups. */
typedef struct cleave_program_context {
  const int32_t *comms;
  const int64_t *group_ranks;
  /* Pipelined programs: the stage this device runs (0 otherwise). */
  int64_t stage;
  /* Training programs (ABI 6): CLEAVE_NUM_HYPERPARAMETERS doubles indexed
   * by enum cleave_hyperparameter, the values this call's step runs with
   * (the trainer's --lr, its schedule's value at this step, ...); read when
   * the program is called, so the next step may change them as soon as the
   * call returns. NULL: the values it was compiled with. */
  const double *hyperparameters;
} cleave_program_context;

/* Defined by the compiled object. The CPU runtime's main checks
 * abi_version (first: the rest of the struct is only meaningful when it
 * matches), allocates the arena 64-byte aligned and zeroed, reads a
 * relative `init_file` from the working directory, else from the
 * executable's directory, and dispatches on `kind`. An inference program:
 *   prog [--input NAME=FILE.npy | --input FILE.npy]... --output-dir DIR
 * (unnamed inputs fill the remaining inputs in order). Inputs must match
 * their descriptor's dtype and shape exactly (bf16 is read from and written
 * as float32, '<f4'). Output NAME is written to DIR/NAME.npy with each
 * character outside [A-Za-z0-9._-] replaced by '_'. A training program:
 *   prog --inputs A.npy[,B.npy...] --targets T.npy --steps N [options]
 *   prog --tokens FILE.bin [--seq S] --steps N [options]
 * runs cleave_program_run once per step on the step's batch (samples along
 * the arrays' first dimension, step k taking samples (k-1)*B + i mod N,
 * B the inputs' first dimension), with checkpoints (--save, --save-every,
 * --resume: DIR/model.safetensors with every parameter), the validation
 * loss through the evaluation program (--eval-tokens, --eval-inputs and
 * --eval-targets, --eval-every, --eval-steps) and --export-onnx;
 * `prog --help` documents it all. */
extern const cleave_program_info cleave_program;
void cleave_program_run(char *arena, const cleave_program_context *context);

#ifdef __cplusplus
}
#endif

#endif /* CLEAVE_RUNTIME_CLEAVE_RT_H */
