// Lowerings of matrix products, convolution, pooling, upsampling and tensor factories: lowered
// corpus samples run through the reference evaluator and match PyTorch's recorded outputs.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "foundry/frontend/frontend.h"
#include "foundry/ir/evaluate.h"
#include "foundry/lower/lowering.h"
#include "foundry/ops/registry.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/npy.h"
#include "graph_builder.h"
#include "support.h"

namespace {

std::vector<foundry::NpyArray> read_arrays(const std::string& dir) {
  std::vector<foundry::NpyArray> arrays;
  for (int k = 0; std::filesystem::exists(dir + "/" + std::to_string(k) + ".npy"); ++k)
    arrays.push_back(foundry::read_npy(dir + "/" + std::to_string(k) + ".npy"));
  return arrays;
}

foundry::ir::LoopProgram lower_sample(const std::string& dir, const foundry::lower::LowerOptions& options = {}) {
  foundry::Graph graph = foundry::load_model(dir + "/model.pt2");
  return foundry::lower::lower_graph(graph, options);
}

// Lowers the sample, evaluates it on its inputs and compares every output with expected/.
void check_sample(const std::string& dir, const foundry::lower::LowerOptions& options = {}) {
  INFO("sample " << dir);
  foundry::ir::LoopProgram program = lower_sample(dir, options);
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
    if (node->kind == foundry::ir::NodeKind::Extern && foundry::ir::extern_name(node->call) == kind) ++n;
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

TEST_CASE("convolutions: direct and transposed ones as extern calls (transposed ones as reductions for cuda)", "[lower]") {
  if (!require_corpus()) return;
  foundry::lower::LowerOptions reductions;  // --device cuda's: cuDNN calls are direct convolutions only
  reductions.libraries.transposed_convolutions = false;
  for (const char* s : {"nn_functional_conv1d__float32__0", "nn_functional_conv1d__float32__2",
                        "nn_functional_conv2d__float32__0", "nn_functional_conv2d__float32__2",
                        "nn_functional_conv3d__float32__0", "nn_functional_conv_transpose1d__float32__0",
                        "nn_functional_conv_transpose1d__float32__1", "nn_functional_conv_transpose1d__float32__2",
                        "nn_functional_conv_transpose2d__float32__0", "nn_functional_conv_transpose2d__float32__1",
                        "nn_functional_conv_transpose2d__float32__2", "nn_functional_conv_transpose3d__float32__0",
                        "nn_functional_conv_transpose3d__float32__1", "nn_functional_conv_transpose3d__float32__2"}) {
    check_sample(opinfo(s));
    check_sample(opinfo(s), reductions);
  }
  CHECK(count_externs(lower_sample(opinfo("nn_functional_conv2d__float32__2")), "convolution") == 1);
  for (const char* s : {"nn_functional_conv_transpose1d__float32__2", "nn_functional_conv_transpose2d__float32__0",
                        "nn_functional_conv_transpose3d__float32__1"}) {
    INFO(s);
    foundry::ir::LoopProgram calls = lower_sample(opinfo(s));
    CHECK(count_externs(calls, "convolution") == 1);
    for (const auto& node : calls.nodes)
      if (const auto* c = std::get_if<foundry::ir::Convolution>(&node->call.op)) CHECK(c->transposed);
    CHECK(count_externs(lower_sample(opinfo(s), reductions), "convolution") == 0);
  }
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

// F.grid_sample, bilinear and nearest, padding zeros and border, align_corners False and True, at
// points up to 30% outside the input (scripts/export_core_ops_samples.py, torch 2.15).
TEST_CASE("grid_sampler_2d matches PyTorch interpreted and compiled", "[lower][fast]") {
  for (const char* archive : {"model.pt2", "model.raw.pt2"})  // the raw one: grid_sampler decomposed
    CHECK(run_sample_both_ways(test_source_dir() + "/data/core_ops/grid_sample", archive) == "");
}

TEST_CASE("tensor factories: full, full_like, scalar_tensor, arange, empty", "[lower][fast]") {
  if (!require_corpus()) return;
  for (const char* s : {"full_like__float32__0", "fill__float32__1", "block_diag__float32__0", "diag_embed__float32__1",
                        "nn_functional_upsample_nearest__float32__2", "diag__float32__0", "cross__float32__0",
                        "nn_functional_pad_circular__float32__0", "nn_functional_hinge_embedding_loss__float32__0"})
    check_sample(opinfo(s));
}

// --- hand-built single-node graphs for cases the corpus does not cover ---------------------------

namespace {

using foundry::Arg;
using foundry::DType;
using foundry::NpyArray;

struct OneNodeGraph {
  foundry::Graph graph;
  std::vector<foundry::Value*> inputs;

  foundry::Value* input(DType dtype, std::vector<int64_t> sizes) {
    foundry::TensorType t;
    t.dtype = dtype;
    t.sizes = std::move(sizes);
    foundry::Value* v = graph.new_value("x" + std::to_string(inputs.size()), t);
    graph.inputs.push_back(foundry::GraphInput{foundry::InputKind::User, v, "", {}});
    inputs.push_back(v);
    return v;
  }
  // Appends `target` with its arguments and recorded output types; all outputs become graph outputs.
  void node(const std::string& target, std::vector<foundry::RawArg> args,
            std::vector<std::pair<DType, std::vector<int64_t>>> outs) {
    auto n = std::make_unique<foundry::Node>();
    n->name = "n0";
    n->target = target;
    n->op = foundry::find_op(target);
    REQUIRE(n->op != nullptr);
    n->args = foundry::bind_arguments(*n->op, args, &n->arg_names);
    for (size_t k = 0; k < outs.size(); ++k) {
      foundry::TensorType t;
      t.dtype = outs[k].first;
      t.sizes = outs[k].second;
      foundry::Value* v = graph.new_value("out" + std::to_string(k), t);
      n->outputs.push_back(v);
      graph.outputs.push_back(foundry::GraphOutput{foundry::OutputKind::User, v, ""});
    }
    graph.append_node(std::move(n));
  }
  std::vector<NpyArray> run(const std::vector<NpyArray>& in) {
    foundry::ir::LoopProgram program = foundry::lower::lower_graph(graph);
    return foundry::ir::evaluate_program(program, in);
  }
};

using foundry::test::npy_array;

template <typename T>
std::vector<T> values_of(const NpyArray& a) {
  std::vector<T> v(static_cast<size_t>(a.numel()));
  std::memcpy(v.data(), a.data.data(), v.size() * sizeof(T));
  return v;
}

Arg float_list(std::vector<double> v) {
  Arg a;
  a.kind = Arg::Kind::FloatList;
  a.floats = std::move(v);
  return a;
}

}  // namespace

TEST_CASE("upsample_nearest2d.vec follows ATen's nearest_idx", "[lower][fast]") {
  SECTION("output_size: min(floor(dst * in/out), in - 1) in float") {
    OneNodeGraph g;
    foundry::Value* x = g.input(DType::Float32, {1, 1, 2, 3});
    g.node("upsample_nearest2d.vec", {{"input", Arg::of_tensor(x)}, {"output_size", Arg::of_ints({3, 5})}, {"scale_factors", Arg::none()}},
           {{DType::Float32, {1, 1, 3, 5}}});
    auto out = g.run({npy_array<float>(DType::Float32, {1, 1, 2, 3}, {0, 1, 2, 3, 4, 5})});
    // rows: floor(i * 2/3) = 0, 0, 1; columns: floor(j * 3/5) = 0, 0, 1, 1, 2.
    CHECK(values_of<float>(out[0]) == std::vector<float>{0, 0, 1, 1, 2, 0, 0, 1, 1, 2, 3, 3, 4, 4, 5});
  }
  SECTION("scale_factors: doubling maps dst to dst // 2") {
    OneNodeGraph g;
    foundry::Value* x = g.input(DType::Float32, {1, 2, 2});
    g.node("upsample_nearest2d.vec", {{"input", Arg::of_tensor(x)}, {"output_size", Arg::none()}, {"scale_factors", float_list({2.0, 1.5})}},
           {{DType::Float32, {1, 4, 3}}});
    auto out = g.run({npy_array<float>(DType::Float32, {1, 2, 2}, {1, 2, 3, 4})});
    // columns: scale 1/1.5 -> floor(j / 1.5) = 0, 0, 1.
    CHECK(values_of<float>(out[0]) == std::vector<float>{1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4});
  }
}

TEST_CASE("max_pool2d_with_indices: padding is skipped, NaN wins, -inf keeps the first valid index", "[lower][fast]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  SECTION("all -inf with padding") {
    OneNodeGraph g;
    foundry::Value* x = g.input(DType::Float32, {1, 1, 2, 2});
    g.node("max_pool2d_with_indices", {{"self", Arg::of_tensor(x)}, {"kernel_size", Arg::of_ints({2, 2})},
                                       {"stride", Arg::of_ints({1, 1})}, {"padding", Arg::of_ints({1, 1})}},
           {{DType::Float32, {1, 1, 3, 3}}, {DType::Int64, {1, 1, 3, 3}}});
    auto out = g.run({npy_array<float>(DType::Float32, {1, 1, 2, 2}, {-inf, -inf, -inf, -inf})});
    for (float v : values_of<float>(out[0])) CHECK(v == -inf);
    CHECK(values_of<int64_t>(out[1]) == std::vector<int64_t>{0, 0, 1, 0, 0, 1, 2, 2, 3});
  }
  SECTION("NaN: the last NaN in window order") {
    OneNodeGraph g;
    foundry::Value* x = g.input(DType::Float32, {1, 2, 2});
    g.node("max_pool2d_with_indices", {{"self", Arg::of_tensor(x)}, {"kernel_size", Arg::of_ints({2})}},
           {{DType::Float32, {1, 1, 1}}, {DType::Int64, {1, 1, 1}}});
    auto out = g.run({npy_array<float>(DType::Float32, {1, 2, 2}, {1, nan, nan, 2})});
    CHECK(std::isnan(values_of<float>(out[0])[0]));
    CHECK(values_of<int64_t>(out[1])[0] == 2);
  }
}

TEST_CASE("adaptive_max_pool2d: overlapping windows keep the first maximum and the last NaN", "[lower][fast]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // A 3x3 plane pooled to 2x2: windows [0, 2) and [1, 3) along each dim, overlapping in the middle.
  OneNodeGraph g;
  foundry::Value* x = g.input(DType::Float32, {1, 3, 3});
  g.node("adaptive_max_pool2d", {{"self", Arg::of_tensor(x)}, {"output_size", Arg::of_ints({2, 2})}},
         {{DType::Float32, {1, 2, 2}}, {DType::Int64, {1, 2, 2}}});
  auto out = g.run({npy_array<float>(DType::Float32, {1, 3, 3}, {1, 5, 2,
                                                                  5, 0, nan,
                                                                  3, nan, nan})});
  std::vector<float> v = values_of<float>(out[0]);
  CHECK(v[0] == 5);  // rows 0-1, cols 0-1: 5 at positions 1 and 3, the first wins
  for (int k = 1; k < 4; ++k) CHECK(std::isnan(v[k]));
  // rows 1-2, cols 1-2 hold NaN at 5, 7 and 8: the last wins.
  CHECK(values_of<int64_t>(out[1]) == std::vector<int64_t>{1, 5, 7, 8});
}

TEST_CASE("integer matrix products lower to exact reductions", "[lower][fast]") {
  OneNodeGraph g;
  foundry::Value* a = g.input(DType::Int64, {2, 3});
  foundry::Value* b = g.input(DType::Int64, {3, 2});
  g.node("mm", {{"self", Arg::of_tensor(a)}, {"mat2", Arg::of_tensor(b)}}, {{DType::Int64, {2, 2}}});
  const int64_t big = int64_t{1} << 40;
  auto out = g.run({npy_array<int64_t>(DType::Int64, {2, 3}, {1, 2, 3, 4, 5, 6}),
                    npy_array<int64_t>(DType::Int64, {3, 2}, {big, 1, 1, 2, -1, 3})});
  CHECK(values_of<int64_t>(out[0]) == std::vector<int64_t>{big + 2 - 3, 1 + 4 + 9, 4 * big + 5 - 6, 4 + 10 + 18});
}

TEST_CASE("factories: full keeps integers exact, arange matches ATen's double accumulation", "[lower][fast]") {
  SECTION("full int64") {
    OneNodeGraph g;
    const int64_t v = (int64_t{1} << 60) + 1;
    g.node("full", {{"size", Arg::of_ints({2, 2})}, {"fill_value", Arg::of_int(v)}}, {{DType::Int64, {2, 2}}});
    auto out = g.run({});
    CHECK(values_of<int64_t>(out[0]) == std::vector<int64_t>(4, v));
  }
  SECTION("arange float with a fractional step") {
    OneNodeGraph g;
    g.node("arange.start_step", {{"start", Arg::of_float(-1.0)}, {"end", Arg::of_float(1.0)}, {"step", Arg::of_float(0.1)}},
           {{DType::Float32, {20}}});
    auto out = g.run({});
    std::vector<float> expect;
    for (int i = 0; i < 20; ++i) expect.push_back(static_cast<float>(-1.0 + 0.1 * i));
    CHECK(values_of<float>(out[0]) == expect);
  }
  SECTION("arange int64 with a negative step") {
    OneNodeGraph g;
    g.node("arange.start_step", {{"start", Arg::of_int(10)}, {"end", Arg::of_int(0)}, {"step", Arg::of_int(-3)}},
           {{DType::Int64, {4}}});
    auto out = g.run({});
    CHECK(values_of<int64_t>(out[0]) == std::vector<int64_t>{10, 7, 4, 1});
  }
}

// --- typed library calls: the fields each aten op's lowering fills -------------------------------

namespace {

using foundry::ir::Expr;

// The program's only library call (there must be exactly one).
const foundry::ir::LoopNode& only_extern(const foundry::ir::LoopProgram& program) {
  const foundry::ir::LoopNode* found = nullptr;
  for (const auto& node : program.nodes)
    if (node->kind == foundry::ir::NodeKind::Extern) {
      REQUIRE(found == nullptr);
      found = node.get();
    }
  REQUIRE(found != nullptr);
  return *found;
}

std::vector<Expr> exprs(std::vector<int64_t> v) { return {v.begin(), v.end()}; }

}  // namespace

TEST_CASE("typed library calls: mm and bmm lower to a Matmul of the op's two operands", "[lower][fast]") {
  for (bool batched : {false, true}) {
    INFO((batched ? "bmm" : "mm"));
    std::vector<int64_t> a_shape = {2, 3}, b_shape = {3, 4}, out_shape = {2, 4};
    if (batched)
      for (auto* shape : {&a_shape, &b_shape, &out_shape}) shape->insert(shape->begin(), 5);
    OneNodeGraph g;
    foundry::Value* a = g.input(DType::Float32, a_shape);
    foundry::Value* b = g.input(DType::Float32, b_shape);
    g.node(batched ? "bmm" : "mm", {{"self", Arg::of_tensor(a)}, {"mat2", Arg::of_tensor(b)}},
           {{DType::Float32, out_shape}});
    foundry::ir::LoopProgram program = foundry::lower::lower_graph(g.graph);
    const foundry::ir::LoopNode& node = only_extern(program);
    const auto* call = std::get_if<foundry::ir::Matmul>(&node.call.op);
    REQUIRE(call != nullptr);
    CHECK(call->batched == batched);
    CHECK_FALSE(call->bias.has_value());
    CHECK(call->alpha == 1.0);
    CHECK(call->a.buffer == program.inputs[0]);
    CHECK(call->b.buffer == program.inputs[1]);
    CHECK(call->a.sizes == exprs(a_shape));
    CHECK(call->b.sizes == exprs(b_shape));
    CHECK(node.output->sizes == exprs(out_shape));
    CHECK(node.call.activation == foundry::ir::Activation::None);
    CHECK(foundry::ir::extern_name(node.call) == (batched ? "bmm" : "mm"));
  }
}

TEST_CASE("typed library calls: addmm keeps alpha, beta and the broadcast bias, and computes beta*bias + alpha*a@b",
          "[lower][fast]") {
  OneNodeGraph g;
  foundry::Value* bias = g.input(DType::Float32, {3});
  foundry::Value* m1 = g.input(DType::Float32, {2, 2});
  foundry::Value* m2 = g.input(DType::Float32, {2, 3});
  g.node("addmm",
         {{"self", Arg::of_tensor(bias)}, {"mat1", Arg::of_tensor(m1)}, {"mat2", Arg::of_tensor(m2)},
          {"beta", Arg::of_float(0.5)}, {"alpha", Arg::of_float(2.0)}},
         {{DType::Float32, {2, 3}}});
  foundry::ir::LoopProgram program = foundry::lower::lower_graph(g.graph);
  const foundry::ir::LoopNode& node = only_extern(program);
  const auto* call = std::get_if<foundry::ir::Matmul>(&node.call.op);
  REQUIRE(call != nullptr);
  CHECK_FALSE(call->batched);
  REQUIRE(call->bias.has_value());
  CHECK(call->bias->buffer == program.inputs[0]);
  CHECK(call->bias->sizes == exprs({2, 3}));  // broadcast over the rows: stride 0
  CHECK(call->bias->strides == exprs({0, 1}));
  CHECK(call->a.buffer == program.inputs[1]);
  CHECK(call->b.buffer == program.inputs[2]);
  CHECK(call->alpha == 2.0);
  CHECK(call->beta == 0.5);
  CHECK(foundry::ir::extern_name(node.call) == "addmm");
  // The evaluator on those fields, against the product worked out here.
  const std::vector<float> b = {1, 2, 4}, x = {1, 2, 3, 4}, w = {1, 0, -1, 2, 1, 0.5f};
  auto out = values_of<float>(foundry::ir::evaluate_program(
      program, {npy_array<float>(DType::Float32, {3}, b), npy_array<float>(DType::Float32, {2, 2}, x),
                npy_array<float>(DType::Float32, {2, 3}, w)})[0]);
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(0.5f * b[j] + 2.0f * (x[i * 2] * w[j] + x[i * 2 + 1] * w[3 + j]));
  CHECK(out == want);
}

TEST_CASE("typed library calls: convolution keeps stride, padding, dilation, groups and the optional bias",
          "[lower][fast]") {
  for (bool with_bias : {true, false}) {
    INFO("bias " << with_bias);
    OneNodeGraph g;
    foundry::Value* x = g.input(DType::Float32, {1, 2, 5, 5});
    foundry::Value* w = g.input(DType::Float32, {4, 1, 3, 3});
    foundry::Value* bias = with_bias ? g.input(DType::Float32, {4}) : nullptr;
    // H: (5 + 2*1 - 3) / 2 + 1 = 3; W: (5 - (2*(3-1) + 1)) / 1 + 1 = 1.
    g.node("convolution",
           {{"input", Arg::of_tensor(x)}, {"weight", Arg::of_tensor(w)}, {"bias", bias ? Arg::of_tensor(bias) : Arg::none()},
            {"stride", Arg::of_ints({2, 1})}, {"padding", Arg::of_ints({1, 0})}, {"dilation", Arg::of_ints({1, 2})},
            {"transposed", Arg::of_bool(false)}, {"output_padding", Arg::of_ints({0, 0})}, {"groups", Arg::of_int(2)}},
           {{DType::Float32, {1, 4, 3, 1}}});
    foundry::ir::LoopProgram program = foundry::lower::lower_graph(g.graph);
    const foundry::ir::LoopNode& node = only_extern(program);
    const auto* call = std::get_if<foundry::ir::Convolution>(&node.call.op);
    REQUIRE(call != nullptr);
    CHECK(call->input.buffer == program.inputs[0]);
    CHECK(call->input.sizes == exprs({1, 2, 5, 5}));
    CHECK(call->weight.buffer == program.inputs[1]);
    CHECK(call->weight.sizes == exprs({4, 1, 3, 3}));
    CHECK(call->bias.has_value() == with_bias);
    if (with_bias) CHECK(call->bias->buffer == program.inputs[2]);
    CHECK(call->stride == std::vector<int64_t>{2, 1});
    CHECK(call->padding == std::vector<int64_t>{1, 0});
    CHECK(call->dilation == std::vector<int64_t>{1, 2});
    CHECK(call->groups == 2);
    CHECK(foundry::ir::extern_name(node.call) == "convolution");
  }
}

TEST_CASE("a bmm of a permuted input and a weight expanded over the batch is one product of the folded rows, "
          "reading the weight in place, and computes the products",
          "[lower][fast]") {
  // ATen's matmul of a linear layer on a permuted sequence: bmm(permute(x), expand(w^T)).
  using namespace foundry::test;
  using foundry::Value;
  Builder b;
  Value* x = b.input("x", {3, 2, 4});
  std::vector<float> w_data;
  for (int i = 0; i < 5 * 4; ++i) w_data.push_back(0.125f * static_cast<float>((i * 7) % 13) - 0.75f);
  Value* w = b.weight("w", {5, 4}, w_data);
  Value* a = b.op("permute", {pos(x), pos(ints({1, 0, 2}))});  // [2, 3, 4], rows 8 floats apart
  Value* wt = b.op("permute", {pos(w), pos(ints({1, 0}))});    // [4, 5], strides [1, 4]
  Value* we = b.op("expand", {pos(wt), pos(ints({2, 4, 5}))});
  b.output(b.op("bmm", {pos(a), pos(we)}));
  foundry::ir::LoopProgram program = foundry::lower::lower_graph(b.g);

  CHECK(count_externs(program, "bmm") == 0);
  REQUIRE(count_externs(program, "mm") == 1);
  const foundry::ir::LoopNode& node = only_extern(program);
  const auto& call = std::get<foundry::ir::Matmul>(node.call.op);
  CHECK(call.a.sizes == exprs({6, 4}));
  CHECK(call.b.buffer->kind == foundry::ir::BufferKind::Constant);  // the weight itself, not a copy
  CHECK(call.b.strides == exprs({1, 4}));

  foundry::NpyArray xs;
  xs.shape = {3, 2, 4};
  xs.data.resize(24 * 4);
  for (int i = 0; i < 24; ++i) xs.as<float>()[i] = 0.1f * static_cast<float>(i % 9) - 0.4f;
  std::vector<foundry::NpyArray> out = foundry::ir::evaluate_program(program, {xs});
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].shape == std::vector<int64_t>{2, 3, 5});
  for (int bi = 0; bi < 2; ++bi)
    for (int m = 0; m < 3; ++m)
      for (int n = 0; n < 5; ++n) {
        double sum = 0;  // out[b, m, n] = sum_k x[m, b, k] * w[n, k]
        for (int k = 0; k < 4; ++k) sum += double(xs.as<float>()[m * 8 + bi * 4 + k]) * double(w_data[n * 4 + k]);
        CHECK(out[0].as<float>()[(bi * 3 + m) * 5 + n] == Approx(sum).margin(1e-6));
      }
}

