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
  // A loop that may run no iteration keeps its statements: hoisted, they would run anyway.
  s.hoists = hoisting && !vars.empty() && ranges.back().is_const() && ranges.back().const_value() > 0;
  if (s.hoists) s.varying.insert(vars.back());
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

bool ScopeStack::invariant(std::initializer_list<ir::Val> values, std::initializer_list<const ir::Expr*> indices,
                           const ir::Buffer* buffer) const {
  const Scope& s = top();
  if (!s.hoists || (buffer && written.count(buffer))) return false;
  for (ir::Val v : values) {
    auto it = defined_in.find(v.id);
    if (it != defined_in.end() && it->second == s.serial && !s.hoisted_values.count(v.id)) return false;
  }
  for (const ir::Expr* e : indices)
    for (const std::string& symbol : ir::free_symbols(*e))
      if (s.varying.count(symbol)) return false;
  return true;
}

bool ScopeStack::is_open(int serial) const {
  for (const Scope& s : stack_)
    if (s.serial == serial) return true;
  return false;
}

void RowRegisters::enter(const ir::Index& ranges, const std::vector<std::string>& vars, int serial) {
  serial_ = serial;
  shape_.clear();
  positional_.clear();
  for (size_t d = 0; d < ranges.size(); ++d) {
    shape_ += ir::to_string(ranges[d]) + ",";
    positional_[vars[d]] = ir::Expr::sym("p" + std::to_string(d));
  }
}

// Two loops of one shape give a thread the same elements in each round, so an index with the
// loop's variables put by position names one element of the row, whatever each loop calls them.
std::optional<std::string> RowRegisters::key(const std::string& ptr, const ir::Expr& index) const {
  std::set<std::string> symbols = ir::free_symbols(index);
  bool moves = false;
  for (const std::string& s : symbols) {
    if (s.rfind("ind", 0) == 0) return std::nullopt;  // a loaded index: not the same each loop
    moves = moves || positional_.count(s) > 0;
  }
  if (!moves) return std::nullopt;
  return shape_ + "|" + ptr + "|" + ir::to_string(ir::substitute(index, positional_));
}

std::optional<std::string> RowRegisters::held(const std::string& ptr, const ir::Expr& index) {
  std::optional<std::string> k = key(ptr, index);
  if (!k) return std::nullopt;
  auto it = held_.find(*k);
  if (it == held_.end()) return std::nullopt;
  read_.insert(it->second.array);
  return it->second.array + "[slot]";
}

std::string RowRegisters::hold(const std::string& ptr, const ir::Expr& index, const std::string& type,
                               const std::string& value) {
  std::optional<std::string> k = key(ptr, index);
  if (!k || declarations_.size() >= kMaxArrays) return "";
  std::string array = ptr + "_row" + std::to_string(declarations_.size());
  declarations_.push_back(type + " " + array);
  held_[*k] = {ptr, array};
  return array + "[slot] = " + value + ";";
}

void RowRegisters::forget(const std::string& ptr) {
  for (auto it = held_.begin(); it != held_.end();) it = it->second.ptr == ptr ? held_.erase(it) : std::next(it);
}

namespace {
// Removes the statements that start with one of `prefixes`, at any depth.
void drop_lines(Stmts& stmts, const std::vector<std::string>& prefixes) {
  Stmts kept;
  for (Stmt& s : stmts) {
    if (auto* line = std::get_if<std::string>(&s.node)) {
      bool drop = false;
      for (const std::string& p : prefixes) drop = drop || line->rfind(p, 0) == 0;
      if (drop) continue;
    } else if (auto* loop = std::get_if<Loop>(&s.node)) {
      drop_lines(loop->body, prefixes);
    } else if (auto* region = std::get_if<ParallelRegion>(&s.node)) {
      drop_lines(region->body, prefixes);
    } else if (auto* cases = std::get_if<Cases>(&s.node)) {
      for (auto& c : cases->cases) drop_lines(c.second, prefixes);
    }
    kept.push_back(std::move(s));
  }
  stmts = std::move(kept);
}
}  // namespace

std::vector<std::string> RowRegisters::finish(Stmts& body) const {
  std::vector<std::string> kept, unread;
  for (const std::string& d : declarations_) {
    std::string array = d.substr(d.rfind(' ') + 1);
    if (read_.count(array)) kept.push_back(d + "[kRowSlots];");
    else unread.push_back(array + "[slot] = ");
  }
  if (!unread.empty()) drop_lines(body, unread);
  return kept;
}

