#include "foundry/sched/schedule.h"

#include <algorithm>
#include <sstream>

#include "foundry/ir/print.h"
#include "foundry/support/error.h"

namespace foundry::sched {
namespace {

std::string kernel_name(const std::vector<const ir::LoopNode*>& nodes, int index) {
  std::set<std::string> ops;
  for (const auto* n : nodes)
    for (const auto& op : n->origin_ops) ops.insert(op);
  std::string name = "cpp_fused";
  for (const auto& op : ops) name += "_" + op;
  return name + "_" + std::to_string(index);
}

int64_t static_bytes(const ir::Buffer& buf) {
  ir::Expr n = buf.numel();
  FOUNDRY_CHECK(n.is_const(), "buffer planning needs static sizes");
  return n.const_value() * static_cast<int64_t>(dtype_size(buf.dtype));
}

BufferPlan plan_buffers(const ir::LoopProgram& program) {
  BufferPlan plan;
  std::set<const ir::Buffer*> outputs(program.outputs.begin(), program.outputs.end());
  for (const auto& buf : program.buffers) {
    if (buf->kind != ir::BufferKind::Computed || outputs.count(buf.get())) continue;
    plan.arena_offset[buf.get()] = plan.arena_bytes;
    plan.arena_bytes += (static_bytes(*buf) + 63) / 64 * 64;
  }
  return plan;
}

}  // namespace

Schedule schedule_program(const ir::LoopProgram& program, const ScheduleOptions& options) {
  Schedule schedule;
  int kernels = 0;
  for (const auto& node : program.nodes) {
    Step step;
    if (node->kind == ir::NodeKind::Extern) {
      step.is_extern = true;
      step.extern_node = node.get();
    } else {
      step.kernel.nodes = {node.get()};
      step.kernel.name = kernel_name(step.kernel.nodes, kernels++);
    }
    schedule.steps.push_back(std::move(step));
  }
  schedule.plan = plan_buffers(program);
  return schedule;
}

std::string print_schedule(const Schedule& schedule) {
  std::ostringstream out;
  for (const Step& step : schedule.steps) {
    if (step.is_extern) {
      out << "extern " << step.extern_node->call.kind << " -> " << step.extern_node->output->name << "\n";
      out << ir::print_node(*step.extern_node) << "\n";
      continue;
    }
    out << "kernel " << step.kernel.name << " (" << step.kernel.nodes.size() << " nodes)\n";
    for (const auto* node : step.kernel.nodes) out << ir::print_node(*node);
    out << "\n";
  }
  out << "arena: " << schedule.plan.arena_bytes << " bytes\n";
  return out.str();
}

}  // namespace foundry::sched
