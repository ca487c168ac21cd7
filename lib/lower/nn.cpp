// Neural-network ops: matrix products and convolutions (extern kernels for float32, bfloat16 and
// float16, reductions otherwise), pooling and upsampling (reductions and pointwise gathers with ATen's index math).
#include <algorithm>
#include <cmath>
#include <limits>

#include "lower/lowerings.h"
#include "lower/util.h"

namespace foundry::lower {

using ir::BinaryOp;
using ir::ReduceOp;
using ir::Scalar;
using ir::UnaryOp;

namespace {

// --- small helpers ---------------------------------------------------------------------------

Scalar int_scalar(int64_t v, DType t = DType::Int64) {
  Scalar s;
  s.dtype = t;
  s.i = v;
  return s;
}

Val index_val(Ops& ops, const Expr& e) { return ops.index_expr(e, DType::Int64); }

// A size as an int64 value: a constant when static.
Val size_val(Ops& ops, const Expr& size) {
  return size.is_const() ? ops.constant(int_scalar(size.const_value())) : index_val(ops, size);
}

// 0 <= v < size as a bool value.
Val in_range(Ops& ops, Val v, const Expr& size) {
  Val lo = ops.binary(BinaryOp::Ge, v, ops.constant(int_scalar(0)));
  Val hi = ops.binary(BinaryOp::Lt, v, size_val(ops, size));
  return ops.binary(BinaryOp::LogicalAnd, lo, hi);
}

Val in_range(Ops& ops, const Expr& e, const Expr& size) { return in_range(ops, index_val(ops, e), size); }

Val logical_and(Ops& ops, std::optional<Val> a, Val b) {
  return a ? ops.binary(BinaryOp::LogicalAnd, *a, b) : b;
}

// The smallest value of a dtype (-inf for floating types): the identity of max.
Scalar lowest(DType t) {
  if (is_floating(t)) return Scalar::of(-std::numeric_limits<double>::infinity(), t);
  switch (t) {
    case DType::Bool: case DType::UInt8: return int_scalar(0, t);
    case DType::Int8: return int_scalar(std::numeric_limits<int8_t>::min(), t);
    case DType::Int16: return int_scalar(std::numeric_limits<int16_t>::min(), t);
    case DType::Int32: return int_scalar(std::numeric_limits<int32_t>::min(), t);
    default: return int_scalar(std::numeric_limits<int64_t>::min(), t);
  }
}

Scalar zero(DType t) { return Scalar::of(0, t); }

// An int list argument expanded to `n` entries (a single value repeats, as int[2] does in ATen);
// an empty list gives `fallback`.
std::vector<int64_t> spatial_arg(LoweringContext& ctx, const Node& node, const std::string& name, size_t n,
                                 const std::vector<int64_t>& fallback = {}) {
  std::vector<int64_t> v = is_none(node, name) ? std::vector<int64_t>{} : ints_arg(node, name);
  if (v.empty()) v = fallback;
  if (v.size() == 1 && n > 1) v.assign(n, v[0]);
  if (v.size() != n) ctx.fail("argument '" + name + "' must have " + std::to_string(n) + " entries");
  return v;
}

// Sizes whose dims from `first` on must be static (spatial dims, channels); the dims before it
// (the batch) may be dynamic and read as -1, which no caller uses.
std::vector<int64_t> static_from(const std::vector<Expr>& sizes, size_t first) {
  std::vector<int64_t> out(sizes.size(), -1);
  for (size_t d = first; d < sizes.size(); ++d) {
    if (!sizes[d].is_const())
      throw DynamicShapeUnsupported("needs a static size in dim " + std::to_string(d) + ", and it is " +
                                    ir::to_string(sizes[d]) + " (only the leading dims may be dynamic)");
    out[d] = sizes[d].const_value();
  }
  return out;
}

// A lazy row-major reshape of `src`.
TensorRef reshaped(const TensorRef& src, const std::vector<Expr>& sizes) {
  std::vector<Expr> src_sizes = src.sizes;
  if (src_sizes == sizes) return src;
  Loader inner = src.load;
  return LoweringContext::pointwise(src.dtype, sizes, [inner, sizes, src_sizes](Ops& ops, const Index& idx) {
    Expr flat = 0;
    for (size_t d = 0; d < idx.size(); ++d) flat = flat * sizes[d] + idx[d];
    Index s(src_sizes.size());
    for (size_t d = src_sizes.size(); d-- > 0;) {
      if (d == 0) {
        s[d] = flat;
      } else {
        s[d] = ir::mod(flat, src_sizes[d]);
        flat = ir::floordiv(flat, src_sizes[d]);
      }
    }
    return inner(ops, s);
  });
}

// --- matrix products ---------------------------------------------------------------------------

// Whether a matrix product or convolution of `dtype` (all operands of it) is a library call:
// float32, and 16-bit floats, which oneDNN accumulates in float32 with one rounding of each result.
bool library_dtype(DType dtype, std::initializer_list<DType> operands) {
  bool taken = dtype == DType::Float32 || dtype == DType::BFloat16 || dtype == DType::Float16;
  for (DType t : operands) taken = taken && t == dtype;
  return taken;
}

// The type products of `dtype` are summed in: float32 for 16-bit floats (as PyTorch's CPU kernels
// do, rounding only the result), else the dtype itself.
DType accumulation_dtype(DType dtype) {
  return dtype == DType::BFloat16 || dtype == DType::Float16 ? DType::Float32 : dtype;
}

// sum_k a[..., m, k] * b[..., k, n] as a reduction (dtypes without a library call).
TensorRef matmul_reduction(LoweringContext& ctx, const TensorRef& a, const TensorRef& b, DType dtype,
                           std::vector<Expr> sizes) {
  DType acc = accumulation_dtype(dtype);
  TensorRef x = cast(cast(a, dtype), acc), y = cast(cast(b, dtype), acc);
  Loader lx = x.load, ly = y.load;
  Expr K = a.sizes.back();
  TensorRef sum = ctx.reduction(acc, std::move(sizes), {K}, ReduceOp::Sum, [lx, ly](Ops& ops, const Index& idx, const Index& r) {
    size_t n = idx.size();
    Index ia(idx.begin(), idx.end()), ib(idx.begin(), idx.end());
    ia[n - 1] = r[0];  // [..., m, k]
    ib[n - 2] = r[0];  // [..., k, n]
    Val x = lx(ops, ia);
    Val y = ly(ops, ib);
    return ops.mul(x, y);
  });
  return cast(sum, dtype);
}

TensorRef scaled(const TensorRef& x, double factor) {
  if (factor == 1.0) return x;
  DType t = x.dtype;
  Scalar f = Scalar::of(factor, t);
  return map1(x, t, t, [f](Ops& ops, Val v) { return ops.mul(v, ops.constant(f)); });
}

// A batched operand [B, M, K] whose batch is the outermost dim in memory and whose matrices are
// row- or column-major. Other views (e.g. attention heads sliced out of [T, B*H, D] projections)
// would make oneDNN fall back to its reference kernel, far slower than copying them first. With
// dynamic sizes the strides must be those expressions exactly.
bool plain_batched_layout(const ir::Operand& op) {
  if (op.sizes.size() != 3) return true;
  const Expr &M = op.sizes[1], &K = op.sizes[2];
  const std::vector<Expr>& s = op.strides;
  bool matrix = (s[1] == K && s[2].is_const(1)) || (s[1].is_const(1) && s[2] == M);
  Expr plain = ir::simplify(M * K, {});
  bool batch = op.sizes[0].is_const(1) || s[0] == plain ||
               (s[0].is_const() && plain.is_const() && s[0].const_value() >= plain.const_value());
  return matrix && batch;
}

// A matrix (the last two dims of `op`) that cuBLAS reads in place: one unit stride (or a single
// row or column) and the other at least the extent it steps over, all strides known when
// compiling. Views with dynamic strides are taken when one of them is 1 (cuBLAS's own check runs
// with the call's sizes).
bool cublas_matrix_layout(const ir::Operand& op) {
  size_t n = op.sizes.size();
  if (n < 2) return true;
  const Expr &rows = op.sizes[n - 2], &cols = op.sizes[n - 1], &rs = op.strides[n - 2], &cs = op.strides[n - 1];
  bool dense_cols = cs.is_const(1) || cols.is_const(1), dense_rows = rs.is_const(1) || rows.is_const(1);
  auto at_least = [](const Expr& stride, const Expr& extent) {
    return !stride.is_const() || !extent.is_const() || stride.const_value() >= extent.const_value();
  };
  for (size_t d = 0; d + 2 < n; ++d)
    if (!op.strides[d].is_const()) return false;
  return (dense_cols && at_least(rs, cols)) || (dense_rows && at_least(cs, rows));
}

// A matrix operand the target's library reads in place: any view for oneDNN's 2-d products,
// cuBLAS's layouts on the GPU; else a contiguous copy.
ir::Operand matrix_operand(LoweringContext& ctx, const TensorRef& ref) {
  ir::Operand op = ctx.strided_operand(ref);
  if (!ctx.libraries().strided_batches || cublas_matrix_layout(op)) return op;
  TensorRef copy = ref;
  copy.buffer = nullptr;
  return ctx.strided_operand(ctx.realize_operand_copy(copy));
}

// `ref` as a batched operand the library reads; `op` is ctx.strided_operand(ref).
ir::Operand batched_operand(LoweringContext& ctx, const TensorRef& ref, ir::Operand op) {
  if (ctx.libraries().strided_batches ? cublas_matrix_layout(op) : plain_batched_layout(op)) return op;
  if (op.strides[0].is_const(0) && !op.sizes[0].is_const(1)) {
    // One matrix for every batch entry (a weight expanded over the batch): copy that matrix
    // once, row-major, and keep the batch a broadcast (stride 0).
    Loader load = ref.load;
    TensorRef one = LoweringContext::pointwise(ref.dtype, {Expr(1), ref.sizes[1], ref.sizes[2]},
                                               [load](Ops& ops, const Index& idx) { return load(ops, idx); });
    ir::Operand copied = ctx.strided_operand(ctx.realize_operand_copy(one));
    copied.sizes = op.sizes;
    copied.strides[0] = Expr(0);
    return copied;
  }
  TensorRef copy = ref;
  copy.buffer = nullptr;  // a contiguous copy, even of a buffer's own (strided) view
  return ctx.strided_operand(ctx.realize_operand_copy(copy));
}

// Whether the batch of a batched operand [B, M, K] with unit column stride continues its rows:
// [B*M, K] with the same row stride is the same memory.
bool batch_continues_rows(const ir::Operand& op) {
  return op.strides[2].is_const(1) && op.strides[0] == ir::simplify(op.sizes[1] * op.strides[1], {});
}

// out[b] = a[b] @ w for one matrix w broadcast over the batch (batch stride 0): ATen's matmul
// makes this of a linear layer whose input it cannot fold into rows without a copy (a permuted
// sequence, as nn.MultiheadAttention's in-projection gets). Here a is copied contiguous if need be
// (the batched call would copy it too), its batch folds into its rows, and the call is one product
// [B*M, K] x [K, N] reading w in place: no copy of w on every run, and one product instead of B
// small ones (encoder_layer's in-projection: 16 products of 2 rows). Not where the library takes
// strided batches (cuBLAS reads the broadcast in place).
// `x` and `w` are ctx.strided_operand of `a` and of the weight.
std::optional<TensorRef> folded_batch_matmul(LoweringContext& ctx, const TensorRef& a, ir::Operand x,
                                             const ir::Operand& w, DType dtype, const std::vector<Expr>& sizes) {
  if (ctx.libraries().strided_batches || sizes.size() != 3) return std::nullopt;
  if (!w.strides[0].is_const(0) || w.sizes[0].is_const(1)) return std::nullopt;
  if (!batch_continues_rows(x)) {
    TensorRef copy = a;
    copy.buffer = nullptr;
    x = ctx.strided_operand(ctx.realize_operand_copy(copy));
  }
  const Expr rows = ir::simplify(sizes[0] * sizes[1], {});
  ir::Matmul call;
  call.a = {x.buffer, {rows, x.sizes[2]}, {x.strides[1], x.strides[2]}, x.offset};
  call.b = {w.buffer, {w.sizes[1], w.sizes[2]}, {w.strides[1], w.strides[2]}, w.offset};
  return ctx.extern_call({call}, dtype, {rows, sizes[2]}, sizes);
}

TensorRef matmul(LoweringContext& ctx, const TensorRef& a, const TensorRef& b, DType dtype, std::vector<Expr> sizes,
                 bool batched) {
  if (!library_dtype(dtype, {a.dtype, b.dtype})) return matmul_reduction(ctx, a, b, dtype, std::move(sizes));
  ir::Matmul call;
  if (batched) {
    // Each operand's view found (or realized) once, for whichever form of the call is taken.
    ir::Operand a_view = ctx.strided_operand(a), b_view = ctx.strided_operand(b);
    if (std::optional<TensorRef> folded = folded_batch_matmul(ctx, a, a_view, b_view, dtype, sizes)) return *folded;
    call.a = batched_operand(ctx, a, a_view);
    call.b = batched_operand(ctx, b, b_view);
  } else {
    call.a = matrix_operand(ctx, a);
    call.b = matrix_operand(ctx, b);
  }
  call.batched = batched;
  return ctx.extern_call({call}, dtype, std::move(sizes));
}

// bias*beta + alpha*(m1 @ m2); bias is ignored when beta is 0 (NaN in it does not propagate).
TensorRef addmm(LoweringContext& ctx, const TensorRef& bias, const TensorRef& m1, const TensorRef& m2, double beta,
                double alpha, DType dtype, std::vector<Expr> sizes) {
  if (beta == 0) return scaled(matmul(ctx, m1, m2, dtype, sizes, false), alpha);
  bool library = library_dtype(dtype, {m1.dtype, m2.dtype});
  // 16-bit floats keep the bias in the call: added after the product's rounding, it would be
  // rounded twice, where ATen rounds their float32 sum once.
  if (library && (ctx.libraries().bias_in_call || accumulation_dtype(dtype) != dtype)) {
    ir::Matmul call;
    call.bias = ctx.strided_operand(broadcast_to(cast(bias, dtype), sizes));
    call.a = matrix_operand(ctx, m1);
    call.b = matrix_operand(ctx, m2);
    call.alpha = alpha;
    call.beta = beta;
    return ctx.extern_call({call}, dtype, std::move(sizes));
  }
  // Without the library's bias, the bias is added where the product is read.
  TensorRef prod = scaled(library ? matmul(ctx, m1, m2, dtype, sizes, false) : matmul_reduction(ctx, m1, m2, dtype, sizes),
                          alpha);
  return map2(scaled(cast(bias, dtype), beta), prod, dtype, dtype, [](Ops& ops, Val x, Val y) { return ops.add(x, y); });
}

// One spatial dim of a sliding window: input position o*stride - pad + k*dilation. The input and
// output sizes may be dynamic.
struct WindowDim {
  Expr in = 0, out = 0;
  int64_t kernel = 1, stride = 1, pad = 0, dilation = 1;
  bool ceil_mode = false;
  // Whether some window position falls outside the input (padding or a ceil_mode overhang). With
  // floor division and no padding the last window ends inside the input, whatever its size.
  bool may_leave() const {
    if (pad > 0) return true;
    if (!in.is_const() || !out.is_const()) return ceil_mode;
    return (out.const_value() - 1) * stride + (kernel - 1) * dilation >= in.const_value();
  }
  Expr start(const Expr& o) const { return o * stride - pad; }
  Expr pos(const Expr& o, const Expr& k) const { return start(o) + k * dilation; }
  // The first window position inside the input (ATen's `while (ih0 < 0) ih0 += dilation`).
  Expr first_valid(const Expr& o) const {
    Expr s = start(o);
    if (pad == 0) return s;
    return s + ir::floordiv(ir::max(-s, 0) + (dilation - 1), dilation) * dilation;
  }
};

// --- convolution -------------------------------------------------------------------------------

struct ConvParams {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups = 1;
  bool transposed = false;
};

// x [N, C, spatial...] + bias [C], lazily: it joins the kernel of what reads x.
TensorRef plus_channel_bias(const TensorRef& x, const TensorRef& bias) {
  Loader lx = x.load, lb = bias.load;
  return LoweringContext::pointwise(x.dtype, x.sizes, [lx, lb](Ops& ops, const Index& idx) {
    Val v = lx(ops, idx);
    Val b = lb(ops, {idx[1]});
    return ops.add(v, b);
  });
}

// A convolution as a reduction over (input channels of the group, kernel window), with the bias
// added afterwards: for the dtypes the library calls do not take, and for transposed ones where
// they are no library call (--device cuda). A transposed one masks each term with an exact
// division: 90 to 130 times slower than oneDNN's deconvolution on the U-Net sample's layers.
TensorRef convolution_reduction(LoweringContext& ctx, const TensorRef& x, const TensorRef& w,
                                const std::optional<TensorRef>& bias, const ConvParams& p, DType dtype,
                                const std::vector<Expr>& out_sizes) {
  // Channels and the kernel are static; the batch and the spatial sizes may be dynamic.
  std::vector<int64_t> ws = w.static_sizes();
  size_t nsp = x.sizes.size() - 2;
  int64_t G = p.groups;
  int64_t cin_g = x.static_size(1) / G;
  // Weight: [Cout, Cin/G, k...] (direct) or [Cin, Cout/G, k...] (transposed).
  int64_t cout_g = p.transposed ? ws[1] : ws[0] / G;
  std::vector<int64_t> ks(ws.begin() + 2, ws.end());
  std::vector<Expr> in_sp(x.sizes.begin() + 2, x.sizes.end());
  std::vector<Expr> rranges = {cin_g};
  for (int64_t k : ks) rranges.push_back(k);
  DType acc = accumulation_dtype(dtype);
  TensorRef xc = cast(cast(x, dtype), acc), wc = cast(cast(w, dtype), acc);
  Loader lx = xc.load, lw = wc.load;
  ConvParams prm = p;
  TensorRef sum = ctx.reduction(acc, out_sizes, rranges, ReduceOp::Sum,
      [=](Ops& ops, const Index& idx, const Index& r) {
        Expr co = idx[1];
        Expr g = ir::floordiv(co, cout_g);
        Expr ci = g * cin_g + r[0];
        Index xi = {idx[0], ci};
        std::optional<Val> valid;
        for (size_t d = 0; d < nsp; ++d) {
          Expr o = idx[2 + d], k = r[1 + d];
          int64_t s = prm.stride[d], pad = prm.padding[d], dil = prm.dilation[d];
          if (!prm.transposed) {
            Expr i = o * s - pad + k * dil;
            WindowDim window{in_sp[d], out_sizes[2 + d], ks[d], s, pad, dil};
            bool need = window.may_leave();
            if (need) {
              valid = logical_and(ops, valid, in_range(ops, i, in_sp[d]));
              i = clamp_index(i, in_sp[d]);
            }
            xi.push_back(i);
          } else {
            // o = i*s - pad + k*dil: i = (o + pad - k*dil) / s when that divides exactly.
            Expr num = o + pad - k * dil;
            Val nv = index_val(ops, num);
            Val ok = ops.binary(BinaryOp::Ge, nv, ops.constant(int_scalar(0)));
            Val below = ops.binary(BinaryOp::Lt, nv, size_val(ops, in_sp[d] * s));
            ok = ops.binary(BinaryOp::LogicalAnd, ok, below);
            if (s > 1) {
              Val rem = index_val(ops, ir::mod(num, s));
              Val divides = ops.binary(BinaryOp::Eq, rem, ops.constant(int_scalar(0)));
              ok = ops.binary(BinaryOp::LogicalAnd, ok, divides);
            }
            valid = logical_and(ops, valid, ok);
            xi.push_back(clamp_index(ir::floordiv(num, s), in_sp[d]));
          }
        }
        Index wi = prm.transposed ? Index{ci, co - g * cout_g} : Index{co, r[0]};
        for (size_t d = 0; d < nsp; ++d) wi.push_back(r[1 + d]);
        Val xv = lx(ops, xi);
        Val wv = lw(ops, wi);
        Val v = ops.mul(xv, wv);
        if (valid) v = ops.where(*valid, v, ops.constant(zero(acc)));
        return v;
      });
  if (!bias) return cast(sum, dtype);
  // The bias joins the float32 sum of 16-bit products before the one rounding, as in ATen.
  return cast(plus_channel_bias(sum, cast(cast(*bias, dtype), acc)), dtype);
}

Outs lower_conv(LoweringContext& ctx, const Node& node, const ConvParams& p) {
  TensorRef x = ctx.tensor(node.arg("input"));
  TensorRef w = ctx.tensor(node.arg("weight"));
  std::optional<TensorRef> bias;
  if (!is_none(node, "bias")) bias = ctx.tensor(node.arg("bias"));
  DType dtype = out_dtype(node);
  std::vector<Expr> out = out_sizes(ctx, node);
  if (w.rank() < 3) ctx.fail("convolution weight must have at least 3 dims");
  bool unbatched = x.rank() == w.rank() - 1;
  if (unbatched) {
    // [C, spatial...]: run as a batch of one and drop the batch dim again.
    std::vector<Expr> xs = x.sizes;
    xs.insert(xs.begin(), Expr(1));
    x = reshaped(x, xs);
    out.insert(out.begin(), Expr(1));
  }
  if (x.rank() != w.rank()) ctx.fail("convolution input and weight ranks do not match");
  TensorRef result;
  if ((p.transposed && !ctx.libraries().transposed_convolutions) || !library_dtype(dtype, {x.dtype, w.dtype})) {
    result = convolution_reduction(ctx, x, w, bias, p, dtype, out);
  } else {
    ir::Convolution call;
    call.input = ctx.strided_operand(x);
    call.weight = ctx.strided_operand(w);
    bool bias_in_call = bias && (ctx.libraries().bias_in_call || accumulation_dtype(dtype) != dtype);
    if (bias_in_call) call.bias = ctx.strided_operand(cast(*bias, dtype));
    call.stride = p.stride;
    call.padding = p.padding;
    call.dilation = p.dilation;
    call.groups = p.groups;
    call.transposed = p.transposed;
    if (p.transposed) call.output_padding = p.output_padding;
    result = ctx.extern_call({call}, dtype, out);
    if (bias && !bias_in_call) result = plus_channel_bias(result, cast(*bias, dtype));
  }
  if (unbatched) result = reshaped(result, std::vector<Expr>(out.begin() + 1, out.end()));
  return {result};
}

// --- pooling -----------------------------------------------------------------------------------


// The two spatial dims' windows, from their input and output sizes.
std::vector<WindowDim> window_dims(LoweringContext& ctx, const Node& node, const std::vector<Expr>& in,
                                   const std::vector<Expr>& out, bool with_dilation) {
  size_t n = 2;
  std::vector<int64_t> k = spatial_arg(ctx, node, "kernel_size", n);
  std::vector<int64_t> s = spatial_arg(ctx, node, "stride", n, k);
  std::vector<int64_t> p = spatial_arg(ctx, node, "padding", n, {0});
  std::vector<int64_t> d = with_dilation ? spatial_arg(ctx, node, "dilation", n, {1}) : std::vector<int64_t>(n, 1);
  bool ceil_mode = node.has_arg("ceil_mode") && bool_arg(node, "ceil_mode");
  std::vector<WindowDim> dims(n);
  size_t lead = in.size() - n;
  for (size_t j = 0; j < n; ++j) {
    dims[j] = WindowDim{in[lead + j], out[lead + j], k[j], s[j], p[j], d[j], ceil_mode};
    if (k[j] <= 0 || s[j] <= 0 || d[j] <= 0) ctx.fail("kernel size, stride and dilation must be positive");
  }
  return dims;
}

// max over the window with ATen's CPU semantics: padding is skipped, a value wins when it is
// greater than the best so far or NaN; the index starts at the first valid position. Unrolled.
std::pair<Val, Val> unrolled_max(Ops& ops, const Loader& load, DType dtype, const std::vector<WindowDim>& dims,
                                 const Index& idx, bool want_index) {
  size_t lead = idx.size() - 2;
  const WindowDim &H = dims[0], &W = dims[1];
  Expr oh = idx[lead], ow = idx[lead + 1];
  Val best = ops.constant(lowest(dtype));
  Val best_idx = want_index ? index_val(ops, H.first_valid(oh) * W.in + W.first_valid(ow)) : Val{};
  bool mask_h = H.may_leave(), mask_w = W.may_leave();
  for (int64_t kh = 0; kh < H.kernel; ++kh) {
    Expr ih = H.pos(oh, kh);
    std::optional<Val> valid_h;
    if (mask_h) valid_h = in_range(ops, ih, H.in);
    for (int64_t kw = 0; kw < W.kernel; ++kw) {
      Expr iw = W.pos(ow, kw);
      std::optional<Val> valid = valid_h;
      if (mask_w) valid = logical_and(ops, valid, in_range(ops, iw, W.in));
      Index src(idx.begin(), idx.begin() + lead);
      src.push_back(mask_h ? clamp_index(ih, H.in) : ih);
      src.push_back(mask_w ? clamp_index(iw, W.in) : iw);
      Val v = load(ops, src);
      Val better = ops.binary(BinaryOp::Gt, v, best);
      if (is_floating(dtype)) better = ops.binary(BinaryOp::LogicalOr, better, ops.unary(UnaryOp::IsNan, v));
      if (valid) better = ops.binary(BinaryOp::LogicalAnd, *valid, better);
      best = ops.where(better, v, best);
      if (want_index) best_idx = ops.where(better, index_val(ops, ih * W.in + iw), best_idx);
    }
  }
  return {best, best_idx};
}

constexpr int64_t kMaxUnrolledWindow = 25;

Outs lower_max_pool(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  if (x.rank() < 3) ctx.fail("max_pool2d expects a 3-d or 4-d input");
  std::vector<Expr> out_e = out_sizes(ctx, node);
  std::vector<WindowDim> dims = window_dims(ctx, node, x.sizes, out_e, true);
  DType dtype = x.dtype;
  bool with_indices = node.outputs.size() > 1;
  Loader load = x.load;
  if (dims[0].kernel * dims[1].kernel <= kMaxUnrolledWindow) {
    Outs outs;
    outs.push_back(LoweringContext::pointwise(dtype, out_e, [=](Ops& ops, const Index& idx) {
      return unrolled_max(ops, load, dtype, dims, idx, false).first;
    }));
    if (with_indices)
      outs.push_back(LoweringContext::pointwise(DType::Int64, out_e, [=](Ops& ops, const Index& idx) {
        return unrolled_max(ops, load, dtype, dims, idx, true).second;
      }));
    return outs;
  }
  // Large windows: reductions over the window (padding reads as the lowest value).
  auto window_value = [=](Ops& ops, const Index& idx, const Index& r) {
    size_t lead = idx.size() - 2;
    Index src(idx.begin(), idx.begin() + lead);
    std::optional<Val> valid;
    for (size_t j = 0; j < 2; ++j) {
      Expr i = dims[j].pos(idx[lead + j], r[j]);
      if (dims[j].may_leave()) {
        valid = logical_and(ops, valid, in_range(ops, i, dims[j].in));
        i = clamp_index(i, dims[j].in);
      }
      src.push_back(i);
    }
    Val v = load(ops, src);
    return valid ? ops.where(*valid, v, ops.constant(lowest(dtype))) : v;
  };
  std::vector<Expr> rr = {dims[0].kernel, dims[1].kernel};
  Outs outs = {ctx.reduction(dtype, out_e, rr, ReduceOp::Max, window_value)};
  if (!with_indices) return outs;
  TensorRef pos = ctx.reduction(DType::Int64, out_e, rr, ReduceOp::ArgMax, window_value);
  Loader lp = pos.load;
  outs.push_back(LoweringContext::pointwise(DType::Int64, out_e, [=](Ops& ops, const Index& idx) {
    // Window position -> input plane position; a padding position (all values lowest) falls back
    // to the first valid position, as ATen's initial index.
    size_t lead = idx.size() - 2;
    const WindowDim &H = dims[0], &W = dims[1];
    Val r = lp(ops, idx);
    Val kw_n = ops.constant(int_scalar(W.kernel));
    Val kh = ops.binary(BinaryOp::FloorDiv, r, kw_n), kw = ops.binary(BinaryOp::Mod, r, kw_n);
    auto position = [&](const WindowDim& D, const Expr& o, Val k) {
      Val start = index_val(ops, D.start(o));
      Val step = ops.mul(k, ops.constant(int_scalar(D.dilation)));
      return ops.add(start, step);
    };
    Val ih = position(H, idx[lead], kh);
    Val iw = position(W, idx[lead + 1], kw);
    Val ok = ops.binary(BinaryOp::LogicalAnd, in_range(ops, ih, H.in), in_range(ops, iw, W.in));
    Val flat = ops.add(ops.mul(ih, size_val(ops, W.in)), iw);
    Val first = index_val(ops, H.first_valid(idx[lead]) * W.in + W.first_valid(idx[lead + 1]));
    return ops.where(ok, flat, first);
  }));
  return outs;
}

}  // namespace

// --- public lowerings ----------------------------------------------------------------------------

Outs lower_mm(LoweringContext& ctx, const Node& node) {
  TensorRef a = ctx.tensor(node.arg("self")), b = ctx.tensor(node.arg("mat2"));
  if (a.rank() != 2 || b.rank() != 2) ctx.fail("mm expects 2-d operands");
  return {matmul(ctx, a, b, out_dtype(node), out_sizes(ctx, node), false)};
}

Outs lower_bmm(LoweringContext& ctx, const Node& node) {
  TensorRef a = ctx.tensor(node.arg("self")), b = ctx.tensor(node.arg("mat2"));
  if (a.rank() != 3 || b.rank() != 3) ctx.fail("bmm expects 3-d operands");
  return {matmul(ctx, a, b, out_dtype(node), out_sizes(ctx, node), true)};
}

// transformers' grouped_mm_fallback (its mixture-of-experts layers) and _grouped_mm with
// offsets: row r of the input times the weight of its group, the groups' rows being consecutive
// and offs their cumulative ends, so the group of r is the count of ends <= r. Rows past the last
// end are zeros, as the fallback leaves them.
Outs lower_grouped_mm(LoweringContext& ctx, const Node& node) {
  const bool aten = node.target == "_grouped_mm";
  TensorRef a = ctx.tensor(node.arg(aten ? "self" : "input")), w = ctx.tensor(node.arg(aten ? "mat2" : "weight"));
  TensorRef offs = ctx.tensor(node.arg("offs"));
  if (a.rank() != 2 || w.rank() != 3 || offs.rank() != 1) ctx.fail("grouped_mm expects a 2-d input, 3-d weights and 1-d offsets");
  const DType dtype = out_dtype(node), acc = accumulation_dtype(dtype);
  const Expr groups = w.sizes[0];
  Loader load_offs = offs.load;
  TensorRef group = ctx.reduction(DType::Int64, {a.sizes[0]}, {groups}, ReduceOp::Sum,
                                  [load_offs](Ops& ops, const Index& idx, const Index& r) {
                                    Val end = ops.cast(load_offs(ops, {r[0]}), DType::Int64);
                                    return ops.cast(ops.binary(BinaryOp::Le, end, ops.index_expr(idx[0], DType::Int64)),
                                                    DType::Int64);
                                  });
  TensorRef x = cast(cast(a, dtype), acc), y = cast(cast(w, dtype), acc);
  Loader load_group = group.load, lx = x.load, ly = y.load;
  TensorRef sum = ctx.reduction(acc, out_sizes(ctx, node), {a.sizes[1]}, ReduceOp::Sum,
                                [=](Ops& ops, const Index& idx, const Index& r) {
                                  Val g = load_group(ops, {idx[0]});
                                  Val last = ops.index_expr(groups - 1, DType::Int64);
                                  Val inside = ops.binary(BinaryOp::Le, g, last);
                                  Expr gi = ops.indirect(ops.binary(BinaryOp::Minimum, g, last), groups, ir::NegativeIndex::OutOfRange);
                                  Val product = ops.mul(lx(ops, {idx[0], r[0]}), ly(ops, {gi, r[0], idx[1]}));
                                  return ops.where(inside, product, ops.constant(0.0, acc));
                                });
  return {cast(sum, dtype)};
}

namespace {

// A matrix (the last two dims of a 3-d operand) that sgemm reads in place: static strides, one of
// the two unit and the other at least the extent it steps over.
bool sgemm_matrix_layout(const ir::Operand& op) {
  for (const Expr& e : op.strides)
    if (!e.is_const()) return false;
  const int64_t rows = op.sizes[1].const_value(), cols = op.sizes[2].const_value();
  const int64_t rs = op.strides[1].const_value(), cs = op.strides[2].const_value();
  return op.strides[0].const_value() >= 0 && ((cs == 1 && rs >= cols) || (rs == 1 && cs >= rows));
}

ir::Operand attention_operand(LoweringContext& ctx, const TensorRef& ref) {
  ir::Operand op = ctx.strided_operand(ref);
  if (sgemm_matrix_layout(op)) return op;
  TensorRef copy = ref;
  copy.buffer = nullptr;  // a contiguous copy, even of a buffer's own (strided) view
  return ctx.strided_operand(ctx.realize_operand_copy(copy));
}

}  // namespace

// _foundry_attention (passes/fuse_attention.h): one library call, float32, static sizes.
Outs lower_foundry_attention(LoweringContext& ctx, const Node& node) {
  if (out_dtype(node) != DType::Float32) ctx.fail("the fused attention takes float32 operands");
  for (const char* name : {"query", "key_t", "value", "mask"}) {
    if (node.arg(name).kind != Arg::Kind::Tensor) continue;
    const TensorType& t = node.arg(name).tensor->type;
    if (t.has_symbolic_sizes()) ctx.need_static_sizes();
    if (t.numel() == 0) ctx.fail(std::string("the fused attention's ") + name + " is empty");
  }
  ir::Attention call;
  call.query = attention_operand(ctx, ctx.tensor(node.arg("query")));
  call.key_t = attention_operand(ctx, ctx.tensor(node.arg("key_t")));
  call.value = attention_operand(ctx, ctx.tensor(node.arg("value")));
  const Arg& mask = node.arg("mask");
  if (!mask.is_none()) call.mask = ctx.strided_operand(ctx.tensor(mask));
  call.scale = float_arg(node, "scale");
  call.masked_rows_zero = bool_arg(node, "masked_rows_zero");
  return {ctx.extern_call({call}, DType::Float32, out_sizes(ctx, node))};
}

Outs lower_addmm(LoweringContext& ctx, const Node& node) {
  DType dtype = out_dtype(node);
  TensorRef bias = ctx.tensor(node.arg("self"), dtype);
  TensorRef m1 = ctx.tensor(node.arg("mat1")), m2 = ctx.tensor(node.arg("mat2"));
  if (m1.rank() != 2 || m2.rank() != 2) ctx.fail("addmm expects 2-d matrices");
  double beta = float_arg(node, "beta"), alpha = float_arg(node, "alpha");
  return {addmm(ctx, bias, m1, m2, beta, alpha, dtype, out_sizes(ctx, node))};
}

Outs lower_convolution(LoweringContext& ctx, const Node& node) {
  ConvParams p;
  p.stride = ints_arg(node, "stride");
  p.padding = ints_arg(node, "padding");
  p.dilation = ints_arg(node, "dilation");
  p.groups = int_arg(node, "groups");
  if (node.has_arg("transposed")) p.transposed = bool_arg(node, "transposed");
  if (node.has_arg("output_padding")) p.output_padding = ints_arg(node, "output_padding");
  TensorRef w = ctx.tensor(node.arg("weight"));
  size_t nsp = w.rank() >= 2 ? w.rank() - 2 : 0;
  auto expand = [&](std::vector<int64_t>& v, const char* name, int64_t dflt) {
    if (v.empty()) v.assign(nsp, dflt);
    if (v.size() == 1 && nsp > 1) v.assign(nsp, v[0]);
    if (v.size() != nsp) ctx.fail(std::string("argument '") + name + "' does not match the spatial rank");
  };
  expand(p.stride, "stride", 1);
  expand(p.padding, "padding", 0);
  expand(p.dilation, "dilation", 1);
  if (p.transposed) expand(p.output_padding, "output_padding", 0);
  if (p.groups <= 0) ctx.fail("groups must be positive");
  return lower_conv(ctx, node, p);
}

Outs lower_max_pool2d_with_indices(LoweringContext& ctx, const Node& node) { return lower_max_pool(ctx, node); }

Outs lower_avg_pool2d(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  if (x.rank() < 3) ctx.fail("avg_pool2d expects a 3-d or 4-d input");
  std::vector<Expr> out_e = out_sizes(ctx, node);
  std::vector<WindowDim> dims = window_dims(ctx, node, x.sizes, out_e, false);
  bool count_include_pad = node.has_arg("count_include_pad") ? bool_arg(node, "count_include_pad") : true;
  std::optional<int64_t> divisor_override;
  if (!is_none(node, "divisor_override")) divisor_override = int_arg(node, "divisor_override");
  if (divisor_override && *divisor_override == 0) ctx.fail("divisor must be not zero");
  DType dtype = out_dtype(node);
  TensorRef xc = cast(x, dtype);
  Loader load = xc.load;
  TensorRef sum = ctx.reduction(dtype, out_e, {dims[0].kernel, dims[1].kernel}, ReduceOp::Sum,
      [=](Ops& ops, const Index& idx, const Index& r) {
        size_t lead = idx.size() - 2;
        Index src(idx.begin(), idx.begin() + lead);
        std::optional<Val> valid;
        for (size_t j = 0; j < 2; ++j) {
          Expr i = dims[j].pos(idx[lead + j], r[j]);
          if (dims[j].may_leave()) {
            valid = logical_and(ops, valid, in_range(ops, i, dims[j].in));
            i = clamp_index(i, dims[j].in);
          }
          src.push_back(i);
        }
        Val v = load(ops, src);
        return valid ? ops.where(*valid, v, ops.constant(zero(dtype))) : v;
      });
  Loader ls = sum.load;
  return {LoweringContext::pointwise(dtype, out_e, [=](Ops& ops, const Index& idx) {
    // ATen: the window [start, min(start + k, in + pad)) counts padding; clipped to the input it
    // counts the elements.
    size_t lead = idx.size() - 2;
    Expr divisor = 1;
    if (divisor_override) {
      divisor = *divisor_override;
    } else {
      for (size_t j = 0; j < 2; ++j) {
        const WindowDim& D = dims[j];
        Expr start = D.start(idx[lead + j]);
        Expr end = ir::min(start + D.kernel, D.in + D.pad);
        if (count_include_pad) {
          divisor = divisor * (end - start);
        } else {
          Expr count = ir::min(end, D.in) - ir::max(start, 0);
          divisor = divisor * ir::max(count, 1);  // an empty window sums to 0 anyway
        }
      }
    }
    Val sum = ls(ops, idx);
    return ops.div(sum, ops.index_expr(divisor, dtype));
  })};
}

namespace {

// An adaptive pooling dim: the window of output o is [floor(o*in/out), ceil((o+1)*in/out)), at
// most kmax long (uniform: every window that long, so no position needs masking). The input size
// may be dynamic; the output size is an argument, static.
struct AdaptiveDim {
  Expr in;
  int64_t out;
  Expr kmax;
  bool uniform;
  Expr start(const Expr& o) const { return ir::floordiv(o * in, out); }
  Expr end(const Expr& o) const { return ir::floordiv((o + 1) * in + (out - 1), out); }
};

struct AdaptiveWindows {
  std::vector<AdaptiveDim> dims;  // the two spatial dims
  std::vector<Expr> out;          // the output sizes
  size_t lead = 0;                // dims before the spatial ones
  // The input value at reduction position r of output idx's window; `outside` past its end.
  Val value(Ops& ops, const Loader& load, const Index& idx, const Index& r, const ir::Scalar& outside) const {
    Index src(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(lead));
    std::optional<Val> valid;
    for (size_t j = 0; j < 2; ++j) {
      const AdaptiveDim& D = dims[j];
      Expr i = D.start(idx[lead + j]) + r[j];
      if (!D.uniform) {
        valid = logical_and(ops, valid, ops.binary(BinaryOp::Lt, index_val(ops, i), index_val(ops, D.end(idx[lead + j]))));
        i = ir::min(i, D.in - 1);
      }
      src.push_back(i);
    }
    Val v = load(ops, src);
    return valid ? ops.where(*valid, v, ops.constant(outside)) : v;
  }
  std::vector<Expr> ranges() const { return {dims[0].kmax, dims[1].kmax}; }
};

AdaptiveWindows adaptive_windows(LoweringContext& ctx, const Node& node, const TensorRef& x, const char* op) {
  if (x.rank() < 3) ctx.fail(std::string(op) + " expects a 3-d or 4-d input");
  AdaptiveWindows w;
  w.out = out_sizes(ctx, node);
  w.lead = x.rank() - 2;
  for (size_t j = 0; j < 2; ++j) {
    const Expr& n_e = x.sizes[w.lead + j];
    int64_t m = static_from(w.out, w.lead)[w.lead + j];
    if (!n_e.is_const()) {
      // One window is the whole dim; else the longest window is at most ceil(in/out) + 1.
      w.dims.push_back(m == 1 ? AdaptiveDim{n_e, 1, n_e, true} : AdaptiveDim{n_e, m, ir::floordiv(n_e + (m - 1), m) + 1, false});
      continue;
    }
    int64_t n = n_e.const_value();
    if (m > 0 && n <= 0) ctx.fail(std::string(op) + ": empty input plane");
    int64_t kmax = 0, kmin = std::numeric_limits<int64_t>::max();
    for (int64_t o = 0; o < m; ++o) {
      int64_t s = (o * n) / m, e = ((o + 1) * n + m - 1) / m;
      kmax = std::max(kmax, e - s);
      kmin = std::min(kmin, e - s);
    }
    w.dims.push_back(AdaptiveDim{n, m, kmax, kmax == kmin});
  }
  return w;
}

}  // namespace

Outs lower_adaptive_avg_pool2d(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  AdaptiveWindows w = adaptive_windows(ctx, node, x, "adaptive_avg_pool2d");
  DType dtype = out_dtype(node);
  Loader load = cast(x, dtype).load;
  TensorRef sum = ctx.reduction(dtype, w.out, w.ranges(), ReduceOp::Sum,
                                [=](Ops& ops, const Index& idx, const Index& r) {
                                  return w.value(ops, load, idx, r, zero(dtype));
                                });
  Loader ls = sum.load;
  return {LoweringContext::pointwise(dtype, w.out, [=](Ops& ops, const Index& idx) {
    // ATen: sum / kh / kw.
    Val v = ls(ops, idx);
    for (size_t j = 0; j < 2; ++j) {
      const AdaptiveDim& D = w.dims[j];
      v = ops.div(v, ops.index_expr(D.end(idx[w.lead + j]) - D.start(idx[w.lead + j]), dtype));
    }
    return v;
  })};
}

// adaptive_max_pool2d: the max over each adaptive window and its position in the input plane. As
// ATen's loop (a value wins when greater than the best so far, or NaN): the first largest
// element, but the last NaN when there is one.
Outs lower_adaptive_max_pool2d(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("self"));
  AdaptiveWindows w = adaptive_windows(ctx, node, x, "adaptive_max_pool2d");
  DType dtype = x.dtype;
  Loader load = x.load;
  auto window_value = [=](Ops& ops, const Index& idx, const Index& r) {
    return w.value(ops, load, idx, r, lowest(dtype));
  };
  TensorRef first_max = ctx.reduction(DType::Int64, w.out, w.ranges(), ReduceOp::ArgMax, window_value);
  std::optional<TensorRef> last_nan;  // the window position of the last NaN, -1 without one
  if (is_floating(dtype))
    last_nan = ctx.reduction(DType::Int64, w.out, w.ranges(), ReduceOp::Max,
                             [=](Ops& ops, const Index& idx, const Index& r) {
                               Val position = index_val(ops, r[0] * w.dims[1].kmax + r[1]);
                               Val nan = ops.unary(UnaryOp::IsNan, window_value(ops, idx, r));
                               return ops.where(nan, position, ops.constant(int_scalar(-1)));
                             });
  Loader lp = first_max.load;
  std::optional<Loader> ln = last_nan ? std::optional<Loader>(last_nan->load) : std::nullopt;
  TensorRef index = LoweringContext::pointwise(DType::Int64, w.out, [=](Ops& ops, const Index& idx) {
    const AdaptiveDim &H = w.dims[0], &W = w.dims[1];
    Val r = lp(ops, idx);
    if (ln) {
      Val n = (*ln)(ops, idx);
      r = ops.where(ops.binary(BinaryOp::Ge, n, ops.constant(int_scalar(0))), n, r);
    }
    Val kw_n = size_val(ops, W.kmax);
    Val ih = ops.add(index_val(ops, H.start(idx[w.lead])), ops.binary(BinaryOp::FloorDiv, r, kw_n));
    Val iw = ops.add(index_val(ops, W.start(idx[w.lead + 1])), ops.binary(BinaryOp::Mod, r, kw_n));
    return ops.add(ops.mul(ih, size_val(ops, W.in)), iw);
  });
  return {ctx.reduction(dtype, w.out, w.ranges(), ReduceOp::Max, window_value), index};
}