// The C++ of `index` at lane 0 when it moves by one element per lane and is a multiple of kLanes
// there (the innermost variable is, at lane 0: its extent is one too).
std::optional<std::string> LaneVectors::first_lane_offset(ScopeStack& scopes, const ir::Expr& index) const {
  for (const std::string& s : ir::free_symbols(index))
    if (!vars_.count(s) && !ir::is_size_symbol(s)) return std::nullopt;
  std::optional<ir::Expr> step = ir::affine_coefficient(index, var_);
  if (!step || !step->is_const(1)) return std::nullopt;
  if (!ir::mod(ir::substitute(index, {{var_, ir::Expr(0)}}), ir::Expr(kLanes)).is_const(0)) return std::nullopt;
  return scopes.idx(ir::substitute(index, {{var_, ir::Expr::sym(first_lane())}}));
}

std::optional<std::string> LaneVectors::load(ScopeStack& scopes, const std::string& ptr, const ir::Expr& index) {
  std::optional<std::string> at = first_lane_offset(scopes, index);
  if (!at) return std::nullopt;
  std::string& array = loaded_[ptr + "|" + *at];
  if (array.empty()) {
    array = ptr + "_v" + std::to_string(arrays_++);
    before_.push_back("float " + array + "[" + std::to_string(kLanes) + "];");
    before_.push_back("foundry_cuda::load4(" + array + ", " + ptr + " + (" + *at + "));");
    pointers_.insert(ptr);
  }
  return array + "[lane]";
}

std::optional<std::string> LaneVectors::store(ScopeStack& scopes, const std::string& ptr, const ir::Expr& index) {
  std::optional<std::string> at = first_lane_offset(scopes, index);
  if (!at) return std::nullopt;
  std::string array = ptr + "_v" + std::to_string(arrays_++);
  before_.push_back("float " + array + "[" + std::to_string(kLanes) + "];");
  after_.push_back("foundry_cuda::store4(" + ptr + " + (" + *at + "), " + array + ");");
  pointers_.insert(ptr);
  return array + "[lane]";
}

std::string ScopeStack::idx(const ir::Expr& e) {
  for (const std::string& s : ir::free_symbols(e))
    if (ir::is_size_symbol(s)) size_symbols_.insert(s);
  return cpp_index(piece ? in_piece(e) : e, extents_);
}

// `e` with the piece's variable written as begin + an offset, and `extents` with the offset's
// range, [0, end - begin).
ir::Expr ScopeStack::at_offset(const ir::Expr& e, ir::SymbolExtents& extents) const {
  extents = extents_;
  extents[piece->var + "_in_piece"] = ir::Expr(piece->end - piece->begin);
  return ir::substitute(e, {{piece->var, ir::Expr::sym(piece->var + "_in_piece") + piece->begin}});
}

// `e` simplified in the piece (its clamps of the index disappear), in terms of the variable again.
ir::Expr ScopeStack::in_piece(const ir::Expr& e) const {
  if (!ir::free_symbols(e).count(piece->var)) return e;
  ir::SymbolExtents extents;
  const ir::Expr inside = ir::simplify(at_offset(e, extents), extents);
  return ir::simplify(ir::substitute(inside, {{piece->var + "_in_piece", ir::Expr::sym(piece->var) - piece->begin}}),
                      extents_);
}

std::optional<bool> ScopeStack::decided(ir::BinaryOp op, const ir::Expr& diff) const {
  if (!piece) return std::nullopt;
  ir::SymbolExtents extents;
  const ir::Expr d = at_offset(diff, extents);
  const auto lo = ir::lower_bound(d, extents), hi = ir::upper_bound(d, extents);
  if (!lo || !hi) return std::nullopt;
  using Op = ir::BinaryOp;
  switch (op) {
    case Op::Lt: return *hi < 0 ? std::optional(true) : *lo >= 0 ? std::optional(false) : std::nullopt;
    case Op::Le: return *hi <= 0 ? std::optional(true) : *lo > 0 ? std::optional(false) : std::nullopt;
    case Op::Gt: return *lo > 0 ? std::optional(true) : *hi <= 0 ? std::optional(false) : std::nullopt;
    case Op::Ge: return *lo >= 0 ? std::optional(true) : *hi < 0 ? std::optional(false) : std::nullopt;
    case Op::Eq: return *lo == 0 && *hi == 0 ? std::optional(true) : *lo > 0 || *hi < 0 ? std::optional(false) : std::nullopt;
    case Op::Ne: return *lo == 0 && *hi == 0 ? std::optional(false) : *lo > 0 || *hi < 0 ? std::optional(true) : std::nullopt;
    default: return std::nullopt;
  }
}

std::string ScopeStack::ptr(const ir::Buffer& buf) const {
  auto it = ptrs_.find(&buf);
  FOUNDRY_CHECK(it != ptrs_.end(), "kernel touches buffer " + buf.name + " that is not among its arguments");
  return it->second;
}

}  // namespace foundry::codegen
