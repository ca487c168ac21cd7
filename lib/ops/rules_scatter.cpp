// Shape rules of the ops that index with a tensor or write into a copy of `self` (gather,
// scatter*, index_put, select_scatter, slice_scatter), with the shape relations ATen checks: their
// lowerings index `self`, `src` and `values` over the index's (or the slice's) space, so a shape
// that does not fit would make the kernel read or write outside a buffer.
#include <algorithm>

#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry::rules {

// The parts select_scatter, diagonal_scatter, as_strided_scatter and slice_scatter replace: what
// select, diagonal, as_strided and slice give (rules_shape.cpp).
std::vector<TensorType> select(const Node& node);
std::vector<TensorType> diagonal(const Node& node);
std::vector<TensorType> as_strided(const Node& node);
std::vector<TensorType> slice(const Node& node);

namespace {

using shape::format_sizes;
using shape::make_type;

// ATen treats a 0-d tensor as 1-d of size 1 in these checks (ensure_nonempty_dim/size).
int64_t nonempty_rank(const TensorType& t) { return std::max<int64_t>(t.rank(), 1); }
int64_t nonempty_size(const TensorType& t, int64_t d) { return t.rank() == 0 ? 1 : t.sizes[d]; }

void check_index_dtype(const char* op, const TensorType& index) {
  if (index.dtype != DType::Int64 && index.dtype != DType::Int32)
    throw UserError(std::string(op) + "(): Expected dtype int32/int64 for index");
}

// gather/scatter: index fits self outside `dim` (and src everywhere, when there is one).
void check_index_fits(const char* op, const TensorType& self, int64_t dim, const TensorType& index,
                      const TensorType* src) {
  if (index.numel() == 0) return;  // nothing is read or written
  if (nonempty_rank(index) != nonempty_rank(self))
    throw UserError(std::string(op) + "(): Index tensor must have the same number of dimensions as " +
                    (src ? "self" : "input") + " tensor");
  if (src && nonempty_rank(index) != nonempty_rank(*src))
    throw UserError(std::string(op) + "(): Index tensor must have the same number of dimensions as src tensor");
  for (int64_t d = 0; d < nonempty_rank(self); ++d) {
    bool fits_self = d == dim || nonempty_size(index, d) <= nonempty_size(self, d);
    bool fits_src = !src || nonempty_size(index, d) <= nonempty_size(*src, d);
    if (fits_self && fits_src) continue;
    if (!src)
      throw UserError(std::string(op) + "(): Size does not match at dimension " + std::to_string(d) +
                      " expected index " + format_sizes(index.sizes) + " to be no larger than self " +
                      format_sizes(self.sizes) + " apart from dimension " + std::to_string(dim));
    throw UserError(std::string(op) + "(): Expected index " + format_sizes(index.sizes) +
                    " to be no larger than self " + format_sizes(self.sizes) + " apart from dimension " +
                    std::to_string(dim) + " and to be no larger size than src " + format_sizes(src->sizes));
  }
}

std::vector<TensorType> scatter_like(const Node& node, const char* op, bool has_src) {
  const TensorType& self = shape::tensor(node, "self");
  const TensorType& index = shape::tensor(node, "index");
  int64_t dim = shape::normalize_dim(shape::int_arg(node, "dim"), self.rank());
  check_index_dtype(op, index);
  check_index_fits(op, self, dim, index, has_src ? &shape::tensor(node, "src") : nullptr);
  return {make_type(self.dtype, self.sizes)};
}

// src must have the shape of the part of self it replaces.
void check_src_shape(const char* op, const TensorType& src, const std::vector<int64_t>& slice) {
  if (src.sizes != slice)
    throw UserError(std::string(op) + ": expected src to have a size equal to the slice of self. src size = " +
                    format_sizes(src.sizes) + ", slice size = " + format_sizes(slice));
}

}  // namespace

std::vector<TensorType> gather(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  const TensorType& index = shape::tensor(node, "index");
  int64_t dim = shape::normalize_dim(shape::int_arg(node, "dim"), self.rank());
  check_index_dtype("gather", index);
  check_index_fits("gather", self, dim, index, nullptr);
  return {make_type(self.dtype, index.sizes)};
}

std::vector<TensorType> scatter_src(const Node& node) { return scatter_like(node, "scatter", true); }
std::vector<TensorType> scatter_value(const Node& node) { return scatter_like(node, "scatter", false); }
std::vector<TensorType> scatter_add(const Node& node) { return scatter_like(node, "scatter_add", true); }
std::vector<TensorType> scatter_reduce(const Node& node) { return scatter_like(node, "scatter_reduce", true); }

std::vector<TensorType> as_strided_scatter(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  check_src_shape("as_strided_scatter", shape::tensor(node, "src"), as_strided(node).at(0).sizes);
  return {make_type(self.dtype, self.sizes)};
}

std::vector<TensorType> diagonal_scatter(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  // The part replaced is what diagonal gives (its rule checks the dims).
  check_src_shape("diagonal_scatter", shape::tensor(node, "src"), diagonal(node).at(0).sizes);
  return {make_type(self.dtype, self.sizes)};
}

std::vector<TensorType> select_scatter(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  // The part replaced is what select gives (its rule checks dim and index).
  check_src_shape("select_scatter", shape::tensor(node, "src"), select(node).at(0).sizes);
  return {make_type(self.dtype, self.sizes)};
}

std::vector<TensorType> slice_scatter(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  check_src_shape("slice_scatter", shape::tensor(node, "src"), slice(node).at(0).sizes);
  return {make_type(self.dtype, self.sizes)};
}

}  // namespace foundry::rules
