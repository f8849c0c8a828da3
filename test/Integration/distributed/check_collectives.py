#!/usr/bin/env python3
"""Every collective a partitioned program lowers, compiled and run.

usage: check_collectives.py --compile CLEAVE_COMPILE [--mpirun MPIRUN]
                            [--emulated-link LINK_FILE]

collectives.mlir is an inference program for mesh ["x" = 2]: the global
input [8, 6] split by rows, every collective kind (collective_permute,
all_to_all and all_gather and reduce_scatter along dimension 1, which
-cleave-normalize-collectives rewrites, broadcast, all_reduce sum, max and
mean, axis_index, local_slice), outputs gathered to be whole. It runs
under `mpirun -np 2` on the CPU (MPI engine) or, with --emulated-link, on
emulated GPUs with the NCCL engine, and each output must equal NumPy's
value exactly (the data are small integers, so sums are exact).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def expected(x):
    x0, x1 = x[:4], x[4:]
    # all_to_all split 1 concat 0: rank i receives column half i of both
    # ranks' blocks, stacked by rows.
    a = [np.concatenate([x0[:, i * 3:(i + 1) * 3], x1[:, i * 3:(i + 1) * 3]])
         for i in range(2)]
    return {
        "swapped": np.concatenate([x1, x0]),
        "exchanged": np.concatenate(a, axis=1),
        "broadcast": x1,
        "summed": x0 + x1,
        "gathered_cols": np.concatenate([x0, x1], axis=1),
        "index": np.array(1, np.int64),
        "mean": x,
        "block": x0[:2] + x1[2:],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", required=True)
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--emulated-link")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cleave-collectives-") as work:
        prog = os.path.join(work, "prog")
        source = os.path.join(HERE, "collectives.mlir")
        if args.emulated_link:
            subprocess.run([args.compile, source, "--emit=obj", "-o",
                            prog + ".o"], check=True)
            with open(args.emulated_link) as f:
                line = [item for item in f.read().strip().split(";") if item]
            subprocess.run([line[0], prog + ".o", "-o", prog, *line[1:]],
                           check=True)
        else:
            subprocess.run([args.compile, source, "-o", prog], check=True)
        rng = np.random.default_rng(7)
        x = rng.integers(-50, 50, (8, 6)).astype(np.float32)
        np.save(os.path.join(work, "x.npy"), x)
        result = subprocess.run(
            [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2",
             prog, "--input", "x=" + os.path.join(work, "x.npy"),
             "--output-dir", os.path.join(work, "out")],
            capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            print(f"FAIL: the program failed:\n{result.stdout}{result.stderr}")
            return 1
        ok = True
        where = "emulated GPUs (NCCL)" if args.emulated_link else "CPU (MPI)"
        for name, want in expected(x).items():
            got = np.load(os.path.join(work, "out", name + ".npy"))
            good = got.shape == want.shape and np.array_equal(got, want)
            ok &= good
            print(f"{'ok' if good else 'FAIL'} {name} on 2 ranks, {where}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
