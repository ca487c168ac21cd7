// The foundryc command line: options, exit codes, messages, the output folder discipline, golden
// graph.txt dumps, and the frontend over the whole corpus.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "foundry/frontend/archive.h"
#include "foundry/frontend/frontend.h"
#include "foundry/graph/graph.h"
#include "foundry/ops/registry.h"
#include "foundry/runtime/npy.h"
#include "foundry/support/error.h"
#include "support.h"

namespace fs = std::filesystem;

namespace {

// stderr is one line "foundryc: error: ..." (and, for usage errors, the --help hint).
void check_error_line(const ProcResult& r) {
  INFO("stderr: " << r.err);
  CHECK(r.err.rfind("foundryc: error: ", 0) == 0);
  std::string first = r.err.substr(0, r.err.find('\n'));
  CHECK_FALSE(first.empty());
  CHECK(first.find("internal error") == std::string::npos);
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// A weight as torch.export wrote it into a .pt2: its graph value name, its name in the module
// (fqn), its sizes and its stored bytes. Read with the JSON library, not foundry's frontend.
struct ArchiveWeight {
  std::string value_name, fqn;
  std::vector<int64_t> sizes;
  std::string bytes;
};

std::vector<ArchiveWeight> archive_weights(const std::string& pt2) {
  std::unique_ptr<foundry::Archive> archive = foundry::open_zip_archive(pt2);
  auto entry = [&](const std::string& path) {
    std::optional<foundry::Blob> blob = archive->read(path);
    REQUIRE(blob);
    return std::string(reinterpret_cast<const char*>(blob->data), blob->size);
  };
  nlohmann::json model = nlohmann::json::parse(entry("models/model.json"));
  nlohmann::json config = nlohmann::json::parse(entry("data/weights/model_weights_config.json"))["config"];
  std::vector<ArchiveWeight> weights;
  for (const auto& spec : model["graph_module"]["signature"]["input_specs"]) {
    if (!spec.contains("parameter")) continue;
    ArchiveWeight w;
    w.value_name = spec["parameter"]["arg"]["name"];
    w.fqn = spec["parameter"]["parameter_name"];
    for (const auto& size : config[w.fqn]["tensor_meta"]["sizes"]) w.sizes.push_back(size["as_int"]);
    w.bytes = entry("data/weights/" + config[w.fqn]["path_name"].get<std::string>());
    weights.push_back(w);
  }
  return weights;
}

std::string float32_type(const std::vector<int64_t>& sizes) {
  std::string out = "float32[";
  for (size_t d = 0; d < sizes.size(); ++d) out += (d ? ", " : "") + std::to_string(sizes[d]);
  return out + "]";
}

}  // namespace

TEST_CASE("cli: --version, --help, --list-ops", "[cli][fast]") {
  ProcResult v = run_foundryc({"--version"});
  CHECK(v.exit_code == 0);
  CHECK_THAT(v.out, Catch::StartsWith(std::string("foundryc ") + FOUNDRY_VERSION));

  ProcResult h = run_foundryc({"--help"});
  CHECK(h.exit_code == 0);
  for (const char* opt : {"INPUT", "--output", "--emit", "--stop-after", "--dump-ir", "--time-passes",
                          "--verbose", "--quiet", "--version", "--list-ops"})
    CHECK_THAT(h.out, Catch::Contains(opt));

  ProcResult l = run_foundryc({"--list-ops"});
  CHECK(l.exit_code == 0);
  std::istringstream lines(l.out);
  size_t count = 0;
  for (std::string line; std::getline(lines, line);) ++count;
  CHECK(count == foundry::all_ops().size());
  CHECK_THAT(l.out, Catch::Contains("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n"));
  CHECK_THAT(l.out, Catch::Contains("\nrelu(Tensor self) -> Tensor\n"));
}

TEST_CASE("cli: usage errors exit 2", "[cli][fast]") {
  const std::string model = sample_file("pointwise");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"--no-such-option", model},
           {model, "--emit=source,exe"},
           {model, "--stop-after=nowhere"},
           {model, "-o"},
           {model, "-v", "-q"},
       }) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    INFO("foundryc " << joined);
    ProcResult r = run_foundryc(args);
    CHECK(r.exit_code == 2);
    check_error_line(r);
    CHECK_THAT(r.err, Catch::Contains("--help"));
  }
}

