// Broken and hostile .pt2 archives (scripts/make_hostile_inputs.py) against foundryc's contract:
// a bad input is a user error (exit 1) reported as one line "foundryc: error: ..." on stderr that
// says what is wrong; never a crash, a hang, an "internal" error, or a half-written output folder.
#include <sys/stat.h>

#include <csignal>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "foundry/build/compile.h"
#include "foundry/codegen/wrapper.h"
#include "foundry/ir/loop_ir.h"
#include "foundry/lower/lowering.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "foundry/sched/schedule.h"
#include "foundry/support/error.h"
#include "graph_builder.h"
#include "support.h"

namespace fs = std::filesystem;

namespace {

constexpr int kHostileTimeoutSeconds = 60;

struct HostileCase {
  std::string file;  // full path
  int expect_exit;
  std::string substring;  // lowercase, "" for any
  std::string description;
  bool full_pipeline = false;  // refused by every stage, --interpret included (inputs in <stem>.inputs/)
};

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Runs the generator into dir and returns its cases.
std::vector<HostileCase> generate_hostile_cases(const std::string& dir) {
  const std::string script = test_source_dir() + "/../scripts/make_hostile_inputs.py";
  ProcResult gen = run_process({python3(), script, dir, "--samples", samples_dir()}, 120);
  INFO("generator stdout: " << gen.out << "\ngenerator stderr: " << gen.err);
  REQUIRE(gen.exit_code == 0);
  nlohmann::json listing = nlohmann::json::parse(read_file(dir + "/cases.json"));
  REQUIRE(listing.is_array());
  std::vector<HostileCase> cases;
  for (const auto& c : listing)
    cases.push_back({dir + "/" + c.at("file").get<std::string>(), c.at("expect_exit").get<int>(),
                     lowercase(c.at("expect_message_substring").get<std::string>()),
                     c.value("description", ""), c.value("full_pipeline", false)});
  return cases;
}

std::set<std::string> listing_of(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    names.insert(fs::relative(e.path(), dir).string());
  return names;
}

// The checks every failing run must pass.
void check_clean_user_error(const ProcResult& r, const HostileCase& c) {
  INFO("stdout: " << r.out);
  INFO("stderr: " << r.err);
  CHECK_FALSE(r.timed_out);   // no hang
  CHECK(r.term_signal == 0);  // no crash (SIGSEGV from a stack overflow, SIGABRT, ...)
  CHECK(r.exit_code == c.expect_exit);
  CHECK(r.err.rfind("foundryc: error: ", 0) == 0);
  // Exactly one line: the message, then one newline (or none).
  std::string body = r.err;
  if (!body.empty() && body.back() == '\n') body.pop_back();
  CHECK(body.find('\n') == std::string::npos);
  CHECK(body.find('\r') == std::string::npos);
  CHECK_FALSE(body.empty());
  const std::string msg = lowercase(body);
  if (!c.substring.empty()) CHECK(msg.find(c.substring) != std::string::npos);
  CHECK(msg.find("internal") == std::string::npos);
}

}  // namespace

TEST_CASE("hostile: the generator builds every case", "[hostile][fast]") {
  TempDir tmp("foundry_hostile_");
  auto cases = generate_hostile_cases(tmp.path());
  CHECK(cases.size() >= 20);
  int valid = 0;
  for (const auto& c : cases) {
    INFO(c.file);
    CHECK(fs::is_regular_file(c.file));
    CHECK((c.expect_exit == 0 || c.expect_exit == 1));
    CHECK(c.substring == lowercase(c.substring));
    if (c.expect_exit == 0) ++valid;
  }
  CHECK(valid == 6);
}

TEST_CASE("hostile: bad archives are clean one-line user errors", "[hostile][fast]") {
  TempDir tmp("foundry_hostile_");
  auto cases = generate_hostile_cases(tmp / "in");
  int n = 0;
  for (const auto& c : cases) {
    const std::string out = tmp / std::string("out_").append(std::to_string(n++));
    INFO("case " << fs::path(c.file).filename().string() << ": " << c.description);
    INFO("command: foundryc " << c.file << " --stop-after=frontend -o " << out);
    // Paths a name like "../../out" would reach if used as a file name without care.
    const std::string escape1 = tmp / "out", escape2 = tmp.path() + "/../out";
    const bool existed1 = fs::exists(escape1), existed2 = fs::exists(escape2);
    ProcResult r = run_foundryc({c.file, "--stop-after=frontend", "-o", out}, kHostileTimeoutSeconds);
    if (c.expect_exit == 0) {
      INFO("stdout: " << r.out);
      INFO("stderr: " << r.err);
      CHECK_FALSE(r.timed_out);
      CHECK(r.term_signal == 0);
      CHECK(r.exit_code == 0);
      // Whatever it wrote stays inside the output folder ("../../out" is one of the names).
      CHECK((existed1 || !fs::exists(escape1)));
      CHECK((existed2 || !fs::exists(escape2)));
      continue;
    }
    check_clean_user_error(r, c);
    CHECK_FALSE(fs::exists(out));  // no half-written output
  }
}

