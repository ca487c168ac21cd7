// The foundry-run command line: options, exit codes and messages (the values it computes are
// checked by the compiled-model tests that run it against the samples' expected outputs).
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sched.h>  // sched_getaffinity: a CPU --cpu may use

#include "foundry/runtime/compare.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/npy.h"
#include "foundry/runtime/sample.h"
#include "support.h"
#include "sweep.h"

namespace foundry::test {

namespace {

ProcResult foundry_run(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {foundry_run_exe()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, 120);
}

// stderr starts "foundry-run: error: " and its first line holds `text`; not reported as a bug.
void check_error(const ProcResult& r, int exit_code, const std::string& text) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == exit_code);
  CHECK_THAT(r.err, Catch::StartsWith("foundry-run: error: "));
  CHECK_THAT(r.err.substr(0, r.err.find('\n')), Catch::Contains(text));
  CHECK(r.err.find("bug") == std::string::npos);
  if (exit_code == 2) CHECK_THAT(r.err, Catch::EndsWith("\nRun with --help for more information.\n"));
}

// samples/NAME compiled into `out`.
void compile_sample(const std::string& name, const std::string& out) {
  ProcResult c = run_foundryc({samples_dir() + "/" + name + "/model.pt2", "-o", out, "-q"});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
}

// "[8, 64]", written here rather than by the shape_text under test.
std::string shape_string(const std::vector<int64_t>& shape) {
  std::string text;
  for (int64_t d : shape) text += (text.empty() ? "" : ", ") + std::to_string(d);
  return "[" + text + "]";
}

// The number after `label` in `text` (e.g. "allowed there "); NaN when there is none.
double number_after(const std::string& text, const std::string& label) {
  size_t at = text.find(label);
  if (at == std::string::npos) return NAN;
  return std::stod(text.substr(at + label.size()));
}

}  // namespace

TEST_CASE("foundry-run: --version and --help", "[cli][fast]") {
  ProcResult v = foundry_run({"--version"});
  CHECK(v.exit_code == 0);
  CHECK(v.out == std::string("foundry-run ") + FOUNDRY_VERSION + "\n");

  ProcResult h = foundry_run({"--help"});
  CHECK(h.exit_code == 0);
  for (const char* opt : {"--inputs", "--expected", "--atol", "--rtol", "--bench", "--seed", "--version",
                          "|out - ref| <= atol + rtol*|ref|"})
    CHECK_THAT(h.out, Catch::Contains(opt));
}

TEST_CASE("foundry-run: usage errors exit 2 with the error prefix", "[cli][fast]") {
  check_error(foundry_run({}), 2, "model is required");
  check_error(foundry_run({"out", "--inputs", "in", "--no-such-option"}), 2, "--no-such-option");
  check_error(foundry_run({"out", "--inputs", "in", "--bench", "many"}), 2, "many");
  check_error(foundry_run({"out", "--inputs"}), 2, "--inputs");
}

TEST_CASE("foundry-run: a folder that is not a compiled model", "[cli][fast]") {
  TempDir tmp("foundry_run_");
  std::filesystem::create_directories(tmp / "empty");
  const std::string inputs = samples_dir() + "/mlp/inputs";
  check_error(foundry_run({tmp / "empty", "--inputs", inputs}), 1,
              tmp / "empty" + " is not a folder compiled by foundryc (no manifest.json); compile a model with " +
                  "`foundryc model.pt2 -o " + tmp / "empty" + "`");
  check_error(foundry_run({samples_dir() + "/mlp/model.pt2", "--inputs", inputs}), 1,
              "is not a folder compiled by foundryc");
  check_error(foundry_run({tmp / "missing", "--inputs", inputs}), 1, tmp / "missing" + " does not exist");
}

TEST_CASE("foundry-run: --inputs and --expected that are not folders", "[cli][fast]") {
  TempDir tmp("foundry_run_");
  compile_sample("mlp", tmp / "out");
  const std::string mlp = samples_dir() + "/mlp";
  const std::string file = mlp + "/inputs/0.npy";
  check_error(foundry_run({tmp / "out", "--inputs", file}), 1,
              "--inputs " + file + " is not a folder of 0.npy, 1.npy, ...");
  check_error(foundry_run({tmp / "out", "--inputs", tmp / "missing"}), 1,
              "--inputs " + tmp / "missing" + " does not exist");
  check_error(foundry_run({tmp / "out", "--inputs", mlp + "/inputs", "--expected", file}), 1,
              "--expected " + file + " is not a folder of 0.npy, 1.npy, ...");
  check_error(foundry_run({tmp / "out", "--inputs", mlp + "/inputs", "--expected", tmp / "missing"}), 1,
              "--expected " + tmp / "missing" + " does not exist");
}

