// Replays every input kept in fuzz/regressions/ (crashes the fuzzers found, once fixed; see
// fuzz/README.md) through foundryc's frontend and pipeline up to code generation (no C++
// compiler). Each must end as a success (exit 0) or a clean user error (exit 1): never a crash,
// a hang, an internal error (exit 3) or a sanitizer report.
//
// Inputs are read as the fuzzers read them (fuzz/fuzz_common.h): bytes starting with "PK" are a
// .pt2 archive; anything else is a bare models/model.json placed in an extracted copy of
// samples/mlp/model.pt2, so that the weights it names exist.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "support.h"

namespace fs = std::filesystem;

namespace {

constexpr int kRegressionTimeoutSeconds = 120;

std::vector<fs::path> regression_files() {
  std::vector<fs::path> files;
  const fs::path dir = fs::path(test_source_dir()) / ".." / "fuzz" / "regressions";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.empty() || name[0] == '.' || e.path().extension() == ".md") continue;
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// samples/mlp/model.pt2 extracted under `dir`; returns the path of its models/model.json.
std::string extract_json_env(const std::string& dir) {
  ProcResult r = run_process({"unzip", "-q", "-o", samples_dir() + "/mlp/model.pt2", "-d", dir}, 60);
  INFO("unzip: " << r.err);
  REQUIRE(r.exit_code == 0);
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == "model.json" && e.path().parent_path().filename() == "models")
      return e.path().string();
  FAIL("samples/mlp/model.pt2 has no models/model.json");
  return {};
}

}  // namespace

TEST_CASE("fuzz regressions: every kept input is a success or a clean user error", "[hostile][fast]") {
  const auto files = regression_files();
  if (files.empty()) {
    SUCCEED("fuzz/regressions/ holds no inputs");
    return;
  }
  TempDir tmp("foundry_fuzzreg_");
  std::string json_path;
  int n = 0;
  for (const auto& file : files) {
    const std::string bytes = read_file(file.string());
    std::string input = file.string();
    if (!(bytes.size() >= 2 && bytes[0] == 'P' && bytes[1] == 'K')) {
      if (json_path.empty()) json_path = extract_json_env(tmp / "env");
      write_file(json_path, bytes);
      input = json_path;
    }
    const std::string out = tmp / ("out_" + std::to_string(n++));
    INFO("regression input: " << file.string());
    INFO("command: foundryc " << input << " --stop-after=codegen --emit=source -o " << out);
    ProcResult r = run_foundryc({input, "--stop-after=codegen", "--emit=source", "-o", out}, kRegressionTimeoutSeconds);
    INFO("stdout: " << r.out);
    INFO("stderr: " << r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.term_signal == 0);
    CHECK((r.exit_code == 0 || r.exit_code == 1));
    // Under FOUNDRY_SANITIZE, a sanitizer report may come with any exit code.
    CHECK(r.err.find("Sanitizer") == std::string::npos);
    CHECK(r.err.find("runtime error:") == std::string::npos);
  }
}
