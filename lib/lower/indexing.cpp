// Indexing and scatter: gather, index_select, embedding, advanced indexing (index.Tensor), and the
// ops that write into a copy of `self` (index_put, scatter*, select_scatter, slice_scatter).
//
// Reads through integer index tensors use ops.indirect: a negative index wraps once in advanced
// indexing (index.Tensor, index_put) and is out of range in gather, index_select, embedding and
// the scatters, as in PyTorch; one out of range fails the run (the evaluator: a user error).
// Scatters realize a fresh copy of `self` and then run a mutation node over the index space whose
// body stores into the copy, in row-major order of that space (which is the order PyTorch's CPU
// kernels apply duplicate writes in).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "foundry/ops/registry.h"
#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

using ir::BinaryOp;
using ir::StoreMode;

namespace {

using shape::product;

bool is_mask_dtype(DType t) { return t == DType::Bool || t == DType::UInt8; }

// `idx` adapted to a tensor of rank `rank` (0-d tensors act as 1-element 1-d ones and back).
Index fit(const Index& idx, size_t rank) {
  Index out(rank, Expr(0));
  for (size_t d = 0; d < rank && d < idx.size(); ++d) out[d] = idx[d];
  return out;
}

// A fresh contiguous buffer holding `self` cast to `dtype` (never `self`'s own buffer: the caller
// mutates it).
const ir::Buffer* fresh_copy(LoweringContext& ctx, const TensorRef& self, DType dtype) {
  TensorRef src = cast(self, dtype);
  return ctx.realize(LoweringContext::pointwise(dtype, self.sizes, src.load)).buffer;
}

// The smallest / largest value of a dtype as a constant (infinities for floating types).
ir::Scalar lowest_of(DType t) {
  if (is_floating(t)) return ir::Scalar::of(-std::numeric_limits<double>::infinity(), t);
  ir::Scalar s;
  s.dtype = t;
  switch (t) {
    case DType::Bool: s.i = 0; break;
    case DType::UInt8: s.i = 0; break;
    case DType::Int8: s.i = std::numeric_limits<int8_t>::min(); break;
    case DType::Int16: s.i = std::numeric_limits<int16_t>::min(); break;
    case DType::Int32: s.i = std::numeric_limits<int32_t>::min(); break;
    default: s.i = std::numeric_limits<int64_t>::min(); break;
  }
  return s;
}

ir::Scalar highest_of(DType t) {
  if (is_floating(t)) return ir::Scalar::of(std::numeric_limits<double>::infinity(), t);
  ir::Scalar s;
  s.dtype = t;
  switch (t) {
    case DType::Bool: s.i = 1; break;
    case DType::UInt8: s.i = 255; break;
    case DType::Int8: s.i = std::numeric_limits<int8_t>::max(); break;
    case DType::Int16: s.i = std::numeric_limits<int16_t>::max(); break;
    case DType::Int32: s.i = std::numeric_limits<int32_t>::max(); break;
    default: s.i = std::numeric_limits<int64_t>::max(); break;
  }
  return s;
}

// --- advanced indexing ---------------------------------------------------------------------------

// self[indices] as PyTorch's advanced indexing defines it: the index tensors (integer, one per
// indexed dim, None keeping a dim) broadcast together to `bshape`; when they are adjacent the
// broadcast dims replace the indexed dims in place, otherwise they go first.
struct AdvancedIndex {
  std::vector<Expr> self_sizes;
  std::vector<std::optional<Loader>> index;  // per self dim: the index broadcast to bshape
  std::vector<Expr> bshape;
  bool front = false;
  int64_t first = 0, last = -1;  // first and last indexed dims
  std::vector<Expr> result_sizes;

