// The Python loader (python/foundry_model.py, ctypes + NumPy): it opens a folder foundryc wrote,
// runs the model on NumPy arrays against the sample's reference outputs, and turns the C API's
// errors into Python exceptions carrying NAME_last_error().
#include <catch2/catch.hpp>
#include <filesystem>

#include "support.h"

namespace fs = std::filesystem;

namespace {

std::string python_dir() { return (fs::path(test_source_dir()).parent_path() / "python").string(); }

// argv: python_dir, model_dir, inputs/0.npy, expected/0.npy
const char* kScript = R"PY(
import os, sys, threading
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, sys.argv[1])
import numpy as np
import foundry_model as fm

folder, x_path, e_path = sys.argv[2], sys.argv[3], sys.argv[4]
x, expected = np.load(x_path), np.load(e_path)

model = fm.load(folder)
assert model.name == "mlp_py", model.name
assert len(model.inputs) == 1 and len(model.outputs) == 1, model
assert model.inputs[0].shape == (8, 64) and model.inputs[0].dtype_name == "float32", model.inputs
assert model.outputs[0].shape == (8, 10) and model.outputs[0].numpy_dtype == np.float32, model.outputs

def check(y):
    assert isinstance(y, np.ndarray), type(y)
    assert y.shape == expected.shape and y.dtype == expected.dtype, (y.shape, y.dtype)
    err = np.abs(y.astype(np.float64) - expected)
    bound = 1e-4 + 1e-4 * np.abs(expected)
    assert (err <= bound).all(), "max abs err %g" % err.max()

(y,) = model.run(x)
check(y)
(y,) = model(np.asfortranarray(x))  # made contiguous before the call
check(y)
(y,) = model(x.tolist())  # any array-like
check(y)

# Several threads at once.
failures = []
def worker():
    try:
        for _ in range(20):
            check(model(x)[0])
    except Exception as e:
        failures.append(e)
threads = [threading.Thread(target=worker) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
assert not failures, failures

# Errors carry the model's message.
try:
    model(np.zeros((3, 64), np.float32))
    raise AssertionError("a wrong shape was accepted")
except fm.FoundryError as e:
    assert e.status == 1 and "shape [3, 64], expected [8, 64]" in str(e), str(e)
    assert "shape" in model.last_error(), model.last_error()
# One dtype rule: an input of another dtype is refused before the model runs, whatever it is.
def refused(arg, message):
    try:
        model(arg)
    except fm.DtypeError as e:
        assert isinstance(e, fm.FoundryError) and isinstance(e, TypeError) and e.status == 1, type(e).__mro__
        assert str(e) == message, str(e)
        return
    raise AssertionError("accepted: " + message)
fix = "; convert it first, e.g. x.astype(np.float32)"
refused(x.astype(np.float64), "input 0 (input): float64, expected float32" + fix)
refused(x.astype(">f8"), "input 0 (input): float64, expected float32" + fix)  # byte order is no excuse
refused(x.astype(np.float16), "input 0 (input): float16, expected float32" + fix)
refused(x.view(np.uint32), "input 0 (input): uint32, expected float32" + fix)
refused(memoryview(x.astype(np.float64)), "input 0 (input): float64, expected float32" + fix)  # buffer protocol
refused([[1j] * 64] * 8, "input 0 (input): Python values that NumPy reads as complex128, expected float32 numbers")
# Nothing reached the model: a fresh thread's NAME_last_error() is empty after a refusal.
seen = []
def refuse_in_thread():
    refused(x.astype(np.float64), "input 0 (input): float64, expected float32" + fix)
    seen.append(model.last_error())
t = threading.Thread(target=refuse_in_thread)
t.start()
t.join()
assert seen == [""], seen
(y,) = model(x.astype(">f4"))  # the model's dtype in the other byte order: swapped, not refused
check(y)
try:
    model(x, x)
    raise AssertionError("two inputs were accepted")
except fm.FoundryError as e:
    assert "expects 1 inputs" in str(e), str(e)

# A folder without weights.bin: NAME_create fails, with its message.
try:
    os.rename(os.path.join(folder, "weights.bin"), os.path.join(folder, "weights.moved"))
    fm.load(folder)
    raise AssertionError("a folder without weights.bin loaded")
except fm.FoundryError as e:
    assert "mlp_py_create" in str(e) and e.status is not None and e.status != 0, str(e)
finally:
    os.rename(os.path.join(folder, "weights.moved"), os.path.join(folder, "weights.bin"))

# Not a foundryc folder.
try:
    fm.load(os.path.dirname(x_path))
    raise AssertionError("a folder without manifest.json loaded")
except fm.FoundryError as e:
    assert "manifest.json" in str(e), str(e)

with fm.load(folder) as m2:
    check(m2(x)[0])
model.close()
model.close()  # twice is fine
try:
    model(x)
    raise AssertionError("a closed model ran")
except fm.FoundryError as e:
    assert "closed" in str(e), str(e)
print("python loader OK")
)PY";

