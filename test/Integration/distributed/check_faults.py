#!/usr/bin/env python3
"""Faults of a partitioned training program under mpirun.

usage: check_faults.py --compile CLEAVE_COMPILE [--mpirun MPIRUN] [CHECK...]

The program is check_distributed.py's mlp-dp2-zero2 case (mesh
["dp" = 2], ZeRO-2 AdamW), with its random weights and data. Each check
makes one thing go wrong and expects a clear message and the end of
every rank within seconds:

- rank-count: the program launched with -np 1, -np 3 and without
  mpirun: every rank exits 1 naming the expected and the actual count;
- help: --help without mpirun and under it: exit 0, one usage text;
- rank-killed: SIGKILL to one rank while training: the job ends;
- rank-stopped: SIGSTOP to one rank while training: the other rank's
  watchdog (CLEAVE_COMM_TIMEOUT_S) ends the job, naming the collective;
- sigterm: SIGTERM to one rank (not to mpirun) while training with
  --save: every rank stops after the same step N with status 128+15, the
  checkpoint is complete, at step N and equal to an uninterrupted run's
  at N, and resuming it gives the losses of an uninterrupted run;
- bad-shard: a truncated shard, a missing shard and one flipped bit in a
  shard: --resume fails on
  every rank naming the file, and the directory is left as it was;
- other-model: an index edited to another shape, and the checkpoint of
  a wider model: --resume fails on every rank with "from another model";
- trace-flags: --trace on this program, which has no pipeline, and
  --trace-steps 0: every rank fails naming the flag.

Every job runs under a timeout, so that a hang fails its check instead of
blocking the test. Prints one "ok" line per check, "FAIL" for each that
fails; exits non-zero if any does.
"""
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_distributed as dist  # noqa: E402

CASE = next(c for c in dist.CASES if c.name == "mlp-dp2-zero2")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]  # --mpirun
# A job that ends by itself (or fails) is given this long before it counts
# as hung and is killed.
JOB_TIMEOUT = 30
# From a fault (a signal, a bad file) to the end of every rank.
DEADLINE = 10
# Steps of a run that is to be interrupted: far more than it gets to.
FOREVER = 10_000_000
SIGTERM_STATUS = 128 + signal.SIGTERM

# Records each rank's own exit status in PREFIX.<rank> ($0 is the prefix).
RECORD_EXIT = ('"$@"; rc=$?; echo $rc > "$0.$OMPI_COMM_WORLD_RANK"; '
               'exit $rc')


class Job:
    """A command in a session of its own, its output in WORK/TAG.out and,
    under mpirun, each rank's in WORK/TAG.ranks/*/rank.R/{stdout,stderr}."""

    def __init__(self, work, tag, cmd, env, mpi):
        self.work, self.tag, self.cmd, self.mpi = work, tag, cmd, mpi
        self.out = os.path.join(work, tag + ".out")
        self.ranks_dir = os.path.join(work, tag + ".ranks")
        self.exit_prefix = os.path.join(work, tag + ".exit")
        self.rank_pids = {}  # rank -> pid, once looked up
        self.own_exits = RECORD_EXIT in cmd
        with open(self.out, "w") as f:
            self.proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=f,
                                         stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.start = time.monotonic()

    def output(self):
        with open(self.out, errors="replace") as f:
            return f.read()

    def rank_stderr(self, rank):
        if not self.mpi:
            return self.output()
        files = glob.glob(os.path.join(self.ranks_dir, "*", f"rank.{rank}",
                                       "stderr"))
        if not files:
            return ""
        with open(files[0], errors="replace") as f:
            return f.read()

    def rank_exit(self, rank):
        """The status rank `rank` exited with itself (RECORD_EXIT), or None."""
        try:
            with open(f"{self.exit_prefix}.{rank}") as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def wait(self, timeout=JOB_TIMEOUT):
        """The exit status; a job still running after `timeout` s is killed
        and fails the check."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{' '.join(self.cmd)} still ran after {timeout:g} s (a "
                f"hang); killed it. Its output:\n{tail(self.output())}")

    def kill(self):
        for pid in [self.proc.pid, *descendants(self.proc.pid),
                    *self.rank_pids.values()]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.proc.wait()

    def find_rank(self, binary, rank, timeout=JOB_TIMEOUT):
        """The pid of rank `rank`'s process of `binary`, a descendant of
        mpirun (its child, or a wrapper's), by OMPI_COMM_WORLD_RANK."""
        exe = os.path.realpath(binary)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for pid in descendants(self.proc.pid):
                try:
                    if os.path.realpath(f"/proc/{pid}/exe") != exe:
                        continue
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        env = f.read().split(b"\0")
                except OSError:
                    continue
                for item in env:
                    if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                        self.rank_pids[int(item.split(b"=")[1])] = pid
            if rank in self.rank_pids:
                return self.rank_pids[rank]
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"{self.tag}: no process of rank {rank} found; "
                             f"output:\n{tail(self.output())}")

    def survivors(self, grace=3.0):
        """The rank processes still alive `grace` s after mpirun ended."""
        deadline = time.monotonic() + grace
        while True:
            alive = [r for r, pid in self.rank_pids.items() if running(pid)]
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.05)