  // The self index that result index `out` reads.
  Index self_index(Ops& ops, const Index& out) const {
    size_t rank = self_sizes.size(), nb = bshape.size();
    Index bidx;
    if (front) bidx.assign(out.begin(), out.begin() + nb);
    else bidx.assign(out.begin() + first, out.begin() + first + nb);
    Index s(rank);
    size_t next = nb;  // front: the next result position of a kept dim
    for (size_t d = 0; d < rank; ++d) {
      if (index[d]) {
        s[d] = indirect_at(ops, *index[d], bidx, self_sizes[d], ir::NegativeIndex::Wraps);
      } else if (front) {
        s[d] = out[next++];
      } else {
        int64_t k = static_cast<int64_t>(d);
        s[d] = k < first ? out[d] : out[k - (last - first + 1) + static_cast<int64_t>(nb)];
      }
    }
    return s;
  }
};

// The optional index tensors of node.arg(name), padded with None to `rank`.
std::vector<std::optional<TensorRef>> index_list(LoweringContext& ctx, const Node& node, const char* name,
                                                 size_t rank) {
  const Arg& a = node.arg(name);
  if (a.kind != Arg::Kind::TensorList && a.kind != Arg::Kind::OptTensorList) ctx.fail("expected a list of index tensors");
  if (a.tensors.size() > rank)
    ctx.fail("too many indices (" + std::to_string(a.tensors.size()) + ") for a tensor of rank " + std::to_string(rank));
  std::vector<std::optional<TensorRef>> out(rank);
  for (size_t d = 0; d < a.tensors.size(); ++d)
    if (a.tensors[d]) out[d] = ctx.value(a.tensors[d]);
  return out;
}

AdvancedIndex plan_advanced_index(LoweringContext& ctx, const TensorRef& self,
                                  const std::vector<std::optional<TensorRef>>& indices) {
  AdvancedIndex plan;
  plan.self_sizes = self.sizes;
  size_t rank = self.rank();
  plan.index.resize(rank);
  bool any = false;
  for (size_t d = 0; d < rank; ++d) {
    if (!indices[d]) continue;
    if (is_mask_dtype(indices[d]->dtype))
      ctx.fail("boolean mask indices have a data-dependent result size and are not supported here");
    if (!is_integral(indices[d]->dtype)) ctx.fail("index tensors must be integer tensors");
    plan.bshape = any ? broadcast_shapes(plan.bshape, indices[d]->sizes) : indices[d]->sizes;
    if (!any) plan.first = static_cast<int64_t>(d);
    plan.last = static_cast<int64_t>(d);
    any = true;
  }
  if (!any) ctx.fail("indexing needs at least one index tensor");
  for (size_t d = 0; d < rank; ++d)
    if (indices[d]) plan.index[d] = broadcast_to(*indices[d], plan.bshape).load;
  for (int64_t d = plan.first; d <= plan.last; ++d)
    if (!indices[d]) plan.front = true;
  std::vector<Expr> kept_before, kept_after;
  for (size_t d = 0; d < rank; ++d) {
    if (indices[d]) continue;
    (static_cast<int64_t>(d) < plan.first ? kept_before : kept_after).push_back(self.sizes[d]);
  }
  if (plan.front) {
    plan.result_sizes = plan.bshape;
    plan.result_sizes.insert(plan.result_sizes.end(), kept_before.begin(), kept_before.end());
    plan.result_sizes.insert(plan.result_sizes.end(), kept_after.begin(), kept_after.end());
  } else {
    plan.result_sizes = kept_before;
    plan.result_sizes.insert(plan.result_sizes.end(), plan.bshape.begin(), plan.bshape.end());
    plan.result_sizes.insert(plan.result_sizes.end(), kept_after.begin(), kept_after.end());
  }
  return plan;
}

// Values to write into an indexed region of shape `sizes`: leading size-1 dims beyond its rank
// are dropped (as Python's x[i] = v does), then broadcast.
TensorRef strip_leading_ones(LoweringContext& ctx, TensorRef values, size_t rank) {
  if (values.rank() > rank) {
    size_t extra = values.rank() - rank;
    for (size_t d = 0; d < extra; ++d)
      if (!values.sizes[d].is_const(1)) ctx.fail("values cannot be broadcast to the indexed shape");
    Loader inner = values.load;
    std::vector<Expr> kept(values.sizes.begin() + extra, values.sizes.end());
    values = LoweringContext::pointwise(values.dtype, kept, [inner, extra](Ops& ops, const Index& idx) {
      Index full(extra, Expr(0));
      full.insert(full.end(), idx.begin(), idx.end());
      return inner(ops, full);
    });
  }
  return values;
}

TensorRef values_for(LoweringContext& ctx, const TensorRef& values, const std::vector<Expr>& sizes, DType dtype) {
  return broadcast_to(cast(strip_leading_ones(ctx, values, sizes.size()), dtype), sizes);
}

// --- scatter ---------------------------------------------------------------------------------

// A mutation over `index`'s space: target[idx with dim := index[idx]] (mode)= value(idx).
void scatter_into(LoweringContext& ctx, const ir::Buffer* target, const TensorRef& index, int64_t dim,
                  Loader value, StoreMode mode) {
  size_t rank = target->sizes.size();
  Loader load_index = index.load;
  size_t index_rank = index.rank();
  ctx.mutate(target, index.sizes, [=](Ops& ops, const Index& idx, const Index&) {
    Index pos = fit(idx, rank);
    Expr i = indirect_at(ops, load_index, fit(idx, index_rank), rank == 0 ? Expr(1) : target->sizes[dim],
                         ir::NegativeIndex::OutOfRange);
    if (rank > 0) pos[dim] = i;
    ops.store(*target, target->linear_index(pos), value(ops, idx), mode);
  });
}

// A loader of `src` over index space (src may be larger than index along every dim).
Loader src_over_index(const TensorRef& src) {
  Loader inner = src.load;
  size_t rank = src.rank();
  return [inner, rank](Ops& ops, const Index& idx) { return inner(ops, fit(idx, rank)); };
}

int64_t scatter_dim(LoweringContext& ctx, const Node& node, const TensorRef& self) {
  return normalize_dim(int_arg(node, "dim"), static_cast<int64_t>(self.rank()));
}

}  // namespace

