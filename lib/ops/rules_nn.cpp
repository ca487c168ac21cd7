// Shape rules of matrix products, convolution, pooling, resampling and normalization.
#include <algorithm>
#include <cmath>

#include "foundry/ops/einsum.h"
#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry::rules {
namespace {

using shape::format_sizes;
using shape::make_type;

void require_rank(const TensorType& t, int64_t rank, const char* what) {
  if (t.rank() != rank)
    throw UserError(std::string(what) + " must be " + std::to_string(rank) + "-d, got " + format_sizes(t.sizes));
}

void require_same_dtype(const TensorType& a, const TensorType& b, const char* op) {
  if (a.dtype != b.dtype)
    throw UserError(std::string(op) + ": operands must have the same dtype, got " +
                    std::string(dtype_name(a.dtype)) + " and " + std::string(dtype_name(b.dtype)));
}

void require_inner_match(int64_t a, int64_t b, const TensorType& x, const TensorType& y) {
  if (a != b) throw UserError("shapes " + format_sizes(x.sizes) + " and " + format_sizes(y.sizes) + " cannot be multiplied");
}

// A per-spatial-dim parameter (stride, padding...): a single value applies to every dim.
std::vector<int64_t> spatial_param(const Node& node, std::string_view name, size_t spatial, int64_t empty_default) {
  std::vector<int64_t> v = shape::ints_arg(node, name);
  if (v.empty()) v.assign(spatial, empty_default);
  if (v.size() == 1) v.assign(spatial, v[0]);
  if (v.size() != spatial)
    throw UserError("argument '" + std::string(name) + "' needs " + std::to_string(spatial) + " values, got " + format_sizes(v));
  return v;
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// ATen's pooling_output_shape: with ceil_mode the last window must start inside the input or
// its left padding.
int64_t pooling_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  if (stride <= 0) throw UserError("pooling: stride must be positive");
  if (pad > kernel / 2) throw UserError("pooling: padding should be at most half of the kernel size");
  int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = floor_div(span, stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  if (out <= 0) throw UserError("pooling: output size is too small for input size " + std::to_string(in));
  return out;
}

// Pools over the last two dims of a 3-d (C, H, W) or 4-d (N, C, H, W) input.
std::vector<int64_t> pool2d_sizes(const Node& node, const TensorType& self, bool has_dilation) {
  if (self.rank() != 3 && self.rank() != 4) throw UserError("pool2d: input must be 3-d or 4-d, got " + format_sizes(self.sizes));
  std::vector<int64_t> kernel = spatial_param(node, "kernel_size", 2, 0);
  std::vector<int64_t> stride = spatial_param(node, "stride", 2, 0);
  if (shape::ints_arg(node, "stride").empty()) stride = kernel;  // stride=[] means the kernel size
  std::vector<int64_t> padding = spatial_param(node, "padding", 2, 0);
  std::vector<int64_t> dilation = has_dilation ? spatial_param(node, "dilation", 2, 1) : std::vector<int64_t>{1, 1};
  bool ceil_mode = shape::bool_arg(node, "ceil_mode");
  std::vector<int64_t> sizes = self.sizes;
  for (size_t i = 0; i < 2; ++i) {
    int64_t& size = sizes[sizes.size() - 2 + i];
    size = pooling_output_size(size, kernel[i], padding[i], stride[i], dilation[i], ceil_mode);
  }
  return sizes;
}

std::vector<TensorType> outputs_for_schema(const Node& node, std::vector<TensorType> all) {
  if (node.op) all.resize(node.op->schema.returns.size());
  return all;
}

}  // namespace

std::vector<TensorType> mm(const Node& node) {
  const TensorType& a = shape::tensor(node, "self");
  const TensorType& b = shape::tensor(node, "mat2");
  require_rank(a, 2, "mm: self");
  require_rank(b, 2, "mm: mat2");
  require_inner_match(a.sizes[1], b.sizes[0], a, b);
  require_same_dtype(a, b, "mm");
  return {make_type(a.dtype, {a.sizes[0], b.sizes[1]})};
}

std::vector<TensorType> bmm(const Node& node) {
  const TensorType& a = shape::tensor(node, "self");
  const TensorType& b = shape::tensor(node, "mat2");
  require_rank(a, 3, "bmm: self");
  require_rank(b, 3, "bmm: mat2");
  if (a.sizes[0] != b.sizes[0]) throw UserError("bmm: batch sizes differ");
  require_inner_match(a.sizes[2], b.sizes[1], a, b);
  require_same_dtype(a, b, "bmm");
  return {make_type(a.dtype, {a.sizes[0], a.sizes[1], b.sizes[2]})};
}

// _grouped_mm and transformers' grouped_mm_fallback: [S, K] rows by [G, K, N] matrices, one per
// group, grouped by [G] offsets; _grouped_mm's other forms (batched, or groups along K) are refused.
std::vector<TensorType> grouped_mm(const Node& node) {
  const bool aten = node.target == "_grouped_mm";
  const TensorType& a = shape::tensor(node, aten ? "self" : "input");
  const TensorType& w = shape::tensor(node, aten ? "mat2" : "weight");
  if (aten && (shape::arg(node, "offs").is_none() || !shape::arg(node, "bias").is_none() ||
               !shape::arg(node, "out_dtype").is_none()))
    throw UserError("_grouped_mm: only offsets with no bias and no out_dtype (a mixture of experts' form) are supported");
  const TensorType& offs = shape::tensor(node, "offs");
  require_rank(a, 2, "grouped_mm: input");
  require_rank(w, 3, "grouped_mm: weight");
  require_rank(offs, 1, "grouped_mm: offs");
  require_inner_match(a.sizes[1], w.sizes[1], a, w);
  require_same_dtype(a, w, "grouped_mm");
  if (w.sizes[0] == 0) throw UserError("grouped_mm: no groups");
  if (offs.sizes[0] != w.sizes[0])
    throw UserError("grouped_mm: " + std::to_string(offs.sizes[0]) + " offsets for " + std::to_string(w.sizes[0]) + " groups");
  if (offs.dtype != DType::Int32 && offs.dtype != DType::Int64) throw UserError("grouped_mm: offsets must be integers");
  return {make_type(a.dtype, {a.sizes[0], w.sizes[2]})};
}

// The result of self + (a product of `sizes`): self must broadcast to the product's shape.
std::vector<TensorType> added_to_product(const TensorType& self, const TensorType& a, std::vector<int64_t> sizes,
                                         const char* op) {
  require_same_dtype(self, a, op);
  if (shape::broadcast_shapes(self.sizes, sizes) != sizes)
    throw UserError(std::string(op) + ": self " + format_sizes(self.sizes) + " does not broadcast to " + format_sizes(sizes));
  return {make_type(a.dtype, std::move(sizes))};
}

std::vector<TensorType> addmm(const Node& node) {
  const TensorType& a = shape::tensor(node, "mat1");
  const TensorType& b = shape::tensor(node, "mat2");
  require_rank(a, 2, "addmm: mat1");
  require_rank(b, 2, "addmm: mat2");
  require_inner_match(a.sizes[1], b.sizes[0], a, b);
  require_same_dtype(a, b, "addmm");
  return added_to_product(shape::tensor(node, "self"), a, {a.sizes[0], b.sizes[1]}, "addmm");
}

std::vector<TensorType> addmv(const Node& node) {
  const TensorType& a = shape::tensor(node, "mat");
  const TensorType& v = shape::tensor(node, "vec");
  require_rank(a, 2, "addmv: mat");
  require_rank(v, 1, "addmv: vec");
  require_inner_match(a.sizes[1], v.sizes[0], a, v);
  require_same_dtype(a, v, "addmv");
  return added_to_product(shape::tensor(node, "self"), a, {a.sizes[0]}, "addmv");
}

// addbmm: self + the sum over the batch of batch1[b] @ batch2[b].
std::vector<TensorType> addbmm(const Node& node) {
  const TensorType& a = shape::tensor(node, "batch1");
  const TensorType& b = shape::tensor(node, "batch2");
  require_rank(a, 3, "addbmm: batch1");
  require_rank(b, 3, "addbmm: batch2");
  if (a.sizes[0] != b.sizes[0]) throw UserError("addbmm: batch sizes differ");
  require_inner_match(a.sizes[2], b.sizes[1], a, b);
  require_same_dtype(a, b, "addbmm");
  return added_to_product(shape::tensor(node, "self"), a, {a.sizes[1], b.sizes[2]}, "addbmm");
}

// _cdist_forward: x1 [..., P, M] and x2 [..., R, M] give the distances [..., P, R] (batch dims
// broadcast).
std::vector<TensorType> cdist(const Node& node) {
  const TensorType& a = shape::tensor(node, "x1");
  const TensorType& b = shape::tensor(node, "x2");
  if (a.rank() < 2 || b.rank() < 2) throw UserError("cdist only supports at least 2D tensors");
  if (a.sizes.back() != b.sizes.back()) throw UserError("X1 and X2 must have the same number of columns");
  require_same_dtype(a, b, "cdist");
  if (!is_floating(a.dtype)) throw UserError("cdist only supports floating-point dtypes");
  std::vector<int64_t> sizes = shape::broadcast_shapes(std::vector<int64_t>(a.sizes.begin(), a.sizes.end() - 2),
                                                       std::vector<int64_t>(b.sizes.begin(), b.sizes.end() - 2));
  sizes.push_back(a.sizes[a.sizes.size() - 2]);
  sizes.push_back(b.sizes[b.sizes.size() - 2]);
  return {make_type(a.dtype, sizes)};
}

// torch.matmul: a 1-d operand is a row (left) or column (right) vector whose dim is dropped from
// the result; the dims before the last two broadcast.
std::vector<TensorType> matmul(const Node& node) {
  const TensorType& a = shape::tensor(node, "self");
  const TensorType& b = shape::tensor(node, "other");
  if (a.rank() == 0 || b.rank() == 0) throw UserError("matmul: both operands must be at least 1-d");
  require_same_dtype(a, b, "matmul");
  const int64_t k_a = a.sizes.back(), k_b = b.rank() == 1 ? b.sizes[0] : b.sizes[b.sizes.size() - 2];
  require_inner_match(k_a, k_b, a, b);
  std::vector<int64_t> batch = shape::broadcast_shapes(
      std::vector<int64_t>(a.sizes.begin(), a.sizes.end() - std::min<int64_t>(a.rank(), 2)),
      std::vector<int64_t>(b.sizes.begin(), b.sizes.end() - std::min<int64_t>(b.rank(), 2)));
  if (a.rank() >= 2) batch.push_back(a.sizes[a.sizes.size() - 2]);
  if (b.rank() >= 2) batch.push_back(b.sizes.back());
  return {make_type(a.dtype, batch)};
}

// einsum: the output subscripts' sizes (einsum::parse); the operands share one dtype.
std::vector<TensorType> einsum(const Node& node) {
  const Arg& list = shape::arg(node, "tensors");
  std::vector<std::vector<int64_t>> shapes;
  for (const Value* t : list.tensors) {
    if (!t) throw UserError("einsum(): an operand is None");
    if (t->type.dtype != list.tensors[0]->type.dtype) throw UserError("einsum(): operands must have the same dtype");
    shapes.push_back(t->type.sizes);
  }
  if (shapes.empty()) throw UserError("einsum(): must provide at least one operand");
  einsum::Equation eq = einsum::parse(node.arg("equation").s, shapes);
  std::vector<int64_t> sizes;
  for (char c : eq.output) sizes.push_back(eq.sizes.at(c));
  return {make_type(list.tensors[0]->type.dtype, sizes)};
}

// baddbmm: bmm(batch1, batch2), to which self broadcasts.
std::vector<TensorType> baddbmm(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  const TensorType& a = shape::tensor(node, "batch1");
  const TensorType& b = shape::tensor(node, "batch2");
  require_rank(a, 3, "baddbmm: batch1");
  require_rank(b, 3, "baddbmm: batch2");
  if (a.sizes[0] != b.sizes[0]) throw UserError("baddbmm: batch sizes differ");
  require_inner_match(a.sizes[2], b.sizes[1], a, b);
  require_same_dtype(a, b, "baddbmm");
  require_same_dtype(self, a, "baddbmm");
  std::vector<int64_t> sizes = {a.sizes[0], a.sizes[1], b.sizes[2]};
  if (shape::broadcast_shapes(self.sizes, sizes) != sizes)
    throw UserError("baddbmm: self " + format_sizes(self.sizes) + " does not broadcast to " + format_sizes(sizes));
  return {make_type(a.dtype, sizes)};
}

// _pdist_forward: the n (n - 1) / 2 distances between the rows of a 2-d input.
std::vector<TensorType> pdist(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() != 2) throw UserError("pdist only supports 2D tensors, got: " + std::to_string(self.rank()) + "D");
  if (!is_floating(self.dtype)) throw UserError("pdist only supports floating-point dtypes");
  return {make_type(self.dtype, {self.sizes[0] * (self.sizes[0] - 1) / 2})};
}

