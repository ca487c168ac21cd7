// The op registry: one table (ops.def) of every operator foundryc understands, with its ATen
// schema and its shape/dtype rule. Adding an op is adding a row there. The types of a table row
// (OpInfo, OpSchema) are the graph's, in foundry/graph/op_schema.h.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "foundry/graph/graph.h"
#include "foundry/graph/op_schema.h"

namespace foundry {

// Parses an ATen schema string; throws InternalError on malformed text (the table is ours).
OpSchema parse_schema(std::string_view text);

// Looks up an op by its export target ("torch.ops.aten.add.Tensor") or short name ("add.Tensor").
// An in-place op with no row of its own ("lt_.Tensor") is derived from its functional row.
const OpInfo* find_op(std::string_view target);
// "relu_" -> "relu", "add_.Tensor" -> "add.Tensor"; "" when the name is not an in-place one.
std::string functional_op_name(std::string_view name);
const std::vector<OpInfo>& all_ops();

// Binds raw arguments (name + value as read from the file) to the schema: by name (an unnamed
// one takes the next positional slot), in schema order, defaults filled in; numbers in Tensor
// slots stay numbers (Int/Float/Bool args: wrapped scalars), ints in float slots become floats.
// Throws UserError naming the argument on a wrong type, an unknown or a missing argument.
// `names_out` (may be null) receives the schema's argument names.
struct RawArg {
  std::string name;
  Arg value;
  bool kwarg_only = false;
};
std::vector<Arg> bind_arguments(const OpInfo& op, const std::vector<RawArg>& raw,
                                std::vector<std::string>* names_out);

// String arguments are enumerations (gelu's approximate, div's rounding_mode, scatter_reduce's
// reduce): check_string_argument throws the UserError PyTorch would give for a value it refuses.
// Every str argument in ops.def has a row in lib/ops/string_choices.cpp (free text included).
bool has_string_rule(std::string_view op, std::string_view arg);
void check_string_argument(std::string_view op, std::string_view arg, const std::string& value);

// Shortens an export target to the registry's name: "torch.ops.aten.relu.default" -> "relu".
std::string short_op_name(std::string_view target);

// Helpers shared by the shape rules (lib/ops/rules_*.cpp); the lowering may use them too.
// All throw UserError on invalid input.
namespace shape {

// The bound argument named `name` (looked up through the node's schema).
const Arg& arg(const Node& node, std::string_view name);
bool has_arg(const Node& node, std::string_view name);  // whether the op's schema has it
// The type of a Tensor argument; throws if the argument is not a tensor.
const TensorType& tensor(const Node& node, std::string_view name);
// Typed accessors for scalar arguments. A SymInt (a value known only at run time) is refused
// with a UserError: no static size can depend on it.
int64_t int_arg(const Node& node, std::string_view name);
bool bool_arg(const Node& node, std::string_view name);
double number_arg(const Node& node, std::string_view name);  // an Int, Float or Bool as a double
std::vector<int64_t> ints_arg(const Node& node, std::string_view name);
std::optional<DType> dtype_arg(const Node& node, std::string_view name);  // nullopt for None
// A contiguous tensor type (strides left empty, meaning contiguous).
TensorType make_type(DType dtype, std::vector<int64_t> sizes);
std::string format_sizes(const std::vector<int64_t>& sizes);  // "[2, 3]"
int64_t product(const std::vector<int64_t>& sizes);           // the element count (1 for none)

// Wraps a possibly negative dim into [0, rank); a 0-d tensor accepts dims -1 and 0.
int64_t normalize_dim(int64_t dim, int64_t rank);
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// A sliding window's positions along a dim of `size` (F.unfold, F.fold, convolutions' formula).
int64_t window_positions(int64_t size, int64_t kernel, int64_t dilation, int64_t padding, int64_t stride);
// tensor_split's parts along a dim of `size`: [start, end) pairs as given (slice bounds, not yet
// clamped), from its `indices` or its `sections`.
std::vector<std::pair<int64_t, int64_t>> tensor_split_bounds(const Node& node, int64_t size);

// ATen's result_type over tensors and wrapped numbers: dim>0 tensors first, then 0-d tensors,
// then Python numbers, each later group only raising the category (bool < int < float).
// Non-tensor, non-number args (None) are skipped.
DType result_type(const std::vector<const Arg*>& operands);

}  // namespace shape

}  // namespace foundry
