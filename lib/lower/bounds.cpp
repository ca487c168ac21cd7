#include "lower/bounds.h"

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

void check_access(const ir::LoopProgram& program, const ir::LoopNode& node, const ir::MemoryAccess& access,
                  const ir::SymbolExtents& extents, const char* verb) {
  ir::Expr size = storage_size(*access.buffer);
  if (!bounds_are_exact(access.index - size)) return;
  std::optional<int64_t> lowest = ir::lower_bound(access.index, extents);
  std::optional<int64_t> past_end = ir::upper_bound(access.index - size, extents);  // -1 or less when inside
  if ((!lowest || *lowest >= 0) && (!past_end || *past_end < 0)) return;
  std::string where = node.origins.empty() ? "the copy into a graph output" : "node " + node.origins.front();
  std::string reach;
  if (lowest && *lowest < 0)
    reach = "element " + std::to_string(*lowest);
  else if (size.is_const())
    reach = "element " + std::to_string(*past_end + size.const_value());
  else
    reach = std::to_string(*past_end + 1) + " element(s) past its end";
  throw UserError(where + " " + verb + " " + describe(program, *access.buffer) + " at " + reach +
                  ", out of bounds for its " + ir::to_string(size) + " elements (index " +
                  ir::to_string(access.index) + ")");
}

}  // namespace

void check_memory_bounds(const ir::LoopProgram& program) {
  for (const auto& node : program.nodes) {
    if (node->kind == ir::NodeKind::Extern) continue;  // library calls: their operands are whole buffers
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
