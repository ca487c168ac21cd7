#include "codegen/piece_split.h"

#include <cctype>
#include <functional>
#include <map>
#include <set>

namespace foundry::codegen {

using ir::Expr;
using ir::Val;

namespace {

// Each piece's body is written out: the text grows with them. A DenseNet-121 block's last
// concatenation has 25 pieces, its kernel 1,600 lines split.
constexpr size_t kMaxPieces = 64;
constexpr size_t kMaxLines = 5000;

// Runs a kernel's body and notes, for each candidate loop, where the comparisons of index values
// that choose a where() change their outcome along it: `var - p < 0` changes at p (the end of
// the piece before), `var - p <= 0` at p + 1. Only comparisons of the variable itself (no other
// loop's, no scale) with a constant count: a window's padding test moves with its window and stays
// as it is. A padding's test of both ends (`var >= 1 && var < n + 1`) chooses through an and: its
// pieces would still select, between the one load and zero, so it stays whole too.
class PieceEnds final : public sched::KernelVisitor, public ir::Ops {
 public:
  PieceEnds(const std::vector<std::string>& candidates, const std::vector<int64_t>& extents)
      : ends(candidates.size()), candidates_(candidates), extents_(extents) {}
  std::vector<std::set<int64_t>> ends;  // per candidate

  ir::Ops& ops() override { return *this; }
  Val load(const ir::Buffer& buf, const Expr&) override { return fresh(buf.dtype); }
  void store(const ir::Buffer&, const Expr&, Val, ir::StoreMode) override {}
  Val constant(const ir::Scalar& s) override {
    return s.dtype == DType::Int64 ? index_expr(Expr(s.i), s.dtype) : fresh(s.dtype);
  }
  Val index_expr(const Expr& e, DType t) override {
    Val v = fresh(t);
    if (t == DType::Int64) index_[v.id] = e;
    return v;
  }
  Val to_dtype(Val, DType t) override { return fresh(t); }
  Val unary(ir::UnaryOp op, Val x) override { return fresh(ir::returns_bool(op) ? DType::Bool : x.dtype); }
  Val binary(ir::BinaryOp op, Val a, Val b) override {
    Val v = fresh(ir::returns_bool(op) ? DType::Bool : a.dtype);
    auto ia = index_.find(a.id), ib = index_.find(b.id);
    if (ia == index_.end() || ib == index_.end()) return v;
    const Expr &x = ia->second, &y = ib->second;
    if (op == ir::BinaryOp::Add) index_[v.id] = x + y;
    else if (op == ir::BinaryOp::Sub) index_[v.id] = x - y;
    else if (op == ir::BinaryOp::Mul) index_[v.id] = x * y;
    else if (ir::returns_bool(op)) comparisons_[v.id] = {op, x - y};
    return v;
  }
  Val where(Val c, Val a, Val) override {
    if (auto it = comparisons_.find(c.id); it != comparisons_.end()) note(it->second.first, it->second.second);
    return fresh(a.dtype);
  }
  Expr indirect(Val, const Expr&, ir::NegativeIndex) override { return Expr::sym("ind" + std::to_string(indirect_++)); }
  Val reduction(ir::ReduceOp op, Val v) override { return fresh(ir::reduce_result_dtype(op, v.dtype)); }
  void store_reduction(const ir::Buffer&, const Expr&, Val) override {}

 private:
  const std::vector<std::string>& candidates_;
  const std::vector<int64_t>& extents_;
  std::map<int, Expr> index_;
  std::map<int, std::pair<ir::BinaryOp, Expr>> comparisons_;  // by value: `diff op 0`
  int next_ = 0, indirect_ = 0;

  Val fresh(DType t) { return Val{next_++, t}; }

