// Lowerings of matrix products, convolution, pooling, upsampling and tensor factories: lowered
// corpus samples run through the reference evaluator and match PyTorch's recorded outputs.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "foundry/frontend/frontend.h"
#include "foundry/ir/evaluate.h"
#include "foundry/lower/lowering.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/npy.h"
#include "support.h"

namespace {

std::vector<foundry::NpyArray> read_arrays(const std::string& dir) {
  std::vector<foundry::NpyArray> arrays;
  for (int k = 0; std::filesystem::exists(dir + "/" + std::to_string(k) + ".npy"); ++k)
    arrays.push_back(foundry::read_npy(dir + "/" + std::to_string(k) + ".npy"));
  return arrays;
}

foundry::ir::LoopProgram lower_sample(const std::string& dir) {
  foundry::Graph graph = foundry::load_model(dir + "/model.pt2");
  return foundry::lower::lower_graph(graph);
}

// Lowers the sample, evaluates it on its inputs and compares every output with expected/.
void check_sample(const std::string& dir) {
  INFO("sample " << dir);
  foundry::ir::LoopProgram program = lower_sample(dir);
  std::vector<foundry::NpyArray> outs = foundry::ir::evaluate_program(program, read_arrays(dir + "/inputs"));
  std::vector<foundry::NpyArray> refs = read_arrays(dir + "/expected");
  REQUIRE(outs.size() == refs.size());
  for (size_t k = 0; k < outs.size(); ++k) {
    INFO("output " << k);
    REQUIRE(outs[k].dtype == refs[k].dtype);
    REQUIRE(outs[k].shape == refs[k].shape);
    foundry::Comparison c = foundry::compare_arrays(outs[k], refs[k]);
    INFO(c.message);
    CHECK(c.pass);
  }
}

int count_externs(const foundry::ir::LoopProgram& program, const std::string& kind) {
  int n = 0;
  for (const auto& node : program.nodes)
    if (node->kind == foundry::ir::NodeKind::Extern && node->call.kind == kind) ++n;
  return n;
}

std::string opinfo(const std::string& name) { return corpus_dir() + "/opinfo/" + name; }

}  // namespace

TEST_CASE("matrix products lower to extern calls that match the references", "[lower][fast]") {
  if (!require_corpus()) return;
  for (const char* s : {"mm__float32__0", "mm__float32__1", "bmm__float32__0", "addmm__float32__0",
                        "addmm__float32__1", "addmm__float32__2", "addmm_decomposed__float32__0",
                        "baddbmm__float32__0", "nn_functional_linear__float32__0", "linalg_multi_dot__float32__0",
                        "matmul__float32__2"})
    check_sample(opinfo(s));
  CHECK(count_externs(lower_sample(opinfo("mm__float32__0")), "mm") == 1);
  CHECK(count_externs(lower_sample(opinfo("bmm__float32__0")), "bmm") == 1);
  CHECK(count_externs(lower_sample(opinfo("addmm__float32__0")), "addmm") == 1);
}

TEST_CASE("convolutions: direct ones as extern calls, transposed ones as reductions", "[lower][fast]") {
  if (!require_corpus()) return;
  for (const char* s : {"nn_functional_conv1d__float32__0", "nn_functional_conv1d__float32__2",
                        "nn_functional_conv2d__float32__0", "nn_functional_conv2d__float32__2",
                        "nn_functional_conv3d__float32__0", "nn_functional_conv_transpose1d__float32__2",
                        "nn_functional_conv_transpose2d__float32__0", "nn_functional_conv_transpose2d__float32__2",
                        "nn_functional_conv_transpose3d__float32__1"})
    check_sample(opinfo(s));
  CHECK(count_externs(lower_sample(opinfo("nn_functional_conv2d__float32__2")), "convolution") == 1);
  CHECK(count_externs(lower_sample(opinfo("nn_functional_conv_transpose2d__float32__0")), "convolution") == 0);
}

TEST_CASE("pooling: max with indices, average with padding and ceil mode, adaptive", "[lower][fast]") {
  if (!require_corpus()) return;
  for (const char* s : {"nn_functional_max_pool1d__float32__0", "nn_functional_max_pool1d__float32__1",
                        "nn_functional_max_pool1d__float32__2", "nn_functional_max_pool2d__float32__0",
                        "nn_functional_max_pool2d__float32__1", "nn_functional_max_pool2d__float32__2",
                        "nn_functional_avg_pool1d__float32__1", "nn_functional_avg_pool1d__float32__2",
                        "nn_functional_avg_pool2d__float32__0", "nn_functional_avg_pool2d__float32__1",
                        "nn_functional_avg_pool2d__float32__2", "nn_functional_adaptive_avg_pool1d__float32__0",
                        "nn_functional_adaptive_avg_pool2d__float32__0", "nn_functional_adaptive_avg_pool2d__float32__2",
                        "nn_functional_interpolate_area__float32__1"})
    check_sample(opinfo(s));
}

TEST_CASE("bilinear upsampling with and without align_corners, from sizes and scales", "[lower][fast]") {
  if (!require_corpus()) return;
  for (const char* s : {"nn_functional_interpolate_bilinear__float32__0", "nn_functional_interpolate_bilinear__float32__1",
                        "nn_functional_interpolate_bilinear__float32__2", "nn_functional_upsample_bilinear__float32__2"})
    check_sample(opinfo(s));
}

TEST_CASE("tensor factories: full, full_like, scalar_tensor, arange, empty", "[lower][fast]") {
  if (!require_corpus()) return;
  for (const char* s : {"full_like__float32__0", "fill__float32__1", "block_diag__float32__0", "diag_embed__float32__1",
                        "nn_functional_upsample_nearest__float32__2", "diag__float32__0", "cross__float32__0",
                        "nn_functional_pad_circular__float32__0", "nn_functional_hinge_embedding_loss__float32__0"})
    check_sample(opinfo(s));
}