// --- gathers -------------------------------------------------------------------------------------

Outs lower_gather(LoweringContext& ctx, const Node& node) {
  TensorRef self = ctx.tensor(node.arg("self"));
  TensorRef index = ctx.tensor(node.arg("index"));
  int64_t dim = scatter_dim(ctx, node, self);
  size_t rank = self.rank();
  Loader load_self = self.load, load_index = index.load;
  std::vector<Expr> self_sizes = self.sizes;
  size_t index_rank = index.rank();
  return {LoweringContext::pointwise(self.dtype, index.sizes, [=](Ops& ops, const Index& idx) {
    Index pos = fit(idx, rank);
    Expr i = indirect_at(ops, load_index, fit(idx, index_rank), rank == 0 ? Expr(1) : self_sizes[dim],
                         ir::NegativeIndex::OutOfRange);
    if (rank > 0) pos[dim] = i;
    return load_self(ops, pos);
  })};
}

Outs lower_index_select(LoweringContext& ctx, const Node& node) {
  TensorRef self = ctx.tensor(node.arg("self"));
  TensorRef index = ctx.tensor(node.arg("index"));
  if (index.rank() > 1) ctx.fail("index_select needs a 0-d or 1-d index");
  int64_t dim = scatter_dim(ctx, node, self);
  size_t rank = self.rank();
  Loader load_self = self.load, load_index = index.load;
  std::vector<Expr> self_sizes = self.sizes;
  size_t index_rank = index.rank();
  std::vector<Expr> sizes = out_sizes(ctx, node);
  return {LoweringContext::pointwise(self.dtype, sizes, [=](Ops& ops, const Index& idx) {
    Index at = index_rank == 0 ? Index{} : Index{rank == 0 ? Expr(0) : idx[dim]};
    Expr i = indirect_at(ops, load_index, at, rank == 0 ? Expr(1) : self_sizes[dim], ir::NegativeIndex::OutOfRange);
    Index pos = idx;
    if (rank > 0) pos[dim] = i;
    return load_self(ops, rank == 0 ? Index{} : pos);
  })};
}

Outs lower_embedding(LoweringContext& ctx, const Node& node) {
  // weight[indices]: the indices' shape followed by the embedding dim (padding_idx only affects
  // gradients).
  TensorRef weight = ctx.tensor(node.arg("weight"));
  TensorRef indices = ctx.tensor(node.arg("indices"));
  if (weight.rank() != 2) ctx.fail("embedding needs a 2-d weight");
  Loader load_w = weight.load, load_i = indices.load;
  Expr rows = weight.sizes[0];
  size_t n = indices.rank();
  std::vector<Expr> sizes = indices.sizes;
  sizes.push_back(weight.sizes[1]);
  return {LoweringContext::pointwise(weight.dtype, sizes, [=](Ops& ops, const Index& idx) {
    Index at(idx.begin(), idx.begin() + n);
    return load_w(ops, {indirect_at(ops, load_i, at, rows, ir::NegativeIndex::OutOfRange), idx[n]});
  })};
}