std::vector<std::string> python(std::vector<std::string> args) { return python_command(std::move(args)); }

// Runs `script` with argv: python_dir, tmp/out (the compiled model), sample/inputs/0.npy,
// sample/expected/0.npy; it must exit 0 and print `ok_line`.
void run_check_script(const TempDir& tmp, const char* script, const std::string& sample, const std::string& ok_line) {
  write_file(tmp / "check.py", script);
  ProcResult r = run_process(python({tmp / "check.py", python_dir(), tmp / "out", sample + "/inputs/0.npy",
                                      sample + "/expected/0.npy"}),
                             120);
  INFO("python stdout: " << r.out << "\npython stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find(ok_line) != std::string::npos);
}

// python3 foundry_model.py `args`.
ProcResult run_command(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {python_dir() + "/foundry_model.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(python(argv), 120);
}

// A user error of the command: exit 1 and one line on stderr, "foundry_model: error: ...
// `fragment` ...", with no traceback.
void check_command_error(const ProcResult& r, const std::string& fragment) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.rfind("foundry_model: error: ", 0) == 0);
  CHECK(r.err.find(fragment) != std::string::npos);
  CHECK(count_occurrences(r.err, "\n") == 1);
  CHECK(r.err.back() == '\n');
  CHECK(r.out.find("Traceback") == std::string::npos);
}

}  // namespace

TEST_CASE("python: foundry_model.py runs a compiled mlp on NumPy arrays", "[deploy]") {
  TempDir tmp("foundry_python_");
  const std::string sample = samples_dir() + "/mlp";
  ProcResult c = run_foundryc({sample + "/model.pt2", "-o", tmp / "out", "--name", "mlp_py", "--cache-dir", tmp / "cache"});
  INFO("foundryc: " << c.err);
  REQUIRE(c.exit_code == 0);

  run_check_script(tmp, kScript, sample, "python loader OK");

  // As a command: python3 foundry_model.py OUTDIR --inputs DIR --expected DIR.
  ProcResult cli = run_process(python({python_dir() + "/foundry_model.py", tmp / "out", "--inputs", sample + "/inputs",
                                        "--expected", sample + "/expected"}),
                               120);
  INFO("foundry_model.py: " << cli.out << cli.err);
  CHECK(cli.exit_code == 0);
  CHECK(cli.out.find("output 0: max abs err") != std::string::npos);
  CHECK(cli.out.find("PASS") != std::string::npos);
  ProcResult wrong = run_process(python({python_dir() + "/foundry_model.py", tmp / "out", "--inputs", sample + "/inputs",
                                          "--expected", sample + "/inputs"}),
                                 120);
  CHECK(wrong.exit_code == 1);

  // Its user errors: a float64 input (the same rule as a call), a missing input file.
  fs::create_directories(tmp / "float64");
  ProcResult to64 = run_process(
      python({"-c", "import numpy as np, sys; np.save(sys.argv[2], np.load(sys.argv[1]).astype(np.float64))",
              sample + "/inputs/0.npy", tmp / "float64/0.npy"}));
  REQUIRE(to64.exit_code == 0);
  check_command_error(run_command({tmp / "out", "--inputs", tmp / "float64"}),
                      "input 0 (input): float64, expected float32; convert it first");
  check_command_error(run_command({tmp / "out", "--inputs", tmp / "cache"}), "0.npy: cannot read: No such file");
}

