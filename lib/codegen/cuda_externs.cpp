// Library calls of a CUDA model: matrix products through cuBLAS (foundry_cuda.h's matmul),
// convolutions through cuDNN (foundry_cudnn.h's convolution); any other library call has no GPU
// form yet and is refused at compile time, naming the node.
#include <climits>
#include <sstream>

#include "codegen/externs.h"
#include "foundry/codegen/cpp_expr.h"
#include "foundry/codegen/cpp_kernel.h"
#include "foundry/codegen/wrapper.h"
#include "foundry/ir/print.h"
#include "foundry/support/error.h"

namespace foundry::codegen {
namespace {


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
    unsupported(node, "a matrix product of an operand with strides [" + cpp_size(rs) + ", " + cpp_size(cs) + "]");
}

// The first element of an operand: its buffer's pointer plus the view's offset.
std::string first_element(const ir::Operand& op, const std::map<const ir::Buffer*, std::string>& ptrs) {
  return ptrs.at(op.buffer) + " + " + cpp_size(op.offset);
}

// `foundry_cuda::Matrix<T> name{first element, rows, cols, row stride, col stride, batch stride};`
std::string matrix_decl(const std::string& name, const ir::Operand& op, const std::map<const ir::Buffer*, std::string>& ptrs,
                        const std::string& type) {
  size_t r = op.sizes.size();
  std::string batch_stride = r == 3 ? cpp_size(op.strides[0]) : "0";
  return "    const foundry_cuda::Matrix<" + type + "> " + name + "{" + first_element(op, ptrs) + ", " +
         cpp_size(op.sizes[r - 2]) + ", " + cpp_size(op.sizes[r - 1]) + ", " + cpp_size(op.strides[r - 2]) + ", " +
         cpp_size(op.strides[r - 1]) + ", " + batch_stride + "};\n";
}

// The element type of a library call's operands (`accepted`: whether the call takes the output's
// dtype; `what` names the call in the refusal); an activation is never folded into a CUDA
// library call.
std::string call_type(const ir::LoopNode& node, bool accepted, const std::string& what) {
  DType t = node.output->dtype;
  if (!accepted) unsupported(node, "a " + std::string(dtype_name(t)) + " " + what);
  if (node.call.activation != ir::Activation::None)
    throw InternalError("bug: an activation was folded into a library call of a CUDA model");
  return storage_type(t);
}

// A library call's block: a comment naming the node (its ATen origin) and the library, the
// operands' declarations, and the call, an expression giving "" or what failed, reported as the
// model's error naming the node.
std::string call_block(const ir::LoopNode& node, const std::string& library, const std::string& decls,
                       const std::string& call) {
  return "  {  // " + node_label(node) + ": " + library + " -> " + node.output->name + "\n" + decls +
         "    if (const std::string failed = " + call + "; !failed.empty())\n" +
         "      foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, " + c_string_literal(node_label(node) + ": ") +
         " + failed);\n  }\n";
}

// The argument that lets a float32 call use TF32 tensor cores, "" when it may not.
std::string tf32_argument(const ir::LoopNode& node, bool tf32) {
  return tf32 && node.output->dtype == DType::Float32 ? ", /*tf32=*/true" : "";
}

std::string matmul_call(const ir::LoopNode& node, const ir::Matmul& call,
                        const std::map<const ir::Buffer*, std::string>& ptrs, bool tf32) {
  std::string type = call_type(node, is_floating(node.output->dtype), "matrix product");
  check_layout(node, call.a);
  check_layout(node, call.b);
  const auto& out = node.ranges;
  std::string decls = matrix_decl("a", call.a, ptrs, type) + matrix_decl("b", call.b, ptrs, type);
  if (call.bias) decls += matrix_decl("bias", *call.bias, ptrs, type);
  std::ostringstream c;
  // The trailing arguments: cuBLAS's type where data_type<T>() does not say it (bfloat16 is stored
  // as uint16_t), and the type again before the tf32 flag that follows it.
  std::string tail = node.output->dtype == DType::BFloat16 ? ", CUDA_R_16BF" : "";
  if (std::string flag = tf32_argument(node, tf32); !flag.empty()) tail = ", CUDA_R_32F" + flag;
  c << "foundry_cuda::matmul<" << type << ">(slot.cublas, stream, /*batch=*/"
    << (call.batched ? cpp_size(out[0]) : "1") << ", a, b, " << (call.bias ? "&bias" : "/*bias=*/nullptr") << ", /*alpha=*/"
    << ir::shortest_number(call.alpha) << ", /*beta=*/" << ir::shortest_number(call.beta) << ", "
    << ptrs.at(node.output) << tail << ")";
  return call_block(node, "cuBLAS", decls, c.str());
}

// `const foundry_cudnn::Tensor<T> name{first element, rank, {sizes}, {strides}};`
std::string tensor_decl(const std::string& name, const std::string& first, const std::vector<ir::Expr>& sizes,
                        const std::vector<ir::Expr>& strides, const std::string& type) {
  std::string s = "    const foundry_cudnn::Tensor<" + type + "> " + name + "{" + first + ", " +
                  std::to_string(sizes.size()) + ", {";
  for (size_t d = 0; d < sizes.size(); ++d) s += (d ? ", " : "") + cpp_size(sizes[d]);
  s += "}, {";
  for (size_t d = 0; d < strides.size(); ++d) s += (d ? ", " : "") + cpp_size(strides[d]);
  return s + "}};\n";
}

std::string operand_decl(const std::string& name, const ir::Operand& op, const std::map<const ir::Buffer*, std::string>& ptrs,
                         const std::string& type) {
  return tensor_decl(name, first_element(op, ptrs), op.sizes, op.strides, "const " + type);
}

// A parameter of a convolution as cuDNN's int; a larger one is refused.
std::string conv_int(const ir::LoopNode& node, int64_t v) {
  if (v < 0 || v > INT32_MAX) unsupported(node, "a convolution parameter of " + std::to_string(v));
  return std::to_string(v);
}

std::string conv_ints(const ir::LoopNode& node, const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t d = 0; d < v.size(); ++d) s += (d ? ", " : "") + conv_int(node, v[d]);
  return s + "}";
}

