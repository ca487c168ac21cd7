// Decomposition of training-IR ops into core ATen ops (see decompose.h): functionalization of
// in-place ops, then one rewrite rule per composite op, each following what PyTorch's own
// decomposition (torch._decomp / the CompositeImplicitAutograd kernels) produces.
#include "foundry/passes/decompose.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_set>

#include "foundry/ops/einsum.h"
#include "foundry/ops/registry.h"
#include "foundry/passes/rewrite.h"
#include "foundry/passes/symbolic_types.h"
#include "foundry/support/error.h"

namespace foundry::passes {

namespace {

std::string node_label(const Node& n) {
  return "node " + quote_untrusted(n.source_name.empty() ? n.name : n.source_name, 60) + " (" + qualified_op_name(n.target) + ")";
}

[[noreturn]] void refuse(const Node& n, const std::string& why) { throw UserError(node_label(n) + ": " + why); }

// ---- building replacement nodes ----

// A node of `op` (not yet in a graph) with its arguments bound by name, defaults filled in.
std::unique_ptr<Node> bound_node(const std::string& op, const std::vector<std::pair<std::string, Arg>>& named) {
  const OpInfo* info = find_op(op);
  FOUNDRY_CHECK(info != nullptr, "decompose: unknown op " + op);
  std::vector<RawArg> raw;
  for (const auto& [name, value] : named) raw.push_back(RawArg{name, value, false});
  auto node = std::make_unique<Node>();
  node->op = info;
  node->target = info->name;
  node->name = info->schema.name;
  node->args = bind_arguments(*info, raw, &node->arg_names);
  return node;
}

// Inserts nodes before the node being rewritten; arguments are given by name (defaults filled in
// from the schema) and output types come from the op's own shape rule.
class Emitter {
 public:
  Emitter(Rewriter& rw, Node& at) : rw_(rw), at_(at) {}

  std::vector<Value*> all(const std::string& op, const std::vector<std::pair<std::string, Arg>>& named) {
    std::unique_ptr<Node> tmp = bound_node(op, named);
    std::vector<TensorType> types;
    try {
      types = tmp->op->infer(*tmp);
    } catch (const UserError& e) {
      throw UserError(node_label(at_) + ": decomposing into aten." + op + ": " + e.what());
    }
    propagate_symbols(rw_.graph(), *tmp, types);  // shape rules give the export's sizes only
    return rw_.insert_node(op, std::move(tmp->args), types, &at_)->outputs;
  }
  Value* one(const std::string& op, const std::vector<std::pair<std::string, Arg>>& named) { return all(op, named)[0]; }
  // The first output of `op` called with the rewritten node's own arguments of these names.
  Value* forward(const std::string& op, const std::vector<std::string>& names) {
    std::vector<std::pair<std::string, Arg>> named;
    for (const auto& name : names) named.push_back({name, shape::arg(at_, name)});
    return all(op, named)[0];
  }

  // Shorthands for the ops the rules use most.
  Value* view(Value* x, std::vector<int64_t> sizes) {
    if (x->type.sizes == sizes) return x;
    return one("view", {{"self", T(x)}, {"size", Arg::of_ints(std::move(sizes))}});
  }
  Value* permute(Value* x, std::vector<int64_t> dims) {
    return one("permute", {{"self", T(x)}, {"dims", Arg::of_ints(std::move(dims))}});
  }
  Value* expand(Value* x, std::vector<int64_t> sizes) {
    if (x->type.sizes == sizes) return x;
    return one("expand", {{"self", T(x)}, {"size", Arg::of_ints(std::move(sizes))}});
  }
  static Arg T(Value* v) { return Arg::of_tensor(v); }
  static Arg Ts(std::vector<Value*> vs) {
    Arg a;
    a.kind = Arg::Kind::TensorList;
    a.tensors = std::move(vs);
    return a;
  }

  // torch.matmul of two tensors of rank >= 2 with the same rank: the batch dims broadcast, are
  // flattened into one, and a bmm (mm for rank 2) does the work; the result is viewed back.
  Value* matmul(Value* a, Value* b) {
    const auto& as = a->type.sizes;
    const auto& bs = b->type.sizes;
    FOUNDRY_CHECK(as.size() >= 2 && as.size() == bs.size(), "decompose: matmul of unexpected ranks");
    if (as.size() == 2) return one("mm", {{"self", T(a)}, {"mat2", T(b)}});
    std::vector<int64_t> batch = shape::broadcast_shapes(std::vector<int64_t>(as.begin(), as.end() - 2),
                                                         std::vector<int64_t>(bs.begin(), bs.end() - 2));
    int64_t nb = 1;
    for (int64_t s : batch) nb *= s;
    const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
    auto with = [&](int64_t r, int64_t c) {
      std::vector<int64_t> s = batch;
      s.push_back(r);
      s.push_back(c);
      return s;
    };
    Value* a3 = view(expand(a, with(m, k)), {nb, m, k});
    Value* b3 = view(expand(b, with(k, n)), {nb, k, n});
    Value* c = one("bmm", {{"self", T(a3)}, {"mat2", T(b3)}});
    return view(c, with(m, n));
  }

 private:
  Rewriter& rw_;
  Node& at_;
};

using Named = std::vector<std::pair<std::string, Arg>>;
using Emit = Emitter;

Value* tensor_arg(const Node& n, const char* name) {
  const Arg& a = shape::arg(n, name);
  if (a.kind != Arg::Kind::Tensor || !a.tensor) refuse(n, std::string("argument '") + name + "' must be a tensor");
  return a.tensor;
}

std::optional<Replacement> same(Value* v) { return Replacement{{v}}; }

Value* slice_along(Emit& e, Value* v, int64_t dim, int64_t start, int64_t end) {
  return e.one("slice.Tensor", {{"self", Emit::T(v)}, {"dim", Arg::of_int(dim)}, {"start", Arg::of_int(start)}, {"end", Arg::of_int(end)}});
}

// The positions start, start + 1, ..., end - 1 as an int64 tensor.
Value* positions(Emit& e, int64_t start, int64_t end) {
  return e.one("arange.start_step", {{"start", Arg::of_int(start)}, {"end", Arg::of_int(end)}, {"dtype", Arg::of_dtype(DType::Int64)}});
}

// ---- the rules ----

// linear(x, w, b) = x @ w^T + b: addmm (mm without bias) on x viewed as a matrix.
std::optional<Replacement> linear(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "input");
  Value* w = tensor_arg(n, "weight");
  const Arg& b = shape::arg(n, "bias");
  if (w->type.rank() != 2) refuse(n, "only a 2-d weight is supported");
  const std::vector<int64_t>& xs = x->type.sizes;
  if (xs.empty()) refuse(n, "a 0-d input is not supported");
  const int64_t k = xs.back(), out_features = w->type.sizes[0];
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < xs.size(); ++i) rows *= xs[i];
  Value* wt = e.permute(w, {1, 0});
  Value* x2 = e.view(x, {rows, k});
  Value* y2 = b.is_none() ? e.one("mm", {{"self", Emit::T(x2)}, {"mat2", Emit::T(wt)}})
                          : e.one("addmm", {{"self", b}, {"mat1", Emit::T(x2)}, {"mat2", Emit::T(wt)}});
  std::vector<int64_t> out(xs.begin(), xs.end() - 1);
  out.push_back(out_features);
  return same(e.view(y2, out));
}

// A per-spatial-dim parameter of conv1d/conv2d (stride, padding, dilation): one value for all.
std::vector<int64_t> spatial_list(const Node& n, const char* name, size_t spatial) {
  std::vector<int64_t> v = shape::ints_arg(n, name);
  if (v.size() == 1) v.assign(spatial, v[0]);
  return v;
}

// The convolution's padding per spatial dim: the ints given, or for padding="same" half of
// dilation * (kernel - 1) (its odd unit added on the right, to x, as ATen's _convolution_mode
// does) and for "valid" none.
std::vector<int64_t> conv_padding(Emit& e, const Node& n, Value*& x, const Value* w, size_t spatial) {
  const Arg& padding = shape::arg(n, "padding");
  if (padding.kind != Arg::Kind::String) return spatial_list(n, "padding", spatial);
  std::vector<int64_t> symmetric(spatial, 0), extra;  // extra: constant_pad_nd's list, last dim first
  if (padding.s == "same") {
    const std::vector<int64_t> dilation = spatial_list(n, "dilation", spatial);
    for (size_t i = spatial; i-- > 0;) {
      const int64_t total = dilation[i] * (w->type.sizes[2 + i] - 1);
      symmetric[i] = total / 2;
      extra.insert(extra.end(), {0, total % 2});
    }
  }
  if (std::any_of(extra.begin(), extra.end(), [](int64_t p) { return p != 0; }))
    x = e.one("constant_pad_nd", {{"self", Emit::T(x)}, {"pad", Arg::of_ints(extra)}, {"value", Arg::of_int(0)}});
  return symmetric;
}

// conv1d/2d and conv_transpose1d/2d -> convolution, as ATen's do: an unbatched input gets a
// batch dim of 1 around it; a direct convolution's padding may be a string ("same", "valid").
std::optional<Replacement> as_convolution(Rewriter& rw, Node& n, bool transposed) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "input");
  Value* w = tensor_arg(n, "weight");
  if (w->type.rank() < 3) refuse(n, "the weight must be at least 3-d, got " + shape::format_sizes(w->type.sizes));
  const size_t spatial = static_cast<size_t>(w->type.rank() - 2);
  const bool unbatched = x->type.rank() == w->type.rank() - 1;
  if (unbatched) x = e.one("unsqueeze", {{"self", Emit::T(x)}, {"dim", Arg::of_int(0)}});
  const std::vector<int64_t> padding =
      transposed ? spatial_list(n, "padding", spatial) : conv_padding(e, n, x, w, spatial);
  const std::vector<int64_t> output_padding =
      transposed ? spatial_list(n, "output_padding", spatial) : std::vector<int64_t>(spatial, 0);
  Value* y = e.one("convolution", {{"input", Emit::T(x)},
                                   {"weight", Emit::T(w)},
                                   {"bias", shape::arg(n, "bias")},
                                   {"stride", Arg::of_ints(spatial_list(n, "stride", spatial))},
                                   {"padding", Arg::of_ints(padding)},
                                   {"dilation", Arg::of_ints(spatial_list(n, "dilation", spatial))},
                                   {"transposed", Arg::of_bool(transposed)},
                                   {"output_padding", Arg::of_ints(output_padding)},
                                   {"groups", shape::arg(n, "groups")}});
  if (unbatched) y = e.one("squeeze.dims", {{"self", Emit::T(y)}, {"dim", Arg::of_ints({0})}});
  return same(y);
}

std::optional<Replacement> conv_nd(Rewriter& rw, Node& n) { return as_convolution(rw, n, false); }
std::optional<Replacement> conv_transpose(Rewriter& rw, Node& n) { return as_convolution(rw, n, true); }

// Without running statistics (BatchNorm2d(track_running_stats=False)) batch norm normalizes by
// the batch's statistics: _native_batch_norm_legit.no_stats, in training mode only (as in ATen).
std::optional<Replacement> batch_norm(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  if (shape::arg(n, "running_mean").is_none() && shape::arg(n, "running_var").is_none()) {
    if (!shape::bool_arg(n, "training")) refuse(n, "batch_norm without running statistics needs training=True");
    return same(e.forward("_native_batch_norm_legit.no_stats", {"input", "weight", "bias", "training", "momentum", "eps"}));
  }
  if (shape::bool_arg(n, "training"))
    refuse(n, "batch_norm in training mode is not supported (export the model after model.eval())");
  if (shape::arg(n, "running_mean").is_none() || shape::arg(n, "running_var").is_none())
    refuse(n, "batch_norm with only one of running_mean and running_var is not supported");
  return same(e.forward("_native_batch_norm_legit_no_training",
                         {"input", "weight", "bias", "running_mean", "running_var", "momentum", "eps"}));
}

// PyTorch's instance_norm: the input viewed as [1, N*C, ...] (each instance's channel a channel),
// weight and bias repeated N times, batch norm with that view's statistics, viewed back.
std::optional<Replacement> instance_norm(Rewriter& rw, Node& n) {
  if (!shape::bool_arg(n, "use_input_stats") || !shape::arg(n, "running_mean").is_none() ||
      !shape::arg(n, "running_var").is_none())
    refuse(n, "instance_norm with running statistics (track_running_stats=True) is not supported");
  Emit e(rw, n);
  Value* x = tensor_arg(n, "input");
  const std::vector<int64_t>& sizes = x->type.sizes;
  if (sizes.size() < 2) refuse(n, "instance_norm needs an input of rank >= 2");
  std::vector<int64_t> merged = sizes;
  merged[0] = 1;
  merged[1] = sizes[0] * sizes[1];
  auto repeated = [&](const char* name) {
    const Arg& a = shape::arg(n, name);
    return a.is_none() ? a : Emit::T(e.one("repeat", {{"self", a}, {"repeats", Arg::of_ints({sizes[0]})}}));
  };
  Value* y = e.one("_native_batch_norm_legit.no_stats",
                   {{"input", Emit::T(e.view(x, merged))}, {"weight", repeated("weight")}, {"bias", repeated("bias")},
                    {"training", Arg::of_bool(true)}, {"momentum", shape::arg(n, "momentum")}, {"eps", shape::arg(n, "eps")}});
  return same(e.view(y, sizes));
}

