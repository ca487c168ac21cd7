// Depthwise 2-d convolutions (each output channel reads its own input channel) in float32, run on
// NCHW activations as they are stored. A depthwise layer does a few multiply-adds per element
// (9 for 3x3, 25 for 5x5) and is bound by its memory traffic; oneDNN's fast depthwise kernels
// need channels-last activations, and the two reorders around each call cost more than the
// convolution (one thread, AVX-512: 144 channels 3x3 at 56x56, 0.24 ms for the convolution and
// 0.5-0.7 ms for its two reorders). Here each output row is a few vectors along the width, each
// the sum of the kernel's taps over shifted (or strided) input rows, the padding read as zeros.
// Included by a model's externs.cpp (lib/codegen/externs.cpp chooses the calls that run here).
#ifndef FOUNDRY_DEPTHWISE_H
#define FOUNDRY_DEPTHWISE_H
#include <cstdint>
#include <new>
#include <vector>

#include "foundry_externs.h"  // Activation
#include "foundry_vec.h"

namespace foundry_rt {

// The geometry of one call, in elements. The input's width stride is 1 (codegen checks it).
struct DepthwiseShape {
  int64_t batch, channels, in_h, in_w, out_h, out_w, kernel_h, kernel_w;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int64_t x_strides[3];  // batch, channel, row of the input
  int64_t w_strides[3];  // output channel, kernel row, kernel column of the [C, 1, KH, KW] weight
  int64_t bias_stride;
};

// The largest kernel window that runs here (8x8): one channel's taps sit in a local array.
constexpr int64_t kMaxDepthwiseTaps = 64;

namespace depthwise {

using foundry_vec::kLanes;
using foundry_vec::VecF;

// clamp(v, 0, 6), NaN kept (torch.clamp's rule).
inline VecF relu6(VecF v) {
  return foundry_vec::minimum(foundry_vec::maximum(v, foundry_vec::splat(0.0f)), foundry_vec::splat(6.0f));
}

inline VecF activate(VecF v, Activation act) {
  switch (act) {
    case Activation::None: return v;
    case Activation::Relu: return foundry_vec::select(v < foundry_vec::splat(0.0f), foundry_vec::splat(0.0f), v);
    case Activation::Tanh: return foundry_vec::tanh(v);
    case Activation::Sigmoid: return foundry_vec::sigmoid(v);
    case Activation::GeluErf:
      return foundry_vec::splat(0.5f) * v * (foundry_vec::splat(1.0f) + foundry_vec::erf(v * foundry_vec::splat(0.707106769f)));
    case Activation::GeluTanh: {
      const VecF inner = foundry_vec::splat(0.797884583f) * (v + foundry_vec::splat(0.044715f) * v * v * v);
      return foundry_vec::splat(0.5f) * v * (foundry_vec::splat(1.0f) + foundry_vec::tanh(inner));
    }
    case Activation::Relu6: return relu6(v);
    case Activation::Hardswish: return v * relu6(v + foundry_vec::splat(3.0f)) / foundry_vec::splat(6.0f);
    case Activation::Silu: return v * foundry_vec::sigmoid(v);
  }
  return v;
}

// What one output vector reads at one kernel column, the same in every row and channel: the
// input column of its lane 0 and the lanes that fall inside the row (foundry_vec::window_lanes).
struct ColumnWindow {
  int64_t first;
  uint32_t in;
};

// The lanes of output vector `v` of a row of `out_w`: kLanes, fewer for the last one.
inline int vector_lanes(int64_t out_w, int64_t v) {
  const int64_t left = out_w - v * kLanes;
  return static_cast<int>(left < kLanes ? left : kLanes);
}

// A block of kRows output rows from oh0 and kVectors vectors of them from vector v0, computed
// together: kRows * kVectors independent sums, so that consecutive multiply-adds do not wait on
// each other's results (one sum at a time ran at a third of the speed, and rows of 7 or 28
// outputs have only one or two vectors). A kernel row outside the input, or an output row past
// the last, reads `zeros` (a row of the input's width). kStride is the width stride when it is 1
// or 2 (masked loads, two for stride 2), 0 for any other (gathers).
template <int kStride, int kRows, int kVectors>
void output_block(const DepthwiseShape& s, const float* plane, const float* taps, const ColumnWindow* columns,
                  const float* zeros, float bias, Activation act, int64_t oh0, int64_t v0, float* out) {
  const int64_t sw = kStride ? kStride : s.stride_w, kernel_w = s.kernel_w;
  const ColumnWindow* c = columns + v0 * kernel_w;  // vector j's window at column kw: c[j * kernel_w + kw]
  VecF acc[kRows][kVectors];
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < kVectors; ++j) acc[i][j] = foundry_vec::splat(bias);
  for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
    const float* rows[kRows];
    for (int i = 0; i < kRows; ++i) {
      const int64_t ih = (oh0 + i) * s.stride_h - s.pad_h + kh * s.dilation_h;
      rows[i] = ih >= 0 && ih < s.in_h && oh0 + i < s.out_h ? plane + ih * s.x_strides[2] : zeros;
    }
    for (int64_t kw = 0; kw < kernel_w; ++kw) {
      const VecF w = foundry_vec::splat(taps[kh * kernel_w + kw]);
#pragma GCC unroll 4
      for (int j = 0; j < kVectors; ++j) {
        const ColumnWindow cj = c[j * kernel_w + kw];
#pragma GCC unroll 8
        for (int i = 0; i < kRows; ++i) acc[i][j] += foundry_vec::load_window(rows[i], cj.first, sw, cj.in) * w;
      }
    }
  }
  // Unrolled like the sums' loops, so that the sums stay in registers (a loop that ends early
  // here kept them in memory, stored after every multiply-add).
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) {
    if (oh0 + i >= s.out_h) break;
#pragma GCC unroll 4
    for (int j = 0; j < kVectors; ++j) {
      const VecF v = activate(acc[i][j], act);
      float* at = out + (oh0 + i) * s.out_w + (v0 + j) * kLanes;
      const int lanes = vector_lanes(s.out_w, v0 + j);
      if (lanes == kLanes) foundry_vec::store(at, v);
      else foundry_vec::store_first(at, v, lanes);
    }
  }
}

