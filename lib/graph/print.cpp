// graph.txt: a stable, FX-like text form of the graph, one node a line. Only our own sanitized
// names appear verbatim; any other text from the file goes through quote_untrusted.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "foundry/graph/graph.h"
#include "foundry/graph/op_schema.h"
#include "foundry/support/error.h"

namespace foundry {

std::string format_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

std::string value_ref(const Value* v) { return v ? "%" + v->name : "None"; }

std::string layout_name(int64_t code) {
  // torch.export's Layout enum: 7 is Strided, the only one a CPU dense graph uses.
  if (code == 7) return "torch.strided";
  return "layout(" + std::to_string(code) + ")";
}

std::string memory_format_name(int64_t code) {
  switch (code) {
    case 1: return "torch.contiguous_format";
    case 2: return "torch.channels_last";
    case 3: return "torch.channels_last_3d";
    case 4: return "torch.preserve_format";
    default: return "memory_format(" + std::to_string(code) + ")";
  }
}

template <typename T, typename F>
std::string list(const std::vector<T>& items, F&& f) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += f(items[i]);
  }
  return out + "]";
}

// Name as shown: ours when plain, quoted otherwise (opaque nodes keep the file's argument names).
std::string shown_name(const std::string& s) { return is_plain_name(s) ? s : quote_untrusted(s, 40); }

bool same_as_contiguous(const TensorType& t) {
  if (t.strides.empty()) return true;
  if (t.strides.size() != t.sizes.size()) return false;
  std::vector<int64_t> c = t.contiguous_strides();
  for (size_t i = 0; i < c.size(); ++i)
    if (t.sizes[i] > 1 && c[i] != t.strides[i]) return false;
  return true;
}

std::string value_decl(const Value* v) {
  std::string out = "%" + v->name + " : ";
  if (!v->is_tensor) return out + (v->type.dtype == DType::Bool ? "SymBool" : "SymInt");
  out += type_to_string(v->type);
  if (!same_as_contiguous(v->type))
    out += " strides=" + list(v->type.strides, [](int64_t s) { return std::to_string(s); });
  if (v->type.storage_offset != 0) out += " offset=" + std::to_string(v->type.storage_offset);
  return out;
}

std::string input_kind_name(InputKind k) {
  switch (k) {
    case InputKind::User: return "user";
    case InputKind::Parameter: return "param";
    case InputKind::Buffer: return "buffer";
    case InputKind::Constant: return "const";
  }
  return "?";
}

std::string output_kind_name(OutputKind k) {
  switch (k) {
    case OutputKind::User: return "user";
    case OutputKind::BufferMutation: return "buffer_mutation";
    case OutputKind::UserInputMutation: return "user_input_mutation";
  }
  return "?";
}

// "aten.add.Tensor" for registry ops; opaque nodes show their target (quoted unless plain).
std::string target_text(const Node& n) { return n.op ? qualified_op_name(n.op->name) : shown_target(n.target); }

}  // namespace

std::string arg_to_string(const Arg& a) {
  using K = Arg::Kind;
  switch (a.kind) {
    case K::None: return "None";
    case K::Tensor: return value_ref(a.tensor);
    case K::SymInt: return value_ref(a.tensor);
    case K::TensorList:
    case K::OptTensorList: return list(a.tensors, value_ref);
    case K::Int: return std::to_string(a.i);
    case K::IntList: return list(a.ints, [](int64_t v) { return std::to_string(v); });
    case K::Float: return format_double(a.f);
    case K::FloatList: return list(a.floats, format_double);
    case K::Bool: return a.i ? "True" : "False";
    case K::BoolList: return list(a.ints, [](int64_t v) { return std::string(v ? "True" : "False"); });
    case K::String: return quote_untrusted(a.s);
    case K::ScalarType: return "torch." + std::string(dtype_name(a.dtype));
    case K::Layout: return layout_name(a.i);
    case K::Device: return quote_untrusted(a.s);
    case K::MemoryFormat: return memory_format_name(a.i);
  }
  return "?";
}

std::string print_graph(const Graph& g) {
  std::ostringstream os;
  os << "graph(verifier=" << shown_name(g.verifier) << ", schema=" << g.schema_major << "."
     << g.schema_minor << ", torch=" << quote_untrusted(g.torch_version) << "):\n";
  for (const RangeConstraint& r : g.range_constraints) {
    os << "  range " << shown_name(r.symbol) << " : ["
       << (r.min == std::numeric_limits<int64_t>::min() ? std::string("-inf") : std::to_string(r.min)) << ", "
       << (r.max ? std::to_string(*r.max) : std::string("inf")) << "]\n";
  }
  for (const GraphInput& in : g.inputs) {
    os << "  input " << value_decl(in.value) << "  # " << input_kind_name(in.kind);
    if (!in.fqn.empty()) os << " " << quote_untrusted(in.fqn);
    os << "\n";
  }
  for (const auto& np : g.nodes) {
    const Node& n = *np;
    os << "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << value_decl(n.outputs[i]);
    if (!n.outputs.empty()) os << " = ";
    os << target_text(n) << "(";
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (i) os << ", ";
      bool named = !n.op;  // opaque nodes: every argument by its name in the file
      if (n.op && i < n.op->schema.args.size()) named = n.op->schema.args[i].kwarg_only;
      if (named && i < n.arg_names.size()) os << shown_name(n.arg_names[i]) << "=";
      os << arg_to_string(n.args[i]);
    }
    os << ")";
    if (!n.op) os << "  # opaque";
    os << "\n";
  }
  for (const GraphOutput& o : g.outputs) {
    os << "  output " << value_ref(o.value) << "  # " << output_kind_name(o.kind);
    if (!o.target.empty()) os << " " << quote_untrusted(o.target);
    os << "\n";
  }
  return os.str();
}

}  // namespace foundry