// Batch norm with batch statistics, as torch._decomp's native_batch_norm_helper: biased variance
// and mean over every dim but 1, out = (x - mean) / sqrt(var + eps) * weight + bias; the running
// statistics move by `momentum` towards the mean and the unbiased variance. Not training, the
// functional form is the inference batch norm with the running statistics unchanged.
std::optional<Replacement> batch_norm_functional(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "input");
  Value* running_mean = tensor_arg(n, "running_mean");
  Value* running_var = tensor_arg(n, "running_var");
  const bool with_update = !shape::has_arg(n, "training");
  if (!with_update && !shape::bool_arg(n, "training")) {
    std::vector<Value*> outs = e.all("_native_batch_norm_legit_no_training",
                                     {{"input", Emit::T(x)}, {"weight", shape::arg(n, "weight")}, {"bias", shape::arg(n, "bias")},
                                      {"running_mean", Emit::T(running_mean)}, {"running_var", Emit::T(running_var)},
                                      {"momentum", shape::arg(n, "momentum")}, {"eps", shape::arg(n, "eps")}});
    return Replacement{{outs[0], outs[1], outs[2], running_mean, running_var}};
  }
  const int64_t rank = x->type.rank(), channels = x->type.sizes[1];
  std::vector<int64_t> dims, per_channel(static_cast<size_t>(rank), 1);
  for (int64_t d = 0; d < rank; ++d)
    if (d != 1) dims.push_back(d);
  per_channel[1] = channels;
  std::vector<Value*> var_mean = e.all("var_mean.correction", {{"self", Emit::T(x)}, {"dim", Arg::of_ints(dims)},
                                                               {"correction", Arg::of_int(0)}, {"keepdim", Arg::of_bool(true)}});
  auto binary = [&](const char* op, Value* a, Arg b) { return e.one(op, {{"self", Emit::T(a)}, {"other", b}}); };
  Value* rstd = e.one("rsqrt", {{"self", Emit::T(binary("add.Scalar", var_mean[0], shape::arg(n, "eps")))}});
  Value* y = binary("mul.Tensor", binary("sub.Tensor", x, Emit::T(var_mean[1])), Emit::T(rstd));
  if (!shape::arg(n, "weight").is_none()) y = binary("mul.Tensor", y, Emit::T(e.view(tensor_arg(n, "weight"), per_channel)));
  if (!shape::arg(n, "bias").is_none()) y = binary("add.Tensor", y, Emit::T(e.view(tensor_arg(n, "bias"), per_channel)));

  const double momentum = shape::number_arg(n, "momentum");
  const double count = static_cast<double>(x->type.numel()) / static_cast<double>(channels);
  auto update = [&](Value* running, Value* batch, double batch_scale) {
    Value* kept = binary("mul.Scalar", running, Arg::of_float(1 - momentum));
    return binary("add.Tensor", kept, Emit::T(binary("mul.Scalar", e.view(batch, {channels}), Arg::of_float(momentum * batch_scale))));
  };
  std::vector<Value*> outs = {y, e.view(var_mean[1], {channels}), e.view(rstd, {channels})};
  if (with_update)
    outs.push_back(e.one("empty.memory_format", {{"size", Arg::of_ints({0})}, {"dtype", Arg::of_dtype(DType::UInt8)}}));
  outs.push_back(update(running_mean, var_mean[1], 1));
  outs.push_back(update(running_var, var_mean[0], count / (count - 1)));
  return Replacement{outs};
}

std::optional<Replacement> layer_norm(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(e.forward("native_layer_norm", {"input", "normalized_shape", "weight", "bias", "eps"}));
}

// group_norm -> native_group_norm with N, C and the product of the remaining dims (HxW).
std::optional<Replacement> group_norm(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "input");
  const std::vector<int64_t>& s = x->type.sizes;
  const int64_t hw = x->type.numel() / std::max<int64_t>(s[0] * s[1], 1);
  return same(e.one("native_group_norm", {{"input", Emit::T(x)},
                                          {"weight", shape::arg(n, "weight")},
                                          {"bias", shape::arg(n, "bias")},
                                          {"N", Arg::of_int(s[0])},
                                          {"C", Arg::of_int(s[1])},
                                          {"HxW", Arg::of_int(hw)},
                                          {"group", shape::arg(n, "num_groups")},
                                          {"eps", shape::arg(n, "eps")}}));
}

// _weight_norm(v, g, dim) = v * (g / ||v||), the 2-norm over every dim but `dim` (all of them
// for dim -1), kept as size-1 dims so that it broadcasts (torch._decomp's _weight_norm_interface).
std::optional<Replacement> weight_norm(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* v = tensor_arg(n, "v");
  const int64_t dim = shape::int_arg(n, "dim");
  const int64_t kept = dim == -1 ? -1 : shape::normalize_dim(dim, v->type.rank());
  std::vector<int64_t> reduced;
  for (int64_t d = 0; d < v->type.rank(); ++d)
    if (d != kept) reduced.push_back(d);
  Value* squares = e.one("mul.Tensor", {{"self", Emit::T(v)}, {"other", Emit::T(v)}});
  Value* sum = e.one("sum.dim_IntList", {{"self", Emit::T(squares)}, {"dim", Arg::of_ints(reduced)}, {"keepdim", Arg::of_bool(true)}});
  Value* scale = e.one("div.Tensor", {{"self", shape::arg(n, "g")}, {"other", Emit::T(e.one("sqrt", {{"self", Emit::T(sum)}}))}});
  return same(e.one("mul.Tensor", {{"self", Emit::T(v)}, {"other", Emit::T(scale)}}));
}

// PyTorch's math attention (_scaled_dot_product_attention_math): both q and k^T are scaled by
// sqrt(scale); a boolean mask (or is_causal's lower triangle) becomes 0 / -inf and is added; the
// softmax over the last dim is the "safe" one (rows that are all -inf give zeros, not NaN).
std::optional<Replacement> sdpa(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* q = tensor_arg(n, "query");
  Value* k = tensor_arg(n, "key");
  Value* v = tensor_arg(n, "value");
  const Arg& mask_arg = shape::arg(n, "attn_mask");
  const bool causal = shape::bool_arg(n, "is_causal");
  if (shape::number_arg(n, "dropout_p") != 0.0) refuse(n, "attention with dropout_p != 0 is not supported");
  const int64_t rank = q->type.rank();
  if (rank < 2 || k->type.rank() != rank || v->type.rank() != rank)
    refuse(n, "query, key and value must have the same rank (2 or more)");
  if (rank >= 3 && shape::bool_arg(n, "enable_gqa") && q->type.sizes[rank - 3] != k->type.sizes[rank - 3])
    refuse(n, "grouped-query attention (enable_gqa with fewer key/value heads) is not supported");
  if (causal && !mask_arg.is_none()) refuse(n, "is_causal and attn_mask cannot both be set");
  if (!is_floating(q->type.dtype)) refuse(n, "attention needs floating inputs");

  const int64_t head_dim = q->type.sizes.back();
  const Arg& scale_arg = shape::arg(n, "scale");
  const double scale = scale_arg.is_none() ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : scale_arg.as_double();
  const double factor = std::sqrt(std::abs(scale));
  const double q_factor = scale < 0 ? -factor : factor;

  std::vector<int64_t> swap_last(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) swap_last[static_cast<size_t>(i)] = i;
  std::swap(swap_last[static_cast<size_t>(rank - 2)], swap_last[static_cast<size_t>(rank - 1)]);

  Value* qs = e.one("mul.Scalar", {{"self", Emit::T(q)}, {"other", Arg::of_float(q_factor)}});
  Value* kt = e.permute(k, swap_last);
  Value* ks = e.one("mul.Scalar", {{"self", Emit::T(kt)}, {"other", Arg::of_float(factor)}});
  Value* attn = e.matmul(qs, ks);

  const DType dt = q->type.dtype;
  auto additive = [&](Value* keep) {  // bool mask -> 0 where true, -inf where false
    Value* zero = e.one("scalar_tensor", {{"s", Arg::of_float(0.0)}, {"dtype", Arg::of_dtype(dt)}});
    Value* ninf = e.one("scalar_tensor",
                        {{"s", Arg::of_float(-std::numeric_limits<double>::infinity())}, {"dtype", Arg::of_dtype(dt)}});
    return e.one("where.self", {{"condition", Emit::T(keep)}, {"self", Emit::T(zero)}, {"other", Emit::T(ninf)}});
  };
  Value* mask = nullptr;
  if (causal) {
    const int64_t l = q->type.sizes[static_cast<size_t>(rank - 2)], s = k->type.sizes[static_cast<size_t>(rank - 2)];
    Value* rows = e.one("arange.start_step", {{"start", Arg::of_int(0)}, {"end", Arg::of_int(l)}, {"dtype", Arg::of_dtype(DType::Int64)}});
    Value* cols = e.one("arange.start_step", {{"start", Arg::of_int(0)}, {"end", Arg::of_int(s)}, {"dtype", Arg::of_dtype(DType::Int64)}});
    Value* keep = e.one("ge.Tensor", {{"self", Emit::T(e.view(rows, {l, 1}))}, {"other", Emit::T(e.view(cols, {1, s}))}});
    mask = additive(keep);  // tril: column <= row
  } else if (!mask_arg.is_none()) {
    if (mask_arg.kind != Arg::Kind::Tensor || !mask_arg.tensor) refuse(n, "attn_mask must be a tensor");
    mask = mask_arg.tensor->type.dtype == DType::Bool ? additive(mask_arg.tensor) : mask_arg.tensor;
  }
  if (mask) attn = e.one("add.Tensor", {{"self", Emit::T(attn)}, {"other", Emit::T(mask)}});

  // _safe_softmax(attn, -1)
  Value* sm = e.one("_softmax", {{"self", Emit::T(attn)}, {"dim", Arg::of_int(-1)}, {"half_to_float", Arg::of_bool(false)}});
  Value* is_ninf = e.one("eq.Scalar", {{"self", Emit::T(attn)}, {"other", Arg::of_float(-std::numeric_limits<double>::infinity())}});
  Value* finite = e.one("logical_not", {{"self", Emit::T(is_ninf)}});
  Value* any = e.one("any.dim", {{"self", Emit::T(finite)}, {"dim", Arg::of_int(-1)}, {"keepdim", Arg::of_bool(true)}});
  Value* all_masked = e.one("logical_not", {{"self", Emit::T(any)}});
  Value* zeros = e.one("full_like", {{"self", Emit::T(sm)}, {"fill_value", Arg::of_int(0)}});
  Value* probs = e.one("where.self", {{"condition", Emit::T(all_masked)}, {"self", Emit::T(zeros)}, {"other", Emit::T(sm)}});
  return same(e.matmul(probs, v));
}

std::optional<Replacement> max_pool2d(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(e.forward("max_pool2d_with_indices", {"self", "kernel_size", "stride", "padding", "dilation", "ceil_mode"}));
}

// A 1x1 output is a mean over the last two dims (as PyTorch's adaptive_avg_pool2d does).
Value* adaptive_average(Emit& e, Value* x, const std::vector<int64_t>& size) {
  if (size == std::vector<int64_t>{1, 1})
    return e.one("mean.dim", {{"self", Emit::T(x)}, {"dim", Arg::of_ints({-1, -2})}, {"keepdim", Arg::of_bool(true)}});
  return e.one("_adaptive_avg_pool2d", {{"self", Emit::T(x)}, {"output_size", Arg::of_ints(size)}});
}

std::optional<Replacement> adaptive_avg_pool2d(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(adaptive_average(e, tensor_arg(n, "self"), spatial_list(n, "output_size", 2)));
}

// adaptive_avg_pool1d is the 2-d pooling of the input with a height of 1, as ATen computes it.
std::optional<Replacement> adaptive_avg_pool1d(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = e.one("unsqueeze", {{"self", shape::arg(n, "self")}, {"dim", Arg::of_int(-2)}});
  Value* y = adaptive_average(e, x, {1, shape::ints_arg(n, "output_size").at(0)});
  return same(e.one("squeeze.dims", {{"self", Emit::T(y)}, {"dim", Arg::of_ints({-2})}}));
}

// avg_pool1d, max_pool1d: the 2-d pooling of the input with a height of 1 (ATen's own way).
std::optional<Replacement> pool1d(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  auto widened = [&](const char* name, int64_t height_value, int64_t empty_value) {
    std::vector<int64_t> v = shape::ints_arg(n, name);
    return Arg::of_ints({height_value, v.empty() ? empty_value : v.at(0)});
  };
  const int64_t kernel = shape::ints_arg(n, "kernel_size").at(0);
  std::vector<std::pair<std::string, Arg>> args = {
      {"self", Emit::T(e.one("unsqueeze", {{"self", shape::arg(n, "self")}, {"dim", Arg::of_int(-2)}}))},
      {"kernel_size", widened("kernel_size", 1, kernel)},
      {"stride", widened("stride", 1, kernel)},
      {"padding", widened("padding", 0, 0)}};
  const bool max = n.target == "max_pool1d";
  if (max) args.push_back({"dilation", widened("dilation", 1, 1)});
  args.push_back({"ceil_mode", shape::arg(n, "ceil_mode")});
  if (!max) args.push_back({"count_include_pad", shape::arg(n, "count_include_pad")});
  Value* y = max ? e.all("max_pool2d_with_indices", args)[0] : e.one("avg_pool2d", args);
  return same(e.one("squeeze.dims", {{"self", Emit::T(y)}, {"dim", Arg::of_ints({-2})}}));
}

// adaptive_avg_pool3d to 1x1x1 (video classifiers' head) is a mean over the last three dims;
// other sizes are refused.
std::optional<Replacement> adaptive_avg_pool3d(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  if (spatial_list(n, "output_size", 3) != std::vector<int64_t>{1, 1, 1})
    refuse(n, "adaptive_avg_pool3d: only an output of 1x1x1 is supported");
  return same(e.one("mean.dim", {{"self", shape::arg(n, "self")}, {"dim", Arg::of_ints({-1, -2, -3})}, {"keepdim", Arg::of_bool(true)}}));
}

// softplus(x, beta, threshold): x where beta * x > threshold, else log1p(exp(beta * x)) / beta
// (ATen's formula).
std::optional<Replacement> softplus(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const Arg& beta = shape::arg(n, "beta");
  Value* scaled = e.one("mul.Tensor", {{"self", Emit::T(x)}, {"other", beta}});
  Value* smooth = e.one("log1p", {{"self", Emit::T(e.one("exp", {{"self", Emit::T(scaled)}}))}});
  smooth = e.one("div.Tensor", {{"self", Emit::T(smooth)}, {"other", beta}});
  Value* above = e.one("gt.Scalar", {{"self", Emit::T(scaled)}, {"other", shape::arg(n, "threshold")}});
  return same(e.one("where.self", {{"condition", Emit::T(above)}, {"self", Emit::T(x)}, {"other", Emit::T(smooth)}}));
}

