// Fusion by scored rounds, as in TorchInductor's scheduler. Every scheduled node starts as a group
// of its own. A candidate is a pair of groups that touch a common buffer: a producer and its
// consumer, or two readers of one input. Its score is the bytes of the buffers both touch (what
// fusing saves: the store and load of an intermediate, or a second load of an input), then
// proximity in program order. A round takes the candidates best first and fuses a pair when
//  - neither is a library call (extern kernels are not fused into),
//  - their union is a legal kernel: its loops line up and walking it finds no value read before it
//    is written (kernel_walk.h), within max_kernel_nodes,
//  - no dependency path leaves one of the two and re-enters the other through a third group
//    (fusing would make a cycle): each group keeps the sets of groups before and after it.
// Rounds repeat until one fuses nothing. The inlining of pointwise producers (schedule.cpp) asks
// recompute_refusal first: a producer that a reduction would recompute once per value of a loop
// it does not index (bias + GELU per output column of the next matrix product) is stored instead. The groups then run in a dependency order, the one whose
// first node comes first in the program first.
#include "foundry/sched/fusion.h"

#include <algorithm>
#include <map>
#include <optional>
#include <queue>
#include <set>

#include "foundry/sched/kernel_walk.h"
#include "foundry/support/error.h"

namespace foundry::sched {

using ir::Expr;
using ir::Val;

namespace {

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

// The kernel with `node` added after its members when their loops line up (re-rooted on a
// shorter nest for a reduction); otherwise nullopt and, in `why`, the reason (for -v: users ask
// why two nodes ended up in separate kernels).
std::optional<Kernel> add_member(const Kernel& k, const ir::LoopNode& node, std::string& why) {
  if (auto m = fit(node, k.ranges)) {
    Kernel out = k;
    out.members.push_back(*m);
    return out;
  }
  if (node.kind == ir::NodeKind::Reduction) {
    ir::Index outer;
    for (const auto& d : loop_dims(node.ranges)) outer.push_back(d.second);
    if (auto rerooted = reroot(k, outer)) {
      if (auto m = fit(node, outer)) {
        rerooted->members.push_back(*m);
        return rerooted;
      }
    }
  }
  why = loops_mismatch(node, k);
  return std::nullopt;
}

// Whether a grouping whose loops line up is legal: walking it finds no value read before it is
// written, and it is within max_kernel_nodes.
std::string too_many_nodes(size_t n, const ScheduleOptions& options) {
  return "the kernel would have " + std::to_string(n) + " nodes, over max_kernel_nodes (" +
         std::to_string(options.max_kernel_nodes) + ")";
}

bool legal(const Kernel& k, const Schedule& schedule, const ScheduleOptions& options, std::string& why) {
  WalkReport report = check_kernel(k, schedule).report;
  if (!report.conflicts.empty()) {
    why = "it " + report.conflicts.front();
    return false;
  }
  if (size_t n = k.members.size() + report.inlined.size(); n > options.max_kernel_nodes) {
    why = too_many_nodes(n, options);
    return false;
  }
  return true;
}

// Groups of scheduled nodes as bit sets over group ids (a group's id is its first node's position).
class Bits {
 public:
  Bits() = default;
  explicit Bits(size_t n) : words_((n + 63) / 64, 0) {}
  void set(size_t i) { words_[i / 64] |= uint64_t(1) << (i % 64); }
  void reset(size_t i) { words_[i / 64] &= ~(uint64_t(1) << (i % 64)); }
  bool test(size_t i) const { return (words_[i / 64] >> (i % 64)) & 1; }
  Bits& operator|=(const Bits& o) {
    for (size_t w = 0; w < words_.size(); ++w) words_[w] |= o.words_[w];
    return *this;
  }
  bool intersects(const Bits& o) const {
    for (size_t w = 0; w < words_.size(); ++w)
      if (words_[w] & o.words_[w]) return true;
    return false;
  }
  template <class F>
  void for_each(F f) const {
    for (size_t w = 0; w < words_.size(); ++w)
      for (uint64_t bits = words_[w]; bits; bits &= bits - 1) f(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
  }

 private:
  std::vector<uint64_t> words_;
};

constexpr size_t kUserWindow = 8;  // each user of a buffer pairs with the next few users
constexpr size_t kMaxRounds = 16;
constexpr size_t kFusionWindow = 1024;  // scheduled nodes fused together at most (see fuse_nodes)

struct Group {
  std::vector<size_t> nodes;       // positions in program order
  std::optional<Kernel> kernel;    // nullopt: a library call
  std::set<const ir::Buffer*> buffers;  // read or written
  Bits before, after;              // groups with a dependency path to / from this one
};

struct Candidate {
  size_t a, b;  // group ids, a < b
  int64_t shared_bytes;
  size_t distance;
};

class Fuser {
 public:
  Fuser(const std::vector<const ir::LoopNode*>& nodes, const Schedule& schedule, const ScheduleOptions& options)
      : nodes_(nodes), schedule_(schedule), options_(options), parent_(nodes.size()), groups_(nodes.size()) {
    record_accesses();
    find_dependencies();
    find_pairs();
  }

