// Shape rules of the training-IR ops that only the decomposition pass sees (the rows at the end
// of ops.def): reshape, view_as/reshape_as, chunk, split.Tensor, unbind.int, to.other, stack,
// meshgrid, eye, repeat_interleave, im2col... Like
// every rule they belong to the op table, which the passes are built on.
#include <algorithm>
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

std::vector<TensorType> expand_as(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  const TensorType& other = shape::tensor(node, "other");
  if (shape::broadcast_shapes(self.sizes, other.sizes) != other.sizes)
    throw UserError("expand_as: cannot expand " + shape::format_sizes(self.sizes) + " to " + shape::format_sizes(other.sizes));
  return {shape::make_type(self.dtype, other.sizes)};
}

// Tensor.T: the dims reversed.
std::vector<TensorType> numpy_t(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  return {shape::make_type(self.dtype, std::vector<int64_t>(self.sizes.rbegin(), self.sizes.rend()))};
}

// Tensor.t(): a matrix transposed; vectors and scalars unchanged.
std::vector<TensorType> matrix_t(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() > 2) throw UserError("t: expects a tensor with <= 2 dimensions, got " + shape::format_sizes(self.sizes));
  return numpy_t(node);
}

// tensor_split: the parts of self along dim, each self.slice(dim, start, end) (Python's slice
// bounds: negative ones count from the end, then clamped to the dim).
std::vector<TensorType> tensor_split(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() == 0) throw UserError("tensor_split: expected at least a 1-dimensional tensor");
  const int64_t dim = shape::normalize_dim(shape::int_arg(node, "dim"), self.rank());
  const int64_t size = self.sizes[static_cast<size_t>(dim)];
  std::vector<TensorType> parts;
  for (auto [start, end] : shape::tensor_split_bounds(node, size)) {
    auto clamp = [size](int64_t b) { return std::clamp<int64_t>(b < 0 ? b + size : b, 0, size); };
    std::vector<int64_t> sizes = self.sizes;
    sizes[static_cast<size_t>(dim)] = std::max<int64_t>(clamp(end) - clamp(start), 0);
    parts.push_back(shape::make_type(self.dtype, sizes));
  }
  return parts;
}

std::vector<TensorType> stack(const Node& node) {
  const std::vector<Value*>& tensors = shape::arg(node, "tensors").tensors;
  if (tensors.empty()) throw UserError("stack expects a non-empty list of tensors");
  const TensorType& first = tensors[0]->type;
  for (const Value* t : tensors)
    if (t->type.sizes != first.sizes)
      throw UserError("stack expects each tensor to be equal size, but got " + shape::format_sizes(first.sizes) + " and " +
                      shape::format_sizes(t->type.sizes));
  const int64_t dim = shape::normalize_dim(shape::int_arg(node, "dim"), first.rank() + 1);
  std::vector<int64_t> sizes = first.sizes;
  sizes.insert(sizes.begin() + dim, static_cast<int64_t>(tensors.size()));
  std::vector<const Arg*> operands;
  std::vector<Arg> args;
  for (Value* t : tensors) args.push_back(Arg::of_tensor(t));
  for (const Arg& a : args) operands.push_back(&a);
  return {shape::make_type(shape::result_type(operands), sizes)};
}

// meshgrid: one grid per tensor (each 0-d or 1-d), of the sizes in order ("ij") or with the first
// two swapped ("xy").
std::vector<TensorType> meshgrid(const Node& node) {
  const std::vector<Value*>& tensors = shape::arg(node, "tensors").tensors;
  if (tensors.empty()) throw UserError("meshgrid expects a non-empty list of tensors");
  const std::string indexing = shape::has_arg(node, "indexing") ? shape::arg(node, "indexing").s : "ij";
  if (indexing != "ij" && indexing != "xy")
    throw UserError("meshgrid: indexing must be 'ij' or 'xy', got '" + indexing + "'");
  std::vector<int64_t> sizes;
  for (const Value* t : tensors) {
    if (t->type.rank() > 1) throw UserError("meshgrid expects 0-d or 1-d tensors, got " + shape::format_sizes(t->type.sizes));
    if (t->type.dtype != tensors[0]->type.dtype) throw UserError("meshgrid expects all tensors to have the same dtype");
    sizes.push_back(t->type.rank() == 0 ? 1 : t->type.sizes[0]);
  }
  if (indexing == "xy" && sizes.size() >= 2) std::swap(sizes[0], sizes[1]);
  return std::vector<TensorType>(tensors.size(), shape::make_type(tensors[0]->type.dtype, sizes));
}

// eye(n), eye.m(n, m): float32 unless dtype says otherwise.
std::vector<TensorType> eye(const Node& node) {
  const int64_t n = shape::int_arg(node, "n");
  const int64_t m = shape::has_arg(node, "m") ? shape::int_arg(node, "m") : n;
  if (n < 0 || m < 0) throw UserError("eye: n and m must be non-negative, got " + std::to_string(n) + " and " + std::to_string(m));
  return {shape::make_type(shape::dtype_arg(node, "dtype").value_or(DType::Float32), {n, m})};
}

