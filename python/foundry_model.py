"""Load and run a model compiled by foundryc from Python, with ctypes and NumPy only.

    import numpy as np
    from foundry_model import load

    model = load("out/")                 # the folder `foundryc model.pt2 -o out/` wrote
    print(model.inputs, model.outputs)   # names, dtypes and shapes
    (y,) = model(np.zeros((8, 64), np.float32))

The folder's manifest.json names the model (the NAME_ prefix of its C API) and its inputs and
outputs; model.so is opened with ctypes and weights.bin is mapped by NAME_create. A failing call
raises FoundryError with the model's NAME_last_error() message and status code.

Inputs: dtypes are never converted. An input whose dtype is not the model's input dtype is
refused before the model runs, with DtypeError (a FoundryError and a TypeError, status 1):
    input 0 (x): float64, expected float32; convert it first, e.g. x.astype(np.float32)
The same rule holds for NumPy arrays and scalars, torch tensors and other array-likes (anything
np.asarray reads with a dtype of its own: the buffer protocol, __array__, __array_interface__).
Python numbers, lists and tuples have no dtype: they take the model's dtype, and for an integer
or bool input their values must be exactly representable (1.5 or 300 for uint8 are refused).
torch tensors must be on the CPU; they are passed without a copy when contiguous (torch is never
imported here: a tensor is recognized when the caller has imported torch).

bfloat16 (NumPy has none): a bfloat16 input takes a torch.bfloat16 tensor, an ml_dtypes.bfloat16
array, or a uint16 NumPy array of the raw bits; not a list. bfloat16 outputs are always returned
as uint16 NumPy arrays of the raw bits, whatever the inputs were; view them with
y.view(ml_dtypes.bfloat16) or torch.from_numpy(y.view(np.int16)).view(torch.bfloat16).
All outputs are fresh NumPy arrays.

As a command, `python3 foundry_model.py OUTDIR [--inputs DIR [--expected DIR]]` prints the model's
inputs and outputs and runs it on DIR/0.npy, 1.npy, ...; errors are one line on stderr, exit 1.
Nothing here is compiled: this file is the whole Python package.
"""

import ctypes
import json
import os
import sys
import threading

import numpy as np

__all__ = ["FoundryError", "DtypeError", "TensorInfo", "Model", "load"]

MAX_RANK = 8

# foundry_status (include/foundry/runtime/foundry_c_api.h)
STATUS_NAMES = {
    0: "OK",
    1: "INVALID_ARGUMENT",
    2: "IO",
    3: "OUT_OF_MEMORY",
    4: "RUNTIME",
}

# foundry_dtype codes (torch's ScalarType numbering) <-> NumPy dtypes.
_CODE_TO_NUMPY = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.int8),
    3: np.dtype(np.int16),
    4: np.dtype(np.int32),
    5: np.dtype(np.int64),
    6: np.dtype(np.float16),
    7: np.dtype(np.float32),
    8: np.dtype(np.float64),
    12: np.dtype(np.bool_),
    13: np.dtype(np.uint16),  # bfloat16, as raw bits
}
BFLOAT16 = 13
_CODE_NAMES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float16",
               7: "float32", 8: "float64", 12: "bool", 13: "bfloat16"}


