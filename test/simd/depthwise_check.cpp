// Checks foundry_depthwise.h against a direct computation: every output element of a depthwise
// 2-d convolution summed in double over its window (the padding skipped), over geometries that
// put window edges, partial vectors, row blocks and plane ends in every position: widths 1 to 40
// and 57, kernels 1x1 to 7x7 (and 3x5), strides 1 to 3, padding 0 to 3, dilation 1 and 2, two
// batch entries, an input with gaps between rows and channels, with and without bias, each
// activation, on one thread and on two. Within 1e-5 + 1e-5 * |reference| (float sums of at most
// 49 products of values in [-1, 1]). Compiled and run by test_simd.cpp at several -march levels;
// exits 1 and prints the first mismatches on failure.
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <random>
#include <vector>

#include "foundry_depthwise.h"

namespace {

using foundry_rt::Activation;
using foundry_rt::DepthwiseShape;

int failures = 0;
long checked = 0, cases = 0;

double activated(double v, Activation act) {
  switch (act) {
    case Activation::None: return v;
    case Activation::Relu: return v > 0 ? v : 0.0;
    case Activation::Tanh: return std::tanh(v);
    case Activation::Sigmoid: return 1.0 / (1.0 + std::exp(-v));
    case Activation::GeluErf: return v * 0.5 * std::erfc(-v / std::sqrt(2.0));  // PyTorch's definition
    case Activation::GeluTanh: return v * 0.5 * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * std::pow(v, 3))));
    case Activation::Relu6: return std::min(std::max(v, 0.0), 6.0);
    case Activation::Hardswish: return v * std::min(std::max(v + 3, 0.0), 6.0) / 6;
    case Activation::Silu: return v / (1 + std::exp(-v));
  }
  return v;
}

struct Geometry {
  int64_t batch, channels, h, w, kh, kw, stride, pad, dilation;
};

void check(const Geometry& g, bool with_bias, Activation act, int team, std::mt19937& rng) {
  DepthwiseShape s{};
  s.batch = g.batch;
  s.channels = g.channels;
  s.in_h = g.h;
  s.in_w = g.w;
  s.kernel_h = g.kh;
  s.kernel_w = g.kw;
  s.stride_h = s.stride_w = g.stride;
  s.pad_h = s.pad_w = g.pad;
  s.dilation_h = s.dilation_w = g.dilation;
  s.out_h = (g.h + 2 * g.pad - g.dilation * (g.kh - 1) - 1) / g.stride + 1;
  s.out_w = (g.w + 2 * g.pad - g.dilation * (g.kw - 1) - 1) / g.stride + 1;
  if (s.out_h <= 0 || s.out_w <= 0) return;
  // Rows 3 elements apart beyond their width, channels 5 beyond their rows: strided input.
  s.x_strides[2] = g.w + 3;
  s.x_strides[1] = g.h * s.x_strides[2] + 5;
  s.x_strides[0] = g.channels * s.x_strides[1];
  s.w_strides[0] = g.kh * g.kw;
  s.w_strides[1] = g.kw;
  s.w_strides[2] = 1;
  s.bias_stride = 2;
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(g.batch * s.x_strides[0])), w(static_cast<size_t>(g.channels * g.kh * g.kw)),
      bias(static_cast<size_t>(2 * g.channels)), y(static_cast<size_t>(g.batch * g.channels * s.out_h * s.out_w), NAN);
  for (float& v : x) v = value(rng);
  for (float& v : w) v = value(rng);
  for (float& v : bias) v = value(rng);
  foundry_rt::DepthwiseRows rows;
  if (!rows.build(s.in_w, s.out_w, s.kernel_w, s.stride_w, s.pad_w, s.dilation_w)) std::abort();
  foundry_rt::depthwise_conv2d(s, rows, x.data(), w.data(), with_bias ? bias.data() : nullptr, act, y.data(), team);
  ++cases;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t c = 0; c < g.channels; ++c)
      for (int64_t oh = 0; oh < s.out_h; ++oh)
        for (int64_t ow = 0; ow < s.out_w; ++ow) {
          double sum = with_bias ? bias[c * 2] : 0.0;
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t ih = oh * g.stride - g.pad + i * g.dilation, iw = ow * g.stride - g.pad + j * g.dilation;
              if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
              sum += static_cast<double>(x[n * s.x_strides[0] + c * s.x_strides[1] + ih * s.x_strides[2] + iw]) *
                     w[(c * g.kh + i) * g.kw + j];
            }
          const double want = activated(sum, act);
          const float got = y[((n * g.channels + c) * s.out_h + oh) * s.out_w + ow];
          ++checked;
          if (!(std::fabs(got - want) <= 1e-5 + 1e-5 * std::fabs(want)) && ++failures <= 20)
            std::printf("batch %lld channels %lld %lldx%lld kernel %lldx%lld stride %lld pad %lld dilation %lld: "
                        "[%lld, %lld, %lld, %lld] got %.9g, want %.9g\n",
                        (long long)g.batch, (long long)g.channels, (long long)g.h, (long long)g.w, (long long)g.kh,
                        (long long)g.kw, (long long)g.stride, (long long)g.pad, (long long)g.dilation, (long long)n,
                        (long long)c, (long long)oh, (long long)ow, got, want);
        }
}

}  // namespace

int main() {
  std::mt19937 rng(19);
  const Activation acts[] = {Activation::None,    Activation::Relu,     Activation::Tanh,
                             Activation::Sigmoid, Activation::GeluErf,  Activation::GeluTanh,
                             Activation::Relu6,   Activation::Hardswish, Activation::Silu};
  int k = 0;
  for (int64_t width : {1, 2, 5, 7, 8, 9, 12, 14, 15, 16, 17, 23, 28, 31, 32, 33, 40, 57})
    for (int64_t kernel : {1, 3, 5, 7})
      for (int64_t stride : {1, 2, 3})
        for (int64_t pad : {0, 1, 3})
          for (int64_t dilation : {1, 2}) {
            if (pad > kernel) continue;
            const Geometry g{2, 3, 1 + (width * 7 + kernel) % 19, width, kernel, kernel, stride, pad, dilation};
            ++k;
            check(g, k % 3 != 0, acts[k % 9], 1 + k % 2, rng);
          }
  check({1, 4, 9, 20, 3, 5, 1, 2, 1}, true, Activation::None, 1, rng);  // a 3x5 window
  check({1, 4, 9, 20, 3, 5, 2, 2, 1}, true, Activation::Relu, 2, rng);
  check({1, 16, 30, 30, 8, 8, 1, 3, 1}, true, Activation::None, 2, rng);  // the largest window, 64 taps
  std::printf("depthwise: %ld cases, %ld outputs checked at %d lanes, %d mismatches\n", cases, checked,
              foundry_vec::kLanes, failures);
  return failures == 0 ? 0 : 1;
}
