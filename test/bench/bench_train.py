#!/usr/bin/python3
"""Training-step throughput of the gpt example and a larger configuration of
it: the training binary compiled by cleave-compile against PyTorch's own
loop, on this machine, with the same weights, data and optimizer (AdamW,
cross-entropy), one run side by side.

  /usr/bin/python3 test/bench/bench_train.py [--compile build/bin/cleave-compile]
                                             [--warmup 2] [--repeat 5] [--threads 2]

A step is forward, backward and the optimizer update of one batch. Both sides
use --threads threads, run --warmup steps untimed, then take the median step
time of --repeat steps (Cleave's from the per-step time in its --log-json
log). Prints tokens/s for both, their ratio, and achieved GFLOP/s against the
machine's sgemm ceiling (--ceiling, 185 GFLOP/s measured on the two cores of
the development machines). The flop count covers the matmuls only:

  6 P T + 12 L B S^2 H

with T = B S tokens, P = 12 L H^2 + V H matmul weights (qkv, attention
output, the MLP's two layers, and the LM head), the backward pass costing
twice the forward; 12 L B S^2 H is q k^T and att v forward and backward
(full squares, the causal half is not subtracted). The last column is the
relative difference of the first step's loss, which both compute from the
same weights and batch.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_forward import selected_models, setup  # noqa: E402

LR = 1e-4


def train_flops(vocab, layers, hidden, seq, batch):
    """Matmul FLOPs of one training step: 6 P T + 12 L B S^2 H."""
    tokens = batch * seq
    params = 12 * layers * hidden * hidden + vocab * hidden
    return 6 * params * tokens + 12 * layers * batch * seq * seq * hidden


def batch_rows(step, batch, samples):
    """The trainer's batches: step k takes samples ((k - 1) B + i) mod N."""
    return [((step - 1) * batch + i) % samples for i in range(batch)]


def time_torch(model, idx, labels, batch, steps, warmup):
    """Median seconds of a PyTorch AdamW step, and the first step's loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    model.train()
    times, first = [], None
    for k in range(1, warmup + steps + 1):
        rows = torch.tensor(batch_rows(k, batch, idx.shape[0]))
        start = time.perf_counter()
        opt.zero_grad()
        logits = model(idx[rows])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               labels[rows].reshape(-1))
        loss.backward()
        opt.step()
        elapsed = time.perf_counter() - start
        if first is None:
            first = loss.item()
        if k > warmup:
            times.append(elapsed)
    return float(np.median(times)), first


def step_seconds(record, tokens):
    """A step's time from a --log-json record: its milliseconds, or else
    tokens / tokens_per_s."""
    for key in ("ms", "step_ms", "time_ms"):
        if key in record:
            return float(record[key]) / 1000.0
    return tokens / float(record["tokens_per_s"])


def training_batches(vocab, seq, batch):
    """Two batches' worth of token ids and their next-token labels."""
    torch.manual_seed(1)
    stream = torch.randint(0, vocab, (2 * batch, seq + 1), dtype=torch.long)
    return stream[:, :-1].contiguous(), stream[:, 1:].contiguous()


def time_cleave(compiler, model, idx, labels, steps, warmup, workdir, name,
                flags=()):
    """Median seconds of a compiled AdamW step (compiled with the extra
    cleave-compile `flags`), and the first step's loss."""
    batch = idx.shape[0] // 2
    onnx_path = os.path.join(workdir, name + ".onnx")
    torch.onnx.export(model, (idx[:batch],), onnx_path, input_names=["idx"],
                      output_names=["logits"], opset_version=17,
                      do_constant_folding=False)
    prog = os.path.join(workdir, name)
    subprocess.run([compiler, onnx_path, "--train", "--loss", "cross-entropy",
                    "--optimizer", "adamw", "--lr", repr(LR), *flags, "-o", prog],
                   check=True)
    idx_path = os.path.join(workdir, name + "-idx.npy")
    labels_path = os.path.join(workdir, name + "-labels.npy")
    np.save(idx_path, idx.numpy())
    np.save(labels_path, labels.numpy())
    log = os.path.join(workdir, name + ".jsonl")
    subprocess.run([prog, "--inputs", idx_path, "--targets", labels_path,
                    "--steps", str(warmup + steps), "--log-json", log, "--quiet"],
                   check=True)
    with open(log) as f:
        records = {r["step"]: r for r in (json.loads(line) for line in f if line.strip())
                   if "step" in r}
    tokens = idx[:batch].numel()
    times = [step_seconds(records[k], tokens) for k in range(warmup + 1, warmup + steps + 1)]
    return float(np.median(times)), float(records[1]["loss"])


def main():
    def add_warmup(parser):
        parser.add_argument("--warmup", type=int, default=2)

    args, gpt = setup(__doc__, repeat=5, add_arguments=add_warmup)
    print(f"{'model':32} {'PyTorch tok/s':>14} {'Cleave tok/s':>13} {'ratio':>6} "
          f"{'PyTorch GFLOP/s':>16} {'Cleave GFLOP/s':>15} {'of ceiling':>10} "
          f"{'step-1 loss diff':>16}")
    with tempfile.TemporaryDirectory() as workdir:
        for i, name, config, model in selected_models(args, gpt):
            vocab, layers, hidden, heads, seq, batch = config
            idx, labels = training_batches(vocab, seq, batch)
            # Cleave first: it exports the weights before PyTorch trains them.
            t_cleave, loss_cleave = time_cleave(args.compile, model, idx, labels,
                                                args.repeat, args.warmup, workdir,
                                                f"model{i}")
            t_torch, loss_torch = time_torch(model, idx, labels, batch, args.repeat,
                                             args.warmup)
            tokens = batch * seq
            flops = train_flops(vocab, layers, hidden, seq, batch)
            gflops_torch = flops / t_torch / 1e9
            gflops = flops / t_cleave / 1e9
            print(f"{name:32} {tokens / t_torch:14.0f} {tokens / t_cleave:13.0f} "
                  f"{t_torch / t_cleave:6.2f} {gflops_torch:16.1f} {gflops:15.1f} "
                  f"{100 * gflops / args.ceiling:9.1f}% "
                  f"{abs(loss_cleave - loss_torch) / abs(loss_torch):16.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
