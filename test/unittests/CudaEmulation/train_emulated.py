#!/usr/bin/env python3
"""Trains the example models for 10 steps on the emulated GPU: each program
is compiled by cleave-compile once (--emit=obj; the same object runs on
either backend), linked with the CPU backend and with the CUDA backend on
the emulation (libcleave_rt_cuda_emulated.a), and both run on the same
data: the gpt and moe cases of test/Integration/training/<case>, and the
llama example (RMS norm, SwiGLU, rotary embeddings, grouped-query
attention) in fp32 and bf16 on random tokens, as test/gpu/pack.sh packs
them. Every step's loss must agree within the bounds of
test/gpu/run-packed.sh: 1e-4 relative in fp32, 1.5e-2 in bf16, 2e-3 in
fp16.

It also checks that the host never waits for the GPU inside a step: the
emulation counts the calls that wait on a GPU (stream and event
synchronizations, copies from or to pageable memory, blocking copies and
sets, allocations and frees; FakeCuda.cpp, CLEAVE_EMULATED_HOST_WAITS), and
per step (a 10-step run minus a 2-step run) the only one must be the
trainer's wait for the step's marker, which it makes after calling the
next step's kernels. The batch goes up, and the loss (and the fp16 loss
scale) come back, by asynchronous copies from and to page-locked memory.

  train_emulated.py --compile CLEAVE_COMPILE --link LINK_FILE --work DIR

LINK_FILE holds the linker and the emulated link line (';'-separated, as
CMake writes it).
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CASES = ["gpt_adamw", "gpt_adamw_bf16", "gpt_adamw_fp16", "moe_adamw",
         "moe_adamw_bf16", "llama_adamw_fp32", "llama_adamw_bf16"]


def llama_case(precision, work):
    """The llama case of test/gpu/pack.sh: its config and data folder."""
    data = os.path.join(work, "llama-data")
    os.makedirs(data, exist_ok=True)
    stream = np.random.default_rng(4).integers(0, 64, size=(6, 9)).astype(np.int64)
    np.save(os.path.join(data, "idx.npy"), stream[:, :-1])
    np.save(os.path.join(data, "targets.npy"), stream[:, 1:])
    config = {"model": "llama", "steps": 10, "targets": "targets.npy",
              "precision": precision,
              "flags": ["--train", "--loss", "cross-entropy", "--optimizer",
                        "adamw", "--lr", "0.01", "--weight-decay", "0.01",
                        "--precision", precision]}
    return config, data
BOUNDS = {"fp32": 1e-4, "bf16": 1.5e-2, "fp16": 2e-3}



def losses(path):
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return {r["step"]: r["loss"] for r in records if "step" in r}


def host_waits(exe, data, config, steps, path):
    """The waiting calls of `steps` steps of the emulated program."""
    run([exe, "--inputs", os.path.join(data, "idx.npy"),
         "--targets", os.path.join(data, config["targets"]),
         "--steps", str(steps), "--quiet"],
        env={**os.environ, "CLEAVE_EMULATED_HOST_WAITS": path})
    with open(path) as f:
        return json.load(f)


def check_host_waits(case, exe, data, config, work):
    """Fails unless the one wait of each step is the trainer's wait for
    its marker; returns the counts of one step."""
    long = host_waits(exe, data, config, 10, work + "-waits10.json")
    short = host_waits(exe, data, config, 2, work + "-waits2.json")
    per_step = {}
    for call in set(long) | set(short):
        extra = long.get(call, 0) - short.get(call, 0)
        if extra % 8:
            sys.exit(f"{case}: {call} is called {extra} times in 8 steps, "
                     "not the same number each step")
        if extra:
            per_step[call] = extra // 8
    expect = {"cudaEventSynchronize": 1}
    if per_step != expect:
        sys.exit(f"{case}: a step waits for the device {per_step}, but only "
                 f"the wait for its marker, {expect}, should")
    return per_step


def run(cmd, env=None):
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(cmd)}\n"
                 f"{result.stdout}{result.stderr}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compile", required=True)
    parser.add_argument("--link", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    with open(args.link) as f:
        linker, *link_line = f.read().strip().split(";")
    os.makedirs(args.work, exist_ok=True)
    failed = []
    for case in CASES:
        if case.startswith("llama"):
            config, data = llama_case(case.rsplit("_", 1)[1], args.work)
        else:
            data = os.path.join(ROOT, "test", "Integration", "training", case)
            with open(os.path.join(data, "config.json")) as f:
                config = json.load(f)
        model = os.path.join(ROOT, "examples", config["model"], "model.onnx")
        base = os.path.join(args.work, case)
        # The CPU program, and the same object linked with the emulated
        # CUDA backend.
        run([args.compile, model, *config["flags"], "-o", base + "-cpu"])
        run([args.compile, model, *config["flags"], "--emit=obj",
             "-o", base + ".o"])
        run([linker, base + ".o", "-o", base + "-emulated", *link_line])
        logs = {}
        for side in ("cpu", "emulated"):
            logs[side] = base + f"-{side}.jsonl"
            run([base + f"-{side}", "--inputs", os.path.join(data, "idx.npy"),
                 "--targets", os.path.join(data, config["targets"]),
                 "--steps", str(config["steps"]), "--log-json", logs[side],
                 "--quiet"])
        cpu, emulated = losses(logs["cpu"]), losses(logs["emulated"])
        bound = BOUNDS[config.get("precision", "fp32")]
        worst = 0.0
        for step in range(1, config["steps"] + 1):
            if step not in cpu or step not in emulated:
                sys.exit(f"{case}: step {step} missing from a log")
            err = abs(emulated[step] - cpu[step]) / abs(cpu[step])
            worst = max(worst, err) if err == err else float("inf")
        verdict = "ok" if worst <= bound else "FAILED"
        waits = check_host_waits(case, base + "-emulated", data, config, base)
        print(f"{case:16} {config['steps']} steps: losses {cpu[1]:.6g} .. "
              f"{cpu[config['steps']]:.6g}; max |emulated - cpu| / |cpu| = "
              f"{worst:.2e} (bound {bound:g}) {verdict}; host waits per "
              f"step: {waits}")
        if worst > bound:
            failed.append(case)
    if failed:
        sys.exit("losses differ: " + ", ".join(failed))


if __name__ == "__main__":
    main()
