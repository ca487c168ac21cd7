// Dead-code elimination: one backward sweep marks what the outputs need.
#include "foundry/passes/dead_code.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_set>

#include "foundry/passes/rewrite.h"

namespace foundry::passes {

bool eliminate_dead_code(Graph& g) {
  std::unordered_set<const Value*> live;
  std::unordered_set<std::string> mutated;
  for (const GraphOutput& o : g.outputs) {
    live.insert(o.value);
    if (o.kind != OutputKind::User) mutated.insert(o.target);
  }

  std::unordered_set<const Node*> dead;
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    const Node& n = **it;
    bool needed = has_side_effects(n) ||
                  std::any_of(n.outputs.begin(), n.outputs.end(), [&](const Value* v) { return live.count(v); });
    if (!needed) {
      dead.insert(&n);
      continue;
    }
    for (const Arg& a : n.args) {
      if (a.tensor) live.insert(a.tensor);
      for (const Value* v : a.tensors)
        if (v) live.insert(v);
    }
  }

  size_t inputs_before = g.inputs.size();
  std::erase_if(g.inputs, [&](const GraphInput& in) {
    if (in.kind == InputKind::User || live.count(in.value)) return false;
    const Value* v = in.value;
    return !(mutated.count(in.fqn) || mutated.count(v->name) || mutated.count(v->source_name));
  });
  size_t inputs_removed = inputs_before - g.inputs.size();

  if (!dead.empty())
    std::erase_if(g.nodes, [&](const std::unique_ptr<Node>& p) { return dead.count(p.get()) != 0; });
  if (!dead.empty() || inputs_removed)
    spdlog::debug("dce: removed {} nodes and {} unused weights", dead.size(), inputs_removed);
  return !dead.empty() || inputs_removed != 0;
}

}  // namespace foundry::passes
