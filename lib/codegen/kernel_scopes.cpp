#include "codegen/kernel_scopes.h"

#include "foundry/codegen/cpp_expr.h"
#include "foundry/support/error.h"

namespace foundry::codegen {

ScopeStack::ScopeStack(const std::map<const ir::Buffer*, std::string>& ptrs, int lanes) : ptrs_(ptrs), lanes_(lanes) {
  stack_.emplace_back();  // the kernel's own statements, outside every loop
  extents_[kLane] = ir::Expr(lanes);
}

void ScopeStack::open(const ir::Index& ranges, const std::vector<std::string>& vars) {
  if (stack_.size() > 1) ++stack_.back().nested;
  Scope s;
  s.ranges = ranges;
  s.vars = vars;
  s.serial = ++serial_;
  stack_.push_back(std::move(s));
  for (size_t d = 0; d < vars.size(); ++d) extents_[vars[d]] = ranges[d];
}

Scope ScopeStack::close() {
  FOUNDRY_CHECK(stack_.size() > 1, "closing a loop scope that was never opened");
  Scope s = std::move(stack_.back());
  stack_.pop_back();
  for (const auto& v : s.vars) extents_.erase(v);
  return s;
}

bool ScopeStack::is_open(int serial) const {
  for (const Scope& s : stack_)
    if (s.serial == serial) return true;
  return false;
}

std::string ScopeStack::idx(const ir::Expr& e) {
  for (const std::string& s : ir::free_symbols(e))
    if (ir::is_size_symbol(s)) size_symbols_.insert(s);
  return cpp_index(e, extents_);
}

std::string ScopeStack::ptr(const ir::Buffer& buf) const {
  auto it = ptrs_.find(&buf);
  FOUNDRY_CHECK(it != ptrs_.end(), "kernel touches buffer " + buf.name + " that is not among its arguments");
  return it->second;
}

}  // namespace foundry::codegen
