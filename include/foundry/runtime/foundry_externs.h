// Extern kernels that generated wrappers call: matrix products and convolution over strided
// operands. These are the portable implementations (plain loops, float accumulation in double);
// oneDNN-backed versions replace them where available.
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_EXTERNS_H
#define FOUNDRY_EXTERNS_H
#include <cmath>
#include <cstdint>
#include <vector>

#include "foundry_kernel_support.h"  // the 16-bit float conversions

namespace foundry_rt {

// 16-bit floats in these loops: the raw bits of a bfloat16 or float16, read exactly as a double
// and written rounded once from the accumulated result (PyTorch accumulates their products in
// float32 and rounds the result once).
struct BFloat16 {
  uint16_t bits;
  BFloat16() = default;
  explicit BFloat16(double v) : bits(float_to_bfloat16(static_cast<float>(v))) {}
  explicit operator double() const { return bfloat16_to_float(bits); }
};
struct Float16 {
  uint16_t bits;
  Float16() = default;
  explicit Float16(double v) : bits(float_to_half(static_cast<float>(v))) {}
  explicit operator double() const { return half_to_float(bits); }
};

template <typename T>
struct Strided {
  const T* data;
  const int64_t* strides;  // in elements
  int64_t offset;
  T at(int64_t i, int64_t j) const { return data[offset + i * strides[0] + j * strides[1]]; }
  T at(int64_t b, int64_t i, int64_t j) const {
    return data[offset + b * strides[0] + i * strides[1] + j * strides[2]];
  }
};

// out[b][m][n] = alpha * sum_k a[b][m][k] * w[b][k][n] + beta * bias[m][n] (bias optional).
template <typename T>
void matmul(int64_t batch, int64_t M, int64_t N, int64_t K, Strided<T> a, Strided<T> b, const Strided<T>* bias,
            double alpha, double beta, bool batched, T* out) {
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += static_cast<double>(batched ? a.at(bi, m, k) : a.at(m, k)) *
                 static_cast<double>(batched ? b.at(bi, k, n) : b.at(k, n));
        double v = alpha * acc;
        if (bias) v += beta * static_cast<double>(bias->at(m, n));
        out[(bi * M + m) * N + n] = static_cast<T>(v);
      }
}

// Convolution with up to three spatial dims (fewer are passed as size-1 dims), N C D H W input,
// O I/groups KD KH KW weight, strided operands and output (element strides, rank 5), optional bias.
template <typename T>
void conv3d(const int64_t* in_sizes, const int64_t* w_sizes, const int64_t* out_sizes, const T* x,
            const int64_t* xs, int64_t x_off, const T* w, const int64_t* ws, int64_t w_off, const T* bias,
            int64_t bias_stride, int64_t bias_off, const int64_t* stride, const int64_t* padding,
            const int64_t* dilation, int64_t groups, T* out, const int64_t* os) {
  int64_t N = out_sizes[0], Cout = out_sizes[1], OD = out_sizes[2], OH = out_sizes[3], OW = out_sizes[4];
  int64_t Cin = in_sizes[1], D = in_sizes[2], H = in_sizes[3], W = in_sizes[4];
  int64_t KD = w_sizes[2], KH = w_sizes[3], KW = w_sizes[4];
  int64_t cin_g = Cin / groups, cout_g = Cout / groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < Cout; ++co) {
      int64_t g = co / cout_g;
      for (int64_t od = 0; od < OD; ++od)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            double acc = bias ? static_cast<double>(bias[bias_off + co * bias_stride]) : 0.0;
            for (int64_t ci = 0; ci < cin_g; ++ci) {
              int64_t c = g * cin_g + ci;
              for (int64_t kd = 0; kd < KD; ++kd) {
                int64_t id = od * stride[0] - padding[0] + kd * dilation[0];
                if (id < 0 || id >= D) continue;
                for (int64_t kh = 0; kh < KH; ++kh) {
                  int64_t ih = oh * stride[1] - padding[1] + kh * dilation[1];
                  if (ih < 0 || ih >= H) continue;
                  for (int64_t kw = 0; kw < KW; ++kw) {
                    int64_t iw = ow * stride[2] - padding[2] + kw * dilation[2];
                    if (iw < 0 || iw >= W) continue;
                    acc += static_cast<double>(x[x_off + n * xs[0] + c * xs[1] + id * xs[2] + ih * xs[3] + iw * xs[4]]) *
                           static_cast<double>(w[w_off + co * ws[0] + ci * ws[1] + kd * ws[2] + kh * ws[3] + kw * ws[4]]);
                  }
                }
              }
            }
            out[n * os[0] + co * os[1] + od * os[2] + oh * os[3] + ow * os[4]] = static_cast<T>(acc);
          }
    }
}

