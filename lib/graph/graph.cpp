// Graph IR: values, nodes, naming, and small helpers on tensor types.
#include "foundry/graph/graph.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "foundry/support/error.h"

namespace foundry {

// ---- TensorType ----

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s <= 0) return 0;
    if (__builtin_mul_overflow(n, s, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

bool TensorType::has_symbolic_sizes() const {
  return std::any_of(symbols.begin(), symbols.end(), [](const std::string& s) { return !s.empty(); });
}

std::vector<int64_t> TensorType::contiguous_strides() const {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    int64_t s = std::max<int64_t>(sizes[i], 1);
    if (__builtin_mul_overflow(stride, s, &stride)) stride = std::numeric_limits<int64_t>::max();
  }
  return strides;
}

std::string qualified_op_name(std::string_view table_name) {
  constexpr std::string_view kOps = "torch.ops.";
  if (table_name.substr(0, kOps.size()) == kOps) return std::string(table_name.substr(kOps.size()));
  return "aten." + std::string(table_name);
}

std::string shown_target(const std::string& target) {
  bool plain = !target.empty() && target.size() <= 128;
  for (char c : target)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) plain = false;
  if (!plain) return quote_untrusted(target, 60);
  const bool other = (target.rfind("torch.", 0) == 0 && target.rfind("torch.ops.", 0) != 0) || target.rfind("_operator.", 0) == 0;
  return other ? target : qualified_op_name(target);
}

bool is_plain_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

std::string_view dtype_short_name(DType t) {
  switch (t) {
    case DType::Bool: return "b8";
    case DType::UInt8: return "u8";
    case DType::Int8: return "i8";
    case DType::Int16: return "i16";
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
    case DType::Float16: return "f16";
    case DType::BFloat16: return "bf16";
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
  }
  return "?";
}

namespace {
// "Symbol('s31', positive=True, integer=True)" -> "s31"; anything else is shown quoted.
std::string symbol_display(const std::string& expr) {
  constexpr std::string_view kPrefix = "Symbol('";
  if (expr.compare(0, kPrefix.size(), kPrefix) == 0) {
    size_t end = expr.find('\'', kPrefix.size());
    if (end != std::string::npos) {
      std::string name = expr.substr(kPrefix.size(), end - kPrefix.size());
      if (is_plain_name(name)) return name;
    }
  }
  return quote_untrusted(expr, 40);
}
}  // namespace

std::string type_to_string(const TensorType& t) {
  std::string out(dtype_short_name(t.dtype));
  out += '[';
  for (size_t i = 0; i < t.sizes.size(); ++i) {
    if (i) out += ", ";
    if (i < t.symbols.size() && !t.symbols[i].empty())
      out += symbol_display(t.symbols[i]);
    else
      out += std::to_string(t.sizes[i]);
  }
  out += ']';
  return out;
}

// ---- Node ----

const Arg& Node::arg(const std::string& arg_name) const {
  for (size_t i = 0; i < arg_names.size() && i < args.size(); ++i)
    if (arg_names[i] == arg_name) return args[i];
  throw InternalError("node " + name + " (" + target + ") has no argument '" + arg_name + "'");
}

bool Node::has_arg(const std::string& arg_name) const {
  for (size_t i = 0; i < arg_names.size() && i < args.size(); ++i)
    if (arg_names[i] == arg_name) return true;
  return false;
}

// ---- Graph ----

namespace {
std::string uniquify(const std::string& base, const std::unordered_set<std::string>& taken) {
  if (!taken.count(base)) return base;
  for (size_t k = 1;; ++k) {
    std::string candidate = base + "_" + std::to_string(k);
    if (!taken.count(candidate)) return candidate;
  }
}
}  // namespace

std::string Graph::unique_name(const std::string& preferred) {
  std::string base = is_plain_name(preferred) ? preferred : "v" + std::to_string(values_.size());
  std::string name = uniquify(base, taken_names_);
  taken_names_.insert(name);
  return name;
}

Value* Graph::new_value(const std::string& preferred_name, TensorType type) {
  auto v = std::make_unique<Value>();
  v->id = static_cast<int>(values_.size());
  v->name = unique_name(preferred_name);
  v->source_name = preferred_name;
  v->type = std::move(type);
  Value* raw = v.get();
  by_name_[raw->name] = raw;
  values_.push_back(std::move(v));
  return raw;
}

Node* Graph::append_node(std::unique_ptr<Node> node) {
  FOUNDRY_CHECK(node != nullptr, "append_node(nullptr)");
  node->id = next_node_id_++;
  if (node->source_name.empty()) node->source_name = node->name;
  std::string base = is_plain_name(node->name) ? node->name : "n" + std::to_string(node->id);
  node->name = uniquify(base, taken_node_names_);
  taken_node_names_.insert(node->name);
  nodes.push_back(std::move(node));
  return nodes.back().get();
}

Value* Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<Value*> Graph::user_inputs() const {
  std::vector<Value*> out;
  for (const GraphInput& in : inputs)
    if (in.kind == InputKind::User) out.push_back(in.value);
  return out;
}

std::vector<Value*> Graph::user_outputs() const {
  std::vector<Value*> out;
  for (const GraphOutput& o : outputs)
    if (o.kind == OutputKind::User) out.push_back(o.value);
  return out;
}

namespace {
bool arg_uses(const Arg& a, const Value* v) {
  if (a.tensor == v) return true;
  return std::find(a.tensors.begin(), a.tensors.end(), v) != a.tensors.end();
}
}  // namespace

std::vector<Node*> Graph::users(const Value* v) const {
  std::vector<Node*> out;
  if (!v) return out;
  for (const auto& n : nodes)
    for (const Arg& a : n->args)
      if (arg_uses(a, v)) {
        out.push_back(n.get());
        break;
      }
  return out;
}

void Graph::replace_all_uses(Value* from, Value* to) {
  for (auto& n : nodes)
    for (Arg& a : n->args) {
      if (a.tensor == from) a.tensor = to;
      for (Value*& t : a.tensors)
        if (t == from) t = to;
    }
  for (GraphOutput& o : outputs)
    if (o.value == from) o.value = to;
}

}  // namespace foundry
