// Reductions, scans and softmax: sum, mean, prod, amax/amin, max/min, any, argmax/argmin,
// max.dim/min.dim, var/var_mean, cumsum/cumprod, _softmax/_log_softmax.
//
// Each reduction is one realized Reduction node over the reduced dims (reduce_dims maps output and
// reduction indices back to the input's index); whatever follows it (mean's division, softmax's
// normalization) is lazy pointwise math over the realized buffers.
#include <cmath>
#include <functional>
#include <optional>

#include "foundry/support/error.h"
#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

using ir::BinaryOp;
using ir::ReduceOp;
using ir::UnaryOp;

namespace {

// How a reduction over some dims of a tensor maps onto loops: the output's sizes, the reduction
// ranges, and the input index of an (output index, reduction index) pair.
struct ReducePlan {
  std::vector<Expr> in_sizes;
  std::vector<bool> reduced;  // per input dim
  bool keepdim = false;
  std::vector<Expr> out_sizes;
  std::vector<Expr> ranges;  // sizes of the reduced dims, in order
  Expr count = 1;            // number of elements reduced into each output element

  Index input_index(const Index& idx, const Index& ridx) const {
    Index in(in_sizes.size());
    size_t o = 0, r = 0;
    for (size_t d = 0; d < in_sizes.size(); ++d) {
      if (reduced[d]) {
        in[d] = ridx[r++];
        if (keepdim) ++o;
      } else {
        in[d] = idx[o++];
      }
    }
    return in;
  }
  // The output index of an input index (drops reduced dims, or zeroes them with keepdim).
  Index output_index(const Index& in) const {
    Index out;
    for (size_t d = 0; d < in_sizes.size(); ++d) {
      if (!reduced[d]) out.push_back(in[d]);
      else if (keepdim) out.push_back(Expr(0));
    }
    return out;
  }
};

// `dims` empty means all dims (as ATen's reductions read an empty or absent dim list). On a 0-d
// tensor dims 0 and -1 are accepted and nothing is reduced.
ReducePlan reduce_dims(const std::vector<Expr>& sizes, const std::vector<int64_t>& dims, bool keepdim) {
  ReducePlan p;
  p.in_sizes = sizes;
  p.keepdim = keepdim;
  int64_t rank = static_cast<int64_t>(sizes.size());
  p.reduced.assign(sizes.size(), dims.empty());
  for (int64_t d : dims) {
    int64_t n = normalize_dim(d, rank);
    if (rank == 0) continue;
    if (p.reduced[n]) throw UserError("dim " + std::to_string(n) + " appears multiple times in the list of dims");
    p.reduced[n] = true;
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (p.reduced[d]) {
      p.ranges.push_back(sizes[d]);
      p.count = p.count * sizes[d];
      if (keepdim) p.out_sizes.push_back(Expr(1));
    } else {
      p.out_sizes.push_back(sizes[d]);
    }
  }
  return p;
}

// The reduced dims named by argument `name`: absent or None -> {} (all), an int -> {it}, a list.
std::vector<int64_t> dims_arg(const Node& node, const std::string& name) {
  if (is_none(node, name)) return {};
  return ints_arg(node, name);
}

bool keepdim_arg(const Node& node) { return node.has_arg("keepdim") && bool_arg(node, "keepdim"); }

// The node's own plan: its "dim"/"keepdim" arguments over `self`, checked against the recorded
// output sizes.
ReducePlan node_plan(LoweringContext& ctx, const Node& node, const TensorRef& x, size_t out = 0) {
  ReducePlan p = reduce_dims(x.sizes, dims_arg(node, "dim"), keepdim_arg(node));
  if (p.out_sizes != out_sizes(ctx, node, out)) ctx.fail("reduction output sizes disagree with the recorded type");
  return p;
}

// A realized reduction of `x` (values cast to `compute` first) under `plan`, result dtype `out`.
TensorRef reduce(LoweringContext& ctx, const TensorRef& x, const ReducePlan& plan, ReduceOp op, DType compute,
                 DType out) {
  Loader load = x.load;
  ReducePlan p = plan;
  return ctx.reduction(out, p.out_sizes, p.ranges, op, [load, p, compute](Ops& ops, const Index& idx, const Index& ridx) {
    return ops.cast(load(ops, p.input_index(idx, ridx)), compute);
  });
}

// sum(x) / count in dtype t, lazily over the realized sum.
TensorRef mean_of(LoweringContext& ctx, const TensorRef& x, const ReducePlan& p, DType t) {
  TensorRef sum = reduce(ctx, x, p, ReduceOp::Sum, t, t);
  Expr count = p.count;
  return map1(sum, t, t, [count, t](Ops& ops, Val v) { return ops.div(v, count_value(ops, count, t)); });
}

}  // namespace