  FusionResult run() {
    if (options_.fusion)
      for (size_t round = 0; round < kMaxRounds && fuse_round(); ++round) {
      }
    return result();
  }

 private:
  size_t find(size_t g) {
    while (parent_[g] != g) g = parent_[g] = parent_[parent_[g]];
    return g;
  }

  void record_accesses() {
    accesses_.resize(nodes_.size());
    for (size_t p = 0; p < nodes_.size(); ++p) {
      parent_[p] = p;
      Group& g = groups_[p];
      g.nodes = {p};
      if (nodes_[p]->kind == ir::NodeKind::Extern) {
        accesses_[p] = ir::record_accesses(*nodes_[p]);
      } else {
        g.kernel = start_kernel(*nodes_[p]);
        accesses_[p] = check_kernel(*g.kernel, schedule_).accesses;  // inlined producers' reads included
      }
      for (const auto* list : {&accesses_[p].reads, &accesses_[p].writes})
        for (const auto& a : *list) {
          g.buffers.insert(a.buffer);
          bytes_.emplace(a.buffer, ir::value_at_hints(a.buffer->numel() * static_cast<int64_t>(dtype_size(a.buffer->dtype)),
                                                      schedule_.size_symbols));
        }
    }
  }

  // Edges between nodes that touch one buffer with at least one write (read after write, write
  // after read, write after write), then the transitive closure as bit sets per group.
  void find_dependencies() {
    const size_t n = nodes_.size();
    std::vector<std::vector<size_t>> preds(n);
    struct Last {
      std::optional<size_t> writer;
      std::vector<size_t> readers;  // since the last write
    };
    std::map<const ir::Buffer*, Last, ir::ByBufferId> last;
    for (size_t p = 0; p < n; ++p) {
      for (const auto& r : accesses_[p].reads) {
        Last& l = last[r.buffer];
        if (l.writer && *l.writer != p) preds[p].push_back(*l.writer);
      }
      for (const auto& w : accesses_[p].writes) {
        Last& l = last[w.buffer];
        if (l.writer && *l.writer != p) preds[p].push_back(*l.writer);
        for (size_t q : l.readers)
          if (q != p) preds[p].push_back(q);
      }
      for (const auto& w : accesses_[p].writes) last[w.buffer] = Last{p, {}};
      for (const auto& r : accesses_[p].reads) {
        Last& l = last[r.buffer];
        if (l.writer != p) l.readers.push_back(p);
      }
    }
    succs_.assign(n, {});
    for (size_t p = 0; p < n; ++p) {
      std::sort(preds[p].begin(), preds[p].end());
      preds[p].erase(std::unique(preds[p].begin(), preds[p].end()), preds[p].end());
      for (size_t q : preds[p]) succs_[q].push_back(p);
    }
    for (auto& g : groups_) g.before = g.after = Bits(n);
    for (size_t p = 0; p < n; ++p)  // program order is a topological order
      for (size_t q : preds[p]) {
        groups_[p].before |= groups_[q].before;
        groups_[p].before.set(q);
      }
    for (size_t p = n; p-- > 0;)
      for (size_t s : succs_[p]) {
        groups_[p].after |= groups_[s].after;
        groups_[p].after.set(s);
      }
  }