def tail(text, lines=30):
    return "\n".join(text.splitlines()[-lines:])


def descendants(root):
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Fixture:
    """The work directory: weights, data, the compiled program."""

    def __init__(self, compile_, work):
        self.compile, self.work = compile_, work
        rng = np.random.default_rng(2718)
        dist.write_weights(CASE, work, rng)
        files = dist.write_data(CASE, work, rng)
        self.data = ["--inputs", ",".join(files[:-1]), "--targets", files[-1]]
        self.binary = os.path.join(work, "part")
        dist.run([compile_, os.path.join(HERE, CASE.partitioned), "-o",
                  self.binary], timeout=JOB_TIMEOUT)
        self.ranks = CASE.ranks
        self.env = {k: v for k, v in os.environ.items()
                    if k != "CLEAVE_COMM_TIMEOUT_S"}

    def launch(self, tag, args, np_=None, own_exits=False, env=None,
               mpi=True):
        """The program with `args` under mpirun -np np_ (the mesh's size).
        With own_exits, mpirun does not end the other ranks when one exits
        non-zero, and each rank's own status is recorded: what a rank does
        by itself is seen, not mpirun's clean-up."""
        cmd = [self.binary, *args]
        job_env = dict(self.env, **(env or {}))
        if not mpi:
            return Job(self.work, tag, cmd, job_env, mpi=False)
        n = str(np_ or self.ranks)
        launcher = [*MPIRUN, "-np", n, "--output-filename",
                    os.path.join(self.work, tag + ".ranks")]
        if own_exits:
            launcher += ["--mca", "orte_abort_on_non_zero_status", "0",
                         "/bin/sh", "-c", RECORD_EXIT,
                         os.path.join(self.work, tag + ".exit")]
        return Job(self.work, tag, launcher + cmd, job_env, mpi=True)

    def train(self, tag, args):
        """A run that must succeed; its losses by step."""
        log = os.path.join(self.work, tag + ".jsonl")
        job = self.launch(tag, [*self.data, "--quiet", "--log-json", log,
                                *args])
        rc = job.wait()
        if rc != 0:
            raise AssertionError(f"{' '.join(job.cmd)} failed ({rc}):\n"
                                 f"{tail(job.output())}")
        return dist.losses(log)

    def wait_for_steps(self, job, log, steps):
        """Until rank 0 has logged `steps` steps."""
        deadline = time.monotonic() + JOB_TIMEOUT
        while time.monotonic() < deadline:
            if job.proc.poll() is not None:
                raise AssertionError(f"{job.tag} ended ({job.proc.returncode})"
                                     f" before step {steps}:\n"
                                     f"{tail(job.output())}")
            try:
                with open(log) as f:
                    if sum(1 for _ in f) >= steps:
                        return
            except OSError:
                pass
            time.sleep(0.01)
        job.kill()
        raise AssertionError(f"{job.tag}: step {steps} not reached in "
                             f"{JOB_TIMEOUT} s")


