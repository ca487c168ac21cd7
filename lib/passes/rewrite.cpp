// The pattern-rewrite toolkit: node classification, constant reading, the Rewriter's use/def
// bookkeeping and the rule driver.
#include "foundry/passes/rewrite.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry::passes {

// ---- classification ----

bool is_assert(const Node& n) {
  return n.target.rfind("_assert", 0) == 0 || n.target.rfind("sym_constrain_range", 0) == 0;
}

bool mutates_arguments(const Node& n) {
  if (!n.op) return false;
  for (const ArgSchema& a : n.op->schema.args)
    if (a.alias.find('!') != std::string::npos) return true;
  return false;
}

bool has_side_effects(const Node& n) {
  if (is_assert(n)) return false;
  return n.op == nullptr || mutates_arguments(n);
}

bool is_nondeterministic(const Node& n) {
  static const char* const kPrefixes[] = {"rand", "bernoulli", "normal", "uniform", "native_dropout",
                                          "empty", "multinomial", "poisson", "exponential"};
  for (const char* p : kPrefixes)
    if (n.target.rfind(p, 0) == 0) return true;
  if ((n.target == "dropout" || n.target == "dropout_") && shape::has_arg(n, "train")) return shape::arg(n, "train").i != 0;
  return false;
}

bool is_pure(const Node& n) { return !has_side_effects(n) && !is_nondeterministic(n); }

bool graph_has_side_effects(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [](const auto& n) { return has_side_effects(*n); });
}

namespace {
std::vector<std::string> padded_symbols(const TensorType& t) {
  std::vector<std::string> s = t.symbols;
  s.resize(t.sizes.size());
  return s;
}

// Calls fn(v) for each value an argument reads (tensors, symbolic ints, list entries).
template <typename Fn>
void for_each_value(const Arg& a, Fn&& fn) {
  if (a.tensor) fn(a.tensor);
  for (Value* v : a.tensors)
    if (v) fn(v);
}
}  // namespace

bool same_type(const TensorType& a, const TensorType& b) {
  return a.dtype == b.dtype && a.sizes == b.sizes && padded_symbols(a) == padded_symbols(b);
}

int64_t type_bytes(const TensorType& t) {
  if (t.has_symbolic_sizes()) return 0;
  int64_t n = t.numel();
  int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(t.dtype)), &bytes))
    return std::numeric_limits<int64_t>::max();
  return bytes;
}

// ---- constants ----

namespace {
double element_as_double(DType t, const uint8_t* p) {
  switch (t) {
    case DType::Bool: return *p != 0 ? 1.0 : 0.0;
    case DType::UInt8: return *p;
    case DType::Int8: { int8_t v; std::memcpy(&v, p, 1); return v; }
    case DType::Int16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::Int32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::Int64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::Float16: { _Float16 v; std::memcpy(&v, p, 2); return static_cast<double>(v); }
    case DType::BFloat16: {
      uint16_t hi;
      std::memcpy(&hi, p, 2);
      uint32_t bits = static_cast<uint32_t>(hi) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DType::Float32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::Float64: { double v; std::memcpy(&v, p, 8); return v; }
  }
  return 0;
}
}  // namespace

std::optional<std::vector<double>> read_constant(const GraphInput& in) {
  if (!in.value) return std::nullopt;
  const TensorType& t = in.value->type;
  if (t.has_symbolic_sizes()) return std::nullopt;
  int64_t numel = t.numel();
  std::vector<double> out;
  if (numel == 0) return out;
  if (!in.storage.data) return std::nullopt;
  std::vector<int64_t> strides = t.strides.empty() ? t.contiguous_strides() : t.strides;
  if (strides.size() != t.sizes.size()) return std::nullopt;
  const size_t esize = dtype_size(t.dtype);
  // The extreme element offsets must lie inside the storage.
  int64_t last = t.storage_offset;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (strides[d] < 0) return std::nullopt;
    last += (t.sizes[d] - 1) * strides[d];
  }
  if (t.storage_offset < 0 || static_cast<uint64_t>(last + 1) * esize > in.storage.size) return std::nullopt;

