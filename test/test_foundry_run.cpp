// The foundry-run command line: options, exit codes and messages (the values it computes are
// checked by the compiled-model tests that run it against the samples' expected outputs).
#include <catch2/catch.hpp>
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

}  // namespace foundry::test
