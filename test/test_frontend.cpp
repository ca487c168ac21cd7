// The frontend (archives, folders and bare model.json into a Graph), the Graph IR's naming and
// helpers, graph.txt printing and the verifier.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "foundry/frontend/frontend.h"
#include "foundry/graph/graph.h"
#include "foundry/ops/registry.h"
#include "foundry/support/error.h"
#include "support.h"

namespace fs = std::filesystem;
using foundry::Graph;
using foundry::InputKind;
using foundry::UserError;

namespace {

// The message of the UserError that `f` throws ("" if it throws none).
template <typename F>
std::string user_error(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

const foundry::GraphInput& input_named(const Graph& g, const std::string& name) {
  for (const auto& in : g.inputs)
    if (in.value->name == name) return in;
  FAIL("no input " << name);
  throw std::logic_error("unreachable");
}

// An extracted copy of a sample whose model.json (and weights config) a test may edit.
struct EditableModel {
  TempDir dir{"foundry_frontend_"};
  std::string root;  // the archive's root folder: models/, data/
  nlohmann::json program;

  explicit EditableModel(const std::string& name) {
    extract_archive(sample_file(name), dir.path());
    root = dir / "model";
    program = nlohmann::json::parse(read_file(root + "/models/model.json"));
  }
  nlohmann::json& graph() { return program["graph_module"]["graph"]; }
  nlohmann::json& node(const std::string& name) {
    for (auto& n : graph()["nodes"])
      if (n["name"] == name) return n;
    throw std::runtime_error("no node " + name);
  }
  nlohmann::json weights_config() {
    return nlohmann::json::parse(read_file(root + "/data/weights/model_weights_config.json"));
  }
  void save_weights_config(const nlohmann::json& c) {
    write_file(root + "/data/weights/model_weights_config.json", c.dump());
  }
  // Writes the edited program and returns the load error ("" when it loads and verifies).
  std::string load_error() {
    write_file(root + "/models/model.json", program.dump());
    return user_error([&] {
      Graph g = foundry::load_model(root);
      foundry::verify_graph(g);
    });
  }
};

}  // namespace

TEST_CASE("frontend: pointwise archive", "[frontend][fast]") {
  Graph g = foundry::load_model(sample_file("pointwise"));
  foundry::verify_graph(g);
  REQUIRE(g.inputs.size() == 2);
  REQUIRE(g.nodes.size() == 3);
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.verifier == "ATEN");
  CHECK(g.schema_major == 8);
  for (const auto& in : g.inputs) {
    CHECK(in.kind == InputKind::User);
    CHECK(in.value->type.dtype == foundry::DType::Float32);
    CHECK(in.value->type.sizes == std::vector<int64_t>{1024});
    CHECK(in.storage.data == nullptr);
  }
  CHECK(g.inputs[0].value->name == "x");
  CHECK(g.inputs[1].value->name == "y");
  CHECK(g.user_inputs().size() == 2);
  CHECK(g.user_outputs().size() == 1);

  const auto& add = *g.nodes[0];
  CHECK(add.target == "add.Tensor");
  REQUIRE(add.op != nullptr);
  CHECK(add.op->name == "add.Tensor");
  CHECK(add.arg("self").tensor == g.inputs[0].value);
  CHECK(add.arg("other").tensor == g.inputs[1].value);
  CHECK(add.arg("alpha").kind == foundry::Arg::Kind::Int);  // default filled in
  CHECK(g.nodes[1]->target == "relu");
  const auto& mul = *g.nodes[2];
  CHECK(mul.arg("other").kind == foundry::Arg::Kind::Int);
  CHECK(mul.arg("other").i == 2);
  CHECK(g.outputs[0].value == mul.outputs[0]);
  CHECK(g.users(add.outputs[0]).size() == 1);
  CHECK(g.find_value("relu") == g.nodes[1]->outputs[0]);

  std::string text = foundry::print_graph(g);
  CHECK_THAT(text, Catch::Contains("  %add : f32[1024] = aten.add.Tensor(%x, %y, alpha=1)\n"));
  CHECK_THAT(text, Catch::Contains("  input %x : f32[1024]  # user\n"));
  CHECK_THAT(text, Catch::Contains("  output %mul  # user\n"));
}

