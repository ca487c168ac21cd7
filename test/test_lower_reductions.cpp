// Lowering of reductions, scans, softmax and normalizations: one-op graphs evaluated with the
// reference evaluator against hand-computed values, and the corpus samples that use these ops
// against their recorded references.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>

#include "foundry/frontend/frontend.h"
#include "foundry/ir/evaluate.h"
#include "foundry/lower/lowering.h"
#include "foundry/ops/registry.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/npy.h"
#include "foundry/support/error.h"
#include "support.h"

namespace foundry::test {

namespace {

NpyArray npy_f32(std::vector<int64_t> shape, std::vector<double> values) {
  NpyArray a;
  a.dtype = DType::Float32;
  a.shape = std::move(shape);
  a.data.resize(values.size() * 4);
  for (size_t k = 0; k < values.size(); ++k) a.as<float>()[k] = static_cast<float>(values[k]);
  REQUIRE(a.numel() == static_cast<int64_t>(values.size()));
  return a;
}

template <typename T>
NpyArray npy_ints(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> values) {
  NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.data.resize(values.size() * sizeof(T));
  for (size_t k = 0; k < values.size(); ++k) a.as<T>()[k] = static_cast<T>(values[k]);
  REQUIRE(a.numel() == static_cast<int64_t>(values.size()));
  return a;
}
NpyArray npy_i64(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return npy_ints<int64_t>(DType::Int64, std::move(shape), std::move(values));
}
NpyArray npy_i32(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return npy_ints<int32_t>(DType::Int32, std::move(shape), std::move(values));
}
NpyArray npy_b8(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return npy_ints<uint8_t>(DType::Bool, std::move(shape), std::move(values));
}

// Named arguments; tensors are given as "$0", "$1" (the graph's inputs).
struct A {
  std::string name;
  Arg value;
  int input = -1;  // >= 0: the graph input of that number
  bool kwarg = false;
};
A in(const std::string& name, int k) { return A{name, Arg{}, k}; }
A i(const std::string& name, int64_t v) { return A{name, Arg::of_int(v)}; }
A is(const std::string& name, std::vector<int64_t> v) { return A{name, Arg::of_ints(std::move(v))}; }
A b(const std::string& name, bool v) { return A{name, Arg::of_bool(v)}; }
A f(const std::string& name, double v) { return A{name, Arg::of_float(v)}; }
A dt(const std::string& name, DType t) { return A{name, Arg::of_dtype(t), -1, true}; }
A none(const std::string& name) { return A{name, Arg::none()}; }

// Builds a graph of one op over `inputs`, with every output of the op a graph output, lowers it
// and evaluates it.
std::vector<NpyArray> run_op(const std::string& op_name, const std::vector<NpyArray>& inputs,
                             const std::vector<A>& args) {
  Graph g;
  std::vector<Value*> in_values;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Value* v = g.new_value("x" + std::to_string(k), shape::make_type(inputs[k].dtype, inputs[k].shape));
    GraphInput gi;
    gi.kind = InputKind::User;
    gi.value = v;
    g.inputs.push_back(gi);
    in_values.push_back(v);
  }
  const OpInfo* op = find_op(op_name);
  REQUIRE(op != nullptr);
  auto node = std::make_unique<Node>();
  node->name = "n0";
  node->source_name = "n0";
  node->target = op_name;
  node->op = op;
  std::vector<RawArg> raw;
  for (const A& a : args) {
    RawArg r;
    r.name = a.name;
    r.value = a.input >= 0 ? Arg::of_tensor(in_values.at(a.input)) : a.value;
    r.kwarg_only = a.kwarg;
    raw.push_back(r);
  }
  node->args = bind_arguments(*op, raw, &node->arg_names);
  std::vector<TensorType> types = op->infer(*node);
  for (size_t k = 0; k < types.size(); ++k) node->outputs.push_back(g.new_value("out" + std::to_string(k), types[k]));
  Node* n = g.append_node(std::move(node));
  for (Value* v : n->outputs) {
    GraphOutput o;
    o.kind = OutputKind::User;
    o.value = v;
    g.outputs.push_back(o);
  }
  ir::LoopProgram program = lower::lower_graph(g);
  return ir::evaluate_program(program, inputs);
}

void check_f32(const NpyArray& out, std::vector<int64_t> shape, std::vector<double> expected, double tol = 1e-5) {
  REQUIRE(out.dtype == DType::Float32);
  REQUIRE(out.shape == shape);
  REQUIRE(out.numel() == static_cast<int64_t>(expected.size()));
  for (size_t k = 0; k < expected.size(); ++k) {
    double got = out.as<float>()[k], want = expected[k];
    INFO("element " << k << ": got " << got << ", want " << want);
    if (std::isnan(want)) CHECK(std::isnan(got));
    else if (std::isinf(want)) CHECK(got == want);
    else CHECK(std::fabs(got - want) <= tol * (1 + std::fabs(want)));
  }
}

void check_i64(const NpyArray& out, std::vector<int64_t> shape, std::vector<int64_t> expected) {
  REQUIRE(out.dtype == DType::Int64);
  REQUIRE(out.shape == shape);
  REQUIRE(out.numel() == static_cast<int64_t>(expected.size()));
  for (size_t k = 0; k < expected.size(); ++k) {
    INFO("element " << k);
    CHECK(out.as<int64_t>()[k] == expected[k]);
  }
}

void check_bool(const NpyArray& out, std::vector<int64_t> shape, std::vector<int64_t> expected) {
  REQUIRE(out.dtype == DType::Bool);
  REQUIRE(out.shape == shape);
  for (size_t k = 0; k < expected.size(); ++k) {
    INFO("element " << k);
    CHECK(static_cast<int64_t>(out.data[k] != 0) == expected[k]);
  }
}

// [[1, 2, 3], [4, 5, 6]]
NpyArray make_x23() { return npy_f32({2, 3}, {1, 2, 3, 4, 5, 6}); }

}  // namespace

