#!/usr/bin/env python3
"""Exports test/data/raw_ops/<case>: tiny modules whose training IR (what torch.export.export
returns before run_decompositions()) uses composite ops that foundryc decomposes itself (arange,
zeros, matmul, conv1d, ...), with PyTorch's outputs. Each folder holds model.raw.pt2, inputs/N.npy
and expected/N.npy (outputs in graph order, computed by eager PyTorch in float32 on the CPU).

The cases llama and wav2vec2 are tiny transformers models (transformers >= 5, random weights) whose
training IR uses several of these ops together.

Usage (needs torch >= 2.9 and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_raw_ops_samples.py [CASE ...]     (default: every case)
"""
import os
import sys

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "data", "raw_ops")


def randn(*sizes):
    return torch.randn(*sizes)


class Fn(torch.nn.Module):
    """forward(*inputs) = fn(self, *inputs); `modules` become submodules (their weights exported)."""

    def __init__(self, fn, **modules):
        super().__init__()
        self.fn = fn
        for name, m in modules.items():
            setattr(self, name, m)

    def forward(self, *inputs):
        return self.fn(self, *inputs)


def case_arange():
    # arange(end), arange.start(start, end); a float bound gives float32
    return Fn(lambda m, x: (x + torch.arange(x.shape[-1]), x * torch.arange(2, 2 + x.shape[-1]),
                            x * torch.arange(0.0, 2.5, 0.5))), (randn(3, 5),)


def case_fill():
    # zeros, ones, zeros_like, ones_like, new_zeros, new_ones, new_full; an int64 new_ones keeps
    # its input's dtype
    return Fn(lambda m, x, i: (x + torch.zeros(3, 5) + torch.ones(5), torch.zeros_like(x) - torch.ones_like(x),
                               x.new_zeros(3, 1) + x.new_ones(5) * x.new_full((3, 5), 2.5),
                               i.new_ones(2, 3), torch.ones_like(i, dtype=torch.float32))), \
        (randn(3, 5), torch.tensor([[4, 5, 6], [7, 8, 9]]))


def case_logical():
    # &, | and ^ of bool and int64 tensors (__and__.Tensor, ...); torch.tensor(...) in forward is a
    # lifted constant (lift_fresh_copy, detach_)
    return Fn(lambda m, x, y, i: (((x > 0) & (y > 0)) | (x < -1), (x > y) ^ (y > 0.5), (i & 6) | (i ^ 3),
                                  x + torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]))), \
        (randn(3, 5), randn(3, 5), torch.tensor([[4, 5, 6], [7, 8, 9]]))


def case_matmul():
    # every kind of torch.matmul: batched with broadcast batch dims, batched times a matrix or a
    # vector, vector times batched, vector times vector, matrix times vector and matrix
    return Fn(lambda m, x, y, v: (x @ y, x @ v, v @ x.transpose(-1, -2), v @ v, x[0] @ v, x[0] @ y[0, 0],
                                  x @ y[0, 0], v @ y)), (randn(2, 3, 4), randn(2, 1, 4, 5), randn(4))


def case_baddbmm():
    # beta and alpha other than 1, the defaults, and beta 0 (self's NaN ignored)
    c = torch.randn(2, 3, 5)
    c[0, 0, 0] = float("nan")
    return Fn(lambda m, c, a, b: (torch.baddbmm(c, a, b, beta=0.5, alpha=2.0), torch.baddbmm(c[1], a, b),
                                  torch.baddbmm(c, a, b, beta=0))), (c, randn(2, 3, 4), randn(2, 4, 5))


def case_conv1d():
    # Conv1d with stride, padding, dilation and groups, an unbatched input, no bias
    conv = torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2)
    plain = torch.nn.Conv1d(4, 3, 1, bias=False)
    return Fn(lambda m, x: (m.conv(x), m.plain(x[0])), conv=conv, plain=plain), (randn(2, 4, 11),)


