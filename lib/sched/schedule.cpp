// Scheduling: which pointwise producers are inlined into their consumer, which nodes share a
// kernel and in what order the steps run (fusion.cpp), the kernels' names and internal buffers,
// and the buffer plan.
#include "foundry/sched/schedule.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>

#include "foundry/ir/record.h"
#include "foundry/sched/fusion.h"
#include "foundry/sched/kernel_walk.h"
#include "foundry/support/error.h"
#include "sched/uses.h"

namespace foundry::sched {

using ir::Expr;

namespace {

// A pointwise node is computed inside its readers instead of being stored when that costs less:
// always for one reader; for several, when its body loads a single element of a buffer that is
// itself stored, so that each reader pays one load either way and the store, the buffer and its
// reload are saved (a longer body is materialized: recomputing it would read more than loading
// it). Besides: one plain contiguous store, not an output, no reader is a library call, no
// reader is a reduction that would recompute it many times (recompute_refusal, fusion.h: then
// `why` says so), and nothing it reads is written twice (a scatter could change it between the
// node's program position and its readers').
bool inlinable(const ir::LoopNode& node, const Uses& uses, const std::set<const ir::Buffer*>& outputs,
               const std::map<const ir::Buffer*, const ir::LoopNode*, ir::ByBufferId>& inlined, std::string& why) {
  if (node.kind != ir::NodeKind::Pointwise) return false;
  const ir::Accesses& acc = uses.accesses.at(&node);
  const ir::Buffer* out = node.output;
  if (acc.writes.size() != 1 || acc.writes[0].buffer != out || acc.writes[0].mode != ir::StoreMode::Set) return false;
  if (out->kind != ir::BufferKind::Computed || outputs.count(out) || uses.writers.at(out).size() != 1) return false;
  // Row-major over the node's own loops, which is how a reader's position is mapped back to them
  // (kernel_walk.cpp): the output's layout when its loops run in storage order (storage_order.h).
  if (!(acc.writes[0].index == ir::simplify(ir::ravel_index(node.index_symbols(), node.ranges), ir::node_extents(node))))
    return false;
  auto readers = uses.readers.find(out);
  if (readers == uses.readers.end()) return false;
  for (const ir::LoopNode* reader : readers->second)
    if (reader->kind == ir::NodeKind::Extern || reader == &node) return false;
  for (const auto& r : acc.reads)
    if (uses.writers.count(r.buffer) && uses.writers.at(r.buffer).size() > 1) return false;
  for (const ir::LoopNode* reader : readers->second)
    if (why = recompute_refusal(node, *reader, uses.accesses.at(reader)); !why.empty()) return false;
  if (readers->second.size() == 1) return true;
  return acc.reads.size() == 1 && !inlined.count(acc.reads[0].buffer);
}

WalkReport check(const Kernel& k, const Schedule& schedule) { return check_kernel(k, schedule).report; }

ir::Accesses step_accesses(const Step& step, const Schedule& schedule) {
  return step.is_extern ? ir::record_accesses(*step.extern_node) : check_kernel(step.kernel, schedule).accesses;
}

std::string node_list(const std::vector<const ir::LoopNode*>& nodes) {
  std::string s;
  for (const auto* n : nodes) s += (s.empty() ? "node" : ", node") + std::to_string(n->id);
  return s;
}

// -v: the nodes each kernel fused, and after it the nodes that did not join it, with the reason
// (the names match ir_pre_fusion.txt and ir_post_fusion.txt).
void log_fusion(const Schedule& schedule, const std::vector<FusionResult::Refusal>& refusals) {
  if (!spdlog::should_log(spdlog::level::info)) return;
  auto next = refusals.begin();
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    const Kernel& k = schedule.steps[s].kernel;
    std::vector<const ir::LoopNode*> members;
    for (const auto& m : k.members) members.push_back(m.node);
    if (!schedule.steps[s].is_extern && members.size() + k.inlined.size() > 1)
      spdlog::info("fused {}{} into {}", node_list(members), k.inlined.empty() ? "" : " (inlined: " + node_list(k.inlined) + ")",
                   k.name);
    for (; next != refusals.end() && next->step == s; ++next)
      spdlog::info("node{} not fused into {}: {}", next->node->id, k.name, next->why);
    for (const auto& m : k.members)
      if (auto n = schedule.not_inlined.find(m.node); n != schedule.not_inlined.end())
        spdlog::info("node{} stored by {}, not inlined into its reader: {}", m.node->id, k.name, n->second);
  }
}

std::string kernel_name(const Kernel& k, const std::set<const ir::LoopNode*>& inlined, int index) {
  std::set<std::string> ops;
  for (const auto& m : k.members)
    for (const auto& op : m.node->origin_ops) ops.insert(op);
  for (const auto* n : inlined)
    for (const auto& op : n->origin_ops) ops.insert(op);
  // A kernel that only copies (a library call's operand put in a layout the call takes, an
  // aten.copy) fuses nothing: "cpp_copy_0".
  if (ops == std::set<std::string>{"copy"}) return "cpp_copy_" + std::to_string(index);
  std::string name = "cpp_fused";
  for (const auto& op : ops) name += "_" + op;
  return name + "_" + std::to_string(index);
}

// Whether every read of `b` is in kernel `k`: by a member, or by a node inlined into it whose own
// result is read only in `k` too (an inlined node is recomputed in every kernel that reads its
// result, and reads `b` again there: a concatenation that inlines a pooling's division).
bool read_only_inside(const ir::Buffer* b, const Uses& uses, const std::set<const ir::LoopNode*>& members,
                      const std::set<const ir::LoopNode*>& inlined, std::map<const ir::Buffer*, bool>& memo) {
  if (auto m = memo.find(b); m != memo.end()) return m->second;
  bool inside = true;
  if (auto r = uses.readers.find(b); r != uses.readers.end())
    for (const auto* reader : r->second)
      inside = inside && (members.count(reader) ||
                          (inlined.count(reader) && read_only_inside(reader->output, uses, members, inlined, memo)));
  return memo[b] = inside;
}

// Buffers written and read only inside one kernel, every read forwarded: never stored.
void find_internal_buffers(Kernel& k, const Uses& uses, const std::set<const ir::Buffer*>& outputs,
                           const WalkReport& report) {
  std::set<const ir::LoopNode*> inlined(report.inlined.begin(), report.inlined.end()), members;
  for (const auto& m : k.members) members.insert(m.node);
  std::map<const ir::Buffer*, bool> memo;
  for (const auto& m : k.members) {
    const ir::Buffer* b = m.node->output;
    if (b->kind != ir::BufferKind::Computed || outputs.count(b) || report.materialized.count(b)) continue;
    if (read_only_inside(b, uses, members, inlined, memo)) k.internal_buffers.insert(b);
  }
}

ir::Expr buffer_bytes(const ir::Buffer& buf) { return buf.numel() * static_cast<int64_t>(dtype_size(buf.dtype)); }

}  // namespace

