#!/usr/bin/env python3
"""Context parallelism on the gpt and llama examples under mpirun against
one device.

usage: check_context.py --compile CLEAVE_COMPILE [--mpirun MPIRUN] [CASE...]

Each case compiles an example for one device and with `--mesh ...`
containing a `cp` axis (-dist-context-parallel: the sequence of every
input split on cp), in the ring form (the default: each device's queries
meet the key/value blocks passed around the cp devices by
collective_permute, merged by log-sum-exp) or with `--cp-form gather`
(the keys and values gathered whole, the causal mask at the device's
positions), in the zigzag layout (the default: device r of n holds chunks
r and 2n - 1 - r of 2n) or with `--cp-layout contiguous` (chunk r of n),
trains both on the same token corpus and checks:

- the loss of every step on the mesh equals one device's within 1e-5
  relative, and the final parameters and optimizer state, put together
  from the sharded checkpoint, within 1e-5 of each tensor's largest
  magnitude;
- ring: each rank sends exactly the analytical bytes by collective_permute
  per step: per layer its key and value blocks [B, Hkv, S/cp, D] f32 (the
  batch divided by dp, the heads by tp) cp - 1 times in the forward and in
  the backward, and their gradients cp times (the last step brings them
  home), 6 cp - 4 blocks; and no attention gathers its keys or values;
- gather: the forward's attentions gather exactly their keys and values:
  per layer two all-gathers of (n-1)/n of the whole [B, Hkv, S, D] f32
  block, from --dist-explain;
- ring, without tp: the weight gradients, partial over the devices'
  tokens, are all-reduced once over the batch and sequence axes together
  (dp, cp): 2 (n - 1)/n of every parameter's gradient and the loss,
  n = dp cp, and nothing is gathered (the weight gradients contract the
  split sequence without gathering the activations). (The gather form
  all-reduces llama's rotated key gradients, where a reduce-scatter
  would do: not checked there.)
- ring, without tp: cleave-plan's estimates for the layout equal them:
  its context-parallel ring bytes per GPU the permutes', its gradient
  reduction the gradients' all-reduce but for the loss's;
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
GATHER = ["--cp-form", "gather"]
CONTIGUOUS = ["--cp-layout", "contiguous"]
CASES = [
    Case("gpt-cp2", "gpt", BATCH, "cp=2", {}, ADAMW),
    Case("gpt-cp4", "gpt", BATCH, "cp=4", {}, ADAMW),
    Case("llama-cp2", "llama", BATCH, "cp=2", {}, examples.SGD),
    Case("llama-cp4", "llama", BATCH, "cp=4", {}, examples.SGD),
    Case("gpt-dp2-cp2", "gpt", BATCH, "dp=2,cp=2", {}, ADAMW),
    Case("llama-cp2-tp2", "llama", BATCH, "cp=2,tp=2", {}, examples.SGD),
    Case("gpt-cp2-gather", "gpt", BATCH, "cp=2", {}, ADAMW + GATHER),
    Case("gpt-cp4-gather", "gpt", BATCH, "cp=4", {}, ADAMW + GATHER),
    Case("llama-cp2-gather", "llama", BATCH, "cp=2", {}, examples.SGD + GATHER),
    Case("gpt-dp2-cp2-gather", "gpt", BATCH, "dp=2,cp=2", {}, ADAMW + GATHER),
    Case("llama-cp2-tp2-gather", "llama", BATCH, "cp=2,tp=2", {},
         examples.SGD + GATHER),
    # The other layout of each form: the same bytes, another order of the
    # blocks.
    Case("gpt-cp2-contiguous", "gpt", BATCH, "cp=2", {}, ADAMW + CONTIGUOUS),
    Case("llama-cp4-contiguous", "llama", BATCH, "cp=4", {},
         examples.SGD + CONTIGUOUS),
    Case("gpt-dp2-cp2-gather-contiguous", "gpt", BATCH, "dp=2,cp=2", {},
         ADAMW + GATHER + CONTIGUOUS),
]

# An attention's keys or values gathered by the forward, from --dist-explain.
KV_GATHERS = (r'forward .* all_gather \["cp"\] \S+\s+(\d+) B/rank\n.*for '
              r'operand #[12] of graph\.attention')


def check_planner(case, compile_, told, dp, cp, gradients):
    """cleave-plan's estimate for a ring layout without tp: its cp bytes
    per GPU equal the permutes', its dp bytes (the gradients' reduction
    over the dp x cp group) `gradients`, the compiler's gradient
    all-reduce without the loss's."""
    estimate = experts.plan_estimate(compile_, case, gpus=dp * cp, dp=dp,
                                     cp=cp)
    experts.expect_plan_agrees(case.name, [
        ("ring", estimate["comm_gb"]["cp"] * 1e9,
         told["cp"]["collective_permute"]),
        ("gradient all-reduce", estimate["comm_gb"]["dp"] * 1e9, gradients)])


def check_case(case, compile_, work):
    explained = experts.train_both(case, compile_, work)
    axes = case.axes()
    cp, dp, tp = (axes.get(a, 1) for a in ("cp", "dp", "tp"))
    gathered = sum(int(b) for b in re.findall(KV_GATHERS, explained))
    told = examples.explained_bytes(explained)
    if "gather" in case.flags:
        block = BATCH // dp * KV_HEADS // tp * SEQ * HEAD_DIM * 4
        want = LAYERS * 2 * ((cp - 1) * block // cp)
        if gathered != want:
            raise AssertionError(f"{case.name}: the forward's attentions "
                                 f"gather {gathered} B per rank, the keys "
                                 f"and values are {want}")
        print(f"ok {case.name}: the forward's attentions gather their keys "
              f"and values, {gathered} B per rank and step")
    else:
        block = BATCH // dp * KV_HEADS // tp * SEQ // cp * HEAD_DIM * 4
        want = LAYERS * (6 * cp - 4) * block
        passed = told.get("cp", {}).get("collective_permute", 0)
        if passed != want or gathered:
            raise AssertionError(f"{case.name}: the ring passes {passed} B "
                                 f"per rank and step (gathering {gathered} "
                                 f"B of keys and values), the analytical "
                                 f"figure is {want}")
        print(f"ok {case.name}: the ring passes {passed} B per rank and step "
              f"({LAYERS} layers x {6 * cp - 4} blocks of {block} B), "
              f"gathering no keys or values")

    if tp == 1 and "gather" not in case.flags:
        group = "dp,cp" if dp > 1 else "cp"
        n = dp * cp
        want = 2 * (n - 1) * examples.dp_bytes(case.model, set(), 1) // n
        reduced = told.get(group, {}).get("all_reduce", 0)
        others = {a: kinds for a, kinds in told.items() if a != group}
        if reduced != want or others.get("cp", {}).get("all_reduce") or \
                any(k.get("all_gather") for k in told.values()):
            raise AssertionError(f"{case.name}: {told}: the gradients' "
                                 f"all-reduce over {group} is {want} B "
                                 f"(2 (n-1)/n of parameters and loss), and "
                                 f"only the keys and values are gathered")
        print(f"ok {case.name}: the gradients are all-reduced once over "
              f"{group}, {reduced} B per rank and step, no activation "
              f"gathered")
        # The gradients' share: all but the loss's 4 B.
        check_planner(case, compile_, told, dp, cp,
                      reduced - 2 * (n - 1) * 4 / n)

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