// _trilinear: each input with size-1 dims inserted at its expand dims (all reach one rank),
// multiplied with broadcasting and summed over sumdim (which is dropped).
std::vector<TensorType> trilinear(const Node& node) {
  std::vector<int64_t> sizes;
  for (const char* k : {"1", "2", "3"}) {
    std::vector<int64_t> s = shape::tensor(node, std::string("i") + k).sizes;
    std::vector<int64_t> dims = shape::ints_arg(node, std::string("expand") + k);
    std::sort(dims.begin(), dims.end());
    for (int64_t d : dims) {
      if (d < 0 || d > static_cast<int64_t>(s.size())) throw UserError("_trilinear: expand dim out of range");
      s.insert(s.begin() + d, 1);
    }
    if (!sizes.empty() && s.size() != sizes.size()) throw UserError("_trilinear: the expanded inputs differ in rank");
    sizes = shape::broadcast_shapes(sizes, s);
  }
  std::vector<bool> summed(sizes.size(), false);
  for (int64_t d : shape::ints_arg(node, "sumdim")) summed[static_cast<size_t>(shape::normalize_dim(d, static_cast<int64_t>(sizes.size())))] = true;
  std::vector<int64_t> out;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (!summed[d]) out.push_back(sizes[d]);
  return {make_type(shape::tensor(node, "i1").dtype, out)};
}

