// The decomposition of training-IR ops (programs saved without run_decompositions()): single
// decompositions on hand-built graphs, checked against direct computations, and every corpus
// model.raw.pt2 through the reference evaluator and compiled, against the same references as its
// model.pt2.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "foundry/frontend/frontend.h"
#include "foundry/ir/evaluate.h"
#include "foundry/lower/lowering.h"
#include "foundry/ops/einsum.h"
#include "foundry/ops/registry.h"
#include "foundry/passes/decompose.h"
#include "foundry/passes/pipeline.h"
#include "foundry/passes/rewrite.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "foundry/support/error.h"
#include "graph_builder.h"
#include "support.h"
#include "sweep.h"

namespace fs = std::filesystem;

namespace foundry::test {
namespace {

// ---- hand-built graphs ----


// Every node is an op the lowering knows.
void require_lowerable(const Graph& g) {
  for (const auto& n : g.nodes) {
    INFO("node " << n->name << " (" << n->target << ")");
    CHECK(lower::find_lowering(n->target) != nullptr);
  }
}

std::vector<float> float_values(const NpyArray& a) {
  REQUIRE(a.dtype == DType::Float32);
  return std::vector<float>(a.as<float>(), a.as<float>() + a.numel());
}

std::vector<float> weight_data(const Graph& g, const Value* w) {
  for (const GraphInput& in : g.inputs)
    if (in.value == w) {
      auto d = passes::read_constant(in);
      REQUIRE(d);
      return std::vector<float>(d->begin(), d->end());
    }
  FAIL("no such weight");
  return {};
}

void require_close(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    if (std::isinf(want[i]) || std::isnan(want[i]))
      CHECK((std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i]));
    else
      CHECK(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

}  // namespace

TEST_CASE("decompose: linear on a 3-d input becomes view, addmm, view", "[decompose][fast]") {
  Builder b;
  Value* x = b.input("x", {2, 3, 4});
  Value* w = b.weight("w", {5, 4});
  Value* bias = b.weight("b", {5});
  b.output(b.op("linear", {pos(x), pos(w), pos(bias)}));
  auto inputs = make_inputs(b.g);
  std::vector<float> xs = float_values(inputs[0]), ws = weight_data(b.g, w), bs = weight_data(b.g, bias);

  CHECK(passes::decompose_training_ops(b.g));
  verify_graph(b.g);
  CHECK(count_op(b.g, "linear") == 0);
  CHECK(count_op(b.g, "addmm") == 1);
  require_lowerable(b.g);
  auto out = evaluate(b.g, inputs);
  REQUIRE(out.size() == 1);
  CHECK(out[0].shape == std::vector<int64_t>{2, 3, 5});
  std::vector<double> want;
  for (int r = 0; r < 6; ++r)
    for (int o = 0; o < 5; ++o) {
      double s = bs[o];
      for (int k = 0; k < 4; ++k) s += static_cast<double>(xs[r * 4 + k]) * ws[o * 4 + k];
      want.push_back(s);
    }
  require_close(float_values(out[0]), want);
}

TEST_CASE("decompose: in-place ops become functional and later readers follow", "[decompose][fast]") {
  Builder b;
  Value* x = b.input("x", {3, 4});
  Value* y = b.input("y", {3, 4});
  Value* a = b.op("mul.Tensor", {pos(x), pos(Arg::of_int(2))});
  b.node("relu_", {pos(a)});
  // Readers of `a` after an in-place op see the updated value: add_ reads relu(2x), and since
  // add_ and hardswish_ update `a` too, the graph output `a` is hardswish(relu(2x) + y).
  Node* add_ = b.node("add_.Tensor", {pos(a), pos(y)});
  Value* hs = b.node("hardswish_", {pos(add_->outputs[0])})->outputs[0];
  b.output(a);
  b.output(hs);
  auto inputs = make_inputs(b.g);
  std::vector<float> xs = float_values(inputs[0]), ys = float_values(inputs[1]);

  CHECK(passes::decompose_training_ops(b.g));
  verify_graph(b.g);
  for (const char* op : {"relu_", "add_.Tensor", "hardswish_", "hardswish"}) CHECK(count_op(b.g, op) == 0);
  CHECK(count_op(b.g, "relu") == 1);
  CHECK(count_op(b.g, "add.Tensor") >= 1);
  require_lowerable(b.g);
  auto out = evaluate(b.g, inputs);
  REQUIRE(out.size() == 2);
  std::vector<double> want_hs;
  for (size_t i = 0; i < xs.size(); ++i) {
    double v = std::max(0.0, 2.0 * xs[i]) + ys[i];
    want_hs.push_back(v * std::min(std::max(v + 3, 0.0), 6.0) / 6);
  }
  require_close(float_values(out[0]), want_hs);
  require_close(float_values(out[1]), want_hs);
}

TEST_CASE("decompose: scaled_dot_product_attention, plain, causal and masked", "[decompose][fast]") {
  const int64_t B = 2, H = 2, L = 3, S = 4, E = 4;
  for (int mode = 0; mode < 4; ++mode) {  // plain, causal (L == S), bool mask, float mask + scale
    INFO("mode " << mode);
    const int64_t s = mode == 1 ? L : S;
    Builder b;
    Value* q = b.input("q", {B, H, L, E});
    Value* k = b.input("k", {B, H, s, E});
    Value* v = b.input("v", {B, H, s, E});
    Value* mask = mode == 2 ? b.input("m", {L, s}, DType::Bool) : mode == 3 ? b.input("m", {1, H, L, s}) : nullptr;
    std::vector<RawArg> args = {pos(q), pos(k), pos(v)};
    if (mask) args.push_back(named("attn_mask", Arg::of_tensor(mask)));
    if (mode == 1) args.push_back(named("is_causal", Arg::of_bool(true)));
    if (mode == 3) args.push_back(named("scale", Arg::of_float(0.3)));
    b.output(b.op("scaled_dot_product_attention", args));
    auto inputs = make_inputs(b.g);
    if (mode == 2) {  // make one row fully masked: the safe softmax gives zeros there
      for (int64_t j = 0; j < s; ++j) inputs[3].data[static_cast<size_t>(1 * s + j)] = 0;
    }

    CHECK(passes::decompose_training_ops(b.g));
    verify_graph(b.g);
    CHECK(count_op(b.g, "scaled_dot_product_attention") == 0);
    require_lowerable(b.g);
    auto out = evaluate(b.g, inputs);
    REQUIRE(out.size() == 1);

    std::vector<float> qs = float_values(inputs[0]), ks = float_values(inputs[1]), vs = float_values(inputs[2]);
    const double scale = mode == 3 ? 0.3 : 1.0 / std::sqrt(static_cast<double>(E));
    std::vector<double> want;
    for (int64_t bh = 0; bh < B * H; ++bh) {
      const int64_t h = bh % H;
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> row(static_cast<size_t>(s));
        for (int64_t j = 0; j < s; ++j) {
          double d = 0;
          for (int64_t e = 0; e < E; ++e) d += static_cast<double>(qs[(bh * L + i) * E + e]) * ks[(bh * s + j) * E + e];
          d *= scale;
          if (mode == 1 && j > i) d = -std::numeric_limits<double>::infinity();
          if (mode == 2 && !inputs[3].data[static_cast<size_t>(i * s + j)]) d = -std::numeric_limits<double>::infinity();
          if (mode == 3) d += inputs[3].as<float>()[(h * L + i) * s + j];
          row[static_cast<size_t>(j)] = d;
        }
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (double d : row) mx = std::max(mx, d);
        for (double& d : row) sum += (d = std::isinf(mx) ? 0.0 : std::exp(d - mx));
        for (int64_t e = 0; e < E; ++e) {
          double o = 0;
          for (int64_t j = 0; j < s; ++j)
            o += (sum == 0 ? 0.0 : row[static_cast<size_t>(j)] / sum) * vs[(bh * s + j) * E + e];
          want.push_back(o);
        }
      }
    }
    require_close(float_values(out[0]), want, 1e-4);
  }
}

TEST_CASE("decompose: shape ops, activations and casts", "[decompose][fast]") {
  Builder b;
  Value* x = b.input("x", {2, 6, 2});
  Value* t = b.op("transpose.int", {pos(x), pos(Arg::of_int(0)), pos(Arg::of_int(-1))});     // [2, 6, 2]
  Node* parts = b.node("chunk", {pos(t), pos(Arg::of_int(3)), pos(Arg::of_int(1))});         // 3 x [2, 2, 2]
  Node* halves = b.node("split.Tensor", {pos(parts->outputs[2]), pos(Arg::of_int(1))});     // 2 x [1, 2, 2]
  Node* rows = b.node("unbind.int", {pos(halves->outputs[1]), pos(Arg::of_int(1))});        // 2 x [1, 2]
  Value* r = b.op("reshape", {pos(parts->outputs[0]), pos(Arg::of_ints({4, -1}))});          // [4, 2]
  Value* f = b.op("flatten.using_ints", {pos(r)});                                           // [8]
  Value* u = b.op("unflatten.int", {pos(f), pos(Arg::of_int(0)), pos(Arg::of_ints({2, 4}))}); // [2, 4]
  Value* sm = b.op("softmax.int", {pos(u), pos(Arg::of_int(-1))});
  Value* si = b.op("silu", {pos(u)});
  Value* hsig = b.op("hardsigmoid", {pos(u)});
  Value* r6 = b.op("relu6", {pos(u)});
  Value* c = b.op("contiguous", {pos(si)});
  Value* d = b.op("dropout", {pos(c), pos(Arg::of_float(0.5)), pos(Arg::of_bool(false))});
  Value* i64 = b.op("to.dtype", {pos(d), pos(Arg::of_dtype(DType::Int64))});
  Value* back = b.op("to.other", {pos(i64), pos(x)});
  Value* sq = b.op("squeeze.dim", {pos(rows->outputs[0]), pos(Arg::of_int(0))});            // [2]
  for (Value* o : {sm, hsig, r6, back, sq}) b.output(o);
  auto inputs = make_inputs(b.g);
  std::vector<float> xs = float_values(inputs[0]);

  CHECK(passes::decompose_training_ops(b.g));
  verify_graph(b.g);
  require_lowerable(b.g);
  const std::vector<std::string> decomposed = passes::decomposed_ops();
  for (const auto& n : b.g.nodes) {
    INFO(n->target);
    CHECK(std::find(decomposed.begin(), decomposed.end(), n->target) == decomposed.end());
  }
  auto out = evaluate(b.g, inputs);
  REQUIRE(out.size() == 5);

  // t[i][j][k] = x[k][j][i]; parts[0] = t[:, 0:2, :] read in C order as u [2, 4].
  auto tv = [&](int64_t i, int64_t j, int64_t k) { return static_cast<double>(xs[(k * 6 + j) * 2 + i]); };
  std::vector<double> uv;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 2; ++k) uv.push_back(tv(i, j, k));
  std::vector<double> want_sm, want_hsig, want_r6, want_back;
  for (int64_t row = 0; row < 2; ++row) {
    double mx = -1e30, sum = 0;
    for (int64_t j = 0; j < 4; ++j) mx = std::max(mx, uv[row * 4 + j]);
    for (int64_t j = 0; j < 4; ++j) sum += std::exp(uv[row * 4 + j] - mx);
    for (int64_t j = 0; j < 4; ++j) want_sm.push_back(std::exp(uv[row * 4 + j] - mx) / sum);
  }
  for (double v : uv) {
    want_hsig.push_back(std::min(std::max(v + 3, 0.0), 6.0) / 6);
    want_r6.push_back(std::min(std::max(v, 0.0), 6.0));
    want_back.push_back(std::trunc(static_cast<float>(v / (1 + std::exp(-v)))));
  }
  require_close(float_values(out[0]), want_sm);
  require_close(float_values(out[1]), want_hsig);
  require_close(float_values(out[2]), want_r6);
  require_close(float_values(out[3]), want_back);
  // parts[2] = t[:, 4:6, :]; halves[1] = t[1:2, 4:6, :]; rows[0] = t[1:2, 4, :], squeezed.
  require_close(float_values(out[4]), {tv(1, 4, 0), tv(1, 4, 1)});
}

