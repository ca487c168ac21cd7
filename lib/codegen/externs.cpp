#include "codegen/externs.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>

#include "foundry/codegen/cpp_expr.h"
#include "foundry/ir/print.h"
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

using ir::overloaded;

// LAPACK and sorting calls have their own statements (linalg_statements, sort_statements):
// neither oneDNN nor portable loops.
constexpr const char* kOwnStatements = "bug: a LAPACK or sort call reached the oneDNN / portable-loop generator";

bool all_const(const std::vector<ir::Expr>& v) {
  return std::all_of(v.begin(), v.end(), [](const ir::Expr& e) { return e.is_const(); });
}


// --- the portable loops (foundry_externs.h) ----------------------------------------------------

// Declares the int64_t array `name` (static when its values are compile-time constants).
void array_decl(const std::string& name, const std::vector<ir::Expr>& values, std::ostringstream& decls) {
  decls << "  " << (all_const(values) ? "static const" : "const") << " int64_t " << name << "[] = "
        << expr_list(values) << ";\n";
}

std::vector<ir::Expr> exprs_of(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

// Declares the strided view `name` of an operand (and its strides array `name`_strides).
void strided_decl(const std::string& name, const ir::Operand& op, const std::string& ptr, const std::string& type,
                  std::ostringstream& decls) {
  array_decl(name + "_strides", op.strides, decls);
  decls << "  const foundry_rt::Strided<" << type << "> " << name << "{" << ptr << ", " << name << "_strides, "
        << cpp_size(op.offset) << "};\n";
}

using Pointers = std::map<const ir::Buffer*, std::string>;

std::string matmul_loops(const ir::LoopNode& node, const ir::Matmul& call, const Pointers& ptrs,
                         const std::string& type) {
  std::ostringstream decls;
  const std::vector<ir::Expr>& out_shape = node.ranges;
  const bool batched = call.batched;
  ir::Expr batch = batched ? out_shape[0] : ir::Expr(1), M = out_shape[batched], N = out_shape[batched + 1];
  strided_decl("a", call.a, ptrs.at(call.a.buffer), type, decls);
  strided_decl("b", call.b, ptrs.at(call.b.buffer), type, decls);
  if (call.bias) strided_decl("bias", *call.bias, ptrs.at(call.bias->buffer), type, decls);
  decls << "  foundry_rt::matmul<" << type << ">(/*batch=*/" << cpp_size(batch) << ", /*M=*/" << cpp_size(M) << ", /*N=*/"
        << cpp_size(N) << ", /*K=*/" << cpp_size(call.a.sizes.back()) << ", a, b, " << (call.bias ? "&bias" : "/*bias=*/nullptr")
        << ", /*alpha=*/" << ir::shortest_number(call.alpha) << ", /*beta=*/" << ir::shortest_number(call.beta)
        << ", /*batched=*/" << (batched ? "true" : "false") << ", " << ptrs.at(node.output) << ");\n";
  return decls.str();
}

std::string convolution_loops(const ir::LoopNode& node, const ir::Convolution& call, const Pointers& ptrs,
                              const std::string& type) {
  const ir::Operand &x = call.input, &w = call.weight;
  size_t spatial = x.sizes.size() - 2;
  if (spatial < 1 || spatial > 3)
    throw UserError("convolution with " + std::to_string(spatial) + " spatial dims is not supported");
  // 1-D and 2-D convolutions become 3-D ones with leading size-1 spatial dims.
  auto to3d = [&](std::vector<ir::Expr> v, int64_t fill, size_t lead) {
    v.insert(v.begin() + static_cast<std::ptrdiff_t>(lead), 3 - spatial, ir::Expr(fill));
    return v;
  };
  std::ostringstream decls;
  if (spatial < 3)
    decls << "  // A " << spatial << "-d convolution as a 3-d one with leading size-1 spatial dims.\n";
  // (A transposed one's output_padding is in output_sizes: the positions past the input's reach
  // get the bias alone.)
  array_decl("input_sizes", to3d(x.sizes, 1, 2), decls);
  array_decl("input_strides", to3d(x.strides, 0, 2), decls);
  array_decl("weight_sizes", to3d(w.sizes, 1, 2), decls);
  array_decl("weight_strides", to3d(w.strides, 0, 2), decls);
  array_decl("output_sizes", to3d(node.ranges, 1, 2), decls);
  array_decl("output_strides", to3d(node.output->strides, 0, 2), decls);
  array_decl("conv_stride", to3d(exprs_of(call.stride), 1, 0), decls);
  array_decl("conv_padding", to3d(exprs_of(call.padding), 0, 0), decls);
  array_decl("conv_dilation", to3d(exprs_of(call.dilation), 1, 0), decls);
  const ir::Operand* bias = call.bias ? &*call.bias : nullptr;
  decls << "  foundry_rt::" << (call.transposed ? "conv_transpose3d<" : "conv3d<") << type
        << ">(input_sizes, weight_sizes, output_sizes, " << ptrs.at(x.buffer)
        << ", input_strides, /*input_offset=*/" << cpp_size(x.offset) << ", " << ptrs.at(w.buffer)
        << ", weight_strides, /*weight_offset=*/" << cpp_size(w.offset) << ", "
        << (bias ? ptrs.at(bias->buffer) : "/*bias=*/nullptr") << ", /*bias_stride=*/"
        << (bias ? cpp_size(bias->strides[0]) : "0") << ", /*bias_offset=*/" << (bias ? cpp_size(bias->offset) : "0")
        << ", conv_stride, conv_padding, conv_dilation, /*groups=*/" << call.groups << ", " << ptrs.at(node.output)
        << ", output_strides);\n";
  return decls.str();
}

// The element type of the portable loops: 16-bit floats as the runtime's wrappers of their bits
// (stored as uint16_t, computed through their conversions); "" for a dtype they do not take.
std::string portable_type(DType t) {
  if (t == DType::BFloat16) return "foundry_rt::BFloat16";
  if (t == DType::Float16) return "foundry_rt::Float16";
  return is_floating(t) ? storage_type(t) : "";
}

// The portable-loop statements of one library call over the given buffer pointers.
std::string portable_call(const ir::LoopNode& node, const Pointers& stored) {
  std::string type = portable_type(node.output->dtype);
  if (type.empty())
    throw UserError("library call " + ir::extern_name(node.call) + " on " + std::string(dtype_name(node.output->dtype)) +
                    " is not supported by the C++ backend");
  Pointers ptrs = stored;  // 16-bit bits seen as their wrapper type
  if (type != storage_type(node.output->dtype))
    for (auto& [buf, ptr] : ptrs)
      ptr = "reinterpret_cast<" + std::string(buf == node.output ? "" : "const ") + type + "*>(" + ptr + ")";
  std::string out = std::visit(
      overloaded{[&](const ir::Matmul& call) { return matmul_loops(node, call, ptrs, type); },
                 [&](const ir::Convolution& call) { return convolution_loops(node, call, ptrs, type); },
                 [](const auto&) -> std::string { throw InternalError(kOwnStatements); }},
      node.call.op);
  if (node.call.activation != ir::Activation::None)
    out += "  foundry_rt::apply_activation(" + activation_enum(node.call.activation) + ", " + ptrs.at(node.output) +
           ", " + cpp_size(node.output->numel()) + ");\n";
  return out;
}

// --- oneDNN (foundry_dnnl.h) ---------------------------------------------------------------------

// The dynamic row count of a 2-d matrix product whose other sizes are static (oneDNN builds it
// with a runtime dimension); nullopt otherwise.
std::optional<ir::Expr> dynamic_rows(const ir::LoopNode& node) {
  const auto* matmul = std::get_if<ir::Matmul>(&node.call.op);
  if (!matmul || matmul->batched) return std::nullopt;
  const auto& out = node.ranges;
  if (out.size() != 2 || out[0].is_const() || !out[1].is_const()) return std::nullopt;
  return out[0];
}

// Sizes as a oneDNN dims list: `rows` (if any) becomes kRuntimeDim.
std::string dnnl_dims(const std::vector<ir::Expr>& v, const std::optional<ir::Expr>& rows) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + (rows && v[i] == *rows ? std::string("foundry_rt::dnnl_glue::kRuntimeDim") : cpp_size(v[i]));
  return s + "}";
}

