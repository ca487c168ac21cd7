// The graph passes: each pass on small hand-built graphs, the rewrite helper, the pipeline, and
// the corpus CNNs (conv + batch-norm folding, outputs still matching the references).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "foundry/frontend/frontend.h"
#include "foundry/ir/evaluate.h"
#include "foundry/lower/lowering.h"
#include "foundry/ops/registry.h"
#include "foundry/passes/cse.h"
#include "foundry/passes/dead_code.h"
#include "foundry/passes/fold_constants.h"
#include "foundry/passes/fold_conv_bn.h"
#include "foundry/passes/pipeline.h"
#include "foundry/passes/remove_noops.h"
#include "foundry/passes/rewrite.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/sample.h"
#include "graph_builder.h"
#include "support.h"

namespace foundry::test {
namespace {

using passes::Replacement;
using passes::Rewriter;
using passes::RewriteRule;

// ---- building graphs by hand ----


const Node* find_node(const Graph& g, const std::string& target) {
  for (const auto& node : g.nodes)
    if (node->target == target) return node.get();
  return nullptr;
}

const GraphInput* find_input(const Graph& g, const Value* v) {
  for (const GraphInput& in : g.inputs)
    if (in.value == v) return &in;
  return nullptr;
}

size_t count_inputs(const Graph& g, InputKind kind) {
  size_t n = 0;
  for (const GraphInput& in : g.inputs) n += in.kind == kind;
  return n;
}

// Deterministic float32 inputs for the graph's user inputs.
void require_same_results(const std::vector<NpyArray>& a, const std::vector<NpyArray>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    Comparison c = compare_arrays(a[k], b[k], Tolerance{1e-5, 1e-5});
    INFO("output " << k << ": " << c.message);
    CHECK(c.pass);
  }
}

std::vector<float> floats_of(const GraphInput& in) {
  auto d = passes::read_constant(in);
  REQUIRE(d.has_value());
  return std::vector<float>(d->begin(), d->end());
}

// ---- dead-code elimination ----

TEST_CASE("dce removes unused pure nodes, asserts and unused weights", "[passes][fast]") {
  Builder b;
  Value* x = b.input("x", {4});
  Value* unused_in = b.input("unused", {4});
  Value* w = b.weight("w", {4});
  Value* w_dead = b.weight("w_dead", {4});
  Value* r = b.op("relu", {pos(x)});
  Value* a = b.op("add.Tensor", {pos(r), pos(w)});
  b.op("neg", {pos(w_dead)});                                  // dead
  b.op("mul.Tensor", {pos(a), pos(x)});                        // dead
  b.node("_assert_tensor_metadata", {pos(x), named("dtype", Arg::of_dtype(DType::Float32))});
  b.output(a);

  CHECK(passes::eliminate_dead_code(b.g));
  CHECK(b.g.nodes.size() == 2);
  CHECK(count_op(b.g, "relu") == 1);
  CHECK(count_op(b.g, "add.Tensor") == 1);
  // User inputs stay (the signature), dead weights go.
  CHECK(count_inputs(b.g, InputKind::User) == 2);
  CHECK(find_input(b.g, unused_in) != nullptr);
  CHECK(find_input(b.g, w) != nullptr);
  CHECK(find_input(b.g, w_dead) == nullptr);
  verify_graph(b.g);
  CHECK_FALSE(passes::eliminate_dead_code(b.g));
}

TEST_CASE("dce keeps mutation outputs, in-place ops and mutated buffers", "[passes][fast]") {
  Builder b;
  Value* x = b.input("x", {4});
  Value* buf = b.weight("running", {4}, {}, InputKind::Buffer);
  Value* upd = b.op("add.Tensor", {pos(buf), pos(x)});
  Value* y = b.op("sigmoid", {pos(x)});
  b.op("relu_", {pos(y)});  // in place: its output is unused but it writes y
  b.output(upd, OutputKind::BufferMutation, "running");
  b.output(y);
  CHECK_FALSE(passes::eliminate_dead_code(b.g));
  CHECK(b.g.nodes.size() == 3);
  CHECK(find_input(b.g, buf) != nullptr);
}

// ---- common-subexpression elimination ----

TEST_CASE("cse merges equal nodes, in chains, keeping the first", "[passes][fast]") {
  Builder b;
  Value* x = b.input("x", {2, 3});
  Value* w = b.weight("w", {3});
  Node* first = b.node("add.Tensor", {pos(x), pos(w)});
  Value* a2 = b.op("add.Tensor", {pos(x), pos(w)});
  Value* a3 = b.op("add.Tensor", {pos(x), pos(w), named("alpha", Arg::of_int(2))});  // other alpha
  Value* r1 = b.op("relu", {pos(first->outputs[0])});
  Value* r2 = b.op("relu", {pos(a2)});
  Value* m1 = b.op("mul.Scalar", {pos(r1), pos(Arg::of_float(0.5))});
  Value* m2 = b.op("mul.Scalar", {pos(r2), pos(Arg::of_float(0.5))});
  Value* z1 = b.op("mul.Scalar", {pos(x), pos(Arg::of_float(0.0))});
  Value* z2 = b.op("mul.Scalar", {pos(x), pos(Arg::of_float(-0.0))});  // bitwise different
  Value* s = b.op("add.Tensor", {pos(m1), pos(m2)});
  b.output(s);
  b.output(m2);
  b.output(a3);
  b.output(z1);
  b.output(z2);

  CHECK(passes::eliminate_common_subexpressions(b.g));
  verify_graph(b.g);
  CHECK(count_op(b.g, "relu") == 1);
  CHECK(count_op(b.g, "add.Tensor") == 3);  // first, the alpha=2 one, the final sum
  CHECK(count_op(b.g, "mul.Scalar") == 3);  // 0.5 once, 0.0, -0.0
  CHECK(b.g.nodes.front().get() == first);
  // s = m1 + m1 now, and the second output is m1 itself.
  const Node* sum = b.g.nodes.back().get();
  CHECK(sum->args[0].tensor == m1);
  CHECK(sum->args[1].tensor == m1);
  CHECK(b.g.outputs[1].value == m1);
  CHECK_FALSE(passes::eliminate_common_subexpressions(b.g));
}

TEST_CASE("cse leaves random and side-effecting nodes alone", "[passes][fast]") {
  Builder b;
  Value* x = b.input("x", {8});
  Value* d1 = b.op("dropout", {pos(x), pos(Arg::of_float(0.5)), pos(Arg::of_bool(true))});
  Value* d2 = b.op("dropout", {pos(x), pos(Arg::of_float(0.5)), pos(Arg::of_bool(true))});
  b.output(d1);
  b.output(d2);
  CHECK_FALSE(passes::eliminate_common_subexpressions(b.g));
  CHECK(b.g.nodes.size() == 2);
}

// ---- no-op removal ----

TEST_CASE("remove_noops forwards identity views, copies and aliases", "[passes][fast]") {
  Builder b;
  Value* x = b.input("x", {2, 3});
  Value* v = b.op("view", {pos(x), pos(ints({2, 3}))});
  Value* e = b.op("expand", {pos(v), pos(ints({2, 3}))});
  Value* p = b.op("permute", {pos(e), pos(ints({0, 1}))});
  Value* s = b.op("slice.Tensor", {pos(p), pos(Arg::of_int(1)), pos(Arg::of_int(0)), pos(Arg::of_int(INT64_MAX))});
  Value* c = b.op("_to_copy", {pos(s), named("dtype", Arg::of_dtype(DType::Float32))});
  Value* k = b.op("clone", {pos(c)});
  Value* al = b.op("alias", {pos(k)});
  Value* u = b.op("unsqueeze", {pos(al), pos(Arg::of_int(0))});
  Value* q = b.op("squeeze.dims", {pos(u), pos(ints({0}))});  // core ATen: squeeze.dim is decomposed
  Value* cat = b.op("cat", {pos(tensors({q}))});
  Value* r = b.op("relu", {pos(cat)});
  b.node("_assert_scalar", {pos(Arg::of_bool(true)), pos(Arg::of_string("ok"))});
  // Not no-ops: a real transpose, a real slice, a cast.
  Value* t = b.op("permute", {pos(x), pos(ints({1, 0}))});
  Value* part = b.op("slice.Tensor", {pos(x), pos(Arg::of_int(1)), pos(Arg::of_int(1)), pos(Arg::of_int(3))});
  Value* dbl = b.op("_to_copy", {pos(x), named("dtype", Arg::of_dtype(DType::Float64))});
  b.output(r);
  b.output(t);
  b.output(part);
  b.output(dbl);
  b.output(k);  // an output that becomes the user input itself

  std::vector<NpyArray> inputs = make_inputs(b.g);
  std::vector<NpyArray> before = evaluate(b.g, inputs);

  CHECK(passes::remove_noops(b.g));
  verify_graph(b.g);
  CHECK(b.g.nodes.size() == 4);
  CHECK(count_op(b.g, "relu") == 1);
  CHECK(find_node(b.g, "relu")->args[0].tensor == x);
  CHECK(count_op(b.g, "permute") == 1);
  CHECK(count_op(b.g, "slice.Tensor") == 1);
  CHECK(count_op(b.g, "_to_copy") == 1);
  CHECK(b.g.outputs[4].value == x);
  require_same_results(before, evaluate(b.g, inputs));
  CHECK_FALSE(passes::remove_noops(b.g));
}

TEST_CASE("remove_noops keeps copies when something writes in place", "[passes][fast]") {
  Builder b;
  Value* x = b.input("x", {4});
  Value* c = b.op("clone", {pos(x)});
  Value* al = b.op("alias", {pos(x)});
  b.op("relu_", {pos(c)});
  b.output(c);
  b.output(al);
  CHECK(passes::remove_noops(b.g));  // the alias still goes: it is x
  CHECK(count_op(b.g, "clone") == 1);
  CHECK(count_op(b.g, "alias") == 0);
  CHECK(b.g.outputs[1].value == x);
}

TEST_CASE("remove_noops folds reshape round trips", "[passes][fast]") {
  Builder b;
  Value* x = b.input("x", {2, 3, 4});
  Value* f = b.op("view", {pos(x), pos(ints({6, 4}))});
  Value* g = b.op("relu", {pos(f)});  // f is still used
  Value* back = b.op("view", {pos(f), pos(ints({2, 3, 4}))});
  Value* other = b.op("view", {pos(f), pos(ints({3, 2, 4}))});  // a different shape: stays
  b.output(g);
  b.output(back);
  b.output(other);
  CHECK(passes::remove_noops(b.g));
  CHECK(b.g.outputs[1].value == x);
  CHECK(count_op(b.g, "view") == 2);
  verify_graph(b.g);
}

// ---- constant folding ----

TEST_CASE("fold_constants computes weight arithmetic and keeps views", "[passes][fast]") {
  Builder b;
  Value* x = b.input("x", {2, 4});
  Value* w = b.weight("w", {3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Value* bias = b.weight("bias", {3}, {0.5f, -1.0f, 2.0f});
  Value* scaled = b.op("mul.Scalar", {pos(w), pos(Arg::of_float(2.0))});
  Value* shifted = b.op("add.Scalar", {pos(scaled), pos(Arg::of_float(1.0))});
  Value* wt = b.op("permute", {pos(shifted), pos(ints({1, 0})) });   // a view at the edge: stays
  Value* y = b.op("mm", {pos(x), pos(wt)});
  Value* wt2 = b.op("permute", {pos(w), pos(ints({1, 0}))});         // a plain weight view: stays
  Value* y2 = b.op("mm", {pos(x), pos(wt2)});
  Value* bias2 = b.op("neg", {pos(bias)});
  Value* out = b.op("add.Tensor", {pos(y), pos(bias2)});
  b.output(out);
  b.output(y2);

  std::vector<NpyArray> inputs = make_inputs(b.g);
  std::vector<NpyArray> before = evaluate(b.g, inputs);
  CHECK(passes::fold_constants(b.g));
  verify_graph(b.g);
  CHECK(count_op(b.g, "mul.Scalar") == 0);
  CHECK(count_op(b.g, "add.Scalar") == 0);
  CHECK(count_op(b.g, "neg") == 0);
  CHECK(count_op(b.g, "permute") == 2);
  REQUIRE(count_inputs(b.g, InputKind::Constant) == 2);

  // The permute now reads a folded constant holding 2w+1.
  const Node* perm = nullptr;
  for (const auto& n : b.g.nodes)
    if (n->target == "permute" && n->args[0].tensor != w) perm = n.get();
  REQUIRE(perm != nullptr);
  const GraphInput* folded = find_input(b.g, perm->args[0].tensor);
  REQUIRE(folded != nullptr);
  CHECK(folded->kind == InputKind::Constant);
  CHECK(folded->fqn.rfind("folded_", 0) == 0);
  CHECK(folded->storage.size == 12 * 4);
  std::vector<float> vals = floats_of(*folded);
  for (int i = 0; i < 12; ++i) CHECK(vals[i] == 2.0f * static_cast<float>(i + 1) + 1.0f);

  require_same_results(before, evaluate(b.g, inputs));
  // The weights are unused now (bias) or still read (w): DCE drops only the former.
  CHECK(passes::eliminate_dead_code(b.g) == true);
  CHECK(find_input(b.g, bias) == nullptr);
  CHECK(find_input(b.g, w) != nullptr);
  CHECK_FALSE(passes::fold_constants(b.g));
}

TEST_CASE("fold_constants does not blow up weights, fills or mutated buffers", "[passes][fast]") {
  Builder b;
  Value* x = b.input("x", {1000, 4});
  Value* small = b.weight("small", {4});
  Value* big = b.op("repeat", {pos(small), pos(ints({1000, 1}))});   // 16 kB from 16 bytes
  Value* big2 = b.op("mul.Scalar", {pos(big), pos(Arg::of_float(3.0))});
  Value* y = b.op("add.Tensor", {pos(x), pos(big2)});
  Value* ones = b.op("full", {pos(ints({1000, 4})), pos(Arg::of_float(1.0))});  // a fill: stays
  Value* z = b.op("add.Tensor", {pos(y), pos(ones)});
  Value* stats = b.weight("stats", {4}, {}, InputKind::Buffer);
  Value* doubled = b.op("mul.Scalar", {pos(stats), pos(Arg::of_float(2.0))});  // stats is mutated
  Value* out = b.op("add.Tensor", {pos(z), pos(doubled)});
  Value* updated = b.op("add.Scalar", {pos(stats), pos(Arg::of_float(1.0))});
  b.output(out);
  b.output(updated, OutputKind::BufferMutation, "stats");

  CHECK_FALSE(passes::fold_constants(b.g));
  CHECK(b.g.nodes.size() == 8);
  CHECK(count_inputs(b.g, InputKind::Constant) == 0);

  // With a looser growth limit the repeated weight does fold.
  passes::FoldOptions loose;
  loose.max_growth = 2000;
  CHECK(passes::fold_constants(b.g, loose));
  CHECK(count_op(b.g, "repeat") == 0);
  CHECK(count_inputs(b.g, InputKind::Constant) == 1);
  verify_graph(b.g);
}

TEST_CASE("fold_constants folds a fill combined with a weight", "[passes][fast]") {
  Builder b;
  Value* x = b.input("x", {3});
  Value* w = b.weight("w", {3}, {1, 2, 3});
  Value* f = b.op("full", {pos(ints({3})), pos(Arg::of_float(0.5))});
  Value* s = b.op("add.Tensor", {pos(w), pos(f)});
  Value* y = b.op("mul.Tensor", {pos(x), pos(s)});
  b.output(y);
  CHECK(passes::fold_constants(b.g));
  CHECK(b.g.nodes.size() == 1);
  const GraphInput* c = find_input(b.g, b.g.nodes[0]->args[1].tensor);
  REQUIRE(c != nullptr);
  CHECK(floats_of(*c) == std::vector<float>{1.5f, 2.5f, 3.5f});
}

// ---- conv + batch norm ----

struct ConvBn {
  Builder b;
  Value* x = nullptr;
  Value* w = nullptr;
  Value* conv = nullptr;
  Node* bn = nullptr;
};

// conv2d 2->3 channels, 3x3, then batch norm with the given affine parameters.
ConvBn make_conv_bn(bool with_bias, bool affine) {
  ConvBn t;
  Builder& b = t.b;
  t.x = b.input("x", {1, 2, 5, 5});
  t.w = b.weight("conv_w", {3, 2, 3, 3});
  Arg bias = with_bias ? Arg::of_tensor(b.weight("conv_b", {3}, {0.1f, -0.2f, 0.3f})) : Arg::none();
  Arg gamma = affine ? Arg::of_tensor(b.weight("bn_w", {3}, {1.5f, 0.5f, -2.0f})) : Arg::none();
  Arg beta = affine ? Arg::of_tensor(b.weight("bn_b", {3}, {0.25f, 0.0f, -1.0f})) : Arg::none();
  Value* mean = b.weight("bn_mean", {3}, {0.1f, 0.2f, -0.3f}, InputKind::Buffer);
  Value* var = b.weight("bn_var", {3}, {0.5f, 2.0f, 0.01f}, InputKind::Buffer);
  t.conv = b.op("convolution", {pos(t.x), pos(t.w), pos(bias), pos(ints({1, 1})), pos(ints({1, 1})),
                                pos(ints({1, 1})), pos(Arg::of_bool(false)), pos(ints({0, 0})), pos(Arg::of_int(1))});
  t.bn = b.node("_native_batch_norm_legit_no_training",
                {pos(t.conv), pos(gamma), pos(beta), pos(mean), pos(var), pos(Arg::of_float(0.1)),
                 pos(Arg::of_float(1e-5))});
  Value* r = b.op("relu", {pos(t.bn->outputs[0])});
  b.output(r);
  return t;
}

TEST_CASE("fold_conv_batch_norm folds the statistics into the convolution", "[passes][fast]") {
  for (bool with_bias : {true, false})
    for (bool affine : {true, false}) {
      DYNAMIC_SECTION("bias " << with_bias << ", affine " << affine) {
        ConvBn t = make_conv_bn(with_bias, affine);
        Graph& g = t.b.g;
        std::vector<float> w_old = floats_of(*find_input(g, t.w));
        std::vector<NpyArray> inputs = make_inputs(g);
        std::vector<NpyArray> before = evaluate(g, inputs);

        CHECK(passes::fold_conv_batch_norm(g));
        verify_graph(g);
        CHECK(count_op(g, "_native_batch_norm_legit_no_training") == 0);
        REQUIRE(count_op(g, "convolution") == 1);
        const Node* conv = find_node(g, "convolution");
        CHECK(find_node(g, "relu")->args[0].tensor == conv->outputs[0]);

        // w' and b' by the formula, in double.
        const GraphInput* nw = find_input(g, shape::arg(*conv, "weight").tensor);
        const GraphInput* nb = find_input(g, shape::arg(*conv, "bias").tensor);
        REQUIRE(nw != nullptr);
        REQUIRE(nb != nullptr);
        CHECK(nw->kind == InputKind::Constant);
        std::vector<float> w_new = floats_of(*nw), b_new = floats_of(*nb);
        const double gamma[3] = {1.5, 0.5, -2.0}, beta[3] = {0.25, 0.0, -1.0};
        const double mean[3] = {0.1, 0.2, -0.3}, var[3] = {0.5, 2.0, 0.01}, bias[3] = {0.1, -0.2, 0.3};
        for (int c = 0; c < 3; ++c) {
          double gm = affine ? gamma[c] : 1.0, bt = affine ? beta[c] : 0.0, bs = with_bias ? bias[c] : 0.0;
          double s = gm / std::sqrt(static_cast<double>(static_cast<float>(var[c])) + 1e-5);
          for (int k = 0; k < 18; ++k)
            CHECK(w_new[c * 18 + k] == static_cast<float>(static_cast<double>(w_old[c * 18 + k]) * s));
          double expect_b = (static_cast<double>(static_cast<float>(bs)) - static_cast<float>(mean[c])) * s +
                            static_cast<float>(bt);
          CHECK(b_new[c] == Approx(expect_b).epsilon(1e-6));
        }
        require_same_results(before, evaluate(g, inputs));

        // The old weights and statistics are now unused: DCE drops them.
        CHECK(passes::eliminate_dead_code(g));
        CHECK(count_inputs(g, InputKind::Parameter) == 0);
        CHECK(count_inputs(g, InputKind::Buffer) == 0);
      }
    }
}

TEST_CASE("fold_conv_batch_norm needs a private conv output and constant statistics", "[passes][fast]") {
  SECTION("the conv output has another user") {
    ConvBn t = make_conv_bn(true, true);
    Value* other = t.b.op("neg", {pos(t.conv)});
    t.b.output(other);
    CHECK_FALSE(passes::fold_conv_batch_norm(t.b.g));
    CHECK(count_op(t.b.g, "_native_batch_norm_legit_no_training") == 1);
  }
  SECTION("the conv output is a graph output") {
    ConvBn t = make_conv_bn(true, true);
    t.b.output(t.conv);
    CHECK_FALSE(passes::fold_conv_batch_norm(t.b.g));
  }
  SECTION("the statistics are mutated") {
    ConvBn t = make_conv_bn(true, true);
    Value* mean = shape::arg(*t.bn, "running_mean").tensor;
    t.b.output(t.b.op("mul.Scalar", {pos(mean), pos(Arg::of_float(0.9))}), OutputKind::BufferMutation, "bn_mean");
    CHECK_FALSE(passes::fold_conv_batch_norm(t.b.g));
  }
  SECTION("the weight is a user input") {
    Builder b;
    Value* x = b.input("x", {1, 2, 4, 4});
    Value* w = b.input("w", {2, 2, 1, 1});
    Value* c = b.op("convolution", {pos(x), pos(w), pos(Arg::none()), pos(ints({1, 1})), pos(ints({0, 0})),
                                    pos(ints({1, 1})), pos(Arg::of_bool(false)), pos(ints({0, 0})), pos(Arg::of_int(1))});
    Node* bn = b.node("_native_batch_norm_legit_no_training",
                      {pos(c), pos(Arg::none()), pos(Arg::none()), pos(b.weight("m", {2})), pos(b.weight("v", {2}, {1, 1})),
                       pos(Arg::of_float(0.1)), pos(Arg::of_float(1e-5))});
    b.output(bn->outputs[0]);
    CHECK_FALSE(passes::fold_conv_batch_norm(b.g));
  }
}

// ---- the rewrite helper ----

TEST_CASE("rewrite rules replace outputs and remove what dies", "[passes][fast]") {
  Builder b;
  Value* x = b.input("x", {4});
  Value* n1 = b.op("neg", {pos(x)});
  Value* n2 = b.op("neg", {pos(n1)});
  Value* e = b.op("exp", {pos(n2)});
  b.output(e);

  // neg(neg(a)) -> a: the inner neg dies with the outer one.
  RewriteRule double_neg{"double-neg", {"neg"},
                         [](const Rewriter& rw, const Node& n) {
                           const Node* p = rw.producer(n.args[0].tensor);
                           return p && p->target == "neg";
                         },
                         [](Rewriter& rw, Node& n) -> std::optional<Replacement> {
                           return Replacement{{rw.producer(n.args[0].tensor)->args[0].tensor}};
                         }};
  CHECK(passes::apply_rules(b.g, {double_neg}));
  REQUIRE(b.g.nodes.size() == 1);
  CHECK(b.g.nodes[0]->target == "exp");
  CHECK(b.g.nodes[0]->args[0].tensor == x);
  verify_graph(b.g);

  // exp(a) -> sigmoid(a) built through the Rewriter, inserted in place.
  RewriteRule swap{"swap", {"exp"}, nullptr, [](Rewriter& rw, Node& n) -> std::optional<Replacement> {
                     Node* s = rw.insert_node("sigmoid", {n.args[0]}, {n.outputs[0]->type}, &n);
                     return Replacement{{s->outputs[0]}};
                   }};
  CHECK(passes::apply_rules(b.g, {swap}));
  REQUIRE(b.g.nodes.size() == 1);
  CHECK(b.g.nodes[0]->target == "sigmoid");
  CHECK(b.g.outputs[0].value == b.g.nodes[0]->outputs[0]);
  verify_graph(b.g);
}

TEST_CASE("the rewriter keeps its use index true", "[passes][fast]") {
  Builder b;
  Value* x = b.input("x", {4});
  Value* a = b.op("relu", {pos(x)});
  Value* c = b.op("add.Tensor", {pos(a), pos(a)});
  b.output(c);
  b.output(a);
  Rewriter rw(b.g);
  CHECK(rw.users(a).size() == 1);
  CHECK(rw.output_uses(a) == 1);
  CHECK_FALSE(rw.has_single_user(a));
  CHECK(rw.producer(c) == b.g.nodes[1].get());
  CHECK(rw.producer(x) == nullptr);
  CHECK(rw.input(x) != nullptr);
  CHECK(rw.constant_input(x) == nullptr);

  Node* s = rw.insert_node("sigmoid", {Arg::of_tensor(x)}, {x->type}, b.g.nodes[1].get());
  CHECK(b.g.nodes[1].get() == s);
  rw.replace_uses(a, s->outputs[0]);
  CHECK(rw.users(a).empty());
  CHECK_FALSE(rw.is_used(a));
  CHECK(rw.users(s->outputs[0]).size() == 1);
  CHECK(rw.output_uses(s->outputs[0]) == 1);
  rw.erase(*b.g.nodes[0]);
  CHECK(rw.commit());
  CHECK(b.g.nodes.size() == 2);
  verify_graph(b.g);

  Node* copy = rw.insert_copy(*s, {Arg::of_tensor(s->outputs[0])}, nullptr);
  CHECK(b.g.nodes.back().get() == copy);
  CHECK(copy->target == "sigmoid");
  CHECK(copy->outputs[0] != s->outputs[0]);
  CHECK(copy->outputs[0]->type == s->outputs[0]->type);
  CHECK(rw.users(s->outputs[0]).size() == 2);
  b.output(copy->outputs[0]);
  verify_graph(b.g);

  Value* k = rw.add_constant("folded_0", shape::make_type(DType::Float32, {2}), std::vector<uint8_t>(8, 0));
  Value* k2 = rw.add_constant("folded_0", shape::make_type(DType::Float32, {2}), std::vector<uint8_t>(8, 0));
  CHECK(rw.constant_input(k) != nullptr);
  CHECK(rw.constant_input(k)->fqn == "folded_0");
  CHECK(rw.constant_input(k2)->fqn == "folded_0_1");
}

// ---- the pipeline ----

TEST_CASE("the pass pipeline runs in order and reports each pass", "[passes][fast]") {
  ConvBn t = make_conv_bn(true, true);
  Graph& g = t.b.g;
  Value* dup = t.b.op("relu", {pos(t.bn->outputs[0])});  // a duplicate of the existing relu
  t.b.output(dup);
  std::vector<NpyArray> inputs = make_inputs(g);
  std::vector<NpyArray> before = evaluate(g, inputs);

  passes::PassOptions opt;
  opt.verify = true;
  std::vector<passes::PassReport> reports = passes::run_graph_passes(g, opt);
  REQUIRE(reports.size() == passes::graph_passes().size());
  for (size_t i = 0; i < reports.size(); ++i) CHECK(reports[i].name == passes::graph_passes()[i].name);
  CHECK(reports.front().name == "decompose");
  auto report = [&](const std::string& name) {
    for (const auto& r : reports)
      if (r.name == name) return r;
    FAIL("no report for " << name);
    return passes::PassReport{};
  };
  CHECK(report("cse").changed);
  CHECK(report("fold-conv-bn").changed);
  CHECK(reports.back().changed);  // the final DCE drops the old weights
  CHECK(g.nodes.size() == 2);     // convolution, relu
  CHECK(g.outputs[0].value == g.outputs[1].value);
  CHECK(count_inputs(g, InputKind::Constant) == 2);
  CHECK(count_inputs(g, InputKind::Parameter) + count_inputs(g, InputKind::Buffer) == 0);
  require_same_results(before, evaluate(g, inputs));

  std::string table = passes::format_pass_reports(reports);
  CHECK(table.find("fold-conv-bn") != std::string::npos);
  CHECK(table.find("total") != std::string::npos);

  passes::PassOptions none;
  none.disabled = {"decompose", "dce", "remove-noops", "cse", "fold-constants", "fold-conv-bn", "fuse-attention"};
  CHECK(passes::run_graph_passes(g, none).empty());
}

// ---- the corpus ----

// Batch norms reading the output of a convolution.
size_t conv_bn_pairs(const Graph& g) {
  size_t n = 0;
  for (const auto& node : g.nodes) {
    if (node->target != "_native_batch_norm_legit_no_training" || node->args.empty() || !node->args[0].tensor)
      continue;
    for (const auto& p : g.nodes)
      if (p->target == "convolution" && !p->outputs.empty() && p->outputs[0] == node->args[0].tensor) ++n;
  }
  return n;
}

TEST_CASE("the pipeline folds every batch norm of the corpus CNNs", "[passes][corpus]") {
  if (!require_corpus()) return;
  for (const char* model : {"small_cnn", "mobilenet_v3_small"}) {
    DYNAMIC_SECTION(model) {
      Graph g = load_model(corpus_dir() + "/models/" + model + "/model.pt2");
      size_t before = conv_bn_pairs(g);
      CHECK(before > 0);
      passes::PassOptions opt;
      opt.verify = true;
      passes::run_graph_passes(g, opt);
      CHECK(conv_bn_pairs(g) == 0);
      CHECK(count_op(g, "_native_batch_norm_legit_no_training") == 0);
      CHECK(count_op(g, "convolution") > 0);
    }
  }
}

TEST_CASE("the folded corpus CNNs still match their references", "[passes][corpus]") {
  if (!require_corpus()) return;
  for (const char* model : {"small_cnn", "mobilenet_v3_small"}) {
    DYNAMIC_SECTION(model) {
      std::string dir = corpus_dir() + "/models/" + model;
      Graph g = load_model(dir + "/model.pt2");
      passes::run_graph_passes(g);
      std::vector<NpyArray> outputs = evaluate(g, read_npy_sequence(dir + "/inputs"));
      std::vector<NpyArray> expected = read_npy_sequence(dir + "/expected");
      REQUIRE(outputs.size() == expected.size());
      for (size_t k = 0; k < outputs.size(); ++k) {
        Comparison c = compare_arrays(outputs[k], expected[k], Tolerance{1e-4, 1e-4});
        INFO(model << " output " << k << ": " << c.message << " (max abs err " << c.max_abs_err << ")");
        CHECK(c.pass);
      }
    }
  }
}

}  // namespace
}  // namespace foundry::test