// input [..., in] times weight [out, in]^T (a 1-d weight [in] drops the last dim).
std::vector<TensorType> linear(const Node& node) {
  const TensorType& input = shape::tensor(node, "input");
  const TensorType& weight = shape::tensor(node, "weight");
  if (input.rank() == 0 || weight.rank() == 0 || weight.rank() > 2) throw UserError("linear: bad operand ranks");
  require_inner_match(input.sizes.back(), weight.sizes.back(), input, weight);
  std::vector<int64_t> sizes(input.sizes.begin(), input.sizes.end() - 1);
  if (weight.rank() == 2) sizes.push_back(weight.sizes[0]);
  return {make_type(input.dtype, sizes)};
}

// query [..., L, E], key [..., S, E], value [..., S, Ev] -> [..., L, Ev].
std::vector<TensorType> scaled_dot_product_attention(const Node& node) {
  const TensorType& q = shape::tensor(node, "query");
  const TensorType& k = shape::tensor(node, "key");
  const TensorType& v = shape::tensor(node, "value");
  if (q.rank() < 2 || k.rank() < 2 || v.rank() < 2) throw UserError("scaled_dot_product_attention: operands must be at least 2-d");
  require_inner_match(q.sizes.back(), k.sizes.back(), q, k);
  std::vector<int64_t> sizes = q.sizes;
  sizes.back() = v.sizes.back();
  return {make_type(q.dtype, sizes)};
}