Outs lower_index_tensor(LoweringContext& ctx, const Node& node) {
  TensorRef self = ctx.tensor(node.arg("self"));
  AdvancedIndex plan = plan_advanced_index(ctx, self, index_list(ctx, node, "indices", self.rank()));
  if (plan.result_sizes != out_sizes(ctx, node)) ctx.fail("advanced indexing: unexpected result shape");
  Loader load_self = self.load;
  return {LoweringContext::pointwise(self.dtype, plan.result_sizes, [plan, load_self](Ops& ops, const Index& idx) {
    return load_self(ops, plan.self_index(ops, idx));
  })};
}

namespace {

// index_put with one boolean mask (over dims [d0, d0 + k)) and None elsewhere: a pointwise select
// over self's shape. Values take the mask's true positions in row-major order.
TensorRef index_put_mask(LoweringContext& ctx, const TensorRef& self, const TensorRef& mask, size_t d0,
                         const TensorRef& values_in, bool accumulate) {
  DType dtype = self.dtype;
  size_t rank = self.rank(), k = mask.rank();
  if (d0 + k > rank) ctx.fail("boolean mask has too many dims");
  for (size_t j = 0; j < k; ++j)
    if (mask.sizes[j] != self.sizes[d0 + j]) ctx.fail("boolean mask shape does not match the indexed tensor");
  // The indexed shape is self[:d0] + [nnz] + self[d0+k:]; find whether values vary along nnz.
  std::vector<Expr> indexed(self.sizes.begin(), self.sizes.begin() + d0);
  indexed.push_back(Expr(1));
  indexed.insert(indexed.end(), self.sizes.begin() + d0 + k, self.sizes.end());
  TensorRef values = strip_leading_ones(ctx, values_in, indexed.size());
  int64_t vdim = static_cast<int64_t>(d0) - static_cast<int64_t>(indexed.size() - values.rank());
  std::optional<Expr> nnz;
  if (vdim >= 0 && !values.sizes[vdim].is_const(1)) nnz = values.sizes[vdim];
  if (nnz) indexed[d0] = *nnz;
  TensorRef vals = values_for(ctx, values, indexed, dtype);
  Loader load_vals = vals.load, load_self = self.load, load_mask = mask.load;

  // With values varying along nnz, each true position reads the values at its rank among the true
  // positions: the count of true positions before it (a reduction over the flattened mask).
  Loader load_rank;
  if (nnz) {
    std::vector<Expr> msizes = mask.sizes;
    std::vector<int64_t> ms = mask.static_sizes();
    int64_t m = product(ms);
    auto unravel = [ms](Expr flat) {
      Index idx(ms.size());
      for (size_t d = ms.size(); d-- > 0;) {
        if (d == 0) { idx[d] = flat; break; }
        idx[d] = ir::mod(flat, ms[d]);
        flat = ir::floordiv(flat, ms[d]);
      }
      return idx;
    };
    TensorRef ranks = ctx.reduction(DType::Int64, msizes, {Expr(m)}, ir::ReduceOp::Sum,
                                    [ms, unravel, load_mask](Ops& ops, const Index& idx, const Index& ridx) {
                                      Expr p = 0;
                                      for (size_t d = 0; d < ms.size(); ++d) p = p * ms[d] + idx[d];
                                      Val before = ops.binary(BinaryOp::Lt, ops.index_expr(ridx[0], DType::Int64),
                                                              ops.index_expr(p, DType::Int64));
                                      Val bit = ops.cast(load_mask(ops, unravel(ridx[0])), DType::Int64);
                                      return ops.where(before, bit, ops.constant(0, DType::Int64));
                                    });
    load_rank = ranks.load;
  }
  Expr n = nnz ? *nnz : Expr(1);
  return LoweringContext::pointwise(dtype, self.sizes, [=](Ops& ops, const Index& idx) {
    Index midx(idx.begin() + d0, idx.begin() + d0 + k);
    Val on = ops.cast(load_mask(ops, midx), DType::Bool);
    Index vidx(idx.begin(), idx.begin() + d0);
    if (load_rank) {
      // Clamped so that positions the mask leaves out stay in bounds.
      Val r = ops.binary(BinaryOp::Minimum, load_rank(ops, midx), ops.index_expr(n - 1, DType::Int64));
      r = ops.binary(BinaryOp::Maximum, r, ops.constant(0, DType::Int64));
      vidx.push_back(ops.indirect(r, n, ir::NegativeIndex::OutOfRange));  // clamped above
    } else {
      vidx.push_back(Expr(0));
    }
    vidx.insert(vidx.end(), idx.begin() + d0 + k, idx.end());
    Val cur = load_self(ops, idx);
    Val v = load_vals(ops, vidx);
    if (accumulate)
      v = dtype == DType::Bool ? ops.binary(BinaryOp::LogicalOr, cur, v) : ops.add(cur, v);
    return ops.where(on, v, cur);
  });
}

}  // namespace