// linspace as torch._refs computes it, from both ends towards the middle: start + step * i in
// the first half, end - step * (steps - 1 - i) in the second.
std::optional<Replacement> linspace(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const DType dtype = n.op->infer(n)[0].dtype;
  if (!is_floating(dtype)) refuse(n, "linspace: only a floating dtype is supported");
  const int64_t steps = shape::int_arg(n, "steps");
  const double start = shape::number_arg(n, "start"), end = shape::number_arg(n, "end");
  if (steps <= 1)
    return same(e.one("full", {{"size", Arg::of_ints({steps})}, {"fill_value", Arg::of_float(start)}, {"dtype", Arg::of_dtype(dtype)}}));
  const double step = (end - start) / static_cast<double>(steps - 1);
  Value* i = e.one("arange.start_step", {{"start", Arg::of_int(0)}, {"end", Arg::of_int(steps)}, {"step", Arg::of_int(1)},
                                         {"dtype", Arg::of_dtype(dtype)}});
  auto from = [&](Value* offset, double origin) {  // origin + step * offset
    Value* scaled = e.one("mul.Tensor", {{"self", Emit::T(offset)}, {"other", Arg::of_float(step)}});
    return e.one("add.Tensor", {{"self", Emit::T(scaled)}, {"other", Arg::of_float(origin)}});
  };
  Value* back = e.one("sub.Tensor", {{"self", Emit::T(i)}, {"other", Arg::of_int(steps - 1)}});
  Value* first_half = e.one("lt.Scalar", {{"self", Emit::T(i)}, {"other", Arg::of_float(static_cast<double>(steps) / 2)}});
  return same(e.one("where.self", {{"condition", Emit::T(first_half)}, {"self", Emit::T(from(i, start))}, {"other", Emit::T(from(back, end))}}));
}

// Every reshape-like op is a view to the op's own result shape (views are logical in foundryc:
// the lowering remaps indices whatever the source's strides).
std::optional<Replacement> reshape_like(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  std::vector<TensorType> t = n.op->infer(n);
  if (same_type(t[0], x->type)) return same(x);
  return same(e.one("view", {{"self", Emit::T(x)}, {"size", Arg::of_ints(t[0].sizes)}}));
}

std::optional<Replacement> contiguous(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(e.one("clone", {{"self", shape::arg(n, "self")}}));
}

std::optional<Replacement> transpose(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const int64_t rank = x->type.rank();
  if (rank == 0) return same(x);
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) dims[static_cast<size_t>(i)] = i;
  const bool axes = shape::has_arg(n, "axis0");  // swapaxes
  std::swap(dims[static_cast<size_t>(shape::normalize_dim(shape::int_arg(n, axes ? "axis0" : "dim0"), rank))],
            dims[static_cast<size_t>(shape::normalize_dim(shape::int_arg(n, axes ? "axis1" : "dim1"), rank))]);
  return same(e.permute(x, dims));
}

std::optional<Replacement> squeeze_dim(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(e.one("squeeze.dims", {{"self", shape::arg(n, "self")}, {"dim", Arg::of_ints({shape::int_arg(n, "dim")})}}));
}

std::optional<Replacement> softmax_int(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  if (auto dt = shape::dtype_arg(n, "dtype"); dt && *dt != x->type.dtype)
    x = e.one("_to_copy", {{"self", Emit::T(x)}, {"dtype", Arg::of_dtype(*dt)}});
  return same(e.one("_softmax", {{"self", Emit::T(x)}, {"dim", shape::arg(n, "dim")}, {"half_to_float", Arg::of_bool(false)}}));
}

// to.*: a cast when the dtype changes, else the input itself.
std::optional<Replacement> to_dtype(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  DType dt = n.op->infer(n)[0].dtype;
  if (dt == x->type.dtype) return same(x);
  return same(e.one("_to_copy", {{"self", Emit::T(x)}, {"dtype", Arg::of_dtype(dt)}}));
}

// argsort -> sort's indices (foundryc's sort is stable, whatever `stable` says, as PyTorch's CPU
// sort is).
std::optional<Replacement> argsort(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Named args = {{"self", shape::arg(n, "self")}, {"dim", shape::arg(n, "dim")}, {"descending", shape::arg(n, "descending")}};
  return same(e.all("sort", args)[1]);
}

// msort -> sort's values along dim 0, ascending.
std::optional<Replacement> msort(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Named args = {{"self", shape::arg(n, "self")}, {"dim", Arg::of_int(0)}, {"descending", Arg::of_bool(false)}};
  return same(e.all("sort", args)[0]);
}

// grid_sampler of a 4-d input is grid_sampler_2d (its shape rule refuses other ranks).
std::optional<Replacement> grid_sampler(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(e.forward("grid_sampler_2d", {"input", "grid", "interpolation_mode", "padding_mode", "align_corners"}));
}

// embedding_bag, embedding_bag.padding_idx -> _embedding_bag (padding_idx absent or None: -1).
std::optional<Replacement> embedding_bag(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Named args;
  for (const char* name : {"weight", "indices", "offsets", "scale_grad_by_freq", "mode", "sparse", "per_sample_weights",
                           "include_last_offset"})
    args.push_back({name, shape::arg(n, name)});
  bool padded = shape::has_arg(n, "padding_idx") && !shape::arg(n, "padding_idx").is_none();
  args.push_back({"padding_idx", padded ? shape::arg(n, "padding_idx") : Arg::of_int(-1)});
  return Replacement{e.all("_embedding_bag", args)};
}

std::optional<Replacement> dropout(Rewriter&, Node& n) {
  if (shape::bool_arg(n, "train") && shape::number_arg(n, "p") != 0.0)
    refuse(n, n.target + " in training mode is not supported (export the model after model.eval())");
  return same(tensor_arg(n, "input"));
}

// clamp_min(x, m) = clamp(x, min=m), clamp_max(x, m) = clamp(x, max=m).
std::optional<Replacement> clamp_bound(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const char* bound = n.target == "clamp_min" ? "min" : "max";
  return same(e.one("clamp", {{"self", shape::arg(n, "self")}, {bound, shape::arg(n, bound)}}));
}

// split.Tensor and chunk: one split_with_sizes with the parts the op's rule gives.
std::optional<Replacement> split_like(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  std::vector<TensorType> parts = n.op->infer(n);
  if (parts.size() != n.outputs.size()) refuse(n, "the graph records " + std::to_string(n.outputs.size()) +
                                                   " outputs, the op gives " + std::to_string(parts.size()));
  const int64_t dim = shape::normalize_dim(shape::int_arg(n, "dim"), x->type.rank());
  std::vector<int64_t> sizes;
  for (const TensorType& t : parts) sizes.push_back(t.sizes[static_cast<size_t>(dim)]);
  return Replacement{e.all("split_with_sizes", {{"self", Emit::T(x)}, {"split_sizes", Arg::of_ints(sizes)}, {"dim", Arg::of_int(dim)}})};
}

// tensor_split: a slice per part (parts may overlap or be empty: indices need not increase).
std::optional<Replacement> tensor_split(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const int64_t dim = shape::normalize_dim(shape::int_arg(n, "dim"), x->type.rank());
  std::vector<std::pair<int64_t, int64_t>> bounds = shape::tensor_split_bounds(n, x->type.sizes[static_cast<size_t>(dim)]);
  if (bounds.size() != n.outputs.size())
    refuse(n, "the graph records " + std::to_string(n.outputs.size()) + " outputs, the op gives " + std::to_string(bounds.size()));
  std::vector<Value*> parts;
  for (auto [start, end] : bounds)
    parts.push_back(e.one("slice.Tensor", {{"self", Emit::T(x)}, {"dim", Arg::of_int(dim)}, {"start", Arg::of_int(start)},
                                           {"end", Arg::of_int(end)}, {"step", Arg::of_int(1)}}));
  return Replacement{parts};
}

// The op's `other` argument as a tensor: a number becomes a 0-d tensor of the op's result dtype
// (the operand of the functional op it becomes; scalars do not promote).
Arg other_as_tensor(Emit& e, const Node& n) {
  const Arg& other = shape::arg(n, "other");
  if (other.kind == Arg::Kind::Tensor) return other;
  return Emit::T(e.one("scalar_tensor", {{"s", other}, {"dtype", Arg::of_dtype(n.op->infer(n)[0].dtype)}}));
}

// floor_divide: division rounded down (PyTorch's floor_divide has rounded down since 1.13).
std::optional<Replacement> floor_divide(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const Arg other = other_as_tensor(e, n);
  return same(e.one("div.Tensor_mode", {{"self", shape::arg(n, "self")}, {"other", other},
                                        {"rounding_mode", Arg::of_string("floor")}}));
}

std::optional<Replacement> unbind(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  if (x->type.rank() == 0) refuse(n, "cannot unbind a 0-d tensor");
  const int64_t dim = shape::normalize_dim(shape::int_arg(n, "dim"), x->type.rank());
  const int64_t count = x->type.sizes[static_cast<size_t>(dim)];
  if (count != static_cast<int64_t>(n.outputs.size()))
    refuse(n, "the graph records " + std::to_string(n.outputs.size()) + " outputs for a dimension of size " +
                  std::to_string(count));
  std::vector<Value*> outs;
  for (int64_t i = 0; i < count; ++i)
    outs.push_back(e.one("select.int", {{"self", Emit::T(x)}, {"dim", Arg::of_int(dim)}, {"index", Arg::of_int(i)}}));
  return Replacement{outs};
}

// glu(x, dim) = a * sigmoid(b), a and b the two halves of x along dim (torch._refs.glu).
std::optional<Replacement> glu(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const int64_t dim = shape::normalize_dim(shape::int_arg(n, "dim"), x->type.rank());
  const int64_t half = x->type.sizes[static_cast<size_t>(dim)] / 2;
  Value* gate = e.one("sigmoid", {{"self", Emit::T(slice_along(e, x, dim, half, 2 * half))}});
  return same(e.one("mul.Tensor", {{"self", Emit::T(slice_along(e, x, dim, 0, half))}, {"other", Emit::T(gate)}}));
}

// one_hot(x, C): ones scattered into int64 zeros of shape [..., C] at x[..., None], as PyTorch's
// kernel does (torch._refs compares with arange(C) instead): a class outside [0, C), negative
// ones too, is then an index out of range that fails the run, as PyTorch raises. The zeros are
// x[..., None]'s, expanded (-1 keeps a dynamic size).
std::optional<Replacement> one_hot(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  Value* column = e.one("unsqueeze", {{"self", Emit::T(x)}, {"dim", Arg::of_int(-1)}});
  Value* zero = e.one("full_like", {{"self", Emit::T(column)}, {"fill_value", Arg::of_int(0)}, {"dtype", Arg::of_dtype(DType::Int64)}});
  std::vector<int64_t> sizes(x->type.rank(), -1);
  sizes.push_back(shape::int_arg(n, "num_classes"));
  Value* zeros = e.one("expand", {{"self", Emit::T(zero)}, {"size", Arg::of_ints(sizes)}});
  return same(e.one("scatter.value", {{"self", Emit::T(zeros)}, {"dim", Arg::of_int(-1)}, {"index", Emit::T(column)},
                                      {"value", Arg::of_int(1)}}));
}

// clamp(x + 3, 0, 6) / 6, with x * ... for hardswish (torch._decomp's hardsigmoid/hardswish).
Value* relu6_of_x_plus_3(Emit& e, Value* x) {
  Value* a = e.one("add.Tensor", {{"self", Emit::T(x)}, {"other", Arg::of_int(3)}});
  Value* lo = e.one("clamp", {{"self", Emit::T(a)}, {"min", Arg::of_int(0)}});
  return e.one("clamp", {{"self", Emit::T(lo)}, {"max", Arg::of_int(6)}});
}

std::optional<Replacement> hardswish(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  Value* m = e.one("mul.Tensor", {{"self", Emit::T(x)}, {"other", Emit::T(relu6_of_x_plus_3(e, x))}});
  return same(e.one("div.Tensor", {{"self", Emit::T(m)}, {"other", Arg::of_int(6)}}));
}

std::optional<Replacement> hardsigmoid(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  return same(e.one("div.Tensor", {{"self", Emit::T(relu6_of_x_plus_3(e, x))}, {"other", Arg::of_int(6)}}));
}

std::optional<Replacement> silu(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  Value* s = e.one("sigmoid", {{"self", Emit::T(x)}});
  return same(e.one("mul.Tensor", {{"self", Emit::T(x)}, {"other", Emit::T(s)}}));
}

std::optional<Replacement> relu6(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(e.one("hardtanh", {{"self", shape::arg(n, "self")}, {"min_val", Arg::of_int(0)}, {"max_val", Arg::of_int(6)}}));
}

// arange(end) and arange.start(start, end): arange.start_step with start 0 and step 1, in the
// dtype the op's own rule gives (float32 when any bound is a float).
std::optional<Replacement> arange(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const Arg start = shape::has_arg(n, "start") ? shape::arg(n, "start") : Arg::of_int(0);
  return same(e.one("arange.start_step", {{"start", start},
                                          {"end", shape::arg(n, "end")},
                                          {"step", Arg::of_int(1)},
                                          {"dtype", Arg::of_dtype(n.op->infer(n)[0].dtype)}}));
}

// zeros, ones, new_* and *_like: full (a `size` argument) or full_like, always with the dtype the
// op's rule gives, since full's own default comes from the fill value (0 would be int64).
Value* filled(Emit& e, const Node& n, const Arg& value) {
  const Arg dtype = Arg::of_dtype(n.op->infer(n)[0].dtype);
  if (shape::has_arg(n, "size"))
    return e.one("full", {{"size", shape::arg(n, "size")}, {"fill_value", value}, {"dtype", dtype}});
  return e.one("full_like", {{"self", shape::arg(n, "self")}, {"fill_value", value}, {"dtype", dtype}});
}

template <int kValue>
std::optional<Replacement> constant_fill(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(filled(e, n, Arg::of_int(kValue)));
}

// fill.Scalar; fill.Tensor's 0-d value in self's dtype, spread over self's shape.
std::optional<Replacement> fill(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const Arg& value = shape::arg(n, "value");
  if (value.kind != Arg::Kind::Tensor) return same(filled(e, n, value));
  Value* self = tensor_arg(n, "self");
  if (value.tensor->type.rank() != 0)
    refuse(n, "fill_ only supports a 0-dimension value tensor, got " + shape::format_sizes(value.tensor->type.sizes));
  Value* v = e.one("_to_copy", {{"self", value}, {"dtype", Arg::of_dtype(self->type.dtype)}});
  return same(e.one("clone", {{"self", Emit::T(e.expand(v, self->type.sizes))}}));
}

std::optional<Replacement> new_full(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(filled(e, n, shape::arg(n, "fill_value")));
}

// a & b, a | b, a ^ b: the bitwise ops, which are the logical ones on bools (as in ATen). A
// scalar operand becomes a 0-d tensor of the result's dtype (the tensor's: scalars do not promote).
std::optional<Replacement> bitwise_operator(Rewriter& rw, Node& n) {
  const std::string name = n.target.substr(0, n.target.find('.'));
  static const std::map<std::string, std::string> op_of = {
      {"__and__", "bitwise_and.Tensor"}, {"__or__", "bitwise_or.Tensor"}, {"__xor__", "bitwise_xor.Tensor"}};
  Emit e(rw, n);
  const Arg other = other_as_tensor(e, n);
  return same(e.one(op_of.at(name), {{"self", shape::arg(n, "self")}, {"other", other}}));
}

