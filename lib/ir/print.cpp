#include "foundry/ir/print.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "foundry/ir/record.h"

namespace foundry::ir {
namespace {

std::string join_exprs(const std::vector<Expr>& xs) {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + to_string(xs[i]);
  return out;
}

std::string ints_text(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t d = 0; d < values.size(); ++d) out += (d ? ", " : "") + std::to_string(values[d]);
  return out + "]";
}

std::string number_text(double value) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return buf;
}

// Exact, stable text for constants: integers as written, floats with 17 significant digits.
std::string scalar_text(const Scalar& s) {
  if (!is_floating(s.dtype)) return std::to_string(s.i);
  if (std::isnan(s.f)) return "nan";
  if (std::isinf(s.f)) return s.f > 0 ? "inf" : "-inf";
  return number_text(s.f);
}

std::string node_kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::Pointwise: return "pointwise";
    case NodeKind::Reduction: return "reduction";
    case NodeKind::Extern: return "extern";
  }
  return "?";
}

std::string access_list(const std::vector<MemoryAccess>& list, bool whole) {
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) {
    out += (i ? ", " : "") + list[i].buffer->name;
    out += whole ? "[*]" : "[" + to_string(list[i].index) + "]";
    if (list[i].mode != StoreMode::Set) out += " (" + std::string(op_name(list[i].mode)) + ")";
  }
  return out;
}

std::string operand_text(const Operand* op) {
  if (!op) return "None";
  return op->buffer->name + " sizes [" + join_exprs(op->sizes) + "] strides [" + join_exprs(op->strides) + "] offset " +
         to_string(op->offset);
}

std::string operand_list(const std::vector<const Operand*>& ops) {
  std::string out;
  for (size_t i = 0; i < ops.size(); ++i) out += (i ? ", " : "") + operand_text(ops[i]);
  return out;
}

std::string ints_param(const char* key, const std::vector<int64_t>& values) {
  return std::string(" ") + key + "=" + ints_text(values);
}

std::string float_param(const char* key, double value) { return std::string(" ") + key + "=" + number_text(value); }

// A LAPACK call's sizes and the flags that are set, after its output number.
std::string linalg_params(const Linalg& l) {
  std::string out = ints_param("output", {l.output}) + ints_param("batch", {l.batch}) + ints_param("m", {l.m}) +
                    ints_param("n", {l.n}) + ints_param("k", {l.k});
  const std::pair<const char*, bool> flags[] = {{"upper", l.upper}, {"trans", l.trans}, {"unit", l.unit},
                                                {"right", !l.left}, {"full_matrices", l.full_matrices},
                                                {"compute_uv", l.compute_uv}};
  for (const auto& [name, set] : flags)
    if (set) out += std::string(" ") + name;
  return out;
}

// Operands in the aten op's argument order (an absent optional one as None), then the parameters
// in name order: the text form predates the typed calls and the golden files keep it.
std::string call_arguments(const ExternCall& call) {
  return std::visit(
      overloaded{[](const Matmul& m) {
                   if (!m.bias) return "(" + operand_list({&m.a, &m.b}) + ")";
                   return "(" + operand_list({&*m.bias, &m.a, &m.b}) + ")" + float_param("alpha", m.alpha) +
                          float_param("beta", m.beta);
                 },
                 [](const Convolution& c) {
                   return "(" + operand_list({&c.input, &c.weight, c.bias ? &*c.bias : nullptr}) + ")" +
                          ints_param("dilation", c.dilation) + ints_param("groups", {c.groups}) +
                          ints_param("padding", c.padding) + ints_param("stride", c.stride) +
                          (c.transposed ? " transposed" + ints_param("output_padding", c.output_padding) : "");
                 },
                 [](const Linalg& l) {
                   std::vector<const Operand*> ops;
                   for (const Operand& op : l.inputs) ops.push_back(&op);
                   return "(" + operand_list(ops) + ")" + linalg_params(l);
                 },
                 [](const SortRows& r) {
                   return "(" + operand_list({&r.input}) + ")" + ints_param("dim", {r.dim}) + " k=" + to_string(r.k) +
                          (r.descending ? " descending" : "");
                 },
                 [](const Attention& a) {
                   return "(" + operand_list({&a.query, &a.key_t, &a.value, a.mask ? &*a.mask : nullptr}) + ")" +
                          float_param("scale", a.scale) + (a.masked_rows_zero ? " masked_rows_zero" : "");
                 }},
      call.op);
}

