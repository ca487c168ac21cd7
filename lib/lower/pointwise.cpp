// Elementwise ops: math, comparisons, logic, activations, casts.
#include <cmath>

#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

using ir::BinaryOp;
using ir::UnaryOp;

namespace {

bool is_comparison_or_logical(BinaryOp op) { return ir::returns_bool(op); }

// The tensor operands of a binary op: "self"/"other" ("exponent" for pow; "x"/"n" for the
// orthogonal polynomials).
std::pair<const Arg*, const Arg*> binary_operands(const Node& node) {
  if (node.has_arg("n")) return {&node.arg("x"), &node.arg("n")};
  const char* second = node.has_arg("other") ? "other" : "exponent";
  return {&node.arg("self"), &node.arg(second)};
}

bool is_16_bit_float(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// The type an activation made of several operations computes in: float32 for 16-bit floats, whose
// result ATen rounds once (its CPU kernels compute them in float), else the result type.
DType opmath(DType t) { return is_16_bit_float(t) ? DType::Float32 : t; }

}  // namespace

LowerFn unary(UnaryOp op) {
  return [op](LoweringContext& ctx, const Node& node) -> Outs {
    TensorRef x = ctx.tensor(node.arg(node.has_arg("self") ? "self" : "x"));  // special_airy_ai(x)...
    DType out = out_dtype(node);
    // Predicates (isnan, logical_not) look at the input as it is; math runs in the result type.
    DType compute = ir::returns_bool(op) ? x.dtype : out;
    return {map1(x, compute, out, [op](Ops& ops, Val v) { return ops.unary(op, v); })};
  };
}

LowerFn binary(BinaryOp op) {
  return [op](LoweringContext& ctx, const Node& node) -> Outs {
    auto [a_arg, b_arg] = binary_operands(node);
    DType out = out_dtype(node);
    // Kernels compute 16-bit floats in float, where nextafter would step by a float's ulp.
    if (op == BinaryOp::Nextafter && is_16_bit_float(out)) ctx.fail("nextafter of float16 or bfloat16 is not supported");
    DType compute = is_comparison_or_logical(op) ? result_type(ctx, {a_arg, b_arg}) : out;
    TensorRef a = ctx.tensor(*a_arg, compute), b = ctx.tensor(*b_arg, compute);
    bool has_alpha = node.has_arg("alpha") && !node.arg("alpha").is_none() && node.arg("alpha").as_double() != 1.0;
    if (has_alpha) {
      ir::Scalar alpha = ir::Scalar::of(node.arg("alpha").as_double(), compute);
      b = map1(b, compute, compute, [alpha](Ops& ops, Val v) { return ops.mul(v, ops.constant(alpha)); });
    }
    return {map2(a, b, compute, out, [op](Ops& ops, Val x, Val y) { return ops.binary(op, x, y); })};
  };
}

Outs lower_div_mode(LoweringContext& ctx, const Node& node) {
  DType out = out_dtype(node);
  TensorRef a = ctx.tensor(node.arg("self"), out), b = ctx.tensor(node.arg("other"), out);
  std::string mode = node.arg("rounding_mode").is_none() ? "" : node.arg("rounding_mode").s;
  if (mode.empty()) return {map2(a, b, out, out, [](Ops& ops, Val x, Val y) { return ops.div(x, y); })};
  if (mode == "floor")
    return {map2(a, b, out, out, [](Ops& ops, Val x, Val y) { return ops.binary(BinaryOp::FloorDiv, x, y); })};
  if (mode != "trunc") ctx.fail("unknown rounding_mode '" + mode + "'");
  bool fl = is_floating(out);
  return {map2(a, b, out, out, [fl](Ops& ops, Val x, Val y) {
    Val q = ops.div(x, y);
    return fl ? ops.unary(UnaryOp::Trunc, q) : q;
  })};
}

// polygamma(n, x): digamma for n == 0, else the binary Polygamma with n as a constant.
Outs lower_polygamma(LoweringContext& ctx, const Node& node) {
  const int64_t n = int_arg(node, "n");
  if (n < 0) ctx.fail("polygamma(n, x) does not support negative n (" + std::to_string(n) + ")");
  DType out = out_dtype(node);
  return {map1(ctx.tensor(node.arg("self"), out), out, out, [n, out](Ops& ops, Val x) {
    if (n == 0) return ops.unary(UnaryOp::Digamma, x);
    return ops.binary(BinaryOp::Polygamma, ops.constant(static_cast<double>(n), out), x);
  })};
}

// round(x, decimals) as PyTorch's kernel: nearbyint(x * 10^d) / 10^d, or for d < 0
// nearbyint(x / 10^-d) * 10^-d, with 10^|d| rounded to the tensor's type first.
Outs lower_round_decimals(LoweringContext& ctx, const Node& node) {
  DType out = out_dtype(node);
  const int64_t decimals = int_arg(node, "decimals");
  if (!is_floating(out)) ctx.fail("round with decimals needs a floating input");
  const double scale = std::pow(10.0, static_cast<double>(std::llabs(decimals)));
  return {map1(ctx.tensor(node.arg("self")), out, out, [=](Ops& ops, Val x) {
    if (decimals == 0) return ops.unary(UnaryOp::Round, x);
    Val s = ops.constant(scale, out);
    if (decimals < 0) return ops.mul(ops.unary(UnaryOp::Round, ops.div(x, s)), s);
    return ops.div(ops.unary(UnaryOp::Round, ops.mul(x, s)), s);
  })};
}

Outs lower_where(LoweringContext& ctx, const Node& node) {
  DType out = out_dtype(node);
  TensorRef c = ctx.tensor(node.arg("condition"), DType::Bool);
  TensorRef a = ctx.tensor(node.arg("self"), out), b = ctx.tensor(node.arg("other"), out);
  std::vector<Expr> sizes = broadcast_shapes(broadcast_shapes(c.sizes, a.sizes), b.sizes);
  Loader lc = broadcast_to(c, sizes).load, la = broadcast_to(cast(a, out), sizes).load,
         lb = broadcast_to(cast(b, out), sizes).load;
  return {LoweringContext::pointwise(out, sizes, [lc, la, lb](Ops& ops, const Index& idx) {
    Val c = lc(ops, idx);
    Val a = la(ops, idx);
    Val b = lb(ops, idx);
    return ops.where(c, a, b);
  })};
}

namespace {
// min(max(x, lo), hi) with NaN propagating from x, as ATen's clamp.
TensorRef clamp_between(LoweringContext& ctx, TensorRef x, const Arg* lo, const Arg* hi, DType out) {
  x = cast(x, out);
  if (lo && !lo->is_none())
    x = map2(x, ctx.tensor(*lo, out), out, out, [](Ops& ops, Val v, Val l) { return ops.binary(BinaryOp::Maximum, v, l); });
  if (hi && !hi->is_none())
    x = map2(x, ctx.tensor(*hi, out), out, out, [](Ops& ops, Val v, Val h) { return ops.binary(BinaryOp::Minimum, v, h); });
  return x;
}
}  // namespace

Outs lower_clamp(LoweringContext& ctx, const Node& node) {
  return {clamp_between(ctx, ctx.tensor(node.arg("self")), &node.arg("min"), &node.arg("max"), out_dtype(node))};
}

Outs lower_hardtanh(LoweringContext& ctx, const Node& node) {
  return {clamp_between(ctx, ctx.tensor(node.arg("self")), &node.arg("min_val"), &node.arg("max_val"), out_dtype(node))};
}

Outs lower_relu(LoweringContext& ctx, const Node& node) {
  DType out = out_dtype(node);
  return {map1(ctx.tensor(node.arg("self")), out, out, [out](Ops& ops, Val v) {
    return ops.binary(BinaryOp::Maximum, v, ops.constant(0, out));
  })};
}

Outs lower_leaky_relu(LoweringContext& ctx, const Node& node) {
  DType out = out_dtype(node);
  double slope = node.has_arg("negative_slope") ? float_arg(node, "negative_slope") : 0.01;
  return {map1(ctx.tensor(node.arg("self")), out, out, [out, slope](Ops& ops, Val v) {
    Val positive = ops.binary(BinaryOp::Gt, v, ops.constant(0, out));
    return ops.where(positive, v, ops.mul(v, ops.constant(slope, out)));
  })};
}

Outs lower_elu(LoweringContext& ctx, const Node& node) {
  DType result = out_dtype(node), out = opmath(result);
  double alpha = float_arg(node, "alpha"), scale = float_arg(node, "scale"),
         input_scale = float_arg(node, "input_scale");
  return {map1(ctx.tensor(node.arg("self")), out, result, [=](Ops& ops, Val v) {
    Val positive = ops.binary(BinaryOp::Gt, v, ops.constant(0, out));
    Val neg = ops.mul(ops.constant(alpha * scale, out),
                      ops.unary(UnaryOp::Expm1, ops.mul(v, ops.constant(input_scale, out))));
    return ops.cast(ops.where(positive, ops.mul(v, ops.constant(scale, out)), neg), result);
  })};
}

Outs lower_gelu(LoweringContext& ctx, const Node& node) {
  DType result = out_dtype(node), out = opmath(result);
  bool tanh_approx = node.has_arg("approximate") && node.arg("approximate").s == "tanh";
  return {map1(ctx.tensor(node.arg("self")), out, result, [out, result, tanh_approx](Ops& ops, Val x) {
    auto c = [&](double v) { return ops.constant(v, out); };
    Val inner;
    if (tanh_approx) {
      // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
      Val cube = ops.mul(ops.mul(x, x), x);
      Val arg = ops.mul(c(std::sqrt(2.0 / M_PI)), ops.add(x, ops.mul(c(0.044715), cube)));
      inner = ops.unary(UnaryOp::Tanh, arg);
    } else {
      // 0.5 * x * (1 + erf(x / sqrt(2)))
      inner = ops.unary(UnaryOp::Erf, ops.mul(x, c(M_SQRT1_2)));
    }
    return ops.cast(ops.mul(ops.mul(c(0.5), x), ops.add(c(1.0), inner)), result);
  })};
}

// x ** c for float x and the exponents PyTorch's CPU kernel computes without pow (2, 3: products;
// 0.5, -0.5: square roots; -1, -2: reciprocals), so that kernels and the evaluator match it and
// vector loops need no pow call; other exponents and types stay pow.
Outs lower_pow_tensor_scalar(LoweringContext& ctx, const Node& node) {
  DType out = out_dtype(node);
  const Arg& exponent = node.arg("exponent");
  double c = exponent.is_number() ? exponent.as_double() : NAN;
  bool special = c == 2 || c == 3 || c == 0.5 || c == -0.5 || c == -1 || c == -2;
  if (!special || !(out == DType::Float32 || out == DType::Float64)) return binary(BinaryOp::Pow)(ctx, node);
  return {map1(ctx.tensor(node.arg("self"), out), out, out, [c](Ops& ops, Val x) {
    if (c == 0.5) return ops.unary(UnaryOp::Sqrt, x);
    if (c == -0.5) return ops.unary(UnaryOp::Rsqrt, x);
    if (c == -1) return ops.unary(UnaryOp::Reciprocal, x);
    Val square = ops.mul(x, x);
    if (c == 2) return square;
    if (c == 3) return ops.mul(square, x);
    return ops.unary(UnaryOp::Reciprocal, square);  // -2
  })};
}

Outs lower_pow_scalar_base(LoweringContext& ctx, const Node& node) {
  DType out = out_dtype(node);
  TensorRef base = ctx.tensor(node.arg("self"), out), exponent = ctx.tensor(node.arg("exponent"), out);
  return {map2(base, exponent, out, out, [](Ops& ops, Val b, Val e) { return ops.binary(BinaryOp::Pow, b, e); })};
}

Outs lower_to_copy(LoweringContext& ctx, const Node& node) {
  return {cast(ctx.tensor(node.arg("self")), out_dtype(node))};
}

Outs lower_copy(LoweringContext& ctx, const Node& node) {
  // copy(self, src): src's values broadcast to self's shape, in self's dtype.
  TensorRef self = ctx.tensor(node.arg("self"));
  return {broadcast_to(cast(ctx.tensor(node.arg("src")), out_dtype(node)), self.sizes)};
}

Outs lower_identity(LoweringContext& ctx, const Node& node) { return {ctx.tensor(node.arg("self"))}; }

Outs lower_nothing(LoweringContext& ctx, const Node& node) { return Outs(node.outputs.size()); }

}  // namespace foundry::lower