TEST_CASE("decompose: conv2d, batch_norm, pooling and layer_norm match their core forms", "[decompose][fast]") {
  // The same network twice: once with the training-IR ops, once written by hand in core ATen.
  auto build = [](bool raw) {
    Builder b;
    Value* x = b.input("x", {1, 2, 6, 6});
    Value* w = b.weight("w", {4, 2, 3, 3});
    Value* bias = b.weight("b", {4});
    Value* g = b.weight("g", {4});
    Value* beta = b.weight("beta", {4});
    Value* mean = b.weight("mean", {4});
    Value* var = b.weight("var", {4});  // cos pattern + 0.5: positive enough with eps
    Value* lw = b.weight("lw", {3});
    Value* lb = b.weight("lb", {3});
    Value* conv, *bn, *pool, *gap, *ln;
    if (raw) {
      conv = b.op("conv2d", {pos(x), pos(w), pos(bias), pos(Arg::of_ints({1, 1})), pos(Arg::of_ints({1, 1}))});
      bn = b.op("batch_norm", {pos(conv), pos(g), pos(beta), pos(mean), pos(var), pos(Arg::of_bool(false)),
                               pos(Arg::of_float(0.1)), pos(Arg::of_float(1.5)), pos(Arg::of_bool(false))});
      pool = b.op("max_pool2d", {pos(bn), pos(Arg::of_ints({2, 2}))});
      gap = b.op("adaptive_avg_pool2d", {pos(pool), pos(Arg::of_ints({1, 1}))});
      ln = b.op("layer_norm", {pos(pool), pos(Arg::of_ints({3})), pos(lw), pos(lb)});
    } else {
      conv = b.op("convolution", {pos(x), pos(w), pos(bias), pos(Arg::of_ints({1, 1})), pos(Arg::of_ints({1, 1})),
                                  pos(Arg::of_ints({1, 1})), pos(Arg::of_bool(false)), pos(Arg::of_ints({0, 0})),
                                  pos(Arg::of_int(1))});
      bn = b.node("_native_batch_norm_legit_no_training",
                  {pos(conv), pos(g), pos(beta), pos(mean), pos(var), pos(Arg::of_float(0.1)), pos(Arg::of_float(1.5))})
               ->outputs[0];
      pool = b.node("max_pool2d_with_indices", {pos(bn), pos(Arg::of_ints({2, 2}))})->outputs[0];
      gap = b.op("_adaptive_avg_pool2d", {pos(pool), pos(Arg::of_ints({1, 1}))});
      ln = b.node("native_layer_norm", {pos(pool), pos(Arg::of_ints({3})), pos(lw), pos(lb), pos(Arg::of_float(1e-5))})
               ->outputs[0];
    }
    b.output(gap);
    b.output(ln);
    return b;
  };
  Builder raw = build(true), core = build(false);
  auto inputs = make_inputs(raw.g);
  CHECK(passes::decompose_training_ops(raw.g));
  verify_graph(raw.g);
  require_lowerable(raw.g);
  for (const char* op : {"conv2d", "batch_norm", "max_pool2d", "adaptive_avg_pool2d", "layer_norm"})
    CHECK(count_op(raw.g, op) == 0);
  CHECK_FALSE(passes::decompose_training_ops(core.g));
  auto got = evaluate(raw.g, inputs), want = evaluate(core.g, inputs);
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    Comparison c = compare_arrays(got[k], want[k], Tolerance{1e-5, 1e-5});
    INFO("output " << k << ": " << c.message);
    CHECK(c.pass);
  }
}

