// Explicit SIMD: foundry_vec.h against the C library at every vector width this CPU runs, and
// whole models compiled with vector loops of each width (and without them) against PyTorch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <tuple>

#include "foundry/build/compile.h"
#include "foundry/runtime/loaded_model.h"
#include "graph_builder.h"
#include "support.h"

using namespace foundry::test;
using foundry::Arg;
using foundry::LoadedModel;
using foundry::NpyArray;
using foundry::Value;

namespace fs = std::filesystem;
namespace {

// `g` compiled with this machine's vector loops and run once on `inputs`: its kernels' source
// (for the format checks) and its outputs.
struct CompiledRun {
  std::string kernels;
  std::vector<NpyArray> out;
};
CompiledRun compile_and_run(const foundry::Graph& g, const std::vector<NpyArray>& inputs, const std::string& name) {
  TempDir tmp;
  compile_graph(g, tmp / "model", tmp / "cache", true, name);
  CompiledRun run{read_file(tmp / "model/kernels.cpp"), {}};
  run.out = LoadedModel(tmp / "model/model.so", name, tmp / "model").run(inputs);
  return run;
}

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

// ResNet's stem pooling (3x3, stride 2, padding 1) and a constant padding: their tests of the
// window against the plane's edges compare index expressions, which vector loops compute as lane
// masks (foundry_vec::index_compare) instead of leaving the kernel scalar (resnet18's max pool:
// 6.8 ms scalar, 0.59 ms in vector loops, one thread). Against a direct computation with
// PyTorch's rules: a NaN in a window wins, padding never does; odd widths leave scalar tails.
TEST_CASE("simd: windows with padding vectorize their edge tests and match a direct computation", "[simd][fast]") {
  constexpr int64_t N = 2, C = 3, H = 37, W = 41, OH = 19, OW = 21;
  Builder b;
  Value* x = b.input("x", {N, C, H, W});
  Value* pool = b.op("max_pool2d_with_indices", {pos(x), pos(ints({3, 3})), pos(ints({2, 2})), pos(ints({1, 1}))});
  b.output(pool);
  Value* padded = b.op("constant_pad_nd", {pos(x), pos(ints({3, 2, 1, 0}))});
  b.output(padded);
  std::vector<NpyArray> inputs = make_inputs(b.g);
  float* xs = inputs[0].as<float>();
  xs[5 * W + 7] = std::numeric_limits<float>::quiet_NaN();  // image 0, channel 0, row 5
  xs[(C * H + 10) * W] = -std::numeric_limits<float>::infinity();  // image 1, channel 0, the left edge
  const CompiledRun run = compile_and_run(b.g, inputs, "windows");
  const std::string& kernels = run.kernels;
  INFO(kernels);
  CHECK(count_occurrences(kernels, "foundry_vec::index_compare(") >= 4);
  CHECK(count_occurrences(kernels, "foundry_vec::load_stride2(") >= 1);
  CHECK(count_occurrences(kernels, "const int kActiveLanes") >= 2);  // 21 and 46 outputs a row: partial vectors
  const std::vector<NpyArray>& out = run.out;
  REQUIRE(out.size() == 2);
  auto at = [&](int64_t n, int64_t c, int64_t h, int64_t w) { return xs[((n * C + c) * H + h) * W + w]; };
  auto same = [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  int64_t mismatches = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          float want = -std::numeric_limits<float>::infinity();
          for (int64_t h = 2 * oh - 1; h <= 2 * oh + 1; ++h)
            for (int64_t w = 2 * ow - 1; w <= 2 * ow + 1; ++w)
              if (h >= 0 && h < H && w >= 0 && w < W && (std::isnan(at(n, c, h, w)) || at(n, c, h, w) > want))
                want = std::isnan(want) ? want : at(n, c, h, w);
          const float got = out[0].as<float>()[((n * C + c) * OH + oh) * OW + ow];
          if (!same(got, want)) {
            ++mismatches;
            UNSCOPED_INFO("max pool [" << n << ", " << c << ", " << oh << ", " << ow << "]: " << got << ", want " << want);
          }
        }
      for (int64_t h = 0; h < H + 1; ++h)  // pad: left 3, right 2, top 1, bottom 0
        for (int64_t w = 0; w < W + 5; ++w) {
          const float want = h >= 1 && w >= 3 && w < W + 3 ? at(n, c, h - 1, w - 3) : 0.0f;
          const float got = out[1].as<float>()[((n * C + c) * (H + 1) + h) * (W + 5) + w];
          if (!same(got, want)) {
            ++mismatches;
            UNSCOPED_INFO("pad [" << n << ", " << c << ", " << h << ", " << w << "]: " << got << ", want " << want);
          }
        }
    }
  CHECK(mismatches == 0);
}

