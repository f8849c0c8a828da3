//===- Passes.td - Cleave passes ----------------------------*- tablegen -*-===//
//
// Every Cleave pass, with its flag, options and an example.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_PASSES_TD
#define CLEAVE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PrintShardingRulesPass : Pass<"cleave-print-sharding-rules"> {
  let summary = "Reports the factor sharding rule of every op";
  let description = [{
    Emits a remark on each op that implements `ShardingRuleOpInterface`
    with its rule in einsum-like form and the operands it is linear in,
    after checking that the rule agrees with the op's types (a mismatch is
    an error). An op that computes without a rule is an error; functions,
    terminators, declarations (`graph.param`, `dist.mesh`) and the `dist`
    ops need none. It shows how propagation will see the program and is how
    the rules are tested end to end.

    ```mlir
    %0 = graph.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32>
    ```
    gives

    ```
    remark: sharding rule ([a, b], [b, c]) -> ([a, c]) {a=4, b=8 reduction(sum), c=16} linear in (0), (1)
    ```
  }];
  let statistics = [
    Statistic<"numRules", "num-rules", "Number of sharding rules reported">
  ];
}

def RaisePass : Pass<"cleave-raise"> {
  let summary = "Rewrites decomposed exporter patterns into fused graph ops";
  let description = [{
    ONNX exporters spell fused operations as chains of primitives. This pass
    recognizes them, in any operand order and their common variants, and
    replaces each with the fused op that matters for speed and sharding:

    - layer norm: `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`, then
      optional `* gamma` and `+ beta` -> `graph.layer_norm`;
    - RMS norm: `x * rsqrt(mean(x^2) + eps)` (or `/ sqrt`, `* 1/sqrt`), then
      optional `* weight` -> `graph.rms_norm`;
    - GELU: `0.5 * x * (1 + erf(x / sqrt(2)))` and the tanh form
      `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` -> `graph.gelu`;
    - SiLU: `x * sigmoid(x)` -> `graph.silu`;
    - attention: `matmul(softmax(mask(scale * matmul(q, k^T))), v)` on
      `[B, H, S, D]` tensors, with the mask a `where` or an additive tensor;
      a constant lower-triangular mask becomes the `causal` flag.
    - a mixture of experts written densely, as an exporter sees it: the
      softmax router's top-k (`graph.topk`, gates optionally renormalized),
      a dense `[T, E]` gate matrix from a one-hot of the chosen experts,
      every expert applied to every token through stacked weights
      (`matmul([1, T, H], [E, H, F])`, elementwise ops, `matmul` by
      `[E, F, H]`) and a gate-weighted sum over the experts ->
      `graph.router_topk`, `graph.moe_dispatch`, `graph.expert_matmul` per
      expert matmul and `graph.moe_combine`, so the experts run on the
      tokens routed to them. The tokens are grouped one sequence per group
      (`moe-group-size` tokens per group otherwise); with the default
      `moe-capacity-factor=0` each expert has a slot for every token of a
      group, so no token is dropped and the result equals the dense form's;
      with a factor f, `ceil(f * k * group / E)` slots per expert and group
      (GShard's capacity), the assignments beyond them dropped. `moe=false`
      keeps the dense form.

    A chain that differs in a constant, an axis or an operand is left alone.

    ```mlir
    %s = graph.sigmoid %x : tensor<4x8xf32>
    %y = graph.mul %x, %s : tensor<4x8xf32>, tensor<4x8xf32>
    ```
    becomes
    ```mlir
    %y = graph.silu %x : tensor<4x8xf32>
    ```
  }];
  let options = [
    Option<"moe", "moe", "bool", /*default=*/"true",
           "Raise dense mixtures of experts to the routed (sparse) ops">,
    Option<"moeCapacityFactor", "moe-capacity-factor", "double",
           /*default=*/"0.0",
           "Slots per expert and group: ceil(f * k * group / E); 0 (the "
           "default) gives every token a slot (dropless)">,
    Option<"moeGroupSize", "moe-group-size", "int64_t", /*default=*/"0",
           "Tokens per routing group (capacity is per group); 0 (the "
           "default) groups the tokens of each sequence">,
  ];
  let dependentDialects = ["::cleave::graph::GraphDialect"];
}

def NormalizeCollectivesPass : Pass<"cleave-normalize-collectives"> {
  let summary = "Puts every collective in the form the engine runs: along dimension 0";
  let description = [{
    The communication engine gathers, scatters and exchanges contiguous
    blocks along dimension 0 of a row-major tensor, which is what NCCL's
    and MPI's collectives take without packing. This pass rewrites a
    `dist.all_gather` or `dist.reduce_scatter` along another dimension `d`
    into a transpose that brings `d` to the front, the collective along
    dimension 0 and the inverse transpose; a `dist.all_to_all` with
    `split` or `concat` not 0 into a transpose bringing the split dimension
    to the front, the exchange along dimension 0, and a reshape, transpose
    and reshape that concatenate the received pieces along `concat`. The
    packing copies are ordinary ops, placed by the memory plan, so no
    engine needs scratch memory of its own. Run it after partitioning and
    before `-cleave-plan-memory`; the compiler's pipeline does.

    ```mlir
    %y = dist.all_gather %x on @mesh ["tp"] dim 1 : tensor<4x2xf32> -> tensor<4x8xf32>
    ```
    becomes
    ```mlir
    %t = graph.transpose %x perm [1, 0] : tensor<4x2xf32>
    %g = dist.all_gather %t on @mesh ["tp"] dim 0 : tensor<2x4xf32> -> tensor<8x4xf32>
    %y = graph.transpose %g perm [1, 0] : tensor<8x4xf32>
    ```
  }];
  let statistics = [
    Statistic<"numNormalized", "num-normalized",
              "Collectives moved to dimension 0">
  ];
  let dependentDialects = ["::cleave::graph::GraphDialect",
                           "::cleave::dist::DistDialect"];
}

def OverlapCollectivesPass : Pass<"cleave-overlap-collectives"> {
  let summary = "Starts collectives early and waits for them late, so that communication overlaps compute";
  let description = [{
    Each blocking `all_reduce`, `all_gather`, `reduce_scatter` and
    `all_to_all` along dimension 0 becomes a started (`async`) collective
    and a `dist.wait` placed just before the first op that reads its
    result, so that the ops in between (the rest of the backward pass,
    for a gradient's all-reduce) run while the collective moves data. No
    start moves, so every device starts the collectives in the order it
    did before. A wait goes no later than the first `graph.assign` after
    its start: a started collective's input may be a parameter's storage,
    which an assignment overwrites. The memory plan keeps a started
    collective's input and result alive until its wait. Run it after
    `-cleave-normalize-collectives` and before `-cleave-plan-memory`; the
    compiler's pipeline does.

    A pipeline stage's blocking `dist.recv` is also posted early: it moves
    up to the start of the schedule step before its own (after the
    `dist.pipeline_step` mark before the one above it), but never above an
    earlier receive from the same source (`dist.recv` or `dist.send_recv`),
    so that every source's messages match the receives in the same order;
    its wait goes where it was. The sender's blocking send then finds the
    receive posted instead of waiting for this stage to reach it; the
    received buffer lives one schedule step longer.

    ```mlir
    %r = dist.all_reduce %g on @mesh ["dp"] sum : tensor<32x4xf32>
    %h = graph.matmul %a, %b : tensor<8x16xf32>, tensor<16x32xf32>
    %u = graph.sgd %w, %r, %s {lr = 0.1 : f64} : ...
    ```
    becomes
    ```mlir
    %0 = dist.all_reduce async %g on @mesh ["dp"] sum : tensor<32x4xf32>
    %h = graph.matmul %a, %b : tensor<8x16xf32>, tensor<16x32xf32>
    %r = dist.wait %0 : tensor<32x4xf32>
    %u = graph.sgd %w, %r, %s {lr = 0.1 : f64} : ...
    ```
  }];
  let statistics = [
    Statistic<"numStarted", "num-started", "Collectives started early">,
    Statistic<"numOverlapped", "num-overlapped",
              "Started collectives with ops before their wait">
  ];
  let dependentDialects = ["::cleave::dist::DistDialect"];
}

def BucketCollectivesPass : Pass<"cleave-bucket-collectives"> {
  let summary = "Reduces several gradients in one all_reduce, without a copy";
  let description = [{
    Groups the blocking `dist.all_reduce`s of one group, reduction and
    element type whose inputs die there (gradients) into
    `dist.all_reduce_bucket`s of at most `bucket-bytes` bytes: one
    collective per bucket instead of one per gradient, which saves the
    collectives' latency. A bucket is placed just before the first op that
    reads one of its results (or when it is full); the memory plan lays
    its inputs out in one buffer, so no copy packs them. The order of the
    collectives is the same on every device. Bucketed all-reduces are
    blocking: run `-cleave-overlap-collectives` after it for the rest.

    ```mlir
    %a = dist.all_reduce %ga on @mesh ["dp"] sum : tensor<4xf32>
    %b = dist.all_reduce %gb on @mesh ["dp"] sum : tensor<32x4xf32>
    ```
    becomes
    ```mlir
    %a, %b = dist.all_reduce_bucket %ga, %gb on @mesh ["dp"] sum : tensor<4xf32>, tensor<32x4xf32> -> tensor<4xf32>, tensor<32x4xf32>
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"26214400",
           "The most bytes of one bucket (25 MiB, as PyTorch DDP's default)">
  ];
  let statistics = [
    Statistic<"numBuckets", "num-buckets", "Buckets made">,
    Statistic<"numBucketed", "num-bucketed", "All-reduces put in buckets">
  ];
  let dependentDialects = ["::cleave::dist::DistDialect"];
}

def SplitProjectionsPass : Pass<"cleave-split-projections",
                                "::mlir::ModuleOp"> {
  let summary = "Computes a fused, split projection as one projection per part";
  let description = [{
    Attention's query, key and value projections often arrive as one linear
    layer whose output is split into equal parts (GPT-2's `c_attn`). The
    split's sharding rule keeps the split dimension whole, so tensor
    parallelism cannot shard the heads through it. This pass gives the
    weight `[n * h, k]` a leading block dimension, `[n, h, k]` (and the bias
    `[n * h]` the type `[n, h]`): the same elements in the same order, so
    initial values, checkpoints' bytes and the ONNX export's data are
    unchanged. Each part becomes the projection of its block, whose `h`
    dimension shards like any linear layer's output. Only a parameter read
    once, by the projection, is changed. Run before `-cleave-autodiff`; a
    tensor-parallel strategy runs it, the single-device pipeline does not
    (the fused GEMM is one kernel instead of three).

    ```mlir
    graph.param @qkv.weight : tensor<96x32xf32>
    %w = graph.read_param @qkv.weight : tensor<96x32xf32>
    %wt = graph.transpose %w perm [1, 0] : tensor<96x32xf32>
    %y = graph.matmul %x, %wt : tensor<8x32xf32>, tensor<32x96xf32>
    %q, %k, %v = graph.split %y dim 1 sizes [32, 32, 32] : tensor<8x96xf32>
    ```
    becomes
    ```mlir
    graph.param @qkv.weight : tensor<3x32x32xf32>
    %w = graph.read_param @qkv.weight : tensor<3x32x32xf32>
    %w0 = graph.slice %w start [0, 0, 0] limit [1, 32, 32] : tensor<3x32x32xf32> -> tensor<1x32x32xf32>
    %q = ... graph.matmul %x, (transpose (reshape %w0)) ...
    ```
  }];
  let statistics = [
    Statistic<"numSplit", "num-split", "Fused projections split">
  ];
  let dependentDialects = ["::cleave::graph::GraphDialect"];
}

def RecomputePass : Pass<"cleave-recompute", "::mlir::ModuleOp"> {
  let summary = "Recomputes each layer's forward in the backward (full "
                "activation recomputation)";
  let description = [{
    In a training step whose ops carry their phase, microbatch and layer
    (`graph.phase`, `graph.microbatch`, `graph.layer`, which
    `-cleave-autodiff` sets), each layer's forward values that the backward
    reads are computed again just before the first backward op that reads
    one, from the layer's inputs, and the backward reads the recomputed
    values. A layer's own activations then die inside the forward and only
    its input is held for the backward: the memory of Megatron-LM's full
    recomputation (Korthikanti et al. 2022), for one more forward of every
    layer. Ops outside layers (embedding, LM head, loss) are kept as they
    are. A layer with an op that cannot run twice (a collective, an op
    with a side effect other than a parameter read) is left unchanged, with
    a remark. The recomputed ops are backward ops, so no CSE may run
    between this pass and the memory plan.

    ```mlir
    %h = graph.gelu %x {graph.layer = 0, graph.phase = #graph<phase forward>}
    ...
    %d = graph.gelu_grad %h, %dy {graph.phase = #graph<phase backward>}
    ```
    becomes
    ```mlir
    %h = graph.gelu %x {graph.layer = 0, graph.phase = #graph<phase forward>}
    ...
    %h2 = graph.gelu %x {graph.layer = 0, graph.phase = #graph<phase backward>}
    %d = graph.gelu_grad %h2, %dy {graph.phase = #graph<phase backward>}
    ```
  }];
  let statistics = [
    Statistic<"numRecomputed", "recomputed-ops",
              "Forward ops computed again in the backward">,
    Statistic<"numLayers", "recomputed-layers",
              "Layers (per microbatch) recomputed">
  ];
}

def FuseLinearPass : Pass<"cleave-fuse-linear"> {
  let summary = "Fuses matmul, bias and GELU (and their gradients) into one kernel";
  let description = [{
    Rewrites `add(matmul(x, W), bias)` (a rank-2 weight, a rank-1 bias
    along the matmul's columns, a matmul with no other use) into one
    `graph.linear`, folding a `transpose` of the weight into the op's
    `transpose_weight`; then a `gelu` of a linear becomes the linear's
    activation. Where other ops still read the pre-activation value (the
    training step's `gelu_grad`), the fused op returns it as its second
    result. One runtime call then computes what took three (cuBLASLt's
    bias and GELU epilogues on the GPU; one pass over the GEMM's output on
    the CPU), and the transposed weight copy is gone.

    In the backward, `gelu_grad(pre, matmul(dy, W))` and the sum of it over
    every dimension but the last (the GELU's bias gradient) become one
    `graph.matmul_gelu_grad`, cuBLASLt's `DGELU_BGRAD` epilogue on the GPU.

    Then the rank-2 transposes that remain around matmuls are folded into
    `graph.gemm`, which reads its operands transposed as BLAS does: a
    matmul of a transposed operand, and the transpose of a rank-2 product
    (`(A B)^T = B^T A^T`). A weight gradient `transpose(matmul(transpose(x),
    dy))` becomes `gemm dy, x transpose_lhs`, with no transposed copy of
    the activations. A cast of a 16-bit gemm product to f32 (a weight
    gradient under mixed precision) makes the gemm store f32.

    Last, the sum over every dimension but the last of a linear's `dy`
    (the bias gradient of a linear without GELU) joins the weight
    gradient's `gemm dy, x transpose_lhs` as its `bias_grad` result,
    cuBLASLt's `BGRADB` epilogue on the GPU, so `dy` is read once instead
    of twice; a cast of that 16-bit sum to f32 for the optimizer makes it
    f32 when the gemm stores f32.

    Run after `-cleave-autodiff`: the fused ops have no gradient rule.

    ```mlir
    %wt = graph.transpose %w perm [1, 0] : tensor<128x32xf32>
    %mm = graph.matmul %x, %wt : tensor<2x8x32xf32>, tensor<32x128xf32>
    %z = graph.add %b, %mm : tensor<128xf32>, tensor<2x8x128xf32>
    %h = graph.gelu %z approximate tanh : tensor<2x8x128xf32>
    ```
    becomes
    ```mlir
    %h = graph.linear %x, %w, %b transpose_weight activation gelu_tanh
        : tensor<2x8x32xf32>, tensor<128x32xf32>, tensor<128xf32>
        -> tensor<2x8x128xf32>
    ```
  }];
  let statistics = [
    Statistic<"numLinear", "num-linear", "Matmul and bias pairs fused">,
    Statistic<"numActivations", "num-activations",
              "Activations fused into a linear">,
    Statistic<"numTransposes", "num-transposes",
              "Weight transposes folded into a fused op">,
    Statistic<"numGeluGrads", "num-gelu-grads",
              "Matmul and gelu_grad pairs fused">,
    Statistic<"numGemmTransposes", "num-gemm-transposes",
              "Transposes of matmul operands and results folded into a gemm">,
    Statistic<"numGemmCasts", "num-gemm-casts",
              "Casts of 16-bit gemm products to f32 folded into the gemm">,
    Statistic<"numBiasGrads", "num-bias-grads",
              "Bias-gradient sums fused into a matmul_gelu_grad">,
    Statistic<"numGemmBiasGrads", "num-gemm-bias-grads",
              "Bias-gradient sums fused into a weight gradient's gemm">
  ];
  let dependentDialects = ["::cleave::graph::GraphDialect"];
}

def PlanMemoryPass : Pass<"cleave-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Assigns every tensor a byte offset in one arena";
  let description = [{
    Plans the memory of the entry function statically. Parameters and the
    function's inputs get a persistent region, parameters first. The other
    tensors get a temporary region, where buffers whose lifetimes do not
    overlap share bytes (first fit in program order). A reshape or a
    parameter read is a view and needs no storage. An elementwise op whose
    operand dies there writes its result in place. An optimizer update
    (`graph.sgd`, `graph.adamw`) whose new parameter or state is only
    assigned back to what it read is computed in that parameter's storage,
    so the assignment copies nothing; where a read of the parameter is still
    used after the update, the update gets its own buffer and the
    assignment copies.

    The plan is recorded as attributes: `cleave.offset` on params and
    arguments, `cleave.offsets` on each op, and on the function
    `cleave.arena_bytes` (the arena to allocate), `cleave.peak_bytes` (the
    persistent bytes plus the most temporary bytes live at once), and the
    sizes of the parameter and persistent regions. All offsets are multiples
    of `alignment`.

    ```mlir
    %0 = graph.exp %x : tensor<16xf32>
    ```
    becomes
    ```mlir
    %0 = graph.exp %x {cleave.offsets = array<i64: 64>} : tensor<16xf32>
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The function to plan (the only one when absent)">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "Byte alignment of every buffer">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark with the region sizes and the peak">
  ];
  let statistics = [
    Statistic<"numBuffers", "num-buffers", "Temporary buffers placed">,
    Statistic<"numInPlace", "num-in-place", "Results written in place">,
    Statistic<"numUpdatesInPlace", "num-updates-in-place",
              "Optimizer results computed in their parameter's storage">
  ];
  let dependentDialects = ["::cleave::graph::GraphDialect"];
}

def LowerToRuntimePass : Pass<"cleave-lower-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Lowers the planned entry function to runtime calls in LLVM";
  let description = [{
    Replaces the memory-planned entry function with `llvm.func
    @cleave_program_run(%arena: !llvm.ptr, %context: !llvm.ptr)`, a full
    dialect conversion into the LLVM dialect. Each tensor converts to the
    address of a constant descriptor (offset, element type, shape) of its
    planned buffer, and each op family has a pattern: an op becomes one call
    of the runtime C ABI (`runtime/include/cleave/Runtime/cleave_rt.h`), a
    collective of a partitioned program one call of the communication engine
    on the communicator that the program context holds, and attribute lists
    become constant arrays. Views (read_param, a reshape in place) emit
    nothing. An op that no pattern lowers fails the conversion by name. The
    parameters, with their initial values, and the inputs and outputs, with
    their names, become the constant `cleave_program`, which the runtime's
    main reads. The result is pure LLVM dialect, ready for translation to
    LLVM IR.

    ```mlir
    %1 = graph.exp %0 {cleave.offsets = array<i64: 64>} : tensor<16xf32>
    ```
    becomes
    ```mlir
    llvm.call @cleave_rt_unary(%arena, %c3, %desc0, %desc1)
    ```

    LLVM's optimizer takes time superlinear in a function's size, so a run
    function of more than `chunk-size` calls is cut into private, noinline
    functions `<run>.chunk.<i>` of at most that many calls each, which it
    calls in order with its (arena, context). Each chunk builds again the
    constants and global addresses it uses; a value of another kind that
    crosses a cut (a started collective's handle, the entry's
    hyperparameter pointer) is returned by the chunk that defines it and
    passed to those that use it, so the calls and their order are the same:

    ```mlir
    llvm.func @cleave_program_run(%arena: !llvm.ptr, %context: !llvm.ptr) {
      llvm.call @cleave_program_run.chunk.0(%arena, %context)
      llvm.call @cleave_program_run.chunk.1(%arena, %context)
      llvm.return
    }
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "The function to lower (the only one when absent)">,
    Option<"symbolPrefix", "symbol-prefix", "std::string",
           /*default=*/"\"\"",
           "Name the program's symbols <prefix>program, <prefix>run and "
           "<prefix>... instead of cleave_program and cleave_program_run, "
           "so that another program's module can take them in "
           "(cleave_eval_: the evaluation program, -cleave-link-eval)">,
    Option<"profile", "profile", "bool", /*default=*/"true",
           "Call cleave_rt_profile_mark before each op's runtime calls, "
           "with the op's name, location, types, FLOPs and bytes (the "
           "trainer's --profile; the runtime returns at once otherwise)">,
    Option<"chunkSize", "chunk-size", "int64_t", /*default=*/"256",
           "Cut the run function into noinline functions of at most this "
           "many runtime calls each, which bounds LLVM's compile time on "
           "large programs (0: one function)">
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def MixedPrecisionPass : Pass<"cleave-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Computes in bf16 or f16 with f32 parameters as master weights";
  let description = [{
    Rewrites every function to compute in a 16-bit float type: each f32
    parameter read, f32 argument and f32 constant is cast (constants
    converted) to `precision`, and every op that produced f32 now produces
    that type; results are cast back to f32, so the function's signature
    does not change. Parameters stay f32: run before `-cleave-autodiff`,
    the gradient of each cast is the cast back, so parameter gradients,
    the optimizer and its state are f32 (master weights), while
    activations and their gradients are 16-bit. Runtime kernels read 16-bit
    operands into f32, compute in f32 and round their outputs, so sums
    (matmul, norms, softmax, reductions) accumulate in f32. The loss is
    computed in f32 on the f32 cast of the first output.

    ```mlir
    %w = graph.read_param @w : tensor<8x4xf32>
    %y = graph.matmul %x, %w : tensor<2x8xf32>, tensor<8x4xf32>
    ```
    becomes, with `precision=bf16`,
    ```mlir
    %w = graph.read_param @w : tensor<8x4xf32>
    %0 = graph.cast %w : tensor<8x4xf32> -> tensor<8x4xbf16>
    %1 = graph.cast %x : tensor<2x8xf32> -> tensor<2x8xbf16>
    %y = graph.matmul %1, %0 : tensor<2x8xbf16>, tensor<8x4xbf16>
    %2 = graph.cast %y : tensor<2x4xbf16> -> tensor<2x4xf32>
    ```
    The module gets `cleave.precision`, which the training configuration
    records.

    With `router-f32` (the default), the routing decision stays f32: each
    `graph.topk` / `graph.router_topk` and every op whose results feed only
    such ops (an MoE router's weight read, matmul and softmax) compute in
    f32 from f32 operands (a 16-bit operand is cast up, a parameter read
    directly), and the uses outside read the top-k values cast to 16 bits.
    Rounded logits turn near ties into other experts.

    `keep-f32` lists further ops by mnemonic (as autocast's fp32 list): each
    such op, and each op with the unit attribute `cleave.keep_f32`, reads
    f32 and stores f32 results, which the other ops read cast to 16 bits.
  }];
  let options = [
    Option<"precision", "precision", "::cleave::Precision",
           /*default=*/"::cleave::Precision::BF16",
           "The compute type: bf16 or f16",
           [{::llvm::cl::values(
             clEnumValN(::cleave::Precision::BF16, "bf16", "bfloat16"),
             clEnumValN(::cleave::Precision::F16, "f16", "IEEE half"))}]>,
    Option<"routerF32", "router-f32", "bool", /*default=*/"true",
           "Keep each top-k selection (the MoE router) and the ops that only "
           "feed it in f32">,
    ListOption<"keepF32", "keep-f32", "std::string",
               "graph ops that compute in f32 whatever the precision "
               "(mnemonics, e.g. softmax,layer_norm)">
  ];
  let statistics = [
    Statistic<"numCasts", "num-casts", "Casts inserted">,
    Statistic<"numRetyped", "num-retyped", "Op results changed to 16 bits">,
    Statistic<"numKept", "num-kept", "Ops kept in f32 for routing">
  ];
  let dependentDialects = ["::cleave::graph::GraphDialect"];
}

def AddLossPass : Pass<"cleave-add-loss", "::mlir::ModuleOp"> {
  let summary = "Builds @train_step from @forward: the forward and its loss";
  let description = [{
    The first of the three passes that build the training step, each
    runnable alone: `-cleave-add-loss`, `-cleave-differentiate`,
    `-cleave-add-optimizer` (`-cleave-autodiff` runs them in sequence; the
    distribution passes go between the last two).

    Replaces `@forward` with `@train_step(inputs..., target) -> loss`: the
    forward computation and the loss on its first output, `cross-entropy`
    against integer `labels` or `mse` against float `targets`. The
    cross-entropy is a sum over positions divided by their count (those not
    equal to `ignore-index`), so that sharding the batch leaves sums and
    counts that add up. `accumulate=K` gives every input (and the target) a
    leading dimension of K microbatches, `[K, B, ...]`: each microbatch's
    forward and loss are computed in turn on its row, and the step returns
    the mean of their losses. The ops are annotated as `-cleave-autodiff`
    describes (`graph.phase` forward, `graph.microbatch`, `graph.layer`).

    The step carries what `-cleave-differentiate` needs, as verified
    attributes: `cleave.loss` on the function, the loss's keys of the
    training configuration (`loss`, `ignore_index`, `accumulate`), and the
    unit `cleave.microbatch_loss` on the op that computes each microbatch's
    loss, where its backward pass starts.

    ```mlir
    func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x3xf32>
    ```
    becomes
    ```mlir
    func.func @train_step(%x: tensor<4x8xf32>, %labels: tensor<4xi64> {onnx.name = "labels"})
        -> (tensor<f32> {onnx.name = "loss"})
        attributes {cleave.loss = {accumulate = 1 : i64, loss = "cross-entropy"}} {
      ...
      %sum = graph.cross_entropy %logits, %labels reduction sum ...
      %loss = graph.div %sum, %count {cleave.microbatch_loss, ...}
      return %loss : tensor<f32>
    }
    ```
  }];
  let options = [
    Option<"loss", "loss", "::cleave::LossKind",
           /*default=*/"::cleave::LossKind::CrossEntropy",
           "The loss on the first output: cross-entropy or mse",
           [{::llvm::cl::values(
             clEnumValN(::cleave::LossKind::CrossEntropy, "cross-entropy",
                        "against integer labels, mean over positions"),
             clEnumValN(::cleave::LossKind::Mse, "mse",
                        "mean squared error against float targets"))}]>,
    Option<"ignoreIndex", "ignore-index", "std::string", /*default=*/"\"\"",
           "cross-entropy: a label value that contributes no loss (e.g. "
           "-100, PyTorch's default); empty: none">,
    Option<"accumulate", "accumulate", "int64_t", /*default=*/"1",
           "Microbatches per step, a leading dimension of every input">,
    Option<"moeAuxLoss", "moe-aux-loss", "double", /*default=*/"0.0",
           "Coefficient of the load-balancing loss of every routed mixture "
           "of experts (graph.router_topk), E * sum_e f_e * P_e as Switch "
           "Transformer's, added to each microbatch's loss; 0: none">
  ];
  let dependentDialects = ["::cleave::graph::GraphDialect"];
}

def DifferentiatePass : Pass<"cleave-differentiate", "::mlir::ModuleOp"> {
  let summary = "Appends the backward pass: the gradient of every parameter";
  let description = [{
    Differentiates the loss of the step that `-cleave-add-loss` built (the
    function with `cleave.loss`) in reverse mode, from each op's
    `GradientOpInterface` rule. A value used several times (tied weights,
    residuals) sums its gradients; only values that depend on a trainable
    parameter are differentiated. Each microbatch's backward pass follows
    its forward (only one microbatch's activations are live at a time),
    starts from 1/K at its `cleave.microbatch_loss` (the markers are
    consumed), and the gradients of a parameter are summed over its reads
    and the microbatches. The ops are annotated `graph.phase` backward, with
    their microbatch and the layer of the op they differentiate.

    The gradients are results of the step, after the loss: one per
    trainable parameter that the loss depends on, in the parameters' order,
    each with `onnx.name = "grad.<param>"` and `cleave.gradient = @<param>`,
    which the cleave dialect verifies to name a parameter. They are what
    `-cleave-add-optimizer` consumes, and what a pass that runs in between
    (the distribution passes) sees and may rewrite; without an optimizer the
    step is the gradient program.

    `loss-scale=S` scales the loss for the backward pass (dynamic loss
    scaling, for f16): it starts from the loss gradient times the f32 state
    parameter `amp.loss_scale` (`#cleave.role<loss_scale>`, initially S), so
    the gradients are those of the scaled loss; `cleave.loss` records
    `loss_scale = S`, and `-cleave-add-optimizer` divides it out.

    ```mlir
    func.func @train_step(%x: tensor<4x3xf32>, %labels: tensor<4xi64>)
        -> (tensor<f32> {onnx.name = "loss"})
    ```
    becomes
    ```mlir
    func.func @train_step(%x: tensor<4x3xf32>, %labels: tensor<4xi64>)
        -> (tensor<f32> {onnx.name = "loss"},
            tensor<3x5xf32> {cleave.gradient = @w, onnx.name = "grad.w"})
    ```
  }];
  let options = [
    Option<"lossScale", "loss-scale", "double", /*default=*/"0.0",
           "Scale the loss by the state amp.loss_scale, initially this "
           "(0: off), as torch.cuda.amp.GradScaler; for f16 training">
  ];
  let statistics = [
    Statistic<"numRules", "num-rules", "Gradient rules applied">
  ];
  let dependentDialects = ["::cleave::graph::GraphDialect"];
}

def AddOptimizerPass : Pass<"cleave-add-optimizer", "::mlir::ModuleOp"> {
  let summary = "Updates every parameter from its gradient: SGD or AdamW";
  let description = [{
    Consumes the gradients of the step that `-cleave-differentiate`
    returns (its results marked `cleave.gradient = @param`) and updates
    each parameter with them: `graph.sgd` or `graph.adamw`, values stored by
    `graph.assign` (the memory plan computes them in the parameters'
    storage), following torch.optim's formulas, with fp32 state parameters
    `<param>.momentum`, `<param>.m`, `<param>.v` and the step counter
    `optimizer.step`. The gradient results are removed: the step returns
    the rest (the loss), and `cleave.loss` becomes the complete
    `cleave.training_config`. The ops are annotated `graph.phase`
    optimizer, an update with its parameter's layer.

    `grad-clip` scales all gradients by min(1, clip / (norm + 1e-6)), the
    global 2-norm, as torch.nn.utils.clip_grad_norm_; the step then also
    returns that norm (of the unscaled gradients, before clipping) as an
    f32 scalar result `grad_norm`, as it does without clipping with
    `grad-norm`. When `cleave.loss`
    says that the loss was scaled (`loss_scale`, `-cleave-differentiate`'s
    `loss-scale`), the updates divide the scale (`amp.loss_scale`, found by
    its role) out, and a step whose gradients hold an inf or NaN updates
    nothing: the scale halves, the step counter stays. After
    `loss-scale-growth-interval` finite steps in a row (counted in the i64
    state `amp.growth_tracker`) the scale doubles.

    ```mlir
    func.func @train_step(%x: tensor<4x3xf32>, %labels: tensor<4xi64>)
        -> (tensor<f32> {onnx.name = "loss"},
            tensor<3x5xf32> {cleave.gradient = @w, onnx.name = "grad.w"})
    ```
    becomes, with `optimizer=sgd lr=0.1`,
    ```mlir
    func.func @train_step(%x: tensor<4x3xf32>, %labels: tensor<4xi64>)
        -> (tensor<f32> {onnx.name = "loss"})
        attributes {cleave.training_config = {..., optimizer = "sgd", ...}} {
      ...
      %new = graph.sgd %w, %grad, %step {lr = 1.000000e-01 : f64, ...}
      graph.assign @w, %new : tensor<3x5xf32>
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "::cleave::OptimizerKind",
           /*default=*/"::cleave::OptimizerKind::Adamw", "sgd or adamw",
           [{::llvm::cl::values(
             clEnumValN(::cleave::OptimizerKind::Sgd, "sgd",
                        "torch.optim.SGD"),
             clEnumValN(::cleave::OptimizerKind::Adamw, "adamw",
                        "torch.optim.AdamW"))}]>,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0",
           "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay (negative: the optimizer's default, 0 for SGD and "
           "0.01 for AdamW)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"gradClip", "grad-clip", "double", /*default=*/"0.0",
           "Clip the global gradient 2-norm to this value (0: off)">,
    Option<"gradNorm", "grad-norm", "bool", /*default=*/"false",
           "Return the global gradient 2-norm as the result grad_norm "
           "also without clipping (with grad-clip it always is)">,
    Option<"lossScaleGrowthInterval", "loss-scale-growth-interval",
           "int64_t", /*default=*/"2000",
           "With a scaled loss: finite steps after which the scale doubles">
  ];
  let dependentDialects = ["::cleave::graph::GraphDialect"];
}

def AutodiffPass : Pass<"cleave-autodiff", "::mlir::ModuleOp"> {
  let summary = "Builds @train_step: forward, loss, gradients and optimizer";
  let description = [{
    Runs `-cleave-add-loss`, `-cleave-differentiate` and, with an optimizer,
    `-cleave-add-optimizer` in sequence, with their options: its output is
    theirs. It replaces `@forward` with `@train_step(inputs..., target)`:
    the forward computation, the loss on the first output (`cross-entropy`
    against integer `labels`, or `mse` against float `targets`), and the
    reverse-mode backward pass built from each op's `GradientOpInterface`
    rule. A value used several times (tied weights, residuals) sums its
    gradients; only values that depend on a trainable parameter are
    differentiated.

    Without an optimizer the function returns the loss and the gradient of
    every trainable parameter (`loss`, `grad.<param>`; the attributes that
    hand the step between the three passes, `cleave.loss` and
    `cleave.gradient`, are dropped). With
    `optimizer=sgd|adamw` it returns the loss and updates every parameter
    (`graph.sgd`, `graph.adamw`: values, stored by `graph.assign`, which
    the memory plan computes in the parameters' storage), with fp32 state
    parameters `<param>.momentum`, `<param>.m`, `<param>.v` and the step
    counter `optimizer.step`, following torch.optim's formulas.
    `grad-clip` scales all gradients by min(1, clip / (norm + 1e-6)), the
    global 2-norm, as torch.nn.utils.clip_grad_norm_. `accumulate=K` gives
    every input (and the target) a leading dimension of K microbatches,
    `[K, B, ...]`, and runs forward and backward on each in turn, averaging their losses and gradients before
    one update (only one microbatch's activations are live at a time).

    Every op of the step is annotated for the passes that split it:
    `graph.phase` (`#graph<phase forward|backward|optimizer>`),
    `graph.microbatch` (forward and backward ops) and `graph.layer`: the
    `N` of a `blocks.N` / `layers.N` / `h.N` in the op's ONNX node path or
    in the parameter it reads; an op with neither takes the highest layer
    of its operands (the final norm and the head go with the last layer,
    the embeddings have none); a gradient op takes the layer of the op it
    differentiates, an update its parameter's (named, or read by ops of a
    layer).

    `loss-scale=S` adds dynamic loss scaling: the backward pass starts from
    the loss gradient times the scale (the f32 state `amp.loss_scale`,
    initially S), and the updates divide it out. A step whose gradients
    hold an inf or NaN updates nothing: the scale halves, the step counter
    stays. After `loss-scale-growth-interval` finite steps in a row
    (counted in the i64 state `amp.growth_tracker`) the scale doubles.

    Each state parameter says what it holds in `cleave.role`
    (`#cleave.role<optimizer_state>`, `step_counter`, `loss_scale`,
    `growth_tracker`), and `@train_step` carries the loss and the optimizer
    as the `cleave.training_config` dictionary; the lowering hands both to
    the runtime.

    ```mlir
    func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x3xf32>
    ```
    becomes, with `optimizer=sgd lr=0.1`,
    ```mlir
    func.func @train_step(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32>
    ```
  }];
  let options = [
    Option<"loss", "loss", "::cleave::LossKind",
           /*default=*/"::cleave::LossKind::CrossEntropy",
           "The loss on the first output: cross-entropy or mse",
           [{::llvm::cl::values(
             clEnumValN(::cleave::LossKind::CrossEntropy, "cross-entropy",
                        "against integer labels, mean over positions"),
             clEnumValN(::cleave::LossKind::Mse, "mse",
                        "mean squared error against float targets"))}]>,
    Option<"optimizer", "optimizer", "::cleave::OptimizerKind",
           /*default=*/"::cleave::OptimizerKind::None",
           "none (return gradients), sgd or adamw",
           [{::llvm::cl::values(
             clEnumValN(::cleave::OptimizerKind::None, "none",
                        "no update: return the gradients"),
             clEnumValN(::cleave::OptimizerKind::Sgd, "sgd",
                        "torch.optim.SGD"),
             clEnumValN(::cleave::OptimizerKind::Adamw, "adamw",
                        "torch.optim.AdamW"))}]>,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0",
           "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay (negative: the optimizer's default, 0 for SGD and "
           "0.01 for AdamW)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"gradClip", "grad-clip", "double", /*default=*/"0.0",
           "Clip the global gradient 2-norm to this value (0: off)">,
    Option<"gradNorm", "grad-norm", "bool", /*default=*/"false",
           "Return the global gradient 2-norm as the result grad_norm "
           "also without clipping (with grad-clip it always is)">,
    Option<"accumulate", "accumulate", "int64_t", /*default=*/"1",
           "Microbatches per optimizer step">,
    Option<"ignoreIndex", "ignore-index", "std::string", /*default=*/"\"\"",
           "cross-entropy: a label value that contributes no loss (e.g. "
           "-100, PyTorch's default); empty: none">,
    Option<"moeAuxLoss", "moe-aux-loss", "double", /*default=*/"0.0",
           "Coefficient of the routed mixtures' load-balancing loss "
           "(-cleave-add-loss); 0: none">,
    Option<"lossScale", "loss-scale", "double", /*default=*/"0.0",
           "Dynamic loss scaling from this initial scale (0: off), as "
           "torch.cuda.amp.GradScaler; for f16 training">,
    Option<"lossScaleGrowthInterval", "loss-scale-growth-interval",
           "int64_t", /*default=*/"2000",
           "Finite steps after which the loss scale doubles">
  ];
  let statistics = [
    Statistic<"numRules", "num-rules", "Gradient rules applied">
  ];
  let dependentDialects = ["::cleave::graph::GraphDialect"];
}


include "DistPasses.td"

#endif // CLEAVE_TRANSFORMS_PASSES_TD
