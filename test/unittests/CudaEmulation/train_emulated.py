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
sets, allocations and frees, and stream queries, which only a host polling
a stream until it drains makes; FakeCuda.cpp, CLEAVE_EMULATED_HOST_WAITS),
and per step (a 10-step run minus a 2-step run) the only one must be the
trainer's wait for the step's marker, which it makes after calling the
next step's kernels. The batch goes up, and the loss (and the fp16 loss
scale) come back, by asynchronous copies from and to page-locked memory.

The same holds for a step with collectives: the hand-partitioned dp=2
ZeRO-2 mlp step of test/Integration/distributed (all_reduce, reduce_scatter
and all_gather in every step) runs on two ranks under mpirun, each on an
emulated GPU with the NCCL engine over the emulated NCCL
(libcleave_rt_comm_nccl_emulated.a), against the same object linked with
the CPU backend and the MPI engine: its losses within the fp32 bound, and
on every rank one host wait per step, the marker's.

  train_emulated.py --compile CLEAVE_COMPILE --link LINK_FILE
                    [--dist-link DIST_LINK_FILE --mpirun MPIRUN] --work DIR
                    [CASE...]

LINK_FILE holds the linker and the emulated link line (';'-separated, as
CMake writes it); DIST_LINK_FILE the same for a distributed program. CASEs
(default: all, the distributed one "mlp-dp2-zero2" included when
--dist-link is given) choose what runs.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DIST_DIR = os.path.join(ROOT, "test", "Integration", "distributed")
DIST_CASE = "mlp-dp2-zero2"
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
    return one_wait_per_step(case, long, short)


def one_wait_per_step(case, long, short):
    """The counts of one step from a 10-step and a 2-step run's, which must
    be the marker's wait alone."""
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


def run(cmd, env=None, cwd=None):
    result = subprocess.run(cmd, capture_output=True, text=True, env=env,
                            cwd=cwd)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(cmd)}\n"
                 f"{result.stdout}{result.stderr}")


def distributed(args, work):
    """The dp=2 step on two emulated GPUs with the NCCL engine: its losses
    against the CPU backend's with the MPI engine, and its host waits on
    each rank. Returns whether the losses agree."""
    sys.path.insert(0, DIST_DIR)
    import check_distributed
    case = next(c for c in check_distributed.CASES if c.name == DIST_CASE)
    with open(args.dist_link) as f:
        linker, *link_line = f.read().strip().split(";")
    work = os.path.join(work, DIST_CASE)
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(18)
    check_distributed.write_weights(case, work, rng)
    files = check_distributed.write_data(case, work, rng)
    data = ["--inputs", ",".join(files[:-1]), "--targets", files[-1]]
    ir = os.path.join(DIST_DIR, case.partitioned)
    base = os.path.join(work, "step")
    run([args.compile, ir, "-o", base + "-cpu"])
    run([args.compile, ir, "--emit=obj", "-o", base + ".o"])
    run([linker, base + ".o", "-o", base + "-emulated", *link_line])
    mpirun = [args.mpirun, "--allow-run-as-root", "--oversubscribe"]
    steps = 10
    logs = {}
    for side in ("cpu", "emulated"):
        logs[side] = os.path.join(work, f"{side}.jsonl")
        run([*mpirun, "-np", str(case.ranks), base + f"-{side}", *data,
             "--steps", str(steps), "--log-json", logs[side], "--quiet"],
            cwd=work)
    cpu, emulated = losses(logs["cpu"]), losses(logs["emulated"])
    bound = BOUNDS["fp32"]
    worst = 0.0
    for step in range(1, steps + 1):
        if step not in cpu or step not in emulated:
            sys.exit(f"{DIST_CASE}: step {step} missing from a log")
        err = abs(emulated[step] - cpu[step]) / abs(cpu[step])
        worst = max(worst, err) if err == err else float("inf")
    # Each rank writes its own counts: one program per rank (MPMD), each
    # with its file.
    counts = {}
    for n in (10, 2):
        command = [*mpirun]
        for rank in range(case.ranks):
            path = os.path.join(work, f"waits{n}-rank{rank}.json")
            command += [":"] if rank else []
            command += ["-np", "1", "env", f"CLEAVE_EMULATED_HOST_WAITS={path}",
                        base + "-emulated", *data, "--steps", str(n),
                        "--quiet"]
        run(command, cwd=work)
        for rank in range(case.ranks):
            with open(os.path.join(work, f"waits{n}-rank{rank}.json")) as f:
                counts[n, rank] = json.load(f)
    waits = [one_wait_per_step(f"{DIST_CASE} rank {rank}", counts[10, rank],
                               counts[2, rank])
             for rank in range(case.ranks)]
    verdict = "ok" if worst <= bound else "FAILED"
    print(f"{DIST_CASE + ' x2':16} {steps} steps on {case.ranks} emulated "
          f"GPUs (NCCL engine): losses {cpu[1]:.6g} .. {cpu[steps]:.6g}; "
          f"max |emulated - cpu (MPI engine)| / |cpu| = {worst:.2e} (bound "
          f"{bound:g}) {verdict}; host waits per step on each rank: {waits}")
    return worst <= bound


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compile", required=True)
    parser.add_argument("--link", required=True)
    parser.add_argument("--dist-link")
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--work", required=True)
    parser.add_argument("cases", nargs="*")
    args = parser.parse_args()
    with open(args.link) as f:
        linker, *link_line = f.read().strip().split(";")
    os.makedirs(args.work, exist_ok=True)
    failed = []
    wanted = set(args.cases)
    if args.dist_link and (not wanted or DIST_CASE in wanted):
        if not distributed(args, args.work):
            failed.append(DIST_CASE)
    for case in CASES:
        if wanted and case not in wanted:
            continue
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
