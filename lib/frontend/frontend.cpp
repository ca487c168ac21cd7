// The frontend: a torch.export archive (models/model.json plus weight files) into a Graph.
#include "foundry/frontend/frontend.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>
#include <unordered_map>

#include "foundry/frontend/archive.h"
#include "foundry/frontend/file_kind.h"
#include "foundry/frontend/json_reader.h"
#include "foundry/ops/registry.h"
#include "foundry/support/error.h"
#include "foundry/support/files.h"

namespace foundry {

namespace fs = std::filesystem;

std::string display_path(const std::string& path) {
  for (char c : path) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') return quote_untrusted(path, 200);
  }
  return path.empty() ? "\"\"" : path;
}

namespace {

constexpr int64_t kMaxRank = 64;
constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;  // 256 TiB: beyond any real model
constexpr const char* kModelJson = "models/model.json";
constexpr const char* kWeightsDir = "data/weights/";
constexpr const char* kConstantsDir = "data/constants/";
constexpr const char* kWeightsConfig = "data/weights/model_weights_config.json";
constexpr const char* kConstantsConfig = "data/constants/model_constants_config.json";

// "torch.ops.aten.relu.default" -> "relu"; targets outside aten are kept whole.
std::string node_target(const std::string& target) {
  constexpr std::string_view kAten = "torch.ops.aten.";
  if (target.compare(0, kAten.size(), kAten) == 0) return short_op_name(target);
  return target;
}

bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool checked_add(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

// One dimension entry: {"as_int": 8} or {"as_expr": {"expr_str": "...", "hint": {"as_int": 8}}}.
// Returns the value (the hint for symbols; 0 when there is no hint) and sets `symbol`.
int64_t parse_sym_int(const JsonRef& j, std::string* symbol) {
  if (j.raw().is_number_integer()) return j.as_int();  // a plain integer (older writers)
  auto [key, v] = j.as_union();
  if (key == "as_int") return v.as_int();
  if (key == "as_expr") {
    const std::string& expr = v.at("expr_str").as_string();
    if (expr.empty()) v.at("expr_str").fail("empty symbolic expression");
    if (symbol) *symbol = expr;
    auto hint = v.find("hint");
    if (!hint || hint->is_null()) return 0;
    if (hint->is_object()) {
      auto [hkey, hv] = hint->as_union();
      if (hkey != "as_int") hint->fail("expected an integer hint");
      return hv.as_int();
    }
    return hint->as_int();
  }
  j.fail("expected as_int or as_expr, got " + quote_untrusted(key, 40));
}

// "Symbol('u0', integer=True)" (how torch 2.11 writes a symbol) -> "u0"; other expressions as
// they are.
std::string symbol_text(const std::string& expr) {
  constexpr std::string_view kSymbol = "Symbol('";
  size_t end = expr.find('\'', kSymbol.size());
  if (expr.rfind(kSymbol, 0) != 0 || end == std::string::npos) return expr;
  return expr.substr(kSymbol.size(), end - kSymbol.size());
}

// The first size of a TensorMeta that is a symbol without a recorded value, as its expression
// (quoted, shortened), or "" when there is none. torch.export records such an unbacked size (u0)
// for results whose size is only known when the program runs (nonzero's count of nonzeros).
std::string data_dependent_size(const JsonRef& meta) {
  for (const JsonRef& size : meta.at("sizes").items()) {
    if (size.raw().is_number_integer()) continue;
    auto [key, v] = size.as_union();
    if (key != "as_expr") continue;
    auto hint = v.find("hint");
    if (!hint || hint->is_null()) return quote_untrusted(symbol_text(v.at("expr_str").as_string()), 40);
  }
  return "";
}

DType parse_dtype(const JsonRef& j) {
  int64_t code = j.as_int();
  auto dtype = dtype_from_export(code);
  if (!dtype) {
    // The export's codes that name a dtype foundryc does not support.
    static const char* kUnsupported[] = {"unknown", nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                         nullptr, nullptr, "complex32", "complex64", "complex128"};
    if (code >= 0 && code <= 11 && kUnsupported[code])
      j.fail(std::string("dtype ") + kUnsupported[code] + " (code " + std::to_string(code) + ") is not supported");
    j.fail("unknown dtype code " + std::to_string(code));
  }
  return *dtype;
}

// A TensorMeta: dtype, sizes, strides, storage_offset. Sizes, strides and the offset must be
// non-negative and the tensor's byte size and extent must fit comfortably in int64.
TensorType parse_tensor_meta(const JsonRef& j) {
  TensorType t;
  t.dtype = parse_dtype(j.at("dtype"));
  auto sizes = j.at("sizes").items();
  if (static_cast<int64_t>(sizes.size()) > kMaxRank)
    j.at("sizes").fail("rank " + std::to_string(sizes.size()) + " is more than " + std::to_string(kMaxRank));
  bool any_symbol = false;
  std::vector<std::string> symbols(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t s = parse_sym_int(sizes[i], &symbols[i]);
    if (s < 0) sizes[i].fail("negative size " + std::to_string(s));
    t.sizes.push_back(s);
    any_symbol |= !symbols[i].empty();
  }
  if (any_symbol) t.symbols = std::move(symbols);
  if (auto strides = j.find("strides")) {
    auto items = strides->items();
    if (items.size() != sizes.size())
      strides->fail(std::to_string(items.size()) + " strides for " + std::to_string(sizes.size()) + " sizes");
    for (const JsonRef& item : items) {
      int64_t s = parse_sym_int(item, nullptr);
      if (s < 0) item.fail("negative stride " + std::to_string(s));
      t.strides.push_back(s);
    }
  } else {
    t.strides = t.contiguous_strides();
  }
  if (auto off = j.find("storage_offset")) {
    t.storage_offset = parse_sym_int(*off, nullptr);
    if (t.storage_offset < 0) off->fail("negative storage offset");
  }
  // Byte size and extent (largest element index + 1), overflow-checked.
  int64_t numel = 1, extent = t.storage_offset, bytes = 0;
  bool ok = true;
  for (size_t i = 0; i < t.sizes.size() && ok; ++i) {
    ok = checked_mul(numel, t.sizes[i], &numel);
    int64_t span = 0;
    if (ok && t.sizes[i] > 0) ok = checked_mul(t.sizes[i] - 1, t.strides[i], &span) && checked_add(extent, span, &extent);
  }
  if (ok) ok = checked_mul(numel, static_cast<int64_t>(dtype_size(t.dtype)), &bytes);
  if (ok) ok = checked_add(extent, 1, &extent) && checked_mul(extent, static_cast<int64_t>(dtype_size(t.dtype)), &extent);
  if (!ok || bytes > kMaxTensorBytes || extent > kMaxTensorBytes)
    j.fail("tensor of declared sizes " + type_to_string(t) + " is too large");
  return t;
}

// Bytes the storage must hold for `t` (0 for an empty tensor).
int64_t storage_bytes_needed(const TensorType& t) {
  if (t.numel() == 0) return 0;
  int64_t last = t.storage_offset;
  for (size_t i = 0; i < t.sizes.size(); ++i) last += (t.sizes[i] - 1) * t.strides[i];
  return (last + 1) * static_cast<int64_t>(dtype_size(t.dtype));  // checked in parse_tensor_meta
}

double parse_float(const JsonRef& j) {
  if (j.is_string()) {
    const std::string& s = j.as_string();
    if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
    j.fail("expected a float, got the string " + quote_untrusted(s, 40));
  }
  return j.as_number();
}

// A config entry name used as a file name: no folders, no "." or "..".
bool is_plain_file_name(const std::string& s) {
  if (s.empty() || s.size() > 255 || s == "." || s == "..") return false;
  for (char c : s)
    if (c == '/' || c == '\\' || c == '\0') return false;
  return true;
}

class Loader {
 public:
  explicit Loader(Archive& archive) : archive_(archive) {}

  Graph load(const nlohmann::json& doc) {
    JsonRef root(doc, "");
    if (!root.is_object()) root.fail("the model JSON is not an object");
    parse_header(root);
    JsonRef gm = root.at("graph_module");
    JsonRef graph = gm.at("graph");
    tensor_values_.emplace(graph.at("tensor_values"));
    if (!tensor_values_->is_object()) tensor_values_->fail("expected an object");
    JsonRef signature = gm.at("signature");
    parse_inputs(graph.at("inputs"), signature.at("input_specs"));
    share_storage_extents();
    if (auto v = graph.find("sym_int_values")) sym_int_values_.emplace(*v);
    if (auto v = graph.find("sym_bool_values")) sym_bool_values_.emplace(*v);
    nodes_.emplace(graph.at("nodes"));
    auto nodes = nodes_->items();
    for (size_t i = 0; i < nodes.size(); ++i) {
      current_node_ = static_cast<int64_t>(i);
      parse_node(nodes[i]);
    }
    current_node_ = -1;
    parse_outputs(graph.at("outputs"), signature.at("output_specs"));
    return std::move(g_);
  }

 private:
  void parse_header(const JsonRef& root) {
    JsonRef version = root.at("schema_version");
    int64_t major = version.at("major").as_int();
    int64_t minor = version.find("minor") ? version.at("minor").as_int() : 0;
    if (major != 8)
      version.fail("schema version " + std::to_string(major) + "." + std::to_string(minor) +
                   " is not supported (foundryc reads version 8.x, written by torch 2.9 to 2.15)");
    g_.schema_major = static_cast<int>(major);
    g_.schema_minor = static_cast<int>(std::min<int64_t>(minor, std::numeric_limits<int>::max()));
    if (auto v = root.find("verifiers")) {
      auto items = v->items();
      if (!items.empty()) g_.verifier = items[0].as_string();
    } else if (auto d = root.find("dialect")) {
      g_.verifier = d->as_string();
    }
    if (auto tv = root.find("torch_version")) g_.torch_version = tv->as_string();
    if (auto rc = root.find("range_constraints")) {
      for (const auto& [symbol, range] : rc->members()) {
        RangeConstraint r;
        r.symbol = symbol;
        auto lo = parse_bound(range.at("min_val"));
        r.min = lo ? *lo : std::numeric_limits<int64_t>::min();
        r.max = parse_bound(range.at("max_val"));
        // An empty range would compile into a model that refuses every input.
        if (r.max && *r.max < r.min)
          range.fail("the range of symbol " + quote_untrusted(symbol) + " is empty: [" + std::to_string(r.min) + ", " +
                     std::to_string(*r.max) + "]");
        g_.range_constraints.push_back(std::move(r));
      }
    }
  }

  // An integer bound; null, infinities and huge values (sympy's int_oo) mean unbounded.
  static std::optional<int64_t> parse_bound(const JsonRef& j) {
    constexpr int64_t kHuge = int64_t(1) << 62;
    const auto& raw = j.raw();
    if (raw.is_null()) return std::nullopt;
    if (raw.is_number_unsigned() && raw.get<uint64_t>() > uint64_t(kHuge)) return std::nullopt;
    if (raw.is_number_integer()) {
      int64_t v = raw.get<int64_t>();
      if (v >= kHuge || v <= -kHuge) return std::nullopt;
      return v;
    }
    if (raw.is_number_float()) {
      double d = raw.get<double>();
      if (!std::isfinite(d) || std::fabs(d) >= 4.6e18) return std::nullopt;
      return static_cast<int64_t>(d);
    }
    if (raw.is_string()) {
      const std::string& s = raw.get_ref<const std::string&>();
      if (s == "oo" || s == "-oo" || s == "int_oo" || s == "-int_oo" || s == "Infinity" || s == "-Infinity")
        return std::nullopt;
    }
    j.fail("expected an integer bound or null");
  }

  // ---- values ----

  Value* define_tensor(const std::string& name, const JsonRef& where) {
    check_fresh(name, where);
    auto it = tensor_values_->raw().find(name);
    if (it == tensor_values_->raw().end())
      where.fail("value " + quote_untrusted(name) + " has no entry in tensor_values");
    JsonRef meta(*it, "tensor_values[" + quote_untrusted(name, 40) + "]");
    std::string unknown = data_dependent_size(meta);
    if (!unknown.empty())
      throw UserError("the shape of its output " + quote_untrusted(name, 40) + " depends on the data (size " + unknown +
                      " is only known when the model runs), which foundryc cannot compile: every shape must follow "
                      "from the input shapes");
    Value* v = g_.new_value(prefix_ + name, parse_tensor_meta(meta));
    by_file_name_[name] = v;
    return v;
  }

  Value* define_symbolic(const std::string& name, DType dtype, const JsonRef& where) {
    check_fresh(name, where);
    // sym_int_values / sym_bool_values describe it (an expression and maybe a hint); checked here,
    // not kept: nothing downstream computes with data-dependent scalars yet.
    const JsonRef* table = dtype == DType::Bool ? (sym_bool_values_ ? &*sym_bool_values_ : nullptr)
                                                : (sym_int_values_ ? &*sym_int_values_ : nullptr);
    std::optional<int64_t> hint;
    if (table && table->is_object()) {
      auto it = table->raw().find(name);
      if (it != table->raw().end()) {
        JsonRef entry(*it, table->path() + "[" + quote_untrusted(name, 40) + "]");
        auto [key, v] = entry.as_union();
        if (key == "as_expr") {
          v.at("expr_str").as_string();
          if (auto h = v.find("hint"); h && !h->is_null()) hint = parse_sym_int(*h, nullptr);
        } else if (key == "as_int") {
          hint = v.as_int();
        } else if (key != "as_bool") {
          entry.fail("unexpected kind " + quote_untrusted(key, 40));
        }
      }
    }
    TensorType t;
    t.dtype = dtype;
    Value* v = g_.new_value(prefix_ + name, t);
    v->is_tensor = false;
    v->hint = hint;
    by_file_name_[name] = v;
    return v;
  }

  void check_fresh(const std::string& name, const JsonRef& where) {
    if (name.empty()) where.fail("empty value name");
    if (by_file_name_.count(name)) where.fail("value " + quote_untrusted(name) + " is defined twice");
  }

  Value* use(const std::string& name, const JsonRef& where, bool want_tensor) {
    auto it = by_file_name_.find(name);
    if (it == by_file_name_.end()) where.fail(undefined_value_message(name));
    if (it->second->is_tensor != want_tensor)
      where.fail("value " + quote_untrusted(name) + (want_tensor ? " is not a tensor" : " is not a symbolic scalar"));
    return it->second;
  }

  Value* use_tensor_arg(const JsonRef& j) { return use(j.at("name").as_string(), j, true); }

  // Why `name` is not defined yet: nothing defines it, a later node does (out of order), or a
  // later node that depends on the current one does (a cycle).
  std::string undefined_value_message(const std::string& name) {
    std::string q = quote_untrusted(name);
    if (!nodes_ || current_node_ < 0) return "uses value " + q + ", which is not defined";
    // Names only, read leniently: this runs on the way to an error.
    const nlohmann::json& nodes = nodes_->raw();
    std::unordered_map<std::string, size_t> producer;
    std::vector<std::vector<std::string>> uses(nodes.size());
    auto collect_names = [](const nlohmann::json& j, std::vector<std::string>& out, auto&& self, int depth) -> void {
      if (depth > 8) return;
      if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it) {
          if ((it.key() == "name" || it.key() == "as_name") && it.value().is_string())
            out.push_back(it.value().get<std::string>());
          else
            self(it.value(), out, self, depth + 1);
        }
      } else if (j.is_array()) {
        for (const auto& item : j) self(item, out, self, depth + 1);
      }
    };
    for (size_t i = 0; i < nodes.size(); ++i) {
      const nlohmann::json& n = nodes[i];
      if (!n.is_object()) continue;
      if (auto in = n.find("inputs"); in != n.end())
        for (const auto& input : *in)
          if (input.is_object() && input.contains("arg")) collect_names(input["arg"], uses[i], collect_names, 0);
      if (auto out = n.find("outputs"); out != n.end()) {
        std::vector<std::string> defined;
        collect_names(*out, defined, collect_names, 0);
        for (const auto& d : defined) producer.emplace(d, i);
      }
    }
    auto p = producer.find(name);
    if (p == producer.end() || p->second <= static_cast<size_t>(current_node_))
      return "uses value " + q + ", which nothing defines";
    // Does the producer depend, transitively, on the current node?
    size_t current = static_cast<size_t>(current_node_);
    std::vector<char> seen(nodes.size(), 0);
    std::vector<size_t> stack = {p->second};
    while (!stack.empty()) {
      size_t n = stack.back();
      stack.pop_back();
      if (n == current)
        return "uses value " + q + ", which a later node computes from this node's own result: the graph has a cycle";
      if (seen[n]) continue;
      seen[n] = 1;
      for (const std::string& u : uses[n]) {
        auto up = producer.find(u);
        if (up != producer.end()) stack.push_back(up->second);
      }
    }
    return "uses value " + q + " before the node that defines it (the nodes are not in topological order)";
  }