// lift_fresh_copy copies a constant the traced code created (torch.tensor(...)); the copy is
// only there to keep the constant itself from being updated, which a functional graph never does.
std::optional<Replacement> identity(Rewriter&, Node& n) { return same(tensor_arg(n, "self")); }

std::vector<int64_t> with_leading_ones(std::vector<int64_t> sizes, int64_t rank) {
  while (static_cast<int64_t>(sizes.size()) < rank) sizes.insert(sizes.begin(), 1);
  return sizes;
}

// torch.matmul as ATen's matmul computes it: a 1-d operand becomes a [1, k] row (left) or a
// [k, 1] column (right); a left operand of any rank times a matrix folds its batch dims into the
// rows of one mm; otherwise both get the same rank and their batch dims broadcast into one bmm.
// The result is viewed to the op's own shape, which drops a vector operand's dim.
std::optional<Replacement> matmul(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* a = tensor_arg(n, "self");
  Value* b = tensor_arg(n, "other");
  const std::vector<int64_t> out = n.op->infer(n)[0].sizes;
  if (a->type.rank() == 1) a = e.view(a, {1, a->type.sizes[0]});
  if (b->type.rank() == 1) b = e.view(b, {b->type.sizes[0], 1});
  if (b->type.rank() == 2) {
    const int64_t k = a->type.sizes.back();
    Value* rows = e.view(a, {a->type.numel() / std::max<int64_t>(k, 1), k});
    return same(e.view(e.one("mm", {{"self", Emit::T(rows)}, {"mat2", Emit::T(b)}}), out));
  }
  const int64_t rank = std::max(a->type.rank(), b->type.rank());
  a = e.view(a, with_leading_ones(a->type.sizes, rank));
  b = e.view(b, with_leading_ones(b->type.sizes, rank));
  return same(e.view(e.matmul(a, b), out));
}

// ---- einsum ----

// An einsum operand as the decomposition goes: a value and the subscript letter of each dim.
struct Subscripted {
  Value* value;
  std::string letters;
};

bool has_letter(const std::string& letters, char c) { return letters.find(c) != std::string::npos; }

int64_t size_product(const std::string& letters, const std::map<char, int64_t>& sizes) {
  int64_t n = 1;
  for (char c : letters) n *= sizes.at(c);
  return n;
}

// Sums out the dims whose letters are not in `keep`.
Subscripted sum_out(Emit& e, const Subscripted& x, const std::string& keep) {
  std::vector<int64_t> dims;
  std::string kept;
  for (size_t d = 0; d < x.letters.size(); ++d) {
    if (has_letter(keep, x.letters[d])) kept.push_back(x.letters[d]);
    else dims.push_back(static_cast<int64_t>(d));
  }
  if (dims.empty()) return x;
  Value* sum = e.one("sum.dim_IntList", {{"self", Emit::T(x.value)}, {"dim", Arg::of_ints(dims)}, {"keepdim", Arg::of_bool(false)}});
  return {sum, kept};
}

// x's dims in the order of `order` (a permutation of its letters), each expanded to its
// letter's size (a size-1 dim broadcasts against the other operands').
Value* arrange(Emit& e, const Subscripted& x, const std::string& order, const std::map<char, int64_t>& sizes) {
  std::vector<int64_t> perm, full;
  for (char c : order) {
    perm.push_back(static_cast<int64_t>(x.letters.find(c)));
    full.push_back(sizes.at(c));
  }
  Value* v = x.value;
  if (!std::is_sorted(perm.begin(), perm.end())) v = e.permute(v, perm);
  return e.expand(v, full);
}

// One bmm of a and b, as torch's einsum pairs operands: the letters both have and `keep` needs
// are its batch, those both have and no one needs are contracted, each side's others its rows
// or columns (summed out first when nothing needs them).
Subscripted contract(Emit& e, const Subscripted& a_in, const Subscripted& b_in, const std::string& keep,
                     const std::map<char, int64_t>& sizes) {
  const Subscripted a = sum_out(e, a_in, keep + b_in.letters);
  const Subscripted b = sum_out(e, b_in, keep + a.letters);
  std::string batch, inner, left, right;
  for (char c : a.letters) (has_letter(b.letters, c) ? (has_letter(keep, c) ? batch : inner) : left).push_back(c);
  for (char c : b.letters)
    if (!has_letter(a.letters, c)) right.push_back(c);
  const int64_t nb = size_product(batch, sizes), ni = size_product(inner, sizes);
  Value* a3 = e.view(arrange(e, a, batch + left + inner, sizes), {nb, size_product(left, sizes), ni});
  Value* b3 = e.view(arrange(e, b, batch + inner + right, sizes), {nb, ni, size_product(right, sizes)});
  Value* c = e.one("bmm", {{"self", Emit::T(a3)}, {"mat2", Emit::T(b3)}});
  const std::string letters = batch + left + right;
  std::vector<int64_t> out;
  for (char ch : letters) out.push_back(sizes.at(ch));
  return {e.view(c, out), letters};
}

// einsum: the operands contracted left to right, each step one bmm keeping the letters that the
// output or a later operand needs; what is left is summed out and permuted to the output.
std::optional<Replacement> einsum(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const std::vector<Value*>& operands = shape::arg(n, "tensors").tensors;
  std::vector<std::vector<int64_t>> shapes;
  for (const Value* t : operands) shapes.push_back(t->type.sizes);
  const einsum::Equation eq = einsum::parse(shape::arg(n, "equation").s, shapes);
  Subscripted result{operands[0], eq.inputs[0]};
  for (size_t i = 1; i < operands.size(); ++i) {
    std::string keep = eq.output;
    for (size_t j = i + 1; j < operands.size(); ++j) keep += eq.inputs[j];
    result = contract(e, result, {operands[i], eq.inputs[i]}, keep, eq.sizes);
  }
  return same(arrange(e, sum_out(e, result, eq.output), eq.output, eq.sizes));
}

// baddbmm = beta * self + alpha * bmm(batch1, batch2); self is ignored when beta is 0 (its NaNs
// too), and factors of 1 are left out, as in torch._refs.
std::optional<Replacement> baddbmm(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  auto scaled = [&](Value* v, const char* factor) {
    const Arg& f = shape::arg(n, factor);
    return f.as_double() == 1.0 ? v : e.one("mul.Scalar", {{"self", Emit::T(v)}, {"other", f}});
  };
  Value* product = scaled(e.one("bmm", {{"self", shape::arg(n, "batch1")}, {"mat2", shape::arg(n, "batch2")}}), "alpha");
  if (shape::number_arg(n, "beta") == 0.0) return same(product);
  return same(e.one("add.Tensor", {{"self", Emit::T(scaled(tensor_arg(n, "self"), "beta"))}, {"other", Emit::T(product)}}));
}

// min.other and max.other are minimum and maximum (NaN-propagating, as those).
std::optional<Replacement> min_max_other(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(e.forward(n.target == "min.other" ? "minimum" : "maximum", {"self", "other"}));
}

// where with scalar operands: where.self with each scalar a 0-d tensor of the result's dtype.
std::optional<Replacement> where_scalar(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const DType dtype = n.op->infer(n)[0].dtype;
  auto as_tensor = [&](const char* name) {
    const Arg& a = shape::arg(n, name);
    if (a.kind == Arg::Kind::Tensor) return a;
    return Emit::T(e.one("scalar_tensor", {{"s", a}, {"dtype", Arg::of_dtype(dtype)}}));
  };
  return same(e.one("where.self", {{"condition", shape::arg(n, "condition")}, {"self", as_tensor("self")}, {"other", as_tensor("other")}}));
}

// diff as torch._refs.diff: prepend and append concatenated along dim, then n times the
// difference of the slices [1:] and [:-1] (logical_xor for bools).
std::optional<Replacement> diff(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const int64_t dim = shape::normalize_dim(shape::int_arg(n, "dim"), x->type.rank());
  std::vector<Value*> parts;
  for (const char* name : {"prepend", "self", "append"})
    if (!shape::arg(n, name).is_none()) parts.push_back(tensor_arg(n, name));
  if (parts.size() > 1) x = e.one("cat", {{"tensors", Emit::Ts(parts)}, {"dim", Arg::of_int(dim)}});
  const char* op = x->type.dtype == DType::Bool ? "logical_xor" : "sub.Tensor";
  for (int64_t i = 0; i < shape::int_arg(n, "n"); ++i) {
    const int64_t len = x->type.sizes[static_cast<size_t>(dim)];
    if (len == 0) break;
    x = e.one(op, {{"self", Emit::T(slice_along(e, x, dim, 1, len))}, {"other", Emit::T(slice_along(e, x, dim, 0, len - 1))}});
  }
  return same(x);
}

// Reflect, replicate and circular padding of one dim of size `len`: index_select at the source
// position of each output position p in [-before, len + after), as torch._decomp's
// _reflection_or_replication_pad computes it.
Value* pad_dim_by_index(Emit& e, Value* x, int64_t dim, int64_t before, int64_t after, const std::string& mode) {
  const int64_t len = x->type.sizes[static_cast<size_t>(dim)];
  Value* p = positions(e, -before, len + after);
  auto scalar_op = [&](const char* op, Value* v, int64_t s) { return e.one(op, {{"self", Emit::T(v)}, {"other", Arg::of_int(s)}}); };
  Value* source = nullptr;
  if (mode == "replicate") {
    source = e.one("clamp", {{"self", Emit::T(p)}, {"min", Arg::of_int(0)}, {"max", Arg::of_int(len - 1)}});
  } else if (mode == "circular") {
    source = scalar_op("remainder.Scalar", p, len);
  } else {  // reflect: (len - 1) - |(len - 1) - |p||
    Value* from_end = e.one("sub.Tensor", {{"self", Arg::of_int(len - 1)}, {"other", Emit::T(e.one("abs", {{"self", Emit::T(p)}}))}});
    Value* back = e.one("abs", {{"self", Emit::T(from_end)}});
    source = e.one("sub.Tensor", {{"self", Arg::of_int(len - 1)}, {"other", Emit::T(back)}});
  }
  return e.one("index_select", {{"self", Emit::T(x)}, {"dim", Arg::of_int(dim)}, {"index", Emit::T(source)}});
}

// pad: constant_pad_nd for mode "constant"; the other modes remap positions dim by dim.
std::optional<Replacement> pad(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const std::string mode = shape::arg(n, "mode").s;
  const Arg& value = shape::arg(n, "value");
  if (mode == "constant")
    return same(e.one("constant_pad_nd", {{"self", Emit::T(x)}, {"pad", shape::arg(n, "pad")}, {"value", value.is_none() ? Arg::of_int(0) : value}}));
  if (!value.is_none()) refuse(n, "padding mode '" + mode + "' doesn't take in value argument");
  const std::vector<int64_t> amounts = shape::ints_arg(n, "pad");
  for (size_t i = 0; i + 1 < amounts.size(); i += 2) {
    const int64_t dim = x->type.rank() - 1 - static_cast<int64_t>(i / 2);
    const int64_t len = x->type.sizes[static_cast<size_t>(dim)];
    const int64_t limit = mode == "reflect" ? len - 1 : mode == "circular" ? len : std::numeric_limits<int64_t>::max();
    if (amounts[i] < 0 || amounts[i + 1] < 0 || amounts[i] > limit || amounts[i + 1] > limit || len == 0)
      refuse(n, "padding " + shape::format_sizes(amounts) + " in mode '" + mode + "' is invalid for input " + shape::format_sizes(x->type.sizes));
    x = pad_dim_by_index(e, x, dim, amounts[i], amounts[i + 1], mode);
  }
  return same(x);
}

// roll: output position p of a dim of size L reads (p - shift) mod L (index_select); without
// dims the flattened tensor rolls, as in torch._refs.roll.
std::optional<Replacement> roll(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const std::vector<int64_t> shifts = shape::ints_arg(n, "shifts"), dims = shape::ints_arg(n, "dims");
  const bool flat = dims.empty();
  if (flat ? shifts.size() != 1 : shifts.size() != dims.size())
    refuse(n, "shifts " + shape::format_sizes(shifts) + " and dims " + shape::format_sizes(dims) + " do not match");
  Value* y = flat ? e.view(x, {x->type.numel()}) : x;
  for (size_t i = 0; i < shifts.size(); ++i) {
    const int64_t dim = flat ? 0 : shape::normalize_dim(dims[i], y->type.rank());
    const int64_t len = y->type.sizes[static_cast<size_t>(dim)];
    if (len == 0) continue;
    Value* p = positions(e, -shifts[i], len - shifts[i]);
    Value* source = e.one("remainder.Scalar", {{"self", Emit::T(p)}, {"other", Arg::of_int(len)}});
    y = e.one("index_select", {{"self", Emit::T(y)}, {"dim", Arg::of_int(dim)}, {"index", Emit::T(source)}});
  }
  return same(e.view(y, x->type.sizes));
}

// triu / tril: self where column - row >= diagonal (triu) or <= diagonal (tril), else 0, over
// the last two dims.
std::optional<Replacement> triangle(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const std::vector<int64_t>& s = x->type.sizes;
  if (s.size() < 2) refuse(n, "triu/tril expect a tensor of at least 2 dims");
  Value* rows = e.view(positions(e, 0, s[s.size() - 2]), {s[s.size() - 2], 1});
  Value* offset = e.one("sub.Tensor", {{"self", Emit::T(positions(e, 0, s.back()))}, {"other", Emit::T(rows)}});
  const char* keep = n.target == "triu" ? "ge.Scalar" : "le.Scalar";
  Value* mask = e.one(keep, {{"self", Emit::T(offset)}, {"other", shape::arg(n, "diagonal")}});
  Value* zero = e.one("scalar_tensor", {{"s", Arg::of_int(0)}, {"dtype", Arg::of_dtype(x->type.dtype)}});  // bool stays bool
  return same(e.one("where.self", {{"condition", Emit::T(mask)}, {"self", Emit::T(x)}, {"other", Emit::T(zero)}}));
}

