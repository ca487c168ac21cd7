#!/usr/bin/env python3
"""Exports the dynamic-batch samples whose lowerings used to need static sizes, with PyTorch's
outputs at several batch sizes:

    samples/dyn_cnn        conv + batch norm + max pool + conv (stride 2) + adaptive avg pool +
                           linear; a second output through constant padding, a transposed
                           convolution and nearest upsampling; batch 1..32
    samples/dyn_mlp_raw    Linear-GELU-Linear-ReLU-Linear; batch 1..256 (model.raw.pt2: the
                           training IR, linear decomposed by foundryc)
    samples/dyn_attention  embedding + positions from arange(seq) + self-attention with a padding
                           mask + layer norm + a select of the first token, and BERT's pooler on
                           it (a matrix product whose rows are the batch and whose input's row
                           stride is the sequence: a oneDNN call built per shape); batch 1..16
                           and a dynamic sequence length 2..24 (arange up to a run-time size)
    samples/dyn_image      a CNN over a dynamic batch 1..4, height 8*(2..8)+2 and width 8*(2..8)
                           (torch.export's `8 * Dim(...) + 2`: PyTorch 2.11 cannot export pools
                           over a plain dynamic Dim, its guards pin it): strided, dilated and grouped convolutions,
                           max pools with padding and with ceil_mode, an average pool without its
                           padding, adaptive pools to 1x1 and 3x3, a linear over channels last
                           (ConvNeXt's; the training IR's is a view of an addmm over batch*height*
                           width rows), a transposed convolution, and
                           bilinear (to the input's size; to 5x7 with align_corners) and nearest
                           (x2) resampling; cases at the ends of the ranges and between. (Bicubic
                           is left out: PyTorch decomposes it with SymFloat arithmetic, which
                           foundryc does not read.)
    samples/dyn_inverse    linalg.inv of a dynamic batch 1..16 of 3x3 matrices: a lowering that
                           still needs static sizes (LAPACK calls), for the --static-fallback test;
                           inputs/ and expected/ at the export size only

Each folder gets model.pt2 (after run_decompositions(): core ATen), model.raw.pt2 (the training
IR as torch.export returned it), and cases/<name>/{inputs,expected}/N.npy at the smallest and
largest sizes of the range and two in between.

Usage (needs torch >= 2.9 and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_dynamic_models.py [SAMPLES_DIR]     (default samples/)
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 10)
        self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):  # [B, 3, 8, 8]
        y = F.max_pool2d(torch.relu(self.bn(self.conv1(x))), 2)  # [B, 8, 4, 4]
        logits = self.fc(torch.flatten(F.adaptive_avg_pool2d(torch.relu(self.conv2(y)), 1), 1))
        side = F.interpolate(self.up(F.pad(y, (1, 0, 0, 1))), scale_factor=2, mode="nearest")
        return logits, side


class Image(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.mix = nn.Linear(8, 8)
        self.fc = nn.Linear(8 + 8 * 9, 10)

    def forward(self, x):  # [B, 3, H, W]
        y = torch.relu(self.bn(self.conv1(x)))  # [B, 8, ceil(H/2), W/2]
        p = F.max_pool2d(y, 3, stride=2, padding=1)
        p = p + self.mix(p.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)  # ConvNeXt's channels-last linear
        q = F.max_pool2d(y, 2, ceil_mode=True)
        a = F.avg_pool2d(self.conv2(p), 3, stride=2, padding=1, count_include_pad=False)
        features = torch.cat([F.adaptive_avg_pool2d(a, 1).flatten(1), F.adaptive_max_pool2d(q, 3).flatten(1)], 1)
        dense = F.interpolate(self.up(p), size=x.shape[-2:], mode="bilinear", align_corners=False)
        return (self.fc(features), dense, F.interpolate(q, scale_factor=2, mode="nearest"),
                F.interpolate(a, size=(5, 7), mode="bilinear", align_corners=True))


class Inverse(nn.Module):
    def forward(self, x):  # [B, 3, 3]
        return torch.linalg.inv(x)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):  # [B, 32]
        return self.net(x)


class Attention(nn.Module):
    def __init__(self, vocab=40, dim=16, heads=2, max_len=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.pool = nn.Linear(dim, dim)
        self.heads = heads

    def forward(self, ids, mask):  # ids [B, T] int64, mask [B, T] int64 (1 = token, 0 = padding)
        b, t = ids.shape
        positions = torch.arange(t, device=ids.device)  # arange up to a run-time size
        h = self.tok(ids) + self.pos(positions)[None]
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        split = lambda z: z.reshape(b, t, self.heads, -1).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        scores = q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5)
        scores = scores.masked_fill(mask[:, None, None, :] == 0, -1e9)
        attn = torch.softmax(scores, dim=-1) @ v
        h = self.norm(h + self.out(attn.transpose(1, 2).reshape(b, t, -1)))
        return h, h[:, 0], torch.tanh(self.pool(h[:, 0]))


def save(folder, arrays):
    os.makedirs(folder, exist_ok=True)
    for k, a in enumerate(arrays):
        np.save(os.path.join(folder, "%d.npy" % k), a.detach().contiguous().numpy())


def export(out, model, example, dynamic_shapes, cases):
    """Exports `model` and writes PyTorch's outputs for each case (name -> inputs)."""
    model = model.eval()
    ep = torch.export.export(model, example, dynamic_shapes=dynamic_shapes)
    os.makedirs(out, exist_ok=True)
    torch.export.save(ep, os.path.join(out, "model.raw.pt2"))
    torch.export.save(ep.run_decompositions(), os.path.join(out, "model.pt2"))
    for name, inputs in cases.items():
        with torch.no_grad():
            outs = model(*inputs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        save(os.path.join(out, "cases", name, "inputs"), inputs)
        save(os.path.join(out, "cases", name, "expected"), outs)
    print(out, "exported:", ", ".join(cases))


def main():
    samples = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "samples")
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    floats = lambda *shape: torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))

    cnn = Cnn()
    with torch.no_grad():  # non-trivial batch-norm statistics
        cnn.bn.running_mean.uniform_(-0.5, 0.5)
        cnn.bn.running_var.uniform_(0.5, 2.0)
    batch = torch.export.Dim("batch", min=1, max=32)
    export(os.path.join(samples, "dyn_cnn"), cnn, (floats(5, 3, 8, 8),), {"x": {0: batch}},
           {"b%d" % n: (floats(n, 3, 8, 8),) for n in (1, 2, 7, 32)})

    batch = torch.export.Dim("batch", min=1, max=256)
    export(os.path.join(samples, "dyn_mlp_raw"), Mlp(), (floats(5, 32),), {"x": {0: batch}},
           {"b%d" % n: (floats(n, 32),) for n in (1, 3, 100, 256)})

    def tokens(b, t):
        ids = torch.from_numpy(rng.integers(0, 40, (b, t)))
        mask = torch.ones(b, t, dtype=torch.int64)
        for row in range(b):  # row r has r % 3 padding positions at the end
            pad = min(row % 3, t - 1)
            if pad:
                mask[row, t - pad:] = 0
        return ids, mask

    batch = torch.export.Dim("batch", min=1, max=16)
    seq = torch.export.Dim("seq", min=2, max=24)
    cases = {"b1_t2": tokens(1, 2), "b3_t9": tokens(3, 9), "b5_t24": tokens(5, 24), "b16_t7": tokens(16, 7)}
    export(os.path.join(samples, "dyn_attention"), Attention(), tokens(5, 11),
           {"ids": {0: batch, 1: seq}, "mask": {0: batch, 1: seq}}, cases)

    image = Image()
    with torch.no_grad():
        image.bn.running_mean.uniform_(-0.5, 0.5)
        image.bn.running_var.uniform_(0.5, 2.0)
    dims = {0: torch.export.Dim("batch", min=1, max=4), 2: 8 * torch.export.Dim("height8", min=2, max=8) + 2,
            3: 8 * torch.export.Dim("width8", min=2, max=8)}
    sizes = [(1, 18, 16), (2, 26, 24), (3, 66, 64), (1, 42, 16), (4, 18, 56)]
    export(os.path.join(samples, "dyn_image"), image, (floats(2, 3, 34, 40),), {"x": dims},
           {"b%d_h%d_w%d" % s: (floats(s[0], 3, s[1], s[2]),) for s in sizes})

    out = os.path.join(samples, "dyn_inverse")
    x = floats(5, 3, 3) + 3 * torch.eye(3)
    ep = torch.export.export(Inverse(), (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=16)}})
    os.makedirs(out, exist_ok=True)
    torch.export.save(ep.run_decompositions(), os.path.join(out, "model.pt2"))
    save(os.path.join(out, "inputs"), [x])
    save(os.path.join(out, "expected"), [Inverse()(x)])
    print(out, "exported")


if __name__ == "__main__":
    main()
