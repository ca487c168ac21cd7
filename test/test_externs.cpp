// Library calls in the generated code: their provenance comments, the oneDNN set-up as named
// fields, `foundryc -v` saying which calls go to oneDNN, and the warnings a model gives when a
// call runs on the portable loops instead (its results staying PyTorch's).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "support.h"

namespace {

// build_runtime_program, then runs it with oneDNN allowed.
ProcResult run_runtime_program(const TempDir& tmp, const std::string& name, const std::string& source) {
  return run_process({"/usr/bin/env", "-u", "FOUNDRY_NO_DNNL", build_runtime_program(tmp.path(), name, source)});
}

std::string sample_dir(const std::string& name) { return samples_dir() + "/" + name; }

// Compiles samples/NAME into `out` (with `extra` options) with the compile cache `cache` (one of
// its own, for a test that reads what a compile says: the run's cache may hold the model), or the
// run's when `cache` is empty; returns foundryc's stderr.
std::string compile_named_sample(const std::string& name, const std::string& out, const std::string& cache,
                                 std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {sample_dir(name) + "/model.pt2", "-o", out, "--name", name};
  if (!cache.empty()) args.insert(args.end(), {"--cache-dir", cache});
  args.insert(args.end(), extra.begin(), extra.end());
  ProcResult r = run_foundryc(args);
  INFO("foundryc " << name << ": " << r.err);
  REQUIRE(r.exit_code == 0);
  return r.err;
}

// How many nodes of `op` ("aten.addmm.default") the sample's exporter recorded (meta.json).
int recorded_ops(const std::string& name, const std::string& op) {
  nlohmann::json meta = nlohmann::json::parse(read_file(sample_dir(name) + "/meta.json"));
  return meta["core_ops"].value(op, 0);
}

size_t count_matches(const std::string& text, const std::regex& line_pattern) {
  size_t n = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) n += std::regex_match(line, line_pattern);
  return n;
}

// foundry-run on the sample's inputs, checked against PyTorch's outputs, with `env` settings.
ProcResult run_sample(const std::string& name, const std::string& out, const std::string& env) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  if (!env.empty()) argv.push_back(env);
  for (const std::string& a : {foundry_run_exe(), out, std::string("--inputs"), sample_dir(name) + "/inputs",
                               std::string("--expected"), sample_dir(name) + "/expected"})
    argv.push_back(a);
  return run_process(argv);
}

}  // namespace

TEST_CASE("externs: each library call's wrapper line and function name its op, shapes and ATen origins",
          "[externs]") {
  TempDir tmp("foundry_externs_");
  compile_named_sample("mlp", tmp / "mlp", "");
  // mlp: x [8, 64] -> linear 64->128, relu -> linear 128->10 (meta.json), as two addmm calls.
  const std::string first = "// addmm: float32[8, 64] x float32[64, 128] + bias -> float32[8, 128], relu folded; "
                            "from addmm (aten.addmm), relu (aten.relu)";
  const std::string wrapper = read_file(tmp / "mlp/wrapper.cpp"), externs = read_file(tmp / "mlp/externs.cpp");
  CHECK_THAT(wrapper, Catch::Contains(first + "\n  mlp_externs::call0("));
  CHECK_THAT(externs, Catch::Contains(first + "\nvoid call0("));
  const std::regex call_comment(R"(  // addmm: float32\[8, \d+\] x float32\[\d+, \d+\] \+ bias -> float32\[8, \d+\].*; from .*)");
  CHECK(count_matches(wrapper, call_comment) == static_cast<size_t>(recorded_ops("mlp", "aten.addmm.default")));
  // The oneDNN set-up fills its spec by name.
  CHECK_THAT(externs, Catch::Contains("    spec.a_sizes = {8, 64};\n") && Catch::Contains("    spec.has_bias = true;\n") &&
                          Catch::Contains("    spec.activation = foundry_rt::Activation::Relu;\n"));

  compile_named_sample("small_cnn", tmp / "small_cnn", "");
  const std::string cnn = read_file(tmp / "small_cnn/externs.cpp");
  CHECK_THAT(cnn, Catch::Contains("// convolution: float32[2, 3, 32, 32] * float32[16, 3, 3, 3] + bias -> "));
  CHECK_THAT(cnn, Catch::Contains("    spec.stride = {1, 1};\n") && Catch::Contains("    spec.padding = {1, 1};\n"));
}

