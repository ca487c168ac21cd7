#include "foundry/codegen/cpp_expr.h"

#include "foundry/support/error.h"

namespace foundry::codegen {
namespace {

using ir::Expr;

struct Printer {
  const ir::SymbolExtents& extents;
  const std::function<std::string(const std::string&)>& name_of;

  bool nonneg(const Expr& e) const {
    auto lb = ir::lower_bound(e, extents);
    return lb && *lb >= 0;
  }

  std::string print(const Expr& e) const {
    switch (e.kind()) {
      case Expr::Kind::Const: {
        int64_t v = e.const_value();
        if (v == INT64_MIN) return "INT64_MIN";
        return v < 0 ? "(" + std::to_string(v) + "LL)" : std::to_string(v) + (v > INT32_MAX ? "LL" : "");
      }
      case Expr::Kind::Sym: return name_of ? name_of(e.sym_name()) : e.sym_name();
      case Expr::Kind::Add: {
        std::string out = "(";
        for (size_t i = 0; i < e.operands().size(); ++i) out += (i ? " + " : "") + print(e.operands()[i]);
        return out + ")";
      }
      case Expr::Kind::Mul: {
        std::string out = "(";
        for (size_t i = 0; i < e.operands().size(); ++i) out += (i ? " * " : "") + print(e.operands()[i]);
        return out + ")";
      }
      case Expr::Kind::FloorDiv: case Expr::Kind::Mod: {
        const Expr& a = e.operands()[0];
        const Expr& b = e.operands()[1];
        bool div = e.kind() == Expr::Kind::FloorDiv;
        if (nonneg(a) && nonneg(b)) return "(" + print(a) + (div ? " / " : " % ") + print(b) + ")";
        return std::string(div ? "foundry_rt::index_floordiv(" : "foundry_rt::index_mod(") + print(a) + ", " +
               print(b) + ")";
      }
      case Expr::Kind::Min: case Expr::Kind::Max:
        return std::string(e.kind() == Expr::Kind::Min ? "foundry_rt::index_min(" : "foundry_rt::index_max(") +
               print(e.operands()[0]) + ", " + print(e.operands()[1]) + ")";
    }
    throw InternalError("unknown index expression kind");
  }
};

}  // namespace

std::string cpp_index(const ir::Expr& e, const ir::SymbolExtents& extents,
                      const std::function<std::string(const std::string&)>& name_of) {
  return Printer{extents, name_of}.print(e);
}

std::string cpp_size(const ir::Expr& e) { return cpp_index(e, {}); }

}  // namespace foundry::codegen