// A weight whose constant strides are neither a packed NCHW nor a packed NHWC layout cannot be a
// cuDNN filter (foundry_cudnn.h checks again at run time, for dynamic strides).
void check_weight_layout(const ir::LoopNode& node, const ir::Operand& w) {
  size_t r = w.sizes.size();
  std::vector<size_t> nchw(r), nhwc = {0};
  for (size_t d = 0; d < r; ++d) nchw[d] = d;
  for (size_t d = 2; d < r; ++d) nhwc.push_back(d);
  nhwc.push_back(1);
  auto packed = [&](const std::vector<size_t>& order) {
    int64_t expected = 1;
    for (size_t k = r; k-- > 0;) {
      size_t d = order[k];
      if (!w.sizes[d].is_const() || !w.strides[d].is_const()) return true;  // decided at run time
      if (!w.sizes[d].is_const(1) && !w.strides[d].is_const(expected)) return false;
      expected *= w.sizes[d].const_value();
    }
    return true;
  };
  if (!packed(nchw) && !packed(nhwc)) {
    std::string strides;
    for (size_t d = 0; d < r; ++d) strides += (d ? ", " : "") + cpp_size(w.strides[d]);
    unsupported(node, "a convolution weight with strides [" + strides + "] (cuDNN takes it packed as NCHW or NHWC)");
  }
}

std::string convolution_call(const ir::LoopNode& node, const ir::Convolution& call,
                             const std::map<const ir::Buffer*, std::string>& ptrs, bool tf32) {
  // --device cuda lowers transposed convolutions to reductions (LowerOptions).
  if (call.transposed) throw InternalError("bug: a transposed convolution call reached the cuDNN generator");
  DType t = node.output->dtype;
  std::string type = call_type(node, t == DType::Float32 || t == DType::Float64, "convolution");
  size_t spatial = call.input.sizes.size() - 2;
  if (spatial < 1 || spatial > 3) unsupported(node, "a convolution with " + std::to_string(spatial) + " spatial dims");
  check_weight_layout(node, call.weight);
  std::string decls = operand_decl("input", call.input, ptrs, type) + operand_decl("weight", call.weight, ptrs, type);
  if (call.bias) decls += operand_decl("bias", *call.bias, ptrs, type);
  const ir::Buffer& out = *node.output;
  decls += tensor_decl("output", ptrs.at(&out), out.sizes, out.strides, type);
  decls += "    static constexpr foundry_cudnn::ConvParams params{/*spatial=*/" + std::to_string(spatial) +
           ", /*stride=*/" + conv_ints(node, call.stride) + ", /*padding=*/" + conv_ints(node, call.padding) +
           ", /*dilation=*/" + conv_ints(node, call.dilation) + ", /*groups=*/" + conv_int(node, call.groups) + "};\n";
  std::string c = "foundry_cudnn::convolution<" + type + ">(slot, stream, /*site=*/" + std::to_string(node.id) +
                  ", params, input, weight, " + (call.bias ? "&bias" : "/*bias=*/nullptr") + ", output" +
                  tf32_argument(node, tf32) + ")";
  return call_block(node, "cuDNN", decls, c);
}

}  // namespace

std::string node_label(const ir::LoopNode& node) {
  std::string label;
  for (size_t i = 0; i < node.origins.size(); ++i) label += (i ? ", " : "") + node.origins[i];
  return label.empty() ? "node" + std::to_string(node.id) : label;
}

std::string cuda_extern_call(const ir::LoopNode& node, const std::map<const ir::Buffer*, std::string>& ptrs, bool tf32) {
  if (const auto* m = std::get_if<ir::Matmul>(&node.call.op)) return matmul_call(node, *m, ptrs, tf32);
  if (const auto* c = std::get_if<ir::Convolution>(&node.call.op)) return convolution_call(node, *c, ptrs, tf32);
  unsupported(node, "the library call " + ir::extern_name(node.call));
}

}  // namespace foundry::codegen