def snapshot(directory):
    """Every file of `directory` and the hash of its bytes."""
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def expect_failure(job, what, pattern, ranks):
    """The job fails within DEADLINE and every rank's stderr matches
    `pattern`; returns the exit status (each rank's, for a job that records
    them), the seconds it took and rank 0's matching line."""
    rc = job.wait()
    took = time.monotonic() - job.start
    if job.own_exits:
        # mpirun exits 0 whatever the ranks do: their own statuses count.
        rc = [job.rank_exit(r) for r in range(ranks)]
        failed = all(r not in (None, 0) for r in rc)
    else:
        failed = rc != 0
    if not failed:
        raise AssertionError(f"{what}: exit {rc}:\n{tail(job.output())}")
    if took > DEADLINE:
        raise AssertionError(f"{what}: the job took {took:.1f} s to fail "
                             f"(more than {DEADLINE} s)")
    lines = {}
    for rank in range(ranks):
        match = re.search(pattern, job.rank_stderr(rank))
        if not match:
            raise AssertionError(
                f"{what}: rank {rank} did not say /{pattern}/; its stderr:\n"
                f"{tail(job.rank_stderr(rank))}\nthe job's output:\n"
                f"{tail(job.output())}")
        lines[rank] = match.group(0)
    return rc, took, lines[0]


# ----------------------------------------------------------------------------
# The checks
# ----------------------------------------------------------------------------

def check_rank_count(fx):
    for np_ in (1, 3, None):
        where = f"-np {np_}" if np_ else "without mpirun"
        job = fx.launch(f"count-{np_}", [*fx.data, "--steps", "3", "--quiet"],
                        np_=np_, own_exits=bool(np_), mpi=bool(np_))
        actual = np_ or 1
        pattern = (rf"error: rank \d+: this program runs on {fx.ranks} ranks "
                   rf"\(the size of its mesh\) but the job has {actual}\b.*")
        rc, took, line = expect_failure(job, f"rank count {where}", pattern,
                                        actual)
        # Under mpirun each rank ends by itself (mpirun does not end them).
        want = [1] * actual if np_ else 1
        if rc != want:
            raise AssertionError(f"rank count {where}: exit {rc}, expected "
                                 f"{want}")
        print(f"ok rank count {where}: every rank ({actual}) exits 1 in "
              f"{took:.1f} s: {line}")


def check_help(fx):
    """--help starts no engine: it works without mpirun (the rank-count
    check does not stop it) and, under mpirun, only rank 0 prints it."""
    for np_ in (None, fx.ranks):
        cmd = [fx.binary, "--help"]
        if np_:
            cmd = [*MPIRUN, "-np", str(np_), *cmd]
        where = f"-np {np_}" if np_ else "without mpirun"
        out = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=JOB_TIMEOUT, env=fx.env)
        usages = out.stdout.count("usage: ")
        if out.returncode != 0 or usages != 1 or \
                f"{fx.ranks} devices" not in out.stdout:
            raise AssertionError(f"--help {where}: exit {out.returncode}, "
                                 f"{usages} usage texts, stderr "
                                 f"{out.stderr[-500:]!r}")
        print(f"ok --help {where}: exit 0, one usage text with the mesh")


