// Deployment: reproducible output (two compiles of one model are byte-identical), --depfile,
// the sample application in samples/app built with make and CMake (rebuilt only when the model
// changes), find_package(foundry) with foundry_add_model from a `cmake --install` of this build,
// static linking (--emit=static), and the shared libraries a compiled model.so needs.
#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "foundry/runtime/npy.h"
#include "support.h"

namespace fs = std::filesystem;

namespace {

// Every regular file under `dir`, by path relative to it.
std::map<std::string, std::string> read_tree(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = read_file(e.path().string());
  return files;
}

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += a + " ";
  return s;
}

// The depfile's words (targets end with ':'), with line continuations and escapes undone.
std::vector<std::string> depfile_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;
    } else if (c == '\\' && i + 1 < text.size() && (text[i + 1] == ' ' || text[i + 1] == '#')) {
      word += text[++i];
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      word += text[++i];
    } else if (c == ' ' || c == '\n' || c == '\t') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(word);
  return words;
}

void copy_tree(const fs::path& from, const fs::path& to) {
  fs::copy(from, to, fs::copy_options::recursive);
}

fs::file_time_type mtime(const fs::path& p) { return fs::last_write_time(p); }

// The project's source folder (samples/ is in it): its cmake/ holds the CMake package.
std::string source_dir() { return fs::path(samples_dir()).parent_path().string(); }

}  // namespace

TEST_CASE("deploy: two compiles of one model into different folders are byte-identical", "[deploy]") {
  TempDir tmp("foundry_repro_");
  const std::string model = samples_dir() + "/small_cnn/model.pt2";
  // Different folder names and depths, different caches, no cache: the compiler runs twice.
  fs::create_directories(tmp / "first");
  fs::create_directories(tmp / "x/second_folder");
  const std::string a = tmp / "first/out", b = tmp / "x/second_folder/other_out";
  for (const auto& [out, cache] : {std::pair{a, tmp / "cache_a"}, std::pair{b, tmp / "x/cache_b"}}) {
    std::vector<std::string> args = {model, "-o", out, "--cache-dir", cache, "--no-cache", "-v"};
    ProcResult r = run_foundryc(args);
    INFO("foundryc " << joined(args) << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("compiled with") != std::string::npos);  // not a cache hit
  }
  std::map<std::string, std::string> ta = read_tree(a), tb = read_tree(b);
  for (const char* f : {"kernels.cpp", "wrapper.cpp", "model.h", "weights.bin", "model.so", "manifest.json"}) {
    INFO(f);
    REQUIRE(ta.count(f));
    REQUIRE(tb.count(f));
    CHECK(ta[f] == tb[f]);
  }
  // And nothing else differs either (the runtime headers, the marker).
  std::vector<std::string> names_a, names_b;
  for (const auto& [name, bytes] : ta) names_a.push_back(name);
  for (const auto& [name, bytes] : tb) names_b.push_back(name);
  CHECK(names_a == names_b);
  for (const auto& [name, bytes] : ta) {
    INFO(name);
    CHECK((tb.count(name) && tb[name] == bytes));
  }
  // No build path leaks into the library.
  CHECK(ta["model.so"].find(tmp.path()) == std::string::npos);
}