  void note(ir::BinaryOp op, const Expr& diff) {
    using Op = ir::BinaryOp;
    for (size_t k = 0; k < candidates_.size(); ++k) {
      const std::string& var = candidates_[k];
      auto c = ir::affine_coefficient(diff, var);
      if (!c || !(c->is_const(1) || c->is_const(-1))) continue;
      const Expr rest = ir::simplify(diff - *c * Expr::sym(var), {});
      if (!rest.is_const()) continue;
      // diff = var - p (up) or p - var: true below p, from p on, at p alone, or their opposites.
      const bool up = c->is_const(1);
      const int64_t p = up ? -rest.const_value() : rest.const_value();
      std::vector<int64_t> at;
      if (op == Op::Eq || op == Op::Ne) at = {p, p + 1};
      else if (op == Op::Lt || op == Op::Ge) at = {up ? p : p + 1};
      else if (op == Op::Le || op == Op::Gt) at = {up ? p + 1 : p};
      for (int64_t e : at)
        if (e > 0 && e < extents_[k]) ends[k].insert(e);
    }
  }
};

// The statements a node holds: a loop's or a region's body (null for a line or cases).
Stmts* body_of(Stmt& s) {
  if (auto* loop = std::get_if<Loop>(&s.node)) return &loop->body;
  if (auto* region = std::get_if<ParallelRegion>(&s.node)) return &region->body;
  return nullptr;
}

// The statements below `body` that threads collapse with its loop (`inside` more levels: the
// first loop of each): the path goes on to the innermost one's body.
bool descend_collapsed(Stmts& body, int inside, std::vector<size_t>& path) {
  Stmts* at = &body;
  for (; inside > 0; --inside) {
    size_t k = 0;
    while (k < at->size() && !std::get_if<Loop>(&(*at)[k].node)) ++k;
    if (k == at->size()) return false;
    path.push_back(k);
    at = body_of((*at)[k]);
  }
  return true;
}

// The path (statement positions, level by level) to the body where the cases go: that of `var`'s
// loop or, when threads share it collapsed with loops inside, of the innermost of those.
// `collapsed`: the loops, from this level down, that threads collapse with one above.
bool find_cases_body(Stmts& stmts, const std::string& var, int collapsed, std::vector<size_t>& path) {
  for (size_t i = 0; i < stmts.size(); ++i) {
    Stmts* body = body_of(stmts[i]);
    if (!body) continue;
    const auto* loop = std::get_if<Loop>(&stmts[i].node);
    int inside = collapsed > 0 ? collapsed - 1 : 0;
    if (loop && loop->threads != Loop::Threads::None && loop->collapse > 1) inside = loop->collapse - 1;
    path.push_back(i);
    if (loop && loop->var == var) return descend_collapsed(*body, inside, path);
    if (find_cases_body(*body, var, inside, path)) return true;
    path.pop_back();
  }
  return false;
}

Stmts* follow(Stmts& stmts, const std::vector<size_t>& path) {
  Stmts* at = &stmts;
  for (size_t i : path) {
    if (i >= at->size() || !(at = body_of((*at)[i]))) return nullptr;
  }
  return at;
}

std::string text_of(const Stmts& stmts) {
  std::vector<std::string> lines;
  print_cpp(stmts, "", lines);
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// The names `tmpN` and `indN` (a position read from memory) that `text` mentions, each time it does.
void count_values(const std::string& text, std::map<std::string, int>& uses) {
  for (const std::string prefix : {"tmp", "ind"}) {
    const size_t n = prefix.size();
    for (size_t i = text.find(prefix); i != std::string::npos; i = text.find(prefix, i + n)) {
      if (i > 0 && (std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_')) continue;
      size_t j = i + n;
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
      if (j > i + n && (j == text.size() || !(std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')))
        ++uses[text.substr(i, j - i)];
    }
  }
}

// The value a line defines (`const T tmpN = ...;`, indented or not).
std::optional<std::string> defined_value(const std::string& line, std::string* rhs = nullptr) {
  const size_t start = line.find_first_not_of(' ');
  if (start == std::string::npos || line.compare(start, 6, "const ") != 0) return std::nullopt;
  const size_t eq = line.find(" = ");
  if (eq == std::string::npos) return std::nullopt;
  const size_t name = line.rfind(' ', eq - 1);
  if (name == std::string::npos || name < start + 6 ||
      (line.compare(name + 1, 3, "tmp") != 0 && line.compare(name + 1, 3, "ind") != 0))
    return std::nullopt;
  if (rhs) *rhs = line.substr(eq + 3);
  return line.substr(name + 1, eq - name - 1);
}

// Whether a definition (its right side `rhs`) can go when nothing reads its value: values
// read and compute, nothing else, unless they call one of foundry_rt's helpers that may report an
// error. A position read from memory (checked_index) goes with the loads that read it: a piece's
// case computes only what it reads, as the operation it comes from (a concatenation) does.
bool droppable(const std::string& rhs) {
  std::string rest = rhs;
  for (const std::string pure : {"foundry_rt::index_min(", "foundry_rt::index_max(", "foundry_rt::select(",
                                 "foundry_rt::min_int<", "foundry_rt::max_int<", "foundry_rt::maximum<",
                                 "foundry_rt::minimum<", "foundry_rt::float_to_int<", "foundry_rt::checked_index(",
                                 "foundry_rt::checked_position("})
    for (size_t at; (at = rest.find(pure)) != std::string::npos;) rest.erase(at, pure.size());
  return rest.find("foundry_rt::") == std::string::npos;
}

void each_line(Stmts& stmts, const std::function<void(std::string&)>& f) {
  for (Stmt& s : stmts) {
    if (auto* line = std::get_if<std::string>(&s.node)) f(*line);
    else if (Stmts* inner = body_of(s)) each_line(*inner, f);
    else if (auto* cases = std::get_if<Cases>(&s.node))
      for (auto& c : cases->cases) each_line(c.second, f);
  }
}

// Drops from a case the values nothing in it reads (the loads of the pieces it does not read,
// and their selections), until none is left. Each case was written apart, so its values are read
// in it alone. A value defined in several forms (a vector loop's and its last partial vector's)
// goes when none of them is read.
void drop_unread(Stmts& body) {
  for (bool dropped = true; dropped;) {
    std::map<std::string, int> uses, definitions;
    each_line(body, [&](std::string& line) {
      count_values(line, uses);
      if (auto value = defined_value(line)) ++definitions[*value];
    });
    dropped = false;
    std::function<void(Stmts&)> sweep = [&](Stmts& stmts) {
      Stmts kept;
      for (Stmt& s : stmts) {
        if (auto* line = std::get_if<std::string>(&s.node)) {
          std::string rhs;
          auto value = defined_value(*line, &rhs);
          if (value && uses[*value] == definitions[*value] && droppable(rhs)) {
            dropped = true;
            continue;
          }
        } else if (Stmts* inner = body_of(s)) {
          sweep(*inner);
        } else if (auto* cases = std::get_if<Cases>(&s.node)) {
          for (auto& c : cases->cases) sweep(c.second);
        }
        kept.push_back(std::move(s));
      }
      stmts = std::move(kept);
    };
    sweep(body);
  }
}

}  // namespace

std::optional<PieceSplit> find_piece_split(const sched::Kernel& kernel, const sched::Schedule& schedule,
                                           const std::vector<std::string>& candidates,
                                           const std::vector<int64_t>& extents) {
  if (candidates.empty()) return std::nullopt;
  PieceEnds found(candidates, extents);
  sched::walk_kernel(kernel, schedule, found);
  for (size_t k = 0; k < candidates.size(); ++k)
    if (!found.ends[k].empty() && found.ends[k].size() < kMaxPieces)
      return PieceSplit{candidates[k], {found.ends[k].begin(), found.ends[k].end()}, extents[k]};
  return std::nullopt;
}

std::optional<Stmts> merge_pieces(std::vector<Stmts> nests, const PieceSplit& split) {
  std::vector<size_t> path;
  if (nests.empty() || !find_cases_body(nests[0], split.var, 0, path)) return std::nullopt;
  Cases cases;
  std::string outside;
  for (size_t k = 0; k < nests.size(); ++k) {
    Stmts* body = follow(nests[k], path);
    if (!body) return std::nullopt;
    const std::string condition = k + 1 < nests.size() ? split.var + " < " + std::to_string(split.ends[k]) : "";
    drop_unread(*body);
    cases.cases.emplace_back(condition, std::move(*body));
    body->clear();
    const std::string text = text_of(nests[k]);
    if (k == 0) outside = text;
    else if (text != outside) return std::nullopt;
  }
  Stmts merged = std::move(nests[0]);
  Stmts* body = follow(merged, path);
  body->push_back(std::move(cases));
  std::vector<std::string> lines;
  print_cpp(merged, "", lines);
  if (lines.size() > kMaxLines) return std::nullopt;
  return merged;
}

}  // namespace foundry::codegen
