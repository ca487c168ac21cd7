#include "foundry/sched/kernel_walk.h"

#include <optional>

#include "foundry/support/error.h"

namespace foundry::sched {

using ir::Expr;
using ir::Val;

namespace {

// The loops a statement runs in: the kernel's outer loops (scope 0), or one member's reduction or
// inner loop nested in them.
struct Scope {
  int id = 0;
  std::vector<std::string> vars;  // the loop symbols of this scope (not the outer ones)
  ir::Index ranges;
};

struct StoreRecord {
  Expr index;
  Val value;
  Scope scope;
  int member = 0;
  ir::StoreMode mode = ir::StoreMode::Set;
};

// The decorator that gives a kernel its fused semantics (see kernel_walk.h).
class FusedOps final : public ir::Ops {
 public:
  FusedOps(ir::Ops& inner, const Kernel& kernel, const Schedule& schedule, WalkReport& report)
      : inner_(inner), kernel_(kernel), schedule_(schedule), report_(report) {
    std::vector<std::string> vars = kernel_loop_vars(kernel);
    for (size_t d = 0; d < vars.size(); ++d) extents_[vars[d]] = kernel.ranges[d];
  }

  void enter(int member, const std::vector<std::string>& vars, const ir::Index& ranges) {
    member_ = member;
    scope_ = Scope{++scope_count_, vars, ranges};
    for (size_t d = 0; d < vars.size(); ++d) extents_[vars[d]] = ranges[d];
  }
  void leave() {
    for (const auto& v : scope_.vars) extents_.erase(v);
    scope_ = Scope{};
  }
  void set_member(int member) { member_ = member; }

  Val load(const ir::Buffer& buf, const Expr& index) override {
    Expr e = ir::simplify(index, extents_);
    if (auto v = forwarded(buf, e)) return *v;
    auto inl = schedule_.inlined.find(&buf);
    if (inl != schedule_.inlined.end()) return run_inlined(*inl->second, e);
    auto it = stores_.find(&buf);
    if (it != stores_.end() && !row_matched(it->second, e))
      conflict("reads " + buf.name + " at " + ir::to_string(e) + ", which the kernel writes elsewhere");
    if (it != stores_.end()) report_.materialized.insert(&buf);
    loaded_.insert(&buf);
    return inner_.load(buf, e);
  }

  void store(const ir::Buffer& buf, const Expr& index, Val v, ir::StoreMode mode) override {
    Expr e = ir::simplify(index, extents_);
    if (capture_ && capture_->buffer == &buf) {
      capture_->value = v;
      return;
    }
    record_store(buf, e, v, mode, scope_);
    if (!kernel_.internal_buffers.count(&buf)) inner_.store(buf, e, v, mode);
  }

  void store_reduction(const ir::Buffer& buf, const Expr& index, Val v) override {
    Expr e = ir::simplify(index, extents_);
    record_store(buf, e, v, ir::StoreMode::Set, Scope{});  // runs after the reduction loop
    if (!kernel_.internal_buffers.count(&buf)) inner_.store_reduction(buf, e, v);
  }

  Val constant(const ir::Scalar& s) override { return inner_.constant(s); }
  Val index_expr(const Expr& e, DType t) override { return inner_.index_expr(ir::simplify(e, extents_), t); }
  Val to_dtype(Val v, DType t) override { return inner_.to_dtype(v, t); }
  Val unary(ir::UnaryOp op, Val x) override { return inner_.unary(op, x); }
  Val binary(ir::BinaryOp op, Val a, Val b) override { return inner_.binary(op, a, b); }
  Val where(Val c, Val a, Val b) override { return inner_.where(c, a, b); }
  Expr indirect(Val v, const Expr& size, ir::NegativeIndex negative) override {
    Expr sym = inner_.indirect(v, size, negative);
    if (sym.kind() == Expr::Kind::Sym) extents_[sym.sym_name()] = size;  // 0 <= index < size
    return sym;
  }
  Val reduction(ir::ReduceOp op, Val v) override { return inner_.reduction(op, v); }