// sum, sum.dim_IntList, prod, prod.dim_int: accumulate in the output dtype (int64 for integer and
// bool inputs unless `dtype` says otherwise).
Outs lower_sum(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  DType out = out_dtype(node);
  return {reduce(ctx, x, node_plan(ctx, node, x), ReduceOp::Sum, out, out)};
}

Outs lower_prod(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  DType out = out_dtype(node);
  return {reduce(ctx, x, node_plan(ctx, node, x), ReduceOp::Prod, out, out)};
}

// mean, mean.dim: sum / count in the floating output dtype (an empty reduction gives 0/0 = NaN).
Outs lower_mean(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  DType out = out_dtype(node);
  return {mean_of(ctx, x, node_plan(ctx, node, x), out)};
}

// amax, amin, max, min (all elements): NaN propagates.
LowerFn lower_extremum(bool is_max) {
  return [is_max](LoweringContext& ctx, const Node& node) -> Outs {
    TensorRef x = ctx.tensor(node.arg("self"));
    DType out = out_dtype(node);
    return {reduce(ctx, x, node_plan(ctx, node, x), is_max ? ReduceOp::Max : ReduceOp::Min, out, out)};
  };
}

// any, any.dim, any.dims: bool, except that a uint8 input gives uint8.
Outs lower_any(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  TensorRef r = reduce(ctx, x, node_plan(ctx, node, x), ReduceOp::Any, x.dtype, DType::Bool);
  return {cast(r, out_dtype(node))};
}

// argmax, argmin: int64 position along `dim`, or in the flattened tensor when dim is None
// (reducing all dims in row-major order gives exactly the flat position).
LowerFn lower_arg_extremum(bool is_max) {
  return [is_max](LoweringContext& ctx, const Node& node) -> Outs {
    TensorRef x = ctx.tensor(node.arg("self"));
    return {reduce(ctx, x, node_plan(ctx, node, x), is_max ? ReduceOp::ArgMax : ReduceOp::ArgMin, x.dtype,
                   DType::Int64)};
  };
}

// max.dim, min.dim: (values, int64 indices); first occurrence wins, NaN counts as the extremum.
LowerFn lower_extremum_with_index(bool is_max) {
  return [is_max](LoweringContext& ctx, const Node& node) -> Outs {
    TensorRef x = ctx.tensor(node.arg("self"));
    ReducePlan p = node_plan(ctx, node, x);
    TensorRef values = reduce(ctx, x, p, is_max ? ReduceOp::Max : ReduceOp::Min, x.dtype, x.dtype);
    TensorRef indices = reduce(ctx, x, p, is_max ? ReduceOp::ArgMax : ReduceOp::ArgMin, x.dtype, DType::Int64);
    return {values, indices};
  };
}