TEST_CASE("foundry-run: an expected output of another shape or dtype is named, with no error measured", "[cli][fast]") {
  TempDir tmp("foundry_run_");
  compile_sample("mlp", tmp / "out");
  std::filesystem::create_directories(tmp / "wrong_shape");
  std::filesystem::create_directories(tmp / "wrong_dtype");
  foundry::NpyArray a;  // mlp's output is float32 [8, 10]
  a.shape = {8, 12};
  a.data.assign(8 * 12 * 4, 0);
  foundry::write_npy(tmp / "wrong_shape/0.npy", a);
  a.dtype = foundry::DType::Float64;
  a.shape = {8, 10};
  a.data.assign(8 * 10 * 8, 0);
  foundry::write_npy(tmp / "wrong_dtype/0.npy", a);
  for (const auto& [folder, problem] : std::vector<std::pair<std::string, std::string>>{
           {"wrong_shape", "FAIL: shape [8, 10], expected [8, 12]\n"},
           {"wrong_dtype", "FAIL: dtype float32, expected float64\n"}}) {
    ProcResult r = foundry_run({tmp / "out", "--inputs", samples_dir() + "/mlp/inputs", "--expected", tmp / folder});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(std::regex_search(r.out, std::regex("\noutput 0 \\([^)]*\\): ")));
    CHECK_THAT(r.out, Catch::Contains(problem));
    CHECK(r.out.find("err") == std::string::npos);
  }
}

TEST_CASE("foundry-run: the tolerance rule is said once and each output's worst element against it", "[cli][fast]") {
  TempDir tmp("foundry_run_");
  compile_sample("mlp", tmp / "out");
  const std::string inputs = samples_dir() + "/mlp/inputs";
  REQUIRE(foundry_run({tmp / "out", "--inputs", inputs, "--save-outputs", tmp / "saved"}).exit_code == 0);
  // The reference: the outputs themselves with element [2, 3] moved by 0.05, so that it is the
  // worst element and its error and bound are known here.
  foundry::NpyArray ref = foundry::read_npy(tmp / "saved/0.npy");
  REQUIRE(ref.shape == std::vector<int64_t>{8, 10});
  float& moved = ref.as<float>()[2 * 10 + 3];
  const double out_value = moved;
  moved += 0.05f;
  const double err = std::fabs(double(moved) - out_value);
  REQUIRE(std::fabs(moved) < 10);  // so that rtol 0.001 allows less than 0.05 below
  std::filesystem::create_directories(tmp / "ref");
  foundry::write_npy(tmp / "ref/0.npy", ref);
  auto run_with = [&](const std::string& atol, const std::string& rtol) {
    return foundry_run({tmp / "out", "--inputs", inputs, "--expected", tmp / "ref", "--atol", atol, "--rtol", rtol});
  };

  SECTION("a relative error above rtol that atol allows passes, and says why") {
    ProcResult r = run_with("0.1", "0");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out,
               Catch::StartsWith("tolerance: |out - ref| <= atol + rtol*|ref| per element (atol 0.1, rtol 0)\n"));
    CHECK(count_occurrences(r.out, "tolerance:") == 1);
    CHECK_THAT(r.out, Catch::Contains("): PASS: worst element [2, 3]: |out - ref| "));
    CHECK(number_after(r.out, "]: |out - ref| ") == Approx(err).epsilon(0.01));
    CHECK(number_after(r.out, "allowed there ") == Approx(0.1));
  }
  SECTION("past the bound atol + rtol*|ref|: the first and the worst element") {
    ProcResult r = run_with("0.01", "0.001");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.out, Catch::Contains("(atol 0.01, rtol 0.001)\n"));
    CHECK_THAT(r.out, Catch::Contains("): FAIL: 1 of 80 elements outside the tolerance, first [2, 3]: got "));
    CHECK_THAT(r.out, Catch::Contains("; worst element [2, 3]: |out - ref| "));
    CHECK(number_after(r.out, "got ") == Approx(out_value).epsilon(1e-6));
    CHECK(number_after(r.out, "]: |out - ref| ") == Approx(err).epsilon(0.01));
    CHECK(number_after(r.out, "allowed there ") == Approx(0.01 + 0.001 * std::fabs(moved)).epsilon(0.01));
  }
}

