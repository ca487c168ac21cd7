// Dynamic sizes: the symbolic sizes of a torch.export archive (sympy `srepr` strings such as
// "Mul(Integer(2), Symbol('s31', positive=True, integer=True))") as foundryc index expressions.
// Archive symbol names are untrusted: each gets one of our names s0, s1, ... in order of first
// appearance; the archive's name only ever reaches messages, quoted.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "foundry/graph/graph.h"
#include "foundry/ir/expr.h"
#include "foundry/ir/loop_ir.h"

namespace foundry::lower {

class SymbolTable {
 public:
  // `specialize`: every symbolic size becomes its recorded hint (a static program).
  SymbolTable(const Graph& graph, bool specialize);

  // Dimension d of a value's recorded type, as an expression (constant, or in terms of s0, ...).
  ir::Expr size(const TensorType& type, size_t d);
  std::vector<ir::Expr> sizes(const TensorType& type);

  bool specialized() const { return specialize_; }
  // The symbols met so far, with their bounds and hints.
  const std::vector<ir::SizeSymbol>& symbols() const { return symbols_; }

 private:
  const Graph& graph_;
  bool specialize_;
  std::vector<ir::SizeSymbol> symbols_;
  std::map<std::string, std::string> ours_;  // archive name -> s<k>

  ir::Expr parse(const std::string& text, int64_t hint);
  ir::Expr symbol(const std::string& archive_name, int64_t hint);
};

}  // namespace foundry::lower
