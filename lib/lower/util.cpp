#include "lower/util.h"

#include "foundry/support/error.h"

namespace foundry::lower {

DType out_dtype(const Node& node, size_t k) { return node.outputs.at(k)->type.dtype; }

std::vector<Expr> out_sizes(LoweringContext& ctx, const Node& node, size_t k) {
  return ctx.recorded_sizes(node.outputs.at(k)->type);
}

// A SymInt argument (a size computed at run time) has no static value: a lowering that reads one
// as a number cannot keep the sizes dynamic. Its size arguments come from the recorded types.
const Arg& number_arg(const Node& node, const std::string& name) {
  const Arg& a = node.arg(name);
  if (a.kind == Arg::Kind::SymInt)
    throw DynamicShapeUnsupported("argument '" + name + "' is a size known only at run time, and this lowering needs "
                                  "its value");
  return a;
}

int64_t int_arg(const Node& node, const std::string& name) {
  const Arg& a = number_arg(node, name);
  if (a.kind == Arg::Kind::Float) return static_cast<int64_t>(a.f);
  return a.i;
}
double float_arg(const Node& node, const std::string& name) { return number_arg(node, name).as_double(); }
bool bool_arg(const Node& node, const std::string& name) { return node.arg(name).i != 0; }
std::vector<int64_t> ints_arg(const Node& node, const std::string& name) {
  const Arg& a = node.arg(name);
  if (a.kind == Arg::Kind::Int) return {a.i};
  return a.ints;
}
bool is_none(const Node& node, const std::string& name) {
  return !node.has_arg(name) || node.arg(name).is_none();
}

int64_t normalize_dim(int64_t dim, int64_t rank) {
  int64_t r = rank == 0 ? 1 : rank;
  if (dim < -r || dim >= r)
    throw UserError("dimension " + std::to_string(dim) + " is out of range for rank " + std::to_string(rank));
  return dim < 0 ? dim + r : dim;
}

std::vector<Expr> broadcast_shapes(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<Expr> out(n);
  for (size_t k = 0; k < n; ++k) {
    const Expr* x = k < n - a.size() ? nullptr : &a[k - (n - a.size())];
    const Expr* y = k < n - b.size() ? nullptr : &b[k - (n - b.size())];
    if (!x) out[k] = *y;
    else if (!y) out[k] = *x;
    else if (x->is_const(1)) out[k] = *y;
    else out[k] = *x;
  }
  return out;
}

TensorRef broadcast_to(const TensorRef& ref, const std::vector<Expr>& sizes) {
  if (ref.sizes == sizes) return ref;
  size_t lead = sizes.size() - ref.sizes.size();
  std::vector<bool> broadcast(ref.sizes.size());
  for (size_t d = 0; d < ref.sizes.size(); ++d) broadcast[d] = ref.sizes[d].is_const(1) && !sizes[lead + d].is_const(1);
  return LoweringContext::pointwise(ref.dtype, sizes, Loader::remapped([lead, broadcast](const Index& idx) {
    Index src(broadcast.size());
    for (size_t d = 0; d < broadcast.size(); ++d) src[d] = broadcast[d] ? Expr(0) : idx[lead + d];
    return src;
  }, ref.load));
}

TensorRef cast(const TensorRef& ref, DType dtype) {
  if (ref.dtype == dtype) return ref;
  Loader inner = ref.load;
  return LoweringContext::pointwise(dtype, ref.sizes, [inner, dtype](Ops& ops, const Index& idx) {
    return ops.cast(inner(ops, idx), dtype);
  });
}

DType result_type(LoweringContext& ctx, const std::vector<const Arg*>& args) {
  // Three priority groups; a later group can only lift the category of the result.
  std::optional<DType> dim_result, zero_dim_result;
  int scalar_category = -1;
  bool scalar_is_float = false;
  for (const Arg* a : args) {
    if (!a || a->is_none()) continue;
    if (a->kind == Arg::Kind::Tensor) {
      const TensorType& t = a->tensor->type;
      auto& slot = t.rank() > 0 ? dim_result : zero_dim_result;
      slot = slot ? promote_types(*slot, t.dtype) : t.dtype;
    } else if (a->is_number()) {
      int cat = a->kind == Arg::Kind::Float ? 2 : a->kind == Arg::Kind::Int ? 1 : 0;
      scalar_category = std::max(scalar_category, cat);
      scalar_is_float |= cat == 2;
    }
  }
  auto lift = [](DType base, int category) {
    if (category <= dtype_category(base)) return base;
    return category == 2 ? DType::Float32 : category == 1 ? DType::Int64 : DType::Bool;
  };
  if (dim_result) {
    DType r = *dim_result;
    if (zero_dim_result && dtype_category(*zero_dim_result) > dtype_category(r)) r = *zero_dim_result;
    return lift(r, scalar_category);
  }
  if (zero_dim_result) return lift(*zero_dim_result, scalar_category);
  if (scalar_category < 0) ctx.fail("no operand to infer a result type from");
  return scalar_category == 2 ? DType::Float32 : scalar_category == 1 ? DType::Int64 : DType::Bool;
}

TensorRef map1(const TensorRef& a, DType compute, DType result, std::function<Val(Ops&, Val)> fn) {
  TensorRef x = cast(a, compute);
  Loader load = x.load;
  return LoweringContext::pointwise(result, x.sizes, [load, fn](Ops& ops, const Index& idx) {
    return fn(ops, load(ops, idx));
  });
}

TensorRef map2(const TensorRef& a, const TensorRef& b, DType compute, DType result,
               std::function<Val(Ops&, Val, Val)> fn) {
  std::vector<Expr> sizes = broadcast_shapes(a.sizes, b.sizes);
  TensorRef x = broadcast_to(cast(a, compute), sizes);
  TensorRef y = broadcast_to(cast(b, compute), sizes);
  Loader lx = x.load, ly = y.load;
  return LoweringContext::pointwise(result, sizes, [lx, ly, fn](Ops& ops, const Index& idx) {
    Val x = lx(ops, idx);  // in order: argument evaluation order is unspecified in C++
    Val y = ly(ops, idx);
    return fn(ops, x, y);
  });
}

Expr indirect_at(Ops& ops, const Loader& load, const Index& idx, const Expr& size, ir::NegativeIndex negative) {
  return ops.indirect(ops.cast(load(ops, idx), DType::Int64), size, negative);
}

Expr clamp_index(const Expr& index, const Expr& size) { return ir::min(ir::max(index, 0), size - 1); }

Val count_value(Ops& ops, const Expr& count, DType t) {
  if (count.is_const()) return ops.constant(static_cast<double>(count.const_value()), t);
  return ops.index_expr(count, t);
}

}  // namespace foundry::lower