  // ---- arguments ----

  Arg parse_arg(const JsonRef& j) {
    auto [key, v] = j.as_union();
    Arg a;
    using K = Arg::Kind;
    if (key == "as_tensor") return Arg::of_tensor(use_tensor_arg(v));
    if (key == "as_tensors") {
      a.kind = K::TensorList;
      for (const JsonRef& item : v.items()) a.tensors.push_back(use_tensor_arg(item));
      return a;
    }
    if (key == "as_optional_tensors") {
      a.kind = K::OptTensorList;
      for (const JsonRef& item : v.items()) {
        auto [ikey, iv] = item.as_union();
        if (ikey == "as_none") a.tensors.push_back(nullptr);
        else if (ikey == "as_tensor") a.tensors.push_back(use_tensor_arg(iv));
        else item.fail("expected as_tensor or as_none, got " + quote_untrusted(ikey, 40));
      }
      return a;
    }
    if (key == "as_int") return Arg::of_int(v.as_int());
    if (key == "as_ints") {
      a.kind = K::IntList;
      for (const JsonRef& item : v.items()) a.ints.push_back(item.as_int());
      return a;
    }
    if (key == "as_float") return Arg::of_float(parse_float(v));
    if (key == "as_floats") {
      a.kind = K::FloatList;
      for (const JsonRef& item : v.items()) a.floats.push_back(parse_float(item));
      return a;
    }
    if (key == "as_bool") return Arg::of_bool(v.as_bool());
    if (key == "as_bools") {
      a.kind = K::BoolList;
      for (const JsonRef& item : v.items()) a.ints.push_back(item.as_bool());
      return a;
    }
    if (key == "as_string") return Arg::of_string(v.as_string());
    if (key == "as_scalar_type") return Arg::of_dtype(parse_dtype(v));
    if (key == "as_layout") {
      a.kind = K::Layout;
      a.i = v.as_int();
      return a;
    }
    if (key == "as_memory_format") {
      a.kind = K::MemoryFormat;
      a.i = v.as_int();
      return a;
    }
    if (key == "as_device") {
      a.kind = K::Device;
      a.s = v.at("type").as_string();
      if (auto index = v.find("index"); index && !index->is_null()) a.s += ":" + std::to_string(index->as_int());
      return a;
    }
    if (key == "as_none") return Arg::none();
    if (key == "as_sym_int" || key == "as_sym_bool") {
      auto [skey, sv] = v.as_union();
      if (skey == "as_name") {
        a.kind = K::SymInt;
        a.tensor = use(sv.as_string(), sv, false);
        // The result of size arithmetic (not kept as a node) is used at its export hint.
        if (size_arithmetic_.count(a.tensor)) return Arg::of_int(*a.tensor->hint);
        return a;
      }
      if (key == "as_sym_int" && skey == "as_int") return Arg::of_int(sv.as_int());
      if (key == "as_sym_bool" && skey == "as_bool") return Arg::of_bool(sv.as_bool());
      v.fail("unsupported symbolic value " + quote_untrusted(skey, 40));
    }
    if (key == "as_sym_ints") {
      // A symbolic entry (a sym_size result) is recorded at its export hint: the shape rules
      // check against the hints, and lowerings with dynamic sizes take sizes from the recorded
      // symbolic types, not from these numbers.
      a.kind = K::IntList;
      for (const JsonRef& item : v.items()) {
        auto [ikey, iv] = item.as_union();
        if (ikey == "as_int") {
          a.ints.push_back(iv.as_int());
          continue;
        }
        if (ikey != "as_name") item.fail("unsupported list entry " + quote_untrusted(ikey, 40));
        const Value* sym = use(iv.as_string(), iv, false);
        if (!sym->hint) item.fail("a symbolic size without a recorded value is not supported");
        a.ints.push_back(*sym->hint);
      }
      return a;
    }
    j.fail("argument kind " + quote_untrusted(key, 40) + " is not supported");
  }

