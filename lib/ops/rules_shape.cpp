// Shape rules of views, shape manipulation, concatenation, padding and indexing.
#include <algorithm>
#include <limits>
#include <numeric>

#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry::rules {
namespace {

using shape::product;

using shape::format_sizes;
using shape::make_type;
using shape::normalize_dim;

// Replaces a single -1 in `sizes` so that the product equals `numel` (view, unflatten).
std::vector<int64_t> infer_size(std::vector<int64_t> sizes, int64_t numel) {
  auto inferred = sizes.end();
  int64_t known = 1;
  for (auto it = sizes.begin(); it != sizes.end(); ++it) {
    if (*it == -1) {
      if (inferred != sizes.end()) throw UserError("only one dimension can be inferred");
      inferred = it;
    } else if (*it < 0) {
      throw UserError("invalid shape dimension " + std::to_string(*it));
    } else {
      known *= *it;
    }
  }
  if (inferred != sizes.end()) {
    // With a zero among the known sizes, -1 could be anything.
    if (known == 0 || numel % known != 0)
      throw UserError("shape " + format_sizes(sizes) + " is invalid for input of size " + std::to_string(numel));
    *inferred = numel / known;
  } else if (known != numel) {
    throw UserError("shape " + format_sizes(sizes) + " is invalid for input of size " + std::to_string(numel));
  }
  return sizes;
}

TensorType with_sizes(const TensorType& t, std::vector<int64_t> sizes) { return make_type(t.dtype, std::move(sizes)); }

// Clamps a slice bound the way Python does: negative counts from the end, then into [0, size].
int64_t clamp_slice_bound(const Node& node, std::string_view name, int64_t fallback, int64_t size) {
  int64_t v = shape::arg(node, name).is_none() ? fallback : shape::int_arg(node, name);
  if (v < 0) v += size;
  return std::clamp<int64_t>(v, 0, size);
}

}  // namespace

std::vector<TensorType> view(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  return {with_sizes(self, infer_size(shape::ints_arg(node, "size"), product(self.sizes)))};
}

std::vector<TensorType> permute(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  std::vector<int64_t> dims = shape::ints_arg(node, "dims");
  if (static_cast<int64_t>(dims.size()) != self.rank())
    throw UserError("permute: " + std::to_string(dims.size()) + " dims for a tensor of rank " + std::to_string(self.rank()));
  std::vector<int64_t> sizes;
  std::vector<bool> seen(self.rank(), false);
  for (int64_t d : dims) {
    int64_t dim = normalize_dim(d, self.rank());
    if (seen[dim]) throw UserError("permute: repeated dim " + std::to_string(dim));
    seen[dim] = true;
    sizes.push_back(self.sizes[dim]);
  }
  return {with_sizes(self, sizes)};
}

// transpose.int, swapdims (dim0, dim1) and swapaxes (axis0, axis1).
std::vector<TensorType> transpose(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  const bool axes = shape::has_arg(node, "axis0");
  int64_t dim0 = normalize_dim(shape::int_arg(node, axes ? "axis0" : "dim0"), self.rank());
  int64_t dim1 = normalize_dim(shape::int_arg(node, axes ? "axis1" : "dim1"), self.rank());
  std::vector<int64_t> sizes = self.sizes;
  if (self.rank() > 0) std::swap(sizes[dim0], sizes[dim1]);  // a 0-d tensor transposes to itself
  return {with_sizes(self, sizes)};
}

// pixel_shuffle (r = upscale_factor): [*, C*r*r, H, W] -> [*, C, H*r, W*r]; pixel_unshuffle
// (r = downscale_factor) the other way.
std::vector<TensorType> pixel_shuffle(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  const bool up = shape::has_arg(node, "upscale_factor");
  const int64_t r = shape::int_arg(node, up ? "upscale_factor" : "downscale_factor");
  const std::string op = up ? "pixel_shuffle" : "pixel_unshuffle";
  if (self.rank() < 3) throw UserError(op + " expects an input of at least 3 dims, got " + format_sizes(self.sizes));
  if (r <= 0) throw UserError(op + ": the factor must be positive, got " + std::to_string(r));
  std::vector<int64_t> sizes = self.sizes;
  const size_t c = sizes.size() - 3;
  if (up ? sizes[c] % (r * r) != 0 : sizes[c + 1] % r != 0 || sizes[c + 2] % r != 0)
    throw UserError(op + ": " + format_sizes(self.sizes) + " does not divide by the factor " + std::to_string(r));
  sizes[c] = up ? sizes[c] / (r * r) : sizes[c] * r * r;
  for (size_t d : {c + 1, c + 2}) sizes[d] = up ? sizes[d] * r : sizes[d] / r;
  return {with_sizes(self, sizes)};
}