TEST_CASE("python: foundry_model.py as a command says what is wrong on stderr, exit 1", "[deploy][fast]") {
  TempDir tmp("foundry_python_");
  // A folder that is not a compiled model (no manifest.json), one that does not exist, no folder.
  ProcResult not_model = run_command({samples_dir() + "/mlp/inputs"});
  check_command_error(not_model, "/mlp/inputs/manifest.json: cannot read the manifest (is this a folder written by foundryc?)");
  CHECK(not_model.out.empty());
  check_command_error(run_command({tmp / "missing"}), "manifest.json: cannot read the manifest");
  check_command_error(run_command({}), "the following arguments are required: folder");
  check_command_error(run_command({tmp.path(), "--expected", tmp.path()}), "--expected needs --inputs");
  // manifest.json that is not JSON.
  write_file(tmp / "manifest.json", "{");
  check_command_error(run_command({tmp.path()}), "manifest.json: not valid JSON");
}

// issue 16 class 10: a 0-d input stays 0-d (np.ascontiguousarray made it [1], which the model
// refused as a wrong rank). acos of a 0-d tensor from the corpus, against PyTorch's output.
TEST_CASE("python: a 0-d input stays 0-d", "[deploy][fast]") {
  if (!require_corpus()) return;
  TempDir tmp("foundry_python_");
  const std::string sample = corpus_dir() + "/opinfo/acos__float32__2";
  ProcResult c = run_foundryc({sample + "/model.pt2", "-o", tmp / "out", "--name", "acos0d", "--cache-dir", tmp / "cache"});
  INFO("foundryc: " << c.err);
  REQUIRE(c.exit_code == 0);
  const char* script = R"PY(
import sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
import numpy as np
import foundry_model as fm
model = fm.load(sys.argv[2])
x, expected = np.load(sys.argv[3]), np.load(sys.argv[4])
assert x.ndim == 0 and expected.ndim == 0, (x.shape, expected.shape)
assert model.inputs[0].shape == (), model.inputs
for arg in (x, np.float32(x), float(x)):  # an array, a NumPy scalar, a Python number
    (y,) = model(arg)
    assert y.shape == () and y.dtype == np.float32, (y.shape, y.dtype)
    assert abs(float(y) - float(expected)) <= 1e-4 + 1e-4 * abs(float(expected)), (y, expected)
print("0-d OK")
)PY";
  run_check_script(tmp, script, sample, "0-d OK");
}

