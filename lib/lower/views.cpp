// Views: index remaps over their source, no data movement. (flip is a copy in ATen but an index
// remap here all the same.)
#include <algorithm>
#include <optional>

#include "foundry/ops/registry.h"
#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

namespace {

// A view whose source index is computed from the output index.
TensorRef remap(const TensorRef& src, std::vector<Expr> sizes, Loader::IndexMap to_source) {
  return LoweringContext::pointwise(src.dtype, std::move(sizes), Loader::remapped(std::move(to_source), src.load));
}

// as_strided reads the storage directly: the last element it reaches must be inside, for every
// size the storage may have (a symbolic one is at least 1; when that is not enough the program is
// compiled for the recorded sizes, where the check is exact).
void check_storage_reach(LoweringContext& ctx, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                         int64_t offset, const Expr& storage) {
  if (sizes.size() != strides.size()) ctx.fail("as_strided: size and stride must have the same length");
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return;  // reaches nothing
  int64_t last = offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0 || offset < 0) ctx.fail("as_strided: negative size, stride or offset");
    int64_t step = 0;
    if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &step) || __builtin_add_overflow(last, step, &last))
      ctx.fail("as_strided: sizes " + shape::format_sizes(sizes) + " and strides " + shape::format_sizes(strides) +
               " reach past any storage (64-bit overflow)");
  }
  std::optional<int64_t> spare = ir::lower_bound(storage - 1 - Expr(last), {});
  if (spare && *spare >= 0) return;
  std::string text = "as_strided: sizes " + shape::format_sizes(sizes) + ", strides " + shape::format_sizes(strides) +
                     " and storage offset " + std::to_string(offset) + " reach element " + std::to_string(last) +
                     " of a storage of " + ir::to_string(storage) + " elements";
  if (!storage.is_const()) throw DynamicShapeUnsupported(text + ", more than its smallest size holds");
  ctx.fail(text);
}

}  // namespace

Outs lower_view(LoweringContext& ctx, const Node& node) {
  // view/reshape: same row-major order, new shape (the recorded output sizes resolve -1).
  TensorRef src = ctx.tensor(node.arg("self"));
  std::vector<Expr> sizes = out_sizes(ctx, node);
  std::vector<Expr> src_sizes = src.sizes;
  return {remap(src, sizes, [sizes, src_sizes](const Index& idx) { return ir::unravel_index(ir::ravel_index(idx, sizes), src_sizes); })};
}

Outs lower_permute(LoweringContext& ctx, const Node& node) {
  TensorRef src = ctx.tensor(node.arg("self"));
  std::vector<int64_t> dims = ints_arg(node, "dims");
  int64_t rank = static_cast<int64_t>(src.rank());
  for (auto& d : dims) d = normalize_dim(d, rank);
  std::vector<Expr> sizes;
  for (int64_t d : dims) sizes.push_back(src.sizes[d]);
  return {remap(src, sizes, [dims](const Index& idx) {
    Index s(dims.size());
    for (size_t k = 0; k < dims.size(); ++k) s[dims[k]] = idx[k];
    return s;
  })};
}

Outs lower_expand(LoweringContext& ctx, const Node& node) {
  return {broadcast_to(ctx.tensor(node.arg("self")), out_sizes(ctx, node))};
}

Outs lower_unsqueeze(LoweringContext& ctx, const Node& node) {
  TensorRef src = ctx.tensor(node.arg("self"));
  int64_t dim = normalize_dim(int_arg(node, "dim"), static_cast<int64_t>(src.rank()) + 1);
  std::vector<Expr> sizes = src.sizes;
  sizes.insert(sizes.begin() + dim, Expr(1));
  return {remap(src, sizes, [dim](const Index& idx) {
    Index s = idx;
    s.erase(s.begin() + dim);
    return s;
  })};
}

Outs lower_squeeze(LoweringContext& ctx, const Node& node) {
  // Only size-1 dims among those named are removed (the others stay, as in ATen).
  TensorRef src = ctx.tensor(node.arg("self"));
  int64_t rank = static_cast<int64_t>(src.rank());
  std::vector<int64_t> dims = node.arg("dim").kind == Arg::Kind::Int ? std::vector<int64_t>{node.arg("dim").i}
                                                                     : ints_arg(node, "dim");
  std::vector<bool> drop(rank, false);
  for (int64_t d : dims) {
    if (rank == 0) continue;
    int64_t n = normalize_dim(d, rank);
    drop[n] = src.sizes[n].is_const(1);
  }
  std::vector<Expr> sizes;
  for (int64_t d = 0; d < rank; ++d)
    if (!drop[d]) sizes.push_back(src.sizes[d]);
  return {remap(src, sizes, [drop](const Index& idx) {
    Index s;
    size_t k = 0;
    for (bool dropped : drop) s.push_back(dropped ? Expr(0) : idx[k++]);
    return s;
  })};
}

Outs lower_select(LoweringContext& ctx, const Node& node) {
  TensorRef src = ctx.tensor(node.arg("self"));
  int64_t dim = normalize_dim(int_arg(node, "dim"), static_cast<int64_t>(src.rank()));
  int64_t index = int_arg(node, "index");
  const Expr& n = src.sizes[dim];
  // On a dynamic dim a negative index counts from its run-time end; torch.export checked the
  // index against the size's range.
  Expr at = index < 0 ? n + index : Expr(index);
  if (n.is_const() && (index < -n.const_value() || index >= n.const_value())) ctx.fail("select index out of range");
  std::vector<Expr> sizes = src.sizes;
  sizes.erase(sizes.begin() + dim);
  return {remap(src, sizes, [dim, at](const Index& idx) {
    Index s = idx;
    s.insert(s.begin() + dim, at);
    return s;
  })};
}

