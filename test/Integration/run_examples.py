#!/usr/bin/python3
"""Compiles each example model with cleave-compile, runs the program on the
inputs its generator saved, and compares every output with PyTorch's
(expected_<name>.npy) within a relative tolerance.

  run_examples.py --compile build/bin/cleave-compile [--examples examples]
                  [--rtol 1e-4] [--atol 1e-5] [--only gpt]
                  [--precision bf16|fp16]

With --precision the models are compiled to compute in 16 bits
(cleave-compile --precision) and every output element must be within
MIXED_BOUND of the largest |expected| of its output: about 8 units of
roundoff of the type (bf16 2^-8, fp16 2^-11), since each op rounds its
output once and errors add up over the layers.

The last line is "N passed, N failed". Exits 1 when any example fails.
"""

import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np

MIXED_BOUND = {"bf16": 3e-2, "fp16": 4e-3}


def run_example(folder, compiler, rtol, atol, workdir, precision=None):
    name = os.path.basename(folder)
    model = os.path.join(folder, "model.onnx")
    prog = os.path.join(workdir, name)
    out_dir = os.path.join(workdir, name + "-out")
    flags = ["--precision", precision] if precision else []
    build = subprocess.run([compiler, model, "-o", prog] + flags,
                           capture_output=True, text=True)
    if build.returncode != 0:
        return False, "compile failed: " + (build.stderr.strip() or build.stdout.strip())
    inputs = sorted(glob.glob(os.path.join(folder, "input_*.npy")))
    args = [prog]
    for path in inputs:
        input_name = os.path.basename(path)[len("input_"):-len(".npy")]
        args += ["--input", f"{input_name}={path}"]
    args += ["--output-dir", out_dir]
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        return False, "run failed: " + (run.stderr.strip() or run.stdout.strip())
    worst = worst_abs = 0.0
    max_expected = 1e-30
    for expected_path in sorted(glob.glob(os.path.join(folder, "expected_*.npy"))):
        output = os.path.basename(expected_path)[len("expected_"):]
        got_path = os.path.join(out_dir, output)
        if not os.path.exists(got_path):
            return False, f"missing output {output}"
        expected = np.load(expected_path)
        got = np.load(got_path)
        if got.shape != expected.shape or got.dtype != expected.dtype:
            return False, (f"{output}: got {got.dtype}{list(got.shape)}, "
                           f"expected {expected.dtype}{list(expected.shape)}")
        err = np.abs(got.astype(np.float64) - expected.astype(np.float64))
        if precision:
            bound = np.full(err.shape, MIXED_BOUND[precision] *
                            float(np.max(np.abs(expected.astype(np.float64)))))
        else:
            bound = atol + rtol * np.abs(expected.astype(np.float64))
        if not np.all(err <= bound):
            i = np.unravel_index(np.argmax(err - bound), err.shape)
            return False, (f"{output}: |got - expected| = {err[i]:.3g} at {i} "
                           f"(got {got[i]}, expected {expected[i]}), "
                           f"bound {bound[i]:.3g}")
        # Relative error where it means something: |expected| >= 1e-3
        # (near zero, the absolute floor governs).
        rel = err / np.maximum(np.abs(expected.astype(np.float64)), 1e-30)
        worst = max(worst, float(np.max(np.where(np.abs(expected) >= 1e-3, rel, 0))))
        worst_abs = max(worst_abs, float(np.max(err)))
        max_expected = max(max_expected, float(np.max(np.abs(expected))))
    if precision:
        return True, (f"max |diff| {worst_abs:.2e}, "
                      f"{worst_abs / max_expected:.2e} of max |expected|, "
                      f"bound {MIXED_BOUND[precision]:g}")
    return True, (f"max |diff| {worst_abs:.2e}, max relative error "
                  f"{worst:.2e} where |expected| >= 1e-3")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", default=os.path.join(root, "build/bin/cleave-compile"))
    parser.add_argument("--examples", default=os.path.join(root, "examples"))
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--only", default="")
    parser.add_argument("--precision", choices=sorted(MIXED_BOUND))
    args = parser.parse_args()
    if not os.path.exists(args.compile):
        print(f"error: no compiler at {args.compile}", file=sys.stderr)
        return 2
    folders = sorted(os.path.dirname(p) for p in
                     glob.glob(os.path.join(args.examples, "*", "model.onnx")))
    folders = [f for f in folders if args.only in os.path.basename(f)]
    passed = failed = 0
    with tempfile.TemporaryDirectory() as workdir:
        for folder in folders:
            ok, message = run_example(folder, args.compile, args.rtol,
                                      args.atol, workdir, args.precision)
            print(f"{'PASS' if ok else 'FAIL'} {os.path.basename(folder)}: {message}")
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