// ---- buffer planning -----------------------------------------------------------------------------

namespace {

struct Slot {
  ir::Expr offset, bytes;
  const ir::Buffer* last_owner;
};

// A slot of `slot` bytes holds `bytes` for every value of the dynamic sizes: both constant, or
// the same expression (reuse is only done when provably safe).
bool fits(const ir::Expr& bytes, const ir::Expr& slot) {
  if (bytes.is_const() && slot.is_const()) return bytes.const_value() <= slot.const_value();
  return bytes == slot;
}

// Smaller slots first among those that fit; constant slots before symbolic ones.
bool smaller(const ir::Expr& a, const ir::Expr& b) {
  if (a.is_const() && b.is_const()) return a.const_value() < b.const_value();
  return a.is_const() && !b.is_const();
}

// Liveness over the final order: a buffer lives from the step that first writes it to the last
// step that reads it; a dead buffer's slot is reused by a later buffer that fits in it.
BufferPlan plan_buffers(const ir::LoopProgram& program, const Schedule& schedule) {
  BufferPlan plan;
  std::set<const ir::Buffer*> outputs(program.outputs.begin(), program.outputs.end());
  std::map<const ir::Buffer*, size_t> first_write, last_use;
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    const Step& step = schedule.steps[s];
    ir::Accesses acc = step_accesses(step, schedule);
    for (const auto& w : acc.writes) {
      first_write.emplace(w.buffer, s);
      last_use[w.buffer] = std::max(last_use[w.buffer], s);
    }
    for (const auto& r : acc.reads) last_use[r.buffer] = std::max(last_use[r.buffer], s);
  }
  std::vector<std::pair<size_t, const ir::Buffer*>> order;
  for (const auto& [buf, s] : first_write)
    if (buf->kind == ir::BufferKind::Computed && !outputs.count(buf)) order.push_back({s, buf});
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second->id < b.second->id;
  });
  std::vector<Slot> slots;
  for (const auto& [step, buf] : order) {
    ir::Expr bytes = ir::floordiv(buffer_bytes(*buf) + 63, 64) * 64;
    plan.unplanned_bytes = plan.unplanned_bytes + bytes;
    // Best fit among slots whose last owner died before this step.
    Slot* best = nullptr;
    for (auto& slot : slots)
      if (last_use[slot.last_owner] < step && fits(bytes, slot.bytes) && (!best || smaller(slot.bytes, best->bytes)))
        best = &slot;
    if (best) {
      plan.reuses[buf] = best->last_owner;
      best->last_owner = buf;
      plan.arena_offset[buf] = best->offset;
    } else {
      slots.push_back({plan.arena_bytes, bytes, buf});
      plan.arena_offset[buf] = plan.arena_bytes;
      plan.arena_bytes = plan.arena_bytes + bytes;
    }
  }
  return plan;
}

}  // namespace

