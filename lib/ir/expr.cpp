// Symbolic index expressions: canonicalizing constructors, range-aware simplification, bounds,
// printing. Nodes are immutable and shared; every constructor returns a canonical form, so
// equality is structural and cheap (hash first).
#include "foundry/ir/expr.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <span>
#include <string_view>
#include <unordered_map>

#include "foundry/support/error.h"

namespace foundry::ir {

class ExprNode {
 public:
  Expr::Kind kind = Expr::Kind::Const;
  int64_t value = 0;  // Const: the value; Mul: the constant coefficient (1 when there is none)
  std::string name;   // Sym
  std::vector<Expr> ops;
  // Mul with a coefficient != 1: the product of the other factors (an atom or a coefficient-free
  // Mul), so that splitting a term into coefficient * monomial does not allocate.
  std::shared_ptr<const ExprNode> mono;
  size_t hash = 0;
};

namespace {

using Kind = Expr::Kind;
using NodePtr = std::shared_ptr<const ExprNode>;

// Distributing a product of sums beyond this many terms keeps the product unexpanded instead.
constexpr size_t kMaxExpandedTerms = 64;

// ---------------------------------------------------------------------------------------------
// Integer helpers (Python floor semantics; overflow is a broken invariant, not wraparound).

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  FOUNDRY_CHECK(!__builtin_add_overflow(a, b, &r), "index expression overflows int64");
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  FOUNDRY_CHECK(!__builtin_mul_overflow(a, b, &r), "index expression overflows int64");
  return r;
}

int64_t py_floordiv(int64_t a, int64_t b) {
  FOUNDRY_CHECK(b != 0, "division by zero in index expression");
  FOUNDRY_CHECK(!(a == INT64_MIN && b == -1), "index expression overflows int64");
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  FOUNDRY_CHECK(b != 0, "modulo by zero in index expression");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Interval arithmetic on optional ends: nullopt means unbounded (or overflowed).
using Opt = std::optional<int64_t>;

Opt opt_add(Opt a, Opt b) {
  int64_t r;
  if (!a || !b || __builtin_add_overflow(*a, *b, &r)) return std::nullopt;
  return r;
}

Opt opt_mul(Opt a, Opt b) {
  int64_t r;
  if (!a || !b || __builtin_mul_overflow(*a, *b, &r)) return std::nullopt;
  return r;
}

Opt opt_neg(Opt a) {
  if (!a || *a == INT64_MIN) return std::nullopt;
  return -*a;
}

// ---------------------------------------------------------------------------------------------
// Node construction.

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

Expr make_node(Kind kind, int64_t value, std::string name, std::vector<Expr> ops,
               NodePtr mono = nullptr) {
  auto n = std::make_shared<ExprNode>();
  uint64_t h = mix(static_cast<uint64_t>(kind) + 1, static_cast<uint64_t>(value));
  if (!name.empty()) h = mix(h, fnv1a(name));
  for (const Expr& op : ops) h = mix(h, op.hash());
  n->kind = kind;
  n->value = value;
  n->name = std::move(name);
  n->ops = std::move(ops);
  n->mono = std::move(mono);
  n->hash = static_cast<size_t>(h);
  return Expr(NodePtr(std::move(n)));
}

// Small constants are shared: lowering creates a great many 0s and 1s.
constexpr int64_t kMinCached = -16, kMaxCached = 128;

Expr make_const(int64_t v) {
  static const std::vector<Expr> cache = [] {
    std::vector<Expr> c;
    for (int64_t i = kMinCached; i <= kMaxCached; ++i) c.push_back(make_node(Kind::Const, i, "", {}));
    return c;
  }();
  if (v >= kMinCached && v <= kMaxCached) return cache[v - kMinCached];
  return make_node(Kind::Const, v, "", {});
}

Expr binary(Kind kind, const Expr& a, const Expr& b) { return make_node(kind, 0, "", {a, b}); }

// A non-constant term of a sum, split as coeff * mono (mono: an atom or a coefficient-free Mul).
struct Term {
  int64_t coeff;
  Expr mono;
  NodePtr whole = nullptr;  // the term's own node when taken from an expression: reused if unchanged
};

Term term_of(const Expr& e) {
  const ExprNode* n = e.node_ptr();
  if (n->kind == Kind::Mul && n->value != 1) return {n->value, Expr(n->mono), e.node()};
  return {1, e, e.node()};
}

// The factors of a monomial; for an atom, the atom itself (so `mono` must outlive the span).
std::span<const Expr> factors_of(const Expr& mono) {
  if (mono.kind() == Kind::Mul) return mono.operands();
  return {&mono, 1};
}

// coeff * (product of sorted non-constant factors).
Expr make_mul(int64_t coeff, std::vector<Expr> factors) {
  if (coeff == 0) return make_const(0);
  NodePtr mono = factors.size() == 1 ? factors[0].node()
                                     : make_node(Kind::Mul, 1, "", factors).node();
  if (coeff == 1) return Expr(mono);
  std::vector<Expr> ops{make_const(coeff)};
  ops.insert(ops.end(), factors.begin(), factors.end());
  return make_node(Kind::Mul, coeff, "", std::move(ops), std::move(mono));
}

Expr make_term(int64_t coeff, const Expr& mono) {
  if (coeff == 0) return make_const(0);
  if (coeff == 1) return mono;
  std::vector<Expr> ops{make_const(coeff)};
  for (const Expr& f : factors_of(mono)) ops.push_back(f);
  return make_node(Kind::Mul, coeff, "", std::move(ops), mono.node());
}

bool is_dynamic_size_name(const std::string& name) {
  return name.size() >= 2 && name[0] == 's' &&
         std::all_of(name.begin() + 1, name.end(), [](char c) { return std::isdigit(c); });
}

// ---------------------------------------------------------------------------------------------
// The total order. Deterministic: compares content only, never addresses.

int sign(int64_t v) { return (v > 0) - (v < 0); }

// Natural order of names: prefix, then the trailing number by value (i2 < i10), then the text.
int natural_cmp(const std::string& a, const std::string& b) {
  auto digits_start = [](const std::string& s) {
    size_t i = s.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1]))) --i;
    return i;
  };
  size_t ia = digits_start(a), ib = digits_start(b);
  if (int c = std::string_view(a).substr(0, ia).compare(std::string_view(b).substr(0, ib))) return sign(c);
  auto number = [](std::string_view d) {
    size_t z = d.find_first_not_of('0');
    return z == std::string_view::npos ? std::string_view() : d.substr(z);
  };
  std::string_view na = number(std::string_view(a).substr(ia)), nb = number(std::string_view(b).substr(ib));
  if (na.size() != nb.size()) return na.size() < nb.size() ? -1 : 1;
  if (int c = na.compare(nb)) return sign(c);
  return sign(a.compare(b));
}

