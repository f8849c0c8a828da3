#!/usr/bin/env python3
"""Hand-partitioned training programs under mpirun against one device.

usage: check_distributed.py --compile CLEAVE_COMPILE [--mpirun MPIRUN] [CASE...]

For each case: the one-device training step is compiled from the model's
forward function by the single-device compiler (cleave-compile --train:
-cleave-autodiff writes it), the partitioned step is the hand-written IR of
the case (one device's program with explicit dist collectives). Both
start from the same random weights (weights.bin, which both IR files name
through #graph.external) and train on the same random data. The check:

- the loss of every step of the partitioned run under `mpirun -np N`
  equals the one-device run's within RTOL (relative);
- its final parameters and optimizer state, put together from the sharded
  checkpoint's blocks by this script (numpy, not the runtime), equal the
  one-device checkpoint's within RTOL (relative to each tensor's largest
  magnitude);
- the bytes each rank sent per communicator and collective kind, counted
  by the runtime (--comm-stats), equal the case's analytical figure;
- resharding: the partitioned run's checkpoint at the middle step resumed
  on one device, and the one-device checkpoint resumed on the mesh, give
  the losses of the uninterrupted run; and one checkpoint carried across
  three meshes (dp=2 x tp=2, then dp=4, then one device: "reshard-chain").

Prints one line per check; exits non-zero on the first failing case.
"""
import dataclasses
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL = 1e-5
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]  # --mpirun


@dataclasses.dataclass
class Case:
    name: str
    reference: str  # the forward function, compiled by cleave-compile --train
    # One device's hand-written training step, or None: the partitioner's,
    # compiled from the reference by cleave-compile --train with the
    # train flags and compile_flags (--mesh ...).
    partitioned: object
    ranks: int
    train_flags: list
    # Per program input: (per-sample shape, numpy dtype, classes or None).
    inputs: list
    # wire bytes sent per step by every rank: {"axis,axis": {kind: bytes}}.
    wire_bytes_per_step: dict
    samples: int = 24
    steps: int = 6
    # cleave-compile flags of the partitioned program.
    compile_flags: list = dataclasses.field(default_factory=list)
    # Parameters drawn around 1 rather than 0: layer norm scales, as in a
    # trained model. A scale near 0 under a bias of O(1) makes a key
    # projection's weight gradient ill-conditioned (see block.mlir), which
    # AdamW amplifies past RTOL.
    scales: tuple = ()
    # The training binary's flags (hyperparameters at launch), for every
    # run of both programs.
    run_flags: list = dataclasses.field(default_factory=list)
    # Whether the runs also write --profile traces (check_profiles).
    profile: bool = False


# The mlp cases' training flags and data: 16 features, 4 classes.
MLP_FLAGS = ["--optimizer", "adamw", "--lr", "0.01"]
MLP_INPUTS = [((16,), np.float32, None), ((), np.int64, 4)]