TEST_CASE("lower reductions: sum, mean and prod over dims", "[lower][fast]") {
  const NpyArray x23 = make_x23();
  check_f32(run_op("sum", {x23}, {in("self", 0)})[0], {}, {21});
  check_f32(run_op("sum.dim_IntList", {x23}, {in("self", 0), is("dim", {1})})[0], {2}, {6, 15});
  check_f32(run_op("sum.dim_IntList", {x23}, {in("self", 0), is("dim", {0}), b("keepdim", true)})[0], {1, 3}, {5, 7, 9});
  check_f32(run_op("sum.dim_IntList", {x23}, {in("self", 0), is("dim", {-1}), b("keepdim", true)})[0], {2, 1}, {6, 15});
  check_f32(run_op("sum.dim_IntList", {x23}, {in("self", 0), none("dim")})[0], {}, {21});
  check_f32(run_op("sum.dim_IntList", {x23}, {in("self", 0), is("dim", {})})[0], {}, {21});
  check_f32(run_op("mean.dim", {x23}, {in("self", 0), is("dim", {0, 1}), b("keepdim", true)})[0], {1, 1}, {3.5});
  check_f32(run_op("mean", {x23}, {in("self", 0)})[0], {}, {3.5});
  check_f32(run_op("mean.dim", {x23}, {in("self", 0), is("dim", {-2})})[0], {3}, {2.5, 3.5, 4.5});
  check_f32(run_op("prod", {x23}, {in("self", 0)})[0], {}, {720});
  check_f32(run_op("prod.dim_int", {x23}, {in("self", 0), i("dim", 1)})[0], {2}, {6, 120});
  check_f32(run_op("prod.dim_int", {x23}, {in("self", 0), i("dim", 0), b("keepdim", true)})[0], {1, 3}, {4, 10, 18});
}