// One channel's output plane in blocks of about eight vectors: eight rows of one vector, four
// of two, or two rows of up to four.
template <int kStride>
void output_plane(const DepthwiseShape& s, const float* plane, const float* taps, const ColumnWindow* columns,
                  const float* zeros, float bias, Activation act, float* out) {
  const int64_t vectors = (s.out_w + kLanes - 1) / kLanes;
  if (vectors == 1) {
    for (int64_t oh0 = 0; oh0 < s.out_h; oh0 += 8) output_block<kStride, 8, 1>(s, plane, taps, columns, zeros, bias, act, oh0, 0, out);
    return;
  }
  if (vectors == 2) {
    for (int64_t oh0 = 0; oh0 < s.out_h; oh0 += 4) output_block<kStride, 4, 2>(s, plane, taps, columns, zeros, bias, act, oh0, 0, out);
    return;
  }
  for (int64_t oh0 = 0; oh0 < s.out_h; oh0 += 2)
    for (int64_t v0 = 0; v0 < vectors; v0 += 4) {
      const int64_t left = vectors - v0;
      if (left >= 4) output_block<kStride, 2, 4>(s, plane, taps, columns, zeros, bias, act, oh0, v0, out);
      else if (left == 3) output_block<kStride, 2, 3>(s, plane, taps, columns, zeros, bias, act, oh0, v0, out);
      else if (left == 2) output_block<kStride, 2, 2>(s, plane, taps, columns, zeros, bias, act, oh0, v0, out);
      else output_block<kStride, 2, 1>(s, plane, taps, columns, zeros, bias, act, oh0, v0, out);
    }
}

}  // namespace depthwise

// What the rows of one call read, the same in every run, built when the model is created: the
// column windows of every output vector of a row ([vector][kernel column]), and a row of zeros
// that kernel rows outside the input read.
struct DepthwiseRows {
  std::vector<depthwise::ColumnWindow> columns;
  std::vector<float> zeros;

  // For rows of `in_w` inputs and `out_w` outputs; false when out of memory.
  bool build(int64_t in_w, int64_t out_w, int64_t kernel_w, int64_t stride_w, int64_t pad_w, int64_t dilation_w) {
    const int64_t vectors = (out_w + foundry_vec::kLanes - 1) / foundry_vec::kLanes;
    try {
      columns.resize(static_cast<size_t>(vectors * kernel_w));
      zeros.assign(static_cast<size_t>(in_w), 0.0f);
    } catch (const std::bad_alloc&) {
      return false;
    }
    for (int64_t v = 0; v < vectors; ++v)
      for (int64_t kw = 0; kw < kernel_w; ++kw) {
        const int64_t first = v * foundry_vec::kLanes * stride_w - pad_w + kw * dilation_w;
        columns[v * kernel_w + kw] = {first, foundry_vec::window_lanes(in_w, first, stride_w, depthwise::vector_lanes(out_w, v))};
      }
    return true;
  }
};

// y[n, c] = act(bias[c] + x[n, c] convolved with w[c]), y contiguous [N, C, OH, OW]; the planes
// (batch entries and channels) split among `team` threads. `bias` may be null; `rows` were built
// for the widths, kernel width, stride, padding and dilation of `s`.
inline void depthwise_conv2d(const DepthwiseShape& s, const DepthwiseRows& rows, const float* x, const float* w,
                             const float* bias, Activation act, float* y, int team) {
  const int64_t planes = s.batch * s.channels, out_plane = s.out_h * s.out_w;
  const depthwise::ColumnWindow* columns = rows.columns.data();
  const float* zeros = rows.zeros.data();
  auto plane_of = s.stride_w == 1   ? depthwise::output_plane<1>
                  : s.stride_w == 2 ? depthwise::output_plane<2>
                                    : depthwise::output_plane<0>;
#pragma omp parallel for num_threads(team) if (team > 1) schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t n = p / s.channels, c = p % s.channels;
    float taps[kMaxDepthwiseTaps];
    for (int64_t kh = 0; kh < s.kernel_h; ++kh)
      for (int64_t kw = 0; kw < s.kernel_w; ++kw)
        taps[kh * s.kernel_w + kw] = w[c * s.w_strides[0] + kh * s.w_strides[1] + kw * s.w_strides[2]];
    const float b = bias ? bias[c * s.bias_stride] : 0.0f;
    plane_of(s, x + n * s.x_strides[0] + c * s.x_strides[1], taps, columns, zeros, b, act, y + p * out_plane);
  }
}

// The one-thread time of a call, for its team (team_for): its multiply-adds or its input and
// output bytes from memory, whichever is longer.
inline double depthwise_serial_ns(const DepthwiseShape& s) {
  const double outputs = static_cast<double>(s.batch * s.channels * s.out_h * s.out_w);
  const double inputs = static_cast<double>(s.batch * s.channels * s.in_h * s.in_w);
  const double macs = outputs * static_cast<double>(s.kernel_h * s.kernel_w);
  const double bytes = 4 * (inputs + outputs);
  return macs * kNsPerMac > bytes * kNsPerByte ? macs * kNsPerMac : bytes * kNsPerByte;
}

}  // namespace foundry_rt

#endif  // FOUNDRY_DEPTHWISE_H