// query [N, L, E], key_t [N, E, S], value [N, S, Ev] -> [N, L, Ev].
std::vector<TensorType> foundry_attention(const Node& node) {
  const TensorType& q = shape::tensor(node, "query");
  const TensorType& kt = shape::tensor(node, "key_t");
  const TensorType& v = shape::tensor(node, "value");
  if (q.rank() != 3 || kt.rank() != 3 || v.rank() != 3) throw UserError("_foundry_attention: operands must be 3-d");
  if (kt.sizes[0] != q.sizes[0] || v.sizes[0] != q.sizes[0] || kt.sizes[1] != q.sizes[2] || v.sizes[1] != kt.sizes[2])
    throw UserError("_foundry_attention: query " + format_sizes(q.sizes) + ", key_t " + format_sizes(kt.sizes) +
                    " and value " + format_sizes(v.sizes) + " do not match");
  if (kt.dtype != q.dtype || v.dtype != q.dtype) throw UserError("_foundry_attention: operands of different dtypes");
  const Arg& mask = shape::arg(node, "mask");
  if (!mask.is_none()) {
    // The scores' shape before the batch was folded: [batch dims..., L, S], batch dims multiplying to N.
    const TensorType& m = shape::tensor(node, "mask");
    const bool fits = m.rank() >= 2 && m.sizes[m.rank() - 2] == q.sizes[1] && m.sizes.back() == kt.sizes[2] &&
                      shape::product(std::vector<int64_t>(m.sizes.begin(), m.sizes.end() - 2)) == q.sizes[0];
    if (!fits || m.dtype != q.dtype)
      throw UserError("_foundry_attention: the mask " + format_sizes(m.sizes) + " is not the scores' shape");
  }
  return {make_type(q.dtype, {q.sizes[0], q.sizes[1], v.sizes[2]})};
}

