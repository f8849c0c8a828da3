#!/usr/bin/env python3
"""Pipeline parallelism on the ONNX examples under mpirun against one device.

usage: check_pipeline.py --compile CLEAVE_COMPILE [--mpirun MPIRUN] [CASE...]

Each case compiles an example model twice: for one device with
`--accumulate M`, and with `--mesh pp=P[,dp=..,tp=..] --microbatches M`
(the pipeline's stage programs in one binary). Both train on the same
token corpus (check_examples.py's) and the check is:

- the loss of every step on the mesh equals one device's within RTOL;
- the final parameters and optimizer state, put together from the sharded
  checkpoint by numpy, equal one device's within RTOL of each tensor's
  largest magnitude;
- the bytes each rank sent over the pp axis per step, counted by the
  runtime, equal the analytical figure: each stage but the last sends the
  activation of every microbatch forward (b*s*h*4 bytes, b the microbatch's
  rows on its dp group, divided by tp under --sp), each stage but the
  first its gradient back; the
  last stage sends the loss (4 B) to every other; gpt ties its embedding
  to the LM head, so the first stage sends its embedding gradient of each
  microbatch (V*h*4) to the last, which sends the updated table back;
- the checkpoint of the mesh at the middle step resumed on one device
  gives the losses of the uninterrupted run (pipeline layouts reshard);
- `--pipeline-report`'s bubble equals the closed form, and `--trace`
  writes a Chrome trace with one row per stage;
- the trainer's measured timeline (`--trace run.json`) has one row per
  rank, and in every step each rank runs its stage's planned order of
  forward and backward steps, then the optimizer, waiting in transfers.

gpt-pp2-dp2-tp2 (8 ranks) runs only when named. The 2-layer examples
fill 2 stages; the 4-stage and interleaved cases use
a 4-layer gpt made from the example by repeating its second block
(deepen()), since pp x virtual chunks need as many layers.

Prints one line per check; exits non-zero on the first failing case.
"""
import dataclasses
import importlib.util
import json
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 6

# check_examples.py's examples, corpus, optimizers and final-state check.
_spec = importlib.util.spec_from_file_location(
    "check_examples", os.path.join(HERE, "check_examples.py"))
examples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(examples)
distributed = examples.distributed
run, ROOT, RTOL, MPIRUN = distributed.run, examples.ROOT, examples.RTOL, \
    distributed.MPIRUN
ADAMW, SGD = examples.ADAMW, examples.SGD
# The examples: microbatch 2 x 8 tokens, hidden 32, vocabulary 64.
BATCH, SEQ, HIDDEN, VOCAB = examples.BATCH, examples.SEQ, examples.HIDDEN, 64


@dataclasses.dataclass
class Case:
    name: str
    model: str  # "gpt", "llama" or "gpt<N>" (deepen() to N layers)
    mesh: str
    microbatches: int
    flags: list  # of both programs
    pipeline_flags: list = dataclasses.field(default_factory=list)

    def axes(self):
        return {a.split("=")[0]: int(a.split("=")[1])
                for a in self.mesh.split(",")}

    def ranks(self):
        return int(np.prod(list(self.axes().values())))


