#include "foundry/ir/loop_ir.h"

#include <algorithm>

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

std::optional<int64_t> static_numel(const Index& sizes) {
  int64_t n = 1;
  for (const Expr& e : sizes) {
    if (!e.is_const()) return std::nullopt;
    n *= e.const_value();
  }
  return n;
}

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

namespace {
bool ascii_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// Letters and digits kept, every run of other bytes one '_', none at either end.
std::string identifier_chars(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (ascii_alnum(c)) out += c;
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// `base`, or base_2, base_3...: the first not given yet.
std::string unique_name(const std::string& base, std::unordered_map<std::string, int>& given) {
  auto [it, fresh] = given.emplace(base, 2);
  if (fresh) return base;
  std::string name;
  do {
    name = base + "_" + std::to_string(it->second++);
  } while (given.count(name));
  given.emplace(name, 2);
  return name;
}
}  // namespace

std::string weight_identifier(const std::string& value_name) {
  std::string id = identifier_chars(value_name.substr(0, 4 * kMaxWeightIdentifier));
  // torch.export names parameters p_*, buffers b_* and lifted constants c_*: kept as they are.
  bool exported = id.size() > 2 && (id[0] == 'p' || id[0] == 'b' || id[0] == 'c') && id[1] == '_';
  if (!exported) id = "w_" + (id.empty() ? std::string("weight") : id);
  id.resize(std::min(id.size(), kMaxWeightIdentifier));
  while (id.back() == '_') id.pop_back();
  return id;
}

Buffer* LoopProgram::new_buffer(BufferKind kind, DType dtype, const std::vector<Expr>& sizes,
                                const std::string& name_hint) {
  auto buf = std::make_unique<Buffer>();
  buf->id = static_cast<int>(buffers.size());
  buf->kind = kind;
  buf->dtype = dtype;
  buf->sizes = sizes;
  buf->strides = contiguous_strides(sizes);
  if (kind == BufferKind::Constant)
    buf->name = unique_name(weight_identifier(name_hint), constant_names);
  else
    buf->name = (kind == BufferKind::Input ? "arg" : "buf") + std::to_string(buffers_of_kind[kind]++);
  buffers.push_back(std::move(buf));
  return buffers.back().get();
}

LoopNode* LoopProgram::add_node(std::unique_ptr<LoopNode> node) {
  node->id = static_cast<int>(nodes.size());
  nodes.push_back(std::move(node));
  return nodes.back().get();
}

}  // namespace foundry::ir
