// Convolution + batch-norm folding, as one rewrite rule.
#include "foundry/passes/fold_conv_bn.h"

#include <cmath>
#include <cstring>

#include "foundry/ops/registry.h"
#include "foundry/passes/rewrite.h"

namespace foundry::passes {

namespace {

// A float32 constant argument's elements (nullopt for anything else); `none_ok` accepts None.
struct Param {
  bool present = false;
  std::vector<double> data;
};

std::optional<Param> constant_param(const Rewriter& rw, const Arg& a, bool none_ok, int64_t numel) {
  if (a.is_none()) return none_ok ? std::optional<Param>(Param{}) : std::nullopt;
  if (a.kind != Arg::Kind::Tensor || !a.tensor) return std::nullopt;
  const GraphInput* in = rw.constant_input(a.tensor);
  if (!in || a.tensor->type.dtype != DType::Float32 || a.tensor->type.numel() != numel) return std::nullopt;
  auto data = read_constant(*in);
  if (!data) return std::nullopt;
  return Param{true, std::move(*data)};
}

std::vector<uint8_t> to_float32_bytes(const std::vector<double>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  for (size_t i = 0; i < v.size(); ++i) {
    float f = static_cast<float>(v[i]);
    std::memcpy(bytes.data() + i * sizeof(float), &f, sizeof f);
  }
  return bytes;
}

std::optional<Replacement> fold(Rewriter& rw, Node& bn) {
  if (bn.outputs.size() != 3 || rw.is_used(bn.outputs[1]) || rw.is_used(bn.outputs[2])) return std::nullopt;
  Value* x = shape::arg(bn, "input").tensor;
  Node* conv = x ? rw.producer(x) : nullptr;
  if (!conv || !conv->op || conv->target != "convolution" || conv->outputs.size() != 1) return std::nullopt;
  if (!rw.has_single_user(x) || shape::arg(*conv, "transposed").i != 0) return std::nullopt;

  const Arg& w_arg = shape::arg(*conv, "weight");
  if (w_arg.kind != Arg::Kind::Tensor || !w_arg.tensor) return std::nullopt;
  const TensorType& wt = w_arg.tensor->type;
  const TensorType& yt = x->type;
  if (wt.rank() < 3 || yt.rank() != wt.rank() || yt.dtype != DType::Float32 || yt.has_symbolic_sizes())
    return std::nullopt;
  const int64_t channels = wt.sizes[0];
  if (channels <= 0 || yt.sizes[1] != channels) return std::nullopt;

  auto w = constant_param(rw, w_arg, false, wt.numel());
  auto b = constant_param(rw, shape::arg(*conv, "bias"), true, channels);
  auto gamma = constant_param(rw, shape::arg(bn, "weight"), true, channels);
  auto beta = constant_param(rw, shape::arg(bn, "bias"), true, channels);
  auto mean = constant_param(rw, shape::arg(bn, "running_mean"), false, channels);
  auto var = constant_param(rw, shape::arg(bn, "running_var"), false, channels);
  if (!w || !b || !gamma || !beta || !mean || !var) return std::nullopt;
  const double eps = shape::arg(bn, "eps").as_double();

  const int64_t per_channel = wt.numel() / channels;
  std::vector<double> new_w(w->data.size()), new_b(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    double g = gamma->present ? gamma->data[c] : 1.0;
    double s = g / std::sqrt(var->data[c] + eps);
    for (int64_t k = 0; k < per_channel; ++k) new_w[c * per_channel + k] = w->data[c * per_channel + k] * s;
    double bias = b->present ? b->data[c] : 0.0;
    new_b[c] = (bias - mean->data[c]) * s + (beta->present ? beta->data[c] : 0.0);
  }

  // The convolution's output had no other reader: it becomes the normalized value in place.
  TensorType bias_type;
  bias_type.dtype = DType::Float32;
  bias_type.sizes = {channels};
  const Arg& b_arg = shape::arg(*conv, "bias");
  std::string b_hint = b_arg.tensor ? b_arg.tensor->name : conv->name + "_bias";
  Value* w_new = rw.add_constant(w_arg.tensor->name + "_bn", wt, to_float32_bytes(new_w));
  Value* b_new = rw.add_constant(b_hint + "_bn", bias_type, to_float32_bytes(new_b));
  for (size_t i = 0; i < conv->args.size() && i < conv->op->schema.args.size(); ++i) {
    const std::string& name = conv->op->schema.args[i].name;
    if (name == "weight") rw.set_arg(*conv, i, Arg::of_tensor(w_new));
    if (name == "bias") rw.set_arg(*conv, i, Arg::of_tensor(b_new));
  }
  return Replacement{{x, nullptr, nullptr}};
}

}  // namespace

bool fold_conv_batch_norm(Graph& g) {
  return apply_rules(g, {RewriteRule{"conv-bn", {"_native_batch_norm_legit_no_training"}, nullptr, fold}});
}

}  // namespace foundry::passes
