// Symbolic sizes for decomposition outputs (see symbolic_types.h). Symbolic dims are sympy srepr
// strings, as the archive writes them: products are built as Mul(...), splits as FloorDiv(...),
// which the lowering's SymbolTable reads back into index expressions.
#include "foundry/passes/symbolic_types.h"

#include <algorithm>
#include <map>
#include <string>

#include "foundry/ops/registry.h"

namespace foundry::passes {

namespace {

std::string sym(const TensorType& t, size_t d) { return d < t.symbols.size() ? t.symbols[d] : std::string(); }

void set_sym(TensorType& t, size_t d, const std::string& s) {
  if (s.empty() || d >= t.sizes.size()) return;
  t.symbols.resize(t.sizes.size());
  t.symbols[d] = s;
}

const TensorType* tensor_type(const Node& n, const char* name) {
  if (!n.has_arg(name)) return nullptr;
  const Arg& a = n.arg(name);
  return a.kind == Arg::Kind::Tensor && a.tensor && a.tensor->is_tensor ? &a.tensor->type : nullptr;
}

std::vector<const TensorType*> tensor_inputs(const Node& n) {
  std::vector<const TensorType*> out;
  for (const Arg& a : n.args) {
    if (a.kind == Arg::Kind::Tensor && a.tensor && a.tensor->is_tensor) out.push_back(&a.tensor->type);
    for (const Value* v : a.tensors)
      if (v && v->is_tensor) out.push_back(&v->type);
  }
  return out;
}

std::vector<int64_t> ints_of(const Node& n, const char* name) {
  if (!n.has_arg(name)) return {};
  const Arg& a = n.arg(name);
  if (a.kind == Arg::Kind::Int) return {a.i};
  return a.kind == Arg::Kind::IntList ? a.ints : std::vector<int64_t>{};
}

int64_t wrap_dim(int64_t d, int64_t rank) { return d < 0 ? d + std::max<int64_t>(rank, 1) : d; }

// The product of dims [begin, end) of `t` as an srepr expression.
std::string product(const TensorType& t, size_t begin, size_t end) {
  std::vector<std::string> terms;
  int64_t constant = 1;
  for (size_t d = begin; d < end; ++d) {
    if (sym(t, d).empty()) constant *= t.sizes[d];
    else terms.push_back(sym(t, d));
  }
  if (terms.empty()) return "";
  if (constant != 1) terms.push_back("Integer(" + std::to_string(constant) + ")");
  if (terms.size() == 1) return terms[0];
  std::string s = "Mul(";
  for (size_t k = 0; k < terms.size(); ++k) s += (k ? ", " : "") + terms[k];
  return s + ")";
}

using Hints = std::map<std::string, int64_t>;  // a plain size symbol's srepr -> its export hint

// The top-level factors of an srepr product ("Mul(a, b)" -> {a, b}; anything else -> itself).
std::vector<std::string> factors(const std::string& e) {
  if (e.rfind("Mul(", 0) != 0 || e.back() != ')') return {e};
  std::vector<std::string> out;
  int depth = 0;
  size_t start = 4;
  for (size_t i = 4; i + 1 < e.size(); ++i) {
    char c = e[i];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(e.substr(start, i - start));
      start = i + 1;
      while (start < e.size() && e[start] == ' ') ++start;
    }
  }
  out.push_back(e.substr(start, e.size() - 1 - start));
  return out;
}

// Splits dynamic size `merged` over dims [begin, end) of `out` by its factors' hints: each
// symbolic factor goes to the first free dim of its hint. False when some factor's hint is
// unknown or finds no dim.
bool split_by_factors(const std::string& merged, const Hints& hints, TensorType& out, size_t begin, size_t end) {
  std::vector<bool> taken(end - begin, false);
  std::vector<std::pair<size_t, std::string>> assigned;
  for (const std::string& f : factors(merged)) {
    if (f.rfind("Integer(", 0) == 0) continue;
    auto h = hints.find(f);
    if (h == hints.end()) return false;
    size_t k = begin;
    while (k < end && (taken[k - begin] || out.sizes[k] != h->second)) ++k;
    if (k == end) return false;
    taken[k - begin] = true;
    assigned.push_back({k, f});
  }
  for (const auto& [k, f] : assigned) set_sym(out, k, f);
  return true;
}

// view/reshape: dims are matched in groups of equal element counts (at the hints). A group that
// merges dims gets their product; one dynamic dim split into several gives each symbolic factor
// of its size to a dim of that factor's hint, or else its first dim of more than one element
// the quotient (the outer dim, as a batch is).
void view_symbols(const TensorType& in, TensorType& out, const Hints& hints) {
  size_t i = 0, j = 0;
  const size_t na = in.sizes.size(), nb = out.sizes.size();
  while (i < na && j < nb) {
    size_t gi = i, gj = j;
    int64_t pa = in.sizes[i++], pb = out.sizes[j++];
    while (pa != pb) {
      if (pa < pb && i < na) pa *= in.sizes[i++];
      else if (pb < pa && j < nb) pb *= out.sizes[j++];
      else return;
    }
    std::string merged = product(in, gi, i);
    if (merged.empty()) continue;
    if (j - gj == 1) {
      set_sym(out, gj, merged);
      continue;
    }
    if (i - gi != 1) continue;  // many to many: left static (the lowering then refuses it)
    if (split_by_factors(merged, hints, out, gj, j)) continue;
    for (size_t k = gj; k < j; ++k) {
      if (out.sizes[k] == 1) continue;
      int64_t others = pb / std::max<int64_t>(out.sizes[k], 1);
      set_sym(out, k, others == 1 ? merged : "FloorDiv(" + merged + ", Integer(" + std::to_string(others) + "))");
      break;
    }
  }
}

// Dims aligned from the right whose hints agree take the input's symbol (broadcasting ops).
void broadcast_symbols(const std::vector<const TensorType*>& inputs, TensorType& out) {
  const size_t n = out.sizes.size();
  for (const TensorType* in : inputs) {
    const size_t m = in->sizes.size();
    for (size_t k = 0; k < std::min(n, m); ++k) {
      size_t od = n - 1 - k, id = m - 1 - k;
      if (sym(out, od).empty() && !sym(*in, id).empty() && in->sizes[id] == out.sizes[od]) set_sym(out, od, sym(*in, id));
    }
  }
}

// The outputs' symbols by the op's structure; false when no structural rule applies.
bool structural_symbols(const Node& n, std::vector<TensorType>& types, const Hints& hints) {
  const std::string& op = n.target;
  TensorType& out = types[0];
  const TensorType* self = tensor_type(n, "self");
  if (op == "mm" || op == "bmm") {
    const TensorType* b = tensor_type(n, "mat2");
    if (!self || !b) return false;
    for (size_t d = 0; d + 1 < out.sizes.size(); ++d) set_sym(out, d, sym(*self, d));
    set_sym(out, out.sizes.size() - 1, sym(*b, b->sizes.size() - 1));
    return true;
  }
  if (op == "addmm") {
    const TensorType *a = tensor_type(n, "mat1"), *b = tensor_type(n, "mat2");
    if (!a || !b) return false;
    set_sym(out, 0, sym(*a, 0));
    set_sym(out, 1, sym(*b, 1));
    return true;
  }
  if (!self && op != "convolution") return false;
  if (op == "view" || op == "reshape" || op == "_unsafe_view") {
    view_symbols(*self, out, hints);
    return true;
  }
  if (op == "permute") {
    std::vector<int64_t> dims = ints_of(n, "dims");
    for (size_t k = 0; k < dims.size(); ++k) set_sym(out, k, sym(*self, static_cast<size_t>(wrap_dim(dims[k], self->rank()))));
    return true;
  }
  if (op == "transpose.int") {
    int64_t a = wrap_dim(ints_of(n, "dim0").at(0), self->rank()), b = wrap_dim(ints_of(n, "dim1").at(0), self->rank());
    for (size_t d = 0; d < out.sizes.size(); ++d)
      set_sym(out, d, sym(*self, d == static_cast<size_t>(a) ? b : d == static_cast<size_t>(b) ? a : d));
    return true;
  }
  if (op == "unsqueeze") {
    size_t at = static_cast<size_t>(wrap_dim(ints_of(n, "dim").at(0), self->rank() + 1));
    for (size_t d = 0; d < self->sizes.size(); ++d) set_sym(out, d < at ? d : d + 1, sym(*self, d));
    return true;
  }
  if (op == "convolution") {
    const TensorType* x = tensor_type(n, "input");
    if (x) set_sym(out, 0, sym(*x, 0));  // the spatial dims follow the static window arithmetic
    return true;
  }
  // Ops that drop dims: squeeze (size-1 dims), select (one dim), reductions without keepdim.
  std::vector<bool> dropped(self->sizes.size(), false);
  bool keepdim = n.has_arg("keepdim") && n.arg("keepdim").kind == Arg::Kind::Bool && n.arg("keepdim").i != 0;
  if (op == "squeeze.dims" || op == "squeeze.dim") {
    for (int64_t d : ints_of(n, op == "squeeze.dims" ? "dim" : "dim")) {
      size_t w = static_cast<size_t>(wrap_dim(d, self->rank()));
      if (w < dropped.size() && self->sizes[w] == 1) dropped[w] = true;
    }
  } else if (op == "select.int") {
    dropped.at(static_cast<size_t>(wrap_dim(ints_of(n, "dim").at(0), self->rank()))) = true;
  } else if (n.has_arg("dim") && n.arg("dim").kind == Arg::Kind::IntList && !keepdim && n.has_arg("keepdim")) {
    std::vector<int64_t> dims = ints_of(n, "dim");
    if (dims.empty()) return true;  // a full reduction: a scalar
    for (int64_t d : dims) dropped.at(static_cast<size_t>(wrap_dim(d, self->rank()))) = true;
  } else {
    return false;
  }
  for (TensorType& t : types) {
    size_t k = 0;
    for (size_t d = 0; d < dropped.size(); ++d)
      if (!dropped[d]) set_sym(t, k++, sym(*self, d));
  }
  return true;
}

}  // namespace

void propagate_symbols(const Graph& graph, const Node& node, std::vector<TensorType>& types) {
  std::vector<const TensorType*> inputs = tensor_inputs(node);
  if (types.empty() ||
      std::none_of(inputs.begin(), inputs.end(), [](const TensorType* t) { return t->has_symbolic_sizes(); }))
    return;
  Hints hints;
  for (const GraphInput& in : graph.inputs)
    for (size_t d = 0; d < in.value->type.symbols.size(); ++d)
      if (factors(in.value->type.symbols[d]).size() == 1 && in.value->type.sizes[d] > 0)
        hints.emplace(in.value->type.symbols[d], in.value->type.sizes[d]);
  if (!structural_symbols(node, types, hints))
    for (TensorType& t : types) broadcast_symbols(inputs, t);
  for (TensorType& t : types)
    if (!t.has_symbolic_sizes()) t.symbols.clear();
}

}  // namespace foundry::passes