def cases():
    return [
        Case("gpt-pp2-1f1b", "gpt", "pp=2", 4, ADAMW),
        Case("gpt-pp2-gpipe", "gpt", "pp=2", 4, ADAMW,
             ["--schedule", "gpipe"]),
        Case("llama-pp2-1f1b", "llama", "pp=2", 4, SGD),
        # With dp or tp the microbatches' gradients are summed in another
        # order than on one device; SGD, as check_examples.py's
        # accumulation cases (AdamW turns one rounding-dominated element
        # of attn.proj.weight into a step of 1.2e-5 of its scale).
        Case("gpt-pp2-dp2", "gpt", "pp=2,dp=2", 2, SGD),
        Case("gpt-pp2-dp2-zero1", "gpt", "pp=2,dp=2", 2, SGD,
             ["--zero", "1"]),
        Case("gpt-pp2-dp2-zero3", "gpt", "pp=2,dp=2", 2, SGD,
             ["--zero", "3"]),
        Case("gpt-pp2-dp2-zero2", "gpt", "pp=2,dp=2", 2, SGD,
             ["--zero", "2"]),
        # ZeRO-3 gathering each parameter once per step, not per use.
        Case("gpt-pp2-dp2-zero3-once", "gpt", "pp=2,dp=2", 2, SGD,
             ["--zero", "3", "--zero3-gather-once"]),
        # dp's gradient all-reduces in buckets, inside each stage.
        Case("gpt-pp2-dp2-buckets", "gpt", "pp=2,dp=2", 2, SGD,
             ["--bucket-bytes", "4096"]),
        Case("gpt-pp2-tp2", "gpt", "pp=2,tp=2", 2, SGD),
        Case("gpt-pp2-tp2-sp", "gpt", "pp=2,tp=2", 2, SGD, ["--sp"]),
        Case("gpt4-pp4-1f1b", "gpt4", "pp=4", 4, ADAMW),
        Case("gpt4-pp4-gpipe", "gpt4", "pp=4", 4, ADAMW,
             ["--schedule", "gpipe"]),
        Case("gpt4-pp2-interleaved", "gpt4", "pp=2", 4, ADAMW,
             ["--schedule", "interleaved", "--virtual-stages", "2"]),
    ]


def extra_cases():
    """Cases run only when named (8 ranks: more than CI's two cores take
    in a test), e.g. check_pipeline.py gpt-pp2-dp2-tp2."""
    return [
        Case("gpt-pp2-dp2-tp2", "gpt", "pp=2,dp=2,tp=2", 2, SGD, ["--zero", "1"]),
    ]


