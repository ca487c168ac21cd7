#!/usr/bin/env python3
"""Exports test/data/conv: small convolution models with PyTorch's outputs (eager, CPU), for the
CUDA backend's cuDNN calls (test/test_cuda.cpp) on layouts the corpus does not have (float32: the
lowering makes float64 convolutions loops):

  strided_nhwc  conv2d, stride (2, 1), padding (1, 2), dilation (2, 1), groups 2, bias, its input a
                channels-last view (an NHWC input permuted to NCHW)
  offset_3d     conv3d, stride 2, dilation (1, 2, 1), no bias, its input a slice (an
                offset, non-contiguous view), and a conv1d with dilation 3 on a transposed input

Usage (needs torch >= 2.9 and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_conv_samples.py [OUT_DIR]     (default test/data/conv)
"""
import os
import sys

import numpy as np
import torch


class StridedNhwc(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)

    def forward(self, x_nhwc):
        return self.conv(x_nhwc.permute(0, 3, 1, 2))


class Offset3d(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv3 = torch.nn.Conv3d(3, 4, 3, stride=2, dilation=(1, 2, 1), bias=False)
        self.conv1 = torch.nn.Conv1d(5, 2, 3, dilation=3)

    def forward(self, x, y):
        return self.conv3(x[:, :, 1:, :, 2:]), self.conv1(y.transpose(1, 2))


def export(out, name, model, inputs):
    folder = os.path.join(out, name)
    os.makedirs(os.path.join(folder, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(folder, "expected"), exist_ok=True)
    ep = torch.export.export(model, inputs)
    torch.export.save(ep.run_decompositions(), os.path.join(folder, "model.pt2"))
    for i, x in enumerate(inputs):
        np.save(os.path.join(folder, "inputs", f"{i}.npy"), x.numpy())
    with torch.no_grad():
        outputs = model(*inputs)
    for i, y in enumerate(outputs if isinstance(outputs, tuple) else (outputs,)):
        np.save(os.path.join(folder, "expected", f"{i}.npy"), y.numpy())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test", "data", "conv")
    torch.manual_seed(5)
    rng = np.random.default_rng(5)
    export(out, "strided_nhwc", StridedNhwc().eval(),
           (torch.from_numpy(rng.standard_normal((2, 9, 7, 4), dtype=np.float32)),))
    export(out, "offset_3d", Offset3d().eval(),
           (torch.from_numpy(rng.standard_normal((2, 3, 8, 7, 9), dtype=np.float32)),
            torch.from_numpy(rng.standard_normal((2, 12, 5), dtype=np.float32))))


if __name__ == "__main__":
    main()