// pixel_shuffle: [*, C*r*r, H, W] viewed [*, C, r, r, H, W], permuted to [*, C, H, r, W, r],
// viewed [*, C, H*r, W*r]; pixel_unshuffle the inverse, as torch._refs does.
std::optional<Replacement> pixel_shuffle(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const bool up = n.target == "pixel_shuffle";
  const int64_t r = shape::int_arg(n, up ? "upscale_factor" : "downscale_factor");
  const std::vector<int64_t> out = n.op->infer(n)[0].sizes;
  const std::vector<int64_t>& small = up ? x->type.sizes : out;  // [*, C*r*r, H, W]
  std::vector<int64_t> split(small.begin(), small.end() - 3);
  const size_t b = split.size();
  const int64_t c = small[b] / (r * r), h = small[b + 1], w = small[b + 2];
  std::vector<int64_t> perm;
  for (size_t i = 0; i < b; ++i) perm.push_back(static_cast<int64_t>(i));
  const auto at = [&](int64_t k) { return static_cast<int64_t>(b) + k; };
  if (up) {
    split.insert(split.end(), {c, r, r, h, w});  // C, r1, r2, H, W -> C, H, r1, W, r2
    perm.insert(perm.end(), {at(0), at(3), at(1), at(4), at(2)});
  } else {
    split.insert(split.end(), {c, h, r, w, r});  // C, H, r1, W, r2 -> C, r1, r2, H, W
    perm.insert(perm.end(), {at(0), at(2), at(4), at(1), at(3)});
  }
  return same(e.view(e.permute(e.view(x, split), perm), out));
}

// ---- recurrent layers ----

// One direction of one layer's weights (params lists, per layer and direction, w_ih, w_hh and
// with biases b_ih, b_hh: PyTorch's _flat_weights order).
struct RecurrentWeights {
  Value *w_ih, *w_hh, *b_ih = nullptr, *b_hh = nullptr;
};

// x [N, K] @ w^T (+ b).
Value* affine(Emit& e, Value* x, Value* w, Value* b) {
  Value* wt = e.permute(w, {1, 0});
  if (!b) return e.one("mm", {{"self", Emit::T(x)}, {"mat2", Emit::T(wt)}});
  return e.one("addmm", {{"self", Emit::T(b)}, {"mat1", Emit::T(x)}, {"mat2", Emit::T(wt)}});
}

Value* gate(Emit& e, Value* gates, int64_t k, int64_t h) { return slice_along(e, gates, 1, k * h, (k + 1) * h); }
Value* pointwise(Emit& e, const char* op, Value* a, Value* b) {
  return e.one(op, {{"self", Emit::T(a)}, {"other", Emit::T(b)}});
}
Value* unary(Emit& e, const char* op, Value* a) { return e.one(op, {{"self", Emit::T(a)}}); }

// One time step, as ATen's LSTMCell / GRUCell: the input's gate values xg [B, G*H] (computed for
// every step at once), the state h (and c) [B, H] updated in place.
void lstm_step(Emit& e, Value* xg, const RecurrentWeights& w, Value*& h, Value*& c) {
  const int64_t hs = h->type.sizes[1];
  Value* g = pointwise(e, "add.Tensor", xg, affine(e, h, w.w_hh, w.b_hh));
  Value* i = unary(e, "sigmoid", gate(e, g, 0, hs));
  Value* f = unary(e, "sigmoid", gate(e, g, 1, hs));
  Value* cand = unary(e, "tanh", gate(e, g, 2, hs));
  Value* o = unary(e, "sigmoid", gate(e, g, 3, hs));
  c = pointwise(e, "add.Tensor", pointwise(e, "mul.Tensor", f, c), pointwise(e, "mul.Tensor", i, cand));
  h = pointwise(e, "mul.Tensor", o, unary(e, "tanh", c));
}

void gru_step(Emit& e, Value* xg, const RecurrentWeights& w, Value*& h) {
  const int64_t hs = h->type.sizes[1];
  Value* hg = affine(e, h, w.w_hh, w.b_hh);
  Value* r = unary(e, "sigmoid", pointwise(e, "add.Tensor", gate(e, xg, 0, hs), gate(e, hg, 0, hs)));
  Value* z = unary(e, "sigmoid", pointwise(e, "add.Tensor", gate(e, xg, 1, hs), gate(e, hg, 1, hs)));
  Value* n = unary(e, "tanh", pointwise(e, "add.Tensor", gate(e, xg, 2, hs), pointwise(e, "mul.Tensor", r, gate(e, hg, 2, hs))));
  h = pointwise(e, "add.Tensor", n, pointwise(e, "mul.Tensor", z, pointwise(e, "sub.Tensor", h, n)));  // (1-z)n + zh
}

// One direction over x [T, B, I]: the outputs [T, B, H]; h (and c, for an LSTM) end as the last state.
Value* recurrent_direction(Emit& e, Value* x, const RecurrentWeights& w, bool reverse, Value*& h, Value*& c) {
  const int64_t steps = x->type.sizes[0], batch = x->type.sizes[1];
  Value* xg = affine(e, e.view(x, {steps * batch, x->type.sizes[2]}), w.w_ih, w.b_ih);
  xg = e.view(xg, {steps, batch, xg->type.sizes[1]});
  std::vector<Value*> outs(static_cast<size_t>(steps));
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t t = reverse ? steps - 1 - k : k;
    Value* xt = e.one("select.int", {{"self", Emit::T(xg)}, {"dim", Arg::of_int(0)}, {"index", Arg::of_int(t)}});
    if (c) lstm_step(e, xt, w, h, c);
    else gru_step(e, xt, w, h);
    outs[static_cast<size_t>(t)] = e.one("unsqueeze", {{"self", Emit::T(h)}, {"dim", Arg::of_int(0)}});
  }
  return e.one("cat", {{"tensors", Emit::Ts(outs)}, {"dim", Arg::of_int(0)}});
}

// lstm.input, gru.input: each layer and direction unrolled over the time steps (layers feed the
// next the directions' outputs side by side); dropout between layers only in training, refused.
std::optional<Replacement> recurrent(Rewriter& rw, Node& n) {
  const bool lstm = n.target == "lstm.input";
  if (shape::bool_arg(n, "train") && shape::number_arg(n, "dropout") != 0.0)
    refuse(n, "dropout between recurrent layers in training mode is not supported (export after model.eval())");
  Emit e(rw, n);
  const Arg& hx = shape::arg(n, "hx");
  Value* h0 = lstm ? hx.tensors[0] : hx.tensor;
  Value* c0 = lstm ? hx.tensors[1] : nullptr;
  const std::vector<Value*>& params = shape::arg(n, "params").tensors;
  const bool biases = shape::bool_arg(n, "has_biases"), batch_first = shape::bool_arg(n, "batch_first");
  const int64_t layers = shape::int_arg(n, "num_layers"), dirs = shape::bool_arg(n, "bidirectional") ? 2 : 1;
  const size_t per = biases ? 4 : 2;
  if (params.size() != per * static_cast<size_t>(layers * dirs))
    refuse(n, "expected " + std::to_string(per * static_cast<size_t>(layers * dirs)) +
                  " weight tensors (a projection, proj_size > 0, is not supported)");
  Value* x = tensor_arg(n, "input");
  const bool unbatched = x->type.rank() == 2;
  if (unbatched) {
    x = e.one("unsqueeze", {{"self", Emit::T(x)}, {"dim", Arg::of_int(1)}});
    h0 = e.one("unsqueeze", {{"self", Emit::T(h0)}, {"dim", Arg::of_int(1)}});
    if (c0) c0 = e.one("unsqueeze", {{"self", Emit::T(c0)}, {"dim", Arg::of_int(1)}});
  } else if (batch_first) {
    x = e.permute(x, {1, 0, 2});
  }
  std::vector<Value*> hs, cs;
  for (int64_t layer = 0; layer < layers; ++layer) {
    std::vector<Value*> outs;
    for (int64_t d = 0; d < dirs; ++d) {
      const int64_t k = layer * dirs + d;
      const size_t at = per * static_cast<size_t>(k);
      RecurrentWeights w{params[at], params[at + 1], biases ? params[at + 2] : nullptr, biases ? params[at + 3] : nullptr};
      auto initial = [&](Value* s) { return s ? e.one("select.int", {{"self", Emit::T(s)}, {"dim", Arg::of_int(0)}, {"index", Arg::of_int(k)}}) : nullptr; };
      Value* h = initial(h0);
      Value* c = initial(c0);
      outs.push_back(recurrent_direction(e, x, w, d == 1, h, c));
      hs.push_back(e.one("unsqueeze", {{"self", Emit::T(h)}, {"dim", Arg::of_int(0)}}));
      if (c) cs.push_back(e.one("unsqueeze", {{"self", Emit::T(c)}, {"dim", Arg::of_int(0)}}));
    }
    x = outs.size() == 1 ? outs[0] : e.one("cat", {{"tensors", Emit::Ts(outs)}, {"dim", Arg::of_int(2)}});
  }
  auto finish = [&](Value* v) {  // back to the caller's layout
    if (unbatched) return e.one("squeeze.dims", {{"self", Emit::T(v)}, {"dim", Arg::of_ints({1})}});
    return v;
  };
  Replacement r{{finish(batch_first && !unbatched ? e.permute(x, {1, 0, 2}) : x),
                 finish(e.one("cat", {{"tensors", Emit::Ts(hs)}, {"dim", Arg::of_int(0)}}))}};
  if (lstm) r.outputs.push_back(finish(e.one("cat", {{"tensors", Emit::Ts(cs)}, {"dim", Arg::of_int(0)}})));
  // The states in the shape the rule takes from the export (rules_nn.cpp's recurrent).
  const std::vector<TensorType> types = n.op->infer(n);
  for (size_t i = 1; i < r.outputs.size(); ++i) r.outputs[i] = e.view(r.outputs[i], types[i].sizes);
  return r;
}

// masked_fill: where(mask, value, self), the value (a number or a 0-d tensor) in self's dtype.
std::optional<Replacement> masked_fill(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* self = tensor_arg(n, "self");
  const Arg dtype = Arg::of_dtype(self->type.dtype);
  const Arg& v = shape::arg(n, "value");
  Value* value = v.kind == Arg::Kind::Tensor ? e.one("_to_copy", {{"self", v}, {"dtype", dtype}})
                                             : e.one("scalar_tensor", {{"s", v}, {"dtype", dtype}});
  return same(e.one("where.self", {{"condition", shape::arg(n, "mask")}, {"self", Emit::T(value)}, {"other", Emit::T(self)}}));
}

