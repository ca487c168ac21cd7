#include "codegen/externs.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>

#include "foundry/codegen/cpp_expr.h"

#include "foundry/support/error.h"

namespace foundry::codegen {

std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

std::string expr_list(const std::vector<ir::Expr>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + cpp_index(v[i], {});
  return s + "}";
}

std::set<std::string> size_symbols_of(const std::vector<ir::Expr>& exprs) {
  std::set<std::string> out;
  for (const auto& e : exprs)
    for (const auto& s : ir::free_symbols(e))
      if (ir::is_size_symbol(s)) out.insert(s);
  return out;
}

namespace {

bool all_const(const std::vector<ir::Expr>& v) {
  return std::all_of(v.begin(), v.end(), [](const ir::Expr& e) { return e.is_const(); });
}

// Declares an int64_t array (static when its values are compile-time constants); returns its name.
std::string array_decl(const std::string& prefix, const std::vector<ir::Expr>& values, std::ostringstream& decls,
                       int& counter) {
  std::string name = prefix + std::to_string(counter++);
  decls << "  " << (all_const(values) ? "static const" : "const") << " int64_t " << name << "[] = "
        << expr_list(values) << ";\n";
  return name;
}

std::vector<ir::Expr> exprs_of(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

std::string strided_arg(const ir::Operand& op, const std::string& ptr, std::ostringstream& decls,
                        int& counter, const std::string& type) {
  std::string s = array_decl("strides", op.strides, decls, counter);
  return "foundry_rt::Strided<" + type + ">{" + ptr + ", " + s + ", " + cpp_index(op.offset, {}) + "}";
}

// The portable-loop call of one extern kernel over the given buffer pointers.
std::string extern_call(const ir::LoopNode& node, const std::map<const ir::Buffer*, std::string>& ptrs,
                        int& counter) {
  std::string type = storage_type(node.output->dtype);
  if (!is_floating(node.output->dtype) || type == "uint16_t")
    throw UserError("extern kernel " + ir::extern_name(node.call) + " on " + std::string(dtype_name(node.output->dtype)) +
                    " is not supported by the C++ backend");
  std::ostringstream decls, out;
  const std::vector<ir::Expr>& out_shape = node.output->sizes;
  const std::string& dst = ptrs.at(node.output);
  auto ptr = [&](const ir::Operand& op) { return ptrs.at(op.buffer); };
  auto num = [](const ir::Expr& e) { return cpp_index(e, {}); };
  if (const auto* call = std::get_if<ir::Matmul>(&node.call.op)) {
    bool batched = call->batched, bias = call->bias.has_value();
    const auto& a = call->a;
    const auto& b = call->b;
    ir::Expr batch = batched ? out_shape[0] : ir::Expr(1), M = out_shape[batched], N = out_shape[batched + 1];
    ir::Expr K = a.sizes.back();
    std::string a_arg = strided_arg(a, ptr(a), decls, counter, type);
    std::string b_arg = strided_arg(b, ptr(b), decls, counter, type);
    std::string bias_decl = "nullptr";
    if (bias) {
      std::string bias_var = "bias" + std::to_string(counter);
      std::string bias_arg = strided_arg(*call->bias, ptr(*call->bias), decls, counter, type);
      decls << "  const auto " << bias_var << " = " << bias_arg << ";\n";
      bias_decl = "&" + bias_var;
    }
    auto param = [&](double value) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", value);
      return std::string(buf);
    };
    out << decls.str() << "  foundry_rt::matmul<" << type << ">(" << num(batch) << ", " << num(M) << ", " << num(N)
        << ", " << num(K) << ", " << a_arg << ", " << b_arg << ", " << bias_decl << ", " << param(call->alpha) << ", "
        << param(call->beta) << ", " << (batched ? "true" : "false") << ", " << dst << ");\n";
    return out.str();
  }
  if (const auto* call = std::get_if<ir::Convolution>(&node.call.op)) {
    // 1-D and 2-D convolutions become 3-D ones with leading size-1 spatial dims.
    const auto& x = call->input;
    const auto& w = call->weight;
    const ir::Operand bias = call->bias ? *call->bias : ir::Operand{};
    size_t spatial = x.sizes.size() - 2;
    if (spatial < 1 || spatial > 3) throw UserError("convolution with " + std::to_string(spatial) + " spatial dims is not supported");
    auto to3d = [&](std::vector<ir::Expr> v, int64_t fill, size_t lead) {
      v.insert(v.begin() + static_cast<std::ptrdiff_t>(lead), 3 - spatial, ir::Expr(fill));
      return v;
    };
    auto arr = [&](const std::vector<ir::Expr>& v) { return array_decl("params", v, decls, counter); };
    std::string xs = arr(to3d(x.sizes, 1, 2)), ws = arr(to3d(w.sizes, 1, 2)), os = arr(to3d(out_shape, 1, 2));
    std::string xst = arr(to3d(x.strides, 0, 2)), wst = arr(to3d(w.strides, 0, 2));
    std::string st = arr(to3d(exprs_of(call->stride), 1, 0)), pad = arr(to3d(exprs_of(call->padding), 0, 0)),
                dil = arr(to3d(exprs_of(call->dilation), 1, 0));
    std::string bias_ptr = bias.buffer ? ptrs.at(bias.buffer) : "nullptr";
    std::string bias_stride = bias.buffer ? num(bias.strides[0]) : "0", bias_off = bias.buffer ? num(bias.offset) : "0";
    out << decls.str() << "  foundry_rt::conv3d<" << type << ">(" << xs << ", " << ws << ", " << os << ", " << ptr(x)
        << ", " << xst << ", " << num(x.offset) << ", " << ptr(w) << ", " << wst << ", " << num(w.offset) << ", "
        << bias_ptr << ", " << bias_stride << ", " << bias_off << ", " << st << ", " << pad << ", " << dil << ", "
        << call->groups << ", " << dst << ");\n";
    return out.str();
  }
  throw InternalError("bug: extern kernel " + ir::extern_name(node.call) + " has no portable loops");
}

// The folded activation as the runtime's enumerator.
std::string activation_enum(ir::Activation activation) {
  switch (activation) {
    case ir::Activation::None: return "foundry_rt::Activation::None";
    case ir::Activation::Relu: return "foundry_rt::Activation::Relu";
    case ir::Activation::Tanh: return "foundry_rt::Activation::Tanh";
    case ir::Activation::Sigmoid: return "foundry_rt::Activation::Sigmoid";
  }
  throw InternalError("bug: unknown activation on a library call");
}

// The dynamic row count of a 2-d matrix product whose other sizes are static (oneDNN builds it
// with a runtime dimension); nullopt otherwise.
std::optional<ir::Expr> dynamic_rows(const ir::LoopNode& node) {
  const auto* matmul = std::get_if<ir::Matmul>(&node.call.op);
  if (!matmul || matmul->batched) return std::nullopt;
  const auto& out = node.output->sizes;
  if (out.size() != 2 || out[0].is_const() || !out[1].is_const()) return std::nullopt;
  return out[0];
}

// Sizes as a oneDNN dims list: `rows` (if any) becomes DNNL_RUNTIME_DIM_VAL.
std::string dnnl_dims(const std::vector<ir::Expr>& v, const std::optional<ir::Expr>& rows) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + (rows && v[i] == *rows ? std::string("DNNL_RUNTIME_DIM_VAL") : cpp_index(v[i], {}));
  return s + "}";
}

// The oneDNN build statement of one extern call (into state member `member`), or "" when the call
// has no oneDNN form here (other dtypes, alpha/beta other than 1).
std::string dnnl_build(const ir::LoopNode& node, const std::string& member, const WeightsLayout& weights) {
  if (node.output->dtype != DType::Float32) return "";
  // oneDNN primitives are built once, at creation: static shapes, or a matrix product whose row
  // count alone is dynamic.
  std::optional<ir::Expr> rows = dynamic_rows(node);
  auto fixed = [&](const std::vector<ir::Expr>& v) {
    return std::all_of(v.begin(), v.end(), [&](const ir::Expr& e) { return e.is_const() || (rows && e == *rows); });
  };
  if (!fixed(node.output->sizes)) return "";
  for (const ir::Operand* op : ir::operands(node.call))
    if (!fixed(op->sizes) || !all_const(op->strides) || !op->offset.is_const()) return "";
  std::string out = dnnl_dims(node.output->sizes, rows);
  // Empty tensors go to the portable loops (oneDNN rejects or mishandles zero-size dims).
  auto empty = [](const std::vector<ir::Expr>& v) {
    return std::any_of(v.begin(), v.end(), [](const ir::Expr& e) { return e.is_const(0); });
  };
  if (empty(node.output->sizes)) return "";
  for (const ir::Operand* op : ir::operands(node.call))
    if (empty(op->sizes)) return "";
  std::ostringstream b;
  if (const auto* call = std::get_if<ir::Convolution>(&node.call.op)) {
    const auto& x = call->input;
    const auto& w = call->weight;
    const ir::Operand bias = call->bias ? *call->bias : ir::Operand{};
    std::string wdata = "nullptr";
    if (w.buffer->kind == ir::BufferKind::Constant)
      wdata = "reinterpret_cast<const float*>(weights + " + std::to_string(weights.offset_of.at(w.buffer)) + ") + " +
              cpp_index(w.offset, {});
    b << "  s->" << member << ".build(" << expr_list(x.sizes) << ", " << expr_list(x.strides) << ", " << expr_list(w.sizes)
      << ", " << expr_list(w.strides) << ", " << out << ", " << call->groups << ", "
      << (bias.buffer ? "true" : "false") << ", " << (bias.buffer ? cpp_index(bias.strides[0], {}) : "0") << ", "
      << int_list(call->stride) << ", " << int_list(call->padding) << ", " << int_list(call->dilation) << ", "
      << wdata;
    if (node.call.activation != ir::Activation::None) b << ", " << activation_enum(node.call.activation);
    b << ");\n";
    return b.str();
  }
  const ir::Matmul& call = std::get<ir::Matmul>(node.call.op);
  bool bias = call.bias.has_value();
  if (call.alpha != 1.0 || (bias && call.beta != 1.0)) return "";
  const auto& a = call.a;
  const auto& m = call.b;
  // A batch broadcast by stride 0 (one matrix for every batch entry) is oneDNN's batch of size 1,
  // given the plain stride so that oneDNN sees a row-major layout.
  auto batch_sizes = [&](std::vector<ir::Expr> sizes, const std::vector<ir::Expr>& strides) {
    if (call.batched && strides[0].is_const(0)) sizes[0] = 1;
    return sizes;
  };
  auto batch_strides = [&](const std::vector<ir::Expr>& sizes, std::vector<ir::Expr> strides) {
    if (call.batched && strides[0].is_const(0)) strides[0] = sizes[1] * sizes[2];
    return strides;
  };
  b << "  s->" << member << ".build(" << dnnl_dims(batch_sizes(a.sizes, a.strides), rows) << ", "
    << expr_list(batch_strides(a.sizes, a.strides)) << ", " << expr_list(batch_sizes(m.sizes, m.strides)) << ", "
    << expr_list(batch_strides(m.sizes, m.strides)) << ", " << out << ", " << (bias ? "true" : "false") << ", ";
  if (bias) {
    // oneDNN broadcasts a bias over dims of size 1: stride-0 dims become size 1.
    const auto& op = *call.bias;
    std::vector<ir::Expr> sizes = op.sizes;
    for (size_t d = 0; d < sizes.size(); ++d)
      if (op.strides[d].is_const(0)) sizes[d] = 1;
    b << dnnl_dims(sizes, rows) << ", " << expr_list(op.strides);
  } else {
    b << "{}, {}";
  }
  if (node.call.activation != ir::Activation::None) b << ", " << activation_enum(node.call.activation);
  b << ");\n";
  return b.str();
}

}  // namespace

