// Compiling at scale: a compiler launcher (ccache) caches the compiles, and a compile cache shared
// by many processes at once, some killed mid-compile, stays whole.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "foundry/runtime/compare.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "support.h"

namespace fs = std::filesystem;

namespace foundry::test {
namespace {

bool on_path(const std::string& program) {
  return run_process({"sh", "-c", "command -v " + program}).exit_code == 0;
}

// `ccache --print-stats` as counter name → value.
std::map<std::string, long> ccache_counters(const std::vector<std::string>& env) {
  std::vector<std::string> argv = {"env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {"ccache", "--print-stats"});
  ProcResult r = run_process(argv);
  REQUIRE(r.exit_code == 0);
  std::map<std::string, long> counters;
  std::istringstream lines(r.out);
  for (std::string name; lines >> name;) lines >> counters[name];
  return counters;
}

}  // namespace

TEST_CASE("build: with --cxx-launcher ccache a second build in a fresh folder is a ccache hit with identical outputs",
          "[build][cache][launcher]") {
  if (!on_path("ccache")) {
    WARN("SKIPPED: ccache is not installed (scripts/setup.sh installs it)");
    return;
  }
  TempDir tmp;
  // A ccache of the test's own, without the user's configuration.
  write_file(tmp / "ccache.conf", "");
  const std::vector<std::string> env = {"CCACHE_DIR=" + tmp / "ccache", "CCACHE_CONFIGPATH=" + tmp / "ccache.conf"};
  auto compile = [&](const std::string& out, std::vector<std::string> extra, std::vector<std::string> more_env = {}) {
    std::vector<std::string> argv = {"env"};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.insert(argv.end(), more_env.begin(), more_env.end());
    // --no-cache: foundryc's own cache would answer the second build before any compiler runs.
    argv.insert(argv.end(), {foundryc_exe(), samples_dir() + "/small_cnn/model.pt2", "-o", out, "--no-cache", "-v"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    ProcResult r = run_process(argv);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.err;
  };
  std::string first = compile(tmp / "a", {"--cxx-launcher", "ccache", "--cxx", "g++"});
  CHECK_THAT(first, Catch::Contains("build: ccache g++ -std=c++17 ") && Catch::Contains("-c kernels.cpp"));
  CHECK_THAT(first, Catch::Contains("build: g++ -shared -o model.so"));  // the link runs without it
  CHECK_THAT(read_file(tmp / "a/manifest.json"), Catch::Contains("\"compiler_launcher\": \"ccache\""));
  std::map<std::string, long> cold = ccache_counters(env);
  const long units = cold["cache_miss"];
  CHECK(units >= 2);  // kernels.cpp, wrapper.cpp (and externs.cpp)
  CHECK(cold["direct_cache_hit"] + cold["preprocessed_cache_hit"] == 0);

  // The second build, in another folder, with the launcher from the environment: every compile a hit.
  compile(tmp / "b", {"--cxx", "g++"}, {"FOUNDRY_CXX_LAUNCHER=ccache"});
  std::map<std::string, long> warm = ccache_counters(env);
  CHECK(warm["cache_miss"] == units);
  CHECK(warm["direct_cache_hit"] + warm["preprocessed_cache_hit"] == units);

  // The same bytes from the cached objects as from the compiler, and PyTorch's outputs.
  CHECK(read_file(tmp / "b/model.so") == read_file(tmp / "a/model.so"));
  check_matches_pytorch("small_cnn", tmp / "b");
}

TEST_CASE("build: a compiler launcher that is not there is an error naming where it came from", "[build][cli][launcher][fast]") {
  TempDir tmp;
  const std::string model = samples_dir() + "/pointwise/model.pt2";
  ProcResult flag = run_foundryc({model, "-o", tmp / "a", "--no-cache", "--cxx-launcher", tmp / "no-such-launcher"});
  CHECK(flag.exit_code == 1);
  CHECK_THAT(flag.err, Catch::StartsWith("foundryc: error: the compiler launcher ") &&
                           Catch::Contains("(--cxx-launcher) was not found"));
  ProcResult env = run_process({"env", "FOUNDRY_CXX_LAUNCHER=ccache -d", foundryc_exe(), model, "-o", tmp / "b", "--no-cache"});
  CHECK(env.exit_code == 1);
  CHECK_THAT(env.err, Catch::Contains("($FOUNDRY_CXX_LAUNCHER) was not found (it is one program"));
  CHECK_FALSE(fs::exists(tmp / "a"));
  CHECK_FALSE(fs::exists(tmp / "b"));
}

TEST_CASE("build: 8 processes compiling 3 models into one shared cache, some killed mid-compile, leave every entry whole",
          "[build][cache]") {
  TempDir tmp;
  const std::string cache = tmp / "cache";
  const std::vector<std::string> models = {"pointwise", "mlp", "small_cnn"};
  // Process i compiles models[i % 3]; four are killed while they work: SIGKILL (nothing can clean
  // up) or SIGTERM (foundryc stops its compilers and removes its work folder), at different times.
  const std::map<int, std::pair<std::string, std::string>> killed = {
      {1, {"KILL", "1.5"}}, {3, {"TERM", "2.5"}}, {4, {"KILL", "4"}}, {6, {"KILL", "6"}}};
  std::vector<ProcResult> results(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      std::vector<std::string> argv;
      if (killed.count(i)) argv = {"timeout", "-s", killed.at(i).first, killed.at(i).second};
      argv.insert(argv.end(), {foundryc_exe(), samples_dir() + "/" + models[i % 3] + "/model.pt2", "-o",
                               tmp / ("out" + std::to_string(i)), "--cache-dir", cache});
      results[i] = run_process(argv);
    });
  for (auto& t : threads) t.join();
  int ended_early = 0;
  for (int i = 0; i < 8; ++i) {
    INFO("process " << i << ": " << results[i].err);
    if (killed.count(i)) {
      ended_early += results[i].exit_code != 0;
    } else {
      CHECK(results[i].exit_code == 0);
      check_matches_pytorch(models[i % 3], tmp / ("out" + std::to_string(i)));
    }
  }
  CHECK(ended_early >= 2);  // the kills came while they worked (on a fast machine some may finish)

  // Every model now comes from the cache, whole (no entry ignored as damaged), and computes
  // PyTorch's outputs.
  for (const auto& model : models) {
    ProcResult r = run_foundryc({samples_dir() + "/" + model + "/model.pt2", "-o", tmp / ("after_" + model),
                                 "--cache-dir", cache, "-v"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("cache hit") && !Catch::Contains("ignored"));
    check_matches_pytorch(model, tmp / ("after_" + model));
  }
  ProcResult stats = run_foundryc({"--cache-stats", "--cache-dir", cache});
  // Each model's build and outputs, the oneDNN glue that mlp and small_cnn link, and the runtime
  // headers when a compile found entries of the others in the cache and precompiled them.
  CHECK_THAT(stats.out, Catch::Contains(": 7 entries") || Catch::Contains(": 8 entries"));
}

}  // namespace foundry::test