TEST_CASE("decompose: training batch norm gives batch statistics and updates the running ones", "[decompose][fast]") {
  Builder b;
  Value* x = b.input("x", {2, 3, 2});
  Value* w = b.weight("w", {3});
  Value* bias = b.weight("b", {3});
  Value* rm = b.weight("rm", {3}, {0.5f, -1.0f, 2.0f});
  Value* rv = b.weight("rv", {3}, {1.0f, 2.0f, 0.25f});
  const double momentum = 0.25, eps = 0.5;
  Node* bn = b.node("_native_batch_norm_legit_functional",
                    {pos(x), pos(w), pos(bias), pos(rm), pos(rv), pos(Arg::of_bool(true)), pos(Arg::of_float(momentum)),
                     pos(Arg::of_float(eps))});
  for (Value* o : bn->outputs) b.output(o);
  auto inputs = make_inputs(b.g);
  std::vector<float> xs = float_values(inputs[0]), ws = weight_data(b.g, w), bs = weight_data(b.g, bias);

  CHECK(passes::decompose_training_ops(b.g));
  verify_graph(b.g);
  require_lowerable(b.g);
  auto out = evaluate(b.g, inputs);
  REQUIRE(out.size() == 5);
  std::vector<double> want_y(12), mean(3), rstd(3), new_rm(3), new_rv(3);
  for (int c = 0; c < 3; ++c) {
    std::vector<double> v;
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 2; ++k) v.push_back(xs[(n * 3 + c) * 2 + k]);
    double m = (v[0] + v[1] + v[2] + v[3]) / 4, var = 0;
    for (double e : v) var += (e - m) * (e - m);
    mean[c] = m;
    rstd[c] = 1 / std::sqrt(var / 4 + eps);
    new_rm[c] = (1 - momentum) * std::vector<double>{0.5, -1.0, 2.0}[c] + momentum * m;
    new_rv[c] = (1 - momentum) * std::vector<double>{1.0, 2.0, 0.25}[c] + momentum * var / 3;  // unbiased
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 2; ++k)
        want_y[(n * 3 + c) * 2 + k] = (xs[(n * 3 + c) * 2 + k] - m) * rstd[c] * ws[c] + bs[c];
  }
  require_close(float_values(out[0]), want_y);
  require_close(float_values(out[1]), mean);
  require_close(float_values(out[2]), rstd);
  require_close(float_values(out[3]), new_rm);
  require_close(float_values(out[4]), new_rv);
}

