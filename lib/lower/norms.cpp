// Normalizations: native_layer_norm, native_group_norm, _native_batch_norm_legit_no_training and
// _native_batch_norm_legit.no_stats.
//
// Layer and group norm compute their statistics with two reductions (the sum, then the sum of
// squared deviations from the mean: a two-pass biased variance); mean and rstd are lazy pointwise
// views of those two buffers, and the normalized output is one pointwise expression over them.
#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

using ir::BinaryOp;
using ir::ReduceOp;
using ir::UnaryOp;

namespace {

using InputIndex = std::function<Index(const Index& idx, const Index& ridx)>;

struct Moments {
  TensorRef mean;  // sum / count
  TensorRef rstd;  // 1 / sqrt(sum((x - mean)^2) / count + eps)
};

// Statistics of `x` (already in dtype t) per element of `stat_sizes`, reducing over `ranges`;
// `in_index` maps (stat index, reduction index) to x's index.
Moments moments(LoweringContext& ctx, const TensorRef& x, const std::vector<Expr>& stat_sizes,
                const std::vector<Expr>& ranges, const InputIndex& in_index, double eps, DType t) {
  Expr count = 1;
  for (const Expr& r : ranges) count = count * r;
  Loader load = x.load;
  TensorRef sum = ctx.reduction(t, stat_sizes, ranges, ReduceOp::Sum, [load, in_index](Ops& ops, const Index& idx, const Index& ridx) {
    return load(ops, in_index(idx, ridx));
  });
  TensorRef mean = map1(sum, t, t, [count, t](Ops& ops, Val s) { return ops.div(s, count_value(ops, count, t)); });
  Loader load_mean = mean.load;
  TensorRef ssd = ctx.reduction(t, stat_sizes, ranges, ReduceOp::Sum,
                                [load, load_mean, in_index](Ops& ops, const Index& idx, const Index& ridx) {
                                  Val v = load(ops, in_index(idx, ridx));
                                  Val d = ops.sub(v, load_mean(ops, idx));
                                  return ops.mul(d, d);
                                });
  TensorRef rstd = map1(ssd, t, t, [count, eps, t](Ops& ops, Val s) {
    Val var = ops.div(s, count_value(ops, count, t));
    return ops.unary(UnaryOp::Rsqrt, ops.add(var, ops.constant(eps, t)));
  });
  return {mean, rstd};
}

// An optional per-channel (or per-normalized-element) tensor argument, cast to t; nullopt when None.
std::optional<TensorRef> optional_tensor(LoweringContext& ctx, const Node& node, const std::string& name, DType t) {
  if (is_none(node, name)) return std::nullopt;
  return cast(ctx.tensor(node.arg(name)), t);
}

// (x - mean) * rstd * weight + bias, where the statistics are read at stat_index(idx) and the
// affine parameters at param_index(idx).
TensorRef normalize(const TensorRef& x, const Loader& mean, const Loader& rstd, const std::optional<TensorRef>& weight,
                    const std::optional<TensorRef>& bias, std::function<Index(const Index&)> stat_index,
                    std::function<Index(const Index&)> param_index, DType t) {
  Loader load = x.load;
  Loader w = weight ? weight->load : Loader(), b = bias ? bias->load : Loader();
  return LoweringContext::pointwise(t, x.sizes, [=](Ops& ops, const Index& idx) {
    Index s = stat_index(idx);
    Val xv = load(ops, idx);
    Val centered = ops.sub(xv, mean(ops, s));
    Val v = ops.mul(centered, rstd(ops, s));
    if (w) v = ops.mul(v, w(ops, param_index(idx)));
    if (b) v = ops.add(v, b(ops, param_index(idx)));
    return v;
  });
}

}  // namespace

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd); mean and
// rstd have the input's shape with the normalized (trailing) dims set to 1.
Outs lower_native_layer_norm(LoweringContext& ctx, const Node& node) {
  DType t = out_dtype(node, 0);
  TensorRef x = cast(ctx.tensor(node.arg("input")), t);
  size_t k = ints_arg(node, "normalized_shape").size();
  if (k > x.rank()) ctx.fail("normalized_shape has more dims than the input");
  size_t outer = x.rank() - k;
  std::vector<Expr> stat_sizes = x.sizes, ranges(x.sizes.begin() + outer, x.sizes.end());
  std::fill(stat_sizes.begin() + outer, stat_sizes.end(), Expr(1));
  double eps = float_arg(node, "eps");
  Moments m = moments(ctx, x, stat_sizes, ranges, [outer](const Index& idx, const Index& ridx) {
    Index in(idx.begin(), idx.begin() + outer);
    in.insert(in.end(), ridx.begin(), ridx.end());
    return in;
  }, eps, t);
  auto stat_index = [outer](const Index& idx) {
    Index s = idx;
    std::fill(s.begin() + outer, s.end(), Expr(0));
    return s;
  };
  auto param_index = [outer](const Index& idx) { return Index(idx.begin() + outer, idx.end()); };
  TensorRef out = normalize(x, m.mean.load, m.rstd.load, optional_tensor(ctx, node, "weight", t),
                            optional_tensor(ctx, node, "bias", t), stat_index, param_index, t);
  return {out, cast(m.mean, out_dtype(node, 1)), cast(m.rstd, out_dtype(node, 2))};
}

