// Shape rules of the training-IR ops that only the decomposition pass sees (the rows at the end
// of ops.def): reshape, view_as/reshape_as, chunk, split.Tensor, unbind.int and to.other. Like
// every rule they belong to the op table, which the passes are built on.
#include <numeric>

#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry::rules {

namespace {

using shape::product;

// Replaces a single -1 so that the product equals `numel`, as view does.
std::vector<int64_t> infer_view_size(std::vector<int64_t> sizes, int64_t numel) {
  int64_t known = 1;
  int inferred = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      if (inferred >= 0) throw UserError("only one dimension can be inferred");
      inferred = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      throw UserError("invalid shape dimension " + std::to_string(sizes[i]));
    } else {
      known *= sizes[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || numel % known != 0)
      throw UserError("shape " + shape::format_sizes(sizes) + " is invalid for input of size " + std::to_string(numel));
    sizes[static_cast<size_t>(inferred)] = numel / known;
  } else if (known != numel) {
    throw UserError("shape " + shape::format_sizes(sizes) + " is invalid for input of size " + std::to_string(numel));
  }
  return sizes;
}

// The parts of `self` along `dim` when split into pieces of `split_size` (the last may be smaller).
std::vector<TensorType> split_parts(const TensorType& self, int64_t dim, int64_t split_size, const char* what) {
  if (self.rank() == 0) throw UserError(std::string(what) + ": cannot split a 0-d tensor");
  dim = shape::normalize_dim(dim, self.rank());
  const int64_t size = self.sizes[static_cast<size_t>(dim)];
  if (split_size < 0 || (split_size == 0 && size != 0))
    throw UserError(std::string(what) + ": split size " + std::to_string(split_size) + " is invalid for a dimension of size " +
                    std::to_string(size));
  std::vector<TensorType> outs;
  if (size == 0) {  // PyTorch gives one empty part
    outs.push_back(shape::make_type(self.dtype, self.sizes));
    return outs;
  }
  for (int64_t start = 0; start < size; start += split_size) {
    std::vector<int64_t> sizes = self.sizes;
    sizes[static_cast<size_t>(dim)] = std::min(split_size, size - start);
    outs.push_back(shape::make_type(self.dtype, sizes));
  }
  return outs;
}

}  // namespace

std::vector<TensorType> reshape(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  return {shape::make_type(self.dtype, infer_view_size(shape::ints_arg(node, "shape"), product(self.sizes)))};
}

std::vector<TensorType> view_as(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  const TensorType& other = shape::tensor(node, "other");
  if (product(self.sizes) != product(other.sizes))
    throw UserError("shape " + shape::format_sizes(other.sizes) + " is invalid for input of size " +
                    std::to_string(product(self.sizes)));
  return {shape::make_type(self.dtype, other.sizes)};
}

std::vector<TensorType> chunk(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  const int64_t chunks = shape::int_arg(node, "chunks");
  if (chunks <= 0) throw UserError("chunk: chunks must be positive, got " + std::to_string(chunks));
  if (self.rank() == 0) throw UserError("chunk: cannot split a 0-d tensor");
  const int64_t size = self.sizes[static_cast<size_t>(shape::normalize_dim(shape::int_arg(node, "dim"), self.rank()))];
  const int64_t split_size = (size + chunks - 1) / chunks;
  return split_parts(self, shape::int_arg(node, "dim"), split_size == 0 ? 1 : split_size, "chunk");
}

std::vector<TensorType> split_tensor(const Node& node) {
  return split_parts(shape::tensor(node, "self"), shape::int_arg(node, "dim"), shape::int_arg(node, "split_size"),
                     "split");
}

std::vector<TensorType> unbind(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() == 0) throw UserError("unbind: cannot unbind a 0-d tensor");
  const int64_t dim = shape::normalize_dim(shape::int_arg(node, "dim"), self.rank());
  std::vector<int64_t> sizes = self.sizes;
  const int64_t n = sizes[static_cast<size_t>(dim)];
  sizes.erase(sizes.begin() + dim);
  return std::vector<TensorType>(static_cast<size_t>(n), shape::make_type(self.dtype, sizes));
}

// argsort, argsort.stable: sort's int64 indices.
std::vector<TensorType> argsort(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  shape::normalize_dim(shape::int_arg(node, "dim"), self.rank());
  return {shape::make_type(DType::Int64, self.sizes)};
}

std::vector<TensorType> to_other(const Node& node) {
  return {shape::make_type(shape::tensor(node, "other").dtype, shape::tensor(node, "self").sizes)};
}

}  // namespace foundry::rules
