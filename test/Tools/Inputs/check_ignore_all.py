"""cleave-train-ignore-all.mlir's check: step 1 (every label ignored) has a
NaN loss, and step 2's loss is the float64 cross-entropy of the initial
weights on samples 2 and 3 (step 1 changed nothing)."""
import json
import sys

import numpy as np

log = [json.loads(line) for line in open(sys.argv[1])]
x, t = np.load(sys.argv[2]).astype(np.float64), np.load(sys.argv[3])
w = np.array([[0.5, -0.25, 0.125, 1.0], [-0.75, 0.25, 0.5, -0.5],
              [0.25, 1.5, -1.0, 0.75]])
assert log[0]["step"] == 1 and log[0]["loss"] is None, log[0]
assert log[0]["loss_nonfinite"] == "nan", log[0]
logits = x[2:4] @ w
logits -= logits.max(axis=1, keepdims=True)
ce = -(logits[np.arange(2), t[2:4]] - np.log(np.exp(logits).sum(axis=1)))
want = ce.mean()
got = log[1]["loss"]
assert abs(got - want) <= 1e-6 * abs(want), (got, want)
print(f"ok: step 1 NaN, step 2 {got} against float64 {want}")
