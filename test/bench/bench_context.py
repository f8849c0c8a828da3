#!/usr/bin/python3
"""Context parallelism's benchmark: the training step of a long-sequence
GPT on cp=2 in the zigzag and contiguous layouts and the gather form,
against one device, on the CPU.

  /usr/bin/python3 test/bench/bench_context.py [--compile build/bin/cleave-compile]
      [--seq 2048] [--hidden 256] [--layers 2] [--steps 6] [--cp 2]

The GPT of bench_partition.py (causal attention, heads of 64, batch 1,
vocabulary 1024) written as graph IR, compiled --train --optimizer adamw,
trained --steps steps on random tokens: on one device with --cp threads
and on --cp ranks with 1 thread each (the same cores either way). Printed
per layout: the median step time (from --log-json, the first step left
out), tokens/s, and the first loss's difference from one device's. Then
the memory each rank's program plans (its arena: activations, gradients
and workspace; the parameters and optimizer state are the same on every
cp rank) on one device and on cp = 2, 4 and 8, ring and zigzag, at
--seq and at twice and four times it (compiled only, read from the
program's --help).

The causal attention's work per device is what the layouts change: in the
contiguous layout device r of n has 2r + 1 units of live query-key pairs
(device n - 1 has 2n - 1 times device 0's), in the zigzag layout every
device has 2n, and a ring step waits for the slowest device. The kernel
computes, per block of 64 query rows, only the keys up to the block's last
query, so the skipped pairs cost nothing.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from bench_partition import gpt_ir, write_weights  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile",
                        default=os.path.join(ROOT, "build/bin/cleave-compile"))
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--cp", type=int, default=2)
    args = parser.parse_args()
    compiler = os.path.abspath(args.compile)
    batch, vocab, cp = 1, 1024, args.cp
    with tempfile.TemporaryDirectory(prefix="cleave-bench-cp-") as work:
        text, params = gpt_ir(args.layers, args.hidden, args.hidden // 64,
                              args.seq, batch, vocab)
        src = os.path.join(work, "gpt.mlir")
        with open(src, "w") as f:
            f.write(text)
        write_weights(os.path.join(work, "weights.bin"), params)
        tokens = np.random.default_rng(1).integers(
            0, vocab, 20 * args.seq + 1, dtype=np.uint16)
        tokens.tofile(os.path.join(work, "tokens.bin"))
        print(f"{args.layers} layers, hidden {args.hidden}, sequence "
              f"{args.seq}, batch {batch}; AdamW; {args.steps} steps")
        print(f"{'layout':22} {'ranks':>5} {'ms/step':>8} {'tokens/s':>9} "
              f"{'loss 1 rel diff':>16}")
        mesh = ["--mesh", f"cp={cp}"]
        runs = [("one device", [], 1),
                ("cp ring, zigzag", mesh, cp),
                ("cp ring, contiguous", mesh + ["--cp-layout", "contiguous"],
                 cp),
                ("cp gather, zigzag", mesh + ["--cp-form", "gather"], cp),
                ("cp gather, contiguous",
                 mesh + ["--cp-form", "gather", "--cp-layout", "contiguous"],
                 cp)]
        first = None
        for i, (name, flags, ranks) in enumerate(runs):
            binary = os.path.join(work, f"train-{i}")
            subprocess.run([compiler, src, "--train", "--optimizer", "adamw",
                            "--lr", "1e-4", *flags, "-o", binary],
                           check=True, cwd=work)
            threads = str(cp if ranks == 1 else 1)
            env = dict(os.environ, OMP_NUM_THREADS=threads,
                       OPENBLAS_NUM_THREADS=threads)
            log = os.path.join(work, f"run-{i}.jsonl")
            cmd = [binary, "--tokens", "tokens.bin", "--steps",
                   str(args.steps), "--quiet", "--log-json", log]
            if ranks > 1:
                cmd = [*MPIRUN, "-np", str(ranks), "-x", "OMP_NUM_THREADS",
                       "-x", "OPENBLAS_NUM_THREADS", *cmd]
            subprocess.run(cmd, check=True, cwd=work, env=env)
            records = [json.loads(line) for line in open(log)]
            ms = statistics.median(r["ms"] for r in records[1:])
            loss = records[0]["loss"]
            first = first if first is not None else loss
            print(f"{name:22} {ranks:5} {ms:8.1f} "
                  f"{batch * args.seq / (ms / 1000):9.0f} "
                  f"{abs(loss - first) / first:16.1e}", flush=True)
        memory(args, compiler, work)


def arena_bytes(binary):
    """The arena a compiled program plans, from its --help."""
    out = subprocess.run([binary, "--help"], check=True, capture_output=True,
                         text=True).stdout
    value, unit = re.search(r"^arena: ([0-9.]+) (B|KiB|MiB|GiB)$", out,
                            re.M).groups()
    return float(value) * {"B": 1, "KiB": 2**10, "MiB": 2**20,
                           "GiB": 2**30}[unit]


def memory(args, compiler, work):
    print(f"\narena per rank (MiB): {args.layers} layers, hidden "
          f"{args.hidden}, batch 1, AdamW")
    sizes = [1, 2, 4, 8]
    print(f"{'sequence':>9} " + " ".join(f"{'cp=' + str(c):>8}"
                                         for c in sizes))
    for seq in (args.seq, 2 * args.seq, 4 * args.seq):
        text, _ = gpt_ir(args.layers, args.hidden, args.hidden // 64, seq, 1,
                         1024)
        src = os.path.join(work, f"gpt-{seq}.mlir")
        with open(src, "w") as f:
            f.write(text)
        row = []
        for c in sizes:
            binary = os.path.join(work, f"mem-{seq}-{c}")
            mesh = ["--mesh", f"cp={c}"] if c > 1 else []
            subprocess.run([compiler, src, "--train", "--optimizer", "adamw",
                            *mesh, "-o", binary], check=True, cwd=work)
            row.append(arena_bytes(binary) / 2**20)
        print(f"{seq:9} " + " ".join(f"{m:8.1f}" for m in row), flush=True)


if __name__ == "__main__":
    main()
