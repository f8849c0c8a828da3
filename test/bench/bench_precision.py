#!/usr/bin/python3
"""Memory and speed of mixed-precision training: the configurations of
bench_train.py compiled with --precision fp32, bf16 and fp16, on this
machine's CPU backend.

  /usr/bin/python3 test/bench/bench_precision.py [--compile build/bin/cleave-compile]
                                                 [--warmup 2] [--repeat 5] [--threads 2]

For each model and precision: the arena the compiler planned (every byte the
program uses on the device: parameters, optimizer state, gradients and the
peak of the activations), the part of it that is not parameters or
optimizer state, the median AdamW step time as tokens/s (as bench_train.py
measures it), and the first step's loss beside fp32's. The CPU kernels read
16-bit operands into f32 and compute in f32, so on the CPU mixed precision
saves memory, not time; the speed that bf16 buys is the GPU's tensor cores
(test/gpu/run.sh).
"""

import os
import re
import subprocess
import sys
import tempfile


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_forward import selected_models, setup  # noqa: E402
from bench_train import time_cleave, training_batches  # noqa: E402

PRECISIONS = ("fp32", "bf16", "fp16")
UNITS = {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30}


def program_bytes(prog):
    """The arena and the parameter and optimizer-state bytes, from the
    program's --help."""
    text = subprocess.run([prog, "--help"], capture_output=True, text=True,
                          check=True).stdout

    def size(pattern):
        number, unit = re.search(pattern + r"\s*([0-9.]+) (B|KiB|MiB|GiB)", text).groups()
        return float(number) * UNITS[unit]

    params = size(r"parameters: \d+ of the model \(")
    state = size(r"\d+ of optimizer state \(")
    return size(r"arena:"), params + state


def compare_variants(doc, variants):
    """For each model that --only selects and each (label, cleave-compile
    flags) of `variants`: the planned arena, the part of it that is not
    parameters or optimizer state, AdamW tokens/s (median step) and the
    first step's loss, one row each."""
    def add_warmup(parser):
        parser.add_argument("--warmup", type=int, default=2)

    args, gpt = setup(doc, repeat=5, add_arguments=add_warmup)
    width = max(len(label) for label, _ in variants)
    print(f"{'model':32} {'variant':>{width}} {'arena MiB':>10} "
          f"{'of which not params/state':>26} {'tok/s':>8} {'step-1 loss':>12}")
    with tempfile.TemporaryDirectory() as workdir:
        for i, name, config, model in selected_models(args, gpt):
            vocab, _, _, _, seq, batch = config
            idx, labels = training_batches(vocab, seq, batch)
            for v, (label, flags) in enumerate(variants):
                tag = f"model{i}-variant{v}"
                seconds, loss = time_cleave(args.compile, model, idx, labels,
                                            args.repeat, args.warmup, workdir, tag,
                                            flags)
                arena, persistent = program_bytes(os.path.join(workdir, tag))
                print(f"{name:32} {label:>{width}} {arena / 2 ** 20:10.1f} "
                      f"{(arena - persistent) / 2 ** 20:22.1f} MiB "
                      f"{batch * seq / seconds:8.0f} {loss:12.6f}", flush=True)
    return 0


def main():
    return compare_variants(__doc__, [(p, ["--precision", p]) for p in PRECISIONS])


if __name__ == "__main__":
    sys.exit(main())
