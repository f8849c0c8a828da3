#!/usr/bin/env python3
"""Expert parallelism on the moe example under mpirun against one device.

usage: check_experts.py --compile CLEAVE_COMPILE [--mpirun MPIRUN] [CASE...]

Each case compiles the moe example (examples/moe: 2 layers, each a top-2
mixture of 4 experts, routed by -cleave-raise into router_topk,
moe_dispatch, expert_matmul and moe_combine) for one device and with
`--mesh ...` containing an `ep` axis (-dist-expert-parallel: the stacked
expert weights split on ep by expert, the batch split on ep, the tokens
sent to their experts' devices and back by all_to_all), trains both on
the same token corpus and checks:

- the loss of every step on the mesh equals one device's within 1e-5
  relative, and the final parameters and optimizer state, put together
  from the sharded checkpoint, within 1e-5 of each tensor's largest
  magnitude;
- the checkpoint index splits exactly the expert weights on `ep`, by
  expert (dim 0), and with tp the Megatron attention and vocabulary
  layout on `tp`;
- each rank stores the experts divided by ep (the parameters and the
  optimizer state), the tp-split parameters divided by tp, from the
  program's --help;
- the bytes each rank sent per axis and collective, counted by the
  runtime, equal the analytical figure: per MoE layer and step, four
  all_to_alls (the dispatched tokens to the experts and back, forward and
  backward), each (n-1)/n of the rank's dispatch buffer, E x C x H f32
  with dropless capacity C = the rank's tokens; the gradients of every
  parameter but the experts' all-reduced over the axes that split the
  batch, ring 2(n-1)/n each; the experts' over dp alone;
- the bytes `cleave-compile --dist-explain` prints per axis and collective
  equal the runtime's count;
- cleave-plan's estimates for the layout (see check_planner) equal them.

The ep=4 and dp=2 x ep=2 cases need 4 samples to split: they train
examples/moe/batch4, the same model exported for batch 4
(`generate.py --batch 4 --out batch4`; the weights do not depend on the
batch).

Prints one line per check; exits non-zero on the first failing case.
"""
import dataclasses
import importlib.util
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
STEPS = 8


def _load(name):
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


examples = _load("check_examples")
distributed = examples.distributed
MPIRUN = distributed.MPIRUN
run = distributed.run

SEQ, HIDDEN, LAYERS, EXPERTS = 8, 32, 2, 4
EXPERT_W = {f"blocks.{l}.moe.{w}" for l in range(LAYERS) for w in ("w1", "w2")}
# Megatron's attention and vocabulary split on tp; the experts stay whole
# on tp (each tp rank of an ep group runs the same experts on the same
# tokens).
MOE_TP = {
    f"blocks.{l}.{name}": dim for l in range(LAYERS) for name, dim in [
        ("attn.qkv.weight", 1), ("attn.qkv.bias", 1),
        ("attn.proj.weight", 1)]}
MOE_TP.update({"wte.weight": 0, "lm_head.weight": 0})
ADAMW = ["--optimizer", "adamw", "--lr", "3e-3"]
SGD = examples.SGD


@dataclasses.dataclass
class Case:
    name: str
    model: str  # under examples/
    batch: int  # the model's
    mesh: str
    tp_split: dict
    flags: list = dataclasses.field(default_factory=lambda: ADAMW)
    rtol: float = 1e-5

    def axes(self):
        return {a: int(n) for a, n in
                (x.split("=") for x in self.mesh.split(","))}

    def ranks(self):
        n = 1
        for size in self.axes().values():
            n *= size
        return n


CASES = [
    Case("moe-ep2", "moe", 2, "ep=2", {}),
    Case("moe-ep2-tp2", "moe", 2, "ep=2,tp=2", MOE_TP, SGD),
    Case("moe-ep4", os.path.join("moe", "batch4"), 4, "ep=4", {}),
    Case("moe-dp2-ep2", os.path.join("moe", "batch4"), 4, "dp=2,ep=2", {}),
    # GShard's capacity: ceil(1.0 * k * 8 / E) = 4 slots per expert and
    # group of 8 tokens, so tokens are dropped, the same ones on each layout.
    Case("moe-ep2-capacity1", "moe", 2, "ep=2", {},
         ADAMW + ["--moe-capacity-factor", "1"]),
    # The load-balancing loss: each layer's sums over the tokens of the
    # router probabilities and of the assignments per expert ([E] f32
    # each) are partial on every rank and all-reduced.
    # Its final state within 3e-5: one element of blocks.0.moe.w2, whose
    # second moment is 25 times below the tensor's median, moves 2.7e-5 of
    # the tensor's scale on an AMD EPYC (1.8e-7 the next): AdamW divides
    # its gradient's rounding (the sums over tokens, in another order on
    # each layout) by a small root. The losses hold 1e-5.
    Case("moe-dp2-ep2-aux", os.path.join("moe", "batch4"), 4, "dp=2,ep=2",
         {}, ADAMW + ["--moe-aux-loss", "0.01"], rtol=3e-5),
]
TOP_K = 2


