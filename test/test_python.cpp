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
try:
    model(x.astype(np.float64))
    raise AssertionError("a wrong dtype was accepted")
except fm.FoundryError as e:
    assert e.status == 1 and "float64, expected float32" in str(e), str(e)
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

// python3 with `args`. Under scripts/sanitize.sh the models are built with AddressSanitizer,
// whose runtime must be the first library of the process that loads them: Python is not built
// with it, so it is preloaded (and leak checking, which Python's own allocations would fail, is
// off in that process).
std::vector<std::string> python(std::vector<std::string> args) {
  std::vector<std::string> argv;
#ifdef __SANITIZE_ADDRESS__
  ProcResult lib = run_process({"g++", "-print-file-name=libasan.so"});
  REQUIRE(lib.exit_code == 0);
  argv = {"env", "LD_PRELOAD=" + lib.out.substr(0, lib.out.find('\n')), "ASAN_OPTIONS=detect_leaks=0"};
#endif
  argv.push_back(python3());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

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

}  // namespace

TEST_CASE("python: foundry_model.py runs a compiled mlp on NumPy arrays", "[deploy][fast]") {
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
