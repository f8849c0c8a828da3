#!/usr/bin/python3
"""Checks the gradients that cleave-compile --loss cross-entropy computes for
the mlp example against an independent float64 NumPy backward pass.

The reference is written out by hand from the model's definition (two
linear layers with an exact-erf GELU between them, mean cross-entropy), with
the weights read from the ONNX file, on the example's saved input and seeded
random labels. Tolerance: |cleave - reference| <= 1e-6 + 1e-4 |reference|.

  check_gradients.py --compile build/bin/cleave-compile
"""

import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def reference(weights, x, labels):
    """Loss and gradients of the mlp in float64."""
    w1, b1 = weights["fc1.weight"], weights["fc1.bias"]
    w2, b2 = weights["fc2.weight"], weights["fc2.bias"]
    erf = np.vectorize(math.erf)
    h = x @ w1.T + b1
    cdf = 0.5 * (1.0 + erf(h / math.sqrt(2.0)))
    a = h * cdf
    y = a @ w2.T + b2
    z = y - y.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    n = x.shape[0]
    loss = -np.mean(np.log(p[np.arange(n), labels]))
    dy = p.copy()
    dy[np.arange(n), labels] -= 1.0
    dy /= n
    pdf = np.exp(-0.5 * h * h) / math.sqrt(2.0 * math.pi)
    dh = (dy @ w2) * (cdf + h * pdf)
    return {
        "loss": np.array(loss),
        "grad.fc2.weight": dy.T @ a,
        "grad.fc2.bias": dy.sum(axis=0),
        "grad.fc1.weight": dh.T @ x,
        "grad.fc1.bias": dh.sum(axis=0),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", default=os.path.join(ROOT, "build/bin/cleave-compile"))
    args = parser.parse_args()
    folder = os.path.join(ROOT, "examples", "mlp")
    model_path = os.path.join(folder, "model.onnx")
    model = onnx.load(model_path)
    weights = {t.name: numpy_helper.to_array(t).astype(np.float64)
               for t in model.graph.initializer}
    x = np.load(os.path.join(folder, "input_x.npy"))
    labels = np.random.default_rng(7).integers(0, 4, size=x.shape[0])
    expected = reference(weights, x.astype(np.float64), labels)

    passed = failed = 0
    with tempfile.TemporaryDirectory() as work:
        prog = os.path.join(work, "grads")
        subprocess.run([args.compile, model_path, "--loss", "cross-entropy",
                        "-o", prog], check=True)
        np.save(os.path.join(work, "labels.npy"), labels.astype(np.int64))
        subprocess.run([prog, "--input", "x=" + os.path.join(folder, "input_x.npy"),
                        "--input", "labels=" + os.path.join(work, "labels.npy"),
                        "--output-dir", os.path.join(work, "out")], check=True)
        for name, want in expected.items():
            got = np.load(os.path.join(work, "out", name + ".npy")).astype(np.float64)
            err = np.abs(got - want)
            bound = 1e-6 + 1e-4 * np.abs(want)
            ok = got.shape == want.shape and bool(np.all(err <= bound))
            print("%s %s: max |diff| %.3g" % ("PASS" if ok else "FAIL", name,
                                               float(err.max())))
            passed += ok
            failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