TEST_CASE("hostile: a failed compile leaves an existing output folder untouched", "[hostile][fast]") {
  TempDir tmp("foundry_hostile_");
  auto cases = generate_hostile_cases(tmp / "in");
  int n = 0;
  for (const auto& c : cases) {
    if (c.expect_exit == 0) continue;
    const std::string out = tmp / std::string("existing_").append(std::to_string(n++));
    fs::create_directories(out + "/sub");
    write_file(out + "/keep.txt", "precious\n");
    write_file(out + "/sub/model.h", "// an earlier build's output\n");
    const auto before = listing_of(out);
    INFO("case " << fs::path(c.file).filename().string() << ": " << c.description);
    ProcResult r = run_foundryc({c.file, "--stop-after=frontend", "-o", out}, kHostileTimeoutSeconds);
    check_clean_user_error(r, c);
    REQUIRE(fs::is_directory(out));
    CHECK(listing_of(out) == before);
    CHECK(read_file(out + "/keep.txt") == "precious\n");
    CHECK(read_file(out + "/sub/model.h") == "// an earlier build's output\n");
  }
}

namespace {

// The generated C++ with comments and string literals blanked out: what the compiler sees as code.
std::string code_only(const std::string& src) {
  std::string out;
  for (size_t i = 0; i < src.size();) {
    if (src.compare(i, 2, "//") == 0) {
      i = src.find('\n', i);
      if (i == std::string::npos) break;
    } else if (src.compare(i, 2, "/*") == 0) {
      size_t end = src.find("*/", i + 2);
      i = end == std::string::npos ? src.size() : end + 2;
      out += ' ';
    } else if (src[i] == '"') {
      for (++i; i < src.size() && src[i] != '"'; ++i)
        if (src[i] == '\\') ++i;
      ++i;
      out += "\"\"";
    } else {
      out += src[i++];
    }
  }
  return out;
}

// The outputs the valid cases must give, computed here from the sample inputs (no foundryc, no
// PyTorch): they are the pointwise graph bent into other shapes.
std::vector<float> expected_outputs(const std::string& case_name, const std::vector<foundry::NpyArray>& in) {
  const float* x = in.at(0).as<float>();
  const float* y = in.at(1).as<float>();
  std::vector<float> out(static_cast<size_t>(in.at(0).numel()));
  for (size_t e = 0; e < out.size(); ++e) {
    if (case_name == "nan_inf_constants") {
      out[e] = std::numeric_limits<float>::quiet_NaN();  // relu(x + NaN * y) * inf
    } else if (case_name == "many_nodes") {  // v = relu(v + y) * 2, one node at a time
      float v = x[e];
      for (int i = 0; i < 10000; ++i)
        v = i % 3 == 0 ? v + y[e] : i % 3 == 1 ? (v > 0 ? v : 0.0f) : v * 2.0f;
      out[e] = v;
    } else if (case_name == "many_shared_nodes") {  // v[i] = v[i-1] + v[i-2]
      float prev = x[e], prev2 = y[e];
      for (int i = 0; i < 10000; ++i) {
        float v = prev + prev2;
        prev2 = prev;
        prev = v;
      }
      out[e] = prev;
    } else {  // zip_dotdot_inside_root: the graph itself is untouched
      float v = x[e] + y[e];
      out[e] = (v > 0 ? v : 0.0f) * 2.0f;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("hostile: the valid cases compile, run right, and keep their names out of the code", "[hostile]") {
  TempDir tmp("foundry_hostile_");
  auto cases = generate_hostile_cases(tmp / "in");
  // Hostile names taken from valid_hostile_names.pt2 (make_hostile_inputs.py): none may reach the
  // generated code outside comments and string literals.
  const std::vector<std::string> hostile = {"in\"put", "perm\nute", "#include <stdlib.h>", "back\\slash",
                                            "../../out", "${HOME}", "`id`", "#define X 1", "w.0", "addmm*/"};
  int compiled = 0;
  for (const auto& c : cases) {
    if (c.expect_exit != 0) continue;
    const std::string name = fs::path(c.file).stem().string();
    const std::string out = tmp / ("out_" + name);
    INFO("case " << name << ": " << c.description);
    ProcResult r = run_foundryc({c.file, "-o", out, "-q"}, 300);
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    ++compiled;
    for (const std::string& escaped : std::vector<std::string>{"/tmp/foundry_hostile_absolute_entry", tmp.path() + "/../../foundry_hostile_inside_root",
                                      tmp.path() + "/../foundry_hostile_inside_root"})
      CHECK_FALSE(fs::exists(escaped));
    for (const char* file : {"kernels.cpp", "wrapper.cpp", "model.h", "externs.cpp"}) {
      if (!fs::exists(out + "/" + file)) continue;
      const std::string code = code_only(read_file(out + "/" + file));
      for (const auto& h : hostile) {
        INFO(file << " holds " << h << " outside comments and strings");
        CHECK(code.find(h) == std::string::npos);
      }
    }
    if (name == "zip_bomb_weights") {
      // Two deflated 128 MiB bias entries: weights.bin holds what the four tensors use (36 KB
      // and padding), not the bytes after them.
      CHECK(fs::file_size(out + "/weights.bin") < 64 * 1024);
    }
    if (name == "valid_hostile_names") {
      // manifest.json names each weight by its identifier and, exactly, by its name in the archive.
      nlohmann::json manifest = nlohmann::json::parse(read_file(out + "/manifest.json"));
      std::set<std::string> ids, fqns;
      for (const auto& w : manifest.at("weights")) {
        ids.insert(w.at("name").get<std::string>());
        fqns.insert(w.at("fqn").get<std::string>());
      }
      CHECK(ids.size() == 4);
      CHECK(fqns == std::set<std::string>{"0.weight\"*/\n#define X 1", "..\\..\\0.bias", "2.weight", "2.bias"});
    }
    foundry::LoadedModel model(out);
    if (name == "valid_hostile_names" || name == "zip_bomb_weights") {  // the mlp sample, renamed or with bombed entries: PyTorch's outputs
      const std::string mlp = samples_dir() + "/mlp";
      std::vector<foundry::NpyArray> got = model.run(foundry::read_npy_sequence(mlp + "/inputs"));
      std::vector<foundry::NpyArray> want = foundry::read_npy_sequence(mlp + "/expected");
      REQUIRE(got.size() == want.size());
      CHECK(foundry::compare_arrays(got[0], want[0]).pass);
      continue;
    }
    std::vector<foundry::NpyArray> inputs = foundry::read_npy_sequence(samples_dir() + "/pointwise/inputs");
    std::vector<foundry::NpyArray> got = model.run(inputs);
    REQUIRE(got.size() == 1);
    foundry::NpyArray want = got[0];
    std::vector<float> values = expected_outputs(name, inputs);
    std::memcpy(want.data.data(), values.data(), values.size() * sizeof(float));
    foundry::Comparison cmp = foundry::compare_arrays(got[0], want);
    INFO(cmp.message);
    CHECK(cmp.pass);
  }
  CHECK(compiled == 6);
}

// Issue 16, class 1: graphs whose ops would make a kernel read or write outside a buffer (views past
// their storage, index or source shapes that do not fit `self`) and string arguments PyTorch
// refuses. Without the checks they compile into models that corrupt memory; each must be the same
// clean user error from a full compile and from the reference evaluator (--interpret).
TEST_CASE("hostile: ops reaching outside a buffer are refused by the compiler and by --interpret",
          "[hostile][bounds][fast]") {
  TempDir tmp("foundry_hostile_");
  auto cases = generate_hostile_cases(tmp / "in");
  int checked = 0;
  for (const auto& c : cases) {
    if (!c.full_pipeline) continue;
    ++checked;
    const std::string stem = fs::path(c.file).stem().string();
    INFO("case " << stem << ": " << c.description);
    ProcResult compiled = run_foundryc({c.file, "-o", tmp / ("out_" + stem)}, 300);
    check_clean_user_error(compiled, c);
    CHECK_FALSE(fs::exists(tmp / ("out_" + stem)));
    const std::string inputs = (fs::path(c.file).parent_path() / (stem + ".inputs")).string();
    ProcResult interpreted = run_foundryc({c.file, "--interpret", "--inputs", inputs}, 300);
    check_clean_user_error(interpreted, c);
    CHECK(interpreted.err == compiled.err);
  }
  CHECK(checked >= 19);
}

// The harness itself: if run_process were wrong, the checks above would mean nothing.
TEST_CASE("hostile: run_process captures output, exit codes, signals and timeouts",
          "[hostile][fast]") {
  SECTION("stdout and stderr, separately") {
    ProcResult r = run_process({"/bin/sh", "-c", "printf out; printf err >&2; exit 3"});
    CHECK(r.exit_code == 3);
    CHECK(r.out == "out");
    CHECK(r.err == "err");
    CHECK(r.term_signal == 0);
    CHECK_FALSE(r.timed_out);
  }
  SECTION("no shell: arguments are passed verbatim") {
    ProcResult r = run_process({"/bin/echo", "a b", "$HOME", "*", "'\"", "x\ny"});
    CHECK(r.out == "a b $HOME * '\" x\ny\n");
  }
  SECTION("megabytes on both pipes do not deadlock") {
    ProcResult r = run_process(
        {python3(), "-c",
         "import sys\nfor i in range(64):\n sys.stdout.write('o' * 65536); sys.stderr.write('e' * 65536)"},
        60);
    CHECK(r.exit_code == 0);
    CHECK(r.out == std::string(64 * 65536, 'o'));
    CHECK(r.err == std::string(64 * 65536, 'e'));
  }
  SECTION("death by signal") {
    ProcResult r = run_process({"/bin/sh", "-c", "kill -SEGV $$"});
    CHECK(r.term_signal == SIGSEGV);
    CHECK(r.exit_code == 128 + SIGSEGV);
  }
  SECTION("timeout kills the process and its children") {
    auto start = std::chrono::steady_clock::now();
    ProcResult r = run_process({"/bin/sh", "-c", "sleep 30 & sleep 30; echo never"}, 1);
    auto took = std::chrono::steady_clock::now() - start;
    CHECK(r.timed_out);
    CHECK(r.term_signal == SIGKILL);
    CHECK(r.out.empty());
    CHECK(took < std::chrono::seconds(10));
  }
  SECTION("a program that does not exist") {
    ProcResult r = run_process({"/nonexistent/program"});
    CHECK(r.exit_code == 127);
    CHECK(r.err.find("/nonexistent/program") != std::string::npos);
  }
  SECTION("temporary folders") {
    std::string kept;
    {
      TempDir t("foundry_support_");
      kept = t.path();
      CHECK(fs::is_directory(kept));
      write_file(t / "f", "x");
      CHECK(read_file(t / "f") == "x");
    }
    if (!std::getenv("FOUNDRY_KEEP_TEMP")) CHECK_FALSE(fs::exists(kept));
    CHECK_THROWS(read_file(kept + "/f"));
  }
}

// ---- issue 16 (runtime): messages, bounded cost, non-regular files, links, empty ranges --------

namespace {

// Bytes a terminal would act on: C0 controls (but the final newline), DEL, and C1 controls
// written as UTF-8 (U+0080..U+009F: CSI is U+009B).
std::string control_bytes_in(const std::string& text) {
  std::string found;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    bool c1 = c == 0xc2 && i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xe0) == 0x80;
    if ((c < 0x20 && !(c == '\n' && i + 1 == text.size())) || c == 0x7f || c1) found += std::to_string(c) + " ";
  }
  return found;
}

}  // namespace

TEST_CASE("hostile: messages carry no terminal control bytes and stay short", "[hostile][fast]") {
  TempDir tmp("foundry_hostile_");
  auto cases = generate_hostile_cases(tmp / "in");
  int n = 0, msg_cases = 0;
  for (const auto& c : cases) {
    if (c.expect_exit == 0) continue;
    const std::string name = fs::path(c.file).filename().string();
    msg_cases += name.rfind("msg_", 0) == 0;
    INFO("case " << name << ": " << c.description);
    ProcResult r = run_foundryc({c.file, "--stop-after=frontend", "-o", tmp / ("out_" + std::to_string(n++))},
                                kHostileTimeoutSeconds);
    INFO("stderr (first 300 bytes): " << r.err.substr(0, 300));
    CHECK(r.exit_code == 1);
    CHECK(control_bytes_in(r.err).empty());
    CHECK(r.err.size() <= 4096);  // a message is a line to read, not a dump of the archive
  }
  CHECK(msg_cases == 5);
}

TEST_CASE("hostile: an empty dynamic range is refused when compiling", "[hostile][fast]") {
  TempDir tmp("foundry_hostile_");
  auto cases = generate_hostile_cases(tmp / "in");
  // [100, 10] is empty as written (the frontend says so: the generator's case); [0, 0] is legal in
  // the archive but holds no size >= 1, the sizes the model accepts.
  for (auto [lo, hi, word] : {std::tuple{100, 10, "empty"}, std::tuple{0, 0, "no size"}}) {
    const std::string dir = tmp / ("range_" + std::to_string(lo) + "_" + std::to_string(hi));
    ProcResult x = run_process({"unzip", "-q", samples_dir() + "/mlp_dynamic/model.pt2", "-d", dir});
    REQUIRE(x.exit_code == 0);
    std::string json_path;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.path().filename() == "model.json") json_path = e.path().string();
    REQUIRE_FALSE(json_path.empty());
    nlohmann::json program = nlohmann::json::parse(read_file(json_path));
    for (auto& range : program["range_constraints"]) range = {{"min_val", lo}, {"max_val", hi}};
    write_file(json_path, program.dump());
    ProcResult r = run_foundryc({dir, "-o", tmp / "out"}, kHostileTimeoutSeconds);
    INFO("range [" << lo << ", " << hi << "]: " << r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.rfind("foundryc: error: ", 0) == 0);
    CHECK(r.err.find(word) != std::string::npos);
    CHECK_FALSE(fs::exists(tmp / "out"));
  }
}

TEST_CASE("hostile: a symbolic link out of an extracted archive folder is refused", "[hostile][fast]") {
  TempDir tmp("foundry_hostile_");
  const std::string dir = tmp / "mlp";
  ProcResult x = run_process({"unzip", "-q", samples_dir() + "/mlp/model.pt2", "-d", dir});
  REQUIRE(x.exit_code == 0);
  fs::path weight;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == "weight_1") weight = e.path();
  REQUIRE_FALSE(weight.empty());
  const std::string saved = read_file(weight.string());
  SECTION("a link leaving the folder") {
    write_file(tmp / "outside_weight", saved);  // the right bytes, but outside: still refused
    fs::remove(weight);
    fs::create_symlink(tmp / "outside_weight", weight);
    ProcResult r = run_foundryc({dir, "-o", tmp / "out", "--stop-after=frontend"}, kHostileTimeoutSeconds);
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("symbolic link") != std::string::npos);
    fs::remove(weight);
    fs::create_symlink("/etc/passwd", weight);
    r = run_foundryc({dir, "-o", tmp / "out", "--stop-after=frontend"}, kHostileTimeoutSeconds);
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("outside the archive folder") != std::string::npos);
  }
  SECTION("a link inside the folder is followed") {
    write_file(weight.parent_path() / "weight_1_copy", saved);
    fs::remove(weight);
    fs::create_symlink("weight_1_copy", weight);
    ProcResult r = run_foundryc({dir, "-o", tmp / "out", "--stop-after=frontend"}, kHostileTimeoutSeconds);
    INFO(r.err);
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("hostile: a damaged autocast region is a clean user error", "[hostile][fast]") {
  // test/data/raw_ops/wrapped_regions: a wrap_with_autocast node over a subgraph, damaged in the
  // ways a hand-edited or truncated export could be.
  TempDir tmp("foundry_hostile_");
  const std::string dir = tmp / "regions";
  REQUIRE(run_process({"unzip", "-q", test_source_dir() + "/data/raw_ops/wrapped_regions/model.raw.pt2", "-d", dir})
              .exit_code == 0);
  fs::path json_path;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == "model.json") json_path = e.path();
  REQUIRE_FALSE(json_path.empty());
  const nlohmann::json original = nlohmann::json::parse(read_file(json_path.string()));
  auto wrapper = [](nlohmann::json& doc) -> nlohmann::json& {
    for (auto& node : doc["graph_module"]["graph"]["nodes"])
      if (node["target"] == "torch.ops.higher_order.wrap_with_autocast") return node;
    FAIL("no wrap_with_autocast node");
    return doc;
  };
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> damages = {
      {"expected a tensor operand", [&](nlohmann::json& d) { wrapper(d)["inputs"].back()["arg"] = {{"as_int", 3}}; }},
      {"do not match the operands", [&](nlohmann::json& d) { wrapper(d)["inputs"].erase(wrapper(d)["inputs"].size() - 1); }},
      {"expected a subgraph", [&](nlohmann::json& d) { wrapper(d)["inputs"][4]["arg"] = {{"as_int", 0}}; }},
      {"outputs do not match", [&](nlohmann::json& d) { wrapper(d)["inputs"][4]["arg"]["as_graph"]["graph"]["outputs"] = nlohmann::json::array(); }},
  };
  for (const auto& [message, damage] : damages) {
    nlohmann::json doc = original;
    damage(doc);
    write_file(json_path.string(), doc.dump());
    ProcResult r = run_foundryc({dir, "-o", tmp / "out", "--stop-after=frontend"}, kHostileTimeoutSeconds);
    INFO(message << ": " << r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(message) != std::string::npos);
    CHECK(r.err.find("bug") == std::string::npos);
  }
}