 private:
  struct Capture {
    const ir::Buffer* buffer;
    std::optional<Val> value;
  };

  ir::Ops& inner_;
  const Kernel& kernel_;
  const Schedule& schedule_;
  WalkReport& report_;
  ir::SymbolExtents extents_;
  Scope scope_;
  int scope_count_ = 0, member_ = 0;
  std::map<const ir::Buffer*, std::vector<StoreRecord>> stores_;
  std::set<const ir::Buffer*> loaded_;
  Capture* capture_ = nullptr;
  struct InlinedValue {
    Expr index;
    int scope = 0;  // usable in this scope, or anywhere after when 0 (the kernel's outer loops)
    Val value;
  };
  std::map<const ir::LoopNode*, std::vector<InlinedValue>> inlined_values_;

  void conflict(const std::string& what) { report_.conflicts.push_back(what); }

  // A value stored earlier at this index, where it is still in scope.
  std::optional<Val> forwarded(const ir::Buffer& buf, const Expr& e) const {
    auto it = stores_.find(&buf);
    if (it == stores_.end()) return std::nullopt;
    for (auto r = it->second.rbegin(); r != it->second.rend(); ++r)
      if (r->mode == ir::StoreMode::Set && r->index == e && (r->scope.id == 0 || r->scope.id == scope_.id))
        return r->value;
    return std::nullopt;
  }

  // Whether a read from memory only sees elements stored earlier in this outer iteration: some
  // finished loop stored exactly this pattern, its loop variables renamed to the current ones.
  bool row_matched(const std::vector<StoreRecord>& records, const Expr& e) const {
    for (const auto& r : records) {
      if (r.scope.id == 0 || r.scope.id == scope_.id || r.member == member_) continue;
      if (r.scope.vars.size() != scope_.vars.size() || r.scope.ranges != scope_.ranges) continue;
      std::map<std::string, Expr> rename;
      for (size_t d = 0; d < r.scope.vars.size(); ++d) rename[r.scope.vars[d]] = Expr::sym(scope_.vars[d]);
      if (ir::simplify(ir::substitute(r.index, rename), extents_) == e) return true;
    }
    return false;
  }

  void record_store(const ir::Buffer& buf, const Expr& e, Val v, ir::StoreMode mode, const Scope& scope) {
    auto& records = stores_[&buf];
    for (const auto& r : records)
      if (r.member != member_) conflict("writes " + buf.name + ", which another member of the kernel writes");
    if (loaded_.count(&buf)) conflict("writes " + buf.name + " after the kernel read it");
    records.push_back({e, v, scope, member_, mode});
  }

  // Computes an inlined producer's value at flat position `e` of its buffer by running its body,
  // once per index and scope: a value read twice (v = mul(v, v), 24 times) would otherwise run its
  // producer's body, and that body its own producer's, 2^24 times.
  Val run_inlined(const ir::LoopNode& producer, const Expr& e) {
    auto& computed = inlined_values_[&producer];
    for (const InlinedValue& c : computed)
      if (c.index == e && (c.scope == 0 || c.scope == scope_.id)) return c.value;
    Val v = run_inlined_body(producer, e);
    computed.push_back({e, scope_.id, v});
    return v;
  }