TEST_CASE("foundry-run: without --inputs it runs on random inputs of the model's shapes", "[cli][fast]") {
  TempDir tmp("foundry_run_");
  SECTION("a static model, benchmarked") {
    compile_sample("mlp", tmp / "out");
    foundry::NpyArray example = foundry::read_npy(samples_dir() + "/mlp/inputs/0.npy");
    ProcResult r = foundry_run({tmp / "out", "--bench", "3"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::StartsWith("inputs: random, seed 0 (floats uniform in [-1, 1), integers 0 or 1, bools "
                                        "false or true): "));
    CHECK_THAT(r.out, Catch::Contains(" float32 " + shape_string(example.shape) + "\n"));
    CHECK_THAT(r.out, Catch::Contains("\nbenchmark: median "));
  }
  SECTION("a dynamic size is the export's, or the smallest allowed without it in manifest.json") {
    compile_sample("flatten_dynamic", tmp / "out");
    // scripts/export_dynamic_sample.py exports at batch 6 (the sample's inputs) with Dim(min=1).
    std::vector<int64_t> shape = foundry::read_npy(samples_dir() + "/flatten_dynamic/inputs/0.npy").shape;
    REQUIRE(shape.at(0) == 6);
    nlohmann::json manifest = nlohmann::json::parse(read_file(tmp / "out/manifest.json"));
    CHECK(manifest["inputs"][0]["example_shape"] == shape);
    ProcResult r = foundry_run({tmp / "out", "--bench", "1"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains(" float32 " + shape_string(shape) + "\n"));

    manifest["inputs"][0].erase("example_shape");
    write_file(tmp / "out/manifest.json", manifest.dump());
    shape[0] = 1;
    ProcResult old = foundry_run({tmp / "out", "--bench", "1"});
    INFO(old.out << old.err);
    CHECK(old.exit_code == 0);
    CHECK_THAT(old.out, Catch::Contains(" float32 " + shape_string(shape) + "\n"));
  }
  SECTION("--seed: the same seed gives the same outputs, another seed others") {
    compile_sample("mlp", tmp / "out");
    auto outputs_at = [&](const std::string& seed, const std::string& dir) {
      REQUIRE(foundry_run({tmp / "out", "--seed", seed, "--save-outputs", tmp / dir}).exit_code == 0);
      return read_file(tmp / dir + "/0.npy");
    };
    CHECK(outputs_at("1", "a") == outputs_at("1", "b"));
    CHECK(outputs_at("1", "c") != outputs_at("2", "d"));
    ProcResult r = foundry_run({tmp / "out", "--seed", "2"});
    CHECK_THAT(r.out, Catch::StartsWith("inputs: random, seed 2 "));
  }
  SECTION("--expected needs --inputs") {
    check_error(foundry_run({tmp / "out", "--expected", samples_dir() + "/mlp/expected"}), 2,
                "--expected needs --inputs: random inputs have no expected outputs");
  }
}

TEST_CASE("foundry-run: --cpu times one thread on a CPU the process may use, names one it may not, and refuses more threads",
          "[cli][fast]") {
  TempDir tmp("foundry_run_");
  compile_sample("mlp", tmp / "out");
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed)) ++cpu;
  ProcResult r = foundry_run({tmp / "out", "--bench", "3", "--threads", "1", "--cpu", std::to_string(cpu)});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("\nbenchmark: median "));
  check_error(foundry_run({tmp / "out", "--bench", "3", "--threads", "1", "--cpu", "1023"}), 1,
              "--cpu 1023: not a CPU this process may run on");
  check_error(foundry_run({tmp / "out", "--bench", "3", "--threads", "1", "--cpu", "-2"}), 2, "--cpu");
  check_error(foundry_run({tmp / "out", "--cpu", std::to_string(cpu)}), 2, "--cpu requires --bench");
  // The pool's threads would inherit the pin (scripts/bench/gomp_pin_inheritance.c).
  for (const char* threads : {"0", "2"})
    check_error(foundry_run({tmp / "out", "--bench", "3", "--threads", threads, "--cpu", std::to_string(cpu)}), 2,
                "--cpu needs --threads 1: the threads OpenMP starts after the pin would inherit its CPU");
  check_error(foundry_run({tmp / "out", "--bench", "3", "--cpu", std::to_string(cpu)}), 2, "--cpu needs --threads 1");
}