TEST_CASE("externs: -v says per library call whether it runs on oneDNN or the portable loops, and why",
          "[externs][fast]") {
  TempDir tmp("foundry_externs_");
  std::string log = compile_named_sample("small_cnn", tmp / "out", tmp / "cache", {"-v", "--stop-after=codegen"});
  INFO(log);
  const std::regex on_dnnl(R"(foundryc: info: call\d+ \((convolution|addmm): .*\) runs on oneDNN)");
  const int calls = recorded_ops("small_cnn", "aten.convolution.default") + recorded_ops("small_cnn", "aten.addmm.default");
  CHECK(count_matches(log, on_dnnl) == static_cast<size_t>(calls));
  // mlp_dynamic's batch is dynamic: its matrix products still go to oneDNN (a runtime row count).
  log = compile_named_sample("mlp_dynamic", tmp / "dyn", tmp / "cache", {"-v", "--stop-after=codegen"});
  CHECK(count_matches(log, on_dnnl) == static_cast<size_t>(recorded_ops("mlp_dynamic", "aten.addmm.default")));
}

TEST_CASE("externs: calls oneDNN does not take say why in -v, and their portable loops match PyTorch",
          "[externs][fast]") {
  if (!require_corpus()) return;
  TempDir tmp("foundry_externs_");
  // addmm with alpha 0.6, beta 0.2; mm of a [5, 0] and a [0, 10] matrix (the opinfo samples).
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"addmm__float32__1", R"(addmm: 0\.6 \* float32\[3, 3\] x float32\[3, 3\] \+ 0\.2 \* bias -> float32\[3, 3\]; from .*\) )"
                            R"(runs on the portable loops: alpha 0\.6, beta 0\.2 \(the oneDNN form here has alpha = beta = 1\))"},
      {"mm__float32__2", R"(mm: float32\[5, 0\] x float32\[0, 10\] -> float32\[5, 10\]; from .*\) )"
                         R"(runs on the portable loops: it has an empty tensor \(oneDNN does not take zero-size dims\))"}};
  for (const auto& [name, reason] : cases) {
    INFO(name);
    const std::string dir = corpus_dir() + "/opinfo/" + name, out = tmp / name;
    ProcResult r = run_foundryc({dir + "/model.pt2", "-o", out, "--cache-dir", tmp / "cache", "-v"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(count_matches(r.err, std::regex("foundryc: info: call0 \\(" + reason)) == 1);
    ProcResult run = run_process({foundry_run_exe(), out, "--inputs", dir + "/inputs", "--expected", dir + "/expected"});
    INFO(run.out << run.err);
    CHECK(run.exit_code == 0);
  }
}

TEST_CASE("externs: with oneDNN off, the model warns once per call at creation and still matches PyTorch",
          "[externs][fast]") {
  TempDir tmp("foundry_externs_");
  compile_named_sample("mlp", tmp / "out", "");
  ProcResult off = run_sample("mlp", tmp / "out", "FOUNDRY_NO_DNNL=1");
  INFO("stdout: " << off.out << "\nstderr: " << off.err);
  CHECK(off.exit_code == 0);  // the portable loops' results pass the comparison with PyTorch's
  const std::regex warning(R"(mlp: warning: call\d+ \(addmm from addmm\w* \(aten\.addmm\).*\) runs on the portable loops: FOUNDRY_NO_DNNL=1 is set)");
  CHECK(count_matches(off.err, warning) == static_cast<size_t>(recorded_ops("mlp", "aten.addmm.default")));
  ProcResult on = run_sample("mlp", tmp / "out", "");
  CHECK(on.exit_code == 0);
  CHECK(on.err.find("warning") == std::string::npos);
}

TEST_CASE("externs: oneDNN failures are reported with oneDNN's own message, a failing run once per model",
          "[externs][fast]") {
  // The oneDNN glue (foundry_dnnl.cpp) as a generated externs.cpp uses it. A matrix product whose operands
  // do not line up ([2, 3] x [4, 5]): oneDNN refuses to build it. One built with a runtime row
  // count, run twice with a row count oneDNN rejects (-1): the run fails, as a generated call
  // would catch it, and the model warns once.
  TempDir tmp("foundry_externs_");
  ProcResult r = run_runtime_program(tmp, "glue", R"cpp(#include "foundry_dnnl.cpp"  // the glue, its state visible
using namespace foundry_rt::dnnl_glue;
int main() {
  Matmul unbuilt;
  MatmulSpec spec;
  spec.a_sizes = {2, 3};
  spec.a_strides = {3, 1};
  spec.b_sizes = {4, 5};
  spec.b_strides = {5, 1};
  spec.output_sizes = {2, 5};
  build(unbuilt, spec, "glue", "call0 (mm from mm (aten.mm))");
  Matmul built;
  spec.a_sizes = {kRuntimeDim, 4};
  spec.a_strides = {4, 1};
  spec.output_sizes = {kRuntimeDim, 5};
  build(built, spec, "glue", "call1 (mm from mm_1 (aten.mm))");
  std::atomic<bool> warned{false};
  float a[8] = {}, b[20] = {}, y[10] = {};
  for (int run = 0; run < 2; ++run) {
    try {
      built.run(a, b, nullptr, y, -1);
    } catch (const LibraryError& e) {
      warn_fallback(warned, "glue", "call1 (mm from mm_1 (aten.mm))", e.what());
    }
  }
  return !unbuilt.ok() && built.ok() ? 0 : 1;
}
)cpp");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  const std::regex not_built(
      R"(glue: warning: call0 \(mm from mm \(aten\.mm\)\) runs on the portable loops: oneDNN could not build it: \S.*)");
  CHECK(count_matches(r.err, not_built) == 1);
  const std::regex fell_back(
      R"(glue: warning: call1 \(mm from mm_1 \(aten\.mm\)\) fell back to the portable loops: oneDNN failed: \S.* \(said once per model\))");
  CHECK(count_matches(r.err, fell_back) == 1);
}

