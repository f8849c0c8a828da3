#!/usr/bin/env python3
"""The partitioner on the ONNX examples under mpirun against one device.

usage: check_examples.py --compile CLEAVE_COMPILE [--mpirun MPIRUN] [CASE...]

Each case compiles an example model (examples/<model>/model.onnx) twice,
for one device and with `--mesh ...` (the partitioner's program), trains
both on the same token corpus (corpus.txt here, an early copy of the
README kept fixed so that editing the README does not move the tests'
data, tokenized by characters) and checks:

- the loss of every step on the mesh equals one device's within RTOL;
- the final parameters and optimizer state, put together from the sharded
  checkpoint by numpy, equal one device's within RTOL of each tensor's
  largest magnitude;
- the validation loss of those parameters, through the evaluation program
  partitioned as the step, equals one device's within RTOL;
- each rank stores the blocks the layout gives it: the parameters and
  the optimizer state divided by tp where split, by dp with ZeRO-3 (the
  parameters) and ZeRO-1 and up (the state), from the program's --help;
- the parameters split on the `tp` axis are exactly the Megatron layout
  the case names (column-parallel up, gate, query, key and value
  projections with their biases; row-parallel down and output
  projections), read off the checkpoint index;
- the bytes each rank sent per axis and collective, counted by the
  runtime, equal the analytical figure: ring all-reduce 2(n-1)/n * S per
  rank, all-gather and reduce-scatter (n-1)/n * S, and Megatron's four
  all-reduces of b*s*h per layer per step;
- the bytes `cleave-compile --dist-explain` prints per axis and collective
  equal the runtime's count, on every axis;
- cleave-plan's communication and per-GPU memory estimates for the same
  layout agree with them (fp32 layouts up to ZeRO-1 without sequence
  parallelism; see check_planner for what the planner leaves out).

Prints one line per check; exits non-zero on the first failing case.
"""
import copy
import dataclasses
import importlib.util
import json
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
RTOL = 1e-5
STEPS = 8

_spec = importlib.util.spec_from_file_location(
    "check_distributed", os.path.join(HERE, "check_distributed.py"))
distributed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(distributed)
MPIRUN = distributed.MPIRUN  # --mpirun sets it for both

# The examples' sizes: batch 2 x 8 tokens, hidden 32, 2 layers, f32.
BATCH, SEQ, HIDDEN, LAYERS = 2, 8, 32, 2
# Megatron: per layer, the attention's and the MLP's row-parallel products
# all-reduced in the forward and the input gradients of their column-
# parallel projections in the backward: four all-reduces of b * s * h.
TOKENS_BYTES = BATCH * SEQ * HIDDEN * 4  # one activation, b*s*h f32
MEGATRON_BYTES = 4 * LAYERS * TOKENS_BYTES
# Around the layers, with the vocabulary split: the embedding's partial
# rows all-reduced in the forward, the LM head's input gradient in the
# backward, and the vocabulary-parallel loss's row maxima, sums of
# exponentials and label logits (3 of b*s f32), maxima and sums again in
# its gradient (2): each all-reduced, 2 (n-1)/n = 1 for n = 2.
VOCAB_BYTES = 2 * TOKENS_BYTES + 5 * BATCH * SEQ * 4

# The parameters the Megatron layout splits, by example: {name: dim}. The
# embedding tables and the LM head by vocabulary (gpt ties them: wte).
GPT_TP = {
    f"blocks.{l}.{name}": dim for l in range(LAYERS) for name, dim in [
        ("attn.qkv.weight", 1), ("attn.qkv.bias", 1),
        ("attn.proj.weight", 1), ("mlp.fc.weight", 0), ("mlp.fc.bias", 0),
        ("mlp.proj.weight", 1)]}
GPT_TP["wte.weight"] = 0
LLAMA_TP = {
    f"layers.{l}.{name}": dim for l in range(LAYERS) for name, dim in [
        ("attention.wq.weight", 0), ("attention.wk.weight", 0),
        ("attention.wv.weight", 0), ("attention.wo.weight", 1),
        ("feed_forward.w1.weight", 0), ("feed_forward.w3.weight", 0),
        ("feed_forward.w2.weight", 1)]}