std::vector<TensorType> expand(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  std::vector<int64_t> sizes = shape::ints_arg(node, "size");
  int64_t lead = static_cast<int64_t>(sizes.size()) - self.rank();
  if (lead < 0)
    throw UserError("expand: the number of sizes (" + std::to_string(sizes.size()) +
                    ") must be at least the tensor's rank (" + std::to_string(self.rank()) + ")");
  for (int64_t i = 0; i < static_cast<int64_t>(sizes.size()); ++i) {
    if (i < lead) {
      if (sizes[i] < 0) throw UserError("expand: -1 is not allowed for a new leading dimension");
      continue;
    }
    int64_t old = self.sizes[i - lead];
    if (sizes[i] == -1) sizes[i] = old;
    if (old != 1 && sizes[i] != old)
      throw UserError("expand: cannot expand " + format_sizes(self.sizes) + " to " + format_sizes(sizes));
  }
  return {with_sizes(self, sizes)};
}

// squeeze.dim and squeeze.dims: drop the listed dims that have size 1, keep the others.
std::vector<TensorType> squeeze(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  std::vector<bool> drop(self.rank(), false);
  for (int64_t d : shape::ints_arg(node, "dim")) {
    int64_t dim = normalize_dim(d, self.rank());
    if (self.rank() > 0 && self.sizes[dim] == 1) drop[dim] = true;
  }
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (!drop[d]) sizes.push_back(self.sizes[d]);
  return {with_sizes(self, sizes)};
}

std::vector<TensorType> unsqueeze(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  std::vector<int64_t> sizes = self.sizes;
  int64_t dim = normalize_dim(shape::int_arg(node, "dim"), self.rank() + 1);
  sizes.insert(sizes.begin() + dim, 1);
  return {with_sizes(self, sizes)};
}

std::vector<TensorType> flatten(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() == 0) return {with_sizes(self, {1})};
  int64_t start = normalize_dim(shape::int_arg(node, "start_dim"), self.rank());
  int64_t end = normalize_dim(shape::int_arg(node, "end_dim"), self.rank());
  if (start > end) throw UserError("flatten: start_dim cannot come after end_dim");
  std::vector<int64_t> sizes(self.sizes.begin(), self.sizes.begin() + start);
  sizes.push_back(product({self.sizes.begin() + start, self.sizes.begin() + end + 1}));
  sizes.insert(sizes.end(), self.sizes.begin() + end + 1, self.sizes.end());
  return {with_sizes(self, sizes)};
}

std::vector<TensorType> unflatten(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() == 0) throw UserError("unflatten: cannot unflatten a 0-d tensor");
  int64_t dim = normalize_dim(shape::int_arg(node, "dim"), self.rank());
  std::vector<int64_t> inner = infer_size(shape::ints_arg(node, "sizes"), self.sizes[dim]);
  std::vector<int64_t> sizes(self.sizes.begin(), self.sizes.begin() + dim);
  sizes.insert(sizes.end(), inner.begin(), inner.end());
  sizes.insert(sizes.end(), self.sizes.begin() + dim + 1, self.sizes.end());
  return {with_sizes(self, sizes)};
}

std::vector<TensorType> select(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() == 0) throw UserError("select: cannot select from a 0-d tensor");
  int64_t dim = normalize_dim(shape::int_arg(node, "dim"), self.rank());
  int64_t index = shape::int_arg(node, "index"), size = self.sizes[dim];
  if (index < -size || index >= size)
    throw UserError("select: index " + std::to_string(index) + " out of range for dimension of size " + std::to_string(size));
  std::vector<int64_t> sizes = self.sizes;
  sizes.erase(sizes.begin() + dim);
  return {with_sizes(self, sizes)};
}

