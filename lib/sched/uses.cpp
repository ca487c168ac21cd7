#include "sched/uses.h"

namespace foundry::sched {

Uses collect_uses(const ir::LoopProgram& program) {
  Uses uses;
  for (const auto& node : program.nodes) {
    ir::Accesses acc = ir::record_accesses(*node);
    for (const auto& r : acc.reads) uses.readers[r.buffer].insert(node.get());
    for (const auto& w : acc.writes) uses.writers[w.buffer].insert(node.get());
    uses.accesses[node.get()] = std::move(acc);
  }
  return uses;
}

}  // namespace foundry::sched