  // Node pairs that touch a common buffer: each user with the next kUserWindow users.
  void find_pairs() {
    std::map<const ir::Buffer*, std::vector<size_t>, ir::ByBufferId> users;
    for (size_t p = 0; p < nodes_.size(); ++p)
      for (const auto* b : groups_[p].buffers) users[b].push_back(p);
    std::set<std::pair<size_t, size_t>> pairs;
    for (const auto& [buf, list] : users)
      for (size_t i = 0; i < list.size(); ++i)
        for (size_t j = i + 1; j < list.size() && j <= i + kUserWindow; ++j) pairs.insert({list[i], list[j]});
    pairs_.assign(pairs.begin(), pairs.end());
  }

  int64_t shared_bytes(const Group& a, const Group& b) const {
    int64_t total = 0;
    for (const auto* buf : a.buffers)
      if (b.buffers.count(buf)) total += bytes_.at(buf);
    return total;
  }

  std::vector<Candidate> candidates() {
    std::set<std::pair<size_t, size_t>> seen;
    std::vector<Candidate> out;
    for (const auto& [p, q] : pairs_) {
      size_t a = find(p), b = find(q);
      if (a == b) continue;
      if (a > b) std::swap(a, b);
      if (!seen.insert({a, b}).second) continue;
      out.push_back({a, b, shared_bytes(groups_[a], groups_[b]), b - a});
    }
    std::sort(out.begin(), out.end(), [](const Candidate& x, const Candidate& y) {
      if (x.shared_bytes != y.shared_bytes) return x.shared_bytes > y.shared_bytes;
      if (x.distance != y.distance) return x.distance < y.distance;
      return std::make_pair(x.a, x.b) < std::make_pair(y.a, y.b);
    });
    return out;
  }

  bool fuse_round() {
    bool fused = false;
    for (const Candidate& c : candidates()) {
      size_t a = find(c.a), b = find(c.b);
      if (a == b) continue;
      if (a > b) std::swap(a, b);
      std::string why;
      if (auto kernel = union_kernel(a, b, why)) {
        merge(a, b, std::move(*kernel));
        fused = true;
      } else {
        refusals_.push_back({a, b, why});
      }
    }
    return fused;
  }

  // The kernel of a's and b's nodes in program order, or nullopt with the reason.
  std::optional<Kernel> union_kernel(size_t a, size_t b, std::string& why) {
    const Group& ga = groups_[a];
    const Group& gb = groups_[b];
    for (const Group* g : {&ga, &gb})
      if (!g->kernel) {
        why = "it is a library call (" + ir::extern_name(nodes_[g->nodes.front()]->call) + ")";
        return std::nullopt;
      }
    if (ga.after.intersects(gb.before) || gb.after.intersects(ga.before)) {
      why = "a node outside both depends on one and is needed by the other (fusing would make a cycle)";
      return std::nullopt;
    }
    std::vector<size_t> all = ga.nodes;
    all.insert(all.end(), gb.nodes.begin(), gb.nodes.end());
    std::sort(all.begin(), all.end());
    if (all.size() > options_.max_kernel_nodes) {  // before walking it: members alone are too many
      why = too_many_nodes(all.size(), options_);
      return std::nullopt;
    }
    std::optional<Kernel> k = start_kernel(*nodes_[all.front()]);
    for (size_t i = 1; i < all.size() && k; ++i) k = add_member(*k, *nodes_[all[i]], why);
    if (k && !legal(*k, schedule_, options_, why)) return std::nullopt;
    return k;
  }

