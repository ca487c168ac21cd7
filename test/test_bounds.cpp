// Memory safety of compiled models (issue 16, class 1) and the op semantics checked with it: hand-
// built graphs compiled and run, so that under scripts/sanitize.sh (models built with ASan too) an
// access outside a buffer would stop the test. Data-dependent indices must fail the run with an
// error, never read or write; sizes only known at run time are checked when the model runs.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include "foundry/build/compile.h"
#include "foundry/codegen/wrapper.h"
#include "foundry/lower/lowering.h"
#include "foundry/passes/decompose.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/sched/schedule.h"
#include "graph_builder.h"
#include "support.h"

namespace fs = std::filesystem;

namespace foundry::test {
namespace {

NpyArray floats(std::vector<int64_t> shape, const std::vector<float>& v) { return npy_array(DType::Float32, shape, v); }
NpyArray longs(std::vector<int64_t> shape, const std::vector<int64_t>& v) { return npy_array(DType::Int64, shape, v); }

}  // namespace

TEST_CASE("bounds: sign(NaN) is 0 as in PyTorch, in the evaluator and in scalar and vector code", "[bounds][fast]") {
  Builder b;
  Value* x = b.input("x", {19});
  b.output(b.op("sign", {pos(x)}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // NaN both inside the vector loop and in the scalar tail (19 = 2 * 8 + 3 or 16 + 3).
  std::vector<float> in = {nan, -2.0f, 0.0f, 3.0f, -0.0f, nan, 1e-30f, -1e30f, 5, 6, 7, 8, 9, nan, -1, -2, -3, 4, nan};
  // torch.sign: (0 < x) - (x < 0), so NaN gives 0.
  std::vector<float> want;
  for (float v : in) want.push_back(v > 0 ? 1.0f : v < 0 ? -1.0f : 0.0f);
  auto check = [&](const NpyArray& got) {
    REQUIRE(got.numel() == 19);
    for (size_t k = 0; k < in.size(); ++k) {
      INFO("element " << k << " (sign of " << in[k] << ")");
      CHECK(got.as<float>()[k] == want[k]);
    }
  };
  check(evaluate(b.g, {floats({19}, in)}).at(0));
  TempDir tmp("foundry_bounds_");
  for (bool vectorize : {true, false}) {
    INFO((vectorize ? "vector" : "scalar") << " loops");
    std::string dir = tmp / (vectorize ? "vec" : "scalar");
    compile_graph(b.g, dir, tmp / "cache", vectorize);
    LoadedModel model(dir + "/model.so", "bounds", dir);
    check(model.run({floats({19}, in)}).at(0));
  }
}

TEST_CASE("bounds: data-dependent indices out of range fail the run and never write", "[bounds][fast]") {
  // scatter_add, an accumulating index_put, gather and one_hot (a scatter into zeros), indices from
  // the caller. As in PyTorch, a negative index counts from the end in index_put (advanced
  // indexing) and is out of range in scatter_add, gather and one_hot.
  Builder b;
  Value* self = b.input("self", {6, 5});
  Value* index = b.input("index", {4, 5}, DType::Int64);
  Value* src = b.input("src", {4, 5});
  Value* rows = b.input("rows", {3}, DType::Int64);
  Value* vals = b.input("vals", {3, 5});
  Value* classes = b.input("classes", {5}, DType::Int64);
  b.output(b.op("scatter_add", {pos(self), pos(Arg::of_int(0)), pos(index), pos(src)}));
  b.output(b.op("index_put", {pos(self), pos(tensors({rows})), pos(vals), pos(Arg::of_bool(true))}));
  b.output(b.op("gather", {pos(self), pos(Arg::of_int(0)), pos(index)}));
  b.output(b.op("one_hot", {pos(classes), pos(Arg::of_int(4))}));
  passes::decompose_training_ops(b.g);  // one_hot is a training-IR op
  TempDir tmp("foundry_bounds_");
  compile_graph(b.g, tmp / "model", tmp / "cache");
  LoadedModel model(tmp / "model/model.so", "bounds", tmp / "model");

  std::vector<float> s(30), sr(20), v(15);
  for (int k = 0; k < 30; ++k) s[k] = static_cast<float>(k);
  for (int k = 0; k < 20; ++k) sr[k] = 100.0f * static_cast<float>(k + 1);
  for (int k = 0; k < 15; ++k) v[k] = 0.5f * static_cast<float>(k + 1);
  const std::vector<int64_t> good_classes = {3, 0, 1, 3, 2};
  auto inputs = [&](std::vector<int64_t> idx, std::vector<int64_t> r, std::vector<int64_t> c) {
    return std::vector<NpyArray>{floats({6, 5}, s), longs({4, 5}, idx), floats({4, 5}, sr), longs({3}, r),
                                 floats({3, 5}, v), longs({5}, c)};
  };
  std::vector<int64_t> good_index(20), good_rows = {5, -6, 2};
  for (int k = 0; k < 20; ++k) good_index[k] = (k * 7) % 6;
  std::vector<NpyArray> got = model.run(inputs(good_index, good_rows, good_classes));
  REQUIRE(got.size() == 4);
  // The same four ops computed here, element by element, as PyTorch defines them.
  std::vector<float> added = s, put = s, gathered(20);
  for (int k = 0; k < 20; ++k) {
    added[good_index[k] * 5 + k % 5] += sr[k];
    gathered[k] = s[good_index[k] * 5 + k % 5];
  }
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c) put[(good_rows[r] < 0 ? good_rows[r] + 6 : good_rows[r]) * 5 + c] += v[r * 5 + c];
  for (int k = 0; k < 30; ++k) {
    CHECK(got[0].as<float>()[k] == added[k]);
    CHECK(got[1].as<float>()[k] == put[k]);
  }
  for (int k = 0; k < 20; ++k) CHECK(got[2].as<float>()[k] == gathered[k]);
  for (int k = 0; k < 20; ++k) CHECK(got[3].as<int64_t>()[k] == (good_classes[k / 4] == k % 4 ? 1 : 0));

  // Any index outside [0, 6) (scatter_add, gather), [-6, 6) (index_put) or [0, 4) (one_hot) stops
  // the run with an error (under ASan: without touching memory).
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  auto fails = [&](const std::vector<int64_t>& idx, const std::vector<int64_t>& r, const std::vector<int64_t>& c) {
    CHECK_THROWS_WITH(model.run(inputs(idx, r, c)), Catch::Contains("out of range"));
    CHECK_THROWS_AS(evaluate(b.g, inputs(idx, r, c)), UserError);  // --interpret: exit 1, not 3
  };
  for (int64_t bad : std::vector<int64_t>{6, -1, -7, 1000000, lowest}) {
    INFO("index " << bad);
    std::vector<int64_t> idx = good_index;
    idx[13] = bad;
    fails(idx, good_rows, good_classes);
  }
  for (int64_t bad : std::vector<int64_t>{6, -7, 1000000, lowest}) {
    INFO("row " << bad);
    std::vector<int64_t> r = good_rows;
    r[1] = bad;
    fails(good_index, r, good_classes);
  }
  for (int64_t bad : std::vector<int64_t>{4, -1, lowest}) {
    INFO("class " << bad);
    std::vector<int64_t> c = good_classes;
    c[2] = bad;
    fails(good_index, good_rows, c);
  }
}

TEST_CASE("bounds: every string argument of the op table has its accepted values", "[bounds][ops][fast]") {
  // A new op with a str argument must say which values PyTorch accepts (lib/ops/string_choices.cpp).
  for (const OpInfo& op : all_ops())
    for (const ArgSchema& a : op.schema.args) {
      if (a.type != "str" && a.type != "str?") continue;
      INFO(op.name << " argument " << a.name);
      CHECK(has_string_rule(op.name, a.name));
    }
  // Values PyTorch refuses are refused with its reason; the accepted ones bind.
  Builder b;
  Value* x = b.input("x", {4});
  CHECK_THROWS_WITH(b.node("gelu", {pos(x), named("approximate", Arg::of_string("junk"))}),
                    Catch::Contains("approximate argument must be either none or tanh"));
  CHECK_NOTHROW(b.node("gelu", {pos(x), named("approximate", Arg::of_string("tanh"))}));
  // An in-place op derived from its functional row (no row of its own) shares that row's values.
  REQUIRE(find_op("gelu_") != nullptr);
  CHECK_THROWS_WITH(b.node("gelu_", {pos(x), named("approximate", Arg::of_string("junk"))}),
                    Catch::Contains("approximate argument must be either none or tanh"));
  CHECK_THROWS_WITH(b.node("div.Tensor_mode", {pos(x), pos(x), named("rounding_mode", Arg::of_string("round"))}),
                    Catch::Contains("rounding_mode to be one of None, 'trunc', or 'floor'"));
  CHECK_NOTHROW(b.node("div.Tensor_mode", {pos(x), pos(x), named("rounding_mode", Arg::none())}));
}

TEST_CASE("bounds: the lowered program is checked for accesses past a buffer, whatever the rules let through",
          "[bounds][fast]") {
  // Nodes bound as usual, then given arguments their shape rule would refuse (as a rule with a gap
  // would pass them): lowering must still refuse them, naming the node, the buffer and the element.
  auto with_ints = [](Node* n, const std::string& name, std::vector<int64_t> v) {
    for (size_t k = 0; k < n->arg_names.size(); ++k)
      if (n->arg_names[k] == name) n->args[k] = Arg::of_ints(std::move(v));
  };
  SECTION("as_strided past its storage") {
    Builder b;
    Node* n = b.node("as_strided", {pos(b.input("x", {1024})), pos(ints({4})), pos(ints({1}))});
    with_ints(n, "size", {32, 64});
    with_ints(n, "stride", {64, 1});
    n->outputs[0]->type = shape::make_type(DType::Float32, {32, 64});
    b.output(n->outputs[0]);
    CHECK_THROWS_WITH(lower::lower_graph(b.g),
                      Catch::Contains("node as_strided (aten.as_strided): as_strided: sizes [32, 64], strides [64, 1] and "
                                      "storage offset 0 reach element 2047 of a storage of 1024 elements"));
  }
  SECTION("gather with an index wider than self") {
    Builder b;
    Value* self = b.input("self", {32, 32});
    Value* index = b.input("index", {32, 32}, DType::Int64);
    Node* n = b.node("gather", {pos(self), pos(Arg::of_int(1)), pos(index)});
    index->type = shape::make_type(DType::Int64, {64, 32});
    n->outputs[0]->type = shape::make_type(DType::Float32, {64, 32});
    b.output(n->outputs[0]);
    CHECK_THROWS_WITH(lower::lower_graph(b.g), Catch::Contains("node gather (aten.gather) reads input self at element"));
  }
  SECTION("scatter_add writing past self") {
    Builder b;
    Value* self = b.input("self", {32, 32});
    Value* index = b.input("index", {32, 32}, DType::Int64);
    Value* src = b.input("src", {32, 64});
    Node* n = b.node("scatter_add", {pos(self), pos(Arg::of_int(0)), pos(index), pos(src)});
    index->type = shape::make_type(DType::Int64, {32, 64});
    b.output(n->outputs[0]);
    CHECK_THROWS_WITH(lower::lower_graph(b.g), Catch::Contains("(aten.scatter_add) writes buffer"));
  }
}

TEST_CASE("bounds: shape relations between dynamic sizes are checked when the model runs", "[bounds][dynamic][fast]") {
  // gather(self[s0, 4], 1, index[s1, 4]) needs s1 <= s0 (ATen's rule), exported at s0 = 8, s1 = 4.
  // Each size is read from its own input at run time: an index with more rows than self must be
  // refused before any kernel reads self's rows past its end.
  Builder b;
  Value* self = b.input("self", {8, 4});
  Value* index = b.input("index", {4, 4}, DType::Int64);
  Node* n = b.node("gather", {pos(self), pos(Arg::of_int(1)), pos(index)});
  auto dynamic_rows = [&](Value* v, const std::string& symbol) {
    v->type.symbols = {"Symbol('" + symbol + "', positive=True, integer=True)", ""};
  };
  dynamic_rows(self, "s10");
  dynamic_rows(index, "s11");
  dynamic_rows(n->outputs[0], "s11");
  b.g.range_constraints = {{"s10", 1, 64}, {"s11", 1, 64}};
  b.output(n->outputs[0]);
  TempDir tmp("foundry_bounds_");
  compile_graph(b.g, tmp / "model", tmp / "cache");
  LoadedModel model(tmp / "model/model.so", "bounds", tmp / "model");
  auto run = [&](int64_t self_rows, int64_t index_rows) {
    std::vector<float> s(static_cast<size_t>(self_rows * 4));
    for (size_t k = 0; k < s.size(); ++k) s[k] = static_cast<float>(k);
    std::vector<int64_t> idx(static_cast<size_t>(index_rows * 4));
    for (size_t k = 0; k < idx.size(); ++k) idx[k] = static_cast<int64_t>(3 - k % 4);
    return model.run({floats({self_rows, 4}, s), longs({index_rows, 4}, idx)});
  };
  for (auto [rows, index_rows] : std::vector<std::pair<int64_t, int64_t>>{{8, 4}, {5, 5}, {64, 1}}) {
    INFO("self rows " << rows << ", index rows " << index_rows);
    std::vector<NpyArray> got = run(rows, index_rows);
    REQUIRE(got.at(0).numel() == index_rows * 4);
    for (int64_t k = 0; k < index_rows * 4; ++k) CHECK(got[0].as<float>()[k] == static_cast<float>(k - k % 4 + 3 - k % 4));
  }
  for (auto [rows, index_rows] : std::vector<std::pair<int64_t, int64_t>>{{3, 5}, {1, 64}}) {
    INFO("self rows " << rows << ", index rows " << index_rows);
    CHECK_THROWS_WITH(run(rows, index_rows), Catch::Contains("gather"));
  }
}

}  // namespace foundry::test