// median, nanmedian (every element) and nanmedian.dim (with the position along dim): the lower
// median, the element of rank k = (n - 1) / 2, where an element's ranks run from the count of
// smaller elements in its slice over as many as equal it. O(n^2) counting, which suits the small
// slices these ops see. median is NaN when its slice holds a NaN; nanmedian leaves NaN out (n
// counts the others) and is NaN when every element is.
LowerFn lower_median(bool ignore_nan) {
  return [ignore_nan](LoweringContext& ctx, const Node& node) -> Outs {
    TensorRef x = ctx.tensor(node.arg("self"));
    const DType t = x.dtype;
    if (!is_floating(t)) ctx.fail("median of a " + std::string(dtype_name(t)) + " tensor is not supported");
    ReducePlan p = node_plan(ctx, node, x);
    Loader load = x.load;
    auto count_in_slice = [&](BinaryOp cmp) {  // per element: how many of its slice compare so to it
      return ctx.reduction(DType::Int64, x.sizes, p.ranges, ReduceOp::Sum, [=](Ops& ops, const Index& idx, const Index& r) {
        Val other = load(ops, p.input_index(p.output_index(idx), r));
        return ops.cast(ops.binary(cmp, other, load(ops, idx)), DType::Int64);
      });
    };
    Loader smaller = count_in_slice(BinaryOp::Lt).load, equal = count_in_slice(BinaryOp::Eq).load;
    Loader numbers = ctx.reduction(DType::Int64, p.out_sizes, p.ranges, ReduceOp::Sum,
                                   [=](Ops& ops, const Index& idx, const Index& r) {
                                     Val nan = ops.unary(UnaryOp::IsNan, load(ops, p.input_index(idx, r)));
                                     return ops.cast(ops.unary(UnaryOp::LogicalNot, nan), DType::Int64);
                                   }).load;
    auto is_median = [=](Ops& ops, const Index& idx, const Index& r) {
      Index in = p.input_index(idx, r);
      Val k = ops.binary(BinaryOp::FloorDiv, ops.sub(numbers(ops, idx), ops.constant(1, DType::Int64)),
                         ops.constant(2, DType::Int64));
      Val first = smaller(ops, in), past = ops.add(first, equal(ops, in));
      return ops.binary(BinaryOp::LogicalAnd, ops.binary(BinaryOp::Le, first, k), ops.binary(BinaryOp::Lt, k, past));
    };
    TensorRef value = ctx.reduction(t, p.out_sizes, p.ranges, ReduceOp::Max, [=](Ops& ops, const Index& idx, const Index& r) {
      return ops.where(is_median(ops, idx, r), load(ops, p.input_index(idx, r)), ops.constant(-INFINITY, t));
    });
    const Expr all = p.count;
    Outs outs = {map2(value, LoweringContext::pointwise(DType::Int64, p.out_sizes, numbers), t, t,
                      [=](Ops& ops, Val v, Val n) {
                        Val none = ops.binary(BinaryOp::Eq, n, ops.constant(0, t));
                        Val nan_seen = ops.binary(BinaryOp::Lt, n, count_value(ops, all, t));
                        return ops.where(ignore_nan ? none : nan_seen, ops.constant(NAN, t), v);
                      })};
    if (node.outputs.size() > 1)
      outs.push_back(ctx.reduction(DType::Int64, p.out_sizes, p.ranges, ReduceOp::ArgMax,
                                   [=](Ops& ops, const Index& idx, const Index& r) {
                                     return ops.cast(is_median(ops, idx, r), DType::Int64);
                                   }));
    return outs;
  };
}

// histc: counts of the elements in `bins` equal bins over [min, max], the top edge in the last bin,
// elements outside (and NaN) not counted. As ATen: min == max takes the data's own range, and a
// range that is still one value is widened by 1 on each side; the bin is (x - min) / (max - min)
// * bins, truncated.
Outs lower_histc(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  const DType t = out_dtype(node);
  if (!is_floating(t)) ctx.fail("histc needs a floating input");
  const int64_t bins = int_arg(node, "bins");
  if (bins <= 0) ctx.fail("histc: bins must be > 0");
  const double lo = float_arg(node, "min"), hi = float_arg(node, "max");
  if (lo > hi) ctx.fail("histc: max must be larger than min");
  std::optional<Loader> data_min, data_max;
  if (lo == hi) {
    ReducePlan all = reduce_dims(x.sizes, {}, false);
    data_min = reduce(ctx, x, all, ReduceOp::Min, t, t).load;
    data_max = reduce(ctx, x, all, ReduceOp::Max, t, t).load;
  }
  Loader load = x.load;
  return {ctx.reduction(t, {Expr(bins)}, x.sizes, ReduceOp::Sum, [=](Ops& ops, const Index& idx, const Index& r) {
    Val left = data_min ? (*data_min)(ops, {}) : ops.constant(lo, t);
    Val right = data_max ? (*data_max)(ops, {}) : ops.constant(hi, t);
    Val single = ops.binary(BinaryOp::Eq, left, right);
    left = ops.where(single, ops.sub(left, ops.constant(1, t)), left);
    right = ops.where(single, ops.add(right, ops.constant(1, t)), right);
    Val v = ops.cast(load(ops, r), t);
    Val scaled = ops.mul(ops.div(ops.sub(v, left), ops.sub(right, left)), ops.constant(static_cast<double>(bins), t));
    Val bin = ops.to_dtype(ops.unary(UnaryOp::Trunc, scaled), DType::Int64);
    Val last = ops.constant(bins - 1, DType::Int64);
    bin = ops.binary(BinaryOp::Minimum, bin, last);  // x == max falls in the last bin
    Val inside = ops.binary(BinaryOp::LogicalAnd, ops.binary(BinaryOp::Ge, v, left), ops.binary(BinaryOp::Le, v, right));
    Val hit = ops.binary(BinaryOp::LogicalAnd, inside, ops.binary(BinaryOp::Eq, bin, ops.index_expr(idx[0], DType::Int64)));
    return ops.cast(hit, t);
  })};
}