int kind_rank(Kind k) {
  switch (k) {
    case Kind::Const: return 0;
    case Kind::Sym: return 1;
    case Kind::FloorDiv: return 2;
    case Kind::Mod: return 3;
    case Kind::Min: return 4;
    case Kind::Max: return 5;
    case Kind::Add: return 6;
    case Kind::Mul: return 7;
  }
  return 8;
}

int cmp(const Expr& a, const Expr& b);

template <class ElemCmp>
int cmp_seq(std::span<const Expr> a, std::span<const Expr> b, ElemCmp elem) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (int c = elem(a[i], b[i])) return c;
  return sign(static_cast<int64_t>(a.size()) - static_cast<int64_t>(b.size()));
}

// Atoms: anything that is not a constant or a product.
int cmp_atom(const Expr& x, const Expr& y) {
  if (x.node_ptr() == y.node_ptr()) return 0;
  if (int c = kind_rank(x.kind()) - kind_rank(y.kind())) return sign(c);
  if (x.kind() == Kind::Sym) return natural_cmp(x.sym_name(), y.sym_name());
  return cmp_seq(x.operands(), y.operands(), cmp);
}

// A non-constant term's factors without its coefficient, as a view (no refcounting: this is
// the innermost loop of sorting).
std::span<const Expr> term_factors(const Expr& e) {
  const ExprNode* n = e.node_ptr();
  if (n->kind != Kind::Mul) return {&e, 1};
  return std::span<const Expr>(n->ops).subspan(n->value != 1 ? 1 : 0);
}

int64_t term_coeff(const Expr& e) { return e.kind() == Kind::Mul ? e.node_ptr()->value : 1; }

// Constants first; otherwise by monomial (factor lists), then coefficient. So a sum reads
// `i0 + 64*i1`, `i0*s0 + i1`, `i1 + 8*(i1 // 8)`.
int cmp(const Expr& a, const Expr& b) {
  if (a.node_ptr() == b.node_ptr()) return 0;
  bool ac = a.is_const(), bc = b.is_const();
  if (ac && bc) return sign((a.const_value() > b.const_value()) - (a.const_value() < b.const_value()));
  if (ac || bc) return ac ? -1 : 1;
  if (int c = cmp_seq(term_factors(a), term_factors(b), cmp_atom)) return c;
  int64_t ca = term_coeff(a), cb = term_coeff(b);
  return (ca > cb) - (ca < cb);
}