// linalg_vector_norm as torch._refs.linalg.vector_norm: ord 0 counts the nonzeros, +-inf is the
// amax/amin of |x|, any other ord is sum(|x|^ord)^(1/ord) (pow lowers ^2 and ^0.5 to a product
// and a square root, as PyTorch's kernel computes them). `dim` None or [] reduces every dim.
std::optional<Replacement> vector_norm(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const DType out = n.op->infer(n)[0].dtype;
  const double ord = shape::number_arg(n, "ord");
  const Arg& dim = shape::arg(n, "dim");
  const Named where = {{"dim", dim.is_none() ? Arg::of_ints({}) : dim}, {"keepdim", shape::arg(n, "keepdim")}};
  auto reduce = [&](const char* op, Value* v, Named extra = {}) {
    Named args = {{"self", Emit::T(v)}};
    args.insert(args.end(), where.begin(), where.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return e.one(op, args);
  };
  if (ord == 0) {
    Value* nonzero = e.one("ne.Scalar", {{"self", Emit::T(x)}, {"other", Arg::of_int(0)}});
    return same(reduce("sum.dim_IntList", nonzero, {{"dtype", Arg::of_dtype(out)}}));
  }
  if (x->type.dtype != out) x = e.one("_to_copy", {{"self", Emit::T(x)}, {"dtype", Arg::of_dtype(out)}});
  Value* magnitude = e.one("abs", {{"self", Emit::T(x)}});
  if (std::isinf(ord)) return same(reduce(ord > 0 ? "amax" : "amin", magnitude));
  auto power = [&](Value* v, double p) {
    return p == 1 ? v : e.one("pow.Tensor_Scalar", {{"self", Emit::T(v)}, {"exponent", Arg::of_float(p)}});
  };
  return same(power(reduce("sum.dim_IntList", power(magnitude, ord)), 1.0 / ord));
}

// dist(a, b, p) = linalg_vector_norm(a - b, p) over every element (decomposed in turn).
std::optional<Replacement> dist(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* diff = e.one("sub.Tensor", {{"self", shape::arg(n, "self")}, {"other", shape::arg(n, "other")}});
  return same(e.one("linalg_vector_norm", {{"self", Emit::T(diff)}, {"ord", shape::arg(n, "p")}}));
}

// ldexp(x, e) = x * 2^e, as ATen computes it.
std::optional<Replacement> ldexp(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* scale = e.one("pow.Scalar", {{"self", Arg::of_float(2.0)}, {"exponent", shape::arg(n, "other")}});
  return same(e.one("mul.Tensor", {{"self", shape::arg(n, "self")}, {"other", Emit::T(scale)}}));
}

// angle of a real number: pi for negatives, 0 otherwise, NaN kept.
std::optional<Replacement> angle(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const DType out = n.op->infer(n)[0].dtype;
  if (x->type.dtype != out) x = e.one("_to_copy", {{"self", Emit::T(x)}, {"dtype", Arg::of_dtype(out)}});
  auto constant = [&](double v) { return e.one("scalar_tensor", {{"s", Arg::of_float(v)}, {"dtype", Arg::of_dtype(out)}}); };
  Value* negative = e.one("lt.Scalar", {{"self", Emit::T(x)}, {"other", Arg::of_int(0)}});
  Value* angle = e.one("where.self", {{"condition", Emit::T(negative)}, {"self", Emit::T(constant(M_PI))}, {"other", Emit::T(constant(0))}});
  Value* nan = e.one("isnan", {{"self", Emit::T(x)}});
  return same(e.one("where.self", {{"condition", Emit::T(nan)}, {"self", Emit::T(x)}, {"other", Emit::T(angle)}}));
}

// narrow_copy = a copy of slice(dim, start, start + length).
std::optional<Replacement> narrow_copy(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const int64_t dim = shape::normalize_dim(shape::int_arg(n, "dim"), x->type.rank());
  int64_t start = shape::int_arg(n, "start");
  if (start < 0) start += x->type.sizes[static_cast<size_t>(dim)];
  Value* part = e.one("slice.Tensor", {{"self", Emit::T(x)}, {"dim", Arg::of_int(dim)}, {"start", Arg::of_int(start)},
                                       {"end", Arg::of_int(start + shape::int_arg(n, "length"))}});
  return same(e.one("clone", {{"self", Emit::T(part)}}));
}

// scatter(self, dim, index, src, reduce='add'|'multiply'): scatter_reduce.two with sum or prod,
// self included.
std::optional<Replacement> scatter_reduce_legacy(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const std::string reduce = shape::arg(n, "reduce").s == "add" ? "sum" : "prod";
  return same(e.one("scatter_reduce.two", {{"self", shape::arg(n, "self")}, {"dim", shape::arg(n, "dim")},
                                           {"index", shape::arg(n, "index")}, {"src", shape::arg(n, "src")},
                                           {"reduce", Arg::of_string(reduce)}, {"include_self", Arg::of_bool(true)}}));
}

// index_reduce(self, dim, index, source, reduce): scatter_reduce.two with the 1-d index
// broadcast along source's other dims (0-d self and source count as one element).
std::optional<Replacement> index_reduce(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* self = tensor_arg(n, "self");
  Value* index = tensor_arg(n, "index");
  Value* source = tensor_arg(n, "source");
  if (index->type.rank() > 1) refuse(n, "index_reduce(): Index is supposed to be a vector");
  Value* x = e.view(self, self->type.rank() == 0 ? std::vector<int64_t>{1} : self->type.sizes);
  Value* src = e.view(source, source->type.rank() == 0 ? std::vector<int64_t>{1} : source->type.sizes);
  const int64_t rank = x->type.rank(), dim = shape::normalize_dim(shape::int_arg(n, "dim"), rank);
  const int64_t count = index->type.rank() == 0 ? 1 : index->type.sizes[0];
  if (src->type.rank() != rank || src->type.sizes[static_cast<size_t>(dim)] != count)
    refuse(n, "index_reduce(): source must have self's rank and as many elements along dim as index");
  std::vector<int64_t> along(static_cast<size_t>(rank), 1);
  along[static_cast<size_t>(dim)] = count;
  Value* spread = e.expand(e.view(index, along), src->type.sizes);
  Value* y = e.one("scatter_reduce.two", {{"self", Emit::T(x)}, {"dim", Arg::of_int(dim)}, {"index", Emit::T(spread)},
                                          {"src", Emit::T(src)}, {"reduce", shape::arg(n, "reduce")},
                                          {"include_self", shape::arg(n, "include_self")}});
  return same(e.view(y, self->type.sizes));
}

// addmv(self, mat, vec) = addmm with vec as a column and self as one ([n] or [1] -> [n, 1]).
std::optional<Replacement> addmv(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* self = tensor_arg(n, "self");
  Value* vec = tensor_arg(n, "vec");
  const int64_t rows = n.op->infer(n)[0].sizes[0];
  Value* column = e.view(self, {self->type.rank() == 0 ? 1 : self->type.sizes[0], 1});
  Value* y = e.one("addmm", {{"self", Emit::T(column)}, {"mat1", shape::arg(n, "mat")},
                             {"mat2", Emit::T(e.view(vec, {vec->type.sizes[0], 1}))},
                             {"beta", shape::arg(n, "beta")}, {"alpha", shape::arg(n, "alpha")}});
  return same(e.view(y, {rows}));
}

// addbmm(self, b1, b2) = addmm(self, b1 as [n, B*k], b2 as [B*k, m]): the batch sum of products
// is one product over the batch and inner dims together.
std::optional<Replacement> addbmm(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* a = tensor_arg(n, "batch1");
  Value* b = tensor_arg(n, "batch2");
  const auto& as = a->type.sizes;
  const auto& bs = b->type.sizes;
  Value* lhs = e.view(e.permute(a, {1, 0, 2}), {as[1], as[0] * as[2]});
  Value* rhs = e.view(b, {bs[0] * bs[1], bs[2]});
  return same(e.one("addmm", {{"self", shape::arg(n, "self")}, {"mat1", Emit::T(lhs)}, {"mat2", Emit::T(rhs)},
                              {"beta", shape::arg(n, "beta")}, {"alpha", shape::arg(n, "alpha")}}));
}

// _cdist_forward(x1, x2, p): the p-norm over the last dim of x1[..., i, None, :] - x2[..., None, j, :].
std::optional<Replacement> cdist(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* a = e.one("unsqueeze", {{"self", shape::arg(n, "x1")}, {"dim", Arg::of_int(-2)}});
  Value* b = e.one("unsqueeze", {{"self", shape::arg(n, "x2")}, {"dim", Arg::of_int(-3)}});
  Value* diff = e.one("sub.Tensor", {{"self", Emit::T(a)}, {"other", Emit::T(b)}});
  return same(e.one("linalg_vector_norm", {{"self", Emit::T(diff)}, {"ord", shape::arg(n, "p")}, {"dim", Arg::of_ints({-1})}}));
}

// _pdist_forward(x, p): the p-norm distances of the rows i < j of x, in that order: the full
// distance matrix (as cdist) read at a constant list of its upper-triangle positions.
std::optional<Replacement> pdist(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const int64_t rows = x->type.sizes[0];
  std::vector<int64_t> pairs;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = i + 1; j < rows; ++j) pairs.push_back(i * rows + j);
  std::vector<uint8_t> bytes(pairs.size() * sizeof(int64_t));
  std::memcpy(bytes.data(), pairs.data(), bytes.size());
  Value* where = rw.add_constant("pdist_pairs", shape::make_type(DType::Int64, {static_cast<int64_t>(pairs.size())}),
                                 std::move(bytes));
  Value* a = e.one("unsqueeze", {{"self", Emit::T(x)}, {"dim", Arg::of_int(1)}});
  Value* b = e.one("unsqueeze", {{"self", Emit::T(x)}, {"dim", Arg::of_int(0)}});
  Value* diff = e.one("sub.Tensor", {{"self", Emit::T(a)}, {"other", Emit::T(b)}});
  Value* all = e.one("linalg_vector_norm", {{"self", Emit::T(diff)}, {"ord", shape::arg(n, "p")}, {"dim", Arg::of_ints({-1})}});
  return same(e.one("index_select", {{"self", Emit::T(e.view(all, {rows * rows}))}, {"dim", Arg::of_int(0)}, {"index", Emit::T(where)}}));
}

// _trilinear: each input unsqueezed at its expand dims, the three multiplied, summed over sumdim.
std::optional<Replacement> trilinear(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* product = nullptr;
  for (const char* k : {"1", "2", "3"}) {
    Value* v = tensor_arg(n, (std::string("i") + k).c_str());
    std::vector<int64_t> dims = shape::ints_arg(n, std::string("expand") + k);
    std::sort(dims.begin(), dims.end());  // positions in the result: inserted from the lowest
    for (int64_t d : dims)
      v = e.one("unsqueeze", {{"self", Emit::T(v)}, {"dim", Arg::of_int(d)}});
    product = product ? e.one("mul.Tensor", {{"self", Emit::T(product)}, {"other", Emit::T(v)}}) : v;
  }
  std::vector<int64_t> sumdim = shape::ints_arg(n, "sumdim");
  if (sumdim.empty()) return same(product);
  return same(e.one("sum.dim_IntList", {{"self", Emit::T(product)}, {"dim", Arg::of_ints(sumdim)}}));
}

// as_strided_copy = a copy of the as_strided view.
std::optional<Replacement> as_strided_copy(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* view = e.forward("as_strided", {"self", "size", "stride", "storage_offset"});
  return same(e.one("clone", {{"self", Emit::T(view)}}));
}

Value* flatten(Emit& e, Value* v) { return e.view(v, {v->type.numel()}); }

// index_put on self, index and values flattened, viewed back to self's shape.
Value* put_flat(Emit& e, Value* self, Value* index, Value* values, const Arg& accumulate) {
  Arg indices;
  indices.kind = Arg::Kind::OptTensorList;
  indices.tensors = {flatten(e, index)};
  Value* y = e.one("index_put", {{"self", Emit::T(flatten(e, self))}, {"indices", indices},
                                 {"values", Emit::T(flatten(e, values))}, {"accumulate", accumulate}});
  return e.view(y, self->type.sizes);
}

// put(self, index, source, accumulate): index_put on the flattened self.
std::optional<Replacement> put(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(put_flat(e, tensor_arg(n, "self"), tensor_arg(n, "index"), tensor_arg(n, "source"), shape::arg(n, "accumulate")));
}

// as_strided_scatter: self (its elements in C order) with the positions its as_strided view reads
// replaced by src; those positions are the same view of arange(numel).
std::optional<Replacement> as_strided_scatter(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* self = tensor_arg(n, "self");
  Value* positions = e.one("arange.start_step", {{"start", Arg::of_int(0)}, {"end", Arg::of_int(self->type.numel())},
                                                 {"dtype", Arg::of_dtype(DType::Int64)}});
  Value* read = e.one("as_strided", {{"self", Emit::T(positions)}, {"size", shape::arg(n, "size")},
                                     {"stride", shape::arg(n, "stride")}, {"storage_offset", shape::arg(n, "storage_offset")}});
  return same(put_flat(e, self, read, tensor_arg(n, "src"), Arg::of_bool(false)));
}

// masked_scatter: where the mask (broadcast to self) is set, the next element of source in C
// order: its position is the count of set mask elements before this one.
std::optional<Replacement> masked_scatter(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* self = tensor_arg(n, "self");
  Value* source = tensor_arg(n, "source");
  if (source->type.numel() == 0) return same(self);  // PyTorch needs the mask to be all false then
  Value* mask = flatten(e, e.expand(tensor_arg(n, "mask"), self->type.sizes));
  Value* count = e.one("cumsum", {{"self", Emit::T(mask)}, {"dim", Arg::of_int(0)}});
  Value* before = e.one("sub.Tensor", {{"self", Emit::T(count)}, {"other", Arg::of_int(1)}});
  Value* position = e.one("clamp", {{"self", Emit::T(before)}, {"min", Arg::of_int(0)}});  // unset ones read element 0
  Value* taken = e.one("index_select", {{"self", Emit::T(flatten(e, source))}, {"dim", Arg::of_int(0)}, {"index", Emit::T(position)}});
  Value* y = e.one("where.self", {{"condition", Emit::T(mask)}, {"self", Emit::T(taken)}, {"other", Emit::T(flatten(e, self))}});
  return same(e.view(y, self->type.sizes));
}

// max_pool2d_with_indices_backward: each output's gradient added at the input position its index
// names, plane by plane: a scatter_add into zeros, as ATen's kernel accumulates.
std::optional<Replacement> max_pool2d_backward(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* self = tensor_arg(n, "self");
  Value* grad = tensor_arg(n, "grad_output");
  const auto& in = self->type.sizes;
  const auto& out = grad->type.sizes;
  const int64_t plane = in[in.size() - 2] * in.back(), pooled = out[out.size() - 2] * out.back();
  const int64_t planes = plane == 0 ? 0 : self->type.numel() / plane;
  Value* zeros = e.one("full_like", {{"self", Emit::T(self)}, {"fill_value", Arg::of_int(0)}});
  Value* y = e.one("scatter_add", {{"self", Emit::T(e.view(zeros, {planes, plane}))}, {"dim", Arg::of_int(1)},
                                   {"index", Emit::T(e.view(tensor_arg(n, "indices"), {planes, pooled}))},
                                   {"src", Emit::T(e.view(grad, {planes, pooled}))}});
  return same(e.view(y, in));
}

// resize(self, size): self's first numel(size) elements in C order, viewed as `size` (a larger
// size would leave elements uninitialized: refused).
std::optional<Replacement> resize(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const std::vector<int64_t> sizes = n.op->infer(n)[0].sizes;
  int64_t count = 1;
  for (int64_t s : sizes) count *= s;
  if (count > x->type.numel())
    refuse(n, "resizing to more elements than the tensor has (" + std::to_string(count) + " > " +
                  std::to_string(x->type.numel()) + ") leaves them uninitialized; not supported");
  Value* kept = e.one("slice.Tensor", {{"self", Emit::T(flatten(e, x))}, {"dim", Arg::of_int(0)}, {"start", Arg::of_int(0)},
                                       {"end", Arg::of_int(count)}});
  return same(e.view(kept, sizes));
}

using ReplaceFn = std::optional<Replacement> (*)(Rewriter&, Node&);