bool has_empty_dim(const std::vector<ir::Expr>& v) {
  return std::any_of(v.begin(), v.end(), [](const ir::Expr& e) { return e.is_const(0); });
}

// oneDNN's data type of a dtype the calls take ("" for others). 16-bit floats accumulate in
// float32 and round each result once, as PyTorch's CPU kernels do.
std::string dnnl_type(DType t) {
  switch (t) {
    case DType::Float32: return "f32";
    case DType::BFloat16: return "bf16";
    case DType::Float16: return "f16";
    default: return "";
  }
}

// How a call's oneDNN primitive is made: at creation when its shapes are static (or only the
// row count of a 2-d matrix product varies, a oneDNN runtime dimension); else per shape, on the
// first run that meets it, and cached in the model.
enum class DnnlMode { AtCreation, PerShape };

DnnlMode dnnl_mode(const ir::LoopNode& node) {
  std::optional<ir::Expr> rows = dynamic_rows(node);
  auto fixed = [&](const std::vector<ir::Expr>& v) {
    return std::all_of(v.begin(), v.end(), [&](const ir::Expr& e) { return e.is_const() || (rows && e == *rows); });
  };
  std::vector<const ir::Operand*> operands = ir::operands(node.call);
  bool dynamic = !fixed(node.ranges) || std::any_of(operands.begin(), operands.end(), [&](const ir::Operand* op) {
                   return !fixed(op->sizes) || !all_const(op->strides) || !op->offset.is_const();
                 });
  return dynamic ? DnnlMode::PerShape : DnnlMode::AtCreation;
}

