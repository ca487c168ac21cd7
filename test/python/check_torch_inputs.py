#!/usr/bin/env python3
"""torch tensors given to the Python loader (test/test_python.cpp runs it where torch imports).

Usage: check_torch_inputs.py PYTHON_DIR MLP_DIR MLP_INPUT.npy MLP_EXPECTED.npy BF16_DIR
MLP_DIR is samples/mlp compiled (float32 input "input"), BF16_DIR the bfloat16 pointwise model
that bfloat16_pointwise.py makes (relu(x + y) * 2, inputs x and y). Prints "torch inputs OK".
"""
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
import numpy as np  # noqa: E402
import torch  # noqa: E402
import foundry_model as fm  # noqa: E402

mlp, x_path, e_path, bf16 = fm.load(sys.argv[2]), sys.argv[3], sys.argv[4], fm.load(sys.argv[5])
x, expected = torch.from_numpy(np.load(x_path)), np.load(e_path)


def check(y):
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == expected.shape, (type(y), y.dtype)
    err = np.abs(y.astype(np.float64) - expected)
    assert (err <= 1e-4 + 1e-4 * np.abs(expected)).all(), "max abs err %g" % err.max()


def refused(error, fragment, *args, model=mlp):
    try:
        model(*args)
    except error as e:
        assert fragment in str(e), str(e)
        return e
    raise AssertionError("accepted: %s" % fragment)


check(mlp(x)[0])
check(mlp(x.clone().requires_grad_(True))[0])  # detached, not refused by .numpy()
check(mlp(torch.nn.Parameter(x.clone()))[0])
check(mlp(x.t().contiguous().t())[0])  # not contiguous: made so
e = refused(fm.DtypeError, "input 0 (input): float64, expected float32; convert it first, e.g. x.to(torch.float32)",
            x.double())
assert isinstance(e, TypeError) and e.status == 1
refused(fm.DtypeError, "input 0 (input): bfloat16, expected float32", x.bfloat16())
if torch.cuda.is_available():
    refused(fm.FoundryError, "input 0 (input): a tensor on cuda:0; the model runs on the CPU", x.cuda())
else:
    print("CUDA tensor check skipped: no GPU")

# bfloat16 tensors in, uint16 bits out; against torch's own bfloat16 arithmetic.
a = torch.arange(-64, 64, dtype=torch.float32).repeat_interleave(8).bfloat16()
b = (torch.arange(-30, 34, dtype=torch.float32).repeat(16) + 0.5).bfloat16()
(y,) = bf16(a, b)
assert y.dtype == np.uint16 and y.shape == (1024,), (y.dtype, y.shape)
got = torch.from_numpy(y.view(np.int16)).view(torch.bfloat16)
want = torch.relu(a + b) * 2
assert torch.equal(got, want), (got[:8], want[:8])
strided = torch.stack([a, a], dim=1)[:, 0]  # stride 2: made contiguous
assert not strided.is_contiguous()
assert np.array_equal(bf16(strided, b)[0], y)
refused(fm.DtypeError, "input 0 (x): int16, expected bfloat16; convert it first, e.g. x.to(torch.bfloat16)",
        a.view(torch.int16), b, model=bf16)
refused(fm.DtypeError, "input 1 (y): float32, expected bfloat16", a, b.float(), model=bf16)
print("torch inputs OK")
