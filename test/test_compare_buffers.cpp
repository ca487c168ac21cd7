// Debug builds (foundryc --debug-buffers) and the buffer-by-buffer comparison with the reference
// evaluator (foundryc --interpret --compare-with): the model's own outputs still match PyTorch, every
// intermediate matches the evaluator, a wrong kernel is named (not the later buffers that only
// inherit its error), and the command line's errors.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <regex>

#include "foundry/build/compile.h"
#include "foundry/driver/compare_buffers.h"
#include "foundry/driver/pipeline.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "support.h"
#include "sweep.h"

namespace fs = std::filesystem;

namespace foundry::test {
namespace {

const std::string kModel = "norm_softmax";  // LayerNorm, Linear, GELU, residual add, softmax

std::string model_dir() { return corpus_dir() + "/models/" + kModel; }

// Compiles the corpus model into `out` with `options` after the archive and -o.
void compile_corpus_model(const std::string& out, std::vector<std::string> options) {
  options.insert(options.begin(), {model_dir() + "/model.pt2", "-o", out});
  ProcResult r = run_foundryc(options);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
}

ProcResult compare_cli(const std::string& compiled_dir) {
  return run_foundryc({model_dir() + "/model.pt2", "--interpret", "--inputs", model_dir() + "/inputs",
                       "--compare-with", compiled_dir});
}

// The buffer of the manifest whose only ATen node is `aten` ("gelu (aten.gelu)"): which buffer
// a given ATen op computed, as the model's structure says.
const DebugBufferInfo& buffer_from(const DebugManifest& manifest, const std::string& aten) {
  const DebugBufferInfo* found = nullptr;
  for (const DebugBufferInfo& b : manifest.buffers)
    if (b.aten_nodes == std::vector<std::string>{aten}) {
      REQUIRE(found == nullptr);  // exactly one
      found = &b;
    }
  REQUIRE(found != nullptr);
  return *found;
}

float float_at(const NpyArray& a, int64_t e) {
  float v;
  std::memcpy(&v, a.data.data() + e * sizeof v, sizeof v);
  return v;
}

void set_float_at(NpyArray& a, int64_t e, float v) { std::memcpy(a.data.data() + e * sizeof v, &v, sizeof v); }

// Makes every value a kernel stores wrong, `out_ptrK[...] = tmpN;` (as --no-simd writes them)
// becoming 1.5 * tmpN + 0.5: scaled and shifted, so that a softmax after it differs as well.
// Returns how many stores changed.
int perturb_stores(std::string& kernel) {
  static const std::regex store(R"((out_ptr\d+\[[^\]]*\]) = (tmp\d+);)");
  int count = static_cast<int>(std::distance(std::sregex_iterator(kernel.begin(), kernel.end(), store),
                                             std::sregex_iterator()));
  kernel = std::regex_replace(kernel, store, "$1 = $2 * 1.5f + 0.5f;");
  return count;
}

// Perturbs the stores of the kernel named after `op` (cpp_fused_<op>_<k>) in DIR/kernels.cpp.
void perturb_kernel(const std::string& dir, const std::string& op) {
  std::string source = read_file(dir + "/kernels.cpp");
  size_t begin = source.find("\nvoid cpp_fused_" + op + "_");
  REQUIRE(begin != std::string::npos);
  size_t end = source.find("\n}\n", begin);
  REQUIRE(end != std::string::npos);
  std::string kernel = source.substr(begin, end - begin);
  REQUIRE(perturb_stores(kernel) > 0);
  write_file(dir + "/kernels.cpp", source.substr(0, begin) + kernel + source.substr(end));
}

}  // namespace

TEST_CASE("compare: a debug build's outputs match PyTorch and every buffer the evaluator", "[compare][corpus]") {
  if (!require_corpus()) return;
  TempDir tmp("foundry_compare_");
  compile_corpus_model(tmp / "out", {"--debug-buffers"});
  DebugManifest manifest = read_debug_manifest(tmp / "out");
  std::vector<NpyArray> expected = read_npy_sequence(model_dir() + "/expected");
  REQUIRE(manifest.model_outputs == expected.size());

  LoadedModel model(tmp / "out");
  // LayerNorm's three buffers, the matrix product (GELU folded into it), the add, the softmax's
  // four: beyond the model's one output, the intermediates are outputs too.
  CHECK(model.num_outputs() > expected.size() + 5);
  CHECK(manifest.buffers.size() == model.num_outputs());
  std::vector<NpyArray> outputs = model.run(read_npy_sequence(model_dir() + "/inputs"));
  std::vector<NpyArray> own(outputs.begin(), outputs.begin() + static_cast<long>(expected.size()));
  CHECK(compare_with_expected(own, model_dir()) == "");

  ProcResult r = compare_cli(tmp / "out");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "all " + std::to_string(manifest.buffers.size()) +
                     " buffers (1 of them the model's outputs) match the reference evaluator\n");
}

