#include "lower/bounds.h"

#include <map>
#include <optional>

#include "foundry/ir/record.h"
#include "foundry/support/error.h"

namespace foundry::lower {
namespace {

// The elements a buffer's storage holds: a constant views its storage; inputs and computed
// buffers are allocated dense, with their own elements.
ir::Expr storage_size(const ir::Buffer& b) {
  return b.kind == ir::BufferKind::Constant ? ir::Expr(b.storage_numel) : b.numel();
}

std::string describe(const ir::LoopProgram& program, const ir::Buffer& b) {
  switch (b.kind) {
    case ir::BufferKind::Input:
      return "input " + (b.input_index >= 0 && b.input_index < static_cast<int>(program.input_names.size())
                             ? program.input_names[b.input_index]
                             : b.name);
    case ir::BufferKind::Constant: return "constant " + b.name;
    case ir::BufferKind::Computed: break;
  }
  return "buffer " + b.name;
}

// A loop that runs no iteration reaches nothing.
bool never_runs(const ir::SymbolExtents& extents) {
  for (const auto& [name, extent] : extents)
    if (extent.is_const() && extent.const_value() <= 0) return true;
  return false;
}

// c0 + c1*x1 + c2*x2 + ... with constant c's and distinct symbols: its interval bounds are its true
// extremes, so a bound past the buffer is a real access there. (Other forms may be over-estimated
// by interval arithmetic: (i // 4) * 4 + i % 4 is i, but its terms' ranges add up to more.)
bool bounds_are_exact(const ir::Expr& e) {
  auto monomial = [](const ir::Expr& t) {
    if (t.kind() == ir::Expr::Kind::Const || t.kind() == ir::Expr::Kind::Sym) return true;
    if (t.kind() != ir::Expr::Kind::Mul) return false;
    const auto& f = t.operands();
    return f.size() == 2 && f[0].is_const() && f[1].kind() == ir::Expr::Kind::Sym;
  };
  if (e.kind() != ir::Expr::Kind::Add) return monomial(e);
  for (const ir::Expr& t : e.operands())
    if (!monomial(t)) return false;
  return true;
}

// The largest (or smallest) value of `e` over the loop and indirect ranges in `extents`, as an
// expression in the dynamic sizes only: e must be a sum of terms c * x * s.. (a constant, at most
// one loop or indirect symbol x, sizes s.. which are >= 1), each x with coefficients of one sign,
// so that every term is extreme at the same end of x's range. nullopt for any other form.
std::optional<ir::Expr> extreme(const ir::Expr& e, const ir::SymbolExtents& extents, bool largest) {
  std::vector<ir::Expr> terms = e.kind() == ir::Expr::Kind::Add ? e.operands() : std::vector<ir::Expr>{e};
  std::map<std::string, bool> positive;  // per loop or indirect symbol: the sign of its coefficients
  ir::Expr out = 0;
  for (const ir::Expr& t : terms) {
    std::vector<ir::Expr> factors = t.kind() == ir::Expr::Kind::Mul ? t.operands() : std::vector<ir::Expr>{t};
    int64_t coefficient = 1;
    std::optional<std::string> var;
    for (const ir::Expr& f : factors) {
      if (f.is_const()) {
        coefficient = f.const_value();
      } else if (f.kind() != ir::Expr::Kind::Sym) {
        return std::nullopt;
      } else if (extents.count(f.sym_name())) {
        if (var) return std::nullopt;
        var = f.sym_name();
      } else if (!ir::is_size_symbol(f.sym_name())) {
        return std::nullopt;
      }
    }
    if (!var) {
      out = out + t;
      continue;
    }
    bool up = coefficient > 0;
    if (positive.emplace(*var, up).first->second != up) return std::nullopt;
    if (up == largest) out = out + ir::substitute(t, {{*var, extents.at(*var) - 1}});
  }
  return out;
}

struct Access {
  const ir::LoopProgram& program;
  const ir::LoopNode& node;
  const ir::MemoryAccess& access;
  const char* verb;

