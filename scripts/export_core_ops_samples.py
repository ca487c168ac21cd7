#!/usr/bin/env python3
"""Exports test/data/core_ops/<case>: small models using core ATen ops that real exports
(torchvision, timm, transformers) reach after run_decompositions(): sort and topk, batch norm
with batch statistics (_native_batch_norm_legit.no_stats), _embedding_bag and grid_sampler_2d;
with PyTorch's outputs.

Each case folder: model.pt2 (core ATen, run_decompositions()), model.raw.pt2 (training IR as
export() returned it), inputs/N.npy, expected/N.npy (eager PyTorch on the CPU, float32).

Usage (needs torch >= 2.9 and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_core_ops_samples.py [OUT_DIR [CASE...]]
OUT_DIR defaults to test/data/core_ops; CASEs (folder names) limit the export to those.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


class SortTopk(torch.nn.Module):
    """x has ties (small integers) and a NaN: sort is stable and puts NaN last ascending, first
    descending. y has distinct values: PyTorch's topk does not keep equal elements in input order,
    so its indices are only compared where there are no ties."""

    def forward(self, x, y, z):
        asc, asc_i = torch.sort(x, dim=-1)
        desc, desc_i = torch.sort(x, dim=1, descending=True, stable=True)
        by_col = torch.argsort(x, dim=0)
        top, top_i = torch.topk(y, 5, dim=1)
        low, low_i = torch.topk(y, 3, dim=0, largest=False)
        zs, zs_i = torch.sort(z, descending=True)
        return asc, asc_i, desc, desc_i, by_col, top, top_i, low, low_i, zs, zs_i


def sort_topk_inputs(rng):
    x = rng.integers(0, 5, (4, 13)).astype(np.float32)
    x[1, 4] = np.nan
    x[2, 0] = -np.inf
    y = rng.permutation(3 * 40).reshape(3, 40).astype(np.float32) / 7
    z = rng.integers(-3, 3, (2, 9)).astype(np.int64)
    return x, y, z


class InstanceNorm(torch.nn.Module):
    """InstanceNorm2d without running statistics, and BatchNorm2d in training mode without them:
    both export as _native_batch_norm_legit.no_stats."""

    def __init__(self):
        super().__init__()
        self.inorm = torch.nn.InstanceNorm2d(3, affine=True)
        self.bnorm = torch.nn.BatchNorm2d(3, track_running_stats=False)
        self.plain = torch.nn.InstanceNorm2d(3)

    def forward(self, x):
        return self.inorm(x), self.bnorm(x * 2 + 1), self.plain(x)


class EmbeddingBags(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bags = torch.nn.ModuleList(torch.nn.EmbeddingBag(10, 4, mode=m) for m in ("sum", "mean", "max"))
        self.last = torch.nn.EmbeddingBag(10, 4, mode="sum", include_last_offset=True)

    def forward(self, idx, offsets, weights):
        outs = [bag(idx, offsets) for bag in self.bags]
        outs.append(self.bags[0](idx, offsets, per_sample_weights=weights))
        outs.append(self.last(idx, offsets))
        return tuple(outs)


class EmbeddingBagSizes(torch.nn.Module):
    """Reads _embedding_bag's bag_size (an output for the backward pass, which foundryc does not
    compute): the compiler must refuse it by name."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(10, 4))

    def forward(self, idx, offsets):
        return torch.ops.aten._embedding_bag(self.weight, idx, offsets, False, 1)[2]


class GridSample(torch.nn.Module):
    def forward(self, x, grid):
        outs = []
        for mode in ("bilinear", "nearest"):
            for padding in ("zeros", "border"):
                for align in (False, True):
                    outs.append(F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align))
        return tuple(outs)


def cases(rng):
    randn = lambda *s: torch.from_numpy(rng.standard_normal(s, dtype=np.float32))
    torch.manual_seed(5)
    emb = EmbeddingBags()
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 7])
    offsets = torch.tensor([0, 3, 3, 7])  # the second bag is empty
    yield "sort_topk", SortTopk(), tuple(torch.from_numpy(a) for a in sort_topk_inputs(rng))
    inorm = InstanceNorm().train()
    with torch.no_grad():
        inorm.inorm.weight.uniform_(0.5, 1.5)
        inorm.inorm.bias.uniform_(-0.5, 0.5)
    yield "instance_norm", inorm, (randn(2, 3, 5, 6),)
    yield "embedding_bag", emb.eval(), (idx, offsets, torch.rand(10))
    yield "embedding_bag_sizes", EmbeddingBagSizes(), (idx, offsets)
    grid = torch.from_numpy(rng.uniform(-1.3, 1.3, (2, 5, 7, 2)).astype(np.float32))
    yield "grid_sample", GridSample(), (randn(2, 3, 6, 8), grid)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test", "data", "core_ops")
    only = set(sys.argv[2:])
    rng = np.random.default_rng(17)
    for name, model, inputs in cases(rng):
        if only and name not in only:
            continue
        folder = os.path.join(out, name)
        os.makedirs(os.path.join(folder, "inputs"), exist_ok=True)
        os.makedirs(os.path.join(folder, "expected"), exist_ok=True)
        ep = torch.export.export(model, inputs)
        torch.export.save(ep.run_decompositions(), os.path.join(folder, "model.pt2"))
        torch.export.save(ep, os.path.join(folder, "model.raw.pt2"))
        with torch.no_grad():
            outputs = model(*inputs)
        for i, t in enumerate(inputs):
            np.save(os.path.join(folder, "inputs", f"{i}.npy"), t.numpy())
        for i, t in enumerate(outputs):
            np.save(os.path.join(folder, "expected", f"{i}.npy"), t.numpy())


if __name__ == "__main__":
    main()
