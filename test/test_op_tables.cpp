// The op tables agree: every op of ops.def (the registry) is lowered (lowerings.def) or
// decomposed (the rules and in-place functionalization of passes/decompose.cpp), exactly one of
// them; every lowering and decomposition names a registered op; no table lists an op twice. The
// tables are read through the code's own registries; the check itself is tested on broken tables.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "foundry/lower/lowering.h"
#include "foundry/ops/registry.h"
#include "foundry/passes/decompose.h"
#include "support.h"

namespace {

struct OpTables {
  std::vector<std::string> ops, lowered, decomposed;
  // Ops neither lowered nor decomposed because something else always removes them first, with
  // where (a pass, say). None today: remove_noops forwards identities, but the general forms of
  // those ops are still lowered.
  std::map<std::string, std::string> handled_elsewhere;
};

void find_repeats(const std::vector<std::string>& names, const std::string& table, std::vector<std::string>& problems) {
  std::set<std::string> seen;
  for (const auto& name : names)
    if (!seen.insert(name).second) problems.push_back(name + " is listed twice in " + table);
}

void find_unknown(const std::vector<std::string>& names, const std::set<std::string>& ops, const std::string& table,
                  std::vector<std::string>& problems) {
  for (const auto& name : names)
    if (!ops.count(name)) problems.push_back(table + " names " + name + ", which ops.def does not have");
}

// Every way the tables disagree, one line each.
std::vector<std::string> disagreements(const OpTables& t) {
  std::vector<std::string> problems;
  find_repeats(t.ops, "ops.def", problems);
  find_repeats(t.lowered, "lowerings.def", problems);
  find_repeats(t.decomposed, "the decompositions", problems);
  std::set<std::string> ops(t.ops.begin(), t.ops.end());
  find_unknown(t.lowered, ops, "lowerings.def", problems);
  find_unknown(t.decomposed, ops, "the decompositions", problems);
  for (const auto& [name, where] : t.handled_elsewhere)
    if (!ops.count(name)) problems.push_back("the handled-elsewhere list names " + name + ", which ops.def does not have");
  std::set<std::string> lowered(t.lowered.begin(), t.lowered.end()), decomposed(t.decomposed.begin(), t.decomposed.end());
  for (const auto& op : ops) {
    std::vector<std::string> ways;
    if (lowered.count(op)) ways.push_back("lowered");
    if (decomposed.count(op)) ways.push_back("decomposed");  // always, before lowering: a lowering is dead
    if (t.handled_elsewhere.count(op)) ways.push_back("handled elsewhere");
    if (ways.empty()) problems.push_back(op + " is in ops.def but neither lowered nor decomposed");
    if (ways.size() > 1) problems.push_back(op + " is handled twice: " + ways[0] + " and " + ways[1]);
  }
  return problems;
}

OpTables registered_tables() {
  OpTables t;
  for (const foundry::OpInfo& op : foundry::all_ops()) t.ops.push_back(op.name);
  for (const foundry::lower::Lowering& l : foundry::lower::all_lowerings()) t.lowered.push_back(l.op);
  t.decomposed = foundry::passes::decomposed_ops();
  return t;
}

bool mentions(const std::vector<std::string>& problems, const std::string& what) {
  for (const auto& p : problems)
    if (p.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("op tables: every op is lowered or decomposed, once, and every row names a registered op", "[ops][fast]") {
  OpTables t = registered_tables();
  REQUIRE(t.ops.size() > 150);  // the registries are populated (not an empty-vs-empty pass)
  REQUIRE(t.lowered.size() > 100);
  REQUIRE(t.decomposed.size() > 20);
  std::vector<std::string> problems = disagreements(t);
  for (const auto& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());
}

TEST_CASE("op tables: the agreement check catches each kind of disagreement", "[ops][fast]") {
  const OpTables good{{"add.Tensor", "linear", "relu_"}, {"add.Tensor"}, {"linear", "relu_"}, {}};
  REQUIRE(disagreements(good).empty());

  OpTables missing = good;
  missing.lowered.clear();
  CHECK(mentions(disagreements(missing), "add.Tensor is in ops.def but neither lowered nor decomposed"));

  OpTables both = good;
  both.lowered.push_back("linear");
  CHECK(mentions(disagreements(both), "linear is handled twice: lowered and decomposed"));

  OpTables unknown = good;
  unknown.lowered.push_back("frobnicate");
  unknown.decomposed.push_back("defrobnicate");
  CHECK(mentions(disagreements(unknown), "lowerings.def names frobnicate"));
  CHECK(mentions(disagreements(unknown), "the decompositions names defrobnicate"));

  OpTables twice = good;
  twice.ops.push_back("relu_");
  twice.lowered.push_back("add.Tensor");
  CHECK(mentions(disagreements(twice), "relu_ is listed twice in ops.def"));
  CHECK(mentions(disagreements(twice), "add.Tensor is listed twice in lowerings.def"));

  OpTables elsewhere = good;
  elsewhere.lowered.clear();
  elsewhere.handled_elsewhere["add.Tensor"] = "a pass";
  CHECK(disagreements(elsewhere).empty());
  elsewhere.handled_elsewhere["nonesuch"] = "a pass";
  CHECK(mentions(disagreements(elsewhere), "handled-elsewhere list names nonesuch"));
}