CASES = [
    # Data parallelism over 2 devices: gradients all-reduced, fc1.weight's
    # gradient reduce-scattered and its AdamW moments sharded (ZeRO-2),
    # its new rows all-gathered. Per step, each rank sends: all_reduce of
    # the loss (4 B), fc2.bias, fc2.weight and fc1.bias gradients
    # (16 + 512 + 128 B): 2 (n-1)/n * 660 = 660 B; reduce_scatter of
    # fc1.weight's 2048 B gradient: (n-1)/n * 2048 = 1024 B; all_gather of
    # its 2048 B: 1024 B.
    Case("mlp-dp2-zero2", "mlp.mlir", "mlp-dp2-zero2.mlir", 2,
         MLP_FLAGS, MLP_INPUTS,
         {"dp": {"all_reduce": 660, "reduce_scatter": 1024,
                 "all_gather": 1024}}),
    # Megatron tensor parallelism over 2 devices: fc1 column-parallel, fc2
    # row-parallel, the batch replicated. Per step, each rank sends the
    # all_reduce of the partial fc2 product, [8, 4] f32 = 128 B:
    # 2 (n-1)/n * 128 = 128 B. Nothing else: the loss is computed whole
    # on every rank, and the backward's only partial value, the input's
    # gradient, is not computed.
    Case("mlp-tp2", "mlp.mlir", "mlp-tp2.mlir", 2,
         MLP_FLAGS, MLP_INPUTS,
         {"tp": {"all_reduce": 128}}),
    # ZeRO-3 over 2 devices: every parameter and its moments stored as
    # dim-0 blocks. Per step, each rank sends: all_gather of every
    # parameter in the forward (2048 + 128 + 512 + 16 = 2704 B) and of
    # fc2.weight again in the backward (512 B): (n-1)/n * 3216 = 1608 B;
    # reduce_scatter of the four gradients: (n-1)/n * 2704 = 1352 B;
    # all_reduce of the loss: 2 (n-1)/n * 4 = 4 B.
    Case("mlp-dp2-zero3", "mlp.mlir", "mlp-dp2-zero3.mlir", 2,
         MLP_FLAGS, MLP_INPUTS,
         {"dp": {"all_reduce": 4, "reduce_scatter": 1352,
                 "all_gather": 1608}}),
    # Plain data parallelism over 4 devices (2 samples each), replicated
    # AdamW. Per step, each rank sends the all_reduce of the loss (4 B)
    # and of the four gradients (16 + 512 + 128 + 2048 B), 2708 B in all:
    # 2 (n-1)/n * 2708 = 4062 B.
    Case("mlp-dp4", "mlp.mlir", "mlp-dp4.mlir", 4,
         MLP_FLAGS, MLP_INPUTS,
         {"dp": {"all_reduce": 4062}}),
    # The same with the gradients in one bucket (--bucket-bytes): one
    # all_reduce of the loss (4 B) and one of the bucket, whose members sit
    # at 64-byte aligned offsets of one buffer: fc2.bias 16 -> 64 B,
    # fc2.weight 512, fc1.bias 128, fc1.weight 2048, 2752 B. Each rank
    # sends 2 (n-1)/n * (4 + 2752) = 1.5 * 2756 = 4134 B per step.
    Case("mlp-dp4-buckets", "mlp.mlir", "mlp-dp4.mlir", 4,
         MLP_FLAGS, MLP_INPUTS,
         {"dp": {"all_reduce": 4134}},
         compile_flags=["--bucket-bytes", "1048576"]),
    # mlp-tp2's layout within each "dp" group of a 2 x 2 mesh, the batch
    # split on "dp". Per step, each rank sends, over "tp": the all_reduce
    # of the partial fc2 product of its 4 samples, [4, 4] f32 = 64 B:
    # 2 (n-1)/n * 64 = 64 B; over "dp": the all_reduce of the loss (4 B)
    # and of its gradient blocks, fc2.bias (16 B, replicated), fc2.weight
    # [16, 4] (256 B), fc1.bias [16] (64 B), fc1.weight [16, 16] (1024 B),
    # 1364 B in all: 2 (n-1)/n * 1364 = 1364 B.
    Case("mlp-dp2-tp2", "mlp.mlir", "mlp-dp2-tp2.mlir", 4,
         MLP_FLAGS, MLP_INPUTS,
         {"dp": {"all_reduce": 1364}, "tp": {"all_reduce": 64}}),
    # The partitioner's programs (cleave-compile --mesh), from the same
    # one-device model. Plain data parallelism over 2 devices: each rank
    # sends the all_reduce of the loss (4 B) and of the four gradients
    # (2704 B): 2 (n-1)/n * 2708 = 2708 B per step.
    Case("mlp-mesh-dp2", "mlp.mlir", None, 2,
         MLP_FLAGS, MLP_INPUTS,
         {"dp": {"all_reduce": 2708}},
         compile_flags=["--mesh", "dp=2"]),
    # ZeRO-1 over 2 devices: every AdamW moment stored as dim-0 blocks,
    # so each gradient is reduce-scattered ((n-1)/n * 2704 = 1352 B) and
    # each updated parameter all-gathered (1352 B); the loss all-reduced.
    Case("mlp-mesh-dp2-zero1", "mlp.mlir", None, 2,
         MLP_FLAGS, MLP_INPUTS,
         {"dp": {"all_reduce": 4, "reduce_scatter": 1352,
                 "all_gather": 1352}},
         compile_flags=["--mesh", "dp=2", "--zero", "1"]),
    # ZeRO-3 over 2 devices: the figures of the hand-written mlp-dp2-zero3
    # (every parameter gathered before its forward use, fc2.weight again
    # in the backward).
    Case("mlp-mesh-dp2-zero3", "mlp.mlir", None, 2,
         MLP_FLAGS, MLP_INPUTS,
         {"dp": {"all_reduce": 4, "reduce_scatter": 1352,
                 "all_gather": 1608}},
         compile_flags=["--mesh", "dp=2", "--zero", "3"]),
    # ZeRO-1 and ZeRO-2 with 2 microbatches: ZeRO-1 sums the microbatches'
    # partial gradients whole and reduce-scatters once (1352 B); ZeRO-2
    # reduce-scatters each microbatch's gradient into the block and sums
    # the blocks (2 x 1352 B), so no rank holds whole gradients.
    Case("mlp-mesh-dp2-zero1-accumulate2", "mlp.mlir", None, 2,
         MLP_FLAGS + ["--accumulate", "2"], MLP_INPUTS,
         {"dp": {"all_reduce": 4, "reduce_scatter": 1352,
                 "all_gather": 1352}},
         compile_flags=["--mesh", "dp=2", "--zero", "1"]),
    Case("mlp-mesh-dp2-zero2-accumulate2", "mlp.mlir", None, 2,
         MLP_FLAGS + ["--accumulate", "2"], MLP_INPUTS,
         {"dp": {"all_reduce": 4, "reduce_scatter": 2 * 1352,
                 "all_gather": 1352}},
         compile_flags=["--mesh", "dp=2", "--zero", "2"]),
    # Data parallelism over 4 devices with 2 microbatches per step: the
    # microbatches' partial gradients are summed unreduced and reduced
    # once, 2 (n-1)/n * 2708 = 4062 B per step, as without accumulation.
    Case("mlp-mesh-dp4-accumulate2", "mlp.mlir", None, 4,
         MLP_FLAGS + ["--accumulate", "2"], MLP_INPUTS,
         {"dp": {"all_reduce": 4062}},
         compile_flags=["--mesh", "dp=4"]),
    # The partitioner's Megatron layout (-dist-tensor-parallel, found by
    # pattern): mlp-tp2's figures.
    Case("mlp-mesh-tp2", "mlp.mlir", None, 2,
         MLP_FLAGS, MLP_INPUTS,
         {"tp": {"all_reduce": 128}},
         compile_flags=["--mesh", "tp=2"]),
    # dp=2 x tp=2: mlp-dp2-tp2's figures.
    Case("mlp-mesh-dp2-tp2", "mlp.mlir", None, 4,
         MLP_FLAGS, MLP_INPUTS,
         {"dp": {"all_reduce": 1364}, "tp": {"all_reduce": 64}},
         compile_flags=["--mesh", "dp=2,tp=2"]),
    # Hyperparameters at launch on the mesh: every rank trains with the
    # one device's lr, schedule (warmup, cosine to the last step) and
    # no-decay group; they travel in the program context, so the bytes are
    # mlp-mesh-dp2-tp2's.
    Case("mlp-mesh-dp2-tp2-launch", "mlp.mlir", None, 4,
         MLP_FLAGS, MLP_INPUTS,
         {"dp": {"all_reduce": 1364}, "tp": {"all_reduce": 64}},
         compile_flags=["--mesh", "dp=2,tp=2"],
         run_flags=["--lr", "0.03", "--lr-schedule", "cosine",
                    "--warmup-steps", "2", "--min-lr", "0.003",
                    "--decay-steps", "6", "--weight-decay", "0.05",
                    "--no-decay-1d"]),
    # The global gradient norm for the log (--grad-norm): each rank's sum
    # of squares of its gradient blocks, one all-reduce of that f32 scalar
    # over tp (the tp-split blocks' partial sums; dp's gradients are whole
    # after their all-reduce): 2 (n-1)/n * 4 = 4 B more on tp, and the
    # norms equal one device's.
    # Its steps 2 and 3 are profiled too (--profile): each rank's trace
    # holds its ops and collectives, and the ranks' matrix products add up
    # to one device's (dp and tp split them, none is repeated).
    Case("mlp-mesh-dp2-tp2-grad-norm", "mlp.mlir", None, 4,
         MLP_FLAGS + ["--grad-norm"], MLP_INPUTS,
         {"dp": {"all_reduce": 1364}, "tp": {"all_reduce": 68}},
         compile_flags=["--mesh", "dp=2,tp=2"], profile=True),
    # Megatron tensor parallelism of a transformer block (block.mlir:
    # batch 2, sequence 4, hidden 16, 4 heads) over 2 devices, 2 heads and
    # 16 of the MLP's 32 features each. Per step, each rank sends
    # all_reduces of: the attention output and the fc2 product in the
    # forward, [2, 4, 16] f32 = 512 B each; ln2's output gradient (512 B)
    # and ln1's weight and bias gradients (64 B each) in the backward;
    # 1664 B in all: 2 (n-1)/n * 1664 = 1664 B.
    Case("block-tp2", "block.mlir", "block-tp2.mlir", 2,
         ["--optimizer", "adamw", "--lr", "0.01"],
         [((4, 16), np.float32, None), ((4,), np.int64, 8)],
         {"tp": {"all_reduce": 1664}},
         scales=("ln1.weight", "ln2.weight")),
]


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}):\n"
                           f"{result.stdout}{result.stderr}")
    return result