def case_conv_padding_modes():
    # padding="same" with an even kernel (the odd unit of padding on the right), with dilation,
    # in 2-d with a kernel even in one dim; padding="valid" with a stride
    c1 = torch.nn.Conv1d(3, 4, 4, padding="same")
    c2 = torch.nn.Conv1d(3, 2, 3, padding="same", dilation=2, bias=False)
    c3 = torch.nn.Conv2d(3, 2, (2, 3), padding="same")
    c4 = torch.nn.Conv1d(3, 2, 3, padding="valid", stride=2)
    return Fn(lambda m, x, y: (m.c1(x), m.c2(x), m.c3(y), m.c4(x)), c1=c1, c2=c2, c3=c3, c4=c4), (randn(2, 3, 9), randn(1, 3, 5, 6))


def case_where_min_max():
    # torch.min/max of two tensors (min.other, max.other: NaN propagates), torch.where with a
    # scalar in either place or both (an int scalar with a float tensor gives float)
    x = torch.randn(3, 5)
    x[1, 2] = float("nan")
    return Fn(lambda m, x, y: (torch.min(x, y), torch.max(x, y[0]), torch.where(x > 0, x, 0), torch.where(y > 0, -1.5, x),
                               torch.where(x > y, 2, 3), torch.where(x > y, 0.5, 3))), (x, randn(3, 5))


def case_diff():
    # torch.diff along the last dim, twice along dim 0 with prepend and append, of int64 with
    # prepend as transformers' masks do, of bools
    return Fn(lambda m, x, i: (torch.diff(x), torch.diff(x, n=2, dim=0, prepend=x[:1], append=x[1:] * 2),
                               torch.diff(i, prepend=i[:, :1]), torch.diff(x > 0))), \
        (randn(3, 5), torch.tensor([[4, 5, 9], [7, 1, 0]]))


def case_pad():
    # F.pad in every mode: constant (a value, and trimming with negative padding), reflect and
    # replicate of the last two dims, circular of the last
    return Fn(lambda m, x: (torch.nn.functional.pad(x, (1, 2, 0, 1), value=0.5), torch.nn.functional.pad(x, (-1, 2)),
                            torch.nn.functional.pad(x, (2, 1, 1, 2), mode="reflect"),
                            torch.nn.functional.pad(x, (3, 0, 1, 1), mode="replicate"),
                            torch.nn.functional.pad(x[0], (2, 4), mode="circular"))), (randn(2, 3, 4, 5),)


def case_roll():
    # torch.roll of one dim, of two (a negative shift, one larger than the dim), of the whole tensor
    return Fn(lambda m, x: (torch.roll(x, 2, 1), torch.roll(x, (-1, 7), (0, -1)), torch.roll(x, 4))), (randn(3, 5),)


def case_shuffle_triangle():
    # pixel_shuffle / pixel_unshuffle by 2 (with a leading batch dim of 2), triu and tril with
    # diagonals above and below (and of a bool mask), swapaxes and swapdims (maxvit,
    # super-resolution heads, attention masks)
    return Fn(lambda m, x, z: (torch.nn.functional.pixel_shuffle(x, 2), torch.nn.functional.pixel_unshuffle(x, 2),
                               torch.triu(z, 1), torch.tril(z, -1), torch.triu(z[0]), torch.swapaxes(z, 0, 2),
                               z.swapdims(1, 2), torch.tril(z > 0))), (randn(2, 8, 4, 6), randn(2, 5, 7))


def case_recurrent():
    # nn.LSTM (2 layers, bidirectional, batch first, initial states given), nn.GRU (1 layer,
    # zero initial state), an LSTM without biases on an unbatched sequence
    lstm = torch.nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True)
    gru = torch.nn.GRU(4, 3)
    plain = torch.nn.LSTM(4, 2, bias=False)

    def fn(m, x, h0, c0, s):
        y, (h, c) = m.lstm(x, (h0, c0))
        g, gh = m.gru(s)
        p, (ph, pc) = m.plain(s[:, 0])
        return y, h, c, g, gh, p, ph, pc
    return Fn(fn, lstm=lstm, gru=gru, plain=plain), (randn(2, 6, 4), randn(4, 2, 5), randn(4, 2, 5), randn(5, 3, 4))


def case_group_norm():
    # GroupNorm of a 4-d and a 3-d input (wav2vec2's feature extractor), affine with random
    # parameters, and without them
    g4 = torch.nn.GroupNorm(2, 4)
    g3 = torch.nn.GroupNorm(4, 4, eps=1e-3, affine=False)
    for p in g4.parameters():
        torch.nn.init.uniform_(p, -1, 1)
    return Fn(lambda m, x, y: (m.g4(x), m.g3(y)), g4=g4, g3=g3), (randn(2, 4, 3, 3), randn(2, 4, 6))


