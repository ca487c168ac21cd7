// Fusion and ordering: which pointwise producers are inlined into their consumer, and which
// consecutive nodes share a kernel. Grouping is greedy in program order (so no fusion can create
// a cycle), and every candidate grouping is checked by walking it (kernel_walk.h): a grouping
// that would read a value before it is written in the fused loop order is refused.
#include "foundry/sched/schedule.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "foundry/ir/record.h"
#include "foundry/sched/kernel_walk.h"
#include "foundry/support/error.h"

namespace foundry::sched {

using ir::Expr;

namespace {

// Who reads and writes each buffer, from the nodes' recorded accesses.
struct Uses {
  std::map<const ir::LoopNode*, ir::Accesses> accesses;
  std::map<const ir::Buffer*, std::set<const ir::LoopNode*>> readers, writers;
};

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

// A pointwise node is inlined into its consumer when it is that consumer's only source of the
// value: one plain contiguous store, one reader node (not a library call), not an output, and
// nothing it reads is mutated by a later scatter (it will run later than its program position).
bool inlinable(const ir::LoopNode& node, const Uses& uses, const std::set<const ir::Buffer*>& outputs) {
  if (node.kind != ir::NodeKind::Pointwise) return false;
  const ir::Accesses& acc = uses.accesses.at(&node);
  const ir::Buffer* out = node.output;
  if (acc.writes.size() != 1 || acc.writes[0].buffer != out || acc.writes[0].mode != ir::StoreMode::Set) return false;
  if (out->kind != ir::BufferKind::Computed || outputs.count(out) || uses.writers.at(out).size() != 1) return false;
  if (!(acc.writes[0].index == ir::simplify(out->linear_index(node.index_symbols()), ir::node_extents(node))))
    return false;
  auto readers = uses.readers.find(out);
  if (readers == uses.readers.end() || readers->second.size() != 1) return false;
  const ir::LoopNode* consumer = *readers->second.begin();
  if (consumer->kind == ir::NodeKind::Extern || consumer == &node) return false;
  for (const auto& r : acc.reads)
    if (uses.writers.count(r.buffer) && uses.writers.at(r.buffer).size() > 1) return false;
  return true;
}

// The dims of a node's ranges that are real loops (size-1 dims index 0).
std::vector<std::pair<int, Expr>> loop_dims(const ir::Index& ranges) {
  std::vector<std::pair<int, Expr>> dims;
  for (size_t d = 0; d < ranges.size(); ++d)
    if (!ranges[d].is_const(1)) dims.push_back({static_cast<int>(d), ranges[d]});
  return dims;
}

Kernel start_kernel(const ir::LoopNode& node) {
  Kernel k;
  Member m;
  m.node = &node;
  m.role = node.kind == ir::NodeKind::Reduction ? MemberRole::Reduction : MemberRole::Outer;
  m.dim_map.assign(node.ranges.size(), -1);
  for (const auto& [d, extent] : loop_dims(node.ranges)) {
    m.dim_map[d] = static_cast<int>(k.ranges.size());
    k.ranges.push_back(extent);
  }
  k.members.push_back(m);
  return k;
}

// How `node` would join a kernel with outer loops `ranges`, if its loops line up with them.
std::optional<Member> fit(const ir::LoopNode& node, const ir::Index& ranges) {
  auto dims = loop_dims(node.ranges);
  if (dims.size() < ranges.size()) return std::nullopt;
  for (size_t k = 0; k < ranges.size(); ++k)
    if (!(dims[k].second == ranges[k])) return std::nullopt;
  Member m;
  m.node = &node;
  m.dim_map.assign(node.ranges.size(), -1);
  for (size_t k = 0; k < dims.size(); ++k) {
    bool outer = k < ranges.size();
    m.dim_map[dims[k].first] = outer ? static_cast<int>(k) : Member::kInnerDim + static_cast<int>(k - ranges.size());
    if (!outer) m.inner_ranges.push_back(dims[k].second);
  }
  if (node.kind == ir::NodeKind::Reduction) {
    if (!m.inner_ranges.empty()) return std::nullopt;
    m.role = MemberRole::Reduction;
  } else {
    m.role = m.inner_ranges.empty() ? MemberRole::Outer : MemberRole::Inner;
  }
  return m;
}

// A kernel of outer pointwise members re-rooted on a shorter loop nest, so that a reduction over
// the remaining dims can join it (a pointwise producer feeding a row reduction).
std::optional<Kernel> reroot(const Kernel& k, const ir::Index& ranges) {
  Kernel out = k;
  out.ranges = ranges;
  out.members.clear();
  for (const Member& m : k.members) {
    if (m.role != MemberRole::Outer) return std::nullopt;
    auto fitted = fit(*m.node, ranges);
    if (!fitted) return std::nullopt;
    out.members.push_back(*fitted);
  }
  return out;
}

// Records what a kernel does without producing anything.
class CheckVisitor final : public KernelVisitor {
 public:
  ir::RecordingOps recorder;
  ir::Ops& ops() override { return recorder; }
};

WalkReport check(const Kernel& k, const Schedule& schedule) {
  CheckVisitor v;
  return walk_kernel(k, schedule, v);
}

size_t kernel_size(const Kernel& k, const WalkReport& report) { return k.members.size() + report.inlined.size(); }

std::string ranges_text(const ir::Index& ranges) {
  std::string s = "[";
  for (size_t d = 0; d < ranges.size(); ++d) s += (d ? ", " : "") + ir::to_string(ranges[d]);
  return s + "]";
}

// Why `node` cannot share the kernel's loop nest.
std::string loops_mismatch(const ir::LoopNode& node, const Kernel& k) {
  std::string loops = ranges_text(node.ranges);
  if (node.kind == ir::NodeKind::Reduction) loops += " (reducing " + ranges_text(node.reduction_ranges) + ")";
  return "its loops " + loops + " do not line up with the kernel's " + ranges_text(k.ranges);
}

// The kernel with `node` added, when that is legal; otherwise nullopt and, in `why`, the reason
// (for -v: users ask why two nodes ended up in separate kernels).
std::optional<Kernel> try_fuse(const Kernel& k, const ir::LoopNode& node, const Schedule& schedule,
                               const ScheduleOptions& options, std::string& why) {
  std::optional<Kernel> candidate;
  if (auto m = fit(node, k.ranges)) {
    candidate = k;
    candidate->members.push_back(*m);
  } else if (node.kind == ir::NodeKind::Reduction) {
    auto dims = loop_dims(node.ranges);
    ir::Index outer;
    for (const auto& d : dims) outer.push_back(d.second);
    if (auto rerooted = reroot(k, outer)) {
      if (auto m = fit(node, outer)) {
        candidate = *rerooted;
        candidate->members.push_back(*m);
      }
    }
  }
  if (!candidate) {
    why = loops_mismatch(node, k);
    return std::nullopt;
  }
  WalkReport report = check(*candidate, schedule);
  if (!report.conflicts.empty()) {
    why = "it " + report.conflicts.front();
    return std::nullopt;
  }
  if (size_t n = kernel_size(*candidate, report); n > options.max_kernel_nodes) {
    why = "the kernel would have " + std::to_string(n) + " nodes, over max_kernel_nodes (" +
          std::to_string(options.max_kernel_nodes) + ")";
    return std::nullopt;
  }
  return candidate;
}

// A node that did not join the kernel that became schedule step `step`, and why.
struct Refusal {
  size_t step;
  const ir::LoopNode* node;
  std::string why;
};

std::string node_list(const std::vector<const ir::LoopNode*>& nodes) {
  std::string s;
  for (const auto* n : nodes) s += (s.empty() ? "node" : ", node") + std::to_string(n->id);
  return s;
}

// -v: the nodes each kernel fused, and after it the nodes that did not join it, with the reason
// (the names match ir_pre_fusion.txt and ir_post_fusion.txt).
void log_fusion(const Schedule& schedule, const std::vector<Refusal>& refusals) {
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
  }
}

std::string kernel_name(const Kernel& k, const std::set<const ir::LoopNode*>& inlined, int index) {
  std::set<std::string> ops;
  for (const auto& m : k.members)
    for (const auto& op : m.node->origin_ops) ops.insert(op);
  for (const auto* n : inlined)
    for (const auto& op : n->origin_ops) ops.insert(op);
  std::string name = "cpp_fused";
  for (const auto& op : ops) name += "_" + op;
  return name + "_" + std::to_string(index);
}

// Buffers written and read only inside one kernel, every read forwarded: never stored.
void find_internal_buffers(Kernel& k, const Uses& uses, const std::set<const ir::Buffer*>& outputs,
                           const WalkReport& report) {
  std::set<const ir::LoopNode*> inside(report.inlined.begin(), report.inlined.end());
  for (const auto& m : k.members) inside.insert(m.node);
  for (const auto& m : k.members) {
    const ir::Buffer* b = m.node->output;
    if (b->kind != ir::BufferKind::Computed || outputs.count(b) || report.materialized.count(b)) continue;
    bool all_inside = true;
    if (auto r = uses.readers.find(b); r != uses.readers.end())
      for (const auto* reader : r->second) all_inside = all_inside && inside.count(reader);
    if (all_inside) k.internal_buffers.insert(b);
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
    CheckVisitor v;
    ir::Accesses acc;
    if (step.is_extern) acc = ir::record_accesses(*step.extern_node);
    else {
      walk_kernel(step.kernel, schedule, v);
      acc = v.recorder.accesses;
    }
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
  if (options.fusion)
    for (const auto& node : program.nodes)
      if (inlinable(*node, uses, outputs)) schedule.inlined[node->output] = node.get();

  std::optional<Kernel> open;
  std::vector<Refusal> refusals;
  auto close = [&] {
    if (!open) return;
    Step step;
    step.kernel = std::move(*open);
    schedule.steps.push_back(std::move(step));
    open.reset();
  };
  for (const auto& node : program.nodes) {
    if (schedule.inlined.count(node->output) && schedule.inlined.at(node->output) == node.get()) continue;
    if (node->kind == ir::NodeKind::Extern) {
      if (open && options.fusion)
        refusals.push_back({schedule.steps.size(), node.get(), "it is a library call (" + node->call.kind + ")"});
      close();
      Step step;
      step.is_extern = true;
      step.extern_node = node.get();
      schedule.steps.push_back(std::move(step));
      continue;
    }
    if (open && options.fusion) {
      std::string why;
      if (auto fused = try_fuse(*open, *node, schedule, options, why)) {
        open = std::move(fused);
        continue;
      }
      refusals.push_back({schedule.steps.size(), node.get(), why});  // the open kernel becomes that step
    }
    close();
    open = start_kernel(*node);
  }
  close();

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
  if (options.fusion) log_fusion(schedule, refusals);
  schedule.plan = plan_buffers(program, schedule);
  return schedule;
}

Traffic step_traffic(const Step& step, const Schedule& schedule) {
  ir::Accesses acc;
  if (step.is_extern) {
    acc = ir::record_accesses(*step.extern_node);
  } else {
    CheckVisitor v;
    walk_kernel(step.kernel, schedule, v);
    acc = v.recorder.accesses;
  }
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