  std::string where() const {
    return node.origins.empty() ? "the copy into a graph output" : "node " + node.origins.front();
  }
  std::string what() const { return where() + " " + verb + " " + describe(program, *access.buffer); }
};

// Static reasoning: interval bounds, judged only where they are exact. True when settled (in
// bounds); throws when provably out of bounds.
bool settled_statically(const Access& a, const ir::Expr& size, const ir::SymbolExtents& extents) {
  if (!bounds_are_exact(a.access.index - size)) return false;
  std::optional<int64_t> lowest = ir::lower_bound(a.access.index, extents);
  std::optional<int64_t> past_end = ir::upper_bound(a.access.index - size, extents);  // -1 or less inside
  if (lowest && *lowest < 0)
    throw UserError(a.what() + " at element " + std::to_string(*lowest) + ", before its start (index " +
                    ir::to_string(a.access.index) + ")");
  if (past_end && *past_end >= 0) {
    std::string reach = size.is_const() ? "element " + std::to_string(*past_end + size.const_value())
                                        : std::to_string(*past_end + 1) + " element(s) past its end";
    throw UserError(a.what() + " at " + reach + ", out of bounds for its " + ir::to_string(size) + " elements (index " +
                    ir::to_string(a.access.index) + ")");
  }
  return lowest && past_end;
}

// Dynamic sizes: what the sizes must satisfy for the access to stay inside, each relation proven
// here, refused here when it can never hold, or else checked when the model runs.
void require_at_run_time(ir::LoopProgram& program, const Access& a, const ir::Expr& size,
                         const ir::SymbolExtents& extents) {
  std::optional<ir::Expr> highest = extreme(a.access.index, extents, true);
  std::optional<ir::Expr> lowest = extreme(a.access.index, extents, false);
  if (!highest || !lowest) return;  // left to the rules and the lowerings
  for (const ir::Expr& need : {size - 1 - *highest, *lowest}) {
    std::optional<int64_t> spare = ir::lower_bound(need, {});
    if (spare && *spare >= 0) continue;
    if (need.is_const())
      throw UserError(a.what() + " out of bounds for every input size (index " + ir::to_string(a.access.index) +
                      ", " + ir::to_string(size) + " elements)");
    std::string message = "these input sizes would make " + a.where() + " access " +
                          describe(program, *a.access.buffer) + " out of bounds (it needs " + ir::to_string(need) +
                          " >= 0 of the dynamic sizes)";
    bool known = false;
    for (const ir::SizeCheck& c : program.size_checks) known = known || c.nonnegative == need;
    if (!known) program.size_checks.push_back({need, message});
  }
}

void check_access(ir::LoopProgram& program, const ir::LoopNode& node, const ir::MemoryAccess& access,
                  const ir::SymbolExtents& extents, const char* verb) {
  Access a{program, node, access, verb};
  ir::Expr size = storage_size(*access.buffer);
  if (settled_statically(a, size, extents) || program.size_symbols.empty()) return;
  require_at_run_time(program, a, size, extents);
}

// A library call reads each operand through a strided view: as an access over the view's elements.
void check_operands(ir::LoopProgram& program, const ir::LoopNode& node) {
  for (const ir::Operand* present : ir::operands(node.call)) {
    const ir::Operand& operand = *present;
    ir::SymbolExtents extents;
    ir::Expr index = operand.offset;
    for (size_t d = 0; d < operand.sizes.size() && d < operand.strides.size(); ++d) {
      std::string element = "e" + std::to_string(d);
      extents[element] = operand.sizes[d];
      index = index + ir::Expr::sym(element) * operand.strides[d];
    }
    if (never_runs(extents)) continue;
    check_access(program, node, {operand.buffer, index, ir::StoreMode::Set}, extents, "reads");
  }
}

}  // namespace

void check_memory_bounds(ir::LoopProgram& program) {
  for (const auto& node : program.nodes) {
    if (node->kind == ir::NodeKind::Extern) {
      check_operands(program, *node);
      continue;
    }
    ir::RecordingOps ops;
    ir::run_body_symbolic(*node, ops);
    ir::SymbolExtents extents = ir::node_extents(*node);
    if (never_runs(extents)) continue;
    extents.insert(ops.indirect_extents.begin(), ops.indirect_extents.end());
    for (const ir::MemoryAccess& a : ops.accesses.reads) check_access(program, *node, a, extents, "reads");
    for (const ir::MemoryAccess& a : ops.accesses.writes) check_access(program, *node, a, extents, "writes");
  }
}

}  // namespace foundry::lower