TEST_CASE("hostile: FIFOs and other non-regular files are refused, never waited on", "[hostile][fast]") {
  TempDir tmp("foundry_hostile_");
  const std::string fifo = tmp / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  // Each command would block forever opening the FIFO (no writer); the timeout is only the guard.
  SECTION("the input") {
    ProcResult r = run_foundryc({fifo, "-o", tmp / "out"}, 30);
    INFO(r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("not a regular file") != std::string::npos);
  }
  SECTION("models/model.json of an extracted archive, and a weight") {
    const std::string dir = tmp / "mlp";
    REQUIRE(run_process({"unzip", "-q", samples_dir() + "/mlp/model.pt2", "-d", dir}).exit_code == 0);
    for (const char* file : {"model.json", "weight_1"}) {
      fs::path target;
      for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.path().filename() == file) target = e.path();
      REQUIRE_FALSE(target.empty());
      const std::string saved = read_file(target.string());
      fs::remove(target);
      REQUIRE(mkfifo(target.c_str(), 0600) == 0);
      ProcResult r = run_foundryc({dir, "-o", tmp / "out", "--stop-after=frontend"}, 30);
      INFO(file << ": " << r.err);
      CHECK_FALSE(r.timed_out);
      CHECK(r.exit_code == 1);
      CHECK(r.err.find("not a regular file") != std::string::npos);
      fs::remove(target);
      write_file(target.string(), saved);
    }
    ProcResult bare = run_foundryc({fifo, "-o", tmp / "out", "--stop-after=frontend"}, 30);
    CHECK_FALSE(bare.timed_out);
  }
  SECTION("weights.bin, manifest.json and an input of a compiled model (NAME_create, foundry-run)") {
    const std::string mlp = samples_dir() + "/mlp";
    ProcResult c = run_foundryc({mlp + "/model.pt2", "-o", tmp / "out", "-q"});
    REQUIRE(c.exit_code == 0);
    for (const char* file : {"weights.bin", "manifest.json"}) {
      const std::string path = tmp / (std::string("out/") + file);
      const std::string saved = read_file(path);
      fs::remove(path);
      REQUIRE(mkfifo(path.c_str(), 0600) == 0);
      ProcResult r = run_process({foundry_run_exe(), tmp / "out", "--inputs", mlp + "/inputs"}, 30);
      INFO(file << ": " << r.err);
      CHECK_FALSE(r.timed_out);
      CHECK(r.exit_code == 1);
      CHECK(r.err.find("regular file") != std::string::npos);
      fs::remove(path);
      write_file(path, saved);
    }
    fs::create_directories(tmp / "inputs");
    REQUIRE(mkfifo((tmp / "inputs/0.npy").c_str(), 0600) == 0);
    ProcResult r = run_process({foundry_run_exe(), tmp / "out", "--inputs", tmp / "inputs"}, 30);
    INFO(r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("not a regular file") != std::string::npos);
  }
}

