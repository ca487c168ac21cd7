#!/usr/bin/env python3
"""Exports samples/gelu_epilogues: GELU after a library call, both of PyTorch's forms, random
weights, float32, with PyTorch's outputs. foundryc folds each GELU into the call before it as a
oneDNN post-op (sched/epilogue.cpp); the test compares the compiled model with these outputs.

  Linear(32,64) on [2,8,32] (an addmm of [16,32] whose output GELU reads as [2,8,64]),
  GELU(approximate='tanh'), Linear(64,48), reshaped to [2,3,8,16]; Conv2d(3,4,3,padding=1),
  GELU (erf): [2,8,32] -> [2,4,8,16]

Each folder: model.pt2 (after run_decompositions()), model.raw.pt2, inputs/0.npy, expected/0.npy.

Usage (needs torch >= 2.9 and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_gelu_sample.py [SAMPLES_DIR]     (default samples/)
"""
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(__file__))
from export_block_samples import write_sample  # noqa: E402


class GeluEpilogues(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 48)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):  # [2, 8, 32] -> [2, 4, 8, 16]
        h = self.fc2(nn.functional.gelu(self.fc1(x), approximate="tanh"))
        return nn.functional.gelu(self.conv(h.reshape(2, 3, 8, 16)))


def main():
    samples = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "samples")
    torch.manual_seed(19)
    rng = np.random.default_rng(19)
    x = torch.from_numpy(rng.standard_normal((2, 8, 32), dtype=np.float32) * 2)
    write_sample(os.path.join(samples, "gelu_epilogues"), GeluEpilogues().eval(), x)
    print("exported", os.path.join(samples, "gelu_epilogues"))


if __name__ == "__main__":
    main()
