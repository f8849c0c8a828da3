#!/usr/bin/python3
"""Export a tiny GPT-2 style decoder to ONNX.

vocab 64, 2 layers, hidden 32, 4 heads of 8, MLP 32 -> 128 -> 32, sequence 8,
batch 2. Learned position embeddings indexed by torch.arange inside forward,
pre-LayerNorm blocks, hand-written causal attention (mask from torch.tril
built inside forward), GELU with the tanh approximation, final LayerNorm, LM
head tied to the token embedding.

Regenerate from anywhere with:  /usr/bin/python3 examples/gpt/generate.py
Writes model.onnx, input_idx.npy and expected_logits.npy next to this script.
`--layers N --out DIR` writes a deeper variant elsewhere (the pipeline tests
need more layers than stages).
"""

import math
import os
import sys

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from onnx_export_util import export_example, make_distinct  # noqa: E402

VOCAB, LAYERS, HIDDEN, HEADS, SEQ, BATCH = 64, 2, 32, 4, 8, 2
HEAD_DIM = HIDDEN // HEADS
MAX_POS = SEQ


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(HIDDEN, dim=2)
        q = q.view(b, t, HEADS, HEAD_DIM).transpose(1, 2)  # [b, h, t, d]
        k = k.view(b, t, HEADS, HEAD_DIM).transpose(1, 2)
        v = v.view(b, t, HEADS, HEAD_DIM).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(HEAD_DIM)
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool, device=x.device))
        att = att.masked_fill(~causal, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = att @ v  # [b, h, t, d]
        y = y.transpose(1, 2).reshape(b, t, c)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.act = nn.GELU(approximate="tanh")
        self.proj = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x):
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(MAX_POS, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one parameter, exported once

    def forward(self, idx):
        b, t = idx.shape
        pos = torch.arange(t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def main():
    import argparse
    global LAYERS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=LAYERS)
    parser.add_argument("--out", default=HERE)
    args = parser.parse_args()
    LAYERS = args.layers
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    model = GPT().eval()
    make_distinct(model)  # layer norms start at 1 / 0: keep them apart in the export
    idx = torch.randint(0, VOCAB, (BATCH, SEQ), dtype=torch.long)
    export_example(model, (idx,), ["idx"], ["logits"], args.out)


if __name__ == "__main__":
    main()
