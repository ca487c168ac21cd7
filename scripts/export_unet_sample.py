#!/usr/bin/env python3
"""Exports samples/unet and samples/dyn_unet: a small U-Net (encoder of convolutions and max
pools, decoder of transposed convolutions joined to the encoder's features by skip
concatenations), random weights, float32; with PyTorch's outputs. The decoder's ConvTranspose2d
layers cover stride 2 (kernel 2), stride 2 with padding, output_padding and groups, and stride 1
with dilation, followed by ReLU, tanh and nothing.

  samples/unet       batch 1, [1,3,64,64] -> [1,2,64,64] (inputs/, expected/)
  samples/dyn_unet   the same with a dynamic batch 1..8, references in cases/b1, b3 (model.raw.pt2
                     too: conv_transpose2d.input, which foundryc decomposes)

Usage (needs torch >= 2.9 and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_unet_sample.py [SAMPLES_DIR]     (default samples/)
"""
import os
import sys

import numpy as np
import torch
from torch import nn


def conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU())


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = nn.Sequential(conv(3, 16), conv(16, 16))
        self.enc2 = conv(16, 32)
        self.bottom = conv(32, 64)
        self.up1 = nn.ConvTranspose2d(64, 32, 2, stride=2)  # 16 -> 32
        self.dec1 = conv(64, 32)
        # 32 -> 64: (32-1)*2 - 2*1 + 3 + 1
        self.up2 = nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.dec2 = conv(32, 16)
        self.refine = nn.ConvTranspose2d(16, 8, 3, padding=2, dilation=2, bias=False)  # 64 -> 64
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x):  # [B, 3, 64, 64]
        e1 = self.enc1(x)
        e2 = self.enc2(nn.functional.max_pool2d(e1, 2))
        b = self.bottom(nn.functional.max_pool2d(e2, 2))
        d1 = self.dec1(torch.cat([torch.relu(self.up1(b)), e2], 1))
        d2 = self.dec2(torch.cat([torch.tanh(self.up2(d1)), e1], 1))
        return self.head(self.refine(d2))


def save(folder, arrays):
    os.makedirs(folder, exist_ok=True)
    for k, a in enumerate(arrays):
        np.save(os.path.join(folder, "%d.npy" % k), a.detach().contiguous().numpy())


def export(out, model, example, dynamic_shapes=None):
    ep = torch.export.export(model, (example,), dynamic_shapes=dynamic_shapes)
    os.makedirs(out, exist_ok=True)
    torch.export.save(ep.run_decompositions(), os.path.join(out, "model.pt2"))
    torch.export.save(ep, os.path.join(out, "model.raw.pt2"))


def main():
    samples = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "samples")
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
    floats = lambda *shape: torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    model = UNet().eval()
    x = floats(1, 3, 64, 64)
    out = os.path.join(samples, "unet")
    export(out, model, x)
    save(os.path.join(out, "inputs"), [x])
    with torch.no_grad():
        save(os.path.join(out, "expected"), [model(x)])

    out = os.path.join(samples, "dyn_unet")
    export(out, model, floats(2, 3, 64, 64), {"x": {0: torch.export.Dim("batch", min=1, max=8)}})
    for n in (1, 3):
        x = floats(n, 3, 64, 64)
        save(os.path.join(out, "cases", "b%d" % n, "inputs"), [x])
        with torch.no_grad():
            save(os.path.join(out, "cases", "b%d" % n, "expected"), [model(x)])
    print("exported", os.path.join(samples, "unet"), "and", out)


if __name__ == "__main__":
    main()