TEST_CASE("externs: a 1x1 convolution without an activation runs on its operands as stored, and all agree with direct loops",
          "[externs][fast]") {
  // ConvPrimitive::product_on_operands: 24 -> 40 channels over 12x12 pixels without an activation is a
  // matrix product on the stored layout (no reorder before or after the call); with a folded relu,
  // or over 512 input channels, oneDNN's preferred layout is kept. Each result, bias and relu
  // included, is checked against direct loops in double, from weights and inputs of a fixed pattern.
  TempDir tmp("foundry_externs_");
  ProcResult r = run_runtime_program(tmp, "conv", R"cpp(#include "foundry_dnnl.cpp"  // the glue, its state visible
#include <cmath>
#include <cstdio>
#include <vector>
using namespace foundry_rt::dnnl_glue;
static bool check(int64_t in_ch, foundry_rt::Activation act, bool& stored_layout) {
  const int64_t out_ch = 40, hw = 12 * 12;
  ConvSpec spec;
  spec.input_sizes = {1, in_ch, 12, 12};
  spec.input_strides = {in_ch * hw, hw, 12, 1};
  spec.weight_sizes = {out_ch, in_ch, 1, 1};
  spec.weight_strides = {in_ch, 1, 1, 1};
  spec.output_sizes = {1, out_ch, 12, 12};
  spec.stride = {1, 1};
  spec.padding = {0, 0};
  spec.dilation = {1, 1};
  spec.has_bias = true;
  spec.bias_stride = 1;
  spec.activation = act;
  std::vector<float> x(in_ch * hw), w(out_ch * in_ch), b(out_ch), y(out_ch * hw);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.25f - 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 3) - 1.0f;
  spec.constant_weights = w.data();
  Conv conv;
  build(conv, spec, "conv", "call0");
  if (!conv.ok()) return false;
  conv.run(x.data(), w.data(), b.data(), y.data());
  stored_layout = !conv.primitive()->src_to_conv && !conv.primitive()->conv_to_dst;
  for (int64_t o = 0; o < out_ch; ++o)
    for (int64_t p = 0; p < hw; ++p) {
      double want = b[o];
      for (int64_t c = 0; c < in_ch; ++c) want += double(w[o * in_ch + c]) * x[c * hw + p];
      if (act == foundry_rt::Activation::Relu && want < 0) want = 0;
      if (std::fabs(y[o * hw + p] - want) > 1e-4 + 1e-4 * std::fabs(want)) return false;
    }
  return true;
}
int main() {
  bool plain = false, relu = false, wide = false;
  bool right = check(24, foundry_rt::Activation::None, plain) & check(24, foundry_rt::Activation::Relu, relu) &
               check(512, foundry_rt::Activation::None, wide);
  std::printf("right %d, stored layout: plain %d\n", right, plain);
  return 0;
}
)cpp");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "right 1, stored layout: plain 1\n");
}

