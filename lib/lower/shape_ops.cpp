// Concatenation, padding and repetition: pointwise index remaps whose loads are clamped into range
// (a where() picks the piece or the padding value, and masked-off loads must still be in bounds).
#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

using ir::BinaryOp;

namespace {

Val index_val(Ops& ops, const Expr& e) { return ops.index_expr(e, DType::Int64); }
Val int_const(Ops& ops, int64_t v) { return ops.constant(static_cast<double>(v), DType::Int64); }

Val both(Ops& ops, std::optional<Val> a, Val b) { return a ? ops.binary(BinaryOp::LogicalAnd, *a, b) : b; }

}  // namespace

Outs lower_cat(LoweringContext& ctx, const Node& node) {
  const Arg& list = node.arg("tensors");
  DType dtype = out_dtype(node);
  std::vector<Expr> sizes = out_sizes(ctx, node);
  int64_t rank = static_cast<int64_t>(sizes.size());
  int64_t dim = normalize_dim(node.has_arg("dim") ? int_arg(node, "dim") : 0, rank);

  // The pieces that contribute: legacy empty 1-d tensors (shape [0]) are skipped whatever the
  // rank of the others, and so is any piece empty along `dim`.
  // Offsets and sizes along `dim` may be dynamic: the piece bounds are index expressions.
  struct Piece {
    Loader load;
    Expr offset, size;
  };
  std::vector<Piece> pieces;
  Expr offset = 0;
  for (const Value* v : list.tensors) {
    if (!v) ctx.fail("cat of a missing tensor");
    TensorRef t = cast(ctx.value(v), dtype);
    if (t.rank() == 1 && t.sizes[0].is_const(0) && rank != 1) continue;
    if (static_cast<int64_t>(t.rank()) != rank) ctx.fail("cat of tensors of different ranks");
    Expr n = t.sizes[dim];
    if (n.is_const(0)) continue;
    pieces.push_back({t.load, offset, n});
    offset = offset + n;
  }
  if (!(ir::simplify(offset, {}) == sizes[dim])) ctx.fail("cat: the pieces do not add up to the recorded size");
  if (pieces.empty())
    return {LoweringContext::pointwise(dtype, sizes, [dtype](Ops& ops, const Index&) { return ops.constant(0, dtype); })};
  if (pieces.size() == 1) return {LoweringContext::pointwise(dtype, sizes, pieces[0].load)};

  return {LoweringContext::pointwise(dtype, sizes, [pieces, dim](Ops& ops, const Index& idx) {
    // Nested where from the last piece outwards: piece k when idx[dim] < its end.
    size_t last = pieces.size() - 1;
    auto piece_index = [&](size_t k) {
      Index s = idx;
      Expr rel = idx[dim] - pieces[k].offset;
      if (k > 0) rel = ir::max(rel, 0);
      if (k < last) rel = ir::min(rel, pieces[k].size - 1);
      s[dim] = rel;
      return s;
    };
    Val result = pieces[last].load(ops, piece_index(last));
    for (size_t k = last; k-- > 0;) {
      Val here = ops.binary(BinaryOp::Lt, index_val(ops, idx[dim]), index_val(ops, pieces[k].offset + pieces[k].size));
      result = ops.where(here, pieces[k].load(ops, piece_index(k)), result);
    }
    return result;
  })};
}

Outs lower_constant_pad_nd(LoweringContext& ctx, const Node& node) {
  // pad = (left, right) pairs from the last dim backwards; negative pads crop.
  TensorRef self = ctx.tensor(node.arg("self"));
  DType dtype = out_dtype(node);
  self = cast(self, dtype);
  std::vector<int64_t> pad = ints_arg(node, "pad");
  size_t rank = self.rank();
  if (pad.size() % 2 != 0 || pad.size() / 2 > rank) ctx.fail("constant_pad_nd: bad padding list");
  std::vector<Expr> in = self.sizes;  // dynamic dims are fine: the pad bounds are index expressions
  std::vector<int64_t> left(rank, 0), right(rank, 0);
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    left[rank - 1 - k] = pad[2 * k];
    right[rank - 1 - k] = pad[2 * k + 1];
  }
  std::vector<Expr> sizes = out_sizes(ctx, node);
  for (size_t d = 0; d < rank; ++d)
    if (!(sizes[d] == ir::simplify(in[d] + left[d] + right[d], {}))) ctx.fail("constant_pad_nd: unexpected output shape");
  ir::Scalar value = ir::Scalar::of(node.has_arg("value") && !node.arg("value").is_none() ? float_arg(node, "value") : 0.0, dtype);
  Loader load = self.load;
  return {LoweringContext::pointwise(dtype, sizes, [=](Ops& ops, const Index& idx) {
    std::optional<Val> inside;
    Index s(rank);
    for (size_t d = 0; d < rank; ++d) {
      Expr src = idx[d] - left[d];
      // A position reads the input when 0 <= src < in[d]; only the padded sides can fail that.
      if (left[d] > 0) inside = both(ops, inside, ops.binary(BinaryOp::Ge, index_val(ops, src), int_const(ops, 0)));
      if (right[d] > 0) inside = both(ops, inside, ops.binary(BinaryOp::Lt, index_val(ops, src), index_val(ops, in[d])));
      if (left[d] > 0) src = ir::max(src, 0);
      if (right[d] > 0) src = ir::min(src, in[d] - 1);
      s[d] = src;
    }
    Val pad_value = ops.constant(value);
    if (!inside) return load(ops, s);
    // Any empty input dim leaves the output all padding (and nothing may be loaded).
    for (const Expr& n : in)
      if (n.is_const(0)) return pad_value;
    return ops.where(*inside, load(ops, s), pad_value);
  })};
}

Outs lower_repeat(LoweringContext& ctx, const Node& node) {
  TensorRef self = ctx.tensor(node.arg("self"));
  std::vector<int64_t> repeats = ints_arg(node, "repeats");
  size_t rank = self.rank();
  if (repeats.size() < rank) ctx.fail("repeat: fewer repeats than dimensions");
  size_t lead = repeats.size() - rank;
  std::vector<Expr> in = self.sizes;
  std::vector<Expr> sizes = out_sizes(ctx, node);
  Loader load = self.load;
  return {LoweringContext::pointwise(self.dtype, sizes, [=](Ops& ops, const Index& idx) {
    Index s(rank);
    for (size_t d = 0; d < rank; ++d) s[d] = repeats[lead + d] == 1 ? idx[lead + d] : ir::mod(idx[lead + d], in[d]);
    return load(ops, s);
  })};
}

}  // namespace foundry::lower