  // ---- graph inputs ----

  void parse_inputs(const JsonRef& graph_inputs, const JsonRef& specs) {
    auto ins = graph_inputs.items();
    auto sp = specs.items();
    if (ins.size() != sp.size())
      specs.fail(std::to_string(sp.size()) + " input specs for " + std::to_string(ins.size()) + " graph inputs");
    for (size_t i = 0; i < sp.size(); ++i) {
      auto [kind, spec] = sp[i].as_union();
      GraphInput in;
      std::string name;
      if (kind == "user_input") {
        auto [akey, arg] = spec.at("arg").as_union();
        if (akey != "as_tensor")
          spec.fail("user input " + std::to_string(i) + " is " + quote_untrusted(akey, 40) +
                    "; only tensor inputs are supported");
        name = arg.at("name").as_string();
        in.kind = InputKind::User;
      } else if (kind == "parameter") {
        name = spec.at("arg").at("name").as_string();
        in.fqn = spec.at("parameter_name").as_string();
        in.kind = InputKind::Parameter;
      } else if (kind == "buffer") {
        name = spec.at("arg").at("name").as_string();
        in.fqn = spec.at("buffer_name").as_string();
        in.kind = InputKind::Buffer;
      } else if (kind == "tensor_constant") {
        name = spec.at("arg").at("name").as_string();
        in.fqn = spec.at("tensor_constant_name").as_string();
        in.kind = InputKind::Constant;
      } else {
        sp[i].fail("input kind " + quote_untrusted(kind, 40) +
                   " is not supported (only user inputs, parameters, buffers and tensor constants)");
      }
      // The graph's placeholder list and the signature must agree.
      auto [gkey, garg] = ins[i].as_union();
      if (gkey != "as_tensor" || garg.at("name").as_string() != name)
        ins[i].fail("graph input does not match input spec " + std::to_string(i) + " (" + quote_untrusted(name) + ")");
      in.value = define_tensor(name, sp[i]);
      if (in.kind != InputKind::User) load_storage(in, kind == "buffer" ? spec.find("persistent") : std::nullopt);
      g_.inputs.push_back(std::move(in));
    }
  }