class FoundryError(RuntimeError):
    """A call into the compiled model failed; `status` is the foundry_status code."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class DtypeError(FoundryError, TypeError):
    """An input's dtype is not the model's (status 1, INVALID_ARGUMENT). A TypeError too, which
    is what NumPy and torch raise for dtypes they cannot take."""

    def __init__(self, message):
        super().__init__(message, 1)


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
    ]


class _TensorInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("min_shape", ctypes.c_int64 * MAX_RANK),
        ("max_shape", ctypes.c_int64 * MAX_RANK),
    ]


class TensorInfo:
    """One input or output: name, dtype (a foundry_dtype code), dtype_name, the NumPy dtype it is
    passed as, and shape (a tuple; -1 for a dynamic dimension, bounded by min_shape/max_shape)."""

    def __init__(self, name, dtype, shape, min_shape, max_shape):
        self.name = name
        self.dtype = dtype
        self.dtype_name = _CODE_NAMES.get(dtype, "dtype %d" % dtype)
        self.numpy_dtype = _CODE_TO_NUMPY.get(dtype)
        self.shape = tuple(shape)
        self.min_shape = tuple(min_shape)
        self.max_shape = tuple(max_shape)

    def __repr__(self):
        return "TensorInfo(%r, %s, %s)" % (self.name, self.dtype_name, list(self.shape))


def _read_manifest(folder):
    path = os.path.join(folder, "manifest.json")
    try:
        with open(path, "r", encoding="utf-8") as f:
            manifest = json.load(f)
    except OSError as e:
        raise FoundryError("%s: cannot read the manifest (is this a folder written by foundryc?): %s"
                           % (path, e.strerror or e)) from None
    except ValueError as e:
        raise FoundryError("%s: not valid JSON: %s" % (path, e)) from None
    name = manifest.get("name") if isinstance(manifest, dict) else None
    if not isinstance(name, str) or not name.isidentifier():
        raise FoundryError("%s: no model name (the C API prefix) in the manifest" % path)
    return manifest


# ---- inputs: one dtype rule for every kind of array ----

def _refuse_dtype(k, info, given, fix):
    raise DtypeError("input %d (%s): %s, expected %s; convert it first, e.g. %s"
                     % (k, info.name, given, info.dtype_name, fix))


def _torch_of(a):
    """The torch module when `a` is a torch.Tensor, else None. torch is not imported here: the
    caller who made a tensor has imported it."""
    torch = sys.modules.get("torch")
    return torch if torch is not None and isinstance(a, torch.Tensor) else None


def _from_torch(torch, k, info, t):
    """A CPU tensor as a NumPy array sharing its memory (torch.Tensor.numpy, not __array__, which
    NumPy would convert to the model's dtype; a bfloat16 tensor is read as its int16 bits)."""
    if t.device.type != "cpu":
        raise FoundryError("input %d (%s): a tensor on %s; the model runs on the CPU: move it first, e.g. x.cpu()"
                           % (k, info.name, t.device), 1)
    given = str(t.dtype).replace("torch.", "")
    if given != info.dtype_name:
        _refuse_dtype(k, info, given, "x.to(torch.%s)" % info.dtype_name)
    t = t.detach().contiguous()
    if info.dtype == BFLOAT16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _from_python(k, info, a):
    """Python numbers, lists and tuples, which have no dtype: they take the model's dtype, values
    an integer or bool input cannot hold exactly refused (NumPy's astype would truncate or wrap)."""
    if info.dtype == BFLOAT16:
        raise DtypeError("input %d (%s): a Python %s for a bfloat16 input (NumPy has no bfloat16); give an "
                         "ml_dtypes.bfloat16 array, a uint16 array of the raw bits or a torch.bfloat16 tensor"
                         % (k, info.name, type(a).__name__))
    try:
        natural = np.asarray(a)
    except ValueError as e:
        raise FoundryError("input %d (%s): not an array: %s" % (k, info.name, e), 1) from None
    if natural.dtype.kind not in "biuf":
        raise DtypeError("input %d (%s): Python values that NumPy reads as %s, expected %s numbers"
                         % (k, info.name, natural.dtype, info.dtype_name))
    with np.errstate(all="ignore"):
        converted = natural.astype(info.numpy_dtype)
    if info.numpy_dtype.kind in "biu" and not np.array_equal(converted, natural):
        raise DtypeError("input %d (%s): values that are not %s (%s); give an array of %s"
                         % (k, info.name, info.dtype_name, natural.dtype, info.dtype_name))
    return converted


def _from_array_like(k, info, a):
    """NumPy arrays and scalars and other array-likes, which keep their own dtype."""
    try:
        a = np.asarray(a)
    except (TypeError, ValueError) as e:
        raise FoundryError("input %d (%s): not an array: %s" % (k, info.name, e), 1) from None
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if info.dtype == BFLOAT16 and (a.dtype == np.uint16 or a.dtype.name == "bfloat16"):
        return a.view(np.uint16)  # raw bits; an ml_dtypes.bfloat16 array is the same bytes
    if a.dtype != info.numpy_dtype:
        fix = ("x.astype(ml_dtypes.bfloat16) or a uint16 array of its raw bits" if info.dtype == BFLOAT16
               else "x.astype(np.%s)" % info.numpy_dtype.type.__name__)
        _refuse_dtype(k, info, a.dtype.name, fix)
    return a


def _input_array(k, info, a):
    """Input `a` as a NumPy array of the model's dtype (uint16 bits for bfloat16), C-contiguous."""
    if info.numpy_dtype is None:
        raise FoundryError("input %d (%s): dtype %s is not supported by this loader" % (k, info.name, info.dtype_name), 1)
    torch = _torch_of(a)
    if torch is not None:
        a = _from_torch(torch, k, info, a)
    elif isinstance(a, (bool, int, float, complex, list, tuple)):
        a = _from_python(k, info, a)
    else:
        a = _from_array_like(k, info, a)
    # np.require, not np.ascontiguousarray: that one makes a 0-d array 1-d.
    a = np.require(a, requirements="C")
    if a.ndim > MAX_RANK:
        raise FoundryError("input %d (%s): rank %d is above %d" % (k, info.name, a.ndim, MAX_RANK), 1)
    return a


def _default_openmp_wait():
    """libgomp spins about 300,000 times in a barrier before it sleeps; on a machine whose cores
    other processes hold, a run then takes 10 to 1000 times longer (README: "Threads on a busy
    machine"), and 10,000 spins keep an idle machine's speed. libgomp reads the setting once, when
    it is loaded: this helps only when the model is the first to load it (not after torch), and
    only when the user chose no wait policy."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    try:
        with open("/proc/self/maps") as maps:
            if "libgomp" in maps.read():
                return  # already started: too late, and the process's own choice
    except OSError:
        pass
    os.environ["GOMP_SPINCOUNT"] = "10000"


class Model:
    """A compiled model loaded from its output folder. Thread-safe: run() may be called from
    several threads at once (ctypes releases the GIL during the call)."""

    def __init__(self, folder, library="model.so"):
        self.folder = os.path.abspath(os.fspath(folder))
        self.manifest = _read_manifest(self.folder)
        self.name = self.manifest["name"]
        so_path = os.path.join(self.folder, library)
        if not os.path.isfile(so_path):
            raise FoundryError("%s: no such file (compile with --emit=so, the default)" % so_path)
        _default_openmp_wait()
        try:
            self._lib = ctypes.CDLL(so_path, mode=getattr(os, "RTLD_LOCAL", 0) | getattr(os, "RTLD_NOW", 2))
        except OSError as e:
            raise FoundryError("%s: cannot load: %s" % (so_path, e)) from None
        self._bind()
        self._lock = threading.Lock()
        self._handle = None
        self.inputs = [self._info(self._input_info, k) for k in range(self._num_inputs())]
        self.outputs = [self._info(self._output_info, k) for k in range(self._num_outputs())]
        self._check_manifest()
        handle = ctypes.c_void_p()
        status = self._create(self.folder.encode(), ctypes.byref(handle))
        self._check(status, "%s_create(%s)" % (self.name, self.folder))
        self._handle = handle

    # ---- the C API ----

    def _fn(self, suffix, restype, argtypes):
        symbol = "%s_%s" % (self.name, suffix)
        try:
            fn = getattr(self._lib, symbol)
        except AttributeError:
            raise FoundryError("%s/model.so has no symbol %s (does the manifest match the library?)"
                               % (self.folder, symbol)) from None
        fn.restype = restype
        fn.argtypes = argtypes
        return fn

    def _bind(self):
        vp = ctypes.c_void_p
        self._create = self._fn("create", ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(vp)])
        self._run = self._fn("run", ctypes.c_int, [vp, ctypes.POINTER(_Tensor), ctypes.c_size_t,
                                                  ctypes.POINTER(_Tensor), ctypes.c_size_t])
        self._infer_shapes = self._fn("infer_shapes", ctypes.c_int, [ctypes.POINTER(_Tensor), ctypes.c_size_t,
                                                                    ctypes.POINTER(_Tensor), ctypes.c_size_t])
        self._num_inputs = self._fn("num_inputs", ctypes.c_size_t, [])
        self._num_outputs = self._fn("num_outputs", ctypes.c_size_t, [])
        self._input_info = self._fn("input_info", ctypes.c_int, [ctypes.c_size_t, ctypes.POINTER(_TensorInfo)])
        self._output_info = self._fn("output_info", ctypes.c_int, [ctypes.c_size_t, ctypes.POINTER(_TensorInfo)])
        self._destroy = self._fn("destroy", None, [vp])
        self._last_error = self._fn("last_error", ctypes.c_char_p, [])

    def last_error(self):
        """NAME_last_error() for the calling thread."""
        msg = self._last_error()
        return msg.decode("utf-8", "replace") if msg else ""

    def _check(self, status, what):
        if status != 0:
            msg = self.last_error() or "no message"
            raise FoundryError("%s failed (%s): %s" % (what, STATUS_NAMES.get(status, status), msg), status)

    def _info(self, fn, k):
        info = _TensorInfo()
        self._check(fn(k, ctypes.byref(info)), "%s info %d" % (self.name, k))
        rank = info.rank
        if not 0 <= rank <= MAX_RANK:
            raise FoundryError("%s: tensor %d has rank %d" % (self.name, k, rank))
        name = info.name.decode("utf-8", "replace") if info.name else str(k)
        return TensorInfo(name, info.dtype, info.shape[:rank], info.min_shape[:rank], info.max_shape[:rank])

    def _check_manifest(self):
        for role, infos in (("inputs", self.inputs), ("outputs", self.outputs)):
            listed = self.manifest.get(role)
            if isinstance(listed, list) and len(listed) != len(infos):
                raise FoundryError("%s: manifest.json lists %d %s, model.so has %d"
                                   % (self.folder, len(listed), role, len(infos)))

    # ---- running ----

    def run(self, *arrays):
        """Runs the model on `arrays` (one per input, in order); returns a list of NumPy arrays."""
        if len(arrays) == 1 and isinstance(arrays[0], (list, tuple)) and len(self.inputs) != 1:
            arrays = tuple(arrays[0])
        if len(arrays) != len(self.inputs):
            raise FoundryError("%s expects %d inputs, got %d" % (self.name, len(self.inputs), len(arrays)), 1)
        keep = []  # the contiguous arrays must outlive the call
        c_inputs = (_Tensor * max(1, len(arrays)))()
        for k, a in enumerate(arrays):
            info = self.inputs[k]
            a = _input_array(k, info, a)
            keep.append(a)
            t = c_inputs[k]
            t.data = a.ctypes.data if a.size else None
            t.dtype = info.dtype
            t.rank = a.ndim
            for d, n in enumerate(a.shape):
                t.shape[d] = n
        # The outputs' shapes for these inputs (dynamic sizes are read from the input shapes).
        c_outputs = (_Tensor * max(1, len(self.outputs)))()
        status = self._infer_shapes(c_inputs, len(arrays), c_outputs, len(self.outputs))
        self._check(status, "%s_infer_shapes" % self.name)
        outs = []
        for k, info in enumerate(self.outputs):
            if info.numpy_dtype is None:
                raise FoundryError("output %d (%s): dtype %s has no NumPy type" % (k, info.name, info.dtype_name))
            t = c_outputs[k]
            out = np.empty(tuple(t.shape[d] for d in range(t.rank)), dtype=info.numpy_dtype)
            outs.append(out)
            t.data = out.ctypes.data if out.size else None
        if self._handle is None:
            raise FoundryError("%s: the model was closed" % self.name)
        status = self._run(self._handle, c_inputs, len(arrays), c_outputs, len(self.outputs))
        self._check(status, "%s_run" % self.name)
        return outs

    __call__ = run

    def close(self):
        """Frees the model (NAME_destroy); the library stays loaded until the process exits."""
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is not None:
            self._destroy(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return "<foundry_model.Model %s from %s: %s -> %s>" % (self.name, self.folder, self.inputs, self.outputs)


def load(folder):
    """Opens the folder foundryc wrote (manifest.json, model.so, weights.bin)."""
    return Model(folder)


class _CommandError(Exception):
    """A user error of the command line: printed as one line on stderr, exit 1."""


def _load_npy(path):
    try:
        return np.load(path, allow_pickle=False)
    except OSError as e:
        raise _CommandError("%s: cannot read: %s" % (path, e.strerror or e)) from None
    except Exception as e:  # a file that is not .npy: NumPy raises ValueError or UnpicklingError
        raise _CommandError("%s: not a .npy file: %s" % (path, e)) from None


def _compare(k, y, e):
    """Prints output k's comparison with the expected array (1e-4 abs + 1e-4 rel); True if it passes."""
    if y.shape != e.shape:
        print("output %d: shape %s, expected %s: FAIL" % (k, list(y.shape), list(e.shape)))
        return False
    if y.dtype.kind in "fc" or e.dtype.kind in "fc":
        y64, e64 = y.astype(np.float64), e.astype(np.float64)
        err = np.abs(y64 - e64)
        both_nan = np.isnan(y64) & np.isnan(e64)
        good = bool(((err <= 1e-4 + 1e-4 * np.abs(e64)) | both_nan | (y64 == e64)).all())
        max_err = float(np.nanmax(err)) if err.size and not np.isnan(err).all() else 0.0
    else:
        good, max_err = bool(np.array_equal(y, e)), 0.0
    print("output %d: max abs err %g: %s" % (k, max_err, "PASS" if good else "FAIL"))
    return good


def _run_command(args):
    if args.expected and not args.inputs:
        raise _CommandError("--expected needs --inputs")
    model = load(args.folder)
    print("%s: %s -> %s" % (model.name, model.inputs, model.outputs))
    if not args.inputs:
        return 0
    inputs = [_load_npy(os.path.join(args.inputs, "%d.npy" % k)) for k in range(len(model.inputs))]
    ok = True
    for k, y in enumerate(model(*inputs)):
        if args.expected:
            ok = _compare(k, y, _load_npy(os.path.join(args.expected, "%d.npy" % k))) and ok
        else:
            print("output %d: %s %s" % (k, y.dtype, list(y.shape)))
    return 0 if ok else 1


def _main(argv=None):
    """python3 foundry_model.py OUTDIR [--inputs DIR] [--expected DIR]: prints the model's inputs
    and outputs, runs it on DIR/0.npy, 1.npy, ... and compares with the expected outputs. A user
    error (a folder that is not a compiled model, a missing .npy, a wrong dtype) is one line on
    stderr and exit 1, with no traceback; a comparison that fails is exit 1 too."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):  # argparse prints the usage too and exits 2
            raise _CommandError(message)

    parser = Parser(prog="foundry_model", description="Run a model compiled by foundryc on .npy inputs.")
    parser.add_argument("folder", help="the folder foundryc wrote")
    parser.add_argument("--inputs", help="folder of inputs 0.npy, 1.npy, ... in graph order")
    parser.add_argument("--expected", help="folder of expected outputs to compare with (needs --inputs)")
    try:
        return _run_command(parser.parse_args(argv))
    except (FoundryError, _CommandError) as e:
        message = " ".join(str(e).splitlines())  # one line
        print("foundry_model: error: %s" % message, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(_main())