// resize: self's dtype at the new sizes (which must not be negative).
std::vector<TensorType> resize(const Node& node) {
  std::vector<int64_t> sizes = shape::ints_arg(node, "size");
  for (int64_t s : sizes)
    if (s < 0) throw UserError("resize: negative size " + std::to_string(s));
  return {make_type(shape::tensor(node, "self").dtype, sizes)};
}

// narrow_copy: `length` elements from `start` (negative: counted from the end) along dim.
std::vector<TensorType> narrow(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() == 0) throw UserError("narrow() cannot be applied to a 0-dim tensor.");
  const int64_t dim = shape::normalize_dim(shape::int_arg(node, "dim"), self.rank());
  const int64_t size = self.sizes[static_cast<size_t>(dim)], length = shape::int_arg(node, "length");
  int64_t start = shape::int_arg(node, "start");
  if (start < 0) start += size;
  if (start < 0 || length < 0 || start > size - length)
    throw UserError("narrow: start " + std::to_string(shape::int_arg(node, "start")) + " and length " +
                    std::to_string(length) + " do not fit in a dimension of size " + std::to_string(size));
  std::vector<int64_t> sizes = self.sizes;
  sizes[static_cast<size_t>(dim)] = length;
  return {make_type(self.dtype, sizes)};
}

std::vector<TensorType> slice(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() == 0) throw UserError("slice: cannot slice a 0-d tensor");
  int64_t dim = normalize_dim(shape::int_arg(node, "dim"), self.rank());
  int64_t step = shape::int_arg(node, "step");
  if (step <= 0) throw UserError("slice: step must be positive");
  int64_t size = self.sizes[dim];
  int64_t start = clamp_slice_bound(node, "start", 0, size);
  int64_t end = clamp_slice_bound(node, "end", std::numeric_limits<int64_t>::max(), size);
  std::vector<int64_t> sizes = self.sizes;
  sizes[dim] = end > start ? (end - start + step - 1) / step : 0;
  return {with_sizes(self, sizes)};
}

// as_strided views self's storage (which the lowering makes self's elements, contiguous): every
// element it can reach must lie inside it, as ATen's setStorage checks.
std::vector<TensorType> as_strided(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  std::vector<int64_t> sizes = shape::ints_arg(node, "size");
  std::vector<int64_t> strides = shape::ints_arg(node, "stride");
  int64_t offset = shape::arg(node, "storage_offset").is_none() ? 0 : shape::int_arg(node, "storage_offset");
  if (sizes.size() != strides.size())
    throw UserError("as_strided: size and stride must have the same length");
  for (int64_t s : sizes)
    if (s < 0) throw UserError("as_strided: negative size in " + format_sizes(sizes));
  for (int64_t s : strides)
    if (s < 0) throw UserError("as_strided: negative strides are not supported, got strides " + format_sizes(strides));
  if (offset < 0) throw UserError("as_strided: invalid (negative) storage offset " + std::to_string(offset));
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return {with_sizes(self, sizes)};  // reaches nothing
  // The last element reached; saturating, so that huge sizes or strides cannot wrap around.
  int64_t last = offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    int64_t step = 0;
    if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &step) || __builtin_add_overflow(last, step, &last))
      last = std::numeric_limits<int64_t>::max();
  }
  if (last >= self.numel())
    throw UserError("as_strided: sizes " + format_sizes(sizes) + ", strides " + format_sizes(strides) +
                    " and storage offset " + std::to_string(offset) + " reach element " + std::to_string(last) +
                    ", out of bounds for a storage of " + std::to_string(self.numel()) + " elements");
  return {with_sizes(self, sizes)};
}

// The diagonal of dims (dim1, dim2) becomes the last dim; the two dims are removed.
std::vector<TensorType> diagonal(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  int64_t dim1 = normalize_dim(shape::int_arg(node, "dim1"), self.rank());
  int64_t dim2 = normalize_dim(shape::int_arg(node, "dim2"), self.rank());
  if (dim1 == dim2) throw UserError("diagonal: dim1 and dim2 cannot be the same");
  int64_t offset = shape::int_arg(node, "offset");
  int64_t length = offset >= 0 ? std::min(self.sizes[dim1], self.sizes[dim2] - offset)
                               : std::min(self.sizes[dim1] + offset, self.sizes[dim2]);
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (d != dim1 && d != dim2) sizes.push_back(self.sizes[d]);
  sizes.push_back(std::max<int64_t>(length, 0));
  return {with_sizes(self, sizes)};
}