  void merge(size_t a, size_t b, Kernel kernel) {
    Group& ga = groups_[a];
    Group& gb = groups_[b];
    parent_[b] = a;
    ga.nodes.insert(ga.nodes.end(), gb.nodes.begin(), gb.nodes.end());
    std::sort(ga.nodes.begin(), ga.nodes.end());
    ga.kernel = std::move(kernel);
    ga.buffers.insert(gb.buffers.begin(), gb.buffers.end());
    ga.before |= gb.before;
    ga.after |= gb.after;
    for (Bits* bits : {&ga.before, &ga.after}) {
      bits->reset(a);
      bits->reset(b);
    }
    // What runs after the merged group now also runs after everything before either half, and
    // the other way round.
    ga.after.for_each([&](size_t x) {
      Group& gx = groups_[x];
      gx.before |= ga.before;
      gx.before.reset(b);
      gx.before.set(a);
    });
    ga.before.for_each([&](size_t y) {
      Group& gy = groups_[y];
      gy.after |= ga.after;
      gy.after.reset(b);
      gy.after.set(a);
    });
    gb = Group{};
  }

  // The steps in a dependency order, ties broken by the first node's program position.
  FusionResult result() {
    const size_t n = nodes_.size();
    std::map<size_t, std::set<size_t>> next;
    std::map<size_t, size_t> waiting;
    for (size_t p = 0; p < n; ++p) waiting.emplace(find(p), 0);
    for (size_t p = 0; p < n; ++p)
      for (size_t s : succs_[p]) {
        size_t from = find(p), to = find(s);
        if (from != to && next[from].insert(to).second) ++waiting[to];
      }
    std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
    for (const auto& [g, count] : waiting)
      if (count == 0) ready.push(g);
    FusionResult out;
    std::map<size_t, size_t> step_of;
    while (!ready.empty()) {
      size_t g = ready.top();
      ready.pop();
      step_of[g] = out.steps.size();
      Step step;
      if (groups_[g].kernel) {
        step.kernel = std::move(*groups_[g].kernel);
      } else {
        step.is_extern = true;
        step.extern_node = nodes_[g];
      }
      out.steps.push_back(std::move(step));
      for (size_t to : next[g])
        if (--waiting[to] == 0) ready.push(to);
    }
    FOUNDRY_CHECK(out.steps.size() == waiting.size(), "fusion left a cycle between kernels");
    std::set<std::pair<size_t, const ir::LoopNode*>> logged;
    for (const auto& r : refusals_) {
      // Told from the side of the generated kernel: "nodeN not fused into <kernel>: why".
      size_t step = step_of.at(find(r.a)), other_step = step_of.at(find(r.b));
      const ir::LoopNode* node = nodes_[r.b];
      if (step == other_step) continue;  // fused in a later round
      if (out.steps[step].is_extern) {
        step = other_step;
        node = nodes_[r.a];
      }
      if (out.steps[step].is_extern) continue;
      if (logged.insert({step, node}).second) out.refusals.push_back({node, step, r.why});
    }
    std::sort(out.refusals.begin(), out.refusals.end(), [](const auto& x, const auto& y) {
      return x.step != y.step ? x.step < y.step : x.node->id < y.node->id;
    });
    return out;
  }

  struct Refused {
    size_t a, b;  // the groups' ids when refused
    std::string why;
  };

