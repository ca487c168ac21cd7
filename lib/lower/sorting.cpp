// Sorting: sort, sort.stable, topk.
//
// A row of n elements along `dim` is sorted by counting, with two quadratic Sum reductions that
// the scheduler treats like cumsum's: first each element's position in the sorted row (how many
// elements of its row come before it), then, for each output position p, the index of the
// element whose position is p. The values are then loaded through those indices. O(n^2) per row,
// which is fine for the rows of detection and classification heads (a few thousand elements at
// most) and needs no new IR: a merge sort would need loops inside a kernel body that the loop IR
// does not have.
//
// The order is PyTorch's: stable (equal elements keep their input order, as the CPU sort always
// does), NaN after every number ascending and before every number descending. topk takes the
// first k of that order; PyTorch's topk kernel does not promise an order among equal elements
// (and its partial sort does not keep the input order), so with ties its indices may differ.
#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

using ir::BinaryOp;
using ir::ReduceOp;
using ir::UnaryOp;

namespace {

// a > b with NaN above every number (bools compared as integers).
Val greater(Ops& ops, Val a, Val b) {
  Val gt = ops.binary(BinaryOp::Gt, a, b);
  if (!is_floating(a.dtype)) return gt;
  Val a_nan = ops.unary(UnaryOp::IsNan, a);
  Val b_nan = ops.unary(UnaryOp::IsNan, b);
  Val nan_above = ops.binary(BinaryOp::LogicalAnd, a_nan, ops.unary(UnaryOp::LogicalNot, b_nan));
  return ops.binary(BinaryOp::LogicalOr, gt, nan_above);
}

// a == b with NaN equal to NaN.
Val same_key(Ops& ops, Val a, Val b) {
  Val eq = ops.binary(BinaryOp::Eq, a, b);
  if (!is_floating(a.dtype)) return eq;
  Val both_nan = ops.binary(BinaryOp::LogicalAnd, ops.unary(UnaryOp::IsNan, a), ops.unary(UnaryOp::IsNan, b));
  return ops.binary(BinaryOp::LogicalOr, eq, both_nan);
}

// Whether element `a` at row position j comes before element `b` at position i in the sorted row.
Val comes_before(Ops& ops, Val a, Val b, Val j, Val i, bool descending) {
  Val ahead = descending ? greater(ops, a, b) : greater(ops, b, a);
  Val tie_first = ops.binary(BinaryOp::LogicalAnd, same_key(ops, a, b), ops.binary(BinaryOp::Lt, j, i));
  return ops.binary(BinaryOp::LogicalOr, ahead, tie_first);
}

// `idx` with its position along `dim` replaced by `pos`.
Index at_position(const Index& idx, int64_t dim, const Expr& pos) {
  Index moved = idx;
  moved[dim] = pos;
  return moved;
}

// The first `count` elements of each row of `x` along `dim` in sorted order: (values, int64 indices).
Outs sort_rows(LoweringContext& ctx, const TensorRef& x, int64_t dim, const Expr& count, bool descending) {
  // Bools are compared as the integers 0 and 1, which orders them as PyTorch does.
  TensorRef keys = x.dtype == DType::Bool ? cast(x, DType::Int32) : x;
  Loader load = keys.load;
  Expr n = x.sizes[dim];
  TensorRef rank = ctx.reduction(DType::Int64, x.sizes, {n}, ReduceOp::Sum,
                                 [load, dim, descending](Ops& ops, const Index& idx, const Index& ridx) {
                                   Val other = load(ops, at_position(idx, dim, ridx[0]));
                                   Val j = ops.index_expr(ridx[0], DType::Int64);
                                   Val i = ops.index_expr(idx[dim], DType::Int64);
                                   Val before = comes_before(ops, other, load(ops, idx), j, i, descending);
                                   return ops.cast(before, DType::Int64);
                                 });
  Loader load_rank = rank.load;
  std::vector<Expr> out_sizes = x.sizes;
  out_sizes[dim] = count;
  TensorRef indices = ctx.reduction(DType::Int64, out_sizes, {n}, ReduceOp::Sum,
                                    [load_rank, dim](Ops& ops, const Index& idx, const Index& ridx) {
                                      Val p = ops.index_expr(idx[dim], DType::Int64);
                                      Val j = ops.index_expr(ridx[0], DType::Int64);
                                      Val here = ops.binary(BinaryOp::Eq, load_rank(ops, at_position(idx, dim, ridx[0])), p);
                                      return ops.where(here, j, ops.constant(0.0, DType::Int64));
                                    });
  Loader load_x = x.load, load_indices = indices.load;
  TensorRef values = LoweringContext::pointwise(x.dtype, out_sizes, [load_x, load_indices, dim, n](Ops& ops, const Index& idx) {
    Expr source = ops.indirect(load_indices(ops, idx), n);
    return load_x(ops, at_position(idx, dim, source));
  });
  return {values, indices};
}

// A 0-d tensor sorts to itself at index 0 (topk's k is then 0 or 1: the rule checked it).
Outs sort_scalar(const TensorRef& x) {
  TensorRef zero = LoweringContext::pointwise(DType::Int64, {}, [](Ops& ops, const Index&) {
    return ops.constant(0.0, DType::Int64);
  });
  return {x, zero};
}

}  // namespace

// sort(self, dim, descending), sort.stable(self, stable, dim, descending): always stable.
Outs lower_sort(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  if (x.rank() == 0) return sort_scalar(x);
  int64_t dim = normalize_dim(int_arg(node, "dim"), static_cast<int64_t>(x.rank()));
  return sort_rows(ctx, x, dim, x.sizes[dim], bool_arg(node, "descending"));
}

// topk(self, k, dim, largest, sorted): the first k of a stable descending (largest) or ascending
// sort; the result is sorted also when `sorted` is false (PyTorch leaves that order unspecified).
Outs lower_topk(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  int64_t k = int_arg(node, "k");
  if (x.rank() == 0) {
    if (k != 1) ctx.fail("topk of a 0-d tensor with k = 0 is not supported");
    return sort_scalar(x);
  }
  int64_t dim = normalize_dim(int_arg(node, "dim"), static_cast<int64_t>(x.rank()));
  return sort_rows(ctx, x, dim, Expr(k), bool_arg(node, "largest"));
}

}  // namespace foundry::lower