LLAMA_TP.update({"tok_embeddings.weight": 0, "output.weight": 0})


def model_params(model):
    """{name: bytes} of the example's float initializers."""
    import onnx
    graph = onnx.load(os.path.join(ROOT, "examples", model,
                                   "model.onnx")).graph
    return {i.name: int(np.prod(i.dims)) * 4 for i in graph.initializer
            if i.data_type == 1}


def dp_bytes(model, tp_split, tp):
    """The gradient bytes each dp group all-reduces: every parameter, the
    tp-split ones as their block, and the loss."""
    return sum(b // (tp if n in tp_split else 1)
               for n, b in model_params(model).items()) + 4


@dataclasses.dataclass
class Case:
    name: str
    model: str
    mesh: str
    ranks: int
    flags: list  # of both programs
    tp_split: dict  # {param: dim split on tp} (the layout expected)
    # wire bytes sent per step by every rank: {axis: {kind: bytes}}; an
    # axis absent is not checked (see the case's comment).
    wire_bytes: dict
    mesh_flags: list = dataclasses.field(default_factory=list)
    rtol: float = RTOL
    # The bytes of the collectives --recompute full repeats, which
    # --dist-explain does not list: {axis: {kind: bytes}}.
    recomputed_bytes: dict = dataclasses.field(default_factory=dict)


ADAMW = ["--optimizer", "adamw", "--lr", "3e-3"]
# llama trains with SGD and momentum: under AdamW, one element in 2048 of a
# SwiGLU weight, whose gradient is dominated by rounding, takes a step of
# another sign on each layout (6e-6 of the tensor's scale after 8 steps):
# AdamW divides by the gradient's own size.
SGD = ["--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.05"]