TEST_CASE("externs: a U-Net's transposed convolutions run on oneDNN and match PyTorch there and on the portable loops",
          "[externs][fast]") {
  // samples/unet (scripts/export_unet_sample.py): ConvTranspose2d with stride 2, then relu; with
  // padding, output_padding and groups 2, then tanh; with dilation 2 and no bias.
  TempDir tmp("foundry_externs_");
  std::string log = compile_named_sample("unet", tmp / "out", tmp / "cache", {"-v"});
  INFO(log);
  const std::regex deconv(R"(foundryc: info: call\d+ \(convolution: .*, transposed, output padding \[\d, \d\].*\) runs on oneDNN)");
  CHECK(count_matches(log, deconv) == 3);
  const std::string externs = read_file(tmp / "out/externs.cpp");
  CHECK_THAT(externs, Catch::Contains("    spec.groups = 2;\n"));
  CHECK(count_occurrences(externs, "    spec.transposed = true;\n") == 3);
  CHECK(count_occurrences(externs, "foundry_rt::conv_transpose3d<float>(") == 3);
  // Their relu and tanh stay in kernels: oneDNN 2.6 would apply them as post-ops in a slow loop.
  CHECK(count_matches(log, std::regex(R"(foundryc: info: call\d+ \(convolution: .*, transposed, .* folded;.*)")) == 0);
  CHECK(count_matches(log, std::regex(R"(foundryc: info: call\d+ \(convolution: .*, relu folded;.*)")) == 6);
  ProcResult on = run_sample("unet", tmp / "out", "");
  INFO("stdout: " << on.out << "\nstderr: " << on.err);
  CHECK(on.exit_code == 0);
  CHECK(on.err.find("warning") == std::string::npos);
  ProcResult off = run_sample("unet", tmp / "out", "FOUNDRY_NO_DNNL=1");
  INFO("stdout: " << off.out << "\nstderr: " << off.err);
  CHECK(off.exit_code == 0);
  CHECK_THAT(off.err, Catch::Contains("runs on the portable loops: FOUNDRY_NO_DNNL=1 is set"));
}