// linalg_pinv as ATen's linalg_pinv: from the SVD (V diag(1/S) U^T) or, for a symmetric input,
// the eigendecomposition (U diag(1/S) U^T), with singular values at or below
// tol = max(atol, rtol * largest) taken as zero; rtol defaults to eps * max(m, n) (0 when atol is
// given). ATen compares in float64; here the tolerances are float32, the singular values' dtype.
std::optional<Replacement> pinv(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* a = tensor_arg(n, "self");
  const std::vector<int64_t>& as = a->type.sizes;
  if (a->type.dtype != DType::Float32) refuse(n, "linalg_pinv is supported for float32 only");
  const TensorType out = n.op->infer(n)[0];
  const int64_t m = as[as.size() - 2], cols = as.back();
  int64_t numel = 1;
  for (int64_t s : as) numel *= s;
  if (numel == 0)  // no matrix element: the (empty) result has nothing to compute
    return same(e.one("full", {{"size", Arg::of_ints(out.sizes)}, {"fill_value", Arg::of_float(0)},
                               {"dtype", Arg::of_dtype(DType::Float32)}}));
  auto scalar = [&](double v) {
    return e.one("scalar_tensor", {{"s", Arg::of_float(v)}, {"dtype", Arg::of_dtype(DType::Float32)}});
  };
  auto float32 = [&](Value* v) {
    return v->type.dtype == DType::Float32 ? v : e.one("_to_copy", {{"self", Emit::T(v)}, {"dtype", Arg::of_dtype(DType::Float32)}});
  };
  const Arg& atol_arg = shape::arg(n, "atol");
  const Arg& rtol_arg = shape::arg(n, "rtol");
  Value* atol = atol_arg.is_none() ? scalar(0) : float32(atol_arg.tensor);
  Value* rtol = nullptr;
  if (!rtol_arg.is_none()) {
    rtol = float32(rtol_arg.tensor);
  } else {
    Value* fallback = scalar(std::numeric_limits<float>::epsilon() * static_cast<double>(std::max(m, cols)));
    rtol = atol_arg.is_none() ? fallback
                              : e.one("where.self", {{"condition", Emit::T(e.one("gt.Scalar", {{"self", Emit::T(atol)}, {"other", Arg::of_int(0)}}))},
                                                     {"self", Emit::T(scalar(0))}, {"other", Emit::T(fallback)}});
  }
  auto last = [](Value* v) { return static_cast<int64_t>(v->type.rank()) - 1; };
  auto unsqueeze = [&](Value* v, int64_t dim) { return e.one("unsqueeze", {{"self", Emit::T(v)}, {"dim", Arg::of_int(dim)}}); };
  auto transpose = [&](Value* v) {
    std::vector<int64_t> dims(v->type.rank());
    for (size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int64_t>(d);
    std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
    return e.permute(v, dims);
  };
  auto binary = [&](const char* op, Value* x, Value* y) { return e.one(op, {{"self", Emit::T(x)}, {"other", Emit::T(y)}}); };
  // 1/S where the magnitude is above tol, else 0, as a row to scale the columns of the left factor.
  auto inverted = [&](Value* s, Value* magnitude, Value* largest) {
    Value* tol = binary("maximum", unsqueeze(atol, -1), binary("mul.Tensor", unsqueeze(rtol, -1), largest));
    Value* kept = binary("gt.Tensor", magnitude, tol);
    Value* inv = e.one("where.self", {{"condition", Emit::T(kept)}, {"self", Emit::T(e.one("reciprocal", {{"self", Emit::T(s)}}))},
                                      {"other", Emit::T(scalar(0))}});
    return unsqueeze(inv, -2);
  };
  if (!shape::bool_arg(n, "hermitian")) {
    std::vector<Value*> usv = e.all("_linalg_svd", {{"A", Emit::T(a)}, {"full_matrices", Arg::of_bool(false)}});
    Value* s = usv[1];
    Value* largest = e.one("slice.Tensor", {{"self", Emit::T(s)}, {"dim", Arg::of_int(last(s))}, {"start", Arg::of_int(0)},
                                            {"end", Arg::of_int(1)}});
    Value* scaled = binary("mul.Tensor", transpose(usv[2]), inverted(s, s, largest));
    return same(e.matmul(scaled, transpose(usv[0])));
  }
  std::vector<Value*> eig = e.all("_linalg_eigh", {{"A", Emit::T(a)}});
  Value* s = eig[0];
  Value* magnitude = e.one("abs", {{"self", Emit::T(s)}});
  Value* largest = e.one("amax", {{"self", Emit::T(magnitude)}, {"dim", Arg::of_ints({last(s)})}, {"keepdim", Arg::of_bool(true)}});
  Value* scaled = binary("mul.Tensor", eig[1], inverted(s, magnitude, largest));
  return same(e.matmul(scaled, transpose(eig[1])));
}

// ---- other names and small composites of core ops ----

// Ops that are a core op under another name, with the same arguments.
std::optional<Replacement> alias(Rewriter& rw, Node& n) {
  static const std::map<std::string, std::string> target = {
      {"multiply.Tensor", "mul.Tensor"}, {"multiply.Scalar", "mul.Scalar"}, {"subtract.Tensor", "sub.Tensor"},
      {"divide.Tensor", "div.Tensor"},   {"true_divide.Tensor", "div.Tensor"}, {"broadcast_to", "expand"}};
  Emit e(rw, n);
  std::vector<std::string> names;
  for (const ArgSchema& a : n.op->schema.args) names.push_back(a.name);
  return same(e.forward(target.at(n.target), names));
}

std::optional<Replacement> expand_as(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(e.expand(tensor_arg(n, "self"), tensor_arg(n, "other")->type.sizes));
}

std::optional<Replacement> numpy_t(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  std::vector<int64_t> dims(static_cast<size_t>(x->type.rank()));
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(dims.size() - 1 - i);
  return same(dims.size() < 2 ? x : e.permute(x, dims));
}

std::optional<Replacement> square(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  return same(e.one("mul.Tensor", {{"self", shape::arg(n, "self")}, {"other", shape::arg(n, "self")}}));
}

// rsub(self, other, alpha) = other - alpha * self; a number `other` as a 0-d tensor of the
// result's dtype.
std::optional<Replacement> rsub(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const Arg other = other_as_tensor(e, n);
  return same(e.one("sub.Tensor", {{"self", other}, {"other", shape::arg(n, "self")}, {"alpha", shape::arg(n, "alpha")}}));
}

// addcmul = self + value * tensor1 * tensor2, addcdiv = self + value * (tensor1 / tensor2).
std::optional<Replacement> addcmul(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* term = e.one(n.target == "addcmul" ? "mul.Tensor" : "div.Tensor",
                      {{"self", shape::arg(n, "tensor1")}, {"other", shape::arg(n, "tensor2")}});
  if (shape::number_arg(n, "value") != 1.0) term = e.one("mul.Tensor", {{"self", Emit::T(term)}, {"other", shape::arg(n, "value")}});
  return same(e.one("add.Tensor", {{"self", shape::arg(n, "self")}, {"other", Emit::T(term)}}));
}

std::optional<Replacement> stack(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const std::vector<Value*>& tensors = shape::arg(n, "tensors").tensors;
  const int64_t dim = shape::normalize_dim(shape::int_arg(n, "dim"), tensors.at(0)->type.rank() + 1);
  std::vector<Value*> parts;
  for (Value* t : tensors) parts.push_back(e.one("unsqueeze", {{"self", Emit::T(t)}, {"dim", Arg::of_int(dim)}}));
  return same(e.one("cat", {{"tensors", Emit::Ts(parts)}, {"dim", Arg::of_int(dim)}}));
}

// meshgrid as torch._refs does it: each tensor viewed along its own dim of the grid and expanded
// ("xy" swaps the first two tensors, then the first two grids).
std::optional<Replacement> meshgrid(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  std::vector<Value*> tensors = shape::arg(n, "tensors").tensors;
  const bool xy = shape::has_arg(n, "indexing") && shape::arg(n, "indexing").s == "xy" && tensors.size() >= 2;
  if (xy) std::swap(tensors[0], tensors[1]);
  std::vector<int64_t> sizes;
  for (const Value* t : tensors) sizes.push_back(t->type.rank() == 0 ? 1 : t->type.sizes[0]);
  Replacement r;
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::vector<int64_t> along(sizes.size(), 1);
    along[i] = sizes[i];
    r.outputs.push_back(e.expand(e.view(tensors[i], along), sizes));
  }
  if (xy) std::swap(r.outputs[0], r.outputs[1]);
  return r;
}

// eye: the rows' index equal to the columns', in the dtype asked for.
std::optional<Replacement> eye(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const TensorType type = n.op->infer(n)[0];
  auto range = [&](int64_t end) {
    return e.one("arange.start_step", {{"start", Arg::of_int(0)}, {"end", Arg::of_int(end)}, {"step", Arg::of_int(1)},
                                       {"dtype", Arg::of_dtype(DType::Int64)}});
  };
  Value* rows = e.one("unsqueeze", {{"self", Emit::T(range(type.sizes[0]))}, {"dim", Arg::of_int(1)}});
  Value* equal = e.one("eq.Tensor", {{"self", Emit::T(rows)}, {"other", Emit::T(range(type.sizes[1]))}});
  if (type.dtype == DType::Bool) return same(equal);
  return same(e.one("_to_copy", {{"self", Emit::T(equal)}, {"dtype", Arg::of_dtype(type.dtype)}}));
}

// repeat_interleave(x, r, dim): x with a new dim of r after `dim`, expanded and merged into it.
std::optional<Replacement> repeat_interleave(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "self");
  const int64_t repeats = shape::int_arg(n, "repeats");
  int64_t dim = 0;
  if (shape::arg(n, "dim").is_none() || x->type.rank() == 0) x = e.view(x, {shape::product(x->type.sizes)});
  else dim = shape::normalize_dim(shape::int_arg(n, "dim"), x->type.rank());
  std::vector<int64_t> spread = x->type.sizes;
  spread.insert(spread.begin() + dim + 1, repeats);
  Value* wide = e.expand(e.one("unsqueeze", {{"self", Emit::T(x)}, {"dim", Arg::of_int(dim + 1)}}), spread);
  Value* copy = e.one("clone", {{"self", Emit::T(wide)}});
  return same(e.view(copy, n.op->infer(n)[0].sizes));
}

// F.unfold's and F.fold's window: kernel, dilation, padding and stride per spatial dim.
struct Window {
  std::vector<int64_t> k, d, p, s;
  explicit Window(const Node& n)
      : k(shape::ints_arg(n, "kernel_size")), d(shape::ints_arg(n, "dilation")), p(shape::ints_arg(n, "padding")),
        s(shape::ints_arg(n, "stride")) {}
  // Its positions along dim `i` of `size` (before padding).
  int64_t positions(size_t i, int64_t size) const { return shape::window_positions(size, k[i], d[i], p[i], s[i]); }
  // slice.Tensor's (or slice_scatter's) arguments for dim `i` (of a padded image's [N, C, H, W])
  // at window offset `offset`: one element per position.
  Named slice(size_t i, int64_t offset, int64_t count) const {
    const int64_t start = offset * d[i];
    return {{"dim", Arg::of_int(static_cast<int64_t>(2 + i))}, {"start", Arg::of_int(start)},
            {"end", Arg::of_int(start + (count - 1) * s[i] + 1)}, {"step", Arg::of_int(s[i])}};
  }
};

Named with_self(Value* self, Named rest, Value* src = nullptr) {
  if (src) rest.insert(rest.begin(), {"src", Emit::T(src)});
  rest.insert(rest.begin(), {"self", Emit::T(self)});
  return rest;
}

// im2col (F.unfold): for each offset of the window, the input (padded) sliced with the stride;
// the offsets stacked after the channels, then the positions flattened.
std::optional<Replacement> im2col(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const Window w(n);
  Value* x = tensor_arg(n, "self");
  if (x->type.rank() == 3) x = e.one("unsqueeze", {{"self", Emit::T(x)}, {"dim", Arg::of_int(0)}});
  const int64_t out[2] = {w.positions(0, x->type.sizes[2]), w.positions(1, x->type.sizes[3])};
  if (w.p[0] != 0 || w.p[1] != 0)
    x = e.one("constant_pad_nd", {{"self", Emit::T(x)}, {"pad", Arg::of_ints({w.p[1], w.p[1], w.p[0], w.p[0]})}, {"value", Arg::of_int(0)}});
  std::vector<Value*> windows;
  for (int64_t i = 0; i < w.k[0]; ++i)
    for (int64_t j = 0; j < w.k[1]; ++j) {
      Value* rows = e.one("slice.Tensor", with_self(x, w.slice(0, i, out[0])));
      Value* v = e.one("slice.Tensor", with_self(rows, w.slice(1, j, out[1])));
      windows.push_back(e.one("unsqueeze", {{"self", Emit::T(v)}, {"dim", Arg::of_int(2)}}));
    }
  Value* stacked = e.one("cat", {{"tensors", Emit::Ts(windows)}, {"dim", Arg::of_int(2)}});
  return same(e.view(stacked, n.op->infer(n)[0].sizes));
}

// col2im (F.fold): a zero image, padded; for each offset of the window, the inputs' slab of that
// offset added into the positions it covers (strided slices, written back with slice_scatter);
// then the padding cut off.
std::optional<Replacement> col2im(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  const Window w(n);
  Value* x = tensor_arg(n, "self");
  const bool unbatched = x->type.rank() == 2;
  if (unbatched) x = e.one("unsqueeze", {{"self", Emit::T(x)}, {"dim", Arg::of_int(0)}});
  const std::vector<int64_t> o = shape::ints_arg(n, "output_size");
  const int64_t batch = x->type.sizes[0], channels = x->type.sizes[1] / (w.k[0] * w.k[1]);
  const int64_t blocks[2] = {w.positions(0, o[0]), w.positions(1, o[1])};
  Value* cols = e.view(x, {batch, channels, w.k[0] * w.k[1], blocks[0], blocks[1]});
  Value* out = e.one("full", {{"size", Arg::of_ints({batch, channels, o[0] + 2 * w.p[0], o[1] + 2 * w.p[1]})},
                              {"fill_value", Arg::of_int(0)}, {"dtype", Arg::of_dtype(x->type.dtype)}});
  for (int64_t i = 0; i < w.k[0]; ++i)
    for (int64_t j = 0; j < w.k[1]; ++j) {
      const Named rows_at = w.slice(0, i, blocks[0]), cols_at = w.slice(1, j, blocks[1]);
      Value* rows = e.one("slice.Tensor", with_self(out, rows_at));
      Value* cell = e.one("slice.Tensor", with_self(rows, cols_at));
      Value* slab = e.one("select.int", {{"self", Emit::T(cols)}, {"dim", Arg::of_int(2)}, {"index", Arg::of_int(i * w.k[1] + j)}});
      Value* sum = e.one("add.Tensor", {{"self", Emit::T(cell)}, {"other", Emit::T(slab)}});
      rows = e.one("slice_scatter", with_self(rows, cols_at, sum));
      out = e.one("slice_scatter", with_self(out, rows_at, rows));
    }
  for (size_t a = 0; a < 2; ++a)
    if (w.p[a] != 0) out = slice_along(e, out, static_cast<int64_t>(2 + a), w.p[a], w.p[a] + o[a]);
  if (unbatched) out = e.one("squeeze.dims", {{"self", Emit::T(out)}, {"dim", Arg::of_ints({0})}});
  return same(out);
}