TEST_CASE("frontend: mlp weights point into the archive", "[frontend][fast]") {
  Graph g = foundry::load_model(sample_file("mlp"));
  foundry::verify_graph(g);
  REQUIRE(g.inputs.size() == 5);
  REQUIRE(g.nodes.size() == 5);
  REQUIRE(g.outputs.size() == 1);
  int params = 0;
  for (const auto& in : g.inputs) params += in.kind == InputKind::Parameter;
  CHECK(params == 4);

  const auto& w = input_named(g, "p_0_weight");
  CHECK(w.kind == InputKind::Parameter);
  CHECK(w.fqn == "0.weight");
  CHECK(w.value->type.sizes == std::vector<int64_t>{128, 64});
  CHECK(w.value->type.strides == std::vector<int64_t>{64, 1});
  REQUIRE(w.storage.size == 128 * 64 * 4);
  REQUIRE(w.storage.data != nullptr);
  // Every weight is a view into the same mapping of the archive.
  CHECK(w.storage.owner != nullptr);
  CHECK(input_named(g, "p_2_bias").storage.owner.get() == w.storage.owner.get());

  TempDir tmp("foundry_frontend_");
  extract_archive(sample_file("mlp"), tmp.path());
  std::string raw = read_file(tmp / "model/data/weights/weight_0");
  REQUIRE(raw.size() == w.storage.size);
  CHECK(std::memcmp(raw.data(), w.storage.data, raw.size()) == 0);
  float first_file, first_blob;
  std::memcpy(&first_file, raw.data(), 4);
  std::memcpy(&first_blob, w.storage.data, 4);
  CHECK(first_blob == first_file);
  CHECK(std::isfinite(first_blob));

  const auto& user = input_named(g, "input");
  CHECK(user.kind == InputKind::User);
  CHECK(user.value->type.sizes == std::vector<int64_t>{8, 64});
  CHECK(g.nodes.back()->outputs[0]->type.sizes == std::vector<int64_t>{8, 10});
}

TEST_CASE("frontend: folder and bare model.json inputs read the same graph", "[frontend][fast]") {
  Graph zipped = foundry::load_model(sample_file("mlp"));
  const std::string expected = foundry::print_graph(zipped);
  TempDir tmp("foundry_frontend_");
  extract_archive(sample_file("mlp"), tmp.path());
  for (const std::string& path :
       {tmp.path(), tmp / "model", tmp / "model/", tmp / "model/models/model.json"}) {
    INFO(path);
    Graph g = foundry::load_model(path);
    foundry::verify_graph(g);
    CHECK(foundry::print_graph(g) == expected);
    const auto& w = input_named(g, "p_2_weight");
    const auto& wz = input_named(zipped, "p_2_weight");
    REQUIRE(w.storage.size == wz.storage.size);
    CHECK(std::memcmp(w.storage.data, wz.storage.data, w.storage.size) == 0);
  }

  SECTION("a bare model.json without its weights names the first missing one") {
    fs::create_directories(tmp / "alone/models");
    fs::copy_file(tmp / "model/models/model.json", tmp / "alone/models/model.json");
    std::string err = user_error([&] { foundry::load_model(tmp / "alone/models/model.json"); });
    CHECK_THAT(err, Catch::Contains("\"0.weight\"") && Catch::Contains("missing"));
  }
  SECTION("a missing weight file") {
    fs::remove(tmp / "model/data/weights/weight_3");
    std::string err = user_error([&] { foundry::load_model(tmp / "model"); });
    CHECK_THAT(err, Catch::Contains("\"2.bias\"") && Catch::Contains("weight_3"));
  }
}