ExternsSource generate_externs(const ir::LoopProgram& program, const sched::Schedule& schedule,
                               const WeightsLayout& weights, const std::string& n,
                               const std::map<const ir::Buffer*, std::string>& wrapper_ptrs) {
  ExternsSource out;
  std::ostringstream state, builds, functions, decls;
  int index = 0, counter = 0;
  for (const auto& step : schedule.steps) {
    if (!step.is_extern) continue;
    const ir::LoopNode& node = *step.extern_node;
    std::string fn = "call" + std::to_string(index), member = "extern" + std::to_string(index);
    ++index;
    // Parameters: each operand buffer once, then the output.
    std::vector<const ir::Buffer*> params;
    for (const ir::Operand* op : ir::operands(node.call))
      if (std::find(params.begin(), params.end(), op->buffer) == params.end()) params.push_back(op->buffer);
    std::map<const ir::Buffer*, std::string> local;
    std::string signature, call = "  " + n + "_externs::" + fn + "(model->externs";
    for (size_t k = 0; k < params.size(); ++k) {
      local[params[k]] = "in" + std::to_string(k);
      signature += ", const " + storage_type(params[k]->dtype) + "* in" + std::to_string(k);
      call += ", " + wrapper_ptrs.at(params[k]);
    }
    local[node.output] = "out";
    signature += ", " + storage_type(node.output->dtype) + "* out";
    call += ", " + wrapper_ptrs.at(node.output);
    // Dynamic sizes the call's shapes depend on, passed by value (the wrapper has them in scope).
    std::vector<ir::Expr> shapes = node.output->sizes;
    for (const ir::Operand* op : ir::operands(node.call)) {
      shapes.insert(shapes.end(), op->sizes.begin(), op->sizes.end());
      shapes.insert(shapes.end(), op->strides.begin(), op->strides.end());
      shapes.push_back(op->offset);
    }
    for (const std::string& sym : size_symbols_of(shapes)) {
      signature += ", int64_t " + sym;
      call += ", " + sym;
    }
    call += ");\n";
    out.calls.push_back(call);
    decls << "void " << fn << "(const State* s" << signature << ");\n";

    std::string build = dnnl_build(node, member, weights);
    std::string fallback = extern_call(node, local, counter);
    if (node.call.activation != ir::Activation::None) {
      ir::Expr numel(1);
      for (const auto& size : node.output->sizes) numel = numel * size;
      fallback += "  foundry_rt::apply_activation(" + activation_enum(node.call.activation) + ", out, " + cpp_index(numel, {}) + ");\n";
    }
    functions << "// " << ir::extern_name(node.call)
              << (node.call.activation == ir::Activation::None ? "" : " + " + ir::activation_name(node.call.activation))
              << ": ";
    for (const auto& o : node.origins) functions << o << " ";
    functions << "\nvoid " << fn << "(const State* s" << signature << ") {\n";
    if (!build.empty()) {
      const bool conv = std::holds_alternative<ir::Convolution>(node.call.op);
      state << "  foundry_rt::dnnl_glue::" << (conv ? "Conv " : "Matmul ") << member << ";\n";
      builds << build;
      std::string a, w, bias = "nullptr";
      auto pointer = [&](const ir::Operand& op) { return local[op.buffer] + " + " + cpp_index(op.offset, {}); };
      if (const auto* call = std::get_if<ir::Convolution>(&node.call.op)) {
        a = pointer(call->input);
        w = pointer(call->weight);
        if (call->bias) bias = pointer(*call->bias);
      } else {
        const auto& matmul = std::get<ir::Matmul>(node.call.op);
        a = pointer(matmul.a);
        w = pointer(matmul.b);
        if (matmul.bias) bias = pointer(*matmul.bias);
      }
      std::optional<ir::Expr> rows = dynamic_rows(node);
      std::string rows_arg = rows ? ", " + cpp_index(*rows, {}) : "";
      functions << "  if (s->" << member << ".ok) {\n    try {\n      s->" << member << ".run(" << a << ", " << w
                << ", " << bias << ", out" << rows_arg << ");\n      return;\n    } catch (const dnnl::error&) {\n    }\n  }\n";
    }
    functions << fallback << "}\n\n";
  }
  if (index == 0) return out;
  std::ostringstream cpp;
  cpp << "// Extern kernels of the model `" << n << "`: oneDNN primitives built once at creation, with\n"
      << "// portable loops as the fallback. Generated by foundryc " << FOUNDRY_VERSION << ".\n"
      << "#include <new>\n\n#include \"foundry_dnnl.h\"\n#include \"foundry_externs.h\"\n\n"
      << "namespace " << n << "_externs {\n\nstruct State {\n" << state.str() << "};\n\n"
      << "State* create(const uint8_t* weights) {\n  auto* s = new (std::nothrow) State();\n  if (!s) return nullptr;\n"
      << "  (void)weights;\n" << builds.str() << "  return s;\n}\n\nvoid destroy(State* s) { delete s; }\n\n"
      << functions.str() << "}  // namespace " << n << "_externs\n";
  out.cpp = cpp.str();
  out.wrapper_decls = "namespace " + n + "_externs {  // externs.cpp\nstruct State;\nState* create(const uint8_t* weights);\n"
                      "void destroy(State* s);\n" + decls.str() + "}  // namespace " + n + "_externs\n\n";
  return out;
}

}  // namespace foundry::codegen