// Windows of `size` every `step` along `dimension`; the window becomes a new last dim.
std::vector<TensorType> unfold(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  int64_t dim = normalize_dim(shape::int_arg(node, "dimension"), self.rank());
  int64_t size = shape::int_arg(node, "size"), step = shape::int_arg(node, "step");
  int64_t extent = self.rank() == 0 ? 1 : self.sizes[dim];
  if (size < 0 || size > extent) throw UserError("unfold: size " + std::to_string(size) + " exceeds the dimension's size " + std::to_string(extent));
  if (step <= 0) throw UserError("unfold: step must be positive");
  std::vector<int64_t> sizes = self.sizes;
  if (self.rank() > 0) sizes[dim] = (extent - size) / step + 1;
  sizes.push_back(size);
  return {with_sizes(self, sizes)};
}

std::vector<TensorType> split_with_sizes(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() == 0) throw UserError("split_with_sizes: cannot split a 0-d tensor");
  int64_t dim = normalize_dim(shape::int_arg(node, "dim"), self.rank());
  std::vector<int64_t> splits = shape::ints_arg(node, "split_sizes");
  int64_t total = 0;
  for (int64_t s : splits) {
    if (s < 0) throw UserError("split_with_sizes: negative split size");
    total += s;
  }
  if (total != self.sizes[dim])
    throw UserError("split_with_sizes: sizes " + format_sizes(splits) + " do not sum to the dimension's size " + std::to_string(self.sizes[dim]));
  std::vector<TensorType> outs;
  for (int64_t s : splits) {
    std::vector<int64_t> sizes = self.sizes;
    sizes[dim] = s;
    outs.push_back(with_sizes(self, sizes));
  }
  return outs;
}

namespace {
// Legacy rule: 1-d empty tensors are skipped whatever the other shapes are.
bool is_legacy_empty(const TensorType& t) { return t.rank() == 1 && t.sizes[0] == 0; }
}  // namespace

std::vector<TensorType> cat(const Node& node) {
  const Arg& list = shape::arg(node, "tensors");
  if (list.tensors.empty()) throw UserError("cat: expected a non-empty list of tensors");
  // cat rejects 0-d inputs, so promotion is plain promote_types over all inputs.
  DType dtype = list.tensors[0]->type.dtype;
  const TensorType* first = nullptr;
  for (const Value* v : list.tensors) {
    dtype = promote_types(dtype, v->type.dtype);
    if (!first && !is_legacy_empty(v->type)) first = &v->type;
  }
  if (!first) return {make_type(dtype, {0})};
  if (first->rank() == 0) throw UserError("cat: zero-dimensional tensors cannot be concatenated");
  int64_t dim = normalize_dim(shape::int_arg(node, "dim"), first->rank());
  std::vector<int64_t> sizes = first->sizes;
  sizes[dim] = 0;
  for (const Value* v : list.tensors) {
    const TensorType& t = v->type;
    if (is_legacy_empty(t)) continue;
    bool compatible = t.rank() == first->rank();
    for (int64_t d = 0; compatible && d < first->rank(); ++d) compatible = d == dim || t.sizes[d] == first->sizes[d];
    if (!compatible)
      throw UserError("cat: sizes " + format_sizes(t.sizes) + " and " + format_sizes(first->sizes) + " must match except in dimension " + std::to_string(dim));
    sizes[dim] += t.sizes[dim];
  }
  return {make_type(dtype, sizes)};
}

std::vector<TensorType> repeat(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  std::vector<int64_t> repeats = shape::ints_arg(node, "repeats");
  int64_t lead = static_cast<int64_t>(repeats.size()) - self.rank();
  if (lead < 0) throw UserError("repeat: fewer repeats than the tensor's dims");
  for (int64_t r : repeats)
    if (r < 0) throw UserError("repeat: negative repeat count in " + format_sizes(repeats));
  std::vector<int64_t> sizes = repeats;
  for (int64_t d = 0; d < self.rank(); ++d) sizes[lead + d] *= self.sizes[d];
  return {with_sizes(self, sizes)};
}

