// Shape rules of tensor factories, conversions, symbolic sizes and assertions.
#include <cmath>

#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry::rules {
namespace {

using shape::make_type;

// The dtype a factory infers from a Python number: float -> the default (float32).
DType dtype_of_number(const Arg& value) {
  switch (value.kind) {
    case Arg::Kind::Bool: return DType::Bool;
    case Arg::Kind::Int:
    case Arg::Kind::SymInt: return DType::Int64;
    default: return DType::Float32;
  }
}

std::vector<int64_t> checked_sizes(const Node& node) {
  std::vector<int64_t> sizes = shape::ints_arg(node, "size");
  for (int64_t s : sizes)
    if (s < 0) throw UserError("negative size in " + shape::format_sizes(sizes));
  return sizes;
}

// ATen computes the length in the result's type: integer arange truncates its bounds first.
int64_t arange_length(double start, double end, double step, DType dtype) {
  if (!is_floating(dtype)) {
    int64_t s = static_cast<int64_t>(start), e = static_cast<int64_t>(end), st = static_cast<int64_t>(step);
    if (st == 0) throw UserError("arange: step must be nonzero");
    int64_t sign = st > 0 ? 1 : -1;
    if ((e - s) * sign < 0) throw UserError("arange: upper bound and lower bound inconsistent with step sign");
    return (e - s + st - sign) / st;
  }
  if (step == 0) throw UserError("arange: step must be nonzero");
  double length = std::ceil((end - start) / step);
  if (!std::isfinite(length) || length < 0)
    throw UserError("arange: upper bound and lower bound inconsistent with step sign");
  return static_cast<int64_t>(length);
}

}  // namespace

std::vector<TensorType> full(const Node& node) {
  DType dtype = shape::dtype_arg(node, "dtype").value_or(dtype_of_number(shape::arg(node, "fill_value")));
  return {make_type(dtype, checked_sizes(node))};
}

// full_like and _to_copy: self's sizes, `dtype` if given.
std::vector<TensorType> like(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  return {make_type(shape::dtype_arg(node, "dtype").value_or(self.dtype), self.sizes)};
}

// new_zeros, new_ones, new_full: `size`, in self's dtype unless `dtype` says otherwise.
std::vector<TensorType> new_sized(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  return {make_type(shape::dtype_arg(node, "dtype").value_or(self.dtype), checked_sizes(node))};
}

// scalar_tensor always defaults to float32, even for an int value.
std::vector<TensorType> scalar_tensor(const Node& node) {
  return {make_type(shape::dtype_arg(node, "dtype").value_or(DType::Float32), {})};
}

// Without dtype: int64 when start, end and step are all ints, else float32. arange(end) and
// arange.start(start, end) have no step (1) and arange(end) no start (0).
std::vector<TensorType> arange(const Node& node) {
  DType inferred = DType::Int64;
  for (const char* name : {"start", "end", "step"})
    if (shape::has_arg(node, name) && shape::arg(node, name).kind == Arg::Kind::Float) inferred = DType::Float32;
  DType dtype = shape::dtype_arg(node, "dtype").value_or(inferred);
  auto number_or = [&](const char* name, double absent) {
    return shape::has_arg(node, name) ? shape::number_arg(node, name) : absent;
  };
  int64_t length = arange_length(number_or("start", 0), shape::number_arg(node, "end"), number_or("step", 1), dtype);
  return {make_type(dtype, {length})};
}

// linspace: `steps` values, float32 unless `dtype` says otherwise.
std::vector<TensorType> linspace(const Node& node) {
  const int64_t steps = shape::int_arg(node, "steps");
  if (steps < 0) throw UserError("linspace: number of steps must be non-negative, got " + std::to_string(steps));
  return {make_type(shape::dtype_arg(node, "dtype").value_or(DType::Float32), {steps})};
}

// empty.memory_format and empty_permuted: float32 unless `dtype` says otherwise.
std::vector<TensorType> empty(const Node& node) {
  return {make_type(shape::dtype_arg(node, "dtype").value_or(DType::Float32), checked_sizes(node))};
}

// The result is a SymInt, not a tensor; it is described as a 0-d int64 so the arity holds.
std::vector<TensorType> sym_size(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  shape::normalize_dim(shape::int_arg(node, "dim"), self.rank());
  return {make_type(DType::Int64, {})};
}

std::vector<TensorType> no_outputs(const Node&) { return {}; }

}  // namespace foundry::rules
