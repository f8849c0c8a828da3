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
  the losses of the uninterrupted run.

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

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL = 1e-5
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]  # --mpirun


@dataclasses.dataclass
class Case:
    name: str
    reference: str  # the forward function, compiled by cleave-compile --train
    partitioned: str  # one device's hand-written training step
    ranks: int
    train_flags: list
    # Per program input: (per-sample shape, numpy dtype, classes or None).
    inputs: list
    # wire bytes sent per step by every rank: {"axis,axis": {kind: bytes}}.
    wire_bytes_per_step: dict
    samples: int = 24
    steps: int = 6


CASES = [
    # Data parallelism over 2 devices: gradients all-reduced, fc1.weight's
    # gradient reduce-scattered and its AdamW moments sharded (ZeRO-2),
    # its new rows all-gathered. Per step, each rank sends: all_reduce of
    # the loss (4 B), fc2.bias, fc2.weight and fc1.bias gradients
    # (16 + 512 + 128 B): 2 (n-1)/n * 660 = 660 B; reduce_scatter of
    # fc1.weight's 2048 B gradient: (n-1)/n * 2048 = 1024 B; all_gather of
    # its 2048 B: 1024 B.
    Case("mlp-dp2-zero2", "mlp.mlir", "mlp-dp2-zero2.mlir", 2,
         ["--optimizer", "adamw", "--lr", "0.01"],
         [((16,), np.float32, None), ((), np.int64, 4)],
         {"dp": {"all_reduce": 660, "reduce_scatter": 1024,
                 "all_gather": 1024}}),
]


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}):\n"
                           f"{result.stdout}{result.stderr}")
    return result


def external_params(path):
    """(offset, size) of every #graph.external parameter of an IR file."""
    import re
    text = open(path).read()
    return [(int(o), int(s)) for o, s in re.findall(
        r'#graph\.external<"weights\.bin", offset = (\d+), size = (\d+)>',
        text)]


def write_weights(case, work, rng):
    # The one-device and the partitioned program name the same bytes.
    ref = external_params(os.path.join(HERE, case.reference))
    part = external_params(os.path.join(HERE, case.partitioned))
    assert sorted(ref) == sorted(set(part)), (ref, part)
    size = max(o + s for o, s in ref)
    weights = np.zeros(size // 4, np.float32)
    for offset, nbytes in ref:
        n = nbytes // 4
        weights[offset // 4: offset // 4 + n] = (
            rng.standard_normal(n) / np.sqrt(max(n, 16) ** 0.5))
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


def losses(path):
    with open(path) as f:
        return {r["step"]: float(r["loss"]) for r in map(json.loads, f)}


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


def check_case(case, compile_, work):
    rng = np.random.default_rng(abs(hash(case.name)) % 2**32)
    write_weights(case, work, rng)
    x_files = write_data(case, work, rng)
    ref, part = os.path.join(work, "ref"), os.path.join(work, "part")
    run([compile_, os.path.join(HERE, case.reference), "--train",
         *case.train_flags, "-o", ref])
    run([compile_, os.path.join(HERE, case.partitioned), "-o", part])
    data = ["--inputs", ",".join(x_files[:-1]), "--targets", x_files[-1]]
    n = str(case.ranks)
    mid = case.steps // 2

    def train(binary, mesh, tag, extra):
        cmd = ([*MPIRUN, "-np", n] if mesh else []) + [
            binary, *data, "--steps", str(case.steps), "--quiet",
            "--log-json", os.path.join(work, tag + ".jsonl"), *extra]
        run(cmd, cwd=work)
        return losses(os.path.join(work, tag + ".jsonl"))

    one = train(ref, False, "one", ["--save", "one-ck"])
    mesh = train(part, True, "mesh", ["--save", "mesh-ck", "--comm-stats",
                                      "stats"])
    compare_losses(f"{case.name} on {n} ranks", one, mesh,
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
         "--save", "mesh-mid"], cwd=work)
    run([ref, *data, "--steps", str(mid), "--quiet", "--save", "one-mid"],
        cwd=work)
    resumed = train(ref, False, "one-from-mesh", ["--resume", "mesh-mid"])
    compare_losses(f"{case.name}: {n}-rank checkpoint resumed on one device",
                   one, resumed, list(range(mid + 1, case.steps + 1)))
    resumed = train(part, True, "mesh-from-one", ["--resume", "one-mid"])
    compare_losses(f"{case.name}: one-device checkpoint resumed on {n} ranks",
                   one, resumed, list(range(mid + 1, case.steps + 1)))


def main():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", required=True, help="cleave-compile")
    parser.add_argument("--mpirun", default="mpirun", help="mpirun")
    parser.add_argument("cases", nargs="*", help="cases to run (all)")
    args = parser.parse_args()
    MPIRUN[0] = args.mpirun
    wanted = set(args.cases)
    if shutil.which(MPIRUN[0]) is None:
        print(f"error: {MPIRUN[0]} is not on PATH")
        return 1
    for case in CASES:
        if wanted and case.name not in wanted:
            continue
        with tempfile.TemporaryDirectory(prefix=f"cleave-{case.name}-") as work:
            try:
                check_case(case, os.path.abspath(args.compile), work)
            except (AssertionError, RuntimeError) as e:
                print(f"FAIL {case.name}: {e}")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
