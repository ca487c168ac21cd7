#!/usr/bin/env python3
"""Exports samples/long_attention (issue #19: attention over a long sequence, which foundryc runs
as one fused call instead of materializing the score matrix), random weights, float32, batch 1,
with PyTorch's outputs.

  samples/long_attention  x [1, 1024, 128] and an additive key mask [1, 1, 1, 1024] (0, or -inf
                          on the last 100 keys) -> two [1, 1024, 128] outputs:
                          0: F.scaled_dot_product_attention(q, k, v, is_causal=True), 2 heads of 64
                          1: softmax(q k^T / 8 + mask) v written out, 4 heads of 32, the scores
                             multiplied by 1/8 rather than divided
                          each through its own q/k/v Linear(128, 128) and an output Linear.

Each folder: model.pt2 (after run_decompositions()), model.raw.pt2 (as export() returned it),
inputs/0.npy, inputs/1.npy, expected/0.npy, expected/1.npy.

Usage (needs torch >= 2.9 and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_attention_sample.py [SAMPLES_DIR]     (default samples/)
"""
import os
import sys

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class Heads(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.ModuleList(nn.Linear(dim, dim) for _ in range(3))
        self.proj = nn.Linear(dim, dim)

    def split(self, x):  # [B, T, C] -> q, k, v [B, H, T, D]
        b, t, c = x.shape
        return [m(x).reshape(b, t, self.heads, self.head_dim).transpose(1, 2) for m in self.qkv]

    def merge(self, y):  # [B, H, T, D] -> [B, T, C]
        b, h, t, d = y.shape
        return self.proj(y.transpose(1, 2).reshape(b, t, h * d))


class LongAttention(nn.Module):
    def __init__(self, dim=128):
        super().__init__()
        self.causal = Heads(dim, 2)
        self.masked = Heads(dim, 4)

    def forward(self, x, mask):
        q, k, v = self.causal.split(x)
        causal = self.causal.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))
        q, k, v = self.masked.split(x)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / 8.0) + mask
        masked = self.masked.merge(torch.softmax(scores, dim=-1) @ v)
        return causal, masked


def save(folder, arrays):
    os.makedirs(folder, exist_ok=True)
    for k, a in enumerate(arrays):
        np.save(os.path.join(folder, "%d.npy" % k), a.detach().contiguous().numpy())


def main():
    samples = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "samples")
    out = os.path.join(samples, "long_attention")
    torch.manual_seed(19)
    rng = np.random.default_rng(19)
    x = torch.from_numpy(rng.standard_normal((1, 1024, 128), dtype=np.float32))
    mask = torch.zeros(1, 1, 1, 1024)
    mask[..., -100:] = float("-inf")
    model = LongAttention().eval()
    ep = torch.export.export(model, (x, mask))
    os.makedirs(out, exist_ok=True)
    torch.export.save(ep.run_decompositions(), os.path.join(out, "model.pt2"))
    torch.export.save(ep, os.path.join(out, "model.raw.pt2"))
    save(os.path.join(out, "inputs"), [x, mask])
    with torch.no_grad():
        save(os.path.join(out, "expected"), list(model(x, mask)))
    print("exported", out)


if __name__ == "__main__":
    main()
