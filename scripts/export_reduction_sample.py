#!/usr/bin/env python3
"""Exports samples/whole_reductions: reductions of a whole [256, 257] tensor to one element each
(sum, amax, mean of squares), the case where foundryc splits a reduction across threads; with
PyTorch's outputs.

Usage (needs torch >= 2.9 and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_reduction_sample.py [OUT_DIR]     (default samples/whole_reductions)
"""
import os
import sys

import numpy as np
import torch


class WholeReductions(torch.nn.Module):
    def forward(self, x):
        return x.sum(), x.amax(), (x * x).mean()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "samples", "whole_reductions")
    x = torch.from_numpy(np.random.default_rng(7).standard_normal((256, 257), dtype=np.float32))
    model = WholeReductions().eval()
    ep = torch.export.export(model, (x,)).run_decompositions()
    os.makedirs(os.path.join(out, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    torch.export.save(ep, os.path.join(out, "model.pt2"))
    np.save(os.path.join(out, "inputs", "0.npy"), x.numpy())
    with torch.no_grad():
        for i, o in enumerate(model(x)):
            np.save(os.path.join(out, "expected", f"{i}.npy"), o.numpy())


if __name__ == "__main__":
    main()