  // ---- weights and constants ----

  // Tensors that share a stored entry share its bytes (the same data pointer), each cut to its own
  // extent: give each the largest, since the weights file places one storage once per pointer.
  void share_storage_extents() {
    std::unordered_map<const uint8_t*, size_t> extent;
    for (const GraphInput& in : g_.inputs)
      if (in.storage.data) extent[in.storage.data] = std::max(extent[in.storage.data], in.storage.size);
    for (GraphInput& in : g_.inputs)
      if (in.storage.data) in.storage.size = extent[in.storage.data];
  }

  struct Config {
    bool loaded = false;
    std::optional<nlohmann::json> doc;  // nullopt: the file is absent
  };

  const nlohmann::json* config(const char* entry, Config& c) {
    if (!c.loaded) {
      c.loaded = true;
      if (auto blob = archive_.read(entry)) c.doc = parse_json_checked(*blob, archive_.describe(entry));
    }
    return c.doc ? &*c.doc : nullptr;
  }

  // Finds `fqn` in a config file ({"config": {fqn: {...}}}); nullptr when absent.
  const nlohmann::json* find_in_config(const char* entry, Config& c, const std::string& fqn) {
    const nlohmann::json* doc = config(entry, c);
    if (!doc) return nullptr;
    JsonRef root(*doc, "");
    JsonRef cfg = root.at("config");
    if (!cfg.is_object()) cfg.fail("expected an object");
    auto it = cfg.raw().find(fqn);
    return it == cfg.raw().end() ? nullptr : &*it;
  }