def lose_rank(fx, tag, sig, comm_timeout, limit):
    """Trains "forever" and sends `sig` to rank 1 after step 50. Returns
    the job, mpirun's status, and the seconds from the signal to the end
    of every rank process and to mpirun's exit: both within `limit` s,
    with no rank process left behind."""
    what = f"{signal.Signals(sig).name} to rank 1"
    log = os.path.join(fx.work, tag + ".jsonl")
    job = fx.launch(tag, [*fx.data, "--steps", str(FOREVER), "--quiet",
                          "--log-json", log],
                    env={"CLEAVE_COMM_TIMEOUT_S": str(comm_timeout)})
    try:
        fx.wait_for_steps(job, log, 50)
        victim = job.find_rank(fx.binary, 1)
        job.find_rank(fx.binary, 0)
        os.kill(victim, sig)
        sent = time.monotonic()
        ranks_end = None
        while job.proc.poll() is None and time.monotonic() - sent < limit:
            if ranks_end is None and not any(
                    running(pid) for pid in job.rank_pids.values()):
                ranks_end = time.monotonic() - sent
            time.sleep(0.02)
        job_end = time.monotonic() - sent
        if job.proc.poll() is None:
            raise AssertionError(f"{what}: the job still ran {limit} s later "
                                 f"(a hang):\n{tail(job.output())}")
        alive = job.survivors()
        if alive:
            raise AssertionError(f"{what}: ranks {alive} still exist after "
                                 f"mpirun ended")
    finally:
        if job.proc.poll() is None or job.survivors(0):
            job.kill()
    if ranks_end is None:
        ranks_end = job_end
    if job.proc.returncode == 0:
        raise AssertionError(f"{what}: mpirun exited 0:\n{tail(job.output())}")
    return job, job.proc.returncode, ranks_end, job_end


def check_rank_killed(fx):
    # The watchdog is out of reach (600 s): what ends the job is mpirun
    # noticing the death of one of its processes. It then sends the others
    # SIGTERM, which the trainer's handler takes (a rank blocked in a
    # collective never reaches the step boundary where it would stop), and
    # SIGKILL about a second later: rank 0 is gone some 2 s after the kill.
    job, rc, ranks_end, job_end = lose_rank(fx, "killed", signal.SIGKILL,
                                            600, DEADLINE)
    out = job.output()
    match = re.search(r"process rank 1 .*exited on signal 9[^\n]*", out)
    if not match:
        raise AssertionError(f"rank killed: no message names rank 1's death "
                             f"by signal 9:\n{tail(out)}")
    print(f"ok rank killed: SIGKILL to rank 1 after step 50: every rank "
          f"gone in {ranks_end:.1f} s, mpirun exits {rc} in {job_end:.1f} s: "
          f"{match.group(0).strip()}")


def check_rank_stopped(fx):
    # A stopped rank does not die, so mpirun sees nothing: the other rank's
    # watchdog fails its collective and aborts the job.
    timeout = 2
    job, rc, ranks_end, job_end = lose_rank(fx, "stopped", signal.SIGSTOP,
                                            timeout, timeout + DEADLINE)
    out = job.rank_stderr(0)
    match = re.search(rf"error: rank 0: cleave_comm_\w+ on .* did not "
                      rf"complete within {timeout} s[^\n]*", out)
    if not match:
        raise AssertionError(f"rank stopped: rank 0 did not report its stuck "
                             f"collective; its stderr:\n{tail(out)}")
    print(f"ok rank stopped: SIGSTOP to rank 1 after step 50, "
          f"CLEAVE_COMM_TIMEOUT_S={timeout}: every rank gone in "
          f"{ranks_end:.1f} s, mpirun exits {rc} in {job_end:.1f} s: "
          f"{match.group(0)[:110]}...")