TEST_CASE("foundry-run: --gap-us pauses before each timed run, outside the times", "[cli][fast]") {
  TempDir tmp("foundry_run_");
  compile_sample("mlp", tmp / "out");
  // Ten pauses of 50 ms: the process takes half a second at least, and no run's time holds one
  // (the mlp sample runs in microseconds).
  const auto start = std::chrono::steady_clock::now();
  ProcResult r = foundry_run({tmp / "out", "--bench", "10", "--gap-us", "50000", "--json"});
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(wall_s >= 0.5);
  const nlohmann::json report = nlohmann::json::parse(r.out);
  CHECK(report["runs"] == 10);
  CHECK(report["p90_ms"].get<double>() < 50);
  check_error(foundry_run({tmp / "out", "--gap-us", "100"}), 2, "--gap-us requires --bench");
  check_error(foundry_run({tmp / "out", "--bench", "3", "--gap-us", "-1"}), 2, "--gap-us");
}

TEST_CASE("foundry-run: random input values", "[cli][fast]") {
  using foundry::DType;
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32,
                      DType::UInt8, DType::Bool}) {
    INFO("dtype " << static_cast<int>(dtype));
    std::mt19937_64 rng(7), same(7), other(8);
    foundry::NpyArray a = foundry::random_array(dtype, {50, 20}, rng);
    REQUIRE(a.shape == std::vector<int64_t>{50, 20});
    CHECK(a.data == foundry::random_array(dtype, {50, 20}, same).data);
    CHECK(a.data != foundry::random_array(dtype, {50, 20}, other).data);
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t e = 0; e < a.numel(); ++e) {
      double v = foundry::element_as_double(a, e);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    if (foundry::is_floating(dtype)) {
      CHECK(lo >= -1);
      CHECK(lo < -0.9);
      CHECK(hi < 1);
      CHECK(hi > 0.9);
    } else {
      CHECK(lo == 0);
      CHECK(hi == 1);
    }
  }
}

TEST_CASE("foundry-run: --profile times every step of a CPU model, which still computes the right outputs",
          "[cli][fast]") {
  TempDir tmp("foundry_run_");
  const std::string sample = samples_dir() + "/small_cnn";  // convolutions (oneDNN calls) and kernels
  compile_sample("small_cnn", tmp / "out");
  // The steps as the generated wrapper runs them: one end mark after each kernel or library call.
  const std::string wrapper = read_file(tmp / "out/wrapper.cpp");
  size_t marks = 0;
  for (size_t at = wrapper.find("foundry_rt::step_done("); at != std::string::npos;
       at = wrapper.find("foundry_rt::step_done(", at + 1))
    ++marks;
  REQUIRE(marks >= 3);

  ProcResult r = foundry_run({tmp / "out", "--inputs", sample + "/inputs", "--profile", "3", "--threads", "2", "--json"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  nlohmann::json profile = nlohmann::json::parse(r.out)["profile"];
  REQUIRE(profile["steps"].size() == marks);
  const std::string kernels = read_file(tmp / "out/kernels.cpp");
  double sum = 0;
  std::set<size_t> seen;
  for (const auto& step : profile["steps"]) {
    std::string name = step["name"];
    INFO(name);
    seen.insert(step["step"].get<size_t>());
    // A kernel is named by its function; a library call by its ATen origins and the call.
    bool call = name.find(" (aten.") != std::string::npos && name.back() == ']';
    CHECK((call || kernels.find("void " + name + "(") != std::string::npos));
    CHECK(step["median_ms"].get<double>() >= 0);
    CHECK((step["threads"] == 1 || step["threads"] == 2));
    sum += step["median_ms"].get<double>();
  }
  CHECK(seen.size() == marks);
  CHECK(std::abs(sum - profile["total_ms"].get<double>()) <= 1e-9 * std::max(1.0, sum));

  // The profiled run's outputs against PyTorch's.
  LoadedModel model(tmp / "out");
  std::vector<NpyArray> inputs = read_npy_sequence(sample + "/inputs");
  std::vector<NpyArray> outputs = model.allocate_outputs(inputs);
  std::vector<LoadedModel::StepTime> steps = model.profile(inputs, outputs);
  CHECK(steps.size() == marks);
  CHECK(compare_with_expected(outputs, sample) == "");

  // The text form lists the steps slowest first, each with its threads.
  ProcResult text = foundry_run({tmp / "out", "--profile", "2", "--threads", "1"});
  INFO(text.out << text.err);
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("profile (the clock between steps, median of 2 runs): "));
  CHECK_THAT(text.out, Catch::Contains(" 1 thread   #"));
}

}  // namespace foundry::test