// glu halves `dim`: the first half, gated by the sigmoid of the second.
std::vector<TensorType> glu(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() == 0) throw UserError("glu: a 0-d tensor has no dimension to halve");
  const int64_t dim = shape::normalize_dim(shape::int_arg(node, "dim"), self.rank());
  std::vector<int64_t> sizes = self.sizes;
  if (sizes[dim] % 2 != 0)
    throw UserError("glu: dimension " + std::to_string(dim) + " of " + shape::format_sizes(self.sizes) + " must have an even size");
  sizes[dim] /= 2;
  return {shape::make_type(self.dtype, sizes)};
}

// one_hot of int64 class indices: a trailing dimension of num_classes, int64. Without
// num_classes PyTorch takes the largest index plus one, a size known only from the data.
std::vector<TensorType> one_hot(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.dtype != DType::Int64)
    throw UserError("one_hot: the class indices must be int64, as PyTorch requires, got " + std::string(dtype_name(self.dtype)));
  const int64_t classes = shape::int_arg(node, "num_classes");
  if (classes < 0)
    throw UserError("one_hot without num_classes: the number of classes would depend on the data; pass num_classes");
  std::vector<int64_t> sizes = self.sizes;
  sizes.push_back(classes);
  return {shape::make_type(DType::Int64, sizes)};
}

// repeat_interleave with one repeat count: each element `repeats` times along dim (of the
// flattened tensor without a dim).
std::vector<TensorType> repeat_interleave(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  const int64_t repeats = shape::int_arg(node, "repeats");
  if (repeats < 0) throw UserError("repeat_interleave: repeats must be non-negative, got " + std::to_string(repeats));
  if (shape::arg(node, "dim").is_none()) return {shape::make_type(self.dtype, {product(self.sizes) * repeats})};
  std::vector<int64_t> sizes = self.sizes;
  if (sizes.empty()) sizes.push_back(1);
  sizes[static_cast<size_t>(shape::normalize_dim(shape::int_arg(node, "dim"), static_cast<int64_t>(sizes.size())))] *= repeats;
  return {shape::make_type(self.dtype, sizes)};
}

// im2col (F.unfold): [N, C, H, W] -> [N, C * kh * kw, L] over the L positions of the window.
std::vector<TensorType> im2col(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() != 3 && self.rank() != 4) throw UserError("im2col expects a 3-d or 4-d input, got " + shape::format_sizes(self.sizes));
  const std::vector<int64_t> k = shape::ints_arg(node, "kernel_size"), d = shape::ints_arg(node, "dilation"),
                             p = shape::ints_arg(node, "padding"), s = shape::ints_arg(node, "stride");
  if (k.size() != 2 || d.size() != 2 || p.size() != 2 || s.size() != 2) throw UserError("im2col expects pairs of ints");
  const size_t h = self.sizes.size() - 2;
  int64_t positions = 1;
  for (size_t i = 0; i < 2; ++i) {
    if (k[i] < 1 || d[i] < 1 || s[i] < 1 || p[i] < 0) throw UserError("im2col: invalid kernel, dilation, padding or stride");
    const int64_t out = shape::window_positions(self.sizes[h + i], k[i], d[i], p[i], s[i]);
    if (out < 1) throw UserError("im2col: the window does not fit the input " + shape::format_sizes(self.sizes));
    positions *= out;
  }
  std::vector<int64_t> sizes(self.sizes.begin(), self.sizes.end() - 3);
  sizes.push_back(self.sizes[h - 1] * k[0] * k[1]);
  sizes.push_back(positions);
  return {shape::make_type(self.dtype, sizes)};
}

// col2im (F.fold): [N, C * kh * kw, L] -> [N, C, H, W], summing the windows' overlaps.
std::vector<TensorType> col2im(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() != 2 && self.rank() != 3) throw UserError("col2im expects a 2-d or 3-d input, got " + shape::format_sizes(self.sizes));
  const std::vector<int64_t> o = shape::ints_arg(node, "output_size"), k = shape::ints_arg(node, "kernel_size"),
                             d = shape::ints_arg(node, "dilation"), p = shape::ints_arg(node, "padding"),
                             s = shape::ints_arg(node, "stride");
  if (o.size() != 2 || k.size() != 2 || d.size() != 2 || p.size() != 2 || s.size() != 2) throw UserError("col2im expects pairs of ints");
  int64_t blocks = 1;
  for (size_t i = 0; i < 2; ++i) {
    if (k[i] < 1 || d[i] < 1 || s[i] < 1 || p[i] < 0) throw UserError("col2im: invalid kernel, dilation, padding or stride");
    const int64_t n = shape::window_positions(o[i], k[i], d[i], p[i], s[i]);
    if (n < 1) throw UserError("col2im: the window does not fit the output size");
    blocks *= n;
  }
  const int64_t rows = self.sizes[self.sizes.size() - 2], cols = self.sizes.back();
  if (rows % (k[0] * k[1]) != 0 || cols != blocks)
    throw UserError("col2im: input " + shape::format_sizes(self.sizes) + " does not hold " + std::to_string(blocks) +
                    " blocks of windows " + std::to_string(k[0]) + "x" + std::to_string(k[1]));
  std::vector<int64_t> sizes(self.sizes.begin(), self.sizes.end() - 2);
  sizes.insert(sizes.end(), {rows / (k[0] * k[1]), o[0], o[1]});
  return {shape::make_type(self.dtype, sizes)};
}

std::vector<TensorType> to_other(const Node& node) {
  return {shape::make_type(shape::tensor(node, "other").dtype, shape::tensor(node, "self").sizes)};
}

}  // namespace foundry::rules