TEST_CASE("frontend: compressed and ZIP64 archives", "[frontend][fast]") {
  // Python's zipfile rewrites the archive: DEFLATE entries (inflated once, by libzip), and ZIP64
  // records everywhere (its size limits lowered so that small files need them).
  TempDir tmp("foundry_frontend_");
  ProcResult r = run_process({python3(), "-c", R"(
import sys, zipfile
src = zipfile.ZipFile(sys.argv[1])
with zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_DEFLATED) as z:
    for i in src.infolist(): z.writestr(i.filename, src.read(i))
zipfile.ZIP64_LIMIT = 100
zipfile.ZIP_FILECOUNT_LIMIT = 2
with zipfile.ZipFile(sys.argv[3], 'w', zipfile.ZIP_STORED) as z:
    for i in src.infolist(): z.writestr(i.filename, src.read(i))
)", sample_file("mlp"), tmp / "deflated.pt2", tmp / "zip64.pt2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  Graph reference = foundry::load_model(sample_file("mlp"));
  for (const std::string& path : {tmp / "deflated.pt2", tmp / "zip64.pt2"}) {
    INFO(path);
    Graph g = foundry::load_model(path);
    foundry::verify_graph(g);
    CHECK(foundry::print_graph(g) == foundry::print_graph(reference));
    for (const char* name : {"p_0_weight", "p_2_bias"}) {
      const auto& a = input_named(g, name).storage;
      const auto& b = input_named(reference, name).storage;
      REQUIRE(a.size == b.size);
      CHECK(std::memcmp(a.data, b.data, a.size) == 0);
    }
  }
}

TEST_CASE("frontend: inputs that are not models", "[frontend][fast]") {
  TempDir tmp("foundry_frontend_");
  CHECK_THAT(user_error([&] { foundry::load_model(tmp / "nope.pt2"); }), Catch::Contains("no such file"));
  write_file(tmp / "text.pt2", "hello");
  CHECK_THAT(user_error([&] { foundry::load_model(tmp / "text.pt2"); }), Catch::Contains("ZIP"));
  std::string bytes = read_file(sample_file("pointwise"));
  write_file(tmp / "half.pt2", bytes.substr(0, bytes.size() / 2));
  CHECK_THAT(user_error([&] { foundry::load_model(tmp / "half.pt2"); }), Catch::Contains("ZIP"));
  fs::create_directories(tmp / "empty_dir");
  CHECK_THAT(user_error([&] { foundry::load_model(tmp / "empty_dir"); }), Catch::Contains("models/model.json"));
}