Outs lower_index_put(LoweringContext& ctx, const Node& node) {
  TensorRef self = ctx.tensor(node.arg("self"));
  DType dtype = out_dtype(node);
  TensorRef values = ctx.tensor(node.arg("values"), dtype);
  bool accumulate = node.has_arg("accumulate") && !node.arg("accumulate").is_none() && bool_arg(node, "accumulate");
  auto indices = index_list(ctx, node, "indices", self.rank());

  // A boolean mask: supported alone (other entries None).
  int masks = 0, defined = 0;
  size_t mask_dim = 0;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (!indices[d]) continue;
    ++defined;
    if (is_mask_dtype(indices[d]->dtype)) {
      ++masks;
      mask_dim = d;
    }
  }
  if (masks > 0) {
    if (masks != 1 || defined != 1) ctx.fail("a boolean mask mixed with other index tensors is not supported");
    return {index_put_mask(ctx, cast(self, dtype), *indices[mask_dim], mask_dim, values, accumulate)};
  }

  AdvancedIndex plan = plan_advanced_index(ctx, self, indices);
  const ir::Buffer* out = fresh_copy(ctx, self, dtype);
  Loader load_vals = values_for(ctx, values, plan.result_sizes, dtype).load;
  StoreMode mode = accumulate ? StoreMode::Add : StoreMode::Set;
  ctx.mutate(out, plan.result_sizes, [plan, load_vals, out, mode](Ops& ops, const Index& idx, const Index&) {
    Index pos = plan.self_index(ops, idx);
    ops.store(*out, out->linear_index(pos), load_vals(ops, idx), mode);
  });
  return {buffer_ref(out)};
}

// --- scatters ------------------------------------------------------------------------------------

Outs lower_scatter_src(LoweringContext& ctx, const Node& node) {
  TensorRef self = ctx.tensor(node.arg("self"));
  DType dtype = out_dtype(node);
  TensorRef index = ctx.tensor(node.arg("index"));
  int64_t dim = scatter_dim(ctx, node, self);
  const ir::Buffer* out = fresh_copy(ctx, self, dtype);
  scatter_into(ctx, out, index, dim, src_over_index(cast(ctx.tensor(node.arg("src"), dtype), dtype)), StoreMode::Set);
  return {buffer_ref(out)};
}

Outs lower_scatter_value(LoweringContext& ctx, const Node& node) {
  TensorRef self = ctx.tensor(node.arg("self"));
  DType dtype = out_dtype(node);
  TensorRef index = ctx.tensor(node.arg("index"));
  int64_t dim = scatter_dim(ctx, node, self);
  const ir::Buffer* out = fresh_copy(ctx, self, dtype);
  TensorRef value = cast(ctx.tensor(node.arg("value"), dtype), dtype);
  Loader load_value = value.load;
  scatter_into(ctx, out, index, dim, [load_value](Ops& ops, const Index&) { return load_value(ops, {}); },
               StoreMode::Set);
  return {buffer_ref(out)};
}