TEST_CASE("lower reductions: integer and bool sums accumulate to int64", "[lower][fast]") {
  NpyArray x = npy_i32({2, 2}, {2000000000, 2000000000, -3, 4});
  check_i64(run_op("sum", {x}, {in("self", 0)})[0], {}, {4000000001});
  check_i64(run_op("sum.dim_IntList", {x}, {in("self", 0), is("dim", {0})})[0], {2}, {1999999997, 2000000004});
  check_i64(run_op("prod", {npy_i32({4}, {2, 3, -4, 5})}, {in("self", 0)})[0], {}, {-120});
  NpyArray m = npy_b8({2, 3}, {1, 0, 1, 1, 1, 1});
  check_i64(run_op("sum.dim_IntList", {m}, {in("self", 0), is("dim", {1})})[0], {2}, {2, 3});
  // dtype= converts the input before accumulating.
  check_f32(run_op("sum", {x}, {in("self", 0), dt("dtype", DType::Float32)})[0], {}, {4000000001.0}, 1e-6);
}

TEST_CASE("lower reductions: empty reductions give the identity, mean NaN", "[lower][fast]") {
  NpyArray e = npy_f32({2, 0}, {});
  check_f32(run_op("sum.dim_IntList", {e}, {in("self", 0), is("dim", {1})})[0], {2}, {0, 0});
  check_f32(run_op("prod.dim_int", {e}, {in("self", 0), i("dim", 1)})[0], {2}, {1, 1});
  check_f32(run_op("mean.dim", {e}, {in("self", 0), is("dim", {1})})[0], {2}, {kNaN, kNaN});
  check_f32(run_op("sum", {e}, {in("self", 0)})[0], {}, {0});
  check_f32(run_op("sum.dim_IntList", {e}, {in("self", 0), is("dim", {0})})[0], {0}, {});
  check_f32(run_op("cumsum", {e}, {in("self", 0), i("dim", 1)})[0], {2, 0}, {});
  check_bool(run_op("any.dim", {e}, {in("self", 0), i("dim", 1)})[0], {2}, {0, 0});
}

TEST_CASE("lower reductions: 0-d inputs", "[lower][fast]") {
  NpyArray s = npy_f32({}, {-2.5});
  check_f32(run_op("sum.dim_IntList", {s}, {in("self", 0), is("dim", {0})})[0], {}, {-2.5});
  check_f32(run_op("amax", {s}, {in("self", 0), is("dim", {-1}), b("keepdim", true)})[0], {}, {-2.5});
  check_i64(run_op("argmax", {s}, {in("self", 0), i("dim", 0)})[0], {}, {0});
  check_f32(run_op("cumsum", {s}, {in("self", 0), i("dim", 0)})[0], {}, {-2.5});
  check_f32(run_op("_softmax", {s}, {in("self", 0), i("dim", 0), b("half_to_float", false)})[0], {}, {1});
  check_f32(run_op("_log_softmax", {s}, {in("self", 0), i("dim", -1), b("half_to_float", false)})[0], {}, {0});
}

TEST_CASE("lower reductions: amax, amin, max, min propagate NaN", "[lower][fast]") {
  const NpyArray x23 = make_x23();
  NpyArray x = npy_f32({2, 3}, {1, kNaN, 3, -4, 5, -kInf});
  check_f32(run_op("amax", {x}, {in("self", 0), is("dim", {1})})[0], {2}, {kNaN, 5});
  check_f32(run_op("amin", {x}, {in("self", 0), is("dim", {1}), b("keepdim", true)})[0], {2, 1}, {kNaN, -kInf});
  check_f32(run_op("amax", {x}, {in("self", 0), is("dim", {0})})[0], {3}, {1, kNaN, 3});
  check_f32(run_op("amax", {x23}, {in("self", 0)})[0], {}, {6});
  check_f32(run_op("max", {x}, {in("self", 0)})[0], {}, {kNaN});
  check_f32(run_op("min", {x23}, {in("self", 0)})[0], {}, {1});
  NpyArray n = npy_i64({3}, {7, -9, 2});
  check_i64(run_op("amax", {n}, {in("self", 0), is("dim", {0})})[0], {}, {7});
  check_i64(run_op("min", {n}, {in("self", 0)})[0], {}, {-9});
}