def case_weight_norm():
    # weight-normalized Conv1d along dim 2 (wav2vec2's positional convolution), a Linear along
    # dim 0 (the default) and one normalized as a whole (dim None: _weight_norm's dim -1)
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 4, 3, padding=1, groups=2), dim=2)
    lin = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 3))
    whole = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 2), dim=None)
    for m in (conv, lin, whole):  # g away from ||v||, so that the scale matters
        torch.nn.init.uniform_(m.parametrizations.weight.original0, 0.5, 2.0)
    return Fn(lambda m, x: (m.conv(x), m.lin(x.transpose(1, 2)), m.whole(x.transpose(1, 2))), conv=conv, lin=lin,
              whole=whole), (randn(2, 4, 6),)


def case_einsum():
    # batched products, attention scores, a transpose, an ellipsis with broadcast batch dims, an
    # implicit output, a full contraction, an outer product, a sum out of one operand, three operands
    def fn(m, a, b, q, k):
        return (torch.einsum("bij,bjk->bik", a, b), torch.einsum("bhqd,bhkd->bhqk", q, k), torch.einsum("ij->ji", a[0]),
                torch.einsum("...ij,...jk->...ik", q, b[:1, None]), torch.einsum("bij,bjk", a, b),
                torch.einsum("ij,ij->", a[0], a[1]), torch.einsum("i,j->ij", a[0, 0], b[0, 0]),
                torch.einsum("bij->j", a), torch.einsum("bij,bjk,bkl->bil", a, b, b.transpose(1, 2)))
    return Fn(fn), (randn(2, 3, 4), randn(2, 4, 3), randn(2, 2, 5, 4), randn(2, 2, 6, 4))


def case_embedding_bag():
    # nn.EmbeddingBag in mode sum with padding_idx (2-d input), mean and max with offsets (one bag
    # empty), sum with per-sample weights and include_last_offset
    bags = {m: torch.nn.EmbeddingBag(7, 3, mode=m, padding_idx=0 if m == "sum" else None) for m in ("sum", "mean", "max")}
    last = torch.nn.EmbeddingBag(7, 3, mode="sum", include_last_offset=True)

    def fn(m, i2, i1, offsets, w):
        return (m.sum(i2), m.mean(i1, offsets), m.max(i1, offsets), m.last(i1, offsets, per_sample_weights=w))
    return Fn(fn, last=last, **bags), (torch.tensor([[1, 0, 3], [0, 0, 6]]), torch.tensor([2, 4, 4, 5, 1, 6]),
                                        torch.tensor([0, 2, 2, 5]), randn(6))


def case_grid_sample():
    # F.grid_sample, bilinear and nearest, padding zeros and border, with and without
    # align_corners; the grid reaches outside [-1, 1]
    def fn(m, x, g):
        gs = torch.nn.functional.grid_sample
        return (gs(x, g, align_corners=False), gs(x, g, mode="nearest", align_corners=True),
                gs(x, g, padding_mode="border", align_corners=True), gs(x, g, mode="nearest", padding_mode="border"))
    return Fn(fn), (randn(2, 3, 4, 5), torch.rand(2, 3, 6, 2) * 2.4 - 1.2)


def case_type_as():
    # x.type_as(other): to int64, to float32 (RoBERTa's position ids), and to its own dtype
    return Fn(lambda m, x, i: (x.type_as(i), (i > 5).type_as(x) * x[:, :3], x.type_as(x))), \
        (randn(2, 5) * 10, torch.tensor([[4, 5, 6], [7, 8, 9]]))


def case_masked_fill():
    # masked_fill with a float and an int value, a broadcast mask, a 0-d tensor value, in place
    # on an intermediate (masked_fill_), on int64
    def fn(m, x, i):
        y = x * 2
        y.masked_fill_(x > 1, 0.0)
        return (x.masked_fill(x < 0, -1e9), x.masked_fill(x[0] > 0, 3), x.masked_fill(x > 0, x.amax()), y,
                i.masked_fill(i > 5, -1))
    return Fn(fn), (randn(3, 5), torch.tensor([[4, 5, 6], [7, 8, 9]]))


