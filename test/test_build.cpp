// The build stage: a second compile of the same model is a cache hit that does not run the C++
// compiler, concurrent compiles into one cache both succeed, and the C API reports bad inputs.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "foundry/support/error.h"
#include "support.h"

namespace foundry::test {
namespace {

// A compiler wrapper that logs every compile/link call (not --version) and runs clang++ or g++.
std::string logging_compiler(const TempDir& tmp) {
  std::string path = tmp / "cxx.sh";
  std::ofstream(path) << "#!/bin/sh\n"
                      << "[ \"$1\" = --version ] || echo \"$@\" >> " << (tmp / "cxx.log") << "\n"
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

TEST_CASE("build: two foundryc processes compiling one model into one cache both succeed", "[build][fast]") {
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
  CHECK_THROWS_WITH(m.run(wrong_dtype), Catch::Contains("dtype"));
  std::vector<NpyArray> too_few = {inputs[0]};
  CHECK_THROWS_WITH(m.run(too_few), Catch::Contains("expected 2 inputs"));
}

}  // namespace foundry::test