namespace {

// input [N, C, *spatial] (conv2d also takes unbatched [C, H, W]); transposed: weight [C, O/G, *k].
std::vector<TensorType> convolution_of(const Node& node, bool transposed) {
  const TensorType& input = shape::tensor(node, "input");
  const TensorType& weight = shape::tensor(node, "weight");
  bool unbatched = input.rank() == weight.rank() - 1;
  std::vector<int64_t> in = input.sizes;
  if (unbatched) in.insert(in.begin(), 1);
  if (weight.rank() < 3 || static_cast<int64_t>(in.size()) != weight.rank())
    throw UserError("convolution: input " + format_sizes(input.sizes) + " does not match weight " + format_sizes(weight.sizes));
  size_t spatial = weight.rank() - 2;
  std::vector<int64_t> stride = spatial_param(node, "stride", spatial, 1);
  std::vector<int64_t> padding = spatial_param(node, "padding", spatial, 0);
  std::vector<int64_t> dilation = spatial_param(node, "dilation", spatial, 1);
  int64_t groups = shape::int_arg(node, "groups");
  if (groups <= 0) throw UserError("convolution: groups must be positive");
  // Parameters come from the file: size arithmetic on them must not overflow (found by fuzzing).
  auto mul = [](int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) throw UserError("convolution: sizes or parameters are too large");
    return r;
  };
  auto add = [](int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) throw UserError("convolution: sizes or parameters are too large");
    return r;
  };
  for (size_t i = 0; i < spatial; ++i)
    if (stride[i] < 1 || dilation[i] < 1 || padding[i] < 0)
      throw UserError("convolution: stride and dilation must be positive and padding not negative");
  int64_t in_channels = transposed ? weight.sizes[0] : mul(weight.sizes[1], groups);
  if (in[1] != in_channels)
    throw UserError("convolution: expected " + std::to_string(in_channels) + " input channels, got " + std::to_string(in[1]));
  std::vector<int64_t> sizes = {in[0], transposed ? mul(weight.sizes[1], groups) : weight.sizes[0]};
  std::vector<int64_t> output_padding(spatial, 0);
  if (transposed) output_padding = spatial_param(node, "output_padding", spatial, 0);
  for (int64_t p : output_padding)
    if (p < 0) throw UserError("convolution: output_padding must not be negative");
  for (size_t i = 0; i < spatial; ++i) {
    int64_t k = add(mul(dilation[i], weight.sizes[2 + i] - 1), 1);  // the dilated kernel's extent
    int64_t padded = add(in[2 + i], mul(2, padding[i]));
    int64_t out = transposed ? add(add(mul(in[2 + i] - 1, stride[i]), -mul(2, padding[i])), add(k, output_padding[i]))
                             : add(padded, -k) / stride[i] + 1;
    if (out <= 0 || (!transposed && padded < k))
      throw UserError("convolution: kernel " + format_sizes(weight.sizes) + " is larger than the padded input " + format_sizes(input.sizes));
    sizes.push_back(out);
  }
  if (unbatched) sizes.erase(sizes.begin());
  return {make_type(input.dtype, sizes)};
}

}  // namespace

// convolution, conv1d and conv2d.
std::vector<TensorType> convolution(const Node& node) {
  return convolution_of(node, shape::has_arg(node, "transposed") && shape::bool_arg(node, "transposed"));
}

// conv_transpose1d, conv_transpose2d.input: a transposed convolution.
std::vector<TensorType> conv_transpose(const Node& node) { return convolution_of(node, true); }

// lstm.input, gru.input: the output [T, B, D*H] ([B, T, D*H] batch first, [T, D*H] unbatched),
// then the last hidden state (and for the LSTM the last cell state) of hx's shape [L*D, B, H].
std::vector<TensorType> recurrent(const Node& node) {
  const TensorType& input = shape::tensor(node, "input");
  const Arg& hx = shape::arg(node, "hx");
  const bool lstm = hx.kind == Arg::Kind::TensorList;
  if (lstm && (hx.tensors.size() != 2 || !hx.tensors[0] || !hx.tensors[1]))
    throw UserError("lstm: hx must hold h0 and c0");
  const TensorType& h0 = lstm ? hx.tensors[0]->type : shape::tensor(node, "hx");
  const int64_t directions = shape::bool_arg(node, "bidirectional") ? 2 : 1;
  const int64_t layers = shape::int_arg(node, "num_layers");
  if (input.rank() != 2 && input.rank() != 3) throw UserError("rnn: input must be 2-d or 3-d, got " + format_sizes(input.sizes));
  if (h0.rank() != input.rank() || h0.sizes[0] != layers * directions)
    throw UserError("rnn: hx " + format_sizes(h0.sizes) + " does not fit " + std::to_string(layers) + " layers of " +
                    std::to_string(directions) + " directions");
  std::vector<int64_t> out = input.sizes;
  out.back() = directions * h0.sizes.back();
  std::vector<TensorType> types = {make_type(input.dtype, out), make_type(h0.dtype, h0.sizes)};
  if (lstm) types.push_back(hx.tensors[1]->type);
  // PyTorch 2.11's export records the batch-first states of lstm.input as [L*D, 1, B, H] (its
  // decomposition, which the exported program runs, gives that shape; eager gives [L*D, B, H]):
  // the graph's readers were traced with it, so it is taken as recorded.
  for (size_t i = 1; i < types.size() && i < node.outputs.size(); ++i) {
    std::vector<int64_t> recorded = node.outputs[i]->type.sizes;
    if (recorded.size() == 4 && recorded[1] == 1) {
      recorded.erase(recorded.begin() + 1);
      if (recorded == types[i].sizes) types[i] = make_type(types[i].dtype, node.outputs[i]->type.sizes);
    }
  }
  return types;
}