TEST_CASE("decompose: what cannot be decomposed is an error naming the node", "[decompose][fast]") {
  {
    Builder b;  // resize to more elements than there are: they would be uninitialized
    Value* x = b.input("x", {2, 3});
    b.output(b.op("resize", {pos(x), pos(Arg::of_ints({3, 3}))}));
    try {
      passes::decompose_training_ops(b.g);
      FAIL("resize to more elements was accepted");
    } catch (const UserError& e) {
      CHECK(std::string(e.what()).find("aten.resize") != std::string::npos);
      CHECK(std::string(e.what()).find("uninitialized") != std::string::npos);
    }
  }
  {
    Builder b;
    Value* x = b.input("x", {2, 3});
    b.output(b.op("dropout", {pos(x), pos(Arg::of_float(0.5)), pos(Arg::of_bool(true))}));
    REQUIRE_THROWS_AS(passes::decompose_training_ops(b.g), UserError);
    try {
      passes::decompose_training_ops(b.g);
    } catch (const UserError& e) {
      CHECK(std::string(e.what()).find("aten.dropout") != std::string::npos);
      CHECK(std::string(e.what()).find("training mode") != std::string::npos);
    }
  }
  {
    Builder b;  // unused: left for dce, not an error
    Value* x = b.input("x", {2, 3});
    b.op("dropout", {pos(x), pos(Arg::of_float(0.5)), pos(Arg::of_bool(true))});
    b.output(b.op("relu", {pos(x)}));
    CHECK_FALSE(passes::decompose_training_ops(b.g));
    passes::run_graph_passes(b.g);
    CHECK(count_op(b.g, "dropout") == 0);
  }
  {
    Builder b;
    Value* x = b.input("x", {1, 2, 3});
    Value* w = b.weight("w", {2});
    Value* z = b.weight("z", {2});
    b.output(b.op("batch_norm", {pos(x), pos(w), pos(z), pos(z), pos(w), pos(Arg::of_bool(true)),
                                 pos(Arg::of_float(0.1)), pos(Arg::of_float(1e-5)), pos(Arg::of_bool(false))}));
    CHECK_THROWS_AS(passes::decompose_training_ops(b.g), UserError);
  }
  {
    Builder b;  // an in-place update of a user input becomes functional, recorded as its mutation output
    Value* x = b.input("x", {2, 3});
    b.output(b.op("relu_", {pos(x)}));
    REQUIRE_NOTHROW(passes::decompose_training_ops(b.g));
    REQUIRE(b.g.outputs.size() == 2);
    CHECK(b.g.outputs[1].kind == OutputKind::UserInputMutation);
    CHECK(b.g.outputs[1].value == b.g.outputs[0].value);  // relu(x), no longer x
    CHECK(b.g.outputs[1].value != x);
  }
  {
    Builder b;  // through a view other than slices and selects: refused
    Value* x = b.input("x", {2, 3});
    Value* v = b.op("view", {pos(x), pos(Arg::of_ints({6}))});
    b.output(b.op("relu_", {pos(v)}));
    CHECK_THROWS_WITH(passes::decompose_training_ops(b.g), Catch::Contains("through a view other than slices and selects"));
  }
  {
    Builder b;  // an update of a value whose view is read afterwards: the view would see it
    Value* x = b.input("x", {2, 3});
    Value* a = b.op("mul.Tensor", {pos(x), pos(Arg::of_int(2))});
    Value* v = b.op("view", {pos(a), pos(Arg::of_ints({6}))});
    b.node("relu_", {pos(a)});
    b.output(v);
    CHECK_THROWS_AS(passes::decompose_training_ops(b.g), UserError);
  }
  {
    Builder b;  // the same through a view of an input
    Value* x = b.input("x", {2, 3});
    b.output(b.op("relu_", {pos(b.op("view", {pos(x), pos(Arg::of_ints({6}))}))}));
    CHECK_THROWS_AS(passes::decompose_training_ops(b.g), UserError);
  }
  {
    Builder b;  // a write into a slice is scattered back into its base, but not into another view read later
    Value* x = b.op("full", {pos(Arg::of_ints({2, 3})), pos(Arg::of_int(0)), named("dtype", Arg::of_dtype(DType::Float32))});
    Value* y = b.input("y", {2, 2});
    Value* left = b.op("slice.Tensor", {pos(x), pos(Arg::of_int(1)), pos(Arg::of_int(0)), pos(Arg::of_int(2))});
    Value* right = b.op("slice.Tensor", {pos(x), pos(Arg::of_int(1)), pos(Arg::of_int(1)), pos(Arg::of_int(3))});
    b.node("copy_", {pos(right), pos(y)});
    b.output(left);
    CHECK_THROWS_WITH(passes::decompose_training_ops(b.g), Catch::Contains("shares storage with a value read later"));
  }
  {
    Builder b;  // an update through a view whose base is not read again is fine
    Value* x = b.input("x", {2, 3});
    Value* a = b.op("mul.Tensor", {pos(x), pos(Arg::of_int(2))});
    Value* v = b.op("view", {pos(a), pos(Arg::of_ints({6}))});
    b.output(b.op("relu_", {pos(v)}));
    auto inputs = make_inputs(b.g);
    std::vector<float> xs = float_values(inputs[0]);
    CHECK(passes::decompose_training_ops(b.g));
    verify_graph(b.g);
    std::vector<double> want;
    for (float f : xs) want.push_back(std::max(0.0, 2.0 * f));
    require_close(float_values(evaluate(b.g, inputs)[0]), want);
  }
}

