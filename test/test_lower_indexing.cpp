// Lowerings of indexing, scatter, concatenation, padding and repetition ops: small hand-written
// graphs with hand-computed results (the corner cases: boolean masks, non-adjacent index tensors,
// duplicate writes, include_self=False, negative indices and pads, legacy empty tensors), then
// every corpus sample of the family, lowered, run by the reference evaluator and compared with
// PyTorch's eager results.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "foundry/frontend/frontend.h"
#include "foundry/ir/evaluate.h"
#include "foundry/lower/lowering.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/npy.h"
#include "foundry/support/error.h"
#include "support.h"

using foundry::DType;
using foundry::NpyArray;

namespace {

// "" when the sample's lowered program reproduces expected/ (float: |x-r| <= 1e-4 + 1e-4|r|, NaN
// where NaN; other types exact), else what differs.
std::string lowered_sample_mismatch(const std::string& name) {
  std::string dir = corpus_dir() + "/opinfo/" + name;
  foundry::Graph g = foundry::load_model(dir + "/model.pt2");
  foundry::ir::LoopProgram program = foundry::lower::lower_graph(g);
  std::vector<NpyArray> inputs;
  for (int i = 0; std::filesystem::exists(dir + "/inputs/" + std::to_string(i) + ".npy"); ++i)
    inputs.push_back(foundry::read_npy(dir + "/inputs/" + std::to_string(i) + ".npy"));
  std::vector<NpyArray> outs = foundry::ir::evaluate_program(program, inputs);
  std::string err;
  for (size_t o = 0; o < outs.size(); ++o) {
    NpyArray ref = foundry::read_npy(dir + "/expected/" + std::to_string(o) + ".npy");
    std::string tag = "output " + std::to_string(o) + ": ";
    if (ref.dtype != outs[o].dtype) { err += tag + "dtype differs; "; continue; }
    if (ref.shape != outs[o].shape) { err += tag + "shape differs; "; continue; }
    for (int64_t i = 0; i < ref.numel(); ++i) {
      double r = element_as_double(ref, i), x = element_as_double(outs[o], i);
      bool ok = foundry::is_floating(ref.dtype)
                    ? (std::isnan(r) ? std::isnan(x) : (x == r || std::fabs(x - r) <= 1e-4 + 1e-4 * std::fabs(r)))
                    : x == r;
      if (!ok) {
        err += tag + "element " + std::to_string(i) + " is " + std::to_string(x) + ", expected " + std::to_string(r) + "; ";
        break;
      }
    }
  }
  return err;
}

// --- hand-written graphs ------------------------------------------------------------------------

using nlohmann::json;

struct Tensor {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<double> values;  // C order
};

Tensor f32(std::vector<int64_t> shape, std::vector<double> v) { return {DType::Float32, std::move(shape), std::move(v)}; }
Tensor i64(std::vector<int64_t> shape, std::vector<double> v) { return {DType::Int64, std::move(shape), std::move(v)}; }
Tensor b8(std::vector<int64_t> shape, std::vector<double> v) { return {DType::Bool, std::move(shape), std::move(v)}; }

json meta(DType dtype, const std::vector<int64_t>& shape) {
  json sizes = json::array();
  for (int64_t d : shape) {
    json size;
    size["as_int"] = d;
    sizes.push_back(size);
  }
  json m;
  m["dtype"] = foundry::dtype_to_export(dtype);
  m["sizes"] = sizes;
  return m;
}

// (not `ref`: ADL would find std::ref for std::string arguments)
json tref(const std::string& name) {
  json r;
  r["as_tensor"]["name"] = name;
  return r;
}

NpyArray to_npy(const Tensor& t) {
  NpyArray a;
  a.dtype = t.dtype;
  a.shape = t.shape;
  a.data.resize(t.values.size() * foundry::dtype_size(t.dtype));
  for (size_t i = 0; i < t.values.size(); ++i) {
    if (t.dtype == DType::Float32) a.as<float>()[i] = static_cast<float>(t.values[i]);
    else if (t.dtype == DType::Int64) a.as<int64_t>()[i] = static_cast<int64_t>(t.values[i]);
    else a.data[i] = t.values[i] != 0;
  }
  return a;
}

// Runs one node `target(args)` over inputs ts_0, ts_1, ... with one output of `expected`'s dtype and
// shape, and returns the evaluated output.
NpyArray run_one(const std::string& target, const json& args, const std::vector<Tensor>& inputs,
                 const Tensor& expected) {
  json values, graph_inputs = json::array(), specs = json::array();
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "ts_" + std::to_string(i);
    values[name] = meta(inputs[i].dtype, inputs[i].shape);
    graph_inputs.push_back(tref(name));
    json spec;
    spec["user_input"]["arg"] = tref(name);
    specs.push_back(spec);
  }
  values["out"] = meta(expected.dtype, expected.shape);
  json node_inputs = json::array();
  for (const auto& [name, arg] : args.items()) {
    json in;
    in["name"] = name;
    in["arg"] = arg;
    in["kind"] = 1;
    node_inputs.push_back(in);
  }
  json node;
  node["target"] = "torch.ops.aten." + target;
  node["inputs"] = node_inputs;
  node["outputs"] = json::array();
  node["outputs"].push_back(tref("out"));
  node["name"] = "out";
  json model;
  json& graph = model["graph_module"]["graph"];
  graph["inputs"] = graph_inputs;
  graph["outputs"] = node["outputs"];
  graph["nodes"] = json::array();
  graph["nodes"].push_back(node);
  graph["tensor_values"] = values;
  json& signature = model["graph_module"]["signature"];
  signature["input_specs"] = specs;
  json out_spec;
  out_spec["user_output"]["arg"] = tref("out");
  signature["output_specs"] = json::array();
  signature["output_specs"].push_back(out_spec);
  model["schema_version"]["major"] = 8;
  model["schema_version"]["minor"] = 17;
  model["verifiers"] = json::array();
  model["verifiers"].push_back("ATEN");
  TempDir dir("foundry_lower_indexing_");
  std::filesystem::create_directories(dir / "model/models");
  write_file(dir / "model/models/model.json", model.dump());
  foundry::Graph g = foundry::load_model(dir / "model");
  foundry::ir::LoopProgram program = foundry::lower::lower_graph(g);
  std::vector<NpyArray> in;
  for (const Tensor& t : inputs) in.push_back(to_npy(t));
  std::vector<NpyArray> outs = foundry::ir::evaluate_program(program, in);
  REQUIRE(outs.size() == 1);
  return outs[0];
}

