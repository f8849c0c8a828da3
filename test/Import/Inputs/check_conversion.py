#!/usr/bin/python3
# ===- check_conversion.py - opset-converted models against float64 --------===#
#
# onnx-library.mlir compiles convert_opset{7,9,11,17}.onnx (one computation in
# the ops of four opsets; the first three converted to opset 13 at import)
# and runs each on the same random x. This script computes the computation in
# float64 NumPy from the models' own initializers and checks every program's
# outputs against it (rtol 1e-5, atol 1e-6).
#
#   check_conversion.py WORK_DIR   (x.npy, and o7/ o9/ o11/ o17/ with y1, y2)
#
# ===------------------------------------------------------------------------===#

import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def reference(x, w):
    a = x + w["b"]
    flat = a.reshape(2, 12)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    s = (e / e.sum(axis=1, keepdims=True)).reshape(2, 3, 4)
    q = s.sum(axis=2)
    y = q[:, 1:3] @ w["W"] + w["bias"]
    return {"y1": y[:, :1], "y2": y[:, 1:]}


def main():
    work = sys.argv[1]
    x = np.load(os.path.join(work, "x.npy")).astype(np.float64)
    for opset in (7, 9, 11, 17):
        m = onnx.load(os.path.join(HERE, "convert_opset%d.onnx" % opset))
        w = {t.name: numpy_helper.to_array(t).astype(np.float64)
             for t in m.graph.initializer}
        want = reference(x, w)
        for name, expected in want.items():
            got = np.load(os.path.join(work, "o%d" % opset, name + ".npy"))
            assert got.shape == expected.shape, (opset, name, got.shape)
            assert np.allclose(got, expected, rtol=1e-5, atol=1e-6), (
                opset, name, got, expected)
        print("opset %d: y1, y2 match float64" % opset)


if __name__ == "__main__":
    main()