def case_adaptive_avg_pool1d():
    # AdaptiveAvgPool1d to 1 (Swin's pooler) and to 3 of 7, batched and unbatched
    return Fn(lambda m, x: (torch.nn.functional.adaptive_avg_pool1d(x, 1), torch.nn.functional.adaptive_avg_pool1d(x, 3),
                            torch.nn.functional.adaptive_avg_pool1d(x[0], 3))), (randn(2, 4, 7),)


def case_view_writes():
    # writes into slices and selects of a fresh tensor, read afterwards (BART's shift_tokens_right:
    # new_zeros, then x[:, 1:] = ..., x[:, 0] = ...; copy_ and fill_), a slice of a slice, and a
    # float tensor filled row by row
    def fn(m, i, x):
        shifted = i.new_zeros(i.shape)
        shifted[:, 1:] = i[:, :-1].clone()
        shifted[:, 0] = 2
        shifted.masked_fill_(shifted == 6, 1)
        y = torch.zeros(4, 6)
        y[1:3, 2:5] = x
        y[3] = 7.5
        y[:, 1:][0, 2:4] = x[0, :2] * 2
        return shifted, y
    return Fn(fn), (torch.tensor([[4, 5, 6], [7, 8, 9]]), randn(2, 3))


def case_aliases():
    # other names of core ops and small composites (timm's and transformers' training IR):
    # multiply, subtract, divide, true_divide, broadcast_to, expand_as, .T, square, 1 - x and
    # rsub, addcmul, addcdiv, clamp_min, clamp_max, and fill_ of a 0-d tensor into a fresh tensor
    def fn(m, x, y, i):
        z = torch.zeros(2, 3)
        z.fill_(x[0, 0])
        return (torch.multiply(x, y), torch.multiply(x, 3), torch.subtract(x, y, alpha=2), torch.divide(x, y),
                torch.true_divide(i, 2), torch.broadcast_to(x[0], (4, 3)), x[:, :1].expand_as(y), y.reshape(2, 3, 2).T,
                torch.square(x), torch.square(i), 1 - x, torch.rsub(x, y, alpha=2), 2.5 - i,
                torch.addcmul(x, x, y, value=0.5), torch.addcdiv(x, x, y.abs() + 1), torch.clamp_min(x, 0.1),
                torch.clamp_max(i, 5), z)
    return Fn(fn), (randn(4, 3), randn(4, 3), torch.tensor([[4, 5, 6], [7, 8, 9]]))


def case_stack_grids():
    # stack at the front, the end and the middle; meshgrid "ij" and "xy" (Swin's and BEiT's relative
    # positions), eye, repeat_interleave along a dim and flattened
    def fn(m, x, a, b):
        gi, gj = torch.meshgrid(a, b, indexing="ij")
        xa, xb = torch.meshgrid(a, b, indexing="xy")
        return (torch.stack([x, x * 2]), torch.stack([x, -x, x + 1], dim=-1), torch.stack([x, x], dim=1), gi * 10 + gj,
                xa * 10 + xb, torch.eye(3) + x[0, 0], torch.eye(2, 4, dtype=torch.int64), torch.repeat_interleave(x, 2, dim=1),
                x.repeat_interleave(3))
    return Fn(fn), (randn(2, 3), torch.arange(3.0), torch.arange(4.0) * 2)


def case_unfold_conv3d():
    # F.unfold (im2col): a 3x3 window with padding 1 and stride 2, a 2x2 one with stride 2 and
    # dilation... on a batched and an unbatched input; nn.Conv3d, with padding and with "same"
    def fn(m, x, v):
        f = torch.nn.functional.unfold
        return (f(x, 3, padding=1, stride=2), f(x, 2, dilation=2, stride=1), f(x[0], (2, 3), stride=(2, 1)), m.c(v), m.s(v))
    return Fn(fn, c=torch.nn.Conv3d(2, 4, 3, padding=1), s=torch.nn.Conv3d(2, 3, (3, 1, 2), padding="same")), \
        (randn(2, 3, 7, 6), randn(1, 2, 4, 5, 6))


