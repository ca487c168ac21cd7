// Sorting: sort, sort.stable (argsort and msort export as sort), topk.
//
// Each row along `dim` is sorted by a library call (ir::SortRows, run by runtime/foundry_sort.h in
// generated code and in the reference evaluator): a sort needs loops inside a body, which the loop
// IR does not have, and without them it is counting, n^2 comparisons per row of n. The call gives
// each row's sorted positions (int64); the values are a gather through them, a pointwise node that
// may fuse with what reads it.
//
// The order is PyTorch's: stable (equal elements keep their input order, as the CPU sort always
// does), NaN after every number ascending and before every number descending. topk takes the
// first k of that order; PyTorch's topk kernel does not promise an order among equal elements
// (and its partial sort does not keep the input order), so with ties its indices may differ.
#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

namespace {

// `idx` with its position along `dim` replaced by `pos`.
Index at_position(const Index& idx, int64_t dim, const Expr& pos) {
  Index moved = idx;
  moved[dim] = pos;
  return moved;
}

// The first `count` elements of each row of `x` along `dim` in sorted order: (values, int64 indices).
Outs sort_rows(LoweringContext& ctx, const TensorRef& x, int64_t dim, const Expr& count, bool descending) {
  ir::SortRows call;
  call.input = ctx.strided_operand(x);
  call.dim = dim;
  call.k = count;
  call.descending = descending;
  std::vector<Expr> out_sizes = x.sizes;
  out_sizes[dim] = count;
  TensorRef indices = ctx.extern_call({call}, DType::Int64, out_sizes);
  Loader load_x = x.load, load_indices = indices.load;
  Expr n = x.sizes[dim];
  TensorRef values = LoweringContext::pointwise(x.dtype, out_sizes, [load_x, load_indices, dim, n](Ops& ops, const Index& idx) {
    Expr source = ops.indirect(load_indices(ops, idx), n, ir::NegativeIndex::OutOfRange);
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