  const std::vector<const ir::LoopNode*>& nodes_;
  const Schedule& schedule_;
  const ScheduleOptions& options_;
  std::vector<ir::Accesses> accesses_;
  std::vector<std::vector<size_t>> succs_;
  std::vector<size_t> parent_;
  std::vector<Group> groups_;
  std::map<const ir::Buffer*, int64_t, ir::ByBufferId> bytes_;
  std::vector<std::pair<size_t, size_t>> pairs_;
  std::vector<Refused> refusals_;
};

// Counts the operations a body computes (unary, binary, select), recording it otherwise.
class CountingOps final : public ir::Ops {
 public:
  int computed = 0;
  Val load(const ir::Buffer& buf, const Expr& index) override { return inner_.load(buf, index); }
  void store(const ir::Buffer& buf, const Expr& index, Val v, ir::StoreMode mode) override {
    inner_.store(buf, index, v, mode);
  }
  Val constant(const ir::Scalar& value) override { return inner_.constant(value); }
  Val index_expr(const Expr& index, DType dtype) override { return inner_.index_expr(index, dtype); }
  Val to_dtype(Val v, DType dtype) override { return inner_.to_dtype(v, dtype); }
  Val unary(ir::UnaryOp op, Val x) override { return ++computed, inner_.unary(op, x); }
  Val binary(ir::BinaryOp op, Val a, Val b) override { return ++computed, inner_.binary(op, a, b); }
  Val where(Val c, Val a, Val b) override { return ++computed, inner_.where(c, a, b); }
  Expr indirect(Val v, const Expr& size, ir::NegativeIndex negative) override { return inner_.indirect(v, size, negative); }
  Val reduction(ir::ReduceOp op, Val v) override { return inner_.reduction(op, v); }
  void store_reduction(const ir::Buffer& buf, const Expr& index, Val v) override { inner_.store_reduction(buf, index, v); }

 private:
  ir::RecordingOps inner_;
};

}  // namespace

std::string recompute_refusal(const ir::LoopNode& producer, const ir::LoopNode& reader,
                              const ir::Accesses& reader_accesses) {
  if (reader.kind != ir::NodeKind::Reduction) return "";
  std::set<std::string> indexed;
  for (const auto& r : reader_accesses.reads)
    if (r.buffer == producer.output)
      for (const std::string& s : ir::free_symbols(r.index)) indexed.insert(s);
  std::string loops;
  Expr times = 1;
  for (size_t d = 0; d < reader.ranges.size(); ++d) {
    std::string var = ir::loop_var(static_cast<int>(d));
    if (reader.ranges[d].is_const(1) || indexed.count(var)) continue;
    loops += (loops.empty() ? "" : ", ") + var;
    times = times * reader.ranges[d];
  }
  if (loops.empty()) return "";
  CountingOps counter;
  ir::run_body_symbolic(producer, counter);
  if (counter.computed == 0) return "";
  return "node" + std::to_string(reader.id) + " (a " + std::string(ir::op_name(reader.reduce_op)) +
         " reduction) does not index it by " + loops + ": it would compute each of its elements " +
         ir::to_string(ir::simplify(times, {})) + " times instead of once";
}

FusionResult fuse_nodes(const std::vector<const ir::LoopNode*>& nodes, const Schedule& schedule,
                        const ScheduleOptions& options) {
  // The dependency sets cost n^2 bits and each fusion updates them in O(n^2 / 64): a long program
  // is fused in consecutive windows (groups never span two; program order is a dependency order,
  // so the windows run one after the other).
  FusionResult out;
  for (size_t begin = 0; begin < nodes.size(); begin += kFusionWindow) {
    std::vector<const ir::LoopNode*> window(nodes.begin() + static_cast<std::ptrdiff_t>(begin),
                                            nodes.begin() + static_cast<std::ptrdiff_t>(std::min(nodes.size(), begin + kFusionWindow)));
    FusionResult part = Fuser(window, schedule, options).run();
    for (auto& r : part.refusals) out.refusals.push_back({r.node, r.step + out.steps.size(), std::move(r.why)});
    for (auto& step : part.steps) out.steps.push_back(std::move(step));
  }
  return out;
}

}  // namespace foundry::sched