TEST_CASE("lower reductions: argmax and argmin", "[lower][fast]") {
  const NpyArray x23 = make_x23();
  NpyArray x = npy_f32({2, 4}, {3, 7, 7, 1, 2, kNaN, 9, kNaN});
  check_i64(run_op("argmax", {x}, {in("self", 0), i("dim", 1)})[0], {2}, {1, 1});
  check_i64(run_op("argmin", {x}, {in("self", 0), i("dim", 1)})[0], {2}, {3, 1});
  check_i64(run_op("argmax", {x}, {in("self", 0), i("dim", 0), b("keepdim", true)})[0], {1, 4}, {0, 1, 1, 1});
  // dim=None: the position in the flattened tensor.
  check_i64(run_op("argmax", {x23}, {in("self", 0)})[0], {}, {5});
  check_i64(run_op("argmin", {x23}, {in("self", 0), none("dim"), b("keepdim", true)})[0], {1, 1}, {0});
  check_i64(run_op("argmax", {x}, {in("self", 0)})[0], {}, {5});
  NpyArray n = npy_i64({5}, {4, 9, 1, 9, 1});
  check_i64(run_op("argmax", {n}, {in("self", 0), i("dim", -1)})[0], {}, {1});
  check_i64(run_op("argmin", {n}, {in("self", 0)})[0], {}, {2});
}

TEST_CASE("lower reductions: max.dim and min.dim give values and first indices", "[lower][fast]") {
  NpyArray x = npy_f32({2, 3}, {5, 1, 5, 0, kNaN, -1});
  auto mx = run_op("max.dim", {x}, {in("self", 0), i("dim", 1)});
  check_f32(mx[0], {2}, {5, kNaN});
  check_i64(mx[1], {2}, {0, 1});
  auto mn = run_op("min.dim", {x}, {in("self", 0), i("dim", 0), b("keepdim", true)});
  check_f32(mn[0], {1, 3}, {0, kNaN, -1});
  check_i64(mn[1], {1, 3}, {1, 1, 1});
}

TEST_CASE("lower reductions: any", "[lower][fast]") {
  NpyArray m = npy_b8({2, 3}, {0, 0, 0, 0, 1, 0});
  check_bool(run_op("any", {m}, {in("self", 0)})[0], {}, {1});
  check_bool(run_op("any.dim", {m}, {in("self", 0), i("dim", 1)})[0], {2}, {0, 1});
  check_bool(run_op("any.dims", {m}, {in("self", 0), is("dim", {0}), b("keepdim", true)})[0], {1, 3}, {0, 1, 0});
  NpyArray x = npy_f32({3}, {0, kNaN, 0});
  check_bool(run_op("any.dim", {x}, {in("self", 0), i("dim", 0)})[0], {}, {1});
}

TEST_CASE("lower reductions: var and var_mean", "[lower][fast]") {
  NpyArray x = npy_f32({2, 4}, {1, 2, 3, 4, 2, 2, 2, 10});
  check_f32(run_op("var.correction", {x}, {in("self", 0), is("dim", {1})})[0], {2}, {5.0 / 3, 16});
  check_f32(run_op("var.correction", {x}, {in("self", 0), is("dim", {1}), A{"correction", Arg::of_int(0), -1, true}})[0],
            {2}, {1.25, 12});
  check_f32(run_op("var.correction", {x}, {in("self", 0), none("dim"), b("keepdim", true)})[0], {1, 1},
            {(2.25 * 2.25 + 1.25 * 1.25 * 4 + 0.25 * 0.25 + 0.75 * 0.75 + 6.75 * 6.75) / 7});
  auto vm = run_op("var_mean.correction", {x}, {in("self", 0), is("dim", {0})});
  check_f32(vm[0], {4}, {0.5, 0, 0.5, 18});
  check_f32(vm[1], {4}, {1.5, 2, 2.5, 7});
  // One element with correction 1: 0/0.
  check_f32(run_op("var.correction", {npy_f32({1}, {3})}, {in("self", 0)})[0], {}, {kNaN});
}