// conv1d.padding, conv2d.padding: "valid" is no padding; "same" keeps the spatial sizes (stride 1
// only, as in ATen), padding dilation * (kernel - 1) in all, the odd one on the right.
std::vector<TensorType> convolution_padding_mode(const Node& node) {
  const TensorType& input = shape::tensor(node, "input");
  const TensorType& weight = shape::tensor(node, "weight");
  const std::string& mode = node.arg("padding").s;
  if (weight.rank() < 3 || (input.rank() != weight.rank() && input.rank() != weight.rank() - 1))
    throw UserError("convolution: input " + format_sizes(input.sizes) + " does not match weight " + format_sizes(weight.sizes));
  const size_t spatial = weight.rank() - 2;
  const std::vector<int64_t> stride = spatial_param(node, "stride", spatial, 1);
  const std::vector<int64_t> dilation = spatial_param(node, "dilation", spatial, 1);
  std::vector<int64_t> sizes = input.sizes;
  const size_t first = sizes.size() - spatial;
  for (size_t i = 0; i < spatial; ++i) {
    if (stride[i] < 1 || dilation[i] < 1) throw UserError("convolution: stride and dilation must be positive");
    if (mode == "same" && stride[i] != 1) throw UserError("padding='same' is not supported for strided convolutions");
    const int64_t extent = dilation[i] * (weight.sizes[2 + i] - 1) + 1;
    if (mode == "valid") sizes[first + i] = (sizes[first + i] - extent) / stride[i] + 1;
    if (sizes[first + i] < 1) throw UserError("convolution: the kernel is larger than the input " + format_sizes(input.sizes));
  }
  sizes[first - 1] = weight.sizes[0];
  return {make_type(input.dtype, sizes)};
}

// max_pool2d (values) and max_pool2d_with_indices (values, int64 indices).
std::vector<TensorType> max_pool2d(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  std::vector<int64_t> sizes = pool2d_sizes(node, self, true);
  return outputs_for_schema(node, {make_type(self.dtype, sizes), make_type(DType::Int64, sizes)});
}

std::vector<TensorType> avg_pool2d(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  return {make_type(self.dtype, pool2d_sizes(node, self, false))};
}

std::vector<TensorType> adaptive_avg_pool2d(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() != 3 && self.rank() != 4) throw UserError("adaptive_avg_pool2d: input must be 3-d or 4-d");
  std::vector<int64_t> out = spatial_param(node, "output_size", 2, 0);
  std::vector<int64_t> sizes = self.sizes;
  sizes[sizes.size() - 2] = out[0];
  sizes[sizes.size() - 1] = out[1];
  return {make_type(self.dtype, sizes)};
}

std::vector<TensorType> adaptive_avg_pool1d(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() != 2 && self.rank() != 3) throw UserError("adaptive_avg_pool1d: input must be 2-d or 3-d");
  std::vector<int64_t> sizes = self.sizes;
  sizes.back() = spatial_param(node, "output_size", 1, 0)[0];
  return {make_type(self.dtype, sizes)};
}

// adaptive_avg_pool3d over the last three dims of a 4-d or 5-d input.
std::vector<TensorType> adaptive_avg_pool3d(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() != 4 && self.rank() != 5) throw UserError("adaptive_avg_pool3d: input must be 4-d or 5-d");
  std::vector<int64_t> sizes = self.sizes, out = spatial_param(node, "output_size", 3, 0);
  std::copy(out.begin(), out.end(), sizes.end() - 3);
  return {make_type(self.dtype, sizes)};
}

