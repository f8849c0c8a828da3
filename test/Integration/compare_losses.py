#!/usr/bin/env python3
"""Compares the losses of two --log-json files of the training binary.

usage: compare_losses.py A.jsonl B.jsonl RTOL

Both must log the same steps; every loss of B must be within RTOL
(relative) of A's. Prints one line per step and exits non-zero on a
mismatch.
"""
import json
import sys


def losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if "loss" in record and "step" in record:
                out[record["step"]] = float(record["loss"])
    return out


def main():
    a, b, rtol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
    if not a or sorted(a) != sorted(b):
        print(f"error: steps differ: {sorted(a)} and {sorted(b)}")
        return 1
    ok = True
    for step in sorted(a):
        err = abs(a[step] - b[step]) / max(abs(a[step]), 1e-30)
        good = err <= rtol
        ok &= good
        print(f"{'ok' if good else 'MISMATCH'} step {step}: {a[step]!r} and "
              f"{b[step]!r}, relative difference {err:.3g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