// diff: `n` fewer elements along `dim` than self with prepend and append concatenated (none left
// when n is as large).
std::vector<TensorType> diff(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() == 0) throw UserError("diff expects a tensor of at least 1 dimension");
  const int64_t n = shape::int_arg(node, "n");
  if (n < 0) throw UserError("diff: order must be non-negative, got " + std::to_string(n));
  const size_t dim = static_cast<size_t>(shape::normalize_dim(shape::int_arg(node, "dim"), self.rank()));
  std::vector<int64_t> sizes = self.sizes;
  for (const char* name : {"prepend", "append"}) {
    if (shape::arg(node, name).is_none()) continue;
    const TensorType& extra = shape::tensor(node, name);
    if (extra.rank() != self.rank()) throw UserError(std::string("diff: ") + name + " must have the same rank as the input");
    sizes[dim] += extra.sizes[dim];
  }
  sizes[dim] = std::max<int64_t>(sizes[dim] - n, 0);
  return {with_sizes(self, sizes)};
}

// `pad` lists (before, after) pairs starting from the last dim; negative values crop.
std::vector<TensorType> constant_pad_nd(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  std::vector<int64_t> pad = shape::ints_arg(node, "pad");
  if (pad.size() % 2 != 0 || static_cast<int64_t>(pad.size()) > 2 * self.rank())
    throw UserError("constant_pad_nd: padding length " + std::to_string(pad.size()) + " is invalid for a tensor of rank " + std::to_string(self.rank()));
  std::vector<int64_t> sizes = self.sizes;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    int64_t& size = sizes[sizes.size() - 1 - i];
    size += pad[2 * i] + pad[2 * i + 1];
    if (size < 0) throw UserError("constant_pad_nd: padding gives a negative size");
  }
  return {with_sizes(self, sizes)};
}

namespace {

bool is_mask(const Value* index) { return index->type.dtype == DType::Bool || index->type.dtype == DType::UInt8; }

// Advanced indexing: the index tensors broadcast together; their shape replaces the indexed
// dims in place when those are adjacent, and goes first otherwise (NumPy's rule).
std::vector<int64_t> advanced_index_sizes(const TensorType& self, const std::vector<Value*>& indices) {
  std::vector<int64_t> index_shape;
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < static_cast<int64_t>(indices.size()); ++d) {
    const Value* index = indices[d];
    if (!index) continue;
    if (is_mask(index)) throw UserError("index: boolean mask indices have a data-dependent shape");
    if (!is_integral(index->type.dtype)) throw UserError("index: index tensors must be integers");
    index_shape = shape::broadcast_shapes(index_shape, index->type.sizes);
    if (first < 0) first = d;
    last = d;
  }
  if (first < 0) return self.sizes;
  bool adjacent = true;
  for (int64_t d = first; d <= last; ++d) adjacent = adjacent && indices[d];
  std::vector<int64_t> sizes;
  if (adjacent) {
    sizes.assign(self.sizes.begin(), self.sizes.begin() + first);
    sizes.insert(sizes.end(), index_shape.begin(), index_shape.end());
    sizes.insert(sizes.end(), self.sizes.begin() + last + 1, self.sizes.end());
  } else {
    sizes = index_shape;
    for (int64_t d = 0; d < self.rank(); ++d)
      if (d >= static_cast<int64_t>(indices.size()) || !indices[d]) sizes.push_back(self.sizes[d]);
  }
  return sizes;
}

const std::vector<Value*>& index_list(const Node& node, const TensorType& self, const char* op) {
  const auto& indices = shape::arg(node, "indices").tensors;
  if (static_cast<int64_t>(indices.size()) > self.rank())
    throw UserError(std::string(op) + ": too many indices for tensor of dimension " + std::to_string(self.rank()) +
                    " (got " + std::to_string(indices.size()) + ")");
  return indices;
}

// Whether `values` broadcast to `target` (index_put takes no extra leading dims, not even of size
// 1: PyTorch 2.11 refuses values [1, 8, 32] for a region [8, 32]).
bool broadcasts_to(const std::vector<int64_t>& values, const std::vector<int64_t>& target) {
  if (values.size() > target.size()) return false;
  for (size_t k = 1; k <= values.size(); ++k) {
    int64_t v = values[values.size() - k], t = target[target.size() - k];
    if (v != 1 && v != t) return false;
  }
  return true;
}

}  // namespace

