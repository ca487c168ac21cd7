// sched/channels_last.h and sched/storage_order.h: activations between convolutions, and the
// pointwise kernels and reductions between them, stored channels last; pointwise nodes loop in
// that order. The model computes what PyTorch's semantics give, on oneDNN, on the portable loops
// and in the reference evaluator.
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
#include "foundry/sched/storage_order.h"
#include "graph_builder.h"
#include "support.h"

namespace foundry::test {
namespace {

constexpr int64_t C = 8, H = 10, W = 12;

Value* conv(Builder& b, Value* in, Value* w, std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> pad = {1, 1},
            std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1, Value* bias = nullptr) {
  return b.op("convolution", {pos(in), pos(w), bias ? pos(bias) : pos(Arg::none()), pos(ints(std::move(stride))),
                              pos(ints(std::move(pad))), pos(ints(std::move(dilation))), pos(Arg::of_bool(false)),
                              pos(ints({0, 0})), pos(Arg::of_int(groups))});
}
Value* relu(Builder& b, Value* v) { return b.op("relu", {pos(v)}); }

// Convolutions over x [1, C, H, W], with what stands between them:
// - `a` (relu) is read by `b` (stride 2, two groups) and `c` (dilation 2), `b` by `d`;
// - `e` is read by a depthwise convolution, `f` (relu) by a 1x1 convolution;
// - `g` by an addition to x: x is NCHW, so g stays NCHW;
// - `h` by a residual addition and relu, then a 2x2 max pool, then a convolution;
// - `m` by a squeeze-excitation: its mean over the pixels, and m times the sigmoid of that mean;
// - `n` by a layer norm over its channels through permutations (ConvNeXt's LayerNorm2d);
// - `p` by a relu through a flattening and a transposition to [1, H*W, C], then a product over
//   its channels (PVT's and SegFormer's token MLPs): p goes channels last, and the relu, whose
//   buffer is in token order, stays a kernel.
// And a depthwise convolution of the input y, NCHW, with rows of 16: on foundryc's depthwise loops.
Builder convolutions() {
  Builder b;
  Value* x = b.input("x", {1, C, H, W});
  Value* y = b.input("y", {1, C, 4, 16});
  b.output(conv(b, y, b.weight("wy", {C, 1, 3, 3}), {1, 1}, {1, 1}, {1, 1}, C));
  Value* a = relu(b, conv(b, x, b.weight("wa", {2 * C, C, 3, 3}), {1, 1}, {1, 1}, {1, 1}, 1, b.weight("ba", {2 * C})));
  Value* bv = conv(b, a, b.weight("wb", {2 * C, C, 3, 3}), {2, 2}, {1, 1}, {1, 1}, 2);
  b.output(conv(b, a, b.weight("wc", {C, 2 * C, 3, 3}), {1, 1}, {2, 2}, {2, 2}));
  b.output(conv(b, bv, b.weight("wd", {C, 2 * C, 3, 3}), {1, 1}, {1, 1}, {1, 1}, 1, b.weight("bd", {C})));
  Value* e = conv(b, x, b.weight("we", {C, C, 3, 3}));
  b.output(conv(b, e, b.weight("wdw", {C, 1, 3, 3}), {1, 1}, {1, 1}, {1, 1}, C));
  Value* f = relu(b, conv(b, x, b.weight("wf", {C, C, 3, 3})));
  b.output(conv(b, f, b.weight("w1x1", {2 * C, C, 1, 1}), {1, 1}, {0, 0}));
  Value* g = conv(b, x, b.weight("wg", {C, C, 3, 3}));
  b.output(b.op("add.Tensor", {pos(g), pos(x)}));
  Value* h = conv(b, x, b.weight("wh", {C, C, 3, 3}));
  Value* sum = relu(b, b.op("add.Tensor", {pos(h), pos(e)}));
  Value* pooled = b.op("max_pool2d_with_indices", {pos(sum), pos(ints({2, 2})), pos(ints({2, 2}))});
  b.output(conv(b, pooled, b.weight("wp", {C, C, 3, 3})));
  Value* m = conv(b, x, b.weight("wm", {C, C, 3, 3}));
  Value* gate = b.op("sigmoid", {pos(b.op("mean.dim", {pos(m), pos(ints({2, 3})), pos(Arg::of_bool(true))}))});
  b.output(conv(b, b.op("mul.Tensor", {pos(m), pos(gate)}), b.weight("ws", {C, C, 3, 3})));
  Value* n = conv(b, x, b.weight("wn", {C, C, 3, 3}));
  Value* nhwc = b.op("permute", {pos(n), pos(ints({0, 2, 3, 1}))});
  Value* normed = b.op("native_layer_norm", {pos(nhwc), pos(ints({C})), pos(b.weight("ln_w", {C})),
                                             pos(b.weight("ln_b", {C})), pos(Arg::of_float(1e-5))});
  b.output(conv(b, b.op("permute", {pos(normed), pos(ints({0, 3, 1, 2}))}), b.weight("wl", {C, C, 3, 3})));
  Value* p = conv(b, x, b.weight("wt", {C, C, 3, 3}));
  Value* tokens = b.op("permute", {pos(b.op("view", {pos(p), pos(ints({1, C, H * W}))})), pos(ints({0, 2, 1}))});
  Value* act = relu(b, tokens);
  b.output(b.op("mm", {pos(b.op("view", {pos(act), pos(ints({H * W, C}))})), pos(b.weight("wt2", {C, 2 * C}))}));
  return b;
}

// The program as foundryc schedules it for the CPU: layouts chosen, activations folded, pointwise
// loops in storage order.
ir::LoopProgram scheduled_program(const Graph& g, int* channels_last, int* reordered) {
  ir::LoopProgram program = lower::lower_graph(g);
  *channels_last = sched::keep_channels_last(program);
  sched::fold_activations_into_externs(program);
  *reordered = sched::loop_in_storage_order(program);
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
  int changed = 0, reordered = 0;
  ir::LoopProgram program = scheduled_program(b.g, &changed, &reordered);
  // a's convolution and relu, b, e, f's convolution and relu, h, its sum with e and the relu of
  // that, the pool, m, m times its gate, n, p. Not g, nor the outputs.
  CHECK(changed == 14);
  // The residual sum, its relu, the pool and the gating (a's and f's relus are folded).
  CHECK(reordered == 4);
  int conv_inputs = 0;
  for (const auto& node : program.nodes) {
    if (const auto* conv = std::get_if<ir::Convolution>(&node->call.op))
      conv_inputs += conv->input.strides[1].is_const(1) && conv->input.buffer->kind == ir::BufferKind::Computed;
    // A pointwise node writing channels last loops over [N, H, W, C].
    const ir::Buffer& out = *node->output;
    if (node->kind == ir::NodeKind::Pointwise && out.strides != ir::contiguous_strides(out.sizes)) {
      CHECK(out.strides[1].is_const(1));
      CHECK(node->ranges.back() == out.sizes[1]);
    }
  }
  // b and c read a, d reads b; the depthwise, 1x1, pool's, gate's and layer norm's convolutions.
  CHECK(conv_inputs == 8);
  for (const ir::Buffer* out : program.outputs) CHECK(out->strides == ir::contiguous_strides(out->sizes));

  const std::vector<NpyArray> inputs = make_inputs(b.g);
  // The reference: the graph as lowered, unscheduled, all in order, in the evaluator.
  const std::vector<NpyArray> want = evaluate(b.g, inputs);
  check_close(ir::evaluate_program(program, inputs), want, "the evaluator on the channels-last program");

  TempDir tmp("foundry_channels_last_");
  compile_program(program, tmp / "model", tmp / "cache", true, "cl");
  const std::string externs = read_file(tmp / "model/externs.cpp");
  CHECK(count_occurrences(externs, "    spec.output_strides = ") == 8);  // a, b, e, f, h, m, n, p
  // y's depthwise convolution on foundryc's loops, e's on oneDNN.
  CHECK(count_occurrences(externs, "  foundry_rt::depthwise_conv2d(shape, ") == 1);
  for (const char* no_dnnl : {"0", "1"}) {
    ::setenv("FOUNDRY_NO_DNNL", no_dnnl, 1);
    const std::vector<NpyArray> got = LoadedModel(tmp / "model/model.so", "cl", tmp / "model").run(inputs);
    ::unsetenv("FOUNDRY_NO_DNNL");
    check_close(got, want, std::string("compiled, FOUNDRY_NO_DNNL=") + no_dnnl);
  }
}

}  // namespace foundry::test
