#!/usr/bin/python3
"""Export a tiny Llama-style decoder to ONNX.

vocab 64, 2 layers, hidden 32, 4 heads of 8, SwiGLU MLP 32 -> 64 -> 32,
sequence 8, batch 2. Hand-written RMSNorm, rotary position embeddings whose
cos/sin are computed inside forward from torch.arange (rotate-half form, as in
Hugging Face Llama), hand-written causal attention, untied LM head, no biases.

Regenerate from anywhere with:  /usr/bin/python3 examples/llama/generate.py
Writes model.onnx, input_idx.npy and expected_logits.npy next to this script.
"""

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
FFN = 64
ROPE_THETA = 10000.0
EPS = 1e-5


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_cos_sin(t, device):
    """cos, sin of shape [t, HEAD_DIM], computed from torch.arange (no buffers)."""
    inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, device=device).float() / HEAD_DIM))
    pos = torch.arange(t, device=device).float()
    freqs = pos[:, None] * inv_freq[None, :]  # [t, d/2]
    emb = torch.cat((freqs, freqs), dim=-1)  # [t, d]
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1 = x[..., : HEAD_DIM // 2]
    x2 = x[..., HEAD_DIM // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x, cos, sin):
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.wk = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.wv = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.wo = nn.Linear(HIDDEN, HIDDEN, bias=False)

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        q = self.wq(x).view(b, t, HEADS, HEAD_DIM).transpose(1, 2)  # [b, h, t, d]
        k = self.wk(x).view(b, t, HEADS, HEAD_DIM).transpose(1, 2)
        v = self.wv(x).view(b, t, HEADS, HEAD_DIM).transpose(1, 2)
        q = apply_rotary(q, cos, sin)
        k = apply_rotary(k, cos, sin)
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(HEAD_DIM)
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool, device=x.device))
        att = att.masked_fill(~causal, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, c)
        return self.wo(y)


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(HIDDEN, FFN, bias=False)  # gate
        self.w3 = nn.Linear(HIDDEN, FFN, bias=False)  # up
        self.w2 = nn.Linear(FFN, HIDDEN, bias=False)  # down

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = RMSNorm(HIDDEN)
        self.attention = Attention()
        self.ffn_norm = RMSNorm(HIDDEN)
        self.feed_forward = FeedForward()

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        x = x + self.feed_forward(self.ffn_norm(x))
        return x


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(HIDDEN)
        self.output = nn.Linear(HIDDEN, VOCAB, bias=False)  # untied

    def forward(self, idx):
        b, t = idx.shape
        cos, sin = rotary_cos_sin(t, idx.device)
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))


def main():
    torch.manual_seed(0)
    model = Llama().eval()
    make_distinct(model)  # RMSNorm weights start at 1: keep them apart in the export
    idx = torch.randint(0, VOCAB, (BATCH, SEQ), dtype=torch.long)
    export_example(model, (idx,), ["idx"], ["logits"], HERE)


if __name__ == "__main__":
    main()