TEST_CASE("compare: a wrong kernel is the first differing buffer, not the ones after it", "[compare][corpus]") {
  if (!require_corpus()) return;
  TempDir tmp("foundry_compare_");
  // One kernel per node, scalar stores: GELU's kernel writes GELU's buffer alone.
  compile_corpus_model(tmp / "out", {"--debug-buffers", "--no-fusion", "--no-simd"});
  perturb_kernel(tmp / "out", "gelu");
  build::CompileOptions options;
  options.use_cache = false;
  build::compile_model(tmp / "out", options);

  DebugManifest manifest = read_debug_manifest(tmp / "out");
  const DebugBufferInfo& gelu = buffer_from(manifest, "gelu (aten.gelu)");
  ProcResult r = compare_cli(tmp / "out");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::StartsWith("first differing buffer: " + gelu.buffer + " (compiled output " +
                                      std::to_string(gelu.output) + "), written by " + gelu.nodes.at(0) +
                                      " from ATen gelu (aten.gelu), float32[4, 16, 64]: element [0, 0, 0] is "));
  // The residual add and the softmax (its max, exponentials, sum and output) read GELU's buffer, so
  // they differ too: 6 of them.
  CHECK_THAT(r.out, Catch::Contains("\n6 of "));
}

TEST_CASE("compare: the first differing buffer, element and values", "[compare][corpus]") {
  if (!require_corpus()) return;
  TempDir tmp("foundry_compare_");
  compile_corpus_model(tmp / "out", {"--debug-buffers"});  // fused: GELU, the add and the softmax in one kernel
  DebugManifest manifest = read_debug_manifest(tmp / "out");
  std::vector<NpyArray> inputs = read_npy_sequence(model_dir() + "/inputs");
  std::vector<NpyArray> outputs = LoadedModel(tmp / "out").run(inputs);

  // Two wrong buffers: the residual add's, at [0, 1, 36], and the model's output (later).
  const DebugBufferInfo& add = buffer_from(manifest, "add (aten.add.Tensor)");
  NpyArray& add_value = outputs.at(add.output);
  REQUIRE(add_value.shape == std::vector<int64_t>{4, 16, 64});
  const int64_t element = 1 * 64 + 36;
  float right = float_at(add_value, element);
  set_float_at(add_value, element, right + 1.0f);
  set_float_at(outputs.at(0), 5, float_at(outputs.at(0), 5) + 1.0f);

  BufferReport report = compare_buffers(lower_for_evaluation(model_dir() + "/model.pt2"), inputs, manifest, outputs);
  CHECK(report.compared == manifest.buffers.size());
  REQUIRE(report.differences.size() == 2);
  const BufferDifference& first = report.differences.front();
  CHECK(first.info.buffer == add.buffer);
  CHECK(first.index == std::vector<int64_t>{0, 1, 36});
  CHECK(first.compiled == right + 1.0f);
  CHECK(first.reference == Approx(right).margin(1e-4).epsilon(1e-4));
  CHECK(first.comparison.mismatches == 1);
  CHECK(report.differences.back().info.output == 0);
  CHECK(report.differences.back().index == std::vector<int64_t>{0, 0, 5});
}

TEST_CASE("compare: command line errors", "[compare][cli][corpus]") {
  if (!require_corpus()) return;
  TempDir tmp("foundry_compare_");
  auto check_error = [](const ProcResult& r, int code, const std::string& text) {
    INFO(r.out << r.err);
    CHECK(r.exit_code == code);
    CHECK_THAT(r.err, Catch::StartsWith("foundryc: error: ") && Catch::Contains(text));
    CHECK(r.err.find("internal error") == std::string::npos);
  };
  SECTION("a folder that is not a debug build") {
    compile_corpus_model(tmp / "plain", {"--stop-after=codegen"});
    check_error(compare_cli(tmp / "plain"), 1, "is not a debug build: compile it with foundryc MODEL -o ");
    check_error(compare_cli(tmp / "absent"), 1, "not a foundryc output folder");
  }
  SECTION("inputs missing") {
    compile_corpus_model(tmp / "out", {"--debug-buffers", "--stop-after=codegen"});
    std::string model = model_dir() + "/model.pt2";
    check_error(run_foundryc({model, "--interpret", "--inputs", tmp / "none", "--compare-with", tmp / "out"}), 1,
                "the inputs folder");
    fs::create_directories(tmp / "empty");
    check_error(run_foundryc({model, "--interpret", "--inputs", tmp / "empty", "--compare-with", tmp / "out"}), 1,
                "found 0 inputs in");
    check_error(run_foundryc({model, "--interpret", "--compare-with", tmp / "out"}), 2, "--interpret needs --inputs");
    check_error(run_foundryc({model, "--compare-with", tmp / "out"}), 2, "--compare-with needs --interpret");
  }
}

}  // namespace foundry::test
