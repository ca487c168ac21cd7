// Scheduling: the loop program becomes an ordered list of steps (generated kernels and extern
// calls), each kernel a group of IR nodes that share one loop nest, plus a buffer plan that gives
// every intermediate buffer a slot in one arena.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "foundry/ir/loop_ir.h"

namespace foundry::sched {

struct Kernel {
  std::string name;  // "cpp_fused_add_mul_relu_0": op names from the registry and a counter
  std::vector<const ir::LoopNode*> nodes;       // same outer loop, in dependency order
  std::set<const ir::Buffer*> internal_buffers;  // produced and consumed inside: never stored
};

struct Step {
  bool is_extern = false;
  Kernel kernel;                          // !is_extern
  const ir::LoopNode* extern_node = nullptr;  // is_extern
};

struct BufferPlan {
  std::map<const ir::Buffer*, int64_t> arena_offset;  // bytes, 64-byte aligned
  int64_t arena_bytes = 0;
};

struct Schedule {
  std::vector<Step> steps;
  BufferPlan plan;
};

struct ScheduleOptions {
  bool fusion = true;
};

Schedule schedule_program(const ir::LoopProgram& program, const ScheduleOptions& options);

// The text form of a schedule (ir_post_fusion.txt).
std::string print_schedule(const Schedule& schedule);

}  // namespace foundry::sched