TEST_CASE("deploy: --depfile names the output and the input files", "[deploy][fast]") {
  TempDir tmp("foundry_depfile_");
  const std::string sample = samples_dir() + "/mlp";
  fs::copy_file(sample + "/model.pt2", tmp / "my model.pt2");

  SECTION("an archive: OUTDIR/model.so depends on the archive; spaces are escaped") {
    run_foundryc_ok({tmp / "my model.pt2", "-o", tmp / "out dir/", "--depfile", tmp / "model.d"});
    std::string text = read_file(tmp / "model.d");
    INFO(text);
    CHECK(text.find("out\\ dir/model.so:") != std::string::npos);
    CHECK(depfile_words(text) == std::vector<std::string>{tmp / "out dir/model.so:", tmp / "my model.pt2"});
    CHECK(text.back() == '\n');
    // No temporary files are left beside it.
    size_t entries = std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator());
    CHECK(entries == 3);  // my model.pt2, out dir, model.d
  }

  SECTION("--emit=source: the target is the manifest") {
    run_foundryc_ok({tmp / "my model.pt2", "-o", tmp / "src", "--emit=source", "--depfile", tmp / "src.d"});
    CHECK(depfile_words(read_file(tmp / "src.d")) == std::vector<std::string>{tmp / "src/manifest.json:", tmp / "my model.pt2"});
  }

  SECTION("an extracted archive folder: every file in it") {
    extract_archive(sample + "/model.pt2", tmp / "extracted");
    run_foundryc_ok({tmp / "extracted", "-o", tmp / "out", "--depfile", tmp / "dir.d", "--emit=source"});
    std::vector<std::string> words = depfile_words(read_file(tmp / "dir.d"));
    REQUIRE(!words.empty());
    CHECK(words[0] == tmp / "out/manifest.json:");
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(tmp / "extracted"))
      if (e.is_regular_file()) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    CHECK(std::vector<std::string>(words.begin() + 1, words.end()) == files);
    CHECK(std::find(files.begin(), files.end(), tmp / "extracted/model/models/model.json") != files.end());
  }

  SECTION("a bare models/model.json: it and the archive folder around it, not the output inside it") {
    extract_archive(sample + "/model.pt2", tmp / "extracted");
    const std::string root = tmp / "extracted/model";
    for (int pass = 0; pass < 2; ++pass)  // the second time, the output folder exists inside the archive folder
      run_foundryc_ok({root + "/models/model.json", "-o", root + "/out", "--depfile", tmp / "json.d", "--emit=source"});
    std::vector<std::string> words = depfile_words(read_file(tmp / "json.d"));
    INFO(read_file(tmp / "json.d"));
    REQUIRE(words.size() > 2);
    CHECK(words[0] == root + "/out/manifest.json:");
    CHECK(words[1] == root + "/models/model.json");
    CHECK(std::find(words.begin(), words.end(), root + "/data/weights/weight_0") != words.end());
    for (size_t i = 1; i < words.size(); ++i) {
      INFO(words[i]);
      CHECK(words[i].find("/out") == std::string::npos);
      CHECK(fs::is_regular_file(words[i]));
    }
  }

  SECTION("a failed compile writes no depfile") {
    write_file(tmp / "model.d", "old\n");
    write_file(tmp / "bad.pt2", "not an archive");
    ProcResult r = run_foundryc({tmp / "bad.pt2", "-o", tmp / "out", "--depfile", tmp / "model.d"});
    CHECK(r.exit_code == 1);
    CHECK(read_file(tmp / "model.d") == "old\n");
  }
}