// Why a call has no oneDNN form here ("" when it has one): the call then always runs on the
// portable loops, and `foundryc -v` says why.
std::string dnnl_obstacle(const ir::LoopNode& node) {
  if (dnnl_type(node.output->dtype).empty())
    return "its dtype is " + std::string(dtype_name(node.output->dtype)) +
           " (oneDNN is used for float32, bfloat16 and float16 only)";
  std::vector<const ir::Operand*> operands = ir::operands(node.call);
  // oneDNN rejects or mishandles zero-size dims (dynamic sizes are at least 1).
  if (has_empty_dim(node.ranges) ||
      std::any_of(operands.begin(), operands.end(), [](const ir::Operand* op) { return has_empty_dim(op->sizes); }))
    return "it has an empty tensor (oneDNN does not take zero-size dims)";
  const auto* matmul = std::get_if<ir::Matmul>(&node.call.op);
  if (matmul && (matmul->alpha != 1.0 || (matmul->bias && matmul->beta != 1.0)))
    return "alpha " + ir::shortest_number(matmul->alpha) + ", beta " + ir::shortest_number(matmul->beta) +
           " (the oneDNN form here has alpha = beta = 1)";
  return "";
}

// `spec.FIELD = ` the first element of constant operand `op` in the weights, or "" when `op` is
// computed.
std::string constant_data(const std::string& field, const ir::Operand& op, const WeightsLayout& weights) {
  if (op.buffer->kind != ir::BufferKind::Constant) return "";
  return "    spec." + field + " = reinterpret_cast<const " + storage_type(op.buffer->dtype) + "*>(weights + " +
         std::to_string(weights.offset_of.at(op.buffer)) + ")" + (op.offset.is_const(0) ? "" : " + " + cpp_size(op.offset)) +
         ";\n";
}

