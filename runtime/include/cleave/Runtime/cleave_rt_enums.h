/*===- cleave_rt_enums.h - the numbers of the runtime C ABI ------*- C -*-===*
 *
 * Every number that the compiler and the runtime must agree on, in one
 * place: the ABI version, the element types, the kinds that the kernels of
 * cleave_rt.h take, the program kinds and the parameter roles of the
 * program metadata. As mlir/Dialect/SparseTensor/IR/Enums.h is shared by the
 * sparse compiler and its runtime, this header is plain C (no MLIR, no
 * LLVM): cleave_rt.h includes it for the runtime, -cleave-lower-to-runtime
 * and the `cleave` dialect include it for the compiler, and test/lit.cfg.py
 * reads it so that lit tests match the numbers by name.
 *
 * Each list is an X-macro: CLEAVE_RT_<LIST>(X) expands X(NAME, VALUE,
 * "mnemonic") once per entry (the dtypes add their size in bytes). The
 * enums below are generated from the lists (CLEAVE_<NAME> = VALUE), and so
 * are the counts (CLEAVE_NUM_<LIST>) and the name functions. Values are
 * written out, since they are the ABI; each list numbers its entries 0, 1,
 * ... in order, so that a table indexed by value needs no gaps
 * (test/unittests/Runtime/AbiEnumsTest.cpp checks that). Adding, removing
 * or renumbering an entry changes the ABI: bump CLEAVE_RT_ABI_VERSION.
 *
 * Keep one entry per line, `X(NAME, VALUE, "mnemonic"...)`: lit.cfg.py
 * parses exactly that form.
 *
 *===----------------------------------------------------------------------===*/

#ifndef CLEAVE_RUNTIME_CLEAVE_RT_ENUMS_H
#define CLEAVE_RUNTIME_CLEAVE_RT_ENUMS_H

#include <stdint.h>

/* The version of the layout of cleave_program_info and of every list below.
 * 3: each parameter carries its role (cleave_named_tensor.role).
 * 4: partitioned programs: the device mesh, the communicator groups, each
 *    tensor's sharding, and the context argument of cleave_program_run.
 * 5: pipelined programs: the stages' programs in one binary.
 * 6: the run-time hyperparameters of training programs
 *    (cleave_program_context.hyperparameters).
 * 7: a training program's evaluation program (cleave_program_info.eval,
 *    eval_run; the program kind CLEAVE_PROGRAM_EVAL) and the FLOPs of a
 *    run (cleave_program_info.flops).
 * 8: the profiler's marks (cleave_rt_profile_mark, cleave_rt_kernel_info). */
#define CLEAVE_RT_ABI_VERSION 8

/* The most dimensions a cleave_tensor describes. */
#define CLEAVE_RT_MAX_RANK 8
/* The most axes a device mesh has. */
#define CLEAVE_RT_MAX_MESH_RANK 8
/* The alignment of every tensor's offset in the arena, in bytes. */
#define CLEAVE_RT_ALIGNMENT 64

/* Element types: X(NAME, VALUE, "mnemonic", BYTES). i1 is stored as one
 * byte per element (0 or 1). */
#define CLEAVE_RT_DTYPES(X)                                                    \
  X(F32, 0, "f32", 4)                                                          \
  X(F16, 1, "f16", 2)                                                          \
  X(BF16, 2, "bf16", 2)                                                        \
  X(I64, 3, "i64", 8)                                                          \
  X(I32, 4, "i32", 4)                                                          \
  X(I1, 5, "i1", 1)

/* cleave_rt_unary and cleave_rt_unary_grad. */
#define CLEAVE_RT_UNARY_KINDS(X)                                               \
  X(NEG, 0, "neg")                                                             \
  X(ABS, 1, "abs")                                                             \
  X(RELU, 2, "relu")                                                           \
  X(EXP, 3, "exp")                                                             \
  X(LOG, 4, "log")                                                             \
  X(SQRT, 5, "sqrt")                                                           \
  X(RSQRT, 6, "rsqrt")                                                         \
  X(RECIPROCAL, 7, "reciprocal")                                               \
  X(TANH, 8, "tanh")                                                           \
  X(ERF, 9, "erf")                                                             \
  X(SIGMOID, 10, "sigmoid")                                                    \
  X(SILU, 11, "silu")                                                          \
  X(SIN, 12, "sin")                                                            \
  X(COS, 13, "cos")                                                            \
  X(GELU_ERF, 14, "gelu_erf")                                                  \
  X(GELU_TANH, 15, "gelu_tanh")

/* cleave_rt_binary. */
#define CLEAVE_RT_BINARY_KINDS(X)                                              \
  X(ADD, 0, "add")                                                             \
  X(SUB, 1, "sub")                                                             \
  X(MUL, 2, "mul")                                                             \
  X(DIV, 3, "div")                                                             \
  X(POW, 4, "pow")                                                             \
  X(MAX, 5, "max")                                                             \
  X(MIN, 6, "min")

