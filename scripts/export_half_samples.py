#!/usr/bin/env python3
"""Exports test/data/half_floats: a small MLP (Linear, GELU, Linear, GELU, Linear) and a small CNN
(conv, ReLU, max pooling, conv, ReLU, average pooling, linear) in bfloat16 and in float16, and the
MLP in float64, random weights, with PyTorch's outputs computed in eager mode on the CPU in the same dtype (float32
accumulation of the matrix products and convolutions, each op's result rounded to the 16-bit
type). bfloat16 arrays are saved as ml_dtypes.bfloat16 (NumPy has no bfloat16: `np.save` writes
them as 2-byte records, '<V2', which foundryc reads as bfloat16).

Usage (needs torch >= 2.9, numpy and ml_dtypes; not run by the tests, which read what it wrote):
    python3 scripts/export_half_samples.py [OUT_DIR]     (default test/data/half_floats)
"""
import os
import sys

import ml_dtypes
import numpy as np
import torch


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 256)
        self.fc2 = torch.nn.Linear(256, 256)
        self.fc3 = torch.nn.Linear(256, 10)

    def forward(self, x):
        x = torch.nn.functional.gelu(self.fc1(x))
        x = torch.nn.functional.gelu(self.fc2(x))
        return self.fc3(x)


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.relu(self.conv2(x))
        x = torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def numpy_of(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def export(out, model, x):
    ep = torch.export.export(model, (x,))
    os.makedirs(os.path.join(out, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    torch.export.save(ep.run_decompositions(), os.path.join(out, "model.pt2"))
    torch.export.save(ep, os.path.join(out, "model.raw.pt2"))
    np.save(os.path.join(out, "inputs", "0.npy"), numpy_of(x))
    with torch.no_grad():
        np.save(os.path.join(out, "expected", "0.npy"), numpy_of(model(x)))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test", "data",
                                                             "half_floats")
    rng = np.random.default_rng(5)
    for dtype, name in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16")):
        torch.manual_seed(7)
        x = torch.from_numpy(rng.standard_normal((8, 64), dtype=np.float32)).to(dtype)
        export(os.path.join(out, "mlp_" + name), Mlp().eval().to(dtype), x)
        torch.manual_seed(8)
        x = torch.from_numpy(rng.standard_normal((2, 3, 32, 32), dtype=np.float32)).to(dtype)
        export(os.path.join(out, "cnn_" + name), Cnn().eval().to(dtype), x)
    # float64 has no library call: its products are reductions, and the fusion cost rule keeps each
    # bias + GELU out of the next product's reduction (stored once, not recomputed per column).
    torch.manual_seed(7)
    x = torch.from_numpy(rng.standard_normal((8, 64)))
    export(os.path.join(out, "mlp_float64"), Mlp().eval().to(torch.float64), x)


if __name__ == "__main__":
    main()
