#!/usr/bin/python3
"""Forward-pass throughput of the gpt example and a larger configuration of
it: the program compiled by cleave-compile against PyTorch, on this machine,
with the same weights and inputs, one run side by side.

  /usr/bin/python3 test/bench/bench_forward.py [--compile build/bin/cleave-compile]
                                               [--repeat 20] [--threads 2]

Prints tokens/s for both, their ratio, and achieved GFLOP/s against the
machine's sgemm ceiling (--ceiling, 185 GFLOP/s measured on the two cores of
the development machines).
"""

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CONFIGS = {
    # name: vocab, layers, hidden, heads, seq, batch
    "gpt (example)": (64, 2, 32, 4, 8, 2),
    "gpt (6x512, seq 256, batch 8)": (8192, 6, 512, 8, 256, 8),
}


def load_gpt_module():
    path = os.path.join(ROOT, "examples", "gpt", "generate.py")
    spec = importlib.util.spec_from_file_location("gpt_generate", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    spec.loader.exec_module(module)
    return module


def build_model(gpt, vocab, layers, hidden, heads, seq):
    # The example's classes read these module constants when built and run.
    gpt.VOCAB, gpt.LAYERS, gpt.HIDDEN, gpt.HEADS = vocab, layers, hidden, heads
    gpt.SEQ, gpt.MAX_POS, gpt.HEAD_DIM = seq, seq, hidden // heads
    torch.manual_seed(0)
    model = gpt.GPT().eval()
    gpt.make_distinct(model)
    return model


def forward_flops(vocab, layers, hidden, seq, batch):
    """Matmul FLOPs of one forward pass (2 per multiply-add)."""
    tokens = batch * seq
    per_layer = 24 * tokens * hidden * hidden + 4 * batch * seq * seq * hidden
    return layers * per_layer + 2 * tokens * hidden * vocab


def time_torch(model, idx, repeat):
    with torch.no_grad():
        for _ in range(2):
            model(idx)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            model(idx)
            times.append(time.perf_counter() - start)
    return float(np.median(times))


def time_cleave(compiler, model, idx, repeat, workdir, name):
    onnx_path = os.path.join(workdir, name + ".onnx")
    torch.onnx.export(model, (idx,), onnx_path, input_names=["idx"],
                      output_names=["logits"], opset_version=17,
                      do_constant_folding=False)
    prog = os.path.join(workdir, name)
    subprocess.run([compiler, onnx_path, "-o", prog], check=True)
    inp = os.path.join(workdir, name + "-idx.npy")
    np.save(inp, idx.numpy())
    out = subprocess.run(
        [prog, "--input", "idx=" + inp, "--output-dir",
         os.path.join(workdir, name + "-out"), "--repeat", str(repeat)],
        check=True, capture_output=True, text=True)
    match = re.search(r"forward: median ([0-9.]+) ms", out.stdout + out.stderr)
    if not match:
        raise RuntimeError("no timing in the program's output:\n" + out.stdout)
    got = np.load(os.path.join(workdir, name + "-out", "logits.npy"))
    with torch.no_grad():
        expected = model(idx).numpy()
    err = float(np.max(np.abs(got - expected)) / max(np.max(np.abs(expected)), 1e-30))
    return float(match.group(1)) / 1000.0, err


def setup(doc, repeat, add_arguments=None):
    """The start of every benchmark here: parses --compile, --repeat (default
    `repeat`), --threads, --ceiling, --only and whatever `add_arguments(parser)`
    adds, limits PyTorch, OpenMP and OpenBLAS to --threads threads, and loads
    the gpt example. Returns the parsed arguments and the example's module."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--compile", default=os.path.join(ROOT, "build/bin/cleave-compile"))
    parser.add_argument("--repeat", type=int, default=repeat)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ceiling", type=float, default=185.0,
                        help="sgemm GFLOP/s of this machine")
    parser.add_argument("--only", default="")
    if add_arguments:
        add_arguments(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    return args, load_gpt_module()


def selected_models(args, gpt):
    """(index, name, (vocab, layers, hidden, heads, seq, batch), model) of
    each configuration that --only selects."""
    for i, (name, config) in enumerate(CONFIGS.items()):
        if args.only in name:
            vocab, layers, hidden, heads, seq, _ = config
            yield i, name, config, build_model(gpt, vocab, layers, hidden, heads, seq)


def main():
    args, gpt = setup(__doc__, repeat=20)
    print(f"{'model':32} {'PyTorch tok/s':>14} {'Cleave tok/s':>13} {'ratio':>6} "
          f"{'Cleave GFLOP/s':>15} {'of ceiling':>10} {'max rel err':>11}")
    with tempfile.TemporaryDirectory() as workdir:
        for i, name, config, model in selected_models(args, gpt):
            vocab, layers, hidden, heads, seq, batch = config
            torch.manual_seed(1)
            idx = torch.randint(0, vocab, (batch, seq), dtype=torch.long)
            t_torch = time_torch(model, idx, args.repeat)
            t_cleave, err = time_cleave(args.compile, model, idx, args.repeat,
                                        workdir, f"model{i}")
            tokens = batch * seq
            flops = forward_flops(vocab, layers, hidden, seq, batch)
            gflops = flops / t_cleave / 1e9
            print(f"{name:32} {tokens / t_torch:14.0f} {tokens / t_cleave:13.0f} "
                  f"{t_torch / t_cleave:6.2f} {gflops:15.1f} "
                  f"{100 * gflops / args.ceiling:9.1f}% {err:11.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