// The fields of the ConvSpec `spec`, one statement each.
std::string convolution_spec(const ir::LoopNode& node, const ir::Convolution& call, const WeightsLayout& weights) {
  const ir::Operand &x = call.input, &w = call.weight;
  std::ostringstream spec;
  spec << "    spec.input_sizes = " << expr_list(x.sizes) << ";\n    spec.input_strides = " << expr_list(x.strides)
       << ";\n    spec.weight_sizes = " << expr_list(w.sizes) << ";\n    spec.weight_strides = " << expr_list(w.strides)
       << ";\n    spec.output_sizes = " << expr_list(node.ranges) << ";\n";
  if (node.output->strides != ir::contiguous_strides(node.output->sizes))  // sched/channels_last.h
    spec << "    spec.output_strides = " << expr_list(node.output->strides) << ";\n";
  if (call.groups != 1) spec << "    spec.groups = " << call.groups << ";\n";
  if (call.bias) spec << "    spec.has_bias = true;\n    spec.bias_stride = " << cpp_size(call.bias->strides[0]) << ";\n";
  spec << "    spec.stride = " << int_list(call.stride) << ";\n    spec.padding = " << int_list(call.padding)
       << ";\n    spec.dilation = " << int_list(call.dilation) << ";\n";
  if (call.transposed) spec << "    spec.transposed = true;\n";
  spec << constant_data("constant_weights", w, weights);
  return spec.str();
}

// The fields of the MatmulSpec `spec`, one statement each.
std::string matmul_spec(const ir::LoopNode& node, const ir::Matmul& call, const WeightsLayout& weights) {
  std::optional<ir::Expr> rows = dynamic_rows(node);
  // A batch broadcast by stride 0 (one matrix for every batch entry) is oneDNN's batch of size 1,
  // given the plain stride so that oneDNN sees a row-major layout.
  auto batch_sizes = [&](std::vector<ir::Expr> sizes, const std::vector<ir::Expr>& strides) {
    if (call.batched && strides[0].is_const(0)) sizes[0] = 1;
    return dnnl_dims(sizes, rows);
  };
  auto batch_strides = [&](const std::vector<ir::Expr>& sizes, std::vector<ir::Expr> strides) {
    if (call.batched && strides[0].is_const(0)) strides[0] = sizes[1] * sizes[2];
    return expr_list(strides);
  };
  std::ostringstream spec;
  spec << "    spec.a_sizes = " << batch_sizes(call.a.sizes, call.a.strides) << ";\n    spec.a_strides = "
       << batch_strides(call.a.sizes, call.a.strides) << ";\n    spec.b_sizes = "
       << batch_sizes(call.b.sizes, call.b.strides) << ";\n    spec.b_strides = "
       << batch_strides(call.b.sizes, call.b.strides) << ";\n    spec.output_sizes = "
       << dnnl_dims(node.ranges, rows) << ";\n";
  if (call.bias) {
    // oneDNN broadcasts a bias over dims of size 1: stride-0 dims become size 1.
    std::vector<ir::Expr> sizes = call.bias->sizes;
    for (size_t d = 0; d < sizes.size(); ++d)
      if (call.bias->strides[d].is_const(0)) sizes[d] = 1;
    spec << "    spec.has_bias = true;\n    spec.bias_sizes = " << dnnl_dims(sizes, rows)
         << ";\n    spec.bias_strides = " << expr_list(call.bias->strides) << ";\n";
  }
  // Only float16 uses it (converted once for a float32 primitive); weights stay put otherwise.
  if (node.output->dtype == DType::Float16) spec << constant_data("constant_b", call.b, weights);
  return spec.str();
}

// The statements declaring and filling `spec`, the oneDNN description of a call.
std::string spec_statements(const ir::LoopNode& node, const WeightsLayout& weights) {
  std::ostringstream b;
  std::visit(overloaded{[&](const ir::Matmul& call) {
                          b << "    foundry_rt::dnnl_glue::MatmulSpec spec;\n" << matmul_spec(node, call, weights);
                        },
                        [&](const ir::Convolution& call) {
                          b << "    foundry_rt::dnnl_glue::ConvSpec spec;\n" << convolution_spec(node, call, weights);
                        },
                        [](const auto&) { throw InternalError(kOwnStatements); }},
             node.call.op);
  if (node.call.activation != ir::Activation::None)
    b << "    spec.activation = " << activation_enum(node.call.activation) << ";\n";
  if (node.output->dtype != DType::Float32)
    b << "    spec.data_type = foundry_rt::dnnl_glue::dt::" << dnnl_type(node.output->dtype) << ";\n";
  b << "    spec.team_cap = foundry_rt::num_threads(kThreads);\n    spec.weight_bytes = kWeightBytes;\n";
  return b.str();
}