TEST_CASE("frontend: malformed programs are clear user errors", "[frontend][fast]") {
  SECTION("schema version") {
    EditableModel m("pointwise");
    m.program["schema_version"]["major"] = 9;
    CHECK_THAT(m.load_error(), Catch::Contains("schema version 9"));
  }
  SECTION("unknown dtype code") {
    EditableModel m("pointwise");
    m.graph()["tensor_values"]["x"]["dtype"] = 99;
    CHECK_THAT(m.load_error(), Catch::Contains("dtype code 99"));
  }
  SECTION("complex dtype") {
    EditableModel m("pointwise");
    m.graph()["tensor_values"]["x"]["dtype"] = 10;
    CHECK_THAT(m.load_error(), Catch::Contains("complex64"));
  }
  SECTION("negative size") {
    EditableModel m("pointwise");
    m.graph()["tensor_values"]["y"]["sizes"][0]["as_int"] = -3;
    CHECK_THAT(m.load_error(), Catch::Contains("negative size"));
  }
  SECTION("enormous and overflowing sizes") {
    EditableModel m("pointwise");
    m.graph()["tensor_values"]["x"]["sizes"] = {{{"as_int", int64_t(1) << 40}}, {{"as_int", int64_t(1) << 40}}};
    m.graph()["tensor_values"]["x"]["strides"] = {{{"as_int", int64_t(1) << 40}}, {{"as_int", 1}}};
    CHECK_THAT(m.load_error(), Catch::Contains("too large"));
  }
  SECTION("a string where an integer belongs") {
    EditableModel m("pointwise");
    m.node("mul")["inputs"][1]["arg"] = {{"as_int", "two"}};
    std::string err = m.load_error();
    CHECK_THAT(err, Catch::Contains("node \"mul\" (aten.mul.Tensor)") && Catch::Contains("expected an integer"));
  }
  SECTION("a union with two keys") {
    EditableModel m("pointwise");
    m.node("relu")["inputs"][0]["arg"]["as_int"] = 1;
    CHECK_THAT(m.load_error(), Catch::Contains("single-key union"));
  }
  SECTION("an unsupported argument kind") {
    EditableModel m("pointwise");
    m.node("mul")["inputs"][1]["arg"] = {{"as_graph", nlohmann::json::object()}};
    CHECK_THAT(m.load_error(), Catch::Contains("as_graph") && Catch::Contains("not supported"));
  }
  SECTION("an unknown input kind") {
    EditableModel m("pointwise");
    m.program["graph_module"]["signature"]["input_specs"][0] = {{"token", {{"arg", {{"name", "x"}}}}}};
    CHECK_THAT(m.load_error(), Catch::Contains("input kind \"token\" is not supported"));
  }
  SECTION("a non-tensor output") {
    EditableModel m("pointwise");
    m.program["graph_module"]["signature"]["output_specs"][0]["user_output"]["arg"] = {{"as_int", 3}};
    CHECK_THAT(m.load_error(), Catch::Contains("only tensor outputs"));
  }
  SECTION("a recorded type that contradicts the op's rule") {
    EditableModel m("pointwise");
    m.graph()["tensor_values"]["relu"]["sizes"][0]["as_int"] = 1000;
    std::string err = m.load_error();
    CHECK_THAT(err, Catch::Contains("relu") && Catch::Contains("aten.relu") && Catch::Contains("f32[1000]"));
  }
  SECTION("nodes out of order") {
    EditableModel m("pointwise");
    std::swap(m.graph()["nodes"][0], m.graph()["nodes"][1]);
    CHECK_THAT(m.load_error(), Catch::Contains("\"add\"") && Catch::Contains("topological order"));
  }
  SECTION("deep nesting is refused before parsing") {
    EditableModel m("pointwise");
    write_file(m.root + "/models/model.json", std::string(5000, '[') + std::string(5000, ']'));
    CHECK_THAT(user_error([&] { foundry::load_model(m.root); }), Catch::Contains("nesting deeper"));
  }
  SECTION("special floats and optional tensor lists read") {
    EditableModel m("pointwise");
    m.node("mul")["inputs"][1]["arg"] = {{"as_float", "-Infinity"}};
    m.node("add")["inputs"].push_back({{"name", "alpha"}, {"arg", {{"as_float", "NaN"}}}, {"kind", 2}});
    CHECK(m.load_error() == "");
    Graph g = foundry::load_model(m.root);
    CHECK(std::isinf(g.nodes[2]->arg("other").f));
    CHECK(std::isnan(g.nodes[0]->arg("alpha").f));
    CHECK_THAT(foundry::print_graph(g), Catch::Contains("alpha=nan") && Catch::Contains("-inf"));
  }
  SECTION("an unknown op stays opaque, and is then reported as unsupported") {
    EditableModel m("pointwise");
    m.node("relu")["target"] = "torch.ops.aten.frobnicate.default";
    CHECK(m.load_error() == "");
    Graph g = foundry::load_model(m.root);
    CHECK(g.nodes[1]->op == nullptr);
    CHECK(g.nodes[1]->arg_names == std::vector<std::string>{"self"});
    CHECK_THAT(foundry::print_graph(g), Catch::Contains("aten.frobnicate(self=%add)  # opaque"));
    CHECK_THAT(user_error([&] { foundry::check_supported_ops(g); }),
               Catch::Contains("node \"relu\" (aten.frobnicate)") && Catch::Contains("not supported"));
  }
}