TEST_CASE("hostile: foundry-run's output errors are user errors", "[hostile][fast]") {
  TempDir tmp("foundry_hostile_");
  const std::string mlp = samples_dir() + "/mlp";
  ProcResult c = run_foundryc({mlp + "/model.pt2", "-o", tmp / "out", "-q"});
  REQUIRE(c.exit_code == 0);
  SECTION("--save-outputs onto a file") {
    write_file(tmp / "a_file", "not a folder\n");
    ProcResult r = run_process({foundry_run_exe(), tmp / "out", "--inputs", mlp + "/inputs", "--save-outputs", tmp / "a_file"});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("not a folder") != std::string::npos);
    CHECK(r.err.find("bug") == std::string::npos);
    CHECK(read_file(tmp / "a_file") == "not a folder\n");
  }
  SECTION("an output larger than the memory it may use") {
    // mlp_dynamic at its largest batch needs little; its output under a 1 GiB address space limit
    // with a batch past the range is refused by the model. A static model with a huge output is
    // built instead: expand x [1024] to [2^20, 1024] (4 GiB of float32) by the output shape.
    TempDir big("foundry_hostile_");
    const std::string dir = big / "pw";
    REQUIRE(run_process({"unzip", "-q", samples_dir() + "/pointwise/model.pt2", "-d", dir}).exit_code == 0);
    std::string json_path;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.path().filename() == "model.json") json_path = e.path().string();
    nlohmann::json p = nlohmann::json::parse(read_file(json_path));
    auto& g = p["graph_module"]["graph"];
    nlohmann::json expand = {{"target", "torch.ops.aten.expand.default"},
                             {"inputs", {{{"name", "self"}, {"arg", {{"as_tensor", {{"name", "mul"}}}}}, {"kind", 1}},
                                         {{"name", "size"}, {"arg", {{"as_ints", {1 << 22, 1024}}}}, {"kind", 1}}}},
                             {"outputs", {{{"as_tensor", {{"name", "big"}}}}}},
                             {"name", "big"},
                             {"metadata", nlohmann::json::object()}};
    g["nodes"].push_back(expand);
    nlohmann::json meta = g["tensor_values"]["mul"];
    meta["sizes"] = {{{"as_int", 1 << 22}}, {{"as_int", 1024}}};
    meta["strides"] = {{{"as_int", 0}}, {{"as_int", 1}}};
    g["tensor_values"]["big"] = meta;
    g["outputs"] = {{{"as_tensor", {{"name", "big"}}}}};
    p["graph_module"]["signature"]["output_specs"] = {{{"user_output", {{"arg", {{"as_tensor", {{"name", "big"}}}}}}}}};
    write_file(json_path, p.dump());
    ProcResult b = run_foundryc({dir, "-o", big / "out", "-q"});
    INFO(b.err);
    REQUIRE(b.exit_code == 0);
