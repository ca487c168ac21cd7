// ir_post_fusion.txt: each kernel with its members, what it inlines, its loops, reads and writes,
// and its body as it will run; then the buffer plan.
#include <sstream>

#include "foundry/ir/print.h"
#include "foundry/ir/record.h"
#include "foundry/sched/kernel_walk.h"
#include "foundry/sched/schedule.h"

namespace foundry::sched {
namespace {

std::string exprs(const ir::Index& xs) {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + ir::to_string(xs[i]);
  return out;
}

std::string role_name(MemberRole r) {
  switch (r) {
    case MemberRole::Outer: return "outer";
    case MemberRole::Reduction: return "reduction";
    case MemberRole::Inner: return "inner";
  }
  return "?";
}

std::string origins(const ir::LoopNode& n) {
  std::string out = "node" + std::to_string(n.id);
  for (const auto& o : n.origins) out += " " + o;
  return out;
}

class PrintVisitor final : public KernelVisitor {
 public:
  ir::PrintingOps printer;
  ir::Ops& ops() override { return printer; }
  void begin_reduction(const Member& m, const ir::Index& ranges) override {
    std::string vars;
    for (size_t d = 0; d < ranges.size(); ++d) vars += (d ? ", " : "") + ir::reduction_var(static_cast<int>(d));
    printer.line("for " + vars + " in [" + exprs(ranges) + "]:  # " + std::string(ir::op_name(m.node->reduce_op)) +
                 " reduction of node" + std::to_string(m.node->id));
    printer.indent += 2;
  }
  void end_reduction(const Member&) override { printer.indent -= 2; }
  void begin_inner(const Member& m, const ir::Index& ranges, const std::vector<std::string>& vars) override {
    std::string names;
    for (size_t d = 0; d < vars.size(); ++d) names += (d ? ", " : "") + vars[d];
    printer.line("for " + names + " in [" + exprs(ranges) + "]:  # node" + std::to_string(m.node->id));
    printer.indent += 2;
  }
  void end_inner(const Member&) override { printer.indent -= 2; }
};

class RecordVisitor final : public KernelVisitor {
 public:
  ir::RecordingOps recorder;
  ir::Ops& ops() override { return recorder; }
};

std::string accesses(const std::vector<ir::MemoryAccess>& list) {
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) {
    out += (i ? ", " : "") + list[i].buffer->name + "[" + ir::to_string(list[i].index) + "]";
    if (list[i].mode != ir::StoreMode::Set) out += " (" + std::string(ir::op_name(list[i].mode)) + ")";
  }
  return out.empty() ? "-" : out;
}

void print_kernel(std::ostringstream& out, const Kernel& k, const Schedule& schedule) {
  out << "kernel " << k.name << "\n  loops: [" << exprs(k.ranges) << "]\n";
  for (const auto& m : k.members) out << "  " << role_name(m.role) << ": " << origins(*m.node) << "\n";
  for (const auto* n : k.inlined) out << "  inlined: " << origins(*n) << "\n";
  for (const auto& m : k.members)
    if (auto n = schedule.not_inlined.find(m.node); n != schedule.not_inlined.end())
      out << "  not inlined: node" << m.node->id << ": " << n->second << "\n";
  RecordVisitor rec;
  walk_kernel(k, schedule, rec);
  out << "  reads: " << accesses(rec.recorder.accesses.reads) << "\n";
  out << "  writes: " << accesses(rec.recorder.accesses.writes) << "\n";
  std::string internal;
  for (const auto* b : k.internal_buffers) internal += (internal.empty() ? "" : ", ") + b->name;
  out << "  kept in registers: " << (internal.empty() ? "-" : internal) << "\n";
  PrintVisitor pv;
  walk_kernel(k, schedule, pv);
  out << "  body:\n" << pv.printer.text;
  Traffic t = step_traffic(Step{false, k, nullptr}, schedule);
  out << "  bytes: " << t.bytes_read << " read, " << t.bytes_written << " written\n\n";
}

}  // namespace

std::string print_schedule(const Schedule& schedule) {
  std::ostringstream out;
  for (const Step& step : schedule.steps) {
    if (step.is_extern) {
      out << "extern " << ir::extern_name(step.extern_node->call) << "\n" << ir::print_node(*step.extern_node) << "\n";
      continue;
    }
    print_kernel(out, step.kernel, schedule);
  }
  out << "# buffer plan\n";
  for (const auto& [buf, offset] : schedule.plan.arena_offset) {
    out << buf->name << ": arena offset " << ir::to_string(offset);
    if (auto r = schedule.plan.reuses.find(buf); r != schedule.plan.reuses.end()) out << " (reuses " << r->second->name << ")";
    out << "\n";
  }
  out << "arena: " << ir::to_string(schedule.plan.arena_bytes) << " bytes ("
      << ir::to_string(schedule.plan.unplanned_bytes) << " without reuse)\n";
  return out.str();
}

}  // namespace foundry::sched