  out.resize(static_cast<size_t>(numel));
  if (strides == t.contiguous_strides()) {
    const uint8_t* base = in.storage.data + t.storage_offset * esize;
    if (t.dtype == DType::Float32) {
      for (int64_t k = 0; k < numel; ++k) {
        float f;
        std::memcpy(&f, base + k * 4, 4);
        out[static_cast<size_t>(k)] = f;
      }
    } else {
      for (int64_t k = 0; k < numel; ++k) out[static_cast<size_t>(k)] = element_as_double(t.dtype, base + k * esize);
    }
    return out;
  }
  std::vector<int64_t> idx(t.sizes.size(), 0);
  for (int64_t k = 0; k < numel; ++k) {
    int64_t off = t.storage_offset;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides[d];
    out[static_cast<size_t>(k)] = element_as_double(t.dtype, in.storage.data + off * esize);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// ---- the rewriter ----

Rewriter::Rewriter(Graph& g) : g_(g) {
  for (auto& n : g_.nodes) {
    for (Value* v : n->outputs) producer_[v] = n.get();
    add_uses(n.get());
  }
  for (const GraphOutput& o : g_.outputs) {
    ++output_uses_[o.value];
    if (o.kind != OutputKind::User) mutated_.insert(o.target);
  }
  index_inputs();
}

void Rewriter::index_inputs() {
  inputs_.clear();
  for (const GraphInput& in : g_.inputs) inputs_[in.value] = &in;
}

void Rewriter::add_uses(Node* n) {
  for (const Arg& a : n->args)
    for_each_value(a, [&](Value* v) {
      auto& us = users_[v];
      if (std::find(us.begin(), us.end(), n) == us.end()) us.push_back(n);
    });
}

void Rewriter::remove_uses(Node* n) {
  for (const Arg& a : n->args)
    for_each_value(a, [&](Value* v) {
      auto it = users_.find(v);
      if (it != users_.end()) std::erase(it->second, n);
    });
}

Node* Rewriter::producer(const Value* v) const {
  auto it = producer_.find(v);
  return it == producer_.end() ? nullptr : it->second;
}

const std::vector<Node*>& Rewriter::users(const Value* v) const {
  static const std::vector<Node*> kNone;
  auto it = users_.find(v);
  return it == users_.end() ? kNone : it->second;
}

int Rewriter::output_uses(const Value* v) const {
  auto it = output_uses_.find(v);
  return it == output_uses_.end() ? 0 : it->second;
}

bool Rewriter::any_output_used(const Node& n) const {
  return std::any_of(n.outputs.begin(), n.outputs.end(), [&](const Value* v) { return is_used(v); });
}

const GraphInput* Rewriter::input(const Value* v) const {
  auto it = inputs_.find(v);
  return it == inputs_.end() ? nullptr : it->second;
}

const GraphInput* Rewriter::constant_input(const Value* v) const {
  const GraphInput* in = input(v);
  if (!in || in->kind == InputKind::User || !v->is_tensor) return nullptr;
  if (in->value->type.has_symbolic_sizes()) return nullptr;
  if (!in->storage.data && in->value->type.numel() != 0) return nullptr;
  if (mutated_.count(in->fqn) || mutated_.count(v->name) || mutated_.count(v->source_name)) return nullptr;
  return in;
}

Node* Rewriter::place(std::unique_ptr<Node> node, Node* before) {
  Node* raw = g_.append_node(std::move(node));
  if (before) {
    auto pos = std::find_if(g_.nodes.begin(), g_.nodes.end(), [&](const auto& p) { return p.get() == before; });
    FOUNDRY_CHECK(pos != g_.nodes.end(), "Rewriter: insertion point is not in the graph");
    std::rotate(pos, g_.nodes.end() - 1, g_.nodes.end());
  }
  for (Value* v : raw->outputs) producer_[v] = raw;
  add_uses(raw);
  changed_ = true;
  return raw;
}

Node* Rewriter::insert_node(const std::string& op, std::vector<Arg> args, const std::vector<TensorType>& output_types,
                            Node* before, const std::string& name_hint) {
  const OpInfo* info = find_op(op);
  FOUNDRY_CHECK(info != nullptr, "Rewriter: unknown op " + op);
  FOUNDRY_CHECK(args.size() == info->schema.args.size(),
                "Rewriter: " + op + " takes " + std::to_string(info->schema.args.size()) + " arguments, got " +
                    std::to_string(args.size()));
  auto n = std::make_unique<Node>();
  n->target = info->name;
  n->op = info;
  n->name = name_hint.empty() ? info->schema.name : name_hint;
  n->args = std::move(args);
  for (const ArgSchema& a : info->schema.args) n->arg_names.push_back(a.name);
  for (const TensorType& t : output_types) n->outputs.push_back(g_.new_value(n->name, t));
  return place(std::move(n), before);
}

Node* Rewriter::insert_copy(const Node& like, std::vector<Arg> args, Node* before) {
  auto n = std::make_unique<Node>();
  n->target = like.target;
  n->op = like.op;
  n->name = like.name;
  n->source_name = like.source_name;
  n->args = std::move(args);
  n->arg_names = like.arg_names;
  for (const Value* o : like.outputs) {
    Value* v = g_.new_value(o->name, o->type);
    v->is_tensor = o->is_tensor;
    n->outputs.push_back(v);
  }
  return place(std::move(n), before);
}

Value* Rewriter::add_constant(const std::string& fqn_hint, TensorType type, std::vector<uint8_t> bytes) {
  type.strides.clear();
  type.storage_offset = 0;
  FOUNDRY_CHECK(!type.has_symbolic_sizes(), "Rewriter: a constant with symbolic sizes");
  FOUNDRY_CHECK(static_cast<int64_t>(bytes.size()) == type_bytes(type),
                "Rewriter: constant bytes do not match its type " + type_to_string(type));
  std::unordered_set<std::string> taken;
  for (const GraphInput& in : g_.inputs) taken.insert(in.fqn);
  std::string fqn = fqn_hint;
  for (int k = 1; taken.count(fqn); ++k) fqn = fqn_hint + "_" + std::to_string(k);

  auto holder = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  GraphInput in;
  in.kind = InputKind::Constant;
  in.fqn = fqn;
  in.value = g_.new_value(fqn, std::move(type));
  in.storage.owner = holder;
  in.storage.data = holder->empty() ? nullptr : holder->data();
  in.storage.size = holder->size();
  Value* v = in.value;
  g_.inputs.push_back(std::move(in));
  index_inputs();  // push_back may have moved the inputs
  changed_ = true;
  return v;
}

void Rewriter::set_arg(Node& n, size_t index, Arg a) {
  FOUNDRY_CHECK(index < n.args.size(), "Rewriter: set_arg out of range on " + n.name);
  remove_uses(&n);
  n.args[index] = std::move(a);
  add_uses(&n);
  changed_ = true;
}

void Rewriter::replace_uses(Value* from, Value* to) {
  FOUNDRY_CHECK(from && to, "Rewriter: replace_uses with a null value");
  if (from == to) return;
  FOUNDRY_CHECK(from->is_tensor == to->is_tensor &&
                    (!from->is_tensor || (from->type.dtype == to->type.dtype && from->type.sizes == to->type.sizes)),
                "Rewriter: replacing %" + from->name + " (" + type_to_string(from->type) + ") by %" + to->name +
                    " (" + type_to_string(to->type) + ")");
  // The value replaced is the same tensor: its recorded symbolic sizes hold for the replacement,
  // whose shape rule saw only the export's sizes (e.g. an arange up to a size known at run time).
  // Graph inputs (weights, constants) keep their own types.
  if (from->is_tensor && from->type.has_symbolic_sizes() && !to->type.has_symbolic_sizes() && producer(to))
    to->type.symbols = from->type.symbols;
  std::vector<Node*> us = users(from);
  auto& to_users = users_[to];
  for (Node* u : us) {
    for (Arg& a : u->args) {
      if (a.tensor == from) a.tensor = to;
      for (Value*& t : a.tensors)
        if (t == from) t = to;
    }
    if (std::find(to_users.begin(), to_users.end(), u) == to_users.end()) to_users.push_back(u);
  }
  users_[from].clear();
  for (GraphOutput& o : g_.outputs)
    if (o.value == from) o.value = to;
  if (int n = output_uses(from)) {
    output_uses_[to] += n;
    output_uses_.erase(from);
  }
  changed_ = true;
}

namespace {

// A replacement is the same tensor as the value it replaces, so the replaced value's symbolic
// sizes, which the archive recorded, are its sizes: the shape rules that built it know the export's
// sizes only (a convolution's dynamic height became static), and the symbols propagated through a
// decomposition can be a weaker form (a view's batch as a quotient of a product of dynamic sizes).
void adopt_symbols(TensorType& replacement, const TensorType& replaced) {
  if (replacement.sizes != replaced.sizes || !replaced.has_symbolic_sizes()) return;
  replacement.symbols.resize(replacement.sizes.size());
  for (size_t d = 0; d < replacement.symbols.size() && d < replaced.symbols.size(); ++d)
    if (!replaced.symbols[d].empty()) replacement.symbols[d] = replaced.symbols[d];
}

}  // namespace

void Rewriter::replace_outputs(Node& n, const std::vector<Value*>& with) {
  FOUNDRY_CHECK(with.size() == n.outputs.size(),
                "Rewriter: " + std::to_string(with.size()) + " replacements for the " +
                    std::to_string(n.outputs.size()) + " outputs of " + n.name);
  for (size_t i = 0; i < with.size(); ++i) {
    if (with[i]) {
      adopt_symbols(with[i]->type, n.outputs[i]->type);
      replace_uses(n.outputs[i], with[i]);
    } else
      FOUNDRY_CHECK(!is_used(n.outputs[i]), "Rewriter: output %" + n.outputs[i]->name + " of " + n.name +
                                                " is used but has no replacement");
  }
  erase(n);
}

void Rewriter::erase(Node& n) {
  if (erased_.insert(&n).second) erase_order_.push_back(&n);
}

bool Rewriter::commit() {
  std::unordered_set<const Node*> removed;
  std::vector<Node*> work = erase_order_;
  for (size_t k = 0; k < work.size(); ++k) {
    Node* n = work[k];
    if (removed.count(n) || any_output_used(*n)) continue;
    removed.insert(n);
    remove_uses(n);
    for (const Arg& a : n->args)
      for_each_value(a, [&](Value* v) {
        Node* p = producer(v);
        if (p && !removed.count(p) && !has_side_effects(*p) && !any_output_used(*p)) work.push_back(p);
      });
  }
  erase_order_.clear();
  erased_.clear();
  if (removed.empty()) return changed_;
  for (const Node* n : removed)
    for (const Value* v : n->outputs) producer_.erase(v);
  std::erase_if(g_.nodes, [&](const std::unique_ptr<Node>& p) { return removed.count(p.get()) != 0; });
  changed_ = true;
  return true;
}

// ---- rules ----

bool apply_rules(Graph& g, const std::vector<RewriteRule>& rules) {
  std::map<std::string, std::vector<const RewriteRule*>> by_op;
  for (const RewriteRule& r : rules)
    for (const std::string& op : r.ops) by_op[op].push_back(&r);

  Rewriter rw(g);
  std::vector<Node*> order;
  order.reserve(g.nodes.size());
  for (auto& n : g.nodes) order.push_back(n.get());

  for (Node* n : order) {
    if (!n->op || rw.is_erased(*n)) continue;
    auto it = by_op.find(n->target);
    if (it == by_op.end()) continue;
    for (const RewriteRule* rule : it->second) {
      if (rule->where && !rule->where(rw, *n)) continue;
      std::optional<Replacement> r = rule->replace(rw, *n);
      if (!r) continue;
      spdlog::debug("rewrite {}: node {}", rule->name, n->name);
      if (n->outputs.empty())
        rw.erase(*n);
      else
        rw.replace_outputs(*n, r->outputs);
      break;
    }
  }
  return rw.commit();
}

RewriteRule forward_to_arg(std::string name, std::vector<std::string> ops,
                           std::function<bool(const Rewriter&, const Node&)> pred, size_t arg_index) {
  RewriteRule rule;
  rule.name = std::move(name);
  rule.ops = std::move(ops);
  rule.where = std::move(pred);
  rule.replace = [arg_index](Rewriter&, Node& n) -> std::optional<Replacement> {
    if (n.outputs.size() != 1 || arg_index >= n.args.size()) return std::nullopt;
    const Arg& a = n.args[arg_index];
    if (a.kind != Arg::Kind::Tensor || !a.tensor || !a.tensor->is_tensor) return std::nullopt;
    if (!same_type(n.outputs[0]->type, a.tensor->type)) return std::nullopt;
    return Replacement{{a.tensor}};
  };
  return rule;
}

}  // namespace foundry::passes
