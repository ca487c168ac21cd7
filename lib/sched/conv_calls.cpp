#include "sched/conv_calls.h"

#include <optional>

namespace foundry::sched {

bool nchw_depthwise(const ir::LoopNode& call) {
  const auto* conv = std::get_if<ir::Convolution>(&call.call.op);
  if (!conv || conv->transposed || conv->input.sizes.size() < 2 || conv->weight.sizes.size() < 2) return false;
  const ir::Expr groups(conv->groups);
  return conv->groups > 1 && conv->input.sizes[1] == groups && conv->weight.sizes[0] == groups &&
         conv->weight.sizes[1].is_const(1) && conv->input.strides == ir::contiguous_strides(conv->input.sizes) &&
         call.output->strides == ir::contiguous_strides(call.output->sizes);
}

bool stored_product(const ir::LoopNode& call) {
  const auto* conv = std::get_if<ir::Convolution>(&call.call.op);
  if (!conv) return false;
  auto values = [](const std::vector<ir::Expr>& exprs) -> std::optional<std::vector<int64_t>> {
    std::vector<int64_t> v;
    for (const ir::Expr& e : exprs) {
      if (!e.is_const()) return std::nullopt;
      v.push_back(e.const_value());
    }
    return v;
  };
  auto in = values(conv->input.sizes), in_strides = values(conv->input.strides), w = values(conv->weight.sizes),
       out = values(call.ranges);
  return in && in_strides && w && out &&
         foundry_rt::conv_is_stored_product(*in, *in_strides, *w, conv->padding, *out, conv->groups, conv->transposed);
}

}  // namespace foundry::sched