namespace {

// samples/pointwise (relu(x + y) * 2) with every tensor bfloat16 (test/python/bfloat16_pointwise.py:
// no corpus sample has bfloat16 inputs), compiled to tmp/bf16 as pw_bf16.
void compile_bfloat16_pointwise(const TempDir& tmp) {
  ProcResult patch = run_process(python({test_source_dir() + "/python/bfloat16_pointwise.py",
                                          samples_dir() + "/pointwise/model.pt2", tmp / "pw_bf16.pt2"}));
  INFO("bfloat16_pointwise.py: " << patch.out << patch.err);
  REQUIRE(patch.exit_code == 0);
  ProcResult c = run_foundryc({tmp / "pw_bf16.pt2", "-o", tmp / "bf16", "--name", "pw_bf16", "--cache-dir", tmp / "cache"});
  INFO("foundryc: " << c.err);
  REQUIRE(c.exit_code == 0);
}

// argv: python_dir, the bfloat16 pointwise model.
const char* kBfloat16Script = R"PY(
import sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
import numpy as np
import foundry_model as fm
model = fm.load(sys.argv[2])
assert [t.dtype_name for t in model.inputs + model.outputs] == ["bfloat16"] * 3, model

def bits(f):  # float32 values exact in bfloat16 -> their bfloat16 bits (the top half)
    return (f.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
def value(b):
    return (b.astype(np.uint32) << 16).view(np.float32)

# Values whose sums and doubles have at most 8 significant bits, so that NumPy's float32
# relu(x + y) * 2 is exactly the bfloat16 result (checked: its bits round-trip).
x = np.repeat(np.arange(-64, 64, dtype=np.float32), 8)
y = np.tile(np.arange(-30, 34, dtype=np.float32) + 0.5, 16)
reference = np.maximum(x + y, 0) * 2
want = bits(reference)
assert np.array_equal(value(want), reference) and (reference > 0).sum() > 100

(out,) = model(bits(x), bits(y))  # uint16 arrays of the raw bits
assert out.dtype == np.uint16 and out.shape == (1024,), (out.dtype, out.shape)
assert np.array_equal(out, want), np.flatnonzero(out != want)[:8]

def refused(args, message):
    try:
        model(*args)
    except fm.DtypeError as e:
        assert str(e).startswith(message), str(e)
        return
    raise AssertionError("accepted: " + message)
refused((x, bits(y)), "input 0 (x): float32, expected bfloat16; convert it first, e.g. x.astype(ml_dtypes.bfloat16) "
        "or a uint16 array of its raw bits")
refused((bits(x), bits(y).view(np.int16)), "input 1 (y): int16, expected bfloat16")
refused((x.tolist(), bits(y)), "input 0 (x): a Python list for a bfloat16 input (NumPy has no bfloat16)")

try:
    import ml_dtypes
except ImportError:
    print("ml_dtypes: skipped (not importable)")
else:
    (out,) = model(x.astype(ml_dtypes.bfloat16), y.astype(ml_dtypes.bfloat16))
    assert out.dtype == np.uint16 and np.array_equal(out, want), out[:8]
    assert np.array_equal(out.view(ml_dtypes.bfloat16).astype(np.float32), reference)
    print("ml_dtypes: checked")
print("bfloat16 OK")
)PY";

}  // namespace

