#!/usr/bin/env python3
"""Exports samples/dyn_sort: sorting rows whose count and length are both dynamic, with PyTorch's
outputs at several sizes.

    x float32 [R, N]: values from a small set (many ties), NaN, +-inf, 0.0 and -0.0
    y int64   [R, N]: values from 0..9 (many ties)
    outputs:  sort(x, descending, stable) values and indices; argsort(y, stable) ascending;
              msort(x) (sort along dim 0); topk(x, 5) values; x gathered at topk(x, 5)'s indices
              (PyTorch's topk keeps no order among equal elements, so its indices are checked by
              what they point at); topk(y, 7, largest=False) values
    R 1..8, N 7..100000; references at (2, 300) in inputs/ and expected/, and in
    cases/r1_n7, r3_n500, r2_n1500 (longer rows: the test of 50000-wide rows computes its references)

Usage (needs torch >= 2.9 and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_sort_sample.py [SAMPLES_DIR]     (default samples/)
"""
import os
import sys

import numpy as np
import torch


class SortRows(torch.nn.Module):
    def forward(self, x, y):
        values, indices = torch.sort(x, dim=-1, descending=True, stable=True)
        top_values, top_indices = torch.topk(x, 5, dim=-1)
        low_values, _ = torch.topk(y, 7, dim=-1, largest=False)
        return (values, indices, torch.argsort(y, dim=-1, stable=True), torch.msort(x), top_values,
                torch.gather(x, -1, top_indices), low_values)


def inputs(rng, r, n):
    choices = np.array([-2.0, -1.5, -0.5, -0.0, 0.0, 0.5, 1.0, 2.5, np.nan, np.inf, -np.inf], dtype=np.float32)
    x = rng.choice(choices, size=(r, n)).astype(np.float32)
    x[:, ::3] = rng.standard_normal((r, len(range(0, n, 3)))).astype(np.float32)  # some distinct values too
    y = rng.integers(0, 10, size=(r, n), dtype=np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def save(folder, arrays):
    os.makedirs(folder, exist_ok=True)
    for k, a in enumerate(arrays):
        np.save(os.path.join(folder, "%d.npy" % k), a.detach().contiguous().numpy())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "samples")
    out = os.path.join(out, "dyn_sort")
    rng = np.random.default_rng(0)
    model = SortRows().eval()
    rows, length = torch.export.Dim("rows", min=1, max=8), torch.export.Dim("length", min=7, max=100000)
    example = inputs(rng, 2, 300)
    ep = torch.export.export(model, example, dynamic_shapes={"x": {0: rows, 1: length}, "y": {0: rows, 1: length}})
    os.makedirs(out, exist_ok=True)
    torch.export.save(ep, os.path.join(out, "model.raw.pt2"))
    torch.export.save(ep.run_decompositions(), os.path.join(out, "model.pt2"))
    save(os.path.join(out, "inputs"), example)
    save(os.path.join(out, "expected"), model(*example))
    for r, n in ((1, 7), (3, 500), (2, 1500)):
        case = inputs(rng, r, n)
        save(os.path.join(out, "cases", "r%d_n%d" % (r, n), "inputs"), case)
        save(os.path.join(out, "cases", "r%d_n%d" % (r, n), "expected"), model(*case))
    print(out, "exported")


if __name__ == "__main__":
    main()
