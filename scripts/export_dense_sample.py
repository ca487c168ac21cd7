#!/usr/bin/env python3
"""Exports samples/dense_cnn: a small torchvision DenseNet (growth 8, two dense blocks of two
layers, a transition with average pooling between them, random weights and batch-norm
statistics), the pattern of concatenations that read a pooled result in several later kernels;
with PyTorch's outputs.

Usage (needs torch >= 2.9, torchvision and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_dense_sample.py [OUT_DIR]     (default samples/dense_cnn)
"""
import os
import sys

import numpy as np
import torch
import torchvision


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "samples", "dense_cnn")
    torch.manual_seed(3)
    model = torchvision.models.DenseNet(growth_rate=8, block_config=(2, 2), num_init_features=16, bn_size=2,
                                        num_classes=10).eval()
    for m in model.modules():  # statistics other than 0 and 1, so that the normalization matters
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    x = torch.from_numpy(np.random.default_rng(11).standard_normal((2, 3, 32, 32), dtype=np.float32))
    ep = torch.export.export(model, (x,))
    os.makedirs(os.path.join(out, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    torch.export.save(ep.run_decompositions(), os.path.join(out, "model.pt2"))
    torch.export.save(ep, os.path.join(out, "model.raw.pt2"))
    np.save(os.path.join(out, "inputs", "0.npy"), x.numpy())
    with torch.no_grad():
        np.save(os.path.join(out, "expected", "0.npy"), model(x).numpy())


if __name__ == "__main__":
    main()