TEST_CASE("decompose: padding and rolls PyTorch refuses are errors naming the node", "[decompose][fast]") {
  auto error_of = [](Builder& b) -> std::string {
    try {
      passes::decompose_training_ops(b.g);
    } catch (const UserError& e) {
      return e.what();
    }
    return "no error";
  };
  {
    Builder b;  // reflect padding must be smaller than the dim (3 here)
    Value* x = b.input("x", {2, 3});
    b.output(b.op("pad", {pos(x), pos(Arg::of_ints({3, 0})), named("mode", Arg::of_string("reflect"))}));
    const std::string what = error_of(b);
    CHECK(what.find("(aten.pad)") != std::string::npos);
    CHECK(what.find("padding [3, 0] in mode 'reflect' is invalid for input [2, 3]") != std::string::npos);
  }
  {
    Builder b;  // a value is only for mode constant
    Value* x = b.input("x", {2, 3});
    b.output(b.op("pad", {pos(x), pos(Arg::of_ints({1, 1})), named("mode", Arg::of_string("replicate")),
                          named("value", Arg::of_float(1.0))}));
    CHECK(error_of(b).find("padding mode 'replicate' doesn't take in value argument") != std::string::npos);
  }
  {
    Builder b;
    Value* x = b.input("x", {2, 3});
    b.output(b.op("roll", {pos(x), pos(Arg::of_ints({1, 2})), pos(Arg::of_ints({0}))}));
    CHECK(error_of(b).find("(aten.roll): shifts [1, 2] and dims [0] do not match") != std::string::npos);
  }
}