  void load_storage(GraphInput& in, std::optional<JsonRef> persistent) {
    // Parameters and persistent buffers are weights; non-persistent buffers and lifted tensor
    // constants are constants. Look in the expected file first, then in the other.
    bool is_constant = in.kind == InputKind::Constant ||
                       (in.kind == InputKind::Buffer && persistent && persistent->raw().is_boolean() &&
                        !persistent->raw().get<bool>());
    const char* entries[2] = {kWeightsConfig, kConstantsConfig};
    const char* dirs[2] = {kWeightsDir, kConstantsDir};
    Config* configs[2] = {&weights_config_, &constants_config_};
    int order[2] = {is_constant ? 1 : 0, is_constant ? 0 : 1};
    const nlohmann::json* entry = nullptr;
    int which = order[0];
    for (int k : order) {
      if ((entry = find_in_config(entries[k], *configs[k], in.fqn))) {
        which = k;
        break;
      }
    }
    std::string what = (in.kind == InputKind::Parameter ? "parameter " : in.kind == InputKind::Buffer ? "buffer " : "constant ") +
                       quote_untrusted(in.fqn);
    if (!entry) {
      const char* expected = entries[order[0]];
      if (!config(expected, *configs[order[0]]))
        throw UserError(what + " is missing: " + archive_.describe(expected) + " does not exist");
      throw UserError(what + " is missing: it is not listed in " + archive_.describe(expected));
    }
    JsonRef e(*entry, std::string(entries[which]) + ":config[" + quote_untrusted(in.fqn, 40) + "]");
    try {
      load_storage_entry(in, e, what, dirs[which]);
    } catch (const UserError& err) {
      if (std::string_view(err.what()).rfind(what, 0) == 0) throw;
      throw UserError(what + ": " + err.what());
    }
  }