// var.correction, var_mean.correction: two passes (mean, then the sum of squared deviations),
// divided by max(count - correction, 0); correction defaults to 1.
Outs lower_var(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  DType t = out_dtype(node);
  ReducePlan p = node_plan(ctx, node, x);
  double correction = is_none(node, "correction") ? 1.0 : float_arg(node, "correction");
  TensorRef mean = mean_of(ctx, x, p, t);
  Loader load_x = x.load, load_mean = mean.load;
  TensorRef ssd = ctx.reduction(t, p.out_sizes, p.ranges, ReduceOp::Sum,
                                [load_x, load_mean, p, t](Ops& ops, const Index& idx, const Index& ridx) {
                                  Val v = ops.cast(load_x(ops, p.input_index(idx, ridx)), t);
                                  Val d = ops.sub(v, load_mean(ops, idx));
                                  return ops.mul(d, d);
                                });
  Expr count = p.count;
  TensorRef var = map1(ssd, t, t, [count, correction, t](Ops& ops, Val v) {
    Val n = count_value(ops, count, t);
    Val c = ops.constant(correction, t);
    Val dof = ops.sub(n, c);
    Val zero = ops.constant(0.0, t);
    Val divisor = ops.binary(BinaryOp::Maximum, dof, zero);
    return ops.div(v, divisor);
  });
  if (node.outputs.size() == 2) return {var, mean};
  return {var};
}

namespace {
// out[..i..] = op over j <= i of value(x[..j..], out index), along `dim`, in the output dtype:
// a quadratic reduction, but one plain Reduction node the scheduler already understands.
using ScanValue = std::function<Val(Ops&, Val x_j, const Index& out_index)>;
TensorRef prefix_scan(LoweringContext& ctx, const TensorRef& x, int64_t dim, DType out, ReduceOp op,
                      double identity, ScanValue value) {
  Loader load = x.load;
  if (x.rank() == 0)
    return ctx.reduction(out, {}, {}, op, [load, out, value](Ops& ops, const Index& idx, const Index&) {
      return value(ops, ops.cast(load(ops, idx), out), idx);
    });
  return ctx.reduction(out, x.sizes, {x.sizes[dim]}, op, [=](Ops& ops, const Index& idx, const Index& ridx) {
    Index src = idx;
    src[dim] = ridx[0];  // always in range: only the result is masked
    Val v = value(ops, ops.cast(load(ops, src), out), idx);
    Val j = ops.index_expr(ridx[0], DType::Int64);
    Val i = ops.index_expr(idx[dim], DType::Int64);
    return ops.where(ops.binary(BinaryOp::Le, j, i), v, ops.constant(identity, out));
  });
}

Val as_is(Ops&, Val v, const Index&) { return v; }
}  // namespace

// cumsum, cumprod: prefix sums and products.
LowerFn lower_scan(bool is_prod) {
  return [is_prod](LoweringContext& ctx, const Node& node) -> Outs {
    TensorRef x = ctx.tensor(node.arg("self"));
    int64_t dim = normalize_dim(int_arg(node, "dim"), static_cast<int64_t>(x.rank()));
    return {prefix_scan(ctx, x, dim, out_dtype(node), is_prod ? ReduceOp::Prod : ReduceOp::Sum, is_prod ? 1.0 : 0.0,
                        as_is)};
  };
}

// logcumsumexp: m = the prefix max, then m + log(prefix sum of exp(x - m)), with m taken as 0
// where it is infinite (all -inf gives -inf, a +inf gives +inf, rather than inf - inf = NaN).
Outs lower_logcumsumexp(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  DType out = out_dtype(node);
  int64_t dim = normalize_dim(int_arg(node, "dim"), static_cast<int64_t>(x.rank()));
  TensorRef m = prefix_scan(ctx, x, dim, out, ReduceOp::Max, -INFINITY, as_is);
  TensorRef shift = ctx.realize(map1(m, out, out, [out](Ops& ops, Val v) {
    return ops.where(ops.unary(UnaryOp::IsInf, v), ops.constant(0, out), v);
  }));
  Loader load_shift = shift.load;
  TensorRef s = prefix_scan(ctx, x, dim, out, ReduceOp::Sum, 0, [load_shift](Ops& ops, Val v, const Index& idx) {
    return ops.unary(UnaryOp::Exp, ops.sub(v, load_shift(ops, idx)));
  });
  return {map2(s, shift, out, out, [](Ops& ops, Val sum, Val c) { return ops.add(ops.unary(UnaryOp::Log, sum), c); })};
}

