// Shape rules of reductions, scans and softmax.
#include <algorithm>

#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry::rules {
namespace {

using shape::make_type;

// Which dims a reduction reduces: `dim` absent, None or [] means all of them.
std::vector<bool> reduced_dims(const Node& node, int64_t rank) {
  std::vector<bool> reduced(rank, false);
  std::vector<int64_t> dims;
  if (shape::has_arg(node, "dim") && !shape::arg(node, "dim").is_none()) dims = shape::ints_arg(node, "dim");
  if (dims.empty()) return std::vector<bool>(rank, true);
  for (int64_t d : dims) {
    int64_t dim = shape::normalize_dim(d, rank);
    if (rank == 0) continue;  // a 0-d tensor reduces over dim 0/-1 to itself
    if (reduced[dim]) throw UserError("dim " + std::to_string(dim) + " appears multiple times in the list of dims");
    reduced[dim] = true;
  }
  return reduced;
}

bool keepdim(const Node& node) { return shape::has_arg(node, "keepdim") && shape::bool_arg(node, "keepdim"); }

std::vector<int64_t> reduced_sizes(const Node& node, const TensorType& self) {
  std::vector<bool> reduced = reduced_dims(node, self.rank());
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < self.rank(); ++d) {
    if (!reduced[d])
      sizes.push_back(self.sizes[d]);
    else if (keepdim(node))
      sizes.push_back(1);
  }
  return sizes;
}

// `dtype` if given; otherwise integers and bool widen to int64 (sum, prod, cumsum).
DType accumulate_dtype(const Node& node, DType input) {
  if (auto dtype = shape::dtype_arg(node, "dtype")) return *dtype;
  return is_floating(input) ? input : DType::Int64;
}

}  // namespace

std::vector<TensorType> reduce_sum(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  return {make_type(accumulate_dtype(node, self.dtype), reduced_sizes(node, self))};
}

// mean and linalg_vector_norm: floating only, `dtype` if given.
std::vector<TensorType> reduce_mean(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  DType dtype = shape::dtype_arg(node, "dtype").value_or(self.dtype);
  if (!is_floating(dtype))
    throw UserError(short_op_name(node.target) + " needs a floating input or dtype, got " + std::string(dtype_name(dtype)));
  return {make_type(dtype, reduced_sizes(node, self))};
}

std::vector<TensorType> reduce_same(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  return {make_type(self.dtype, reduced_sizes(node, self))};
}

// any() returns bool, except that uint8 inputs keep uint8 (a legacy ATen rule).
std::vector<TensorType> reduce_any(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  DType dtype = self.dtype == DType::UInt8 ? DType::UInt8 : DType::Bool;
  return {make_type(dtype, reduced_sizes(node, self))};
}

std::vector<TensorType> reduce_arg(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  return {make_type(DType::Int64, reduced_sizes(node, self))};
}

std::vector<TensorType> reduce_with_indices(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  std::vector<int64_t> sizes = reduced_sizes(node, self);
  return {make_type(self.dtype, sizes), make_type(DType::Int64, sizes)};
}

// var and var_mean: floating only; var_mean returns (var, mean) of the same shape.
std::vector<TensorType> variance(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (!is_floating(self.dtype))
    throw UserError("var needs a floating input, got " + std::string(dtype_name(self.dtype)));
  TensorType out = make_type(self.dtype, reduced_sizes(node, self));
  if (node.op && node.op->schema.returns.size() == 2) return {out, out};
  return {out};
}

std::vector<TensorType> cumulative(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  shape::normalize_dim(shape::int_arg(node, "dim"), self.rank());
  return {make_type(accumulate_dtype(node, self.dtype), self.sizes)};
}

// sort, sort.stable: (values, int64 indices), both of the input's shape.
std::vector<TensorType> sort(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  shape::normalize_dim(shape::int_arg(node, "dim"), self.rank());
  return {make_type(self.dtype, self.sizes), make_type(DType::Int64, self.sizes)};
}

// topk: as sort, with `dim` cut to k (0 <= k <= its size; a 0-d tensor counts as one element).
std::vector<TensorType> topk(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  int64_t dim = shape::normalize_dim(shape::int_arg(node, "dim"), self.rank());
  int64_t k = shape::int_arg(node, "k");
  std::vector<int64_t> sizes = self.sizes;
  int64_t available = self.rank() == 0 ? 1 : sizes[dim];
  if (k < 0 || k > available)
    throw UserError("topk: k " + std::to_string(k) + " is out of range for a dim of size " + std::to_string(available));
  if (self.rank() > 0) sizes[dim] = k;
  return {make_type(self.dtype, sizes), make_type(DType::Int64, sizes)};
}

// searchsorted and bucketize: a position (int64, or int32 with out_int32) per value.
std::vector<TensorType> searchsorted(const Node& node) {
  const TensorType& values = shape::tensor(node, "self");
  const TensorType& sorted = shape::tensor(node, shape::has_arg(node, "boundaries") ? "boundaries" : "sorted_sequence");
  if (sorted.rank() == 0) throw UserError("searchsorted: the sorted sequence must have at least one dim");
  if (sorted.rank() > 1 && (values.rank() != sorted.rank() ||
                            !std::equal(sorted.sizes.begin(), sorted.sizes.end() - 1, values.sizes.begin())))
    throw UserError("searchsorted: the sorted sequence and the values must agree in all dims but the last");
  return {make_type(shape::bool_arg(node, "out_int32") ? DType::Int32 : DType::Int64, values.sizes)};
}

// histc: `bins` counts in self's floating dtype.
std::vector<TensorType> histc(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (!is_floating(self.dtype)) throw UserError("histc needs a floating input, got " + std::string(dtype_name(self.dtype)));
  const int64_t bins = shape::int_arg(node, "bins");
  if (bins <= 0) throw UserError("histc: bins must be > 0, but got " + std::to_string(bins));
  return {make_type(self.dtype, {bins})};
}

// dist(self, other, p): a 0-d norm of the broadcast difference, in the promoted floating type.
std::vector<TensorType> dist(const Node& node) {
  const DType t = shape::result_type({&shape::arg(node, "self"), &shape::arg(node, "other")});
  if (!is_floating(t)) throw UserError("dist needs floating inputs, got " + std::string(dtype_name(t)));
  shape::broadcast_shapes(shape::tensor(node, "self").sizes, shape::tensor(node, "other").sizes);
  return {make_type(t, {})};
}

// _softmax/_log_softmax (half_to_float: a half input gives float32), softmax.int (dtype) and
// logcumsumexp.
std::vector<TensorType> softmax(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  shape::normalize_dim(shape::int_arg(node, "dim"), self.rank());
  DType dtype = self.dtype;
  if (shape::has_arg(node, "dtype")) dtype = shape::dtype_arg(node, "dtype").value_or(dtype);
  if (shape::has_arg(node, "half_to_float") && shape::bool_arg(node, "half_to_float")) dtype = DType::Float32;
  if (!is_floating(dtype))
    throw UserError(short_op_name(node.target) + " needs a floating input, got " + std::string(dtype_name(dtype)));
  return {make_type(dtype, self.sizes)};
}

}  // namespace foundry::rules