TEST_CASE("lower reductions: cumsum and cumprod", "[lower][fast]") {
  const NpyArray x23 = make_x23();
  check_f32(run_op("cumsum", {x23}, {in("self", 0), i("dim", 1)})[0], {2, 3}, {1, 3, 6, 4, 9, 15});
  check_f32(run_op("cumsum", {x23}, {in("self", 0), i("dim", -2)})[0], {2, 3}, {1, 2, 3, 5, 7, 9});
  check_f32(run_op("cumprod", {x23}, {in("self", 0), i("dim", 1)})[0], {2, 3}, {1, 2, 6, 4, 20, 120});
  // NaN only spreads forward.
  check_f32(run_op("cumsum", {npy_f32({4}, {1, 2, kNaN, 4})}, {in("self", 0), i("dim", 0)})[0], {4}, {1, 3, kNaN,
            kNaN});
  check_i64(run_op("cumsum", {npy_b8({4}, {1, 0, 1, 1})}, {in("self", 0), i("dim", 0)})[0], {4}, {1, 1, 2, 3});
  check_i64(run_op("cumprod", {npy_i32({3}, {-2, 3, 4})}, {in("self", 0), i("dim", 0)})[0], {3}, {-2, -6, -24});
}

TEST_CASE("lower reductions: logcumsumexp is stable and keeps infinities", "[lower][fast]") {
  const NpyArray x23 = make_x23();
  auto lse = [](std::vector<double> v) {
    double s = 0;
    for (double x : v) s += std::exp(x);
    return std::log(s);
  };
  check_f32(run_op("logcumsumexp", {x23}, {in("self", 0), i("dim", 1)})[0], {2, 3},
            {1, lse({1, 2}), lse({1, 2, 3}), 4, lse({4, 5}), lse({4, 5, 6})});
  // No overflow at 1000; a leading -inf adds nothing; +inf stays +inf; NaN spreads forward.
  check_f32(run_op("logcumsumexp", {npy_f32({3}, {1000, 1000, 1000})}, {in("self", 0), i("dim", 0)})[0], {3},
            {1000, 1000 + std::log(2.0), 1000 + std::log(3.0)});
  check_f32(run_op("logcumsumexp", {npy_f32({4}, {-kInf, -kInf, 0, kInf})}, {in("self", 0), i("dim", 0)})[0], {4},
            {-kInf, -kInf, 0, kInf});
  check_f32(run_op("logcumsumexp", {npy_f32({3}, {0, kNaN, 0})}, {in("self", 0), i("dim", 0)})[0], {3}, {0, kNaN,
            kNaN});
}

TEST_CASE("lower reductions: searchsorted and bucketize count the elements below each value", "[lower][fast]") {
  const NpyArray seq = npy_f32({5}, {1, 3, 5, 7, 9}), values = npy_f32({2, 3}, {0, 3, 6, 9, 10, 5});
  auto sorted_search = [&](std::vector<A> extra, const std::vector<NpyArray>& inputs) {
    std::vector<A> args = {in("sorted_sequence", 0), in("self", 1)};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_op("searchsorted.Tensor", inputs, args)[0];
  };
  check_i64(sorted_search({}, {seq, values}), {2, 3}, {0, 1, 3, 4, 5, 2});
  check_i64(sorted_search({A{"right", Arg::of_bool(true), -1, true}}, {seq, values}), {2, 3}, {0, 2, 3, 5, 5, 3});
  check_i64(sorted_search({A{"side", Arg::of_string("right"), -1, true}}, {seq, values}), {2, 3}, {0, 2, 3, 5, 5, 3});
  // One sorted row per row of values; `sorter` gives the order of an unsorted sequence.
  const NpyArray rows = npy_f32({2, 2}, {1, 2, 10, 20});
  check_i64(sorted_search({}, {rows, npy_f32({2, 2}, {1.5, 3, 5, 15})}), {2, 2}, {1, 2, 0, 1});
  const NpyArray unsorted = npy_f32({3}, {5, 1, 3});
  check_i64(sorted_search({A{"sorter", Arg{}, 2, true}}, {unsorted, npy_f32({2}, {2, 4}), npy_i64({3}, {1, 2, 0})}),
            {2}, {1, 2});
  auto buckets = run_op("bucketize.Tensor", {npy_f32({3}, {1, 4, 9}), seq},
                        {in("self", 0), in("boundaries", 1), A{"out_int32", Arg::of_bool(true), -1, true}});
  REQUIRE(buckets[0].dtype == DType::Int32);
  CHECK(std::vector<int32_t>(buckets[0].as<int32_t>(), buckets[0].as<int32_t>() + 3) == std::vector<int32_t>{0, 2, 4});
}

