// grid_sampler_2d (F.grid_sample): out[n, c, h, w] samples input[n, c] at the point grid[n, h, w]
// = (x, y), with -1 and 1 the input's outer edges (align_corners=False: the outer pixels' edges;
// True: their centres). Bilinear or nearest; padding zeros (points outside read 0) or border
// (points are clipped into the input first). Formulas as ATen's CPU kernel (GridSamplerKernel.cpp):
// unnormalize (g + 1) * size / 2 - 0.5 (align_corners: (g + 1) * (size - 1) / 2), weights from
// the distance to the floor, nearest rounding half to even.
//
// A gather at computed positions: each corner's position is clamped into the input before it is
// used as an index and its value masked to 0 when the position was outside, so no load reads
// outside the input whatever the grid holds (also NaN or infinite points).
#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

using ir::BinaryOp;
using ir::UnaryOp;

namespace {

enum class Interpolation { Bilinear = 0, Nearest = 1 };
enum class Padding { Zeros = 0, Border = 1 };

struct GridSampler {
  Loader input, grid;
  Expr height, width;
  Interpolation interpolation = Interpolation::Bilinear;
  Padding padding = Padding::Zeros;
  bool align_corners = false;
  DType t = DType::Float32;

  Val c(Ops& ops, double v) const { return ops.constant(v, t); }

  // The source coordinate of normalized coordinate g along a dim of `size`.
  Val source_coordinate(Ops& ops, Val g, const Expr& size) const {
    Val n = ops.index_expr(size, t);
    Val shifted = ops.add(g, c(ops, 1.0));
    Val x = align_corners ? ops.mul(shifted, ops.div(ops.sub(n, c(ops, 1.0)), c(ops, 2.0)))
                          : ops.sub(ops.mul(shifted, ops.div(n, c(ops, 2.0))), c(ops, 0.5));
    if (padding == Padding::Zeros) return x;
    Val clipped = ops.binary(BinaryOp::Maximum, x, c(ops, 0.0));
    return ops.binary(BinaryOp::Minimum, clipped, ops.sub(n, c(ops, 1.0)));
  }

  // An integral float position as int64 in [-2, size] (fmin/fmax also turn NaN into -2), so that
  // the conversion is defined; a position and the one after it are then both outside the input
  // exactly when they were before.
  Val integer_position(Ops& ops, Val f, const Expr& size) const {
    Val low = ops.binary(BinaryOp::Fmax, f, c(ops, -2.0));
    Val bounded = ops.binary(BinaryOp::Fmin, low, ops.index_expr(size, t));
    return ops.to_dtype(bounded, DType::Int64);
  }

  // Whether 0 <= i < size, and i clamped into [0, size - 1] as an index.
  static Val inside(Ops& ops, Val i, const Expr& size) {
    Val nonneg = ops.binary(BinaryOp::Ge, i, ops.constant(0.0, DType::Int64));
    return ops.binary(BinaryOp::LogicalAnd, nonneg, ops.binary(BinaryOp::Lt, i, ops.index_expr(size, DType::Int64)));
  }
  static Expr clamped_index(Ops& ops, Val i, const Expr& size) {
    Val low = ops.binary(BinaryOp::Maximum, i, ops.constant(0.0, DType::Int64));
    Val last = ops.index_expr(size - 1, DType::Int64);
    return ops.indirect(ops.binary(BinaryOp::Minimum, low, last), size, ir::NegativeIndex::OutOfRange);
  }

  // input[n, c, y, x], or 0 where (x, y) is outside the input.
  Val corner(Ops& ops, const Index& idx, Val x, Val y) const {
    Val valid = ops.binary(BinaryOp::LogicalAnd, inside(ops, x, width), inside(ops, y, height));
    Val v = input(ops, {idx[0], idx[1], clamped_index(ops, y, height), clamped_index(ops, x, width)});
    return ops.where(valid, v, c(ops, 0.0));
  }

  Val bilinear(Ops& ops, const Index& idx, Val x, Val y) const {
    Val x0f = ops.unary(UnaryOp::Floor, x), y0f = ops.unary(UnaryOp::Floor, y);
    Val fx = ops.sub(x, x0f), fy = ops.sub(y, y0f);
    Val gx = ops.sub(c(ops, 1.0), fx), gy = ops.sub(c(ops, 1.0), fy);
    Val x0 = integer_position(ops, x0f, width), y0 = integer_position(ops, y0f, height);
    Val one = ops.constant(1.0, DType::Int64);
    Val x1 = ops.add(x0, one), y1 = ops.add(y0, one);
    Val nw = ops.mul(corner(ops, idx, x0, y0), ops.mul(gy, gx));
    Val ne = ops.mul(corner(ops, idx, x1, y0), ops.mul(gy, fx));
    Val sw = ops.mul(corner(ops, idx, x0, y1), ops.mul(fy, gx));
    Val se = ops.mul(corner(ops, idx, x1, y1), ops.mul(fy, fx));
    return ops.add(ops.add(ops.add(nw, ne), sw), se);
  }

  Val nearest(Ops& ops, const Index& idx, Val x, Val y) const {
    Val xi = integer_position(ops, ops.unary(UnaryOp::Round, x), width);
    Val yi = integer_position(ops, ops.unary(UnaryOp::Round, y), height);
    return corner(ops, idx, xi, yi);
  }

  Val operator()(Ops& ops, const Index& idx) const {
    Val gx = ops.cast(grid(ops, {idx[0], idx[2], idx[3], Expr(0)}), t);
    Val gy = ops.cast(grid(ops, {idx[0], idx[2], idx[3], Expr(1)}), t);
    Val x = source_coordinate(ops, gx, width), y = source_coordinate(ops, gy, height);
    return interpolation == Interpolation::Bilinear ? bilinear(ops, idx, x, y) : nearest(ops, idx, x, y);
  }
};

}  // namespace

// grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners).
Outs lower_grid_sampler_2d(LoweringContext& ctx, const Node& node) {
  DType t = out_dtype(node);
  TensorRef input = cast(ctx.tensor(node.arg("input")), t);
  TensorRef grid = ctx.tensor(node.arg("grid"));
  int64_t interpolation = int_arg(node, "interpolation_mode"), padding = int_arg(node, "padding_mode");
  if (interpolation != 0 && interpolation != 1)
    ctx.fail("grid_sample mode 'bicubic' is not supported (bilinear and nearest are)");
  if (padding != 0 && padding != 1)
    ctx.fail("grid_sample padding_mode 'reflection' is not supported (zeros and border are)");
  GridSampler sampler{input.load, grid.load, input.sizes[2], input.sizes[3], static_cast<Interpolation>(interpolation),
                      static_cast<Padding>(padding), bool_arg(node, "align_corners"), t};
  return {LoweringContext::pointwise(t, out_sizes(ctx, node), sampler)};
}

}  // namespace foundry::lower
