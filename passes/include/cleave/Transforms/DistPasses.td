//===- DistPasses.td - the distribution passes --------------*- tablegen -*-===//
//
// The passes that split a program over a device mesh: the mesh, the
// strategies, propagation, partitioning, the collectives' optimization and
// their explanation (docs/partitioning.md). Included by Passes.td, with
// whose declarations and documentation they are generated.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_DISTPASSES_TD
#define CLEAVE_TRANSFORMS_DISTPASSES_TD

include "mlir/Pass/PassBase.td"

def DistAddMeshPass : Pass<"dist-add-mesh", "::mlir::ModuleOp"> {
  let summary = "Adds the device mesh the distribution passes split over";
  let description = [{
    Adds `dist.mesh @mesh` with the given axes, in order (the last axis
    varies fastest in the rank numbering, so it should be the one with the
    fastest links: `tp` within a node). An axis of size 1 is kept, so that
    a strategy on it is a no-op rather than an error.

    ```
    cleave-opt -dist-add-mesh="axes=dp=2,tp=2"
    ```
    adds `dist.mesh @mesh ["dp" = 2, "tp" = 2]`. A module that already has
    a mesh, an axis named twice, or a size below 1 is an error.
  }];
  let options = [
    ListOption<"axes", "axes", "std::string",
               "mesh axes as name=size, major to minor (dp=2,tp=2)">
  ];
  let dependentDialects = ["::cleave::dist::DistDialect"];
}