std::vector<TensorType> index_tensor(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  return {with_sizes(self, advanced_index_sizes(self, index_list(node, self, "index")))};
}

// index_put writes `values` into self[indices]: they must broadcast to that region's shape (with a
// boolean mask the region's size is only known at run time; the lowering checks the rest).
std::vector<TensorType> index_put(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  const auto& indices = index_list(node, self, "index_put");
  bool masked = false;
  for (const Value* index : indices) {
    if (!index) continue;
    if (!is_integral(index->type.dtype) && !is_mask(index))
      throw UserError("index_put: tensors used as indices must be long, int, byte or bool tensors");
    masked = masked || is_mask(index);
  }
  const TensorType& values = shape::tensor(node, "values");
  if (!masked) {
    std::vector<int64_t> region = advanced_index_sizes(self, indices);
    if (!broadcasts_to(values.sizes, region))
      throw UserError("index_put: shape mismatch: value tensor of shape " + format_sizes(values.sizes) +
                      " cannot be broadcast to indexing result of shape " + format_sizes(region));
  }
  return {with_sizes(self, self.sizes)};
}

std::vector<TensorType> index_select(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  const TensorType& index = shape::tensor(node, "index");
  if (index.rank() > 1) throw UserError("index_select: index must be 0-d or 1-d");
  int64_t dim = normalize_dim(shape::int_arg(node, "dim"), self.rank());
  std::vector<int64_t> sizes = self.sizes;
  if (self.rank() > 0) sizes[dim] = product(index.sizes);
  return {with_sizes(self, sizes)};
}

std::vector<TensorType> embedding(const Node& node) {
  const TensorType& weight = shape::tensor(node, "weight");
  const TensorType& indices = shape::tensor(node, "indices");
  if (weight.rank() != 2) throw UserError("embedding: weight must be 2-d");
  std::vector<int64_t> sizes = indices.sizes;
  sizes.push_back(weight.sizes[1]);
  return {with_sizes(weight, sizes)};
}

// _embedding_bag(weight [V, D], indices [n], offsets [B or B+1], ...): (output [B, D], offset2bag,
// bag_size [B], max_indices), the last three of offsets' dtype and shaped as ATen's CPU kernel
// makes them (torch/_meta_registrations.py): offset2bag is empty on its summing fast path (a
// float32 weight, no padding_idx), max_indices [B, D] for mode max and [B] otherwise.
// _embedding_bag_forward_only (exported under torch.no_grad()) sizes bag_size as offsets.
std::vector<TensorType> embedding_bag(const Node& node) {
  const TensorType& weight = shape::tensor(node, "weight");
  const TensorType& indices = shape::tensor(node, "indices");
  const TensorType& offsets = shape::tensor(node, "offsets");
  if (weight.rank() != 2 || indices.rank() != 1 || offsets.rank() != 1)
    throw UserError("_embedding_bag: needs a 2-d weight and 1-d indices and offsets");
  if (!is_floating(weight.dtype)) throw UserError("_embedding_bag: the weight must be floating");
  int64_t mode = shape::int_arg(node, "mode");
  if (mode < 0 || mode > 2) throw UserError("_embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max)");
  int64_t bags = offsets.sizes[0] - (shape::bool_arg(node, "include_last_offset") ? 1 : 0);
  if (bags < 0) throw UserError("_embedding_bag: include_last_offset needs at least one offset");
  // embedding_bag (training IR) has no padding_idx, embedding_bag.padding_idx may give None.
  bool no_padding = !shape::has_arg(node, "padding_idx") || shape::arg(node, "padding_idx").is_none() ||
                    shape::int_arg(node, "padding_idx") < 0;
  bool fast_sum = mode == 0 && weight.dtype == DType::Float32 && no_padding;
  DType index_dtype = offsets.dtype;
  std::vector<int64_t> max_indices = {bags};
  if (mode == 2) max_indices.push_back(weight.sizes[1]);
  int64_t bag_sizes = node.target == "_embedding_bag_forward_only" ? offsets.sizes[0] : bags;
  return {make_type(weight.dtype, {bags, weight.sizes[1]}), make_type(index_dtype, {fast_sum ? 0 : indices.sizes[0]}),
          make_type(index_dtype, {bag_sizes}), make_type(index_dtype, max_indices)};
}

}  // namespace foundry::rules