/* cleave_rt_compare. */
#define CLEAVE_RT_COMPARE_DIRECTIONS(X)                                        \
  X(EQ, 0, "eq")                                                               \
  X(NE, 1, "ne")                                                               \
  X(LT, 2, "lt")                                                               \
  X(LE, 3, "le")                                                               \
  X(GT, 4, "gt")                                                               \
  X(GE, 5, "ge")

/* cleave_rt_reduce and the reductions of cleave_comm.h. */
#define CLEAVE_RT_REDUCTION_KINDS(X)                                           \
  X(SUM, 0, "sum")                                                             \
  X(MEAN, 1, "mean")                                                           \
  X(MAX_REDUCE, 2, "max")                                                      \
  X(MIN_REDUCE, 3, "min")

/* The activations of cleave_rt_linear and cleave_rt_matmul_gelu_grad. */
#define CLEAVE_RT_ACTIVATIONS(X)                                               \
  X(ACT_NONE, 0, "none")                                                       \
  X(ACT_GELU_ERF, 1, "gelu_erf")                                               \
  X(ACT_GELU_TANH, 2, "gelu_tanh")

/* cleave_program_info.kind. */
#define CLEAVE_RT_PROGRAM_KINDS(X)                                             \
  X(PROGRAM_INFERENCE, 0, "inference")                                         \
  X(PROGRAM_TRAINING, 1, "training")                                           \
  X(PROGRAM_EVAL, 2, "eval")

/* What a parameter of cleave_program_info holds (cleave_named_tensor.role;
 * the `cleave` dialect's #cleave.role<mnemonic> on graph.param). Training
 * programs have one step counter (i64 scalar: the number of optimizer
 * updates made), and with dynamic loss scaling one loss scale (f32 scalar)
 * and one growth tracker (i64 scalar: finite steps in a row). */
#define CLEAVE_RT_PARAM_ROLES(X)                                               \
  X(PARAM_MODEL, 0, "model")                                                   \
  X(PARAM_OPTIMIZER_STATE, 1, "optimizer_state")                               \
  X(PARAM_STEP_COUNTER, 2, "step_counter")                                     \
  X(PARAM_LOSS_SCALE, 3, "loss_scale")                                         \
  X(PARAM_GROWTH_TRACKER, 4, "growth_tracker")

/* The run-time hyperparameters of a training program: the doubles of
 * cleave_program_context.hyperparameters, indexed by these values, which
 * the optimizer's updates (graph.adamw and graph.sgd with
 * run_time_hyperparameters) and graph.hyperparameter read at each step, so
 * that the trainer sets them (--lr, schedules) without recompiling. The
 * weight decay has two slots: parameters of rank >= 2 take weight_decay,
 * the others (biases, normalisation weights) weight_decay_1d (0 for the
 * no-decay group of nanoGPT and Megatron). */
#define CLEAVE_RT_HYPERPARAMETERS(X)                                           \
  X(HP_LR, 0, "lr")                                                            \
  X(HP_WEIGHT_DECAY, 1, "weight_decay")                                        \
  X(HP_WEIGHT_DECAY_1D, 2, "weight_decay_1d")                                  \
  X(HP_BETA1, 3, "beta1")                                                      \
  X(HP_BETA2, 4, "beta2")                                                      \
  X(HP_EPS, 5, "eps")                                                          \
  X(HP_MOMENTUM, 6, "momentum")                                                \
  X(HP_DAMPENING, 7, "dampening")                                              \
  X(HP_GRAD_CLIP, 8, "grad_clip")                                              \
  X(HP_LOSS_SCALE_GROWTH_INTERVAL, 9, "loss_scale_growth_interval")

/*===----------------------------------------------------------------------===*
 * What the lists generate.
 *===----------------------------------------------------------------------===*/

#define CLEAVE_RT_ENUMERATOR(NAME, VALUE, MNEMONIC) CLEAVE_##NAME = VALUE,
#define CLEAVE_RT_DTYPE_ENUMERATOR(NAME, VALUE, MNEMONIC, BYTES)               \
  CLEAVE_##NAME = VALUE,
#define CLEAVE_RT_PLUS_ONE(NAME, VALUE, MNEMONIC) +1
#define CLEAVE_RT_DTYPE_PLUS_ONE(NAME, VALUE, MNEMONIC, BYTES) +1

enum cleave_dtype { CLEAVE_RT_DTYPES(CLEAVE_RT_DTYPE_ENUMERATOR) };
enum cleave_unary { CLEAVE_RT_UNARY_KINDS(CLEAVE_RT_ENUMERATOR) };
enum cleave_binary { CLEAVE_RT_BINARY_KINDS(CLEAVE_RT_ENUMERATOR) };
enum cleave_compare { CLEAVE_RT_COMPARE_DIRECTIONS(CLEAVE_RT_ENUMERATOR) };
enum cleave_reduction { CLEAVE_RT_REDUCTION_KINDS(CLEAVE_RT_ENUMERATOR) };
enum cleave_activation { CLEAVE_RT_ACTIVATIONS(CLEAVE_RT_ENUMERATOR) };
enum cleave_program_kind { CLEAVE_RT_PROGRAM_KINDS(CLEAVE_RT_ENUMERATOR) };
enum cleave_param_role { CLEAVE_RT_PARAM_ROLES(CLEAVE_RT_ENUMERATOR) };
enum cleave_hyperparameter { CLEAVE_RT_HYPERPARAMETERS(CLEAVE_RT_ENUMERATOR) };