TEST_CASE("externs: a transposed convolution of stride above 1 runs as one ordinary convolution and an interleave, and matches direct loops",
          "[externs][fast]") {
  // Conv's sub-pixel form (SubPixel in foundry_dnnl.h) over 1, 2 and 3 spatial dims, strides 2
  // and 3, padding, output padding, groups, a folded relu, a channels-last output, one thread and
  // two; with dilation 2 it stays a oneDNN deconvolution. Each result is checked against direct
  // loops in double over PyTorch's definition (output o takes input i = (o + padding - k) / stride
  // where exact).
  TempDir tmp("foundry_externs_");
  ProcResult r = run_runtime_program(tmp, "deconv", R"cpp(#include "foundry_dnnl.cpp"  // the glue, its state visible
#include <cmath>
#include <cstdio>
#include <vector>
using namespace foundry_rt::dnnl_glue;
struct Case {
  dims in, kernel, stride, padding, out_padding;
  int64_t out_ch, groups, dilation;
  bool bias, relu, channels_last_out;
  int team = 0;  // 2: built for and run on two threads
};
static dims padded3(const dims& d, int64_t fill) {  // spatial dims as three
  dims r(3 - d.size(), fill);
  r.insert(r.end(), d.begin(), d.end());
  return r;
}
static void check(const Case& c) {
  const size_t spatial = c.in.size() - 2;
  const int64_t in_ch = c.in[1], groups = c.groups, per_out = c.out_ch / groups, per_in = in_ch / groups;
  ConvSpec spec;
  spec.input_sizes = c.in;
  spec.input_strides = contiguous(c.in);
  spec.weight_sizes = {in_ch, per_out};
  spec.output_sizes = {c.in[0], c.out_ch};
  for (size_t d = 0; d < spatial; ++d) {
    spec.weight_sizes.push_back(c.kernel[d]);
    spec.output_sizes.push_back((c.in[d + 2] - 1) * c.stride[d] - 2 * c.padding[d] + c.dilation * (c.kernel[d] - 1) + 1 + c.out_padding[d]);
  }
  spec.weight_strides = contiguous(spec.weight_sizes);
  const dims& out = spec.output_sizes;
  dims out_strides = contiguous(out);
  if (c.channels_last_out) {  // [N, H, W, C] in memory
    int64_t run = out[1];
    out_strides[1] = 1;
    for (size_t d = out.size(); d-- > 2;) out_strides[d] = run, run *= out[d];
    out_strides[0] = run;
    spec.output_strides = out_strides;
  }
  spec.groups = groups;
  spec.transposed = true;
  spec.stride = c.stride;
  spec.padding = c.padding;
  spec.dilation = dims(spatial, c.dilation);
  spec.has_bias = c.bias;
  spec.bias_stride = 1;
  spec.activation = c.relu ? foundry_rt::Activation::Relu : foundry_rt::Activation::None;
  spec.team_cap = c.team > 0 ? c.team : 1;
  spec.team = c.team;
  std::vector<float> x(static_cast<size_t>(product(c.in))), w(static_cast<size_t>(product(spec.weight_sizes))), b(c.out_ch), y(static_cast<size_t>(product(out)));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.25f - 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 3) - 1.0f;
  spec.constant_weights = w.data();
  Conv conv;
  build(conv, spec, "deconv", "call0");
  if (!conv.ok()) {
    std::printf("not built: %s\n", conv.error().c_str());
    return;
  }
  conv.run(x.data(), w.data(), c.bias ? b.data() : nullptr, y.data());
  const dims i3 = padded3(dims(c.in.begin() + 2, c.in.end()), 1), o3 = padded3(dims(out.begin() + 2, out.end()), 1);
  const dims k3 = padded3(c.kernel, 1), s3 = padded3(c.stride, 1), p3 = padded3(c.padding, 0);
  const dims os3 = padded3(dims(out_strides.begin() + 2, out_strides.end()), 0);
  int wrong = 0;
  for (int64_t n = 0; n < c.in[0]; ++n)
    for (int64_t o = 0; o < c.out_ch; ++o)
      for (int64_t od = 0; od < o3[0]; ++od)
        for (int64_t oh = 0; oh < o3[1]; ++oh)
          for (int64_t ow = 0; ow < o3[2]; ++ow) {
            double want = c.bias ? b[o] : 0.0;
            const int64_t g = o / per_out;
            for (int64_t ci = g * per_in; ci < (g + 1) * per_in; ++ci)
              for (int64_t kd = 0; kd < k3[0]; ++kd)
                for (int64_t kh = 0; kh < k3[1]; ++kh)
                  for (int64_t kw = 0; kw < k3[2]; ++kw) {
                    const int64_t at[3] = {od, oh, ow}, k[3] = {kd, kh, kw};
                    int64_t i[3];
                    bool inside = true;
                    for (int d = 0; d < 3; ++d) {
                      const int64_t num = at[d] + p3[d] - k[d] * (d < 3 - int(spatial) ? 1 : c.dilation);
                      inside &= num >= 0 && num % s3[d] == 0 && num / s3[d] < i3[d];
                      i[d] = num / s3[d];
                    }
                    if (!inside) continue;
                    const double xv = x[((n * in_ch + ci) * i3[0] + i[0]) * i3[1] * i3[2] + i[1] * i3[2] + i[2]];
                    const double wv = w[((ci * per_out + o % per_out) * k3[0] + kd) * k3[1] * k3[2] + kh * k3[2] + kw];
                    want += xv * wv;
                  }
            if (c.relu && want < 0) want = 0;
            const float got = y[n * out_strides[0] + o * out_strides[1] + od * os3[0] + oh * os3[1] + ow * os3[2]];
            wrong += std::fabs(got - want) > 1e-4 + 1e-4 * std::fabs(want);
          }
  std::printf("wrong %d, sub-pixel %d\n", wrong, conv.primitive()->sub.on ? 1 : 0);
}
int main() {
  check({{1, 32, 15, 17}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 16, 2, 1, true, false, false});  // samples/unet's second
  check({{2, 8, 7, 5}, {2, 2}, {2, 2}, {0, 0}, {0, 0}, 6, 1, 1, false, true, true, 2});
  check({{1, 4, 11}, {5}, {3}, {2}, {2}, 5, 1, 1, true, false, false});
  check({{1, 3, 4, 5, 6}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 1, 0}, 4, 1, 1, true, true, false});
  check({{1, 6, 9, 8}, {4, 4}, {2, 3}, {1, 0}, {0, 2}, 8, 2, 1, true, false, true, 2});
  check({{1, 8, 9, 9}, {3, 3}, {2, 2}, {2, 2}, {1, 1}, 8, 1, 2, true, false, false});  // dilation 2: a deconvolution
  return 0;
}
)cpp");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "wrong 0, sub-pixel 1\nwrong 0, sub-pixel 1\nwrong 0, sub-pixel 1\nwrong 0, sub-pixel 1\n"
                 "wrong 0, sub-pixel 1\nwrong 0, sub-pixel 0\n");
}