// native_group_norm(input [N, C, *], weight?, bias?, N, C, HxW, group, eps) -> (out, mean [N, group],
// rstd [N, group]).
Outs lower_native_group_norm(LoweringContext& ctx, const Node& node) {
  DType t = out_dtype(node, 0);
  TensorRef x = cast(ctx.tensor(node.arg("input")), t);
  if (x.rank() < 2) ctx.fail("group norm needs an input of rank >= 2");
  if (!x.sizes[1].is_const()) throw DynamicShapeUnsupported("group norm needs a static channel count");
  int64_t group = int_arg(node, "group");
  int64_t channels = x.sizes[1].const_value();
  if (group <= 0 || channels % group != 0) ctx.fail("channels must divide into groups");
  int64_t per_group = channels / group;
  std::vector<Expr> stat_sizes = {x.sizes[0], Expr(group)};
  std::vector<Expr> ranges = {Expr(per_group)};
  ranges.insert(ranges.end(), x.sizes.begin() + 2, x.sizes.end());
  double eps = float_arg(node, "eps");
  Moments m = moments(ctx, x, stat_sizes, ranges, [per_group](const Index& idx, const Index& ridx) {
    Index in = {idx[0], idx[1] * per_group + ridx[0]};
    in.insert(in.end(), ridx.begin() + 1, ridx.end());
    return in;
  }, eps, t);
  auto stat_index = [per_group](const Index& idx) { return Index{idx[0], ir::floordiv(idx[1], per_group)}; };
  auto param_index = [](const Index& idx) { return Index{idx[1]}; };
  TensorRef out = normalize(x, m.mean.load, m.rstd.load, optional_tensor(ctx, node, "weight", t),
                            optional_tensor(ctx, node, "bias", t), stat_index, param_index, t);
  return {out, cast(m.mean, out_dtype(node, 1)), cast(m.rstd, out_dtype(node, 2))};
}

// _native_batch_norm_legit_no_training(input, weight?, bias?, running_mean, running_var, momentum,
// eps) -> (out, empty, empty): out = (x - running_mean) * rsqrt(running_var + eps) * weight + bias
// over channel dim 1.
Outs lower_batch_norm_no_training(LoweringContext& ctx, const Node& node) {
  DType t = out_dtype(node, 0);
  TensorRef x = cast(ctx.tensor(node.arg("input")), t);
  if (x.rank() < 2) ctx.fail("batch norm needs an input of rank >= 2");
  TensorRef mean = cast(ctx.tensor(node.arg("running_mean")), t);
  TensorRef var = cast(ctx.tensor(node.arg("running_var")), t);
  double eps = float_arg(node, "eps");
  Loader load_var = var.load;
  Loader rstd = [load_var, eps, t](Ops& ops, const Index& idx) {
    Val var = load_var(ops, idx);
    return ops.unary(UnaryOp::Rsqrt, ops.add(var, ops.constant(eps, t)));
  };
  auto channel = [](const Index& idx) { return Index{idx[1]}; };
  TensorRef out = normalize(x, mean.load, rstd, optional_tensor(ctx, node, "weight", t),
                            optional_tensor(ctx, node, "bias", t), channel, channel, t);
  Outs outs = {out};
  for (size_t k = 1; k < 3; ++k) {
    DType dt = out_dtype(node, k);
    outs.push_back(LoweringContext::pointwise(dt, {Expr(0)}, [dt](Ops& ops, const Index&) { return ops.constant(0.0, dt); }));
  }
  return outs;
}

// _native_batch_norm_legit.no_stats(input, weight?, bias?, training, momentum, eps) -> (out,
// save_mean [C], save_invstd [C]): the statistics of each channel over the batch and spatial dims
// (biased variance), as layer norm computes them over its trailing dims. Without running
// statistics only training mode is defined (ATen refuses the other).
Outs lower_batch_norm_batch_stats(LoweringContext& ctx, const Node& node) {
  DType t = out_dtype(node, 0);
  TensorRef x = cast(ctx.tensor(node.arg("input")), t);
  if (x.rank() < 2) ctx.fail("batch norm needs an input of rank >= 2");
  if (!bool_arg(node, "training")) ctx.fail("batch norm without running statistics needs training=True");
  std::vector<Expr> ranges = {x.sizes[0]};
  ranges.insert(ranges.end(), x.sizes.begin() + 2, x.sizes.end());
  Moments m = moments(ctx, x, {x.sizes[1]}, ranges, [](const Index& idx, const Index& ridx) {
    Index in = {ridx[0], idx[0]};
    in.insert(in.end(), ridx.begin() + 1, ridx.end());
    return in;
  }, float_arg(node, "eps"), t);
  auto channel = [](const Index& idx) { return Index{idx[1]}; };
  TensorRef out = normalize(x, m.mean.load, m.rstd.load, optional_tensor(ctx, node, "weight", t),
                            optional_tensor(ctx, node, "bias", t), channel, channel, t);
  return {out, cast(m.mean, out_dtype(node, 1)), cast(m.rstd, out_dtype(node, 2))};
}

}  // namespace foundry::lower
