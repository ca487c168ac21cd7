// Depthwise convolutions in externs.cpp: float32 2-d convolutions whose every output channel reads
// its own input channel run on foundry_rt::depthwise_conv2d (runtime/foundry_depthwise.h), on the
// activations as stored, instead of oneDNN with a reorder to channels last and back per call.
#include <sstream>

#include "codegen/externs.h"
#include "foundry/codegen/cpp_expr.h"
#include "foundry/ir/print.h"

namespace foundry::codegen {

namespace {

bool float32(const ir::Operand& op) { return op.buffer->dtype == DType::Float32; }

}  // namespace

bool runs_depthwise(const ir::LoopNode& node) {
  const auto* conv = std::get_if<ir::Convolution>(&node.call.op);
  if (!conv || conv->transposed || node.output->dtype != DType::Float32) return false;
  const ir::Operand &x = conv->input, &w = conv->weight;
  if (!float32(x) || !float32(w) || (conv->bias && !float32(*conv->bias)) || x.sizes.size() != 4) return false;
  // One input and one output channel per group, a window of at most 25 taps (5x5): each tap is
  // a load of shifted columns here, where oneDNN's channels-last kernel reuses its loads across
  // the window, and from 7x7 on that pays for its reorders (convnext's 40 channels 7x7 at 56x56:
  // 0.42 ms against 0.36; 160 at 14x14: 0.091 against 0.048).
  constexpr int64_t kMaxTaps = 25;
  const ir::Expr groups(conv->groups);
  if (!(x.sizes[1] == groups) || !(w.sizes[0] == groups) || !w.sizes[1].is_const(1)) return false;
  if (!w.sizes[2].is_const() || !w.sizes[3].is_const() || w.sizes[2].const_value() * w.sizes[3].const_value() > kMaxTaps)
    return false;
  // Rows read as vectors; empty tensors stay with the portable loops.
  for (const auto* sizes : {&x.sizes, &node.ranges})
    for (const ir::Expr& e : *sizes)
      if (e.is_const(0)) return false;
  // Output rows of 14 or more: narrower ones leave most lanes of a vector idle, where oneDNN's
  // channels-last kernel fills them with channels (one thread, AVX-512, against oneDNN with its
  // reorders: 144 channels 3x3 at 56x56 0.28 ms against 0.58, 240 5x5 at 28x28 0.24 against
  // 0.33, 576 3x3 at 14x14 0.094 against 0.19; at 7x7, 960 3x3 0.12 against 0.075, and 72 5x5
  // stride 2 to 12x12 0.037 against 0.021).
  // Both widths static: what the rows read is built when the model is created.
  constexpr int64_t kMinOutputWidth = 14;
  const ir::Expr& out_w = node.ranges[3];
  // Rows in and rows out: channels-last activations (sched/channels_last.h) run on oneDNN.
  const bool rows_out = node.output->strides == ir::contiguous_strides(node.output->sizes);
  return rows_out && x.strides[3].is_const(1) && x.sizes[3].is_const() && out_w.is_const() &&
         out_w.const_value() >= kMinOutputWidth;
}

std::string depthwise_build(const ir::LoopNode& node, const std::string& member) {
  const auto& conv = std::get<ir::Convolution>(node.call.op);
  std::ostringstream s;
  s << "  // " << ir::describe_extern(node) << ": what its rows read\n";
  s << "  if (!s->" << member << ".build(/*in_w=*/" << cpp_size(conv.input.sizes[3]) << ", /*out_w=*/"
    << cpp_size(node.ranges[3]) << ", /*kernel_w=*/" << cpp_size(conv.weight.sizes[3]) << ", /*stride_w=*/"
    << conv.stride[1] << ", /*pad_w=*/" << conv.padding[1] << ", /*dilation_w=*/" << conv.dilation[1] << ")) {\n"
    << "    delete s;\n    return nullptr;\n  }\n";
  return s.str();
}

std::string depthwise_statements(const ir::LoopNode& node, const std::string& member,
                                 const std::map<const ir::Buffer*, std::string>& ptrs) {
  const auto& conv = std::get<ir::Convolution>(node.call.op);
  const ir::Operand &x = conv.input, &w = conv.weight;
  const std::vector<ir::Expr>& out = node.ranges;
  std::ostringstream s;
  s << "  // A depthwise convolution on the activations as stored (foundry_depthwise.h).\n";
  s << "  foundry_rt::DepthwiseShape shape;\n";
  s << "  shape.batch = " << cpp_size(x.sizes[0]) << ";\n  shape.channels = " << cpp_size(x.sizes[1]) << ";\n";
  s << "  shape.in_h = " << cpp_size(x.sizes[2]) << ";\n  shape.in_w = " << cpp_size(x.sizes[3]) << ";\n";
  s << "  shape.out_h = " << cpp_size(out[2]) << ";\n  shape.out_w = " << cpp_size(out[3]) << ";\n";
  s << "  shape.kernel_h = " << cpp_size(w.sizes[2]) << ";\n  shape.kernel_w = " << cpp_size(w.sizes[3]) << ";\n";
  s << "  shape.stride_h = " << conv.stride[0] << ";\n  shape.stride_w = " << conv.stride[1] << ";\n";
  s << "  shape.pad_h = " << conv.padding[0] << ";\n  shape.pad_w = " << conv.padding[1] << ";\n";
  s << "  shape.dilation_h = " << conv.dilation[0] << ";\n  shape.dilation_w = " << conv.dilation[1] << ";\n";
  s << "  shape.x_strides[0] = " << cpp_size(x.strides[0]) << ";\n  shape.x_strides[1] = " << cpp_size(x.strides[1])
    << ";\n  shape.x_strides[2] = " << cpp_size(x.strides[2]) << ";\n";
  s << "  shape.w_strides[0] = " << cpp_size(w.strides[0]) << ";\n  shape.w_strides[1] = " << cpp_size(w.strides[2])
    << ";\n  shape.w_strides[2] = " << cpp_size(w.strides[3]) << ";\n";
  s << "  shape.bias_stride = " << (conv.bias ? cpp_size(conv.bias->strides[0]) : "0") << ";\n";
  s << "  const int team = foundry_rt::team_for(foundry_rt::depthwise_serial_ns(shape), foundry_rt::num_threads(kThreads));\n";
  s << "  foundry_rt::depthwise_conv2d(shape, s->" << member << ", " << operand_pointer(x, ptrs) << ", " << operand_pointer(w, ptrs) << ", "
    << (conv.bias ? operand_pointer(*conv.bias, ptrs) : "/*bias=*/nullptr") << ", " << activation_enum(node.call.activation)
    << ", " << ptrs.at(node.output) << ", team);\n";
  return s.str();
}

}  // namespace foundry::codegen
