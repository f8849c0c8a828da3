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
and GELU passes over the activations, and (in inference) the GELU's input.
"""

import os
import sys
import tempfile


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_forward import selected_models, setup  # noqa: E402
from bench_precision import program_bytes  # noqa: E402
from bench_train import time_cleave, training_batches  # noqa: E402

VARIANTS = (("fused", []), ("unfused", ["--no-fusion"]))


def main():
    def add_warmup(parser):
        parser.add_argument("--warmup", type=int, default=2)

    args, gpt = setup(__doc__, repeat=5, add_arguments=add_warmup)
    print(f"{'model':32} {'precision':>9} {'variant':>8} {'arena MiB':>10} "
          f"{'of which not params/state':>26} {'tok/s':>8} {'step-1 loss':>12}")
    with tempfile.TemporaryDirectory() as workdir:
        for i, name, config, model in selected_models(args, gpt):
            vocab, _, _, _, seq, batch = config
            idx, labels = training_batches(vocab, seq, batch)
            for precision in ("fp32", "bf16"):
                for variant, flags in VARIANTS:
                    tag = f"model{i}-{precision}-{variant}"
                    seconds, loss = time_cleave(
                        args.compile, model, idx, labels, args.repeat, args.warmup,
                        workdir, tag, ["--precision", precision] + flags)
                    arena, persistent = program_bytes(os.path.join(workdir, tag))
                    print(f"{name:32} {precision:>9} {variant:>8} "
                          f"{arena / 2 ** 20:10.1f} "
                          f"{(arena - persistent) / 2 ** 20:22.1f} MiB "
                          f"{batch * seq / seconds:8.0f} {loss:12.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