def deepen(source, out, layers):
    """The gpt example with `layers` blocks: block 1's nodes and weights
    repeated as blocks 2.. (its weights scaled, so that the layers differ),
    each reading the block before, the final norm reading the last."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(source)
    graph = model.graph
    nodes = list(graph.node)
    second = [n for n in nodes if n.name.startswith("/blocks.1/")]
    inits = {i.name: i for i in graph.initializer}
    last_out = "/blocks.1/Add_1_output_0"
    tail = [n for n in nodes if n.name.startswith("/ln_f/") or
            n.name.startswith("/lm_head/")]
    head = [n for n in nodes if n not in tail]
    new_nodes = []
    for k in range(2, layers):
        def rename(name, k=k):
            if name == "/blocks.0/Add_1_output_0":
                return f"/blocks.{k - 1}/Add_1_output_0"
            return (name.replace("/blocks.1/", f"/blocks.{k}/")
                    .replace("blocks.1.", f"blocks.{k}."))
        for n in second:
            copy = onnx.NodeProto()
            copy.CopyFrom(n)
            copy.name = rename(n.name)
            copy.input[:] = [rename(i) for i in n.input]
            copy.output[:] = [rename(o) for o in n.output]
            new_nodes.append(copy)
        for name, init in list(inits.items()):
            if name.startswith("blocks.1."):
                values = numpy_helper.to_array(init) * (0.9 ** (k - 1))
                graph.initializer.append(numpy_helper.from_array(
                    values.astype(np.float32), rename(name)))
    last = f"/blocks.{layers - 1}/Add_1_output_0"
    for n in tail:
        n.input[:] = [last if i == last_out else i for i in n.input]
    del graph.node[:]
    graph.node.extend(head + new_nodes + tail)
    onnx.checker.check_model(model)
    onnx.save(model, out)


def model_path(case, work):
    """The example, or for "gpt<N>" the gpt example deepened to N layers."""
    if case.model in ("gpt", "llama"):
        return os.path.join(ROOT, "examples", case.model, "model.onnx")
    path = os.path.join(work, case.model + ".onnx")
    if not os.path.exists(path):
        deepen(os.path.join(ROOT, "examples", "gpt", "model.onnx"), path,
               int(case.model[len("gpt"):]))
    return path


def pipeline_bytes(case, stage):
    """The bytes stage `stage` sends over pp per step (see the docstring)."""
    axes = case.axes()
    p, dp, tp = axes["pp"], axes.get("dp", 1), axes.get("tp", 1)
    m = case.microbatches
    # An activation of one microbatch on this rank: its rows of the dp
    # group, whole over tp (Megatron's layer boundary is replicated), or
    # its tokens' block with sequence parallelism.
    act = (BATCH // dp) * SEQ * HIDDEN * 4 // (
        tp if "--sp" in case.pipeline_flags else 1)
    chunks = 2 if "interleaved" in case.pipeline_flags else 1
    sent = 0
    # Per chunk boundary: forward from every chunk but the last, backward
    # from every chunk but the first; with chunks c = k * p + s.
    for k in range(chunks):
        c = k * p + stage
        if c < p * chunks - 1:
            sent += m * act
        if c > 0:
            sent += m * act
    if stage == p - 1:
        sent += 4 * (p - 1)  # the loss to every other stage
    if case.model.startswith("gpt"):
        table = VOCAB * HIDDEN * 4 // tp  # wte, split by vocabulary on tp
        flags = case.pipeline_flags
        zero = int(flags[flags.index("--zero") + 1]) if "--zero" in flags \
            else 0
        if stage == 0:
            # Its gradient of each microbatch, to the last stage: ZeRO-2
            # reduce-scatters each into its dp block first.
            sent += m * table // (dp if zero == 2 else 1)
        if stage == p - 1:
            # The updated table, back: with ZeRO-3 the block this rank
            # stores.
            sent += table // (dp if zero == 3 else 1)
    return sent


def check_case(case, compile_, work):
    model = model_path(case, work)
    m = str(case.microbatches)
    one, mesh = os.path.join(work, "one"), os.path.join(work, "mesh")
    trace = os.path.join(work, "schedule.json")
    run([compile_, model, "--train", *case.flags, "--accumulate", m,
         "-o", one])
    report = run([compile_, model, "--train", *case.flags, "--mesh",
                  case.mesh, "--microbatches", m, *case.pipeline_flags,
                  "--pipeline-report", "--trace", trace, "-o", mesh]).stdout
    data = ["--tokens", examples.write_corpus(work), "--shuffle", "--seed",
            "1", "--quiet"]
    n = str(case.ranks())

    def train(binary, on_mesh, tag, steps, extra):
        cmd = ([*MPIRUN, "-np", n] if on_mesh else []) + [
            binary, *data, "--steps", str(steps), "--log-json",
            os.path.join(work, tag + ".jsonl"), *extra]
        run(cmd, cwd=work)
        return distributed.losses(os.path.join(work, tag + ".jsonl"))

    ref = train(one, False, "one", STEPS, ["--save", "one-ck"])
    got = train(mesh, True, "mesh", STEPS, ["--save", "mesh-ck",
                                            "--comm-stats", "stats",
                                            "--trace", "run.json",
                                            "--trace-steps", str(STEPS)])
    distributed.RTOL = RTOL
    distributed.compare_losses(f"{case.name} on {n} ranks", ref, got,
                               list(range(1, STEPS + 1)))

    examples.compare_final_states(case.name, work, RTOL)

    axes = case.axes()
    p = axes["pp"]
    inner = case.ranks() // p
    for rank in range(case.ranks()):
        stats = json.load(open(os.path.join(work, "stats",
                                            f"comm-rank{rank}.json")))
        sent = sum(v["wire_bytes"] for g in stats["groups"]
                   if g["axes"] == ["pp"] for v in g["kinds"].values())
        want = pipeline_bytes(case, rank // inner) * STEPS
        if sent != want:
            raise AssertionError(f"{case.name}: rank {rank} (stage "
                                 f"{rank // inner}) sent {sent} B over pp in "
                                 f"{STEPS} steps, the analytical figure is "
                                 f"{want}")
    print(f"ok {case.name}: bytes each rank sent over pp equal the "
          f"analytical figures "
          f"{[pipeline_bytes(case, s) for s in range(p)]} per step")

    # The pipeline's checkpoint at the middle step, resumed on one device.
    mid = STEPS // 2
    train(mesh, True, "mesh-mid", mid, ["--save", "mesh-mid-ck"])
    resumed = train(one, False, "one-from-mesh", STEPS,
                    ["--resume", "mesh-mid-ck"])
    distributed.compare_losses(
        f"{case.name}: {n}-rank checkpoint resumed on one device", ref,
        resumed, list(range(mid + 1, STEPS + 1)))

    # The report and the trace, before anything ran.
    v = 2 if "interleaved" in case.pipeline_flags else 1
    mb = case.microbatches
    closed = (p - 1) / (v * mb + p - 1)
    found = re.search(r"bubble ([0-9.]+) of the step with equal stages "
                      r"\(closed form [^=]+= ([0-9.]+)\)", report)
    if not found or abs(float(found.group(1)) - closed) > 1e-4 or \
            abs(float(found.group(2)) - closed) > 1e-4:
        raise AssertionError(f"{case.name}: --pipeline-report says "
                             f"{found and found.group(0)}, the closed form is "
                             f"{closed:.4f}:\n{report}")
    events = json.load(open(trace))["traceEvents"]
    rows = {e["tid"] for e in events if e.get("ph") == "X"}
    if len(rows) != p:
        raise AssertionError(f"{case.name}: the trace has rows {rows}, not "
                             f"{p} stages")
    print(f"ok {case.name}: --pipeline-report's bubble {closed:.4f} is the "
          f"closed form; the trace has one row per stage")
    check_measured_timeline(case, events, os.path.join(work, "run.json"),
                            closed)


def check_measured_timeline(case, planned_events, path, closed):
    """The trainer's --trace: one row per rank; every step of every rank
    runs its stage's planned order of forward and backward steps, then the
    optimizer, inside the step; each rank waits in its transfers; the
    measured idle share is a fraction (printed beside the closed form:
    how close it comes is the benchmark's, not a test's)."""
    planned = {}
    for e in sorted((e for e in planned_events if e.get("ph") == "X"),
                    key=lambda e: e["ts"]):
        planned.setdefault(e["tid"], []).append(e["name"])
    trace = json.load(open(path))
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    inner = case.ranks() // case.axes()["pp"]
    for rank in range(case.ranks()):
        mine = sorted((e for e in events if e["tid"] == rank),
                      key=lambda e: e["ts"])
        steps = {e["args"]["step"]: e for e in mine if e["cat"] == "step"}
        if sorted(steps) != list(range(1, STEPS + 1)):
            raise AssertionError(f"{case.name}: rank {rank}'s timeline has "
                                 f"steps {sorted(steps)}")
        for k, step in steps.items():
            inside = [e for e in mine if e["args"]["step"] == k and
                      e["cat"] != "step"]
            order = [e["name"] for e in inside
                     if e["cat"] in ("forward", "backward")]
            if order != planned[rank // inner]:
                raise AssertionError(
                    f"{case.name}: rank {rank} ran {order} in step {k}, its "
                    f"stage's planned order is {planned[rank // inner]}")
            if [e["name"] for e in inside if e["cat"] == "optimizer"] != \
                    ["optimizer"]:
                raise AssertionError(f"{case.name}: rank {rank}'s step {k} "
                                     f"has no single optimizer step")
            end = step["ts"] + step["dur"] + 0.01
            if any(e["ts"] < step["ts"] or e["ts"] + e["dur"] > end
                   for e in inside):
                raise AssertionError(f"{case.name}: rank {rank}'s step {k} "
                                     f"does not hold its events")
            if not any(e["cat"] == "transfer" for e in inside):
                raise AssertionError(f"{case.name}: rank {rank}'s step {k} "
                                     f"has no transfer")
    idle = trace["otherData"]["idle_fraction"]
    if not 0 <= idle < 1 or trace["otherData"]["stages"] != \
            case.axes()["pp"]:
        raise AssertionError(f"{case.name}: the timeline's summary is "
                             f"{trace['otherData']}")
    print(f"ok {case.name}: the measured timeline (--trace) has every rank "
          f"run its stage's planned order in each of {STEPS} steps; measured "
          f"idle {idle:.3f} of the step (closed form {closed:.3f})")


def main():
    named = set(sys.argv[1:])
    chosen = cases() + [c for c in extra_cases() if c.name in named]
    return distributed.run_cases(__doc__.splitlines()[0], chosen, check_case,
                                 MPIRUN)


if __name__ == "__main__":
    sys.exit(main())
