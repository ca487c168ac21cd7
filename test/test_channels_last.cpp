// sched/channels_last.h: an activation that one oneDNN convolution writes and only oneDNN
// convolutions read is stored channels last, and the model computes what PyTorch's semantics
// give, on oneDNN, on the portable loops and in the reference evaluator.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "foundry/ir/evaluate.h"
#include "foundry/ir/print.h"
#include "foundry/lower/lowering.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/sched/channels_last.h"
#include "foundry/sched/epilogue.h"
#include "graph_builder.h"
#include "support.h"

namespace foundry::test {
namespace {

constexpr int64_t C = 8, H = 10, W = 12;

// Six convolutions over x [1, C, H, W]:
// - `a` (relu) is read by `b` (stride 2, two groups) and `c` (dilation 2), `b` by `d`: a's and b's
//   outputs go channels last;
// - `e`'s output is read by a depthwise convolution, `f`'s (relu) by a 1x1 product on the operands
//   as stored, `g`'s by an addition: those stay as they are.
Builder convolutions() {
  Builder b;
  Value* x = b.input("x", {1, C, H, W});
  auto conv = [&](Value* in, Value* w, std::vector<int64_t> stride, std::vector<int64_t> pad,
                  std::vector<int64_t> dilation, int64_t groups, Value* bias = nullptr) {
    return b.op("convolution", {pos(in), pos(w), bias ? pos(bias) : pos(Arg::none()), pos(ints(std::move(stride))),
                                pos(ints(std::move(pad))), pos(ints(std::move(dilation))), pos(Arg::of_bool(false)),
                                pos(ints({0, 0})), pos(Arg::of_int(groups))});
  };
  auto relu = [&](Value* v) { return b.op("relu", {pos(v)}); };
  Value* a = relu(conv(x, b.weight("wa", {2 * C, C, 3, 3}), {1, 1}, {1, 1}, {1, 1}, 1, b.weight("ba", {2 * C})));
  Value* bv = conv(a, b.weight("wb", {2 * C, C, 3, 3}), {2, 2}, {1, 1}, {1, 1}, 2);
  b.output(conv(a, b.weight("wc", {C, 2 * C, 3, 3}), {1, 1}, {2, 2}, {2, 2}, 1));
  b.output(conv(bv, b.weight("wd", {C, 2 * C, 3, 3}), {1, 1}, {1, 1}, {1, 1}, 1, b.weight("bd", {C})));
  Value* e = conv(x, b.weight("we", {C, C, 3, 3}), {1, 1}, {1, 1}, {1, 1}, 1);
  b.output(conv(e, b.weight("wdw", {C, 1, 3, 3}), {1, 1}, {1, 1}, {1, 1}, C));
  Value* f = relu(conv(x, b.weight("wf", {C, C, 3, 3}), {1, 1}, {1, 1}, {1, 1}, 1));
  b.output(conv(f, b.weight("w1x1", {2 * C, C, 1, 1}), {1, 1}, {0, 0}, {1, 1}, 1));
  Value* g = conv(x, b.weight("wg", {C, C, 3, 3}), {1, 1}, {1, 1}, {1, 1}, 1);
  b.output(b.op("add.Tensor", {pos(g), pos(x)}));
  return b;
}

// The program as foundryc schedules it for the CPU: activations folded, then layouts chosen.
ir::LoopProgram scheduled_program(const Graph& g, int* channels_last) {
  ir::LoopProgram program = lower::lower_graph(g);
  sched::fold_activations_into_externs(program);
  *channels_last = sched::keep_channels_last(program);
  return program;
}

void check_close(const std::vector<NpyArray>& got, const std::vector<NpyArray>& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    REQUIRE(got[k].shape == want[k].shape);
    int64_t bad = 0, first_bad = -1;
    for (int64_t e = 0; e < want[k].numel(); ++e) {
      const double g = got[k].as<float>()[e], w = want[k].as<float>()[e];
      if (!(std::abs(g - w) <= 1e-4 + 1e-4 * std::abs(w)) && bad++ == 0) first_bad = e;
    }
    INFO("output " << k << ": " << bad << " elements differ, the first at " << first_bad);
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("channels last: activations between convolutions are stored as they run and match the reference",
          "[channels_last][compiled]") {
  Builder b = convolutions();
  int changed = 0;
  ir::LoopProgram program = scheduled_program(b.g, &changed);
  CHECK(changed == 2);
  int channels_last = 0, conv_inputs = 0;
  for (const auto& buffer : program.buffers) {
    const std::string line = ir::print_buffer(*buffer);
    if (line.find("strides [1920, 1, 192, 16]") != std::string::npos) ++channels_last;  // a: [1, 16, 10, 12]
    if (line.find("strides [480, 1, 96, 16]") != std::string::npos) ++channels_last;    // b: [1, 16, 5, 6]
  }
  CHECK(channels_last == 2);
  for (const auto& node : program.nodes)
    if (const auto* conv = std::get_if<ir::Convolution>(&node->call.op))
      conv_inputs += conv->input.strides[1].is_const(1) && conv->input.buffer->kind == ir::BufferKind::Computed;
  CHECK(conv_inputs == 3);  // b and c read a, d reads b

  const std::vector<NpyArray> inputs = make_inputs(b.g);
  // The reference: the graph as lowered, unscheduled, all in order, in the evaluator.
  const std::vector<NpyArray> want = evaluate(b.g, inputs);
  check_close(ir::evaluate_program(program, inputs), want, "the evaluator on the channels-last program");

  TempDir tmp("foundry_channels_last_");
  compile_program(program, tmp / "model", tmp / "cache", true, "cl");
  const std::string externs = read_file(tmp / "model/externs.cpp");
  CHECK(count_occurrences(externs, "    spec.output_strides = ") == 2);
  for (const char* no_dnnl : {"0", "1"}) {
    ::setenv("FOUNDRY_NO_DNNL", no_dnnl, 1);
    const std::vector<NpyArray> got = LoadedModel(tmp / "model/model.so", "cl", tmp / "model").run(inputs);
    ::unsetenv("FOUNDRY_NO_DNNL");
    check_close(got, want, std::string("compiled, FOUNDRY_NO_DNNL=") + no_dnnl);
  }
}

}  // namespace foundry::test
