"""Checks a training binary's --profile trace (test/Tools/cleave-train-profile.mlir).

  check_profile.py TRACE STEPS RANKS [OP=FLOPS...] [total=FLOPS]

TRACE is the Chrome trace the trainer wrote; STEPS the steps it should
hold ("2,3"); RANKS how many processes (ranks) it should have; each OP=FLOPS
says that every profiled step of every rank has ops named OP whose "flops"
add up to FLOPS, and total=FLOPS the same of all its ops (the analytical
figures of the test's model). It also checks the trace's shape: complete
events inside their step, one after the other on each row, covering most
of it, each step with the same ops in the same order.
"""

import collections
import json
import sys


def main():
    trace = json.load(open(sys.argv[1]))
    steps = [int(s) for s in sys.argv[2].split(",")]
    ranks = int(sys.argv[3])
    expected = {}
    for arg in sys.argv[4:]:
        op, flops = arg.split("=")
        expected[op] = float(flops)

    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    pids = sorted({e["pid"] for e in events})
    assert pids == list(range(ranks)), f"ranks {pids}, expected {ranks}"
    assert trace["otherData"]["steps"] == [steps[0], steps[-1]], trace["otherData"]
    for pid in pids:
        mine = [e for e in events if e["pid"] == pid]
        step_events = {int(e["name"].split()[1]): e for e in mine if e["cat"] == "step"}
        assert sorted(step_events) == steps, f"rank {pid}: steps {sorted(step_events)}"
        sequences = []
        for step in steps:
            s = step_events[step]
            ops = sorted((e for e in mine if e["cat"] != "step" and e["args"]["step"] == step),
                         key=lambda e: e["ts"])
            assert ops, f"rank {pid} step {step}: no ops"
            end = s["ts"] + s["dur"]
            previous = s["ts"]
            for e in ops:
                assert e["dur"] >= 0, e
                # Microsecond rounding of the times.
                assert e["ts"] >= previous - 1e-3, (e, previous)
                assert e["ts"] + e["dur"] <= end + 1e-3, (e, end)
                previous = e["ts"] + e["dur"]
                assert e["args"]["shapes"], e
                assert e["args"]["bytes"] > 0, e
                assert (e["cat"] == "collective") == e["name"].startswith("dist."), e
                assert (e["tid"] == 1) == (e["cat"] == "collective"), e
            sequences.append([(e["name"], e["args"]["shapes"]) for e in ops])
            flops = collections.Counter()
            for e in ops:
                flops[e["name"]] += e["args"]["flops"]
            flops["total"] = sum(flops.values())
            for op, want in expected.items():
                assert flops[op] == want, f"rank {pid} step {step}: {op} {flops[op]} FLOPs, expected {want}"
            # The ops are the program's run: what is not in them is the
            # marks' own cost.
            covered = sum(e["dur"] for e in ops)
            assert covered >= 0.5 * s["dur"], f"rank {pid} step {step}: ops {covered} us of {s['dur']}"
        assert all(seq == sequences[0] for seq in sequences), f"rank {pid}: steps differ"
    print(f"ok: {len(events)} events, {len(pids)} rank(s), steps {steps}")


if __name__ == "__main__":
    main()