TEST_CASE("lower reductions: median is the lower median and nanmedian leaves NaN out", "[lower][fast]") {
  // Rows: an even count (the lower of the middle two), a NaN, a tie, all NaN.
  const NpyArray x = npy_f32({4, 4}, {4, 1, 3, 2, 5, kNaN, 1, 3, 2, 7, 2, 9, kNaN, kNaN, kNaN, kNaN});
  auto rows = run_op("nanmedian.dim", {x}, {in("self", 0), i("dim", 1)});
  check_f32(rows[0], {4}, {2, 3, 2, kNaN});
  const std::vector<int64_t> positions(rows[1].as<int64_t>(), rows[1].as<int64_t>() + 3);
  CHECK(positions[0] == 3);
  CHECK(positions[1] == 3);
  CHECK((positions[2] == 0 || positions[2] == 2));  // either 2 of the tie
  check_f32(run_op("median", {npy_f32({2, 2}, {4, 1, 3, 2})}, {in("self", 0)})[0], {}, {2});
  check_f32(run_op("median", {npy_f32({3}, {1, kNaN, 3})}, {in("self", 0)})[0], {}, {kNaN});
  check_f32(run_op("nanmedian", {npy_f32({3}, {1, kNaN, 3})}, {in("self", 0)})[0], {}, {1});
  check_f32(run_op("nanmedian", {npy_f32({}, {5})}, {in("self", 0)})[0], {}, {5});
}

TEST_CASE("lower reductions: histc over a given range and over the data's own", "[lower][fast]") {
  const NpyArray x = npy_f32({8}, {0, 1, 2, 3, 4, 5, kNaN, 10});
  // [0, 5] in 5 bins: 5 is in the last bin, 10 and NaN are not counted.
  check_f32(run_op("histc", {x}, {in("self", 0), i("bins", 5), f("min", 0), f("max", 5)})[0], {5}, {1, 1, 1, 1, 2});
  // min == max: the data's range [1, 3]; one value: widened to [1, 3] around 2.
  check_f32(run_op("histc", {npy_f32({3}, {1, 2, 3})}, {in("self", 0), i("bins", 2)})[0], {2}, {1, 2});
  check_f32(run_op("histc", {npy_f32({2}, {2, 2})}, {in("self", 0), i("bins", 4)})[0], {4}, {0, 0, 2, 0});
}

TEST_CASE("lower reductions: softmax and log_softmax", "[lower][fast]") {
  const NpyArray x23 = make_x23();
  double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), s = e1 + e2 + e3;
  auto sm = run_op("_softmax", {x23}, {in("self", 0), i("dim", 1), b("half_to_float", false)});
  check_f32(sm[0], {2, 3}, {e1 / s, e2 / s, e3 / s, e1 / s, e2 / s, e3 / s});
  auto ls = run_op("_log_softmax", {x23}, {in("self", 0), i("dim", -1), b("half_to_float", false)});
  double l = std::log(s);
  check_f32(ls[0], {2, 3}, {1 - l, 2 - l, 3 - l, 1 - l, 2 - l, 3 - l});
  // Large values do not overflow; a row of -inf gives NaN.
  NpyArray big = npy_f32({2, 2}, {1000, 1000, -kInf, -kInf});
  check_f32(run_op("_softmax", {big}, {in("self", 0), i("dim", 1), b("half_to_float", false)})[0], {2, 2},
            {0.5, 0.5, kNaN, kNaN});
  auto col = run_op("_softmax", {x23}, {in("self", 0), i("dim", 0), b("half_to_float", false)});
  double a = 1 / (1 + std::exp(3.0));
  check_f32(col[0], {2, 3}, {a, a, a, 1 - a, 1 - a, 1 - a});
}