TEST_CASE("deploy: samples/app builds with make and reruns foundryc only when the model changes", "[deploy]") {
  TempDir tmp("foundry_app_");
  // A copy of samples/app and samples/mlp side by side, as in the source tree: the test touches the model.
  copy_tree(samples_dir() + "/app", tmp / "app");
  copy_tree(samples_dir() + "/mlp", tmp / "mlp");
  const std::vector<std::string> make = {"make", "-C", tmp / "app", "FOUNDRYC=" + foundryc_exe(),
                                         "FOUNDRYC_FLAGS=--cache-dir " + test_cache_dir()};
  auto run_make = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> argv = make;
    argv.insert(argv.end(), extra.begin(), extra.end());
    ProcResult r = run_process(argv, 300);
    INFO("make " << joined(extra) << "\nstdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
  };

  std::string first = run_make({"check"});
  CHECK(first.find("--depfile model.d") != std::string::npos);  // foundryc ran
  CHECK(first.find("PASS") != std::string::npos);
  REQUIRE(fs::exists(tmp / "app/model.d"));
  REQUIRE(fs::exists(tmp / "app/out/model.so"));
  CHECK(read_file(tmp / "app/model.d").find("../mlp/model.pt2") != std::string::npos);
  auto so_time = mtime(tmp / "app/out/model.so");
  auto app_time = mtime(tmp / "app/app");

  // Nothing changed: nothing runs.
  std::string second = run_make({});
  CHECK(second.find("--depfile") == std::string::npos);
  CHECK(mtime(tmp / "app/out/model.so") == so_time);
  CHECK(mtime(tmp / "app/app") == app_time);

  // The model changed: foundryc runs again and the app is relinked.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ProcResult t = run_process({"touch", tmp / "mlp/model.pt2"});
  REQUIRE(t.exit_code == 0);
  std::string third = run_make({"check"});
  CHECK(third.find("--depfile model.d") != std::string::npos);
  CHECK(third.find("PASS") != std::string::npos);
  CHECK(mtime(tmp / "app/out/model.so") > so_time);

  // The program runs from another working directory (the rpath finds out/model.so).
  ProcResult r = run_process({tmp / "app/app", tmp / "app/out", tmp / "mlp/inputs/0.npy", tmp / "mlp/expected/0.npy"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
}

TEST_CASE("deploy: samples/app builds with CMake and reruns foundryc only when the model changes", "[deploy]") {
  TempDir tmp("foundry_app_cmake_");
  copy_tree(samples_dir() + "/app", tmp / "app");
  copy_tree(samples_dir() + "/mlp", tmp / "mlp");
  // The copy is outside the source tree: foundry_DIR names the package files in it.
  ProcResult cfg = run_process({"cmake", "-G", "Ninja", "-S", tmp / "app", "-B", tmp / "build",
                                "-Dfoundry_DIR=" + source_dir() + "/cmake", "-DFOUNDRYC=" + foundryc_exe(),
                                "-DFOUNDRYC_FLAGS=--cache-dir;" + test_cache_dir()},
                               300);
  INFO("cmake: " << cfg.out << cfg.err);
  REQUIRE(cfg.exit_code == 0);
  auto build = [&] {
    ProcResult r = run_process({"cmake", "--build", tmp / "build"}, 300);
    INFO("cmake --build: " << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
  };
  CHECK(build().find("with foundryc") != std::string::npos);
  ProcResult run = run_process({tmp / "build/app", tmp / "build/out", tmp / "mlp/inputs/0.npy", tmp / "mlp/expected/0.npy"});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  CHECK(build().find("with foundryc") == std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(run_process({"touch", tmp / "mlp/model.pt2"}).exit_code == 0);
  CHECK(build().find("with foundryc") != std::string::npos);
}

TEST_CASE("deploy: find_package(foundry) and foundry_add_model from an installed layout", "[deploy]") {
  // This build, installed as a user would: <prefix>/bin/foundryc, <prefix>/lib/cmake/foundry/*.cmake.
  TempDir tmp("foundry_package_");
  ProcResult inst = run_process({"cmake", "--install", FOUNDRY_BINARY_DIR, "--prefix", tmp / "prefix"}, 300);
  INFO("cmake --install: " << inst.out << inst.err);
  REQUIRE(inst.exit_code == 0);
  for (const char* f : {"bin/foundryc", "bin/foundry-run", "lib/cmake/foundry/foundry-config.cmake",
                        "lib/cmake/foundry/foundry-config-version.cmake", "lib/cmake/foundry/FoundryAddModel.cmake"}) {
    INFO(f);
    CHECK(fs::is_regular_file(tmp / ("prefix/" + std::string(f))));
  }
  ProcResult version = run_process({tmp / "prefix/bin/foundryc", "--version"});
  CHECK(version.exit_code == 0);
  fs::create_directories(tmp / "proj");
  fs::copy_file(samples_dir() + "/app/main.cpp", tmp / "proj/main.cpp");
  write_file(tmp / "proj/CMakeLists.txt",
             "cmake_minimum_required(VERSION 3.20)\nproject(p LANGUAGES CXX)\n"
             "find_package(foundry " FOUNDRY_VERSION " REQUIRED)\n"
             "message(STATUS \"FOUNDRYC=${FOUNDRYC}\")\n"
             "foundry_add_model(mlp " + samples_dir() + "/mlp/model.pt2 OPTIONS --cache-dir " + test_cache_dir() + ")\n"
             "add_executable(app main.cpp)\ntarget_link_libraries(app PRIVATE mlp)\n");
  ProcResult cfg = run_process({"cmake", "-G", "Ninja", "-S", tmp / "proj", "-B", tmp / "build",
                                "-DCMAKE_PREFIX_PATH=" + (tmp / "prefix")},
                               300);
  INFO("cmake: " << cfg.out << cfg.err);
  REQUIRE(cfg.exit_code == 0);
  CHECK(cfg.out.find("FOUNDRYC=" + (tmp / "prefix/bin/foundryc")) != std::string::npos);
  ProcResult b = run_process({"cmake", "--build", tmp / "build"}, 300);
  INFO("cmake --build: " << b.out << b.err);
  REQUIRE(b.exit_code == 0);
  ProcResult run = run_process({tmp / "build/app", tmp / "build/mlp", samples_dir() + "/mlp/inputs/0.npy",
                                samples_dir() + "/mlp/expected/0.npy"});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
}

TEST_CASE("deploy: --emit=static gives libmodel.a, which a program links statically", "[deploy]") {
  TempDir tmp("foundry_static_");
  const std::string mlp = samples_dir() + "/mlp";
  run_foundryc_ok({mlp + "/model.pt2", "-o", tmp / "out", "--name", "mlp", "--emit=static",
                   "--depfile", tmp / "model.d"});
  REQUIRE(fs::is_regular_file(tmp / "out/libmodel.a"));
  CHECK_FALSE(fs::exists(tmp / "out/model.so"));
  CHECK_FALSE(fs::exists(tmp / "out/kernels.cpp"));  // no "source" in --emit
  CHECK(depfile_words(read_file(tmp / "model.d")).front() == tmp / "out/libmodel.a:");
  nlohmann::json manifest = nlohmann::json::parse(read_file(tmp / "out/manifest.json"));
  REQUIRE(manifest.contains("link_flags"));
  std::vector<std::string> link_flags = manifest["link_flags"];
  CHECK(std::find(link_flags.begin(), link_flags.end(), "-fopenmp") != link_flags.end());

  // samples/app/main.cpp, linked with the archive and the flags the manifest names: no model.so.
  std::vector<std::string> link = {"g++", "-std=c++17", "-I", tmp / "out", samples_dir() + "/app/main.cpp",
                                   tmp / "out/libmodel.a", "-o", tmp / "app"};
  link.insert(link.end(), link_flags.begin(), link_flags.end());
  ProcResult built = run_process(link, 300);
  INFO("g++: " << joined(link) << "\n" << built.out << built.err);
  REQUIRE(built.exit_code == 0);
  ProcResult run = run_process({tmp / "app", tmp / "out", mlp + "/inputs/0.npy", mlp + "/expected/0.npy"});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.out.find("PASS") != std::string::npos);

  // Asking for both gives both, and the same archive (ar runs in deterministic mode).
  run_foundryc_ok(
      {mlp + "/model.pt2", "-o", tmp / "again", "--name", "mlp", "--emit=static,so"});
  CHECK(read_file(tmp / "again/libmodel.a") == read_file(tmp / "out/libmodel.a"));
  CHECK(fs::is_regular_file(tmp / "again/model.so"));

  // Two models with library calls in one program: each archive holds the same oneDNN glue, and the
  // linker takes the first archive's; no symbol is defined twice, and both models create and run.
  run_foundryc_ok({samples_dir() + "/small_cnn/model.pt2", "-o", tmp / "cnn", "--name", "cnn", "--emit=static"});
  write_file(tmp / "two.cpp", R"cpp(#include "out/model.h"
#include "cnn/model.h"
#include <cstdio>
#include <vector>
// Creates the model in `dir` and runs it once on inputs of 0.5: its status.
template <typename Model>
int run_once(const char* dir, int (*create)(const char*, Model**), int (*run)(Model*, const foundry_tensor*, size_t, foundry_tensor*, size_t),
             void (*destroy)(Model*), size_t inputs, size_t outputs, int (*input_info)(size_t, foundry_tensor_info*),
             int (*output_info)(size_t, foundry_tensor_info*)) {
  Model* model = nullptr;
  if (int status = create(dir, &model); status != FOUNDRY_OK) return status;
  std::vector<std::vector<float>> data(inputs + outputs);
  std::vector<foundry_tensor> tensors(inputs + outputs);
  for (size_t k = 0; k < inputs + outputs; ++k) {
    foundry_tensor_info info;
    if (k < inputs ? input_info(k, &info) : output_info(k - inputs, &info)) return -1;
    int64_t count = 1;
    for (int d = 0; d < info.rank; ++d) count *= tensors[k].shape[d] = info.shape[d];
    data[k].assign(static_cast<size_t>(count), 0.5f);
    tensors[k].data = data[k].data();
    tensors[k].dtype = info.dtype;
    tensors[k].rank = info.rank;
  }
  int status = run(model, tensors.data(), inputs, tensors.data() + inputs, outputs);
  destroy(model);
  return status;
}
int main(int, char** argv) {
  std::printf("mlp %d cnn %d\n",
              run_once(argv[1], mlp_create, mlp_run, mlp_destroy, mlp_num_inputs(), mlp_num_outputs(), mlp_input_info, mlp_output_info),
              run_once(argv[2], cnn_create, cnn_run, cnn_destroy, cnn_num_inputs(), cnn_num_outputs(), cnn_input_info, cnn_output_info));
}
)cpp");
  std::vector<std::string> link_two = {"g++", "-std=c++17", "-I", tmp.path(), tmp / "two.cpp", tmp / "out/libmodel.a",
                                       tmp / "cnn/libmodel.a", "-o", tmp / "two"};
  link_two.insert(link_two.end(), link_flags.begin(), link_flags.end());
  built = run_process(link_two, 300);
  INFO("g++: " << joined(link_two) << "\n" << built.out << built.err);
  REQUIRE(built.exit_code == 0);
  run = run_process({tmp / "two", tmp / "out", tmp / "cnn"});
  INFO(run.out << run.err);
  CHECK(run.out == "mlp 0 cnn 0\n");
}

TEST_CASE("deploy: --emit=source writes a CMakeLists.txt that builds the model elsewhere", "[deploy]") {
  // samples/mlp calls oneDNN (externs.cpp), norm_softmax's vector loops call SLEEF's exp: the
  // generated project must find and link both.
  for (const std::string sample : {"mlp", "norm_softmax"}) {
    INFO(sample);
    TempDir tmp("foundry_source_");
    ProcResult r = run_foundryc({samples_dir() + "/" + sample + "/model.pt2", "-o", tmp / "src", "--emit=source"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE(fs::exists(tmp / "src/CMakeLists.txt"));
    CHECK_FALSE(fs::exists(tmp / "src/model.so"));
    ProcResult cfg = run_process({"cmake", "-G", "Ninja", "-S", tmp / "src", "-B", tmp / "src/build"}, 300);
    INFO("cmake: " << cfg.out << cfg.err);
    REQUIRE(cfg.exit_code == 0);
    ProcResult b = run_process({"cmake", "--build", tmp / "src/build"}, 300);
    INFO("cmake --build: " << b.out << b.err);
    REQUIRE(b.exit_code == 0);
    REQUIRE(fs::exists(tmp / "src/model.so"));
    ProcResult run = run_process({foundry_run_exe(), tmp / "src", "--inputs", samples_dir() + "/" + sample + "/inputs",
                                  "--expected", samples_dir() + "/" + sample + "/expected"});
    INFO(run.out << run.err);
    CHECK(run.exit_code == 0);
  }
}

TEST_CASE("deploy: model.so needs only the C++ runtime, libgomp, oneDNN and the vector math libraries", "[deploy][fast]") {
  TempDir tmp("foundry_needed_");
  run_foundryc_ok({samples_dir() + "/small_cnn/model.pt2", "-o", tmp / "out"});
  ProcResult r = run_process({"readelf", "-d", tmp / "out/model.so"});
  INFO("readelf: " << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> allowed = {"libstdc++.so", "libm.so",    "libgcc_s.so", "libc.so",
                                      "ld-linux",     "libgomp.so", "libdnnl.so",  "libmvec.so", "libsleef.so"};
#ifdef __SANITIZE_ADDRESS__
  // scripts/sanitize.sh builds the models with the sanitizers too: they need their runtimes.
  allowed.insert(allowed.end(), {"libasan.so", "libubsan.so"});
#endif
  std::istringstream lines(r.out);
  size_t needed = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    ++needed;
    size_t open = line.find('['), close = line.rfind(']');
    REQUIRE(open != std::string::npos);
    REQUIRE(close > open);
    std::string lib = line.substr(open + 1, close - open - 1);
    INFO("NEEDED " << lib);
    CHECK(std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) { return lib.rfind(a, 0) == 0; }));
  }
  CHECK(needed > 0);
}

TEST_CASE("deploy: the C API names dtypes in its messages", "[deploy][fast]") {
  TempDir tmp;
  ProcResult c = run_foundryc({samples_dir() + "/pointwise/model.pt2", "-o", tmp / "out"});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  // pointwise takes two float32[1024]: given float64 ones, the model says both dtypes by name.
  std::filesystem::create_directories(tmp / "in");
  foundry::NpyArray a;
  a.dtype = foundry::DType::Float64;
  a.shape = {1024};
  a.data.resize(1024 * sizeof(double));
  foundry::write_npy(tmp / "in/0.npy", a);
  foundry::write_npy(tmp / "in/1.npy", a);
  ProcResult r = run_process({foundry_run_exe(), tmp / "out", "--inputs", tmp / "in"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("input 0 (") && Catch::Contains("): float64, expected float32"));
}

// scripts/demo.sh builds what it runs, not the test suite: the targets it gives scripts/setup.sh
// need no test source (the build's own ninja lists their commands).
TEST_CASE("deploy: scripts/demo.sh builds foundryc and foundry-run, not the test suite", "[deploy][fast]") {
  const std::string root = test_source_dir() + "/..";
  std::smatch m;
  const std::string demo = read_file(root + "/scripts/demo.sh");
  REQUIRE(std::regex_search(demo, m, std::regex(R"(\nscripts/setup\.sh ([a-z -]+?)\s*(#|\n))")));
  std::vector<std::string> targets;
  std::istringstream words(m[1].str());
  for (std::string t; words >> t;) targets.push_back(t);
  CHECK(targets == std::vector<std::string>{"foundryc", "foundry-run"});
  std::vector<std::string> argv = {"ninja", "-C", FOUNDRY_BINARY_DIR, "-t", "commands"};
  argv.insert(argv.end(), targets.begin(), targets.end());
  ProcResult r = run_process(argv);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("tools/foundryc.cpp") && Catch::Contains("tools/foundry-run.cpp"));
  CHECK_THAT(r.out, !Catch::Contains("/test/"));
  ProcResult all = run_process({"ninja", "-C", FOUNDRY_BINARY_DIR, "-t", "commands"});
  CHECK_THAT(all.out, Catch::Contains("/test/"));  // the check above can see test sources
}
