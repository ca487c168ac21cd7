// Library calls of a CUDA model: matrix products through cuBLAS (foundry_cuda.h's matmul); any
// other library call has no GPU form yet and is refused at compile time, naming the node.
#include <sstream>

#include "codegen/externs.h"
#include "foundry/codegen/cpp_expr.h"
#include "foundry/codegen/cpp_kernel.h"
#include "foundry/codegen/wrapper.h"
#include "foundry/ir/print.h"
#include "foundry/support/error.h"

namespace foundry::codegen {
namespace {

std::string num(const ir::Expr& e) { return cpp_index(e, {}); }

std::string node_label(const ir::LoopNode& node) {
  std::string label;
  for (size_t i = 0; i < node.origins.size(); ++i) label += (i ? ", " : "") + node.origins[i];
  return label.empty() ? "node" + std::to_string(node.id) : label;
}

[[noreturn]] void unsupported(const ir::LoopNode& node, const std::string& what) {
  throw UserError(node_label(node) + ": " + what + " is not supported with --device cuda yet");
}

// A constant stride that is neither 0 nor 1 in both of a matrix's dims cannot be a cuBLAS
// operand (foundry_cuda::transposed_layout decides at run time for dynamic strides).
void check_layout(const ir::LoopNode& node, const ir::Operand& op) {
  size_t r = op.sizes.size();
  const ir::Expr &rs = op.strides[r - 2], &cs = op.strides[r - 1];
  const ir::Expr &rows = op.sizes[r - 2], &cols = op.sizes[r - 1];
  auto unit = [](const ir::Expr& stride, const ir::Expr& size) { return !stride.is_const() || stride.is_const(1) || size.is_const(1); };
  if (!unit(rs, rows) && !unit(cs, cols))
    unsupported(node, "a matrix product of an operand with strides [" + num(rs) + ", " + num(cs) + "]");
}

// `foundry_cuda::Matrix<T> name{first element, rows, cols, row stride, col stride, batch stride};`
std::string matrix_decl(const std::string& name, const ir::Operand& op, const std::string& ptr, const std::string& type) {
  size_t r = op.sizes.size();
  std::string batch_stride = r == 3 ? num(op.strides[0]) : "0";
  return "    const foundry_cuda::Matrix<" + type + "> " + name + "{" + ptr + " + " + num(op.offset) + ", " +
         num(op.sizes[r - 2]) + ", " + num(op.sizes[r - 1]) + ", " + num(op.strides[r - 2]) + ", " +
         num(op.strides[r - 1]) + ", " + batch_stride + "};\n";
}

std::string matmul_call(const ir::LoopNode& node, const ir::Matmul& call,
                        const std::map<const ir::Buffer*, std::string>& ptrs) {
  DType t = node.output->dtype;
  if (!is_floating(t)) unsupported(node, "a " + std::string(dtype_name(t)) + " matrix product");
  if (node.call.activation != ir::Activation::None)
    throw InternalError("bug: an activation was folded into a library call of a CUDA model");
  check_layout(node, call.a);
  check_layout(node, call.b);
  std::string type = storage_type(t);
  const auto& out = node.output->sizes;
  std::ostringstream s;
  s << "  {  // " << node_label(node) << ": cuBLAS -> " << node.output->name << "\n"
    << matrix_decl("a", call.a, ptrs.at(call.a.buffer), type) << matrix_decl("b", call.b, ptrs.at(call.b.buffer), type);
  if (call.bias) s << matrix_decl("bias", *call.bias, ptrs.at(call.bias->buffer), type);
  s << "    if (const char* failed = foundry_cuda::matmul<" << type << ">(slot.cublas, stream, /*batch=*/"
    << (call.batched ? num(out[0]) : "1") << ", a, b, " << (call.bias ? "&bias" : "/*bias=*/nullptr") << ", /*alpha=*/"
    << ir::shortest_number(call.alpha) << ", /*beta=*/" << ir::shortest_number(call.beta) << ", "
    << ptrs.at(node.output) << (t == DType::BFloat16 ? ", CUDA_R_16BF" : "") << "); *failed)\n"
    << "      foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, std::string(" << c_string_literal(node_label(node) + ": ")
    << ") + failed);\n  }\n";
  return s.str();
}

}  // namespace

std::string cuda_extern_call(const ir::LoopNode& node, const std::map<const ir::Buffer*, std::string>& ptrs) {
  if (const auto* m = std::get_if<ir::Matmul>(&node.call.op)) return matmul_call(node, *m, ptrs);
  unsupported(node, "the library call " + ir::extern_name(node.call));
}

}  // namespace foundry::codegen
