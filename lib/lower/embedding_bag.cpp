// _embedding_bag (nn.EmbeddingBag): output[b, d] combines weight[indices[p], d] (times
// per_sample_weights[p]) over the positions p of bag b, [offsets[b], offsets[b + 1]) (the last bag
// ends at the end of `indices` unless include_last_offset), skipping indices equal to padding_idx:
// their sum, mean or max; an empty bag gives 0.
//
// Each output element is one reduction over all positions, masked to its bag's: O(bags * indices
// * dim), the cost of a small quadratic scan like cumsum's, and bags of real models are small. Only
// the first output is computed; the others (offset2bag, bag_size, max_indices) serve the backward
// pass, and a model that reads one is refused when it is lowered.
#include <limits>

#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

using ir::BinaryOp;
using ir::ReduceOp;

namespace {

enum class BagMode { Sum = 0, Mean = 1, Max = 2 };

struct Bags {
  Loader weight, indices, offsets, sample_weights;  // sample_weights may be empty
  Expr rows;              // weight's first dim
  Expr positions;         // indices' size
  Expr offset_count;      // offsets' size
  int64_t padding_idx = -1;

  Val offset_at(Ops& ops, const Expr& i) const { return ops.cast(offsets(ops, {i}), DType::Int64); }

  // Whether position p belongs to bag b (and is not padding).
  Val member(Ops& ops, const Expr& b, const Expr& p) const {
    Val pos = ops.index_expr(p, DType::Int64);
    Val start = offset_at(ops, b);
    Val next_bag = ops.index_expr(b + 1, DType::Int64);
    Val next_exists = ops.binary(BinaryOp::Lt, next_bag, ops.index_expr(offset_count, DType::Int64));
    Val next = offset_at(ops, clamp_index(b + 1, offset_count));  // masked below when there is none
    Val end = ops.where(next_exists, next, ops.index_expr(positions, DType::Int64));
    Val in_bag = ops.binary(BinaryOp::LogicalAnd, ops.binary(BinaryOp::Le, start, pos), ops.binary(BinaryOp::Lt, pos, end));
    if (padding_idx < 0) return in_bag;
    Val index = ops.cast(indices(ops, {p}), DType::Int64);
    Val not_padding = ops.binary(BinaryOp::Ne, index, ops.constant(static_cast<double>(padding_idx), DType::Int64));
    return ops.binary(BinaryOp::LogicalAnd, in_bag, not_padding);
  }

  // weight[indices[p], d], scaled by per_sample_weights[p] when given.
  Val entry(Ops& ops, const Expr& p, const Expr& d) const {
    Val v = weight(ops, {indirect_at(ops, indices, {p}, rows, ir::NegativeIndex::OutOfRange), d});
    if (sample_weights) v = ops.mul(v, sample_weights(ops, {p}));
    return v;
  }
};

// The per-bag count of member positions, int64 [bags].
TensorRef bag_sizes(LoweringContext& ctx, const Bags& bags, const Expr& count) {
  return ctx.reduction(DType::Int64, {count}, {bags.positions}, ReduceOp::Sum,
                       [bags](Ops& ops, const Index& idx, const Index& ridx) {
                         return ops.cast(bags.member(ops, idx[0], ridx[0]), DType::Int64);
                       });
}

Bags read_bags(LoweringContext& ctx, const Node& node, const TensorRef& weight) {
  TensorRef indices = ctx.tensor(node.arg("indices"));
  TensorRef offsets = ctx.tensor(node.arg("offsets"));
  Bags bags{weight.load, indices.load, offsets.load, Loader(), weight.sizes[0], indices.sizes[0], offsets.sizes[0]};
  if (!is_none(node, "per_sample_weights")) bags.sample_weights = cast(ctx.tensor(node.arg("per_sample_weights")), weight.dtype).load;
  bags.padding_idx = int_arg(node, "padding_idx");
  return bags;
}

}  // namespace

Outs lower_embedding_bag(LoweringContext& ctx, const Node& node) {
  TensorRef weight = ctx.tensor(node.arg("weight"));
  DType t = weight.dtype;
  std::vector<Expr> sizes = out_sizes(ctx, node, 0);
  auto mode = static_cast<BagMode>(int_arg(node, "mode"));
  Bags bags = read_bags(ctx, node, weight);
  if (bags.sample_weights && mode != BagMode::Sum) ctx.fail("per_sample_weights needs mode 'sum'");
  double identity = mode == BagMode::Max ? -std::numeric_limits<double>::infinity() : 0.0;
  TensorRef combined = ctx.reduction(t, sizes, {bags.positions}, mode == BagMode::Max ? ReduceOp::Max : ReduceOp::Sum,
                                     [bags, identity, t](Ops& ops, const Index& idx, const Index& ridx) {
                                       Val member = bags.member(ops, idx[0], ridx[0]);
                                       return ops.where(member, bags.entry(ops, ridx[0], idx[1]), ops.constant(identity, t));
                                     });
  Outs outs = {combined, TensorRef(), TensorRef(), TensorRef()};
  if (mode == BagMode::Sum) return outs;
  Loader load_count = bag_sizes(ctx, bags, sizes[0]).load, load = combined.load;
  outs[0] = LoweringContext::pointwise(t, sizes, [load, load_count, mode, t](Ops& ops, const Index& idx) {
    Val count = ops.cast(load_count(ops, {idx[0]}), t);
    Val zero = ops.constant(0.0, t);
    Val empty = ops.binary(BinaryOp::Eq, count, zero);
    Val v = load(ops, idx);
    if (mode == BagMode::Mean) v = ops.div(v, ops.binary(BinaryOp::Maximum, count, ops.constant(1.0, t)));
    return ops.where(empty, zero, v);
  });
  return outs;
}

}  // namespace foundry::lower
