#!/usr/bin/python3
"""Export a tiny decoder whose MLPs are top-2 mixtures of 4 experts to ONNX.

vocab 64, 2 layers, hidden 32, 4 heads of 8, 4 experts of 32 -> 64 -> 32
(GELU, tanh approximation), top-2 routing, sequence 8, batch 2. GPT-style
otherwise: learned position embeddings indexed by torch.arange inside forward,
pre-LayerNorm, hand-written causal attention, final LayerNorm, untied LM head.

The mixture is written densely so that every shape is static: softmax router,
torch.topk(k=2), the two gates renormalized, a dense [T, E] gate matrix built
by comparing the top-k indices with torch.arange(E) (no scatter, nonzero or
index_add), every expert applied to every token through stacked expert weights
[E, H, F] and [E, F, H] with broadcasting torch.matmul, and a gate-weighted sum
over the experts.

Regenerate from anywhere with:  /usr/bin/python3 examples/moe/generate.py
Writes model.onnx, input_idx.npy and expected_logits.npy next to this script
(--out DIR elsewhere); --batch N exports the same weights for batch N
(examples/moe/batch4 is --batch 4).
"""

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from onnx_export_util import export_example, make_distinct  # noqa: E402

VOCAB, LAYERS, HIDDEN, HEADS, SEQ, BATCH = 64, 2, 32, 4, 8, 2
HEAD_DIM = HIDDEN // HEADS
EXPERTS, TOP_K, EXPERT_FFN = 4, 2, 64
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
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.proj(y)


class MoE(nn.Module):
    """Top-2 of 4 experts, computed densely (every expert on every token)."""

    def __init__(self):
        super().__init__()
        self.router = nn.Linear(HIDDEN, EXPERTS, bias=False)
        self.w1 = nn.Parameter(torch.randn(EXPERTS, HIDDEN, EXPERT_FFN) / math.sqrt(HIDDEN))
        self.w2 = nn.Parameter(torch.randn(EXPERTS, EXPERT_FFN, HIDDEN) / math.sqrt(EXPERT_FFN))

    def forward(self, x):
        b, t, c = x.shape
        tokens = x.reshape(b * t, c)  # [T, H]
        probs = torch.softmax(self.router(tokens), dim=-1)  # [T, E]
        top_p, top_i = torch.topk(probs, TOP_K, dim=-1)  # [T, k]
        top_p = top_p / top_p.sum(dim=-1, keepdim=True)  # renormalize the k gates
        expert_ids = torch.arange(EXPERTS, device=x.device)  # [E]
        one_hot = (top_i.unsqueeze(-1) == expert_ids).to(x.dtype)  # [T, k, E]
        gates = (top_p.unsqueeze(-1) * one_hot).sum(dim=1)  # [T, E], zero off the top-k
        h = torch.matmul(tokens.unsqueeze(0), self.w1)  # [1,T,H] @ [E,H,F] -> [E, T, F]
        h = F.gelu(h, approximate="tanh")
        y = torch.matmul(h, self.w2)  # [E, T, H]
        out = (y * gates.transpose(0, 1).unsqueeze(-1)).sum(dim=0)  # [T, H]
        return out.reshape(b, t, c)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.moe = MoE()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.moe(self.ln_2(x))
        return x


class MoEDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(MAX_POS, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, idx):
        b, t = idx.shape
        pos = torch.arange(t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=BATCH,
                        help=f"the batch the model is exported for (default "
                             f"{BATCH}; the weights do not depend on it)")
    parser.add_argument("--out", default=HERE,
                        help="the directory to write model.onnx and the "
                             "reference into (default: this example's)")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = MoEDecoder().eval()
    make_distinct(model)  # layer norms start at 1 / 0: keep them apart in the export
    idx = torch.randint(0, VOCAB, (args.batch, SEQ), dtype=torch.long)
    os.makedirs(args.out, exist_ok=True)
    export_example(model, (idx,), ["idx"], ["logits"], args.out)


if __name__ == "__main__":
    main()