bool deep_equal(const ExprNode* a, const ExprNode* b) {
  if (a == b) return true;
  if (a->hash != b->hash || a->kind != b->kind || a->value != b->value || a->name != b->name ||
      a->ops.size() != b->ops.size())
    return false;
  for (size_t i = 0; i < a->ops.size(); ++i)
    if (!deep_equal(a->ops[i].node_ptr(), b->ops[i].node_ptr())) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Sums.

// A sum taken apart: non-constant terms and the constant.
struct Linear {
  std::vector<Term> terms;
  int64_t constant = 0;
};

void collect(const Expr& e, Linear& out) {
  switch (e.kind()) {
    case Kind::Const: out.constant = checked_add(out.constant, e.const_value()); return;
    case Kind::Add:
      for (const Expr& op : e.operands()) collect(op, out);
      return;
    default: out.terms.push_back(term_of(e));
  }
}

Linear linear_of(const Expr& e) {
  Linear l;
  collect(e, l);
  return l;
}

std::optional<Expr> recombine_div_mod(const Linear& l);

// Sorts and merges like terms, then builds the canonical sum.
Expr build_sum(Linear l) {
  auto& t = l.terms;
  std::sort(t.begin(), t.end(), [](const Term& x, const Term& y) { return cmp(x.mono, y.mono) < 0; });
  size_t out = 0;
  for (size_t i = 0; i < t.size();) {
    Term merged = t[i];
    size_t j = i + 1;
    for (; j < t.size() && cmp(t[j].mono, merged.mono) == 0; ++j) {
      merged.coeff = checked_add(merged.coeff, t[j].coeff);
      merged.whole = nullptr;
    }
    if (merged.coeff != 0) t[out++] = merged;
    i = j;
  }
  t.resize(out);
  if (auto r = recombine_div_mod(l)) return *r;
  if (t.empty()) return make_const(l.constant);
  if (t.size() == 1 && l.constant == 0) return t[0].whole ? Expr(t[0].whole) : make_term(t[0].coeff, t[0].mono);
  std::vector<Expr> ops;
  ops.reserve(t.size() + 1);
  for (const Term& term : t) ops.push_back(term.whole ? Expr(term.whole) : make_term(term.coeff, term.mono));
  if (l.constant != 0) ops.push_back(make_const(l.constant));
  return make_node(Kind::Add, 0, "", std::move(ops));
}

Expr add_all(const std::vector<Expr>& parts) {
  Linear l;
  for (const Expr& p : parts) collect(p, l);
  return build_sum(std::move(l));
}

// k * e without re-sorting: scaling keeps the order of a sum's terms.
Expr scale(int64_t k, const Expr& e) {
  if (k == 0) return make_const(0);
  if (k == 1) return e;
  switch (e.kind()) {
    case Kind::Const: return make_const(checked_mul(k, e.const_value()));
    case Kind::Add: {
      std::vector<Expr> ops;
      for (const Expr& op : e.operands()) ops.push_back(scale(k, op));
      return make_node(Kind::Add, 0, "", std::move(ops));
    }
    default: {
      Term t = term_of(e);
      return make_term(checked_mul(k, t.coeff), t.mono);
    }
  }
}

// b*m*(x // m) + b*(x % m) -> b*x: reshape round trips produce exactly this pair. The floordiv
// partner is built with the same constructor the producer used, so equal meaning matches.
std::optional<Expr> recombine_div_mod(const Linear& l) {
  // Cheap test first: sums are built constantly, pairs of // and % terms are rare.
  auto has_factor = [&](Kind k) {
    return std::any_of(l.terms.begin(), l.terms.end(), [&](const Term& t) {
      auto fs = factors_of(t.mono);
      return std::any_of(fs.begin(), fs.end(), [&](const Expr& f) { return f.kind() == k; });
    });
  };
  if (l.terms.size() < 2 || !has_factor(Kind::Mod) || !has_factor(Kind::FloorDiv)) return std::nullopt;
  for (size_t i = 0; i < l.terms.size(); ++i) {
    const Term& mt = l.terms[i];
    if (mt.mono.kind() != Kind::Mod) continue;
    const Expr& x = mt.mono.operands()[0];
    const Expr& m = mt.mono.operands()[1];
    Expr partner = scale(mt.coeff, m * floordiv(x, m));
    if (partner.is_const() || partner.kind() == Kind::Add) continue;
    Term pt = term_of(partner);
    for (size_t j = 0; j < l.terms.size(); ++j) {
      if (j == i || l.terms[j].coeff != pt.coeff || cmp(l.terms[j].mono, pt.mono) != 0) continue;
      std::vector<Expr> parts{make_const(l.constant), scale(mt.coeff, x)};
      for (size_t k = 0; k < l.terms.size(); ++k)
        if (k != i && k != j) parts.push_back(make_term(l.terms[k].coeff, l.terms[k].mono));
      return add_all(parts);
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Bounds. Interval arithmetic over SymbolExtents; used by both simplify (with extents) and the
// constructors (with none: only constants, dynamic sizes and mod ranges are known then).

struct Interval {
  Opt lo, hi;
};

const SymbolExtents& no_extents() {
  static const SymbolExtents empty;
  return empty;
}

Interval interval(const Expr& e, const SymbolExtents& ext, int depth = 0);

Interval iv_mul(Interval a, Interval b) {
  auto empty = [](const Interval& x) { return x.lo && x.hi && *x.lo > *x.hi; };
  if (empty(a) || empty(b)) return {};  // a zero extent: nothing is evaluated, nothing known
  auto point = [](const Interval& x) { return x.lo && x.hi && *x.lo == *x.hi; };
  if (point(b)) std::swap(a, b);
  if (point(a)) {
    int64_t k = *a.lo;
    if (k == 0) return {0, 0};
    return k > 0 ? Interval{opt_mul(k, b.lo), opt_mul(k, b.hi)} : Interval{opt_mul(k, b.hi), opt_mul(k, b.lo)};
  }
  // Sign-definite operands (common with unbounded ends): reduce to nonnegative * nonnegative.
  auto nonneg = [](const Interval& x) { return x.lo && *x.lo >= 0; };
  auto nonpos = [](const Interval& x) { return x.hi && *x.hi <= 0; };
  auto neg = [](const Interval& x) { return Interval{opt_neg(x.hi), opt_neg(x.lo)}; };
  if (nonpos(a) && (nonneg(b) || nonpos(b))) return neg(iv_mul(neg(a), b));
  if (nonpos(b) && nonneg(a)) return neg(iv_mul(a, neg(b)));
  if (nonneg(a) && nonneg(b)) return {opt_mul(a.lo, b.lo), opt_mul(a.hi, b.hi)};
  if (a.lo && a.hi && b.lo && b.hi) {
    Opt c[4] = {opt_mul(a.lo, b.lo), opt_mul(a.lo, b.hi), opt_mul(a.hi, b.lo), opt_mul(a.hi, b.hi)};
    if (std::any_of(c, c + 4, [](Opt v) { return !v; })) return {};
    return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
  }
  return {};
}

Interval iv_floordiv(Interval x, Interval d) {
  if (d.hi && *d.hi <= -1) {  // x // d == (-x) // (-d)
    return iv_floordiv({opt_neg(x.hi), opt_neg(x.lo)}, {opt_neg(d.hi), opt_neg(d.lo)});
  }
  if (!d.lo || *d.lo < 1) return {};
  Interval r;
  if (x.lo) r.lo = *x.lo >= 0 ? (d.hi ? py_floordiv(*x.lo, *d.hi) : 0) : py_floordiv(*x.lo, *d.lo);
  if (x.hi) r.hi = *x.hi >= 0 ? py_floordiv(*x.hi, *d.lo) : (d.hi ? py_floordiv(*x.hi, *d.hi) : -1);
  return r;
}

Interval iv_mod(Interval x, Interval d) {
  if (d.hi && *d.hi <= -1) return {opt_add(d.lo, 1), 0};
  if (!d.lo || *d.lo < 1) return {};
  bool x_nonneg = x.lo && *x.lo >= 0;
  if (x_nonneg && x.hi && *x.hi < *d.lo) return x;  // always below the modulus: unchanged
  Opt hi = d.hi ? opt_add(d.hi, -1) : std::nullopt;
  if (x_nonneg && x.hi) hi = hi ? std::min(*hi, *x.hi) : *x.hi;
  return {0, hi};
}

Opt opt_min(Opt a, Opt b, bool need_both) {
  if (a && b) return std::min(*a, *b);
  return need_both ? std::nullopt : (a ? a : b);
}

Opt opt_max(Opt a, Opt b, bool need_both) {
  if (a && b) return std::max(*a, *b);
  return need_both ? std::nullopt : (a ? a : b);
}

Interval interval(const Expr& e, const SymbolExtents& ext, int depth) {
  if (depth > 64) return {};  // an extent that refers back to itself
  auto sub = [&](const Expr& x) { return interval(x, ext, depth + 1); };
  const auto& ops = e.operands();
  switch (e.kind()) {
    case Kind::Const: return {e.const_value(), e.const_value()};
    case Kind::Sym: {
      auto it = ext.find(e.sym_name());
      if (it != ext.end()) return {0, opt_add(sub(it->second).hi, -1)};
      if (is_dynamic_size_name(e.sym_name())) return {1, std::nullopt};
      return {};
    }
    case Kind::Add: {
      Interval r{0, 0};
      for (const Expr& op : ops) {
        Interval t = sub(op);
        r = {opt_add(r.lo, t.lo), opt_add(r.hi, t.hi)};
        if (!r.lo && !r.hi) break;
      }
      return r;
    }
    case Kind::Mul: {
      Interval r{1, 1};
      for (const Expr& op : ops) r = iv_mul(r, sub(op));
      return r;
    }
    case Kind::FloorDiv: return iv_floordiv(sub(ops[0]), sub(ops[1]));
    case Kind::Mod: return iv_mod(sub(ops[0]), sub(ops[1]));
    case Kind::Min: {
      Interval a = sub(ops[0]), b = sub(ops[1]);
      return {opt_min(a.lo, b.lo, true), opt_min(a.hi, b.hi, false)};
    }
    case Kind::Max: {
      Interval a = sub(ops[0]), b = sub(ops[1]);
      return {opt_max(a.lo, b.lo, false), opt_max(a.hi, b.hi, true)};
    }
  }
  return {};
}

bool known_nonneg(const Expr& e, const SymbolExtents& ext) {
  Opt lo = interval(e, ext).lo;
  return lo && *lo >= 0;
}

bool known_positive(const Expr& e, const SymbolExtents& ext) {
  Opt lo = interval(e, ext).lo;
  return lo && *lo >= 1;
}

// Symbolic bounds: an expression U (or L) with e <= U (e >= L) at every point of the iteration
// space, with loop symbols replaced by 0 or extent-1. Interval arithmetic loses the relation
// between i1 < s0 and s0; these keep it, so s0 - 1 - i1 >= 0 is provable.
std::optional<Expr> sym_bound(const Expr& e, bool upper, const SymbolExtents& ext);

std::optional<Expr> mono_bound(const Expr& mono, bool upper, const SymbolExtents& ext) {
  std::span<const Expr> fs = factors_of(mono);
  if (fs.size() == 1) return sym_bound(fs[0], upper, ext);
  // For a product, bounds multiply only when every factor is nonnegative.
  for (const Expr& f : fs)
    if (!known_nonneg(f, ext)) return std::nullopt;
  Expr product = make_const(1);
  for (const Expr& f : fs) {
    auto b = sym_bound(f, upper, ext);
    if (!upper && (!b || !known_nonneg(*b, ext))) return make_const(0);
    if (!b) return std::nullopt;
    product = product * *b;
  }
  return product;
}

std::optional<Expr> sym_bound(const Expr& e, bool upper, const SymbolExtents& ext) {
  const auto& ops = e.operands();
  auto bound = [&](const Expr& x, bool up) { return sym_bound(x, up, ext); };
  switch (e.kind()) {
    case Kind::Const: return e;
    case Kind::Sym: {
      auto it = ext.find(e.sym_name());
      if (it == ext.end()) return e;
      return upper ? it->second - 1 : make_const(0);
    }
    case Kind::Add: {
      std::vector<Expr> parts;
      for (const Expr& op : ops) {
        auto b = bound(op, upper);
        if (!b) return std::nullopt;
        parts.push_back(*b);
      }
      return add_all(parts);
    }
    case Kind::Mul: {
      Term t = term_of(e);
      auto b = mono_bound(t.mono, t.coeff > 0 ? upper : !upper, ext);
      if (!b) return std::nullopt;
      return scale(t.coeff, *b);
    }
    case Kind::FloorDiv: {  // monotone in the dividend for a positive divisor
      if (!known_positive(ops[1], ext)) return std::nullopt;
      auto b = bound(ops[0], upper);
      if (!b) return std::nullopt;
      return floordiv(*b, ops[1]);
    }
    case Kind::Mod: {
      if (!known_positive(ops[1], ext)) return std::nullopt;
      if (!upper) return make_const(0);
      Expr top = ops[1] - 1;
      if (!known_nonneg(ops[0], ext)) return top;
      auto b = bound(ops[0], true);
      return b ? min(*b, top) : top;
    }
    case Kind::Min:
    case Kind::Max: {
      auto a = bound(ops[0], upper), b = bound(ops[1], upper);
      bool is_min = e.kind() == Kind::Min;
      if (a && b) return is_min ? min(*a, *b) : max(*a, *b);
      // min <= either operand's upper bound; max >= either operand's lower bound.
      if (upper == is_min) return a ? a : b;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

bool prove_nonneg(const Expr& e, const SymbolExtents& ext) {
  if (known_nonneg(e, ext)) return true;
  auto lb = sym_bound(e, false, ext);
  return lb && known_nonneg(*lb, ext);
}

bool prove_le(const Expr& a, const Expr& b, const SymbolExtents& ext) {
  return prove_nonneg(b - a, ext);
}

// 0 <= x < d.
bool prove_in_range(const Expr& x, const Expr& d, const SymbolExtents& ext) {
  return prove_nonneg(x, ext) && prove_nonneg(d - x - 1, ext);
}

// ---------------------------------------------------------------------------------------------
// Floor division and modulo.

// a = divisor * quotient + remainder, termwise.
struct Split {
  Linear quotient, remainder;
  bool any_quotient() const { return !quotient.terms.empty() || quotient.constant != 0; }
};

// Multiples of c go to the quotient. Positive coefficients are reduced below c (6*x -> 4*x + 2*x)
// and the constant into [0, c), consistently for // and %, so that the recombination rule sees
// the same remainder. Negative coefficients stay whole: (7 - i0) // 4 is easier to bound than
// (3*i0 + 3) // 4 - i0.
Split split_by_const(const Expr& a, int64_t c) {
  Linear l = linear_of(a);
  Split s;
  for (const Term& t : l.terms) {
    if (t.coeff % c == 0 || t.coeff > 0) {
      if (t.coeff / c != 0) s.quotient.terms.push_back({t.coeff / c, t.mono});
      if (t.coeff % c != 0) s.remainder.terms.push_back(t.coeff / c == 0 ? t : Term{t.coeff % c, t.mono});
    } else {
      s.remainder.terms.push_back(t);
    }
  }
  s.quotient.constant = py_floordiv(l.constant, c);
  s.remainder.constant = py_mod(l.constant, c);
  return s;
}

// Exact quotient of term t by the monomial term d (coefficient and factor multiset).
std::optional<Expr> divide_term(const Term& t, const Term& d) {
  if (t.coeff % d.coeff != 0) return std::nullopt;
  std::span<const Expr> tf = factors_of(t.mono), df = factors_of(d.mono);
  std::vector<Expr> rest;
  size_t j = 0;
  for (const Expr& f : tf) {
    if (j < df.size() && cmp_atom(f, df[j]) == 0) ++j;
    else rest.push_back(f);
  }
  if (j != df.size()) return std::nullopt;
  if (rest.empty()) return make_const(t.coeff / d.coeff);
  return make_mul(t.coeff / d.coeff, std::move(rest));
}

// Terms that are multiples of the symbolic monomial b go to the quotient.
Split split_by_term(const Expr& a, const Expr& b) {
  Linear l = linear_of(a);
  Split s;
  s.remainder.constant = l.constant;
  if (b.kind() == Kind::Add) {
    s.remainder.terms = l.terms;
    return s;
  }
  Term d = term_of(b);
  for (const Term& t : l.terms) {
    if (auto q = divide_term(t, d)) collect(*q, s.quotient);
    else s.remainder.terms.push_back(t);
  }
  return s;
}

int64_t content_gcd(const Linear& l, int64_t c) {
  int64_t g = std::gcd(c, l.constant);
  for (const Term& t : l.terms) g = std::gcd(g, t.coeff);
  return g;
}

Linear divide_exact(Linear l, int64_t g) {
  for (Term& t : l.terms) t = {t.coeff / g, t.mono};
  l.constant /= g;
  return l;
}

// d / b when both are positive and b divides d (constants, or monomials like 2*s0*s1 / s1).
std::optional<Expr> positive_quotient(const Expr& d, const Expr& b) {
  if (d.kind() == Kind::Add || b.kind() == Kind::Add) return std::nullopt;
  if (!known_positive(d, no_extents()) || !known_positive(b, no_extents())) return std::nullopt;
  if (b.is_const()) {
    if (d.is_const()) return d.const_value() % b.const_value() == 0 ? std::optional(make_const(d.const_value() / b.const_value())) : std::nullopt;
    Term t = term_of(d);
    if (t.coeff % b.const_value() != 0) return std::nullopt;
    return make_term(t.coeff / b.const_value(), t.mono);
  }
  if (d.is_const()) return std::nullopt;
  return divide_term(term_of(d), term_of(b));
}

// (A + y // c) // d -> (A*c + y) // (c*d) for positive c and d: floor((A + floor(y/c))/d) equals
// floor(floor((A*c + y)/c)/d). Reshape chains produce both spellings, e.g. (2*i0 + i1 // 4) // 3
// and (8*i0 + i1) // 12; this picks the second. Only for a single such term of coefficient 1.
std::optional<Expr> pull_in_floordiv(const Expr& a, const Expr& d) {
  if (a.kind() != Kind::Add || !known_positive(d, no_extents())) return std::nullopt;
  const Expr* inner = nullptr;
  std::vector<Expr> rest;
  for (const Expr& t : a.operands()) {
    bool candidate = t.kind() == Kind::FloorDiv && known_positive(t.operands()[1], no_extents());
    if (candidate && inner) return std::nullopt;
    if (candidate) inner = &t;
    else rest.push_back(t);
  }
  if (!inner) return std::nullopt;
  const Expr& y = inner->operands()[0];
  const Expr& c = inner->operands()[1];
  return floordiv(add_all(rest) * c + y, c * d);
}

Expr floordiv_by_const(const Expr& a, int64_t c) {
  Split s = split_by_const(a, c);
  if (s.any_quotient()) return build_sum(std::move(s.quotient)) + floordiv(build_sum(std::move(s.remainder)), c);
  if (int64_t g = content_gcd(s.remainder, c); g > 1)
    return floordiv(build_sum(divide_exact(std::move(s.remainder), g)), c / g);
  if (auto r = pull_in_floordiv(a, make_const(c))) return *r;
  Interval iv = interval(a, no_extents());
  if (iv.lo && iv.hi && py_floordiv(*iv.lo, c) == py_floordiv(*iv.hi, c))
    return make_const(py_floordiv(*iv.lo, c));
  return binary(Kind::FloorDiv, a, make_const(c));
}

Expr mod_by_const(const Expr& a, int64_t c) {
  if (a.kind() == Kind::Mod && a.operands()[1].is_const()) {
    int64_t m = a.operands()[1].const_value();
    if (m > 0 && m <= c) return a;  // (x % 4) % 8 -> x % 4
  }
  Split s = split_by_const(a, c);
  if (s.any_quotient()) return mod(build_sum(std::move(s.remainder)), c);
  if (int64_t g = content_gcd(s.remainder, c); g > 1)
    return scale(g, mod(build_sum(divide_exact(std::move(s.remainder), g)), c / g));
  Interval iv = interval(a, no_extents());
  if (iv.lo && iv.hi && py_floordiv(*iv.lo, c) == py_floordiv(*iv.hi, c))
    return a - checked_mul(c, py_floordiv(*iv.lo, c));
  return binary(Kind::Mod, a, make_const(c));
}

// Orders min/max operands: non-constants first (min(i0, 3)), then the canonical order.
std::pair<Expr, Expr> ordered(const Expr& a, const Expr& b) {
  if (a.is_const() != b.is_const()) return a.is_const() ? std::pair{b, a} : std::pair{a, b};
  return cmp(a, b) <= 0 ? std::pair{a, b} : std::pair{b, a};
}

// min (or max) when the order of a and b is known without extents.
std::optional<Expr> pick_extreme(const Expr& a, const Expr& b, bool want_min) {
  if (a == b) return a;
  Expr diff = b - a;
  bool a_le_b, b_le_a;
  if (diff.is_const()) {
    a_le_b = diff.const_value() >= 0;
    b_le_a = !a_le_b;
  } else {
    Interval ia = interval(a, no_extents()), ib = interval(b, no_extents());
    a_le_b = ia.hi && ib.lo && *ia.hi <= *ib.lo;
    b_le_a = ib.hi && ia.lo && *ib.hi <= *ia.lo;
  }
  if (a_le_b) return want_min ? a : b;
  if (b_le_a) return want_min ? b : a;
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Range-aware simplification.

// The greatest common divisor of two terms: gcd of the coefficients times the common factors.
Term common_divisor(const Term& a, const Term& b) {
  std::span<const Expr> fa = factors_of(a.mono), fb = factors_of(b.mono);
  std::vector<Expr> shared;
  std::set_intersection(fa.begin(), fa.end(), fb.begin(), fb.end(), std::back_inserter(shared),
                        [](const Expr& x, const Expr& y) { return cmp_atom(x, y) < 0; });
  int64_t g = std::gcd(a.coeff, b.coeff);
  return {g, shared.empty() ? make_const(1) : make_mul(1, std::move(shared))};
}

// Terms here may have a constant 1 as mono (a plain number); these helpers accept that.
Expr term_expr(const Term& t) { return t.mono.is_const() ? make_const(t.coeff) : make_term(t.coeff, t.mono); }

std::optional<Expr> divide_by(const Term& t, const Term& g) {
  if (g.mono.is_const()) {
    if (t.coeff % g.coeff != 0) return std::nullopt;
    return term_expr({t.coeff / g.coeff, t.mono});
  }
  if (t.mono.is_const()) return std::nullopt;
  return divide_term(t, g);
}

// (g*y + r) // (g*k) -> y // k and (g*y + r) % (g*k) -> g*(y % k) + r when 0 <= r < g, for a
// divisor g shared by some terms and the divisor. E.g. (4*i0 + i1) // 8 -> i0 // 2 for
// 0 <= i1 < 4, and (i0*s1 + i1) // (2*s1) -> i0 // 2 for 0 <= i1 < s1. Needs k > 0.
std::optional<Expr> drop_small_remainder(const Expr& x, const Expr& d, bool is_mod,
                                         const SymbolExtents& ext) {
  if (d.kind() == Kind::Add || !known_positive(d, ext)) return std::nullopt;
  Linear l = linear_of(x);
  // A constant divisor is the term c*1; keep `mono` a constant 1 so common_divisor works.
  Term dt = d.is_const() ? Term{d.const_value(), make_const(1)} : term_of(d);
  std::vector<Term> gs;
  for (const Term& t : l.terms) {
    Term g = common_divisor(t, dt);
    bool trivial = g.coeff == 1 && g.mono.is_const();
    bool whole = g.coeff == dt.coeff && g.mono == dt.mono;
    if (trivial || whole) continue;
    if (std::none_of(gs.begin(), gs.end(), [&](const Term& o) { return o.coeff == g.coeff && o.mono == g.mono; }))
      gs.push_back(g);
  }
  for (const Term& g : gs) {
    Expr gexpr = term_expr(g);
    Linear big, small;
    for (const Term& t : l.terms) {
      if (auto q = divide_by(t, g)) collect(*q, big);
      else
        small.terms.push_back(t);
    }
    if (g.mono.is_const()) {
      big.constant = py_floordiv(l.constant, g.coeff);
      small.constant = py_mod(l.constant, g.coeff);
    } else {
      small.constant = l.constant;
    }
    Expr r = build_sum(small);
    if (!prove_in_range(r, gexpr, ext)) continue;
    Expr y = build_sum(big);
    Expr k = *divide_by(dt, g);  // g divides d by construction
    return is_mod ? gexpr * mod(y, k) + r : floordiv(y, k);
  }
  return std::nullopt;
}

class Simplifier {
 public:
  explicit Simplifier(const SymbolExtents& ext) : ext_(ext) {}

  Expr run(const Expr& e) {
    if (e.kind() == Kind::Sym) {  // a loop over a size-1 dim only ever sees 0
      auto it = ext_.find(e.sym_name());
      return it != ext_.end() && it->second.is_const(1) ? make_const(0) : e;
    }
    if (e.kind() == Kind::Const) return e;
    if (auto it = memo_.find(e.node_ptr()); it != memo_.end()) return it->second.second;
    std::vector<Expr> ops;
    ops.reserve(e.operands().size());
    for (const Expr& op : e.operands()) ops.push_back(run(op));
    Expr out = refine(rebuild(e.kind(), ops));
    // Keys are kept alive in the map so a freed node's address cannot alias a new one.
    memo_.emplace(e.node_ptr(), std::pair{e, out});
    memo_.emplace(out.node_ptr(), std::pair{out, out});
    return out;
  }

 private:
  static Expr rebuild(Kind kind, const std::vector<Expr>& ops) {
    switch (kind) {
      case Kind::Add: return add_all(ops);
      case Kind::Mul: {
        Expr p = make_const(1);
        for (const Expr& op : ops) p = p * op;
        return p;
      }
      case Kind::FloorDiv: return floordiv(ops[0], ops[1]);
      case Kind::Mod: return mod(ops[0], ops[1]);
      case Kind::Min: return min(ops[0], ops[1]);
      case Kind::Max: return max(ops[0], ops[1]);
      default: return ops[0];
    }
  }

  // Constructors create new div/mod nodes (e.g. splitting (16*i0 + i1) // 8 into
  // 2*i0 + i1 // 8), so the range rules look one level into sums and products too.
  Expr refine(const Expr& e) {
    switch (e.kind()) {
      case Kind::FloorDiv:
      case Kind::Mod:
      case Kind::Min:
      case Kind::Max: {
        auto r = range_rule(e);
        return r ? run(*r) : e;
      }
      case Kind::Add:
      case Kind::Mul: {
        std::vector<Expr> ops;
        bool changed = false;
        for (const Expr& op : e.operands()) {
          ops.push_back(refine(op));
          changed |= ops.back().node_ptr() != op.node_ptr();
        }
        return changed ? rebuild(e.kind(), ops) : e;
      }
      default: return e;
    }
  }

  std::optional<Expr> range_rule(const Expr& e) {
    const Expr& a = e.operands()[0];
    const Expr& b = e.operands()[1];
    switch (e.kind()) {
      case Kind::FloorDiv:
      case Kind::Mod: return div_mod_rule(a, b, e.kind() == Kind::Mod);
      case Kind::Min:
        if (prove_le(a, b, ext_)) return a;
        if (prove_le(b, a, ext_)) return b;
        return std::nullopt;
      case Kind::Max:
        if (prove_le(a, b, ext_)) return b;
        if (prove_le(b, a, ext_)) return a;
        return std::nullopt;
      default: return std::nullopt;
    }
  }

  std::optional<Expr> div_mod_rule(const Expr& x, const Expr& d, bool is_mod) {
    if (d.is_const() && d.const_value() > 0) {
      int64_t c = d.const_value();
      Interval iv = interval(x, ext_);
      if (iv.lo && iv.hi && py_floordiv(*iv.lo, c) == py_floordiv(*iv.hi, c)) {
        int64_t k = py_floordiv(*iv.lo, c);
        return is_mod ? x - checked_mul(k, c) : make_const(k);
      }
      return drop_small_remainder(x, d, is_mod, ext_);
    }
    if (d.is_const()) return std::nullopt;
    if (prove_in_range(x, d, ext_)) return is_mod ? x : make_const(0);
    if (prove_in_range(x + d, d, ext_)) return is_mod ? x + d : make_const(-1);  // -d <= x < 0
    return drop_small_remainder(x, d, is_mod, ext_);
  }

  const SymbolExtents& ext_;
  std::unordered_map<const ExprNode*, std::pair<Expr, Expr>> memo_;
};

// ---------------------------------------------------------------------------------------------
// Printing.

std::string str(const Expr& e);

// Operands of // and %, and factors: parenthesized unless atomic.
std::string str_operand(const Expr& e) {
  bool atomic = e.kind() == Kind::Sym || e.kind() == Kind::Min || e.kind() == Kind::Max ||
                (e.is_const() && e.const_value() >= 0);
  return atomic ? str(e) : "(" + str(e) + ")";
}

std::string str_term(int64_t coeff, const Expr& mono) {
  std::string out = coeff == 1 ? "" : coeff == -1 ? "-" : std::to_string(coeff) + "*";
  bool first = true;
  for (const Expr& f : factors_of(mono)) {
    if (!first) out += "*";
    first = false;
    bool paren = f.kind() == Kind::Add || f.kind() == Kind::FloorDiv || f.kind() == Kind::Mod;
    out += paren ? "(" + str(f) + ")" : str(f);
  }
  return out;
}

std::string str(const Expr& e) {
  const auto& ops = e.operands();
  switch (e.kind()) {
    case Kind::Const: return std::to_string(e.const_value());
    case Kind::Sym: return e.sym_name();
    case Kind::Add: {
      std::string out = str(ops[0]);
      for (size_t i = 1; i < ops.size(); ++i) {
        if (ops[i].is_const()) {
          int64_t v = ops[i].const_value();
          out += v < 0 && v != INT64_MIN ? " - " + std::to_string(-v) : " + " + std::to_string(v);
          continue;
        }
        Term t = term_of(ops[i]);
        out += t.coeff < 0 && t.coeff != INT64_MIN ? " - " + str_term(-t.coeff, t.mono)
                                                   : " + " + str(ops[i]);
      }
      return out;
    }
    case Kind::Mul: {
      Term t = term_of(e);
      return str_term(t.coeff, t.mono);
    }
    case Kind::FloorDiv: return str_operand(ops[0]) + " // " + str_operand(ops[1]);
    case Kind::Mod: return str_operand(ops[0]) + " % " + str_operand(ops[1]);
    case Kind::Min: return "min(" + str(ops[0]) + ", " + str(ops[1]) + ")";
    case Kind::Max: return "max(" + str(ops[0]) + ", " + str(ops[1]) + ")";
  }
  return "?";
}

void collect_symbols(const Expr& e, std::set<std::string>& out) {
  if (e.kind() == Kind::Sym) out.insert(e.sym_name());
  for (const Expr& op : e.operands()) collect_symbols(op, out);
}

bool mentions(const Expr& e, const std::string& s) {
  if (e.kind() == Kind::Sym) return e.sym_name() == s;
  return std::any_of(e.operands().begin(), e.operands().end(),
                     [&](const Expr& op) { return mentions(op, s); });
}

}  // namespace

// -----------------------------------------------------------------------------------------------
// Public API.

Expr::Expr() : node_(make_const(0).node()) {}
Expr::Expr(int64_t c) : node_(make_const(c).node()) {}

Expr Expr::sym(const std::string& name) {
  FOUNDRY_CHECK(!name.empty(), "empty symbol name");
  return make_node(Kind::Sym, 0, name, {});
}

Expr::Kind Expr::kind() const { return node_->kind; }
bool Expr::is_const(int64_t v) const { return node_->kind == Kind::Const && node_->value == v; }

int64_t Expr::const_value() const {
  FOUNDRY_CHECK(is_const(), "const_value() of a non-constant expression");
  return node_->value;
}

const std::string& Expr::sym_name() const {
  FOUNDRY_CHECK(kind() == Kind::Sym, "sym_name() of a non-symbol expression");
  return node_->name;
}

const std::vector<Expr>& Expr::operands() const { return node_->ops; }
bool Expr::operator==(const Expr& o) const { return deep_equal(node_.get(), o.node_.get()); }
bool Expr::operator<(const Expr& o) const { return cmp(*this, o) < 0; }
size_t Expr::hash() const { return node_->hash; }

Expr operator+(const Expr& a, const Expr& b) {
  if (a.is_const() && b.is_const()) return make_const(checked_add(a.const_value(), b.const_value()));
  if (a.is_const(0)) return b;
  if (b.is_const(0)) return a;
  return add_all({a, b});
}

Expr operator-(const Expr& a) { return scale(-1, a); }
Expr operator-(const Expr& a, const Expr& b) { return a + scale(-1, b); }

Expr operator*(const Expr& a, const Expr& b) {
  if (a.is_const()) return scale(a.const_value(), b);
  if (b.is_const()) return scale(b.const_value(), a);
  if (a.kind() == Kind::Add || b.kind() == Kind::Add) {
    std::span<const Expr> xs = a.kind() == Kind::Add ? a.operands() : std::span<const Expr>(&a, 1);
    std::span<const Expr> ys = b.kind() == Kind::Add ? b.operands() : std::span<const Expr>(&b, 1);
    if (xs.size() * ys.size() <= kMaxExpandedTerms) {
      std::vector<Expr> parts;
      for (const Expr& x : xs)
        for (const Expr& y : ys) parts.push_back(x * y);
      return add_all(parts);
    }
  }
  Term ta = term_of(a), tb = term_of(b);
  std::span<const Expr> fa = factors_of(ta.mono), fb = factors_of(tb.mono);
  std::vector<Expr> factors;
  factors.reserve(fa.size() + fb.size());
  std::merge(fa.begin(), fa.end(), fb.begin(), fb.end(), std::back_inserter(factors),
             [](const Expr& x, const Expr& y) { return cmp_atom(x, y) < 0; });
  return make_mul(checked_mul(ta.coeff, tb.coeff), std::move(factors));
}

Expr floordiv(const Expr& a, const Expr& b) {
  // Only views of empty tensors divide by a zero size; their indices are never used at run time.
  if (b.is_const(0)) return Expr(0);
  if (a.is_const() && b.is_const()) return make_const(py_floordiv(a.const_value(), b.const_value()));
  if (b.is_const(1)) return a;
  if (b.is_const(-1)) return -a;
  if (a.is_const(0)) return a;
  if (a == b) return make_const(1);  // a divisor is never 0 where the index is evaluated
  if (b.is_const() && b.const_value() < 0) return floordiv(-a, make_const(-b.const_value()));
  // (x // d) // b -> x // (d*b) for positive d and b.
  if (a.kind() == Kind::FloorDiv && known_positive(a.operands()[1], no_extents()) &&
      known_positive(b, no_extents()))
    return floordiv(a.operands()[0], a.operands()[1] * b);
  // (x % (b*k)) // b -> (x // b) % k for positive b, k.
  if (a.kind() == Kind::Mod)
    if (auto k = positive_quotient(a.operands()[1], b)) return mod(floordiv(a.operands()[0], b), *k);
  if (b.is_const()) return floordiv_by_const(a, b.const_value());
  Split s = split_by_term(a, b);
  if (s.any_quotient()) return build_sum(std::move(s.quotient)) + floordiv(build_sum(std::move(s.remainder)), b);
  if (auto r = pull_in_floordiv(a, b)) return *r;
  return binary(Kind::FloorDiv, a, b);
}

Expr mod(const Expr& a, const Expr& b) {
  if (b.is_const(0)) return Expr(0);  // see floordiv
  if (a.is_const() && b.is_const()) return make_const(py_mod(a.const_value(), b.const_value()));
  if (b.is_const(1) || b.is_const(-1) || a.is_const(0) || a == b) return make_const(0);
  // Python: a % -c == -((-a) % c).
  if (b.is_const() && b.const_value() < 0) return -mod(-a, make_const(-b.const_value()));
  // (x % (b*k)) % b -> x % b for positive b, k.
  if (a.kind() == Kind::Mod && positive_quotient(a.operands()[1], b)) return mod(a.operands()[0], b);
  if (a.kind() == Kind::Mod && a.operands()[1] == b) return a;  // any sign
  if (b.is_const()) return mod_by_const(a, b.const_value());
  Split s = split_by_term(a, b);
  if (s.any_quotient()) return mod(build_sum(std::move(s.remainder)), b);
  return binary(Kind::Mod, a, b);
}

Expr min(const Expr& a, const Expr& b) {
  if (a.is_const() && b.is_const()) return make_const(std::min(a.const_value(), b.const_value()));
  if (auto r = pick_extreme(a, b, true)) return *r;
  auto [x, y] = ordered(a, b);
  return binary(Kind::Min, x, y);
}

Expr max(const Expr& a, const Expr& b) {
  if (a.is_const() && b.is_const()) return make_const(std::max(a.const_value(), b.const_value()));
  if (auto r = pick_extreme(a, b, false)) return *r;
  auto [x, y] = ordered(a, b);
  return binary(Kind::Max, x, y);
}

std::string to_string(const Expr& e) { return str(e); }

Expr simplify(const Expr& e, const SymbolExtents& extents) { return Simplifier(extents).run(e); }

std::optional<int64_t> lower_bound(const Expr& e, const SymbolExtents& extents) {
  Opt lo = interval(e, extents).lo;
  if (auto s = sym_bound(e, false, extents)) lo = opt_max(lo, interval(*s, extents).lo, false);
  return lo;
}

std::optional<int64_t> upper_bound(const Expr& e, const SymbolExtents& extents) {
  Opt hi = interval(e, extents).hi;
  if (auto s = sym_bound(e, true, extents)) hi = opt_min(hi, interval(*s, extents).hi, false);
  return hi;
}

Expr substitute(const Expr& e, const std::map<std::string, Expr>& replacements) {
  std::unordered_map<const ExprNode*, Expr> memo;  // nodes of e stay alive: keys cannot alias
  std::function<Expr(const Expr&)> go = [&](const Expr& x) -> Expr {
    if (x.kind() == Kind::Const) return x;
    if (x.kind() == Kind::Sym) {
      auto it = replacements.find(x.sym_name());
      return it == replacements.end() ? x : it->second;
    }
    if (auto it = memo.find(x.node_ptr()); it != memo.end()) return it->second;
    const auto& ops = x.operands();
    Expr out;
    switch (x.kind()) {
      case Kind::Add: {
        std::vector<Expr> parts;
        for (const Expr& op : ops) parts.push_back(go(op));
        out = add_all(parts);
        break;
      }
      case Kind::Mul: {
        out = make_const(1);
        for (const Expr& op : ops) out = out * go(op);
        break;
      }
      case Kind::FloorDiv: out = floordiv(go(ops[0]), go(ops[1])); break;
      case Kind::Mod: out = mod(go(ops[0]), go(ops[1])); break;
      case Kind::Min: out = min(go(ops[0]), go(ops[1])); break;
      case Kind::Max: out = max(go(ops[0]), go(ops[1])); break;
      default: out = x;
    }
    memo.emplace(x.node_ptr(), out);
    return out;
  };
  return go(e);
}

int64_t evaluate(const Expr& e, const std::function<int64_t(const std::string&)>& lookup) {
  const auto& ops = e.operands();
  auto ev = [&](const Expr& x) { return evaluate(x, lookup); };
  switch (e.kind()) {
    case Kind::Const: return e.const_value();
    case Kind::Sym: return lookup(e.sym_name());
    case Kind::Add: {
      int64_t s = 0;
      for (const Expr& op : ops) s = checked_add(s, ev(op));
      return s;
    }
    case Kind::Mul: {
      int64_t p = 1;
      for (const Expr& op : ops) p = checked_mul(p, ev(op));
      return p;
    }
    case Kind::FloorDiv: return py_floordiv(ev(ops[0]), ev(ops[1]));
    case Kind::Mod: return py_mod(ev(ops[0]), ev(ops[1]));
    case Kind::Min: return std::min(ev(ops[0]), ev(ops[1]));
    case Kind::Max: return std::max(ev(ops[0]), ev(ops[1]));
  }
  return 0;
}

bool is_size_symbol(const std::string& name) { return is_dynamic_size_name(name); }

std::set<std::string> free_symbols(const Expr& e) {
  std::set<std::string> out;
  collect_symbols(e, out);
  return out;
}

std::optional<Expr> affine_coefficient(const Expr& e, const std::string& symbol) {
  Linear l = linear_of(e);
  std::vector<Expr> coeff_parts;
  for (const Term& t : l.terms) {
    if (!mentions(t.mono, symbol)) continue;
    // The symbol must be exactly one factor; no other factor may mention it.
    std::vector<Expr> rest;
    int hits = 0;
    for (const Expr& f : factors_of(t.mono)) {
      if (f.kind() == Kind::Sym && f.sym_name() == symbol) ++hits;
      else if (mentions(f, symbol)) return std::nullopt;
      else rest.push_back(f);
    }
    if (hits != 1) return std::nullopt;
    coeff_parts.push_back(rest.empty() ? make_const(t.coeff) : make_mul(t.coeff, std::move(rest)));
  }
  return add_all(coeff_parts);
}

}  // namespace foundry::ir