// A bilinear upsampling written channels last (DPT's decoder): the innermost loop runs over
// channels, and a pixel's source rows, columns, weights and checked indices do not change along
// it. They are computed once before it, and the loop over channels is vectors (it stayed scalar,
// the checks inside). Against PyTorch's formula (align_corners=False) computed directly.
TEST_CASE("simd: statements fixed along the innermost loop are written before it, which is then vectors", "[simd][fast]") {
  constexpr int64_t H = 5, W = 7, C = 19, OH = 9, OW = 11;
  Builder b;
  Value* x = b.input("x", {1, H, W, C});
  Value* nchw = b.op("permute", {pos(x), pos(ints({0, 3, 1, 2}))});
  Value* up = b.op("upsample_bilinear2d.vec", {pos(nchw), pos(ints({OH, OW})), pos(Arg::of_bool(false)), pos(Arg::none())});
  b.output(b.op("clone", {pos(b.op("permute", {pos(up), pos(ints({0, 2, 3, 1}))}))}));
  std::vector<NpyArray> inputs = make_inputs(b.g);
  const CompiledRun run = compile_and_run(b.g, inputs, "hoisted");
  INFO(run.kernels);
  const size_t check = run.kernels.find("foundry_rt::checked_position("), loop = run.kernels.find("for (int64_t i2 = 0; i2 < ");
  REQUIRE(check != std::string::npos);
  REQUIRE(loop != std::string::npos);
  CHECK(check < loop);  // the indices before the loop over channels
  if (__builtin_cpu_supports("avx512f") || __builtin_cpu_supports("avx2")) CHECK(count_occurrences(run.kernels, "foundry_vec::load(in_ptr0") >= 4);
  const float* xs = inputs[0].as<float>();
  auto source = [](int64_t out, int64_t in, int64_t size) {  // ATen's area_pixel_compute_source_index
    const float s = std::max((static_cast<float>(out) + 0.5f) * (static_cast<float>(in) / static_cast<float>(size)) - 0.5f, 0.0f);
    const int64_t i0 = std::min(static_cast<int64_t>(s), in - 1);
    return std::tuple<int64_t, int64_t, float>(i0, std::min(i0 + 1, in - 1), s - static_cast<float>(i0));
  };
  int64_t mismatches = 0;
  for (int64_t oh = 0; oh < OH; ++oh)
    for (int64_t ow = 0; ow < OW; ++ow) {
      auto [h0, h1, lh] = source(oh, H, OH);
      auto [w0, w1, lw] = source(ow, W, OW);
      for (int64_t c = 0; c < C; ++c) {
        auto at = [&](int64_t h, int64_t w) { return xs[(h * W + w) * C + c]; };
        const float want = (1 - lh) * ((1 - lw) * at(h0, w0) + lw * at(h0, w1)) + lh * ((1 - lw) * at(h1, w0) + lw * at(h1, w1));
        const float got = run.out[0].as<float>()[(oh * OW + ow) * C + c];
        if (!(std::fabs(got - want) <= 1e-5f + 1e-5f * std::fabs(want))) {
          ++mismatches;
          UNSCOPED_INFO("[" << oh << ", " << ow << ", " << c << "]: " << got << ", want " << want);
        }
      }
    }
  CHECK(mismatches == 0);
}

// The last iterations of a vector loop, fewer than its lanes (rows of 3, 5 and 21 here), run as
// one partial vector whose loads and stores touch only those lanes: contiguous, gathered and
// scattered float lanes, bool lanes; sums, maxima and minima take only those lanes. Against a direct computation; the buffers are exactly as
// long as the tensors, so a lane read or written past a row's end would show as a wrong value or
// a sanitizer's report.
TEST_CASE("simd: partial last vectors compute their lanes and touch nothing past them", "[simd][fast]") {
  constexpr int64_t R = 5, C = 21;
  Builder b;
  Value* x = b.input("x", {R, C});
  b.output(b.op("gt.Scalar", {pos(x), pos(Arg::of_float(0.5))}));                          // bool lanes
  b.output(b.op("sigmoid", {pos(b.op("permute", {pos(x), pos(ints({1, 0}))}))}));          // [21, 5], gathered
  b.output(b.op("mul.Scalar", {pos(x), pos(Arg::of_float(3.0))}));                        // contiguous
  b.output(b.op("add.Scalar", {pos(b.op("slice.Tensor", {pos(x), pos(Arg::of_int(1)), pos(Arg::of_int(2)),
                                                          pos(Arg::of_int(5))})), pos(Arg::of_float(1.0))}));  // rows of 3
  b.output(b.op("sum.dim_IntList", {pos(x), pos(ints({1}))}));  // a sum over rows of 21
  // A max of -(x^2 + 1) and a min of x^2 + 1: a lane past the row's end computed from a 0 would
  // win both (-1 and 1) unless it holds the reduction's identity.
  Value* q = b.op("add.Scalar", {pos(b.op("mul.Tensor", {pos(x), pos(x)})), pos(Arg::of_float(1.0))});
  b.output(b.op("amax", {pos(b.op("mul.Scalar", {pos(q), pos(Arg::of_float(-1.0))})), pos(ints({1}))}));
  b.output(b.op("amin", {pos(q), pos(ints({1}))}));
  std::vector<NpyArray> inputs = make_inputs(b.g);
  const CompiledRun run = compile_and_run(b.g, inputs, "partial");
  const std::string& kernels = run.kernels;
  INFO(kernels);
  CHECK(count_occurrences(kernels, "const int kActiveLanes") >= 1);
  const std::vector<NpyArray>& out = run.out;
  REQUIRE(out.size() == 7);
  const float* xs = inputs[0].as<float>();
  int64_t mismatches = 0;
  auto expect = [&](bool ok) { mismatches += ok ? 0 : 1; };
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float v = xs[r * C + c];
      expect(reinterpret_cast<const bool*>(out[0].data.data())[r * C + c] == (v > 0.5f));
      expect(std::abs(out[1].as<float>()[c * R + r] - 1.0 / (1.0 + std::exp(-static_cast<double>(v)))) <= 1e-6);
      expect(out[2].as<float>()[r * C + c] == v * 3.0f);
      if (c >= 2 && c < 5) expect(out[3].as<float>()[r * 3 + (c - 2)] == v + 1.0f);
    }
  for (int64_t r = 0; r < R; ++r) {
    double sum = 0;
    float hi = -INFINITY, lo = INFINITY;
    for (int64_t c = 0; c < C; ++c) {
      const float v = xs[r * C + c], q = v * v + 1.0f;
      sum += v;
      hi = std::max(hi, -q);
      lo = std::min(lo, q);
    }
    expect(std::abs(out[4].as<float>()[r] - sum) <= 1e-5 * (1 + std::abs(sum)));
    expect(out[5].as<float>()[r] == hi);
    expect(out[6].as<float>()[r] == lo);
  }
  CHECK(mismatches == 0);
}

