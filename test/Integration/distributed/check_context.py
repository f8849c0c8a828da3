#!/usr/bin/env python3
"""Context parallelism on the gpt and llama examples under mpirun against
one device.

usage: check_context.py --compile CLEAVE_COMPILE [--mpirun MPIRUN] [CASE...]

Each case compiles an example for one device and with `--mesh ...`
containing a `cp` axis (-dist-context-parallel: the sequence of every
input split on cp, each device's queries attending to the keys and values
gathered whole, the causal mask at the device's offset), trains both on
the same token corpus and checks:

- the loss of every step on the mesh equals one device's within 1e-5
  relative, and the final parameters and optimizer state, put together
  from the sharded checkpoint, within 1e-5 of each tensor's largest
  magnitude;
- the forward's attentions gather exactly their keys and values: per
  layer two all-gathers of (n-1)/n of the whole [B, Hkv, S, D] f32 block
  (the batch divided by dp, the heads by tp), from --dist-explain;
- the bytes --dist-explain prints per axis and collective equal the
  runtime's count.

Prints one line per check; exits non-zero on the first failing case.
"""
import importlib.util
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The run of both programs and the byte counts are check_experts.py's.
_spec = importlib.util.spec_from_file_location(
    "check_experts", os.path.join(HERE, "check_experts.py"))
experts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(experts)
examples = experts.examples
MPIRUN = experts.MPIRUN

# Both examples: batch 2 x 8 tokens, 2 layers, 4 heads of 8 (llama: 4
# key/value heads too).
BATCH, SEQ, LAYERS, KV_HEADS, HEAD_DIM = 2, 8, 2, 4, 8
Case = experts.Case
ADAMW = ["--optimizer", "adamw", "--lr", "3e-3"]
CASES = [
    Case("gpt-cp2", "gpt", BATCH, "cp=2", {}, ADAMW),
    Case("gpt-cp4", "gpt", BATCH, "cp=4", {}, ADAMW),
    Case("llama-cp2", "llama", BATCH, "cp=2", {}, examples.SGD),
    Case("gpt-dp2-cp2", "gpt", BATCH, "dp=2,cp=2", {}, ADAMW),
    Case("llama-cp2-tp2", "llama", BATCH, "cp=2,tp=2", {}, examples.SGD),
]


def check_case(case, compile_, work):
    explained = experts.train_both(case, compile_, work)
    axes = case.axes()
    cp, dp, tp = (axes.get(a, 1) for a in ("cp", "dp", "tp"))
    block = BATCH // dp * KV_HEADS // tp * SEQ * HEAD_DIM * 4
    want = LAYERS * 2 * ((cp - 1) * block // cp)
    gathered = sum(int(b) for b in re.findall(
        r'forward .* all_gather \["cp"\] \S+\s+(\d+) B/rank\n.*for operand '
        r'#[12] of graph\.attention', explained))
    if gathered != want:
        raise AssertionError(f"{case.name}: the forward's attentions gather "
                             f"{gathered} B per rank, the keys and values "
                             f"are {want}")
    print(f"ok {case.name}: the forward's attentions gather their keys and "
          f"values, {gathered} B per rank and step")

    told = examples.explained_bytes(explained)
    for rank in range(case.ranks()):
        counted = examples.counted(work, rank)
        if told != counted:
            raise AssertionError(f"{case.name}: --dist-explain says {told} "
                                 f"per rank and step, rank {rank} counted "
                                 f"{counted}")
    print(f"ok {case.name}: --dist-explain's bytes per axis and collective "
          f"equal every rank's count: {told}")


def main():
    return examples.distributed.run_cases(__doc__.splitlines()[0], CASES, check_case,
                                 MPIRUN)


if __name__ == "__main__":
    sys.exit(main())