TEST_CASE("a bmm realizes an operand it cannot read in place once, whichever form the call takes", "[lower][fast]") {
  using namespace foundry::test;
  using foundry::Value;
  enum Rhs { Broadcast, Batched, Reshaped };
  for (Rhs rhs : {Broadcast, Batched, Reshaped}) {
    INFO("rhs " << rhs);
    Builder b;
    Value* x = b.input("x", {2, 3, 4});
    Value* w = b.input("w", rhs == Broadcast ? std::vector<int64_t>{4, 5} : std::vector<int64_t>{2, 4, 5});
    Value* m = nullptr;
    if (rhs == Broadcast) m = b.op("expand", {pos(b.op("relu", {pos(w)})), pos(ints({2, 4, 5}))});
    if (rhs == Batched) m = b.op("relu", {pos(w)});
    // A reshape of a transposed view: no strides describe it, so it is realized.
    if (rhs == Reshaped) m = b.op("view", {pos(b.op("permute", {pos(w), pos(ints({0, 2, 1}))})), pos(ints({2, 4, 5}))});
    b.output(b.op("bmm", {pos(x), pos(m)}));
    foundry::ir::LoopProgram program = foundry::lower::lower_graph(b.g);
    int kernels = 0;
    for (const auto& node : program.nodes) kernels += node->kind != foundry::ir::NodeKind::Extern;
    CHECK(kernels == 1);  // the relu or the reshape, read by the one library call; no copy of its output
    CHECK(count_externs(program, rhs == Broadcast ? "mm" : "bmm") == 1);
  }
}
