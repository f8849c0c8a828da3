#!/usr/bin/python3
"""The partitioner's benchmarks: compile time of the whole pipeline for
generated GPTs of growing depth, and training throughput per rank of dp=2
and tp=2 against one device on the CPU.

  /usr/bin/python3 test/bench/bench_partition.py [--compile build/bin/cleave-compile]
      [--layers 12,24,48] [--hidden 1024] [--mesh dp=2,tp=2] [--steps 10]
      [--skip-compile-time] [--skip-throughput]

Compile time: a GPT-2 style decoder (hidden --hidden, heads of 64, sequence
128, batch 8, vocabulary 8192) is written as graph IR with its weights in an
external file (the compiler reads only their offsets), then compiled
--train --optimizer adamw --mesh <mesh> --emit=obj, import to object file,
with -v; printed: the wall time, the time per layer (constant for a
pipeline linear in depth), the wall time with --llvm-opt-level 0, and the
largest passes.

Throughput: a 4-layer GPT of hidden 256 (sequence 128, batch 8, vocabulary
8192) trained for --steps AdamW steps on random tokens, on one device with
2 threads and on 2 ranks (dp=2, tp=2) with 1 thread each (the machine's
two cores either way); printed: tokens/s of the whole run and per rank
(median step time from --log-json) and the first losses' agreement.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def gpt_ir(layers, hidden, heads, seq, batch, vocab, weights="weights.bin"):
    """The forward of a GPT-2 style decoder in graph IR, and the weights'
    (name, shape) in file order."""
    h, s, b, v = hidden, seq, batch, vocab
    d = h // heads
    params, lines = [], []
    offset = 0

    def param(name, shape):
        nonlocal offset
        size = int(np.prod(shape)) * 4
        params.append((name, shape))
        dims = "x".join(map(str, shape))
        lines.append(f'graph.param @{name} : tensor<{dims}xf32> = '
                     f'#graph.external<"{weights}", offset = {offset}, '
                     f'size = {size}>')
        offset += size

    param("wte", (v, h))
    param("wpe", (s, h))
    for l in range(layers):
        p = f"h.{l}."
        for n, shape in [("ln1.w", (h,)), ("ln1.b", (h,)), ("q.w", (h, h)),
                         ("q.b", (h,)), ("k.w", (h, h)), ("k.b", (h,)),
                         ("v.w", (h, h)), ("v.b", (h,)), ("o.w", (h, h)),
                         ("o.b", (h,)), ("ln2.w", (h,)), ("ln2.b", (h,)),
                         ("fc.w", (h, 4 * h)), ("fc.b", (4 * h,)),
                         ("proj.w", (4 * h, h)), ("proj.b", (h,))]:
            param(p + n, shape)
    param("lnf.w", (h,))
    param("lnf.b", (h,))

    act = f"tensor<{b}x{s}x{h}xf32>"
    heads_t = f"tensor<{b}x{s}x{heads}x{d}xf32>"
    bhsd = f"tensor<{b}x{heads}x{s}x{d}xf32>"
    body = []
    n = 0

    def op(text):
        nonlocal n
        n += 1
        body.append(f"  %{n} = {text}")
        return f"%{n}"

    def read(name, shape):
        dims = "x".join(map(str, shape))
        return op(f"graph.read_param @{name} : tensor<{dims}xf32>")

    positions = ", ".join(map(str, range(s)))
    pos = op(f"graph.constant dense<[{positions}]> : tensor<{s}xi64>")
    wte = read("wte", (v, h))
    tok = op(f"graph.gather {wte}[%idx] dim 0 : tensor<{v}x{h}xf32>, "
             f"tensor<{b}x{s}xi64>")
    wpe = read("wpe", (s, h))
    pe = op(f"graph.gather {wpe}[{pos}] dim 0 : tensor<{s}x{h}xf32>, "
            f"tensor<{s}xi64>")
    x = op(f"graph.add {tok}, {pe} : {act}, tensor<{s}x{h}xf32>")

    def norm(x, prefix):
        w = read(prefix + ".w", (h,))
        bias = read(prefix + ".b", (h,))
        return op(f"graph.layer_norm {x}, {w}, {bias} dim 2 eps 1.0E-5 : "
                  f"{act}, tensor<{h}xf32>, tensor<{h}xf32>")

    def linear(x, prefix, fin, fout):
        w = read(prefix + ".w", (fin, fout))
        y = op(f"graph.matmul {x}, {w} : tensor<{b}x{s}x{fin}xf32>, "
               f"tensor<{fin}x{fout}xf32>")
        bias = read(prefix + ".b", (fout,))
        return op(f"graph.add {y}, {bias} : tensor<{b}x{s}x{fout}xf32>, "
                  f"tensor<{fout}xf32>")

    for l in range(layers):
        p = f"h.{l}."
        a = norm(x, p + "ln1")
        qkv = []
        for which in "qkv":
            t = linear(a, p + which, h, h)
            t = op(f"graph.reshape {t} : {act} -> {heads_t}")
            qkv.append(op(f"graph.transpose {t} perm [0, 2, 1, 3] : {heads_t}"))
        att = op(f"graph.attention {qkv[0]}, {qkv[1]}, {qkv[2]} causal "
                 f"scale {1 / d ** 0.5:.8f} : {bhsd}, {bhsd}, {bhsd}")
        att = op(f"graph.transpose {att} perm [0, 2, 1, 3] : {bhsd}")
        att = op(f"graph.reshape {att} : {heads_t} -> {act}")
        x = op(f"graph.add {x}, {linear(att, p + 'o', h, h)} : {act}, {act}")
        m = norm(x, p + "ln2")
        m = linear(m, p + "fc", h, 4 * h)
        m = op(f"graph.gelu {m} approximate tanh : tensor<{b}x{s}x{4 * h}xf32>")
        x = op(f"graph.add {x}, {linear(m, p + 'proj', 4 * h, h)} : "
               f"{act}, {act}")
    x = norm(x, "lnf")
    wte2 = read("wte", (v, h))
    head = op(f"graph.transpose {wte2} perm [1, 0] : tensor<{v}x{h}xf32>")
    logits = op(f"graph.matmul {x}, {head} : {act}, tensor<{h}x{v}xf32>")
    text = "\n".join(lines) + "\n"
    text += (f"func.func @forward(%idx: tensor<{b}x{s}xi64>) -> "
             f"tensor<{b}x{s}x{v}xf32> {{\n")
    text += "\n".join(body) + "\n"
    text += f"  return {logits} : tensor<{b}x{s}x{v}xf32>\n}}\n"
    return text, params


def write_weights(path, params, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "wb") as f:
        for name, shape in params:
            if name.endswith((".ln1.w", ".ln2.w")) or name == "lnf.w":
                values = np.ones(shape, np.float32)
            elif name.endswith(".b") and not name.endswith(".w"):
                values = np.zeros(shape, np.float32)
            else:
                values = (0.02 * rng.standard_normal(shape)).astype(np.float32)
            values.tofile(f)


def compile_time(args, work):
    print(f"compile time: --train --optimizer adamw --mesh {args.mesh} "
          f"--emit=obj, hidden {args.hidden}, heads of 64, sequence 128, "
          f"batch 8, vocabulary 8192")
    print(f"{'layers':>6} {'ops':>7} {'wall s':>8} {'s/layer':>8} "
          f"{'-O0 s':>7}  largest passes (-O2)")
    for layers in map(int, args.layers.split(",")):
        text, params = gpt_ir(layers, args.hidden, args.hidden // 64, 128, 8,
                              8192)
        src = os.path.join(work, f"gpt{layers}.mlir")
        with open(src, "w") as f:
            f.write(text)
        weights = os.path.join(work, "weights.bin")
        # The compiler reads only offsets: a sparse file of the right size.
        with open(weights, "wb") as f:
            f.truncate(sum(int(np.prod(s)) * 4 for _, s in params))
        def run(level):
            start = time.perf_counter()
            result = subprocess.run(
                [args.compile, src, "--train", "--optimizer", "adamw",
                 "--mesh", args.mesh, "--emit=obj", "-o",
                 os.path.join(work, "x.o"), "-v", "--llvm-opt-level",
                 str(level)], capture_output=True, text=True, cwd=work)
            if result.returncode != 0:
                sys.exit(f"compile failed:\n{result.stderr[-3000:]}")
            return time.perf_counter() - start, result

        wall, result = run(2)
        wall0, _ = run(0)
        passes = []
        for line in result.stderr.splitlines():
            m = re.match(r"\s*([0-9.]+) \(\s*([0-9.]+)%\)\s+(\S.*)$", line)
            if m and not m.group(3).startswith(("Total", "root", "'")):
                passes.append((float(m.group(1)), m.group(3).strip()))
        passes.sort(reverse=True)
        top = ", ".join(f"{name} {t:.2f}s" for t, name in passes[:4])
        ops = text.count(" = graph.")
        print(f"{layers:6} {ops:7} {wall:8.2f} {wall / layers:8.3f} "
              f"{wall0:7.2f}  {top}")


def throughput(args, work):
    layers, hidden, seq, batch, vocab = 4, 256, 128, 8, 8192
    text, params = gpt_ir(layers, hidden, hidden // 64, seq, batch, vocab)
    src = os.path.join(work, "gpt-small.mlir")
    with open(src, "w") as f:
        f.write(text)
    write_weights(os.path.join(work, "weights.bin"), params)
    tokens = np.random.default_rng(1).integers(0, vocab, 200 * seq + 1,
                                               dtype=np.uint16)
    tokens.tofile(os.path.join(work, "tokens.bin"))
    print(f"\nthroughput: {layers} layers, hidden {hidden}, sequence {seq}, "
          f"batch {batch}, vocabulary {vocab}; AdamW; {args.steps} steps")
    print(f"{'layout':10} {'ranks':>5} {'threads/rank':>12} {'tokens/s':>10} "
          f"{'per rank':>10} {'ms/step':>8} {'loss 1 rel diff':>16}")
    # (layout, flags, ranks, threads per rank, microbatches per step): the
    # pipeline against one device accumulating the same 4 microbatches.
    runs = [("one", [], 1, "2", 1), ("dp=2", ["--mesh", "dp=2"], 2, "1", 1),
            ("tp=2", ["--mesh", "tp=2"], 2, "1", 1),
            ("one x4", ["--accumulate", "4"], 1, "2", 4),
            ("pp=2 x4", ["--mesh", "pp=2", "--microbatches", "4"], 2, "1", 4),
            ("one x8", ["--accumulate", "8"], 1, "2", 8),
            ("pp=2 x8", ["--mesh", "pp=2", "--microbatches", "8"], 2, "1", 8)]
    first = None
    for name, flags, ranks, threads, micro in runs:
        if micro != 1:
            first = None
        binary = os.path.join(work, "train-" + name.replace("=", "")
                              .replace(" ", ""))
        subprocess.run([args.compile, src, "--train", "--optimizer", "adamw",
                        "--lr", "1e-4", *flags, "-o", binary], check=True,
                       cwd=work)
        env = dict(os.environ, OMP_NUM_THREADS=threads,
                   OPENBLAS_NUM_THREADS=threads)
        log = os.path.join(work, name + ".jsonl")
        cmd = [binary, "--tokens", "tokens.bin", "--steps", str(args.steps),
               "--quiet", "--log-json", log]
        pipelined = "pp=" in " ".join(flags)
        if pipelined:
            # The measured timeline: each rank's idle share of the step.
            cmd += ["--trace", "timeline.json", "--trace-steps",
                    str(args.steps)]
        if ranks > 1:
            cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
                   str(ranks), "-x", "OMP_NUM_THREADS", "-x",
                   "OPENBLAS_NUM_THREADS", *cmd]
        subprocess.run(cmd, check=True, cwd=work, env=env)
        records = [json.loads(line) for line in open(log)]
        ms = statistics.median(r["ms"] for r in records[1:])
        rate = micro * batch * seq / (ms / 1000)
        loss = records[0]["loss"]
        first = first if first is not None else loss
        idle = ""
        if pipelined:
            other = json.load(open(os.path.join(work, "timeline.json")))[
                "otherData"]
            idle = (f"  measured idle {other['idle_fraction']:.3f} of the "
                    f"step (transfers {other['transfer_fraction']:.3f}; "
                    f"closed form {other['closed_form_bubble']:.3f})")
        print(f"{name:10} {ranks:5} {threads:>12} {rate:10.0f} "
              f"{rate / ranks:10.0f} {ms:8.1f} "
              f"{abs(loss - first) / first:16.1e}{idle}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile",
                        default=os.path.join(ROOT, "build/bin/cleave-compile"))
    parser.add_argument("--layers", default="12,24,48")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--mesh", default="dp=2,tp=2")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--skip-compile-time", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    args.compile = os.path.abspath(args.compile)
    with tempfile.TemporaryDirectory(prefix="cleave-bench-") as work:
        if not args.skip_compile_time:
            compile_time(args, work)
        if not args.skip_throughput:
            throughput(args, work)


if __name__ == "__main__":
    main()