// avg_pool1d, max_pool1d: pooling over the last dim of a 2-d (C, L) or 3-d (N, C, L) input.
std::vector<TensorType> pool1d(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  if (self.rank() != 2 && self.rank() != 3)
    throw UserError(node.target + ": input must be 2-d or 3-d, got " + format_sizes(self.sizes));
  const int64_t kernel = spatial_param(node, "kernel_size", 1, 0)[0];
  const int64_t stride = spatial_param(node, "stride", 1, kernel)[0];  // stride=[] means the kernel size
  const int64_t dilation = shape::has_arg(node, "dilation") ? spatial_param(node, "dilation", 1, 1)[0] : 1;
  std::vector<int64_t> sizes = self.sizes;
  sizes.back() = pooling_output_size(sizes.back(), kernel, spatial_param(node, "padding", 1, 0)[0], stride, dilation,
                                     shape::bool_arg(node, "ceil_mode"));
  return {make_type(self.dtype, sizes)};
}

// max_pool2d_with_indices_backward: the gradient of self, from grad_output and the indices of
// the forward pooling (both of the pooled shape).
std::vector<TensorType> max_pool2d_backward(const Node& node) {
  const TensorType& self = shape::tensor(node, "self");
  const TensorType& grad = shape::tensor(node, "grad_output");
  if (self.rank() != 3 && self.rank() != 4) throw UserError("max_pool2d_with_indices_backward: self must be 3-d or 4-d");
  if (grad.sizes != shape::tensor(node, "indices").sizes || grad.rank() != self.rank())
    throw UserError("max_pool2d_with_indices_backward: grad_output and indices must have the pooled shape");
  return {make_type(self.dtype, self.sizes)};
}

// adaptive_max_pool2d: the pooled values and their int64 positions in the input plane.
std::vector<TensorType> adaptive_max_pool2d(const Node& node) {
  std::vector<TensorType> types = adaptive_avg_pool2d(node);
  types.push_back(make_type(DType::Int64, types[0].sizes));
  return types;
}

// upsample_*2d.vec: output_size if given, else floor(size * scale) per spatial dim.
std::vector<TensorType> upsample2d(const Node& node) {
  const TensorType& input = shape::tensor(node, "input");
  require_rank(input, 4, "upsample2d: input");
  const Arg& output_size = shape::arg(node, "output_size");
  const Arg& scales = shape::arg(node, "scale_factors");
  std::vector<int64_t> sizes = input.sizes;
  if (!output_size.is_none()) {
    if (output_size.ints.size() != 2) throw UserError("upsample2d: output_size needs 2 values");
    sizes[2] = output_size.ints[0];
    sizes[3] = output_size.ints[1];
  } else if (scales.kind == Arg::Kind::FloatList && scales.floats.size() == 2) {
    for (size_t i = 0; i < 2; ++i)
      sizes[2 + i] = static_cast<int64_t>(std::floor(static_cast<double>(input.sizes[2 + i]) * scales.floats[i]));
  } else {
    throw UserError("upsample2d: needs output_size or 2 scale_factors");
  }
  return {make_type(input.dtype, sizes)};
}

// (out, mean, rstd); mean and rstd keep the normalized dims as size 1.
std::vector<TensorType> native_layer_norm(const Node& node) {
  const TensorType& input = shape::tensor(node, "input");
  std::vector<int64_t> normalized = shape::ints_arg(node, "normalized_shape");
  int64_t outer = input.rank() - static_cast<int64_t>(normalized.size());
  if (outer < 0 || !std::equal(normalized.begin(), normalized.end(), input.sizes.begin() + outer))
    throw UserError("native_layer_norm: normalized_shape " + format_sizes(normalized) + " does not end input " + format_sizes(input.sizes));
  std::vector<int64_t> stat_sizes = input.sizes;
  std::fill(stat_sizes.begin() + outer, stat_sizes.end(), 1);
  return {make_type(input.dtype, input.sizes), make_type(input.dtype, stat_sizes), make_type(input.dtype, stat_sizes)};
}

// (out, mean [N, group], rstd [N, group]).
std::vector<TensorType> native_group_norm(const Node& node) {
  const TensorType& input = shape::tensor(node, "input");
  int64_t n = shape::int_arg(node, "N"), c = shape::int_arg(node, "C"), group = shape::int_arg(node, "group");
  if (group <= 0 || c % group != 0) throw UserError("native_group_norm: channels must divide into groups");
  TensorType stats = make_type(input.dtype, {n, group});
  return {make_type(input.dtype, input.sizes), stats, stats};
}

