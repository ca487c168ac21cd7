#!/usr/bin/env python3
"""Exports samples/effnet_block and samples/vit_block (issue #19: an EfficientNet-style block and
a ViT block, next to samples/unet), random weights, float32, batch 1, eval mode; with PyTorch's
outputs.

  samples/effnet_block  an EfficientNet-B0-style stage of three MBConv blocks (1x1 expand conv,
                        BN, SiLU; depthwise conv, BN, SiLU; squeeze-excitation; 1x1 project conv,
                        BN; residual add where the shapes allow), batch norm with random running
                        statistics: [1,24,56,56] -> [1,40,28,28]
  samples/vit_block     a ViT-Tiny encoder block (pre-LayerNorm, self-attention with 3 heads
                        of 64, written out with q/k/v Linear layers and softmax(QK^T/sqrt(d))V,
                        residual; LayerNorm, MLP 192->768 GELU ->192, residual):
                        [1,197,192] -> [1,197,192]

Each folder: model.pt2 (after run_decompositions()), model.raw.pt2 (as export() returned it),
inputs/0.npy, expected/0.npy.

Usage (needs torch >= 2.9 and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_block_samples.py [SAMPLES_DIR]     (default samples/)
"""
import math
import os
import sys

import numpy as np
import torch
from torch import nn


def randomize_batch_norms(model, gen):
    # Non-trivial running statistics and affine parameters, so that eval-mode batch norm is not
    # (nearly) the identity.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.2)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) * 1.5 + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=gen) * 0.8 + 0.6)
                m.bias.copy_(torch.randn(m.num_features, generator=gen) * 0.2)


class SqueezeExcitation(nn.Module):
    def __init__(self, channels, squeezed):
        super().__init__()
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        s = self.expand(nn.functional.silu(self.reduce(s)))
        return x * torch.sigmoid(s)


class MBConv(nn.Module):
    """EfficientNet's inverted residual block: expand, depthwise, squeeze-excitation, project."""

    def __init__(self, cin, cout, kernel, stride, expand_ratio=6, se_ratio=0.25):
        super().__init__()
        mid = cin * expand_ratio
        self.expand = nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.SiLU())
        self.depthwise = nn.Sequential(
            nn.Conv2d(mid, mid, kernel, stride=stride, padding=kernel // 2, groups=mid, bias=False),
            nn.BatchNorm2d(mid), nn.SiLU())
        self.se = SqueezeExcitation(mid, max(1, int(cin * se_ratio)))
        self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.project(self.se(self.depthwise(self.expand(x))))
        return x + y if self.residual else y


class EffNetStage(nn.Module):
    # EfficientNet-B0's stages 2 and 3 at 56x56: a 3x3 block 24 -> 24 (residual), then the 5x5
    # stride-2 block 24 -> 40 and a 5x5 block 40 -> 40 (residual).
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(
            MBConv(24, 24, 3, 1),   # 24 -> 144 -> 24, SE 144 -> 6 -> 144, residual
            MBConv(24, 40, 5, 2),   # 24 -> 144 -> 40, 56x56 -> 28x28, SE 144 -> 6 -> 144
            MBConv(40, 40, 5, 1),   # 40 -> 240 -> 40, SE 240 -> 10 -> 240, residual
        )

    def forward(self, x):  # [1, 24, 56, 56] -> [1, 40, 28, 28]
        return self.blocks(x)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):  # [B, T, C]
        b, t, c = x.shape
        split = lambda y: y.reshape(b, t, self.heads, self.head_dim).transpose(1, 2)  # [B, H, T, D]
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class ViTBlock(nn.Module):
    # ViT-Tiny: width 192, 3 heads of 64, MLP 768; 196 patches + the class token. One block (two
    # would double the archives, ~4 MB each, for nothing new).
    def __init__(self, dim=192, heads=3, mlp=768):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x):
        # [1, 197, 192] -> [1, 197, 192]
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def save(folder, arrays):
    os.makedirs(folder, exist_ok=True)
    for k, a in enumerate(arrays):
        np.save(os.path.join(folder, "%d.npy" % k), a.detach().contiguous().numpy())


def export(out, model, example):
    ep = torch.export.export(model, (example,))
    os.makedirs(out, exist_ok=True)
    torch.export.save(ep.run_decompositions(), os.path.join(out, "model.pt2"))
    torch.export.save(ep, os.path.join(out, "model.raw.pt2"))


def write_sample(out, model, x):
    export(out, model, x)
    save(os.path.join(out, "inputs"), [x])
    with torch.no_grad():
        save(os.path.join(out, "expected"), [model(x)])


def main():
    samples = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "samples")
    torch.manual_seed(19)
    gen = torch.Generator().manual_seed(19)
    rng = np.random.default_rng(19)
    floats = lambda *shape: torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))

    effnet = EffNetStage()
    randomize_batch_norms(effnet, gen)
    write_sample(os.path.join(samples, "effnet_block"), effnet.eval(), floats(1, 24, 56, 56))

    vit = ViTBlock()
    with torch.no_grad():  # LayerNorm's affine parameters away from (1, 0)
        for m in vit.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(torch.rand(m.normalized_shape, generator=gen) * 0.8 + 0.6)
                m.bias.copy_(torch.randn(m.normalized_shape, generator=gen) * 0.1)
    write_sample(os.path.join(samples, "vit_block"), vit.eval(), floats(1, 197, 192))
    print("exported", os.path.join(samples, "effnet_block"), "and", os.path.join(samples, "vit_block"))


if __name__ == "__main__":
    main()