  void load_storage_entry(GraphInput& in, const JsonRef& e, const std::string& what, const char* dir) {
    if (auto pickle = e.find("use_pickle"); pickle && pickle->as_bool())
      throw UserError(what + " is stored as a pickle (use_pickle), which foundryc does not read; "
                      "re-export the model with torch>=2.9 via torch.export.save");
    const std::string& file = e.at("path_name").as_string();
    if (!is_plain_file_name(file)) e.at("path_name").fail("not a plain file name: " + quote_untrusted(file));
    TensorType meta = parse_tensor_meta(e.at("tensor_meta"));
    if (meta.has_symbolic_sizes()) e.at("tensor_meta").fail("symbolic sizes in a stored tensor");
    std::string entry_name = std::string(dir) + file;
    std::optional<uint64_t> stored = archive_.size(entry_name);
    if (!stored) throw UserError(what + " is missing: its file " + archive_.describe(entry_name) + " does not exist");
    // The declared layout must fit in the entry's size before anything reads (or inflates) it.
    int64_t need = storage_bytes_needed(meta);
    if (static_cast<uint64_t>(need) > *stored)
      throw UserError(what + ": its declared size " + type_to_string(meta) + " (with its strides and offset) needs " +
                      std::to_string(need) + " bytes, but " + archive_.describe(entry_name) + " holds only " +
                      std::to_string(*stored));
    // A storage may be larger than its tensor (a view's is), and a hostile one much larger: only
    // the bytes the tensor reaches are kept, and only they go into weights.bin.
    std::optional<Blob> blob = archive_.read(entry_name, static_cast<uint64_t>(need));
    if (!blob || blob->size < static_cast<uint64_t>(need))
      throw UserError(what + ": " + archive_.describe(entry_name) + " holds fewer bytes than it declares");
    blob->size = static_cast<size_t>(need);
    TensorType& t = in.value->type;
    if (t.dtype != meta.dtype || t.sizes != meta.sizes || t.has_symbolic_sizes())
      throw UserError(what + ": the stored tensor is " + type_to_string(meta) + " but the graph declares " +
                      type_to_string(t));
    t.strides = meta.strides;
    t.storage_offset = meta.storage_offset;
    in.storage = *blob;
  }

  // ---- nodes ----

  void parse_node(const JsonRef& j) {
    const std::string& source_name = j.at("name").as_string();
    const std::string& target = j.at("target").as_string();
    std::string context = "node " + quote_untrusted(source_name, 60) + " (" + shown_target(target) + ")";
    try {
      if (target.rfind("_operator.", 0) == 0) return parse_size_arithmetic(j);
      if (target == kAutocast || target == kSetGrad) return parse_wrapped_region(j, target == kAutocast);
      auto node = std::make_unique<Node>();
      node->name = prefix_ + source_name;
      node->source_name = prefix_ + source_name;
      node->target = node_target(target);
      // ATen's ops are in the table by their short names, other libraries' by their whole ones.
      if (target.rfind("torch.ops.", 0) == 0) node->op = find_op(target);
      if (node->op) node->target = node->op->name;

      std::vector<RawArg> raw;
      for (const JsonRef& input : j.at("inputs").items()) {
        RawArg r;
        r.name = input.at("name").as_string();
        r.value = parse_arg(input.at("arg"));
        if (auto kind = input.find("kind")) r.kwarg_only = kind->as_int() == 2;
        raw.push_back(std::move(r));
      }
      if (node->op) {
        node->args = bind_arguments(*node->op, raw, &node->arg_names);
      } else {
        for (RawArg& r : raw) {
          node->arg_names.push_back(r.name);
          node->args.push_back(std::move(r.value));
        }
      }
      for (const JsonRef& out : j.at("outputs").items()) {
        auto [key, v] = out.as_union();
        if (key == "as_tensor") {
          node->outputs.push_back(define_tensor(v.at("name").as_string(), v));
        } else if (key == "as_tensors") {
          for (const JsonRef& item : v.items()) node->outputs.push_back(define_tensor(item.at("name").as_string(), item));
        } else if (key == "as_sym_int" || key == "as_sym_bool") {
          auto [skey, sv] = v.as_union();
          if (skey != "as_name") v.fail("expected a named symbolic output");
          node->outputs.push_back(define_symbolic(sv.as_string(), key == "as_sym_int" ? DType::Int64 : DType::Bool, sv));
        } else {
          out.fail("output kind " + quote_untrusted(key, 40) + " is not supported");
        }
      }
      g_.append_node(std::move(node));
    } catch (const UserError& e) {
      throw UserError(context + ": " + e.what());
    }
  }

  // A region under `torch.autocast(..., enabled=False)` or `torch.set_grad_enabled(...)` (timm's
  // EfficientViT keeps its attention in float32 so): the training IR wraps it in a higher-order
  // op over a subgraph, which run_decompositions() inlines. So does this: the subgraph's nodes join
  // the graph (their names prefixed with the wrapper's), its inputs bound to the operands, its
  // outputs standing for the wrapper's. Grad mode means nothing at inference; an enabled autocast
  // would change dtypes, and is refused.
  static constexpr const char* kAutocast = "torch.ops.higher_order.wrap_with_autocast";
  static constexpr const char* kSetGrad = "torch.ops.higher_order.wrap_with_set_grad_enabled";