def external_params(path):
    """(name, offset, size) of every #graph.external parameter of an IR
    file."""
    import re
    text = open(path).read()
    return [(name, int(o), int(s)) for name, o, s in re.findall(
        r'graph\.param @(\S+) [^\n]*#graph\.external<"weights\.bin", '
        r'offset = (\d+), size = (\d+)>', text)]


def compile_partitioned(case, compile_, out, extra=()):
    if case.partitioned is None:
        run([compile_, os.path.join(HERE, case.reference), "--train",
             *case.train_flags, *case.compile_flags, *extra, "-o", out])
    else:
        run([compile_, os.path.join(HERE, case.partitioned),
             *case.compile_flags, *extra, "-o", out])


def write_weights(case, work, rng):
    # The one-device and the partitioned program name the same bytes.
    ref = external_params(os.path.join(HERE, case.reference))
    part = external_params(os.path.join(HERE, case.partitioned or
                                        case.reference))
    assert sorted(ref) == sorted(set(part)), (ref, part)
    size = max(o + s for _, o, s in ref)
    weights = np.zeros(size // 4, np.float32)
    for name, offset, nbytes in ref:
        n = nbytes // 4
        values = rng.standard_normal(n)
        if name in case.scales:
            values = 1 + 0.1 * values
        else:
            values /= np.sqrt(max(n, 16) ** 0.5)
        weights[offset // 4: offset // 4 + n] = values
    weights.tofile(os.path.join(work, "weights.bin"))


def write_data(case, work, rng):
    files = []
    for i, (shape, dtype, classes) in enumerate(case.inputs):
        full = (case.samples,) + tuple(shape)
        if classes:
            data = rng.integers(0, classes, full).astype(dtype)
        else:
            data = rng.standard_normal(full).astype(dtype)
        path = os.path.join(work, f"input{i}.npy")
        np.save(path, data)
        files.append(path)
    return files


def losses(path, key="loss"):
    """{step: value} of `key` (the loss, or "grad_norm") of a --log-json
    file's step lines."""
    with open(path) as f:
        return {r["step"]: float(r[key]) for r in map(json.loads, f)
                if key in r}


def read_safetensors(path):
    blob = open(path, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    types = {"F32": np.float32, "I64": np.int64, "I32": np.int32,
             "F16": np.float16}
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        tensors[name] = np.frombuffer(
            data[begin:end], types[t["dtype"]]).reshape(t["shape"])
    return meta, tensors


def read_checkpoint(directory):
    """Every parameter's global value, from either checkpoint layout."""
    index = os.path.join(directory, "model.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(directory, "model.safetensors"))[1]
    index = json.load(open(index))
    out, covered = {}, {}
    for name in index["params"]:
        covered[name] = 0
    for f in index["files"]:
        meta, tensors = read_safetensors(os.path.join(directory, f))
        blocks = json.loads(meta["blocks"])
        for name, block in tensors.items():
            spec = index["params"][name]
            if name not in out:
                out[name] = np.zeros(spec["shape"], block.dtype)
            window = tuple(slice(s, s + n)
                           for s, n in zip(blocks[name], block.shape))
            out[name][window] = block
            covered[name] += block.size
    for name, spec in index["params"].items():
        assert covered[name] == int(np.prod(spec["shape"])), name
    return out


def compare_losses(what, ref, got, steps):
    for step in steps:
        a, b = ref[step], got.get(step)
        if b is None or abs(a - b) > RTOL * max(abs(a), 1e-30):
            raise AssertionError(f"{what}: step {step} loss {b!r}, one device "
                                 f"{a!r}")
    print(f"ok {what}: losses of steps {steps[0]}..{steps[-1]} within "
          f"{RTOL} of one device")


def check_profiles(case, one_path, mesh_path, steps):
    """The --profile traces of one device and of the mesh: every rank has
    the steps, ops inside them, collectives on their own row, and the
    ranks' matrix-product FLOPs of each step add up to one device's."""
    def flops_by_rank(path):
        trace = json.load(open(path))
        assert trace["otherData"]["steps"] == [steps[0], steps[-1]], path
        events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        result = {}
        for e in events:
            if e["cat"] == "step":
                continue
            assert e["args"]["step"] in steps, e
            assert (e["tid"] == 1) == e["name"].startswith("dist."), e
            per = result.setdefault(e["pid"], {s: [0.0, 0] for s in steps})
            per[e["args"]["step"]][0] += e["args"]["flops"]
            per[e["args"]["step"]][1] += e["tid"] == 1
        return result
    one, mesh = flops_by_rank(one_path), flops_by_rank(mesh_path)
    assert sorted(one) == [0] and sorted(mesh) == list(range(case.ranks)), (
        sorted(one), sorted(mesh))
    for step in steps:
        total = sum(mesh[r][step][0] for r in mesh)
        if total != one[0][step][0] or one[0][step][0] <= 0:
            raise AssertionError(f"{case.name}: step {step}'s FLOPs over the "
                                 f"ranks {total}, one device "
                                 f"{one[0][step][0]}")
        if any(mesh[r][step][1] == 0 for r in mesh) or one[0][step][1]:
            raise AssertionError(f"{case.name}: collectives per rank "
                                 f"{[mesh[r][step][1] for r in mesh]}, one "
                                 f"device {one[0][step][1]}")
    print(f"ok {case.name}: --profile of steps {steps} on {case.ranks} ranks:"
          f" {mesh[0][steps[0]][1]} collectives on rank 0, the ranks' "
          f"{total:.0f} FLOPs per step equal one device's")


def check_case(case, compile_, work):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    write_weights(case, work, rng)
    x_files = write_data(case, work, rng)
    ref, part = os.path.join(work, "ref"), os.path.join(work, "part")
    run([compile_, os.path.join(HERE, case.reference), "--train",
         *case.train_flags, "-o", ref])
    compile_partitioned(case, compile_, part)
    data = ["--inputs", ",".join(x_files[:-1]), "--targets", x_files[-1]]
    n = str(case.ranks)
    mid = case.steps // 2

    def train(binary, mesh, tag, extra):
        cmd = ([*MPIRUN, "-np", n] if mesh else []) + [
            binary, *data, "--steps", str(case.steps), "--quiet",
            "--log-json", os.path.join(work, tag + ".jsonl"),
            *case.run_flags, *extra]
        run(cmd, cwd=work)
        return losses(os.path.join(work, tag + ".jsonl"))

    profile = ["--profile-start", "2", "--profile-steps", "2"]
    one = train(ref, False, "one", ["--save", "one-ck"] + (
        ["--profile", "one-profile.json", *profile] if case.profile else []))
    mesh = train(part, True, "mesh", ["--save", "mesh-ck", "--comm-stats",
                                      "stats"] + (
        ["--profile", "mesh-profile.json", *profile] if case.profile else []))
    if case.profile:
        check_profiles(case, os.path.join(work, "one-profile.json"),
                       os.path.join(work, "mesh-profile.json"), [2, 3])
    compare_losses(f"{case.name} on {n} ranks", one, mesh,
                   list(range(1, case.steps + 1)))
    norms = losses(os.path.join(work, "one.jsonl"), "grad_norm")
    if norms:
        compare_losses(f"{case.name}: the global gradient norms on {n} ranks",
                       norms, losses(os.path.join(work, "mesh.jsonl"),
                                     "grad_norm"),
                       list(range(1, case.steps + 1)))

    a = read_checkpoint(os.path.join(work, "one-ck"))
    b = read_checkpoint(os.path.join(work, "mesh-ck"))
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    for name in a:
        scale = max(float(np.max(np.abs(a[name]))), 1e-30)
        err = float(np.max(np.abs(a[name].astype(np.float64) - b[name])))
        if err > RTOL * scale:
            raise AssertionError(f"{case.name}: final {name} differs by {err} "
                                 f"(largest magnitude {scale})")
    print(f"ok {case.name}: final values of {len(a)} parameters and states "
          f"within {RTOL} of one device")

    for rank in range(case.ranks):
        stats = json.load(open(os.path.join(work, "stats",
                                            f"comm-rank{rank}.json")))
        # (The checkpoint's barriers send nothing.)
        got = {",".join(g["axes"]): {k: v["wire_bytes"]
                                     for k, v in g["kinds"].items()
                                     if v["wire_bytes"]}
               for g in stats["groups"]}
        want = {axes: {k: b * case.steps for k, b in kinds.items()}
                for axes, kinds in case.wire_bytes_per_step.items()}
        if got != want:
            raise AssertionError(f"{case.name}: rank {rank} sent {got}, the "
                                 f"analytical figure is {want}")
    print(f"ok {case.name}: bytes sent per rank and collective equal the "
          f"analytical figures {case.wire_bytes_per_step} per step")

    # Resharding: the mesh's checkpoint at the middle step on one device,
    # and one device's on the mesh.
    run([*MPIRUN, "-np", n, part, *data, "--steps", str(mid), "--quiet",
         "--save", "mesh-mid", *case.run_flags], cwd=work)
    run([ref, *data, "--steps", str(mid), "--quiet", "--save", "one-mid",
         *case.run_flags], cwd=work)
    resumed = train(ref, False, "one-from-mesh", ["--resume", "mesh-mid"])
    compare_losses(f"{case.name}: {n}-rank checkpoint resumed on one device",
                   one, resumed, list(range(mid + 1, case.steps + 1)))
    resumed = train(part, True, "mesh-from-one", ["--resume", "one-mid"])
    compare_losses(f"{case.name}: one-device checkpoint resumed on {n} ranks",
                   one, resumed, list(range(mid + 1, case.steps + 1)))


def check_emulated(case, compile_, link, work):
    """The partitioned program on emulated GPUs with NCCL emulated (one
    GPU per rank), against the one-device CPU run: every loss within 1e-4
    (the GPU's fp32 bound of test/gpu/run-packed.sh) and the same bytes."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    write_weights(case, work, rng)
    x_files = write_data(case, work, rng)
    ref, part = os.path.join(work, "ref"), os.path.join(work, "part")
    run([compile_, os.path.join(HERE, case.reference), "--train",
         *case.train_flags, "-o", ref])
    compile_partitioned(case, compile_, part + ".o", ["--emit=obj"])
    with open(link) as f:
        line = [item for item in f.read().strip().split(";") if item]
    run([line[0], part + ".o", "-o", part, *line[1:]])
    data = ["--inputs", ",".join(x_files[:-1]), "--targets", x_files[-1],
            "--steps", str(case.steps), "--quiet"]
    run([ref, *data, "--log-json", "one.jsonl"], cwd=work)
    run([*MPIRUN, "-np", str(case.ranks), part, *data, "--log-json",
         "mesh.jsonl", "--comm-stats", "stats"], cwd=work)
    one, mesh = losses(os.path.join(work, "one.jsonl")), losses(
        os.path.join(work, "mesh.jsonl"))
    for step in range(1, case.steps + 1):
        a, b = one[step], mesh.get(step)
        if b is None or abs(a - b) > 1e-4 * max(abs(a), 1e-30):
            raise AssertionError(f"step {step} loss {b!r} on emulated GPUs, "
                                 f"one device {a!r}")
    stats = json.load(open(os.path.join(work, "stats", "comm-rank0.json")))
    if stats["engine"] != "nccl":
        raise AssertionError(f"ran on the {stats['engine']} engine")
    print(f"ok {case.name} on {case.ranks} emulated GPUs (NCCL engine): "
          f"losses of steps 1..{case.steps} within 1e-4 of one CPU device")


def check_chain(compile_, work):
    """A checkpoint carried across three meshes: 2 steps on dp=2 x tp=2, 2
    more on dp=4 from its checkpoint, the last 2 on one device from that
    one; every loss equals the uninterrupted one-device run's."""
    first = next(c for c in CASES if c.name == "mlp-dp2-tp2")
    second = next(c for c in CASES if c.name == "mlp-dp4")
    rng = np.random.default_rng(zlib.crc32(b"reshard-chain"))
    write_weights(first, work, rng)
    x_files = write_data(first, work, rng)
    data = ["--inputs", ",".join(x_files[:-1]), "--targets", x_files[-1],
            "--quiet"]
    ref = os.path.join(work, "ref")
    run([compile_, os.path.join(HERE, first.reference), "--train",
         *first.train_flags, "-o", ref])
    binaries = {}
    for case in (first, second):
        binaries[case.name] = os.path.join(work, case.name)
        compile_partitioned(case, compile_, binaries[case.name])
    run([ref, *data, "--steps", "6", "--log-json", "one.jsonl"], cwd=work)
    one = losses(os.path.join(work, "one.jsonl"))
    run([*MPIRUN, "-np", "4", binaries[first.name], *data, "--steps", "2",
         "--save", "a", "--log-json", "a.jsonl"], cwd=work)
    run([*MPIRUN, "-np", "4", binaries[second.name], *data, "--steps", "4",
         "--resume", "a", "--save", "b", "--log-json", "b.jsonl"], cwd=work)
    run([ref, *data, "--steps", "6", "--resume", "b", "--log-json",
         "c.jsonl"], cwd=work)
    got = {}
    for log in ("a", "b", "c"):
        got.update(losses(os.path.join(work, log + ".jsonl")))
    compare_losses("a checkpoint across dp=2 x tp=2 (steps 1-2), dp=4 (3-4) "
                   "and one device (5-6)", one, got, list(range(1, 7)))


def run_cases(description, cases, check_case, mpirun):
    """The main of a check over cases: --compile, --mpirun (set into the
    list `mpirun`, the caller's command prefix) and the case names to run
    (all by default); check_case(case, compile_, work) per case. Returns
    the exit status."""
    import argparse
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--compile", required=True, help="cleave-compile")
    parser.add_argument("--mpirun", default="mpirun", help="mpirun")
    parser.add_argument("cases", nargs="*", help="cases to run (all)")
    args = parser.parse_args()
    mpirun[0] = args.mpirun
    if shutil.which(mpirun[0]) is None:
        print(f"error: {mpirun[0]} is not on PATH")
        return 1
    wanted = set(args.cases)
    compile_ = os.path.abspath(args.compile)
    for case in cases:
        if wanted and case.name not in wanted:
            continue
        if not passes(case.name,
                      lambda work: check_case(case, compile_, work)):
            return 1
    return 0


def passes(name, check):
    """Runs check(work) in a fresh directory: False, after a FAIL line, when
    a check or a command failed."""
    with tempfile.TemporaryDirectory(prefix=f"cleave-{name}-") as work:
        try:
            check(work)
            return True
        except (AssertionError, RuntimeError) as e:
            print(f"FAIL {name}: {e}")
            return False


def main():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", required=True, help="cleave-compile")
    parser.add_argument("--mpirun", default="mpirun", help="mpirun")
    parser.add_argument("--emulated-link",
                        help="a link line (linker;args, ';'-separated) of "
                        "the NCCL engine on emulated GPUs: run the "
                        "partitioned programs there instead")
    parser.add_argument("cases", nargs="*", help="cases to run (all)")
    args = parser.parse_args()
    MPIRUN[0] = args.mpirun
    wanted = set(args.cases)
    if shutil.which(MPIRUN[0]) is None:
        print(f"error: {MPIRUN[0]} is not on PATH")
        return 1
    compile_ = os.path.abspath(args.compile)
    for case in CASES:
        if wanted and case.name not in wanted:
            continue
        if args.emulated_link:
            check = lambda work: check_emulated(case, compile_,
                                                args.emulated_link, work)
        else:
            check = lambda work: check_case(case, compile_, work)
        if not passes(case.name, check):
            return 1
    if not args.emulated_link and (not wanted or "reshard-chain" in wanted):
        if not passes("reshard-chain",
                      lambda work: check_chain(compile_, work)):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
