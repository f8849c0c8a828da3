#!/usr/bin/python3
"""Export a two-layer MLP to ONNX: 16 -> 32 (exact GELU) -> 4, batch 8.

Regenerate from anywhere with:  /usr/bin/python3 examples/mlp/generate.py
Writes model.onnx, input_x.npy and expected_logits.npy next to this script.
"""

import os
import sys

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from onnx_export_util import export_example  # noqa: E402

BATCH, IN, HIDDEN, CLASSES = 8, 16, 32, 4


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.act = nn.GELU()  # exact form: 0.5 * x * (1 + erf(x / sqrt(2)))
        self.fc2 = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def main():
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(BATCH, IN)
    export_example(model, (x,), ["x"], ["logits"], HERE)


if __name__ == "__main__":
    main()