TEST_CASE("lower norms: native_layer_norm", "[lower][fast]") {
  NpyArray x = npy_f32({2, 4}, {1, 2, 3, 4, -1, -1, 1, 1});
  NpyArray w = npy_f32({4}, {1, 2, 1, 0.5}), bias = npy_f32({4}, {0, 0, 1, -1});
  auto out = run_op("native_layer_norm", {x, w, bias},
                    {in("input", 0), is("normalized_shape", {4}), in("weight", 1), in("bias", 2), f("eps", 0.0)});
  double r0 = 1 / std::sqrt(1.25);
  check_f32(out[0], {2, 4}, {-1.5 * r0, -0.5 * r0 * 2, 0.5 * r0 + 1, 1.5 * r0 * 0.5 - 1, -1, -2, 2, -0.5});
  check_f32(out[1], {2, 1}, {2.5, 0});
  check_f32(out[2], {2, 1}, {r0, 1});
  // No affine parameters, two normalized dims, eps.
  auto plain = run_op("native_layer_norm", {npy_f32({1, 2, 2}, {0, 2, 4, 6})},
                      {in("input", 0), is("normalized_shape", {2, 2}), none("weight"), none("bias"), f("eps", 1e-5)});
  double r = 1 / std::sqrt(5 + 1e-5);
  check_f32(plain[0], {1, 2, 2}, {-3 * r, -r, r, 3 * r});
  check_f32(plain[1], {1, 1, 1}, {3});
  check_f32(plain[2], {1, 1, 1}, {r});
}

TEST_CASE("lower norms: native_group_norm", "[lower][fast]") {
  // N=1, C=4, HxW=2, 2 groups: group 0 = {1,2,3,4}, group 1 = {0,0,0,8}.
  NpyArray x = npy_f32({1, 4, 2}, {1, 2, 3, 4, 0, 0, 0, 8});
  NpyArray w = npy_f32({4}, {1, 1, 2, 2}), bias = npy_f32({4}, {0, 1, 0, 1});
  auto out = run_op("native_group_norm", {x, w, bias},
                    {in("input", 0), in("weight", 1), in("bias", 2), i("N", 1), i("C", 4), i("HxW", 2), i("group", 2),
                     f("eps", 0.0)});
  double r0 = 1 / std::sqrt(1.25), r1 = 1 / std::sqrt(12.0);
  check_f32(out[0], {1, 4, 2},
            {-1.5 * r0, -0.5 * r0, 0.5 * r0 + 1, 1.5 * r0 + 1, -2 * r1 * 2, -2 * r1 * 2, -2 * r1 * 2 + 1, 6 * r1 * 2 + 1});
  check_f32(out[1], {1, 2}, {2.5, 2});
  check_f32(out[2], {1, 2}, {r0, r1});
}

TEST_CASE("lower norms: _native_batch_norm_legit_no_training", "[lower][fast]") {
  NpyArray x = npy_f32({1, 2, 2}, {1, 2, 3, 4});
  NpyArray w = npy_f32({2}, {2, 1}), bias = npy_f32({2}, {0, -1}), rm = npy_f32({2}, {1, 2}),
           rv = npy_f32({2}, {4, 0.25});
  auto out = run_op("_native_batch_norm_legit_no_training", {x, w, bias, rm, rv},
                    {in("input", 0), in("weight", 1), in("bias", 2), in("running_mean", 3), in("running_var", 4),
                     f("momentum", 0.1), f("eps", 0.0)});
  check_f32(out[0], {1, 2, 2}, {0, 1, 1, 3});
  check_f32(out[1], {0}, {});
  check_f32(out[2], {0}, {});
  auto plain = run_op("_native_batch_norm_legit_no_training", {x, rm, rv},
                      {in("input", 0), none("weight"), none("bias"), in("running_mean", 1), in("running_var", 2),
                       f("momentum", 0.1), f("eps", 1e-5)});
  check_f32(plain[0], {1, 2, 2},
            {0, 1 / std::sqrt(4 + 1e-5), 1 / std::sqrt(0.25 + 1e-5), 2 / std::sqrt(0.25 + 1e-5)});
}

