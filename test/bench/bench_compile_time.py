#!/usr/bin/python3
"""Compile time on long chains of ops: cleave-compile --train of an N-op
chain, with the run function cut into chunks (--run-chunk-size, default 256)
and as one function (--run-chunk-size 0), and -cleave-print-sharding-rules
on a longer chain, on this machine.

  /usr/bin/python3 test/bench/bench_compile_time.py [--compile build/bin/cleave-compile]
      [--opt build/bin/cleave-opt] [--sizes 1000,4000,20000] [--rules-size 50000]
      [--chunk-sizes 256,0] [--timeout 300]

The model is graph IR: a chain of layers h = tanh(h + b_k), each a parameter
read, an add and a tanh (three ops), on a 4x8 tensor, so that the program's
size, not its arithmetic, is what costs (--print-model OPS prints it, which
test/Tools/cleave-train-chunks.test trains). Each row is one size and chunk size:
the ops of the forward function, the wall time of `cleave-compile --train
--emit=obj` (AdamW, with the evaluation program) and of its translation,
-O2 and object emission (`-v`), or "timeout" past --timeout seconds. The
last line times `cleave-opt -cleave-print-sharding-rules` on --rules-size
ops, whose one remark per op it discards.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WIDTH = 8


def bias(k):
    """The initial value of layer k's bias: small, and not the same in
    consecutive layers."""
    return 0.001 * (k % 7 - 3)


def chain_ir(ops):
    """A forward function of `ops` graph ops (rounded up to whole layers),
    and the number of its ops."""
    layers = max(1, -(-ops // 3))
    t = f"tensor<4x{WIDTH}xf32>"
    b = f"tensor<{WIDTH}xf32>"
    lines = [f"graph.param @b{k} : {b} = dense<{bias(k):.3f}> : {b}"
             for k in range(layers)]
    lines.append(f"func.func @forward(%h0: {t}) -> {t} {{")
    for k in range(layers):
        lines += [
            f"  %b{k} = graph.read_param @b{k} : tensor<{WIDTH}xf32>",
            f"  %s{k} = graph.add %h{k}, %b{k} : {t}, tensor<{WIDTH}xf32>",
            f"  %h{k + 1} = graph.tanh %s{k} : {t}"]
    lines += [f"  return %h{layers} : {t}", "}"]
    return "\n".join(lines) + "\n", 3 * layers


def timed(cmd, timeout, **kwargs):
    """Wall seconds and the result of `cmd`, or (None, None) past
    `timeout`."""
    start = time.perf_counter()
    try:
        result = subprocess.run(cmd, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        return None, None
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{(result.stderr or '')[-3000:]}")
    return time.perf_counter() - start, result


def native_seconds(stderr):
    """The -v report's time of the translation, -O2 and emission."""
    m = re.search(r"^\s*([0-9.]+) \(\s*[0-9.]+%\)\s+translate, optimize, "
                  r"emit object", stderr, re.M)
    return float(m.group(1)) if m else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile",
                        default=os.path.join(ROOT, "build/bin/cleave-compile"))
    parser.add_argument("--opt",
                        default=os.path.join(ROOT, "build/bin/cleave-opt"))
    parser.add_argument("--sizes", default="1000,4000,20000")
    parser.add_argument("--chunk-sizes", default="256,0")
    parser.add_argument("--rules-size", type=int, default=50000)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--print-model", type=int, metavar="OPS",
                        help="print the chain of OPS ops and exit")
    args = parser.parse_args()
    if args.print_model:
        sys.stdout.write(chain_ir(args.print_model)[0])
        return 0
    print("cleave-compile --train --emit=obj, a chain of tanh(h + b), "
          f"4x{WIDTH} f32")
    print(f"{'ops':>7} {'chunk size':>10} {'wall s':>8} {'LLVM s':>8}")
    with tempfile.TemporaryDirectory(prefix="cleave-bench-") as work:
        for size in map(int, args.sizes.split(",")):
            text, ops = chain_ir(size)
            src = os.path.join(work, f"chain{ops}.mlir")
            with open(src, "w") as f:
                f.write(text)
            for chunk in map(int, args.chunk_sizes.split(",")):
                wall, result = timed(
                    [args.compile, src, "--train", "--emit=obj", "-v",
                     "--run-chunk-size", str(chunk), "-o",
                     os.path.join(work, "x.o")],
                    args.timeout, capture_output=True, text=True)
                if wall is None:
                    print(f"{ops:7} {chunk:10} {'timeout':>8} {'':>8}",
                          flush=True)
                    continue
                print(f"{ops:7} {chunk:10} {wall:8.2f} "
                      f"{native_seconds(result.stderr):8.2f}", flush=True)

        text, ops = chain_ir(args.rules_size)
        src = os.path.join(work, "rules.mlir")
        with open(src, "w") as f:
            f.write(text)
        wall, _ = timed([args.opt, src, "-cleave-print-sharding-rules",
                         "-o", os.devnull], args.timeout,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shown = "timeout" if wall is None else f"{wall:.2f} s"
        print(f"cleave-opt -cleave-print-sharding-rules, {ops} ops: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