def interrupt(fx, tag, rank, own_exits, save_every):
    """Trains with --save (and --save-every unless 0), SIGTERM to rank
    `rank` (not to mpirun) after step 100; checks that every rank stops within DEADLINE
    after the same step N (which rank 0 and `rank` report), and that the
    checkpoint is whole at step N (every rank's shard is of step N).
    Returns (N, seconds, statuses, checkpoint, log): the statuses are each
    rank's own with own_exits, else mpirun's."""
    what = f"sigterm to rank {rank}"
    ck = os.path.join(fx.work, tag + "-ck")
    log = os.path.join(fx.work, tag + ".jsonl")
    every = ["--save-every", str(save_every)] if save_every else []
    job = fx.launch(tag, [*fx.data, "--steps", str(FOREVER), "--quiet",
                          "--save", ck, *every, "--log-json", log],
                    own_exits=own_exits)
    try:
        fx.wait_for_steps(job, log, 100)
        os.kill(job.find_rank(fx.binary, rank), signal.SIGTERM)
        signalled = time.monotonic()
        rc = job.wait()
        took = time.monotonic() - signalled
    finally:
        if job.proc.poll() is None:
            job.kill()
    if took > DEADLINE:
        raise AssertionError(f"{what}: the ranks took {took:.1f} s to stop")
    if own_exits:
        statuses = [job.rank_exit(r) for r in range(fx.ranks)]
        want = [SIGTERM_STATUS] * fx.ranks
    else:
        statuses, want = rc, SIGTERM_STATUS
    if statuses != want:
        raise AssertionError(f"{what}: exit {statuses}, expected {want}:\n"
                             f"{tail(job.output())}")
    # Rank 0 and the rank signalled say so (the others' shards show their
    # step).
    steps = set()
    for r in sorted({0, rank}):
        match = re.search(rf"rank {r}: interrupted after step (\d+) "
                          rf"\(checkpoint saved to {re.escape(ck)}\)",
                          job.rank_stderr(r))
        if not match:
            raise AssertionError(f"{what}: rank {r} did not report the step "
                                 f"it stopped after:\n"
                                 f"{tail(job.rank_stderr(r))}")
        steps.add(int(match.group(1)))
    if len(steps) != 1:
        raise AssertionError(f"{what}: the ranks stopped after steps "
                             f"{sorted(steps)}")
    n = steps.pop()
    logged = max(dist.losses(log))
    if logged != n:
        raise AssertionError(f"{what}: the log ends at step {logged}, the "
                             f"ranks said {n}")

    # The checkpoint: the index, meta.json and one shard per rank, all of
    # step n (any --save-every one before it superseded).
    shards = [f"shard-{r:05d}-of-{fx.ranks:05d}.step-{n}.safetensors"
              for r in range(fx.ranks)]
    files = sorted(os.listdir(ck))
    if files != sorted(["meta.json", "model.index.json", *shards]):
        raise AssertionError(f"{what}: checkpoint {ck} holds {files}, "
                             f"expected the index, meta.json and {shards}")
    index = json.load(open(os.path.join(ck, "model.index.json")))
    meta = json.load(open(os.path.join(ck, "meta.json")))
    shard_steps = [dist.read_safetensors(os.path.join(ck, s))[0]["step"]
                   for s in shards]
    if (index["step"], meta["step"], index["files"], shard_steps) != (
            n, n, shards, [str(n)] * fx.ranks):
        raise AssertionError(f"{what}: index step {index['step']} files "
                             f"{index['files']}, meta step {meta['step']}, "
                             f"shard steps {shard_steps}; the ranks stopped "
                             f"after step {n}")
    dist.read_checkpoint(ck)  # every element of every parameter is there
    return n, took, statuses, ck, log