std::vector<double> values_as_double(const NpyArray& a) {
  std::vector<double> v;
  for (int64_t i = 0; i < a.numel(); ++i) v.push_back(element_as_double(a, i));
  return v;
}

// Checks the node against hand-computed values (NaN matches NaN; floats within 1e-6).
void expect(const std::string& target, const json& args, const std::vector<Tensor>& inputs, const Tensor& expected) {
  INFO(target << " " << args.dump());
  NpyArray out = run_one(target, args, inputs, expected);
  CHECK(out.dtype == expected.dtype);
  CHECK(out.shape == expected.shape);
  std::vector<double> got = values_as_double(out);
  REQUIRE(got.size() == expected.values.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    if (std::isnan(expected.values[i])) CHECK(std::isnan(got[i]));
    else CHECK(got[i] == Approx(expected.values[i]).margin(1e-6));
  }
}

json tagged(const std::string& tag, json value) {
  json j;
  j[tag] = std::move(value);
  return j;
}
json json_ints(std::vector<int64_t> v) { return tagged("as_ints", v); }
json integer(int64_t v) { return tagged("as_int", v); }
json boolean(bool v) { return tagged("as_bool", v); }
json text(const std::string& v) { return tagged("as_string", v); }
json number(double v) { return tagged("as_float", v); }
// A Tensor[] argument (`optional` false) or a Tensor?[] one; "" is None.
json json_tensors(std::vector<std::string> names, bool optional) {
  json list = json::array();
  for (const auto& n : names) {
    if (!optional) list.push_back(tagged("name", n));
    else list.push_back(n.empty() ? tagged("as_none", true) : tref(n));
  }
  return tagged(optional ? "as_optional_tensors" : "as_tensors", list);
}

