// Explicit SIMD: foundry_vec.h against the C library at every vector width this CPU runs, and
// whole models compiled with vector loops of each width (and without them) against PyTorch.
#include <catch2/catch.hpp>

#include <filesystem>

#include "foundry/build/compile.h"
#include "support.h"

using namespace foundry::test;

namespace fs = std::filesystem;
namespace {

// The -march levels (or the one-lane build) that this CPU can run.
std::vector<std::string> runnable_widths() {
  std::vector<std::string> widths = {"-DFOUNDRY_VEC_SCALAR", "-march=x86-64"};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) widths.push_back("-march=haswell");
  if (__builtin_cpu_supports("avx512f")) widths.push_back("-march=skylake-avx512");
  return widths;
}

// Builds test/simd/`source` against the runtime headers at every width this CPU runs and runs it:
// it exits 0 and prints `summary` once when every check passed.
void check_at_every_width(const std::string& source, const std::string& summary) {
  TempDir tmp;
  for (const std::string& width : runnable_widths()) {
    INFO(source << " " << width);
    std::string exe = tmp / "check";
    ProcResult build = run_process({foundry::build::find_compiler(""), "-std=c++17", "-O2", "-fopenmp", "-fno-math-errno", width,
                                    "-I" + test_source_dir() + "/../include/foundry/runtime",
                                    test_source_dir() + "/simd/" + source, "-o", exe, "-lsleef"});
    INFO(build.out << build.err);
    REQUIRE(build.exit_code == 0);
    ProcResult run = run_process({exe});
    INFO(run.out);
    CHECK(run.exit_code == 0);
    CHECK(count_occurrences(run.out, summary) == 1);
  }
}

}  // namespace

TEST_CASE("simd: vector math matches the C library at every width", "[simd]") {
  check_at_every_width("vec_math_check.cpp", ", 0 mismatches");
}

// foundry_depthwise.h: masked loads at the window's edges (plain, strided in two halves, gathered),
// blocks of rows and vectors, partial vectors, against sums in double (depthwise_check.cpp).
TEST_CASE("simd: depthwise convolutions match a direct computation at every width", "[simd][fast]") {
  check_at_every_width("depthwise_check.cpp", "985 cases, 491000 outputs checked");
}

TEST_CASE("simd: kernels have vector loops, reductions combine lanes after the loop", "[simd][fast]") {
  TempDir tmp;
  std::string model = samples_dir() + "/norm_softmax/model.pt2";
  ProcResult r = run_foundryc({model, "-o", tmp / "out", "--emit=source", "--target=avx2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::string k = read_file(tmp / "out/kernels.cpp");
  CHECK(count_occurrences(k, "static_assert(foundry_vec::kLanes == 8") == 1);
  // softmax: a max and a sum over rows of 64, lanes combined once per row.
  CHECK(count_occurrences(k, "foundry_vec::maximum(acc0_lanes, ") == 1);
  CHECK(count_occurrences(k, "acc0 = foundry_rt::maximum(acc0, foundry_vec::max(acc0_lanes));") == 1);
  CHECK(count_occurrences(k, "+= foundry_vec::sum(acc1_lanes);") >= 1);
  // softmax: each exponential computed once, kept for the sum and the division; gelu is the
  // product's oneDNN post-op (externs.cpp), no kernel's erf.
  CHECK(count_occurrences(k, "foundry_vec::exp(") == 1);
  CHECK(count_occurrences(k, "foundry_vec::erf(") == 0);
  // 64 is a multiple of 8: no scalar tails.
  CHECK(count_occurrences(k, "r0 < 64; ++r0)") == 0);
  CHECK(count_occurrences(k, "r0 < 64; r0 += 8)") >= 1);
}

TEST_CASE("simd: models match PyTorch with vector loops of each width and without", "[simd][corpus]") {
  if (!require_corpus()) return;
  TempDir tmp;
  std::vector<std::vector<std::string>> variants = {{"--target=generic"}, {"--no-simd"}};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) variants.push_back({"--target=avx2"});
  if (__builtin_cpu_supports("avx512f")) variants.push_back({"--target=avx512"});
  std::vector<std::string> dirs;
  for (const char* model : {"norm_softmax", "reductions", "encoder_layer", "small_cnn"})
    dirs.push_back(corpus_dir() + "/models/" + model);
  // 16-bit floats: vector loads, stores and rounding (F16C's instructions from avx2 up, lane by
  // lane with --target=generic), checked with assert_close's tolerances for the type; one model of
  // each type (the [half] tests run all four at the default target).
  for (const char* model : {"cnn_float16", "mlp_bfloat16"})
    dirs.push_back(test_source_dir() + "/data/half_floats/" + model);
  for (const std::string& dir : dirs) {
    const std::string model = fs::path(dir).filename().string();
    for (const auto& variant : variants) {
      INFO(model << " " << variant[0]);
      std::string out = tmp / (model + variant[0]);
      std::vector<std::string> args = {dir + "/model.pt2", "-o", out};
      args.insert(args.end(), variant.begin(), variant.end());
      ProcResult r = run_foundryc(args);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      ProcResult run = run_process({foundry_run_exe(), out, "--inputs", dir + "/inputs", "--expected", dir + "/expected"});
      INFO(run.out << run.err);
      CHECK(run.exit_code == 0);
    }
  }
}
