#include "foundry/lower/symbols.h"

#include <cctype>
#include <limits>

#include "foundry/support/error.h"

namespace foundry::lower {
namespace {

// A recursive-descent reader of sympy's srepr: Head(arg, ...), 'text', integers, key=value.
class SreprReader {
 public:
  using SymbolFn = std::function<ir::Expr(const std::string&)>;
  SreprReader(const std::string& text, SymbolFn symbol) : text_(text), symbol_(std::move(symbol)) {}

  ir::Expr read() {
    ir::Expr e = call(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the expression");
    return e;
  }

 private:
  static constexpr int kMaxDepth = 32;
  const std::string& text_;
  SymbolFn symbol_;
  size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& why) const {
    throw UserError("symbolic size " + quote_untrusted(text_, 60) + ": " + why);
  }
  void skip_space() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string identifier() {
    skip_space();
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    if (start == pos_) fail("expected a name");
    return text_.substr(start, pos_ - start);
  }
  int64_t integer() {
    skip_space();
    size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    try {
      return std::stoll(text_.substr(start, pos_ - start));
    } catch (const std::exception&) {
      fail("expected an integer");
    }
  }
  std::string quoted() {
    if (!eat('\'')) fail("expected a quoted name");
    size_t end = text_.find('\'', pos_);
    if (end == std::string::npos) fail("unterminated quoted name");
    std::string s = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  // Skips `key=value` arguments (Symbol's assumptions).
  void skip_keywords() {
    while (eat(',')) {
      identifier();
      if (!eat('=')) fail("expected key=value");
      identifier();
    }
  }

  std::vector<ir::Expr> arguments(int depth) {
    std::vector<ir::Expr> args;
    if (eat(')')) return args;
    do args.push_back(call(depth + 1));
    while (eat(','));
    if (!eat(')')) fail("expected ')'");
    return args;
  }

  ir::Expr call(int depth) {
    if (depth > kMaxDepth) fail("nested too deeply");
    std::string head = identifier();
    if (!eat('(')) {
      // A plain name ("s31"), as older writers store it.
      if (std::isdigit(static_cast<unsigned char>(head[0]))) fail("expected an expression");
      return symbol_(head);
    }
    if (head == "Symbol") {
      std::string name = quoted();
      skip_keywords();
      if (!eat(')')) fail("expected ')'");
      return symbol_(name);
    }
    if (head == "Integer") {
      int64_t v = integer();
      if (!eat(')')) fail("expected ')'");
      return ir::Expr(v);
    }
    std::vector<ir::Expr> args = arguments(depth);
    if (head == "Zero" || head == "One" || head == "NegativeOne") {
      if (!args.empty()) fail(head + " takes no arguments");
      return ir::Expr(head == "Zero" ? 0 : head == "One" ? 1 : -1);
    }
    if (args.empty()) fail(quote_untrusted(head, 20) + " needs arguments");
    ir::Expr acc = args[0];
    auto binary = [&](auto fn) {
      if (args.size() != 2) fail(head + " takes two arguments");
      return fn(args[0], args[1]);
    };
    if (head == "Add") {
      for (size_t i = 1; i < args.size(); ++i) acc = acc + args[i];
      return acc;
    }
    if (head == "Mul") {
      for (size_t i = 1; i < args.size(); ++i) acc = acc * args[i];
      return acc;
    }
    if (head == "Max" || head == "Min") {
      for (size_t i = 1; i < args.size(); ++i) acc = head == "Max" ? ir::max(acc, args[i]) : ir::min(acc, args[i]);
      return acc;
    }
    // CleanDiv is an exact division: floor division gives the same value.
    if (head == "FloorDiv" || head == "CleanDiv")
      return binary([](const ir::Expr& a, const ir::Expr& b) { return ir::floordiv(a, b); });
    if (head == "Mod" || head == "PythonMod")
      return binary([](const ir::Expr& a, const ir::Expr& b) { return ir::mod(a, b); });
    fail("the function " + quote_untrusted(head, 20) + " is not supported");
  }
};

}  // namespace

SymbolTable::SymbolTable(const Graph& graph, bool specialize) : graph_(graph), specialize_(specialize) {}

ir::Expr SymbolTable::symbol(const std::string& archive_name, int64_t hint) {
  auto it = ours_.find(archive_name);
  if (it != ours_.end()) {
    for (auto& s : symbols_)
      if (s.name == it->second && hint > 0 && s.hint <= 0) s.hint = hint;
    return ir::Expr::sym(it->second);
  }
  ir::SizeSymbol s;
  s.name = "s" + std::to_string(symbols_.size());
  s.source = archive_name;
  s.hint = hint;
  s.min = 1;  // sizes that may be 0 or 1 are specialized by torch.export; the index algebra assumes >= 1
  for (const RangeConstraint& r : graph_.range_constraints)
    if (r.symbol == archive_name) {
      s.min = std::max<int64_t>(1, r.min);
      s.max = r.max ? *r.max : std::numeric_limits<int64_t>::max();
      // [0, 0] is a legal range in the archive but no legal size: no input would be accepted.
      if (s.max < s.min)
        throw UserError("the size symbol " + quote_untrusted(archive_name) + " has the range [" + std::to_string(r.min) +
                        ", " + std::to_string(s.max) + "], which holds no size of at least 1: the model would refuse every input");
    }
  ours_[archive_name] = s.name;
  symbols_.push_back(s);
  return ir::Expr::sym(s.name);
}

ir::Expr SymbolTable::parse(const std::string& text, int64_t hint) {
  // A plain symbol carries the dim's hint; symbols inside larger expressions get theirs elsewhere.
  bool plain = text.rfind("Symbol(", 0) == 0 && text.find('(', 7) == std::string::npos;
  SreprReader reader(text, [&](const std::string& name) { return symbol(name, plain ? hint : 0); });
  return reader.read();
}

ir::Expr SymbolTable::size(const TensorType& type, size_t d) {
  bool symbolic = d < type.symbols.size() && !type.symbols[d].empty();
  if (!symbolic || specialize_) return ir::Expr(type.sizes.at(d));
  return parse(type.symbols[d], type.sizes.at(d));
}

std::vector<ir::Expr> SymbolTable::sizes(const TensorType& type) {
  std::vector<ir::Expr> out;
  for (size_t d = 0; d < type.sizes.size(); ++d) out.push_back(size(type, d));
  return out;
}

}  // namespace foundry::lower
