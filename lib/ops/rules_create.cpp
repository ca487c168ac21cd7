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

int64_t arange_length(const Arg& start, const Arg& end, const Arg& step, DType dtype) {
  if (step.as_double() == 0) throw UserError("arange: step must be nonzero");
  if (!is_floating(dtype)) {
    // Integer arange works in integers (values truncated first), as ATen does.
    int64_t s = static_cast<int64_t>(start.as_double()), e = static_cast<int64_t>(end.as_double());
    int64_t st = static_cast<int64_t>(step.as_double());
    if (st == 0) throw UserError("arange: step must be nonzero");
    int64_t sign = st > 0 ? 1 : -1;
    if ((e - s) * sign < 0) throw UserError("arange: upper bound and lower bound inconsistent with step sign");
    return (e - s + st - sign) / st;
  }
  double length = std::ceil((end.as_double() - start.as_double()) / step.as_double());
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

// scalar_tensor always defaults to float32, even for an int value.
std::vector<TensorType> scalar_tensor(const Node& node) {
  return {make_type(shape::dtype_arg(node, "dtype").value_or(DType::Float32), {})};
}

// Without dtype: int64 when start, end and step are all ints, else float32.
std::vector<TensorType> arange(const Node& node) {
  const Arg& start = shape::arg(node, "start");
  const Arg& end = shape::arg(node, "end");
  const Arg& step = shape::arg(node, "step");
  DType inferred = DType::Int64;
  for (const Arg* a : {&start, &end, &step})
    if (a->kind == Arg::Kind::Float) inferred = DType::Float32;
  DType dtype = shape::dtype_arg(node, "dtype").value_or(inferred);
  return {make_type(dtype, {arange_length(start, end, step, dtype)})};
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