// The block of create() that builds the primitive of one call into state member `member`.
std::string dnnl_build(const ir::LoopNode& node, const std::string& member, const std::string& label,
                       const WeightsLayout& weights) {
  std::ostringstream b;
  b << "  {  // " << ir::describe_extern(node) << "\n" << spec_statements(node, weights);
  b << "    foundry_rt::dnnl_glue::build(s->" << member << ", spec, kModel, " << label << ");\n  }\n";
  return b.str();
}

// The state member type of a call's primitive (or of its per-shape cache).
std::string dnnl_primitive(const ir::ExternCall& call, DnnlMode mode) {
  std::string kind = std::holds_alternative<ir::Convolution>(call.op) ? "Conv" : "Matmul";
  return mode == DnnlMode::PerShape ? "PerShape" + kind : kind;
}

// The arguments of a primitive's run(): the operands' first elements and the output.
std::string run_arguments(const ir::LoopNode& node, const Pointers& local) {
  std::string args = std::visit(
      overloaded{[&](const ir::Matmul& call) {
                   return operand_pointer(call.a, local) + ", " + operand_pointer(call.b, local) + ", " +
                          (call.bias ? operand_pointer(*call.bias, local) : "/*bias=*/nullptr");
                 },
                 [&](const ir::Convolution& call) {
                   return operand_pointer(call.input, local) + ", " + operand_pointer(call.weight, local) + ", " +
                          (call.bias ? operand_pointer(*call.bias, local) : "/*bias=*/nullptr");
                 },
                 [](const auto&) -> std::string { throw InternalError(kOwnStatements); }},
      node.call.op);
  return args + ", out";
}

// Runs a primitive (`run`, a call expression), falling back to the portable loops that follow on
// a oneDNN failure, with a warning (once per model).
std::string guarded_run(const std::string& run, const std::string& label, const std::string& indent) {
  return indent + "try {\n" + indent + "  " + run + ";\n" + indent + "  return;\n" + indent +
         "} catch (const foundry_rt::dnnl_glue::LibraryError& e) {\n" + indent +
         "  foundry_rt::dnnl_glue::warn_fallback(s->fallback_warned, kModel, " + label + ", e.what());\n" + indent +
         "}\n";
}

// The arguments of a primitive's run() and, where the spec gives its row count as oneDNN's
// runtime dimension (dynamic_rows), this run's rows: built at creation or per shape alike.
std::string run_arguments_with_rows(const ir::LoopNode& node, const Pointers& local) {
  std::optional<ir::Expr> rows = dynamic_rows(node);
  return run_arguments(node, local) + (rows ? ", /*rows=*/" + cpp_size(*rows) : "");
}

// The statements running a call's primitive built at creation, when it was built.
std::string dnnl_run(const ir::LoopNode& node, const std::string& member, const std::string& label,
                     const Pointers& local) {
  const std::string args = run_arguments_with_rows(node, local);
  return "  if (s->" + member + ".ok()) {\n" + guarded_run("s->" + member + ".run(" + args + ")", label, "    ") + "  }\n";
}

// The statements running a call whose shapes are dynamic: its primitive for this run's sizes,
// built on first use and kept in the model's per-shape cache.
std::string dnnl_run_per_shape(const ir::LoopNode& node, const std::string& member, const std::string& label,
                               const Pointers& local, const WeightsLayout& weights) {
  std::string out = "  {  // oneDNN, for this run's sizes (built once per shape)\n";
  if (auto* conv = std::get_if<ir::Convolution>(&node.call.op); conv && conv->weight.buffer->kind == ir::BufferKind::Constant)
    out += "    const uint8_t* weights = s->weights;\n";
  out += spec_statements(node, weights);
  out += "    if (auto prim = s->" + member + ".get(spec, kModel, " + label + ")) {\n";
  out += guarded_run("prim->run(" + run_arguments_with_rows(node, local) + ")", label, "      ");
  return out + "    }\n  }\n";
}

