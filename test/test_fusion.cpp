// The scheduler end to end: the seed graph becomes one kernel, layer norm and softmax fuse, and
// fused and unfused compiled models agree with the reference evaluator on fresh random inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "foundry/build/compile.h"
#include "foundry/codegen/wrapper.h"
#include "foundry/frontend/frontend.h"
#include "foundry/ir/evaluate.h"
#include "foundry/lower/lowering.h"
#include "foundry/passes/pipeline.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "foundry/runtime/foundry_externs.h"
#include "foundry/sched/epilogue.h"
#include "foundry/sched/schedule.h"
#include "graph_builder.h"
#include "support.h"
#include "sweep.h"

namespace fs = std::filesystem;

namespace foundry::test {
namespace {

nlohmann::json compile_manifest(const std::string& model, const std::string& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {model, "-o", out};
  args.insert(args.end(), extra.begin(), extra.end());
  ProcResult r = run_foundryc(args);
  INFO("foundryc " << model << ": " << r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(read_file(out + "/manifest.json"));
}

// Random inputs shaped like the corpus inputs (floats uniform in [-2, 2]).
std::vector<NpyArray> random_inputs(const std::string& model_dir, uint32_t seed) {
  std::vector<NpyArray> inputs = read_npy_sequence(model_dir + "/inputs");
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (auto& in : inputs) {
    if (in.dtype != DType::Float32) continue;
    for (int64_t e = 0; e < in.numel(); ++e) in.as<float>()[e] = dist(rng);
  }
  return inputs;
}

struct StepCounts {
  int kernels = 0, externs = 0;
};

StepCounts count_steps(const sched::Schedule& s) {
  StepCounts c;
  for (const auto& step : s.steps) ++(step.is_extern ? c.externs : c.kernels);
  return c;
}

// The graph scheduled as foundryc does, compiled and run on make_inputs(g), against the
// reference evaluator's result for the same inputs.
// Compiles `g`, checks its outputs against the graph evaluator's, and returns its kernels.cpp.
std::string check_compiled_against_evaluator(const Graph& g) {
  TempDir tmp("foundry_fusion_");
  const std::vector<NpyArray> inputs = make_inputs(g);
  ir::LoopProgram program = lower::lower_graph(g);
  sched::Schedule schedule = sched::schedule_program(program, {});
  const std::string dir = tmp / "model";
  fs::create_directories(dir);
  codegen::write_model_files(codegen::generate_model(program, schedule, "fusion_test"), dir);
  build::CompileOptions options;
  options.cache_dir = test_cache_dir();
  build::compile_model(dir, options);
  LoadedModel model(dir + "/model.so", "fusion_test", dir);
  std::vector<NpyArray> got = model.run(inputs);
  std::vector<NpyArray> want = evaluate(g, inputs);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    Comparison c = compare_arrays(got[i], want[i]);
    INFO("output " << i << ": " << c.message);
    CHECK(c.pass);
  }
  return read_file(dir + "/kernels.cpp");
}

}  // namespace

TEST_CASE("fusion: siblings sharing an input fuse across a library call neither depends on", "[fusion][fast]") {
  // exp(x) and sin(x) both read x, with a matrix product in between in program order: fusing in
  // program order alone stops at the library call; the scored rounds pair the two readers of x
  // (no dependency path through the product), so x is loaded once for both.
  Builder b;
  Value* x = b.input("x", {64, 32});
  Value* w = b.input("w", {32, 16});
  Value* e = b.op("exp", {pos(x)});
  Value* m = b.op("mm", {pos(x), pos(w)});
  Value* sn = b.op("sin", {pos(x)});
  for (Value* v : {e, m, sn}) b.output(v);
  ir::LoopProgram program = lower::lower_graph(b.g);
  StepCounts fused = count_steps(sched::schedule_program(program, {}));
  CHECK(fused.kernels == 1);
  CHECK(fused.externs == 1);
  sched::ScheduleOptions unfused;
  unfused.fusion = false;
  CHECK(count_steps(sched::schedule_program(program, unfused)).kernels == 2);

  check_compiled_against_evaluator(b.g);  // and the fused kernel computes the same values
}

// A concatenation read by the kernel of its consumer is written piece by piece along the channels
// (codegen/piece_split.h): each piece loads its own source alone, and the values match the graph
// evaluator's. Read by a ReLU and by a sum over the last dim (a kernel of nested loops), and, at
// 4 x 64 x 32 x 32, by threads that share the batch and channel loops collapsed: the pieces are
// then chosen inside the channel loop, which nothing may stand before.
TEST_CASE("fusion: a concatenation read by a fused consumer is written piece by piece", "[fusion][fast]") {
  auto concatenation = [](Builder& b, std::vector<int64_t> channels, int64_t batch, int64_t h, int64_t w) {
    std::vector<Value*> pieces;
    for (int64_t c : channels) pieces.push_back(b.input("x" + std::to_string(pieces.size()), {batch, c, h, w}));
    return b.op("cat", {pos(tensors(pieces)), pos(Arg::of_int(1))});
  };
  Builder small;
  Value* cat = concatenation(small, {2, 3, 1, 4}, 3, 5, 12);
  small.output(small.op("relu", {pos(cat)}));
  small.output(small.op("sum.dim_IntList", {pos(cat), pos(ints({3}))}));
  const std::string kernels = check_compiled_against_evaluator(small.g);
  INFO(kernels);
  // One kernel (the concatenation stored: both read it), no selection among the pieces left.
  CHECK(file_check(kernels, R"(
    CHECK: void cpp_fused_cat_relu_sum_0(
    CHECK-NOT: select(
    CHECK: for (int64_t i1 = 0; i1 < 10; ++i1) {
    CHECK-NEXT: if (i1 < 2) {
    CHECK-NOT: select(
    CHECK: acc0
    CHECK-NOT: select(
    CHECK: } else if (i1 < 5) {
    CHECK-NOT: select(
    CHECK: } else if (i1 < 6) {
    CHECK-NOT: select(
    CHECK: } else {
    CHECK-NOT: select(
    CHECK: }  // namespace fusion_test_kernels
  )") == "");
  Builder large;
  large.output(large.op("relu", {pos(concatenation(large, {16, 16, 16, 16}, 4, 32, 32))}));
  CHECK(file_check(check_compiled_against_evaluator(large.g), R"(
    CHECK: #pragma omp parallel for collapse(2)
    CHECK-NEXT: for (int64_t i0 = 0; i0 < 4; ++i0) {
    CHECK-NEXT: for (int64_t i1 = 0; i1 < 64; ++i1) {
    CHECK-NEXT: if (i1 < 16) {
    CHECK: } else if (i1 < 48) {
  )") == "");
  // SegFormer's decoder: two bilinear resamplings (positions read from memory: scalar loops)
  // concatenated. Each piece computes its own source alone, and the kernel is parallel: its
  // 32768 elements each read four of a resampled input, 131072 element operations (32768,
  // counting the concatenation's reads alone, left it without threads).
  Builder resampled;
  std::vector<Value*> ups;
  for (int64_t side : {8, 4}) {
    Value* x = resampled.input("x" + std::to_string(side), {1, 64, side, side});
    ups.push_back(resampled.op("upsample_bilinear2d.vec",
                               {pos(x), pos(ints({16, 16})), pos(Arg::of_bool(false)), pos(Arg::none())}));
  }
  resampled.output(resampled.op("cat", {pos(tensors(ups)), pos(Arg::of_int(1))}));
  const std::string scalar = check_compiled_against_evaluator(resampled.g);
  INFO(scalar);
  CHECK(file_check(scalar, R"(
    CHECK: #pragma omp parallel num_threads(foundry_rt::kernel_team(131072,
    CHECK: if (i0 < 64) {
    CHECK-NOT: in_ptr0[
    CHECK: in_ptr1[
    CHECK-NOT: in_ptr0[
    CHECK: } else {
    CHECK-NOT: in_ptr1[
    CHECK: in_ptr0[
    CHECK-NOT: in_ptr1[
    CHECK: }  // namespace fusion_test_kernels
  )") == "");
}

TEST_CASE("fusion: a one-load producer with two readers that cannot share a kernel is recomputed, not stored",
          "[fusion][fast]") {
  // e = exp(x) read by a row sum (loops [16], reducing [32]) and by a transposed copy (loops
  // [32, 16]): the two readers cannot be one kernel, and recomputing exp(x) in each reads x once
  // per reader, as loading a stored e would; so e is never stored.
  Builder b;
  Value* x = b.input("x", {16, 32});
  Value* e = b.op("exp", {pos(x)});
  Value* s = b.op("sum.dim_IntList", {pos(e), pos(ints({1}))});
  Value* t = b.op("permute_copy", {pos(e), pos(ints({1, 0}))});
  for (Value* v : {s, t}) b.output(v);
  ir::LoopProgram program = lower::lower_graph(b.g);
  sched::Schedule schedule = sched::schedule_program(program, {});
  const ir::LoopNode* exp_node = nullptr;
  for (const auto& n : program.nodes)
    if (std::count(n->origin_ops.begin(), n->origin_ops.end(), "exp")) exp_node = n.get();
  REQUIRE(exp_node != nullptr);
  CHECK(schedule.inlined.count(exp_node->output) == 1);
  CHECK(count_steps(schedule).kernels == 2);
  for (const auto& step : schedule.steps)
    for (const auto& m : step.kernel.members) CHECK(m.node != exp_node);  // no kernel stores e
  check_compiled_against_evaluator(b.g);

  // A producer with a longer body (two loads) stays stored for its two readers.
  Builder b2;
  Value* x2 = b2.input("x", {16, 32});
  Value* y2 = b2.input("y", {16, 32});
  Value* a2 = b2.op("add.Tensor", {pos(x2), pos(y2)});
  b2.output(b2.op("sum.dim_IntList", {pos(a2), pos(ints({1}))}));
  b2.output(b2.op("permute_copy", {pos(a2), pos(ints({1, 0}))}));
  ir::LoopProgram program2 = lower::lower_graph(b2.g);
  CHECK(sched::schedule_program(program2, {}).inlined.empty());
  check_compiled_against_evaluator(b2.g);
}

TEST_CASE("fusion: a reduction read through a node inlined into two kernels is stored", "[fusion][fast]") {
  // Batch norm's pattern: mean = sum / n is inlined both into the kernel of the sum (which also
  // writes the per-channel mean) and into the elementwise kernel (x - mean); the sum must then be
  // stored for the second kernel, not kept in the first one's registers.
  Builder b;
  Value* x = b.input("x", {5, 5, 5});
  Node* vm = b.node("var_mean.correction", {pos(x), pos(ints({0, 2})), named("correction", Arg::of_int(0)),
                                            named("keepdim", Arg::of_bool(true))});
  Value* rstd = b.op("rsqrt", {pos(b.op("add.Scalar", {pos(vm->outputs[0]), pos(Arg::of_float(0.5))}))});
  Value* centered = b.op("sub.Tensor", {pos(x), pos(vm->outputs[1])});
  b.output(b.op("mul.Tensor", {pos(centered), pos(rstd)}));
  b.output(b.op("view", {pos(vm->outputs[1]), pos(ints({5}))}));
  b.output(b.op("view", {pos(rstd), pos(ints({5}))}));
  check_compiled_against_evaluator(b.g);
}

TEST_CASE("fusion: a long chain of single-use nodes is cut into kernels of at most max_kernel_nodes", "[fusion][fast]") {
  // Inlined producers run nested inside their reader's body: without a cut, a 200-node chain
  // would be one expression 200 deep (10,000 deep overflowed the stack under ASan).
  Builder b;
  Value* v = b.input("x", {64});
  for (int i = 0; i < 200; ++i) v = b.op(i % 2 ? "neg" : "relu", {pos(v)});
  b.output(v);
  ir::LoopProgram program = lower::lower_graph(b.g);
  sched::ScheduleOptions options;
  sched::Schedule schedule = sched::schedule_program(program, options);
  size_t nodes = 0;
  for (const auto& step : schedule.steps) {
    CHECK(step.kernel.members.size() + step.kernel.inlined.size() <= options.max_kernel_nodes);
    nodes += step.kernel.members.size() + step.kernel.inlined.size();
  }
  CHECK(nodes == 200);
  CHECK(schedule.steps.size() >= 4);
  check_compiled_against_evaluator(b.g);
}

TEST_CASE("fusion: a pair whose fusion would make a cycle stays apart", "[fusion][fast]") {
  // a = relu(x); m = mm(a, w); c = m + x (consumes the product) and d = -a: a and d could
  // share a loop nest, and c too, but a -> mm -> c means a and c cannot be one kernel.
  Builder b;
  Value* x = b.input("x", {16, 16});
  Value* w = b.input("w", {16, 16});
  Value* a = b.op("relu", {pos(x)});
  Value* m = b.op("mm", {pos(a), pos(w)});
  Value* c = b.op("add.Tensor", {pos(m), pos(x)});
  Value* d = b.op("neg", {pos(a)});
  for (Value* v : {a, c, d}) b.output(v);
  ir::LoopProgram program = lower::lower_graph(b.g);
  sched::Schedule s = sched::schedule_program(program, {});
  // The order is still a dependency order: the product runs after the kernel writing a and
  // before the kernel reading its result.
  std::vector<int> kind;  // 0 kernel, 1 extern
  for (const auto& step : s.steps) kind.push_back(step.is_extern);
  CHECK(kind == std::vector<int>{0, 1, 0});
  check_compiled_against_evaluator(b.g);
}

TEST_CASE("fusion: relu after a matrix product or a convolution becomes a oneDNN post-op", "[fusion]") {
  TempDir tmp;
  for (const std::string name : {"mlp", "small_cnn"}) {
    const std::string dir = samples_dir() + "/" + name, out = tmp / name;
    nlohmann::json m = compile_manifest(dir + "/model.pt2", out);
    // No generated kernel computes a relu on its own any more: each went into a library call.
    for (const auto& k : m["kernels"]) {
      if (k["extern"]) continue;
      bool only_relu = true;
      for (const auto& n : k["aten_nodes"]) only_relu &= n.get<std::string>().find("relu") != std::string::npos;
      CHECK_FALSE(only_relu);
    }
    CHECK_THAT(read_file(out + "/externs.cpp"), Catch::Contains("foundry_rt::Activation::Relu"));
    // And the outputs are still PyTorch's.
    LoadedModel model(out);
    CHECK(compare_with_expected(model.run(read_npy_sequence(dir + "/inputs")), dir).empty());
  }
  // --no-fusion keeps the relu a kernel of its own (differential testing compares the two).
  nlohmann::json unfused = compile_manifest(samples_dir() + "/mlp/model.pt2", tmp / "unfused",
                                            {"--no-fusion"});
  CHECK(unfused["kernels"].size() == 3);
}

TEST_CASE("fusion: the reference evaluator applies a folded activation", "[fusion][fast]") {
  const std::string dir = samples_dir() + "/mlp";
  Graph g = load_model(dir + "/model.pt2");
  run_graph_passes(g);
  ir::LoopProgram program = lower::lower_graph(g);
  REQUIRE(sched::fold_activations_into_externs(program) == 1);
  CHECK(compare_with_expected(ir::evaluate_program(program, read_npy_sequence(dir + "/inputs")), dir).empty());
}

// samples/gelu_epilogues: GELU in both of PyTorch's forms, after an addmm whose [16, 64] output it
// reads as [2, 8, 64] and after a convolution; the unfused program, run by the reference evaluator
// with the activations applied by the calls, still gives PyTorch's outputs.
TEST_CASE("fusion: GELU is folded into the call before it, through a reshape, and the evaluator agrees with PyTorch",
          "[fusion][fast]") {
  const std::string dir = samples_dir() + "/gelu_epilogues";
  Graph g = load_model(dir + "/model.pt2");
  run_graph_passes(g);
  ir::LoopProgram program = lower::lower_graph(g);
  REQUIRE(sched::fold_activations_into_externs(program) == 2);
  std::vector<ir::Activation> folded;
  for (const auto& node : program.nodes)
    if (node->kind == ir::NodeKind::Extern && node->call.activation != ir::Activation::None) {
      folded.push_back(node->call.activation);
      CHECK(ir::static_numel(node->output->sizes) == ir::static_numel(node->ranges));
    }
  CHECK(folded == std::vector<ir::Activation>{ir::Activation::GeluTanh, ir::Activation::GeluErf});
  CHECK(compare_with_expected(ir::evaluate_program(program, read_npy_sequence(dir + "/inputs")), dir).empty());
}

TEST_CASE("fusion: the portable loops' activations follow PyTorch", "[fusion][fast]") {
  // What runs when oneDNN cannot build the call; values from PyTorch (relu keeps NaN).
  float relu[] = {-1.5f, 0.0f, 2.5f, std::nanf("")};
  foundry_rt::apply_activation(foundry_rt::Activation::Relu, relu, 4);
  CHECK(relu[0] == 0.0f);
  CHECK(relu[1] == 0.0f);
  CHECK(relu[2] == 2.5f);
  CHECK(std::isnan(relu[3]));
  float tanh_sigmoid[] = {0.5f, 0.0f};
  foundry_rt::apply_activation(foundry_rt::Activation::Tanh, tanh_sigmoid, 1);
  foundry_rt::apply_activation(foundry_rt::Activation::Sigmoid, tanh_sigmoid + 1, 1);
  CHECK(tanh_sigmoid[0] == Approx(0.46211715726f));
  CHECK(tanh_sigmoid[1] == 0.5f);
  // torch.nn.functional.gelu(torch.tensor([1.0, -0.5], dtype=torch.float64)), and with
  // approximate="tanh".
  float gelu[] = {1.0f, -0.5f}, gelu_tanh[] = {1.0f, -0.5f};
  foundry_rt::apply_activation(foundry_rt::Activation::GeluErf, gelu, 2);
  foundry_rt::apply_activation(foundry_rt::Activation::GeluTanh, gelu_tanh, 2);
  CHECK(gelu[0] == Approx(0.841344746068543).epsilon(1e-6));
  CHECK(gelu[1] == Approx(-0.15426876936299344).epsilon(1e-6));
  CHECK(gelu_tanh[0] == Approx(0.8411919906082768).epsilon(1e-6));
  CHECK(gelu_tanh[1] == Approx(-0.15428599017485606).epsilon(1e-6));
  // torch.nn.functional.relu6, hardswish and silu of [7.0, -1.0, 1.0, nan].
  float relu6[] = {7.0f, -1.0f, 1.0f, std::nanf("")}, hardswish[] = {7.0f, -1.0f, 1.0f}, silu[] = {7.0f, -1.0f, 1.0f};
  foundry_rt::apply_activation(foundry_rt::Activation::Relu6, relu6, 4);
  foundry_rt::apply_activation(foundry_rt::Activation::Hardswish, hardswish, 3);
  foundry_rt::apply_activation(foundry_rt::Activation::Silu, silu, 3);
  CHECK(relu6[0] == 6.0f);
  CHECK(relu6[1] == 0.0f);
  CHECK(relu6[2] == 1.0f);
  CHECK(std::isnan(relu6[3]));
  CHECK(hardswish[0] == 7.0f);
  CHECK(hardswish[1] == Approx(-0.3333333432674408).epsilon(1e-6));
  CHECK(hardswish[2] == Approx(0.6666666865348816).epsilon(1e-6));
  CHECK(silu[0] == Approx(6.993622779846191).epsilon(1e-6));
  CHECK(silu[1] == Approx(-0.2689414322376251).epsilon(1e-6));
  CHECK(silu[2] == Approx(0.7310585975646973).epsilon(1e-6));
}

// relu6 (hardtanh to [0, 6]), hardswish and SiLU, the last two in several nodes each as the
// decompositions write them, fold into the convolution before them, except where that call runs
// faster without: SiLU only into a depthwise convolution (foundry_depthwise.h), nothing into a 1x1
// convolution that oneDNN computes as a product on its operands. Compiled, against a direct
// computation in double.
TEST_CASE("fusion: relu6, hardswish and SiLU fold into the convolutions that run them fastest", "[fusion][fast]") {
  constexpr int64_t C = 4, H = 6, W = 20, O = 8;
  Builder b;
  Value* x = b.input("x", {1, C, H, W});
  const std::vector<float> dw_w = {0.5f, -1.25f, 2.0f, 1.5f}, dw_b = {0.25f, -0.5f, 1.0f, 0.0f};
  Value* dw = b.weight("dw", {C, 1, 1, 1}, dw_w);
  Value* dw_bias = b.weight("dw_bias", {C}, dw_b);
  Value* w1 = b.weight("w1", {O, C, 1, 1});
  Value* w3 = b.weight("w3", {O, C, 3, 3});
  auto conv = [&](Value* w, Value* bias, int64_t pad, int64_t groups) {
    return b.op("convolution", {pos(x), pos(w), bias ? pos(bias) : pos(Arg::none()), pos(ints({1, 1})),
                                pos(ints({pad, pad})), pos(ints({1, 1})), pos(Arg::of_bool(false)), pos(ints({0, 0})),
                                pos(Arg::of_int(groups))});
  };
  auto hardswish = [&](Value* v) {  // v * clamp(clamp(v + 3, min=0), max=6) / 6
    Value* lo = b.op("clamp", {pos(b.op("add.Tensor", {pos(v), pos(Arg::of_int(3))})), named("min", Arg::of_int(0))});
    Value* hi = b.op("clamp", {pos(lo), named("max", Arg::of_int(6))});
    return b.op("div.Tensor", {pos(b.op("mul.Tensor", {pos(v), pos(hi)})), pos(Arg::of_int(6))});
  };
  auto silu = [&](Value* v) { return b.op("mul.Tensor", {pos(v), pos(b.op("sigmoid", {pos(v)}))}); };
  b.output(b.op("hardtanh", {pos(conv(dw, dw_bias, 0, C)), pos(Arg::of_int(0)), pos(Arg::of_int(6))}));
  b.output(silu(conv(dw, dw_bias, 0, C)));
  b.output(hardswish(conv(w3, nullptr, 1, 1)));
  b.output(hardswish(conv(w1, nullptr, 0, 1)));  // a product on the operands
  b.output(silu(conv(w3, nullptr, 1, 1)));       // not depthwise

  ir::LoopProgram program = lower::lower_graph(b.g);
  CHECK(sched::fold_activations_into_externs(program) == 3);
  CHECK(program.nodes.size() == 5 + 5 + 2);  // the calls, and the unfolded hardswish's and SiLU's nodes
  std::vector<ir::Activation> folded;
  for (const auto& node : program.nodes)
    if (node->kind == ir::NodeKind::Extern) folded.push_back(node->call.activation);
  using A = ir::Activation;
  CHECK(folded == std::vector<A>{A::Relu6, A::Silu, A::Hardswish, A::None, A::None});

  TempDir tmp("foundry_fusion_");
  const std::string dir = tmp / "model";
  fs::create_directories(dir);
  codegen::write_model_files(codegen::generate_model(program, sched::schedule_program(program, {}), "acts"), dir);
  build::CompileOptions options;
  options.cache_dir = test_cache_dir();
  build::compile_model(dir, options);
  LoadedModel model(dir + "/model.so", "acts", dir);
  const std::vector<NpyArray> inputs = make_inputs(b.g);
  const std::vector<NpyArray> got = model.run(inputs);
  REQUIRE(got.size() == 5);

  const float* xs = inputs[0].as<float>();
  auto at = [&](int64_t c, int64_t h, int64_t w) {
    return h < 0 || h >= H || w < 0 || w >= W ? 0.0 : static_cast<double>(xs[(c * H + h) * W + w]);
  };
  auto weight = [](int64_t i) { return 0.25 * static_cast<double>(i % 11) - 1.0; };  // Builder::weight's pattern
  auto relu6 = [](double v) { return std::min(std::max(v, 0.0), 6.0); };
  auto silu_of = [](double v) { return v / (1 + std::exp(-v)); };
  auto hardswish_of = [&](double v) { return v * relu6(v + 3) / 6; };
  int mismatches = 0;
  auto expect = [&](int output, int64_t i, double want) {
    const double v = got[static_cast<size_t>(output)].as<float>()[i];
    if (!(std::abs(v - want) <= 1e-4 + 1e-4 * std::abs(want)) && ++mismatches <= 10)
      UNSCOPED_INFO("output " << output << " element " << i << ": " << v << ", want " << want);
  };
  for (int64_t h = 0; h < H; ++h)
    for (int64_t w = 0; w < W; ++w) {
      for (int64_t c = 0; c < C; ++c) {
        const double y = dw_w[c] * at(c, h, w) + dw_b[c];
        expect(0, (c * H + h) * W + w, relu6(y));
        expect(1, (c * H + h) * W + w, silu_of(y));
      }
      for (int64_t o = 0; o < O; ++o) {
        double y3 = 0, y1 = 0;
        for (int64_t c = 0; c < C; ++c) {
          y1 += weight(o * C + c) * at(c, h, w);
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) y3 += weight(((o * C + c) * 3 + kh) * 3 + kw) * at(c, h + kh - 1, w + kw - 1);
        }
        expect(2, (o * H + h) * W + w, hardswish_of(y3));
        expect(3, (o * H + h) * W + w, hardswish_of(y1));
        expect(4, (o * H + h) * W + w, silu_of(y3));
      }
    }
  CHECK(mismatches == 0);
}

TEST_CASE("fusion: relu(x + y) * 2 is one kernel with two loads and one store", "[fusion][fast]") {
  TempDir tmp;
  std::string model = samples_dir() + "/pointwise/model.pt2";
  nlohmann::json m = compile_manifest(model, tmp / "out", {"--dump-ir"});
  REQUIRE(m["kernels"].size() == 1);
  CHECK(m["kernels"][0]["name"] == "cpp_fused_add_mul_relu_0");
  CHECK(m["bytes_moved"] == 3 * 1024 * 4);
  std::string kernels = read_file(tmp / "out/kernels.cpp");
  // One vector loop (1024 is a multiple of the lanes: no scalar tail) that loads each input and
  // stores the output once; the names also appear once each in the parameter list.
  CHECK(count_occurrences(kernels, "for (") == 1);
  CHECK(count_occurrences(kernels, "foundry_vec::load(in_ptr0 + i0)") == 1);
  CHECK(count_occurrences(kernels, "foundry_vec::load(in_ptr1 + i0)") == 1);
  CHECK(count_occurrences(kernels, "foundry_vec::store(out_ptr0 + i0, ") == 1);
  CHECK(count_occurrences(kernels, "in_ptr") == 4);
  CHECK(count_occurrences(kernels, "out_ptr") == 2);

  // The scalar form (--no-simd) is one loop too.
  compile_manifest(model, tmp / "scalar", {"--no-simd"});
  kernels = read_file(tmp / "scalar/kernels.cpp");
  CHECK(count_occurrences(kernels, "for (") == 1);
  CHECK(count_occurrences(kernels, "= in_ptr") == 2);
  CHECK(count_occurrences(kernels, "out_ptr0[") == 1);
}

// torchvision's DenseNet: a transition's average pooling (a sum, then a division inlined into every
// reader) feeds its kernel's batch norm and the next block's concatenations, which inline the
// division and so read the sum in later kernels: the sum must be stored, not kept in registers.
TEST_CASE("fusion: a result read again through an inlined node in a later kernel is stored (DenseNet)",
          "[fusion]") {
  TempDir tmp("foundry_fusion_");
  const std::string dir = samples_dir() + "/dense_cnn";
  for (const std::string archive : {"model.pt2", "model.raw.pt2"}) {
    INFO(archive);
    const std::string out = tmp / archive;
    ProcResult c = run_foundryc({dir + "/" + archive, "-o", out, "--dump-ir"});
    INFO(c.err);
    REQUIRE(c.exit_code == 0);
    ProcResult run = run_process({foundry_run_exe(), out, "--inputs", dir + "/inputs", "--expected", dir + "/expected"});
    INFO(run.out << run.err);
    CHECK(run.exit_code == 0);
    // No buffer one kernel keeps in registers is read by another step.
    std::istringstream dump(read_file(out + "/debug/ir_post_fusion.txt"));
    std::vector<std::pair<std::string, std::string>> kept_and_reads;  // per step: its kept buffers, its reads
    for (std::string line; std::getline(dump, line);) {
      if (line.rfind("kernel ", 0) == 0 || line.rfind("extern ", 0) == 0) kept_and_reads.emplace_back();
      if (kept_and_reads.empty()) continue;
      if (line.rfind("  kept in registers: ", 0) == 0) kept_and_reads.back().first = line.substr(21);
      if (line.rfind("  reads: ", 0) == 0) kept_and_reads.back().second = line.substr(9);
    }
    size_t kept = 0;
    for (size_t i = 0; i < kept_and_reads.size(); ++i) {
      std::istringstream names(kept_and_reads[i].first);
      for (std::string name; std::getline(names >> std::ws, name, ',');) {
        if (name == "-") continue;
        ++kept;
        for (size_t j = 0; j < kept_and_reads.size(); ++j)
          if (j != i) CHECK_THAT(kept_and_reads[j].second, !Catch::Contains(name + "["));
      }
    }
    CHECK(kept > 0);
  }
}

TEST_CASE("fusion: golden ir_post_fusion.txt and ir_pre_fusion.txt", "[fusion][fast]") {
  const bool update = std::getenv("FOUNDRY_UPDATE_GOLDEN") && std::string(std::getenv("FOUNDRY_UPDATE_GOLDEN")) == "1";
  TempDir tmp;
  struct Golden {
    std::string model, dump, golden;
  };
  for (const Golden& g : {Golden{"pointwise", "ir_post_fusion.txt", "pointwise.ir_post_fusion.txt"},
                          Golden{"pointwise", "ir_pre_fusion.txt", "pointwise.ir_pre_fusion.txt"},
                          Golden{"norm_softmax", "ir_pre_fusion.txt", "norm_softmax.ir_pre_fusion.txt"},
                          Golden{"norm_softmax", "ir_post_fusion.txt", "norm_softmax.ir_post_fusion.txt"},
                          // Dynamic batch: loop bounds, buffer sizes and arena offsets in s0.
                          Golden{"mlp_dynamic", "ir_pre_fusion.txt", "mlp_dynamic.ir_pre_fusion.txt"},
                          Golden{"mlp_dynamic", "ir_post_fusion.txt", "mlp_dynamic.ir_post_fusion.txt"}}) {
    std::string out = tmp / (g.model + "_out");
    ProcResult r = run_foundryc({samples_dir() + "/" + g.model + "/model.pt2", "-o", out, "--dump-ir",
                                 "--stop-after=schedule"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::string text = read_file(out + "/debug/" + g.dump);
    std::string path = test_source_dir() + "/golden/" + g.golden;
    if (update) write_file(path, text);
    INFO("regenerate with FOUNDRY_UPDATE_GOLDEN=1 after checking the difference by hand: " << path);
    CHECK(text == read_file(path));
  }
}

TEST_CASE("fusion: norm_softmax is two kernels and a matrix product, layer norm one kernel", "[fusion][fast]") {
  TempDir tmp;
  nlohmann::json m = compile_manifest(samples_dir() + "/norm_softmax/model.pt2", tmp / "out");
  int generated = 0, externs = 0;
  bool layer_norm_alone = false;
  for (const auto& k : m["kernels"]) {
    if (k["extern"]) {
      ++externs;
      continue;
    }
    ++generated;
    bool all_layer_norm = true;
    for (const auto& n : k["aten_nodes"]) all_layer_norm &= n.get<std::string>().find("native_layer_norm") != std::string::npos;
    layer_norm_alone |= all_layer_norm;
  }
  CHECK(generated <= 2);
  CHECK(externs == 1);
  CHECK(layer_norm_alone);
}

TEST_CASE("fusion: fused and unfused models agree with the reference evaluator on random inputs",
          "[fusion][corpus]") {
  if (!require_corpus()) return;
  TempDir tmp;
  std::printf("%-20s %8s %8s %14s %14s\n", "model", "kernels", "unfused", "bytes fused", "bytes unfused");
  for (const std::string name : {"pointwise", "mlp", "norm_softmax", "reductions", "encoder_layer", "small_cnn",
                                  "mobilenet_v3_small"}) {
    std::string dir = corpus_dir() + "/models/" + name;
    std::vector<NpyArray> inputs = random_inputs(dir, 1234);
    Graph graph = load_model(dir + "/model.pt2");
    run_graph_passes(graph);
    std::vector<NpyArray> reference = ir::evaluate_program(lower::lower_graph(graph), inputs);

    nlohmann::json fused = compile_manifest(dir + "/model.pt2", tmp / (name + "_fused"));
    nlohmann::json unfused = compile_manifest(dir + "/model.pt2", tmp / (name + "_unfused"),
                                              {"--no-fusion"});
    for (const std::string variant : {"_fused", "_unfused"}) {
      LoadedModel model(tmp / (name + variant));
      std::vector<NpyArray> outputs = model.run(inputs);
      REQUIRE(outputs.size() == reference.size());
      for (size_t k = 0; k < outputs.size(); ++k) {
        Comparison c = compare_arrays(outputs[k], reference[k]);
        INFO(name << variant << " output " << k << ": " << c.message);
        CHECK(c.pass);
      }
    }
    std::printf("%-20s %8zu %8zu %14lld %14lld\n", name.c_str(), fused["kernels"].size(), unfused["kernels"].size(),
                static_cast<long long>(fused["bytes_moved"]), static_cast<long long>(unfused["bytes_moved"]));
    CHECK(fused["bytes_moved"] <= unfused["bytes_moved"]);
  }
}

TEST_CASE("simd: a transposed read goes tile by tile, whole rows at a time", "[simd][fast]") {
  // relu(x.t()): the output's rows run along x's columns. The kernel reads kLanes rows of x along
  // the output's row index into a transposed tile instead of gathering one element per lane; 70
  // output columns leave a scalar tail.
  Builder b;
  Value* x = b.input("x", {70, 48});
  Value* t = b.op("permute", {pos(x), pos(ints({1, 0}))});
  b.output(b.op("relu", {pos(t)}));
  ir::LoopProgram program = lower::lower_graph(b.g);
  sched::Schedule schedule = sched::schedule_program(program, {});
  codegen::GeneratedModel generated = codegen::generate_model(program, schedule, "tiles");
  REQUIRE(generated.kernels.size() == 1);
  const std::string& k = generated.kernels[0].definition;
  INFO(k);
  CHECK(k.find("foundry_vec::transpose_tile(in_ptr0 + ((48 * i1) + i0_tile), 48, tile0);") != std::string::npos);
  CHECK(k.find("foundry_vec::gather") == std::string::npos);

  check_compiled_against_evaluator(b.g);
}

}  // namespace foundry::test