#ifndef __SANITIZE_ADDRESS__  // ASan reserves terabytes of address space: no limit applies
    ProcResult r = run_process({"prlimit", "--as=2147483648", foundry_run_exe(), big / "out", "--inputs",
                                samples_dir() + "/pointwise/inputs"});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("more memory than is available") != std::string::npos);
    CHECK(r.err.find("bug") == std::string::npos);
#endif
  }
}

namespace {

// The cost cases (make_hostile_inputs.py --set cost) as a plain computation per element.
float cost_case_output(const std::string& name, float x, float y) {
  float v = x;
  if (name == "cost_squarings")
    for (int i = 0; i < 24; ++i) v = v * v;
  else if (name == "cost_negations")
    v = x;  // an even number of negations (100000)
  // cost_permutes: 4000 transposes of a square matrix give it back
  return v + y;
}

}  // namespace

TEST_CASE("hostile: compile cost stays near-linear in the graph", "[hostile]") {
  TempDir tmp("foundry_hostile_");
  const std::string script = test_source_dir() + "/../scripts/make_hostile_inputs.py";
  ProcResult gen = run_process({python3(), script, tmp / "in", "--samples", samples_dir(), "--set", "cost"}, 120);
  REQUIRE(gen.exit_code == 0);
  nlohmann::json listing = nlohmann::json::parse(read_file(tmp / "in/cases.json"));
  REQUIRE(listing.size() == 3);
  for (const auto& c : listing) {
    const std::string file = tmp / ("in/" + c.at("file").get<std::string>());
    const std::string name = fs::path(file).stem().string(), out = tmp / ("out_" + name);
    INFO("case " << name << ": " << c.at("description").get<std::string>());
    // The compiler's own stages under a memory cap: copying an inlined value at each use
    // (squarings) or a view's whole chain of sources at each view (permutes) takes 2 GB and
    // 1.1 GB; linear stages need a few hundred MB (the 40 MB model.json of the negations).
    // Lowering 100,000 negations looked up each node's users by scanning every node: 130 s of
    // lowering alone, where the whole linear compile takes a few seconds; the guard is that
    // 20-fold margin, not a measure of speed.
    std::vector<std::string> argv = {foundryc_exe(), file, "-o", tmp / ("stages_" + name), "--stop-after=codegen", "-q"};
#ifndef __SANITIZE_ADDRESS__  // ASan reserves terabytes of address space
    argv.insert(argv.begin(), {"prlimit", "--as=" + std::to_string(int64_t(1) << 30)});
#endif
    ProcResult stages = run_process(argv, 100);
    INFO("stderr: " << stages.err.substr(0, 2000));
    CHECK_FALSE(stages.timed_out);
    CHECK(stages.exit_code == 0);
    // The whole compile, the C++ compiler included, and the model's values.
    ProcResult r = run_foundryc({file, "-o", out, "-q"}, 600);
    INFO("stderr: " << r.err.substr(0, 2000));
    REQUIRE(r.exit_code == 0);
    foundry::LoadedModel model(out);
    std::vector<foundry::NpyArray> inputs(2);
    for (auto& a : inputs) {
      a.dtype = foundry::DType::Float32;
      a.shape = name == "cost_permutes" ? std::vector<int64_t>{32, 32} : std::vector<int64_t>{1024};
      a.data.resize(1024 * sizeof(float));
    }
    float* x = reinterpret_cast<float*>(inputs[0].data.data());
    float* y = reinterpret_cast<float*>(inputs[1].data.data());
    for (int i = 0; i < 1024; ++i) {
      // Within 32 steps of 1.19e-7 around 1: x^(2^24) stays between e^-64 and e^64.
      x[i] = 1.0f + static_cast<float>(i % 64 - 32) * 1.1920929e-7f;
      y[i] = 0.5f * static_cast<float>(i % 7) - 1.0f;
    }
    std::vector<foundry::NpyArray> got = model.run(inputs);
    REQUIRE(got.size() == 1);
    foundry::NpyArray want = got[0];
    float* w = reinterpret_cast<float*>(want.data.data());
    for (int i = 0; i < 1024; ++i) w[i] = cost_case_output(name, x[i], y[i]);
    foundry::Comparison cmp = foundry::compare_arrays(got[0], want);
    INFO(cmp.message);
    CHECK(cmp.pass);
  }
}