// "call0 (addmm from addmm (aten.addmm), relu (aten.relu))": names a call in run-time warnings.
std::string call_label(const ir::LoopNode& node, const std::string& fn) {
  std::string label = fn + " (" + ir::extern_name(node.call);
  for (size_t i = 0; i < node.origins.size(); ++i) label += (i ? ", " : " from ") + node.origins[i];
  return label + ")";
}

}  // namespace

std::string operand_pointer(const ir::Operand& op, const std::map<const ir::Buffer*, std::string>& local) {
  return op.offset.is_const(0) ? local.at(op.buffer) : local.at(op.buffer) + " + " + cpp_size(op.offset);
}

std::string activation_enum(ir::Activation activation) {
  switch (activation) {
    case ir::Activation::None: return "foundry_rt::Activation::None";
#define FOUNDRY_ENUMERATOR(name, text) \
  case ir::Activation::name: return "foundry_rt::Activation::" #name;
    FOUNDRY_ACTIVATIONS(FOUNDRY_ENUMERATOR)
#undef FOUNDRY_ENUMERATOR
  }
  throw InternalError("bug: unknown activation on a library call");
}

namespace {

// A library call that runs as statements of its own, with no state built at creation: LAPACK,
// row sorts, fused attention. What the log says of it and the runtime header it needs.
struct PlainCall {
  std::string statements, says, include;
};

std::optional<PlainCall> plain_call(const ir::LoopNode& node, const Pointers& local, int threads) {
  if (const auto* linalg = std::get_if<ir::Linalg>(&node.call.op))
    return PlainCall{linalg_statements(node, *linalg, local), "calls LAPACK", kLapackInclude};
  if (const auto* sort = std::get_if<ir::SortRows>(&node.call.op))
    return PlainCall{sort_statements(node, *sort, local, threads), "sorts rows", "#include \"foundry_sort.h\""};
  if (const auto* attention = std::get_if<ir::Attention>(&node.call.op))
    return PlainCall{attention_statements(node, *attention, local, threads), "runs as one fused attention",
                     "#include \"foundry_attention.h\""};
  return std::nullopt;
}

std::string include_lines(const std::set<std::string>& includes) {
  std::string out;
  for (const std::string& line : includes) out += line + "\n";
  return out;
}

}  // namespace