// Reductions whose elements lie far apart while their outputs are adjacent (sums, maxima, minima
// and means over the rows of a matrix, a mean over the middle dimension) run lane by lane along
// the outputs (cpp_kernel.cpp's lane_var): each lane its own accumulator, a tile of 21 outputs a
// whole tile and a partial one. Against a direct computation.
TEST_CASE("simd: reductions across run lane by lane along their outputs and match a direct computation",
          "[simd][fast]") {
  constexpr int64_t R = 29, C = 21, A = 3, M = 37, B = 19;
  Builder b;
  // One input each: reductions of one input share a kernel, which then runs as before.
  Value* x = b.input("x", {R, C});
  Value* z = b.input("z", {R, C});
  Value* u = b.input("u", {R, C});
  Value* y = b.input("y", {A, M, B});
  auto square_plus_one = [&](Value* v) {
    return b.op("add.Scalar", {pos(b.op("mul.Tensor", {pos(v), pos(v)})), pos(Arg::of_float(1.0))});
  };
  b.output(b.op("sum.dim_IntList", {pos(x), pos(ints({0}))}));
  b.output(b.op("amax", {pos(b.op("mul.Scalar", {pos(square_plus_one(z)), pos(Arg::of_float(-1.0))})), pos(ints({0}))}));
  b.output(b.op("amin", {pos(square_plus_one(u)), pos(ints({0}))}));
  b.output(b.op("mean.dim", {pos(y), pos(ints({1}))}));
  std::vector<NpyArray> inputs = make_inputs(b.g);
  const CompiledRun run = compile_and_run(b.g, inputs, "across");
  const std::string& kernels = run.kernels;
  INFO(kernels);
  CHECK(count_occurrences(kernels, "_lanes[lane];") >= 4);
  CHECK(count_occurrences(kernels, "foundry_vec::gather(") == 0);
  const std::vector<NpyArray>& out = run.out;
  REQUIRE(out.size() == 4);
  const float *xs = inputs[0].as<float>(), *zs = inputs[1].as<float>(), *us = inputs[2].as<float>(),
              *ys = inputs[3].as<float>();
  int64_t mismatches = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (ok) return;
    ++mismatches;
    UNSCOPED_INFO(what);
  };
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0;
    float hi = -INFINITY, lo = INFINITY;
    for (int64_t r = 0; r < R; ++r) {
      sum += xs[r * C + c];
      hi = std::max(hi, -(zs[r * C + c] * zs[r * C + c] + 1.0f));
      lo = std::min(lo, us[r * C + c] * us[r * C + c] + 1.0f);
    }
    expect(std::abs(out[0].as<float>()[c] - sum) <= 1e-5 * (1 + std::abs(sum)), "sum " + std::to_string(c));
    expect(out[1].as<float>()[c] == hi, "amax " + std::to_string(c));
    expect(out[2].as<float>()[c] == lo, "amin " + std::to_string(c));
  }
  for (int64_t a = 0; a < A; ++a)
    for (int64_t j = 0; j < B; ++j) {
      double sum = 0;
      for (int64_t m = 0; m < M; ++m) sum += ys[(a * M + m) * B + j];
      const double mean = sum / M;
      expect(std::abs(out[3].as<float>()[a * B + j] - mean) <= 1e-5 * (1 + std::abs(mean)), "mean " + std::to_string(a * B + j));
    }
  CHECK(mismatches == 0);
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