def ring(n, nbytes, times):
    """The runtime's bytes for one ring collective of n ranks."""
    return times * (n - 1) * nbytes // n


def wire_bytes(case):
    """{axes: {kind: bytes}} each rank sends per step, analytically."""
    axes = case.axes()
    dp, ep, tp = (axes.get(a, 1) for a in ("dp", "ep", "tp"))
    params = examples.model_params(case.model)
    tokens = case.batch * SEQ // (dp * ep)  # each rank's
    # One group per sequence; dropless, an expert may receive every token
    # of a group once, else ceil(factor * k * group / E) of them.
    slots = SEQ
    if "--moe-capacity-factor" in case.flags:
        factor = float(case.flags[case.flags.index("--moe-capacity-factor")
                                  + 1])
        slots = min(SEQ, math.ceil(factor * TOP_K * SEQ / EXPERTS))
    dispatch = (tokens // SEQ) * EXPERTS * slots * HIDDEN * 4
    want = {"ep": {"all_to_all": 4 * LAYERS * ring(ep, dispatch, 1)}}
    batch_axes = ",".join(a for a in ("dp", "ep") if a in axes)
    dense = [b // (tp if n in case.tp_split else 1)
             for n, b in params.items() if n not in EXPERT_W]
    want.setdefault(batch_axes, {})["all_reduce"] = sum(
        ring(dp * ep, b, 2) for b in dense + [4]) + aux_bytes(case)
    if dp > 1:
        want["dp"] = {"all_reduce": sum(ring(dp, params[n] // ep, 2)
                                        for n in EXPERT_W)}
    if tp > 1:
        # Megatron's attention: its projection's partial product
        # all-reduced in the forward, the qkv input gradient in the
        # backward, b*s*h of the rank's samples each, per layer; around the
        # layers the embedding's partial rows and the LM head's input
        # gradient, and the vocabulary-parallel loss's five of b*s f32.
        act = tokens * HIDDEN * 4
        want["tp"] = {"all_reduce": ring(tp, act, 2) * (2 * LAYERS + 2)
                      + 5 * ring(tp, tokens * 4, 2)}
    return want


def aux_bytes(case):
    """The load-balancing loss's all-reduces per rank and step: per layer,
    the sums over the tokens of the router probabilities and of the
    assignments ([E] f32 each) in the forward, and the probability sums'
    gradient in the backward (computed from this rank's partial counts,
    then reduced), ring 2(n-1)/n over the axes that split the batch."""
    if "--moe-aux-loss" not in case.flags:
        return 0
    axes = case.axes()
    n = axes.get("dp", 1) * axes.get("ep", 1)
    return LAYERS * 3 * ring(n, EXPERTS * 4, 2)


def train_both(case, compile_, work):
    """Compiles examples/<case.model> for one device and for case.mesh,
    trains both on the corpus and compares every loss, the final state and
    its validation loss within 1e-5; returns --dist-explain's output."""
    model = os.path.join(ROOT, "examples", case.model, "model.onnx")
    if not os.path.exists(model):
        raise AssertionError(f"{case.name}: {model} is missing")
    flags = ["--train", *case.flags]
    one, mesh = os.path.join(work, "one"), os.path.join(work, "mesh")
    run([compile_, model, *flags, "-o", one])
    explained = run([compile_, model, *flags, "--mesh", case.mesh,
                     "--dist-explain", "-o", mesh]).stdout
    corpus = examples.write_corpus(work)
    data = ["--tokens", corpus, "--steps", str(STEPS), "--shuffle", "--seed",
            "1", "--quiet"]
    run([one, *data, "--log-json", "one.jsonl", "--save", "one-ck"], cwd=work)
    run([*MPIRUN, "-np", str(case.ranks()), mesh, *data, "--log-json",
         "mesh.jsonl", "--save", "mesh-ck", "--comm-stats", "stats"],
        cwd=work)
    distributed.RTOL = case.rtol
    distributed.compare_losses(
        f"{case.name} on {case.ranks()} ranks",
        distributed.losses(os.path.join(work, "one.jsonl")),
        distributed.losses(os.path.join(work, "mesh.jsonl")),
        list(range(1, STEPS + 1)))
    examples.compare_final_states(case.name, work, case.rtol)
    examples.compare_evals(case.name, case.ranks(), work, case.rtol)
    return explained


def check_case(case, compile_, work):
    explained = train_both(case, compile_, work)
    params = examples.model_params(case.model)
    index = json.load(open(os.path.join(work, "mesh-ck", "model.index.json")))
    split = {"ep": {}, "tp": {}}
    for name, spec in index["params"].items():
        if name in params:
            for d, axes in enumerate(spec["sharding"]):
                for a in axes:
                    split.setdefault(a, {})[name] = d
    want_split = {"ep": {n: 0 for n in EXPERT_W}, "tp": case.tp_split}
    if split != want_split:
        raise AssertionError(f"{case.name}: the checkpoint splits {split}, "
                             f"the layout is {want_split}")
    print(f"ok {case.name}: the experts' {len(EXPERT_W)} weights are split "
          f"on ep by expert" + (f", {len(case.tp_split)} parameters on tp "
                                f"as Megatron's attention and vocabulary"
                                if case.tp_split else ""))

    axes = case.axes()
    ep, tp = axes.get("ep", 1), axes.get("tp", 1)
    help_text = run([*MPIRUN, "-np", str(case.ranks()),
                     os.path.join(work, "mesh"), "--help"]).stdout
    model_b, state_b = examples.stored_bytes(help_text)
    blocks = sum(b // (ep if n in EXPERT_W else
                       tp if n in case.tp_split else 1)
                 for n, b in params.items())
    moments = 2 if "adamw" in case.flags else 1
    if (model_b, state_b) != (blocks, moments * blocks + 8):
        raise AssertionError(f"{case.name}: each rank stores {model_b} B of "
                             f"parameters and {state_b} B of state, the "
                             f"layout's figures are {blocks} and "
                             f"{moments * blocks + 8}")
    print(f"ok {case.name}: each rank stores {model_b} B of parameters and "
          f"{state_b} B of optimizer state, the experts divided by {ep}")

    want = wire_bytes(case)
    for rank in range(case.ranks()):
        got = examples.counted(work, rank)
        if got != want:
            raise AssertionError(f"{case.name}: rank {rank} sent {got} per "
                                 f"step, the analytical figure is {want}")
    print(f"ok {case.name}: bytes sent per rank and step equal the "
          f"analytical figures {want}")

    told = examples.explained_bytes(explained)
    runtime = examples.counted(work, 0)
    if told != runtime:
        raise AssertionError(f"{case.name}: --dist-explain says {told} per "
                             f"rank and step, the runtime counted {runtime}")
    print(f"ok {case.name}: --dist-explain's bytes per axis and collective "
          f"equal the runtime's count")
    check_planner(case, compile_, told, (model_b, state_b - 8))


def check_planner(case, compile_, told, stored):
    """cleave-plan's estimate for the case's layout, experts folded into
    data parallelism (its dp is the ranks that split the batch): the
    gradient reduction per GPU equals the compiler's but for the loss's
    all-reduce and the load-balancing loss's (which it does not model), the expert all-to-alls equal it where the capacity is
    GShard's (the planner sends each token's k copies; dropless routing
    sends up to E / k times that), and the parameters and the AdamW
    state each rank stores equal the program's. Layouts without tp (the
    planner counts the norms and biases as split by tp)."""
    axes = case.axes()
    dp, ep = axes.get("dp", 1), axes.get("ep", 1)
    if "tp" in axes:
        return
    estimate = plan_estimate(compile_, case, gpus=dp * ep, dp=dp * ep, ep=ep)
    planned = {a: estimate["comm_gb"][a] * 1e9 for a in ("dp", "ep")}
    loss = ring(dp * ep, 4, 2)
    reduced = sum(kinds.get("all_reduce", 0) for names, kinds in told.items()
                  if names in ("dp", "ep", "dp,ep")) - loss - aux_bytes(case)
    pairs = [("gradient all-reduce", planned["dp"], reduced)]
    if "--moe-capacity-factor" in case.flags:
        pairs.append(("expert all-to-all", planned["ep"],
                      told["ep"]["all_to_all"]))
    memory = estimate["memory_gb"]
    pairs += [("parameters", memory["params"] * 1e9, stored[0]),
              ("optimizer state", memory["optimizer"] * 1e9, stored[1])]
    expect_plan_agrees(case.name, pairs)


def plan_estimate(compile_, case, **layout):
    """cleave-plan's --json estimate for the case's model and batch in fp32
    with Adam, ZeRO 0, one microbatch, on the `layout` (gpus, dp, tp, pp,
    cp, ep; 1 where not given)."""
    plan = os.path.join(os.path.dirname(compile_), "cleave-plan")
    counts = {"tp": 1, "pp": 1, "cp": 1, "ep": 1, **layout}
    flags = [x for k, v in counts.items() for x in (f"--{k}", str(v))]
    out = run([plan, os.path.join(ROOT, "examples", case.model, "model.onnx"),
               *flags, "--zero", "0", "--microbatches", "1",
               "--global-batch", str(case.batch), "--precision", "fp32",
               "--optimizer", "adam", "--cluster", "h100", "--json"]).stdout
    estimate = json.loads(out)
    return estimate.get("estimate", estimate)


def expect_plan_agrees(name, pairs):
    """Each (what, planned, compiled) of `pairs` equal within 1e-6."""
    for what, p, c in pairs:
        if abs(p - c) > 1e-6 * max(c, 1):
            raise AssertionError(f"{name}: cleave-plan estimates {what} "
                                 f"{p:.0f} B per GPU, the compiler's figure "
                                 f"is {c}")
    said = ", ".join(f"{what} {p:.0f} B against {c} B" for what, p, c in pairs)
    print(f"ok {name}: cleave-plan agrees per GPU: {said}")


def main():
    return distributed.run_cases(__doc__.splitlines()[0], CASES, check_case,
                                 MPIRUN)


if __name__ == "__main__":
    sys.exit(main())
