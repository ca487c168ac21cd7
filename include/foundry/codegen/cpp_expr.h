// Index expressions as C++ (int64_t arithmetic). Floor division and modulo become plain `/` and
// `%` where the operands are provably non-negative, and helper calls otherwise.
#pragma once
#include <functional>
#include <string>

#include "foundry/ir/expr.h"

namespace foundry::codegen {

// `name_of` maps a symbol to its C++ name (loop variables keep theirs; dynamic sizes and
// indirect indices may be renamed).
std::string cpp_index(const ir::Expr& e, const ir::SymbolExtents& extents,
                      const std::function<std::string(const std::string&)>& name_of = {});
// A size, stride or offset of a library call: cpp_index with no loop extents.
std::string cpp_size(const ir::Expr& e);

}  // namespace foundry::codegen