TEST_CASE("frontend: weights configs are checked before use", "[frontend][fast]") {
  SECTION("pickled weights") {
    EditableModel m("mlp");
    auto c = m.weights_config();
    c["config"]["0.bias"]["use_pickle"] = true;
    m.save_weights_config(c);
    CHECK_THAT(m.load_error(), Catch::Contains("\"0.bias\"") && Catch::Contains("torch>=2.9"));
  }
  SECTION("a path that leaves the folder") {
    EditableModel m("mlp");
    auto c = m.weights_config();
    c["config"]["0.bias"]["path_name"] = "../../weight_1";
    m.save_weights_config(c);
    CHECK_THAT(m.load_error(), Catch::Contains("\"0.bias\"") && Catch::Contains("not a plain file name"));
  }
  SECTION("a declared layout larger than the file") {
    EditableModel m("mlp");
    auto c = m.weights_config();
    c["config"]["0.bias"]["tensor_meta"]["storage_offset"] = {{"as_int", 1}};
    m.save_weights_config(c);
    CHECK_THAT(m.load_error(), Catch::Contains("\"0.bias\"") && Catch::Contains("needs 516 bytes") &&
                                   Catch::Contains("holds only 512"));
  }
  SECTION("a stride whose extent overflows") {
    EditableModel m("mlp");
    auto c = m.weights_config();
    c["config"]["0.weight"]["tensor_meta"]["strides"][0] = {{"as_int", std::numeric_limits<int64_t>::max() / 2}};
    m.save_weights_config(c);
    CHECK_THAT(m.load_error(), Catch::Contains("too large"));
  }
  SECTION("a stored tensor that disagrees with the graph") {
    EditableModel m("mlp");
    auto c = m.weights_config();
    c["config"]["2.bias"]["tensor_meta"]["sizes"][0] = {{"as_int", 5}};
    m.save_weights_config(c);
    CHECK_THAT(m.load_error(), Catch::Contains("\"2.bias\"") && Catch::Contains("f32[5]") && Catch::Contains("f32[10]"));
  }
  SECTION("tied weights share one storage") {
    EditableModel m("mlp");
    auto c = m.weights_config();
    c["config"]["0.bias"]["path_name"] = "weight_0";  // 512 bytes of weight_0's 32768
    m.save_weights_config(c);
    REQUIRE(m.load_error() == "");
    Graph g = foundry::load_model(m.root);
    CHECK(input_named(g, "p_0_bias").storage.data == input_named(g, "p_0_weight").storage.data);
    CHECK(input_named(g, "p_0_bias").storage.size == 32768);
  }
}

TEST_CASE("frontend: dynamic sizes keep their symbols", "[frontend][fast]") {
  if (!require_corpus()) return;
  Graph g = foundry::load_model(corpus_dir() + "/models/mlp_dynamic/model.pt2");
  foundry::verify_graph(g);
  const auto& in = input_named(g, "input");
  CHECK(in.value->type.sizes == std::vector<int64_t>{8, 64});
  REQUIRE(in.value->type.symbols.size() == 2);
  CHECK_THAT(in.value->type.symbols[0], Catch::StartsWith("Symbol('s"));
  CHECK(in.value->type.symbols[1].empty());
  CHECK(in.value->type.has_symbolic_sizes());
  REQUIRE(g.range_constraints.size() == 1);
  CHECK(g.range_constraints[0].min == 1);
  CHECK(g.range_constraints[0].max == 4096);
  CHECK_THAT(foundry::type_to_string(in.value->type), Catch::Matches("f32\\[s[0-9]+, 64\\]"));
}

TEST_CASE("graph: our value names", "[frontend][fast]") {
  Graph g;
  foundry::TensorType t;
  t.sizes = {2, 3};
  CHECK(g.new_value("x", t)->name == "x");
  CHECK(g.new_value("x", t)->name == "x_1");
  foundry::Value* bad = g.new_value("1bad", t);
  CHECK(bad->name == "v2");
  CHECK(bad->source_name == "1bad");
  CHECK(g.new_value(std::string(65, 'a'), t)->name == "v3");
  CHECK(g.new_value(std::string(64, 'a'), t)->name == std::string(64, 'a'));
  CHECK(g.new_value("a\"b\n", t)->name == "v5");
  CHECK(g.new_value("v5", t)->name == "v5_1");
  CHECK(g.new_value("", t)->name == "v7");
  CHECK(g.find_value("x_1") != nullptr);
  CHECK(g.find_value("1bad") == nullptr);
  CHECK(g.num_values() == 8);

  CHECK(t.numel() == 6);
  CHECK(t.contiguous_strides() == std::vector<int64_t>{3, 1});
  CHECK_FALSE(t.has_symbolic_sizes());
  CHECK(foundry::type_to_string(t) == "f32[2, 3]");
  foundry::TensorType scalar;
  scalar.dtype = foundry::DType::Bool;
  CHECK(scalar.numel() == 1);
  CHECK(foundry::type_to_string(scalar) == "b8[]");
}