def case_bicubic():
    # F.interpolate(mode="bicubic") (ViTs resizing their position embeddings): up by 2, to sizes
    # that shrink one dim, with and without align_corners, and by a scale factor of 1.5
    def fn(m, x):
        f = torch.nn.functional.interpolate
        return (f(x, scale_factor=2, mode="bicubic"), f(x, size=(3, 9), mode="bicubic", align_corners=True),
                f(x, size=(7, 5), mode="bicubic"), f(x, scale_factor=1.5, mode="bicubic", align_corners=False))
    return Fn(fn), (randn(2, 3, 5, 6),)


def case_wrapped_regions():
    # a region under torch.autocast(enabled=False) (timm's EfficientViT attention) and one under
    # torch.set_grad_enabled(False): higher-order ops over subgraphs, whose names repeat the
    # outer graph's
    def fn(m, x, y):
        a = x @ y
        with torch.autocast("cpu", enabled=False):
            b = (x.float() @ y.float()).relu()
            a2 = b + a
        with torch.set_grad_enabled(False):
            c = torch.matmul(a2, y.T)
        return a, b, c
    return Fn(fn), (randn(3, 4), randn(4, 4))


def case_autocast_enabled():
    # refused: an enabled autocast region computes in bfloat16
    def fn(m, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x
        return y.float()
    return Fn(fn), (randn(4, 4),)


def case_fold():
    # F.fold (col2im), VOLO's outlook attention: overlapping 3x3 windows with padding 1 and stride
    # 2, 2x2 ones with dilation 2, and an unbatched input
    def fn(m, a, b, c):
        f = torch.nn.functional.fold
        return f(a, (7, 6), 3, padding=1, stride=2), f(b, (5, 5), 2, dilation=2), f(c, (4, 6), (2, 3), stride=(2, 1))
    return Fn(fn), (randn(2, 3 * 9, 12), randn(1, 2 * 4, 9), randn(2 * 6, 8))


def case_contiguous_writes():
    # BEiT's relative position index: a permuted difference of grids made contiguous (a copy), then
    # updated in place through selects, summed, and used to gather a table
    def fn(m, x):
        a = torch.arange(3)
        g = torch.stack(torch.meshgrid(a, a, indexing="ij")).flatten(1)
        rel = (g[:, :, None] - g[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += 2
        rel[:, :, 1] += 2
        rel[:, :, 0] *= 5
        index = rel.sum(-1)
        return x[index.flatten()].view(9, 9, -1), index, g
    return Fn(fn), (randn(25, 2),)


def case_splits_pools():
    # the training IR of transformers' CLIP (Tensor.t), Mamba (tensor_split), Mixtral (floor_divide)
    # and SEW (avg_pool1d): t of a matrix and a vector; tensor_split by indices (negative,
    # decreasing: parts overlap or are empty) and by sections; floor_divide of floats (negative
    # quotients round down) and of integers by a tensor and a number; 1-d pools with padding and
    # ceil_mode, an unbatched input
    def fn(m, x, v, i, j):
        a, b, c, d = torch.tensor_split(x, [2, -1, 1], dim=1)
        e, f, g = torch.tensor_split(x, 3, dim=-1)
        avg = torch.nn.functional.avg_pool1d
        mx = torch.nn.functional.max_pool1d
        return (x[0].t() @ v.t(), v.t(), a, b, c, d, e, f, g, torch.floor_divide(x, 0.3), torch.floor_divide(i, j),
                torch.floor_divide(i, 3), avg(x, 3, 2, padding=1, ceil_mode=True), avg(x, 2, count_include_pad=False),
                mx(x, 3, 2, padding=1, dilation=1, ceil_mode=True), mx(x[0], 2))
    return Fn(fn), (randn(2, 4, 7), randn(4), torch.tensor([[-7, 5, 9], [6, -1, 0]]), torch.tensor([[2, -3, 4], [-4, 2, 5]]))


def case_pool3d_zero():
    # torchvision's video classifiers (adaptive_avg_pool3d to 1x1x1, as a number and a triple) and
    # Swin V2's masks (zero_ of a fresh tensor's slice)
    def fn(m, x, w):
        mask = torch.ones(3, 4)
        mask[1:].zero_()
        pool = torch.nn.functional.adaptive_avg_pool3d
        return pool(x, 1), pool(x, (1, 1, 1)).flatten(1), mask * w
    return Fn(fn), (randn(2, 3, 4, 5, 6), randn(3, 4))


def case_softplus_linspace():
    # Mamba's softplus (default, and a beta and threshold that both branches meet) and RAFT's
    # coordinate grids (linspace: even and odd counts, descending, one step)
    def fn(m, x):
        sp = torch.nn.functional.softplus
        grid = torch.linspace(-1, 1, 7)[:, None] * torch.linspace(2.5, 0, 4)
        return sp(x), sp(x, beta=2, threshold=3), grid, torch.linspace(3, 5, 1), x[0] + torch.linspace(0, 1, 6)
    return Fn(fn), (randn(3, 6) * 4,)


def case_glu_one_hot():
    # glu along the channels (Speech2Text's and conformers' convolution modules) and the last dim;
    # one_hot of a matrix and a vector of indices (LongT5's transient-global blocks), used in a product
    def fn(m, x, i, j):
        hot = torch.nn.functional.one_hot(i, 5)
        return (torch.nn.functional.glu(x, 1), torch.nn.functional.glu(x), hot,
                torch.nn.functional.one_hot(j, 3), hot.float() @ x[0, :5, :3])
    return Fn(fn), (randn(2, 6, 4), torch.tensor([[0, 4, 2], [1, 1, 3]]), torch.tensor([2, 0, 1]))


def case_in_place_dtypes():
    # In-place ops keep self's dtype whatever their functional form gives: comparisons into a float
    # tensor, a bfloat16 copy made by to() updated with float32, a float tensor times an int64 one,
    # an int64 tensor plus a number; and in-place forms of ops that have no row of their own
    def fn(m, x, y, i):
        a = x.clone()
        a.lt_(y)
        b = x.to(torch.bfloat16)
        b.add_(y)
        c = x.clone()
        c.mul_(i)
        d = i.clone()
        d.add_(2)
        e = x.clone()
        e.ge_(0.5)
        f = x.clone()
        f.eq_(y)
        f.logical_or_(a)
        g = x.clone()
        g.atan2_(y)
        g.fmod_(0.7)
        return a, b.float(), c, d, e, f, g, x
    return Fn(fn), (randn(3, 5), randn(3, 5), torch.randint(-3, 3, (3, 5)))


class BufferUpdates(torch.nn.Module):
    """Updates its buffers in place (a counter, a cache row, a cache column by index) and its input,
    then reads them: one call's outputs are the reference."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(4))
        self.register_buffer("cache", torch.arange(12.0).reshape(3, 4))

    def forward(self, x, i):
        self.count.add_(1.5)
        self.count.mul_(2)
        self.cache[1].copy_(x)
        self.cache[:, 2].index_put_((i,), torch.tensor(-1.0))
        x.clamp_(-0.5, 0.5)
        return x * self.count + self.cache.sum(0), self.cache * 1, x


def case_buffer_updates():
    # in-place updates of buffers and of an input: the compiled model computes them for this run
    # and keeps no state (a warning says so)
    return BufferUpdates(), (randn(4), torch.tensor([0, 2]))


def case_grouped_mm():
    # torch._grouped_mm, a mixture of experts' products: 10 rows in three groups (the second
    # empty) by their cumulative ends, an input of the model; every row in a group (ATen leaves
    # rows past the last end unwritten)
    # (its meta kernel takes bfloat16 only: the products in bfloat16, the result back in float32)
    return Fn(lambda m, a, w, offs: torch._grouped_mm(a.bfloat16(), w.bfloat16(), offs=offs).float()), \
        (randn(10, 8), randn(3, 8, 8), torch.tensor([4, 4, 10], dtype=torch.int32))


def case_lstm_states():
    # nn.LSTM batch first: torch 2.11's export records its last states as [L*D, 1, B, H] (eager
    # gives [L*D, B, H]); flattened, both agree
    def fn(m, x):
        out, (h, c) = m.rnn(x)
        return out, h.flatten(), c.reshape(-1)
    return Fn(fn, rnn=torch.nn.LSTM(4, 6, num_layers=2, batch_first=True)), (randn(3, 5, 4),)


class FirstOutput(torch.nn.Module):
    """The model's first output as a plain tensor (transformers returns a ModelOutput)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)[0]


def case_llama():
    # LlamaForCausalLM, 1 layer, hidden 32, 2 heads, vocab 64, 8 tokens: arange, new_ones, &,
    # diff, cumsum and index in its causal mask, rotary embeddings, RMSNorm, SiLU MLP; the logits
    import transformers
    config = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                      intermediate_size=64, vocab_size=64, max_position_embeddings=64, use_cache=False)
    return FirstOutput(transformers.LlamaForCausalLM(config)), (torch.randint(0, 64, (1, 8)),)


def case_mixtral():
    # MixtralModel, 1 layer, hidden 32, 4 experts (2 a token), 12 tokens: its router (topk, sort,
    # histc, cumsum, floor_divide, empty_like, index_put_) and transformers' own grouped_mm_fallback
    # op, the experts' products; the last hidden state
    import transformers
    config = transformers.MixtralConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                        intermediate_size=64, vocab_size=64, max_position_embeddings=64,
                                        num_local_experts=4, num_experts_per_tok=2, use_cache=False)
    return FirstOutput(transformers.MixtralModel(config)), (torch.randint(0, 64, (1, 12)),)


def case_wav2vec2():
    # Wav2Vec2Model, 1 layer, hidden 32, two feature convolutions (conv1d, group_norm), the
    # weight-normalized positional convolution (_weight_norm); a 64-sample waveform
    import transformers
    config = transformers.Wav2Vec2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                         conv_dim=(8, 8), conv_stride=(2, 2), conv_kernel=(3, 3), num_conv_pos_embeddings=4,
                                         num_conv_pos_embedding_groups=2)
    return FirstOutput(transformers.Wav2Vec2Model(config)), (randn(1, 64),)