Outs lower_scatter_add(LoweringContext& ctx, const Node& node) {
  TensorRef self = ctx.tensor(node.arg("self"));
  DType dtype = out_dtype(node);
  TensorRef index = ctx.tensor(node.arg("index"));
  int64_t dim = scatter_dim(ctx, node, self);
  const ir::Buffer* out = fresh_copy(ctx, self, dtype);
  scatter_into(ctx, out, index, dim, src_over_index(cast(ctx.tensor(node.arg("src"), dtype), dtype)), StoreMode::Add);
  return {buffer_ref(out)};
}

Outs lower_scatter_reduce(LoweringContext& ctx, const Node& node) {
  TensorRef self = ctx.tensor(node.arg("self"));
  DType dtype = out_dtype(node);
  TensorRef index = ctx.tensor(node.arg("index"));
  int64_t dim = scatter_dim(ctx, node, self);
  Loader src = src_over_index(cast(ctx.tensor(node.arg("src"), dtype), dtype));
  std::string reduce = node.arg("reduce").s;
  bool include_self = !node.has_arg("include_self") || node.arg("include_self").is_none() || bool_arg(node, "include_self");

  StoreMode mode;
  ir::Scalar init;
  if (reduce == "sum" || reduce == "mean") {
    mode = StoreMode::Add;
    init = ir::Scalar::of(0, dtype);
  } else if (reduce == "prod") {
    mode = StoreMode::Mul;
    init = ir::Scalar::of(1, dtype);
  } else if (reduce == "amax") {
    mode = StoreMode::Max;
    init = lowest_of(dtype);
  } else if (reduce == "amin") {
    mode = StoreMode::Min;
    init = highest_of(dtype);
  } else {
    ctx.fail("unknown scatter_reduce reduction '" + reduce + "'");
  }

  const ir::Buffer* out = fresh_copy(ctx, self, dtype);
  // Without self, the positions that receive values start from the reduction's identity.
  if (!include_self)
    scatter_into(ctx, out, index, dim, [init](Ops& ops, const Index&) { return ops.constant(init); }, StoreMode::Set);
  scatter_into(ctx, out, index, dim, src, mode);
  if (reduce != "mean") return {buffer_ref(out)};

  // mean: divide by the number of contributions (self counting as one when included; positions
  // nobody wrote keep their value), floor division for integers.
  double base = include_self ? 1 : 0;
  const ir::Buffer* count =
      ctx.realize(LoweringContext::pointwise(dtype, self.sizes, [base, dtype](Ops& ops, const Index&) {
        return ops.constant(base, dtype);
      })).buffer;
  scatter_into(ctx, count, index, dim, [dtype](Ops& ops, const Index&) { return ops.constant(1, dtype); },
               StoreMode::Add);
  TensorRef sum = buffer_ref(out), counts = buffer_ref(count);
  Loader ls = sum.load, lc = counts.load;
  bool fl = is_floating(dtype);
  return {LoweringContext::pointwise(dtype, self.sizes, [=](Ops& ops, const Index& idx) {
    Val c = lc(ops, idx);
    Val zero = ops.constant(0, dtype);
    c = ops.where(ops.binary(BinaryOp::Eq, c, zero), ops.constant(1, dtype), c);
    Val s = ls(ops, idx);
    return fl ? ops.div(s, c) : ops.binary(BinaryOp::FloorDiv, s, c);
  })};
}

Outs lower_select_scatter(LoweringContext& ctx, const Node& node) {
  // out = self, with out.select(dim, index) = src.
  TensorRef self = ctx.tensor(node.arg("self"));
  DType dtype = out_dtype(node);
  TensorRef src = cast(ctx.tensor(node.arg("src"), dtype), dtype);
  int64_t rank = static_cast<int64_t>(self.rank());
  int64_t dim = normalize_dim(int_arg(node, "dim"), rank);
  int64_t index = int_arg(node, "index");
  // Only the selected dim's size matters (and only to check the index): the others may be dynamic.
  int64_t n = rank > 0 && (index < 0 || self.sizes[dim].is_const()) ? self.static_size(dim) : index + 1;
  if (rank > 0 && index < 0) index += n;
  if (rank > 0 && (index < 0 || index >= n)) ctx.fail("select_scatter index out of range");
  TensorRef base = cast(self, dtype);
  Loader ls = base.load, lsrc = src.load;
  size_t src_rank = src.rank();
  return {LoweringContext::pointwise(dtype, self.sizes, [=](Ops& ops, const Index& idx) {
    if (rank == 0) return lsrc(ops, {});
    Index sidx = idx;
    sidx.erase(sidx.begin() + dim);
    Val hit = ops.binary(BinaryOp::Eq, ops.index_expr(idx[dim], DType::Int64), ops.constant(index, DType::Int64));
    return ops.where(hit, lsrc(ops, fit(sidx, src_rank)), ls(ops, idx));
  })};
}