// Runs the tier-1 samples <prefix>__<dtype>__<k> of each prefix.
void check_family(const std::vector<std::string>& prefixes) {
  if (!require_corpus()) return;
  std::set<std::string> tier1;
  {
    std::istringstream in(read_file(corpus_dir() + "/opinfo/tier1.txt"));
    for (std::string line; std::getline(in, line);) tier1.insert(line);
  }
  for (const std::string& prefix : prefixes)
    for (const char* dtype : {"float32", "int64", "bool"})
      for (int k = 0; k < 3; ++k) {
        std::string name = prefix + "__" + dtype + "__" + std::to_string(k);
        if (!tier1.count(name)) continue;
        INFO(name);
        std::string err;
        try {
          err = lowered_sample_mismatch(name);
        } catch (const std::exception& e) {
          err = e.what();
        }
        CHECK(err == "");
      }
}

}  // namespace

TEST_CASE("advanced indexing follows PyTorch's placement rule", "[lower][fast]") {
  Tensor x = f32({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  // Index tensors separated by a kept dim: the broadcast dim goes first. out[k, j] = x[i0[k], j, i2[k]].
  expect("index.Tensor", {{"self", tref("ts_0")}, {"indices", json_tensors({"ts_1", "", "ts_2"}, true)}},
         {x, i64({2}, {1, -2}), i64({2}, {0, 1})}, f32({2, 3}, {6, 8, 10, 1, 3, 5}));
  // Adjacent index tensors broadcast together ([2,1] with [3]) and stay in place.
  expect("index.Tensor", {{"self", tref("ts_0")}, {"indices", json_tensors({"", "ts_1", "ts_2"}, true)}},
         {x, i64({2, 1}, {2, 0}), i64({2}, {1, 0})}, f32({2, 2, 2}, {5, 4, 1, 0, 11, 10, 7, 6}));
}

TEST_CASE("gather, index_select and embedding reject negative and out-of-range indices, as PyTorch does", "[lower][fast]") {
  // (torch.gather(x, 1, tensor([[-1]])) raises "index -1 is out of bounds"; x[tensor([-1])] wraps.)
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  const json gather = {{"self", tref("ts_0")}, {"dim", integer(1)}, {"index", tref("ts_1")}};
  const json select = {{"self", tref("ts_0")}, {"dim", integer(0)}, {"index", tref("ts_1")}};
  const json embedding = {{"weight", tref("ts_0")}, {"indices", tref("ts_1")}};
  expect("gather.default", gather, {x, i64({2, 2}, {2, 0, 1, 0})}, f32({2, 2}, {3, 1, 5, 4}));
  expect("index_select.default", select, {x, i64({3}, {1, 1, 0})}, f32({3, 3}, {4, 5, 6, 4, 5, 6, 1, 2, 3}));
  expect("embedding.default", embedding, {x, i64({1, 2}, {1, 0})}, f32({1, 2, 3}, {4, 5, 6, 1, 2, 3}));
  for (double bad : {3.0, -1.0}) {  // i64's values are doubles
    INFO("index " << bad);
    CHECK_THROWS_AS(run_one("gather.default", gather, {x, i64({2, 1}, {0, bad})}, f32({2, 1}, {0, 0})), foundry::UserError);
    CHECK_THROWS_AS(run_one("index_select.default", select, {x, i64({1}, {bad})}, f32({1, 3}, {0, 0, 0})),
                    foundry::UserError);
    CHECK_THROWS_AS(run_one("embedding.default", embedding, {x, i64({1}, {bad})}, f32({1, 3}, {0, 0, 0})),
                    foundry::UserError);
  }
}

TEST_CASE("index_put: duplicates, accumulation and boolean masks", "[lower][fast]") {
  json put = {{"self", tref("ts_0")}, {"indices", json_tensors({"ts_1"}, false)}, {"values", tref("ts_2")}};
  json acc = put;
  acc["accumulate"] = boolean(true);
  Tensor zeros3 = f32({3}, {0, 0, 0});
  // Without accumulate the last write wins; with it every write adds.
  expect("index_put.default", put, {zeros3, i64({3}, {0, 2, 0}), f32({3}, {1, 2, 3})}, f32({3}, {3, 0, 2}));
  expect("index_put.default", acc, {zeros3, i64({3}, {0, 2, 0}), f32({3}, {1, 2, 3})}, f32({3}, {4, 0, 2}));
  // A mask takes the values of its true positions in order, or one broadcast value.
  Tensor x = f32({4, 2}, {1, 1, 1, 1, 1, 1, 1, 1});
  Tensor mask = b8({4}, {1, 0, 0, 1});
  expect("index_put.default", put, {x, mask, f32({2, 2}, {5, 6, 7, 8})}, f32({4, 2}, {5, 6, 1, 1, 1, 1, 7, 8}));
  expect("index_put.default", acc, {x, mask, f32({2, 2}, {5, 6, 7, 8})}, f32({4, 2}, {6, 7, 1, 1, 1, 1, 8, 9}));
  expect("index_put.default", put, {x, mask, f32({2}, {5, 6})}, f32({4, 2}, {5, 6, 1, 1, 1, 1, 5, 6}));
}

TEST_CASE("scatter_reduce: include_self and the reductions", "[lower][fast]") {
  auto args = [](const std::string& reduce, bool include_self) {
    json a = {{"self", tref("ts_0")}, {"dim", integer(0)}, {"index", tref("ts_1")}, {"src", tref("ts_2")},
              {"reduce", text(reduce)}};
    if (!include_self) a["include_self"] = boolean(false);
    return a;
  };
  Tensor self = f32({4}, {5, 5, 5, 5});
  Tensor index = i64({4}, {0, 0, 2, 3});
  Tensor src = f32({4}, {1, 3, -2, kNaN});
  expect("scatter_reduce.two", args("amax", false), {self, index, src}, f32({4}, {3, 5, -2, kNaN}));
  expect("scatter_reduce.two", args("amax", true), {self, index, src}, f32({4}, {5, 5, 5, kNaN}));
  expect("scatter_reduce.two", args("amin", false), {self, index, src}, f32({4}, {1, 5, -2, kNaN}));
  expect("scatter_reduce.two", args("prod", false), {self, index, src}, f32({4}, {3, 5, -2, kNaN}));
  expect("scatter_reduce.two", args("sum", true), {self, index, src}, f32({4}, {9, 5, 3, kNaN}));
  expect("scatter_reduce.two", args("mean", false), {self, index, src}, f32({4}, {2, 5, -2, kNaN}));
  expect("scatter_reduce.two", args("mean", true), {self, index, src}, f32({4}, {3, 5, 1.5, kNaN}));
  // Integer means round down.
  Tensor iself = i64({3}, {10, 1, 7});
  Tensor isrc = i64({3}, {3, 4, -8});
  Tensor iindex = i64({3}, {0, 0, 1});
  expect("scatter_reduce.two", args("mean", true), {iself, iindex, isrc}, i64({3}, {5, -4, 7}));
  expect("scatter_reduce.two", args("mean", false), {iself, iindex, isrc}, i64({3}, {3, -8, 7}));
}

TEST_CASE("scatter, select_scatter and slice_scatter", "[lower][fast]") {
  Tensor x = f32({2, 3}, {0, 0, 0, 0, 0, 0});
  expect("scatter.src", {{"self", tref("ts_0")}, {"dim", integer(1)}, {"index", tref("ts_1")}, {"src", tref("ts_2")}},
         {x, i64({2, 2}, {2, 2, 2, 0}), f32({2, 3}, {1, 2, 9, 3, 4, 9})}, f32({2, 3}, {0, 0, 2, 4, 0, 3}));
  CHECK_THROWS_AS(run_one("scatter.src", {{"self", tref("ts_0")}, {"dim", integer(1)}, {"index", tref("ts_1")}, {"src", tref("ts_2")}},
                          {x, i64({1, 1}, {-1}), f32({1, 1}, {1})}, x),
                  foundry::UserError);  // torch.scatter raises for -1 too
  expect("scatter.value", {{"self", tref("ts_0")}, {"dim", integer(0)}, {"index", tref("ts_1")}, {"value", number(7.0)}},
         {x, i64({1, 2}, {1, 0})}, f32({2, 3}, {0, 7, 0, 7, 0, 0}));
  expect("scatter_add.default", {{"self", tref("ts_0")}, {"dim", integer(1)}, {"index", tref("ts_1")}, {"src", tref("ts_2")}},
         {x, i64({1, 3}, {1, 1, 0}), f32({1, 3}, {1, 2, 4})}, f32({2, 3}, {4, 3, 0, 0, 0, 0}));
  expect("select_scatter.default", {{"self", tref("ts_0")}, {"src", tref("ts_1")}, {"dim", integer(1)}, {"index", integer(-1)}},
         {x, f32({2}, {1, 2})}, f32({2, 3}, {0, 0, 1, 0, 0, 2}));
  expect("slice_scatter.default", {{"self", tref("ts_0")}, {"src", tref("ts_1")}, {"dim", integer(0)}, {"start", integer(1)}, {"step", integer(3)}},
         {f32({5}, {0, 0, 0, 0, 0}), f32({2}, {7, 8})}, f32({5}, {0, 7, 0, 0, 8}));
}

TEST_CASE("cat, constant_pad_nd and repeat", "[lower][fast]") {
  // Legacy empty 1-d tensors are skipped; ints are promoted to the result type.
  expect("cat.default", {{"tensors", json_tensors({"ts_0", "ts_1", "ts_2"}, false)}, {"dim", integer(-1)}},
         {f32({2, 1}, {1, 2}), f32({0}, {}), i64({2, 2}, {3, 4, 5, 6})}, f32({2, 3}, {1, 3, 4, 2, 5, 6}));
  // Negative pads crop.
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expect("constant_pad_nd.default", {{"self", tref("ts_0")}, {"pad", json_ints({-1, 1, 1, 0})}, {"value", number(9.0)}},
         {x}, f32({3, 3}, {9, 9, 9, 2, 3, 9, 5, 6, 9}));
  expect("constant_pad_nd.default", {{"self", tref("ts_0")}, {"pad", json_ints({0, 0, 1, 1})}},
         {f32({0, 2}, {})}, f32({2, 2}, {0, 0, 0, 0}));
  expect("repeat.default", {{"self", tref("ts_0")}, {"repeats", json_ints({2, 1, 2})}},
         {f32({1, 2}, {1, 2})}, f32({2, 1, 4}, {1, 2, 1, 2, 1, 2, 1, 2}));
}

TEST_CASE("gather, index_select, embedding and advanced indexing match PyTorch", "[lower][fast]") {
  check_family({"gather", "index_select", "nn_functional_embedding", "take", "take_along_dim", "__getitem__",
                "_unsafe_masked_index", "nn_functional_pad_reflect", "nn_functional_pad_replicate",
                "nn_functional_pad_replicate_negative", "roll", "fft_fftshift", "fft_ifftshift"});
}

// nn.EmbeddingBag in modes sum, mean and max, with an empty bag, per_sample_weights and
// include_last_offset (scripts/export_core_ops_samples.py, torch 2.15).
TEST_CASE("_embedding_bag matches PyTorch interpreted and compiled", "[lower][fast]") {
  for (const char* archive : {"model.pt2", "model.raw.pt2"})  // the raw one: embedding_bag.padding_idx decomposed
    CHECK(run_sample_both_ways(test_source_dir() + "/data/core_ops/embedding_bag", archive) == "");
}

// _embedding_bag's other outputs serve the backward pass and are not computed: a model that reads
// one (here bag_size) is refused with the node and the output named.
TEST_CASE("_embedding_bag: reading an output foundryc does not compute is a user error", "[lower][fast]") {
  ProcResult r = run_foundryc({test_source_dir() + "/data/core_ops/embedding_bag_sizes/model.pt2", "--stop-after", "lower"});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.rfind("foundryc: error: node _embedding_bag (aten._embedding_bag): its output 2 is used, which foundryc "
                    "does not compute",
                    0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("index_put and scatter ops match PyTorch", "[lower][fast]") {
  check_family({"index_put", "index_add", "index_copy", "index_fill", "_unsafe_masked_index_put_accumulate",
                "scatter", "scatter_add", "scatter_reduce_sum", "scatter_reduce_prod", "scatter_reduce_mean",
                "scatter_reduce_amax", "scatter_reduce_amin", "slice_scatter", "nn_functional_pad_circular",
                "nn_functional_max_unpool1d", "nn_functional_max_unpool2d", "nn_functional_max_unpool3d"});
}

TEST_CASE("cat, constant_pad_nd and repeat match PyTorch", "[lower][fast]") {
  check_family({"cat", "stack", "hstack", "vstack", "dstack", "column_stack", "block_diag", "constant_pad_nd",
                "nn_functional_pad_constant", "repeat", "tile", "_chunk_cat"});
}