namespace {

// The scales the resampling kernels receive: from scale_factors when given, else none.
std::vector<std::optional<double>> resample_scales(const Node& node) {
  std::vector<std::optional<double>> scales(2);
  if (!is_none(node, "scale_factors")) {
    const Arg& a = node.arg("scale_factors");
    for (size_t j = 0; j < 2 && j < a.floats.size(); ++j) scales[j] = a.floats[j];
  }
  return scales;
}

// ATen's compute_scales_value<float>: 1/scale when a positive scale is given, else in/out.
float scale_value(std::optional<double> scale, int64_t in, int64_t out) {
  if (scale && *scale > 0) return static_cast<float>(1.0 / *scale);
  return static_cast<float>(in) / static_cast<float>(out);
}

// One dim's ratio of source to output positions (ATen's area_pixel_compute_scale) in the opmath
// type: a constant when the sizes are static or a scale factor is given, else computed in the
// kernel from the run-time sizes as ATen does, in/out or (in-1)/(out-1) with align_corners.
struct ResampleScale {
  std::optional<double> fixed;
  Expr in, out;
  bool align_corners = false;
  Val value(Ops& ops, DType acc) const {
    if (fixed) return ops.constant(Scalar::of(*fixed, acc));
    Val q = ops.div(ops.index_expr(align_corners ? in - 1 : in, acc), ops.index_expr(align_corners ? out - 1 : out, acc));
    if (!align_corners) return q;
    Val several = ops.binary(BinaryOp::Gt, index_val(ops, out), ops.constant(int_scalar(1)));
    return ops.where(several, q, ops.constant(Scalar::of(0.0, acc)));
  }
};

// The scales of the last two dims, in the opmath type `acc`.
std::vector<ResampleScale> area_scales(const Node& node, const std::vector<Expr>& in, const std::vector<Expr>& out,
                                       bool align_corners, DType acc) {
  const auto scales = resample_scales(node);
  const size_t lead = in.size() - 2;
  std::vector<ResampleScale> scale(2);
  for (size_t j = 0; j < 2; ++j) {
    const Expr &n_e = in[lead + j], &m_e = out[lead + j];
    scale[j] = ResampleScale{std::nullopt, n_e, m_e, align_corners};
    const bool given = !align_corners && scales[j] && *scales[j] > 0;
    if (given) scale[j].fixed = acc == DType::Float32 ? static_cast<float>(1.0 / *scales[j]) : 1.0 / *scales[j];
    if (given || !n_e.is_const() || !m_e.is_const()) continue;
    int64_t n = n_e.const_value(), m = m_e.const_value();
    if (align_corners) {
      if (acc == DType::Float32) scale[j].fixed = m > 1 ? static_cast<float>(n - 1) / static_cast<float>(m - 1) : 0.0f;
      else scale[j].fixed = m > 1 ? static_cast<double>(n - 1) / static_cast<double>(m - 1) : 0.0;
    } else if (acc == DType::Float32) {
      scale[j].fixed = scale_value(scales[j], n, m);
    } else {
      scale[j].fixed = static_cast<double>(n) / static_cast<double>(m);
    }
  }
  return scale;
}

// What the bilinear and bicubic lowerings share: the input's spatial sizes and its loader in the
// opmath type (`acc`), the output's sizes, the scales.
struct Resampling {
  std::vector<Expr> in, out;
  size_t lead = 0;  // the dims before the two spatial ones
  bool align_corners = false;
  DType dtype{}, acc{};
  std::vector<ResampleScale> scale;
  Loader load;
};

Resampling resampling(LoweringContext& ctx, const Node& node, const std::string& op) {
  TensorRef x = ctx.tensor(node.arg("input"));
  if (x.rank() < 3) ctx.fail(op + " expects a 3-d or 4-d input");
  Resampling r;
  r.in = x.sizes;
  r.out = out_sizes(ctx, node);
  r.lead = r.in.size() - 2;
  r.align_corners = bool_arg(node, "align_corners");
  r.dtype = out_dtype(node);
  r.acc = r.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  r.scale = area_scales(node, r.in, r.out, r.align_corners, r.acc);
  r.load = cast(x, r.acc).load;
  return r;
}

}  // namespace

