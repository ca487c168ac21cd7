// Tensor factories: full, full_like, scalar_tensor, arange, empty. Each is a pointwise body of
// constants and index expressions (no reads).
#include <cmath>

#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

namespace {

// A number argument converted to `dtype` the way ATen's fill does (integers kept exact).
ir::Scalar scalar_of(LoweringContext& ctx, const Arg& a, DType dtype) {
  if (!a.is_number()) ctx.fail("expected a number");
  if (a.kind != Arg::Kind::Float && !is_floating(dtype)) {
    ir::Scalar s;
    s.dtype = dtype;
    s.i = dtype == DType::Bool ? (a.i != 0) : a.i;
    return s;
  }
  if (a.kind == Arg::Kind::Float && !is_floating(dtype) && dtype != DType::Bool && !std::isfinite(a.f))
    ctx.fail("cannot convert a non-finite value to an integer dtype");
  return ir::Scalar::of(a.as_double(), dtype);
}

TensorRef filled(const ir::Scalar& value, std::vector<Expr> sizes) {
  return LoweringContext::pointwise(value.dtype, std::move(sizes),
                                    [value](Ops& ops, const Index&) { return ops.constant(value); });
}

}  // namespace

Outs lower_full(LoweringContext& ctx, const Node& node) {
  return {filled(scalar_of(ctx, node.arg("fill_value"), out_dtype(node)), out_sizes(ctx, node))};
}

Outs lower_full_like(LoweringContext& ctx, const Node& node) {
  TensorRef self = ctx.tensor(node.arg("self"));
  return {filled(scalar_of(ctx, node.arg("fill_value"), out_dtype(node)), self.sizes)};
}

Outs lower_sym_size(LoweringContext& ctx, const Node& node) {
  TensorRef self = ctx.tensor(node.arg("self"));
  Expr size = self.sizes.at(static_cast<size_t>(normalize_dim(int_arg(node, "dim"), static_cast<int64_t>(self.rank()))));
  return {LoweringContext::pointwise(DType::Int64, {}, [size](Ops& ops, const Index&) {
    return ops.index_expr(size, DType::Int64);
  })};
}

Outs lower_scalar_tensor(LoweringContext& ctx, const Node& node) {
  return {filled(scalar_of(ctx, node.arg("s"), out_dtype(node)), {})};
}

Outs lower_empty(LoweringContext& ctx, const Node& node) {
  // The values are undefined in ATen; zeros keep runs deterministic.
  DType t = out_dtype(node);
  return {filled(ir::Scalar::of(0, t), out_sizes(ctx, node))};
}

Outs lower_arange(LoweringContext& ctx, const Node& node) {
  DType t = out_dtype(node);
  std::vector<Expr> sizes = out_sizes(ctx, node);
  const Arg& start = node.arg("start");
  const Arg& step = node.arg("step");
  if (!start.is_number() || !step.is_number()) ctx.fail("arange: start and step must be numbers");
  if (!is_floating(t)) {
    // Integer arange works on the truncated integer start and step: start + i*step exactly.
    int64_t s0 = start.kind == Arg::Kind::Float ? static_cast<int64_t>(start.f) : start.i;
    int64_t st = step.kind == Arg::Kind::Float ? static_cast<int64_t>(step.f) : step.i;
    return {LoweringContext::pointwise(t, sizes, [s0, st, t](Ops& ops, const Index& idx) {
      Val v = ops.index_expr(idx[0] * st + s0, DType::Int64);
      return ops.cast(v, t);
    })};
  }
  // Floating arange: start + step*i in double (ATen's CPU accumulation type), rounded to t. With
  // integral start and step and values exactly representable in t, the index itself is exact.
  double s0 = start.as_double(), st = step.as_double();
  double limit = t == DType::Float64 ? 9007199254740992.0 : t == DType::Float32 ? 16777216.0 : 0.0;
  double n = sizes.empty() || !sizes[0].is_const() ? INFINITY : static_cast<double>(sizes[0].const_value());
  if (s0 == std::floor(s0) && st == std::floor(st) && std::fabs(s0) + std::fabs(st) * n < limit) {
    int64_t a = static_cast<int64_t>(s0), b = static_cast<int64_t>(st);
    return {LoweringContext::pointwise(t, sizes, [a, b, t](Ops& ops, const Index& idx) {
      return ops.index_expr(idx[0] * b + a, t);
    })};
  }
  return {LoweringContext::pointwise(t, sizes, [s0, st, t](Ops& ops, const Index& idx) {
    DType acc = DType::Float64;
    Val i = ops.index_expr(idx[0], acc);
    Val step = ops.mul(ops.constant(ir::Scalar::of(st, acc)), i);
    Val v = ops.add(ops.constant(ir::Scalar::of(s0, acc)), step);
    return ops.cast(v, t);
  })};
}

}  // namespace foundry::lower