Outs lower_diagonal_scatter(LoweringContext& ctx, const Node& node) {
  // out = self, with out.diagonal(offset, dim1, dim2) = src, whose last dim runs along the diagonal.
  TensorRef self = ctx.tensor(node.arg("self"));
  DType dtype = out_dtype(node);
  TensorRef src = cast(ctx.tensor(node.arg("src"), dtype), dtype);
  int64_t rank = static_cast<int64_t>(self.rank());
  int64_t offset = int_arg(node, "offset");
  int64_t d1 = normalize_dim(int_arg(node, "dim1"), rank), d2 = normalize_dim(int_arg(node, "dim2"), rank);
  TensorRef base = cast(self, dtype);
  if (src.sizes.back().is_const(0)) return {base};
  Expr length = src.sizes.back();
  Loader ls = base.load, lsrc = src.load;
  return {LoweringContext::pointwise(dtype, self.sizes, [=](Ops& ops, const Index& idx) {
    Val gap = ops.index_expr(idx[d2] - idx[d1], DType::Int64);
    Val hit = ops.binary(BinaryOp::Eq, gap, ops.constant(offset, DType::Int64));
    Index sidx;
    for (int64_t d = 0; d < rank; ++d)
      if (d != d1 && d != d2) sidx.push_back(idx[d]);
    sidx.push_back(clamp_index(offset >= 0 ? idx[d1] : idx[d2], length));  // masked off the diagonal
    return ops.where(hit, lsrc(ops, sidx), ls(ops, idx));
  })};
}

Outs lower_slice_scatter(LoweringContext& ctx, const Node& node) {
  // out = self, with out.slice(dim, start, end, step) = src.
  TensorRef self = ctx.tensor(node.arg("self"));
  DType dtype = out_dtype(node);
  TensorRef src = cast(ctx.tensor(node.arg("src"), dtype), dtype);
  int64_t rank = static_cast<int64_t>(self.rank());
  int64_t dim = normalize_dim(node.has_arg("dim") ? int_arg(node, "dim") : 0, rank);
  int64_t n = self.static_size(dim);  // the other dims may be dynamic
  int64_t start = is_none(node, "start") ? 0 : int_arg(node, "start");
  int64_t end = is_none(node, "end") ? n : int_arg(node, "end");
  int64_t step = is_none(node, "step") ? 1 : int_arg(node, "step");
  if (step <= 0) ctx.fail("slice_scatter step must be positive");
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  int64_t len = (end - start + step - 1) / step;
  TensorRef base = cast(self, dtype);
  if (len == 0) return {base};
  if (static_cast<int64_t>(src.rank()) != rank) ctx.fail("slice_scatter: src rank differs from self");
  Loader ls = base.load, lsrc = src.load;
  return {LoweringContext::pointwise(dtype, self.sizes, [=](Ops& ops, const Index& idx) {
    Expr rel = idx[dim] - start;
    Val pos = ops.index_expr(rel, DType::Int64);
    Val in = ops.binary(BinaryOp::LogicalAnd,
                        ops.binary(BinaryOp::Ge, pos, ops.constant(0, DType::Int64)),
                        ops.binary(BinaryOp::Lt, pos, ops.constant((len - 1) * step + 1, DType::Int64)));
    if (step != 1)
      in = ops.binary(BinaryOp::LogicalAnd, in,
                      ops.binary(BinaryOp::Eq, ops.index_expr(ir::mod(rel, step), DType::Int64),
                                 ops.constant(0, DType::Int64)));
    Index sidx = idx;
    sidx[dim] = clamp_index(step == 1 ? rel : ir::floordiv(rel, step), Expr(len));
    return ops.where(in, lsrc(ops, sidx), ls(ops, idx));
  })};
}

}  // namespace foundry::lower