Outs lower_upsample_nearest2d(LoweringContext& ctx, const Node& node) {
  TensorRef x = ctx.tensor(node.arg("input"));
  if (x.rank() < 3) ctx.fail("upsample_nearest2d expects a 3-d or 4-d input");
  const std::vector<Expr> in = x.sizes, out_e = out_sizes(ctx, node);
  size_t lead = in.size() - 2;
  // ATen's nearest_idx: identity, halving, or min(floor(dst * scale), in - 1) in float. With
  // dynamic sizes the float form, which gives the same positions at those ratios.
  enum class Mode { Same, Half, Float };
  std::vector<Mode> mode(2);
  std::vector<ResampleScale> scale = area_scales(node, in, out_e, false, DType::Float32);
  for (size_t j = 0; j < 2; ++j) {
    const Expr &n = in[lead + j], &m = out_e[lead + j];
    mode[j] = m == n ? Mode::Same : m == n * 2 ? Mode::Half : Mode::Float;
  }
  Loader load = x.load;
  return {LoweringContext::pointwise(x.dtype, out_e, [=](Ops& ops, const Index& idx) {
    Index src(idx.begin(), idx.begin() + lead);
    for (size_t j = 0; j < 2; ++j) {
      Expr o = idx[lead + j];
      const Expr& n = in[lead + j];
      if (mode[j] == Mode::Same) {
        src.push_back(o);
      } else if (mode[j] == Mode::Half) {
        src.push_back(ir::floordiv(o, 2));
      } else {
        Val dst = ops.index_expr(o, DType::Float32);
        Val f = ops.mul(dst, scale[j].value(ops, DType::Float32));
        Val i = ops.to_dtype(ops.unary(UnaryOp::Floor, f), DType::Int64);
        i = ops.binary(BinaryOp::Minimum, i, size_val(ops, n - 1));
        src.push_back(ops.indirect(i, n, ir::NegativeIndex::OutOfRange));
      }
    }
    return load(ops, src);
  })};
}

