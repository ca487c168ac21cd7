// Shared helpers of the lowering functions: argument access, broadcasting, type promotion.
#pragma once
#include <string>
#include <vector>

#include "foundry/lower/lowering.h"

namespace foundry::lower {

// The node's k-th output dtype and sizes as recorded (and verified by the op's shape rule); sizes
// are symbolic where the archive's are (see LoweringContext::recorded_sizes).
DType out_dtype(const Node& node, size_t k = 0);
std::vector<Expr> out_sizes(LoweringContext& ctx, const Node& node, size_t k = 0);

int64_t int_arg(const Node& node, const std::string& name);
double float_arg(const Node& node, const std::string& name);
bool bool_arg(const Node& node, const std::string& name);
std::vector<int64_t> ints_arg(const Node& node, const std::string& name);
bool is_none(const Node& node, const std::string& name);

// Wraps a possibly negative dim into [0, rank) (rank 0 accepts -1 and 0, as ATen does).
int64_t normalize_dim(int64_t dim, int64_t rank);

std::vector<Expr> broadcast_shapes(const std::vector<Expr>& a, const std::vector<Expr>& b);
// Expands `ref` to `sizes` (leading dims added, size-1 dims broadcast), as an index remap.
TensorRef broadcast_to(const TensorRef& ref, const std::vector<Expr>& sizes);
TensorRef cast(const TensorRef& ref, DType dtype);

// ATen's result_type over the given arguments: tensors of dim > 0 first, then 0-d tensors, then
// wrapped numbers, each later group only raising the result's category (bool < int < float).
DType result_type(LoweringContext& ctx, const std::vector<const Arg*>& args);

// Elementwise maps with broadcasting; operands are cast to `compute` before `fn` runs, and fn's
// result has dtype `result`.
TensorRef map1(const TensorRef& a, DType compute, DType result, std::function<Val(Ops&, Val)> fn);
TensorRef map2(const TensorRef& a, const TensorRef& b, DType compute, DType result,
               std::function<Val(Ops&, Val, Val)> fn);

// An element count (a reduction's length) as a value of type t: a constant when it is known.
Val count_value(Ops& ops, const Expr& count, DType t);

// An integer index value loaded by `load` at `idx`, as an index symbol into a dim of `size`.
Expr indirect_at(Ops& ops, const Loader& load, const Index& idx, const Expr& size, ir::NegativeIndex negative);

// An index clamped into [0, size - 1] so that masked-off loads stay in bounds.
Expr clamp_index(const Expr& index, const Expr& size);

}  // namespace foundry::lower
