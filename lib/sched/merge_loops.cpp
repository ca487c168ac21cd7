#include "foundry/sched/merge_loops.h"

#include <optional>
#include <utility>

#include "foundry/sched/kernel_walk.h"

namespace foundry::sched {

using ir::Expr;
using ir::Val;

namespace {

// Every index expression a kernel's walk uses (loads, stores, indices used as values, the sizes of
// indirect indices), each with the member whose own loops it runs in (-1: the outer loops only).
class IndexUses final : public ir::Ops {
 public:
  std::vector<std::pair<int, Expr>> indices;
  int member = -1;

  Val load(const ir::Buffer& buf, const Expr& index) override {
    note(index);
    return fresh(buf.dtype);
  }
  void store(const ir::Buffer&, const Expr& index, Val, ir::StoreMode) override { note(index); }
  Val constant(const ir::Scalar& value) override { return fresh(value.dtype); }
  Val index_expr(const Expr& index, DType dtype) override {
    note(index);
    return fresh(dtype);
  }
  Val to_dtype(Val, DType dtype) override { return fresh(dtype); }
  Val unary(ir::UnaryOp op, Val x) override { return fresh(ir::returns_bool(op) ? DType::Bool : x.dtype); }
  Val binary(ir::BinaryOp op, Val a, Val) override { return fresh(ir::returns_bool(op) ? DType::Bool : a.dtype); }
  Val where(Val, Val a, Val) override { return fresh(a.dtype); }
  Expr indirect(Val, const Expr& size, ir::NegativeIndex) override {
    note(size);
    return Expr::sym("ind" + std::to_string(indirect_count_++));
  }
  Val reduction(ir::ReduceOp op, Val value) override { return fresh(ir::reduce_result_dtype(op, value.dtype)); }
  void store_reduction(const ir::Buffer&, const Expr& index, Val) override { note(index); }

 private:
  int next_ = 0;
  int indirect_count_ = 0;
  void note(const Expr& e) { indices.emplace_back(member, e); }
  Val fresh(DType t) { return Val{next_++, t}; }
};

using Indices = std::vector<std::pair<int, Expr>>;

std::optional<Indices> index_uses(const Kernel& kernel, const Schedule& schedule) {
  class Visitor final : public KernelVisitor {
   public:
    IndexUses uses;
    const Kernel* kernel = nullptr;
    ir::Ops& ops() override { return uses; }
    int position(const Member& m) const { return static_cast<int>(&m - kernel->members.data()); }
    void begin_reduction(const Member& m, const ir::Index&) override { uses.member = position(m); }
    void end_reduction(const Member&) override { uses.member = -1; }
    void begin_inner(const Member& m, const ir::Index&, const std::vector<std::string>&) override {
      uses.member = position(m);
    }
    void end_inner(const Member&) override { uses.member = -1; }
  } visitor;
  visitor.kernel = &kernel;
  if (!walk_kernel(kernel, schedule, visitor).conflicts.empty()) return std::nullopt;
  return std::move(visitor.uses.indices);
}

// One set of loops that may merge: the kernel's outer loops (member -1) or a member's own
// (reduction or inner) loops.
struct LoopSet {
  int member = -1;

  const ir::Index& ranges(const Kernel& k) const {
    return member < 0 ? k.ranges : member_loop_ranges(k.members[static_cast<size_t>(member)]);
  }
  std::string var(const Kernel& k, size_t d) const {
    return member < 0 ? ir::loop_var(static_cast<int>(d)) : member_loop_var(k, k.members[static_cast<size_t>(member)], d);
  }
  // The indices that use these loops: every one for the outer loops, the member's own otherwise.
  std::vector<Expr> uses(const Indices& all) const {
    std::vector<Expr> out;
    for (const auto& [m, e] : all)
      if (member < 0 || m == member) out.push_back(e);
    return out;
  }