Outs lower_upsample_bilinear2d(LoweringContext& ctx, const Node& node) {
  const Resampling r = resampling(ctx, node, "upsample_bilinear2d");
  return {LoweringContext::pointwise(r.dtype, r.out, [=](Ops& ops, const Index& idx) {
    auto c = [&](double v) { return ops.constant(Scalar::of(v, r.acc)); };
    // Per dim: the two source positions and their weights (ATen's compute_indices_weights_linear).
    Expr i0[2], i1[2];
    Val w0[2], w1[2];
    for (size_t j = 0; j < 2; ++j) {
      const Expr& n = r.in[r.lead + j];
      Val dst = ops.index_expr(idx[r.lead + j], r.acc);
      Val real;
      Val scale_j = r.scale[j].value(ops, r.acc);
      if (r.align_corners) {
        real = ops.mul(scale_j, dst);
      } else {
        Val half = c(0.5);
        real = ops.sub(ops.mul(scale_j, ops.add(dst, half)), half);
        Val zero_f = c(0);
        Val negative = ops.binary(BinaryOp::Lt, real, zero_f);
        real = ops.where(negative, zero_f, real);
      }
      Val lo = ops.to_dtype(ops.unary(UnaryOp::Floor, real), DType::Int64);
      Val last = size_val(ops, n - 1);
      lo = ops.binary(BinaryOp::Minimum, lo, last);
      Val lambda = ops.sub(real, ops.to_dtype(lo, r.acc));
      Val zero_f = c(0), one_f = c(1);
      lambda = ops.binary(BinaryOp::Minimum, ops.binary(BinaryOp::Maximum, lambda, zero_f), one_f);
      Val has_next = ops.binary(BinaryOp::Lt, lo, last);
      Val one_i = ops.constant(int_scalar(1)), zero_i = ops.constant(int_scalar(0));
      Val hi = ops.add(lo, ops.where(has_next, one_i, zero_i));
      i0[j] = ops.indirect(lo, n, ir::NegativeIndex::OutOfRange);
      i1[j] = ops.indirect(hi, n, ir::NegativeIndex::OutOfRange);
      w1[j] = lambda;
      w0[j] = ops.sub(one_f, lambda);
    }
    auto at = [&](const Expr& h, const Expr& w) {
      Index src(idx.begin(), idx.begin() + r.lead);
      src.push_back(h);
      src.push_back(w);
      return r.load(ops, src);
    };
    // ATen's Interpolate: the inner (width) interpolation first, then the outer (height) one.
    auto lerp_w = [&](const Expr& h) {
      Val a = ops.mul(at(h, i0[1]), w0[1]);
      Val b = ops.mul(at(h, i1[1]), w1[1]);
      return ops.add(a, b);
    };
    Val top = ops.mul(lerp_w(i0[0]), w0[0]);
    Val bottom = ops.mul(lerp_w(i1[0]), w1[0]);
    Val v = ops.add(top, bottom);
    return ops.cast(v, r.dtype);
  })};
}