TEST_CASE("graph: numbers and untrusted text in dumps", "[frontend][fast]") {
  using foundry::format_double;
  CHECK(format_double(2) == "2.0");
  CHECK(format_double(0.1) == "0.1");
  CHECK(format_double(1e-05) == "1e-05");
  CHECK(format_double(-0.5) == "-0.5");
  CHECK(format_double(1.0 / 3) == "0.3333333333333333");
  CHECK(format_double(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(format_double(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(format_double(std::nan("")) == "nan");

  using foundry::quote_untrusted;
  CHECK(quote_untrusted("abc") == "\"abc\"");
  CHECK(quote_untrusted("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(quote_untrusted("x\ny\tz\x01") == "\"x\\ny\\tz\\x01\"");
  CHECK(quote_untrusted("\xc3\xa9") == "\"\\xc3\\xa9\"");
  CHECK(quote_untrusted("/* c */") == "\"/* c *\\x2f\"");
  CHECK(quote_untrusted(std::string(100, 'a'), 10) == "\"" + std::string(10, 'a') + "...\"");
  CHECK(quote_untrusted("\n\n\n", 5) == "\"\\n\\n...\"");
}

TEST_CASE("verify: broken graphs name the node and op", "[frontend][fast]") {
  SECTION("a use before the definition") {
    Graph g = foundry::load_model(sample_file("pointwise"));
    std::swap(g.nodes[0], g.nodes[1]);
    CHECK_THAT(user_error([&] { foundry::verify_graph(g); }),
               Catch::Contains("node %relu (aten.relu)") && Catch::Contains("%add before it is defined"));
  }
  SECTION("a value defined twice") {
    Graph g = foundry::load_model(sample_file("pointwise"));
    g.nodes[1]->outputs[0] = g.nodes[0]->outputs[0];
    CHECK_THAT(user_error([&] { foundry::verify_graph(g); }), Catch::Contains("defined more than once"));
  }
  SECTION("a recorded type the rule disagrees with") {
    Graph g = foundry::load_model(sample_file("pointwise"));
    g.nodes[2]->outputs[0]->type.dtype = foundry::DType::Int64;
    CHECK_THAT(user_error([&] { foundry::verify_graph(g); }),
               Catch::Contains("node %mul (aten.mul.Tensor)") && Catch::Contains("i64[1024]") &&
                   Catch::Contains("f32[1024]"));
  }
  SECTION("an arity that does not match the schema") {
    Graph g = foundry::load_model(sample_file("pointwise"));
    g.nodes[1]->args.push_back(foundry::Arg::of_int(1));
    CHECK_THAT(user_error([&] { foundry::verify_graph(g); }), Catch::Contains("arguments"));
  }
  SECTION("an output that is not defined") {
    Graph g = foundry::load_model(sample_file("pointwise"));
    g.nodes.pop_back();
    CHECK_THAT(user_error([&] { foundry::verify_graph(g); }), Catch::Contains("graph output"));
  }
  SECTION("replace_all_uses") {
    Graph g = foundry::load_model(sample_file("pointwise"));
    g.replace_all_uses(g.nodes[1]->outputs[0], g.nodes[0]->outputs[0]);  // mul(add, 2)
    CHECK(g.nodes[2]->args[0].tensor == g.nodes[0]->outputs[0]);
    CHECK(g.users(g.nodes[1]->outputs[0]).empty());
    foundry::verify_graph(g);
  }
}