  Val run_inlined_body(const ir::LoopNode& producer, const Expr& e) {
    ir::Index idx = ir::unravel_index(e, producer.ranges);
    for (auto& x : idx) x = ir::simplify(x, extents_);
    Capture capture{producer.output, std::nullopt};
    Capture* outer = capture_;
    capture_ = &capture;
    producer.body(*this, idx, {});
    capture_ = outer;
    FOUNDRY_CHECK(capture.value.has_value(), "inlined node did not store its value");
    report_.inlined.insert(&producer);
    return *capture.value;
  }
};

ir::Index member_index(const Kernel& kernel, const Member& m, const std::vector<std::string>& outer,
                       const std::vector<std::string>& inner) {
  ir::Index idx;
  for (int d : m.dim_map) {
    if (d < 0) idx.push_back(Expr(0));
    else if (d >= Member::kInnerDim && !m.own_index.empty()) idx.push_back(m.own_index[d - Member::kInnerDim]);
    else if (d >= Member::kInnerDim) idx.push_back(Expr::sym(inner[d - Member::kInnerDim]));
    else idx.push_back(kernel.dim_index.empty() ? Expr::sym(outer[d]) : kernel.dim_index[d]);
  }
  return idx;
}

}  // namespace

const ir::Index& member_loop_ranges(const Member& m) {
  static const ir::Index none;
  if (m.role == MemberRole::Outer) return none;
  if (!m.own_ranges.empty()) return m.own_ranges;
  return m.role == MemberRole::Reduction ? m.node->reduction_ranges : m.inner_ranges;
}

std::string member_loop_var(const Kernel& kernel, const Member& m, size_t d) {
  if (m.role == MemberRole::Reduction) return ir::reduction_var(static_cast<int>(d));
  return ir::loop_var(static_cast<int>(kernel.ranges.size() + d));
}

std::vector<std::string> kernel_loop_vars(const Kernel& kernel) {
  std::vector<std::string> vars;
  for (size_t d = 0; d < kernel.ranges.size(); ++d) vars.push_back(ir::loop_var(static_cast<int>(d)));
  return vars;
}

WalkReport walk_kernel(const Kernel& kernel, const Schedule& schedule, KernelVisitor& visitor) {
  WalkReport report;
  FusedOps ops(visitor.ops(), kernel, schedule, report);
  std::vector<std::string> outer = kernel_loop_vars(kernel);
  for (size_t k = 0; k < kernel.members.size(); ++k) {
    const Member& m = kernel.members[k];
    int member = static_cast<int>(k);
    switch (m.role) {
      case MemberRole::Outer:
        ops.set_member(member);
        m.node->body(ops, member_index(kernel, m, outer, {}), {});
        break;
      case MemberRole::Reduction: {
        const ir::Index& ranges = member_loop_ranges(m);
        std::vector<std::string> rvars;
        ir::Index ridx = m.own_index;
        for (size_t d = 0; d < ranges.size(); ++d) {
          rvars.push_back(member_loop_var(kernel, m, d));
          if (m.own_index.empty()) ridx.push_back(Expr::sym(rvars.back()));
        }
        visitor.begin_reduction(m, ranges);
        ops.enter(member, rvars, ranges);
        m.node->body(ops, member_index(kernel, m, outer, {}), ridx);
        ops.leave();
        visitor.end_reduction(m);
        break;
      }
      case MemberRole::Inner: {
        const ir::Index& ranges = member_loop_ranges(m);
        std::vector<std::string> vars;
        for (size_t d = 0; d < ranges.size(); ++d) vars.push_back(member_loop_var(kernel, m, d));
        visitor.begin_inner(m, ranges, vars);
        ops.enter(member, vars, ranges);
        m.node->body(ops, member_index(kernel, m, outer, vars), {});
        ops.leave();
        visitor.end_inner(m);
        break;
      }
    }
  }
  return report;
}

namespace {
class RecordingVisitor final : public KernelVisitor {
 public:
  ir::RecordingOps recorder;
  ir::Ops& ops() override { return recorder; }
};
}  // namespace

KernelCheck check_kernel(const Kernel& kernel, const Schedule& schedule) {
  RecordingVisitor v;
  KernelCheck c;
  c.report = walk_kernel(kernel, schedule, v);
  c.accesses = std::move(v.recorder.accesses);
  return c;
}

}  // namespace foundry::sched
