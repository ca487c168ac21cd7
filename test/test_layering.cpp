// The pipeline's layering: every #include of a foundry header in lib/<stage>/ and
// include/foundry/<stage>/ names a stage that cmake/stages.txt lets <stage> use (the table
// CMakeLists.txt declares the stage libraries from). The linker only sees dependencies through
// symbols; a header-only one (an inline function, a struct) would go unnoticed without this.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "support.h"

namespace fs = std::filesystem;

namespace {

struct StageTable {
  std::vector<std::string> stages;                      // in table order
  std::map<std::string, std::vector<std::string>> uses;  // as written: the stages used directly
};

std::string trim(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// Reads the table as CMakeLists.txt does: "stage: used stages", '#' starts a comment, a stage
// uses only stages of earlier lines. Throws std::runtime_error on a line CMake would refuse.
StageTable read_stage_table(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  static const std::regex line_form(R"(([a-z_]+):(.*))");
  StageTable table;
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::smatch m;
    if (!std::regex_match(line, m, line_form)) throw std::runtime_error("cannot read the line '" + line + "'");
    const std::string stage = m[1];
    std::istringstream used(m[2].str());
    for (std::string u; used >> u;) {
      if (!table.uses.count(u)) throw std::runtime_error(stage + " uses " + u + ", not a stage on an earlier line");
      table.uses[stage].push_back(u);
    }
    table.uses[stage];  // a stage that uses nothing
    table.stages.push_back(stage);
  }
  return table;
}

// The stages each stage may include: itself, the stages it uses, and what those may include.
std::map<std::string, std::set<std::string>> includable_stages(const StageTable& table) {
  std::map<std::string, std::set<std::string>> allowed;
  for (const std::string& stage : table.stages) {  // table order: the used stages are done already
    std::set<std::string>& mine = allowed[stage];
    mine.insert(stage);
    for (const std::string& used : table.uses.at(stage)) mine.insert(allowed[used].begin(), allowed[used].end());
  }
  return allowed;
}

class LayeringChecker {
 public:
  LayeringChecker(fs::path root, const StageTable& table)
      : root_(std::move(root)), table_(table), allowed_(includable_stages(table)) {}

  // One line per problem, naming the file and the include; empty when the layering holds.
  std::vector<std::string> violations() {
    check_folders_are_stages(root_ / "lib");
    check_folders_are_stages(root_ / "include" / "foundry");
    for (const std::string& stage : table_.stages) {
      if (!fs::is_directory(root_ / "lib" / stage)) problems_.push_back("stage " + stage + " has no lib/" + stage + "/");
      check_folder(stage, root_ / "lib" / stage);
      check_folder(stage, root_ / "include" / "foundry" / stage);
    }
    return problems_;
  }

 private:
  fs::path root_;
  const StageTable& table_;
  std::map<std::string, std::set<std::string>> allowed_;
  std::vector<std::string> problems_;

  bool is_stage(const std::string& name) const { return table_.uses.count(name) > 0; }

  // A folder that is no stage would not be checked (nor, in lib/, built).
  void check_folders_are_stages(const fs::path& dir) {
    for (const fs::directory_entry& e : fs::directory_iterator(dir))
      if (e.is_directory() && !is_stage(e.path().filename().string()))
        problems_.push_back(fs::relative(e.path(), root_).string() + "/: not a stage of cmake/stages.txt");
  }

  void check_folder(const std::string& stage, const fs::path& dir) {
    if (!fs::is_directory(dir)) return;
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file()) check_file(stage, e.path());
  }

