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
#include <unordered_set>

#include "foundry/ops/registry.h"
#include "foundry/passes/rewrite.h"
#include "foundry/support/error.h"

namespace foundry::passes {

namespace {

std::string node_label(const Node& n) {
  return "node " + quote_untrusted(n.source_name.empty() ? n.name : n.source_name, 60) + " (aten." + n.target + ")";
}

[[noreturn]] void refuse(const Node& n, const std::string& why) { throw UserError(node_label(n) + ": " + why); }

// ---- building replacement nodes ----

// Inserts nodes before the node being rewritten; arguments are given by name (defaults filled in
// from the schema) and output types come from the op's own shape rule.
class Emitter {
 public:
  Emitter(Rewriter& rw, Node& at) : rw_(rw), at_(at) {}

  std::vector<Value*> all(const std::string& op, const std::vector<std::pair<std::string, Arg>>& named) {
    const OpInfo* info = find_op(op);
    FOUNDRY_CHECK(info != nullptr, "decompose: unknown op " + op);
    std::vector<RawArg> raw;
    for (const auto& [name, value] : named) raw.push_back(RawArg{name, value, false});
    Node tmp;
    tmp.op = info;
    tmp.target = info->name;
    tmp.args = bind_arguments(*info, raw, &tmp.arg_names);
    std::vector<TensorType> types;
    try {
      types = info->infer(tmp);
    } catch (const UserError& e) {
      throw UserError(node_label(at_) + ": decomposing into aten." + op + ": " + e.what());
    }
    return rw_.insert_node(op, std::move(tmp.args), types, &at_)->outputs;
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

std::vector<int64_t> pair_list(const Node& n, const char* name) {
  std::vector<int64_t> v = shape::ints_arg(n, name);
  if (v.size() == 1) v.push_back(v[0]);
  return v;
}

// conv2d -> convolution (an unbatched 3-d input gets a batch dim of 1 around it).
std::optional<Replacement> conv2d(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  Value* x = tensor_arg(n, "input");
  const bool unbatched = x->type.rank() == 3;
  if (unbatched) x = e.one("unsqueeze", {{"self", Emit::T(x)}, {"dim", Arg::of_int(0)}});
  Value* y = e.one("convolution", {{"input", Emit::T(x)},
                                   {"weight", shape::arg(n, "weight")},
                                   {"bias", shape::arg(n, "bias")},
                                   {"stride", Arg::of_ints(pair_list(n, "stride"))},
                                   {"padding", Arg::of_ints(pair_list(n, "padding"))},
                                   {"dilation", Arg::of_ints(pair_list(n, "dilation"))},
                                   {"transposed", Arg::of_bool(false)},
                                   {"output_padding", Arg::of_ints({0, 0})},
                                   {"groups", shape::arg(n, "groups")}});
  if (unbatched) y = e.one("squeeze.dims", {{"self", Emit::T(y)}, {"dim", Arg::of_ints({0})}});
  return same(y);
}

std::optional<Replacement> batch_norm(Rewriter& rw, Node& n) {
  if (shape::bool_arg(n, "training"))
    refuse(n, "batch_norm in training mode is not supported (export the model after model.eval())");
  if (shape::arg(n, "running_mean").is_none() || shape::arg(n, "running_var").is_none())
    refuse(n, "batch_norm without running statistics is not supported");
  Emit e(rw, n);
  return same(e.forward("_native_batch_norm_legit_no_training",
                         {"input", "weight", "bias", "running_mean", "running_var", "momentum", "eps"}));
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
std::optional<Replacement> adaptive_avg_pool2d(Rewriter& rw, Node& n) {
  Emit e(rw, n);
  std::vector<int64_t> size = pair_list(n, "output_size");
  if (size == std::vector<int64_t>{1, 1})
    return same(e.one("mean.dim", {{"self", shape::arg(n, "self")}, {"dim", Arg::of_ints({-1, -2})}, {"keepdim", Arg::of_bool(true)}}));
  return same(e.one("_adaptive_avg_pool2d", {{"self", shape::arg(n, "self")}, {"output_size", Arg::of_ints(size)}}));
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
  std::swap(dims[static_cast<size_t>(shape::normalize_dim(shape::int_arg(n, "dim0"), rank))],
            dims[static_cast<size_t>(shape::normalize_dim(shape::int_arg(n, "dim1"), rank))]);
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

std::optional<Replacement> dropout(Rewriter&, Node& n) {
  if (shape::bool_arg(n, "train") && shape::number_arg(n, "p") != 0.0)
    refuse(n, "dropout in training mode is not supported (export the model after model.eval())");
  return same(tensor_arg(n, "input"));
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

const std::vector<std::pair<std::vector<std::string>, ReplaceFn>>& rule_table() {
  static const std::vector<std::pair<std::vector<std::string>, ReplaceFn>> table = {
      {{"linear"}, linear},
      {{"conv2d"}, conv2d},
      {{"batch_norm"}, batch_norm},
      {{"layer_norm"}, layer_norm},
      {{"_native_batch_norm_legit_functional", "_batch_norm_with_update_functional"}, batch_norm_functional},
      {{"scaled_dot_product_attention"}, sdpa},
      {{"max_pool2d"}, max_pool2d},
      {{"max_pool2d_with_indices_backward"}, max_pool2d_backward},
      {{"adaptive_avg_pool2d"}, adaptive_avg_pool2d},
      {{"flatten.using_ints", "unflatten.int", "reshape", "_unsafe_view", "view_copy", "view_as", "reshape_as"},
       reshape_like},
      {{"contiguous"}, contiguous},
      {{"transpose.int"}, transpose},
      {{"squeeze.dim"}, squeeze_dim},
      {{"softmax.int"}, softmax_int},
      {{"to.dtype", "to.dtype_layout", "to.device", "to.other"}, to_dtype},
      {{"dropout"}, dropout},
      {{"chunk", "split.Tensor"}, split_like},
      {{"unbind.int", "unbind_copy.int"}, unbind},
      {{"hardswish"}, hardswish},
      {{"hardsigmoid"}, hardsigmoid},
      {{"silu"}, silu},
      {{"relu6"}, relu6},
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
  };
  return table;
}

// ---- functionalization of in-place ops ----

// "relu_" -> "relu", "add_.Tensor" -> "add.Tensor"; "" when the name is not an in-place one.
std::string functional_name(const std::string& target) {
  size_t dot = target.find('.');
  std::string base = target.substr(0, dot);
  if (base.size() < 2 || base.back() != '_' || base[base.size() - 2] == '_') return "";
  base.pop_back();
  return dot == std::string::npos ? base : base + target.substr(dot);
}

// Whether the op's result may share its input's storage: an argument with an alias annotation
// that is not a write ("Tensor(a) self", "Tensor(a -> *) self"), as views have.
bool returns_view(const Node& n) {
  if (!n.op) return false;
  for (const ArgSchema& a : n.op->schema.args)
    if (!a.alias.empty() && a.alias.find('!') == std::string::npos) return true;
  return false;
}

Value* first_tensor_arg(const Node& n) {
  for (const Arg& a : n.args)
    if (a.kind == Arg::Kind::Tensor && a.tensor) return a.tensor;
  return nullptr;
}

bool functionalize(Graph& g) {
  bool changed = false;
  std::unordered_map<const Value*, Node*> producer;
  std::unordered_set<const Value*> inputs;
  for (const GraphInput& in : g.inputs) inputs.insert(in.value);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = *g.nodes[i];
    for (Value* v : n.outputs) producer[v] = &n;
    if (!n.op || !mutates_arguments(n)) continue;
    const OpInfo* f = find_op(functional_name(n.target));
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
    // data, which a functional graph cannot express. Refuse that, and updates of graph inputs.
    Value* root = m;
    for (Node* p = producer.count(root) ? producer[root] : nullptr; p && returns_view(*p);
         p = producer.count(root) ? producer[root] : nullptr) {
      Value* base = first_tensor_arg(*p);
      if (!base) break;
      root = base;
    }
    if (inputs.count(root))
      refuse(n, "in-place update of graph input %" + root->name + (root == m ? "" : " (through a view)") +
                    " is not supported");
    std::unordered_set<const Value*> aliases = {root};
    for (size_t j = 0; j < i; ++j)
      if (returns_view(*g.nodes[j]) && aliases.count(first_tensor_arg(*g.nodes[j])))
        for (Value* v : g.nodes[j]->outputs) aliases.insert(v);
    aliases.erase(m);
    auto is_alias = [&](const Value* v) { return v && aliases.count(v) != 0; };
    bool alias_read_later = std::any_of(g.outputs.begin(), g.outputs.end(), [&](const GraphOutput& o) { return is_alias(o.value); });
    for (size_t j = i + 1; j < g.nodes.size() && !alias_read_later; ++j)
      for (const Arg& a : g.nodes[j]->args)
        if (is_alias(a.tensor) || std::any_of(a.tensors.begin(), a.tensors.end(), is_alias)) alias_read_later = true;
    if (alias_read_later)
      refuse(n, "in-place update of %" + m->name + ", which shares storage with a value read later (a view), is not supported");
    n.op = f;
    n.target = f->name;
    n.arg_names.clear();
    for (const ArgSchema& a : f->schema.args) n.arg_names.push_back(a.name);
    if (out != m) {
      for (size_t j = i + 1; j < g.nodes.size(); ++j)
        for (Arg& a : g.nodes[j]->args) {
          if (a.tensor == m) a.tensor = out;
          for (Value*& t : a.tensors)
            if (t == m) t = out;
        }
      for (GraphOutput& o : g.outputs)
        if (o.value == m) o.value = out;
    }
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
    if (!functional_name(op.name).empty() && find_op(functional_name(op.name))) {
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
