#!/usr/bin/python3
"""Checks the loss and gradients that cleave-compile --loss cross-entropy
computes against independent float64 references:

- the mlp example (ONNX): a NumPy backward pass written out by hand from the
  model's definition (two linear layers, exact-erf GELU, mean cross-entropy),
  with the weights read from the ONNX file, on the example's saved input and
  seeded random labels;
- grad_model/model.mlir, which exercises the other gradient rules: float64
  PyTorch autograd numbers committed with grad_model/generate.py.

Tolerance: |cleave - reference| <= 1e-6 + 1e-4 |reference|.

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


def run_program(compiler, model_path, inputs, work, name):
    """Compiles the gradient program and returns its outputs by name."""
    prog = os.path.join(work, name)
    subprocess.run([compiler, model_path, "--loss", "cross-entropy", "-o", prog],
                   check=True)
    args = [prog, "--output-dir", os.path.join(work, name + "-out")]
    for input_name, path in inputs.items():
        args += ["--input", "%s=%s" % (input_name, path)]
    subprocess.run(args, check=True)
    out = os.path.join(work, name + "-out")
    return lambda output: np.load(os.path.join(out, output + ".npy"))


def compare(case, expected, load):
    passed = failed = 0
    for name, want in expected.items():
        got = load(name).astype(np.float64)
        err = np.abs(got - want)
        bound = 1e-6 + 1e-4 * np.abs(want)
        ok = got.shape == want.shape and bool(np.all(err <= bound))
        print("%s %s %s: max |diff| %.3g" % ("PASS" if ok else "FAIL", case,
                                              name, float(err.max())))
        passed += ok
        failed += not ok
    return passed, failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", default=os.path.join(ROOT, "build/bin/cleave-compile"))
    args = parser.parse_args()
    totals = [0, 0]
    with tempfile.TemporaryDirectory() as work:
        # The mlp example against the hand-written NumPy backward pass.
        folder = os.path.join(ROOT, "examples", "mlp")
        model_path = os.path.join(folder, "model.onnx")
        weights = {t.name: numpy_helper.to_array(t).astype(np.float64)
                   for t in onnx.load(model_path).graph.initializer}
        x_path = os.path.join(folder, "input_x.npy")
        x = np.load(x_path)
        labels = np.random.default_rng(7).integers(0, 4, size=x.shape[0])
        labels_path = os.path.join(work, "labels.npy")
        np.save(labels_path, labels.astype(np.int64))
        load = run_program(args.compile, model_path,
                           {"x": x_path, "labels": labels_path}, work, "mlp")
        for i, n in enumerate(compare("mlp", reference(weights, x.astype(np.float64),
                                                       labels), load)):
            totals[i] += n

        # The rule-coverage model against float64 PyTorch autograd.
        folder = os.path.join(HERE, "grad_model")
        load = run_program(args.compile, os.path.join(folder, "model.mlir"),
                           {"x": os.path.join(folder, "input_x.npy"),
                            "labels": os.path.join(folder, "input_labels.npy")},
                           work, "grad_model")
        expected = {name[len("expected_"):-len(".npy")]:
                    np.load(os.path.join(folder, name)).astype(np.float64)
                    for name in sorted(os.listdir(folder))
                    if name.startswith("expected_")}
        for i, n in enumerate(compare("grad_model", expected, load)):
            totals[i] += n
    print("%d passed, %d failed" % tuple(totals))
    return 0 if totals[1] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