CASES = {
    "arange": case_arange,
    "fill": case_fill,
    "logical": case_logical,
    "matmul": case_matmul,
    "baddbmm": case_baddbmm,
    "conv1d": case_conv1d,
    "conv_padding_modes": case_conv_padding_modes,
    "where_min_max": case_where_min_max,
    "diff": case_diff,
    "pad": case_pad,
    "roll": case_roll,
    "recurrent": case_recurrent,
    "shuffle_triangle": case_shuffle_triangle,
    "group_norm": case_group_norm,
    "weight_norm": case_weight_norm,
    "einsum": case_einsum,
    "embedding_bag": case_embedding_bag,
    "grid_sample": case_grid_sample,
    "type_as": case_type_as,
    "masked_fill": case_masked_fill,
    "adaptive_avg_pool1d": case_adaptive_avg_pool1d,
    "view_writes": case_view_writes,
    "aliases": case_aliases,
    "stack_grids": case_stack_grids,
    "unfold_conv3d": case_unfold_conv3d,
    "lstm_states": case_lstm_states,
    "bicubic": case_bicubic,
    "fold": case_fold,
    "contiguous_writes": case_contiguous_writes,
    "splits_pools": case_splits_pools,
    "pool3d_zero": case_pool3d_zero,
    "softplus_linspace": case_softplus_linspace,
    "glu_one_hot": case_glu_one_hot,
    "in_place_dtypes": case_in_place_dtypes,
    "buffer_updates": case_buffer_updates,
    "grouped_mm": case_grouped_mm,
    "wrapped_regions": case_wrapped_regions,
    "autocast_enabled": case_autocast_enabled,
    "llama": case_llama,
    "mixtral": case_mixtral,
    "wav2vec2": case_wav2vec2,
}


def export_case(name):
    torch.manual_seed(sum(map(ord, name)))  # each case its own values, whichever others run
    model, inputs = CASES[name]()
    model.eval()
    ep = torch.export.export(model, inputs)
    out = os.path.join(OUT, name)
    os.makedirs(os.path.join(out, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(out, "expected"), exist_ok=True)
    torch.export.save(ep, os.path.join(out, "model.raw.pt2"))
    for i, x in enumerate(inputs):
        np.save(os.path.join(out, "inputs", f"{i}.npy"), x.contiguous().numpy())
    with torch.no_grad():
        results = model(*inputs)
    for i, y in enumerate(results if isinstance(results, tuple) else (results,)):
        np.save(os.path.join(out, "expected", f"{i}.npy"), y.contiguous().numpy())  # C order, as foundryc reads
    ops = sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"})
    print(name, os.path.getsize(os.path.join(out, "model.raw.pt2")), "bytes:", ", ".join(ops))


def main():
    for name in sys.argv[1:] or CASES:
        export_case(name)


if __name__ == "__main__":
    main()