std::string extern_line(const ExternCall& call) {
  std::string out = "    " + extern_name(call) + call_arguments(call);
  if (call.activation != Activation::None) out += " then " + activation_name(call.activation);
  return out + "\n";
}

}  // namespace

void PrintingOps::line(const std::string& t) { text += std::string(indent, ' ') + t + "\n"; }
std::string PrintingOps::name(Val v) { return "tmp" + std::to_string(v.id); }
Val PrintingOps::emit(DType t, const std::string& rhs) {
  Val v{next_++, t};
  line(name(v) + " = " + rhs);
  return v;
}
Val PrintingOps::load(const Buffer& buf, const Expr& index) {
  return emit(buf.dtype, "load(" + buf.name + ", " + to_string(index) + ")");
}
void PrintingOps::store(const Buffer& buf, const Expr& index, Val v, StoreMode mode) {
  std::string m = mode == StoreMode::Set ? "" : ", mode=" + std::string(op_name(mode));
  line("store(" + buf.name + ", " + to_string(index) + ", " + name(v) + m + ")");
}
Val PrintingOps::constant(const Scalar& s) {
  return emit(s.dtype, "constant(" + scalar_text(s) + ", " + std::string(dtype_name(s.dtype)) + ")");
}
Val PrintingOps::index_expr(const Expr& e, DType t) {
  return emit(t, "index_expr(" + to_string(e) + ", " + std::string(dtype_name(t)) + ")");
}
Val PrintingOps::to_dtype(Val v, DType t) {
  return emit(t, "to_dtype(" + name(v) + ", " + std::string(dtype_name(t)) + ")");
}
Val PrintingOps::unary(UnaryOp op, Val x) {
  return emit(returns_bool(op) ? DType::Bool : x.dtype, std::string(op_name(op)) + "(" + name(x) + ")");
}
Val PrintingOps::binary(BinaryOp op, Val a, Val b) {
  return emit(returns_bool(op) ? DType::Bool : a.dtype,
              std::string(op_name(op)) + "(" + name(a) + ", " + name(b) + ")");
}
Val PrintingOps::where(Val c, Val a, Val b) {
  return emit(a.dtype, "where(" + name(c) + ", " + name(a) + ", " + name(b) + ")");
}
Expr PrintingOps::indirect(Val v, const Expr& size, NegativeIndex negative) {
  std::string sym = "ind" + std::to_string(indirect_count_++);
  line(sym + " = indirect(" + name(v) + ", " + to_string(size) + (negative == NegativeIndex::Wraps ? ", wraps" : "") + ")");
  return Expr::sym(sym);
}
Val PrintingOps::reduction(ReduceOp op, Val v) {
  return emit(reduce_result_dtype(op, v.dtype), "reduction(" + std::string(op_name(op)) + ", " + name(v) + ")");
}
void PrintingOps::store_reduction(const Buffer& buf, const Expr& index, Val v) {
  line("store_reduction(" + buf.name + ", " + to_string(index) + ", " + name(v) + ")");
}

std::string print_body(const LoopNode& node) {
  if (node.kind == NodeKind::Extern) return extern_line(node.call);
  PrintingOps ops;
  run_body_symbolic(node, ops);
  return ops.text;
}

std::string print_buffer(const Buffer& buf) {
  std::string kind = buf.kind == BufferKind::Input ? "input" : buf.kind == BufferKind::Constant ? "constant" : "computed";
  return buf.name + ": " + shape_text(buf.dtype, buf.sizes) + " " +
         kind + ", strides [" + join_exprs(buf.strides) + "], offset " + to_string(buf.offset);
}