// Transposed convolution with up to three spatial dims, as conv3d: N C D H W input, C O/groups
// KD KH KW weight. Output position o takes input position i = (o + padding - k*dilation) / stride
// of each kernel position k where that division is exact and i is inside the input.
template <typename T>
void conv_transpose3d(const int64_t* in_sizes, const int64_t* w_sizes, const int64_t* out_sizes, const T* x,
                      const int64_t* xs, int64_t x_off, const T* w, const int64_t* ws, int64_t w_off, const T* bias,
                      int64_t bias_stride, int64_t bias_off, const int64_t* stride, const int64_t* padding,
                      const int64_t* dilation, int64_t groups, T* out, const int64_t* os) {
  const int64_t N = out_sizes[0], Cout = out_sizes[1], Cin = in_sizes[1];
  const int64_t cin_g = Cin / groups, cout_g = Cout / groups;
  // The input position along dim d of output position o and kernel position k; -1 when none.
  auto source = [&](int d, int64_t o, int64_t k) -> int64_t {
    const int64_t num = o + padding[d] - k * dilation[d];
    if (num < 0 || num % stride[d] != 0 || num / stride[d] >= in_sizes[2 + d]) return -1;
    return num / stride[d];
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < Cout; ++co) {
      const int64_t g = co / cout_g, co_g = co - g * cout_g;
      for (int64_t od = 0; od < out_sizes[2]; ++od)
        for (int64_t oh = 0; oh < out_sizes[3]; ++oh)
          for (int64_t ow = 0; ow < out_sizes[4]; ++ow) {
            double acc = bias ? static_cast<double>(bias[bias_off + co * bias_stride]) : 0.0;
            for (int64_t kd = 0; kd < w_sizes[2]; ++kd) {
              const int64_t id = source(0, od, kd);
              if (id < 0) continue;
              for (int64_t kh = 0; kh < w_sizes[3]; ++kh) {
                const int64_t ih = source(1, oh, kh);
                if (ih < 0) continue;
                for (int64_t kw = 0; kw < w_sizes[4]; ++kw) {
                  const int64_t iw = source(2, ow, kw);
                  if (iw < 0) continue;
                  for (int64_t ci = 0; ci < cin_g; ++ci) {
                    const int64_t c = g * cin_g + ci;
                    acc += static_cast<double>(x[x_off + n * xs[0] + c * xs[1] + id * xs[2] + ih * xs[3] + iw * xs[4]]) *
                           static_cast<double>(w[w_off + c * ws[0] + co_g * ws[1] + kd * ws[2] + kh * ws[3] + kw * ws[4]]);
                  }
                }
              }
            }
            out[n * os[0] + co * os[1] + od * os[2] + oh * os[3] + ow * os[4]] = static_cast<T>(acc);
          }
    }
}

// The activations folded into a library call (sched/epilogue.cpp matches them): oneDNN applies
// them as post-ops, the depthwise kernels in registers, and after the portable loops this file
// does; the reference evaluator computes the same function (activated). One table for every
// place: X(enumerator, the name printed in the IR). GeluErf is aten.gelu, GeluTanh aten.gelu
// with approximate='tanh', Relu6 hardtanh(x, 0, 6), Silu x * sigmoid(x).
#define FOUNDRY_ACTIVATIONS(X) \
  X(Relu, "relu") X(Tanh, "tanh") X(Sigmoid, "sigmoid") X(GeluErf, "gelu") X(GeluTanh, "gelu_tanh") \
  X(Relu6, "relu6") X(Hardswish, "hardswish") X(Silu, "silu")

#define FOUNDRY_ENUMERATOR(name, text) name,
enum class Activation { None, FOUNDRY_ACTIVATIONS(FOUNDRY_ENUMERATOR) };
#undef FOUNDRY_ENUMERATOR

// PyTorch's definitions in double; NaN stays NaN (clamping keeps it, as torch.clamp does).
inline double activated(Activation act, double x) {
  auto relu6 = [](double v) { return std::isnan(v) ? v : v < 0 ? 0.0 : v > 6 ? 6.0 : v; };
  switch (act) {
    case Activation::None: return x;
    case Activation::Relu: return x > 0 || std::isnan(x) ? x : 0.0;
    case Activation::Tanh: return std::tanh(x);
    case Activation::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::GeluErf: return 0.5 * x * (1.0 + std::erf(x * 0.70710678118654752440));
    case Activation::GeluTanh:
      return 0.5 * x * (1.0 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    case Activation::Relu6: return relu6(x);
    case Activation::Hardswish: return x * relu6(x + 3) / 6;
    case Activation::Silu: return x / (1.0 + std::exp(-x));
  }
  return x;
}

// Whether oneDNN computes a convolution as a matrix product on its operands as stored instead of
// in its blocked layout (foundry_dnnl.cpp, ConvPrimitive::product_on_operands, says why and what was
// measured): 1x1 without padding, over at most 256 row-major input channels and at least 100
// output pixels. That implementation applies a post-op in a slow pass of its own, so such a call
// takes no activation: the compiler leaves it to a kernel (sched/epilogue.cpp).
inline bool conv_is_stored_product(const std::vector<int64_t>& input_sizes, const std::vector<int64_t>& input_strides,
                                   const std::vector<int64_t>& weight_sizes, const std::vector<int64_t>& padding,
                                   const std::vector<int64_t>& output_sizes, int64_t groups, bool transposed) {
  constexpr int64_t kMaxInputChannels = 256, kMinPixels = 100;
  if (transposed || groups != 1 || input_sizes.size() < 3 || input_sizes[1] > kMaxInputChannels) return false;
  int64_t run = 1;
  for (size_t d = input_sizes.size(); d-- > 0;) {
    if (input_strides[d] != run) return false;
    if (d > 0) run *= input_sizes[d];
  }
  double pixels = 1;
  for (size_t d = 2; d < output_sizes.size(); ++d) {
    if (weight_sizes[d] != 1 || padding[d - 2] != 0) return false;
    pixels *= static_cast<double>(output_sizes[d]);
  }
  return pixels >= kMinPixels;
}

template <typename T>
void apply_activation(Activation act, T* out, int64_t n) {
  if (act == Activation::None) return;
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(activated(act, static_cast<double>(out[i])));
}

}  // namespace foundry_rt

#endif  // FOUNDRY_EXTERNS_H
