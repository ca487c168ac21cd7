// Symbolic integer index expressions: constants, symbols (loop variables, dynamic sizes, indirect
// indices), sums, products, floor-division, modulo, min and max, kept in a canonical simplified
// form so that two expressions that mean the same index usually compare equal.
//
// Canonical form (built by the constructors below, valid for all integer values):
//  - Add: nested sums flattened, like terms merged, zero terms dropped, terms sorted by their
//    coefficient-free part (see operator<), the constant term last.
//  - Mul: constant coefficient first (omitted when 1), other factors sorted; a product with a sum
//    is distributed (2*(a + b) -> 2*a + 2*b; (a + 1)*s0 -> a*s0 + s0) unless that would exceed
//    64 terms.
//  - FloorDiv/Mod: divisor positive when constant; terms of the dividend that are multiples of the
//    divisor are split off (positive coefficients are reduced below the divisor); common factors
//    cancelled; (a // b) // c -> a // (b*c); (a % (b*c)) // b -> (a // b) % c; and
//    c*(a // c) + a % c -> a inside sums.
// Symbols named `s<digits>` are dynamic sizes and are assumed >= 1 everywhere (constructors,
// simplify, bounds). All other symbols not listed in a SymbolExtents are unbounded integers.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace foundry::ir {

class ExprNode;

// A value type; cheap to copy (shared immutable node). Constructors simplify.
class Expr {
 public:
  enum class Kind { Const, Sym, Add, Mul, FloorDiv, Mod, Min, Max };

  Expr();                       // the constant 0
  Expr(int64_t c);              // implicit on purpose: `x * 4 + 1`
  static Expr sym(const std::string& name);

  Kind kind() const;
  bool is_const() const { return kind() == Kind::Const; }
  bool is_const(int64_t v) const;
  int64_t const_value() const;         // requires is_const()
  const std::string& sym_name() const;  // requires Kind::Sym
  // Add: terms (constant last); Mul: factors (constant coefficient first, when not 1);
  // FloorDiv/Mod/Min/Max: {a, b}; Const/Sym: empty.
  const std::vector<Expr>& operands() const;

  // Structural equality of the canonical forms, and a total order for use as map keys. The order
  // is deterministic (no pointers): constants first, then by the coefficient-free monomial
  // (factor lists compared left to right; symbols in natural order i0 < i1 < i2 < i10 < r0 < s0 <
  // tmp0, then //, %, min, max, sums), then by coefficient.
  bool operator==(const Expr& o) const;
  bool operator!=(const Expr& o) const { return !(*this == o); }
  bool operator<(const Expr& o) const;
  size_t hash() const;

  std::shared_ptr<const ExprNode> node() const { return node_; }
  const ExprNode* node_ptr() const { return node_.get(); }  // identity without a refcount bump
  explicit Expr(std::shared_ptr<const ExprNode> n) : node_(std::move(n)) {}

 private:
  std::shared_ptr<const ExprNode> node_;
};

Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator-(const Expr& a);
Expr operator*(const Expr& a, const Expr& b);
Expr floordiv(const Expr& a, const Expr& b);  // Python's //, rounds toward -inf
Expr mod(const Expr& a, const Expr& b);       // Python's %, sign of the divisor
Expr min(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);

// Text form, e.g. "i0 + 64*i1", "(i0 // 4) % 8", "min(i0, 3)". Stable: used in golden dumps.
std::string to_string(const Expr& e);

// Known value ranges of symbols: every symbol s in the map satisfies 0 <= s < extent. An extent may
// be symbolic (e.g. s0); it is then assumed >= 1 (an empty loop never evaluates its index).
using SymbolExtents = std::map<std::string, Expr>;

// Simplifies using symbol ranges, e.g. with 0 <= i0 < 4:  (i0 + 4*i1) // 4 -> i1,
// (i0 + 4*i1) % 4 -> i0, i0 // 4 -> 0. Constant-extent reasoning is exact; symbolic extents are
// used where the rule is provable. A symbol of extent 1 becomes 0.
Expr simplify(const Expr& e, const SymbolExtents& extents);

// Lower and upper bounds (inclusive) when they are known constants. Interval arithmetic, refined by
// symbolic bounds (so i1 - s0 with i1 < s0 has upper bound -1).
std::optional<int64_t> lower_bound(const Expr& e, const SymbolExtents& extents);
std::optional<int64_t> upper_bound(const Expr& e, const SymbolExtents& extents);

Expr substitute(const Expr& e, const std::map<std::string, Expr>& replacements);
// Python semantics for // and %. Throws InternalError on division by zero or int64 overflow.
// (Constructing x // 0 or x % 0 gives 0: only views of empty tensors build them, never evaluated.)
int64_t evaluate(const Expr& e, const std::function<int64_t(const std::string&)>& lookup);
std::set<std::string> free_symbols(const Expr& e);
// True for the names of dynamic sizes: `s<digits>`.
bool is_size_symbol(const std::string& name);

// Coefficient of a symbol when e is affine in it with no floordiv/mod around it (e = c*s + rest,
// rest free of s); nullopt otherwise. Used for stride analysis (vectorization, loop order).
std::optional<Expr> affine_coefficient(const Expr& e, const std::string& symbol);

}  // namespace foundry::ir

template <>
struct std::hash<foundry::ir::Expr> {
  size_t operator()(const foundry::ir::Expr& e) const { return e.hash(); }
};