TEST_CASE("hostile: weight identifiers are plain, bounded and clear of generated names", "[hostile][fast]") {
  using foundry::ir::weight_identifier;
  CHECK(weight_identifier("p_conv1_weight") == "p_conv1_weight");  // torch.export's names as they are
  CHECK(weight_identifier("b_bn_running_mean") == "b_bn_running_mean");
  CHECK(weight_identifier("c_lifted_tensor_0") == "c_lifted_tensor_0");
  CHECK(weight_identifier("p_a__b") == "p_a_b");
  for (const auto& [name, id] : std::vector<std::pair<std::string, std::string>>{
           {"buf0", "w_buf0"}, {"arg0", "w_arg0"}, {"s0", "w_s0"}, {"int", "w_int"}, {"__x", "w_x"},
           {"_Xy", "w_Xy"}, {"P_x", "w_P_x"}, {"p_", "w_p"}, {"", "w_weight"}, {"_", "w_weight"},
           {"conv1.weight", "w_conv1_weight"}, {"a*/b\nc", "w_a_b_c"}, {"\xc3\xa9t\xc3\xa9_2", "w_t_2"},
           {"cpp_fused_add_0", "w_cpp_fused_add_0"}, {"model", "w_model"}}) {
    INFO(foundry::quote_untrusted(name));
    CHECK(weight_identifier(name) == id);
  }
  const std::string id = weight_identifier(std::string(5000, 'n'));
  CHECK(id == "w_" + std::string(foundry::ir::kMaxWeightIdentifier - 2, 'n'));
  // Cut at the limit, the identifier does not end in '_'.
  const std::string as(foundry::ir::kMaxWeightIdentifier - 3, 'a');
  CHECK(weight_identifier("p_" + as + "_b") == "p_" + as);

  // Names that come out the same get numbered, the numbered ones clear of later names too.
  foundry::ir::LoopProgram program;
  std::vector<std::string> names;
  for (const char* hint : {"p_a__b", "p_a_b", "p_a_b_2", "p_a.b"})
    names.push_back(program.new_buffer(foundry::ir::BufferKind::Constant, foundry::DType::Float32, {}, hint)->name);
  CHECK(names == std::vector<std::string>{"p_a_b", "p_a_b_2", "p_a_b_2_2", "p_a_b_3"});
  CHECK(program.new_buffer(foundry::ir::BufferKind::Computed, foundry::DType::Float32, {})->name == "buf0");
}