TEST_CASE("cli: default output folder and --dump-ir", "[cli][fast]") {
  TempDir tmp("foundry_cli_");
  fs::copy_file(sample_file("pointwise"), tmp / "pointwise.pt2");
  ProcResult r = run_foundryc({tmp / "pointwise.pt2", "--stop-after=frontend"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::StartsWith("foundryc: warning: --stop-after=frontend without --dump-ir writes nothing"));
  CHECK(fs::is_directory(tmp / "pointwise_out"));
  CHECK_FALSE(fs::exists(tmp / "pointwise_out/debug"));

  r = run_foundryc({tmp / "pointwise.pt2", "--stop-after=frontend", "--dump-ir", "--time-passes"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("frontend") && Catch::Contains("ms"));
  std::string text = read_file(tmp / "pointwise_out/debug/graph.txt");
  CHECK_THAT(text, Catch::Contains("%add : f32[1024] = aten.add.Tensor(%x, %y, alpha=1)"));
  // Nothing but the output folder was left beside the input.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.path())) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"pointwise.pt2", "pointwise_out"});

  SECTION("-v logs to stderr, -q is silent") {
    ProcResult v = run_foundryc({tmp / "pointwise.pt2", "--stop-after=frontend", "-v"});
    CHECK(v.exit_code == 0);
    CHECK_THAT(v.err, Catch::Contains("frontend"));
    CHECK(v.out.empty());
    ProcResult q = run_foundryc({tmp / "pointwise.pt2", "--stop-after=frontend", "-q"});
    CHECK(q.exit_code == 0);
    CHECK(q.err.empty());
  }
  SECTION("-o names the folder; folders and model.json are inputs too") {
    extract_archive(tmp / "pointwise.pt2", tmp / "x");
    for (const std::string& in : {tmp / "x", tmp / "x/model", tmp / "x/model/models/model.json"}) {
      INFO(in);
      ProcResult f = run_foundryc({in, "-o", tmp / "o", "--stop-after=frontend", "--dump-ir"});
      CHECK(f.exit_code == 0);
      CHECK(read_file(tmp / "o/debug/graph.txt") == text);
    }
  }
}

TEST_CASE("cli: the stages past the frontend", "[cli][fast]") {
  TempDir tmp("foundry_cli_");
  ProcResult r = run_foundryc({sample_file("pointwise"), "-o", tmp / "out"});
  if (r.exit_code == 1) {  // until every stage is implemented
    check_error_line(r);
    CHECK_THAT(r.err, Catch::Contains("is not implemented yet"));
    CHECK_FALSE(fs::exists(tmp / "out"));
  } else {
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("cli: stage progress only on a terminal", "[cli][fast]") {
  TempDir tmp("foundry_cli_");
  SECTION("stderr is a pipe: nothing but what was asked for") {
    ProcResult r = run_foundryc({sample_file("pointwise"), "-o", tmp / "out"});
    CHECK(r.exit_code == 0);
    INFO("stderr: " << r.err);
    CHECK(r.err.empty());
    // (--no-cache: the stages run again instead of the output cache's hit.)
    ProcResult v = run_foundryc({sample_file("pointwise"), "-o", tmp / "out", "-v", "--no-cache"});
    CHECK(v.exit_code == 0);
    CHECK_THAT(v.err, Catch::Contains("running stage build"));
    CHECK(v.err.find('\r') == std::string::npos);
    CHECK(v.err.find('\x1b') == std::string::npos);
    CHECK(v.err.find("[1/") == std::string::npos);
  }
  SECTION("stderr is a terminal (a pseudo-terminal from Python's pty module)") {
    const std::string spawn =
        "import os, pty, sys\n"
        "try:\n    m, s = os.openpty(); os.close(m); os.close(s)\nexcept OSError:\n    sys.exit(77)\n"
        "sys.exit(os.waitstatus_to_exitcode(pty.spawn(sys.argv[1:])))\n";
    ProcResult r = run_process({python3(), "-c", spawn, foundryc_exe(), sample_file("pointwise"), "-o", tmp / "out",
                                "--cache-dir", tmp / "cache"});
    if (r.exit_code == 77) {
      WARN("no pseudo-terminal here: the terminal side is not checked");
      return;
    }
    INFO("output: " << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("[1/6] frontend\r") && Catch::Contains("[6/6] build\r"));
    // Within the build: the units being compiled and the time so far, rewritten in place.
    const std::regex activity(R"(\[6/6\] build: compiling (kernels|wrapper)\.cpp[^\r]* \([0-9]+\.[0-9] s\)\r)");
    CHECK(std::regex_search(r.out, activity));
    CHECK_THAT(r.out, Catch::Contains("foundryc: wrote " + (tmp / "out") + " in "));
    ProcResult q = run_process({python3(), "-c", spawn, foundryc_exe(), sample_file("pointwise"), "-o", tmp / "out",
                                "--cache-dir", tmp / "cache", "-q"});
    CHECK(q.exit_code == 0);
    CHECK(q.out.empty());
  }
}

TEST_CASE("cli: -v logs fusion decisions with reasons", "[cli][fast]") {
  TempDir tmp("foundry_cli_");
  ProcResult r = run_foundryc({sample_file("norm_softmax"), "-o", tmp / "out", "--stop-after=schedule", "-v"});
  CHECK(r.exit_code == 0);
  INFO("stderr: " << r.err);
  // "fused node5, node6 (inlined: node4) into cpp_fused_..._1", "node3 not fused into cpp_fused_..._0: why"
  const std::regex fused(R"(foundryc: info: fused node\d+(, node\d+)*( \(inlined: node\d+(, node\d+)*\))? into cpp_fused_\w+)");
  const std::regex not_fused(R"(foundryc: info: node\d+ not fused into cpp_fused_\w+: \S.*)");
  size_t n_fused = 0, n_not_fused = 0;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    n_fused += std::regex_match(line, fused);
    n_not_fused += std::regex_match(line, not_fused);
  }
  CHECK(n_fused >= 1);
  CHECK(n_not_fused >= 1);
  // Without -v, none of it.
  ProcResult quiet =
      run_foundryc({sample_file("norm_softmax"), "-o", tmp / "out", "--stop-after=schedule", "--dump-ir"});
  CHECK(quiet.exit_code == 0);
  CHECK(quiet.err.empty());
}

TEST_CASE("cli: --stop-after before codegen without --dump-ir warns that it writes nothing", "[cli][fast]") {
  TempDir tmp("foundry_cli_");
  ProcResult r = run_foundryc({sample_file("norm_softmax"), "-o", tmp / "out", "--stop-after=schedule"});
  CHECK(r.exit_code == 0);
  CHECK(r.err == "foundryc: warning: --stop-after=schedule without --dump-ir writes nothing to look at (it only "
                 "checks that the stages up to schedule succeed); add --dump-ir for debug/ir_post_fusion.txt\n");
  ProcResult lower = run_foundryc({sample_file("norm_softmax"), "-o", tmp / "out", "--stop-after=lower"});
  CHECK_THAT(lower.err, Catch::Contains("add --dump-ir for debug/ir_pre_fusion.txt"));
  // With the dumps, or stopping where sources are written, or a failure: no warning.
  CHECK(run_foundryc({sample_file("norm_softmax"), "-o", tmp / "out", "--stop-after=schedule",
                      "--dump-ir"}).err.empty());
  CHECK(run_foundryc({sample_file("norm_softmax"), "-o", tmp / "out", "--stop-after=codegen"}).err.empty());
  ProcResult failed = run_foundryc({tmp / "missing.pt2", "-o", tmp / "out", "--stop-after=frontend"});
  CHECK(failed.exit_code == 1);
  CHECK(failed.err.find("warning") == std::string::npos);
}

TEST_CASE("cli: failures leave the previous output folder as it was", "[cli][fast]") {
  TempDir tmp("foundry_cli_");
  const std::string out = tmp / "out";
  ProcResult ok = run_foundryc({sample_file("pointwise"), "-o", out, "--stop-after=frontend", "--dump-ir"});
  REQUIRE(ok.exit_code == 0);
  const std::string before = read_file(out + "/debug/graph.txt");

  // A model whose recorded type contradicts its op: the frontend dumps graph.txt, then fails.
  extract_archive(sample_file("pointwise"), tmp / "bad");
  const std::string json_path = tmp / "bad/model/models/model.json";
  std::string json = read_file(json_path);
  const std::string from = "\"relu\": {\"dtype\": 7, \"sizes\": [{\"as_int\": 1024}]";
  size_t at = json.find(from);
  REQUIRE(at != std::string::npos);
  json.replace(at, from.size(), "\"relu\": {\"dtype\": 7, \"sizes\": [{\"as_int\": 999}]");
  write_file(json_path, json);

  SECTION("without --dump-ir nothing is kept") {
    ProcResult r = run_foundryc({tmp / "bad/model", "-o", out, "--stop-after=frontend"});
    CHECK(r.exit_code == 1);
    check_error_line(r);
    CHECK_THAT(r.err, Catch::Contains("node %relu (aten.relu)") && Catch::Contains("f32[999]"));
    CHECK(read_file(out + "/debug/graph.txt") == before);
    CHECK_FALSE(fs::exists(out + ".failed"));
  }
  SECTION("with --dump-ir the dumps so far are kept beside it") {
    ProcResult r = run_foundryc({tmp / "bad/model", "-o", out, "--dump-ir"});
    CHECK(r.exit_code == 1);
    check_error_line(r);
    CHECK_THAT(r.err, Catch::Contains(out + ".failed"));
    CHECK(read_file(out + "/debug/graph.txt") == before);
    CHECK_THAT(read_file(out + ".failed/debug/graph.txt"), Catch::Contains("f32[999]"));
  }
  SECTION("a successful run replaces the folder, without following symlinks inside") {
    fs::create_directories(tmp / "precious");
    write_file(tmp / "precious/file", "keep");
    fs::create_directory_symlink(tmp / "precious", out + "/link");
    ProcResult r = run_foundryc({sample_file("mlp"), "-o", out, "--stop-after=frontend", "--dump-ir"});
    CHECK(r.exit_code == 0);
    CHECK_THAT(read_file(out + "/debug/graph.txt"), Catch::Contains("p_0_weight"));
    CHECK_FALSE(fs::exists(fs::symlink_status(out + "/link")));
    CHECK(read_file(tmp / "precious/file") == "keep");
  }
  SECTION("a folder foundryc did not write is not replaced") {
    fs::create_directories(tmp / "mine");
    write_file(tmp / "mine/notes.txt", "mine");
    ProcResult r = run_foundryc({sample_file("pointwise"), "-o", tmp / "mine", "--stop-after=frontend"});
    CHECK(r.exit_code == 1);
    check_error_line(r);
    CHECK_THAT(r.err, Catch::Contains("refusing to replace"));
    CHECK(read_file(tmp / "mine/notes.txt") == "mine");
  }
  // No work folders are left behind either way.
  for (const auto& e : fs::directory_iterator(tmp.path()))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
}

TEST_CASE("cli: golden graph.txt dumps", "[cli][fast]") {
  const bool update = std::getenv("FOUNDRY_UPDATE_GOLDEN") && std::string(std::getenv("FOUNDRY_UPDATE_GOLDEN")) == "1";
  struct Golden {
    std::string model, golden;
  };
  for (const Golden& g : {Golden{sample_file("pointwise"), "pointwise.graph.txt"},
                          Golden{sample_file("mlp"), "mlp.graph.txt"},
                          Golden{sample_file("small_cnn", "model.raw.pt2"), "small_cnn_raw.graph.txt"}}) {
    INFO(g.model);
    TempDir tmp("foundry_cli_");
    ProcResult r = run_foundryc({g.model, "-o", tmp / "out", "--stop-after=frontend", "--dump-ir"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::string text = read_file(tmp / "out/debug/graph.txt");
    const std::string golden_path = test_source_dir() + "/golden/" + g.golden;
    if (update) {
      fs::create_directories(test_source_dir() + "/golden");
      write_file(golden_path, text);
      WARN("updated " << golden_path);
      continue;
    }
    INFO("regenerate with FOUNDRY_UPDATE_GOLDEN=1 after checking the difference by hand");
    CHECK(text == read_file(golden_path));
  }
}

TEST_CASE("cli: weights keep their archive names in the IR dumps and wrapper.cpp and manifest.json", "[cli][fast]") {
  TempDir tmp("foundry_cli_");
  const std::string out = tmp / "out";
  ProcResult r = run_foundryc({sample_file("mlp"), "-o", out, "--dump-ir", "--emit=source"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<ArchiveWeight> weights = archive_weights(sample_file("mlp"));
  REQUIRE(weights.size() == 4);
  const std::string pre = read_file(out + "/debug/ir_pre_fusion.txt");
  const std::string post = read_file(out + "/debug/ir_post_fusion.txt");
  const std::string wrapper = read_file(out + "/wrapper.cpp");
  const std::string weights_bin = read_file(out + "/weights.bin");
  const nlohmann::json manifest = nlohmann::json::parse(read_file(out + "/manifest.json"));
  for (const std::string& text : {pre, post, wrapper}) CHECK_FALSE(std::regex_search(text, std::regex("\\bconst[0-9]")));
  REQUIRE(manifest["weights"].size() == weights.size());
  for (const ArchiveWeight& w : weights) {
    INFO(w.value_name << " (" << w.fqn << ")");
    const std::string type = float32_type(w.sizes);
    CHECK(file_check(pre, "CHECK: # buffers\nCHECK: " + w.value_name + ": " + type + " constant") == "");
    CHECK(file_check(pre, "CHECK: extern\nCHECK: reads: {{.*}}" + w.value_name + "[*]") == "");
    CHECK(file_check(post, "CHECK: reads: {{.*}}" + w.value_name + "[*]") == "");
    CHECK(file_check(wrapper, "CHECK: void Model::run(\nCHECK: const auto* " + w.value_name +
                                  " = reinterpret_cast<const float*>(model->weights.data + {{[0-9]+}});  // " + w.fqn +
                                  ": " + type + "\nCHECK: (model->externs, {{.*}}" + w.value_name + "{{[,)]}}") == "");
    auto it = std::find_if(manifest["weights"].begin(), manifest["weights"].end(),
                           [&](const nlohmann::json& m) { return m["name"] == w.value_name; });
    REQUIRE(it != manifest["weights"].end());
    CHECK((*it)["fqn"] == w.fqn);
    CHECK((*it)["dtype"] == "float32");
    CHECK((*it)["shape"] == nlohmann::json(w.sizes));
    CHECK((*it)["storage_offset"] == 0);
    // The stored bytes are in weights.bin where the manifest says.
    CHECK((*it)["bytes"] == w.bytes.size());
    CHECK(weights_bin.substr((*it)["offset"].get<size_t>(), w.bytes.size()) == w.bytes);
  }
}

TEST_CASE("cli: the corpus models read", "[cli][corpus]") {
  if (!require_corpus()) return;
  TempDir tmp("foundry_cli_");
  int pt2 = 0, raw = 0;
  for (const auto& dir : fs::directory_iterator(corpus_dir() + "/models")) {
    for (const char* file : {"model.pt2", "model.raw.pt2"}) {
      fs::path path = dir.path() / file;
      if (!fs::exists(path)) continue;
      INFO(path.string());
      ProcResult r = run_foundryc({path.string(), "-o", tmp / "out", "--stop-after=frontend", "--dump-ir"});
      INFO(r.err);
      CHECK(r.exit_code == 0);
      CHECK(fs::file_size(tmp / "out/debug/graph.txt") > 0);
      (std::string(file) == "model.pt2" ? pt2 : raw) += r.exit_code == 0;
    }
  }
  CHECK(pt2 == 11);
  CHECK(raw == 10);
}

// In-process (1900 processes would be slow): load_model + verify_graph + check_supported_ops +
// print_graph, which is what `foundryc --stop-after=frontend --dump-ir` runs.
TEST_CASE("cli: every opinfo sample reads or names its unsupported op", "[cli][corpus]") {
  if (!require_corpus()) return;
  const std::string opinfo = corpus_dir() + "/opinfo";
  auto frontend = [](const std::string& path) {
    foundry::Graph g = foundry::load_model(path);
    foundry::verify_graph(g);
    std::string text = foundry::print_graph(g);
    foundry::check_supported_ops(g);
    return text;
  };

  std::vector<std::string> tier1 = read_lines(opinfo + "/tier1.txt");
  CHECK(tier1.size() == 1408);
  int ok = 0;
  for (const std::string& name : tier1) {
    try {
      ok += !frontend(opinfo + "/" + name + "/model.pt2").empty();
    } catch (const std::exception& e) {
      FAIL_CHECK(name << ": " << e.what());
    }
  }
  CHECK(ok == 1408);

  std::vector<std::string> other = read_lines(opinfo + "/other.txt");
  int read = 0, refused = 0;
  for (const std::string& name : other) {
    try {
      frontend(opinfo + "/" + name + "/model.pt2");
      ++read;
    } catch (const foundry::UserError& e) {
      // A clean refusal names the node and its operator: `node "x" (aten.op...)` as the file
      // names it, or `node %x (aten.op...)` as the verifier does.
      std::string msg = e.what();
      bool names_op = (msg.find("node \"") != std::string::npos || msg.find("node %") != std::string::npos) &&
                      (msg.find("(aten.") != std::string::npos || msg.find("(_operator.") != std::string::npos);
      if (!names_op) FAIL_CHECK(name << ": " << msg);
      ++refused;
    } catch (const std::exception& e) {
      FAIL_CHECK(name << ": not a user error: " << e.what());
    }
  }
  CHECK(read + refused == static_cast<int>(other.size()));
  WARN("opinfo/other.txt: " << read << " read, " << refused << " refused with the op named");
}

// nonzero, masked_select and unique size their results by the data (an unbacked size u0 in the
// archive): the error names that node and its op, not the export's later guard on u0 (`ge_1`,
// _operator.ge).
TEST_CASE("cli: an op whose output shape depends on the data is named as such", "[cli][fast]") {
  if (!require_corpus()) return;
  const std::vector<std::pair<std::string, std::string>> samples = {
      {"nonzero__float32__0", "node \"nonzero\" (aten.nonzero.default)"},
      {"masked_select__float32__0", "(aten.masked_select.default)"},
      {"unique__float32__0", "(aten._unique2.default)"},
      {"argwhere__float32__0", "(aten.nonzero.default)"}};
  for (const auto& [sample, node] : samples) {
    INFO(sample);
    ProcResult r = run_foundryc({corpus_dir() + "/opinfo/" + sample + "/model.pt2", "--stop-after", "frontend"});
    CHECK(r.exit_code == 1);
    check_error_line(r);
    CHECK_THAT(r.err, Catch::Contains(node));
    CHECK_THAT(r.err, Catch::Contains("depends on the data") && Catch::Contains("u0") &&
                          Catch::Contains("cannot compile: every shape must follow from the input shapes"));
    CHECK_THAT(r.err, !Catch::Contains("_operator"));
    CHECK(count_occurrences(r.err, "\n") == 1);
  }
}

// ---- issue 16 (runtime): symbols and thread counts -------------------------------------------

TEST_CASE("cli: --name refuses names whose symbols belong to a library, and says why", "[cli][fast]") {
  TempDir tmp("foundry_cli_");
  const std::string mlp = sample_file("mlp");
  struct Refused {
    std::string name, says;
  };
  for (const Refused& r : {Refused{"pthread", "pthread_create"}, Refused{"dnnl_primitive", "oneDNN"},
                           Refused{"omp", "OpenMP"}, Refused{"sleef_model", "SLEEF"}, Refused{"cudnn", "cuDNN"},
                           Refused{"timer", "timer_create"}, Refused{"foundry", "foundryc"},
                           Refused{std::string(49, 'a'), "the limit is 48"}, Refused{"Big", "lowercase"}}) {
    ProcResult p = run_foundryc({mlp, "-o", tmp / "out", "--name", r.name, "--stop-after=codegen"});
    INFO("--name " << r.name << ": " << p.err);
    check_error_line(p);
    CHECK(p.exit_code == 1);
    CHECK(p.err.find(r.says) != std::string::npos);
    CHECK_FALSE(fs::exists(tmp / "out"));
  }
  // Names that only start like a library's are fine; so are 48 characters.
  for (const std::string& ok : std::vector<std::string>{"pthreads", "omphalos", std::string(48, 'a')}) {
    ProcResult p = run_foundryc({mlp, "-o", tmp / ("ok_" + ok.substr(0, 10)), "--name", ok, "--stop-after=codegen"});
    INFO("--name " << ok << ": " << p.err);
    CHECK(p.exit_code == 0);
  }
  // A file name is no choice of symbols: pthread.pt2 becomes model_pthread.
  fs::copy_file(mlp, tmp / "pthread.pt2");
  ProcResult p = run_foundryc({tmp / "pthread.pt2", "-o", tmp / "from_file", "--stop-after=codegen"});
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  const std::string header = read_file(tmp / "from_file/model.h");
  CHECK(header.find("model_pthread_create(") != std::string::npos);
  CHECK(header.find(" pthread_create(") == std::string::npos);
}

TEST_CASE("cli: model.so exports the model's API and nothing else", "[cli][fast]") {
  TempDir tmp("foundry_cli_");
  // mlp calls oneDNN (extern kernels, C++ templates) and runs OpenMP loops: the most to leak.
  ProcResult c =
      run_foundryc({sample_file("mlp"), "-o", tmp / "out", "--name", "mlp_sym"});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  ProcResult nm = run_process({"nm", "-D", "--defined-only", tmp / "out/model.so"});
  REQUIRE(nm.exit_code == 0);
  std::istringstream lines(nm.out);
  int api = 0;
  for (std::string line; std::getline(lines, line);) {
    std::string symbol = line.substr(line.rfind(' ') + 1);
    INFO("exported: " << line);
    CHECK(symbol.rfind("mlp_sym_", 0) == 0);
    api += symbol.rfind("mlp_sym_", 0) == 0;
  }
  // create, run, infer_shapes, num_inputs, num_outputs, input_info, output_info, destroy, last_error,
  // num_steps, step_name, profile
  CHECK(api == 12);
}

// Not [fast]: the sanitized run would start 1,024 threads under AddressSanitizer three times.
TEST_CASE("cli: thread counts past the maximum are lowered with a warning", "[cli][threads]") {
  if (!require_corpus()) return;
  TempDir tmp("foundry_cli_");
  // 65536 elements: its kernel runs on threads (>= 32768 element operations).
  const std::string model = corpus_dir() + "/models/pointwise_64k";
  ProcResult c = run_foundryc({model + "/model.pt2", "-o", tmp / "out", "--threads", "100000", "--cache-dir", tmp / "cache"});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(c.err.find("warning: --threads 100000 is more than 1024 threads") != std::string::npos);
  CHECK(read_file(tmp / "out/kernels.cpp").find("num_threads(100000)") == std::string::npos);
  ProcResult plain = run_foundryc({model + "/model.pt2", "-o", tmp / "plain", "--cache-dir", tmp / "cache", "-q"});
  REQUIRE(plain.exit_code == 0);
  const std::vector<std::string> check = {"--inputs", model + "/inputs", "--expected", model + "/expected"};
  for (const auto& [label, argv] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"--threads 100000 at compile time", {foundry_run_exe(), tmp / "out"}},
           {"FOUNDRY_NUM_THREADS=100000", {"env", "FOUNDRY_NUM_THREADS=100000", foundry_run_exe(), tmp / "plain"}},
           {"foundry-run --threads 100000", {foundry_run_exe(), tmp / "plain", "--threads", "100000"}}}) {
    std::vector<std::string> cmd = argv;
    cmd.insert(cmd.end(), check.begin(), check.end());
    ProcResult r = run_process(cmd, 120);
    INFO(label << ": " << r.out << r.err);
    CHECK(r.term_signal == 0);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("PASS") != std::string::npos);
    if (label != "--threads 100000 at compile time") CHECK(r.err.find("warning") != std::string::npos);
  }
}

namespace {

// Every message for a file that is not a torch.export archive ends with this.
const std::string kExportHint =
    "export the model with `ep = torch.export.export(model, example_inputs)` and save it with "
    "`torch.export.save(ep, \"model.pt2\")`";

// foundryc refuses `file` (exit 1) with the one line "foundryc: error: FILE: ..." holding each of
// `words`, and writes no output folder.
void check_refused(const std::string& file, const std::vector<std::string>& words) {
  TempDir tmp("foundry_cli_");
  ProcResult r = run_foundryc({file, "-o", tmp / "out", "--stop-after=frontend"});
  INFO("foundryc " << file << "\nstderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::StartsWith("foundryc: error: " + file + ": "));
  CHECK(count_occurrences(r.err, "\n") == 1);
  CHECK_THAT(r.err, Catch::EndsWith("\n"));
  for (const std::string& w : words) CHECK_THAT(r.err, Catch::Contains(w));
  CHECK_FALSE(fs::exists(tmp / "out"));
}

// Files of other kinds that are easy to make without torch, each as its format or tool lays it out
// (Python's standard library, independent of foundryc), under `dir`.
void make_other_kinds(const std::string& dir) {
  ProcResult r = run_process({python3(), "-c", R"(
import gzip, json, pickle, struct, sys, tarfile, zipfile
src, out = sys.argv[1], sys.argv[2] + '/'
model = open(src, 'rb').read()
open(out + 'model.pt2.gz', 'wb').write(gzip.compress(model))
with tarfile.open(out + 'model.tar', 'w') as t:
    t.add(src, arcname='model.pt2')
# torch.export.save of torch <= 2.5 wrote these entries at the top of a ZIP file.
with zipfile.ZipFile(out + 'old_export.pt2', 'w') as z:
    for name in ['serialized_exported_program.json', 'serialized_state_dict.pt', 'serialized_constants.pt',
                 'serialized_example_inputs.pt', 'version']:
        z.writestr(name, '{}')
with zipfile.ZipFile(out + 'arrays.npz', 'w') as z:  # numpy.savez: .npy entries at the top
    z.writestr('x.npy', b'\x93NUMPY\x01\x00')
with zipfile.ZipFile(out + 'notes.zip', 'w') as z:  # a zipped folder: one root folder, no models/
    z.writestr('notes/readme.txt', 'notes')
header = json.dumps({'w': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}}).encode()
open(out + 'weights.safetensors', 'wb').write(struct.pack('<Q', len(header)) + header + bytes(4))
open(out + 'dict.pkl', 'wb').write(pickle.dumps({'weight': [1.0, 2.0]}, protocol=4))
# torch.save(..., _use_new_zipfile_serialization=False, pickle_protocol=4) pickles its magic number first.
open(out + 'legacy_protocol4.pt', 'wb').write(pickle.dumps(0x1950a86a20f9469cfc6c, protocol=4) + pickle.dumps(1001))
)", samples_dir() + "/pointwise/model.pt2", dir});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
}

}  // namespace

TEST_CASE("cli: files that are not torch.export archives say what they are", "[cli][fast]") {
  // Real files, made by torch (test/data/file_types/README.md says how).
  const std::string real = test_source_dir() + "/data/file_types/";
  SECTION("torch.save, new and legacy format") {
    check_refused(real + "state_dict.pt", {"a torch.save file", "state_dict", kExportHint});
    check_refused(real + "pickled_module.pt", {"a torch.save file", "pickled module", kExportHint});
    check_refused(real + "legacy_state_dict.pt", {"a torch.save file in the legacy pickle format", kExportHint});
  }
  SECTION("TorchScript") {
    check_refused(real + "torchscript.pt", {"a TorchScript archive (torch.jit.save)", kExportHint});
  }
  SECTION("AOTInductor package") {
    check_refused(real + "aoti.pt2", {"an AOTInductor package", "already compiled by AOTInductor",
                                      "needs the torch.export program instead", kExportHint});
  }
  SECTION("ONNX") { check_refused(real + "model.onnx", {"an ONNX model", kExportHint}); }

  TempDir tmp("foundry_cli_");
  make_other_kinds(tmp.path());
  SECTION("older torch.export archives, other ZIP files") {
    check_refused(tmp / "old_export.pt2", {"torch 2.5 or earlier", kExportHint});
    for (const char* name : {"arrays.npz", "notes.zip"})
      check_refused(tmp / name, {"a ZIP file but not a torch.export archive", "models/model.json", kExportHint});
  }
  SECTION("pickles and weights files") {
    check_refused(tmp / "legacy_protocol4.pt", {"a torch.save file in the legacy pickle format", kExportHint});
    check_refused(tmp / "dict.pkl", {"a Python pickle", "torch.save", kExportHint});
    check_refused(tmp / "weights.safetensors", {"a safetensors file", kExportHint});
  }
  SECTION("a .pt2 archive compressed or packed") {
    check_refused(tmp / "model.pt2.gz", {"a gzip-compressed file", "gunzip", kExportHint});
    check_refused(tmp / "model.tar", {"a tar archive", "tar -xf", kExportHint});
  }
}

TEST_CASE("cli: empty files, text, other binaries and cut-short archives say what they are", "[cli][fast]") {
  TempDir tmp("foundry_cli_");
  write_file(tmp / "empty.pt2", "");
  check_refused(tmp / "empty.pt2", {"an empty file", kExportHint});
  write_file(tmp / "notes.pt2", "hello world\nthis is text\n");
  check_refused(tmp / "notes.pt2", {"neither a .pt2 archive (a ZIP file) nor a model.json",
                                    "it starts with \"hello world\\nthis is text\\n\"", kExportHint});
  write_file(tmp / "program.pt2", std::string("\x7f" "ELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00", 16));
  check_refused(tmp / "program.pt2", {"it starts with bytes 7f 45 4c 46 02 01 01 00", kExportHint});
  // A .pt2 cut short (an interrupted copy) is a damaged ZIP file, not another kind.
  const std::string bytes = read_file(sample_file("pointwise"));
  write_file(tmp / "half.pt2", bytes.substr(0, bytes.size() / 2));
  check_refused(tmp / "half.pt2", {"not a ZIP archive (no end of central directory record)"});
}

TEST_CASE("cli: torch.export archives are told by their models/model.json", "[cli][fast]") {
  TempDir tmp("foundry_cli_");
  ProcResult r = run_process({python3(), "-c", R"(
import sys, zipfile
src = zipfile.ZipFile(sys.argv[1])
out = sys.argv[2] + '/'
# torch.export.pt2_archive can package a program with its AOTInductor build: the program is read.
with zipfile.ZipFile(out + 'program_and_aoti.pt2', 'w') as z:
    for i in src.infolist():
        z.writestr(i.filename, src.read(i))
    z.writestr('model/data/aotinductor/model/model.wrapper.so', b'\x7fELF')
# The program's entries without their root folder: a damaged torch.export archive, not another kind.
with zipfile.ZipFile(out + 'no_root.pt2', 'w') as z:
    for i in src.infolist():
        z.writestr(i.filename.split('/', 1)[1], src.read(i))
)", sample_file("pointwise"), tmp.path()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  ProcResult both = run_foundryc({tmp / "program_and_aoti.pt2", "-o", tmp / "out", "--stop-after=frontend"});
  INFO("stderr: " << both.err);
  CHECK(both.exit_code == 0);
  check_refused(tmp / "no_root.pt2", {"archive entries are not under one root folder"});
}

TEST_CASE("cli: --interpret --expected says PASS with the worst element, or what differs", "[cli][interpret][fast]") {
  TempDir tmp("foundry_cli_");
  const std::string mlp = sample_file("mlp", "");
  ProcResult pass = run_foundryc({mlp + "model.pt2", "--interpret", "--inputs", mlp + "inputs", "--expected", mlp + "expected"});
  INFO(pass.out << pass.err);
  CHECK(pass.exit_code == 0);
  CHECK(std::regex_match(pass.out, std::regex(R"(output 0: PASS: (worst element \[\d+, \d+\]: \|out - ref\| \S+, allowed there \S+|all 80 elements equal)\n)")));
  fs::create_directories(tmp / "wrong_shape");
  foundry::NpyArray a;  // mlp's output is float32 [8, 10]
  a.shape = {8, 12};
  a.data.assign(8 * 12 * 4, 0);
  foundry::write_npy(tmp / "wrong_shape/0.npy", a);
  ProcResult fail = run_foundryc({mlp + "model.pt2", "--interpret", "--inputs", mlp + "inputs", "--expected", tmp / "wrong_shape"});
  CHECK(fail.exit_code == 1);
  CHECK(fail.out == "output 0: FAIL: shape [8, 10], expected [8, 12]\n");
}