// Samples exported by scripts/export_core_ops_samples.py (torch 2.15) with PyTorch's outputs.
namespace {
std::string core_ops_sample(const std::string& name) { return test_source_dir() + "/data/core_ops/" + name; }
}  // namespace

// sort (ascending, descending, along dim 0 as argsort exports) of rows with ties, a NaN and -inf,
// and of int64; topk largest and smallest along both dims (of distinct values: PyTorch's topk
// does not keep equal elements in input order).
TEST_CASE("lower sorting: sort and topk match PyTorch interpreted and compiled", "[lower][fast]") {
  for (const char* archive : {"model.pt2", "model.raw.pt2"})  // the raw one: argsort decomposed
    CHECK(run_sample_both_ways(core_ops_sample("sort_topk"), archive) == "");
}

// InstanceNorm2d with and without affine parameters and BatchNorm2d without running statistics:
// _native_batch_norm_legit.no_stats normalizing by the batch's statistics.
TEST_CASE("lower norms: _native_batch_norm_legit.no_stats matches PyTorch interpreted and compiled",
          "[lower][fast]") {
  for (const char* archive : {"model.pt2", "model.raw.pt2"})  // the raw one: instance_norm, batch_norm decomposed
    CHECK(run_sample_both_ways(core_ops_sample("instance_norm"), archive) == "");
}

// The tier-1 corpus samples that use these ops, lowered and evaluated against their references.
// Samples that also use an op without a lowering (another family's, not yet written) are skipped.
TEST_CASE("lower reductions: corpus samples", "[lower][corpus]") {
  if (!require_corpus()) return;
  namespace fs = std::filesystem;
  const std::vector<std::string> mine = {
      "sum", "sum.dim_IntList", "mean", "mean.dim", "amax", "amin", "prod", "prod.dim_int", "any", "any.dim",
      "any.dims", "argmax", "argmin", "max", "min", "max.dim", "min.dim", "var.correction", "var_mean.correction",
      "_softmax", "_log_softmax", "native_layer_norm", "native_group_norm", "_native_batch_norm_legit_no_training",
      "cumsum", "cumprod"};
  std::string root = corpus_dir() + "/opinfo/";
  std::ifstream tier1(root + "tier1.txt");
  REQUIRE(tier1);
  auto read_seq = [](const std::string& dir) {
    std::vector<NpyArray> v;
    for (int k = 0; fs::exists(dir + "/" + std::to_string(k) + ".npy"); ++k)
      v.push_back(read_npy(dir + "/" + std::to_string(k) + ".npy"));
    return v;
  };
  int checked = 0, skipped = 0;
  std::string sample;
  while (std::getline(tier1, sample)) {
    if (sample.empty()) continue;
    Graph g = load_model(root + sample + "/model.pt2");
    bool uses_mine = false, lowerable = true;
    for (const auto& n : g.nodes) {
      uses_mine |= std::find(mine.begin(), mine.end(), n->target) != mine.end();
      lowerable &= lower::find_lowering(n->target) != nullptr;
    }
    if (!uses_mine) continue;
    if (!lowerable) {
      ++skipped;
      continue;
    }
    INFO("sample " << sample);
    ir::LoopProgram program = lower::lower_graph(g);
    std::vector<NpyArray> outs = ir::evaluate_program(program, read_seq(root + sample + "/inputs"));
    std::vector<NpyArray> refs = read_seq(root + sample + "/expected");
    REQUIRE(outs.size() == refs.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      INFO("output " << k);
      REQUIRE(outs[k].dtype == refs[k].dtype);
      REQUIRE(outs[k].shape == refs[k].shape);
      Comparison c = compare_arrays(outs[k], refs[k]);
      INFO(c.message);
      CHECK(c.pass);
    }
    ++checked;
  }
  if (skipped) WARN(skipped << " samples skipped: they use ops without lowerings yet");
  CHECK(checked > 0);
}

}  // namespace foundry::test