TEST_CASE("hostile: weights with hostile names compile, run right and keep distinct identifiers", "[hostile][fast]") {
  using namespace foundry;
  // Weight names as a graph could carry them: a 5,000-character one, pairs that sanitize alike
  // (also once cut to the length limit), generated names, a keyword, a reserved identifier,
  // non-ASCII bytes, a comment terminator and a newline.
  const std::string long_pair = "p_" + std::string(48, 'q');
  const std::vector<std::string> hostile = {std::string(5000, 'n'), "p_a__b", "p_a_b", long_pair + "_one",
                                            long_pair + "_two", "buf0", "arg0", "s0", "int", "__x", "model",
                                            "w\xc3\xa9ight", "end*/ int oops;", "line\nbreak", "p_" + std::string(62, 'z')};
  Builder b;
  Value* x = b.input("x", {6});
  Value* sum = x;
  std::vector<float> want = {0.5f, -1.0f, 2.0f, 3.5f, -4.0f, 0.25f};  // the inputs, then the sums
  for (size_t k = 0; k < hostile.size(); ++k) {
    std::vector<float> data;
    for (int i = 0; i < 6; ++i) data.push_back(static_cast<float>(k) + 0.125f * static_cast<float>(i));
    sum = b.op("add.Tensor", {pos(sum), pos(b.weight(hostile[k], {6}, data))});
  }
  b.output(sum);

  TempDir tmp("foundry_hostile_");
  const std::string dir = tmp / "model";
  ir::LoopProgram program = lower::lower_graph(b.g);
  sched::Schedule schedule = sched::schedule_program(program, {});
  fs::create_directories(dir);
  codegen::write_model_files(codegen::generate_model(program, schedule, "hostile_weights"), dir);
  build::CompileOptions options;
  options.cache_dir = test_cache_dir();
  build::compile_model(dir, options);  // throws when the C++ compiler refuses the code

  LoadedModel model(dir + "/model.so", "hostile_weights", dir);
  std::vector<NpyArray> got = model.run({npy_array(DType::Float32, {6}, want)});
  for (size_t i = 0; i < want.size(); ++i)
    for (size_t k = 0; k < hostile.size(); ++k) want[i] += static_cast<float>(k) + 0.125f * static_cast<float>(i);
  REQUIRE(got.size() == 1);
  Comparison cmp = compare_arrays(got[0], npy_array(DType::Float32, {6}, want));
  INFO(cmp.message);
  CHECK(cmp.pass);

  // Each weight's pointer in the run body: one line each, a plain identifier that is no other name.
  const std::string wrapper = read_file(dir + "/wrapper.cpp");
  const std::regex pointer(R"(  const auto\* (\w+) = reinterpret_cast<const float\*>\(model->weights\.data \+ \d+\);  // (.*))");
  const std::regex plain("[pbcw]_[A-Za-z0-9]+(_[A-Za-z0-9]+)*");
  std::set<std::string> ids;
  std::istringstream lines(wrapper);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, pointer)) continue;
    INFO(line.substr(0, 200));
    CHECK(std::regex_match(m[1].str(), plain));
    CHECK(static_cast<size_t>(m[1].length()) <= foundry::ir::kMaxWeightIdentifier + 8);  // and a suffix _N
    CHECK(m[2].length() <= 120);  // the 5,000-character name is cut in the comment too
    ids.insert(m[1]);
  }
  CHECK(ids.size() == hostile.size());
  for (const char* generated : {"buf0", "arg0", "s0", "int", "__x", "model"}) CHECK(ids.count(generated) == 0);
  const std::string code = code_only(wrapper);
  // Nothing of the names' text escaped the comments it is quoted in.
  for (const char* text : {"oops", "\nbreak", "\xc3\xa9"}) CHECK(code.find(text) == std::string::npos);
}
