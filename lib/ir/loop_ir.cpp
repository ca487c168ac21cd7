#include "foundry/ir/loop_ir.h"

#include "foundry/support/error.h"

namespace foundry::ir {

Expr Buffer::linear_index(const Index& idx) const {
  FOUNDRY_CHECK(idx.size() == strides.size(), "index rank does not match buffer " + name);
  Expr e = offset;
  for (size_t d = 0; d < idx.size(); ++d) e = e + idx[d] * strides[d];
  return e;
}

Expr Buffer::numel() const {
  Expr n = 1;
  for (const Expr& s : sizes) n = n * s;
  return n;
}

std::vector<Expr> contiguous_strides(const std::vector<Expr>& sizes) {
  std::vector<Expr> strides(sizes.size());
  Expr running = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = running;
    running = running * sizes[d];
  }
  return strides;
}

int64_t value_at_hints(const Expr& e, const std::vector<SizeSymbol>& symbols) {
  return evaluate(e, [&](const std::string& name) -> int64_t {
    for (const SizeSymbol& s : symbols)
      if (s.name == name) return s.hint;
    throw InternalError("value_at_hints: unknown symbol " + name);
  });
}

Expr ravel_index(const Index& idx, const std::vector<Expr>& sizes) {
  Expr flat = 0;
  for (size_t d = 0; d < idx.size(); ++d) flat = flat * sizes[d] + idx[d];
  return flat;
}

Index unravel_index(const Expr& flat, const std::vector<Expr>& sizes) {
  Index idx(sizes.size());
  // An empty box has no positions: the index is never used, any in-range-looking value will do.
  for (const Expr& s : sizes)
    if (s.is_const(0)) return Index(sizes.size(), Expr(0));
  Expr rest = flat;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (d == 0) {
      idx[d] = rest;
    } else {
      idx[d] = mod(rest, sizes[d]);
      rest = floordiv(rest, sizes[d]);
    }
  }
  return idx;
}

std::string loop_var(int i) { return "i" + std::to_string(i); }
std::string reduction_var(int i) { return "r" + std::to_string(i); }

Index LoopNode::index_symbols() const {
  Index out;
  for (size_t d = 0; d < ranges.size(); ++d) out.push_back(Expr::sym(loop_var(static_cast<int>(d))));
  return out;
}

Index LoopNode::reduction_symbols() const {
  Index out;
  for (size_t d = 0; d < reduction_ranges.size(); ++d)
    out.push_back(Expr::sym(reduction_var(static_cast<int>(d))));
  return out;
}

Buffer* LoopProgram::new_buffer(BufferKind kind, DType dtype, const std::vector<Expr>& sizes) {
  auto buf = std::make_unique<Buffer>();
  buf->id = static_cast<int>(buffers.size());
  buf->kind = kind;
  buf->dtype = dtype;
  buf->sizes = sizes;
  buf->strides = contiguous_strides(sizes);
  const char* prefix = kind == BufferKind::Input ? "arg" : kind == BufferKind::Constant ? "const" : "buf";
  buf->name = prefix + std::to_string(buffers_of_kind[kind]++);
  buffers.push_back(std::move(buf));
  return buffers.back().get();
}

LoopNode* LoopProgram::add_node(std::unique_ptr<LoopNode> node) {
  node->id = static_cast<int>(nodes.size());
  nodes.push_back(std::move(node));
  return nodes.back().get();
}

}  // namespace foundry::ir