  void parse_wrapped_region(const JsonRef& j, bool autocast) {
    auto inputs = j.at("inputs").items();
    const size_t graph_at = autocast ? 4 : 1;  // (device, dtype, enabled, cache_enabled) or (enabled)
    if (inputs.size() <= graph_at) j.at("inputs").fail("expected the wrapper's arguments and a subgraph");
    if (autocast && inputs[2].at("arg").at("as_bool").as_bool())
      inputs[2].fail("an enabled torch.autocast region is not supported (it computes in another dtype); export with "
                     "autocast off");
    auto [gkey, sub] = inputs[graph_at].at("arg").as_union();
    if (gkey != "as_graph") inputs[graph_at].fail("expected a subgraph");
    JsonRef graph = sub.at("graph");
    auto params = graph.at("inputs").items();
    if (params.size() != inputs.size() - graph_at - 1) graph.at("inputs").fail("the subgraph's inputs do not match the operands");
    // The subgraph sees its parameters only, under its own names.
    std::unordered_map<std::string, Value*> scope;
    for (size_t k = 0; k < params.size(); ++k) {
      auto [pkey, pv] = params[k].as_union();
      if (pkey != "as_tensor") params[k].fail("expected a tensor parameter");
      Value* operand = parse_arg(inputs[graph_at + 1 + k].at("arg")).tensor;
      if (!operand) inputs[graph_at + 1 + k].fail("expected a tensor operand");
      scope[pv.at("name").as_string()] = operand;
    }
    auto saved = std::make_tuple(std::move(by_file_name_), tensor_values_, sym_int_values_, sym_bool_values_, prefix_);
    by_file_name_ = std::move(scope);
    tensor_values_.emplace(graph.at("tensor_values"));
    sym_int_values_.reset();
    sym_bool_values_.reset();
    if (auto v = graph.find("sym_int_values")) sym_int_values_.emplace(*v);
    if (auto v = graph.find("sym_bool_values")) sym_bool_values_.emplace(*v);
    prefix_ += j.at("name").as_string() + ".";
    for (const JsonRef& node : graph.at("nodes").items()) parse_node(node);
    std::vector<Value*> results;
    for (const JsonRef& out : graph.at("outputs").items()) results.push_back(parse_arg(out).tensor);
    std::tie(by_file_name_, tensor_values_, sym_int_values_, sym_bool_values_, prefix_) = std::move(saved);
    std::vector<std::string> names;
    for (const JsonRef& out : j.at("outputs").items()) {
      auto [key, v] = out.as_union();
      if (key == "as_tensor") names.push_back(v.at("name").as_string());
      else if (key == "as_tensors")
        for (const JsonRef& item : v.items()) names.push_back(item.at("name").as_string());
      else out.fail("output kind " + quote_untrusted(key, 40) + " is not supported");
    }
    if (names.size() != results.size() || std::find(results.begin(), results.end(), nullptr) != results.end())
      j.at("outputs").fail("the wrapper's outputs do not match its subgraph's tensor outputs");
    for (size_t k = 0; k < names.size(); ++k) {
      check_fresh(names[k], j);
      by_file_name_[names[k]] = results[k];
    }
  }

  // Integer arithmetic on sizes (`_operator.mul(sym_size, 3)`, from Python code such as
  // x.reshape(x.shape[0] * 3, -1)): not kept as a node. Its result is recorded at its export hint
  // for the shape rules; lowerings with dynamic sizes take sizes from the recorded symbolic types,
  // and any lowering that used the hint instead is caught by the lowering's size check.
  void parse_size_arithmetic(const JsonRef& j) {
    static const std::set<std::string> kOps = {"_operator.add", "_operator.sub", "_operator.mul",
                                               "_operator.floordiv", "_operator.mod", "_operator.neg"};
    const std::string& target = j.at("target").as_string();
    if (!kOps.count(target)) j.at("target").fail("operator " + quote_untrusted(target, 40) + " is not supported");
    for (const JsonRef& input : j.at("inputs").items()) parse_arg(input.at("arg"));  // names must exist
    auto outputs = j.at("outputs").items();
    if (outputs.size() != 1) j.at("outputs").fail("size arithmetic has one output");
    auto [key, v] = outputs[0].as_union();
    if (key != "as_sym_int") outputs[0].fail("size arithmetic must produce a symbolic int");
    auto [skey, sv] = v.as_union();
    if (skey != "as_name") v.fail("expected a named symbolic output");
    Value* out = define_symbolic(sv.as_string(), DType::Int64, sv);
    if (!out->hint) sv.fail("size arithmetic without a recorded value is not supported");
    size_arithmetic_.insert(out);
  }

  // ---- graph outputs ----

