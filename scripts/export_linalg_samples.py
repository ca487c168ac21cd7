#!/usr/bin/env python3
"""Exports test/data/linalg/<case>: small models using the linear-algebra ops foundryc runs as
LAPACK calls (factorizations, solves from either side, inverses, determinants, symmetric
eigenvalues, singular values, pseudo-inverses), on non-empty batched matrices, with PyTorch's
outputs. The corpus's OpInfo samples of cholesky_solve and cholesky_inverse are all 0x0, and
none of them solves from the right through lu_solve with a batch: these fill that gap.

Each case folder: model.pt2 (core ATen, run_decompositions()), inputs/N.npy, expected/N.npy
(eager PyTorch on the CPU, float32).

Usage (needs torch >= 2.9 and numpy; not run by the tests, which read what it wrote):
    python3 scripts/export_linalg_samples.py [OUT_DIR [CASE...]]
OUT_DIR defaults to test/data/linalg; CASEs (folder names) limit the export to those.
"""
import os
import sys

import numpy as np
import torch


class Solves(torch.nn.Module):
    """a: a batch of well-conditioned square matrices, b: right-hand sides, s: symmetric positive
    definite matrices; every solve from the left and from the right."""

    def forward(self, a, b, s):
        bt = b.mT
        # The _ex forms: the checking ones add an effect token that foundryc does not take.
        l = torch.linalg.cholesky_ex(s).L
        u = torch.linalg.cholesky_ex(s, upper=True).L
        lu, piv, _ = torch.linalg.lu_factor_ex(a)
        return (
            torch.linalg.solve_ex(a, b).result,
            torch.linalg.solve_ex(a, bt, left=False).result,
            torch.linalg.solve_ex(a[0], b[1, :, 0]).result,
            torch.cholesky_solve(b, l),
            torch.cholesky_solve(b, u, upper=True),
            torch.cholesky_inverse(l),
            torch.cholesky_inverse(u, upper=True),
            torch.linalg.solve_triangular(u, b, upper=True),
            torch.linalg.solve_triangular(l, bt, upper=False, left=False, unitriangular=True),
            lu,
            piv,
            torch.linalg.lu_solve(lu, piv, b),
            torch.linalg.lu_solve(lu, piv, bt, left=False, adjoint=True),
            torch.linalg.inv_ex(a).inverse,
        )


def solves_inputs(rng):
    a = rng.standard_normal((2, 4, 4)).astype(np.float32) + 4 * np.eye(4, dtype=np.float32)
    b = rng.standard_normal((2, 4, 3)).astype(np.float32)
    m = rng.standard_normal((2, 4, 4)).astype(np.float32)
    s = (m @ m.transpose(0, 2, 1) + 4 * np.eye(4, dtype=np.float32)).astype(np.float32)
    return a, b, s


class Spectra(torch.nn.Module):
    """Determinants (of either sign), symmetric eigenvalues, singular values and
    what PyTorch builds on them: pseudo-inverses (rectangular, symmetric, rank-deficient), rank,
    condition number."""

    def forward(self, a, r, s, d):
        sign, logabsdet = torch.linalg.slogdet(d)
        low_rank = r[..., :2] @ r[..., :2].mT  # [2, 3, 3] of rank 2
        return (
            torch.linalg.det(d),
            sign,
            logabsdet,
            torch.logdet(s),
            torch.linalg.eigvalsh(s),
            torch.linalg.eigvalsh(s, UPLO="U"),
            torch.linalg.svdvals(r),
            torch.linalg.pinv(r),
            torch.linalg.pinv(s, hermitian=True),
            torch.linalg.pinv(low_rank),
            torch.linalg.matrix_rank(low_rank),
            torch.linalg.cond(a),
            torch.linalg.matrix_norm(r, ord="nuc"),
        )


def spectra_inputs(rng):
    a = rng.standard_normal((2, 4, 4)).astype(np.float32) + 3 * np.eye(4, dtype=np.float32)
    r = rng.standard_normal((2, 3, 5)).astype(np.float32)
    m = rng.standard_normal((2, 4, 4)).astype(np.float32)
    s = (m @ m.transpose(0, 2, 1) + np.eye(4, dtype=np.float32)).astype(np.float32)
    d = rng.standard_normal((3, 3, 3)).astype(np.float32)
    d[1] = -d[1]  # 3x3: the determinant changes sign (all three are positive with this seed)
    # No singular matrix: PyTorch's float32 LU of one gives a rounding-error pivot, not 0.
    return a, r, s, d


class Householder(torch.nn.Module):
    """Q from geqrf's reflectors, and Q or Q^T applied from either side."""

    def forward(self, qr, tau, c, ct):
        return (
            torch.linalg.householder_product(qr, tau),
            torch.ormqr(qr, tau, c),
            torch.ormqr(qr, tau, ct, left=False, transpose=True),
        )


def householder_inputs(rng):
    a = torch.from_numpy(rng.standard_normal((2, 5, 3)).astype(np.float32))
    qr, tau = torch.geqrf(a)
    c = rng.standard_normal((2, 5, 2)).astype(np.float32)
    return qr.numpy(), tau.numpy(), c, c.transpose(0, 2, 1).copy()


def cases(rng):
    return {
        "solves": (Solves(), solves_inputs(rng)),
        "spectra": (Spectra(), spectra_inputs(rng)),
        "householder": (Householder(), householder_inputs(rng)),
    }


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test", "data", "linalg")
    only = set(sys.argv[2:])
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    for name, (model, inputs) in cases(rng).items():
        if only and name not in only:
            continue
        folder = os.path.join(out, name)
        os.makedirs(os.path.join(folder, "inputs"), exist_ok=True)
        os.makedirs(os.path.join(folder, "expected"), exist_ok=True)
        args = tuple(torch.from_numpy(np.ascontiguousarray(x)) for x in inputs)
        ep = torch.export.export(model.eval(), args)
        torch.export.save(ep.run_decompositions(), os.path.join(folder, "model.pt2"))
        with torch.no_grad():
            expected = model(*args)
        for i, t in enumerate(args):
            np.save(os.path.join(folder, "inputs", f"{i}.npy"), t.numpy())
        for i, t in enumerate(expected):
            np.save(os.path.join(folder, "expected", f"{i}.npy"), t.numpy())
        print(name, [tuple(t.shape) for t in expected])


if __name__ == "__main__":
    main()