TEST_CASE("decompose: einsum equations as torch reads them", "[decompose][fast]") {
  einsum::Equation eq = einsum::parse("bij,bjk", {{2, 3, 4}, {2, 4, 5}});
  CHECK(eq.output == "ik");  // implicit: the letters used once (b twice: summed), sorted
  eq = einsum::parse("...ij, ...jk -> ...ik", {{2, 1, 3, 4}, {5, 4, 6}});
  CHECK(eq.inputs == std::vector<std::string>{"01ij", "1jk"});  // right-aligned ellipsis dims
  CHECK(eq.output == "01ik");
  CHECK(eq.sizes.at('1') == 5);  // 1 against 5 broadcasts
  CHECK_THROWS_WITH(einsum::parse("ii->i", {{3, 3}}), Catch::Contains("repeated within one operand (a diagonal) is not supported"));
  CHECK_THROWS_WITH(einsum::parse("ij,jk->ik", {{2, 3}, {4, 5}}), Catch::Contains("subscript j has sizes 3 and 4"));
  CHECK_THROWS_WITH(einsum::parse("ij->k", {{2, 3}}), Catch::Contains("output subscript \"k\" appears in no operand"));
  CHECK_THROWS_WITH(einsum::parse("ijk->i", {{2, 3}}), Catch::Contains("do not match an operand of 2 dims"));
}