  void parse_outputs(const JsonRef& graph_outputs, const JsonRef& specs) {
    auto outs = graph_outputs.items();
    auto sp = specs.items();
    if (outs.size() != sp.size())
      specs.fail(std::to_string(sp.size()) + " output specs for " + std::to_string(outs.size()) + " graph outputs");
    for (size_t i = 0; i < sp.size(); ++i) {
      auto [kind, spec] = sp[i].as_union();
      GraphOutput o;
      std::string name;
      if (kind == "user_output") {
        auto [akey, arg] = spec.at("arg").as_union();
        if (akey != "as_tensor")
          spec.fail("output " + std::to_string(i) + " is " + quote_untrusted(akey, 40) +
                    "; only tensor outputs are supported");
        name = arg.at("name").as_string();
        o.kind = OutputKind::User;
      } else if (kind == "buffer_mutation") {
        name = spec.at("arg").at("name").as_string();
        o.target = spec.at("buffer_name").as_string();
        o.kind = OutputKind::BufferMutation;
      } else if (kind == "user_input_mutation") {
        name = spec.at("arg").at("name").as_string();
        o.target = spec.at("user_input_name").as_string();
        o.kind = OutputKind::UserInputMutation;
      } else {
        sp[i].fail("output kind " + quote_untrusted(kind, 40) + " is not supported");
      }
      auto [gkey, garg] = outs[i].as_union();
      if (gkey != "as_tensor" || garg.at("name").as_string() != name)
        outs[i].fail("graph output does not match output spec " + std::to_string(i) + " (" + quote_untrusted(name) + ")");
      o.value = use(name, sp[i], true);
      g_.outputs.push_back(std::move(o));
    }
  }

  Archive& archive_;
  Graph g_;
  std::optional<JsonRef> tensor_values_;
  std::optional<JsonRef> nodes_;
  std::optional<JsonRef> sym_int_values_, sym_bool_values_;
  int64_t current_node_ = -1;
  std::unordered_map<std::string, Value*> by_file_name_;
  std::string prefix_;  // of the names of an inlined subgraph's values and nodes (parse_wrapped_region)
  std::set<const Value*> size_arithmetic_;  // results of _operator.* nodes (not kept)
  Config weights_config_, constants_config_;
};

}  // namespace

bool starts_with_zip_magic(const std::string& path) {
  std::string error;
  int fd = open_regular_file(path, error);
  if (fd < 0) return false;
  unsigned char magic[4] = {0, 0, 0, 0};
  ssize_t n = ::read(fd, magic, 4);
  ::close(fd);
  return n == 4 && magic[0] == 'P' && magic[1] == 'K' &&
         ((magic[2] == 3 && magic[3] == 4) || (magic[2] == 5 && magic[3] == 6));
}

void check_supported_ops(const Graph& g) {
  for (const auto& n : g.nodes) {
    if (n->op) continue;
    const std::string shown = shown_target(n->target);
    throw UserError("node " + quote_untrusted(n->source_name, 60) + " (" + shown + "): operator " + shown +
                    " is not supported (foundryc --list-ops lists the supported operators)");
  }
}

Graph load_model(const std::string& path) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw UserError(display_path(path) + ": no such file or directory");

  std::unique_ptr<Archive> archive;
  std::optional<Blob> json_blob;
  std::string json_desc;
  if (fs::is_directory(st)) {
    // The archive's root folder, or a folder that holds just that root folder (unzip's output).
    fs::path root = path;
    if (!fs::exists(root / kModelJson, ec)) {
      std::vector<fs::path> candidates;
      for (const auto& entry : fs::directory_iterator(root, ec))
        if (entry.is_directory(ec) && fs::exists(entry.path() / kModelJson, ec)) candidates.push_back(entry.path());
      if (candidates.size() != 1)
        throw UserError(display_path(path) + ": not an extracted .pt2 archive (no models/model.json" +
                        (candidates.size() > 1 ? " in a single root folder)" : ")"));
      root = candidates[0];
    }
    archive = open_folder_archive(root.string());
    json_blob = archive->read(kModelJson);
    json_desc = archive->describe(kModelJson);
  } else if (!fs::is_regular_file(st)) {
    // Before reading a byte: opening a FIFO would wait for a writer forever.
    throw UserError(display_path(path) + ": not a regular file or folder");
  } else if (starts_with_zip_magic(path)) {
    archive = open_zip_archive(path);
    FileFacts facts = zip_file_facts(*archive);
    if (!facts.export_program) throw UserError(display_path(path) + ": " + not_an_export_archive(facts));
    json_blob = archive->read(kModelJson);
    json_desc = archive->describe(kModelJson);
    if (!json_blob) throw UserError(display_path(path) + ": the archive has no models/model.json");
  } else {
    // A bare models/model.json: weights come from the archive layout around it.
    fs::path dir = fs::path(path).parent_path();
    if (dir.empty()) dir = ".";
    archive = open_folder_archive((dir / "..").lexically_normal().string());
    json_blob = map_file(path);
    json_desc = display_path(path);
    if (json_blob->size == 0 || json_blob->data[0] != '{') {
      // Skip leading whitespace before deciding it is not JSON.
      size_t i = 0;
      while (i < json_blob->size && std::isspace(json_blob->data[i])) ++i;
      if (i == json_blob->size || json_blob->data[i] != '{')
        throw UserError(display_path(path) + ": " + not_an_export_archive(plain_file_facts(*json_blob)));
    }
  }
  if (!json_blob) throw UserError(json_desc + ": not found");

  nlohmann::json doc = parse_json_checked(*json_blob, json_desc);
  try {
    Loader loader(*archive);
    return loader.load(doc);
  } catch (const UserError& e) {
    throw UserError(display_path(path) + ": " + e.what());
  }
}

}  // namespace foundry