Schedule schedule_program(const ir::LoopProgram& program, const ScheduleOptions& options) {
  Schedule schedule;
  schedule.size_symbols = program.size_symbols;
  Uses uses = collect_uses(program);
  std::set<const ir::Buffer*> outputs(program.outputs.begin(), program.outputs.end());
  if (options.fusion) {
    // Chains of inlined producers are cut every max_kernel_nodes: a kernel computes its inlined
    // producers by running their bodies nested in its own (a 10,000-node chain would otherwise
    // be one expression nested 10,000 deep, and overflow the stack of whatever walks it).
    std::map<const ir::Buffer*, size_t> depth;  // of each inlined buffer's chain
    for (const auto& node : program.nodes) {
      std::string why;
      if (!inlinable(*node, uses, outputs, schedule.inlined, why)) {
        if (!why.empty()) schedule.not_inlined[node.get()] = why;
        continue;
      }
      size_t d = 1;
      for (const auto& r : uses.accesses.at(node.get()).reads)
        if (auto it = depth.find(r.buffer); it != depth.end()) d = std::max(d, it->second + 1);
      if (d >= options.max_kernel_nodes) continue;  // the chain and its reader fit one kernel
      depth[node->output] = d;
      schedule.inlined[node->output] = node.get();
    }
  }

  std::vector<const ir::LoopNode*> scheduled;
  for (const auto& node : program.nodes)
    if (!(schedule.inlined.count(node->output) && schedule.inlined.at(node->output) == node.get()))
      scheduled.push_back(node.get());
  FusionResult fused = fuse_nodes(scheduled, schedule, options);
  schedule.steps = std::move(fused.steps);

  int index = 0;
  for (Step& step : schedule.steps) {
    if (step.is_extern) continue;
    WalkReport report = check(step.kernel, schedule);
    FOUNDRY_CHECK(report.conflicts.empty(), "scheduled kernel is not legal: " +
                                                (report.conflicts.empty() ? "" : report.conflicts.front()));
    find_internal_buffers(step.kernel, uses, outputs, report);
    step.kernel.inlined.assign(report.inlined.begin(), report.inlined.end());
    std::sort(step.kernel.inlined.begin(), step.kernel.inlined.end(),
              [](const auto* a, const auto* b) { return a->id < b->id; });
    step.kernel.name = kernel_name(step.kernel, report.inlined, index++);
  }
  if (options.fusion) log_fusion(schedule, fused.refusals);
  schedule.plan = plan_buffers(program, schedule);
  return schedule;
}

std::vector<std::string> kernel_origins(const Kernel& kernel) {
  std::vector<const ir::LoopNode*> nodes(kernel.inlined.begin(), kernel.inlined.end());
  for (const auto& m : kernel.members) nodes.push_back(m.node);
  std::sort(nodes.begin(), nodes.end(), [](const ir::LoopNode* a, const ir::LoopNode* b) { return a->id < b->id; });
  std::vector<std::string> origins;
  for (const ir::LoopNode* node : nodes)
    for (const std::string& o : node->origins)
      if (std::find(origins.begin(), origins.end(), o) == origins.end()) origins.push_back(o);
  return origins;
}

Traffic step_traffic(const Step& step, const Schedule& schedule) {
  ir::Accesses acc = step_accesses(step, schedule);
  Traffic t;
  std::set<const ir::Buffer*> seen;
  for (const auto& r : acc.reads)
    if (seen.insert(r.buffer).second) {
      // A constant's storage may be larger than its view: count the view.
      t.bytes_read += ir::value_at_hints(buffer_bytes(*r.buffer), schedule.size_symbols);
    }
  seen.clear();
  for (const auto& w : acc.writes)
    if (seen.insert(w.buffer).second)
      t.bytes_written += ir::value_at_hints(buffer_bytes(*w.buffer), schedule.size_symbols);
  return t;
}

}  // namespace foundry::sched