def check_sigterm(fx):
    # Each rank's own exit status (mpirun not ending the others); the
    # checkpoints of --save-every before the stop are superseded.
    n, took, statuses, ck, log = interrupt(fx, "term", 1, own_exits=True,
                                           save_every=40)
    print(f"ok sigterm to rank 1: both ranks stop after step {n} in "
          f"{took:.1f} s, exiting {statuses}; the checkpoint is whole at "
          f"step {n}")

    # Against uninterrupted runs: to step n (its checkpoint), and to n + 5.
    more = n + 5
    interrupted = dist.losses(log)
    full_n_ck = os.path.join(fx.work, "full-n-ck")
    full_n = fx.train("full-n", ["--steps", str(n), "--save", full_n_ck])
    full = fx.train("full", ["--steps", str(more)])
    a, b = dist.read_checkpoint(ck), dist.read_checkpoint(full_n_ck)
    if sorted(a) != sorted(b):
        raise AssertionError(f"sigterm: the checkpoint holds {sorted(a)}, an "
                             f"uninterrupted run's {sorted(b)}")
    for name in a:
        if not np.array_equal(a[name], b[name]):
            raise AssertionError(f"sigterm: the checkpoint's {name} differs "
                                 f"from an uninterrupted run's at step {n}")
    for step in range(1, n + 1):
        if interrupted[step] != full_n[step]:
            raise AssertionError(f"sigterm: step {step} loss "
                                 f"{interrupted[step]!r}, uninterrupted "
                                 f"{full_n[step]!r}")
    resumed = fx.train("resumed", ["--resume", ck, "--steps", str(more)])
    for step in range(n + 1, more + 1):
        if resumed.get(step) != full[step]:
            raise AssertionError(f"sigterm: resumed at step {n}, step {step} "
                                 f"loss {resumed.get(step)!r}, uninterrupted "
                                 f"{full[step]!r}")
    print(f"ok sigterm: the checkpoint at step {n} equals an uninterrupted "
          f"run's bit for bit; resumed, the losses of steps {n + 1}..{more} "
          f"equal an uninterrupted run's")

    # Under plain mpirun, as a user runs it, with rank 0 signalled: the
    # job's status; the one checkpoint is the one written on stopping.
    n, took, rc, _, _ = interrupt(fx, "term0", 0, own_exits=False,
                                  save_every=0)
    print(f"ok sigterm to rank 0: both ranks stop after step {n} in "
          f"{took:.1f} s, mpirun exits {rc}; the checkpoint is whole at "
          f"step {n}")


def checkpoint_at_5(fx):
    good = os.path.join(fx.work, "good-ck")
    if not os.path.exists(good):
        fx.train("good", ["--steps", "5", "--save", good])
    return good


def expect_resume_failure(fx, ck, what, pattern):
    """--resume ck --save ck fails on every rank saying `pattern`, and
    leaves ck as it was."""
    before = snapshot(ck)
    tag = os.path.basename(ck)
    job = fx.launch(tag, [*fx.data, "--steps", "8", "--quiet", "--resume", ck,
                          "--save", ck])
    rc, took, line = expect_failure(job, what, pattern, fx.ranks)
    after = snapshot(ck)
    if after != before:
        changed = sorted(k for k in set(before) | set(after)
                         if before.get(k) != after.get(k))
        raise AssertionError(f"{what}: the failed resume changed {changed} "
                             f"in {ck}")
    print(f"ok {what}: every rank fails in {took:.1f} s (mpirun exit {rc}), "
          f"{ck} unchanged: {line[:200]}")


def check_bad_shard(fx):
    good = checkpoint_at_5(fx)
    for rank, damage in ((1, "truncated"), (0, "missing"), (1, "flipped")):
        ck = os.path.join(fx.work, f"{damage}-ck")
        shutil.copytree(good, ck)
        shard = f"shard-{rank:05d}-of-{fx.ranks:05d}.step-5.safetensors"
        path = os.path.join(ck, shard)
        detail = ""
        if damage == "truncated":
            # A write cut short: the last tensor's final bytes are missing.
            os.truncate(path, os.path.getsize(path) - 4)
        elif damage == "flipped":
            # One bit of the last tensor's data: its CRC-32C says so.
            with open(path, "r+b") as f:
                f.seek(-3, os.SEEK_END)
                byte = f.read(1)
                f.seek(-3, os.SEEK_END)
                f.write(bytes([byte[0] ^ 0x04]))
            detail = r".*fails its CRC-32C check"
        else:
            os.remove(path)
        expect_resume_failure(fx, ck, f"{damage} shard", rf"error: .*"
                              rf"{re.escape(shard)}{detail}[^\n]*")