std::string print_node(const LoopNode& node) {
  std::ostringstream out;
  bool whole = node.kind == NodeKind::Extern;
  Accesses acc = record_accesses(node);
  out << "node" << node.id << ": " << node_kind_name(node.kind) << " -> " << node.output->name << "\n";
  if (!node.origins.empty()) {
    out << "  origins: ";
    for (size_t i = 0; i < node.origins.size(); ++i) out << (i ? ", " : "") << node.origins[i];
    out << "\n";
  }
  if (!whole) {
    out << "  ranges: [" << join_exprs(node.ranges) << "]";
    if (node.kind == NodeKind::Reduction)
      out << "  reduction: " << op_name(node.reduce_op) << " over [" << join_exprs(node.reduction_ranges) << "]";
    out << "\n";
  }
  out << "  reads: " << access_list(acc.reads, whole) << "\n";
  out << "  writes: " << access_list(acc.writes, whole) << "\n";
  out << "  body:\n" << print_body(node);
  return out.str();
}

std::string shortest_number(double value) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

std::string shape_text(DType dtype, const std::vector<Expr>& sizes) {
  return std::string(dtype_name(dtype)) + "[" + join_exprs(sizes) + "]";
}

namespace {

std::string operand_shape(const Operand& op) { return shape_text(op.buffer->dtype, op.sizes); }

// The operands and parameters of a call as "a x b + bias", before its output.
std::string extern_inputs(const ExternCall& call) {
  return std::visit(
      overloaded{[](const Matmul& m) {
                   std::string out = operand_shape(m.a) + " x " + operand_shape(m.b);
                   if (m.alpha != 1.0) out = shortest_number(m.alpha) + " * " + out;
                   if (m.bias) out += " + " + (m.beta != 1.0 ? shortest_number(m.beta) + " * " : "") + "bias";
                   return out;
                 },
                 [](const Convolution& c) {
                   return operand_shape(c.input) + " * " + operand_shape(c.weight) + (c.bias ? " + bias" : "");
                 },
                 [](const Linalg& l) {
                   std::string out;
                   for (const Operand& op : l.inputs) out += (out.empty() ? "" : ", ") + operand_shape(op);
                   return out;
                 },
                 [](const SortRows& r) { return operand_shape(r.input); },
                 [](const Attention& a) {
                   return "softmax(" + shortest_number(a.scale) + " * " + operand_shape(a.query) + " x " +
                          operand_shape(a.key_t) + (a.mask ? " + mask" : "") + ") x " + operand_shape(a.value);
                 }},
      call.op);
}

std::string extern_options(const ExternCall& call) {
  return std::visit(overloaded{[](const Matmul&) { return std::string(); },
                               [](const Convolution& c) {
                                 return ", stride " + ints_text(c.stride) + ", padding " + ints_text(c.padding) +
                                        ", dilation " + ints_text(c.dilation) + ", groups " + std::to_string(c.groups) +
                                        (c.transposed ? ", transposed, output padding " + ints_text(c.output_padding) : "");
                               },
                               [](const Linalg& l) {
                                 return ", output " + std::to_string(l.output) + " of LAPACK " +
                                        linalg_lapack_routine(l.op);
                               },
                               [](const SortRows& r) {
                                 return ", the first " + to_string(r.k) + " positions along dim " + std::to_string(r.dim) +
                                        (r.descending ? ", descending" : ", ascending");
                               },
                               [](const Attention& a) {
                                 return std::string(a.masked_rows_zero ? ", rows of -inf scores give zeros" : "");
                               }},
                    call.op);
}

}  // namespace

std::string describe_extern(const LoopNode& node) {
  std::string out = extern_name(node.call) + ": " + extern_inputs(node.call) + " -> " +
                    shape_text(node.output->dtype, node.ranges) + extern_options(node.call);
  if (node.call.activation != Activation::None) out += ", " + activation_name(node.call.activation) + " folded";
  if (!node.origins.empty()) out += "; from ";
  for (size_t i = 0; i < node.origins.size(); ++i) out += (i ? ", " : "") + node.origins[i];
  return out;
}

std::string print_program(const LoopProgram& program) {
  std::ostringstream out;
  out << "# buffers\n";
  for (const auto& buf : program.buffers) out << print_buffer(*buf) << "\n";
  out << "# inputs:";
  for (const Buffer* b : program.inputs) out << " " << b->name;
  out << "\n# outputs:";
  for (const Buffer* b : program.outputs) out << " " << b->name;
  out << "\n\n";
  for (const auto& node : program.nodes) out << print_node(*node) << "\n";
  return out.str();
}

}  // namespace foundry::ir