// ---- the corpus ----

namespace {

std::vector<std::string> raw_corpus_models() {
  std::vector<std::string> out;
  for (const std::string& dir : corpus_models())
    if (fs::exists(dir + "/model.raw.pt2")) out.push_back(dir);
  return out;
}

}  // namespace

TEST_CASE("every corpus model.raw.pt2 decomposes, lowers and evaluates to the references", "[decompose][corpus]") {
  if (!require_corpus()) return;
  auto models = raw_corpus_models();
  SweepResult r = run_sweep("decompose raw models (evaluator)", models, {}, [](const std::string& dir) -> std::string {
    Graph graph = load_model(dir + "/model.raw.pt2");
    if (graph.verifier != "TRAINING") return "verifier is " + graph.verifier + ", expected TRAINING";
    passes::PassOptions opt;
    opt.verify = true;
    run_graph_passes(graph, opt);
    for (const auto& n : graph.nodes)
      if (!lower::find_lowering(n->target)) return "node " + n->name + " (" + n->target + ") is left without a lowering";
    ir::LoopProgram program = lower::lower_graph(graph);
    return compare_with_expected(ir::evaluate_program(program, read_npy_sequence(dir + "/inputs")), dir);
  });
  CHECK(r.unexpected_failures.empty());
  CHECK(r.passed == 10);
}

TEST_CASE("every corpus model.raw.pt2 compiles and matches the references", "[decompose][corpus][compiled]") {
  if (!require_corpus()) return;
  TempDir tmp("foundry_raw_models_");
  SweepResult r = run_sweep("decompose raw models (compiled)", raw_corpus_models(), {}, [&](const std::string& dir) {
    std::string out = tmp / fs::path(dir).filename().string();
    ProcResult p = run_foundryc({dir + "/model.raw.pt2", "-o", out});
    if (p.exit_code != 0) return "foundryc failed: " + p.err;
    LoadedModel model(out);
    return compare_with_expected(model.run(read_npy_sequence(dir + "/inputs")), dir);
  });
  CHECK(r.unexpected_failures.empty());
  CHECK(r.passed == 10);
}

// ---- training-IR samples of composite ops (test/data/raw_ops, scripts/export_raw_ops_samples.py) ----

TEST_CASE("raw_ops samples: composite training-IR ops match PyTorch, interpreted and compiled", "[decompose][compiled]") {
  // One folder per case: model.raw.pt2 exported without run_decompositions() (by torch 2.15; those
  // after view_writes, and mixtral, by torch 2.11), inputs/ and PyTorch's expected/ outputs.
  const std::vector<std::string> cases = {"arange", "fill", "logical", "matmul", "baddbmm", "conv1d", "conv_padding_modes", "where_min_max", "diff", "pad", "roll", "recurrent", "shuffle_triangle", "group_norm", "weight_norm", "einsum", "embedding_bag", "grid_sample", "type_as", "masked_fill", "adaptive_avg_pool1d", "view_writes", "aliases", "stack_grids", "unfold_conv3d", "lstm_states", "bicubic", "fold", "contiguous_writes", "splits_pools", "pool3d_zero", "softplus_linspace", "glu_one_hot", "in_place_dtypes", "buffer_updates", "grouped_mm", "wrapped_regions", "llama", "mixtral", "wav2vec2"};
  TempDir tmp("foundry_raw_ops_");
  for (const std::string& name : cases) {
    SECTION(name) {
      const std::string dir = test_source_dir() + "/data/raw_ops/" + name;
      REQUIRE(fs::exists(dir + "/model.raw.pt2"));
      ProcResult interp = run_foundryc({dir + "/model.raw.pt2", "--interpret", "--inputs", dir + "/inputs", "--expected",
                                        dir + "/expected"});
      INFO("foundryc --interpret: " << interp.out << interp.err);
      CHECK(interp.exit_code == 0);
      // The run's shared cache (run_foundryc): each section runs the test case anew, with a
      // TempDir of its own, and a cache there would compile the oneDNN glue once per section.
      const std::string out = tmp / name;
      ProcResult compiled = run_foundryc({dir + "/model.raw.pt2", "-o", out});
      INFO("foundryc: " << compiled.err);
      REQUIRE(compiled.exit_code == 0);
      ProcResult run = run_process({foundry_run_exe(), out, "--inputs", dir + "/inputs", "--expected", dir + "/expected"});
      INFO("foundry-run: " << run.out << run.err);
      CHECK(run.exit_code == 0);
    }
  }
}