  // `k` with loops p and p + 1 of this set as one loop p: the dims in the old loops' variables
  // become expressions of the new ones (p // range(p + 1) and p % range(p + 1)).
  Kernel merged(const Kernel& k, size_t p) const {
    const ir::Index old = ranges(k);
    const int64_t inner_range = old[p + 1].const_value();
    std::map<std::string, Expr> replace;
    for (size_t d = 0; d < old.size(); ++d) {
      const Expr to = Expr::sym(var(k, d <= p ? d : d - 1));
      replace[var(k, d)] = d == p ? ir::floordiv(to, inner_range) : d == p + 1 ? ir::mod(to, inner_range) : to;
    }
    ir::Index now = old;
    now[p] = old[p] * old[p + 1];
    now.erase(now.begin() + static_cast<std::ptrdiff_t>(p) + 1);
    Kernel out = k;
    std::vector<Expr>& index = member < 0 ? out.dim_index : out.members[static_cast<size_t>(member)].own_index;
    if (member < 0) out.ranges = now;
    else out.members[static_cast<size_t>(member)].own_ranges = now;
    if (index.empty())
      for (size_t d = 0; d < old.size(); ++d) index.push_back(Expr::sym(var(k, d)));
    ir::SymbolExtents extents;
    for (size_t d = 0; d < now.size(); ++d) extents[var(out, d)] = now[d];
    for (Expr& e : index) e = ir::simplify(ir::substitute(e, replace), extents);
    return out;
  }
};

// Loops `outer` and `inner` (of range `inner_range`) run as one when every index moves with
// `outer` exactly as far as with `inner_range` steps of `inner`, affinely in both.
bool contiguous_pair(const std::vector<Expr>& indices, const std::string& outer, const std::string& inner,
                     int64_t inner_range) {
  for (const Expr& e : indices) {
    auto symbols = ir::free_symbols(e);
    if (!symbols.count(outer) && !symbols.count(inner)) continue;
    auto along_outer = ir::affine_coefficient(e, outer), along_inner = ir::affine_coefficient(e, inner);
    if (!along_outer || !along_inner || *along_outer != *along_inner * Expr(inner_range)) return false;
  }
  return true;
}

// Whether every index that uses `var` is affine in it (the merged loop's indices simplified).
bool affine_in(const std::vector<Expr>& indices, const std::string& var) {
  for (const Expr& e : indices)
    if (ir::free_symbols(e).count(var) && !ir::affine_coefficient(e, var)) return false;
  return true;
}

// Merges pairs of loops of `sets` (which have the same ranges, and merge together: a member's
// stores and another's loads of them must keep matching), innermost first, each merge checked
// again on the merged kernel.
void merge_sets(Kernel& current, Indices& indices, const std::vector<LoopSet>& sets, const Schedule& schedule) {
  for (bool merged = true; merged;) {
    merged = false;
    const ir::Index ranges = sets.front().ranges(current);
    for (size_t p = ranges.size() > 1 ? ranges.size() - 1 : 0; p-- > 0 && !merged;) {
      if (!ranges[p].is_const() || !ranges[p + 1].is_const()) continue;
      bool contiguous = true;
      for (const LoopSet& set : sets)
        contiguous = contiguous && contiguous_pair(set.uses(indices), set.var(current, p), set.var(current, p + 1),
                                                   ranges[p + 1].const_value());
      if (!contiguous) continue;
      Kernel candidate = current;
      for (const LoopSet& set : sets) candidate = set.merged(candidate, p);
      auto candidate_indices = index_uses(candidate, schedule);
      bool affine = candidate_indices.has_value();
      for (const LoopSet& set : sets)
        affine = affine && affine_in(set.uses(*candidate_indices), set.var(candidate, p));
      if (!affine) continue;
      current = std::move(candidate);
      indices = std::move(*candidate_indices);
      merged = true;
    }
  }
}

}  // namespace

Kernel merge_loops(const Kernel& kernel, const Schedule& schedule) {
  Kernel current = kernel;
  auto indices = index_uses(current, schedule);
  if (!indices) return current;
  merge_sets(current, *indices, {LoopSet{-1}}, schedule);
  // The members' own loops, grouped by their ranges.
  std::map<std::string, std::vector<LoopSet>> groups;
  for (size_t m = 0; m < current.members.size(); ++m) {
    if (current.members[m].role == MemberRole::Outer) continue;
    LoopSet set{static_cast<int>(m)};
    std::string key;
    for (const Expr& r : set.ranges(current)) key += ir::to_string(r) + ",";
    groups[key].push_back(set);
  }
  for (const auto& [key, sets] : groups) merge_sets(current, *indices, sets, schedule);
  return current;
}

}  // namespace foundry::sched