const std::vector<std::pair<std::vector<std::string>, ReplaceFn>>& rule_table() {
  static const std::vector<std::pair<std::vector<std::string>, ReplaceFn>> table = {
      {{"linear"}, linear},
      {{"conv1d", "conv2d", "conv3d", "conv1d.padding", "conv2d.padding", "conv3d.padding"}, conv_nd},
      {{"conv_transpose1d", "conv_transpose2d.input"}, conv_transpose},
      {{"batch_norm"}, batch_norm},
      {{"layer_norm"}, layer_norm},
      {{"instance_norm"}, instance_norm},
      {{"argsort", "argsort.stable"}, argsort},
      {{"msort"}, msort},
      {{"grid_sampler"}, grid_sampler},
      {{"embedding_bag", "embedding_bag.padding_idx"}, embedding_bag},
      {{"group_norm"}, group_norm},
      {{"_weight_norm"}, weight_norm},
      {{"_native_batch_norm_legit_functional", "_batch_norm_with_update_functional"}, batch_norm_functional},
      {{"scaled_dot_product_attention"}, sdpa},
      {{"max_pool2d"}, max_pool2d},
      {{"max_pool2d_with_indices_backward"}, max_pool2d_backward},
      {{"adaptive_avg_pool2d"}, adaptive_avg_pool2d},
      {{"adaptive_avg_pool1d"}, adaptive_avg_pool1d},
      {{"adaptive_avg_pool3d"}, adaptive_avg_pool3d},
      {{"softplus"}, softplus},
      {{"linspace"}, linspace},
      {{"flatten.using_ints", "unflatten.int", "reshape", "_unsafe_view", "view_copy", "view_as", "reshape_as"},
       reshape_like},
      {{"contiguous"}, contiguous},
      {{"transpose.int", "swapaxes", "swapdims"}, transpose},
      {{"squeeze.dim"}, squeeze_dim},
      {{"softmax.int"}, softmax_int},
      {{"to.dtype", "to.dtype_layout", "to.device", "to.other", "type_as"}, to_dtype},
      {{"dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"}, dropout},
      {{"clamp_min", "clamp_max"}, clamp_bound},
      {{"chunk", "split.Tensor"}, split_like},
      {{"unbind.int", "unbind_copy.int"}, unbind},
      {{"hardswish"}, hardswish},
      {{"glu"}, glu},
      {{"one_hot"}, one_hot},
      {{"hardsigmoid"}, hardsigmoid},
      {{"silu"}, silu},
      {{"relu6"}, relu6},
      {{"arange", "arange.start"}, arange},
      {{"zeros", "zeros_like", "new_zeros", "empty_like", "new_empty", "zero"}, constant_fill<0>},
      {{"ones", "ones_like", "new_ones"}, constant_fill<1>},
      {{"new_full"}, new_full},
      {{"fill.Scalar", "fill.Tensor"}, fill},
      {{"__and__.Tensor", "__or__.Tensor", "__xor__.Tensor", "__and__.Scalar", "__or__.Scalar", "__xor__.Scalar"},
       bitwise_operator},
      {{"lift_fresh_copy", "detach"}, identity},
      {{"matmul"}, matmul},
      {{"linalg_pinv.atol_rtol_tensor"}, pinv},
      {{"diff"}, diff},
      {{"pad"}, pad},
      {{"roll"}, roll},
      {{"triu", "tril"}, triangle},
      {{"pixel_shuffle", "pixel_unshuffle"}, pixel_shuffle},
      {{"lstm.input", "gru.input"}, recurrent},
      {{"min.other", "max.other"}, min_max_other},
      {{"where.ScalarOther", "where.ScalarSelf", "where.Scalar"}, where_scalar},
      {{"masked_fill.Scalar", "masked_fill.Tensor"}, masked_fill},
      {{"baddbmm"}, baddbmm},
      {{"einsum"}, einsum},
      {{"linalg_vector_norm"}, vector_norm},
      {{"dist"}, dist},
      {{"ldexp.Tensor"}, ldexp},
      {{"angle"}, angle},
      {{"narrow_copy"}, narrow_copy},
      {{"scatter.reduce"}, scatter_reduce_legacy},
      {{"index_reduce"}, index_reduce},
      {{"addmv"}, addmv},
      {{"addbmm"}, addbmm},
      {{"_cdist_forward"}, cdist},
      {{"_pdist_forward"}, pdist},
      {{"_trilinear"}, trilinear},
      {{"as_strided_copy"}, as_strided_copy},
      {{"resize"}, resize},
      {{"put"}, put},
      {{"as_strided_scatter"}, as_strided_scatter},
      {{"masked_scatter"}, masked_scatter},
      {{"multiply.Tensor", "multiply.Scalar", "subtract.Tensor", "divide.Tensor", "true_divide.Tensor", "broadcast_to"},
       alias},
      {{"expand_as"}, expand_as},
      {{"numpy_T", "t"}, numpy_t},
      {{"tensor_split.indices", "tensor_split.sections"}, tensor_split},
      {{"floor_divide", "floor_divide.Scalar"}, floor_divide},
      {{"avg_pool1d", "max_pool1d"}, pool1d},
      {{"square"}, square},
      {{"rsub.Tensor", "rsub.Scalar"}, rsub},
      {{"addcmul", "addcdiv"}, addcmul},
      {{"stack"}, stack},
      {{"meshgrid", "meshgrid.indexing"}, meshgrid},
      {{"eye", "eye.m"}, eye},
      {{"repeat_interleave.self_int"}, repeat_interleave},
      {{"im2col"}, im2col},
      {{"col2im"}, col2im},
  };
  return table;
}

// ---- functionalization of in-place ops ----

// Whether the op's result may share its input's storage: an argument with an alias annotation
// that is not a write ("Tensor(a) self", "Tensor(a -> *) self"), as views have.
// Whether the export recorded `t` as contiguous, as PyTorch's is_contiguous() decides (dims of
// size 1 may have any stride; an empty tensor always is).
bool recorded_contiguous(const TensorType& t) {
  if (t.strides.size() != t.sizes.size()) return true;  // none recorded: contiguous
  int64_t expected = 1;
  for (size_t d = t.sizes.size(); d-- > 0;) {
    if (t.sizes[d] == 0) return true;
    if (t.sizes[d] == 1) continue;
    if (t.strides[d] != expected) return false;
    expected *= t.sizes[d];
  }
  return true;
}

bool returns_view(const Node& n) {
  if (!n.op) return false;
  // contiguous() returns its input only when that is contiguous already, and else a copy
  // (BEiT's relative positions: x.permute(1, 2, 0).contiguous(), then updated in place).
  if (n.target == "contiguous" && !n.args.empty() && n.args[0].tensor && !recorded_contiguous(n.args[0].tensor->type))
    return false;
  // to() likewise returns its input only when it changes nothing (x.float() of a float tensor),
  // and else a new tensor (h = x.to(bfloat16); h.add_(y) leaves x alone).
  if (n.target.rfind("to.", 0) == 0 && !n.args.empty() && n.args[0].tensor && !n.outputs.empty() &&
      (n.args[0].tensor->type.dtype != n.outputs[0]->type.dtype || (n.has_arg("copy") && n.arg("copy").i != 0)))
    return false;
  for (const ArgSchema& a : n.op->schema.args)
    if (!a.alias.empty() && a.alias.find('!') == std::string::npos) return true;
  return false;
}

Value* first_tensor_arg(const Node& n) {
  for (const Arg& a : n.args)
    if (a.kind == Arg::Kind::Tensor && a.tensor) return a.tensor;
  return nullptr;
}

// Whether a node after position `i`, or a graph output, reads one of `values`.
bool read_after(const Graph& g, size_t i, const std::unordered_set<const Value*>& values) {
  auto is_one = [&](const Value* v) { return v && values.count(v) != 0; };
  if (std::any_of(g.outputs.begin(), g.outputs.end(), [&](const GraphOutput& o) { return is_one(o.value); })) return true;
  for (size_t j = i + 1; j < g.nodes.size(); ++j)
    for (const Arg& a : g.nodes[j]->args)
      if (is_one(a.tensor) || std::any_of(a.tensors.begin(), a.tensors.end(), is_one)) return true;
  return false;
}

// The slice.Tensor and select.int nodes that make `m` from `root`, root's first; empty when m is
// made by another view op (or an intermediate view is read by others: its data would change too).
std::vector<Node*> view_chain(const std::unordered_map<const Value*, Node*>& producer, Value* m, Value* root) {
  std::vector<Node*> chain;
  for (Value* v = m; v != root;) {
    auto it = producer.find(v);
    if (it == producer.end() || (it->second->target != "slice.Tensor" && it->second->target != "select.int")) return {};
    chain.insert(chain.begin(), it->second);
    v = first_tensor_arg(*it->second);
  }
  return chain;
}

// Inserts `op` into g at position `pos`, its arguments by name and its output types from its rule.
Value* insert_at(Graph& g, size_t pos, const std::string& op, const std::vector<std::pair<std::string, Arg>>& named) {
  std::unique_ptr<Node> node = bound_node(op, named);
  std::vector<TensorType> types = node->op->infer(*node);
  propagate_symbols(g, *node, types);
  for (const TensorType& t : types) node->outputs.push_back(g.new_value(node->name, t));
  Node* placed = g.append_node(std::move(node));
  std::rotate(g.nodes.begin() + static_cast<std::ptrdiff_t>(pos), g.nodes.end() - 1, g.nodes.end());
  return placed->outputs[0];
}

// Makes the nodes from position `pos` on, and the graph's outputs, read `to` where they read `from`.
void replace_uses_from(Graph& g, size_t pos, Value* from, Value* to) {
  for (size_t j = pos; j < g.nodes.size(); ++j)
    for (Arg& a : g.nodes[j]->args) {
      if (a.tensor == from) a.tensor = to;
      std::replace(a.tensors.begin(), a.tensors.end(), from, to);
    }
  for (GraphOutput& o : g.outputs)
    if (o.value == from) o.value = to;
}

// After the now functional update at position i gave `updated` for the view chain's last value,
// scatters it back into each base up the chain (as functionalization does: slice_scatter,
// select_scatter), and makes the later readers of the chain's root read the result.
void write_back(Graph& g, size_t i, const std::vector<Node*>& chain, Value* updated) {
  Value* root = first_tensor_arg(*chain.front());
  size_t pos = i + 1;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it, ++pos) {
    const Node& view = **it;
    std::vector<std::pair<std::string, Arg>> named = {{"self", Arg::of_tensor(first_tensor_arg(view))}, {"src", Arg::of_tensor(updated)}};
    for (const char* name : {"dim", "start", "end", "step", "index"})
      if (view.has_arg(name)) named.push_back({name, view.arg(name)});
    updated = insert_at(g, pos, view.target == "slice.Tensor" ? "slice_scatter" : "select_scatter", named);
  }
  replace_uses_from(g, pos, root, updated);
}

// The functional op at position i may give another dtype than the in-place one did, which
// keeps self's (x.lt_(y) stays float; bf16 h.add_(float y) stays bf16): its result then gets a
// value of its own, cast back to `out`'s dtype by a node after it. Returns what later readers read.
Value* cast_back(Graph& g, size_t i, Value* out) {
  Node& n = *g.nodes[i];
  if (!n.op->infer) return out;
  const TensorType functional = n.op->infer(n)[0];
  if (functional.dtype == out->type.dtype) return out;
  n.outputs[0] = g.new_value(n.name, functional);
  Value* cast = insert_at(g, i + 1, "_to_copy", {{"self", Arg::of_tensor(n.outputs[0])}, {"dtype", Arg::of_dtype(out->type.dtype)}});
  replace_uses_from(g, i + 2, out, cast);
  return cast;
}

const GraphInput* input_of(const Graph& g, const Value* v) {
  for (const GraphInput& in : g.inputs)
    if (in.value == v) return &in;
  return nullptr;
}

bool functionalize(Graph& g) {
  bool changed = false;
  std::unordered_map<const Value*, Node*> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = *g.nodes[i];
    for (Value* v : n.outputs) producer[v] = &n;
    if (!n.op || !mutates_arguments(n)) continue;
    const OpInfo* f = find_op(functional_op_name(n.target));
    if (!f || f->schema.args.size() != n.op->schema.args.size() || n.outputs.size() != 1)
      refuse(n, "in-place operator with no functional form foundryc knows");
    size_t mutated_index = 0;
    while (mutated_index < n.op->schema.args.size() &&
           n.op->schema.args[mutated_index].alias.find('!') == std::string::npos)
      ++mutated_index;
    Value* m = n.args[mutated_index].tensor;
    Value* out = n.outputs[0];
    if (!m || n.args[mutated_index].kind != Arg::Kind::Tensor) refuse(n, "the mutated argument is not a tensor");
    // The storage the update writes may be shared with other values through views (m a view of
    // a base, or the base of views): a reader of such an alias after the update would see the new
    // data, which a functional graph cannot express. Refuse that.
    Value* root = m;
    for (Node* p = producer.count(root) ? producer[root] : nullptr; p && returns_view(*p);
         p = producer.count(root) ? producer[root] : nullptr) {
      Value* base = first_tensor_arg(*p);
      if (!base) break;
      root = base;
    }
    std::unordered_set<const Value*> aliases = {root};
    for (size_t j = 0; j < i; ++j)
      if (returns_view(*g.nodes[j]) && aliases.count(first_tensor_arg(*g.nodes[j])))
        for (Value* v : g.nodes[j]->outputs) aliases.insert(v);
    aliases.erase(m);
    // An update of a slice or select of a fresh tensor that only that tensor's readers see
    // afterwards (x = zeros(...); x[:, 1:] = y; use x) is written back with slice/select_scatter.
    const std::vector<Node*> chain = m != root ? view_chain(producer, m, root) : std::vector<Node*>{};
    if (!chain.empty()) aliases.erase(root);
    if (read_after(g, i, aliases))
      refuse(n, "in-place update of %" + m->name + ", which shares storage with a value read later (a view), is not supported");
    // An update of a graph input (a buffer, most often: a counter, a cache row) is recorded as
    // torch.export records it in a functional program: an output of the input's new value, which
    // a compiled model, keeping no state, computes and drops (the pipeline says so).
    const GraphInput* updated_input = input_of(g, root);
    if (updated_input && m != root && chain.empty())
      refuse(n, "in-place update of graph input %" + root->name + " through a view other than slices and selects is not supported");
    if (updated_input)
      g.outputs.push_back(updated_input->kind == InputKind::User
                              ? GraphOutput{OutputKind::UserInputMutation, root, root->source_name}
                              : GraphOutput{OutputKind::BufferMutation, root, updated_input->fqn});
    const bool scatter_back = !chain.empty() && (updated_input || read_after(g, i, {root}));
    n.op = f;
    n.target = f->name;
    n.arg_names.clear();
    for (const ArgSchema& a : f->schema.args) n.arg_names.push_back(a.name);
    Value* result = cast_back(g, i, out);
    if (result != m) replace_uses_from(g, i + 1, m, result);
    if (scatter_back) write_back(g, i, chain, result);
    spdlog::debug("decompose: {} is now functional", n.name);
    changed = true;
  }
  return changed;
}

}  // namespace

std::vector<std::string> decomposed_ops() {
  std::vector<std::string> ops;
  for (const auto& [names, fn] : rule_table()) ops.insert(ops.end(), names.begin(), names.end());
  for (const OpInfo& op : all_ops())
    if (!functional_op_name(op.name).empty() && find_op(functional_op_name(op.name))) {
      bool in_place = false;
      for (const ArgSchema& a : op.schema.args) in_place |= a.alias.find('!') != std::string::npos;
      if (in_place) ops.push_back(op.name);
    }
  return ops;
}

bool decompose_training_ops(Graph& g) {
  bool changed = functionalize(g);
  std::vector<RewriteRule> rules;
  // Unused results are left to dead-code elimination (which runs next): a dead op that could not
  // be decomposed (dropout in training mode, say) is no reason to refuse the program.
  auto used = [](const Rewriter& rw, const Node& n) { return rw.any_output_used(n); };
  for (const auto& [names, fn] : rule_table()) rules.push_back(RewriteRule{names[0], names, used, fn});
  // Rules emit only core ops, so one walk suffices; a second one is cheap insurance should a
  // rule ever emit an op another rule decomposes.
  for (int round = 0; round < 3; ++round) {
    if (!apply_rules(g, rules)) break;
    changed = true;
  }
  return changed;
}

}  // namespace foundry::passes