def DistDataParallelPass : Pass<"dist-data-parallel", "::mlir::ModuleOp"> {
  let summary = "Shards the batch over a mesh axis, and with ZeRO the training state";
  let description = [{
    A strategy pass: it only annotates; `-dist-propagate` and
    `-dist-partition` derive the rest. Run it on the training step after
    `-cleave-add-optimizer` (the state it shards exists then).

    - Every tensor argument of every function is split along its batch
      dimension on `axis`: dimension 0, or 1 in a training step with
      `accumulate` > 1, whose inputs are stacked `[K, B, ...]`. A batch the
      axis does not divide is an error naming the argument and the sizes;
      an argument whose layout the user wrote (priority `user`) is kept.
    - `zero=1` and `zero=2`: the optimizer state (parameters of role
      `optimizer_state`: Adam's moments, SGD's momentum) is stored split on
      `axis` along its first dimension the axis divides; each device
      updates its block of every such parameter from a reduce-scattered
      gradient and the parameter is all-gathered after the update. In one
      step of one microbatch the two stages are the same program. With
      `accumulate` > 1, ZeRO-1 sums the microbatches' gradients unreduced
      and reduces once; ZeRO-2 reduce-scatters each microbatch's gradient
      into the block (a `dist.shard` on each term of the sum) and sums the
      blocks: K times the bytes, no whole gradient on any rank.
    - `zero=3` (FSDP's full sharding): the trainable parameters are stored
      split too. Each use of a parameter in the forward and backward
      reads it and gathers it (`dist.shard` to its layout without `axis`),
      so the gathered copy lives only until that use and the backward
      gathers again; the optimizer updates the stored block.
    A tensor the axis divides along no dimension stays replicated.
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"dp\"",
           "the mesh axis to split the batch on">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage: 0 (replicated state), 1, 2 (optimizer state and "
           "gradients sharded) or 3 (parameters too)">
  ];
  let dependentDialects = ["::cleave::dist::DistDialect"];
}

def DistExpertParallelPass : Pass<"dist-expert-parallel", "::mlir::ModuleOp"> {
  let summary = "Splits the routed experts over a mesh axis, and the batch with them";
  let description = [{
    A strategy pass: it only annotates; `-dist-propagate` and
    `-dist-partition` derive the rest. It needs routed experts (the
    `graph.moe_dispatch`, `graph.expert_matmul` and `graph.moe_combine`
    that `-cleave-raise` makes of a mixture of experts).

    - The stacked expert parameters, `[E, ...]`, are split along E on
      `axis`: the weights of every forward `graph.expert_matmul` (through
      reads, casts, transposes, size-1 reshapes) and the per-expert values
      (biases) the ops between them combine with; their optimizer state
      like them. Each device holds E/n experts.
    - The batch of every input is split on `axis` too (as
      `-dist-data-parallel` splits it, among the axes already splitting it
      in the mesh's order): each device routes the tokens of its share.
      `moe_dispatch` fills the slots of its own token groups, and the
      partitioner turns slots split by groups into experts split by
      devices with one `dist.all_to_all` (and back before `moe_combine`,
      and so in the backward). The router and the rest of the model are
      replicated on `axis`, their gradients all-reduced over it.
    - Errors name the op: experts or routing groups that the axis does not
      divide (more devices than experts among them), expert weights that
      are not parameters; a module with no routed experts is an error too.
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"ep\"",
           "the mesh axis to split the experts on">
  ];
  let dependentDialects = ["::cleave::dist::DistDialect"];
}

def DistContextParallelPass : Pass<"dist-context-parallel", "::mlir::ModuleOp"> {
  let summary = "Splits the sequence over a mesh axis (context parallelism)";
  let description = [{
    A strategy pass: it only annotates; `-dist-propagate` and
    `-dist-partition` derive the rest. The sequence is the query length of
    the forward's self-attentions; the dimension after the batch of every
    input of that length (the token ids, the labels) is split on `axis`,
    so each device holds its part of every sequence (see `layout`), and
    propagation carries the split through the embeddings, the norms, the
    projections and the loss (position tables and rotary constants are
    sliced at the device's offset).

    At each attention the queries stay split. With `form=ring` (the
    default) the keys and values stay split too: the attention's partition
    hook computes each device's queries against one key/value block at a
    time while `dist.collective_permute` passes the blocks on around the
    devices of `axis`, and merges the blocks by their log-sum-exp (ring
    attention, Liu et al. 2023); a causal mask is applied by the tokens'
    positions. The backward passes the blocks the same way with their
    gradients beside them, and one more step brings each block's gradient
    home: per attention a device sends its key and value blocks n - 1
    times in the forward and in the backward, and their gradients n times.
    The pass marks the attentions and their gradients `dist.ring` with the
    layout.

    With `layout=zigzag` (the default) the sequence is cut into 2n chunks
    and device r holds chunks r and 2n - 1 - r (the mesh names `axis` in
    its `zigzag_axes`): under a causal mask every device then has the same
    number of live query-key pairs, where in `layout=contiguous` (device r
    holds chunk r of n) the last device has 2n - 1 times the first's. The
    partitioner reorders the chunks where a value starts or stops being
    split on the axis (a local copy, no communication), and passes inputs
    and results split on the axis whole along it: each device reads its
    chunks of the token ids and labels from the whole sequence of its
    batch. The attention hooks take the chunks' positions (the gather
    form's mask too).

    With `form=gather` the keys and values are gathered whole over `axis`
    (the all-gather form that Llama 3 trained with, Dubey et al. 2024,
    section 3.3.2): each device attends with its queries to the whole
    sequence, a causal mask becomes an explicit one at the device's query
    offset, and in the backward the keys' and values' gradients, partial
    sums over the devices' queries, are reduce-scattered or all-reduced.

    Each weight gradient that contracts the merged batch and sequence
    rows, `matmul(transpose(reshape(x, [B S, K])), reshape(dy, [B S, N]))`,
    is rewritten as `transpose(x) [B, K, S]` times `dy [B, S, N]` summed
    over B (a view for B = 1): merged rows cannot be split on the sequence
    (their minor factor), so the partitioner would gather x and dy whole;
    the batched contraction over the split sequence is partial, and the
    gradient is all-reduced like data parallelism's.

    Errors: no attention, a sequence the axis does not divide (2n chunks
    under zigzag), cross-attention or attentions of different lengths, an
    unknown form or layout, and under the ring an attention with a mask
    operand.
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"cp\"",
           "the mesh axis to split the sequence on">,
    Option<"form", "form", "std::string", /*default=*/"\"ring\"",
           "ring (pass the key/value blocks around the devices) or gather "
           "(gather the keys and values whole)">,
    Option<"layout", "layout", "std::string", /*default=*/"\"zigzag\"",
           "zigzag (device r holds chunks r and 2n-1-r of 2n) or "
           "contiguous (chunk r of n)">
  ];
  let dependentDialects = ["::cleave::dist::DistDialect"];
}

def DistTensorParallelPass : Pass<"dist-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Splits pairs of projections on a mesh axis, as Megatron-LM does";
  let description = [{
    A strategy pass: it only annotates parameters. It finds, in the forward
    ops (untagged ops count as forward), every *projection*: a
    `graph.matmul` whose right operand is a parameter (through reads,
    casts, transposes, size-1 reshapes and whole slices). For each, it
    follows the projection's output features through the ops that keep
    them apart (elementwise ops, bias adds, products with other
    projections' outputs as SwiGLU's gate, reshapes into heads, transposes,
    whole-feature slices and concatenations such as rotary embeddings,
    attention by heads) and accepts the projection when every path ends in
    the contracting dimension of another projection. Then the first
    projection's weight is split by output features (column-parallel),
    its bias with it, and the second's weight by input features
    (row-parallel): the MLP's up (and gate) and down projections; the
    query, key and value projections, by heads, and the attention's output
    projection. The optimizer state of a split parameter is split as the
    parameter. Propagation and partitioning then give one all-reduce of
    the row-parallel product in the forward and one of the input gradient
    in the backward, per pair.

    A projection whose features are the classes of a summed cross-entropy
    (the language-model head) is split by vocabulary, and so is every
    embedding table looked up by the data's ids (not a position table read
    at fixed rows): the gathers, their gradients and the loss then run
    through their partition hooks, which never gather the logits.
    Projections whose features reach anything else (a norm, a residual)
    stay whole. Heads or features that
    `axis` does not divide are an error naming the op and the sizes; so is
    a model with nothing to split. Run `-cleave-split-projections` before
    differentiating so that a fused query-key-value projection splits by
    heads (cleave-compile does with `tp` in `--mesh`).
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"tp\"",
           "the mesh axis to split the layers on">
  ];
  let dependentDialects = ["::cleave::dist::DistDialect"];
}

def DistOptimizeCollectivesPass : Pass<"dist-optimize-collectives", "::mlir::ModuleOp"> {
  let summary = "Rewrites and reorders the collectives of a partitioned program";
  let description = [{
    On every `dist.partitioned` function:

    - an all-reduce whose only readers keep this device's block of one
      dimension (`dist.local_slice` at the `dist.axis_index` of the same
      axes) becomes a reduce-scatter into that block: (n-1)/n of the bytes
      instead of 2(n-1)/n, and a block-sized result;
    - ZeRO-3's gathers of parameter blocks are *prefetched*: each
      all-gather of a parameter read by layer L (and the read) moves to the
      start of the layer computed before it, L-1 in the forward and L+1 in
      the backward, so that, started early by
      `-cleave-overlap-collectives`, it runs during that layer's compute;
      the gathered copy lives one layer longer.

    - with `gather-once`, ZeRO-3 gathers each parameter block once per
      step: the first gather of a parameter (by a layer, or by the ops
      outside the layers) serves every later reader of that layer in the
      step, every microbatch's forward and backward, instead of a gather
      before each use. Fewer gathers (one per parameter instead of 2M for
      M microbatches), more memory: the gathered copies live from the
      first microbatch's forward to the last one's backward, so the
      parameters are whole for the whole step, as under ZeRO-2.

    Gradient buckets are `-cleave-bucket-collectives` (`--bucket-bytes`),
    and the start and wait of every collective
    `-cleave-overlap-collectives`, which the pipeline runs after this pass.
  }];
  let options = [
    Option<"gatherOnce", "gather-once", "bool", /*default=*/"false",
           "ZeRO-3: gather each parameter block once per step and keep it "
           "for every microbatch, instead of before each use">
  ];
  let statistics = [
    Statistic<"numGathersMerged", "num-gathers-merged",
              "Parameter gathers served by an earlier gather of the step">
  ];
  let dependentDialects = ["::cleave::dist::DistDialect"];
}

def DistExplainPass : Pass<"dist-explain", "::mlir::ModuleOp"> {
  let summary = "Prints each collective of a partitioned program and why it is there";
  let description = [{
    For every `dist.partitioned` function, prints to standard output one
    line per collective, in the order of the step: its place (phase,
    microbatch and layer of the op it was inserted for), the collective
    with its axes and type, the bytes each rank sends for it (ring
    all-reduce 2(n-1)/n of the buffer, all-gather and reduce-scatter and
    all-to-all (n-1)/n of the whole buffer, for a group of n), and its
    cause: the layouts it converts between, the op and operand that read
    it, the annotation the value's layout derives from, and the reader's
    source location. A summary line gives the bytes per axis and kind, the
    figure `--comm-stats` counts at run time. The IR is not changed.
    `cleave-compile --dist-explain` runs it right after partitioning.
  }];
}

def DistSequenceParallelPass : Pass<"dist-sequence-parallel", "::mlir::ModuleOp"> {
  let summary = "Splits the tokens between tensor-parallel regions, as Megatron-LM's sequence parallelism";
  let description = [{
    A strategy pass for after `-dist-tensor-parallel`: the output of every
    forward row-parallel projection (a matmul whose weight is split on
    `axis` along its input features) is constrained (`dist.shard`, priority
    `propagated`) to be split on `axis` along its token dimension, the one
    before the features (its other dimensions open: a data-parallel batch
    stays split). Propagation carries that layout through the bias
    and residual adds, norms and dropout up to the next column-parallel
    projection, whose split weight wins over it there. So the partitioner
    writes Megatron's sequence parallelism: a reduce-scatter over the
    tokens in place of each forward all-reduce, an all-gather of the
    tokens before each column-parallel projection, and the same pair in
    the backward; the norms and the elementwise work between the regions
    run on a shard of the tokens. Tokens that `axis` does not divide are an
    error naming the projection.
  }];
  let options = [
    Option<"axis", "axis", "std::string", /*default=*/"\"tp\"",
           "the tensor-parallel mesh axis">
  ];
  let dependentDialects = ["::cleave::dist::DistDialect"];
}

def DistPropagatePass : Pass<"dist-propagate", "::mlir::ModuleOp"> {
  let summary = "Gives every value of the program a sharding, from the annotations";
  let description = [{
    Starts from the annotated values: function arguments (`dist.sharding`,
    replicated when absent), parameters (`graph.param`'s sharding, for
    every `graph.read_param`), `dist.shard` constraints and op results
    that already carry `dist.sharding`. It then walks the ops forward and
    backward until nothing changes: an op whose rule relates an annotated
    tensor to one without a sharding gives the latter the layout its
    factors imply (see the rule's split: each sharded dimension proposes
    its axes for its major factor; the highest priority wins, `user` over
    `strategy` over `propagated`, then the largest tensor). A value left
    without a sharding is replicated. Split reduction factors leave results
    partial, and ops linear in their partial operands keep them partial,
    so that a sum of partial gradients is reduced once.

    Every op result gets a `dist.sharding` (priority `propagated`, origin
    the annotation its layout derives from: the strategy pass or
    constraint whose layout proposed the axes), which `-dist-partition`
    then follows.
    Constants are not annotated backward: the partitioner slices them.
  }];
  let dependentDialects = ["::cleave::dist::DistDialect"];
}

def DistPartitionPass : Pass<"dist-partition", "::mlir::ModuleOp"> {
  let summary = "Turns the global program into one device's program with explicit collectives";
  let description = [{
    Every function becomes the program of one device (`dist.partitioned`):
    arguments, results and op results take the local type of their
    sharding, `graph.read_param` of a sharded parameter returns this
    device's block, and every op runs on its blocks. Where an op reads a
    value in another layout than the value has, the partitioner inserts
    the collectives that convert it, in this order:

    - a partial value is reduced: `dist.reduce_scatter` over the axes the
      reader splits a dimension on that the value does not, else
      `dist.all_reduce` (a reader linear in it keeps it partial);
    - axes the reader does not split a dimension on: `dist.all_gather`;
    - axes the reader splits a dimension on in addition: `dist.local_slice`
      at this device's `dist.axis_index` (no communication).

    One conversion of a value serves every later reader in the same layout.
    Results of an op whose layout differs from their `dist.sharding` are
    converted after the op; function results are replicated unless they
    carry a `dist.sharding`. Splat constants are rebuilt at the local size,
    other constants are sliced. Each inserted op's location names the op
    and operand it was inserted for, which `--dist-explain` prints.

    A function result with a `dist.sharding` is returned as this device's
    block. A partial argument or result, an op with regions, and an op
    without a sharding rule are errors naming the op.
  }];
  let dependentDialects = ["::cleave::dist::DistDialect"];
}

def DistPipelineParallelPass : Pass<"dist-pipeline-parallel", "::mlir::ModuleOp"> {
  let summary = "Cuts a partitioned training step into pipeline stage programs";
  let description = [{
    Runs on one device's training step (after `-dist-partition`) whose
    microbatches are unrolled (`-cleave-add-loss{accumulate=M}`), on a mesh
    with the pipeline axis `axis`. The layers (the `graph.layer` tags) are
    cut into `stages` x `virtual` chunks of consecutive layers, balanced by
    an estimate of each layer's forward FLOPs in which the embedding weighs
    on the first chunk and the LM head and loss on the last; chunk `c` runs
    on stage `c mod stages`. `split` gives the first layer of every chunk
    after the first instead (a plan file's layer ranges).

    Each op goes to the chunk of its layer; an untagged op to the latest
    chunk among its operands'; an op that reads only parameters, inputs and
    constants (a parameter read, the embedding of the ids) is copied into
    every stage that uses it, and an assignment into every stage that
    reads the parameter, so a tied embedding stays one value on the first
    and the last stage. The ops of each stage are ordered by `schedule`
    (`gpipe`, `1f1b`, `interleaved`), unrolled into each stage's order of
    forward and backward microbatch-chunks, with the optimizer after the
    last; a value that another stage reads is sent right after it is
    computed (`dist.send` on `axis`) and received before its first reader,
    in the order it was sent. A send followed by a receive becomes one
    `dist.send_recv` (as a 1F1B stage sends an activation and receives a
    gradient), and the pass proves, by running every stage's sends and
    receives as if each waited for its peer, that the stages cannot
    deadlock. The step's results (the loss) are sent from the last stage
    to the others, so every rank reports them.

    The result is one nested `builtin.module @stage<s>` per stage (its
    `dist.stage`), each a complete partitioned program with the mesh and
    the parameters its function uses, and the communicator groups of all
    stages in one order (`dist.groups`), so that every rank creates them
    alike; the lowering runs on each and `-cleave-link-stages` makes one
    program of them. With `report`, it prints the stages' layers, the
    schedule's bubble against the closed form and each stage's activations
    in flight; `trace=FILE` writes the planned timeline as a Chrome trace.

    More chunks than layers, a schedule that needs microbatches the step
    does not have, and a step that is not partitioned or not microbatched
    are errors that name the numbers.
  }];
  let options = [
    Option<"axis", "axis", "std::string", "\"pp\"", "the pipeline mesh axis">,
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "gpipe, 1f1b or interleaved">,
    Option<"virtualStages", "virtual", "int64_t", "1",
           "model chunks per stage (interleaved)">,
    ListOption<"split", "split", "int64_t",
               "the first layer of each chunk after the first">,
    Option<"report", "report", "bool", "false",
           "print the stages, the bubble and the activations in flight">,
    Option<"trace", "trace", "std::string", "\"\"",
           "write the planned schedule as a Chrome trace to this file">
  ];
  let dependentDialects = ["::cleave::dist::DistDialect"];
}

def LinkStagesPass : Pass<"cleave-link-stages", "::mlir::ModuleOp"> {
  let summary = "Makes one program of lowered pipeline stage programs";
  let description = [{
    Runs after `-cleave-lower-to-runtime` has lowered every nested stage
    module of `-dist-pipeline-parallel`. It moves each stage's code and
    data into the outer module (stage `s`'s symbols prefixed
    `cleave_stage<s>_`, external declarations shared) and adds the
    program's `cleave_program`, which lists the stages' own metadata and
    run functions (ABI 5), and a `cleave_program_run` that runs the stage
    of `context->stage`. The runtime's main picks the stage from the rank's
    coordinate along the pipeline axis.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def LinkEvalPass : Pass<"cleave-link-eval", "::mlir::ModuleOp"> {
  let summary = "Puts the lowered evaluation program into the training program";
  let description = [{
    Runs after `-cleave-lower-to-runtime` has lowered both the training
    step (the outer module) and its evaluation program, a nested module
    marked `cleave.eval_program` and lowered with `symbol-prefix=cleave_eval_`
    (the evaluation pipeline, which cleave-compile runs on the model beside
    the training pipeline). It moves the evaluation program's code and data
    into the outer module (external declarations shared) and points the
    fields `eval` and `eval_run` of `cleave_program` at
    `cleave_eval_program` and `cleave_eval_run` (ABI 7), through which the
    training binary's main computes the validation loss. A module without
    a nested evaluation program is left as it is.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // CLEAVE_TRANSFORMS_DISTPASSES_TD
