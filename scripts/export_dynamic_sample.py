#!/usr/bin/env python3
"""Exports samples/flatten_dynamic: a model with a dynamic batch whose graph reads its own size
(aten.sym_size.int feeding views, once through size arithmetic: _operator.mul), with PyTorch's
outputs at several batch sizes.

Usage (needs torch >= 2.9 and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_dynamic_sample.py [OUT_DIR]     (default samples/flatten_dynamic)

Also writes samples/pair_dynamic/model.pt2: x + y with one dynamic size shared by both inputs.
Writes model.pt2 (after run_decompositions()), inputs/0.npy and expected/{0,1}.npy at the export
batch (6), and the same under cases/b<N>/ for N in 1, 100 and 1024 (the exported maximum).
"""
import os
import sys

import numpy as np
import torch


class FlattenMlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(12, 5)

    def forward(self, x):  # x: [B, 3, 4]
        y = x.reshape(x.shape[0], -1)  # a view sized by sym_size(x, 0)
        z = x.reshape(x.shape[0] * 3, -1)  # ... and by sym_size(x, 0) * 3
        return torch.relu(self.linear(y)) * 2 + y.sum(dim=1, keepdim=True), torch.relu(z) + 1


class PairAdd(torch.nn.Module):
    def forward(self, x, y):  # both [B, 4]: the same dynamic size in two inputs
        return x + y


def save_case(folder, model, batch, seed):
    x = torch.from_numpy(np.random.default_rng(seed).standard_normal((batch, 3, 4), dtype=np.float32))
    with torch.no_grad():
        outs = model(x)
    for sub, arrays in (("inputs", [x]), ("expected", outs)):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
        for k, arr in enumerate(arrays):
            np.save(os.path.join(folder, sub, "%d.npy" % k), arr.numpy())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "samples", "flatten_dynamic")
    torch.manual_seed(0)
    model = FlattenMlp().eval()
    batch = torch.export.Dim("batch", min=1, max=1024)
    example = (torch.randn(6, 3, 4),)
    ep = torch.export.export(model, example, dynamic_shapes={"x": {0: batch}}).run_decompositions()
    os.makedirs(out, exist_ok=True)
    torch.export.save(ep, os.path.join(out, "model.pt2"))
    save_case(out, model, 6, 0)
    for n in (1, 100, 1024):
        save_case(os.path.join(out, "cases", "b%d" % n), model, n, n)
    print(ep.graph_module.graph)

    # samples/pair_dynamic: two inputs sharing one dynamic size (inconsistent sizes are an error).
    pair_out = os.path.join(os.path.dirname(out), "pair_dynamic")
    pair = torch.export.export(PairAdd(), (torch.randn(5, 4), torch.randn(5, 4)),
                               dynamic_shapes={"x": {0: batch}, "y": {0: batch}}).run_decompositions()
    os.makedirs(pair_out, exist_ok=True)
    torch.export.save(pair, os.path.join(pair_out, "model.pt2"))


if __name__ == "__main__":
    main()