def check_other_model(fx):
    good = checkpoint_at_5(fx)
    # The index says fc1.weight is [16, 64]; the program's is [16, 32].
    edited = os.path.join(fx.work, "edited-ck")
    shutil.copytree(good, edited)
    index_path = os.path.join(edited, "model.index.json")
    index = json.load(open(index_path))
    index["params"]["fc1.weight"]["shape"] = [16, 64]
    with open(index_path, "w") as f:
        json.dump(index, f, indent=2)
    expect_resume_failure(
        fx, edited, "index of another shape",
        rf"error: checkpoint {re.escape(edited)} is from another model: "
        rf"parameter 'fc1.weight' is f32 \[16, 64\] in the checkpoint but "
        rf"f32 \[16, 32\] in this program[^\n]*")

    # One device's checkpoint of the same MLP 48 wide (initial values
    # inline, so it needs no weights file).
    text = open(os.path.join(HERE, CASE.reference)).read()
    text = re.sub(r"(: (tensor<[^>]*>) = )#graph\.external<[^>]*>",
                  r"\1dense<0.1> : \2", text)
    text = re.sub(r"(?<=[<x])32(?=x)", "48", text)
    source = os.path.join(fx.work, "wide.mlir")
    with open(source, "w") as f:
        f.write(text)
    wide = os.path.join(fx.work, "wide")
    dist.run([fx.compile, source, "--train", *CASE.train_flags, "-o", wide],
             timeout=JOB_TIMEOUT)
    ck = os.path.join(fx.work, "wide-ck")
    dist.run([wide, *fx.data, "--steps", "2", "--quiet", "--save", ck],
             cwd=fx.work, timeout=JOB_TIMEOUT)
    expect_resume_failure(
        fx, ck, "checkpoint of a wider model",
        rf"error: checkpoint {re.escape(ck)} is from another model: "
        rf"parameter 'fc1.weight' is f32 \[16, 48\] in the checkpoint but "
        rf"f32 \[16, 32\] in this program[^\n]*")


def check_trace_flags(fx):
    """--trace is a pipelined program's: on this dp program, and with a bad
    --trace-steps, every rank fails before training, naming the flag."""
    for tag, flags, pattern in (
            ("trace-no-pipeline", ["--trace", "run.json"],
             r"error: [^\n]*--trace run\.json: the measured timeline is of "
             r"a pipelined program's stages[^\n]*"),
            ("trace-steps", ["--trace-steps", "0"],
             r"error: [^\n]*--trace-steps[^\n]*")):
        job = fx.launch(tag, [*fx.data, "--steps", "2", "--quiet", *flags])
        rc, took, line = expect_failure(job, tag, pattern, fx.ranks)
        print(f"ok {tag}: every rank fails in {took:.1f} s (mpirun exit "
              f"{rc}): {line[:200]}")


CHECKS = {
    "rank-count": check_rank_count,
    "help": check_help,
    "rank-killed": check_rank_killed,
    "rank-stopped": check_rank_stopped,
    "sigterm": check_sigterm,
    "bad-shard": check_bad_shard,
    "other-model": check_other_model,
    "trace-flags": check_trace_flags,
}


def main():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", required=True, help="cleave-compile")
    parser.add_argument("--mpirun", default="mpirun", help="mpirun")
    parser.add_argument("checks", nargs="*", help=f"checks to run (all): "
                        f"{', '.join(CHECKS)}")
    args = parser.parse_args()
    MPIRUN[0] = args.mpirun
    unknown = set(args.checks) - set(CHECKS)
    if unknown:
        print(f"error: unknown checks {sorted(unknown)}")
        return 1
    if shutil.which(MPIRUN[0]) is None:
        print(f"error: {MPIRUN[0]} is not on PATH")
        return 1
    failed = 0
    with tempfile.TemporaryDirectory(prefix="cleave-faults-") as work:
        try:
            fx = Fixture(os.path.abspath(args.compile), work)
        except (AssertionError, RuntimeError) as e:
            print(f"FAIL setup: {e}")
            return 1
        for name, check in CHECKS.items():
            if args.checks and name not in args.checks:
                continue
            try:
                check(fx)
            except (AssertionError, RuntimeError,
                    subprocess.TimeoutExpired) as e:
                print(f"FAIL {name}: {e}")
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