/* The number of entries of each list. */
enum {
  CLEAVE_NUM_DTYPES = 0 CLEAVE_RT_DTYPES(CLEAVE_RT_DTYPE_PLUS_ONE),
  CLEAVE_NUM_UNARY_KINDS = 0 CLEAVE_RT_UNARY_KINDS(CLEAVE_RT_PLUS_ONE),
  CLEAVE_NUM_BINARY_KINDS = 0 CLEAVE_RT_BINARY_KINDS(CLEAVE_RT_PLUS_ONE),
  CLEAVE_NUM_COMPARE_DIRECTIONS =
      0 CLEAVE_RT_COMPARE_DIRECTIONS(CLEAVE_RT_PLUS_ONE),
  CLEAVE_NUM_REDUCTION_KINDS = 0 CLEAVE_RT_REDUCTION_KINDS(CLEAVE_RT_PLUS_ONE),
  CLEAVE_NUM_ACTIVATIONS = 0 CLEAVE_RT_ACTIVATIONS(CLEAVE_RT_PLUS_ONE),
  CLEAVE_NUM_PROGRAM_KINDS = 0 CLEAVE_RT_PROGRAM_KINDS(CLEAVE_RT_PLUS_ONE),
  CLEAVE_NUM_PARAM_ROLES = 0 CLEAVE_RT_PARAM_ROLES(CLEAVE_RT_PLUS_ONE),
  CLEAVE_NUM_HYPERPARAMETERS = 0 CLEAVE_RT_HYPERPARAMETERS(CLEAVE_RT_PLUS_ONE),
};

#undef CLEAVE_RT_ENUMERATOR
#undef CLEAVE_RT_DTYPE_ENUMERATOR
#undef CLEAVE_RT_PLUS_ONE
#undef CLEAVE_RT_DTYPE_PLUS_ONE

/* The mnemonic of each entry, NULL for a value outside the list; and the
 * size of a dtype's element in bytes, 0 outside the list. */
#define CLEAVE_RT_NAME_CASE(NAME, VALUE, MNEMONIC)                             \
  case VALUE:                                                                  \
    return MNEMONIC;
#define CLEAVE_RT_DTYPE_NAME_CASE(NAME, VALUE, MNEMONIC, BYTES)                \
  case VALUE:                                                                  \
    return MNEMONIC;
#define CLEAVE_RT_DTYPE_SIZE_CASE(NAME, VALUE, MNEMONIC, BYTES)                \
  case VALUE:                                                                  \
    return BYTES;
#define CLEAVE_RT_NAME_FUNCTION(FUNCTION, LIST)                                \
  static inline const char *FUNCTION(int32_t value) {                          \
    switch (value) { LIST(CLEAVE_RT_NAME_CASE) }                               \
    return 0;                                                                  \
  }

static inline const char *cleave_dtype_name(int32_t dtype) {
  switch (dtype) { CLEAVE_RT_DTYPES(CLEAVE_RT_DTYPE_NAME_CASE) }
  return 0;
}
static inline int32_t cleave_dtype_size(int32_t dtype) {
  switch (dtype) { CLEAVE_RT_DTYPES(CLEAVE_RT_DTYPE_SIZE_CASE) }
  return 0;
}
CLEAVE_RT_NAME_FUNCTION(cleave_unary_name, CLEAVE_RT_UNARY_KINDS)
CLEAVE_RT_NAME_FUNCTION(cleave_binary_name, CLEAVE_RT_BINARY_KINDS)
CLEAVE_RT_NAME_FUNCTION(cleave_compare_name, CLEAVE_RT_COMPARE_DIRECTIONS)
CLEAVE_RT_NAME_FUNCTION(cleave_reduction_name, CLEAVE_RT_REDUCTION_KINDS)
CLEAVE_RT_NAME_FUNCTION(cleave_activation_name, CLEAVE_RT_ACTIVATIONS)
CLEAVE_RT_NAME_FUNCTION(cleave_program_kind_name, CLEAVE_RT_PROGRAM_KINDS)
CLEAVE_RT_NAME_FUNCTION(cleave_param_role_name, CLEAVE_RT_PARAM_ROLES)
CLEAVE_RT_NAME_FUNCTION(cleave_hyperparameter_name, CLEAVE_RT_HYPERPARAMETERS)

#undef CLEAVE_RT_NAME_CASE
#undef CLEAVE_RT_DTYPE_NAME_CASE
#undef CLEAVE_RT_DTYPE_SIZE_CASE
#undef CLEAVE_RT_NAME_FUNCTION

#endif /* CLEAVE_RUNTIME_CLEAVE_RT_ENUMS_H */