// group_norm: the input's shape; its channels (dim 1) must divide into the groups.
std::vector<TensorType> group_norm(const Node& node) {
  const TensorType& input = shape::tensor(node, "input");
  const int64_t groups = shape::int_arg(node, "num_groups");
  if (input.rank() < 2) throw UserError("group_norm: input must have at least 2 dims, got " + format_sizes(input.sizes));
  if (groups <= 0 || input.sizes[1] % groups != 0)
    throw UserError("group_norm: " + std::to_string(input.sizes[1]) + " channels do not divide into " + std::to_string(groups) + " groups");
  return {make_type(input.dtype, input.sizes)};
}

// _weight_norm(v, g, dim): v's shape; g holds one scale per index of v's dim `dim` (-1: one).
std::vector<TensorType> weight_norm(const Node& node) {
  const TensorType& v = shape::tensor(node, "v");
  const TensorType& g = shape::tensor(node, "g");
  const int64_t dim = shape::int_arg(node, "dim");
  if (dim != -1) shape::normalize_dim(dim, v.rank());
  if (g.dtype != v.dtype) throw UserError("_weight_norm: v and g must have the same dtype");
  if (g.rank() > v.rank()) throw UserError("_weight_norm: g " + format_sizes(g.sizes) + " has more dims than v " + format_sizes(v.sizes));
  return {make_type(v.dtype, v.sizes)};
}

// grid_sampler_2d(input [N, C, H, W], grid [N, Ho, Wo, 2], ...) -> [N, C, Ho, Wo].
std::vector<TensorType> grid_sampler_2d(const Node& node) {
  const TensorType& input = shape::tensor(node, "input");
  const TensorType& grid = shape::tensor(node, "grid");
  require_rank(input, 4, "grid_sampler_2d: input");
  require_rank(grid, 4, "grid_sampler_2d: grid");
  if (grid.sizes[0] != input.sizes[0] || grid.sizes[3] != 2)
    throw UserError("grid_sampler_2d: grid " + format_sizes(grid.sizes) + " does not fit input " + format_sizes(input.sizes) +
                    " (expected [N, H, W, 2] with the input's N)");
  if (grid.dtype != input.dtype) throw UserError("grid_sampler_2d: input and grid must have the same dtype");
  return {make_type(input.dtype, {input.sizes[0], input.sizes[1], grid.sizes[1], grid.sizes[2]})};
}

namespace {

// A batch norm's input, checked with the per-channel parameters of these names that are present:
// they must be vectors of the channel count (found by fuzzing: a weight of another shape used to
// reach the lowering).
const TensorType& batch_norm_input(const Node& node, std::initializer_list<const char*> params) {
  const TensorType& input = shape::tensor(node, "input");
  if (input.rank() < 2) throw UserError("batch_norm: input must have at least 2 dims");
  for (const char* name : params) {
    const Arg& a = node.arg(name);
    if (a.kind != Arg::Kind::Tensor) continue;
    const TensorType& t = a.tensor->type;
    if (t.rank() != 1 || t.sizes[0] != input.sizes[1])
      throw UserError(std::string("batch_norm: ") + name + " must have shape [" + std::to_string(input.sizes[1]) + "]");
  }
  return input;
}

}  // namespace

// Inference batch norm: (out, and two empty saved-statistics outputs).
std::vector<TensorType> batch_norm_no_training(const Node& node) {
  const TensorType& input = batch_norm_input(node, {"weight", "bias", "running_mean", "running_var"});
  return {make_type(input.dtype, input.sizes), make_type(input.dtype, {0}), make_type(input.dtype, {0})};
}

// Batch norm with the batch's statistics (no running ones; InstanceNorm exports as this over a
// [1, N*C, ...] view): (out, save_mean [C], save_invstd [C]).
std::vector<TensorType> batch_norm_batch_stats(const Node& node) {
  const TensorType& input = batch_norm_input(node, {"weight", "bias"});
  TensorType stats = make_type(input.dtype, {input.sizes[1]});
  return {make_type(input.dtype, input.sizes), stats, stats};
}

// The functional forms of _native_batch_norm_legit and _batch_norm_with_update: the output, the
// batch mean and 1/std ([0] when not training), (with_update: an empty uint8 reserve,) then the
// updated running mean and variance.
std::vector<TensorType> batch_norm_functional(const Node& node) {
  std::vector<TensorType> types = batch_norm_no_training(node);
  const TensorType& input = shape::tensor(node, "input");
  const bool training = !shape::has_arg(node, "training") || shape::bool_arg(node, "training");
  const TensorType channels = make_type(input.dtype, {input.sizes[1]});
  if (training) types[1] = types[2] = channels;
  if (!shape::has_arg(node, "training")) types.push_back(make_type(DType::UInt8, {0}));
  types.push_back(channels);
  types.push_back(channels);
  return types;
}

}  // namespace foundry::rules
