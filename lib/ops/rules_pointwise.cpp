// Shape rules of pointwise ops: broadcasting and ATen type promotion.
#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry::rules {
namespace {

using shape::make_type;

const Arg& nth_arg(const Node& node, size_t index) {
  if (index >= node.args.size()) throw InternalError("pointwise rule: too few args in " + node.target);
  return node.args[index];
}

// The first tensor argument (polygamma's comes after its order n).
const TensorType& first_tensor(const Node& node) {
  for (const Arg& a : node.args)
    if (a.kind == Arg::Kind::Tensor && a.tensor) return a.tensor->type;
  throw UserError("the operator needs a tensor argument");
}

// Broadcast shape of every tensor among `operands` (numbers are 0-d and do not count).
std::vector<int64_t> broadcast_all(const std::vector<const Arg*>& operands) {
  std::vector<int64_t> sizes;
  for (const Arg* a : operands)
    if (a->kind == Arg::Kind::Tensor && a->tensor) sizes = shape::broadcast_shapes(sizes, a->tensor->type.sizes);
  return sizes;
}

DType to_float(DType t) { return is_floating(t) ? t : DType::Float32; }

std::vector<TensorType> binary(const Node& node, DType (*result_dtype)(DType)) {
  std::vector<const Arg*> operands = {&nth_arg(node, 0), &nth_arg(node, 1)};
  return {make_type(result_dtype(shape::result_type(operands)), broadcast_all(operands))};
}

}  // namespace

// Results are contiguous: input strides are not carried over.
std::vector<TensorType> unary_same(const Node& node) {
  const TensorType& self = first_tensor(node);
  return {make_type(self.dtype, self.sizes)};
}

std::vector<TensorType> unary_float(const Node& node) {
  const TensorType& self = first_tensor(node);
  return {make_type(to_float(self.dtype), self.sizes)};
}

std::vector<TensorType> unary_bool(const Node& node) {
  return {make_type(DType::Bool, first_tensor(node).sizes)};
}

// The first two arguments are the operands (self/other, self/exponent); alpha does not promote.
std::vector<TensorType> binary_broadcast(const Node& node) {
  return binary(node, [](DType t) { return t; });
}

std::vector<TensorType> binary_float(const Node& node) { return binary(node, to_float); }

std::vector<TensorType> binary_bool(const Node& node) {
  return binary(node, [](DType) { return DType::Bool; });
}

std::vector<TensorType> div_mode(const Node& node) {
  bool true_division = shape::arg(node, "rounding_mode").is_none();
  return true_division ? binary_float(node) : binary_broadcast(node);
}

std::vector<TensorType> where_self(const Node& node) {
  const Arg& condition = shape::arg(node, "condition");
  std::vector<const Arg*> values = {&shape::arg(node, "self"), &shape::arg(node, "other")};
  std::vector<int64_t> sizes = broadcast_all({&condition, values[0], values[1]});
  return {make_type(shape::result_type(values), sizes)};
}

// masked_fill: self's dtype and shape; the mask must be bool and broadcast to self.
std::vector<TensorType> masked_fill(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  const TensorType& mask = shape::tensor(node, "mask");
  if (mask.dtype != DType::Bool) throw UserError("masked_fill only supports boolean masks, but got mask with dtype " + std::string(dtype_name(mask.dtype)));
  if (shape::broadcast_shapes(self.sizes, mask.sizes) != self.sizes)
    throw UserError("masked_fill: mask " + shape::format_sizes(mask.sizes) + " does not broadcast to " + shape::format_sizes(self.sizes));
  return {make_type(self.dtype, self.sizes)};
}

// addcmul, addcdiv: self + value * (tensor1 op tensor2), the three broadcast and promoted.
std::vector<TensorType> addcmul(const Node& node) {
  std::vector<const Arg*> operands = {&shape::arg(node, "self"), &shape::arg(node, "tensor1"),
                                      &shape::arg(node, "tensor2")};
  return {make_type(shape::result_type(operands), broadcast_all(operands))};
}

// clamp promotes over self, min and max (scalars included), and broadcasts tensor bounds;
// clamp_min and clamp_max likewise over their one bound.
std::vector<TensorType> clamp(const Node& node) {
  std::vector<const Arg*> operands = {&shape::arg(node, "self")};
  for (const char* bound : {"min", "max"})  // clamp_min and clamp_max have one
    if (shape::has_arg(node, bound)) operands.push_back(&shape::arg(node, bound));
  return {make_type(shape::result_type(operands), broadcast_all(operands))};
}

}  // namespace foundry::rules
