// Helpers shared by the shape rules: argument access, dims, broadcasting, type promotion.
#include <numeric>
#include <algorithm>

#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry::shape {

namespace {

const Arg* find_arg(const Node& node, std::string_view name) {
  // Bound nodes carry their schema names; fall back to the schema for hand-built nodes.
  if (!node.arg_names.empty()) {
    for (size_t i = 0; i < node.arg_names.size() && i < node.args.size(); ++i)
      if (node.arg_names[i] == name) return &node.args[i];
  } else if (node.op) {
    const auto& params = node.op->schema.args;
    for (size_t i = 0; i < params.size() && i < node.args.size(); ++i)
      if (params[i].name == name) return &node.args[i];
  }
  return nullptr;
}

}  // namespace

bool has_arg(const Node& node, std::string_view name) { return find_arg(node, name) != nullptr; }

const Arg& arg(const Node& node, std::string_view name) {
  if (const Arg* a = find_arg(node, name)) return *a;
  throw InternalError("shape rule reads missing argument '" + std::string(name) + "' of " +
                      node.target);
}

const TensorType& tensor(const Node& node, std::string_view name) {
  const Arg& a = arg(node, name);
  if (a.kind != Arg::Kind::Tensor || !a.tensor)
    throw UserError("argument '" + std::string(name) + "' must be a tensor");
  return a.tensor->type;
}

// A SymInt argument names a value computed at run time (sym_size, item). Shape rules compute the
// recorded sizes, which are the export's hints for symbolic dims, so they read its hint; a value
// without one (data-dependent) cannot be read.
int64_t symbolic_int_hint(const Arg& a, std::string_view name) {
  if (a.tensor && a.tensor->hint) return *a.tensor->hint;
  throw UserError("argument '" + std::string(name) +
                  "' is a symbolic int known only at run time, with no value recorded at export; sizes that depend "
                  "on it are not supported yet");
}

int64_t int_arg(const Node& node, std::string_view name) {
  const Arg& a = arg(node, name);
  if (a.kind == Arg::Kind::SymInt) return symbolic_int_hint(a, name);
  if (a.kind != Arg::Kind::Int && a.kind != Arg::Kind::Bool)
    throw UserError("argument '" + std::string(name) + "' must be an int");
  return a.i;
}

bool bool_arg(const Node& node, std::string_view name) { return int_arg(node, name) != 0; }

double number_arg(const Node& node, std::string_view name) {
  const Arg& a = arg(node, name);
  if (a.kind == Arg::Kind::SymInt) return static_cast<double>(symbolic_int_hint(a, name));
  if (!a.is_number()) throw UserError("argument '" + std::string(name) + "' must be a number");
  return a.as_double();
}

std::vector<int64_t> ints_arg(const Node& node, std::string_view name) {
  const Arg& a = arg(node, name);
  if (a.kind == Arg::Kind::SymInt) return {symbolic_int_hint(a, name)};
  if (a.kind == Arg::Kind::Int) return {a.i};
  if (a.kind != Arg::Kind::IntList)
    throw UserError("argument '" + std::string(name) + "' must be a list of ints");
  return a.ints;
}

std::optional<DType> dtype_arg(const Node& node, std::string_view name) {
  const Arg& a = arg(node, name);
  if (a.kind == Arg::Kind::ScalarType) return a.dtype;
  return std::nullopt;
}

TensorType make_type(DType dtype, std::vector<int64_t> sizes) {
  TensorType t;
  t.dtype = dtype;
  t.sizes = std::move(sizes);
  return t;
}

int64_t product(const std::vector<int64_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
}

std::string format_sizes(const std::vector<int64_t>& sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

int64_t normalize_dim(int64_t dim, int64_t rank) {
  int64_t wrap = std::max<int64_t>(rank, 1);  // a 0-d tensor behaves like rank 1 here
  if (dim < -wrap || dim >= wrap)
    throw UserError("dimension out of range (expected to be in range of [" +
                    std::to_string(-wrap) + ", " + std::to_string(wrap - 1) + "], but got " +
                    std::to_string(dim) + ")");
  return dim < 0 ? dim + wrap : dim;
}

int64_t window_positions(int64_t size, int64_t kernel, int64_t dilation, int64_t padding, int64_t stride) {
  return (size + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

std::vector<std::pair<int64_t, int64_t>> tensor_split_bounds(const Node& node, int64_t size) {
  std::vector<std::pair<int64_t, int64_t>> bounds;
  if (has_arg(node, "sections")) {
    const int64_t sections = int_arg(node, "sections");
    if (sections <= 0) throw UserError("tensor_split: number of sections must be larger than 0, got " + std::to_string(sections));
    for (int64_t i = 0, start = 0; i < sections; ++i) {
      const int64_t part = size / sections + (i < size % sections ? 1 : 0);
      bounds.emplace_back(start, start + part);
      start += part;
    }
    return bounds;
  }
  int64_t start = 0;
  for (int64_t end : ints_arg(node, "indices")) {
    bounds.emplace_back(start, end);
    start = end;
  }
  bounds.emplace_back(start, size);
  return bounds;
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {  // aligned from the right
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      throw UserError("shapes " + format_sizes(a) + " and " + format_sizes(b) +
                      " are not broadcastable");
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

// c10's combine_categories: `lower` only matters when it is of a higher category than `higher`.
std::optional<DType> combine_categories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower || is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

void promote_into(std::optional<DType>& acc, DType t) { acc = acc ? promote_types(*acc, t) : t; }

}  // namespace

DType result_type(const std::vector<const Arg*>& operands) {
  std::optional<DType> dim_result, zero_dim_result, wrapped_result;
  for (const Arg* a : operands) {
    if (a->kind == Arg::Kind::Tensor && a->tensor) {
      const TensorType& t = a->tensor->type;
      promote_into(t.rank() > 0 ? dim_result : zero_dim_result, t.dtype);
    } else if (a->kind == Arg::Kind::Float) {
      promote_into(wrapped_result, DType::Float32);  // Python floats take the default dtype
    } else if (a->kind == Arg::Kind::Int || a->kind == Arg::Kind::SymInt) {
      promote_into(wrapped_result, DType::Int64);
    } else if (a->kind == Arg::Kind::Bool) {
      promote_into(wrapped_result, DType::Bool);
    }
  }
  auto result = combine_categories(dim_result, combine_categories(zero_dim_result, wrapped_result));
  if (!result) throw UserError("no tensor or number operands to determine the result type");
  return *result;
}

}  // namespace foundry::shape