// Bicubic resampling as ATen's CPU kernel (UpSampleKernel.cpp, HelperInterpCubic): per dim the
// source position (not clamped at 0), its floor (at most the last index) and the fraction t, four
// taps from floor - 1 on, clamped to the input, weighted by Keys' cubic convolution with
// A = -0.75; the width interpolated first, then the height.
Outs lower_upsample_bicubic2d(LoweringContext& ctx, const Node& node) {
  const Resampling r = resampling(ctx, node, "upsample_bicubic2d");
  return {LoweringContext::pointwise(r.dtype, r.out, [=](Ops& ops, const Index& idx) {
    auto c = [&](double v) { return ops.constant(Scalar::of(v, r.acc)); };
    constexpr double A = -0.75;
    // ATen's cubic_convolution1 (|x| <= 1) and cubic_convolution2 (1 < |x| < 2).
    auto near = [&](Val v) { return ops.add(ops.mul(ops.mul(ops.sub(ops.mul(c(A + 2), v), c(A + 3)), v), v), c(1)); };
    auto far = [&](Val v) {
      Val r = ops.add(ops.mul(ops.sub(ops.mul(c(A), v), c(5 * A)), v), c(8 * A));
      return ops.sub(ops.mul(r, v), c(4 * A));
    };
    Expr tap[2][4];
    Val weight[2][4];
    for (size_t j = 0; j < 2; ++j) {
      const Expr& n = r.in[r.lead + j];
      Val dst = ops.index_expr(idx[r.lead + j], r.acc);
      Val scale_j = r.scale[j].value(ops, r.acc);
      Val real = r.align_corners ? ops.mul(scale_j, dst) : ops.sub(ops.mul(scale_j, ops.add(dst, c(0.5))), c(0.5));
      Val last = size_val(ops, n - 1);
      Val floor = ops.binary(BinaryOp::Minimum, ops.to_dtype(ops.unary(UnaryOp::Floor, real), DType::Int64), last);
      Val t = ops.sub(real, ops.to_dtype(floor, r.acc));
      t = ops.binary(BinaryOp::Minimum, ops.binary(BinaryOp::Maximum, t, c(0)), c(1));
      Val rest = ops.sub(c(1), t);
      weight[j][0] = far(ops.add(t, c(1)));
      weight[j][1] = near(t);
      weight[j][2] = near(rest);
      weight[j][3] = far(ops.add(rest, c(1)));
      for (int k = 0; k < 4; ++k) {
        Val at = ops.add(floor, ops.constant(int_scalar(k - 1)));
        at = ops.binary(BinaryOp::Minimum, ops.binary(BinaryOp::Maximum, at, ops.constant(int_scalar(0))), last);
        tap[j][k] = ops.indirect(at, n, ir::NegativeIndex::OutOfRange);
      }
    }
    auto row = [&](const Expr& h) {
      Val sum;
      for (int k = 0; k < 4; ++k) {
        Index src(idx.begin(), idx.begin() + r.lead);
        src.push_back(h);
        src.push_back(tap[1][k]);
        Val term = ops.mul(r.load(ops, src), weight[1][k]);
        sum = k == 0 ? term : ops.add(sum, term);
      }
      return sum;
    };
    Val v;
    for (int k = 0; k < 4; ++k) {
      Val term = ops.mul(row(tap[0][k]), weight[0][k]);
      v = k == 0 ? term : ops.add(v, term);
    }
    return ops.cast(v, r.dtype);
  })};
}

}  // namespace foundry::lower