TEST_CASE("python: bfloat16 inputs as uint16 bits or ml_dtypes arrays, outputs as uint16 bits", "[deploy][fast]") {
  TempDir tmp("foundry_python_");
  compile_bfloat16_pointwise(tmp);
  write_file(tmp / "check.py", kBfloat16Script);
  ProcResult r = run_process(python({tmp / "check.py", python_dir(), tmp / "bf16"}), 120);
  INFO("python stdout: " << r.out << "\npython stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("bfloat16 OK") != std::string::npos);
  if (r.out.find("ml_dtypes: skipped") != std::string::npos)
    WARN("skipped: ml_dtypes is not importable, the ml_dtypes.bfloat16 inputs were not checked");
}

// torch is an optional extra (not a Debian package): where it imports, check_torch_inputs.py gives
// the loader torch tensors (float32, float64 refused, bfloat16 against torch's own arithmetic).
TEST_CASE("python: torch tensors as inputs (skipped without torch)", "[deploy][fast]") {
  if (run_process(python({"-c", "import torch"}), 120).exit_code != 0) {
    WARN("SKIPPED: torch is not importable, test/python/check_torch_inputs.py did not run");
    return;
  }
  TempDir tmp("foundry_python_");
  const std::string mlp = samples_dir() + "/mlp";
  ProcResult c = run_foundryc({mlp + "/model.pt2", "-o", tmp / "out", "--name", "mlp_py", "--cache-dir", tmp / "cache"});
  INFO("foundryc: " << c.err);
  REQUIRE(c.exit_code == 0);
  compile_bfloat16_pointwise(tmp);
  ProcResult r = run_process(python({test_source_dir() + "/python/check_torch_inputs.py", python_dir(), tmp / "out",
                                      mlp + "/inputs/0.npy", mlp + "/expected/0.npy", tmp / "bf16"}),
                             300);
  INFO("python stdout: " << r.out << "\npython stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("torch inputs OK") != std::string::npos);
}

// The installed layout: <prefix>/share/foundry/python/foundry_model.py, which find_package(foundry)
// names as FOUNDRY_PYTHON_DIR and Python imports with PYTHONPATH set to that folder alone.
TEST_CASE("python: cmake --install installs foundry_model.py, importable with PYTHONPATH", "[deploy][fast]") {
  TempDir tmp("foundry_python_install_");
  ProcResult inst = run_process({"cmake", "--install", FOUNDRY_BINARY_DIR, "--prefix", tmp / "prefix"}, 300);
  INFO("cmake --install: " << inst.out << inst.err);
  REQUIRE(inst.exit_code == 0);
  const std::string python_path = tmp / "prefix/share/foundry/python";
  REQUIRE(fs::is_regular_file(python_path + "/foundry_model.py"));

  fs::create_directories(tmp / "proj");
  write_file(tmp / "proj/CMakeLists.txt",
             "cmake_minimum_required(VERSION 3.20)\nproject(p NONE)\nfind_package(foundry REQUIRED)\n"
             "message(STATUS \"FOUNDRY_PYTHON_DIR=${FOUNDRY_PYTHON_DIR}\")\n");
  ProcResult cfg = run_process({"cmake", "-G", "Ninja", "-S", tmp / "proj", "-B", tmp / "build",
                                "-DCMAKE_PREFIX_PATH=" + (tmp / "prefix")});
  INFO("cmake: " << cfg.out << cfg.err);
  REQUIRE(cfg.exit_code == 0);
  CHECK(cfg.out.find("FOUNDRY_PYTHON_DIR=" + python_path + "\n") != std::string::npos);

  const std::string mlp = samples_dir() + "/mlp";
  ProcResult c = run_process({tmp / "prefix/bin/foundryc", mlp + "/model.pt2", "-o", tmp / "out", "--name", "mlp_py",
                              "--cache-dir", tmp / "cache"});
  INFO("foundryc: " << c.err);
  REQUIRE(c.exit_code == 0);
  const char* script = R"PY(
import os, sys
import numpy as np
import foundry_model as fm
installed, folder, x_path, e_path = sys.argv[1:]
assert os.path.dirname(os.path.realpath(fm.__file__)) == os.path.realpath(installed), fm.__file__
(y,) = fm.load(folder)(np.load(x_path))
expected = np.load(e_path)
assert y.shape == expected.shape and (np.abs(y - expected) <= 1e-4 + 1e-4 * np.abs(expected)).all()
print("installed loader OK")
)PY";
  write_file(tmp / "check.py", script);
  std::vector<std::string> argv = python({tmp / "check.py", python_path, tmp / "out", mlp + "/inputs/0.npy",
                                          mlp + "/expected/0.npy"});
  argv.insert(argv.begin(), {"env", "PYTHONPATH=" + python_path});
  ProcResult r = run_process(argv, 120);
  INFO("python stdout: " << r.out << "\npython stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("installed loader OK") != std::string::npos);

  // As a command from there: python3 -m foundry_model.
  argv = python({"-m", "foundry_model", tmp / "out", "--inputs", mlp + "/inputs", "--expected", mlp + "/expected"});
  argv.insert(argv.begin(), {"env", "PYTHONPATH=" + python_path});
  ProcResult cli = run_process(argv, 120);
  INFO("python -m foundry_model: " << cli.out << cli.err);
  CHECK(cli.exit_code == 0);
  CHECK(cli.out.find("output 0: max abs err") != std::string::npos);
  CHECK(cli.out.find("PASS") != std::string::npos);
}