ExternsSource generate_externs(const ir::LoopProgram& program, const sched::Schedule& schedule,
                               const WeightsLayout& weights, const std::string& n,
                               const std::map<const ir::Buffer*, std::string>& wrapper_ptrs, int threads) {
  ExternsSource out;
  std::ostringstream state, builds, functions, decls;
  int index = 0;
  std::set<std::string> includes;  // the runtime headers of the calls foundryc runs itself
  for (const auto& step : schedule.steps) {
    if (!step.is_extern) continue;
    const ir::LoopNode& node = *step.extern_node;
    std::string fn = "call" + std::to_string(index), member = "extern" + std::to_string(index);
    ++index;
    std::string description = ir::describe_extern(node);
    // Parameters: each operand buffer once, then the output.
    std::vector<const ir::Buffer*> params;
    for (const ir::Operand* op : ir::operands(node.call))
      if (std::find(params.begin(), params.end(), op->buffer) == params.end()) params.push_back(op->buffer);
    Pointers local;
    std::string signature, call = "  // " + description + "\n  " + n + "_externs::" + fn + "(model->externs";
    for (size_t k = 0; k < params.size(); ++k) {
      local[params[k]] = "in" + std::to_string(k);
      signature += ", const " + storage_type(params[k]->dtype) + "* in" + std::to_string(k);
      call += ", " + wrapper_ptrs.at(params[k]);
    }
    local[node.output] = "out";
    signature += ", " + storage_type(node.output->dtype) + "* out";
    call += ", " + wrapper_ptrs.at(node.output);
    // Dynamic sizes the call's shapes depend on, passed by value (the wrapper has them in scope).
    std::vector<ir::Expr> shapes = node.ranges;
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

    if (std::optional<PlainCall> plain = plain_call(node, local, threads)) {
      spdlog::info("{} ({}) {}", fn, description, plain->says);
      functions << "// " << description << "\nvoid " << fn << "(const State* s" << signature << ") {\n  (void)s;\n"
                << plain->statements << "}\n\n";
      includes.insert(plain->include);
      continue;
    }
    if (runs_depthwise(node)) {
      spdlog::info("{} ({}) runs on foundryc's depthwise loops", fn, description);
      state << "  foundry_rt::DepthwiseRows " << member << ";  // " << fn << "\n";
      builds << depthwise_build(node, member);
      functions << "// " << description << "\nvoid " << fn << "(const State* s" << signature << ") {\n"
                << depthwise_statements(node, member, local) << "}\n\n";
      includes.insert("#include \"foundry_depthwise.h\"");
      continue;
    }
    std::string label = c_string_literal(call_label(node, fn));
    std::string obstacle = dnnl_obstacle(node);
    if (obstacle.empty())
      spdlog::info("{} ({}) runs on oneDNN{}", fn, description,
                   dnnl_mode(node) == DnnlMode::PerShape ? " (a primitive per shape, built on first use)" : "");
    else
      spdlog::info("{} ({}) runs on the portable loops: {}", fn, description, obstacle);
    functions << "// " << description << "\n";
    if (!obstacle.empty()) functions << "// The portable loops only: " << obstacle << ".\n";
    functions << "void " << fn << "(const State* s" << signature << ") {\n";
    DnnlMode mode = dnnl_mode(node);
    if (obstacle.empty()) {
      state << "  foundry_rt::dnnl_glue::" << dnnl_primitive(node.call, mode) << " " << member << ";  // " << fn << "\n";
      if (mode == DnnlMode::AtCreation) {
        builds << dnnl_build(node, member, label, weights);
        functions << dnnl_run(node, member, label, local);
      } else {
        functions << dnnl_run_per_shape(node, member, label, local, weights);
      }
    }
    functions << portable_call(node, local) << "}\n\n";
  }
  if (index == 0) return out;
  std::ostringstream cpp;
  cpp << "// Extern kernels of the model `" << n << "`: oneDNN primitives built once at creation (or per\n"
      << "// shape on first use, for dynamic sizes), with portable loops as the fallback. Generated by foundryc " << FOUNDRY_VERSION << ".\n"
      << "#include <new>\n\n#include \"foundry_dnnl.h\"\n#include \"foundry_externs.h\"\n"
      << include_lines(includes)
      << "\n"
      << "namespace " << n << "_externs {\n\nconstexpr const char* kModel = " << c_string_literal(n)
      << ";  // names the model in warnings\n"
      << "constexpr int kThreads = " << threads << ";  // foundryc --threads (0: decided at run time)\n"
      << "constexpr double kWeightBytes = " << weights.total_bytes << ";  // the model's constant weights (team choice)\n\n"
      << "struct State {\n"
      << state.str() << "  // The model's weights, for primitives built per shape.\n  const uint8_t* weights = nullptr;\n"
      << "  // A run fell back from oneDNN to the portable loops: warned once per model.\n"
      << "  mutable std::atomic<bool> fallback_warned{false};\n};\n\n"
      << "State* create(const uint8_t* weights) {\n  auto* s = new (std::nothrow) State();\n  if (!s) return nullptr;\n"
      << "  s->weights = weights;\n" << builds.str() << "  return s;\n}\n\nvoid destroy(State* s) { delete s; }\n\n"
      << functions.str() << "}  // namespace " << n << "_externs\n";
  out.cpp = cpp.str();
  out.wrapper_decls = "namespace " + n + "_externs {  // externs.cpp\nstruct State;\nState* create(const uint8_t* weights);\n"
                      "void destroy(State* s);\n" + decls.str() + "}  // namespace " + n + "_externs\n\n";
  return out;
}

}  // namespace foundry::codegen
