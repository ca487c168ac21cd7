// The foundry-run command line: options, exit codes and messages (the values it computes are
// checked by the compiled-model tests that run it against the samples' expected outputs).
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "support.h"

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

}  // namespace

TEST_CASE("foundry-run: --version and --help", "[cli][fast]") {
  ProcResult v = foundry_run({"--version"});
  CHECK(v.exit_code == 0);
  CHECK(v.out == std::string("foundry-run ") + FOUNDRY_VERSION + "\n");

  ProcResult h = foundry_run({"--help"});
  CHECK(h.exit_code == 0);
  for (const char* opt : {"--inputs", "--expected", "--atol", "--rtol", "--bench", "--version"})
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

}  // namespace foundry::test