TEST_CASE("raw_ops samples: in-place updates of buffers and inputs are computed for the run, and a warning says they are not kept", "[decompose]") {
  // The outputs match PyTorch's first call in the list above; here, what the user is told.
  const std::string dir = test_source_dir() + "/data/raw_ops/buffer_updates";
  TempDir tmp("foundry_buffer_updates_");
  ProcResult r = run_foundryc({dir + "/model.raw.pt2", "-o", tmp / "out"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("warning: the model updates its buffer \"count\" in place; a compiled model keeps no state") != std::string::npos);
  CHECK(r.err.find("warning: the model updates its buffer \"cache\" in place") != std::string::npos);
  CHECK(r.err.find("warning: the model updates its input \"x\" in place; a compiled model leaves the caller's input as it was") != std::string::npos);
}

TEST_CASE("raw_ops samples: an enabled autocast region is refused naming its node", "[decompose][fast]") {
  // A disabled one is inlined (wrapped_regions above); an enabled one computes in bfloat16.
  const std::string dir = test_source_dir() + "/data/raw_ops/autocast_enabled";
  TempDir tmp("foundry_autocast_");
  ProcResult r = run_foundryc({dir + "/model.raw.pt2", "-o", tmp / "out"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("(higher_order.wrap_with_autocast)") != std::string::npos);
  CHECK(r.err.find("an enabled torch.autocast region is not supported") != std::string::npos);
  CHECK(r.err.find("bug") == std::string::npos);
}

}  // namespace foundry::test

TEST_CASE("raw_ops samples: grouped_mm's offsets, a model input, are safe whatever their values", "[decompose][hostile][fast]") {
  // Offsets that decrease, lie outside the rows or are negative choose groups by the same count
  // (the ends <= the row), always one of the weights' groups or none (a zero row, where every end
  // is <= the row: {0, 0, 0}): a run never reads outside the weights (under the sanitizers too).
  const std::string dir = test_source_dir() + "/data/raw_ops/grouped_mm";
  TempDir tmp("foundry_grouped_mm_");
  REQUIRE(run_foundryc({dir + "/model.raw.pt2", "-o", tmp / "out"}).exit_code == 0);
  for (const std::vector<int32_t>& ends : {std::vector<int32_t>{-3, 1000, 2}, {10, 4, 0}, {0, 0, 0}, {-5, 3, 5}, {-1000000, -1, 2147483647}}) {
    fs::create_directories(tmp / "in");
    fs::copy_file(dir + "/inputs/0.npy", tmp / "in/0.npy", fs::copy_options::overwrite_existing);
    fs::copy_file(dir + "/inputs/1.npy", tmp / "in/1.npy", fs::copy_options::overwrite_existing);
    foundry::NpyArray offs;
    offs.dtype = foundry::DType::Int32;
    offs.shape = {3};
    offs.data.resize(sizeof(int32_t) * 3);
    std::memcpy(offs.data.data(), ends.data(), offs.data.size());
    foundry::write_npy(tmp / "in/2.npy", offs);
    ProcResult run = run_process({foundry_run_exe(), tmp / "out", "--inputs", tmp / "in", "--save-outputs", tmp / "got"});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    foundry::NpyArray got = foundry::read_npy(tmp / "got/0.npy");
    for (int64_t i = 0; i < got.numel(); ++i) CHECK(std::isfinite(got.as<float>()[i]));
  }
}
