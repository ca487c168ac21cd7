// Fused attention (passes/fuse_attention.h, runtime/foundry_attention.h): the products and softmax
// that attention decomposes to become one call, which must give what the chain gives. Checked
// against an oracle written here (softmax(scale * q k^T + mask) v in double, with PyTorch's
// softmax and _safe_softmax rules for -inf, +inf and NaN), interpreted and compiled, with sizes
// that leave partial blocks of queries (64) and keys (256) and operands read transposed; and
// samples/long_attention against PyTorch's own outputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "foundry/passes/pipeline.h"
#include "foundry/runtime/loaded_model.h"
#include "graph_builder.h"
#include "support.h"

namespace foundry::test {
namespace {

constexpr int64_t kHeads = 3, kQueries = 70, kKeys = 300, kHead = 20, kValue = 12;

std::vector<float> normal(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::vector<float> out(n);
  for (float& x : out) x = d(gen);
  return out;
}

struct Operands {
  std::vector<float> q, q2, k, v_t, mask;  // q, q2 [1, H, L, E]; k [H, S, E]; v_t [H, Ev, S]; mask [L, S]
};

// Random operands with the cases that decide the softmax's rules: a row of the mask all -inf
// (5), one with a single key left (9), -inf here and there; a NaN in one query (head 1, row 30)
// and +inf in one key (head 2, key 100, element 0: its scores are +-inf or NaN). The mask is -inf
// for every row from key 256 on, a block of keys the fused call skips, except where an operand
// is not finite: head 1's first rows (the NaN query) and head 0, whose key 280 is +inf (its
// scores +inf - inf = NaN for the rows whose query is positive there).
Operands operands() {
  Operands o{normal(kHeads * kQueries * kHead, 1), normal(kHeads * kQueries * kHead, 2), normal(kHeads * kKeys * kHead, 3),
             normal(kHeads * kValue * kKeys, 4), std::vector<float>(kQueries * kKeys, 0.0f)};
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < kKeys; ++j) {
    o.mask[5 * kKeys + j] = -inf;
    if (j != 123) o.mask[9 * kKeys + j] = -inf;
    if (j % 7 == 3) o.mask[20 * kKeys + j] = -inf;
    if (j >= 256)
      for (int64_t i = 0; i < kQueries; ++i) o.mask[i * kKeys + j] = -inf;
  }
  for (std::vector<float>* q : {&o.q, &o.q2}) (*q)[(1 * kQueries + 30) * kHead + 3] = std::nanf("");
  o.k[(2 * kKeys + 100) * kHead + 0] = inf;
  o.k[(0 * kKeys + 280) * kHead + 0] = inf;
  return o;
}

// softmax(scale * q k^T + mask) v for every head and row, in double.
std::vector<double> oracle(const Operands& o, const std::vector<float>& q, double scale, bool masked_rows_zero) {
  std::vector<double> out;
  std::vector<double> s(kKeys);
  for (int64_t h = 0; h < kHeads; ++h)
    for (int64_t i = 0; i < kQueries; ++i) {
      double top = -kInf;
      bool nan = false;
      for (int64_t j = 0; j < kKeys; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < kHead; ++e)
          dot += static_cast<double>(q[(h * kQueries + i) * kHead + e]) * o.k[(h * kKeys + j) * kHead + e];
        s[j] = scale * dot + o.mask[i * kKeys + j];
        nan = nan || std::isnan(s[j]);
        top = std::max(top, s[j]);
      }
      const bool all_masked = !nan && top == -kInf;
      double total = 0;
      for (double& x : s) total += (x = nan ? NAN : std::exp(x - top));
      for (int64_t d = 0; d < kValue; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < kKeys; ++j) acc += s[j] * o.v_t[(h * kValue + d) * kKeys + j];
        out.push_back(all_masked ? (masked_rows_zero ? 0.0 : NAN) : acc / total);
      }
    }
  return out;
}

// Within float32's tolerance, NaN exactly where the oracle has NaN.
void check_close(const NpyArray& got, const std::vector<double>& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.numel() == static_cast<int64_t>(want.size()));
  int64_t bad = 0, first_bad = -1;
  for (size_t e = 0; e < want.size(); ++e) {
    const double g = got.as<float>()[e], w = want[e];
    const bool ok = std::isnan(w) ? std::isnan(g) : std::abs(g - w) <= 1e-4 + 1e-4 * std::abs(w);
    if (!ok && bad++ == 0) first_bad = static_cast<int64_t>(e);
  }
  INFO(bad << " elements differ, the first at " << first_bad);
  CHECK(bad == 0);
}

