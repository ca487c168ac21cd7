// The build stage: a second compile of the same model is a cache hit that does not run the C++
// compiler, concurrent compiles into one cache both succeed, and the C API reports bad inputs.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <chrono>
#include <thread>

#include "foundry/runtime/compare.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "foundry/support/error.h"
#include "support.h"

namespace fs = std::filesystem;

namespace foundry::test {
namespace {

// A compiler wrapper that logs every compile/link call (not the queries of the cache key: its
// --version, and its -march=native macros) and runs clang++ or g++.
std::string logging_compiler(const TempDir& tmp) {
  std::string path = tmp / "cxx.sh";
  std::ofstream(path) << "#!/bin/sh\n"
                      << "case \"$*\" in --version | *-dM*) ;; *) echo \"$@\" >> " << (tmp / "cxx.log") << " ;; esac\n"
                      << "if command -v clang++ >/dev/null; then exec clang++ \"$@\"; else exec g++ \"$@\"; fi\n";
  chmod(path.c_str(), 0755);
  return path;
}

size_t lines_in(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

}  // namespace

TEST_CASE("build: a second compile of the same model is a cache hit that runs no compiler", "[build][fast]") {
  TempDir tmp;
  std::string cxx = logging_compiler(tmp);
  std::string model = samples_dir() + "/mlp/model.pt2";
  ProcResult first = run_foundryc({model, "-o", tmp / "a", "--cache-dir", tmp / "cache", "--cxx", cxx});
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  size_t calls = lines_in(tmp / "cxx.log");
  CHECK(calls >= 2);  // at least one compile and the link

  ProcResult second = run_foundryc({model, "-o", tmp / "b", "--cache-dir", tmp / "cache", "--cxx", cxx, "-v"});
  INFO(second.err);
  REQUIRE(second.exit_code == 0);
  CHECK(lines_in(tmp / "cxx.log") == calls);
  CHECK(second.err.find("cache hit") != std::string::npos);

  // Both folders hold a working model.
  for (const char* dir : {"a", "b"}) {
    LoadedModel m(tmp / dir);
    std::vector<NpyArray> out = m.run(read_npy_sequence(samples_dir() + "/mlp/inputs"));
    CHECK(out.size() == 1);
  }

  // --no-cache compiles again.
  ProcResult third = run_foundryc({model, "-o", tmp / "c", "--cache-dir", tmp / "cache", "--cxx", cxx, "--no-cache"});
  REQUIRE(third.exit_code == 0);
  CHECK(lines_in(tmp / "cxx.log") > calls);
}

TEST_CASE("build: two foundryc processes compiling one model into one cache both succeed", "[build]") {
  TempDir tmp;
  std::string model = samples_dir() + "/small_cnn/model.pt2";
  ProcResult a, b;
  std::thread ta([&] { a = run_foundryc({model, "-o", tmp / "a", "--cache-dir", tmp / "cache"}); });
  std::thread tb([&] { b = run_foundryc({model, "-o", tmp / "b", "--cache-dir", tmp / "cache"}); });
  ta.join();
  tb.join();
  INFO(a.err << b.err);
  CHECK(a.exit_code == 0);
  CHECK(b.exit_code == 0);
  ProcResult c = run_foundryc({model, "-o", tmp / "c", "--cache-dir", tmp / "cache", "-v"});
  CHECK(c.err.find("cache hit") != std::string::npos);
  LoadedModel m(tmp / "c");
  CHECK(m.run(read_npy_sequence(samples_dir() + "/small_cnn/inputs")).size() == 1);
}

TEST_CASE("build: the compiled model rejects wrong inputs with an error code", "[build][fast]") {
  TempDir tmp;
  ProcResult r = run_foundryc({samples_dir() + "/pointwise/model.pt2", "-o", tmp / "out", "--cache-dir", tmp / "cache"});
  REQUIRE(r.exit_code == 0);
  LoadedModel m(tmp / "out");
  std::vector<NpyArray> inputs = read_npy_sequence(samples_dir() + "/pointwise/inputs");
  std::vector<NpyArray> wrong_shape = inputs;
  wrong_shape[0].shape = {512};
  wrong_shape[0].data.resize(512 * 4);
  CHECK_THROWS_WITH(m.run(wrong_shape), Catch::Contains("shape [512], expected [1024]"));
  std::vector<NpyArray> wrong_dtype = inputs;
  wrong_dtype[1].dtype = DType::Int32;
  CHECK_THROWS_WITH(m.run(wrong_dtype), Catch::Contains("int32, expected float32"));
  std::vector<NpyArray> too_few = {inputs[0]};
  CHECK_THROWS_WITH(m.run(too_few), Catch::Contains("expected 2 inputs"));
}

namespace {

// The cache's entries: every file under CACHE/xx/ named after a key, by its suffix (".so", ...).
std::map<std::string, std::string> entry_files(const std::string& cache) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    if (!e.is_regular_file() && !e.is_directory()) continue;
    if (e.path().parent_path() == fs::path(cache)) continue;
    std::string name = e.path().filename().string();
    files[name.substr(name.find('.'))] = e.path().string();
  }
  return files;
}

// The build's cache entry of the model compiled into OUT: CACHE/xx/KEY.entry, KEY the "hash" in
// OUT/manifest.json.
std::string build_entry(const std::string& out, const std::string& cache) {
  std::string manifest = read_file(out + "/manifest.json");
  size_t at = manifest.find("\"hash\": \"");
  REQUIRE(at != std::string::npos);
  std::string key = manifest.substr(at + 9, 32);
  return cache + "/" + key.substr(0, 2) + "/" + key + ".entry";
}

uintmax_t tree_bytes(const std::string& dir) {
  uintmax_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

// Compiles `model` (a sample) into OUT with CACHE, -v; checks that the model computes PyTorch's
// outputs and returns foundryc's stderr.
std::string compile_and_check(const std::string& model, const std::string& out, const std::string& cache,
                              std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {samples_dir() + "/" + model + "/model.pt2", "-o", out, "--cache-dir", cache, "-v"};
  args.insert(args.end(), extra.begin(), extra.end());
  ProcResult r = run_foundryc(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  LoadedModel m(out);
  std::vector<NpyArray> got = m.run(read_npy_sequence(samples_dir() + "/" + model + "/inputs"));
  std::vector<NpyArray> want = read_npy_sequence(samples_dir() + "/" + model + "/expected");
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) CHECK(compare_arrays(got[k], want[k]).pass);
  return r.err;
}

}  // namespace

TEST_CASE("build: a damaged or swapped cache entry is a miss, said with -v, never used", "[build][cache][fast]") {
  TempDir tmp;
  const std::string cache = tmp / "cache";
  compile_and_check("pointwise", tmp / "first", cache);
  REQUIRE(entry_files(cache).size() == 1);  // every file of the cache is a KEY.entry (the build's, the outputs')
  const std::string so = build_entry(tmp / "first", cache);
  REQUIRE(fs::exists(so));

  SECTION("truncated") {
    fs::resize_file(so, fs::file_size(so) / 2);
  }
  SECTION("one byte changed") {
    std::string bytes = read_file(so);
    bytes[bytes.size() / 2] ^= 0x01;
    write_file(so, bytes);
  }
  SECTION("a folder in its place") {
    fs::remove(so);
    fs::create_directories(so + "/sub");
  }
  SECTION("swapped with another model's entry") {
    TempDir other;  // a model without library calls: no oneDNN glue to compile into a fresh cache
    compile_and_check("norm_softmax", other / "out", other / "cache");
    fs::copy_file(build_entry(other / "out", other / "cache"), so, fs::copy_options::overwrite_existing);
  }
  // The pointwise model compiles again (and computes PyTorch's outputs, checked inside), saying why.
  std::string err = compile_and_check("pointwise", tmp / "second", cache);
  CHECK_THAT(err, !Catch::Contains("cache hit"));
  CHECK_THAT(err, Catch::Contains("cache entry") && Catch::Contains("ignored"));
  // The rebuilt entry replaced the damaged one: the next compile is a hit.
  CHECK_THAT(compile_and_check("pointwise", tmp / "third", cache), Catch::Contains("cache hit"));
}

TEST_CASE("build: the oneDNN glue and the precompiled runtime headers are built once per compiler and flags", "[build][cache][fast]") {
  TempDir tmp;
  const std::string cache = tmp / "cache";
  // g++ listing what each compile reads (-H): a precompiled header it uses is marked "! ".
  const std::string cxx = tmp / "gxx.sh";
  std::ofstream(cxx) << "#!/bin/sh\nexec g++ -H \"$@\"\n";
  chmod(cxx.c_str(), 0755);

  // The first model in an empty cache builds the glue, and goes without the header: the cache may
  // never serve a second.
  const std::string first = compile_and_check("mlp", tmp / "a", cache, {"--cxx", cxx});
  CHECK_THAT(first, Catch::Contains("-c foundry_dnnl.cpp -o foundry_dnnl.cpp.o") && !Catch::Contains("foundry_prelude.h.gch"));

  // The second takes the glue from the cache and precompiles the header, which its three sources
  // include (and not the glue's).
  const std::string second = compile_and_check("small_cnn", tmp / "b", cache, {"--cxx", cxx});
  CHECK_THAT(second, Catch::Contains("foundry_dnnl.cpp.o is the cache's") && Catch::Contains("precompiling foundry_prelude.h.gch") &&
                         !Catch::Contains("-c foundry_dnnl.cpp") && !Catch::Contains("not used because"));
  CHECK(count_occurrences(second, "-include foundry_prelude.h -c ") == 3);  // kernels.cpp, wrapper.cpp, externs.cpp
  CHECK(count_occurrences(second, "! ./foundry_prelude.h.gch") == 3);
  CHECK_FALSE(fs::exists(tmp / "b/foundry_prelude.h.gch"));  // a build product, not an output

  // The third takes the header from the cache too.
  const std::string third = compile_and_check("pointwise", tmp / "c", cache, {"--cxx", cxx});
  CHECK_THAT(third, Catch::Contains("foundry_prelude.h.gch is the cache's") && !Catch::Contains("precompiling"));
  CHECK(count_occurrences(third, "! ./foundry_prelude.h.gch") == 2);  // kernels.cpp, wrapper.cpp

  // Without the cache there is nothing to share it with; clang (set up with the project) gets none.
  CHECK_THAT(compile_and_check("norm_softmax", tmp / "d", cache, {"--cxx", cxx, "--no-cache"}), !Catch::Contains("foundry_prelude.h.gch"));
  CHECK_THAT(compile_and_check("norm_softmax", tmp / "e", cache, {"--cxx", "clang++"}), !Catch::Contains("foundry_prelude.h.gch"));
}

TEST_CASE("build: temporaries of writers killed long ago are removed, those of running writers kept", "[build][cache][fast]") {
  TempDir tmp;
  const std::string cache = tmp / "cache";
  compile_and_check("pointwise", tmp / "a", cache);
  const fs::path entry = entry_files(cache).at(".entry");
  // What a writer on another machine leaves while it writes, or when it was killed.
  const fs::path abandoned = entry.string() + ".tmp.otherhost.4242.7";
  const fs::path in_progress = entry.string() + ".tmp.otherhost.4243.8";
  write_file(abandoned, "half an entry");
  write_file(in_progress, "half an entry");
  fs::last_write_time(abandoned, fs::file_time_type::clock::now() - std::chrono::hours(2));
  // Neither is an entry; the next store removes only the abandoned one.
  // (A compile stores two entries: the build's and the outputs'.)
  CHECK_THAT(run_foundryc({"--cache-stats", "--cache-dir", cache}).out, Catch::Contains(": 2 entries"));
  compile_and_check("mlp", tmp / "b", cache);
  CHECK_FALSE(fs::exists(abandoned));
  CHECK(fs::exists(in_progress));
  CHECK_THAT(compile_and_check("pointwise", tmp / "c", cache), Catch::Contains("cache hit"));
}

TEST_CASE("build: a shared cache keys -march=native code by the CPU it was built for", "[build][cache][fast]") {
  TempDir tmp;
  // A compiler that sees the CPU named by $FAKE_CPU: its -march=native macros differ with it.
  const std::string cxx = tmp / "cxx.sh";
  std::ofstream(cxx) << "#!/bin/sh\n"
                     << "case \"$*\" in *-march=native*-dM*) g++ \"$@\"; echo \"#define FAKE_CPU_$FAKE_CPU 1\"; exit ;; esac\n"
                     << "exec g++ \"$@\"\n";
  chmod(cxx.c_str(), 0755);
  auto compile = [&](const std::string& cpu, const std::string& out, const std::string& target = "--target=native") {
    ProcResult r = run_process({"env", "FAKE_CPU=" + cpu, foundryc_exe(), samples_dir() + "/pointwise/model.pt2", "-o",
                                tmp / out, "--cache-dir", tmp / "cache", "--cxx", cxx, "-v", target});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.err.find("cache hit") != std::string::npos;
  };
  CHECK_FALSE(compile("skylake", "a"));
  CHECK_FALSE(compile("zen4", "b"));  // same sources and flags, another CPU: another entry
  CHECK(compile("skylake", "c"));
  CHECK(compile("zen4", "d"));
  // A named target compiles for that instruction set on any CPU: one entry for all.
  CHECK_FALSE(compile("skylake", "e", "--target=avx2"));
  CHECK(compile("zen4", "f", "--target=avx2"));
}

TEST_CASE("build: the cache keeps under its size limit by evicting the least recently used", "[build][cache]") {
  TempDir sizes;  // the three models' entries together (with the oneDNN glue that mlp and small_cnn share)
  for (const char* model : {"pointwise", "mlp", "small_cnn"}) compile_and_check(model, sizes / model, sizes / "cache");
  TempDir tmp;
  const std::string cache = tmp / "cache";
  // Room for any two of the three, not for all three.
  const std::string limit = std::to_string(tree_bytes(sizes / "cache") - 1);
  const std::vector<std::string> cap = {"--cache-max-size", limit};
  compile_and_check("pointwise", tmp / "a", cache, cap);
  compile_and_check("mlp", tmp / "b", cache, cap);
  CHECK_THAT(compile_and_check("pointwise", tmp / "c", cache, cap), Catch::Contains("cache hit"));  // now the newer
  compile_and_check("small_cnn", tmp / "d", cache, cap);  // evicts mlp, the least recently used
  CHECK(tree_bytes(cache) <= std::stoull(limit));
  CHECK_THAT(compile_and_check("pointwise", tmp / "e", cache, cap), Catch::Contains("cache hit"));
  CHECK_THAT(compile_and_check("small_cnn", tmp / "f", cache, cap), Catch::Contains("cache hit"));
  // mlp's build and outputs entries are the oldest; evicting the older of them is enough to fit.
  // Either way mlp is no longer a whole-compile hit (stamps of a coarse file system may tie).
  CHECK_THAT(compile_and_check("mlp", tmp / "g", cache, cap), !Catch::Contains("no stage ran"));
}

TEST_CASE("build: foundryc --cache-stats and --cache-clear", "[build][cache][cli][fast]") {
  TempDir tmp;
  const std::string cache = tmp / "cache";
  compile_and_check("pointwise", tmp / "a", cache);
  compile_and_check("mlp", tmp / "b", cache);
  write_file(cache + "/notes.txt", "not foundryc's\n");

  ProcResult stats = run_foundryc({"--cache-stats", "--cache-dir", cache});
  INFO(stats.err);
  REQUIRE(stats.exit_code == 0);
  CHECK_THAT(stats.out, Catch::Contains(cache) && Catch::Contains("6 entries") &&  // each model's build and outputs, mlp's oneDNN glue, the headers mlp's compile precompiled
                            Catch::Contains(std::to_string(tree_bytes(cache) - 15) + " bytes") &&
                            Catch::Contains("limit"));

  ProcResult clear = run_foundryc({"--cache-clear", "--cache-dir", cache});
  INFO(clear.err);
  REQUIRE(clear.exit_code == 0);
  CHECK_THAT(clear.out, Catch::Contains("removed 6 entries"));
  CHECK(entry_files(cache).empty());
  CHECK(read_file(cache + "/notes.txt") == "not foundryc's\n");  // only the cache's own files go
  CHECK_THAT(run_foundryc({"--cache-stats", "--cache-dir", cache}).out, Catch::Contains("0 entries"));
  // Without a cache folder at all: nothing to report, no error.
  CHECK(run_foundryc({"--cache-stats", "--cache-dir", tmp / "none"}).exit_code == 0);
}

TEST_CASE("build: the compiler is --cxx, else CXX from the environment, else g++, and -v prints each command line", "[build][cli][fast]") {
  TempDir tmp;
  const std::string cxx = logging_compiler(tmp);
  const std::string model = samples_dir() + "/mlp/model.pt2";
  auto compile = [&](const std::string& env_cxx, std::vector<std::string> extra) {
    std::vector<std::string> argv = {"env", "CXX=" + env_cxx, foundryc_exe(), model, "-o", tmp / "out", "--no-cache"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_process(argv);
  };
  SECTION("$CXX builds the model and is named in manifest.json") {
    ProcResult r = compile(cxx, {"-v"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(lines_in(tmp / "cxx.log") >= 2);  // the compiles and the link
    CHECK_THAT(read_file(tmp / "out/manifest.json"), Catch::Contains("\"compiler\": \"" + cxx + "\""));
    // Every command, as a shell takes it: the compiler, the flags, the unit.
    CHECK_THAT(r.err, Catch::Contains("foundryc: info: build: " + cxx + " -std=c++17 ") &&
                          Catch::Contains(" -c kernels.cpp -o kernels.cpp.o") &&
                          Catch::Contains("foundryc: info: build: " + cxx + " -shared -o model.so "));
    CHECK_THAT(r.err, Catch::Contains("build: compiling kernels.cpp took "));
    LoadedModel m(tmp / "out");
    std::vector<NpyArray> got = m.run(read_npy_sequence(samples_dir() + "/mlp/inputs"));
    CHECK(compare_arrays(got.at(0), read_npy(samples_dir() + "/mlp/expected/0.npy")).pass);
  }
  SECTION("--cxx comes before $CXX") {
    ProcResult r = compile(cxx, {"--cxx", "g++"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_FALSE(fs::exists(tmp / "cxx.log"));
    CHECK_THAT(read_file(tmp / "out/manifest.json"), Catch::Contains("\"compiler\": \"g++\""));
  }
  SECTION("a $CXX that is not there is an error, not a silent fallback") {
    ProcResult r = compile(tmp / "no-such-compiler", {});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::StartsWith("foundryc: error: the C++ compiler ") && Catch::Contains("($CXX) was not found"));
  }
}

}  // namespace foundry::test