  void check_file(const std::string& stage, const fs::path& file) {
    static const std::regex include_form(R"re(^\s*#\s*include\s*"([^"]+)")re");
    std::ifstream in(file);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::smatch m;
      if (!std::regex_search(line, m, include_form)) continue;
      const std::string problem = include_problem(stage, m[1]);
      if (!problem.empty())
        problems_.push_back(fs::relative(file, root_).string() + ":" + std::to_string(number) + ": #include \"" +
                            m[1].str() + "\": " + problem);
    }
  }

  // Why `stage` may not include `path`, or "" if it may.
  std::string include_problem(const std::string& stage, const std::string& path) const {
    const size_t slash = path.find('/');
    if (slash == std::string::npos) return "";  // next to the including file: the same stage
    const std::string first = path.substr(0, slash);
    if (first == "..") return "a relative path out of the stage's folder (write \"foundry/<stage>/...\")";
    if (first == "foundry") {
      const size_t end = path.find('/', slash + 1);
      const std::string used = end == std::string::npos ? "" : path.substr(slash + 1, end - slash - 1);
      if (!is_stage(used)) return "names no stage of cmake/stages.txt";
      if (!allowed_.at(stage).count(used)) return stage + " may not use " + used + " (cmake/stages.txt)";
      return "";
    }
    if (is_stage(first) && first != stage) return "a private header of " + first + " (lib/" + first + "/)";
    return "";
  }
};

std::vector<std::string> check_tree(const fs::path& root) {
  return LayeringChecker(root, read_stage_table(root / "cmake" / "stages.txt")).violations();
}

// Writes `text` to `path`, creating its folders.
void make_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("layering: every stage includes only the stages cmake/stages.txt lets it use", "[layering][fast]") {
  const fs::path root = fs::path(foundry::test::test_source_dir()).parent_path();
  const std::vector<std::string> problems = check_tree(root);
  for (const std::string& p : problems) FAIL_CHECK(p);
  CHECK(problems.empty());
}

TEST_CASE("layering: the checker names each include against the table", "[layering][fast]") {
  foundry::test::TempDir dir("foundry_layering_");
  const fs::path root = dir.path();
  make_file(root / "cmake" / "stages.txt", "# comment\nsupport:\ngraph: support  # why\nops: graph\npasses: ops\n");
  make_file(root / "include" / "foundry" / "support" / "error.h", "#pragma once\n");
  make_file(root / "include" / "foundry" / "ops" / "registry.h", "#include \"foundry/graph/graph.h\"\n");
  make_file(root / "lib" / "support" / "error.cpp", "#include \"foundry/support/error.h\"\n");
  make_file(root / "lib" / "graph" / "verify.cpp",
            "#include \"foundry/graph/graph.h\"\n#include <vector>\n  #  include \"foundry/ops/registry.h\"\n");
  make_file(root / "lib" / "ops" / "bind.cpp", "#include \"graph/private.h\"\n#include \"ops/util.h\"\n");
  make_file(root / "lib" / "passes" / "cse.cpp",
            "#include \"foundry/support/error.h\"\n#include \"foundry/lower/lowering.h\"\n#include \"../x/y.h\"\n");
  make_file(root / "lib" / "stray" / "a.cpp", "");

  const std::vector<std::string> expected = {
      "lib/stray/: not a stage of cmake/stages.txt",
      "lib/graph/verify.cpp:3: #include \"foundry/ops/registry.h\": graph may not use ops (cmake/stages.txt)",
      "lib/ops/bind.cpp:1: #include \"graph/private.h\": a private header of graph (lib/graph/)",
      "lib/passes/cse.cpp:2: #include \"foundry/lower/lowering.h\": names no stage of cmake/stages.txt",
      "lib/passes/cse.cpp:3: #include \"../x/y.h\": a relative path out of the stage's folder (write "
      "\"foundry/<stage>/...\")",
  };
  std::vector<std::string> problems = check_tree(root);
  std::sort(problems.begin(), problems.end());
  std::vector<std::string> sorted = expected;
  std::sort(sorted.begin(), sorted.end());
  CHECK(problems == sorted);
}

TEST_CASE("layering: the table refuses a stage using a later one (a cycle)", "[layering][fast]") {
  foundry::test::TempDir dir("foundry_layering_");
  const fs::path table = fs::path(dir.path()) / "stages.txt";
  make_file(table, "graph: ops\nops: graph\n");
  CHECK_THROWS_WITH(read_stage_table(table), "graph uses ops, not a stage on an earlier line");
  make_file(table, "graph support\n");
  CHECK_THROWS_WITH(read_stage_table(table), "cannot read the line 'graph support'");
}