// searchsorted, bucketize: the count of sequence elements below each value (side 'right' /
// right=True: not above it) over the sequence's last dim, which is the position a binary search
// finds in a sorted sequence; `sorter` reads the sequence through that permutation.
Outs lower_searchsorted(LoweringContext& ctx, const Node& node) {
  const bool bucketize = node.has_arg("boundaries");
  const Arg& seq_arg = node.arg(bucketize ? "boundaries" : "sorted_sequence");
  bool right = bool_arg(node, "right");
  if (!bucketize && !node.arg("side").is_none()) {
    if (right && node.arg("side").s == "left") ctx.fail("side and right can't be set to opposites");
    right = node.arg("side").s == "right";
  }
  DType compute = result_type(ctx, {&seq_arg, &node.arg("self")}), out = out_dtype(node);
  TensorRef seq = cast(ctx.tensor(seq_arg), compute), values = cast(ctx.tensor(node.arg("self")), compute);
  std::optional<TensorRef> sorter;
  if (!bucketize && !node.arg("sorter").is_none()) sorter = ctx.tensor(node.arg("sorter"));
  const size_t batch = seq.rank() - 1;
  const Expr n = seq.sizes.back();
  Loader load_seq = seq.load, load_value = values.load;
  return {ctx.reduction(out, values.sizes, {n}, ReduceOp::Sum, [=](Ops& ops, const Index& idx, const Index& r) {
    Index at(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(batch));
    at.push_back(r[0]);
    if (sorter) at.back() = ops.indirect(sorter->load(ops, at), n, ir::NegativeIndex::OutOfRange);
    Val below = ops.binary(right ? BinaryOp::Le : BinaryOp::Lt, load_seq(ops, at), load_value(ops, idx));
    return ops.cast(below, out);
  })};
}

// _softmax, _log_softmax: m = max over dim, s = sum of exp(x - m); softmax = exp(x - m) / s,
// log_softmax = x - m - log(s). Computed in the output dtype (float32 for half_to_float). Where
// the device's ReductionSplit says so, softmax's exp(x - m) is a buffer of its own, computed once.
LowerFn lower_softmax(bool is_log) {
  return [is_log](LoweringContext& ctx, const Node& node) -> Outs {
    TensorRef x = ctx.tensor(node.arg("self"));
    DType t = out_dtype(node);
    ReducePlan p = reduce_dims(x.sizes, {int_arg(node, "dim")}, /*keepdim=*/true);
    TensorRef xt = cast(x, t);
    TensorRef m = reduce(ctx, xt, p, ReduceOp::Max, t, t);
    Loader load_x = xt.load, load_m = m.load;
    // exp(x - m) at a position of x: computed where it is read, or read from its own buffer.
    Loader exp_shifted = [load_x, load_m, p](Ops& ops, const Index& idx) {
      return ops.unary(UnaryOp::Exp, ops.sub(load_x(ops, idx), load_m(ops, p.output_index(idx))));
    };
    if (!is_log && ctx.reductions().softmax_keeps_exponentials)
      exp_shifted = ctx.realize(LoweringContext::pointwise(t, x.sizes, exp_shifted)).load;
    TensorRef s = ctx.reduction(t, p.out_sizes, p.ranges, ReduceOp::Sum,
                                [exp_shifted, p](Ops& ops, const Index& idx, const Index& ridx) {
                                  return exp_shifted(ops, p.input_index(idx, ridx));
                                });
    Loader load_s = s.load;
    return {LoweringContext::pointwise(t, x.sizes, [load_x, load_m, load_s, exp_shifted, p, is_log](Ops& ops, const Index& idx) {
      Index o = p.output_index(idx);
      Val sum = load_s(ops, o);
      if (is_log) return ops.sub(ops.sub(load_x(ops, idx), load_m(ops, o)), ops.unary(UnaryOp::Log, sum));
      return ops.div(exp_shifted(ops, idx), sum);
    })};
  };
}

}  // namespace foundry::lower
