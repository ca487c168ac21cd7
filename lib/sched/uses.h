// Who reads and writes each buffer of a program, from its nodes' recorded accesses: what the
// scheduling passes decide from (schedule.cpp's inlining and internal buffers, channels_last.cpp).
#pragma once
#include <map>
#include <set>

#include "foundry/ir/loop_ir.h"
#include "foundry/ir/record.h"

namespace foundry::sched {

struct Uses {
  std::map<const ir::LoopNode*, ir::Accesses> accesses;
  std::map<const ir::Buffer*, std::set<const ir::LoopNode*>> readers, writers;
};

Uses collect_uses(const ir::LoopProgram& program);

}  // namespace foundry::sched