// Two attentions over the same keys and values: softmax(q k^T * 0.25 + mask) v, and
// _safe_softmax(q2 k^T / 3 + mask) v as scaled_dot_product_attention decomposes to; k and v are
// read transposed (permuted inputs). `probs_read_too`: the first softmax is also an output.
Builder attention_graph(bool probs_read_too) {
  Builder b;
  Value* q = b.input("q", {1, kHeads, kQueries, kHead});
  Value* q2 = b.input("q2", {1, kHeads, kQueries, kHead});
  Value* k = b.input("k", {kHeads, kKeys, kHead});
  Value* v_t = b.input("v_t", {kHeads, kValue, kKeys});
  Value* mask = b.input("mask", {kQueries, kKeys});
  Value* kt = b.op("permute", {pos(k), pos(ints({0, 2, 1}))});
  Value* v = b.op("permute", {pos(v_t), pos(ints({0, 2, 1}))});
  auto scores = [&](Value* query, const char* scaling, double by) {
    Value* q3 = b.op("view", {pos(query), pos(ints({kHeads, kQueries, kHead}))});
    Value* s = b.op("view", {pos(b.op("bmm", {pos(q3), pos(kt)})), pos(ints({1, kHeads, kQueries, kKeys}))});
    return b.op("add.Tensor", {pos(b.op(scaling, {pos(s), pos(Arg::of_float(by))})), pos(mask)});
  };
  auto times_v = [&](Value* probs) {
    return b.op("bmm", {pos(b.op("view", {pos(probs), pos(ints({kHeads, kQueries, kKeys}))})), pos(v)});
  };
  Value* softmax = b.op("_softmax", {pos(scores(q, "mul.Tensor", 0.25)), pos(Arg::of_int(-1)), pos(Arg::of_bool(false))});
  b.output(times_v(softmax));
  Value* x = scores(q2, "div.Tensor", 3.0);
  Value* probs = b.op("_softmax", {pos(x), pos(Arg::of_int(-1)), pos(Arg::of_bool(false))});
  Value* finite = b.op("logical_not", {pos(b.op("eq.Scalar", {pos(x), pos(Arg::of_float(-kInf))}))});
  Value* none = b.op("logical_not", {pos(b.op("any.dim", {pos(finite), pos(Arg::of_int(-1)), pos(Arg::of_bool(true))}))});
  Value* zeros = b.op("full_like", {pos(probs), pos(Arg::of_int(0))});
  b.output(times_v(b.op("where.self", {pos(none), pos(zeros), pos(probs)})));
  if (probs_read_too) b.output(softmax);
  return b;
}

size_t count_ops(const Graph& g, const std::string& target) {
  size_t n = 0;
  for (const auto& node : g.nodes) n += node->target == target;
  return n;
}

}  // namespace

TEST_CASE("attention: products and softmax become one fused call matching an oracle, interpreted and compiled",
          "[attention][compiled]") {
  Builder b = attention_graph(false);
  passes::run_graph_passes(b.g);
  CHECK(count_ops(b.g, "_foundry_attention") == 2);
  CHECK(count_ops(b.g, "_softmax") == 0);
  CHECK(count_ops(b.g, "bmm") == 0);
  const Operands o = operands();
  const std::vector<NpyArray> inputs = {npy_array(DType::Float32, {1, kHeads, kQueries, kHead}, o.q),
                                        npy_array(DType::Float32, {1, kHeads, kQueries, kHead}, o.q2),
                                        npy_array(DType::Float32, {kHeads, kKeys, kHead}, o.k),
                                        npy_array(DType::Float32, {kHeads, kValue, kKeys}, o.v_t),
                                        npy_array(DType::Float32, {kQueries, kKeys}, o.mask)};
  auto check = [&](const std::vector<NpyArray>& got) {
    REQUIRE(got.size() == 2);
    check_close(got[0], oracle(o, o.q, 0.25, false), "softmax: a row of -inf scores gives NaN");
    check_close(got[1], oracle(o, o.q2, 1.0 / 3.0, true), "_safe_softmax: a row of -inf scores gives zeros");
  };
  SECTION("the reference evaluator") { check(evaluate(b.g, inputs)); }
  SECTION("compiled") {
    TempDir tmp("foundry_attention_");
    compile_graph(b.g, tmp / "model", tmp / "cache");
    CHECK(count_occurrences(read_file(tmp / "model/externs.cpp"), "foundry_rt::attention::attention(") == 2);
    check(LoadedModel(tmp / "model/model.so", "bounds", tmp / "model").run(inputs));
  }
}

TEST_CASE("attention: a chain whose scores or probabilities something else reads stays unfused", "[attention][fast]") {
  Builder b = attention_graph(true);
  passes::run_graph_passes(b.g);
  CHECK(count_ops(b.g, "_foundry_attention") == 1);  // the second chain only
  CHECK(count_ops(b.g, "_softmax") == 1);
}

TEST_CASE("attention: nothing is fused for the GPU, whose backend has no fused call", "[attention][fast]") {
  Builder b = attention_graph(false);
  passes::PassOptions for_cuda;
  for_cuda.device = "cuda";
  passes::run_graph_passes(b.g, for_cuda);
  CHECK(count_ops(b.g, "_foundry_attention") == 0);
  CHECK(count_ops(b.g, "_softmax") == 2);
}

TEST_CASE("attention: a fused call on an empty operand, as a crafted archive could hold, is refused naming the node",
          "[attention][fast]") {
  Builder b;
  Value* q = b.input("q", {2, 4, 0});
  Value* kt = b.input("kt", {2, 0, 5});
  Value* v = b.input("v", {2, 5, 3});
  b.output(b.op("_foundry_attention", {pos(q), pos(kt), pos(v)}));
  CHECK_THROWS_WITH(lower::lower_graph(b.g), Catch::Contains("_foundry_attention") && Catch::Contains("is empty"));
}

// Two attentions over 1024 tokens (scripts/export_attention_sample.py, torch 2.11): a causal
// scaled_dot_product_attention (its mask computed from aranges, its softmax the safe one) and a
// written-out one with an additive key mask; each is one fused call.
TEST_CASE("samples/long_attention (attention over 1024 tokens) runs fused and matches PyTorch", "[samples][attention]") {
  TempDir tmp("foundry_long_attention_");
  ProcResult compiled = run_foundryc({samples_dir() + "/long_attention/model.pt2", "-o", tmp / "out", "-v"});
  INFO(compiled.err);
  REQUIRE(compiled.exit_code == 0);
  CHECK(count_occurrences(compiled.err, "runs as one fused attention") == 2);
  check_matches_pytorch("long_attention", tmp / "out");
}

}  // namespace foundry::test