// Depthwise convolutions between channels-last activations (sched/channels_last.h) run on
// oneDNN's kernel for that layout, without reorders, and match PyTorch. On NCHW activations with
// output rows of at least 14 they run on foundryc's own loops instead (foundry_depthwise.h:
// test_channels_last.cpp; their values at every vector width: test_simd.cpp).
TEST_CASE("externs: depthwise convolutions between channels-last activations run on oneDNN and match PyTorch",
          "[externs]") {
  TempDir tmp("foundry_externs_");
  // A weight of one input channel per output channel, as many groups as channels.
  const std::string depthwise = R"(foundryc: info: call\d+ \(convolution: float32\[1, (\d+), .*\] \* float32\[\1, 1, .*groups \1\b.*\) )";
  const std::regex on_loops(depthwise + "runs on foundryc's depthwise loops"), depthwise_on_dnnl(depthwise + "runs on oneDNN");
  // effnet_block: 144 channels 3x3 at 56x56, 5x5 stride 2 to 28x28, 240 channels 5x5 at 28x28.
  std::string log = compile_named_sample("effnet_block", tmp / "eff", tmp / "cache", {"-v"});
  CHECK(count_matches(log, on_loops) == 0);
  CHECK(count_matches(log, depthwise_on_dnnl) == 3);
  ProcResult run = run_sample("effnet_block", tmp / "eff", "");
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  if (!require_corpus()) return;
  // mobilenet_v3_small at 96x96: one depthwise layer to 24x24, ten at 12x12 and below.
  const std::string dir = corpus_dir() + "/models/mobilenet_v3_small";
  ProcResult r = run_foundryc({dir + "/model.pt2", "-o", tmp / "mb", "--cache-dir", tmp / "cache", "-v"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(count_matches(r.err, on_loops) == 0);
  CHECK(count_matches(r.err, depthwise_on_dnnl) == 11);
  run = run_process({foundry_run_exe(), tmp / "mb", "--inputs", dir + "/inputs", "--expected", dir + "/expected"});
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
}

// samples/gelu_epilogues (scripts/export_gelu_sample.py): a tanh GELU after an addmm, read through
// a reshape, and an erf GELU after a convolution, each applied by oneDNN as the call's post-op; the
// portable loops apply them after the call when oneDNN is off. Both match PyTorch.
TEST_CASE("externs: GELU in both forms is the post-op of the product or convolution before it, and matches PyTorch",
          "[externs][fast]") {
  TempDir tmp("foundry_externs_");
  std::string log = compile_named_sample("gelu_epilogues", tmp / "out", tmp / "cache", {"-v"});
  INFO(log);
  CHECK(count_matches(log, std::regex(R"(foundryc: info: call\d+ \(addmm: .* -> float32\[16, 64\], gelu_tanh folded;.*\) runs on oneDNN)")) == 1);
  CHECK(count_matches(log, std::regex(R"(foundryc: info: call\d+ \(convolution: .*, gelu folded;.*\) runs on oneDNN)")) == 1);
  const std::string externs = read_file(tmp / "out/externs.cpp");
  CHECK(count_occurrences(externs, "    spec.activation = foundry_rt::Activation::GeluTanh;\n") == 1);
  CHECK(count_occurrences(externs, "    spec.activation = foundry_rt::Activation::GeluErf;\n") == 1);
  CHECK(count_occurrences(read_file(tmp / "out/kernels.cpp"), "foundry_vec::erf(") == 0);
  for (const char* env : {"", "FOUNDRY_NO_DNNL=1"}) {
    ProcResult run = run_sample("gelu_epilogues", tmp / "out", env);
    INFO(env << "\nstdout: " << run.out << "\nstderr: " << run.err);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Catch::Contains("PASS"));
  }
}