Outs lower_slice(LoweringContext& ctx, const Node& node) {
  TensorRef src = ctx.tensor(node.arg("self"));
  int64_t dim = normalize_dim(node.has_arg("dim") ? int_arg(node, "dim") : 0, static_cast<int64_t>(src.rank()));
  const Expr& n = src.sizes[dim];
  int64_t start = is_none(node, "start") ? 0 : int_arg(node, "start");
  int64_t step = is_none(node, "step") ? 1 : int_arg(node, "step");
  // ATen clamps the start into [0, n]; on a dynamic dim that is min/max of index expressions.
  Expr first;
  if (n.is_const()) {
    int64_t c = start < 0 ? start + n.const_value() : start;
    first = Expr(std::clamp<int64_t>(c, 0, n.const_value()));
  } else {
    first = start < 0 ? ir::max(n + start, 0) : ir::min(Expr(start), n);
  }
  std::vector<Expr> sizes = out_sizes(ctx, node);
  return {remap(src, sizes, [dim, first, step](const Index& idx) {
    Index s = idx;
    s[dim] = idx[dim] * step + first;
    return s;
  })};
}

Outs lower_as_strided(LoweringContext& ctx, const Node& node) {
  // as_strided views the storage: realize the source contiguously and index into it directly.
  TensorRef src = ctx.realize(ctx.tensor(node.arg("self")));
  std::vector<int64_t> stride = ints_arg(node, "stride");
  int64_t offset = is_none(node, "storage_offset") ? 0 : int_arg(node, "storage_offset");
  const ir::Buffer* buf = src.buffer;
  check_storage_reach(ctx, ints_arg(node, "size"), stride, offset, buf->numel());
  TensorRef out;
  out.dtype = src.dtype;
  out.sizes = out_sizes(ctx, node);
  out.load = [buf, stride, offset](Ops& ops, const Index& idx) {
    Expr pos = buf->offset + offset;
    for (size_t d = 0; d < idx.size(); ++d) pos = pos + idx[d] * stride[d];
    return ops.load(*buf, pos);
  };
  return {out};
}

Outs lower_diagonal(LoweringContext& ctx, const Node& node) {
  // The diagonal of (dim1, dim2) becomes the last dim; the others keep their order.
  TensorRef src = ctx.tensor(node.arg("self"));
  int64_t rank = static_cast<int64_t>(src.rank());
  int64_t offset = int_arg(node, "offset");
  int64_t d1 = normalize_dim(int_arg(node, "dim1"), rank), d2 = normalize_dim(int_arg(node, "dim2"), rank);
  return {remap(src, out_sizes(ctx, node), [rank, offset, d1, d2](const Index& idx) {
    Index s(rank);
    size_t k = 0;
    for (int64_t d = 0; d < rank; ++d)
      if (d != d1 && d != d2) s[d] = idx[k++];
    Expr diag = idx.back();
    s[d1] = offset >= 0 ? diag : diag - offset;
    s[d2] = offset >= 0 ? diag + offset : diag;
    return s;
  })};
}

Outs lower_unfold(LoweringContext& ctx, const Node& node) {
  // unfold(dimension, size, step): windows along `dimension`, the window position as a new last dim.
  TensorRef src = ctx.tensor(node.arg("self"));
  int64_t dim = normalize_dim(int_arg(node, "dimension"), static_cast<int64_t>(src.rank()));
  int64_t step = int_arg(node, "step");
  size_t rank = src.rank();
  return {remap(src, out_sizes(ctx, node), [dim, step, rank](const Index& idx) {
    Index s(idx.begin(), idx.begin() + std::max<size_t>(rank, 1));
    if (rank == 0) return Index{};
    s[dim] = idx[dim] * step + idx.back();
    return s;
  })};
}

Outs lower_flip(LoweringContext& ctx, const Node& node) {
  TensorRef src = ctx.tensor(node.arg("self"));
  int64_t rank = static_cast<int64_t>(src.rank());
  std::vector<bool> flipped(rank, false);
  for (int64_t d : ints_arg(node, "dims")) flipped[normalize_dim(d, rank)] = true;
  std::vector<Expr> sizes = src.sizes;
  return {remap(src, sizes, [flipped, sizes](const Index& idx) {
    Index s = idx;
    for (size_t d = 0; d < s.size(); ++d)
      if (flipped[d]) s[d] = sizes[d] - 1 - idx[d];
    return s;
  })};
}

Outs lower_split_with_sizes(LoweringContext& ctx, const Node& node) {
  TensorRef src = ctx.tensor(node.arg("self"));
  int64_t dim = normalize_dim(int_arg(node, "dim"), static_cast<int64_t>(src.rank()));
  Outs outs;
  int64_t start = 0;
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    std::vector<Expr> sizes = out_sizes(ctx, node, k);
    outs.push_back(remap(src, sizes, [dim, start](const Index& idx) {
      Index s = idx;
      s[dim] = idx[dim] + start;
      return s;
    }));
    start += node.outputs[k]->type.sizes[dim];
  }
  return outs;
}

}  // namespace foundry::lower
