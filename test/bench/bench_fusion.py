#!/usr/bin/python3
"""What -cleave-fuse-linear buys: the configurations of bench_train.py
compiled with the fused linear kernels (the default) and with --no-fusion,
in fp32 and bf16, on this machine's CPU backend.

  /usr/bin/python3 test/bench/bench_fusion.py [--compile build/bin/cleave-compile]
                                              [--warmup 2] [--repeat 5] [--threads 2]

For each model, precision and variant: the arena the compiler planned, the
part of it that is not parameters or optimizer state, the median AdamW step
time as tokens/s (as bench_train.py measures it), and the first step's
loss, which must agree between the two variants to rounding. Fusion
removes the transposed copy of every Linear weight, the separate bias-add
and GELU passes over the activations, and in the backward the separate
GELU-gradient and bias-gradient passes.
"""

import os
import sys


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_precision import compare_variants  # noqa: E402


def main():
    return compare_variants(__doc__, [
        (f"{precision} {variant}", ["--precision", precision] + flags)
        for precision in ("fp32", "bf16")
        for variant, flags in (("fused", []), ("unfused", ["--no-fusion"]))])


if __name__ == "__main__":
    sys.exit(main())
