// The output cache (include/foundry/driver/output_cache.h): compiling an archive that was compiled
// before with the same options, foundryc and toolchain takes that compile's output folder, and no
// stage runs; anything else is a miss; an entry is never trusted.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "foundry/build/compile.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "support.h"

namespace fs = std::filesystem;

namespace foundry::test {
namespace {

constexpr const char* kHit = "no stage ran";  // what -v says on an output-cache hit

// Every file of `dir`, by name, with its bytes.
std::map<std::string, std::string> folder_files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = read_file(e.path().string());
  return files;
}

// The cache's entry files, by path.
std::vector<std::string> entries(const std::string& cache) {
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(cache))
    if (e.path().extension() == ".entry") found.push_back(e.path().string());
  return found;
}

// An entry file as the cache writes it (lib/build/cache.cpp): header, parts' records, their bytes.
std::string entry_text(const std::string& key, const std::vector<std::pair<std::string, std::string>>& parts) {
  std::string text = "foundry-cache-entry 2\nkey " + key + "\n", body;
  for (const auto& [name, bytes] : parts) {
    text += name + " " + std::to_string(bytes.size()) + " " + build::hash_hex({bytes}) + "\n";
    body += bytes;
  }
  return text + "\n" + body;
}

}  // namespace

TEST_CASE("output cache: the same archive and options again is a hit: no stage runs, the folder is the first's",
          "[build][cache][fast]") {
  TempDir tmp;
  const std::string cache = tmp / "cache";
  ProcResult first =
      run_foundryc_ok({sample_file("small_cnn"), "-o", tmp / "a", "--cache-dir", cache, "--time-passes", "-v"});
  CHECK_THAT(first.err, !Catch::Contains(kHit) && Catch::Contains("time: frontend"));
  ProcResult second =
      run_foundryc_ok({sample_file("small_cnn"), "-o", tmp / "b", "--cache-dir", cache, "--time-passes", "-v"});
  CHECK_THAT(second.err, Catch::Contains(kHit) && Catch::Contains("time: cache") && !Catch::Contains("time: frontend"));
  CHECK(folder_files(tmp / "a") == folder_files(tmp / "b"));  // byte for byte
  check_matches_pytorch("small_cnn", tmp / "b");
}

TEST_CASE("output cache: other bytes at the same path, other options, another foundryc: each a miss",
          "[build][cache][fast]") {
  TempDir tmp;
  const std::string cache = tmp / "cache", input = tmp / "model.pt2";
  auto compiles = [&](const std::string& out, std::vector<std::string> extra = {},
                      const std::string& exe = foundryc_exe()) {
    std::vector<std::string> argv = {exe, input, "-o", out, "--cache-dir", cache, "-v"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ProcResult r = run_process(argv);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.err.find(kHit) == std::string::npos;
  };
  fs::copy_file(sample_file("mlp"), input);
  CHECK(compiles(tmp / "mlp"));
  CHECK_FALSE(compiles(tmp / "mlp_again"));
  // The same path, the same size class and time: another archive.
  fs::copy_file(sample_file("pointwise"), input, fs::copy_options::overwrite_existing);
  CHECK(compiles(tmp / "pointwise"));
  check_matches_pytorch("pointwise", tmp / "pointwise");
  // Options that change the folder.
  CHECK(compiles(tmp / "named", {"--name", "other_name"}));
  CHECK_THAT(read_file(tmp / "named/model.h"), Catch::Contains("other_name_run"));
  CHECK(compiles(tmp / "unfused", {"--no-fusion"}));
  CHECK(compiles(tmp / "one_thread", {"--threads", "1"}));
  CHECK_FALSE(compiles(tmp / "one_thread_again", {"--threads", "1"}));
  // Another foundryc (one byte appended to this one: it runs the same, it is not the same file).
  const std::string other_exe = tmp / "foundryc";
  fs::copy_file(foundryc_exe(), other_exe);
  std::ofstream(other_exe, std::ios::app | std::ios::binary) << '\n';
  chmod(other_exe.c_str(), 0755);
  CHECK(compiles(tmp / "other_foundryc", {}, other_exe));
  // Debug dumps need the stages to run.
  CHECK(compiles(tmp / "dumped", {"--dump-ir"}));
  CHECK(fs::exists(tmp / "dumped/debug/graph.txt"));
}

TEST_CASE("output cache: a hit prints the warnings its compile printed, also when that compile was quiet",
          "[build][cache][fast]") {
  TempDir tmp;
  const std::string cache = tmp / "cache";
  const std::string warning = "--threads 100000 is more than";
  ProcResult quiet =
      run_foundryc_ok({sample_file("pointwise"), "-o", tmp / "a", "--cache-dir", cache, "--threads", "100000", "-q"});
  CHECK_THAT(quiet.err, !Catch::Contains(warning));
  ProcResult hit =
      run_foundryc_ok({sample_file("pointwise"), "-o", tmp / "b", "--cache-dir", cache, "--threads", "100000", "-v"});
  CHECK_THAT(hit.err, Catch::Contains(kHit) && Catch::Contains(warning));
  ProcResult plain =
      run_foundryc_ok({sample_file("pointwise"), "-o", tmp / "c", "--cache-dir", cache, "--threads", "100000"});
  CHECK_THAT(plain.err, Catch::Contains("foundryc: warning: " + warning));
}

TEST_CASE("output cache: a damaged entry, or one naming a file outside the folder, is a miss and the model is compiled again",
          "[build][cache][fast]") {
  TempDir tmp;
  const std::string cache = tmp / "cache";
  run_foundryc_ok({sample_file("pointwise"), "-o", tmp / "out/a", "--cache-dir", cache});
  // The outputs' entry is the one manifest.json does not name (that one is the build's).
  const std::string manifest = read_file(tmp / "out/a/manifest.json");
  std::string outputs_entry;
  for (const std::string& e : entries(cache))
    if (manifest.find(fs::path(e).stem().string()) == std::string::npos) outputs_entry = e;
  REQUIRE(!outputs_entry.empty());
  const std::string key = fs::path(outputs_entry).stem().string();

  SECTION("one byte changed") {
    std::string bytes = read_file(outputs_entry);
    bytes[bytes.size() / 2] ^= 0x01;
    write_file(outputs_entry, bytes);
  }
  SECTION("a part named ../evil") {
    write_file(outputs_entry, entry_text(key, {{"file:../evil", "evil\n"}, {"file:manifest.json", manifest}}));
  }
  SECTION("no manifest.json") {
    write_file(outputs_entry, entry_text(key, {{"file:model.h", "int x;\n"}}));
  }
  ProcResult again = run_foundryc_ok({sample_file("pointwise"), "-o", tmp / "out/b", "--cache-dir", cache, "-v"});
  CHECK_THAT(again.err, Catch::Contains("ignored") && !Catch::Contains(kHit));
  CHECK_FALSE(fs::exists(tmp / "out/evil"));
  CHECK_FALSE(fs::exists(tmp / "evil"));
  check_matches_pytorch("pointwise", tmp / "out/b");
  // The compile stored a whole entry again.
  CHECK_THAT(run_foundryc_ok({sample_file("pointwise"), "-o", tmp / "out/c", "--cache-dir", cache, "-v"}).err,
             Catch::Contains(kHit));
  CHECK(folder_files(tmp / "out/a") == folder_files(tmp / "out/c"));
}

}  // namespace foundry::test