def cases():
    gpt = model_params("gpt")
    p = sum(gpt.values())
    return [
        # Plain data parallelism, n = 2: 2 (n-1)/n = 1 times the gradients
        # and the loss.
        Case("gpt-dp2", "gpt", "dp=2", 2, ADAMW, {},
             {"dp": {"all_reduce": p + 4}}),
        # ZeRO-1: every gradient reduce-scattered and every parameter
        # gathered after its update, (n-1)/n = 1/2 of them each.
        Case("gpt-dp2-zero1", "gpt", "dp=2", 2, ADAMW, {},
             {"dp": {"all_reduce": 4, "reduce_scatter": p // 2,
                     "all_gather": p // 2}}, ["--zero", "1"]),
        # llama's data parallelism with ZeRO-2 and ZeRO-3 (SGD's momentum
        # is the state). ZeRO-2, one microbatch: every gradient
        # reduce-scattered, every parameter gathered, (n-1)/n = 1/2 each.
        Case("llama-dp2-zero2", "llama", "dp=2", 2, SGD, {},
             {"dp": {"all_reduce": 4,
                     "reduce_scatter": sum(model_params("llama").values()) // 2,
                     "all_gather": sum(model_params("llama").values()) // 2}},
             ["--zero", "2"]),
        Case("llama-dp2-zero3", "llama", "dp=2", 2, SGD, {}, {},
             ["--zero", "3"]),
        # Two microbatches: the partial gradients are summed unreduced and
        # reduced once.
        # (SGD: with AdamW one element of attn.proj.weight, whose
        # accumulated gradient is dominated by rounding, steps differently,
        # 1.2e-5 of the tensor's scale after 8 steps.)
        Case("gpt-dp2-accumulate2", "gpt", "dp=2", 2,
             SGD + ["--accumulate", "2"],
             {}, {"dp": {"all_reduce": p + 4}}),
        # The same with full recomputation (--recompute full, both
        # programs): each microbatch's layers computed again in their
        # backward, the same bytes sent.
        Case("gpt-dp2-accumulate2-recompute", "gpt", "dp=2", 2,
             SGD + ["--accumulate", "2", "--recompute", "full"],
             {}, {"dp": {"all_reduce": p + 4}}),
        Case("gpt-tp2", "gpt", "tp=2", 2, ADAMW, GPT_TP,
             {"tp": {"all_reduce": MEGATRON_BYTES + VOCAB_BYTES}}),
        # Full recomputation under tensor parallelism: the collectives of
        # what a layer recomputes run again in its backward on every rank,
        # as Megatron-LM's do. Per layer that is the attention's row-
        # parallel all-reduce (its sum feeds ln_2, whose gradient reads its
        # input), one b*s*h activation; the MLP's feeds only the layer's
        # output, which is held: MEGATRON_BYTES / 4 more.
        Case("gpt-tp2-recompute", "gpt", "tp=2", 2,
             ADAMW + ["--recompute", "full"], GPT_TP,
             {"tp": {"all_reduce": MEGATRON_BYTES * 5 // 4 + VOCAB_BYTES}},
             recomputed_bytes={"tp": {"all_reduce": MEGATRON_BYTES // 4}}),
        Case("llama-tp2", "llama", "tp=2", 2, SGD, LLAMA_TP,
             {"tp": {"all_reduce": MEGATRON_BYTES + VOCAB_BYTES}}),
        # Each dp group holds half the batch; the gradients it all-reduces
        # are the tp blocks.
        Case("gpt-dp2-tp2", "gpt", "dp=2,tp=2", 4, ADAMW, GPT_TP,
             {"dp": {"all_reduce": dp_bytes("gpt", GPT_TP, 2)},
              "tp": {"all_reduce": (MEGATRON_BYTES + VOCAB_BYTES) // 2}}),
        # llama's token table is not tied to its LM head: its gradient,
        # computed whole from the data's ids, is partial over dp and read
        # split by vocabulary on tp; each rank slices its block before the
        # dp all-reduce, which moves the block only.
        Case("llama-dp2-tp2", "llama", "dp=2,tp=2", 4, SGD, LLAMA_TP,
             {"dp": {"all_reduce": dp_bytes("llama", LLAMA_TP, 2)},
              "tp": {"all_reduce": (MEGATRON_BYTES + VOCAB_BYTES) // 2}}),
        # Megatron sequence parallelism (--sp): per layer, the forward's two
        # all-reduces become a reduce-scatter of the tokens and an
        # all-gather before the next column-parallel projection, and so in
        # the backward: 8 x (n-1)/n * b*s*h*4 per layer, Megatron's bytes.
        # Around the layers: the embedding's partial rows are all-reduced
        # (the first layer's input stays whole, so its input gradient is
        # all-reduced too and the first projection needs no all-gather);
        # the LM head gathers its input and reduce-scatters its input
        # gradient; the embeddings' output gradients are gathered (b*s*h
        # for the token table, s*h for the positions); the loss's 5
        # all-reduces of b*s; and the gradients of the norm weights and of
        # the row-parallel biases, computed from a shard of the tokens, are
        # all-reduced (12 vectors of h: the first norm is whole).
        Case("gpt-tp2-sp", "gpt", "tp=2", 2, ADAMW, GPT_TP,
             {"tp": {"reduce_scatter": 4 * LAYERS * TOKENS_BYTES // 2,
                     "all_gather": 4 * LAYERS * TOKENS_BYTES // 2
                     + (TOKENS_BYTES + SEQ * HIDDEN * 4) // 2,
                     "all_reduce": 2 * TOKENS_BYTES + 5 * BATCH * SEQ * 4
                     + 12 * HIDDEN * 4}},
             ["--sp"]),
        # llama: RMS norms without biases, no row-parallel biases, no
        # position table: the norm weights' gradients (2 per layer, less
        # the first, and the final norm's) all-reduced.
        Case("llama-tp2-sp", "llama", "tp=2", 2, SGD, LLAMA_TP,
             {"tp": {"reduce_scatter": 4 * LAYERS * TOKENS_BYTES // 2,
                     "all_gather": (4 * LAYERS + 1) * TOKENS_BYTES // 2,
                     "all_reduce": 2 * TOKENS_BYTES + 5 * BATCH * SEQ * 4
                     + 2 * LAYERS * HIDDEN * 4}},
             ["--sp"]),
        # bf16 (f32 parameters and state, 16-bit compute): a device sums a
        # row-parallel product's partial results in bf16 before the
        # all-reduce adds them in f32 and rounds once, where one device
        # rounds the whole sum once; activations differ by about one bf16
        # unit (2^-8 = 3.9e-3 relative) here and there, and the split LM
        # head rounds its logits in other places than the whole one: the
        # losses, the parameters and the momentum (a sum of bf16
        # gradients, each of sums of many bf16 products) after 8 steps
        # within 3e-2, a few units. (SGD: AdamW divides
        # each gradient by its own size, which turns those units into steps
        # of the full learning rate where a gradient is small.)
        Case("gpt-tp2-bf16", "gpt", "tp=2", 2,
             SGD + ["--precision", "bf16"], GPT_TP,
             {"tp": {"all_reduce": MEGATRON_BYTES // 2 + TOKENS_BYTES
                     + 5 * BATCH * SEQ * 4}}, rtol=3e-2),
        Case("gpt-dp2-tp2-zero3-sp-bf16", "gpt", "dp=2,tp=2", 4,
             SGD + ["--precision", "bf16"], GPT_TP, {},
             ["--zero", "3", "--sp"], rtol=3e-2),
        # The main job's layout: gpt-tp2-sp's figures on "tp" for the half
        # batch of a dp group (the norms' and biases' gradients are f32,
        # whole vectors); the "dp" axis checked by --dist-explain's count.
        Case("gpt-dp2-tp2-zero3-sp", "gpt", "dp=2,tp=2", 4, ADAMW, GPT_TP,
             {"tp": {"reduce_scatter": 4 * LAYERS * TOKENS_BYTES // 4,
                     "all_gather": 4 * LAYERS * TOKENS_BYTES // 4
                     + (TOKENS_BYTES // 2 + SEQ * HIDDEN * 4) // 2,
                     "all_reduce": TOKENS_BYTES + 5 * BATCH * SEQ * 2
                     + 12 * HIDDEN * 4}},
             ["--zero", "3", "--sp"]),
        # An ignored label (the character 'e' of the corpus, id 5 here, is
        # frequent): the loss's hooks drop its positions and the count
        # divides by the others, on every layout as on one device.
        Case("gpt-dp2-tp2-sp-ignore", "gpt", "dp=2,tp=2", 4,
             ADAMW + ["--ignore-index", "5"], GPT_TP, {}, ["--sp"]),
        # ZeRO-3 with tensor parallelism: losses, state and layout, and
        # the tp axis's bytes (the dp axis's gathers depend on which
        # parameters the backward reads again, which the mlp cases of
        # check_distributed.py count).
        Case("llama-dp2-tp2-zero3", "llama", "dp=2,tp=2", 4, SGD, LLAMA_TP,
             {"tp": {"all_reduce": (MEGATRON_BYTES + VOCAB_BYTES) // 2}},
             ["--zero", "3"]),
    ]


def layout_of(case):
    """(dp, tp, ZeRO stage) of a case."""
    axes = dict(a.split("=") for a in case.mesh.split(","))
    zero = int(case.mesh_flags[case.mesh_flags.index("--zero") + 1]) \
        if "--zero" in case.mesh_flags else 0
    return int(axes.get("dp", 1)), int(axes.get("tp", 1)), zero


run = distributed.run


def write_corpus(work):
    """corpus.txt (beside this script) as a token file in `work`, by
    characters (examples/gpt/make_corpus.py); returns its path."""
    corpus = os.path.join(work, "corpus.bin")
    run(["/usr/bin/python3", os.path.join(ROOT, "examples", "gpt",
                                          "make_corpus.py"),
         os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "corpus.txt"), corpus])
    return corpus


def counted(work, rank):
    """{axes: {kind: bytes}} rank `rank` sent per step, as the runtime
    counted it (--comm-stats stats), kinds with bytes only."""
    stats = json.load(open(os.path.join(work, "stats",
                                        f"comm-rank{rank}.json")))
    got = {",".join(g["axes"]): {k: v["wire_bytes"] // STEPS
                                 for k, v in g["kinds"].items()
                                 if v["wire_bytes"]}
           for g in stats["groups"]}
    return {axes: kinds for axes, kinds in got.items() if kinds}


def explained_bytes(explained):
    """{axes: {kind: bytes}} per rank and step of --dist-explain's summary."""
    told = {}
    for kind, names, nbytes in re.findall(r'(\w+) over \[([^\]]*)\] (\d+) B',
                                          explained.splitlines()[0]):
        names = ",".join(a.strip().strip('"') for a in names.split(","))
        told.setdefault(names, {})[kind] = int(nbytes)
    return told


def stored_bytes(help_text):
    """(parameter bytes, optimizer-state bytes) each rank stores, from the
    program's --help."""
    return tuple(map(int, re.search(
        r"parameters: \d+ of the model \([^=]+= (\d+) B\), \d+ of optimizer "
        r"state \([^=]+= (\d+) B\)", help_text).groups()))


def compare_final_states(name, work, rtol):
    """The final parameters and optimizer state of work/mesh-ck, put
    together by numpy, against work/one-ck: within rtol of each tensor's
    largest magnitude."""
    a = distributed.read_checkpoint(os.path.join(work, "one-ck"))
    b = distributed.read_checkpoint(os.path.join(work, "mesh-ck"))
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    for param in a:
        # A fused projection is [3 * h, k] on one device and [3, h, k]
        # split by heads: the same elements in the same order.
        x, y = a[param].astype(np.float64).ravel(), b[param].ravel()
        if param.endswith("attn.qkv.bias"):
            # The key bias's gradient is zero in exact arithmetic (a
            # softmax does not change when every score of a query moves by
            # the same amount); in floats it is rounding noise, which
            # AdamW scales to full steps, different on every layout. The
            # losses do not depend on it.
            keep = np.ones(x.size, bool)
            keep[x.size // 3: 2 * x.size // 3] = False
            x, y = x[keep], y[keep]
        scale = max(float(np.max(np.abs(x))), 1e-30)
        err = float(np.max(np.abs(x - y)))
        if err > rtol * scale:
            raise AssertionError(f"{name}: final {param} differs by {err} "
                                 f"(largest magnitude {scale})")
    print(f"ok {name}: final values of {len(a)} parameters and states "
          f"within {rtol} of one device")


def compare_evals(name, ranks, work, rtol):
    """The validation loss of the final parameters on both layouts: work/one
    and work/mesh resumed from their final checkpoints (one-ck, mesh-ck)
    with no steps to run evaluate them on 3 batches of the corpus, each
    through its evaluation program (the step's forward pass and loss,
    partitioned as the step); within rtol."""
    corpus = os.path.join(work, "corpus.bin")
    flags = ["--tokens", corpus, "--eval-tokens", corpus, "--eval-steps", "3",
             "--steps", str(STEPS), "--quiet"]
    run([os.path.join(work, "one"), *flags, "--resume", "one-ck",
         "--log-json", "one-eval.jsonl"], cwd=work)
    run([*MPIRUN, "-np", str(ranks), os.path.join(work, "mesh"), *flags,
         "--resume", "mesh-ck", "--log-json", "mesh-eval.jsonl"], cwd=work)
    losses = []
    for tag in ("one", "mesh"):
        with open(os.path.join(work, tag + "-eval.jsonl")) as f:
            losses.append([json.loads(line)["eval_loss"] for line in f])
    (a,), (b,) = losses
    if not abs(a - b) <= rtol * abs(a):
        raise AssertionError(f"{name}: the final parameters' validation loss "
                             f"is {b!r} on {ranks} ranks, {a!r} on one device")
    print(f"ok {name}: the final parameters' validation loss {b:.6g} on "
          f"{ranks} ranks within {rtol} of one device's")


def check_case(case, compile_, work):
    model = os.path.join(ROOT, "examples", case.model, "model.onnx")
    flags = ["--train", *case.flags]
    one, mesh = os.path.join(work, "one"), os.path.join(work, "mesh")
    run([compile_, model, *flags, "-o", one])
    explained = run([compile_, model, *flags, "--mesh", case.mesh,
                     *case.mesh_flags, "--dist-explain", "-o", mesh]).stdout
    corpus = write_corpus(work)
    data = ["--tokens", corpus, "--steps", str(STEPS), "--shuffle", "--seed",
            "1", "--quiet"]
    run([one, *data, "--log-json", "one.jsonl", "--save", "one-ck"], cwd=work)
    run([*MPIRUN, "-np", str(case.ranks), mesh, *data, "--log-json",
         "mesh.jsonl", "--save", "mesh-ck", "--comm-stats", "stats"],
        cwd=work)
    distributed.RTOL = case.rtol
    distributed.compare_losses(
        f"{case.name} on {case.ranks} ranks",
        distributed.losses(os.path.join(work, "one.jsonl")),
        distributed.losses(os.path.join(work, "mesh.jsonl")),
        list(range(1, STEPS + 1)))

    compare_final_states(case.name, work, case.rtol)
    compare_evals(case.name, case.ranks, work, case.rtol)

    # Each rank stores its blocks: the parameters split on tp, and on dp
    # with ZeRO-3; the optimizer state (AdamW's two moments, SGD's
    # momentum, and the 8-byte step counter) split on tp, and on dp from
    # ZeRO-1 (every dimension here divides).
    help_text = run([*MPIRUN, "-np", str(case.ranks), mesh, "--help"]).stdout
    model_b, state_b = stored_bytes(help_text)
    dp, tp, zero = layout_of(case)
    blocks = {n: b // (tp if n in case.tp_split else 1)
              for n, b in model_params(case.model).items()}
    moments = 2 if "adamw" in case.flags else 1
    want_model = sum(blocks.values()) // (dp if zero == 3 else 1)
    want_state = moments * sum(blocks.values()) // (dp if zero >= 1 else 1) + 8
    if (model_b, state_b) != (want_model, want_state):
        raise AssertionError(f"{case.name}: each rank stores {model_b} B of "
                             f"parameters and {state_b} B of state, the "
                             f"layout's figures are {want_model} and "
                             f"{want_state}")
    print(f"ok {case.name}: each rank stores {model_b} B of parameters and "
          f"{state_b} B of optimizer state, as the layout says")
    stored = (model_b, state_b - 8)  # less the step counter

    index = json.load(open(os.path.join(work, "mesh-ck", "model.index.json")))
    split = {}
    for name, spec in index["params"].items():
        if name in model_params(case.model):
            for d, axes in enumerate(spec["sharding"]):
                if "tp" in axes:
                    split[name] = d
    if split != case.tp_split:
        raise AssertionError(f"{case.name}: split on tp {split}, the Megatron "
                             f"layout is {case.tp_split}")
    if case.tp_split:
        print(f"ok {case.name}: the {len(split)} parameters split on tp are "
              f"the Megatron layout")

    for rank in range(case.ranks if case.wire_bytes else 0):
        got = {axes: kinds for axes, kinds in counted(work, rank).items()
               if axes in case.wire_bytes}
        if got != case.wire_bytes:
            raise AssertionError(f"{case.name}: rank {rank} sent {got} per "
                                 f"step, the analytical figure is "
                                 f"{case.wire_bytes}")
    if case.wire_bytes:
        print(f"ok {case.name}: bytes sent per rank and step equal the "
              f"analytical figures {case.wire_bytes}")

    # --dist-explain's figures are the compiler's: they must be what the
    # runtime counted, on every axis.
    partitioned = explained_bytes(explained)
    runtime = counted(work, 0)
    # --dist-explain reports the partitioner's collectives, before
    # -cleave-recompute repeats some: the recomputed ones are the
    # difference, the analytical figure above.
    told = copy.deepcopy(partitioned)
    for axis, kinds in case.recomputed_bytes.items():
        for kind, extra in kinds.items():
            told[axis][kind] += extra
    if told != runtime:
        raise AssertionError(f"{case.name}: --dist-explain says {told} per "
                             f"rank and step, the runtime counted {runtime}")
    print(f"ok {case.name}: --dist-explain's bytes per axis and collective "
          f"equal the runtime's count")
    # (The planner is asked for the layout without recomputation: it
    # counts Megatron-LM's, which repeats every forward collective of a
    # layer, where -cleave-recompute repeats only those of the values the
    # backward reads.)
    check_planner(case, compile_, partitioned, stored)


def check_planner(case, compile_, told, stored):
    """cleave-plan's communication estimate for the case's layout against
    the compiler's figures: per axis, its bytes per GPU and step equal
    --dist-explain's but for what the planner does not model, the loss's
    4-byte all-reduce over dp and the vocabulary-parallel loss's five
    all-reduces of b*s f32 over tp. Checked for fp32 layouts without
    sequence parallelism and up to ZeRO-1 (the planner counts every
    parameter gathered twice under ZeRO-3, where the compiler gathers
    again only what the backward reads)."""
    dp, tp, zero = layout_of(case)
    if "--sp" in case.mesh_flags or zero > 1 or "--precision" in case.flags:
        return
    plan = os.path.join(os.path.dirname(compile_), "cleave-plan")
    micro = case.flags[case.flags.index("--accumulate") + 1] \
        if "--accumulate" in case.flags else "1"
    out = run([plan, os.path.join(ROOT, "examples", case.model, "model.onnx"),
               "--gpus", str(dp * tp), "--dp", str(dp), "--tp", str(tp),
               "--pp", "1", "--cp", "1", "--ep", "1", "--zero", str(zero),
               "--microbatches", micro,
               "--global-batch", str(BATCH * int(micro)), "--precision", "fp32",
               "--optimizer", "adam" if "adamw" in case.flags else "sgd",
               "--cluster", "h100", "--json"]).stdout
    estimate = json.loads(out)
    estimate = estimate.get("estimate", estimate)
    planned = {a: estimate["comm_gb"][a] * 1e9 for a in ("dp", "tp")}
    compiled = {a: sum(told.get(a, {}).values()) for a in ("dp", "tp")}
    if dp > 1:
        compiled["dp"] -= 4
    if tp > 1:
        compiled["tp"] -= 5 * (BATCH // dp) * SEQ * 4
    # The planner counts norm and bias parameters, and position tables, as
    # split by tp ("a few parts in 10^4 for realistic hidden sizes",
    # planner/lib/Estimate.cpp); the compiler keeps them whole. At hidden
    # 32 that is 2.2% of the gradients dp reduces under tp: 3% there.
    tolerance = {"dp": 3e-2 if tp > 1 else 1e-3, "tp": 1e-3}
    for a in ("dp", "tp"):
        if abs(planned[a] - compiled[a]) > tolerance[a] * max(compiled[a], 1):
            raise AssertionError(f"{case.name}: cleave-plan estimates {a} "
                                 f"{planned[a]:.0f} B per GPU and step, the "
                                 f"compiler's figure is {compiled[a]}")
    memory = estimate["memory_gb"]
    pairs = [("parameters", memory["params"] * 1e9, stored[0])]
    if "adamw" in case.flags:  # the planner's SGD keeps no momentum
        pairs.append(("optimizer state", memory["optimizer"] * 1e9, stored[1]))
    for what, planned_b, compiled_b in pairs:
        if abs(planned_b - compiled_b) > tolerance["dp"] * compiled_b:
            raise AssertionError(f"{case.name}: cleave-plan estimates "
                                 f"{planned_b:.0f} B of {what} per GPU, the "
                                 f"program stores {compiled_b}")
    said = ", ".join(f"{what} {p:.0f} B against {c} B" for what, p, c in pairs)
    print(f"ok {case.name}: cleave-plan's memory estimate per GPU agrees "
          f"with each rank's storage: {said}")
    print(f"ok {case.name}: cleave-plan's communication estimate (dp "
          f"{planned['dp']:.0f} B, tp {planned['tp']:.0f} B) agrees with the "
          f"compiler's (dp {compiled['dp']} B, tp {compiled['tp']} B)")


def main():
    return distributed.run_cases(__doc__.splitlines()[0], cases(), check_case,
                                 MPIRUN)


if __name__ == "__main__":
    sys.exit(main())
